/* Misuse of public entry points: sizes whose byte count overflows, NULL for a
 * required argument, and generator states no generator produces.  Each call
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
  expect(t, "adj_lenet_create(out = NULL)", adj_lenet_create(&(adj_lenet_config){.comm = t->comm}, NULL), ADJ_ERR_ARG,
         "output network pointer are required");
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
  expect(t, "adj_dataset_random(out = NULL)", adj_dataset_random(4, 2, 2, 10, 1, NULL), ADJ_ERR_ARG,
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

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t004-misuse");
  tensor_sizes(&t);
  null_arguments(&t);
  generator_states(&t);
  return adj_test_finish(&t);
}
