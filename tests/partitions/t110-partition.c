/* Partitions: coordinates, base ranks, custom rank orders, inactive ranks,
 * sub-partitions, the broadcast-compatibility rule, and argument errors that
 * every rank reports identically without hanging. */
#include <string.h>

#include "harness.h"

static void check_grid(adj_test *t) {
  /* A 2 x (size/2) grid over the ranks in reverse order, leaving one rank out
   * when size is odd. */
  int cols = t->size / 2, n = 2 * cols;
  if (cols == 0) return;
  int ranks[8], shape[2] = {2, cols};
  for (int i = 0; i < n; i++) ranks[i] = t->size - 1 - i;
  adj_partition *p;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, shape, n, ranks, &p));
  if (!p) return;
  int index = adj_partition_index_of_rank(p, t->rank);
  ADJ_TEST_CHECK(t, adj_partition_active(p) == (index >= 0), "active flag disagrees with index %d", index);
  if (index >= 0) {
    const int *c = adj_partition_coords(p);
    ADJ_TEST_CHECK(t, c[0] == index / cols && c[1] == index % cols, "coords (%d,%d) for index %d", c[0], c[1], index);
    ADJ_TEST_CHECK(t, adj_partition_rank_at(p, c) == t->rank, "rank_at(own coords) = %d", adj_partition_rank_at(p, c));
    int prank = -1;
    MPI_Comm comm;
    ADJ_TEST_OK(t, adj_partition_get_comm(p, &comm));
    if (comm != MPI_COMM_NULL) MPI_Comm_rank(comm, &prank);
    ADJ_TEST_CHECK(t, prank == index, "partition communicator orders by grid index: %d vs %d", prank, index);
  } else {
    MPI_Comm comm;
    ADJ_TEST_OK(t, adj_partition_get_comm(p, &comm));
    ADJ_TEST_CHECK(t, comm == MPI_COMM_NULL, "inactive rank has a communicator");
    ADJ_TEST_CHECK(t, adj_partition_coords(p)[0] == -1, "inactive coords must be -1");
  }
  /* Sub-partition: column 0 (shape 2 x 1). */
  adj_partition *sub;
  int start[2] = {0, cols - 1}, sub_shape[2] = {2, 1};
  ADJ_TEST_OK(t, adj_partition_create_sub(p, start, sub_shape, &sub));
  if (sub) {
    for (int r = 0; r < 2; r++) {
      int pc[2] = {r, cols - 1}, sc[2] = {r, 0};
      ADJ_TEST_CHECK(t, adj_partition_rank_at(sub, sc) == adj_partition_rank_at(p, pc), "sub-partition row %d maps to rank %d",
                     r, adj_partition_rank_at(sub, sc));
    }
    ADJ_TEST_OK(t, adj_partition_check_broadcast(sub, p));
    adj_partition_destroy(&sub);
  }
  ADJ_TEST_CHECK(t, sub == NULL, "destroy must clear the handle");
  adj_partition_destroy(&p);
  adj_partition_destroy(&p); /* NULL: a no-op */
}

static void check_broadcast_rule(adj_test *t) {
  struct { int nd_src, src[3], nd_dst, dst[3], ok; } cases[] = {
      {2, {1, 1}, 2, {2, 2}, 1},   {2, {1, 2}, 2, {2, 2}, 1}, {2, {2, 1}, 2, {2, 2}, 1},
      {1, {2}, 2, {3, 2}, 1},      {2, {2, 2}, 2, {2, 2}, 1}, {2, {2, 1}, 2, {3, 1}, 0},
      {2, {2, 2}, 2, {1, 2}, 0},   {3, {1, 1, 1}, 2, {1, 1}, 0}, {1, {3}, 3, {1, 1, 3}, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int ns = 1, nd = 1;
    for (int d = 0; d < cases[i].nd_src; d++) ns *= cases[i].src[d];
    for (int d = 0; d < cases[i].nd_dst; d++) nd *= cases[i].dst[d];
    if (ns > t->size || nd > t->size) continue;
    adj_partition *a = NULL, *b = NULL;
    ADJ_TEST_OK(t, adj_partition_create(t->comm, cases[i].nd_src, cases[i].src, ns, NULL, &a));
    ADJ_TEST_OK(t, adj_partition_create(t->comm, cases[i].nd_dst, cases[i].dst, nd, NULL, &b));
    if (a && b) {
      int status = adj_partition_check_broadcast(a, b);
      ADJ_TEST_CHECK(t, (status == 0) == cases[i].ok, "broadcast rule case %zu: status %s (%s)", i, adj_status_name(status),
                     adj_last_error());
      if (!cases[i].ok)
        ADJ_TEST_CHECK(t, strstr(adj_last_error(), "cannot broadcast") || strstr(adj_last_error(), "more dimensions"),
                       "message should explain the rule: '%s'", adj_last_error());
    }
    adj_partition_destroy(&a);
    adj_partition_destroy(&b);
  }
}

static void check_errors(adj_test *t) {
  adj_partition *p = NULL;
  int shape[2] = {2, 3};
  int status = adj_partition_create(t->comm, 2, shape, 4, NULL, &p);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_SIZE && p == NULL, "product mismatch must fail with ADJ_ERR_SIZE, got %s",
                 adj_status_name(status));
  ADJ_TEST_CHECK(t, strstr(adj_last_error(), "[2, 3] has 6 workers but 4 ranks"), "message: '%s'", adj_last_error());
  int one[1] = {2}, dup[2] = {0, 0};
  status = adj_partition_create(t->comm, 1, one, 2, dup, &p);
  ADJ_TEST_CHECK(t, status != 0 && (t->size < 2 || strstr(adj_last_error(), "listed twice")), "duplicate ranks: '%s'",
                 adj_last_error());
  int big[1] = {1}, out_of_range[1] = {t->size + 3};
  status = adj_partition_create(t->comm, 1, big, 1, out_of_range, &p);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "outside the communicator"), "rank out of range: '%s'",
                 adj_last_error());
  int zero[1] = {0};
  status = adj_partition_create(t->comm, 1, zero, 0, NULL, &p);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "extent 0"), "zero extent: '%s'", adj_last_error());
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t110-partition");
  check_grid(&t);
  check_broadcast_rule(&t);
  check_errors(&t);
  adj_test_report(&t, "partition grids, sub-partitions, broadcast rule and errors on %d ranks", t.size);
  return adj_test_finish(&t);
}
