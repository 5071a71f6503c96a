/* Shared by the data-movement tests t220-t222: run every battery case of a
 * family (movement_cases.h) on the whole world, so ranks beyond the case's
 * are inactive bystanders, and check it against the sequential reference. */
#ifndef ADJOIN_TESTS_MOVEMENT_H
#define ADJOIN_TESTS_MOVEMENT_H

#include "harness.h"
#include "movement_cases.h"

typedef struct movement_setup {
  adj_decomposition *x, *y; /* y is NULL for all-gather and reduce-scatter */
  adj_op *op;
} movement_setup;

/* A family's reference check, run on every rank. */
typedef void (*movement_check_fn)(adj_test *t, const adj_battery_case *c, const movement_setup *s);

/* Runs check and the dot-product test (figure printed) on every case of
 * `family` that needs exactly as many ranks as the world has.  Returns the
 * number of cases run. */
int movement_run_family(adj_test *t, const char *family, movement_check_fn check);

/* Applies op in `direction` to the global-index fill of in_box (this rank's
 * block in global coordinates) and checks the output equals `factor` times
 * the fill of out_box exactly.  The output starts as a sentinel, so an
 * element the operator forgot to write shows up. */
void movement_check_map(adj_test *t, const char *label, adj_op *op, adj_direction direction, const adj_box *in_box,
                        const adj_box *out_box, const int64_t *global, double factor);

/* Repartition, scatter and gather: forward takes x's blocks to y's and the
 * adjoint takes them back, both exactly. */
void movement_check_permutation(adj_test *t, const adj_battery_case *c, const movement_setup *s);

#endif
