/* Distributed == sequential and the Jacobian dot-product test on a built
 * network (include/adjoin/network_check.h).  Global tensors (inputs,
 * targets, gradients) are small here: they are held whole on every rank as
 * float64, each rank copies its block in or out, and a sum over ranks
 * assembles a global tensor (the blocks of a decomposition are disjoint). */
#include "adjoin/network_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/layer_dottest.h"
#include "adjoin/loss_layers.h"
#include "adjoin/network.h"
#include "adjoin/network_build.h"
#include "adjoin/rng.h"
#include "adjoin/xent_layer.h"
#include "error_impl.h"

typedef struct check_state {
  const adj_network_check_config *c;
  adj_wait_policy wait;
  adj_layer *net[2];        /* the placed network, the sequential one */
  int64_t *labels;          /* (N) */
  adj_tensor input, target; /* global, float64, on every rank */
  bool reduced;             /* the network ends in a reduced loss: d loss = 1 */
} check_state;

/* ---- global tensors ----------------------------------------------------------------------- */

/* This rank's block of a float64 global tensor into a local tensor of the
 * decomposition's block shape and the given dtype. */
static int check_scatter(const adj_tensor *global, const adj_decomposition *layout, adj_dtype dtype, adj_tensor *local) {
  ADJ_CALL(adj_decomposition_create_local(layout, dtype, local));
  adj_box box = adj_decomposition_local_block(layout);
  int64_t volume = adj_tensor_volume(local), index[ADJ_MAX_RANK] = {0};
  for (int64_t k = 0; k < volume; k++) {
    int64_t flat = 0;
    for (int d = 0; d < box.rank; d++) flat = flat * global->shape[d] + box.start[d] + index[d];
    adj_tensor_set(local, k, adj_tensor_get(global, flat));
    for (int d = box.rank - 1; d >= 0 && ++index[d] == box.extent[d]; d--) index[d] = 0;
  }
  return ADJ_SUCCESS;
}

/* The global float64 tensor of which each rank holds `local` at its block. */
static int check_gather(MPI_Comm comm, adj_wait_policy wait, const adj_tensor *local, const adj_decomposition *layout,
                        adj_tensor *global) {
  const int64_t *shape = adj_decomposition_global_shape(layout);
  ADJ_CALL(adj_tensor_create(global, ADJ_FLOAT64, adj_decomposition_rank(layout), shape));
  adj_box box = adj_decomposition_local_block(layout);
  int64_t volume = adj_tensor_volume(local), index[ADJ_MAX_RANK] = {0};
  for (int64_t k = 0; k < volume; k++) {
    int64_t flat = 0;
    for (int d = 0; d < box.rank; d++) flat = flat * shape[d] + box.start[d] + index[d];
    adj_tensor_set(global, flat, adj_tensor_get(local, k));
    for (int d = box.rank - 1; d >= 0 && ++index[d] == box.extent[d]; d--) index[d] = 0;
  }
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Iallreduce(MPI_IN_PLACE, global->data, (int)adj_tensor_volume(global), MPI_DOUBLE, MPI_SUM, comm, &r));
  return adj_wait_all(1, &r, wait);
}

/* Largest |a - b| relative to the largest |b| (0 when both vanish). */
static double check_diff(const adj_tensor *a, const adj_tensor *b) {
  double diff = 0, scale = 0;
  for (int64_t k = 0; k < adj_tensor_volume(b); k++) {
    diff = fmax(diff, fabs(adj_tensor_get(a, k) - adj_tensor_get(b, k)));
    scale = fmax(scale, fabs(adj_tensor_get(b, k)));
  }
  return diff == 0 ? 0 : scale > 0 ? diff / scale : INFINITY;
}

/* ---- what the networks see ---------------------------------------------------------------- */

/* The global input: the caller's (broadcast from rank 0) or drawn. */
static int check_input(check_state *s, adj_rng *rng) {
  const adj_description *d = s->c->description;
  int64_t shape[ADJ_DESC_MAX_DIMS + 1] = {s->c->batch};
  memcpy(shape + 1, d->input_shape, sizeof d->input_shape);
  ADJ_CALL(adj_tensor_create(&s->input, ADJ_FLOAT64, d->input_rank + 1, shape));
  adj_rng_fill_uniform(rng, &s->input, -1, 1);
  int rank;
  MPI_Comm_rank(s->c->comm, &rank);
  int given = rank == 0 && s->c->input != NULL;
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Ibcast(&given, 1, MPI_INT, 0, s->c->comm, &r));
  ADJ_CALL(adj_wait_all(1, &r, s->wait));
  if (!given) return ADJ_SUCCESS;
  int status = ADJ_SUCCESS;
  if (rank == 0) {
    status = adj_tensor_volume(s->c->input) == adj_tensor_volume(&s->input)
                 ? ADJ_SUCCESS
                 : adj_error_set(ADJ_ERR_SIZE, "network check: the input has %lld elements, the network takes %lld",
                                 (long long)adj_tensor_volume(s->c->input), (long long)adj_tensor_volume(&s->input));
    for (int64_t k = 0; !status && k < adj_tensor_volume(&s->input); k++)
      adj_tensor_set(&s->input, k, adj_tensor_get(s->c->input, k));
  }
  ADJ_CALL(adj_status_agree(s->c->comm, status, s->wait));
  ADJ_CALL_MPI(MPI_Ibcast(s->input.data, (int)adj_tensor_volume(&s->input), MPI_DOUBLE, 0, s->c->comm, &r));
  return adj_wait_all(1, &r, s->wait);
}

/* Labels (xent, nll) or targets (other losses) for the loss, alike in both
 * networks: drawn on every rank, the caller's labels taken from rank 0. */
static int check_targets(check_state *s, adj_rng *rng) {
  const adj_description *d = s->c->description;
  int loss = adj_description_loss(d);
  if (loss < 0) return ADJ_SUCCESS;
  const adj_desc_layer *l = &d->layers[loss];
  int64_t n = s->c->batch, classes = l->in_shape[0];
  s->reduced = l->kind == ADJ_DESC_XENT || l->u.loss.reduction != ADJ_LOSS_NONE;
  s->labels = calloc((size_t)n, sizeof *s->labels);
  ADJ_CHECK(s->labels, ADJ_ERR_MEM, "network check: out of memory");
  for (int64_t i = 0; i < n; i++) s->labels[i] = (int64_t)adj_rng_below(rng, (uint64_t)classes);
  int rank;
  MPI_Comm_rank(s->c->comm, &rank);
  if (rank == 0 && s->c->labels) memcpy(s->labels, s->c->labels, sizeof *s->labels * (size_t)n);
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Ibcast(s->labels, (int)n, MPI_INT64_T, 0, s->c->comm, &r));
  ADJ_CALL(adj_wait_all(1, &r, s->wait));
  int64_t shape[ADJ_DESC_MAX_DIMS + 1] = {n};
  memcpy(shape + 1, l->in_shape, sizeof l->in_shape);
  ADJ_CALL(adj_tensor_create(&s->target, ADJ_FLOAT64, l->in_rank + 1, shape));
  adj_rng_fill_uniform(rng, &s->target, 0.05, 0.95);
  return ADJ_SUCCESS;
}

static int check_set_targets(check_state *s, adj_layer *net) {
  const adj_description *d = s->c->description;
  int index = adj_description_loss(d);
  if (index < 0) return ADJ_SUCCESS;
  adj_layer *loss = adj_network_build_loss(net);
  ADJ_CHECK(loss, ADJ_ERR_STATE, "network check: %s has no loss stage", adj_layer_name(net));
  const adj_desc_layer *l = &d->layers[index];
  if (l->kind == ADJ_DESC_XENT) return adj_xent_layer_set_labels(loss, s->labels, s->c->batch);
  const adj_decomposition *layout = adj_layer_input_layout(loss);
  if (l->u.loss.kind == ADJ_LOSS_NLL) {
    adj_box box = adj_decomposition_local_block(layout);
    return adj_loss_layer_set_labels(loss, s->labels + box.start[0], box.extent[0]);
  }
  adj_tensor local;
  ADJ_CALL(check_scatter(&s->target, layout, adj_layer_dtype(loss), &local));
  int status = adj_loss_layer_set_target(loss, &local);
  adj_tensor_destroy(&local);
  return status;
}

/* ---- the two networks --------------------------------------------------------------------- */

/* Every layer on rank 0 but the phantom layers, which keep the width p
 * their parameters depend on. */
static int check_sequential_placement(const adj_description *d, const adj_placement *placed, adj_placement **out) {
  adj_network_layout layout;
  ADJ_CALL(adj_placement_resolve(d, placed, 0, &layout));
  adj_placement *p = calloc(1, sizeof *p);
  if (p) p->entries = calloc((size_t)d->n + 1, sizeof *p->entries);
  int status = p && p->entries ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "network check: out of memory");
  for (int i = 0; !status && i < d->n; i++)
    if (d->layers[i].kind == ADJ_DESC_PHANTOM) {
      adj_placement_entry *e = &p->entries[p->n++];
      snprintf(e->layer, sizeof e->layer, "%s", d->layers[i].name);
      e->placement = layout.layers[i].placement;
    }
  if (!status) {
    snprintf(p->name, sizeof p->name, "sequential");
    snprintf(p->source, sizeof p->source, "sequential reference");
    p->whole = true;
  }
  adj_network_layout_free(&layout);
  if (status) adj_placement_destroy(&p);
  *out = p;
  return status;
}

static int check_build(check_state *s) {
  const adj_network_check_config *c = s->c;
  adj_network_build_options o = {.dtype = c->dtype, .batch = c->batch, .deep_halos = c->deep_halos};
  ADJ_CALL(adj_network_build(c->description, c->placement, c->comm, &o, &s->net[0]));
  adj_placement *sequential = NULL;
  ADJ_CALL(check_sequential_placement(c->description, c->placement, &sequential));
  o.deep_halos = false;
  int status = adj_network_build(c->description, sequential, c->comm, &o, &s->net[1]);
  adj_placement_destroy(&sequential);
  for (int k = 0; !status && k < 2; k++) status = adj_network_init_uniform(s->net[k], c->seed);
  return status;
}

/* Forward and backward of network k; its output and input gradient
 * gathered, its parameter gradients gathered in order into grads. */
static int check_run(check_state *s, int k, adj_tensor *out, adj_tensor *dx_global, adj_tensor *grads) {
  adj_layer *net = s->net[k];
  adj_tensor x = {0}, y = {0}, dy = {0}, dx = {0}, dy_global = {0};
  const adj_decomposition *in = adj_layer_input_layout(net), *outl = adj_layer_output_layout(net);
  int status = check_scatter(&s->input, in, adj_layer_dtype(net), &x);
  if (!status) status = check_set_targets(s, net);
  if (!status) status = adj_layer_create_output(net, &y);
  if (!status) status = adj_layer_forward(net, &x, &y);
  if (!status) status = check_gather(s->c->comm, s->wait, &y, outl, out);
  if (!status) status = adj_tensor_create(&dy_global, ADJ_FLOAT64, out->rank, out->shape);
  if (!status) {
    adj_rng *rng = NULL;
    status = adj_rng_create(s->c->seed + 17, &rng);
    if (!status) adj_rng_fill_uniform(rng, &dy_global, -1, 1);
    if (!status && s->reduced) adj_tensor_set(&dy_global, 0, 1.0);
    adj_rng_destroy(&rng);
  }
  if (!status) status = check_scatter(&dy_global, outl, adj_layer_dtype(net), &dy);
  if (!status) status = adj_layer_create_input(net, &dx);
  if (!status) adj_layer_zero_grad(net);
  if (!status) status = adj_layer_backward(net, &dy, &dx);
  if (!status) status = check_gather(s->c->comm, s->wait, &dx, in, dx_global);
  for (int i = 0; !status && i < adj_layer_parameter_count(net); i++) {
    adj_parameter *p = adj_layer_parameter(net, i);
    status = check_gather(s->c->comm, s->wait, &p->grad, p->layout, &grads[i]);
  }
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dy), adj_tensor_destroy(&dx);
  adj_tensor_destroy(&dy_global);
  return status;
}

/* Distributed against sequential. */
static int check_compare(check_state *s, adj_network_check_result *r) {
  int n = adj_layer_parameter_count(s->net[0]);
  ADJ_CHECK(n == adj_layer_parameter_count(s->net[1]), ADJ_ERR_STATE,
            "network check: %d parameters placed, %d sequential", n, adj_layer_parameter_count(s->net[1]));
  adj_tensor out[2] = {{0}}, dx[2] = {{0}}, *grads[2];
  grads[0] = calloc((size_t)n + 1, sizeof(adj_tensor));
  grads[1] = calloc((size_t)n + 1, sizeof(adj_tensor));
  int status = grads[0] && grads[1] ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "network check: out of memory");
  ADJ_CALL(adj_status_agree(s->c->comm, status, s->wait));
  for (int k = 0; !status && k < 2; k++) status = check_run(s, k, &out[k], &dx[k], grads[k]);
  if (!status) {
    r->output_diff = check_diff(&out[0], &out[1]);
    r->input_gradient_diff = check_diff(&dx[0], &dx[1]);
    for (int i = 0; i < n; i++) r->parameter_gradient_diff = fmax(r->parameter_gradient_diff, check_diff(&grads[0][i], &grads[1][i]));
  }
  for (int k = 0; k < 2; k++) {
    adj_tensor_destroy(&out[k]), adj_tensor_destroy(&dx[k]);
    for (int i = 0; grads[k] && i < n; i++) adj_tensor_destroy(&grads[k][i]);
    free(grads[k]);
  }
  return status;
}

static int check_all(check_state *s, adj_network_check_result *r) {
  const adj_network_check_config *c = s->c;
  adj_network_layout layout;
  ADJ_CALL(adj_placement_resolve(c->description, c->placement, c->batch, &layout));
  r->ranks = layout.ranks;
  adj_network_layout_free(&layout);
  ADJ_CALL(check_build(s));
  adj_rng *rng = NULL;
  ADJ_CALL(adj_rng_create(c->seed, &rng));
  int status = check_input(s, rng);
  if (!status) status = check_targets(s, rng);
  adj_rng_destroy(&rng);
  ADJ_CALL(status);
  ADJ_CALL(check_compare(s, r));
  /* Last: the test draws its own parameters into the placed network. */
  ADJ_CALL(adj_dottest_layer(s->net[0], c->seed, &r->jacobian));
  r->jacobian_tolerance = adj_dottest_tolerance(c->dtype, 1);
  r->tolerance = c->dtype == ADJ_FLOAT64 ? 1e-12 : 1e-5;
  r->passed = r->jacobian.relative_error <= r->jacobian_tolerance && r->jacobian.norm_Fx > 0 &&
              r->jacobian.norm_Fty > 0 && r->output_diff <= r->tolerance && r->input_gradient_diff <= r->tolerance &&
              r->parameter_gradient_diff <= r->tolerance;
  return ADJ_SUCCESS;
}

int adj_network_check(const adj_network_check_config *c, adj_network_check_result *r) {
  ADJ_CHECK(c && r && c->description, ADJ_ERR_ARG, "adj_network_check: config, description and result are required");
  ADJ_CHECK(c->batch >= 1, ADJ_ERR_ARG, "network check: batch %lld must be at least 1", (long long)c->batch);
  *r = (adj_network_check_result){0};
  check_state s = {.c = c};
  ADJ_CALL(adj_wait_policy_resolve(c->comm, ADJ_WAIT_AUTO, &s.wait));
  int status = check_all(&s, r);
  adj_layer_destroy(&s.net[0]);
  adj_layer_destroy(&s.net[1]);
  adj_tensor_destroy(&s.input);
  adj_tensor_destroy(&s.target);
  free(s.labels);
  return status;
}
