/* The convolution plan's rule (adjoin/kernels.h) against the GEMMs it has:
 * with OpenBLAS kernels that have AVX2 and FMA, direct takes LeNet's conv1
 * and conv2 and shifted the 64->64 layer, except that at the baseline level
 * shifted also takes conv2; with older kernels (registered again under
 * OPENBLAS_CORETYPE=Prescott) direct takes every shape at x86-64-v3 and v4,
 * and at the baseline the shapes it wins alone (conv1, conv2).  Shapes with a
 * stride take im2col everywhere. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "threads_impl.h"

typedef struct choice_case {
  const char *name;
  int64_t c_in, c_out, size, k, pad, stride;
  /* the rule's choice: [fast BLAS][wide vectors (v3, v4)] */
  adj_conv_algorithm expected[2][2];
} choice_case;

#define DIRECT ADJ_CONV_ALGORITHM_DIRECT
#define SHIFTED ADJ_CONV_ALGORITHM_SHIFTED
#define IM2COL ADJ_CONV_ALGORITHM_IM2COL

static const choice_case cases[] = {
    {"LeNet conv1 1->6 5x5 pad 2 28x28", 1, 6, 28, 5, 2, 1, {{DIRECT, DIRECT}, {DIRECT, DIRECT}}},
    {"LeNet conv2 6->16 5x5 14x14", 6, 16, 14, 5, 0, 1, {{DIRECT, DIRECT}, {SHIFTED, DIRECT}}},
    {"64->64 3x3 pad 1 56x56", 64, 64, 56, 3, 1, 1, {{SHIFTED, DIRECT}, {SHIFTED, SHIFTED}}},
    {"6->16 5x5 stride 2 14x14", 6, 16, 14, 5, 0, 2, {{IM2COL, IM2COL}, {IM2COL, IM2COL}}},
};

static adj_conv_algorithm chosen(adj_test *t, const choice_case *c) {
  adj_window_geometry g = {.spatial_dims = 2, .kernel = {c->k, c->k}, .stride = {c->stride, c->stride},
                           .padding_left = {c->pad, c->pad}, .padding_right = {c->pad, c->pad}};
  int64_t xs[4] = {2, c->c_in, c->size, c->size}, ws[4] = {c->c_out, c->c_in, c->k, c->k};
  adj_tensor x = {0}, w = {0};
  adj_conv_plan *plan = NULL;
  adj_conv_algorithm algorithm = ADJ_CONV_ALGORITHM_AUTO;
  adj_conv_plan_config config = {.geometry = g, .algorithm = ADJ_CONV_ALGORITHM_AUTO};
  int status = adj_tensor_create(&x, ADJ_FLOAT32, 4, xs);
  if (!status) status = adj_tensor_create(&w, ADJ_FLOAT32, 4, ws);
  if (!status) status = adj_conv_plan_create(&config, &x, &w, &plan);
  ADJ_TEST_CHECK(t, !status, "%s: %s", c->name, adj_last_error());
  if (!status) algorithm = adj_conv_plan_algorithm(plan);
  adj_conv_plan_destroy(&plan);
  adj_tensor_destroy(&x);
  adj_tensor_destroy(&w);
  return algorithm;
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t305-conv-choice");
  unsetenv("ADJ_CONV_ALGORITHM"); /* the rule itself, not an override */
  bool fast = adj_blas_kernels_fast(), wide = strcmp(adj_kernels_isa(), "baseline") != 0;
  const char *coretype = getenv("OPENBLAS_CORETYPE");
  adj_test_report(&t, "kernels %s, OpenBLAS kernels %s (OPENBLAS_CORETYPE %s): %s", adj_kernels_isa(),
                  openblas_get_corename(), coretype ? coretype : "unset", fast ? "AVX2 and FMA" : "older");
#if defined(__x86_64__)
  if (coretype && strcmp(coretype, "Prescott") == 0)
    ADJ_TEST_CHECK(&t, !fast, "OpenBLAS's Prescott kernels were taken for AVX2 ones");
#endif
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    adj_conv_algorithm got = chosen(&t, &cases[i]), want = cases[i].expected[fast][wide];
    adj_test_report(&t, "%-34s chose %-8s (rule: %s)", cases[i].name, adj_conv_algorithm_name(got),
                    adj_conv_algorithm_name(want));
    ADJ_TEST_CHECK(&t, got == want, "%s: chose %s, the rule says %s", cases[i].name, adj_conv_algorithm_name(got),
                   adj_conv_algorithm_name(want));
  }
  return adj_test_finish(&t);
}
