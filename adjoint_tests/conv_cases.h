/* Distributed convolution cases, shared by the battery (cases_conv.c) and the
 * layer tests t310-t312: a compact description of one layer configuration,
 * the named table, a generator of random valid configurations for sweeps, and
 * the translation into an adj_conv_layer_config on a communicator. */
#ifndef ADJOIN_ADJOINT_TESTS_CONV_CASES_H
#define ADJOIN_ADJOINT_TESTS_CONV_CASES_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "adjoin/conv_layer.h"
#include "adjoin/rng.h"

enum { ADJ_CONV_CASE_MAX_WORKERS = 8 };

/* Where the partitions' workers sit.  FIRST: every partition on ranks 0, 1,
 * ... (feature-space layers then move nothing but halos).  SCATTERED: P_x on
 * ranks rotated by one, P_w reversed, P_y rotated by two, so every broadcast
 * and sum-reduce crosses workers and, on a larger communicator, some ranks
 * are inactive. */
typedef enum adj_conv_rank_style { ADJ_CONV_RANKS_FIRST = 0, ADJ_CONV_RANKS_SCATTERED = 1 } adj_conv_rank_style;

typedef struct adj_conv_case {
  int64_t n, c_in, c_out;
  int64_t in[ADJ_MAX_SPATIAL_DIMS];  /* spatial input extents */
  adj_window_geometry window;         /* spatial_dims, kernel, stride, dilation, padding */
  bool no_bias;
  int p_ci, p_co;                     /* 0 means 1 */
  int parts[ADJ_MAX_SPATIAL_DIMS];    /* spatial partition extents, 0 means 1 */
  adj_conv_rank_style ranks;
  int p_n;                            /* batch workers; 0 means 1 */
} adj_conv_case;

/* The named table (feature-space, channel and general forms, 1-D to 3-D). */
extern const adj_conv_case adj_conv_cases[];
extern const int adj_conv_case_count;

/* Workers of the work partition P_w, the largest of the layer's partitions. */
int adj_conv_case_workers(const adj_conv_case *c);

/* "2d x[2,3,9,8] k(3,2) s(1,2) d(2,1) p(0,1|2,0) co4 | Pn1 Pci2 Pco2 [2,1] scattered" */
void adj_conv_case_format(char *buf, size_t size, const adj_conv_case *c);

/* Rank lists a configuration points into; they must outlive the creation call. */
typedef struct adj_conv_case_ranks {
  int input[ADJ_CONV_CASE_MAX_WORKERS], work[ADJ_CONV_CASE_MAX_WORKERS], output[ADJ_CONV_CASE_MAX_WORKERS];
} adj_conv_case_ranks;

/* The layer configuration of case c on comm (whose size the SCATTERED lists
 * permute). */
void adj_conv_case_config(const adj_conv_case *c, MPI_Comm comm, adj_dtype dtype, adj_conv_case_ranks *ranks,
                          adj_conv_layer_config *config);

/* The paper's three forms of the layer, and domain x batch (issue 13's
 * convolution on a P_r x P_c grid: space over P_r, the batch over P_c). */
typedef enum adj_conv_form {
  ADJ_CONV_FEATURE = 0, /* P_ci = P_co = 1, spatial partition */
  ADJ_CONV_CHANNEL = 1, /* P_ci x P_co, no spatial partition */
  ADJ_CONV_GENERAL = 2, /* both */
  ADJ_CONV_BATCH = 3,   /* P_n x spatial, channels whole */
  ADJ_CONV_FORMS = 4
} adj_conv_form;

/* A random valid global problem (the partition fields are left at one
 * worker): 1-3 spatial dimensions, kernel 1-5, stride 1-2, dilation 1-2,
 * padding 0-2 per side (asymmetric), extents from the smallest the kernel
 * allows to a few more, so blocks are uneven and some are empty. */
void adj_conv_case_random_problem(adj_rng *rng, adj_conv_case *c);
/* A random partition of c's problem of the given form, at most max_workers
 * workers (forms needing more than one worker may come out smaller, down to
 * one worker when max_workers is 1), and a random rank style. */
void adj_conv_case_random_partition(adj_rng *rng, int max_workers, adj_conv_form form, adj_conv_case *c);
/* Both, with a random form. */
void adj_conv_case_random(adj_rng *rng, int max_workers, adj_conv_case *c);

#endif
