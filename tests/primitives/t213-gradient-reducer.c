/* t213: the bucketed gradient reducer.  For replica grids [n] and [R, M]
 * (groups of R replicas of M shards, shards of unequal size) and bucket caps 0,
 * 40 bytes, 1 MiB and unlimited: the bucket cut, exact group sums on tensors
 * that were adjacent (used in place, in either order) or scattered (moved into
 * bucket storage), posting in bucket-index order when tensors become final out
 * of order, results bit-identical across caps, the counters against the
 * payload and the all-reduce volume factor, the dot-product test and split
 * phase of the reducer's operator, and bad input (negative cap, unparsable cap
 * text, a wrong-dtype tensor on one rank, replicas of unequal shape) failing
 * on every rank.  Float32 runs one placement per cap (the same code path with
 * another MPI type). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "broadcast_cases.h"
#include "op_check.h"

enum { NT = 5, MAX_EVENTS = 64 };

typedef struct events {
  int n;
  adj_reducer_event kind[MAX_EVENTS];
  int bucket[MAX_EVENTS];
} events;

static void record(void *ctx, adj_reducer_event e, int bucket) {
  events *ev = ctx;
  if (ev->n < MAX_EVENTS) ev->kind[ev->n] = e, ev->bucket[ev->n] = bucket, ev->n++;
}

/* Tensor sizes of shard m (elements), in ready order. */
static int64_t tensor_size(int i, int m) { return (int64_t)(3 + 2 * i + m); }

/* Tensors in one of three placements: 0 = separate allocations, 1 = carved
 * from one buffer in list order, 2 = carved in reverse (a network's packed
 * gradients listed last layer first). */
typedef struct tensor_set {
  adj_tensor t[NT];
  adj_tensor *list[NT];
  void *block;
} tensor_set;

static int set_create(tensor_set *s, adj_dtype dtype, int m, int placement) {
  memset(s, 0, sizeof *s);
  size_t esize = adj_dtype_size(dtype), total = 0;
  for (int i = 0; i < NT; i++) total += (size_t)tensor_size(i, m);
  if (placement) s->block = calloc(total, esize);
  size_t at = placement == 2 ? total : 0;
  for (int i = 0; i < NT; i++) {
    int64_t shape[1] = {tensor_size(i, m)};
    s->list[i] = &s->t[i];
    if (!placement) {
      if (adj_tensor_create(&s->t[i], dtype, 1, shape)) return 1;
      continue;
    }
    if (placement == 2) at -= (size_t)shape[0];
    if (adj_tensor_view(&s->t[i], dtype, 1, shape, (char *)s->block + at * esize)) return 1;
    if (placement == 1) at += (size_t)shape[0];
  }
  return 0;
}

static void set_destroy(tensor_set *s) {
  for (int i = 0; i < NT; i++) adj_tensor_destroy(&s->t[i]);
  free(s->block);
}

/* Replica r of a group holds v(r, i, j); non-representable sums in the
 * bit-identity pass, exact small integers otherwise. */
static double value(int r, int i, int64_t j, bool exact) {
  return exact ? (1 + r) + 10.0 * i + 100.0 * (double)j : sin(1.0 + 7.0 * r + 0.37 * i + 0.011 * (double)j);
}

typedef struct grid_case {
  int R, M; /* grid [R, M] reduced over dimension 0; M = 0 means the 1-D grid [R] */
} grid_case;

static const char *cap_name(int64_t cap, char *buf, size_t size) {
  if (cap == ADJ_REDUCER_UNLIMITED) snprintf(buf, size, "unlimited");
  else snprintf(buf, size, "%lld B", (long long)cap);
  return buf;
}

/* One round through ready/poke/wait; returns a copy of the results. */
static void run_case(adj_test *t, const grid_case *g, adj_dtype dtype, int64_t cap, int placement, bool exact,
                     double *results) {
  int shape[2] = {g->R, g->M ? g->M : 1};
  adj_partition *p = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, g->M ? 2 : 1, shape, shape[0] * shape[1], NULL, &p));
  if (!p) return;
  int r = adj_partition_coords(p)[0], m = g->M ? adj_partition_coords(p)[1] : 0;
  tensor_set s;
  ADJ_TEST_CHECK(t, set_create(&s, dtype, m, placement) == 0, "tensor allocation failed");
  for (int i = 0; i < NT; i++)
    for (int64_t j = 0; j < adj_tensor_volume(&s.t[i]); j++) adj_tensor_set(&s.t[i], j, value(r, i, j, exact));
  events ev = {0};
  adj_gradient_reducer *red = NULL;
  ADJ_TEST_OK(t, adj_gradient_reducer_create(
                     &(adj_gradient_reducer_config){.dtype = dtype, .partition = p, .ndims = 1, .dims = (const int[]){0},
                                                    .n = NT, .tensors = s.list, .bucket_bytes = cap,
                                                    .first_bucket_bytes = cap, .event = record, .event_ctx = &ev},
                     &red));
  char label[160], cb[32];
  snprintf(label, sizeof label, "grid [%d%s%.0d], %s, cap %s, %s", g->R, g->M ? ", " : "", g->M,
           adj_dtype_name(dtype), cap_name(cap, cb, sizeof cb),
           placement == 0 ? "separate tensors" : placement == 1 ? "adjacent tensors" : "reverse-adjacent tensors");
  if (!red) {
    set_destroy(&s);
    adj_partition_destroy(&p);
    return;
  }
  size_t esize = adj_dtype_size(dtype);
  int nb = adj_gradient_reducer_buckets(red);
  /* The cut: consecutive tensors, caps respected unless a tensor is alone. */
  int expected_first = 0;
  for (int b = 0; b < nb; b++) {
    int first, count;
    int64_t bytes;
    adj_gradient_reducer_bucket(red, b, &first, &count, &bytes);
    ADJ_TEST_CHECK(t, first == expected_first && count >= 1, "%s: bucket %d starts at tensor %d, expected %d", label, b,
                   first, expected_first);
    ADJ_TEST_CHECK(t, count == 1 || bytes <= cap, "%s: bucket %d holds %d tensors in %lld bytes, over the cap", label,
                   b, count, (long long)bytes);
    expected_first = first + count;
  }
  ADJ_TEST_CHECK(t, expected_first == NT, "%s: buckets cover %d of %d tensors", label, expected_first, NT);
  int want = cap == 0 ? NT : cap == ADJ_REDUCER_UNLIMITED || cap >= (1 << 20) ? 1 : -1;
  ADJ_TEST_CHECK(t, want < 0 || nb == want, "%s: %d buckets, expected %d", label, nb, want);
  /* A bucket's tensors are views into one contiguous block. */
  for (int b = 0; b < nb; b++) {
    int first, count;
    adj_gradient_reducer_bucket(red, b, &first, &count, NULL);
    for (int i = first; i + 1 < first + count; i++) {
      char *a = s.t[i].data, *c = s.t[i + 1].data;
      ADJ_TEST_CHECK(t, a + adj_tensor_bytes(&s.t[i]) == c || c + adj_tensor_bytes(&s.t[i + 1]) == a,
                     "%s: tensors %d and %d of bucket %d are not adjacent", label, i, i + 1, b);
    }
  }
  /* Final out of order: the last tensor first, then the rest.  Nothing may be
   * posted before bucket 0 is complete, then posts follow index order. */
  ADJ_TEST_OK(t, adj_gradient_reducer_ready(red, NT - 1));
  int posted_early = 0;
  for (int e = 0; e < ev.n; e++) posted_early += ev.kind[e] == ADJ_REDUCER_POSTED;
  ADJ_TEST_CHECK(t, posted_early == 0,
                 "%s: %d buckets posted before bucket 0 was complete", label, posted_early);
  for (int i = 0; i + 1 < NT; i++) {
    ADJ_TEST_OK(t, adj_gradient_reducer_ready(red, i));
    ADJ_TEST_OK(t, adj_gradient_reducer_poke(red));
  }
  ADJ_TEST_OK(t, adj_gradient_reducer_wait(red));
  int next = 0, waits = 0;
  bool in_order = true;
  for (int e = 0; e < ev.n; e++) {
    if (ev.kind[e] == ADJ_REDUCER_POSTED) in_order &= ev.bucket[e] == next++;
    waits += ev.kind[e] == ADJ_REDUCER_WAIT_BEGIN;
  }
  ADJ_TEST_CHECK(t, in_order && next == nb, "%s: %d of %d buckets posted, in index order: %d", label, next, nb,
                 (int)in_order);
  ADJ_TEST_CHECK(t, waits == 1 && ev.kind[ev.n - 1] == ADJ_REDUCER_WAIT_END, "%s: %d waits", label, waits);
  /* Exact sums (group of R). */
  int64_t bad = 0, k = 0;
  for (int i = 0; i < NT; i++)
    for (int64_t j = 0; j < adj_tensor_volume(&s.t[i]); j++, k++) {
      double sum = 0;
      for (int q = 0; q < g->R; q++) sum += value(q, i, j, exact);
      double got = adj_tensor_get(&s.t[i], j);
      if (exact) bad += got != sum;
      else bad += fabs(got - sum) > adj_test_sum_tolerance(dtype, g->R); /* R terms of at most 1 */
      if (results) results[k] = got;
    }
  ADJ_TEST_CHECK(t, bad == 0, "%s: %lld elements differ from the sum over %d replicas", label, (long long)bad, g->R);
  /* Counters: the payload is every tensor's bytes once per round. */
  adj_reducer_counters c;
  adj_gradient_reducer_get_counters(red, &c);
  int64_t payload = 0;
  for (int i = 0; i < NT; i++) payload += tensor_size(i, m) * (int64_t)esize;
  int64_t expect = g->R > 1 ? payload : 0;
  double factor = 2.0 * (g->R - 1) / g->R;
  ADJ_TEST_CHECK(t, c.bytes == (uint64_t)expect && c.messages == (uint64_t)(g->R > 1 ? nb : 0) &&
                        c.logical_bytes == factor * (double)expect && c.reductions == 1,
                 "%s: counted %llu bytes in %llu messages (logical %.1f), expected %lld in %d (logical %.1f)", label,
                 (unsigned long long)c.bytes, (unsigned long long)c.messages, c.logical_bytes, (long long)expect,
                 g->R > 1 ? nb : 0, factor * (double)expect);
  /* Posting a reduction takes time a fine clock sees; the clocks reset. */
  ADJ_TEST_CHECK(t, c.progress_seconds >= 0 && (g->R < 2 || MPI_Wtick() > 1e-6 || c.progress_seconds > 0),
                 "%s: posts and pokes counted %.3g s", label, c.progress_seconds);
  adj_gradient_reducer_reset_counters(red);
  adj_reducer_counters zero;
  adj_gradient_reducer_get_counters(red, &zero);
  ADJ_TEST_CHECK(t, zero.bytes == 0 && zero.messages == 0 && zero.reductions == 0 && zero.wait_seconds == 0 &&
                        zero.progress_seconds == 0,
                 "%s: counters after a reset: %llu bytes, %llu messages, %llu rounds, %.3g s waiting, %.3g s posting",
                 label, (unsigned long long)zero.bytes, (unsigned long long)zero.messages,
                 (unsigned long long)zero.reductions, zero.wait_seconds, zero.progress_seconds);
  if (exact && placement == 0)
    adj_test_report(t, "  %s: %d buckets, %llu payload bytes in %llu messages, logical volume %.1f B (factor %.3f)",
                    label, nb, (unsigned long long)c.bytes, (unsigned long long)c.messages, c.logical_bytes, factor);
  /* The operator face. */
  if (exact && placement == 2) {
    op_check_dottest(t, label, adj_gradient_reducer_op(red));
    op_check_split_phase(t, label, adj_gradient_reducer_op(red), ADJ_FORWARD);
  }
  adj_gradient_reducer_destroy(&red);
  set_destroy(&s);
  adj_partition_destroy(&p);
}

static void check_grid(adj_test *t, const grid_case *g) {
  const int64_t caps[] = {0, 40, 1 << 20, ADJ_REDUCER_UNLIMITED};
  int64_t elements = 0;
  for (int i = 0; i < NT; i++) elements += tensor_size(i, g->M);
  double *first = calloc((size_t)elements, sizeof *first), *other = calloc((size_t)elements, sizeof *other);
  char name[48];
  if (g->M) snprintf(name, sizeof name, "grid [%d, %d]", g->R, g->M);
  else snprintf(name, sizeof name, "grid [%d]", g->R);
  /* Every cap and placement in float64; float32 (same code, other MPI type)
   * on one placement, and int32 or int64 on every other cap, to keep the
   * count of communicators made small. */
  for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
    for (int placement = 0; placement < 3; placement++) run_case(t, g, ADJ_FLOAT64, caps[c], placement, true, NULL);
    run_case(t, g, ADJ_FLOAT32, caps[c], 2, true, NULL);
    if (c % 2) run_case(t, g, c == 1 ? ADJ_INT32 : ADJ_INT64, caps[c], 2, true, NULL);
  }
  /* Bit-identity across caps on float64 sums that round. */
  for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
    run_case(t, g, ADJ_FLOAT64, caps[c], 2, false, c ? other : first);
    if (!c) continue;
    int64_t differ = 0;
    for (int64_t k = 0; k < elements; k++) differ += memcmp(&first[k], &other[k], sizeof first[k]) != 0;
    int64_t total = 0;
    MPI_Allreduce(&differ, &total, 1, MPI_INT64_T, MPI_SUM, t->comm);
    ADJ_TEST_CHECK(t, differ == 0, "%s float64: cap %lld gives %lld elements that differ in bits from cap 0", name,
                   (long long)caps[c], (long long)differ);
    adj_test_report(t, "  %s float64: cap %lld vs cap 0: %lld elements differ in bits", name, (long long)caps[c],
                    (long long)total);
  }
  free(first), free(other);
}

static void check_errors(adj_test *t) {
  adj_partition *p = NULL;
  int n = t->size;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){n}, n, NULL, &p));
  tensor_set s;
  set_create(&s, ADJ_FLOAT64, 0, 0);
  adj_gradient_reducer *red = NULL;
  adj_gradient_reducer_config c = {.dtype = ADJ_FLOAT64, .partition = p, .ndims = 1, .dims = (const int[]){0},
                                   .n = NT, .tensors = s.list, .bucket_bytes = -1, .first_bucket_bytes = 0};
  op_check_local_error(t, adj_gradient_reducer_create(&c, &red), "bucket cap -1 bytes is negative", "cap -1");
  ADJ_TEST_CHECK(t, red == NULL, "a failed create left a reducer behind");
  c.bucket_bytes = 0;
  /* A float32 tensor on the last rank only. */
  adj_tensor odd;
  adj_tensor_create(&odd, ADJ_FLOAT32, 1, (const int64_t[]){3});
  adj_tensor *saved = s.list[2];
  if (t->rank == n - 1) s.list[2] = &odd;
  op_check_local_error(t, adj_gradient_reducer_create(&c, &red), "tensor 2 holds float32", "float32 tensor on the last rank");
  s.list[2] = saved;
  adj_tensor_destroy(&odd);
  set_destroy(&s);
  /* Replicas of unequal shape: the last rank's tensors are one longer. */
  if (n >= 2) {
    set_create(&s, ADJ_FLOAT64, t->rank == n - 1 ? 1 : 0, 0);
    op_check_local_error(t, adj_gradient_reducer_create(&c, &red), "replicas must hold equal tensor shapes",
                "unequal shapes on the last rank");
    set_destroy(&s);
  }
  adj_partition_destroy(&p);
  int64_t cap = 0;
  op_check_local_error(t, adj_bucket_cap_parse("-5", &cap), "'-5' is negative", "cap text -5");
  op_check_local_error(t, adj_bucket_cap_parse("lots", &cap), "'lots' is not a number", "cap text lots");
  op_check_local_error(t, adj_bucket_cap_parse("1.5M", &cap), "'.5M' follows", "cap text 1.5M");
  op_check_local_error(t, adj_bucket_cap_parse("99999999999G", &cap), "too large", "cap text 99999999999G");
  const struct {
    const char *text;
    int64_t bytes;
  } good[] = {{"0", 0}, {"40", 40}, {"1M", 1 << 20}, {"25MiB", 25 << 20}, {"4KiB", 4096}, {"unlimited", INT64_MAX}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    ADJ_TEST_OK(t, adj_bucket_cap_parse(good[i].text, &cap));
    ADJ_TEST_CHECK(t, cap == good[i].bytes, "cap text %s parsed as %lld, expected %lld", good[i].text, (long long)cap,
                   (long long)good[i].bytes);
  }
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t213-gradient-reducer");
  grid_case grids[3];
  int ng = 0;
  grids[ng++] = (grid_case){t.size, 0};
  if (t.size % 2 == 0 && t.size >= 4) grids[ng++] = (grid_case){t.size / 2, 2};
  if (t.size % 3 == 0 && t.size >= 6) grids[ng++] = (grid_case){2, t.size / 2};
  for (int i = 0; i < ng; i++) check_grid(&t, &grids[i]);
  check_errors(&t);
  return adj_test_finish(&t);
}
