/* t006: checked numbers from text (parse.h), alone and in lists, keep a
 * value exactly or refuse it naming its source, text and place; an error's
 * trail names each frame it passed, and an error agreed across ranks carries
 * the failing rank's trail. */
#include <stdint.h>
#include <string.h>

#include "agree_impl.h"
#include "error_impl.h"
#include "harness.h"

/* A refusal with ADJ_ERR_ARG whose message contains every phrase. */
static void expect_refused(adj_test *t, int status, const char *a, const char *b) {
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), a) && (!b || strstr(adj_last_error(), b)),
                 "expected a refusal naming '%s'%s%s, got %s: %s", a, b ? " and " : "", b ? b : "",
                 adj_status_name(status), adj_last_error());
}

static void check_integers(adj_test *t) {
  int64_t v = 7;
  ADJ_TEST_OK(t, adj_parse_int64("-12", -100, 100, "--x", &v));
  ADJ_TEST_CHECK(t, v == -12, "'-12' read as %lld", (long long)v);
  ADJ_TEST_OK(t, adj_parse_int64("9223372036854775807", 0, INT64_MAX, "--x", &v));
  ADJ_TEST_CHECK(t, v == INT64_MAX, "INT64_MAX read as %lld", (long long)v);
  v = 7;
  expect_refused(t, adj_parse_int64("9223372036854775808", 0, INT64_MAX, "--big", &v), "--big", "out of range");
  expect_refused(t, adj_parse_int64("12x", 0, 100, "net.net:3: conv1 out", &v), "net.net:3: conv1 out '12x'",
                 "not an integer");
  expect_refused(t, adj_parse_int64("", 0, 100, "--batch", &v), "--batch ''", "not an integer");
  expect_refused(t, adj_parse_int64(" 5", 0, 100, "--batch", &v), "--batch ' 5'", "not an integer");
  expect_refused(t, adj_parse_int64(NULL, 0, 100, "--batch", &v), "--batch has no value", NULL);
  ADJ_TEST_CHECK(t, v == 7, "a refused value changed the output to %lld", (long long)v);
  int i = 3;
  /* 2^32 + 1 would be 1 if truncated to 32 bits. */
  expect_refused(t, adj_parse_int("4294967297", 1, INT32_MAX, "--grid rows", &i), "'4294967297'",
                 "out of range 1..2147483647");
  ADJ_TEST_CHECK(t, i == 3, "a refused int changed the output to %d", i);
}

static void check_reals_and_bytes(adj_test *t) {
  double r = 0;
  ADJ_TEST_OK(t, adj_parse_real("1e-3", 0, 1, "--lr", &r));
  ADJ_TEST_CHECK(t, r == 1e-3, "'1e-3' read as %g", r);
  expect_refused(t, adj_parse_real("nan", 0, 1, "--lr", &r), "--lr 'nan'", "not a finite number");
  expect_refused(t, adj_parse_real("inf", 0, 1e300, "--lr", &r), "--lr 'inf'", NULL);
  expect_refused(t, adj_parse_real("1e999", 0, 1e300, "--lr", &r), "'1e999'", NULL);
  expect_refused(t, adj_parse_real("2", 0, 1, "--momentum", &r), "--momentum '2'", "out of range");
  int64_t b = 0;
  ADJ_TEST_OK(t, adj_parse_bytes("2GiB", 0, INT64_MAX, "--memory", &b));
  ADJ_TEST_CHECK(t, b == (int64_t)2 << 30, "'2GiB' read as %lld", (long long)b);
  ADJ_TEST_OK(t, adj_parse_bytes("25M", 0, INT64_MAX, "--memory", &b));
  ADJ_TEST_CHECK(t, b == (int64_t)25 << 20, "'25M' read as %lld", (long long)b);
  ADJ_TEST_OK(t, adj_parse_bytes("4096B", 0, INT64_MAX, "--memory", &b));
  ADJ_TEST_CHECK(t, b == 4096, "'4096B' read as %lld", (long long)b);
  expect_refused(t, adj_parse_bytes("16777216T", 0, INT64_MAX, "--memory", &b), "'16777216T'", "out of range");
  expect_refused(t, adj_parse_bytes("2GB!", 0, INT64_MAX, "--memory", &b), "'2GB!'", "follows the digits");
  expect_refused(t, adj_parse_bytes("-1", 0, INT64_MAX, "--memory", &b), "'-1'", "not a byte count");
  int64_t p = 0;
  ADJ_TEST_OK(t, adj_int64_mul(INT32_MAX, INT32_MAX, "fc1 weights", &p));
  expect_refused(t, adj_int64_mul(INT64_MAX / 2, 3, "fc1 weights", &p), "fc1 weights:", "beyond int64");
  expect_refused(t, adj_int64_add(INT64_MAX, 1, "total", &p), "total:", "beyond int64");
}

/* Lists and unsigned values: every entry range-checked and named by place,
 * no empty entry and none past the most allowed. */
static void check_lists(adj_test *t) {
  int64_t v[3] = {0}, pair[2] = {7, 7};
  int n = 0;
  ADJ_TEST_OK(t, adj_parse_int64_list("8,1,3", ',', 3, 0, 100, "--shape", v, &n));
  ADJ_TEST_CHECK(t, n == 3 && v[0] == 8 && v[1] == 1 && v[2] == 3, "'8,1,3' read as %d entries %lld %lld %lld", n,
                 (long long)v[0], (long long)v[1], (long long)v[2]);
  expect_refused(t, adj_parse_int64_list("8,,3", ',', 3, 0, 100, "--shape", v, &n), "--shape '8,,3'",
                 "entry 2 is empty");
  expect_refused(t, adj_parse_int64_list("1,2,3,4", ',', 3, 0, 100, "--shape", v, &n), "'1,2,3,4'",
                 "more than 3 entries");
  expect_refused(t, adj_parse_int64_list("8,", ',', 3, 0, 100, "--shape", v, &n), "'8,'", "entry 2 is empty");
  ADJ_TEST_OK(t, adj_parse_int64_pair("2x3", 'x', 1, INT32_MAX, "--grid", pair));
  ADJ_TEST_CHECK(t, pair[0] == 2 && pair[1] == 3, "'2x3' read as %lldx%lld", (long long)pair[0], (long long)pair[1]);
  /* 2^32 + 1 rows are refused, not truncated to 32 bits and read as 1. */
  expect_refused(t, adj_parse_int64_pair("4294967297x1", 'x', 1, INT32_MAX, "--grid", pair),
                 "--grid '4294967297x1': entry 1 '4294967297'", "out of range 1..2147483647");
  expect_refused(t, adj_parse_int64_pair("4", 'x', 1, INT32_MAX, "--grid", pair), "--grid '4'",
                 "not two numbers joined by 'x'");
  expect_refused(t, adj_parse_int64_pair("2x3x4", 'x', 1, INT32_MAX, "--grid", pair), "'2x3x4'", "more than 2");
  ADJ_TEST_CHECK(t, pair[0] == 2 && pair[1] == 3, "a refused pair changed the output to %lldx%lld",
                 (long long)pair[0], (long long)pair[1]);
  double r[2];
  ADJ_TEST_OK(t, adj_parse_real_list("0.5,2e-3", ',', 2, 0, 1, "--tp-times", r, &n));
  ADJ_TEST_CHECK(t, n == 2 && r[0] == 0.5 && r[1] == 2e-3, "'0.5,2e-3' read as %g %g", r[0], r[1]);
  expect_refused(t, adj_parse_real_list("0.5,nan", ',', 2, 0, 1, "--tp-times", r, &n), "entry 2 'nan'",
                 "not a finite number");
  uint64_t u = 5;
  ADJ_TEST_OK(t, adj_parse_uint64("18446744073709551615", UINT64_MAX, "--seed", &u));
  ADJ_TEST_CHECK(t, u == UINT64_MAX, "UINT64_MAX read as %llu", (unsigned long long)u);
  expect_refused(t, adj_parse_uint64("18446744073709551616", UINT64_MAX, "--seed", &u), "--seed", "out of range");
  expect_refused(t, adj_parse_uint64("-1", UINT64_MAX, "--seed", &u), "--seed '-1'", "not a whole number");
  expect_refused(t, adj_parse_uint64("-0", UINT64_MAX, "--seed", &u), "--seed '-0'", "not a whole number");
  expect_refused(t, adj_parse_uint64("2147483648", INT32_MAX, "--min-ranks", &u), "'2147483648'",
                 "out of range 0..2147483647");
}

/* Two frames deep: the trail names both functions, innermost first. */
static int inner_failure(void) {
  ADJ_CHECK(false, ADJ_ERR_SIZE, "inner failed");
  return ADJ_SUCCESS;
}
static int outer_call(void) {
  ADJ_CALL(inner_failure());
  return ADJ_SUCCESS;
}

static void check_trail(adj_test *t) {
  int status = outer_call();
  const char *trail = adj_last_error_trace();
  const char *in = strstr(trail, "tests/core/t006-parse-trace.c:"), *out = strstr(trail, "(outer_call)");
  ADJ_TEST_CHECK(t, status == ADJ_ERR_SIZE && in && strstr(trail, "(inner_failure)") && out &&
                        strstr(trail, "(inner_failure)") < out,
                 "trail of a two-frame error:\n%s", trail);
  /* A new error starts a new trail. */
  adj_error_set(ADJ_ERR_ARG, "fresh");
  ADJ_TEST_CHECK(t, adj_last_error_trace()[0] == '\0', "a new error kept the old trail:\n%s", adj_last_error_trace());
  /* Agreed across ranks: every rank gets the failing rank's trail. */
  int failing = t->size - 1;
  adj_clear_error();
  int local = t->rank == failing ? outer_call() : ADJ_SUCCESS;
  int agreed = adj_status_agree(t->comm, local, ADJ_WAIT_YIELD);
  ADJ_TEST_CHECK(t, agreed == ADJ_ERR_SIZE && strstr(adj_last_error_trace(), "(inner_failure)") &&
                        strstr(adj_last_error_trace(), "(outer_call)"),
                 "rank %d: agreed error lost rank %d's trail:\n%s", t->rank, failing, adj_last_error_trace());
  adj_test_report(t, "agreed trail on every rank:\n%s", adj_last_error_trace());
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t006-parse-trace");
  check_integers(&t);
  check_reals_and_bytes(&t);
  check_lists(&t);
  check_trail(&t);
  return adj_test_finish(&t);
}
