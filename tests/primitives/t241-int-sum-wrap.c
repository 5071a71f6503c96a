/* t241: integer sums that overflow.  Every rank contributes values near the
 * top of its integer type (INT32_MAX, INT64_MAX, 200 for uint8), so the sums
 * over two or more ranks wrap.  The summing direction of sum-reduce, broadcast
 * (adjoint), all-sum-reduce and reduce-scatter must equal, bit for bit, both
 * the sequential sum modulo 2^bits and MPI's own MPI_Allreduce(MPI_SUM) of the
 * same values: the library's local adds match MPI's arithmetic, so the result
 * does not depend on the algorithm.  Registered under every forced
 * ADJ_SUM_REDUCE_ALGORITHM (chain with 24-byte segments). */
#include <stdint.h>
#include <string.h>

#include "harness.h"

enum { N = 37 };

static const adj_dtype integer_dtypes[] = {ADJ_INT32, ADJ_INT64, ADJ_UINT8};

static MPI_Datatype mpi_type(adj_dtype dtype) {
  return dtype == ADJ_INT32 ? MPI_INT32_T : dtype == ADJ_INT64 ? MPI_INT64_T : MPI_UINT8_T;
}

/* Rank r's element i: positive, below the type's maximum (so each value is
 * itself in range), large enough that two of them overflow int32 and int64. */
static int64_t value(adj_dtype dtype, int r, int64_t i) {
  if (dtype == ADJ_UINT8) return 130 - 3 * r + i;
  return (dtype == ADJ_INT32 ? INT32_MAX : INT64_MAX) - 7 * N - 1000 * (int64_t)r + 7 * i;
}

static void fill(adj_tensor *x, int r, int64_t offset) {
  for (int64_t i = 0; i < adj_tensor_volume(x); i++) adj_tensor_set_int(x, i, value(x->dtype, r, offset + i));
}

typedef struct sums {
  adj_tensor wrapped;  /* sequential sum modulo 2^bits, all N elements */
  adj_tensor from_mpi; /* MPI_Allreduce(MPI_SUM) of the same values */
  int64_t overflowed;  /* elements whose true sum lies outside the type */
} sums;

static void sums_create(adj_test *t, adj_dtype dtype, sums *s) {
  const int64_t n = N;
  *s = (sums){0};
  ADJ_TEST_OK(t, adj_tensor_create(&s->wrapped, dtype, 1, &n));
  ADJ_TEST_OK(t, adj_tensor_create(&s->from_mpi, dtype, 1, &n));
  adj_tensor mine;
  ADJ_TEST_OK(t, adj_tensor_create(&mine, dtype, 1, &n));
  fill(&mine, t->rank, 0);
  ADJ_TEST_CHECK(t, MPI_Allreduce(mine.data, s->from_mpi.data, N, mpi_type(dtype), MPI_SUM, t->comm) == MPI_SUCCESS,
                 "MPI_Allreduce failed");
  adj_tensor_destroy(&mine);
  /* The sum modulo 2^64 (unsigned, defined), which set_int reduces to 2^bits;
   * overflow is counted exactly: the values are positive, so the int64
   * partial sums grow and overflow at most once. */
  for (int64_t i = 0; i < N; i++) {
    uint64_t sum = 0;
    int64_t exact = 0;
    bool over = false;
    for (int r = 0; r < t->size; r++) {
      sum += (uint64_t)value(dtype, r, i);
      over |= __builtin_add_overflow(exact, value(dtype, r, i), &exact);
    }
    adj_tensor_set_int(&s->wrapped, i, (int64_t)sum);
    s->overflowed += over || adj_tensor_get_int(&s->wrapped, i) != exact;
  }
}

static void sums_destroy(sums *s) {
  adj_tensor_destroy(&s->wrapped);
  adj_tensor_destroy(&s->from_mpi);
}

/* out holds elements [start, start + volume) of the sum: equal to both references. */
static void check_against(adj_test *t, const char *label, adj_op *op, const adj_tensor *out, int64_t start,
                          const sums *s) {
  size_t esize = adj_dtype_size(out->dtype), bytes = adj_tensor_bytes(out);
  const char *wrapped = (const char *)s->wrapped.data + start * (int64_t)esize;
  const char *from_mpi = (const char *)s->from_mpi.data + start * (int64_t)esize;
  ADJ_TEST_CHECK(t, memcmp(out->data, wrapped, bytes) == 0, "%s %s: rank %d differs from the sequential wrapped sum",
                 label, adj_dtype_name(out->dtype), t->rank);
  ADJ_TEST_CHECK(t, memcmp(out->data, from_mpi, bytes) == 0, "%s %s: rank %d differs from MPI_Allreduce", label,
                 adj_dtype_name(out->dtype), t->rank);
  adj_test_report(t, "  %-16s %-5s (%s): %lld of %d sums overflow; equal to the wrapped sum and to MPI_Allreduce",
                  label, adj_dtype_name(out->dtype), adj_op_algorithm(op), (long long)s->overflowed, N);
}

/* Applies op in `direction` to this rank's values (its block starts at `in_start`). */
static void apply(adj_test *t, adj_op *op, adj_direction direction, int64_t in_start, adj_tensor *out) {
  adj_tensor in;
  bool fwd = direction == ADJ_FORWARD;
  ADJ_TEST_OK(t, fwd ? adj_op_create_domain_tensor(op, &in) : adj_op_create_range_tensor(op, &in));
  ADJ_TEST_OK(t, fwd ? adj_op_create_range_tensor(op, out) : adj_op_create_domain_tensor(op, out));
  fill(&in, t->rank, in_start);
  ADJ_TEST_OK(t, adj_op_apply(op, direction, &in, out));
  adj_tensor_destroy(&in);
}

typedef struct world {
  adj_partition *all, *root;
  adj_decomposition *at_root, *spread;
  int root_rank;
} world;

/* Sum-reduce onto, and broadcast from, a root in the middle, so ranks on both
 * sides hold nothing in the result. */
static void check_root_sums(adj_test *t, const world *w, adj_dtype dtype, const sums *s) {
  adj_op *op = NULL;
  adj_tensor out;
  ADJ_TEST_OK(t, adj_sum_reduce_create(dtype, w->all, w->at_root, &op));
  apply(t, op, ADJ_FORWARD, 0, &out);
  check_against(t, "sum-reduce", op, &out, 0, s);
  adj_tensor_destroy(&out);
  adj_op_destroy(&op);
  ADJ_TEST_OK(t, adj_broadcast_create(dtype, w->at_root, w->all, &op));
  apply(t, op, ADJ_ADJOINT, 0, &out);
  check_against(t, "broadcast*", op, &out, 0, s);
  adj_tensor_destroy(&out);
  adj_op_destroy(&op);
}

static void check_group_sums(adj_test *t, const world *w, adj_dtype dtype, const sums *s) {
  adj_op *op = NULL;
  adj_tensor out;
  const int64_t n = N;
  ADJ_TEST_OK(t, adj_all_sum_reduce_create(dtype, w->all, 1, &n, 1, (const int[]){0}, &op));
  apply(t, op, ADJ_FORWARD, 0, &out);
  check_against(t, "all-sum-reduce", op, &out, 0, s);
  adj_tensor_destroy(&out);
  adj_op_destroy(&op);
  ADJ_TEST_OK(t, adj_reduce_scatter_create(dtype, w->spread, 0, &op));
  apply(t, op, ADJ_FORWARD, 0, &out);
  check_against(t, "reduce-scatter", op, &out, adj_decomposition_local_block(w->spread).start[0], s);
  adj_tensor_destroy(&out);
  adj_op_destroy(&op);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t241-int-sum-wrap");
  world w = {.root_rank = t.size / 2};
  const int64_t n = N;
  ADJ_TEST_OK(&t, adj_partition_create(t.comm, 1, (const int[]){t.size}, t.size, NULL, &w.all));
  ADJ_TEST_OK(&t, adj_partition_create(t.comm, 1, (const int[]){1}, 1, &w.root_rank, &w.root));
  ADJ_TEST_OK(&t, adj_decomposition_create(w.root, 1, &n, &w.at_root));
  ADJ_TEST_OK(&t, adj_decomposition_create(w.all, 1, &n, &w.spread));
  adj_test_report(&t, "%d ranks, root %d, %d elements per rank", t.size, w.root_rank, N);
  for (size_t k = 0; k < sizeof integer_dtypes / sizeof integer_dtypes[0]; k++) {
    sums s;
    sums_create(&t, integer_dtypes[k], &s);
    check_root_sums(&t, &w, integer_dtypes[k], &s);
    check_group_sums(&t, &w, integer_dtypes[k], &s);
    sums_destroy(&s);
  }
  adj_decomposition_destroy(&w.spread), adj_decomposition_destroy(&w.at_root);
  adj_partition_destroy(&w.root), adj_partition_destroy(&w.all);
  return adj_test_finish(&t);
}
