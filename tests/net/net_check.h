/* Shared helpers of the network and training tests (t4xx, t5xx): synthetic
 * data sets, LeNet-5 with an optimizer and a trainer in one call, and
 * comparisons of gathered global parameters.  Every function is collective on
 * MPI_COMM_WORLD; figures are printed by rank 0. */
#ifndef ADJOIN_TEST_NET_CHECK_H
#define ADJOIN_TEST_NET_CHECK_H

#include "harness.h"

/* A data set of `count` random 28x28 images (pixels uniform on [0, 1)) and
 * labels in [0, 10), the same on every rank for a given seed. */
adj_dataset *nc_synthetic(int64_t count, uint64_t seed);

/* The shipped network file of `model` ("lenet", "encdec", "mlp"), and the
 * network built from it at `layout` (a placement name; the encoder-
 * decoder's grids P0xP1 are spatial) on MPI_COMM_WORLD; the ranks a layout
 * of the model needs, 0 for an unknown one. */
const char *nc_network_file(const char *model);
int nc_build_network(const char *model, const char *layout, const adj_network_build_options *options,
                     adj_layer **net);
/* A description's text at a placement name, on MPI_COMM_WORLD. */
int nc_build_text(const char *text, const char *placement, const adj_network_build_options *options, adj_layer **net);
/* The same on another communicator (a replica's). */
int nc_build_network_on(MPI_Comm comm, const char *model, const char *layout, const adj_network_build_options *options,
                        adj_layer **net);
int nc_layout_ranks(const char *model, const char *layout);

/* LeNet-5 (with loss) in `layout`, initialised from `seed`, with Adam
 * (learning rate 1e-3) and a trainer shuffling with `seed` over `data`.
 * nc_run_create_model does the same for `model` "lenet" or "encdec"
 * (networks/encdec.net). */
typedef struct nc_run {
  adj_layer *net;
  adj_optimizer *opt;
  adj_trainer *trainer;
} nc_run;
int nc_run_create(const char *layout, adj_dtype dtype, int64_t batch, adj_dataset *data, uint64_t seed,
                  nc_run *run);
int nc_run_create_model(const char *model, const char *layout, adj_dtype dtype, int64_t batch,
                        adj_dataset *data, uint64_t seed, nc_run *run);
void nc_run_destroy(nc_run *run);

/* The longest sum LeNet-5 and the encoder-decoder make on a batch: the first
 * convolution's weight gradient, over the 28 x 28 output positions of every
 * sample.  Two layouts of a network sum it in other orders. */
double nc_reduction_length(int64_t batch);

/* The Jacobian dot-product test of a network (adj_dottest_layer with `seed`):
 * reports both inner products and the relative error after `label`, and
 * checks the error against the dtype's tolerance and that neither side is 0. */
void nc_check_jacobian(adj_test *t, adj_layer *net, uint64_t seed, adj_dtype dtype, const char *label);

/* Largest relative difference (adj_test_max_rel_diff) over every gathered
 * global parameter of a and b, on rank 0; *bitwise tells whether every
 * element is identical.  Other ranks compare empty tensors: 0 and true.  The
 * networks must list the same parameters.  Batch norm running statistics
 * count too: each worker compares its blocks where both networks give it
 * blocks of one size (rank 0 holds every channel in the layouts here), and
 * every rank gets the worst over all workers. */
double nc_parameter_diff(adj_layer *a, adj_layer *b, bool *bitwise);
/* The same over the gathered parameter gradients (rank 0; 0 elsewhere). */
double nc_gradient_diff(adj_layer *a, adj_layer *b);

/* A whole file read into memory (NULL if it cannot be read; *size its
 * length), and written back.  Not collective: the tests call them on rank 0. */
unsigned char *nc_read_file(const char *path, long *size);
void nc_write_file(const char *path, const void *data, long size);

/* The LeNet-5 layouts that fit the world size, by the ranks they need (the
 * widest last), NULL-terminated: `layouts` holds NC_MAX_LAYOUTS entries. */
enum { NC_MAX_LAYOUTS = 8 };
int nc_layouts_fitting(int size, const char **layouts);

/* A temporary directory /tmp/adjoin-TAG-XXXXXX made on rank 0, its name
 * shared with every rank; nc_remove_dir removes it and what it holds. */
void nc_make_dir(adj_test *t, const char *tag, char *dir, size_t size);
void nc_remove_dir(adj_test *t, const char *dir);

#endif
