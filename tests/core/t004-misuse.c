/* Misuse of public entry points: sizes whose byte count overflows, NULL for a
 * required argument, generator states no generator produces, enum values
 * outside their enum, and geometry whose arithmetic overflows.  Each call
 * must return an error with a message naming the bad value, on every rank,
 * and never crash (status.h: the library never aborts). */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* status must be `want` and the message must hold `phrase`, the same on every
 * rank (the harness's one check of an expected failure). */
static void expect(adj_test *t, const char *label, int status, int want, const char *phrase) {
  adj_test_expect_error(t, label, status, want, phrase);
}

static void tensor_sizes(adj_test *t) {
  adj_tensor x = {0};
  /* 2^62 x 8 elements: the element count alone overflows int64. */
  expect(t, "tensor {2^62, 8} float64", adj_tensor_create(&x, ADJ_FLOAT64, 2, (int64_t[]){(int64_t)1 << 62, 8}),
         ADJ_ERR_ARG, "overflow");
  /* 2^61 elements fit in int64 but 2^61 x 8 bytes do not. */
  expect(t, "tensor {2^61} float64 (bytes overflow)", adj_tensor_create(&x, ADJ_FLOAT64, 1, (int64_t[]){(int64_t)1 << 61}),
         ADJ_ERR_ARG, "overflow");
  expect(t, "tensor view {2^40, 2^40}",
         adj_tensor_view(&x, ADJ_FLOAT32, 2, (int64_t[]){(int64_t)1 << 40, (int64_t)1 << 40}, &x), ADJ_ERR_ARG,
         "overflow");
  /* A zero extent makes any other extent harmless. */
  ADJ_TEST_OK(t, adj_tensor_create(&x, ADJ_FLOAT64, 2, (int64_t[]){0, INT64_MAX}));
  ADJ_TEST_CHECK(t, adj_tensor_volume(&x) == 0, "{0, INT64_MAX} has volume %lld", (long long)adj_tensor_volume(&x));
  adj_tensor_destroy(&x);
  ADJ_TEST_OK(t, adj_tensor_create(&x, ADJ_FLOAT64, 2, (int64_t[]){3, 5}));
  ADJ_TEST_CHECK(t, adj_tensor_volume(&x) == 15 && adj_tensor_bytes(&x) == 120, "{3, 5} float64: volume %lld",
                 (long long)adj_tensor_volume(&x));
  adj_tensor_destroy(&x);
}

static void null_arguments(adj_test *t) {
  int one = 1;
  expect(t, "adj_partition_create(out = NULL)", adj_partition_create(t->comm, 1, &one, 1, NULL, NULL), ADJ_ERR_ARG,
         "output partition pointer is NULL");
  adj_partition *p = NULL;
  expect(t, "adj_partition_create(shape = NULL)", adj_partition_create(t->comm, 1, NULL, 1, NULL, &p), ADJ_ERR_ARG,
         "shape is NULL");
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, &one, 1, NULL, &p));
  adj_partition *sub = NULL;
  expect(t, "adj_partition_create_sub(out = NULL)", adj_partition_create_sub(p, (int[]){0}, &one, NULL), ADJ_ERR_ARG,
         "output partition pointer is NULL");
  expect(t, "adj_partition_create_sub(parent = NULL)", adj_partition_create_sub(NULL, (int[]){0}, &one, &sub),
         ADJ_ERR_ARG, "parent, start and shape are required");
  adj_decomposition *d = NULL;
  int64_t shape[1] = {10};
  expect(t, "adj_decomposition_create(partition = NULL)", adj_decomposition_create(NULL, 1, shape, &d), ADJ_ERR_ARG,
         "partition is NULL");
  expect(t, "adj_decomposition_create(shape = NULL)", adj_decomposition_create(p, 1, NULL, &d), ADJ_ERR_ARG,
         "global shape is NULL");
  expect(t, "adj_decomposition_create(out = NULL)", adj_decomposition_create(p, 1, shape, NULL), ADJ_ERR_ARG,
         "output decomposition pointer is NULL");
  adj_op *op = NULL;
  expect(t, "adj_halo_create(geometry = NULL)", adj_halo_create(ADJ_FLOAT64, p, NULL, &op), ADJ_ERR_ARG,
         "partition and geometry are required");
  expect(t, "adj_halo_create(out = NULL)", adj_halo_create(ADJ_FLOAT64, p, NULL, NULL), ADJ_ERR_ARG,
         "output operator pointer is NULL");
  expect(t, "adj_halo_geometry_create(out = NULL)",
         adj_halo_geometry_create(1, shape, &one, NULL, NULL, NULL), ADJ_ERR_ARG, "output geometry pointer is NULL");
  expect(t, "adj_copy_create(out = NULL)", adj_copy_create(ADJ_FLOAT64, 4, NULL), ADJ_ERR_ARG,
         "output operator pointer is NULL");
  expect(t, "adj_op_compose(out = NULL)", adj_op_compose(1, &op, NULL), ADJ_ERR_ARG, "output operator pointer");
  expect(t, "adj_rng_create(out = NULL)", adj_rng_create(1, NULL), ADJ_ERR_ARG, "output handle is NULL");
  expect(t, "adj_checkpoint_load(network = NULL)", adj_checkpoint_load("x.ckpt", NULL, NULL, NULL, NULL), ADJ_ERR_ARG,
         "path and network are required");
  expect(t, "adj_checkpoint_save(network = NULL)", adj_checkpoint_save("x.ckpt", NULL, NULL, NULL, NULL), ADJ_ERR_ARG,
         "path, network and position are required");
  expect(t, "adj_network_build(out = NULL)", adj_network_build(NULL, NULL, t->comm, NULL, NULL), ADJ_ERR_ARG,
         "output network pointer is NULL");
  expect(t, "adj_description_parse(out = NULL)", adj_description_parse("input 1", "x", NULL), ADJ_ERR_ARG,
         "output pointer is NULL");
  expect(t, "adj_placement_parse(out = NULL)", adj_placement_parse("", "x", NULL), ADJ_ERR_ARG,
         "output pointer is NULL");
  expect(t, "adj_network_create(out = NULL)", adj_network_create("n", 0, NULL, NULL), ADJ_ERR_ARG,
         "output network pointer is NULL");
  adj_optimizer *opt = NULL;
  expect(t, "adj_optimizer_create(network = NULL)",
         adj_optimizer_create(NULL, &(adj_optimizer_config){.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.1}, &opt),
         ADJ_ERR_ARG, "network and config are required");
  expect(t, "adj_trainer_create(out = NULL)", adj_trainer_create(NULL, NULL), ADJ_ERR_ARG,
         "output trainer pointer is NULL");
  expect(t, "adj_trainer_load(trainer = NULL)", adj_trainer_load(NULL, "x.ckpt"), ADJ_ERR_ARG,
         "trainer and path are required");
  expect(t, "adj_dataset_random(out = NULL)", adj_dataset_random(4, 2, (const int64_t[]){2, 2}, 10, 1, NULL), ADJ_ERR_ARG,
         "output pointer is NULL");
  adj_partition_destroy(&p);
}

/* GSL's mt19937 state: 624 words, then the index (see core/rng.c). */
static void generator_states(adj_test *t) {
  adj_rng *rng = NULL;
  ADJ_TEST_OK(t, adj_rng_create(7, &rng));
  if (!rng) return;
  size_t size = adj_rng_state_size(rng);
  unsigned char *state = malloc(size), *before = malloc(size), *after = malloc(size);
  adj_rng_state_save(rng, before);
  size_t index_at = 624 * sizeof(unsigned long);
  const int bad_index[] = {INT_MIN, -1, 625, INT_MAX};
  for (size_t i = 0; i < sizeof bad_index / sizeof bad_index[0]; i++) {
    memcpy(state, before, size);
    memcpy(state + index_at, &bad_index[i], sizeof(int));
    char label[64];
    snprintf(label, sizeof label, "generator state, index %d", bad_index[i]);
    expect(t, label, adj_rng_state_load(rng, state, size), ADJ_ERR_ARG, "Mersenne-Twister index");
  }
  memcpy(state, before, size);
  unsigned long wide = 0x100000000ul;
  memcpy(state + 5 * sizeof(unsigned long), &wide, sizeof wide);
  expect(t, "generator state, a 33-bit word", adj_rng_state_load(rng, state, size), ADJ_ERR_ARG, "word 5");
  memset(state, 0, size);
  expect(t, "generator state, all zero", adj_rng_state_load(rng, state, size), ADJ_ERR_ARG, "every word is zero");
  expect(t, "generator state, one byte short", adj_rng_state_load(rng, before, size - 1), ADJ_ERR_SIZE, "bytes");
  adj_rng_state_save(rng, after);
  ADJ_TEST_CHECK(t, !memcmp(before, after, size), "a refused state changed the generator");
  /* The boundary values of the index are states GSL itself produces. */
  memcpy(state, before, size);
  int edge = 624;
  memcpy(state + index_at, &edge, sizeof edge);
  ADJ_TEST_OK(t, adj_rng_state_load(rng, state, size));
  double u = adj_rng_uniform(rng);
  ADJ_TEST_CHECK(t, u >= 0 && u < 1, "uniform draw %g after index 624", u);
  free(state), free(before), free(after);
  adj_rng_destroy(&rng);
}

/* adj_rng_below over the whole of uint64_t.  Below 2^32 it must give GSL's
 * draws as before (seeded runs depend on them): the expected values are what
 * the generator seeded with 12345 gave before larger n were supported.  Above,
 * two 32-bit draws make each value, which must stay below n and reach past
 * 2^32. */
static void rng_below_range(adj_test *t) {
  adj_rng *rng = NULL;
  ADJ_TEST_OK(t, adj_rng_create(12345, &rng));
  if (!rng) return;
  static const uint64_t small_n[3] = {10, 1000, 4294967295u};
  static const uint64_t small_draws[3][8] = {
      {0, 2, 6, 0, 3, 9, 6, 7},
      {915, 353, 316, 398, 588, 841, 276, 549},
      {1158487498u, 3093771254u, 1231073254u, 2831225675u, 3826963649u, 2024973648u, 1545804315u, 2825598511u},
  };
  int same = 1;
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < 8; i++) {
      uint64_t v = adj_rng_below(rng, small_n[k]);
      if (v != small_draws[k][i]) {
        ADJ_TEST_CHECK(t, 0, "adj_rng_below(%llu) draw %d is %llu, was %llu", (unsigned long long)small_n[k], i,
                       (unsigned long long)v, (unsigned long long)small_draws[k][i]);
        same = 0;
      }
    }
  ADJ_TEST_CHECK(t, adj_rng_below(rng, 0) == 0, "adj_rng_below(0) is not 0");
  adj_test_report(t, "  %-40s %s", "adj_rng_below, n < 2^32 (seed 12345)",
                  same ? "24 draws as before" : "draws CHANGED");
  enum { DRAWS = 400 };
  const uint64_t large_n[2] = {(uint64_t)1 << 33, UINT64_MAX};
  for (int k = 0; k < 2; k++) {
    int below = 0, high = 0;
    for (int i = 0; i < DRAWS; i++) {
      uint64_t v = adj_rng_below(rng, large_n[k]);
      below += v < large_n[k];
      high += v >> 32 != 0;
    }
    ADJ_TEST_CHECK(t, below == DRAWS, "adj_rng_below(%llu): %d of %d draws were below n",
                   (unsigned long long)large_n[k], below, DRAWS);
    ADJ_TEST_CHECK(t, high > 0, "adj_rng_below(%llu): no draw of %d reached 2^32", (unsigned long long)large_n[k],
                   DRAWS);
    /* For n = 2^33 half the values are >= 2^32: 200 expected, sd 10. */
    if (k == 0)
      ADJ_TEST_CHECK(t, high >= 140 && high <= 260, "adj_rng_below(2^33): %d of %d draws >= 2^32, expected ~200",
                     high, DRAWS);
    adj_test_report(t, "  adj_rng_below(%llu): %d of %d draws below n, %d of them >= 2^32",
                    (unsigned long long)large_n[k], below, DRAWS, high);
  }
  adj_rng_destroy(&rng);
}

/* A destroyed tensor is empty (volume 0) and points at read-only storage:
 * zero, fill and copy must touch nothing. */
static void destroyed_tensor(adj_test *t) {
  adj_tensor x = {0}, scalar = {0};
  ADJ_TEST_OK(t, adj_tensor_create(&x, ADJ_FLOAT64, 2, (int64_t[]){3, 4}));
  adj_tensor_destroy(&x);
  ADJ_TEST_CHECK(t, adj_tensor_volume(&x) == 0 && adj_tensor_bytes(&x) == 0, "destroyed tensor has volume %lld",
                 (long long)adj_tensor_volume(&x));
  adj_tensor_zero(&x);
  adj_rng *rng = NULL;
  ADJ_TEST_OK(t, adj_rng_create(3, &rng));
  if (rng) adj_rng_fill_uniform(rng, &x, 0, 1);
  adj_rng_destroy(&rng);
  adj_tensor y = {0};
  adj_tensor_destroy(&y);
  ADJ_TEST_OK(t, adj_tensor_copy(&x, &y));
  ADJ_TEST_OK(t, adj_tensor_create(&scalar, ADJ_FLOAT64, 0, NULL));
  expect(t, "copy of a scalar into a destroyed tensor", adj_tensor_copy(&x, &scalar), ADJ_ERR_SIZE,
         "shape [0] does not match []");
  adj_tensor_destroy(&scalar);
  adj_test_report(t, "  %-40s volume %lld; zero, fill, copy touch nothing", "destroyed tensor",
                  (long long)adj_tensor_volume(&x));
}

static void workspace_sizes(adj_test *t) {
  adj_workspace ws = {0};
  char label[64], phrase[64];
  const size_t sizes[2] = {SIZE_MAX - 10, SIZE_MAX};
  for (int i = 0; i < 2; i++) {
    snprintf(label, sizeof label, "adj_workspace_reserve(SIZE_MAX - %zu)", SIZE_MAX - sizes[i]);
    snprintf(phrase, sizeof phrase, "%zu bytes", sizes[i]);
    expect(t, label, adj_workspace_reserve(&ws, sizes[i]), ADJ_ERR_MEM, phrase);
    ADJ_TEST_CHECK(t, ws.data == NULL && ws.bytes == 0, "%s left %zu bytes", label, ws.bytes);
  }
  ADJ_TEST_OK(t, adj_workspace_reserve(&ws, 100));
  ADJ_TEST_CHECK(t, ws.data && ws.bytes == 128, "a 100-byte workspace holds %zu bytes", ws.bytes);
  adj_workspace_release(&ws);
}

static void enum_arguments(adj_test *t) {
  adj_dtype d = ADJ_FLOAT64;
  expect(t, "adj_dtype_parse(\"f32\", NULL)", adj_dtype_parse("f32", NULL), ADJ_ERR_ARG,
         "output dtype pointer is NULL");
  expect(t, "adj_dtype_parse(NULL, &dtype)", adj_dtype_parse(NULL, &d), ADJ_ERR_ARG, "text is NULL");
  adj_wait_policy p = ADJ_WAIT_AUTO;
  expect(t, "adj_wait_policy_resolve(7)", adj_wait_policy_resolve(t->comm, (adj_wait_policy)7, &p), ADJ_ERR_ARG,
         "wait policy 7");
  expect(t, "adj_wait_policy_resolve(-1)", adj_wait_policy_resolve(t->comm, (adj_wait_policy)-1, &p), ADJ_ERR_ARG,
         "wait policy -1");
  expect(t, "adj_wait_policy_resolve(resolved = NULL)", adj_wait_policy_resolve(t->comm, ADJ_WAIT_SPIN, NULL),
         ADJ_ERR_ARG, "output policy pointer is NULL");
  adj_op *op = NULL;
  ADJ_TEST_OK(t, adj_copy_create(ADJ_FLOAT64, 4, &op));
  if (!op) return;
  expect(t, "adj_op_set_wait_policy(7)", adj_op_set_wait_policy(op, (adj_wait_policy)7), ADJ_ERR_ARG, "wait policy 7");
  expect(t, "adj_op_set_wait_policy(NULL op)", adj_op_set_wait_policy(NULL, ADJ_WAIT_YIELD), ADJ_ERR_ARG,
         "operator is NULL");
  ADJ_TEST_OK(t, adj_op_set_wait_policy(op, ADJ_WAIT_YIELD));
  adj_op_destroy(&op);
}

static void overflowing_geometry(adj_test *t) {
  adj_partition *p = NULL;
  expect(t, "partition {65536, 65536, 65536, 65536}",
         adj_partition_create(t->comm, 4, (int[]){65536, 65536, 65536, 65536}, 0, NULL, &p), ADJ_ERR_ARG,
         "more than 2147483647 workers");
  ADJ_TEST_CHECK(t, p == NULL, "a refused partition was returned");
  int one = 1;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, &one, 1, NULL, &p));
  adj_partition *sub = NULL;
  expect(t, "sub-partition start INT_MAX", adj_partition_create_sub(p, (int[]){INT_MAX}, &one, &sub), ADJ_ERR_ARG,
         "range [2147483647, 2147483648) is outside the parent's extent 1");
  adj_partition_destroy(&p);
  adj_window_geometry g = {.spatial_dims = 1, .kernel = {INT64_MAX / 2}, .dilation = {4}};
  int64_t out[1] = {-1};
  expect(t, "window kernel INT64_MAX/2, dilation 4", adj_window_output_shape(&g, (int64_t[]){8}, out), ADJ_ERR_ARG,
         "kernel 4611686018427387903 with dilation 4");
  g = (adj_window_geometry){.spatial_dims = 1, .kernel = {1}, .padding_left = {INT64_MAX - 4}};
  expect(t, "window padding INT64_MAX - 4", adj_window_output_shape(&g, (int64_t[]){8}, out), ADJ_ERR_ARG,
         "input 8 with padding 9223372036854775803 + 0");
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t004-misuse");
  tensor_sizes(&t);
  null_arguments(&t);
  generator_states(&t);
  rng_below_range(&t);
  destroyed_tensor(&t);
  workspace_sizes(&t);
  enum_arguments(&t);
  overflowing_geometry(&t);
  return adj_test_finish(&t);
}
