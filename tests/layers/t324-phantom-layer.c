/* t324: the phantom-parallel FFN layer and the tensor-parallel layer on a
 * 1 x p partition (p = the run's ranks): each equals its dense equivalent
 * (the n_out x n_in affine map whose block (j, j) is L_j and block (j, i) is
 * D_ij C_i, or W itself) in output, jvp, input gradient and every parameter
 * gradient (float64, within the tolerance of its longest sum); Jacobian
 * dot-product and Taylor tests; counted
 * bytes, messages and applications per layer, forward and backward apart,
 * equal paper Table II's collectives computed here from the layer's shapes:
 * the phantom's k x N all-gather and reduce-scatter, tp's broadcast of
 * n x N and all-gather of n_j x N forward and all-reduce of n x N and
 * reduce-scatter of n_j x N backward; the same summed over a stack of each;
 * their mean over ranks equals the energy model's volume (energy.h);
 * adjoin's 1.5D affine stack on a p x 1 grid (bench-phantom's third
 * baseline) equals tp on the same weights and counts its input all-gather
 * and reduce-scatter per layer, as docs/phantom.md and energy.h state;
 * parameter sizes of the size API equal the allocated blocks; bad
 * configurations fail on every rank with a message naming the bad value.
 *
 * Widths 13 and 11 are prime, so blocks are uneven at every p > 1; one case
 * cuts the input unevenly (quadratic cuts), two have n_in != n_out, and one
 * leaves rank 0 out of the partition (an inactive worker). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist_check.h"
#include "adjoin/affine.h"

typedef struct ph_case {
  int64_t batch, n_in, n_out, k;
  bool bias, uneven_input, large_k;
  bool subset; /* the layer on ranks size-1, ..., 1: rank 0 inactive (when size > 1) */
} ph_case;

static const ph_case cases[] = {
    {5, 13, 13, 2, true, false, false, false},
    {4, 13, 11, 1, false, true, false, false},
    {3, 11, 13, 2, true, false, true, false}, /* k over the eq. 8 bound, allowed */
    {4, 13, 13, 2, true, false, false, true},
};

static bool ph_subset(adj_test *t, const ph_case *c) { return c->subset && t->size > 1; }

static adj_decomposition *ph_input(adj_test *t, const ph_case *c) {
  int64_t cuts[9];
  int p = ph_subset(t, c) ? t->size - 1 : t->size, ranks[8];
  for (int i = 0; i < p; i++) ranks[i] = t->size - 1 - i;
  dl_quadratic_cuts(c->n_in, p, cuts);
  return dl_layout(t, 2, (const int64_t[2]){c->batch, c->n_in}, (const int[2]){1, p}, ph_subset(t, c) ? ranks : NULL,
                   (const int64_t *[2]){NULL, c->uneven_input ? cuts : NULL});
}

static adj_phantom_layer_config ph_config(const ph_case *c, const adj_decomposition *input, adj_dtype dtype) {
  /* p = 1 has no phantom below the bound: (n/p)(1 - 1/p) = 0. */
  return (adj_phantom_layer_config){.dtype = dtype, .input = input, .in_features = c->n_in,
                                    .out_features = c->n_out, .ghosts = c->k,
                                    .allow_large_k = c->large_k || adj_partition_size(adj_decomposition_partition(input)) == 1,
                                    .no_bias = !c->bias};
}

static void ph_label(adj_test *t, const char *kind, const ph_case *c, char *label, size_t size) {
  snprintf(label, size, "%s p=%d N=%lld n=%lld->%lld k=%lld%s%s%s", kind, ph_subset(t, c) ? t->size - 1 : t->size,
           (long long)c->batch, (long long)c->n_in, (long long)c->n_out, (long long)c->k, c->bias ? " bias" : "",
           c->uneven_input ? " uneven-in" : "", ph_subset(t, c) ? " rank0-inactive" : "");
}

/* ---- the dense equivalent ------------------------------------------------------------------- */

/* Block geometry of a phantom layer, from its layouts. */
typedef struct ph_blocks {
  int p;
  int64_t n_in, n_out, k;
  const int64_t *in, *out, *local; /* cuts: p + 1 offsets each */
} ph_blocks;

static ph_blocks ph_blocks_of(adj_layer *layer, int64_t k) {
  const adj_decomposition *in = adj_layer_input_layout(layer), *out = adj_layer_output_layout(layer);
  return (ph_blocks){.p = adj_partition_shape(adj_decomposition_partition(in))[1],
                     .n_in = adj_decomposition_global_shape(in)[1],
                     .n_out = adj_decomposition_global_shape(out)[1],
                     .k = k,
                     .in = adj_decomposition_cuts(in, 1),
                     .out = adj_decomposition_cuts(out, 1),
                     .local = adj_decomposition_cuts(adj_layer_parameter(layer, 0)->layout, 0)};
}

/* Column block of D's row block j that decompresses rank i's ghosts. */
static int64_t ph_slot(int i, int j) { return i < j ? i : i - 1; }

static double ph_get2(const adj_tensor *t, int64_t r, int64_t c) { return adj_tensor_get(t, r * t->shape[1] + c); }

/* W (n_out, n_in) from L, C, D: block (j, j) = L_j, block (j, i) = D_ij C_i.
 * With tangents (dl, dc, dd) it is the tangent dW: dL_j and dD C + D dC. */
static void ph_dense(const ph_blocks *b, const adj_tensor *l, const adj_tensor *c, const adj_tensor *d,
                     const adj_tensor *dl, const adj_tensor *dc, const adj_tensor *dd, adj_tensor *w) {
  for (int j = 0; j < b->p; j++)
    for (int i = 0; i < b->p; i++)
      for (int64_t r = b->out[j]; r < b->out[j + 1]; r++)
        for (int64_t col = b->in[i]; col < b->in[i + 1]; col++) {
          double v = 0;
          if (i == j) {
            int64_t at = b->local[j] + (r - b->out[j]) * (b->in[j + 1] - b->in[j]) + (col - b->in[j]);
            v = adj_tensor_get(dl ? dl : l, at);
          } else {
            for (int64_t q = 0; q < b->k; q++) {
              int64_t dcol = ph_slot(i, j) * b->k + q;
              v += dl ? ph_get2(dd, r, dcol) * ph_get2(c, q, col) + ph_get2(d, r, dcol) * ph_get2(dc, q, col)
                      : ph_get2(d, r, dcol) * ph_get2(c, q, col);
            }
          }
          adj_tensor_set(w, r * b->n_in + col, v);
        }
}

/* The phantom parameters' gradients by the chain rule through W's blocks:
 * grad L_j = gW_jj, grad D_ij = gW_ji C_i^T, grad C_i = sum_j D_ij^T gW_ji. */
static void ph_dense_grads(const ph_blocks *b, const adj_tensor *c, const adj_tensor *d, const adj_tensor *gw,
                           adj_tensor *gl, adj_tensor *gc, adj_tensor *gd) {
  adj_tensor_zero(gl), adj_tensor_zero(gc), adj_tensor_zero(gd);
  for (int j = 0; j < b->p; j++)
    for (int i = 0; i < b->p; i++)
      for (int64_t r = b->out[j]; r < b->out[j + 1]; r++)
        for (int64_t col = b->in[i]; col < b->in[i + 1]; col++) {
          double g = ph_get2(gw, r, col);
          if (i == j) {
            adj_tensor_set(gl, b->local[j] + (r - b->out[j]) * (b->in[j + 1] - b->in[j]) + (col - b->in[j]), g);
            continue;
          }
          for (int64_t q = 0; q < b->k; q++) {
            int64_t dcol = ph_slot(i, j) * b->k + q;
            int64_t at_d = r * d->shape[1] + dcol, at_c = q * b->n_in + col;
            adj_tensor_set(gd, at_d, adj_tensor_get(gd, at_d) + g * adj_tensor_get(c, at_c));
            adj_tensor_set(gc, at_c, adj_tensor_get(gc, at_c) + adj_tensor_get(d, at_d) * g);
          }
        }
}

static adj_tensor ph_new(int rank, const int64_t *shape) {
  adj_tensor t;
  adj_tensor_create(&t, ADJ_FLOAT64, rank, shape);
  return t;
}

/* Distributed against the dense affine kernel on the whole tensors, which
 * every rank computes itself; only the final figures are reduced. */
static void ph_compare_dense(adj_test *t, const char *label, adj_layer *layer, const ph_case *c, bool tp) {
  dl_data g = {0};
  dl_results r = {0};
  dl_data_make(layer, 20261124u, &g);
  dl_run(t, layer, &g, &r);
  int64_t n_in = c->n_in, n_out = c->n_out, shape_w[2] = {n_out, n_in}, shape_y[2] = {c->batch, n_out};
  adj_tensor w = ph_new(2, shape_w), dw = ph_new(2, shape_w), gw = ph_new(2, shape_w), gb = ph_new(1, &n_out);
  adj_tensor ry = ph_new(2, shape_y), rjy = ph_new(2, shape_y), rdx = ph_new(2, g.x.shape);
  ph_blocks b = ph_blocks_of(layer, c->k);
  const adj_tensor *bias = c->bias ? &g.params[tp ? 1 : 3] : NULL, *dbias = c->bias ? &g.tangents[tp ? 1 : 3] : NULL;
  if (tp) adj_tensor_copy(&w, &g.params[0]), adj_tensor_copy(&dw, &g.tangents[0]);
  else {
    ph_dense(&b, &g.params[0], &g.params[1], &g.params[2], NULL, NULL, NULL, &w);
    ph_dense(&b, &g.params[0], &g.params[1], &g.params[2], &g.tangents[0], &g.tangents[1], &g.tangents[2], &dw);
  }
  adj_tensor_zero(&gw), adj_tensor_zero(&gb);
  ADJ_TEST_OK(t, adj_affine_forward(&g.x, &w, bias, &ry));
  ADJ_TEST_OK(t, adj_affine_jvp(&g.x, &w, &g.dx, &dw, dbias, &rjy));
  ADJ_TEST_OK(t, adj_affine_backward(&g.x, &w, &g.dy, &rdx, &gw, c->bias ? &gb : NULL));
  /* Expected gradients of each parameter, as global tensors in its layout. */
  adj_tensor expect[DL_MAX_PARAMS];
  int n = adj_layer_parameter_count(layer);
  for (int i = 0; i < n; i++) expect[i] = ph_new(g.params[i].rank, g.params[i].shape);
  if (tp) adj_tensor_copy(&expect[0], &gw);
  else ph_dense_grads(&b, &g.params[1], &g.params[2], &gw, &expect[0], &expect[1], &expect[2]);
  if (c->bias) adj_tensor_copy(&expect[n - 1], &gb);
  const adj_decomposition *in = adj_layer_input_layout(layer), *out = adj_layer_output_layout(layer);
  double diffs[3] = {fmax(dl_block_diff(out, &r.y, &ry), dl_block_diff(out, &r.jy, &rjy)),
                     dl_block_diff(in, &r.dx, &rdx), 0},
         worst[3];
  for (int i = 0; i < n; i++) {
    adj_parameter *p = adj_layer_parameter(layer, i);
    diffs[2] = fmax(diffs[2], dl_block_diff(p->layout, &p->grad, &expect[i]));
  }
  MPI_Request request;
  MPI_Iallreduce(diffs, worst, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &request);
  adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  adj_test_report(t, "  %-44s vs dense: y/jvp %.1e, dx %.1e, param grads %.1e", label, worst[0], worst[1], worst[2]);
  /* The longest sums: y over the inputs, dx over the outputs, the weight
   * gradient over the batch. */
  double terms = fmax((double)c->batch, fmax((double)c->n_in, (double)c->n_out));
  ADJ_TEST_CHECK(t, fmax(worst[0], fmax(worst[1], worst[2])) <= adj_test_sum_tolerance(adj_layer_dtype(layer), terms),
                 "%s: differs from its dense equivalent: y/jvp %.3e, dx %.3e, grads %.3e", label, worst[0], worst[1],
                 worst[2]);
  /* A layer that computed nothing would match a zero reference. */
  double scale = 0;
  for (int64_t i = 0; i < adj_tensor_volume(&ry); i++) scale = fmax(scale, fabs(adj_tensor_get(&ry, i)));
  ADJ_TEST_CHECK(t, scale > 0.1, "%s: the dense reference output is trivial (max %.3e)", label, scale);
  for (int i = 0; i < n; i++) adj_tensor_destroy(&expect[i]);
  adj_tensor *list[] = {&w, &dw, &gw, &gb, &ry, &rjy, &rdx};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) adj_tensor_destroy(list[i]);
  dl_results_free(&r);
  dl_data_free(&g);
}

/* ---- counted bytes ------------------------------------------------------------------------ */

/* What one rank's counters show for one collective, in elements and messages. */
typedef struct ph_traffic {
  int64_t sent, received, messages_sent, messages_received, applications;
} ph_traffic;

static void ph_add(ph_traffic *t, int64_t sent, int64_t received, bool sends, bool receives) {
  t->sent += sent, t->received += received;
  t->messages_sent += sends, t->messages_received += receives;
  t->applications++;
}

/* Paper Table II's collectives as adjoin's operators count them on this rank,
 * for a group of p ranks.  own is this rank's chunk of an all-gather or
 * reduce-scatter (Table II's m = n/p x N or k x N), whole the gathered size
 * (p chunks) or the broadcast / all-reduced block (Table II's m = n x N).
 * One message per direction and collective; on one rank a broadcast and an
 * all-reduce are local copies and count nothing. */
static void ph_all_gather(ph_traffic *t, int64_t own, int64_t whole) { ph_add(t, own, whole - own, true, true); }
static void ph_reduce_scatter(ph_traffic *t, int p, int64_t own, int64_t whole) {
  ph_add(t, whole - own, own * (p - 1), true, true);
}
static void ph_broadcast(ph_traffic *t, int p, bool root, int64_t whole) {
  ph_add(t, p > 1 && root ? whole : 0, p > 1 && !root ? whole : 0, p > 1 && root, p > 1 && !root);
}
static void ph_all_reduce(ph_traffic *t, int p, int64_t whole) {
  ph_add(t, p > 1 ? whole : 0, p > 1 ? whole : 0, p > 1, p > 1);
}

/* Expected traffic of one layer's forward (fwd) and backward with dx (bwd)
 * on this rank, from the layer's shapes: phantom, an all-gather and a
 * reduce-scatter of k x N per rank; tp, Table II's broadcast of n x N and
 * all-gather of n_j x N forward, all-reduce of n x N and reduce-scatter of
 * n_j x N backward. */
static void ph_expected_traffic(adj_layer *layer, const ph_case *c, bool tp, ph_traffic *fwd, ph_traffic *bwd) {
  *fwd = *bwd = (ph_traffic){0};
  const adj_decomposition *in = adj_layer_input_layout(layer);
  const adj_partition *px = adj_decomposition_partition(in);
  bool active = adj_partition_active(px);
  int p = adj_partition_shape(px)[1];
  int64_t n = c->batch, own = tp ? adj_decomposition_local_block(in).extent[1] * n : c->k * n;
  int64_t whole = tp ? c->n_in * n : p * c->k * n;
  if (tp) ph_broadcast(fwd, p, active && adj_partition_coords(px)[1] == 0, whole), ph_all_reduce(bwd, p, whole);
  ph_all_gather(fwd, own, whole);
  ph_reduce_scatter(bwd, p, own, whole);
  if (active) return;
  /* An inactive worker takes part in every application and moves nothing. */
  *fwd = (ph_traffic){.applications = fwd->applications};
  *bwd = (ph_traffic){.applications = bwd->applications};
}

static void ph_accumulate(ph_traffic *into, const ph_traffic *t) {
  into->sent += t->sent, into->received += t->received, into->applications += t->applications;
  into->messages_sent += t->messages_sent, into->messages_received += t->messages_received;
}

static ph_traffic ph_counted(const adj_op_counters *now, const adj_op_counters *before, int64_t es) {
  return (ph_traffic){.sent = (int64_t)(now->bytes_sent - before->bytes_sent) / es,
                      .received = (int64_t)(now->bytes_received - before->bytes_received) / es,
                      .messages_sent = (int64_t)(now->messages_sent - before->messages_sent),
                      .messages_received = (int64_t)(now->messages_received - before->messages_received),
                      .applications = (int64_t)(now->forward_applications + now->adjoint_applications -
                                                before->forward_applications - before->adjoint_applications)};
}

static bool ph_same(const ph_traffic *a, const ph_traffic *b) {
  return a->sent == b->sent && a->received == b->received && a->messages_sent == b->messages_sent &&
         a->messages_received == b->messages_received && a->applications == b->applications;
}

/* One direction's counted traffic against the expected, reported for rank 0
 * and checked on every rank. */
static void ph_check_traffic(adj_test *t, const char *label, const char *direction, const ph_traffic *got,
                             const ph_traffic *want) {
  adj_test_report(t, "  %-44s %s: sent %lld received %lld elements, %lld/%lld messages (rank 0; expected %lld, %lld, "
                  "%lld/%lld)", label, direction, (long long)got->sent, (long long)got->received,
                  (long long)got->messages_sent, (long long)got->messages_received, (long long)want->sent,
                  (long long)want->received, (long long)want->messages_sent, (long long)want->messages_received);
  ADJ_TEST_CHECK(t, ph_same(got, want),
                 "%s %s on rank %d: counted sent %lld received %lld, %lld/%lld messages, %lld applications; "
                 "expected %lld, %lld, %lld/%lld, %lld", label, direction, t->rank, (long long)got->sent,
                 (long long)got->received, (long long)got->messages_sent, (long long)got->messages_received,
                 (long long)got->applications, (long long)want->sent, (long long)want->received,
                 (long long)want->messages_sent, (long long)want->messages_received, (long long)want->applications);
}

/* The mean over the layer's ranks of the counted elements (sent plus
 * received) against the energy model's volume for the same layer (energy.h),
 * so adjoin-phantom's figures are what the layers move. */
static void ph_check_model(adj_test *t, const char *label, adj_layer *layer, const ph_case *c, bool tp,
                           const ph_traffic *fwd, const ph_traffic *bwd) {
  const adj_partition *px = adj_decomposition_partition(adj_layer_input_layout(layer));
  int p = adj_partition_shape(px)[1];
  double mine = (double)(fwd->sent + fwd->received + bwd->sent + bwd->received), all = 0;
  MPI_Request request;
  MPI_Iallreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
  adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  adj_ffn_shape shape = {.n = c->n_in, .p = p, .k = c->k, .layers = 1, .batch = c->batch};
  double model = tp ? adj_tp_message_floats(&shape) : adj_pp_message_floats(&shape), mean = all / p;
  adj_test_report(t, "  %-44s elements moved per rank and step %.1f, energy model %.1f", label, mean, model);
  ADJ_TEST_CHECK(t, fabs(mean - model) <= 1e-9 * model,
                 "%s: the layer moved %.3f elements per rank, the model says %.3f",
                 label, mean, model);
}

static void ph_check_bytes(adj_test *t, const char *label, adj_layer *layer, const ph_case *c, bool tp) {
  adj_tensor x, y, dx;
  adj_layer_create_input(layer, &x), adj_layer_create_input(layer, &dx), adj_layer_create_output(layer, &y);
  int64_t es = (int64_t)adj_dtype_size(adj_layer_dtype(layer));
  adj_op_counters zero = {0}, after_forward = {0}, after_backward = {0};
  ADJ_TEST_OK(t, adj_phantom_layer_reset_counters(layer));
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
  ADJ_TEST_OK(t, adj_phantom_layer_counters(layer, &after_forward));
  ADJ_TEST_OK(t, adj_layer_backward(layer, &y, &dx));
  ADJ_TEST_OK(t, adj_phantom_layer_counters(layer, &after_backward));
  ph_traffic want_fwd, want_bwd, got_fwd = ph_counted(&after_forward, &zero, es),
                                 got_bwd = ph_counted(&after_backward, &after_forward, es);
  ph_expected_traffic(layer, c, tp, &want_fwd, &want_bwd);
  ph_check_traffic(t, label, "forward ", &got_fwd, &want_fwd);
  ph_check_traffic(t, label, "backward", &got_bwd, &want_bwd);
  ph_check_model(t, label, layer, c, tp, &got_fwd, &got_bwd);
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dx);
}

/* The size API against the blocks the layer allocated on this rank. */
static void ph_check_size(adj_test *t, const char *label, adj_layer *layer, const ph_case *c, bool tp) {
  int64_t weights = 0, biases = 0;
  for (int i = 0; i < adj_layer_parameter_count(layer); i++) {
    adj_parameter *p = adj_layer_parameter(layer, i);
    int64_t v = adj_tensor_volume(&p->value);
    if (strcmp(p->name, "bias") == 0) biases += v;
    else weights += v;
  }
  adj_phantom_size s = tp ? adj_tp_layer_size(c->n_in, c->n_out, t->size, t->rank)
                          : adj_phantom_layer_size(c->n_in, c->n_out, t->size, c->k, t->rank);
  int64_t want_biases = c->bias ? s.biases : 0;
  /* The size API assumes balanced input blocks and ranks 0..p-1. */
  if (!c->uneven_input && !ph_subset(t, c))
    ADJ_TEST_CHECK(t, s.weights == weights && want_biases == biases,
                   "%s: size API says %lld weights %lld biases on rank %d, the layer holds %lld and %lld", label,
                   (long long)s.weights, (long long)want_biases, t->rank, (long long)weights, (long long)biases);
}

static void check_case(adj_test *t, const ph_case *c, bool tp) {
  char label[160];
  ph_label(t, tp ? "tp" : "phantom", c, label, sizeof label);
  adj_decomposition *input = ph_input(t, c);
  adj_layer *layer = NULL;
  adj_phantom_layer_config config = ph_config(c, input, ADJ_FLOAT64);
  if (input) ADJ_TEST_OK(t, tp ? adj_tp_layer_create(&config, &layer) : adj_phantom_layer_create(&config, &layer));
  if (layer) {
    dl_dottest(t, label, layer);
    dl_taylor(t, label, layer, DL_TAYLOR_SMOOTH);
    ph_compare_dense(t, label, layer, c, tp);
    ph_check_bytes(t, label, layer, c, tp);
    ph_check_size(t, label, layer, c, tp);
  }
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&input);
}

/* The layers a stack is made of. */
typedef enum ph_stack_kind { PH_STACK_PHANTOM, PH_STACK_TP, PH_STACK_MP15 } ph_stack_kind;

/* layers[0..2 depth): depth layers of the kind with a ReLU after each, each
 * taking the previous output layout as it is; the 1.5D layer reads the 1 x p
 * input partition as P_c = 1, P_r = p. */
static void ph_stack(adj_test *t, const ph_case *c, const adj_decomposition *input, ph_stack_kind kind, int depth,
                     adj_layer **layers) {
  const adj_decomposition *at = input;
  for (int l = 0; at && l < depth; l++) {
    adj_phantom_layer_config config = ph_config(c, at, ADJ_FLOAT64);
    adj_affine15_layer_config mp = {.dtype = ADJ_FLOAT64, .input = at, .out_features = c->n_out};
    adj_layer **layer = &layers[2 * l];
    ADJ_TEST_OK(t, kind == PH_STACK_MP15 ? adj_affine15_layer_create(&mp, layer)
                   : kind == PH_STACK_TP ? adj_tp_layer_create(&config, layer)
                                         : adj_phantom_layer_create(&config, layer));
    if (!*layer) return;
    ADJ_TEST_OK(t, adj_activation_layer_create(&(adj_activation_layer_config){.dtype = ADJ_FLOAT64,
                                                   .input = adj_layer_output_layout(*layer),
                                                   .activation = {.kind = ADJ_RELU}},
                                               &layers[2 * l + 1]));
    at = layers[2 * l + 1] ? adj_layer_output_layout(layers[2 * l + 1]) : NULL;
  }
}

/* A stack of phantom (or tp) layers with ReLU between them: each layer takes
 * the previous one's output layout as it is (no repartition), and the counted
 * traffic of a step (input gradient asked of every layer) is the layers' own
 * collectives and nothing more. */
static void test_stack(adj_test *t, bool tp) {
  enum { DEPTH = 3 };
  const ph_case c = {6, 13, 13, 2, true, false, false, false};
  adj_decomposition *input = ph_input(t, &c);
  adj_layer *layers[2 * DEPTH] = {NULL};
  ph_stack(t, &c, input, tp ? PH_STACK_TP : PH_STACK_PHANTOM, DEPTH, layers);
  if (!layers[2 * DEPTH - 1]) {
    for (int i = 0; i < 2 * DEPTH; i++) adj_layer_destroy(&layers[i]);
    adj_decomposition_destroy(&input);
    return;
  }
  adj_tensor acts[2 * DEPTH + 1], grads[2 * DEPTH + 1];
  adj_rng *rng;
  adj_rng_create(5u + (uint64_t)t->rank, &rng);
  for (int i = 0; i <= 2 * DEPTH; i++) {
    adj_layer *shape_of = layers[i < 2 * DEPTH ? i : 2 * DEPTH - 1];
    if (i < 2 * DEPTH) adj_layer_create_input(shape_of, &acts[i]), adj_layer_create_input(shape_of, &grads[i]);
    else adj_layer_create_output(shape_of, &acts[i]), adj_layer_create_output(shape_of, &grads[i]);
  }
  adj_rng_fill_uniform(rng, &acts[0], -1, 1), adj_rng_fill_uniform(rng, &grads[2 * DEPTH], -1, 1);
  for (int l = 0; l < DEPTH; l++) {
    adj_layer *ph = layers[2 * l];
    for (int i = 0; i < adj_layer_parameter_count(ph); i++)
      adj_rng_fill_uniform(rng, &adj_layer_parameter(ph, i)->value, -1, 1);
    adj_phantom_layer_reset_counters(ph);
  }
  adj_rng_destroy(&rng);
  for (int i = 0; i < 2 * DEPTH; i++) ADJ_TEST_OK(t, adj_layer_forward(layers[i], &acts[i], &acts[i + 1]));
  for (int i = 2 * DEPTH - 1; i >= 0; i--) ADJ_TEST_OK(t, adj_layer_backward(layers[i], &grads[i + 1], &grads[i]));
  int64_t es = (int64_t)sizeof(double);
  ph_traffic got = {0}, want = {0}, fwd, bwd;
  for (int l = 0; l < DEPTH; l++) {
    adj_op_counters counted, zero = {0};
    ADJ_TEST_OK(t, adj_phantom_layer_counters(layers[2 * l], &counted));
    ph_traffic one = ph_counted(&counted, &zero, es);
    ph_expected_traffic(layers[2 * l], &c, tp, &fwd, &bwd);
    ph_accumulate(&got, &one), ph_accumulate(&want, &fwd), ph_accumulate(&want, &bwd);
  }
  char label[96];
  snprintf(label, sizeof label, "stack of %d %s+ReLU p=%d n=13 k=2 N=6", DEPTH, tp ? "tp" : "phantom", t->size);
  ph_check_traffic(t, label, "step", &got, &want);
  for (int i = 0; i <= 2 * DEPTH; i++) adj_tensor_destroy(&acts[i]), adj_tensor_destroy(&grads[i]);
  for (int i = 0; i < 2 * DEPTH; i++) adj_layer_destroy(&layers[i]);
  adj_decomposition_destroy(&input);
}

/* ---- adjoin's 1.5D layer as the model-parallel baseline ------------------------------------ */

enum { MP_DEPTH = 3 };

/* layers[0..2 MP_DEPTH): tp or 1.5D affine layers with ReLU after each. */
static void mp_stack(adj_test *t, const ph_case *c, const adj_decomposition *input, bool mp15, adj_layer **layers) {
  ph_stack(t, c, input, mp15 ? PH_STACK_MP15 : PH_STACK_TP, MP_DEPTH, layers);
}

/* The same global weights and biases (drawn alike on every rank) into both
 * stacks: tp's weight (n, n) split by rows is the plain dense matrix, as is
 * the 1.5D layer's (rows over P_r). */
static void mp_share_parameters(adj_test *t, adj_layer **tp, adj_layer **mp) {
  adj_rng *rng;
  adj_rng_create(29u, &rng);
  for (int l = 0; l < MP_DEPTH; l++)
    for (int i = 0; i < adj_layer_parameter_count(tp[2 * l]); i++) {
      adj_parameter *q = adj_layer_parameter(tp[2 * l], i);
      adj_tensor global;
      adj_tensor_create(&global, ADJ_FLOAT64, adj_decomposition_rank(q->layout),
                        adj_decomposition_global_shape(q->layout));
      adj_rng_fill_uniform(rng, &global, -0.5, 0.5);
      ADJ_TEST_OK(t, adj_layer_set_parameter(tp[2 * l], i, 0, &global));
      ADJ_TEST_OK(t, adj_layer_set_parameter(mp[2 * l], i, 0, &global));
      adj_tensor_destroy(&global);
    }
  adj_rng_destroy(&rng);
}

/* Largest difference of two local blocks; infinite when their shapes differ. */
static double mp_diff(const adj_tensor *a, const adj_tensor *b) {
  if (adj_tensor_volume(a) != adj_tensor_volume(b)) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < adj_tensor_volume(a); i++)
    worst = fmax(worst, fabs(adj_tensor_get(a, i) - adj_tensor_get(b, i)));
  return worst;
}

static void ph_subtract(ph_traffic *from, const ph_traffic *t) {
  from->sent -= t->sent, from->received -= t->received, from->applications -= t->applications;
  from->messages_sent -= t->messages_sent, from->messages_received -= t->messages_received;
}

/* The 1.5D stack's traffic on this rank, all of its operators summed. */
static ph_traffic mp_counted(adj_test *t, adj_layer **mp) {
  ph_traffic sum = {0};
  adj_op_counters zero = {0};
  for (int l = 0; l < MP_DEPTH; l++) {
    adj_affine15_counters c;
    ADJ_TEST_OK(t, adj_affine15_layer_counters(mp[2 * l], &c));
    const adj_op_counters *ops[] = {&c.gather, &c.weight, &c.bias};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
      ph_traffic one = ph_counted(ops[i], &zero, (int64_t)sizeof(double));
      ph_accumulate(&sum, &one);
    }
  }
  return sum;
}

/* What docs/phantom.md states for one 1.5D layer on P_r = p, P_c = 1, from
 * the shapes: forward the input all-gather (n_j N sent, (n - n_j) N
 * received) and the weight and bias broadcasts over one worker (nothing);
 * backward the reduce-scatter ((n - n_j) N sent, (p-1) n_j N received) and
 * the two sum-reduces over one worker (nothing). */
static void mp_expected(adj_layer *layer, const ph_case *c, ph_traffic *fwd, ph_traffic *bwd) {
  const adj_decomposition *in = adj_layer_input_layout(layer);
  int p = adj_partition_shape(adj_decomposition_partition(in))[1];
  int64_t own = adj_decomposition_local_block(in).extent[1] * c->batch, whole = c->n_in * c->batch;
  ph_all_gather(fwd, own, whole);
  ph_reduce_scatter(bwd, p, own, whole);
  for (int i = 0; i < 2; i++) ph_broadcast(fwd, 1, true, whole), ph_broadcast(bwd, 1, true, whole);
}

static void mp_check_traffic(adj_test *t, const ph_case *c, adj_layer **mp, const ph_traffic *got_fwd,
                             const ph_traffic *got_bwd) {
  ph_traffic want_fwd = {0}, want_bwd = {0};
  for (int l = 0; l < MP_DEPTH; l++) mp_expected(mp[2 * l], c, &want_fwd, &want_bwd);
  char label[96];
  snprintf(label, sizeof label, "stack of %d 1.5D+ReLU %dx1 n=13 N=6", MP_DEPTH, t->size);
  ph_check_traffic(t, label, "forward ", got_fwd, &want_fwd);
  ph_check_traffic(t, label, "backward", got_bwd, &want_bwd);
  double mine = (double)(got_fwd->sent + got_fwd->received + got_bwd->sent + got_bwd->received), all = 0;
  MPI_Request request;
  MPI_Iallreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
  adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  adj_ffn_shape shape = {.n = c->n_in, .p = t->size, .layers = MP_DEPTH, .batch = c->batch};
  double model = adj_mp15_message_floats(&shape), mean = all / t->size;
  adj_test_report(t, "  %-44s elements moved per rank and step %.1f, energy model (mp15) %.1f", label, mean, model);
  ADJ_TEST_CHECK(t, fabs(mean - model) <= 1e-9 * model, "%s: moved %.3f elements per rank, the model says %.3f",
                 label, mean, model);
}

/* Output, input gradient and every parameter gradient of the 1.5D stack
 * against tp's on the same weights (tp equals the dense layer, above). */
static void mp_check_equal(adj_test *t, adj_layer **tp, adj_layer **mp, const adj_tensor *y, const adj_tensor *dx) {
  double diffs[3] = {mp_diff(&y[0], &y[1]), mp_diff(&dx[0], &dx[1]), 0}, scale = 0, worst[3];
  for (int l = 0; l < MP_DEPTH; l++)
    for (int i = 0; i < adj_layer_parameter_count(tp[2 * l]); i++)
      diffs[2] = fmax(diffs[2], mp_diff(&adj_layer_parameter(tp[2 * l], i)->grad,
                                        &adj_layer_parameter(mp[2 * l], i)->grad));
  for (int64_t i = 0; i < adj_tensor_volume(&y[0]); i++) scale = fmax(scale, fabs(adj_tensor_get(&y[0], i)));
  MPI_Request requests[2];
  MPI_Iallreduce(diffs, worst, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &requests[0]);
  MPI_Iallreduce(MPI_IN_PLACE, &scale, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &requests[1]);
  adj_wait_all(2, requests, ADJ_WAIT_YIELD);
  adj_test_report(t, "  stack of %d 1.5D+ReLU %dx1 vs tp, same weights: y %.1e (max |y| %.2f), dx %.1e, grads %.1e",
                  MP_DEPTH, t->size, worst[0], scale, worst[1], worst[2]);
  /* Each layer sums over its features; the stack chains MP_DEPTH of them. */
  const adj_decomposition *in = adj_layer_input_layout(tp[0]);
  double terms = (double)adj_decomposition_global_shape(in)[1] * MP_DEPTH;
  double tolerance = adj_test_sum_tolerance(ADJ_FLOAT64, terms) * fmax(scale, 1);
  ADJ_TEST_CHECK(t, fmax(worst[0], fmax(worst[1], worst[2])) <= tolerance,
                 "1.5D stack differs from tp: y %.3e, dx %.3e, grads %.3e", worst[0], worst[1], worst[2]);
  ADJ_TEST_CHECK(t, scale > 0.1, "the stacks' output is trivial (max %.3e)", scale);
}

/* adjoin's 1.5D affine stack on a p x 1 grid (pure model parallelism, the
 * third baseline of bench-phantom): equal to tp on the same weights, and its
 * counted traffic is the input all-gather and reduce-scatter per layer that
 * docs/phantom.md and the energy model (adj_mp15_message_floats) state. */
static void test_mp15(adj_test *t) {
  const ph_case c = {6, 13, 13, 2, true, false, false, false};
  adj_decomposition *input = ph_input(t, &c);
  adj_layer *tp[2 * MP_DEPTH] = {NULL}, *mp[2 * MP_DEPTH] = {NULL};
  mp_stack(t, &c, input, false, tp), mp_stack(t, &c, input, true, mp);
  if (!tp[2 * MP_DEPTH - 1] || !mp[2 * MP_DEPTH - 1]) return;
  mp_share_parameters(t, tp, mp);
  adj_layer *tp_net = NULL, *mp_net = NULL;
  ADJ_TEST_OK(t, adj_network_create("tp-stack", 2 * MP_DEPTH, tp, &tp_net));
  ADJ_TEST_OK(t, adj_network_create("mp15-stack", 2 * MP_DEPTH, mp, &mp_net));
  adj_tensor x, dy, y[2], dx[2];
  adj_layer_create_input(tp_net, &x), adj_layer_create_output(tp_net, &dy);
  adj_rng *rng;
  adj_rng_create(31u + (uint64_t)t->rank, &rng);
  adj_rng_fill_uniform(rng, &x, -1, 1), adj_rng_fill_uniform(rng, &dy, -1, 1);
  adj_rng_destroy(&rng);
  adj_layer *nets[2] = {tp_net, mp_net};
  for (int i = 0; i < 2; i++) adj_layer_create_output(nets[i], &y[i]), adj_layer_create_input(nets[i], &dx[i]);
  ADJ_TEST_OK(t, adj_layer_forward(tp_net, &x, &y[0]));
  ADJ_TEST_OK(t, adj_layer_backward(tp_net, &dy, &dx[0]));
  for (int l = 0; l < MP_DEPTH; l++) adj_affine15_layer_reset_counters(mp[2 * l]);
  ADJ_TEST_OK(t, adj_layer_forward(mp_net, &x, &y[1]));
  ph_traffic got_fwd = mp_counted(t, mp);
  ADJ_TEST_OK(t, adj_layer_backward(mp_net, &dy, &dx[1]));
  ph_traffic got_bwd = mp_counted(t, mp);
  ph_subtract(&got_bwd, &got_fwd);
  mp_check_equal(t, tp, mp, y, dx);
  mp_check_traffic(t, &c, mp, &got_fwd, &got_bwd);
  adj_tensor *list[] = {&x, &dy, &y[0], &y[1], &dx[0], &dx[1]};
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++) adj_tensor_destroy(list[i]);
  adj_layer_destroy(&tp_net), adj_layer_destroy(&mp_net);
  for (int i = 0; i < 2 * MP_DEPTH; i++) adj_layer_destroy(&tp[i]), adj_layer_destroy(&mp[i]);
  adj_decomposition_destroy(&input);
}

static void test_float32(adj_test *t) {
  const ph_case *c = &cases[0];
  adj_decomposition *input = ph_input(t, c);
  for (int tp = 0; tp < 2 && input; tp++) {
    adj_layer *layer = NULL;
    adj_phantom_layer_config config = ph_config(c, input, ADJ_FLOAT32);
    ADJ_TEST_OK(t, tp ? adj_tp_layer_create(&config, &layer) : adj_phantom_layer_create(&config, &layer));
    char label[160];
    ph_label(t, tp ? "float32 tp" : "float32 phantom", c, label, sizeof label);
    if (layer) dl_dottest(t, label, layer), ph_check_bytes(t, label, layer, c, tp);
    adj_layer_destroy(&layer);
  }
  adj_decomposition_destroy(&input);
}

static void test_errors(adj_test *t) {
  adj_decomposition *input = ph_input(t, &(ph_case){4, 13, 13, 1, true, false, false, false});
  adj_layer *layer = NULL;
  adj_phantom_layer_config config = {.dtype = ADJ_FLOAT64, .input = input, .in_features = 13, .ghosts = 0};
  dl_expect_error(t, "k = 0", adj_phantom_layer_create(&config, &layer), &layer, "ghosts k = 0 must be >= 1");
  config.ghosts = -3;
  dl_expect_error(t, "k = -3", adj_phantom_layer_create(&config, &layer), &layer, "ghosts k = -3 must be >= 1");
  /* The smallest k at the bound: k p^2 >= n (p - 1). */
  int p = t->size;
  config.ghosts = p == 1 ? 1 : (13 * (p - 1) + p * p - 1) / (p * p);
  char phrase[128];
  snprintf(phrase, sizeof phrase, "ghosts k = %lld is not below the eq. 8 bound", (long long)config.ghosts);
  dl_expect_error(t, "k at the eq. 8 bound", adj_phantom_layer_create(&config, &layer), &layer, phrase);
  config.ghosts = 1, config.in_features = 12;
  dl_expect_error(t, "in_features 12, input width 13", adj_phantom_layer_create(&config, &layer), &layer,
                  "in_features 12 does not match the input's width 13");
  dl_expect_error(t, "tp: in_features 12, input width 13", adj_tp_layer_create(&config, &layer), &layer,
                  "in_features 12 does not match the input's width 13");
  config.in_features = 13, config.out_features = p - 1, config.allow_large_k = true;
  if (p > 1) {
    snprintf(phrase, sizeof phrase, "n_out = %d must be at least p = %d", p - 1, p);
    dl_expect_error(t, "n_out < p", adj_phantom_layer_create(&config, &layer), &layer, phrase);
  }
  adj_decomposition_destroy(&input);
  if (p > 1) {
    /* n_in < p: a width-1 input split over p ranks. */
    input = dl_layout(t, 2, (const int64_t[2]){4, p - 1}, (const int[2]){1, p}, NULL, NULL);
    config = (adj_phantom_layer_config){.dtype = ADJ_FLOAT64, .input = input, .in_features = p - 1, .ghosts = 1,
                                        .allow_large_k = true};
    snprintf(phrase, sizeof phrase, "n_in = %d and n_out = %d must be at least p = %d", p - 1, p - 1, p);
    dl_expect_error(t, "n_in < p", adj_phantom_layer_create(&config, &layer), &layer, phrase);
    adj_decomposition_destroy(&input);
    /* The batch split instead of the features. */
    input = dl_layout(t, 2, (const int64_t[2]){8, 13}, (const int[2]){p, 1}, NULL, NULL);
    config = (adj_phantom_layer_config){.dtype = ADJ_FLOAT64, .input = input, .in_features = 13, .ghosts = 1};
    dl_expect_error(t, "batch-split input", adj_phantom_layer_create(&config, &layer), &layer, "on a 1 x p partition");
    adj_decomposition_destroy(&input);
  }
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t324-phantom-layer");
  adj_test_report(&t, "t324 on %d ranks (float64 unless noted)", t.size);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&t, &cases[i], false);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&t, &cases[i], true);
  test_stack(&t, false);
  test_stack(&t, true);
  test_mp15(&t);
  test_float32(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}
