/* The integer dtypes: the dtype table (names, short names, sizes, which ones
 * compute), exact integer element access, and the local adds every reduction
 * uses (adj_tensor_add, unpack-add, box add), which wrap modulo 2^bits in two's
 * complement: INT32_MAX + 1 is INT32_MIN and 250 + 10 is 4 in uint8. */
#include <limits.h>
#include <string.h>

#include "harness.h"

typedef struct dtype_row {
  adj_dtype dtype;
  const char *name, *short_name;
  size_t size;
  int is_float;
} dtype_row;

static const dtype_row rows[] = {
    {ADJ_FLOAT32, "float32", "f32", 4, 1}, {ADJ_FLOAT64, "float64", "f64", 8, 1}, {ADJ_INT32, "int32", "i32", 4, 0},
    {ADJ_INT64, "int64", "i64", 8, 0},     {ADJ_UINT8, "uint8", "u8", 1, 0},
};
enum { ROWS = (int)(sizeof rows / sizeof rows[0]) };

static void check_table(adj_test *t) {
  for (int i = 0; i < ROWS; i++) {
    const dtype_row *r = &rows[i];
    adj_dtype parsed = (adj_dtype)-1, parsed_short = (adj_dtype)-1;
    ADJ_TEST_OK(t, adj_dtype_parse(r->name, &parsed));
    ADJ_TEST_OK(t, adj_dtype_parse(r->short_name, &parsed_short));
    ADJ_TEST_CHECK(t, parsed == r->dtype && parsed_short == r->dtype, "%s: parses to %d and %d", r->name, (int)parsed,
                   (int)parsed_short);
    ADJ_TEST_CHECK(t, !strcmp(adj_dtype_name(r->dtype), r->name), "dtype %d is named %s", (int)r->dtype,
                   adj_dtype_name(r->dtype));
    ADJ_TEST_CHECK(t, adj_dtype_size(r->dtype) == r->size, "%s: %zu bytes", r->name, adj_dtype_size(r->dtype));
    ADJ_TEST_CHECK(t, adj_dtype_valid(r->dtype) && !adj_dtype_is_float(r->dtype) == !r->is_float,
                   "%s: valid %d, float %d", r->name, adj_dtype_valid(r->dtype), adj_dtype_is_float(r->dtype));
  }
  adj_dtype d;
  ADJ_TEST_CHECK(t, !adj_dtype_valid((adj_dtype)5) && adj_dtype_size((adj_dtype)5) == 0 &&
                        !strcmp(adj_dtype_name((adj_dtype)5), "invalid") && !adj_dtype_is_float((adj_dtype)-1),
                 "dtype 5 is not a dtype");
  int status = adj_dtype_parse("int16", &d);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "'int16'") && strstr(adj_last_error(), "u8"),
                 "parse int16: %s", adj_last_error());
  adj_test_report(t, "dtype table: %d dtypes, names, short names and sizes agree; 'int16' refused: %s", ROWS,
                  adj_last_error());
}

/* set_int keeps the low bits; get_int reads them back exactly, past 2^53 too. */
static void check_access(adj_test *t) {
  static const struct {
    adj_dtype dtype;
    int64_t set, want;
  } cases[] = {
      {ADJ_INT32, INT64_C(2147483648), INT32_MIN}, {ADJ_INT32, -1, -1},     {ADJ_INT32, INT64_C(4294967297), 1},
      {ADJ_UINT8, 256 + 7, 7},                     {ADJ_UINT8, -1, 255},    {ADJ_INT64, INT64_MAX, INT64_MAX},
      {ADJ_INT64, (INT64_C(1) << 53) + 1, (INT64_C(1) << 53) + 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    adj_tensor x;
    ADJ_TEST_OK(t, adj_tensor_create(&x, cases[i].dtype, 1, (const int64_t[]){3}));
    adj_tensor_set_int(&x, 1, cases[i].set);
    int64_t got = adj_tensor_get_int(&x, 1);
    ADJ_TEST_CHECK(t, got == cases[i].want, "%s: set %lld reads %lld, expected %lld", adj_dtype_name(x.dtype),
                   (long long)cases[i].set, (long long)got, (long long)cases[i].want);
    ADJ_TEST_CHECK(t, adj_tensor_get_int(&x, 0) == 0 && adj_tensor_get_int(&x, 2) == 0,
                   "%s: set_int wrote outside its element", adj_dtype_name(x.dtype));
    adj_tensor_destroy(&x);
  }
  adj_tensor x;
  ADJ_TEST_OK(t, adj_tensor_create(&x, ADJ_INT32, 1, (const int64_t[]){1}));
  adj_tensor_set(&x, 0, -7.9);
  ADJ_TEST_CHECK(t, adj_tensor_get(&x, 0) == -7.0, "int32 set(-7.9) reads %g, expected -7 (truncation)",
                 adj_tensor_get(&x, 0));
  adj_tensor_destroy(&x);
  adj_test_report(t, "exact access: %zu wrap cases, 2^53 + 1 kept in int64, set(-7.9) truncates to -7",
                  sizeof cases / sizeof cases[0]);
}

/* dst = a + b elementwise three ways (tensor add, unpack-add, box add), each
 * compared with the expected wrapped sums. */
static void check_add(adj_test *t, adj_dtype dtype, const int64_t *a, const int64_t *b, const int64_t *want, int n) {
  const int64_t shape[1] = {n};
  adj_tensor x, y, packed;
  ADJ_TEST_OK(t, adj_tensor_create(&x, dtype, 1, shape));
  ADJ_TEST_OK(t, adj_tensor_create(&y, dtype, 1, shape));
  ADJ_TEST_OK(t, adj_tensor_create(&packed, dtype, 1, shape));
  adj_box whole = adj_box_whole(1, shape);
  for (int way = 0; way < 3; way++) {
    for (int i = 0; i < n; i++) adj_tensor_set_int(&x, i, a[i]), adj_tensor_set_int(&y, i, b[i]);
    if (way == 0) ADJ_TEST_OK(t, adj_tensor_add(&x, &y));
    if (way == 1) {
      adj_tensor_pack(&y, &whole, packed.data);
      adj_tensor_unpack(&x, &whole, packed.data, ADJ_UNPACK_ADD);
    }
    if (way == 2) adj_tensor_copy_box(&x, &whole, &y, &whole, ADJ_UNPACK_ADD);
    int wrong = 0;
    for (int i = 0; i < n; i++) wrong += adj_tensor_get_int(&x, i) != want[i];
    ADJ_TEST_CHECK(t, wrong == 0, "%s add (way %d): %d of %d sums differ from the wrapped sums",
                   adj_dtype_name(dtype), way, wrong, n);
  }
  adj_test_report(t, "%s: %lld + %lld = %lld, %lld + %lld = %lld by tensor add, unpack-add and box add",
                  adj_dtype_name(dtype), (long long)a[0], (long long)b[0], (long long)want[0], (long long)a[1],
                  (long long)b[1], (long long)want[1]);
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&packed);
}

static void check_adds(adj_test *t) {
  check_add(t, ADJ_INT32, (const int64_t[]){INT32_MAX, INT32_MIN, -5}, (const int64_t[]){1, -1, 3},
            (const int64_t[]){INT32_MIN, INT32_MAX, -2}, 3);
  check_add(t, ADJ_INT64, (const int64_t[]){INT64_MAX, INT64_MIN, -5}, (const int64_t[]){1, -1, 3},
            (const int64_t[]){INT64_MIN, INT64_MAX, -2}, 3);
  check_add(t, ADJ_UINT8, (const int64_t[]){250, 0, 100}, (const int64_t[]){10, 255, 100},
            (const int64_t[]){4, 255, 200}, 3);
}

/* Tensors of every integer dtype create, copy, and refuse a mixed copy. */
static void check_copy(adj_test *t) {
  adj_tensor a, b;
  ADJ_TEST_OK(t, adj_tensor_create(&a, ADJ_UINT8, 2, (const int64_t[]){2, 3}));
  ADJ_TEST_OK(t, adj_tensor_create(&b, ADJ_INT32, 2, (const int64_t[]){2, 3}));
  ADJ_TEST_CHECK(t, adj_tensor_bytes(&a) == 6 && adj_tensor_bytes(&b) == 24, "bytes %zu and %zu", adj_tensor_bytes(&a),
                 adj_tensor_bytes(&b));
  int status = adj_tensor_copy(&b, &a);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_DTYPE && strstr(adj_last_error(), "int32") && strstr(adj_last_error(), "uint8"),
                 "mixed copy: %s", adj_last_error());
  adj_tensor_destroy(&a), adj_tensor_destroy(&b);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t240-int-dtype");
  check_table(&t);
  check_access(&t);
  check_adds(&t);
  check_copy(&t);
  return adj_test_finish(&t);
}
