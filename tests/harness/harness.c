#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { ADJ_TEST_MAX_PRINTED = 10 };

void adj_test_begin(adj_test *t, int *argc, char ***argv, const char *name) {
  *t = (adj_test){.name = name, .comm = MPI_COMM_WORLD};
  if (adj_init(argc, argv, &t->rank, &t->size)) {
    fprintf(stderr, "%s: %s\n", name, adj_last_error());
    exit(1);
  }
}

void adj_test_record(adj_test *t, int ok, const char *file, int line, const char *fmt, ...) {
  t->checks++;
  if (ok) return;
  if (t->errors++ < ADJ_TEST_MAX_PRINTED) {
    char message[1200];
    va_list args;
    va_start(args, fmt);
    vsnprintf(message, sizeof message, fmt, args);
    va_end(args);
    fprintf(stderr, "[rank %d] %s:%d: %s\n", t->rank, file, line, message);
  }
}

void adj_test_report(adj_test *t, const char *fmt, ...) {
  if (t->rank != 0) return;
  va_list args;
  va_start(args, fmt);
  vprintf(fmt, args);
  va_end(args);
  printf("\n");
  fflush(stdout);
}

int adj_test_finish(adj_test *t) {
  int errors = 0, checks = 0;
  MPI_Allreduce(&t->errors, &errors, 1, MPI_INT, MPI_SUM, t->comm);
  MPI_Allreduce(&t->checks, &checks, 1, MPI_INT, MPI_SUM, t->comm);
  if (t->rank == 0) {
    if (errors) printf("%s: Found %d errors in %d checks on %d ranks\n", t->name, errors, checks, t->size);
    else printf("%s: No Errors (%d checks on %d ranks)\n", t->name, checks, t->size);
  }
  adj_finalize();
  /* A test that checked nothing has not shown anything. */
  return (errors || checks == 0) ? 1 : 0;
}

int adj_test_skip(adj_test *t, const char *why) {
  if (t->rank == 0) printf("%s: skipped: %s\n", t->name, why);
  adj_finalize();
  return 77;
}

int adj_test_expect_error(adj_test *t, const char *label, int status, int code, const char *phrase) {
  char mine[1024], root[1024];
  snprintf(mine, sizeof mine, "%s", adj_last_error());
  memcpy(root, mine, sizeof root);
  MPI_Bcast(root, (int)sizeof root, MPI_CHAR, 0, t->comm);
  int ok_code = code == ADJ_TEST_ANY_ERROR ? status != ADJ_SUCCESS : status == code;
  int ok_phrase = strstr(mine, phrase) != NULL, ok_same = strcmp(mine, root) == 0;
  ADJ_TEST_CHECK(t, ok_code, "%s: status %s, expected %s (message '%s')", label, adj_status_name(status),
                 code == ADJ_TEST_ANY_ERROR ? "a failure" : adj_status_name(code), mine);
  ADJ_TEST_CHECK(t, ok_phrase, "%s: message '%s' lacks '%s'", label, mine, phrase);
  ADJ_TEST_CHECK(t, ok_same, "%s: message '%s' differs from rank 0's '%s'", label, mine, root);
  int ok = ok_code && ok_phrase && ok_same, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, t->comm);
  adj_test_report(t, "  %-40s %s: %s", label, all ? "fails alike on every rank" : "NOT alike on every rank", root);
  return all;
}

double adj_test_max_rel_diff(const adj_tensor *a, const adj_tensor *b) {
  int64_t n = adj_tensor_volume(b);
  double scale = 1.0, diff = 0.0;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(adj_tensor_get(b, i)));
  for (int64_t i = 0; i < n; i++) diff = fmax(diff, fabs(adj_tensor_get(a, i) - adj_tensor_get(b, i)));
  return diff / scale;
}

const adj_dtype adj_test_movement_dtypes[ADJ_TEST_MOVEMENT_DTYPES] = {ADJ_FLOAT64, ADJ_FLOAT32, ADJ_INT32, ADJ_INT64,
                                                                    ADJ_UINT8};

double adj_test_as_dtype(adj_dtype dtype, double value) {
  unsigned char storage[8];
  adj_tensor one;
  adj_tensor_view(&one, dtype, 0, NULL, storage);
  adj_tensor_set(&one, 0, value);
  return adj_tensor_get(&one, 0);
}

void adj_test_fill_global_index(adj_tensor *t, const adj_box *box, const int64_t *global) {
  int rank = box->rank;
  int64_t n = adj_box_volume(box);
  for (int64_t i = 0; i < n; i++) {
    int64_t rest = i, flat = 0, stride = 1;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t local = rest % box->extent[d];
      rest /= box->extent[d];
      flat += (box->start[d] + local) * stride;
      stride *= global[d];
    }
    adj_tensor_set(t, i, (double)(1 + flat));
  }
}

int adj_test_mlp15(adj_dtype dtype, const adj_decomposition *input, int layers, const int64_t *widths,
                   adj_layer **net) {
  enum { MAX_LAYERS = 16 };
  *net = NULL;
  if (layers < 1 || layers > MAX_LAYERS) return ADJ_ERR_ARG;
  adj_layer *stages[2 * MAX_LAYERS] = {0};
  int n = 0, status = ADJ_SUCCESS;
  const adj_decomposition *x = input;
  for (int i = 0; i < layers && !status; i++) {
    adj_affine15_layer_config ac = {.dtype = dtype, .input = x, .out_features = widths[i]};
    status = adj_affine15_layer_create(&ac, &stages[n]);
    if (status) break;
    x = adj_layer_output_layout(stages[n++]);
    if (i + 1 == layers) break;
    adj_activation_layer_config rc = {.dtype = dtype, .input = x, .activation = {ADJ_RELU, 0}};
    status = adj_activation_layer_create(&rc, &stages[n]);
    if (!status) x = adj_layer_output_layout(stages[n++]);
  }
  if (!status) status = adj_network_create("mlp15", n, stages, net);
  for (int i = 0; i < n; i++) adj_layer_destroy(&stages[i]);
  return status;
}
