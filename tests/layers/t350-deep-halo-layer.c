/* t350: the deep halo layer (deep_halo_layer.h) against the layer-by-layer
 * run it fuses and against the sequential run.
 *
 * For each run (LeNet's two convolution blocks; three 3x3 convolutions with
 * tanh between; a strided conv, an average pool and a dilated conv) on every
 * layout of dist_check.h (all ranks, rank 0 inactive, uneven cuts with empty
 * blocks), at 1-8 ranks:
 *  - fused against the same layers run one by one on the same layout, with
 *    the convolutions pinned to the shifted algorithm (ADJ_CONV_ALGORITHM)
 *    and then chosen as usual: the output bit for bit in float64 in both
 *    (every algorithm's per-element arithmetic is independent of the extent,
 *    im2col's through GEMM calls of one width: conv_im2col.c), and in
 *    float32 for unit-stride runs pinned to shifted (a strided convolution
 *    has no shifted form and runs im2col, whose float32 GEMM on some CPUs
 *    rounds by the data's alignment).  In both, the jvp (always
 *    im2col), the input gradient and the parameter gradients within
 *    run_tolerance of the largest entry: the fused backward sums
 *    the neighbours' contributions to the overlap once, at the run's input,
 *    instead of after every layer, the same sum in another order.  Figures
 *    printed;
 *  - messages counted by the operators: on balanced layouts of the 3x3 run,
 *    where every layer exchanges with the same neighbours, the layers' halos
 *    send exactly k = 3 times the fused layer's messages, forward and adjoint;
 *  - the three checks of docs/design.md section 6 for the fused layer: the
 *    dot-product test, the Taylor test, and distributed (fused) against the
 *    sequential layer-by-layer twin on MPI_COMM_SELF (run_tolerance as for
 *    the fused backward above: weight gradients sum thousands of terms in
 *    another order); the Taylor test where the run is smooth
 *    enough (see below). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_check.h"
#include "layer_cases.h"
#include "adjoin/pool_layer.h"

enum { MAX_STAGES = 8 };

typedef struct run_spec {
  const char *name;
  int64_t shape[4];
  int count;
  adj_deep_case_stage stages[MAX_STAGES];
  int exchanging;      /* layers that exchange a halo with the same neighbours on balanced layouts (0: not so) */
  bool taylor;         /* smooth enough for dist_check's Taylor test at second order */
} run_spec;

/* The LeNet run is piecewise bilinear (max pools and ReLUs between
 * convolutions that are bilinear in input and weights): its remainder is
 * neither second order across kinks nor round-off on a piece, so its Taylor
 * test is t400's for the layers; the other runs are tested here. */

static const run_spec runs[] = {
    {"lenet conv blocks", {2, 1, 28, 28}, 6,
     {{'c', 6, 5, 1, 1, 2}, {'m', 0, 2, 2, 1, 0}, {'r', 0, 1, 1, 1, 0}, {'c', 16, 5, 1, 1, 0}, {'m', 0, 2, 2, 1, 0}, {'r', 0, 1, 1, 1, 0}}, 0,
     false},
    {"three 3x3 convs", {2, 2, 48, 40}, 5,
     {{'c', 3, 3, 1, 1, 1}, {'t', 0, 1, 1, 1, 0}, {'c', 4, 3, 1, 1, 1}, {'t', 0, 1, 1, 1, 0}, {'c', 2, 3, 1, 1, 1}}, 3, true},
    {"strided, avg pool, dilated", {2, 2, 17, 15}, 4,
     {{'c', 3, 3, 2, 1, 1}, {'a', 0, 3, 1, 1, 1}, {'c', 2, 2, 1, 2, 0}, {'t', 0, 1, 1, 1, 0}}, 0, true},
};
enum { N_RUNS = sizeof runs / sizeof runs[0] };

/* Partition shapes (N, C, H, W) by worker count: space first, the batch at 8. */
static const int grids[9][5] = {{0}, {1, 1, 1, 1, 1}, {1, 1, 2, 1, 1}, {1, 1, 3, 1, 1}, {1, 1, 2, 2, 1},
                                {1, 1, 5, 1, 1}, {1, 1, 3, 2, 1}, {1, 1, 7, 1, 1}, {2, 1, 2, 2, 1}};

/* The run's layers, each on the previous one's output layout. */
static int create_layers(const run_spec *r, adj_dtype dtype, const adj_decomposition *input, adj_layer **layers) {
  const adj_decomposition *in = input;
  int status = ADJ_SUCCESS;
  for (int j = 0; j < r->count && !status; j++) {
    status = adj_deep_case_stage_create(&r->stages[j], dtype, in, &layers[j]);
    if (!status) in = adj_layer_output_layout(layers[j]);
  }
  return status;
}

static void destroy_layers(int n, adj_layer **layers) {
  for (int j = 0; j < n; j++) adj_layer_destroy(&layers[j]);
}

/* The run fused (fuse) or as a network of its layers. */
static int create_run(const run_spec *r, adj_dtype dtype, const adj_decomposition *input, bool fuse,
                      adj_layer **run) {
  adj_layer *layers[MAX_STAGES] = {NULL};
  int status = create_layers(r, dtype, input, layers);
  if (!status && fuse)
    status = adj_deep_halo_layer_create(&(adj_deep_halo_config){.count = r->count, .layers = layers}, run);
  else if (!status)
    status = adj_network_create(r->name, r->count, layers, run);
  destroy_layers(r->count, layers);
  return status;
}

/* ---- fused against layer by layer on one layout ----------------------------------------- */

static double max_abs(const adj_tensor *a, const adj_tensor *b) {
  double d = 0;
  for (int64_t i = 0; i < adj_tensor_volume(a); i++) d = fmax(d, fabs(adj_tensor_get(a, i) - adj_tensor_get(b, i)));
  return d;
}

static double max_entry(const adj_tensor *a) {
  double m = 0;
  for (int64_t i = 0; i < adj_tensor_volume(a); i++) m = fmax(m, fabs(adj_tensor_get(a, i)));
  return m;
}

/* Sums of messages sent by the halos of the network's layers and of the fused
 * layer, over every rank: [forward layers, forward fused, adjoint layers, adjoint fused]. */
static void count_messages(adj_layer *fused, adj_layer *net, uint64_t *sums) {
  uint64_t mine[4] = {0};
  adj_op_counters c;
  for (int j = 0; j < adj_network_depth(net); j++) {
    adj_layer *l = adj_network_layer(net, j);
    adj_conv_counters cc;
    if (!adj_conv_layer_counters(l, &cc)) c = cc.halo;
    else if (adj_pool_layer_halo_counters(l, &c)) continue;
    mine[0] += c.messages_sent;
    mine[2] += c.messages_received;
  }
  adj_deep_halo_layer_counters(fused, &c);
  mine[1] = c.messages_sent, mine[3] = c.messages_received;
  MPI_Allreduce(mine, sums, 4, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
}

static void reset_counters(adj_layer *fused, adj_layer *net) {
  adj_deep_halo_layer_reset_counters(fused);
  for (int j = 0; j < adj_network_depth(net); j++) {
    adj_conv_layer_reset_counters(adj_network_layer(net, j));
    adj_pool_layer_reset_counters(adj_network_layer(net, j));
  }
}

/* The longest sum of a run: the first convolution's weight gradient, over
 * every output position (at most the input's) of every sample.  Fused and
 * layer by layer sum it in another order; on random data the difference grows
 * like its square root. */
static double run_tolerance(const run_spec *r, adj_dtype dtype) {
  return adj_test_random_sum_tolerance(dtype, (double)(r->shape[0] * r->shape[2] * r->shape[3]));
}

/* The output must agree bit for bit in float64, and in float32 when `exact`
 * on unit strides; the output, the jvp and the gradients within
 * run_tolerance of the largest entry; the messages as the header says. */
static bool unit_strides(const run_spec *r) {
  for (int j = 0; j < r->count; j++)
    if (r->stages[j].kind == 'c' && r->stages[j].s != 1) return false;
  return true;
}

static void check_against_layers(adj_test *t, const char *label, const run_spec *r, adj_layer *fused,
                                 adj_layer *net, bool balanced, bool exact) {
  dl_data g = {0};
  dl_results rf = {0}, rn = {0};
  dl_data_make(net, 350u, &g);
  reset_counters(fused, net);
  dl_run(t, fused, &g, &rf);
  dl_run(t, net, &g, &rn);
  double mine[5] = {max_abs(&rf.y, &rn.y) / fmax(1, max_entry(&rn.y)), max_abs(&rf.jy, &rn.jy) / fmax(1, max_entry(&rn.jy)),
                    max_abs(&rf.dx, &rn.dx) / fmax(1, max_entry(&rn.dx)), 0, max_entry(&rn.y)};
  for (int i = 0; i < adj_layer_parameter_count(net); i++) {
    const adj_tensor *a = &adj_layer_parameter(fused, i)->grad, *b = &adj_layer_parameter(net, i)->grad;
    mine[3] = fmax(mine[3], max_abs(a, b) / fmax(1, max_entry(b)));
  }
  double worst[5];
  MPI_Allreduce(mine, worst, 5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  uint64_t m[4];
  count_messages(fused, net, m);
  adj_test_report(t, "  %-58s %-7s vs layers: y %.1e%s, jvp %.1e, dx %.1e, grads %.1e; messages sent by the "
                  "layers/fused: fwd %llu/%llu, adj %llu/%llu", label, exact ? "shifted" : "auto", worst[0],
                  worst[0] == 0 ? " (bit for bit)" : "", worst[1], worst[2], worst[3], (unsigned long long)m[0],
                  (unsigned long long)m[1], (unsigned long long)m[2], (unsigned long long)m[3]);
  double tolerance = run_tolerance(r, g.x.dtype);
  bool bitwise = g.x.dtype == ADJ_FLOAT64 || (exact && unit_strides(r));
  ADJ_TEST_CHECK(t, !bitwise || worst[0] == 0, "%s: the fused output differs from the layers' by %.3e", label, worst[0]);
  ADJ_TEST_CHECK(t, fmax(fmax(worst[0], worst[1]), fmax(worst[2], worst[3])) <= tolerance,
                 "%s: fused against layers: y %.3e, jvp %.3e, dx %.3e, params %.3e", label, worst[0], worst[1],
                 worst[2], worst[3]);
  ADJ_TEST_CHECK(t, worst[4] > 0, "%s: the output is identically zero", label);
  ADJ_TEST_CHECK(t, m[1] <= m[0] && m[3] <= m[2], "%s: the fused layer sent more messages (%llu) than the layers (%llu)",
                 label, (unsigned long long)m[1], (unsigned long long)m[0]);
  if (balanced && r->exchanging)
    ADJ_TEST_CHECK(t, m[0] == (uint64_t)r->exchanging * m[1] && m[2] == (uint64_t)r->exchanging * m[3],
                   "%s: the %d layers sent %llu/%llu messages, not %d x the fused %llu/%llu", label, r->exchanging,
                   (unsigned long long)m[0], (unsigned long long)m[2], r->exchanging, (unsigned long long)m[1],
                   (unsigned long long)m[3]);
  dl_results_free(&rf), dl_results_free(&rn);
  dl_data_free(&g);
}

/* ---- one run on every layout ------------------------------------------------------------ */

/* Fused against layers, with the convolutions' algorithm pinned (exact) or chosen as usual. */
static void compare_with_layers(adj_test *t, const char *label, const run_spec *r, adj_dtype dtype,
                                const adj_decomposition *layout, bool balanced, bool exact) {
  if (exact) ADJ_TEST_OK(t, adj_conv_algorithm_set_default(ADJ_CONV_ALGORITHM_SHIFTED));
  adj_layer *fused = NULL, *net = NULL;
  ADJ_TEST_OK(t, create_run(r, dtype, layout, true, &fused));
  ADJ_TEST_OK(t, create_run(r, dtype, layout, false, &net));
  ADJ_TEST_OK(t, adj_conv_algorithm_set_default(ADJ_CONV_ALGORITHM_AUTO));
  if (fused && net) check_against_layers(t, label, r, fused, net, balanced, exact);
  adj_layer_destroy(&fused), adj_layer_destroy(&net);
}

static void check_layout(adj_test *t, const run_spec *r, adj_dtype dtype, dl_layout_kind kind,
                         const adj_decomposition *layout, const adj_decomposition *root) {
  char label[200], text[48];
  snprintf(label, sizeof label, "%s %s %s (%s)", r->name, adj_dtype_name(dtype),
           adj_partition_format(adj_decomposition_partition(layout), text, sizeof text), dl_layout_names[kind]);
  compare_with_layers(t, label, r, dtype, layout, kind != DL_LAYOUT_CUTS, true);
  compare_with_layers(t, label, r, dtype, layout, kind != DL_LAYOUT_CUTS, false);
  adj_layer *fused = NULL, *seq = NULL;
  ADJ_TEST_OK(t, create_run(r, dtype, layout, true, &fused));
  ADJ_TEST_OK(t, create_run(r, dtype, root, false, &seq));
  if (fused && seq) {
    dl_dottest(t, label, fused);
    if (kind == DL_LAYOUT_ALL && r->taylor) dl_taylor(t, label, fused, DL_TAYLOR_SMOOTH);
    dl_compare_within(t, label, fused, seq, 351u, run_tolerance(r, dtype));
  }
  adj_layer_destroy(&fused), adj_layer_destroy(&seq);
}

static void check_run(adj_test *t, const run_spec *r) {
  adj_decomposition *root = dl_self_layout(t, 4, r->shape);
  for (int kind = DL_LAYOUT_ALL; kind <= DL_LAYOUT_CUTS; kind++) {
    adj_decomposition *layout = dl_size_layout(t, (dl_layout_kind)kind, 4, r->shape, grids);
    for (int dt = ADJ_FLOAT64; layout && dt >= ADJ_FLOAT32; dt--) {
      if (dt == ADJ_FLOAT32 && kind != DL_LAYOUT_CUTS) continue; /* float32 once per run */
      check_layout(t, r, (adj_dtype)dt, (dl_layout_kind)kind, layout, root);
    }
    adj_decomposition_destroy(&layout);
  }
  adj_decomposition_destroy(&root);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t350-deep-halo-layer");
  for (int i = 0; i < N_RUNS; i++) check_run(&t, &runs[i]);
  return adj_test_finish(&t);
}
