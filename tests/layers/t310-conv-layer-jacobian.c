/* t310: the Jacobian of the distributed convolution layer.  The dot-product
 * test (jvp against backward, input and parameter perturbations at once) in
 * float64 (< 1e-12) and float32 (< 1e-5), and the Taylor test (the layer is
 * bilinear in input and weights, so the remainder falls at exactly second
 * order), over the named cases of conv_cases.h (feature-space, channel and
 * general forms, 1-D to 3-D) and a random sweep of kernels 1-5, strides 1-2,
 * dilations 1-2 and paddings 0-2 on up to all of the run's ranks.
 *
 * Creating a layer costs communicator splits that are slow on an
 * oversubscribed machine, so each run takes the named cases that need more
 * than half of its ranks (every case runs at one or two of the registered
 * rank counts, with the spare ranks inactive) and checks float32 on every
 * other case. */
#include <stdio.h>

#include "conv_cases.h"
#include "dist_check.h"

enum { SWEEP_CASES = 4 };

static void check_case(adj_test *t, const char *tag, const adj_conv_case *c, bool float32) {
  static const adj_dtype dtypes[] = {ADJ_FLOAT64, ADJ_FLOAT32};
  char label[240], text[200];
  adj_conv_case_format(text, sizeof text, c);
  for (int i = 0; i < 1 + float32; i++) {
    adj_conv_case_ranks ranks;
    adj_conv_layer_config config;
    adj_conv_case_config(c, t->comm, dtypes[i], &ranks, &config);
    adj_layer *layer = NULL;
    ADJ_TEST_OK(t, adj_conv_layer_create(&config, &layer));
    if (!layer) continue;
    snprintf(label, sizeof label, "%s %s %s", tag, text, adj_dtype_name(dtypes[i]));
    dl_dottest(t, label, layer);
    if (dtypes[i] == ADJ_FLOAT64) dl_taylor(t, label, layer, DL_TAYLOR_SMOOTH);
    adj_layer_destroy(&layer);
  }
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t310-conv-layer-jacobian");
  adj_test_report(&t, "conv layer Jacobian on %d ranks", t.size);
  int checked = 0;
  for (int i = 0; i < adj_conv_case_count; i++) {
    int workers = adj_conv_case_workers(&adj_conv_cases[i]);
    if (workers > t.size || 2 * workers <= t.size) continue;
    char tag[16];
    snprintf(tag, sizeof tag, "#%d", i);
    check_case(&t, tag, &adj_conv_cases[i], checked++ % 2 == 0);
  }
  /* The sweep differs per rank count, so the runs at 1-8 ranks together cover
   * more configurations; each is named in full for a rerun. */
  adj_rng *rng;
  adj_rng_create(3100u + (uint64_t)t.size, &rng);
  for (int i = 0; i < SWEEP_CASES; i++) {
    adj_conv_case c;
    adj_conv_case_random(rng, t.size, &c);
    check_case(&t, "sweep", &c, checked++ % 2 == 0);
  }
  adj_rng_destroy(&rng);
  return adj_test_finish(&t);
}
