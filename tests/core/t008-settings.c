/* t008: the process-wide settings (docs/configuration.md).  meson runs this
 * test with a malformed value in every variable: each is refused by name, also
 * by what is created under it, and still after the environment has changed
 * (it was read once); each setter refuses a value outside its range, replaces
 * the variable and reaches what is created afterwards. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"
#include "harness.h"

/* The malformed value is refused naming the variable and the value. */
static void expect_refused(adj_test *t, const char *variable, const char *value, int status, const char *reading) {
  char label[96], phrase[128];
  snprintf(label, sizeof label, "%s, %s reading", variable, reading);
  snprintf(phrase, sizeof phrase, "%s='%s'", variable, value);
  adj_test_expect_error(t, label, status, ADJ_ERR_ARG, phrase);
}

/* Every variable holds a malformed value (meson.build): the first reading
 * refuses it by name, and so does a reading after the environment has been
 * given good values: each variable was read once. */
static void check_read_once(adj_test *t) {
  static const char *const good[][2] = {{"ADJ_WAIT_POLICY", "spin"},        {"ADJ_CHECK", "full"},
                                        {"ADJ_SUM_REDUCE_ALGORITHM", "chain"}, {"ADJ_CHAIN_SEGMENT_BYTES", "4096"},
                                        {"ADJ_HALO_ALGORITHM", "direct"},    {"ADJ_CONV_ALGORITHM", "im2col"}};
  adj_wait_policy policy;
  adj_check_level level;
  adj_sum_algorithm sum;
  long bytes;
  adj_halo_algorithm halo;
  adj_conv_algorithm conv;
  for (int reading = 0; reading < 2; reading++) {
    const char *when = reading ? "second" : "first";
    expect_refused(t, "ADJ_WAIT_POLICY", "sometimes", adj_wait_policy_get_default(&policy), when);
    expect_refused(t, "ADJ_CHECK", "sometimes", adj_check_level_get_default(&level), when);
    expect_refused(t, "ADJ_SUM_REDUCE_ALGORITHM", "ring", adj_sum_algorithm_get_default(&sum), when);
    expect_refused(t, "ADJ_CHAIN_SEGMENT_BYTES", "-8", adj_chain_segment_bytes_get_default(&bytes), when);
    expect_refused(t, "ADJ_HALO_ALGORITHM", "diagonal", adj_halo_algorithm_get_default(&halo), when);
    expect_refused(t, "ADJ_CONV_ALGORITHM", "fft", adj_conv_algorithm_get_default(&conv), when);
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) setenv(good[i][0], good[i][1], 1);
  }
}

static void check_wait_policy(adj_test *t) {
  adj_wait_policy policy = ADJ_WAIT_AUTO;
  adj_test_expect_error(t, "adj_wait_policy_set_default(7)", adj_wait_policy_set_default((adj_wait_policy)7),
                        ADJ_ERR_ARG, "7");
  ADJ_TEST_OK(t, adj_wait_policy_set_default(ADJ_WAIT_YIELD));
  ADJ_TEST_OK(t, adj_wait_policy_get_default(&policy));
  ADJ_TEST_CHECK(t, policy == ADJ_WAIT_YIELD, "default wait policy %s after setting yield",
                 adj_wait_policy_name(policy));
  adj_wait_policy resolved = ADJ_WAIT_AUTO;
  ADJ_TEST_OK(t, adj_wait_policy_resolve(t->comm, ADJ_WAIT_SPIN, &resolved));
  ADJ_TEST_CHECK(t, resolved == ADJ_WAIT_YIELD, "a request of spin under the default yield resolved to %s",
                 adj_wait_policy_name(resolved));
  ADJ_TEST_OK(t, adj_wait_policy_set_default(ADJ_WAIT_AUTO));
  ADJ_TEST_OK(t, adj_wait_policy_resolve(t->comm, ADJ_WAIT_SPIN, &resolved));
  ADJ_TEST_CHECK(t, resolved == ADJ_WAIT_SPIN, "a request of spin under the default auto resolved to %s",
                 adj_wait_policy_name(resolved));
}

/* An all-sum-reduce over every rank, created under the current defaults. */
static adj_op *all_sum(adj_test *t, adj_partition *world, int *status) {
  adj_op *op = NULL;
  *status = adj_all_sum_reduce_create(ADJ_FLOAT64, world, 1, (const int64_t[]){16}, 1, (const int[]){0}, &op);
  return op;
}

static void check_check_level(adj_test *t, adj_partition *world) {
  adj_check_level level = ADJ_CHECK_AUTO;
  int created;
  adj_op *op = all_sum(t, world, &created);
  adj_test_expect_error(t, "an operator under ADJ_CHECK=sometimes", created, ADJ_ERR_ARG, "ADJ_CHECK='sometimes'");
  ADJ_TEST_CHECK(t, op == NULL, "a refused operator is not returned");
  adj_test_expect_error(t, "adj_check_level_set_default(9)", adj_check_level_set_default((adj_check_level)9),
                        ADJ_ERR_ARG, "9");
  ADJ_TEST_OK(t, adj_check_level_set_default(ADJ_CHECK_FIRST));
  op = all_sum(t, world, &created);
  ADJ_TEST_OK(t, created);
  ADJ_TEST_CHECK(t, op && adj_op_check_level(op) == ADJ_CHECK_FIRST, "an operator's level under the default first: %s",
                 op ? adj_check_level_name(adj_op_check_level(op)) : "none");
  adj_op_destroy(&op);
  ADJ_TEST_OK(t, adj_check_level_set_default(ADJ_CHECK_AUTO));
  ADJ_TEST_OK(t, adj_check_level_default(&level));
  ADJ_TEST_CHECK(t, level == ADJ_CHECK_FULL, "the default level after setting auto: %s", adj_check_level_name(level));
}

/* A sum-reduce of every rank's block onto rank 0, created under the current
 * defaults: the status of its creation and its algorithm's name. */
static int sum_reduce_algorithm(adj_test *t, adj_partition *world, char *name, size_t size) {
  adj_partition *root = NULL;
  adj_decomposition *y = NULL;
  adj_op *op = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){1}, 1, NULL, &root));
  ADJ_TEST_OK(t, adj_decomposition_create(root, 1, (const int64_t[]){64}, &y));
  int status = adj_sum_reduce_create(ADJ_FLOAT64, world, y, &op);
  snprintf(name, size, "%s", op ? adj_op_algorithm(op) : "none");
  adj_op_destroy(&op);
  adj_decomposition_destroy(&y);
  adj_partition_destroy(&root);
  return status;
}

static void check_sum_algorithm(adj_test *t, adj_partition *world) {
  char name[64];
  adj_test_expect_error(t, "a sum-reduce under ADJ_SUM_REDUCE_ALGORITHM=ring",
                        sum_reduce_algorithm(t, world, name, sizeof name), ADJ_ERR_ARG, "'ring'");
  adj_sum_algorithm algorithm;
  adj_test_expect_error(t, "adj_sum_algorithm_set_default(5)", adj_sum_algorithm_set_default((adj_sum_algorithm)5),
                        ADJ_ERR_ARG, "5");
  ADJ_TEST_OK(t, adj_sum_algorithm_set_default(ADJ_SUM_CHAIN));
  ADJ_TEST_OK(t, adj_sum_algorithm_get_default(&algorithm));
  ADJ_TEST_CHECK(t, algorithm == ADJ_SUM_CHAIN, "default summing algorithm %d after setting chain", (int)algorithm);

  long bytes = 0;
  adj_test_expect_error(t, "adj_chain_segment_bytes_set_default(-1)", adj_chain_segment_bytes_set_default(-1),
                        ADJ_ERR_ARG, "-1 bytes");
  ADJ_TEST_OK(t, adj_chain_segment_bytes_set_default(24));
  ADJ_TEST_OK(t, adj_chain_segment_bytes_get_default(&bytes));
  ADJ_TEST_CHECK(t, bytes == 24, "chain segment %ld bytes after setting 24", bytes);
  if (t->size > 1) {
    ADJ_TEST_OK(t, sum_reduce_algorithm(t, world, name, sizeof name));
    ADJ_TEST_CHECK(t, strstr(name, "chain") != NULL, "a sum-reduce under the default chain runs '%s'", name);
  }
  ADJ_TEST_OK(t, adj_chain_segment_bytes_set_default(0));
  ADJ_TEST_OK(t, adj_chain_segment_bytes_get_default(&bytes));
  ADJ_TEST_CHECK(t, bytes == 65536, "chain segment %ld bytes after setting 0 (the default)", bytes);
  ADJ_TEST_OK(t, adj_sum_algorithm_set_default(ADJ_SUM_AUTO));
}

static void check_algorithm_cache(adj_test *t) {
  char path[256];
  ADJ_TEST_OK(t, adj_algorithm_table_get_path(path, sizeof path));
  setenv("ADJ_ALGORITHM_CACHE", "/elsewhere", 1);
  char again[256];
  ADJ_TEST_OK(t, adj_algorithm_table_get_path(again, sizeof again));
  ADJ_TEST_CHECK(t, !strcmp(path, "/nonexistent/adjoin-t008") && !strcmp(again, path),
                 "table path from the environment '%s', after setenv '%s'", path, again);
  adj_test_expect_error(t, "adj_algorithm_table_set_path(NULL)", adj_algorithm_table_set_path(NULL), ADJ_ERR_ARG,
                        "NULL");
  ADJ_TEST_OK(t, adj_algorithm_table_set_path("/tmp/adjoin-t008-table"));
  ADJ_TEST_OK(t, adj_algorithm_table_get_path(path, sizeof path));
  ADJ_TEST_CHECK(t, !strcmp(path, "/tmp/adjoin-t008-table"), "table path after setting it: '%s'", path);
}

/* A halo exchange for a 3x3 kernel on a 4 x 5p plane cut in p columns,
 * created under the current defaults; its algorithm's name. */
static void halo_algorithm(adj_test *t, char *name, size_t size) {
  adj_partition *row = NULL;
  adj_halo_geometry *g = NULL;
  adj_op *op = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){1, t->size}, t->size, NULL, &row));
  ADJ_TEST_OK(t, adj_halo_geometry_create(2, (const int64_t[]){4, 5 * t->size}, (const int[]){1, t->size}, NULL,
                                          &(adj_halo_kernel){.size = {3, 3}}, &g));
  ADJ_TEST_OK(t, adj_halo_create(ADJ_FLOAT64, row, g, &op));
  snprintf(name, size, "%s", op ? adj_op_algorithm(op) : "none");
  adj_op_destroy(&op);
  adj_halo_geometry_destroy(&g);
  adj_partition_destroy(&row);
}

static void check_halo_algorithm(adj_test *t) {
  adj_test_expect_error(t, "adj_halo_algorithm_set_default(3)", adj_halo_algorithm_set_default((adj_halo_algorithm)3),
                        ADJ_ERR_ARG, "3");
  char name[64];
  ADJ_TEST_OK(t, adj_halo_algorithm_set_default(ADJ_HALO_DIRECT));
  halo_algorithm(t, name, sizeof name);
  ADJ_TEST_CHECK(t, strstr(name, "direct") != NULL, "a halo exchange under the default direct runs '%s'", name);
  ADJ_TEST_OK(t, adj_halo_algorithm_set_default(ADJ_HALO_AUTO));
  halo_algorithm(t, name, sizeof name);
  ADJ_TEST_CHECK(t, strstr(name, "nested") != NULL, "a halo exchange under the default auto runs '%s'", name);
}

/* A 3x3 convolution of 4 to 4 channels on 8x8 images, planned under the
 * current defaults; its algorithm. */
static adj_conv_algorithm planned_conv(adj_test *t, int *status) {
  adj_tensor x, w;
  adj_tensor_create(&x, ADJ_FLOAT32, 4, (const int64_t[]){1, 4, 8, 8});
  adj_tensor_create(&w, ADJ_FLOAT32, 4, (const int64_t[]){4, 4, 3, 3});
  adj_conv_plan *plan = NULL;
  adj_conv_plan_config config = {.geometry = {.spatial_dims = 2, .kernel = {3, 3}}};
  *status = adj_conv_plan_create(&config, &x, &w, &plan);
  adj_conv_algorithm algorithm = plan ? adj_conv_plan_algorithm(plan) : ADJ_CONV_ALGORITHM_AUTO;
  adj_conv_plan_destroy(&plan);
  adj_tensor_destroy(&x), adj_tensor_destroy(&w);
  return algorithm;
}

static void check_conv_algorithm(adj_test *t) {
  int planned;
  planned_conv(t, &planned);
  adj_test_expect_error(t, "a convolution plan under ADJ_CONV_ALGORITHM=fft", planned, ADJ_ERR_ARG, "'fft'");
  adj_test_expect_error(t, "adj_conv_algorithm_set_default(8)", adj_conv_algorithm_set_default((adj_conv_algorithm)8),
                        ADJ_ERR_ARG, "8");
  ADJ_TEST_OK(t, adj_conv_algorithm_set_default(ADJ_CONV_ALGORITHM_IM2COL));
  adj_conv_algorithm algorithm = planned_conv(t, &planned);
  ADJ_TEST_OK(t, planned);
  ADJ_TEST_CHECK(t, algorithm == ADJ_CONV_ALGORITHM_IM2COL, "a plan under the default im2col runs %s",
                 adj_conv_algorithm_name(algorithm));
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t008-settings");
  check_read_once(&t);
  check_wait_policy(&t); /* before any partition: a partition resolves the wait policy */
  adj_partition *world = NULL;
  if (adj_partition_create(t.comm, 1, (const int[]){t.size}, t.size, NULL, &world) == ADJ_SUCCESS) {
    check_check_level(&t, world);
    check_sum_algorithm(&t, world);
  }
  ADJ_TEST_CHECK(&t, world != NULL, "a partition of every rank: %s", adj_last_error());
  adj_partition_destroy(&world);
  check_algorithm_cache(&t);
  check_halo_algorithm(&t);
  check_conv_algorithm(&t);
  return adj_test_finish(&t);
}
