/* The builder (include/adjoin/network_build.h): one code path for every
 * network.  The placement is resolved first (placement_resolve.c), so every
 * layer's input and output partitions are known before anything is made;
 * the build then walks the layers keeping the current layout, inserting a
 * repartition only where a layer asks for another one. */
#include "adjoin/network_build.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/affine15_layer.h"
#include "adjoin/affine_layer.h"
#include "adjoin/batchnorm_layer.h"
#include "adjoin/conv_layer.h"
#include "adjoin/deep_halo_layer.h"
#include "adjoin/loss_layers.h"
#include "adjoin/network.h"
#include "adjoin/pad_layer.h"
#include "adjoin/phantom_layer.h"
#include "adjoin/pointwise_layer.h"
#include "adjoin/pool_layer.h"
#include "adjoin/repartition_layer.h"
#include "adjoin/upsample_layer.h"
#include "adjoin/xent_layer.h"
#include "error_impl.h"

typedef struct build_state {
  MPI_Comm comm;
  const adj_network_build_options *o;
  const adj_description *d;
  const adj_network_layout *layout;
  adj_decomposition *current; /* owned reference: the layout the next stage takes */
  adj_layer **stages;
  int n, capacity;
  int run;                    /* first stage of the deep-halo run being built; -1 when none */
} build_state;

/* ---- the chain --------------------------------------------------------------------------- */

/* Appends a created stage (or passes its failure on); `current` moves on to
 * its output layout.  The stage comes by address: the call that creates it
 * is an argument of this one. */
static int build_push(build_state *b, int status, adj_layer **stage) {
  if (status) return status;
  if (b->n == b->capacity) {
    int cap = b->capacity ? 2 * b->capacity : 32;
    adj_layer **grown = realloc(b->stages, sizeof *grown * (size_t)cap);
    if (!grown) {
      adj_layer_destroy(stage);
      return adj_error_set(ADJ_ERR_MEM, "network builder: out of memory for %d stages", cap);
    }
    b->stages = grown, b->capacity = cap;
  }
  b->stages[b->n++] = *stage;
  adj_decomposition_destroy(&b->current);
  b->current = adj_decomposition_reference((adj_decomposition *)adj_layer_output_layout(*stage));
  return ADJ_SUCCESS;
}

/* True when both layouts have the same grid, global shape and cuts on the
 * same ranks: every rank holds the same block in both. */
static bool build_same_grid(const adj_decomposition *a, const adj_decomposition *b) {
  const adj_partition *pa = adj_decomposition_partition(a), *pb = adj_decomposition_partition(b);
  int ndim = adj_partition_ndim(pa);
  if (ndim != adj_partition_ndim(pb)) return false;
  for (int d = 0; d < ndim; d++) {
    int parts = adj_partition_shape(pa)[d];
    if (parts != adj_partition_shape(pb)[d] ||
        adj_decomposition_global_shape(a)[d] != adj_decomposition_global_shape(b)[d])
      return false;
    const int64_t *ca = adj_decomposition_cuts(a, d), *cb = adj_decomposition_cuts(b, d);
    for (int k = 1; k <= parts; k++)
      if (ca[k] != cb[k]) return false;
  }
  for (int i = 0; i < adj_partition_size(pa); i++)
    if (adj_partition_rank_of_index(pa, i) != adj_partition_rank_of_index(pb, i)) return false;
  return true;
}

/* The volume of dimensions 1.. when only dimension 0 (the batch) is split,
 * else -1. */
static int64_t build_batch_only_inner(const adj_decomposition *d) {
  const adj_partition *p = adj_decomposition_partition(d);
  const int64_t *shape = adj_decomposition_global_shape(d);
  int64_t inner = 1;
  for (int i = 1; i < adj_partition_ndim(p); i++) {
    if (adj_partition_shape(p)[i] != 1) return -1;
    inner *= shape[i];
  }
  return inner;
}

/* True when a repartition from a to b would move nothing, decided alike on
 * every rank from the shapes: the same grid and cuts, or both layouts split
 * only the batch, at the same cuts on the same ranks, and agree in the
 * product of the other dimensions (each rank's block is then the same
 * bytes in both: a flatten is a reinterpretation). */
static bool build_same_blocks(const adj_decomposition *a, const adj_decomposition *b) {
  if (build_same_grid(a, b)) return true;
  int64_t inner_a = build_batch_only_inner(a), inner_b = build_batch_only_inner(b);
  const adj_partition *pa = adj_decomposition_partition(a), *pb = adj_decomposition_partition(b);
  if (inner_a < 0 || inner_a != inner_b || adj_partition_shape(pa)[0] != adj_partition_shape(pb)[0] ||
      adj_decomposition_global_shape(a)[0] != adj_decomposition_global_shape(b)[0])
    return false;
  const int64_t *ca = adj_decomposition_cuts(a, 0), *cb = adj_decomposition_cuts(b, 0);
  for (int i = 0; i < adj_partition_size(pa); i++)
    if (adj_partition_rank_of_index(pa, i) != adj_partition_rank_of_index(pb, i) || ca[i + 1] != cb[i + 1])
      return false;
  return true;
}

/* Whether the layout already lies on the partition (ndim, parts) of the
 * first ranks: the next layer then takes it as it is, whatever its cuts
 * (every layer accepts its input's cuts), and nothing moves. */
static bool build_same_parts(const adj_decomposition *d, int ndim, const int *parts) {
  const adj_partition *p = adj_decomposition_partition(d);
  if (adj_partition_ndim(p) != ndim) return false;
  for (int i = 0; i < ndim; i++)
    if (adj_partition_shape(p)[i] != parts[i]) return false;
  for (int k = 0; k < adj_partition_size(p); k++)
    if (adj_partition_rank_of_index(p, k) != k) return false;
  return true;
}

/* The current tensor's layout balanced over (ndim, parts) on the first
 * ranks, and whether a repartition must move it there. */
static int build_target(build_state *b, int ndim, const int *parts, adj_decomposition **target, bool *moves) {
  ADJ_CALL(adj_decomposition_create_on_first_ranks(b->comm, ndim, parts, adj_decomposition_global_shape(b->current),
                                                   target));
  *moves = !build_same_blocks(b->current, *target);
  return ADJ_SUCCESS;
}

/* The current tensor moves onto the target through a repartition layer, or
 * takes it as its layout when nothing would move. */
static int build_glue(build_state *b, adj_decomposition *target, bool moves) {
  if (!moves) {
    adj_decomposition_destroy(&b->current);
    b->current = adj_decomposition_reference(target);
    return ADJ_SUCCESS;
  }
  adj_layer *layer = NULL;
  adj_repartition_layer_config rc = {.dtype = b->o->dtype, .input = b->current, .output = target};
  return build_push(b, adj_repartition_layer_create(&rc, &layer), &layer);
}

/* ---- one stage per kind ------------------------------------------------------------------- */

/* A padding mode other than zeros: a pad layer holding the window's padding. */
static int build_mode_padding(build_state *b, adj_padding_mode mode, adj_window_geometry *w) {
  if (mode == ADJ_PAD_ZEROS) return ADJ_SUCCESS;
  adj_pad_layer_config pc = {.dtype = b->o->dtype, .input = b->current, .spatial_dims = w->spatial_dims, .mode = mode};
  for (int i = 0; i < w->spatial_dims; i++) {
    pc.padding[i][0] = w->padding_left[i], pc.padding[i][1] = w->padding_right[i];
    w->padding_left[i] = w->padding_right[i] = 0;
  }
  adj_layer *layer = NULL;
  return build_push(b, adj_pad_layer_create(&pc, &layer), &layer);
}

static int build_conv(build_state *b, const adj_desc_layer *l, const adj_layer_layout *ll) {
  const adj_desc_conv *c = &l->u.conv;
  ADJ_CHECK(c->groups == 1, ADJ_ERR_ARG,
            "%s:%d: conv %s: g=%lld: adjoin's convolution layer has no groups (the planner prices it; the builder "
            "cannot make it)",
            b->d->source, l->line, l->name, (long long)c->groups);
  adj_window_geometry w = c->window;
  ADJ_CALL(build_mode_padding(b, c->padding_mode, &w));
  adj_conv_layer_config cc = {.comm = b->comm, .dtype = b->o->dtype, .name = l->name, .window = w,
                              .out_channels = c->out_channels, .no_bias = !c->bias, .input = b->current,
                              .out_channel_parts = ll->placement.out_parts};
  adj_layer *layer = NULL;
  return build_push(b, adj_conv_layer_create(&cc, &layer), &layer);
}

static int build_pool(build_state *b, const adj_desc_layer *l) {
  adj_window_geometry w = l->u.pool.window;
  ADJ_CALL(build_mode_padding(b, l->u.pool.padding_mode, &w));
  adj_pool_layer_config pc = {.dtype = b->o->dtype, .kind = l->u.pool.kind, .input = b->current, .window = w};
  adj_layer *layer = NULL;
  return build_push(b, adj_pool_layer_create(&pc, &layer), &layer);
}

static int build_affine(build_state *b, const adj_desc_layer *l, const adj_layer_layout *ll) {
  adj_layer *layer = NULL;
  const adj_desc_affine *a = &l->u.affine;
  if (ll->placement.kind == ADJ_PLACE_GRID) {
    adj_affine15_layer_config ac = {.dtype = b->o->dtype, .input = b->current, .out_features = a->out_features,
                                    .no_bias = !a->bias};
    return build_push(b, adj_affine15_layer_create(&ac, &layer), &layer);
  }
  adj_affine_layer_config ac = {.dtype = b->o->dtype, .input = b->current, .in_features = l->in_shape[0],
                                .out_features = a->out_features, .out_parts = ll->placement.out_parts,
                                .no_bias = !a->bias};
  return build_push(b, adj_affine_layer_create(&ac, &layer), &layer);
}

static int build_loss(build_state *b, const adj_desc_layer *l) {
  adj_layer *layer = NULL;
  if (l->kind == ADJ_DESC_XENT) {
    adj_xent_layer_config xc = {.dtype = b->o->dtype, .input = b->current, .root = 0};
    return build_push(b, adj_xent_layer_create(&xc, &layer), &layer);
  }
  const adj_desc_loss *q = &l->u.loss;
  adj_loss_layer_config lc = {.dtype = b->o->dtype, .kind = q->kind, .reduction = q->reduction, .input = b->current,
                              .root = 0, .log_target = q->log_target, .poisson_linear_input = q->poisson_linear_input,
                              .poisson_full = q->poisson_full, .poisson_eps = q->poisson_eps};
  return build_push(b, adj_loss_layer_create(&lc, &layer), &layer);
}

/* The kinds without a placement of their own to honour. */
static int build_plain(build_state *b, const adj_desc_layer *l) {
  adj_layer *layer = NULL;
  adj_dtype dtype = b->o->dtype;
  switch (l->kind) {
  case ADJ_DESC_ACTIVATION: {
    adj_activation_layer_config ac = {.dtype = dtype, .input = b->current, .activation = l->u.activation};
    return build_push(b, adj_activation_layer_create(&ac, &layer), &layer);
  }
  case ADJ_DESC_BATCHNORM: {
    const adj_desc_batchnorm *n = &l->u.batchnorm;
    adj_batchnorm_layer_config bc = {.dtype = dtype, .input = b->current, .num_features = l->in_shape[0],
                                     .eps = n->eps, .momentum = n->momentum, .no_affine = !n->affine,
                                     .no_running_stats = !n->running_stats};
    const adj_replicas *r = b->o->replicas;
    if (r && adj_replicas_count(r) > 1 && !b->o->per_replica_batchnorm)
      bc.replicas = adj_replicas_count(r), bc.across = adj_replicas_across_comm(r);
    return build_push(b, adj_batchnorm_layer_create(&bc, &layer), &layer);
  }
  case ADJ_DESC_UPSAMPLE: {
    const adj_desc_upsample *u = &l->u.upsample;
    adj_upsample_layer_config uc = {.dtype = dtype, .input = b->current, .spatial_dims = l->in_rank - 1,
                                    .mode = u->mode, .align_corners = u->align_corners};
    memcpy(uc.size, u->size, sizeof uc.size);
    memcpy(uc.scale_factor, u->scale_factor, sizeof uc.scale_factor);
    return build_push(b, adj_upsample_layer_create(&uc, &layer), &layer);
  }
  case ADJ_DESC_PAD: {
    adj_pad_layer_config pc = {.dtype = dtype, .input = b->current, .spatial_dims = l->in_rank - 1,
                               .mode = l->u.pad.mode};
    memcpy(pc.padding, l->u.pad.padding, sizeof pc.padding);
    return build_push(b, adj_pad_layer_create(&pc, &layer), &layer);
  }
  case ADJ_DESC_PHANTOM: {
    const adj_desc_phantom *ph = &l->u.phantom;
    adj_phantom_layer_config pc = {.dtype = dtype, .input = b->current, .in_features = l->in_shape[0],
                                   .out_features = ph->out_features, .ghosts = ph->ghosts,
                                   .allow_large_k = ph->allow_large_k, .no_bias = !ph->bias};
    return build_push(b, adj_phantom_layer_create(&pc, &layer), &layer);
  }
  default: {
    adj_flatten_layer_config fc = {.dtype = dtype, .input = b->current};
    return build_push(b, adj_flatten_layer_create(&fc, &layer), &layer);
  }
  }
}

/* ---- deep halos -------------------------------------------------------------------------- */

/* Replaces the stages of the current deep-halo run by one deep halo layer
 * (one halo exchange for the run) when it holds two or more.  Done before the
 * next stage is made: a stage's input layout lives on the communicator of the
 * stage before it. */
static int build_close_run(build_state *b) {
  int first = b->run;
  b->run = -1;
  if (first < 0 || b->n - first < 2) return ADJ_SUCCESS;
  adj_layer *fused = NULL;
  char name[128];
  snprintf(name, sizeof name, "%s .. %s (deep halo)", adj_layer_name(b->stages[first]), adj_layer_name(b->stages[b->n - 1]));
  adj_deep_halo_config dc = {.name = name, .count = b->n - first, .layers = &b->stages[first]};
  ADJ_CALL(adj_deep_halo_layer_create(&dc, &fused));
  for (int i = first; i < b->n; i++) adj_layer_destroy(&b->stages[i]);
  b->n = first;
  return build_push(b, ADJ_SUCCESS, &fused);
}

/* Whether layer i can join a deep-halo run (deep_halo_layer.h): a conv with
 * its channels unsplit, a pool or an activation, on a spatial partition,
 * with no pad layer of a padding mode before it. */
static bool build_fusable(const build_state *b, int i) {
  const adj_desc_layer *l = &b->d->layers[i];
  const adj_layer_layout *ll = &b->layout->layers[i];
  if (!b->o->deep_halos || ll->in_ndim < 3) return false;
  if (l->kind == ADJ_DESC_CONV)
    return ll->in_parts[1] == 1 && ll->out_parts[1] == 1 && l->u.conv.padding_mode == ADJ_PAD_ZEROS &&
           l->u.conv.groups == 1;
  if (l->kind == ADJ_DESC_POOL) return l->u.pool.padding_mode == ADJ_PAD_ZEROS;
  return l->kind == ADJ_DESC_ACTIVATION;
}

/* ---- layers ------------------------------------------------------------------------------ */

static int build_stage(build_state *b, const adj_desc_layer *l, const adj_layer_layout *ll) {
  switch (l->kind) {
  case ADJ_DESC_CONV: return build_conv(b, l, ll);
  case ADJ_DESC_POOL: return build_pool(b, l);
  case ADJ_DESC_AFFINE: return build_affine(b, l, ll);
  case ADJ_DESC_LOSS:
  case ADJ_DESC_XENT: return build_loss(b, l);
  default: return build_plain(b, l);
  }
}

/* Layer i: the repartition its input needs, then the layer; a deep-halo run
 * ends before anything that cannot join it. */
static int build_layer(build_state *b, int i) {
  const adj_layer_layout *ll = &b->layout->layers[i];
  bool fusable = build_fusable(b, i);
  int status = ADJ_SUCCESS;
  if (ll->explicit_input && !build_same_parts(b->current, ll->in_ndim, ll->in_parts)) {
    adj_decomposition *target = NULL;
    bool moves = false;
    status = build_target(b, ll->in_ndim, ll->in_parts, &target, &moves);
    if (!status && (moves || !fusable)) status = build_close_run(b);
    if (!status) status = build_glue(b, target, moves);
    adj_decomposition_destroy(&target);
    ADJ_CALL(status);
  }
  if (!fusable) ADJ_CALL(build_close_run(b));
  ADJ_CALL(build_stage(b, &b->d->layers[i], ll));
  if (fusable && b->run < 0) b->run = b->n - 1;
  return ADJ_SUCCESS;
}

/* ---- passes ------------------------------------------------------------------------------ */

/* Whether layers i, i + 1 are a ReLU and a max pool taking its output where
 * it lies: they run in the other order. */
static bool build_swap(const build_state *b, int i) {
  if (b->o->keep_order || i + 1 >= b->d->n) return false;
  const adj_desc_layer *l = &b->d->layers[i], *next = &b->d->layers[i + 1];
  return l->kind == ADJ_DESC_ACTIVATION && l->u.activation.kind == ADJ_RELU && next->kind == ADJ_DESC_POOL &&
         next->u.pool.kind == ADJ_POOL_MAX && next->u.pool.padding_mode == ADJ_PAD_ZEROS &&
         !b->layout->layers[i + 1].explicit_input;
}

static int build_layers(build_state *b) {
  int end = b->d->n;
  if (b->o->logits_only && adj_description_loss(b->d) >= 0) end--;
  for (int i = 0; i < end; i++) {
    if (i + 1 < end && build_swap(b, i)) {
      ADJ_CALL(build_layer(b, i + 1));
      ADJ_CALL(build_layer(b, i));
      i++;
    } else {
      ADJ_CALL(build_layer(b, i));
    }
  }
  return build_close_run(b);
}

/* ---- public ----------------------------------------------------------------------------- */

static int build_check(const adj_description *d, const adj_network_build_options *o, MPI_Comm comm,
                       const adj_network_layout *layout, const char *placement) {
  int size;
  ADJ_CALL_MPI(MPI_Comm_size(comm, &size));
  ADJ_CHECK(size >= layout->ranks, ADJ_ERR_SIZE,
            "network %s: placement %s needs %d ranks but the communicator has %d", d->name, placement, layout->ranks,
            size);
  ADJ_CHECK(adj_dtype_is_float(o->dtype), ADJ_ERR_DTYPE, "network %s: dtype %s cannot train (float32 or float64)",
            d->name, adj_dtype_name(o->dtype));
  return ADJ_SUCCESS;
}

static int build_all(build_state *b) {
  const adj_network_layout *layout = b->layout;
  int64_t shape[ADJ_DESC_MAX_DIMS + 1] = {b->o->batch};
  memcpy(shape + 1, b->d->input_shape, sizeof b->d->input_shape);
  ADJ_CALL(adj_decomposition_create_on_first_ranks(b->comm, layout->input_ndim, layout->input_parts, shape,
                                                   &b->current));
  return build_layers(b);
}

int adj_network_build(const adj_description *d, const adj_placement *p, MPI_Comm comm,
                      const adj_network_build_options *o, adj_layer **network) {
  ADJ_CHECK(network, ADJ_ERR_ARG, "adj_network_build: output network pointer is NULL");
  *network = NULL;
  ADJ_CHECK(d && o, ADJ_ERR_ARG, "adj_network_build: description and options are required");
  ADJ_CHECK(o->batch >= 1, ADJ_ERR_ARG, "network %s: batch %lld must be at least 1", d->name, (long long)o->batch);
  adj_network_layout layout;
  ADJ_CALL(adj_placement_resolve(d, p, o->batch, &layout));
  const char *placement = p ? p->name : "own";
  int status = build_check(d, o, comm, &layout, placement);
  build_state b = {.comm = comm, .o = o, .d = d, .layout = &layout, .run = -1};
  if (!status) status = build_all(&b);
  char name[2 * ADJ_DESC_NAME_SIZE + 2];
  snprintf(name, sizeof name, "%s-%s", d->name, placement);
  if (!status) status = adj_network_create(name, b.n, b.stages, network);
  for (int i = 0; i < b.n; i++) adj_layer_destroy(&b.stages[i]);
  free(b.stages);
  adj_decomposition_destroy(&b.current);
  adj_network_layout_free(&layout);
  return status;
}

int adj_network_build_file(MPI_Comm comm, const char *path, const char *name, const adj_network_build_options *o,
                           adj_layer **network) {
  ADJ_CHECK(network, ADJ_ERR_ARG, "adj_network_build_file: output network pointer is NULL");
  *network = NULL;
  adj_description *d = NULL;
  adj_placement *p = NULL;
  int status = adj_description_read_all(comm, path, &d);
  if (!status) status = adj_placement_find(comm, d, path, name, &p);
  if (!status) status = adj_network_build(d, p, comm, o, network);
  adj_placement_destroy(&p);
  adj_description_destroy(&d);
  return status;
}

int adj_network_file_ranks(MPI_Comm comm, const char *path, const char *name, int64_t batch) {
  adj_description *d = NULL;
  adj_placement *p = NULL;
  adj_network_layout layout = {0};
  int ranks = !adj_description_read_all(comm, path, &d) && !adj_placement_find(comm, d, path, name, &p) &&
                      !adj_placement_resolve(d, p, batch, &layout)
                  ? layout.ranks
                  : 0;
  adj_network_layout_free(&layout);
  adj_placement_destroy(&p);
  adj_description_destroy(&d);
  return ranks;
}

adj_layer *adj_network_build_loss(adj_layer *network) {
  adj_layer *last = adj_network_layer(network, adj_network_depth(network) - 1);
  if (!last) return NULL;
  const char *name = adj_layer_name(last);
  size_t n = strlen(name);
  return !strcmp(name, "softmax_xent") || (n > 5 && !strcmp(name + n - 5, "_loss")) ? last : NULL;
}
