/* Battery cases for all-gather and reduce-scatter (each other's adjoint, so
 * every decomposition below is tested as both operators).  The dimensions
 * cover the direct layout (every dimension before `dim` has extent 1, so MPI
 * reads and writes the tensor itself) and the packed one, groups of one
 * worker, inactive ranks, permuted rank orders and cuts that leave blocks
 * empty. */
#include <stdio.h>

#include "error_impl.h"
#include "movement_cases.h"

typedef struct adj_gather_spec {
  int rank;
  int64_t global[ADJ_SIDE_MAX_RANK];
  adj_side_spec x;
  int dim;
} adj_gather_spec;

/* Short names for the cut rules, so the tables read as tables. */
#define B ADJ_CUTS_BALANCED
#define Q ADJ_CUTS_QUADRATIC
#define L ADJ_CUTS_LAST

static const adj_gather_spec adj_gather_cases[] = {
    {1, {10}, {{4}, "0123", B}, 0},
    {2, {5, 7}, {{2, 2}, "0123", B}, 0},
    {2, {5, 7}, {{2, 2}, "0123", B}, 1},
    {2, {1, 8}, {{1, 3}, "012", B}, 1},
    {2, {6, 9}, {{2, 3}, "015432", B}, 1},
    {3, {5, 3, 7}, {{3, 1, 2}, "012345", Q}, 2},
    {3, {3, 4, 5}, {{2, 2, 2}, "76543210", B}, 1},
    {4, {2, 3, 4, 5}, {{1, 2, 1, 2}, "1032", B}, 3},
    {1, {5}, {{2}, "12", B}, 0},
    {1, {6}, {{5}, "01234", L}, 0},
    {5, {2, 2, 2, 2, 3}, {{1, 1, 1, 1, 2}, "01", B}, 4},
    {2, {4, 3}, {{1, 1}, "0", B}, 0},
    {3, {2, 7, 3}, {{1, 7, 1}, "0246135", B}, 1},
    {2, {4, 3}, {{2, 2}, "0123", L}, 1},
    {2, {4, 3}, {{2, 2}, "0123", L}, 0},
};

int adj_battery_add_all_gather(adj_battery *b) {
  static const char *const families[] = {"all_gather", "reduce_scatter"};
  for (size_t i = 0; i < sizeof adj_gather_cases / sizeof adj_gather_cases[0]; i++) {
    const adj_gather_spec *s = &adj_gather_cases[i];
    adj_battery_case c = {.params = {[ADJ_CASE_EXTRA] = s->dim}};
    ADJ_CALL(adj_side_encode(&c.params[ADJ_SIDE_X], s->rank, s->global, &s->x));
    char side[48], partitions[96];
    adj_side_format(side, sizeof side, &c.params[ADJ_SIDE_X]);
    snprintf(partitions, sizeof partitions, "%s dim %d", side, s->dim);
    for (int f = 0; f < 2; f++)
      for (int k = 0; k < ADJ_BATTERY_MOVEMENT_DTYPES; k++)
        ADJ_CALL(adj_movement_case_add(b, &c, families[f], partitions, adj_battery_movement_dtype((int)i, k)));
  }
  return ADJ_SUCCESS;
}
