/* Data-movement battery cases (repartition, scatter, gather, all-gather,
 * reduce-scatter): how a case describes its decompositions in its params, and
 * how to rebuild them and the operator.  The tests t220-t222 run the same
 * cases against a sequential reference, so the table lives in one place.
 *
 * A case's params hold two *sides* of ADJ_SIDE_PARAMS entries each, x at
 * ADJ_SIDE_X and y at ADJ_SIDE_Y, and one extra integer at ADJ_CASE_EXTRA
 * (unused by repartition, the dimension for all-gather and reduce-scatter).
 * Scatter's x side and gather's y side are the root's one-worker partition.
 * All-gather and reduce-scatter use only the x side: the decomposition whose
 * blocks are gathered (all-gather's domain, reduce-scatter's range). */
#ifndef ADJOIN_ADJOINT_TESTS_MOVEMENT_CASES_H
#define ADJOIN_ADJOINT_TESTS_MOVEMENT_CASES_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "adjoin/decomposition.h"
#include "battery.h"

/* Side layout: [0] tensor rank, [1..5] global shape, [6..10] partition shape,
 * [11] cut rule, [12..19] the partition's ranks in grid order. */
enum {
  ADJ_SIDE_PARAMS = 20,
  ADJ_SIDE_MAX_RANK = 5,
  ADJ_SIDE_MAX_WORKERS = 8,
  ADJ_SIDE_X = 0,
  ADJ_SIDE_Y = ADJ_SIDE_PARAMS,
  ADJ_CASE_EXTRA = 2 * ADJ_SIDE_PARAMS
};

/* How every dimension of a side is cut. */
typedef enum adj_cut_rule {
  ADJ_CUTS_BALANCED = 0,  /* the default n/P rule */
  ADJ_CUTS_QUADRATIC = 1, /* c_p = n p^2 / P^2: small, often empty, first pieces */
  ADJ_CUTS_LAST = 2       /* dimension 0 whole on the last worker (the others empty); quadratic elsewhere */
} adj_cut_rule;

typedef struct adj_side_spec {
  int shape[ADJ_SIDE_MAX_RANK]; /* partition shape, one entry per tensor dimension */
  const char *ranks;            /* the ranks in grid order as digits, "3210" */
  adj_cut_rule cuts;
} adj_side_spec;

/* Fills a side; ADJ_ERR_ARG when the spec does not describe a valid partition
 * (a typo in a table is then a battery build error, not a silent case). */
int adj_side_encode(int64_t *side, int rank, const int64_t *global, const adj_side_spec *spec);
/* "[2,2]@0123:q" */
void adj_side_format(char *buf, size_t size, const int64_t *side);
/* One more than the largest rank the side lists. */
int adj_side_ranks_needed(const int64_t *side);
/* The side's decomposition on comm (collective on comm). */
int adj_side_decomposition(MPI_Comm comm, const int64_t *side, adj_decomposition **d);

/* Builds a movement case on comm, which may have more ranks than the case
 * needs (the extra ranks are inactive): its decompositions (*y is NULL for
 * all-gather and reduce-scatter) and its operator, chosen by c->op.  On failure
 * nothing is left to destroy.  Collective on comm. */
int adj_movement_case_create(MPI_Comm comm, const adj_battery_case *c, adj_decomposition **x,
                             adj_decomposition **y, adj_op **op);

/* Adds the case "<op>/<partitions>/<global shape>/<dtype>" run by the shared
 * dot-product runner; c->params must already hold the sides and extra. */
int adj_movement_case_add(adj_battery *b, adj_battery_case *c, const char *op, const char *partitions,
                          adj_dtype dtype);

#endif
