/* Shared checks of the distributed-layer tests (t32x): layouts on chosen
 * ranks, the Jacobian dot-product test, the Taylor test, distributed against
 * sequential, and bad-configuration errors.  Every function is collective on
 * MPI_COMM_WORLD; figures are printed by rank 0. */
#ifndef ADJOIN_TEST_DIST_CHECK_H
#define ADJOIN_TEST_DIST_CHECK_H

#include <stdio.h>

#include "harness.h"

/* A decomposition of `shape` (rank dims) over a partition of shape `parts` on
 * MPI_COMM_WORLD ranks `ranks` (NULL: 0, 1, ...), balanced or cut at `cuts`
 * (NULL, or per dimension NULL or parts[i] + 1 offsets).  NULL on failure
 * (recorded as a failed check). */
adj_decomposition *dl_layout(adj_test *t, int rank, const int64_t *shape, const int *parts, const int *ranks,
                             const int64_t *const *cuts);
/* cuts[0..parts] at n p^2 / P^2: small, often empty, first blocks. */
/* parts + 1 cut points of n, quadratically spaced, into cuts[0..parts]. */
void dl_quadratic_cuts(int64_t n, int parts, int64_t *cuts);

/* Layout kinds of the size-driven tests: every rank, rank 0 left out, or
 * every rank with quadratic cuts (empty first blocks). */
typedef enum dl_layout_kind { DL_LAYOUT_ALL = 0, DL_LAYOUT_INACTIVE = 1, DL_LAYOUT_CUTS = 2 } dl_layout_kind;
extern const char *const dl_layout_names[3];
/* A layout of `shape` (rank <= 5 dims) for this run's size: the partition
 * shape is table[workers] (5 entries; those beyond the tensor's rank fold into
 * its last dimension) and the ranks are rotated so rank 0 comes last or, for
 * DL_LAYOUT_INACTIVE, is left out.  NULL when no worker is left. */
adj_decomposition *dl_size_layout(adj_test *t, dl_layout_kind kind, int rank, const int64_t *shape,
                                  const int (*table)[5]);

/* The sequential twin's layout: the whole tensor on a one-worker partition of
 * MPI_COMM_SELF, so every rank holds its own sequential twin (collective on
 * nothing). */
adj_decomposition *dl_self_layout(adj_test *t, int rank, const int64_t *shape);

/* The Jacobian dot-product test (input and parameters at once) against the
 * layer tolerance of docs/design.md (adj_dottest_tolerance), figure printed. */
void dl_dottest(adj_test *t, const char *label, adj_layer *layer);

/* How the Taylor remainder of a layer must behave as h halves. */
typedef enum dl_taylor_kind {
  DL_TAYLOR_SMOOTH = 0,    /* falls at second order (tanh, sigmoid, the bilinear affine) */
  DL_TAYLOR_PIECEWISE = 1, /* linear on the piece around a random point (ReLU, max pool):
                              the remainder is round-off as long as no kink is crossed */
  DL_TAYLOR_LINEAR = 2,    /* linear everywhere (avg pool, flatten, repartition): round-off */
} dl_taylor_kind;
void dl_taylor(adj_test *t, const char *label, adj_layer *layer, dl_taylor_kind kind);

/* The tolerance of distributed against sequential, relative to the largest
 * global entry: both twins sum the same terms, and differ in that the
 * distributed layer adds up its P workers' partial sums (P the larger of its
 * input and output partitions), so a P-term reduction:
 * adj_test_sum_tolerance(dtype, P). */
double dl_tolerance(const adj_layer *dist);

/* Distributed equals sequential: the same global input, parameters, parameter
 * tangents, input tangent and output gradient (random from `seed`) go into the
 * distributed layer and its sequential twin `seq` (built on a dl_self_layout);
 * outputs, jvps, input gradients and parameter gradients must agree within
 * dl_tolerance(dist). */
void dl_compare(adj_test *t, const char *label, adj_layer *dist, adj_layer *seq, uint64_t seed);
/* The same with another tolerance (float32 layers, or layers whose reductions
 * sum in a different order than the sequential twin's). */
void dl_compare_within(adj_test *t, const char *label, adj_layer *dist, adj_layer *seq, uint64_t seed,
                       double tolerance);

/* Builds a test's layer for case `spec` in `dtype` on `input`. */
typedef int (*dl_create_fn)(const void *spec, adj_dtype dtype, const adj_decomposition *input, adj_layer **layer);
/* The distributed checks of one case on every layout kind of `shape` over
 * `table` (dl_size_layout): the layer and its sequential twin, in float64 and,
 * on the uneven cuts, float32: the dot-product test, the Taylor test of
 * `taylor` (every rank active, float64) and distributed against sequential
 * (dl_compare), labelled `what`, the dtype, grid and layout. */
void dl_check_layouts(adj_test *t, const char *what, int rank, const int64_t *shape, const int (*table)[5],
                      dl_create_fn create, const void *spec, dl_taylor_kind taylor, uint64_t seed);
/* Global data of a layer test, drawn identically on every rank from a seed
 * in the layer's dtype: input, input tangent, output gradient, and every
 * parameter's value and tangent in its global layout. */
enum { DL_MAX_PARAMS = 16 }; /* a network of a few layers */
typedef struct dl_data {
  int n_params;
  adj_tensor x, dx, dy, params[DL_MAX_PARAMS], tangents[DL_MAX_PARAMS];
} dl_data;
void dl_data_make(adj_layer *layer, uint64_t seed, dl_data *g);
void dl_data_free(dl_data *g);

/* A layer's results on this worker: output, jvp, input gradient (the
 * parameter gradients stay in the layer). */
typedef struct dl_results {
  adj_tensor y, jy, dx;
} dl_results;
/* Loads this worker's blocks of the data into the layer and its parameters,
 * runs forward, jvp and backward (gradients zeroed first). */
void dl_run(adj_test *t, adj_layer *layer, const dl_data *g, dl_results *r);
void dl_results_free(dl_results *r);

/* local = this worker's block (under layout d) of the global tensor. */
void dl_take_block(const adj_decomposition *d, const adj_tensor *global, adj_tensor *local);
/* max |local - its block of global| / max(1, max |global|). */
double dl_block_diff(const adj_decomposition *d, const adj_tensor *local, const adj_tensor *global);

/* Every rank must fail with the same message containing `phrase`
 * (adj_test_expect_error), and leave *layer NULL. */
void dl_expect_error(adj_test *t, const char *label, int status, adj_layer **layer, const char *phrase);

/* A reference data file written by a tools/ twin script, open for reading;
 * NULL (and a failed check naming the path) when it cannot be opened. */
FILE *dl_open_reference(adj_test *t, const char *path);

/* One line of a twin script's file: case index, outputs y of a fixed input,
 * and the gradient of sum(y_j w_j) (tools/pytorch/upsample_twin.py says how).  Skips
 * comment lines; false at the end of the file or on a malformed line (then a
 * failed check). */
enum { DL_REFERENCE_MAX = 4096 };
typedef struct dl_reference {
  int index;
  int64_t ny, ng;
  double y[DL_REFERENCE_MAX], grad[DL_REFERENCE_MAX];
} dl_reference;
bool dl_read_reference(adj_test *t, FILE *f, int cases, dl_reference *r);
/* Runs a one-worker `layer` on the twin scripts' fixed input x_i = ((7 i + 3)
 * mod 13) / 13 and output gradient w_j = ((5 j + 1) mod 11) / 11 - 0.5 and
 * checks its output (absolute) and input gradient (relative to max(1, |g|))
 * against r within `tolerance`; *worst keeps the largest error. */
void dl_check_reference(adj_test *t, const char *label, adj_layer *layer, const dl_reference *r, double tolerance,
                        double *worst);

/* A table of cases a twin script wrote PyTorch's numbers for (in the table's
 * order): case(i) gives case i's spec, its rank and global shape, and
 * describes it in what[96]; create builds its layer. */
typedef struct dl_torch_table {
  const char *noun; /* a case, plural: "paddings" */
  int count;
  const void *(*case_at)(int index, int *rank, const int64_t **shape, char *what);
  dl_create_fn create;
  double reduction_length; /* the longest sum an output or gradient entry of a case makes */
} dl_torch_table;
/* Every case of the file at path, in both dtypes, as a one-worker layer on a
 * dl_self_layout against PyTorch's numbers (dl_check_reference, within
 * adj_test_random_sum_tolerance of the table's reduction length); reports the
 * largest errors and checks the file held every case of the table. */
void dl_check_torch(adj_test *t, const char *path, const dl_torch_table *table);

#endif
