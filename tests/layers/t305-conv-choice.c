/* The convolution plan's rule (adjoin/conv.h) against the GEMMs it has,
 * for the forward and for the backward without dx (a first layer's).  With
 * OpenBLAS kernels that have AVX2 and FMA, direct takes LeNet's conv1 and
 * conv2 and shifted the 64->64 layer, except that at the baseline level
 * beside AVX-512 GEMMs (four times its vectors' width) shifted also takes
 * conv2; without dx shifted takes conv2 at the baseline beside AVX2 GEMMs
 * and conv1 too beside AVX-512 ones, direct the 64->64 layer at x86-64-v4
 * and im2col it below; the encoder-decoder's 16->32 layer on its 14x14 plane
 * goes direct at x86-64-v4 (16 float32 lanes, its 32 output channels along
 * them) and as the 64->64 layer below.  With older kernels (registered again under
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
  /* the rule's choice: [OpenBLAS's vectors: older, AVX2, AVX-512][level: baseline, v3, v4]
   * [the forward, the backward without dx] */
  adj_conv_algorithm expected[3][3][2];
} choice_case;

#define DIRECT ADJ_CONV_ALGORITHM_DIRECT
#define SHIFTED ADJ_CONV_ALGORITHM_SHIFTED
#define IM2COL ADJ_CONV_ALGORITHM_IM2COL

static const choice_case cases[] = {
    {"LeNet conv1 1->6 5x5 pad 2 28x28", 1, 6, 28, 5, 2, 1,
     {{{DIRECT, DIRECT}, {DIRECT, DIRECT}, {DIRECT, DIRECT}},
      {{DIRECT, DIRECT}, {DIRECT, DIRECT}, {DIRECT, DIRECT}},
      {{DIRECT, SHIFTED}, {DIRECT, DIRECT}, {DIRECT, DIRECT}}}},
    {"LeNet conv2 6->16 5x5 14x14", 6, 16, 14, 5, 0, 1,
     {{{DIRECT, DIRECT}, {DIRECT, DIRECT}, {DIRECT, DIRECT}},
      {{DIRECT, SHIFTED}, {DIRECT, DIRECT}, {DIRECT, DIRECT}},
      {{SHIFTED, SHIFTED}, {DIRECT, DIRECT}, {DIRECT, DIRECT}}}},
    {"64->64 3x3 pad 1 56x56", 64, 64, 56, 3, 1, 1,
     {{{SHIFTED, IM2COL}, {DIRECT, DIRECT}, {DIRECT, DIRECT}},
      {{SHIFTED, IM2COL}, {SHIFTED, IM2COL}, {SHIFTED, DIRECT}},
      {{SHIFTED, IM2COL}, {SHIFTED, IM2COL}, {SHIFTED, DIRECT}}}},
    {"encdec enc2 16->32 3x3 pad 1 14x14", 16, 32, 14, 3, 1, 1,
     {{{SHIFTED, IM2COL}, {DIRECT, DIRECT}, {DIRECT, DIRECT}},
      {{SHIFTED, IM2COL}, {SHIFTED, IM2COL}, {DIRECT, DIRECT}},
      {{SHIFTED, IM2COL}, {SHIFTED, IM2COL}, {DIRECT, DIRECT}}}},
    {"6->16 5x5 stride 2 14x14", 6, 16, 14, 5, 0, 2,
     {{{IM2COL, IM2COL}, {IM2COL, IM2COL}, {IM2COL, IM2COL}},
      {{IM2COL, IM2COL}, {IM2COL, IM2COL}, {IM2COL, IM2COL}},
      {{IM2COL, IM2COL}, {IM2COL, IM2COL}, {IM2COL, IM2COL}}}},
};

/* The plan's choices for case c: [0] the forward's, [1] the backward's without dx. */
static void chosen(adj_test *t, const choice_case *c, adj_conv_algorithm algorithms[2]) {
  adj_window_geometry g = {.spatial_dims = 2, .kernel = {c->k, c->k}, .stride = {c->stride, c->stride},
                           .padding_left = {c->pad, c->pad}, .padding_right = {c->pad, c->pad}};
  int64_t xs[4] = {2, c->c_in, c->size, c->size}, ws[4] = {c->c_out, c->c_in, c->k, c->k};
  adj_tensor x = {0}, w = {0};
  adj_conv_plan *plan = NULL;
  adj_conv_plan_config config = {.geometry = g, .algorithm = ADJ_CONV_ALGORITHM_AUTO};
  int status = adj_tensor_create(&x, ADJ_FLOAT32, 4, xs);
  if (!status) status = adj_tensor_create(&w, ADJ_FLOAT32, 4, ws);
  if (!status) status = adj_conv_plan_create(&config, &x, &w, &plan);
  ADJ_TEST_CHECK(t, !status, "%s: %s", c->name, adj_last_error());
  algorithms[0] = adj_conv_plan_algorithm(plan);
  algorithms[1] = adj_conv_plan_algorithm_without_dx(plan);
  adj_conv_plan_destroy(&plan);
  adj_tensor_destroy(&x);
  adj_tensor_destroy(&w);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t305-conv-choice");
  ADJ_TEST_OK(&t, adj_conv_algorithm_set_default(ADJ_CONV_ALGORITHM_AUTO)); /* the rule itself, not an override */
  int blas_bytes = adj_blas_kernels_vector_bytes(), blas = blas_bytes >= 64 ? 2 : blas_bytes >= 32 ? 1 : 0;
  const char *isa = adj_kernels_isa();
  int level = strcmp(isa, "x86-64-v4") == 0 ? 2 : strcmp(isa, "x86-64-v3") == 0 ? 1 : 0;
  static const char *const blas_names[] = {"older", "AVX2 and FMA", "AVX-512"};
  const char *coretype = getenv("OPENBLAS_CORETYPE");
  adj_test_report(&t, "kernels %s, OpenBLAS kernels %s (OPENBLAS_CORETYPE %s): %s, %d-byte vectors", adj_kernels_isa(),
                  openblas_get_corename(), coretype ? coretype : "unset", blas_names[blas], blas_bytes);
#if defined(__x86_64__)
  if (coretype && strcmp(coretype, "Prescott") == 0)
    ADJ_TEST_CHECK(&t, blas == 0, "OpenBLAS's Prescott kernels were taken for AVX2 ones");
#endif
  static const char *const paths[] = {"forward", "without dx"};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    adj_conv_algorithm got[2];
    chosen(&t, &cases[i], got);
    for (int path = 0; path < 2; path++) {
      adj_conv_algorithm want = cases[i].expected[blas][level][path];
      adj_test_report(&t, "%-34s %-10s chose %-8s (rule: %s)", cases[i].name, paths[path],
                      adj_conv_algorithm_name(got[path]), adj_conv_algorithm_name(want));
      ADJ_TEST_CHECK(&t, got[path] == want, "%s, %s: chose %s, the rule says %s", cases[i].name, paths[path],
                     adj_conv_algorithm_name(got[path]), adj_conv_algorithm_name(want));
    }
  }
  return adj_test_finish(&t);
}
