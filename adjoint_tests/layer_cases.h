/* Distributed affine cases, shared by the battery (cases_layers.c) and the
 * layer test t322: one table of configurations, from 1 x 1 to 4 x 2
 * (P_fo x P_fi), with and without a partitioned batch and a bias, balanced and
 * uneven (empty blocks), on the first ranks or on shuffled rank lists that
 * leave some ranks inactive. */
#ifndef ADJOIN_ADJOINT_TESTS_LAYER_CASES_H
#define ADJOIN_ADJOINT_TESTS_LAYER_CASES_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "adjoin/pointwise_layer.h"

/* Ranks are digits in grid order; "" means 0, 1, 2, ... */
typedef struct adj_affine_case {
  int64_t n, f_in, f_out;
  int p_b, p_fo, p_fi;
  bool no_bias;
  bool uneven; /* the input cut at n p^2 / P^2 in both dimensions */
  const char *input, *weight, *work, *output;
} adj_affine_case;

extern const adj_affine_case adj_affine_cases[];
extern const int adj_affine_case_count;

/* One more than the largest rank any of the case's partitions uses. */
int adj_affine_case_ranks(const adj_affine_case *c);
/* "[P_b,P_fo,P_fi]@work (N,F_in)->F_out nobias:q" */
void adj_affine_case_format(char *buf, size_t size, const adj_affine_case *c);

/* The case's input layout on comm.  Collective on comm. */
int adj_affine_case_input(MPI_Comm comm, const adj_affine_case *c, adj_decomposition **input);
/* The layer on `input`; `sequential` keeps the case's sizes and bias but puts
 * every partition on one worker (out_parts 1, default ranks), for the
 * sequential twin on a one-worker input.  Collective on input's base. */
int adj_affine_case_create(const adj_affine_case *c, adj_dtype dtype, const adj_decomposition *input,
                           bool sequential, adj_layer **layer);

/* A decomposition of shape (ndim dims) on a grid whose ranks are digits,
 * balanced or cut at n p^2 / P^2 (small, often empty, first blocks). */
int adj_case_layout(MPI_Comm comm, int ndim, const int64_t *shape, const int *parts, const char *ranks, bool uneven,
                    adj_decomposition **d);

/* One stage of a deep halo run (the battery's cases_deep_halo.c and t350): 'c'
 * a convolution working on its input's workers with its output there too
 * (P_co = 1: the run's one spatial partition), 'm' / 'a' max / average
 * pooling, 'r' ReLU, 't' tanh; a square window k, stride s, dilation d and
 * padding pad (0 stride or dilation: 1).  Created on `in`. */
typedef struct adj_deep_case_stage {
  char kind;
  int64_t channels, k, s, d, pad;
} adj_deep_case_stage;
int adj_deep_case_stage_create(const adj_deep_case_stage *s, adj_dtype dtype, const adj_decomposition *in,
                               adj_layer **layer);

#endif
