/* t411: the planner's adjoin mode against what the operators count.  An MLP
 * of three 1.5D layers (adj_test_mlp15, 7 samples, 11 -> 13 -> 9 -> 7) runs one
 * forward and one backward (no input gradient, as for a network's first
 * layer) on every P_r x P_c grid of the run, balanced and with a quadratic
 * batch cut; then for every layer and every worker:
 *   - its operators' counters (bytes and messages sent and received,
 *     applications) equal adj_plan_affine15_counts exactly;
 *   - the largest forward all-gather volume, reduce-scatter volume and
 *     weight + bias broadcast/sum-reduce volume over the workers equal the
 *     words adj_plan_evaluate (adjoin mode) charges that layer (balanced).
 * Then LeNet-5's convolution stages (conv 1->6 k5 p2, pool 2, conv 6->16 k5,
 * pool 2 on 28 x 28 images, 5 samples) with the image rows over P_r and the
 * batch over P_c, on every grid of the run: for every conv and pool layer the
 * largest halo volume and weight + bias volume over the workers (received
 * forward plus sent in the adjoint) equal the words the plan charges.
 * Last, the whole LeNet-5 in its grid layouts "RxC" (float32, 6 samples):
 * every conv, pool and 1.5D layer's counted gather, dx, weight and halo
 * volumes equal the plan's words for that layer.
 * Figures are printed per layer. */
#include <stdio.h>
#include <string.h>

#include "adjoin/conv_layer.h"
#include "adjoin/pool_layer.h"
#include "adjoin/plan.h"
#include "harness.h"

enum { N = 7, F0 = 11 };
static const int64_t widths[3] = {13, 9, 7};

static bool same_counters(const adj_op_counters *a, const adj_op_counters *b) {
  return a->forward_applications == b->forward_applications && a->adjoint_applications == b->adjoint_applications &&
         a->bytes_sent == b->bytes_sent && a->bytes_received == b->bytes_received &&
         a->messages_sent == b->messages_sent && a->messages_received == b->messages_received;
}

static double max_over_ranks(double v) {
  double m;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

/* Compares layer `i` of the MLP (network stage 2 i) on this worker. */
static void check_layer(adj_test *t, const char *label, adj_layer *layer, int i, const int64_t *cuts, int p_r,
                        int p_c, const adj_plan_result *plan, const adj_affine15_counters *forward_only) {
  adj_affine15_counters got = {0}, want = {0};
  ADJ_TEST_OK(t, adj_affine15_layer_counters(layer, &got));
  const int *coords = adj_partition_coords(adj_decomposition_partition(adj_layer_input_layout(layer)));
  bool active = adj_partition_active(adj_decomposition_partition(adj_layer_input_layout(layer)));
  int64_t f_in = i ? widths[i - 1] : F0;
  int bad = 0;
  if (active) {
    ADJ_TEST_OK(t, adj_plan_affine15_counts(N, cuts, f_in, widths[i], true, p_r, p_c, coords[1], coords[0], 8, i > 0,
                                            &want));
    const adj_op_counters *g[3] = {&got.gather, &got.weight, &got.bias}, *w[3] = {&want.gather, &want.weight,
                                                                                   &want.bias};
    for (int k = 0; k < 3; k++)
      if (!same_counters(g[k], w[k])) {
        bad++;
        ADJ_TEST_CHECK(t, false,
                       "%s layer %d worker (r %d, c %d) op %d: counted sent %llu B / %llu msg, recv %llu B / %llu msg; "
                       "predicted %llu / %llu, %llu / %llu",
                       label, i, coords[1], coords[0], k, (unsigned long long)g[k]->bytes_sent,
                       (unsigned long long)g[k]->messages_sent, (unsigned long long)g[k]->bytes_received,
                       (unsigned long long)g[k]->messages_received, (unsigned long long)w[k]->bytes_sent,
                       (unsigned long long)w[k]->messages_sent, (unsigned long long)w[k]->bytes_received,
                       (unsigned long long)w[k]->messages_received);
      }
  }
  int all_bad;
  MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  /* Layer-level volumes (elements) against the plan's words. */
  double fwd = active && p_r > 1 ? (double)forward_only->gather.bytes_received / 8 : 0;
  double bwd = active && p_r > 1 ? (double)(got.gather.bytes_sent - forward_only->gather.bytes_sent) / 8 : 0;
  double weights = (double)(got.weight.bytes_sent + got.weight.bytes_received + got.bias.bytes_sent +
                            got.bias.bytes_received) / 8;
  fwd = max_over_ranks(fwd), bwd = max_over_ranks(bwd), weights = max_over_ranks(weights);
  const adj_plan_layer_cost *c = &plan->layers[i];
  adj_test_report(t, "  %-28s layer %d: counted gather %5.0f, reduce-scatter %5.0f, weights %6.0f words; plan %5.0f, "
                  "%5.0f, %6.0f; per-worker counters %s",
                  label, i, fwd, bwd, weights, c->words[ADJ_PLAN_FWD_GATHER], c->words[ADJ_PLAN_BWD_DX],
                  c->words[ADJ_PLAN_WEIGHTS], all_bad ? "DIFFER" : "equal");
  if (!cuts)
    ADJ_TEST_CHECK(t, fwd == c->words[ADJ_PLAN_FWD_GATHER] && bwd == c->words[ADJ_PLAN_BWD_DX] &&
                          weights == c->words[ADJ_PLAN_WEIGHTS],
                   "%s layer %d: counted %g/%g/%g words, plan %g/%g/%g", label, i, fwd, bwd, weights,
                   c->words[ADJ_PLAN_FWD_GATHER], c->words[ADJ_PLAN_BWD_DX], c->words[ADJ_PLAN_WEIGHTS]);
}

static void check_grid(adj_test *t, adj_plan_network *plan_net, int p_r, int p_c, bool quadratic) {
  char label[64];
  snprintf(label, sizeof label, "%dx%d%s", p_r, p_c, quadratic ? " quadratic batch" : "");
  int64_t cuts[16];
  for (int c = 0; c <= p_c; c++) cuts[c] = (int64_t)N * c * c / ((int64_t)p_c * p_c);
  adj_partition *p = NULL;
  adj_decomposition *in = NULL;
  adj_layer *net = NULL;
  ADJ_TEST_OK(t, adj_partition_create(MPI_COMM_WORLD, 2, (const int[2]){p_c, p_r}, p_r * p_c, NULL, &p));
  if (p)
    ADJ_TEST_OK(t, adj_decomposition_create_explicit(p, 2, (const int64_t[2]){N, F0},
                                                     (const int64_t *[2]){quadratic ? cuts : NULL, NULL}, &in));
  if (in)
    ADJ_TEST_OK(t, adj_test_mlp15(ADJ_FLOAT64, in, 3, widths, &net));
  adj_plan_result plan = {0};
  adj_plan_config config = {.mode = ADJ_PLAN_ADJOIN, .p = p_r * p_c, .batch = N, .alpha = 1, .beta = 1, .word_bytes = 8};
  ADJ_TEST_OK(t, adj_plan_evaluate(plan_net, &config, p_r, p_c, &plan));
  adj_tensor x = {0}, y = {0};
  if (net && plan.layers) {
    ADJ_TEST_OK(t, adj_layer_create_input(net, &x));
    ADJ_TEST_OK(t, adj_layer_create_output(net, &y));
    for (int64_t k = 0; k < adj_tensor_volume(&x); k++) ((double *)x.data)[k] = 0.5 + 0.01 * (double)k;
    adj_affine15_counters forward_only[3];
    for (int i = 0; i < 3; i++) adj_affine15_layer_reset_counters(adj_network_layer(net, 2 * i));
    ADJ_TEST_OK(t, adj_layer_forward(net, &x, &y));
    for (int i = 0; i < 3; i++) ADJ_TEST_OK(t, adj_affine15_layer_counters(adj_network_layer(net, 2 * i), &forward_only[i]));
    ADJ_TEST_OK(t, adj_layer_backward(net, &y, NULL));
    for (int i = 0; i < 3; i++)
      check_layer(t, label, adj_network_layer(net, 2 * i), i, quadratic ? cuts : NULL, p_r, p_c, &plan,
                  &forward_only[i]);
  }
  adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  adj_plan_result_free(&plan);
  adj_layer_destroy(&net);
  adj_decomposition_destroy(&in);
  adj_partition_destroy(&p);
}

/* ---- convolution stages on a rows x batch grid ------------------------------------------ */

/* 5 samples; p2's 5 output rows are the fewest, and the plan refuses more
 * row workers than rows. */
enum { CONV_N = 5, CONV_STAGES = 4, CONV_MIN_ROWS = 5 };

#define LENET_CONV_TEXT "input 1 28 28\nconv c1 out=6 k=5 p=2\npool p1 k=2 s=2\nconv c2 out=16 k=5\npool p2 k=2 s=2\n"
static const char conv_net_text[] = LENET_CONV_TEXT;
static const char lenet_text[] = LENET_CONV_TEXT "fc f1 out=120\nfc f2 out=84\nfc f3 out=10\n";

/* Conv or pool stage i (0: c1, 1: p1, 2: c2, 3: p2) on the given input layout. */
static int conv_stage(int i, const adj_decomposition *in, adj_layer **layer) {
  if (i % 2) {
    adj_pool_layer_config pc = {.dtype = ADJ_FLOAT64, .kind = ADJ_POOL_MAX, .input = in,
                                .window = {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}};
    return adj_pool_layer_create(&pc, layer);
  }
  int64_t pad = i == 0 ? 2 : 0;
  adj_conv_layer_config cc = {.comm = MPI_COMM_WORLD, .dtype = ADJ_FLOAT64, .out_channels = i == 0 ? 6 : 16,
                              .input = in,
                              .window = {.spatial_dims = 2, .kernel = {5, 5}, .padding_left = {pad, pad},
                                         .padding_right = {pad, pad}}};
  return adj_conv_layer_create(&cc, layer);
}

/* Halo and weight (+ bias) volumes, in words, this worker's stage moved:
 * received in the forward and sent in the adjoint.  `fwd` holds the counters
 * after the forward, `all` after the backward too. */
static double moved(const adj_op_counters *fwd, const adj_op_counters *all, int word_bytes) {
  return (double)(fwd->bytes_received + (all->bytes_sent - fwd->bytes_sent)) / word_bytes;
}

/* A conv or pool stage's halo and weight (+ bias) counters; false for any
 * other kind of stage. */
static bool stage_counters(adj_layer *layer, adj_op_counters *halo, adj_op_counters *weights) {
  *halo = *weights = (adj_op_counters){0};
  if (!adj_pool_layer_halo_counters(layer, halo)) return true;
  adj_conv_counters c;
  if (adj_conv_layer_counters(layer, &c)) return false;
  *halo = c.halo;
  *weights = c.weight;
  weights->bytes_sent += c.bias.bytes_sent, weights->bytes_received += c.bias.bytes_received;
  return true;
}

static void check_conv_grid(adj_test *t, const adj_plan_network *plan_net, int p_r, int p_c) {
  char label[64];
  snprintf(label, sizeof label, "conv stages %dx%d", p_r, p_c);
  adj_partition *p = NULL;
  adj_decomposition *in = NULL;
  ADJ_TEST_OK(t, adj_partition_create(MPI_COMM_WORLD, 4, (const int[4]){p_c, 1, p_r, 1}, p_r * p_c, NULL, &p));
  if (p) ADJ_TEST_OK(t, adj_decomposition_create(p, 4, (const int64_t[4]){CONV_N, 1, 28, 28}, &in));
  adj_layer *stages[CONV_STAGES] = {NULL};
  const adj_decomposition *current = in;
  for (int i = 0; i < CONV_STAGES && current; i++) {
    ADJ_TEST_OK(t, conv_stage(i, current, &stages[i]));
    current = stages[i] ? adj_layer_output_layout(stages[i]) : NULL;
  }
  adj_plan_result plan = {0};
  adj_plan_config config = {.mode = ADJ_PLAN_ADJOIN, .p = p_r * p_c, .batch = CONV_N, .alpha = 1, .beta = 1,
                            .word_bytes = 8};
  ADJ_TEST_OK(t, adj_plan_evaluate(plan_net, &config, p_r, p_c, &plan));
  if (current && plan.layers) {
    adj_tensor x[CONV_STAGES + 1];
    ADJ_TEST_OK(t, adj_layer_create_input(stages[0], &x[0]));
    for (int i = 0; i < CONV_STAGES; i++) ADJ_TEST_OK(t, adj_layer_create_output(stages[i], &x[i + 1]));
    for (int64_t k = 0; k < adj_tensor_volume(&x[0]); k++) ((double *)x[0].data)[k] = 0.25 + 0.001 * (double)k;
    adj_op_counters fwd_halo[CONV_STAGES], fwd_weights[CONV_STAGES];
    for (int i = 0; i < CONV_STAGES; i++) {
      ADJ_TEST_OK(t, adj_layer_forward(stages[i], &x[i], &x[i + 1]));
      stage_counters(stages[i], &fwd_halo[i], &fwd_weights[i]);
    }
    for (int i = CONV_STAGES - 1; i >= 0; i--) ADJ_TEST_OK(t, adj_layer_backward(stages[i], &x[i + 1], &x[i]));
    for (int i = 0; i < CONV_STAGES; i++) {
      adj_op_counters halo, weights;
      stage_counters(stages[i], &halo, &weights);
      double h = max_over_ranks(moved(&fwd_halo[i], &halo, 8)), w = max_over_ranks(moved(&fwd_weights[i], &weights, 8));
      const adj_plan_layer_cost *c = &plan.layers[i];
      adj_test_report(t, "  %-20s %s: counted halo %6.0f, weights %5.0f words; plan %6.0f, %5.0f", label,
                      plan_net->layers[i].name, h, w, c->words[ADJ_PLAN_HALO], c->words[ADJ_PLAN_WEIGHTS]);
      ADJ_TEST_CHECK(t, h == c->words[ADJ_PLAN_HALO] && w == c->words[ADJ_PLAN_WEIGHTS],
                     "%s %s: counted halo %g and weights %g words, plan %g and %g", label, plan_net->layers[i].name, h,
                     w, c->words[ADJ_PLAN_HALO], c->words[ADJ_PLAN_WEIGHTS]);
    }
    for (int i = 0; i <= CONV_STAGES; i++) adj_tensor_destroy(&x[i]);
  }
  adj_plan_result_free(&plan);
  for (int i = 0; i < CONV_STAGES; i++) adj_layer_destroy(&stages[i]);
  adj_decomposition_destroy(&in);
  adj_partition_destroy(&p);
}

/* ---- LeNet-5 in the grid layouts RxC ----------------------------------------------------- */

enum { LENET_BATCH = 6, LENET_MODELLED = 7 };

/* The modelled stages of a LeNet-5 network in order (conv, pool, conv, pool,
 * three 1.5D layers), their counters after the forward and after the
 * backward. */
typedef struct lenet_counts {
  adj_layer *stage[LENET_MODELLED];
  bool window[LENET_MODELLED]; /* a conv or pool stage, else a 1.5D layer */
  adj_op_counters halo[2][LENET_MODELLED], weights[2][LENET_MODELLED];
  adj_affine15_counters fc[2][LENET_MODELLED];
} lenet_counts;

static int lenet_modelled(adj_layer *net, lenet_counts *k) {
  int n = 0;
  for (int i = 0; i < adj_network_depth(net) && n < LENET_MODELLED; i++) {
    adj_layer *stage = adj_network_layer(net, i);
    adj_op_counters h, w;
    adj_affine15_counters a;
    bool window = stage_counters(stage, &h, &w);
    if (window || !adj_affine15_layer_counters(stage, &a)) k->window[n] = window, k->stage[n++] = stage;
  }
  return n;
}

static void lenet_read(lenet_counts *k, int when) {
  for (int i = 0; i < LENET_MODELLED; i++)
    if (k->window[i]) stage_counters(k->stage[i], &k->halo[when][i], &k->weights[when][i]);
    else adj_affine15_layer_counters(k->stage[i], &k->fc[when][i]);
}

/* Words of layer i as the plan's classes: forward gather, backward dx, weights, halo. */
static void lenet_words(const lenet_counts *k, int i, double *words) {
  for (int c = 0; c < ADJ_PLAN_COLLECTIVES; c++) words[c] = 0;
  if (k->window[i]) {
    words[ADJ_PLAN_HALO] = moved(&k->halo[0][i], &k->halo[1][i], 4);
    words[ADJ_PLAN_WEIGHTS] = moved(&k->weights[0][i], &k->weights[1][i], 4);
  } else {
    const adj_affine15_counters *f = &k->fc[0][i], *a = &k->fc[1][i];
    words[ADJ_PLAN_FWD_GATHER] = (double)f->gather.bytes_received / 4;
    words[ADJ_PLAN_BWD_DX] = (double)(a->gather.bytes_sent - f->gather.bytes_sent) / 4;
    words[ADJ_PLAN_WEIGHTS] = (double)(a->weight.bytes_sent + a->weight.bytes_received + a->bias.bytes_sent +
                                       a->bias.bytes_received) / 4;
  }
  for (int c = 0; c < ADJ_PLAN_COLLECTIVES; c++) words[c] = max_over_ranks(words[c]);
}

/* One forward and backward of LeNet-5 in layout "RxC" (float32): every
 * modelled layer's counted volumes equal the plan's words. */
static void check_lenet_grid(adj_test *t, const adj_plan_network *plan_net, int p_r, int p_c) {
  char layout[32];
  snprintf(layout, sizeof layout, "%dx%d", p_r, p_c);
  adj_layer *net = NULL;
  adj_network_build_options o = {.dtype = ADJ_FLOAT32, .batch = LENET_BATCH, .logits_only = true};
  ADJ_TEST_OK(t, adj_network_build_file(MPI_COMM_WORLD, NC_NETWORKS_DIR "/lenet5.net", layout, &o, &net));
  lenet_counts k = {0};
  int modelled = net ? lenet_modelled(net, &k) : 0;
  ADJ_TEST_CHECK(t, !net || modelled == LENET_MODELLED, "lenet %s: %d modelled stages, expected %d", layout,
                 modelled, LENET_MODELLED);
  adj_plan_result plan = {0};
  adj_plan_config config = {.mode = ADJ_PLAN_ADJOIN, .p = p_r * p_c, .batch = LENET_BATCH, .alpha = 1, .beta = 1,
                            .word_bytes = 4};
  ADJ_TEST_OK(t, adj_plan_evaluate(plan_net, &config, p_r, p_c, &plan));
  if (modelled == LENET_MODELLED && plan.layers) {
    adj_tensor x, dx, y;
    ADJ_TEST_OK(t, adj_layer_create_input(net, &x));
    ADJ_TEST_OK(t, adj_layer_create_input(net, &dx));
    ADJ_TEST_OK(t, adj_layer_create_output(net, &y));
    for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, 0.001 * (double)(i % 997));
    ADJ_TEST_OK(t, adj_layer_forward(net, &x, &y));
    lenet_read(&k, 0);
    for (int64_t i = 0; i < adj_tensor_volume(&y); i++) adj_tensor_set(&y, i, 1.0);
    ADJ_TEST_OK(t, adj_layer_backward(net, &y, &dx));
    lenet_read(&k, 1);
    for (int i = 0; i < LENET_MODELLED; i++) {
      double words[ADJ_PLAN_COLLECTIVES];
      lenet_words(&k, i, words);
      const adj_plan_layer_cost *c = &plan.layers[i];
      bool equal = true;
      for (int j = 0; j < ADJ_PLAN_COLLECTIVES; j++) equal = equal && words[j] == c->words[j];
      adj_test_report(t, "  lenet %-5s %s: counted gather %5.0f, dx %5.0f, weights %6.0f, halo %5.0f words; plan %5.0f, "
                      "%5.0f, %6.0f, %5.0f", layout, plan_net->layers[i].name, words[0], words[1], words[2], words[3],
                      c->words[0], c->words[1], c->words[2], c->words[3]);
      ADJ_TEST_CHECK(t, equal, "lenet %s %s: counted words differ from the plan's", layout, plan_net->layers[i].name);
    }
    adj_tensor_destroy(&x), adj_tensor_destroy(&dx), adj_tensor_destroy(&y);
  }
  adj_plan_result_free(&plan);
  adj_layer_destroy(&net);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t411-plan-counters");
  adj_test_report(&t, "t411 on %d ranks: MLP 11-13-9-7, batch 7, float64", t.size);
  adj_plan_network *plan_net = NULL;
  ADJ_TEST_OK(&t, adj_plan_network_parse("input 11\nfc a out=13\nfc b out=9\nfc c out=7\n", "t411", &plan_net));
  for (int p_r = 1; plan_net && p_r <= t.size; p_r++) {
    if (t.size % p_r) continue;
    check_grid(&t, plan_net, p_r, t.size / p_r, false);
    if (t.size / p_r > 1) check_grid(&t, plan_net, p_r, t.size / p_r, true);
  }
  adj_plan_network_destroy(&plan_net);
  ADJ_TEST_OK(&t, adj_plan_network_parse(conv_net_text, "t411 conv", &plan_net));
  for (int p_r = 1; plan_net && p_r <= t.size; p_r++)
    if (t.size % p_r == 0 && t.size / p_r <= CONV_N && p_r <= CONV_MIN_ROWS)
      check_conv_grid(&t, plan_net, p_r, t.size / p_r);
  adj_plan_network_destroy(&plan_net);
  ADJ_TEST_OK(&t, adj_plan_network_parse(lenet_text, "t411 lenet", &plan_net));
  for (int p_r = 1; plan_net && p_r <= t.size; p_r++)
    if (t.size % p_r == 0 && t.size / p_r <= LENET_BATCH && p_r <= CONV_MIN_ROWS)
      check_lenet_grid(&t, plan_net, p_r, t.size / p_r);
  adj_plan_network_destroy(&plan_net);
  return adj_test_finish(&t);
}
