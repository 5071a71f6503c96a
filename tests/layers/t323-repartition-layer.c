/* t323: the repartition layer (the paper's "transpose" glue): Jacobian
 * dot-product test, Taylor test (linear: the remainder is round-off),
 * distributed against sequential (a repartition moves data, so the result
 * must be bit-identical), and bad configurations.
 *
 * Cases move between partitions of different shapes and rank counts,
 * balanced and uneven cuts with empty blocks, onto a subset of the ranks
 * (inactive workers) and back. */
#include <stdio.h>
#include <string.h>

#include "dist_check.h"
#include "adjoin/repartition_layer.h"

typedef struct side {
  int parts[3];
  int workers; /* the first `workers` ranks, listed from the last: rank 0 is inactive when workers < size */
  bool uneven;
} side;

static const int64_t shape[3] = {6, 5, 7};

/* A layout of `shape` on the side's grid; parts of 0 mean "all workers". */
static adj_decomposition *side_layout(adj_test *t, const side *s) {
  int parts[3], ranks[8], n = 1;
  for (int i = 0; i < 3; i++) n *= (parts[i] = s->parts[i] ? s->parts[i] : s->workers);
  for (int i = 0; i < n; i++) ranks[i] = t->size - 1 - i;
  int64_t storage[3][9];
  const int64_t *cuts[3] = {NULL};
  for (int i = 0; s->uneven && i < 3; i++) dl_quadratic_cuts(shape[i], parts[i], storage[i]), cuts[i] = storage[i];
  return dl_layout(t, 3, shape, parts, ranks, cuts);
}

static void format_side(adj_test *t, const adj_decomposition *d, const side *s, char *text, size_t size) {
  char grid[48];
  snprintf(text, size, "%s%s%s", adj_partition_format(adj_decomposition_partition(d), grid, sizeof grid),
           s->workers < t->size ? " (rank 0 inactive)" : "", s->uneven ? " uneven" : "");
}

static void check_pair(adj_test *t, const side *from, const side *to, adj_layer *seq) {
  adj_decomposition *x = side_layout(t, from), *y = side_layout(t, to);
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, adj_repartition_layer_create(
                     &(adj_repartition_layer_config){.dtype = ADJ_FLOAT64, .input = x, .output = y}, &layer));
  if (layer) {
    char a[96], b[96], label[200];
    format_side(t, x, from, a, sizeof a);
    format_side(t, y, to, b, sizeof b);
    snprintf(label, sizeof label, "%s -> %s", a, b);
    dl_dottest(t, label, layer);
    dl_taylor(t, label, layer, DL_TAYLOR_LINEAR);
    dl_compare(t, label, layer, seq, 41u);
  }
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&x), adj_decomposition_destroy(&y);
}

static void test_pairs(adj_test *t) {
  int all = t->size, fewer = t->size > 1 ? t->size - 1 : 1;
  const side pairs[][2] = {
      {{{0, 1, 1}, all, false}, {{1, 1, 0}, all, false}},  /* batch-split to feature-split */
      {{{1, 0, 1}, all, true}, {{0, 1, 1}, fewer, false}}, /* uneven onto a subset */
      {{{0, 1, 1}, fewer, false}, {{1, 1, 1}, 1, true}},   /* gather onto one worker (rank size-1) */
      {{{1, 1, 1}, 1, false}, {{1, 0, 1}, all, true}},     /* and spread again */
  };
  adj_decomposition *self = dl_self_layout(t, 3, shape);
  adj_layer *seq = NULL;
  ADJ_TEST_OK(t, adj_repartition_layer_create(
                     &(adj_repartition_layer_config){.dtype = ADJ_FLOAT64, .input = self, .output = self}, &seq));
  for (size_t i = 0; seq && i < sizeof pairs / sizeof pairs[0]; i++) check_pair(t, &pairs[i][0], &pairs[i][1], seq);
  adj_layer_destroy(&seq);
  adj_decomposition_destroy(&self);
}

static void test_errors(adj_test *t) {
  adj_decomposition *x = dl_layout(t, 3, shape, (const int[3]){1, 1, 1}, NULL, NULL);
  adj_decomposition *y = dl_layout(t, 3, (const int64_t[3]){6, 5, 8}, (const int[3]){1, 1, 1}, NULL, NULL);
  adj_layer *layer = NULL;
  int status = adj_repartition_layer_create(
      &(adj_repartition_layer_config){.dtype = ADJ_FLOAT64, .input = x, .output = y}, &layer);
  dl_expect_error(t, "different global shapes", status, &layer, "repartition");
  status = adj_repartition_layer_create(&(adj_repartition_layer_config){.dtype = ADJ_FLOAT64, .input = x}, &layer);
  dl_expect_error(t, "no output layout", status, &layer, "output decomposition is NULL");
  adj_decomposition_destroy(&x), adj_decomposition_destroy(&y);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t323-repartition-layer");
  if (t.size > 8) return adj_test_skip(&t, "the layouts are written for 1 to 8 ranks");
  adj_test_report(&t, "t323 on %d ranks (float64), global shape [6,5,7]", t.size);
  test_pairs(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}
