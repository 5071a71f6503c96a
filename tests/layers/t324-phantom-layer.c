/* t324: the phantom-parallel FFN layer and the tensor-parallel layer on a
 * 1 x p partition (p = the run's ranks): each equals its dense equivalent
 * (the n_out x n_in affine map whose block (j, j) is L_j and block (j, i) is
 * D_ij C_i, or W itself) in output, jvp, input gradient and every parameter
 * gradient (float64, 1e-12); Jacobian dot-product and Taylor tests; counted
 * bytes per layer and step equal the k x N all-gather and reduce-scatter
 * (phantom) or the n/p x N ones (tp), also summed over a stack; parameter
 * sizes of the size API equal the allocated blocks; bad configurations fail
 * on every rank with a message naming the bad value.
 *
 * Widths 13 and 11 are prime, so blocks are uneven at every p > 1; one case
 * cuts the input unevenly (quadratic cuts) and one has n_in != n_out. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist_check.h"

typedef struct ph_case {
  int64_t batch, n_in, n_out, k;
  bool bias, uneven_input, large_k;
} ph_case;

static const ph_case cases[] = {
    {5, 13, 13, 2, true, false, false},
    {4, 13, 11, 1, false, true, false},
    {3, 11, 13, 2, true, false, true}, /* k over the eq. 8 bound, allowed */
};

static adj_decomposition *ph_input(adj_test *t, const ph_case *c) {
  int64_t cuts[9];
  dl_quadratic_cuts(c->n_in, t->size, cuts);
  return dl_layout(t, 2, (const int64_t[2]){c->batch, c->n_in}, (const int[2]){1, t->size}, NULL,
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
  snprintf(label, size, "%s p=%d N=%lld n=%lld->%lld k=%lld%s%s", kind, t->size, (long long)c->batch,
           (long long)c->n_in, (long long)c->n_out, (long long)c->k, c->bias ? " bias" : "",
           c->uneven_input ? " uneven-in" : "");
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
  ADJ_TEST_CHECK(t, fmax(worst[0], fmax(worst[1], worst[2])) <= 1e-12,
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

/* Expected counters of one forward + backward on this rank: the phantom's
 * all-gather of k x N (sent k N, received (p-1) k N) and its reduce-scatter
 * (sent (p-1) k N, received (p-1) k N); tp's the same on n_j x N blocks. */
static void ph_expected_bytes(adj_layer *layer, const ph_case *c, bool tp, int64_t steps, uint64_t *sent,
                              uint64_t *received) {
  const adj_decomposition *in = adj_layer_input_layout(layer);
  int p = adj_partition_shape(adj_decomposition_partition(in))[1];
  int64_t own = tp ? adj_decomposition_local_block(in).extent[1] : c->k, all = tp ? c->n_in : p * c->k;
  int64_t es = (int64_t)adj_dtype_size(adj_layer_dtype(layer)), n = c->batch;
  *sent = (uint64_t)(steps * (own + (all - own)) * n * es);
  *received = (uint64_t)(steps * ((all - own) + own * (p - 1)) * n * es);
}

static void ph_check_bytes(adj_test *t, const char *label, adj_layer *layer, const ph_case *c, bool tp) {
  adj_tensor x, y, dx;
  adj_layer_create_input(layer, &x), adj_layer_create_input(layer, &dx), adj_layer_create_output(layer, &y);
  ADJ_TEST_OK(t, adj_phantom_layer_reset_counters(layer));
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
  ADJ_TEST_OK(t, adj_layer_backward(layer, &y, &dx));
  adj_op_counters got = {0};
  ADJ_TEST_OK(t, adj_phantom_layer_counters(layer, &got));
  uint64_t sent, received;
  ph_expected_bytes(layer, c, tp, 1, &sent, &received);
  adj_test_report(t, "  %-44s bytes per step: sent %llu received %llu (rank 0; expected %llu, %llu)", label,
                  (unsigned long long)got.bytes_sent, (unsigned long long)got.bytes_received,
                  (unsigned long long)sent, (unsigned long long)received);
  ADJ_TEST_CHECK(t, got.bytes_sent == sent && got.bytes_received == received && got.forward_applications == 1 &&
                        got.adjoint_applications == 1,
                 "%s: counted sent %llu received %llu (fwd %llu adj %llu), expected %llu and %llu", label,
                 (unsigned long long)got.bytes_sent, (unsigned long long)got.bytes_received,
                 (unsigned long long)got.forward_applications, (unsigned long long)got.adjoint_applications,
                 (unsigned long long)sent, (unsigned long long)received);
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
  /* The size API assumes balanced input blocks. */
  if (!c->uneven_input)
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

/* A stack of phantom layers with ReLU between them: each layer takes the
 * previous one's output layout as it is (no repartition), and the counted
 * bytes of a step are the layers' k x N collectives and nothing more. */
static void test_stack(adj_test *t) {
  enum { DEPTH = 3 };
  const ph_case c = {6, 13, 13, 2, true, false, false};
  adj_decomposition *input = ph_input(t, &c);
  adj_layer *layers[2 * DEPTH] = {NULL};
  const adj_decomposition *at = input;
  for (int l = 0; at && l < DEPTH; l++) {
    adj_phantom_layer_config config = ph_config(&c, at, ADJ_FLOAT64);
    ADJ_TEST_OK(t, adj_phantom_layer_create(&config, &layers[2 * l]));
    if (!layers[2 * l]) return;
    ADJ_TEST_OK(t, adj_activation_layer_create(&(adj_activation_layer_config){.dtype = ADJ_FLOAT64,
                                                   .input = adj_layer_output_layout(layers[2 * l]),
                                                   .activation = {.kind = ADJ_RELU}},
                                               &layers[2 * l + 1]));
    at = layers[2 * l + 1] ? adj_layer_output_layout(layers[2 * l + 1]) : NULL;
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
  uint64_t sent = 0, received = 0, want_sent, want_received;
  for (int l = 0; l < DEPTH; l++) {
    adj_op_counters got;
    adj_phantom_layer_counters(layers[2 * l], &got);
    sent += got.bytes_sent, received += got.bytes_received;
  }
  ph_expected_bytes(layers[0], &c, false, DEPTH, &want_sent, &want_received);
  adj_test_report(t, "  stack of %d phantom+ReLU layers p=%d n=13 k=2 N=6: bytes sent %llu received %llu per step "
                  "(rank 0; expected %llu, %llu)", DEPTH, t->size, (unsigned long long)sent,
                  (unsigned long long)received, (unsigned long long)want_sent, (unsigned long long)want_received);
  ADJ_TEST_CHECK(t, sent == want_sent && received == want_received,
                 "stack: counted %llu/%llu bytes, expected %llu/%llu", (unsigned long long)sent,
                 (unsigned long long)received, (unsigned long long)want_sent, (unsigned long long)want_received);
  for (int i = 0; i <= 2 * DEPTH; i++) adj_tensor_destroy(&acts[i]), adj_tensor_destroy(&grads[i]);
  for (int i = 0; i < 2 * DEPTH; i++) adj_layer_destroy(&layers[i]);
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
  adj_decomposition *input = ph_input(t, &(ph_case){4, 13, 13, 1, true, false, false});
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
  test_stack(&t);
  test_float32(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}
