/* The deep halo layer (deep_halo_layer.h): one halo exchange for a run of
 * conv, pool and activation layers, then each layer's kernel over the range
 * the rest of the run needs of it.
 *
 * Each worker that computes holds its run as a chain of one-worker layers on
 * MPI_COMM_SELF, one per stage, built for its extended ranges with the local
 * padding of the run geometry: their kernels, buffers and jvp/backward are
 * the ones the distributed layers run locally, so the arithmetic per element
 * is theirs.  The run's parameters live where the original layers kept them
 * and are broadcast into the local layers' parameters (forward, jvp); the
 * local gradients are summed back by the broadcasts' adjoints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/broadcast.h"
#include "adjoin/conv_layer.h"
#include "adjoin/deep_halo_layer.h"
#include "adjoin/halo.h"
#include "adjoin/pool_layer.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"
#include "stage_impl.h"

enum { ADJ_DEEP_MAX_PARAMETERS = 2 };

/* One parameter of a convolution stage: its broadcast from the owner onto the
 * run's workers (whose adjoint adds the local gradients into the owner's), and
 * where a worker without a local layer receives the broadcasts. */
typedef struct adj_deep_parameter {
  adj_op *bcast;
  adj_parameter spare;
} adj_deep_parameter;

typedef struct adj_deep_stage {
  adj_stage_description d;
  adj_layer *local;  /* this worker's kernel on MPI_COMM_SELF; NULL when it computes nothing */
  adj_tensor y, dy;  /* local output and its tangent or gradient (all stages but the last) */
  int n_parameters;
  int first;         /* index of its first parameter in the fused layer */
  adj_deep_parameter parameters[ADJ_DEEP_MAX_PARAMETERS];
} adj_deep_stage;

typedef struct adj_deep_halo {
  int count;
  /* The output and parameter layouts again, on the layer's own communicator:
   * the originals live on the given layers' communicators, which go with them. */
  adj_decomposition *layouts[1 + ADJ_DEEP_MAX_PARAMETERS * ADJ_MAX_RUN_STAGES];
  int n_layouts;
  adj_deep_stage *stages;
  adj_halo_geometry *geometry;
  adj_halo_local local; /* this worker's boxes in the padded buffer */
  adj_op *halo;
  adj_tensor padded;    /* bulk + halos: x or dx, then the input gradient */
  adj_tensor in, din;   /* the first stage's input box, and its tangent or gradient */
  bool computes;
} adj_deep_halo;

/* ---- application ------------------------------------------------------------------------ */

/* The parameter of stage s a worker's kernel reads: its local layer's, or the spare. */
static adj_parameter *adj_deep_local_parameter(adj_deep_stage *s, int q) {
  return s->local ? adj_layer_parameter(s->local, q) : &s->parameters[q].spare;
}

/* Broadcasts every parameter value (or tangent) into the local layers. */
static int adj_deep_parameters_forward(adj_layer *l, bool tangent) {
  adj_deep_halo *h = l->impl;
  for (int j = 0; j < h->count; j++) {
    adj_deep_stage *s = &h->stages[j];
    for (int q = 0; q < s->n_parameters; q++) {
      adj_parameter *global = l->parameters[s->first + q], *local = adj_deep_local_parameter(s, q);
      ADJ_CALL(adj_op_forward(s->parameters[q].bcast, tangent ? &global->tangent : &global->value,
                              tangent ? &local->tangent : &local->value));
    }
  }
  return ADJ_SUCCESS;
}

/* grad += the sum over workers of the local gradients (the broadcasts'
 * adjoints accumulate). */
static int adj_deep_parameters_adjoint(adj_layer *l) {
  adj_deep_halo *h = l->impl;
  for (int j = 0; j < h->count; j++) {
    adj_deep_stage *s = &h->stages[j];
    for (int q = 0; q < s->n_parameters; q++)
      ADJ_CALL(adj_op_adjoint(s->parameters[q].bcast, &adj_deep_local_parameter(s, q)->grad,
                              &l->parameters[s->first + q]->grad));
  }
  return ADJ_SUCCESS;
}

/* box = T H x: x into the bulk, the run's halo from the neighbours, the first
 * stage's input box packed. */
static int adj_deep_exchange(adj_deep_halo *h, const adj_tensor *x, adj_tensor *box) {
  adj_box whole = adj_box_whole(x->rank, x->shape);
  adj_tensor_copy_box(&h->padded, &h->local.bulk, x, &whole, ADJ_UNPACK_COPY);
  ADJ_CALL(adj_op_forward(h->halo, &h->padded, &h->padded));
  adj_tensor_pack(&h->padded, &h->local.kernel_input, box->data);
  return ADJ_SUCCESS;
}

/* Stage j's input and output (or their tangents / gradients): the first reads
 * the exchanged box, the last writes the caller's tensor. */
static const adj_tensor *adj_deep_stage_in(adj_deep_halo *h, int j, bool perturbation) {
  if (j == 0) return perturbation ? &h->din : &h->in;
  return perturbation ? &h->stages[j - 1].dy : &h->stages[j - 1].y;
}

static adj_tensor *adj_deep_stage_out(adj_deep_halo *h, int j, bool perturbation, adj_tensor *caller) {
  if (j == h->count - 1) return caller;
  return perturbation ? &h->stages[j].dy : &h->stages[j].y;
}

static int adj_deep_halo_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_deep_halo *h = l->impl;
  ADJ_CALL(adj_deep_parameters_forward(l, false));
  ADJ_CALL(adj_deep_exchange(h, x, &h->in));
  /* The local layers' methods without their public calls' checks and
   * agreement on MPI_COMM_SELF: the shapes match by construction. */
  for (int j = 0; h->computes && j < h->count; j++)
    ADJ_CALL(adj_layer_forward_stage(ADJ_SUCCESS, h->stages[j].local, adj_deep_stage_in(h, j, false),
                                     adj_deep_stage_out(h, j, false, y)));
  return ADJ_SUCCESS;
}

static int adj_deep_halo_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_deep_halo *h = l->impl;
  ADJ_CALL(adj_deep_parameters_forward(l, true));
  if (dx) ADJ_CALL(adj_deep_exchange(h, dx, &h->din));
  for (int j = 0; h->computes && j < h->count; j++) {
    const adj_tensor *in = j == 0 && !dx ? NULL : adj_deep_stage_in(h, j, true);
    ADJ_CALL(adj_layer_jvp_stage(ADJ_SUCCESS, h->stages[j].local, in, adj_deep_stage_out(h, j, true, dy)));
  }
  return ADJ_SUCCESS;
}

/* The local chain's backward, last stage first: local gradients of every
 * parameter, and of the first stage's input box when dx is wanted. */
static int adj_deep_local_backward(adj_deep_halo *h, const adj_tensor *dy, bool want_dx) {
  for (int j = 0; j < h->count; j++)
    if (h->stages[j].local) adj_layer_zero_grad(h->stages[j].local);
  for (int j = h->count - 1; h->computes && j >= 0; j--) {
    adj_tensor *in = j == 0 && !want_dx ? NULL : (adj_tensor *)adj_deep_stage_in(h, j, true);
    ADJ_CALL(adj_layer_backward_stage(ADJ_SUCCESS, h->stages[j].local, j == h->count - 1 ? dy : &h->stages[j].dy,
                                      in));
  }
  return ADJ_SUCCESS;
}

static int adj_deep_halo_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_deep_halo *h = l->impl;
  /* A local failure does not skip the collectives after it: every rank
   * reaches the same operators, and the dispatcher agrees on the status. */
  int status = adj_fault_at(l->name, "backward local", adj_deep_local_backward(h, dy, dx != NULL));
  ADJ_CALL(adj_deep_parameters_adjoint(l));
  if (!dx) return status;
  adj_tensor_zero(&h->padded);
  if (h->computes) adj_tensor_unpack(&h->padded, &h->local.kernel_input, h->din.data, ADJ_UNPACK_COPY);
  ADJ_CALL(adj_op_adjoint(h->halo, &h->padded, &h->padded));
  adj_box whole = adj_box_whole(dx->rank, dx->shape);
  adj_tensor_copy_box(dx, &whole, &h->padded, &h->local.bulk, ADJ_UNPACK_COPY);
  return status;
}

/* ---- teardown --------------------------------------------------------------------------- */

static void adj_deep_spare_free(adj_parameter *p) {
  adj_tensor_destroy(&p->value);
  adj_tensor_destroy(&p->grad);
  adj_tensor_destroy(&p->tangent);
}

static void adj_deep_halo_free(adj_deep_halo *h) {
  if (!h) return;
  for (int j = 0; h->stages && j < h->count; j++) {
    adj_deep_stage *s = &h->stages[j];
    adj_layer_destroy(&s->local);
    adj_tensor_destroy(&s->y);
    adj_tensor_destroy(&s->dy);
    for (int q = 0; q < ADJ_DEEP_MAX_PARAMETERS; q++) {
      adj_op_destroy(&s->parameters[q].bcast);
      adj_deep_spare_free(&s->parameters[q].spare);
    }
  }
  free(h->stages);
  for (int i = 0; i < h->n_layouts; i++) adj_decomposition_destroy(&h->layouts[i]);
  adj_op_destroy(&h->halo);
  adj_halo_geometry_destroy(&h->geometry);
  adj_tensor_destroy(&h->padded);
  adj_tensor_destroy(&h->in);
  adj_tensor_destroy(&h->din);
  free(h);
}

static void adj_deep_halo_destroy(adj_layer *l) { adj_deep_halo_free(l->impl); }

static const adj_layer_methods adj_deep_halo_methods = {adj_deep_halo_forward, adj_deep_halo_jvp,
                                                        adj_deep_halo_backward, adj_deep_halo_destroy};

/* ---- validation (shared arguments: the same outcome on every rank) ------------------------ */

static bool adj_deep_describe(const adj_layer *layer, adj_stage_description *d) {
  return adj_conv_layer_describe(layer, d) || adj_pool_layer_describe(layer, d) ||
         adj_activation_layer_describe(layer, d);
}

bool adj_deep_halo_fusable(const adj_layer *layer) {
  adj_stage_description d;
  return adj_deep_describe(layer, &d);
}

/* Same workers in the same grid. */
static bool adj_deep_same_partition(const adj_partition *a, const adj_partition *b) {
  int n = adj_partition_ndim(a);
  if (n != adj_partition_ndim(b) || adj_partition_size(a) != adj_partition_size(b)) return false;
  for (int i = 0; i < n; i++)
    if (adj_partition_shape(a)[i] != adj_partition_shape(b)[i]) return false;
  for (int i = 0; i < adj_partition_size(a); i++)
    if (adj_partition_rank_of_index(a, i) != adj_partition_rank_of_index(b, i)) return false;
  return true;
}

static int adj_deep_check_layouts(const char *who, int j, const adj_layer *layer, const adj_partition *run,
                                  const adj_decomposition *previous) {
  const adj_decomposition *in = adj_layer_input_layout(layer), *out = adj_layer_output_layout(layer);
  ADJ_CHECK(in && out, ADJ_ERR_ARG, "%s: layer %d '%s' records no input or output layout", who, j, layer->name);
  ADJ_CHECK(adj_deep_same_partition(adj_decomposition_partition(in), run) &&
                adj_deep_same_partition(adj_decomposition_partition(out), run),
            ADJ_ERR_INCOMPATIBLE,
            "%s: layer %d '%s' is not on the run's spatial partition (the workers and grid of layer 0's input)",
            who, j, layer->name);
  if (!previous) return ADJ_SUCCESS;
  const int64_t *a = adj_decomposition_global_shape(previous), *b = adj_decomposition_global_shape(in);
  char sa[128], sb[128];
  int rank = adj_decomposition_rank(in);
  ADJ_CHECK(adj_decomposition_rank(previous) == rank && !memcmp(a, b, sizeof(int64_t) * (size_t)rank), ADJ_ERR_SIZE,
            "%s: layer %d '%s' takes a %s input but layer %d gives %s", who, j, layer->name,
            adj_shape_format(sb, sizeof sb, rank, b), j - 1,
            adj_shape_format(sa, sizeof sa, adj_decomposition_rank(previous), a));
  return ADJ_SUCCESS;
}

/* Every layer fusable, on the run's partition, chained; describes each. */
static int adj_deep_validate(const char *who, const adj_deep_halo_config *c, adj_stage_description *stages) {
  const adj_layer *first = c->layers[0];
  ADJ_CHECK(first, ADJ_ERR_ARG, "%s: layer 0 is NULL", who);
  const adj_decomposition *previous = NULL;
  const adj_partition *run = adj_layer_input_layout(first) ? adj_decomposition_partition(adj_layer_input_layout(first))
                                                           : NULL;
  for (int j = 0; j < c->count; j++) {
    const adj_layer *layer = c->layers[j];
    ADJ_CHECK(layer, ADJ_ERR_ARG, "%s: layer %d is NULL", who, j);
    ADJ_CHECK(adj_deep_describe(layer, &stages[j]), ADJ_ERR_ARG,
              "%s: layer %d '%s' cannot be fused (a run holds convolution, pooling and activation layers only)",
              who, j, layer->name);
    ADJ_CHECK(layer->dtype == first->dtype, ADJ_ERR_DTYPE, "%s: layer %d '%s' has another dtype than layer 0", who,
              j, layer->name);
    ADJ_CHECK(!stages[j].feature_split, ADJ_ERR_INCOMPATIBLE,
              "%s: layer %d '%s' splits channels or works on other workers than its input's, so it is not on the "
              "run's spatial partition", who, j, layer->name);
    ADJ_CHECK(run, ADJ_ERR_ARG, "%s: layer 0 '%s' records no input layout", who, first->name);
    ADJ_CALL(adj_deep_check_layouts(who, j, layer, run, previous));
    previous = adj_layer_output_layout(layer);
  }
  return ADJ_SUCCESS;
}

/* ---- planning ----------------------------------------------------------------------------- */

/* Stage j's window as a halo kernel over (N, C, spatial...); an activation
 * is the identity kernel. */
static adj_halo_kernel adj_deep_kernel(const adj_stage_description *d) {
  adj_halo_kernel k = {.size = {0}};
  if (d->kind == ADJ_STAGE_ACTIVATION) return k;
  for (int i = 0; i < d->window.spatial_dims; i++) {
    k.size[2 + i] = d->window.kernel[i];
    k.stride[2 + i] = d->window.stride[i];
    k.dilation[2 + i] = d->window.dilation[i];
    k.padding[2 + i][0] = d->window.padding_left[i];
    k.padding[2 + i][1] = d->window.padding_right[i];
  }
  return k;
}

static int adj_deep_geometry(const char *who, adj_deep_halo *h, const adj_decomposition *input) {
  adj_halo_kernel kernels[ADJ_MAX_RUN_STAGES];
  for (int j = 0; j < h->count; j++) kernels[j] = adj_deep_kernel(&h->stages[j].d);
  int status = adj_halo_geometry_create_run(input, h->count, kernels, &h->geometry);
  if (status) {
    char message[1024];
    snprintf(message, sizeof message, "%s", adj_last_error());
    return adj_error_set(status, "%s: %s", who, message);
  }
  return ADJ_SUCCESS;
}

/* Stage j's one-worker layer on MPI_COMM_SELF over `input`: the original
 * window with this worker's padding at stage j. */
static int adj_deep_local_layer(adj_layer *l, adj_deep_stage *s, int j, const int *coords,
                                const adj_decomposition *input) {
  adj_window_geometry w = s->d.window;
  for (int i = 0; i < w.spatial_dims; i++) {
    adj_halo_stage st = adj_halo_geometry_stage(((adj_deep_halo *)l->impl)->geometry, j, 2 + i, coords[2 + i]);
    w.padding_left[i] = st.padding[0];
    w.padding_right[i] = st.padding[1];
  }
  switch (s->d.kind) {
    case ADJ_STAGE_CONV: {
      adj_conv_layer_config cc = {.comm = MPI_COMM_SELF, .dtype = l->dtype, .name = "deep halo stage", .window = w,
                                  .out_channels = s->d.out_channels, .no_bias = !s->d.bias, .input = input,
                                  .algorithm = s->d.algorithm};
      return adj_conv_layer_create(&cc, &s->local);
    }
    case ADJ_STAGE_POOL: {
      adj_pool_layer_config pc = {.dtype = l->dtype, .kind = s->d.pool, .input = input, .window = w};
      return adj_pool_layer_create(&pc, &s->local);
    }
    default: {
      adj_activation_layer_config ac = {.dtype = l->dtype, .input = input, .activation = s->d.activation};
      return adj_activation_layer_create(&ac, &s->local);
    }
  }
}

/* The local chain's last output must be exactly the owned block: a cross-check
 * of the run geometry against the kernels' own output formulas. */
static int adj_deep_check_output(const adj_layer *l, const adj_tensor *last) {
  for (int i = 0; i < l->output_rank; i++)
    ADJ_CHECK(last->shape[i] == l->output_shape[i], ADJ_ERR_STATE,
              "%s: internal: the local run yields %lld entries in dimension %d but the output block has %lld",
              l->name, (long long)last->shape[i], i, (long long)l->output_shape[i]);
  return ADJ_SUCCESS;
}

/* This worker's chain of local layers and buffers (it computes). */
static int adj_deep_local_chain(adj_layer *l, const int *coords) {
  adj_deep_halo *h = l->impl;
  int rank = h->local.rank;
  static const int ones[ADJ_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
  adj_partition *self;
  ADJ_CALL(adj_partition_create(MPI_COMM_SELF, rank, ones, 1, NULL, &self));
  adj_decomposition *input;
  int status = adj_decomposition_create(self, rank, h->local.kernel_input.extent, &input);
  adj_partition_destroy(&self);
  ADJ_CALL(status);
  for (int j = 0; j < h->count && !status; j++) {
    adj_deep_stage *s = &h->stages[j];
    status = adj_deep_local_layer(l, s, j, coords, input);
    adj_decomposition_destroy(&input);
    if (status) break;
    input = adj_decomposition_reference((adj_decomposition *)adj_layer_output_layout(s->local));
    adj_tensor probe = {0};
    if (j < h->count - 1) {
      status = adj_layer_create_output(s->local, &s->y);
      if (!status) status = adj_layer_create_output(s->local, &s->dy);
    } else {
      status = adj_layer_create_output(s->local, &probe);
      if (!status) status = adj_deep_check_output(l, &probe);
      adj_tensor_destroy(&probe);
    }
  }
  adj_decomposition_destroy(&input);
  if (!status) status = adj_tensor_create(&h->in, l->dtype, rank, h->local.kernel_input.extent);
  if (!status) status = adj_tensor_create(&h->din, l->dtype, rank, h->local.kernel_input.extent);
  return status;
}

/* d again (same grid, ranks and cuts) on the layer's communicator, kept by
 * the layer.  Collective. */
static int adj_deep_clone_layout(adj_layer *l, const adj_decomposition *d, adj_decomposition **clone) {
  adj_deep_halo *h = l->impl;
  const adj_partition *p = adj_decomposition_partition(d);
  int n = adj_partition_size(p), rank = adj_decomposition_rank(d);
  int *ranks = malloc(sizeof *ranks * (size_t)n);
  int status = adj_status_agree(l->comm, ranks ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", l->name),
                                l->wait);
  adj_partition *copy = NULL;
  if (!status) {
    for (int i = 0; i < n; i++) ranks[i] = adj_partition_rank_of_index(p, i);
    status = adj_partition_create(l->comm, adj_partition_ndim(p), adj_partition_shape(p), n, ranks, &copy);
  }
  free(ranks);
  const int64_t *cuts[ADJ_MAX_RANK];
  for (int i = 0; i < rank; i++) cuts[i] = adj_decomposition_cuts(d, i);
  if (!status)
    status = adj_decomposition_create_explicit(copy, rank, adj_decomposition_global_shape(d), cuts,
                                               &h->layouts[h->n_layouts]);
  adj_partition_destroy(&copy);
  ADJ_CALL(adj_status_agree(l->comm, status, l->wait));
  *clone = h->layouts[h->n_layouts++];
  return ADJ_SUCCESS;
}

/* The spare parameter tensors of a worker without a local chain: shaped like
 * the whole parameter (a broadcast destination's block). */
static int adj_deep_spare(adj_parameter *p, adj_dtype dtype, const adj_op *bcast) {
  int rank = adj_op_range_rank(bcast);
  const int64_t *shape = adj_op_range_shape(bcast);
  ADJ_CALL(adj_tensor_create(&p->value, dtype, rank, shape));
  ADJ_CALL(adj_tensor_create(&p->grad, dtype, rank, shape));
  return adj_tensor_create(&p->tangent, dtype, rank, shape);
}

/* Parameters in run order (same names and layouts as the originals, values
 * copied), their broadcasts onto the run's workers and the spares.  Collective. */
static int adj_deep_parameters(adj_layer *l, const adj_deep_halo_config *c, const adj_partition *run) {
  adj_deep_halo *h = l->impl;
  int status = ADJ_SUCCESS;
  for (int j = 0; j < h->count && !status; j++) {
    adj_deep_stage *s = &h->stages[j];
    s->first = l->n_parameters;
    if (s->d.kind != ADJ_STAGE_CONV) continue;
    const adj_decomposition *given[ADJ_DEEP_MAX_PARAMETERS] = {s->d.weight, s->d.bias_layout};
    s->n_parameters = s->d.bias ? 2 : 1;
    for (int q = 0; q < s->n_parameters && !status; q++) {
      adj_deep_parameter *p = &s->parameters[q];
      adj_decomposition *layout;
      status = adj_deep_clone_layout(l, given[q], &layout);
      if (!status) status = adj_broadcast_create(l->dtype, layout, run, &p->bcast);
      if (!status) status = adj_op_set_accumulate(p->bcast, ADJ_ADJOINT, true);
      if (status) break;
      adj_op_set_checks(p->bcast, false);
      int local = adj_layer_add_parameter(l, adj_layer_parameter(c->layers[j], q)->name, layout);
      if (!local) local = adj_tensor_copy(&l->parameters[l->n_parameters - 1]->value,
                                          &adj_layer_parameter(c->layers[j], q)->value);
      if (!local && !s->local) local = adj_deep_spare(&p->spare, l->dtype, p->bcast);
      status = adj_status_agree(l->comm, local, l->wait);
    }
  }
  return status;
}

/* The geometry, this worker's boxes and chain, the halo exchange and the
 * parameters.  Collective. */
static int adj_deep_plan(adj_layer *l, const adj_deep_halo_config *c) {
  adj_deep_halo *h = l->impl;
  const adj_decomposition *input = adj_layer_input_layout(c->layers[0]);
  const adj_partition *run = adj_decomposition_partition(input);
  ADJ_CALL(adj_deep_geometry(l->name, h, input));
  bool active = adj_partition_active(run);
  const int *coords = active ? adj_partition_coords(run) : NULL;
  adj_halo_geometry_local(h->geometry, coords, &h->local);
  h->computes = active && adj_box_volume(&h->local.output) > 0;
  int status = adj_tensor_create(&h->padded, l->dtype, h->local.rank, h->local.shape);
  if (!status && h->computes) status = adj_deep_local_chain(l, coords);
  ADJ_CALL(adj_status_agree(l->comm, status, l->wait));
  ADJ_CALL(adj_halo_create(l->dtype, run, h->geometry, &h->halo));
  adj_op_set_checks(h->halo, false);
  adj_decomposition *output;
  ADJ_CALL(adj_deep_clone_layout(l, adj_layer_output_layout(c->layers[c->count - 1]), &output));
  adj_layer_set_layouts(l, (adj_decomposition *)adj_layer_input_layout(c->layers[0]), output);
  return adj_deep_parameters(l, c, run);
}

int adj_deep_halo_layer_create(const adj_deep_halo_config *c, adj_layer **layer) {
  ADJ_CHECK(layer, ADJ_ERR_ARG, "deep halo: output layer pointer is NULL");
  *layer = NULL;
  ADJ_CHECK(c, ADJ_ERR_ARG, "deep halo: config is NULL");
  const char *who = c->name ? c->name : "deep halo";
  ADJ_CHECK(c->count >= 1 && c->count <= ADJ_MAX_RUN_STAGES, ADJ_ERR_ARG,
            "%s: count is %d, a run holds 1..%d layers", who, c->count, ADJ_MAX_RUN_STAGES);
  ADJ_CHECK(c->layers, ADJ_ERR_ARG, "%s: layers is NULL for a run of %d", who, c->count);
  adj_stage_description described[ADJ_MAX_RUN_STAGES];
  ADJ_CALL(adj_deep_validate(who, c, described));
  adj_deep_halo *h = calloc(1, sizeof *h);
  adj_deep_stage *stages = calloc((size_t)c->count, sizeof *stages);
  int status = h && stages ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", who);
  status = adj_layer_agree(adj_layer_input_layout(c->layers[0]), status);
  if (h && stages) {
    for (int j = 0; j < c->count; j++) stages[j].d = described[j];
    h->stages = stages, h->count = c->count;
  } else {
    free(stages);
    stages = NULL;
    if (h) h->stages = NULL;
  }
  if (!status)
    status = adj_layer_alloc_between(who, c->layers[0]->dtype, adj_layer_input_layout(c->layers[0]),
                                     adj_layer_output_layout(c->layers[c->count - 1]), &adj_deep_halo_methods, h,
                                     layer);
  if (status) {
    adj_deep_halo_free(h);
    return status;
  }
  status = adj_deep_plan(*layer, c);
  if (status) adj_layer_destroy(layer);
  return status;
}

static adj_deep_halo *adj_deep_of(const adj_layer *layer) {
  return layer && layer->methods.forward == adj_deep_halo_forward ? layer->impl : NULL;
}

int adj_deep_halo_layer_counters(const adj_layer *layer, adj_op_counters *halo) {
  const adj_deep_halo *h = adj_deep_of(layer);
  ADJ_CHECK(h && halo, ADJ_ERR_ARG, "deep halo counters: %s is not a deep halo layer (or counters is NULL)",
            layer ? layer->name : "(NULL)");
  adj_op_get_counters(h->halo, halo);
  return ADJ_SUCCESS;
}

void adj_deep_halo_layer_reset_counters(adj_layer *layer) {
  adj_deep_halo *h = adj_deep_of(layer);
  if (h) adj_op_reset_counters(h->halo);
}
