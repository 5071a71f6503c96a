/* Decompositions: the balanced rule (n/P, first n mod P get one more), explicit
 * cuts with empty blocks, blocks that tile the global tensor exactly, inactive
 * ranks with zero volume, and errors naming the bad value (NULL arguments
 * included). */
#include <string.h>

#include "harness.h"

static void check_tiling(adj_test *t, const adj_decomposition *d) {
  const adj_partition *p = adj_decomposition_partition(d);
  int rank = adj_decomposition_rank(d);
  const int64_t *g = adj_decomposition_global_shape(d);
  int64_t total = 1, sum = 0;
  for (int i = 0; i < rank; i++) total *= g[i];
  for (int k = 0; k < adj_partition_size(p); k++) {
    int c[ADJ_MAX_RANK];
    adj_partition_coords_of_index(p, k, c);
    adj_box b = adj_decomposition_block(d, c);
    sum += adj_box_volume(&b);
    ADJ_TEST_CHECK(t, adj_box_inside(&b, rank, g), "block of worker %d lies outside the tensor", k);
  }
  ADJ_TEST_CHECK(t, sum == total, "blocks cover %lld of %lld elements", (long long)sum, (long long)total);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t111-decomposition");
  /* The balanced rule on the paper's sizes. */
  int64_t s, e;
  adj_balanced_block(11, 3, 0, &s, &e);
  ADJ_TEST_CHECK(&t, s == 0 && e == 4, "11/3 part 0: [%lld,+%lld)", (long long)s, (long long)e);
  adj_balanced_block(11, 3, 2, &s, &e);
  ADJ_TEST_CHECK(&t, s == 8 && e == 3, "11/3 part 2: [%lld,+%lld)", (long long)s, (long long)e);
  adj_balanced_block(2, 5, 4, &s, &e);
  ADJ_TEST_CHECK(&t, s == 2 && e == 0, "2/5 part 4 is empty at the end: [%lld,+%lld)", (long long)s, (long long)e);

  int n = t.size, shape1[1] = {n};
  adj_partition *p;
  ADJ_TEST_OK(&t, adj_partition_create(t.comm, 1, shape1, n, NULL, &p));
  int64_t global[1] = {2 * n + 1};
  adj_decomposition *d;
  ADJ_TEST_OK(&t, adj_decomposition_create(p, 1, global, &d));
  check_tiling(&t, d);
  adj_box mine = adj_decomposition_local_block(d);
  ADJ_TEST_CHECK(&t, mine.extent[0] == (t.rank == 0 ? 3 : 2), "rank %d holds %lld of %lld", t.rank, (long long)mine.extent[0],
                 (long long)global[0]);
  adj_decomposition_destroy(&d);

  /* Explicit cuts: everything on the last worker, the others empty. */
  int64_t cuts[9];
  for (int i = 0; i <= n; i++) cuts[i] = i == n ? global[0] : 0;
  const int64_t *cut_list[1] = {cuts};
  ADJ_TEST_OK(&t, adj_decomposition_create_explicit(p, 1, global, cut_list, &d));
  check_tiling(&t, d);
  mine = adj_decomposition_local_block(d);
  ADJ_TEST_CHECK(&t, mine.extent[0] == (t.rank == n - 1 ? global[0] : 0), "explicit cuts: rank %d holds %lld", t.rank,
                 (long long)mine.extent[0]);
  adj_decomposition_destroy(&d);

  /* Errors: decreasing cuts, wrong end, rank mismatch. */
  if (n >= 2) {
    int64_t bad[9];
    for (int i = 0; i <= n; i++) bad[i] = i == n ? global[0] : (i == 1 ? 4 : 0);
    bad[n - 1 > 1 ? n - 1 : 1] = bad[n - 1 > 1 ? n - 1 : 1];
    if (n > 2) bad[2] = 1; /* 4 then 1: decreasing */
    else bad[1] = global[0] + 2, bad[2] = global[0];
    const int64_t *bl[1] = {bad};
    int status = adj_decomposition_create_explicit(p, 1, global, bl, &d);
    ADJ_TEST_CHECK(&t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "decrease"), "decreasing cuts: %s '%s'",
                   adj_status_name(status), adj_last_error());
  }
  int64_t g2[2] = {4, 4};
  int status = adj_decomposition_create(p, 2, g2, &d);
  ADJ_TEST_CHECK(&t, status == ADJ_ERR_SIZE && strstr(adj_last_error(), "tensor rank 2"), "rank mismatch: '%s'", adj_last_error());
  adj_partition_destroy(&p);

  /* A partition over fewer ranks: the others are inactive and hold nothing. */
  if (t.size >= 3) {
    int shape2[2] = {1, 2}, ranks[2] = {2, 0};
    ADJ_TEST_OK(&t, adj_partition_create(t.comm, 2, shape2, 2, ranks, &p));
    int64_t g[2] = {3, 5};
    ADJ_TEST_OK(&t, adj_decomposition_create(p, 2, g, &d));
    check_tiling(&t, d);
    adj_tensor local;
    ADJ_TEST_OK(&t, adj_decomposition_create_local(d, ADJ_FLOAT32, &local));
    int64_t expect = t.rank == 2 ? 9 : t.rank == 0 ? 6 : 0;
    ADJ_TEST_CHECK(&t, adj_tensor_volume(&local) == expect, "rank %d local volume %lld, expected %lld", t.rank,
                   (long long)adj_tensor_volume(&local), (long long)expect);
    adj_tensor_destroy(&local);
    adj_decomposition_destroy(&d);
    adj_partition_destroy(&p);
  }
  /* On the first ranks: the same tiling as a partition made by hand, and bad
   * arguments named on every rank. */
  {
    adj_decomposition *first = NULL;
    ADJ_TEST_OK(&t, adj_decomposition_create_on_first_ranks(t.comm, 2, (const int[2]){n, 1}, (const int64_t[2]){7, 3},
                                                            &first));
    if (first) check_tiling(&t, first);
    adj_decomposition_destroy(&first);
    adj_test_expect_error(&t, "first ranks, rank 0",
                          adj_decomposition_create_on_first_ranks(t.comm, 0, (const int[1]){1}, (const int64_t[1]){4},
                                                                  &first),
                          ADJ_ERR_ARG, "rank 0");
    adj_test_expect_error(&t, "first ranks, more workers than ranks",
                          adj_decomposition_create_on_first_ranks(t.comm, 1, (const int[1]){n + 1},
                                                                  (const int64_t[1]){4}, &first),
                          ADJ_ERR_SIZE, "ranks but the communicator has");
  }
  /* A local tensor needs a decomposition and somewhere to put the tensor. */
  {
    adj_tensor local;
    adj_test_expect_error(&t, "create_local(NULL decomposition)",
                          adj_decomposition_create_local(NULL, ADJ_FLOAT32, &local), ADJ_ERR_ARG,
                          "adj_decomposition_create_local: decomposition is NULL");
    adj_decomposition *any = NULL;
    ADJ_TEST_OK(&t, adj_decomposition_create_on_first_ranks(t.comm, 1, (const int[1]){1}, (const int64_t[1]){4}, &any));
    if (any)
      adj_test_expect_error(&t, "create_local(NULL tensor)", adj_decomposition_create_local(any, ADJ_FLOAT32, NULL),
                            ADJ_ERR_ARG, "tensor pointer is NULL");
    adj_decomposition_destroy(&any);
  }
  adj_test_report(&t, "balanced and explicit decompositions tile their tensors on %d ranks", t.size);
  return adj_test_finish(&t);
}
