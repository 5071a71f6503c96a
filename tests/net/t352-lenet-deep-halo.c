/* t352: LeNet-5 built with deep halos (adj_network_build_options.deep_halos:
 * conv1 .. the second ReLU fused into one deep halo layer) against the same layout
 * built layer by layer, each layout at the rank count it needs (sequential,
 * dist2, 3x1, dist4, hybrid4-batch, 5x1, 6x1, 7x1, dist8; 7 rows over 7
 * workers leave a pooled block empty):
 *  - the same parameters (names, global shapes) in the same order;
 *  - the logits bit for bit with the convolutions pinned to each algorithm
 *    (ADJ_CONV_ALGORITHM: shifted, direct, im2col) and with the automatic
 *    choice; the input and parameter gradients of a random output gradient
 *    within adj_test_random_sum_tolerance of LeNet's longest sum (the same
 *    sums in another order), figures printed;
 *  - the halo messages: the four layers' exchanges against the one, counted
 *    by the operators over a forward and a backward (summed over the ranks);
 *  - the fused network's dot-product test (loss included) below 1e-12. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "net_check.h"
#include "adjoin/pool_layer.h"

enum { BATCH = 3 };

static const char *const layouts[] = {"sequential", "dist2", "3x1", "dist4", "hybrid4-batch",
                                      "5x1",        "6x1",   "7x1", "dist8"};
enum { N_LAYOUTS = sizeof layouts / sizeof layouts[0] };
/* AUTO: the plan's automatic choice. */
static const adj_conv_algorithm algorithms[] = {ADJ_CONV_ALGORITHM_SHIFTED, ADJ_CONV_ALGORITHM_DIRECT,
                                                ADJ_CONV_ALGORITHM_IM2COL, ADJ_CONV_ALGORITHM_AUTO};
enum { N_ALGORITHMS = sizeof algorithms / sizeof algorithms[0] };

static adj_layer *lenet(adj_test *t, const char *layout, bool fused, bool logits_only) {
  adj_layer *net = NULL;
  adj_network_build_options o = {.dtype = ADJ_FLOAT64, .batch = BATCH, .logits_only = logits_only,
                                 .deep_halos = fused};
  ADJ_TEST_OK(t, nc_build_network("lenet", layout, &o, &net));
  if (net) ADJ_TEST_OK(t, adj_network_init_uniform(net, 352));
  return net;
}

/* Messages sent and received by the halo exchanges of a network's stages, summed over the ranks. */
static uint64_t halo_messages(adj_layer *net) {
  uint64_t mine = 0, all = 0;
  for (int j = 0; j < adj_network_depth(net); j++) {
    adj_layer *l = adj_network_layer(net, j);
    adj_conv_counters cc;
    adj_op_counters c;
    if (!adj_conv_layer_counters(l, &cc)) c = cc.halo;
    else if (adj_pool_layer_halo_counters(l, &c) && adj_deep_halo_layer_counters(l, &c)) continue;
    mine += c.messages_sent + c.messages_received;
  }
  MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

static bool same_parameters(adj_layer *a, adj_layer *b) {
  if (adj_layer_parameter_count(a) != adj_layer_parameter_count(b)) return false;
  for (int i = 0; i < adj_layer_parameter_count(a); i++) {
    const adj_parameter *p = adj_layer_parameter(a, i), *q = adj_layer_parameter(b, i);
    int rank = adj_decomposition_rank(p->layout);
    if (strcmp(p->name, q->name) || rank != adj_decomposition_rank(q->layout) ||
        memcmp(adj_decomposition_global_shape(p->layout), adj_decomposition_global_shape(q->layout),
               sizeof(int64_t) * (size_t)rank))
      return false;
  }
  return true;
}

typedef struct run_out {
  adj_tensor y, dx;
} run_out;

/* Forward and backward of a random (seeded) input and output gradient. */
static void run(adj_test *t, adj_layer *net, run_out *o) {
  adj_tensor x, dy;
  adj_layer_create_input(net, &x), adj_layer_create_input(net, &o->dx);
  adj_layer_create_output(net, &o->y), adj_layer_create_output(net, &dy);
  adj_rng *rng;
  adj_rng_create(3520, &rng);
  adj_rng_fill_uniform(rng, &x, 0, 1);
  adj_rng_fill_uniform(rng, &dy, -1, 1);
  adj_rng_destroy(&rng);
  adj_layer_zero_grad(net);
  ADJ_TEST_OK(t, adj_layer_forward(net, &x, &o->y));
  ADJ_TEST_OK(t, adj_layer_backward(net, &dy, &o->dx));
  adj_tensor_destroy(&x), adj_tensor_destroy(&dy);
}

/* Largest gradient difference relative to the largest entry, gathered parameter by parameter on rank 0. */
static double gradient_diff(adj_test *t, adj_layer *a, adj_layer *b) {
  double worst = 0;
  for (int i = 0; i < adj_layer_parameter_count(a); i++) {
    const adj_parameter *p = adj_layer_parameter(a, i);
    adj_tensor ga = {0}, gb = {0};
    if (t->rank == 0) {
      adj_tensor_create(&ga, ADJ_FLOAT64, adj_decomposition_rank(p->layout), adj_decomposition_global_shape(p->layout));
      adj_tensor_create(&gb, ADJ_FLOAT64, adj_decomposition_rank(p->layout), adj_decomposition_global_shape(p->layout));
    }
    ADJ_TEST_OK(t, adj_layer_get_gradient(a, i, 0, t->rank == 0 ? &ga : NULL));
    ADJ_TEST_OK(t, adj_layer_get_gradient(b, i, 0, t->rank == 0 ? &gb : NULL));
    if (t->rank == 0) worst = fmax(worst, adj_test_max_rel_diff(&ga, &gb));
    adj_tensor_destroy(&ga), adj_tensor_destroy(&gb);
  }
  return worst;
}

/* Fused against layer by layer, the convolutions pinned to `algorithm` (AUTO: automatic). */
static void compare(adj_test *t, const char *layout, adj_conv_algorithm algorithm) {
  ADJ_TEST_OK(t, adj_conv_algorithm_set_default(algorithm));
  adj_layer *plain = lenet(t, layout, false, true), *fused = lenet(t, layout, true, true);
  ADJ_TEST_OK(t, adj_conv_algorithm_set_default(ADJ_CONV_ALGORITHM_AUTO));
  if (plain && fused) {
    ADJ_TEST_CHECK(t, same_parameters(plain, fused), "%s: the fused network lists other parameters", layout);
    ADJ_TEST_CHECK(t, adj_network_depth(fused) == adj_network_depth(plain) - 5,
                   "%s: %d stages fused, %d layer by layer (6 layers become 1)", layout, adj_network_depth(fused),
                   adj_network_depth(plain));
    run_out a = {0}, b = {0};
    run(t, plain, &a);
    run(t, fused, &b);
    uint64_t messages[2] = {halo_messages(plain), halo_messages(fused)};
    double dy = adj_test_max_rel_diff(&b.y, &a.y), ddx = adj_test_max_rel_diff(&b.dx, &a.dx);
    double dg = gradient_diff(t, fused, plain);
    adj_test_report(t, "  lenet5 %-13s %-7s fused vs layers: logits %.1e%s, dx %.1e, grads %.1e; halo messages "
                    "%llu -> %llu", layout, adj_conv_algorithm_name(algorithm), dy, dy == 0 ? " (bit for bit)" : "", ddx, dg,
                    (unsigned long long)messages[0], (unsigned long long)messages[1]);
    ADJ_TEST_CHECK(t, dy == 0, "%s: fused logits differ by %.3e", layout, dy);
    double tol = adj_test_random_sum_tolerance(ADJ_FLOAT64, nc_reduction_length(BATCH));
    ADJ_TEST_CHECK(t, dy <= tol && ddx <= tol && dg <= tol, "%s: logits %.3e, dx %.3e, grads %.3e (tolerance %.1e)",
                   layout, dy, ddx, dg, tol);
    ADJ_TEST_CHECK(t, messages[1] < messages[0] || messages[0] == 0, "%s: %llu halo messages fused, %llu by layers",
                   layout, (unsigned long long)messages[1], (unsigned long long)messages[0]);
    adj_tensor_destroy(&a.y), adj_tensor_destroy(&a.dx), adj_tensor_destroy(&b.y), adj_tensor_destroy(&b.dx);
  }
  adj_layer_destroy(&plain), adj_layer_destroy(&fused);
}

static void dottest(adj_test *t, const char *layout) {
  adj_layer *net = lenet(t, layout, true, false);
  if (!net) return;
  const int64_t labels[BATCH] = {7, 2, 9};
  ADJ_TEST_OK(t, adj_xent_layer_set_labels(adj_network_build_loss(net), labels, BATCH));
  adj_dottest_result r = {0};
  ADJ_TEST_OK(t, adj_dottest_layer(net, 352, &r));
  adj_test_report(t, "  lenet5 %-13s deep halos + loss: dot test relative error %.3e", layout, r.relative_error);
  ADJ_TEST_CHECK(t, r.relative_error < adj_dottest_tolerance(ADJ_FLOAT64, 1) && r.norm_Fx > 0 && r.norm_Fty > 0,
                 "%s: dot test relative error %.3e", layout, r.relative_error);
  adj_layer_destroy(&net);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t352-lenet-deep-halo");
  for (int i = 0; i < N_LAYOUTS; i++) {
    if (nc_layout_ranks("lenet", layouts[i]) != t.size) continue; /* each layout at its own rank count */
    for (int a = 0; a < N_ALGORITHMS; a++) compare(&t, layouts[i], algorithms[a]);
    dottest(&t, layouts[i]);
  }
  return adj_test_finish(&t);
}
