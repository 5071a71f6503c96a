/* The distributed pooling layer (DistDL paper, section 4, "Forward Pooling
 * Algorithm"):  y = Pool(T H x),  with H the halo exchange of the pooling
 * geometry and T the trim to the kernel-input box (the paper's unpadding shim;
 * the padding shim is the local kernel's zero padding at global boundaries).
 *
 *   jvp       dy = dPool(T H dx)        at the stored kernel input T H x
 *   backward  dx = H* T* dPool^T(dy)    T* writes the box into zeros, H* adds
 *                                       each halo back into its owner's bulk
 *
 * Every worker holds one padded buffer (bulk + halos) and two packed
 * kernel-input boxes (the point and the tangent/gradient), all sized at
 * creation.  Batch and channel dimensions carry kernel 1, so partitioning them
 * adds no halo: any partition of rank 2 + spatial dims works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/pool_layer.h"
#include "adjoin/halo.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"
#include "op_after_impl.h"
#include "stage_impl.h"

typedef struct adj_pool_layer {
  adj_pool_kind kind;
  adj_window_geometry global; /* the layer's window, as configured */
  adj_window_geometry window; /* this worker's: zero padding only at global boundaries */
  adj_halo_local local;       /* its boxes in the padded buffer */
  adj_op *halo;
  /* Bulk + halos of x and of dx (or the gradient), unused where the halo is
   * the identity on this worker (op.h): the padded block is then x or dx. */
  adj_tensor padded, d_padded;
  adj_tensor point, tangent;  /* kernel-input box of x, and of dx or the gradient, when trimmed */
  adj_tensor x_kernel;        /* view: the kernel input of the last forward */
  bool computes;              /* the worker's output block is not empty */
  bool trims;                 /* the kernel reads a strict sub-box of the padded block */
} adj_pool_layer;

/* ---- application ------------------------------------------------------------------------ */

/* box = T H x: x into the bulk, halos from the neighbours, the kernel-input
 * box packed.  Where H is the identity the padded block is x itself, and
 * without a trim the box is the padded block: then the kernel reads x. */
static int adj_pool_layer_exchange(adj_pool_layer *p, const adj_tensor *x, adj_tensor *buffer, adj_tensor *trimmed,
                                   adj_tensor *box) {
  adj_tensor padded;
  ADJ_CALL(adj_op_alias_output(p->halo, ADJ_FORWARD, x, buffer, &padded));
  adj_box whole = adj_box_whole(x->rank, x->shape);
  if (!adj_op_is_identity(p->halo)) adj_tensor_copy_box(&padded, &p->local.bulk, x, &whole, ADJ_UNPACK_COPY);
  ADJ_CALL(adj_op_forward(p->halo, &padded, &padded));
  if (!p->trims) return adj_tensor_view(box, padded.dtype, padded.rank, padded.shape, padded.data);
  adj_tensor_pack(&padded, &p->local.kernel_input, trimmed->data);
  return adj_tensor_view(box, trimmed->dtype, trimmed->rank, trimmed->shape, trimmed->data);
}

/* The kernel input may be the caller's x, which layer.h keeps intact until
 * the backward. */
static int adj_pool_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_pool_layer *p = l->impl;
  ADJ_CALL(adj_pool_layer_exchange(p, x, &p->padded, &p->point, &p->x_kernel));
  return p->computes ? adj_pool_forward(p->kind, &p->window, &p->x_kernel, y) : ADJ_SUCCESS;
}

static int adj_pool_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_pool_layer *p = l->impl;
  if (!dx) {
    adj_tensor_zero(dy);
    return ADJ_SUCCESS;
  }
  adj_tensor box;
  ADJ_CALL(adj_pool_layer_exchange(p, dx, &p->d_padded, &p->tangent, &box));
  return p->computes ? adj_pool_jvp(p->kind, &p->window, &p->x_kernel, &box, dy) : ADJ_SUCCESS;
}

/* dx = H* T* dPool^T(dy), written where it needs no move: into dx itself
 * where H is the identity and nothing is trimmed. */
static int adj_pool_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_pool_layer *p = l->impl;
  if (!dx) return ADJ_SUCCESS;
  adj_tensor padded;
  ADJ_CALL(adj_op_alias_input(p->halo, ADJ_ADJOINT, dx, &p->d_padded, &padded)); /* dx was checked: fails alike */
  adj_tensor *box = p->trims ? &p->tangent : &padded;
  /* A local failure here reaches every rank at the halo adjoint's check. */
  int status = ADJ_SUCCESS;
  if (p->computes) status = adj_pool_backward(p->kind, &p->window, &p->x_kernel, dy, box);
  else adj_tensor_zero(box);
  status = adj_fault_at(l->name, "backward local", status);
  if (p->trims) {
    adj_tensor_zero(&padded);
    if (!status) adj_tensor_unpack(&padded, &p->local.kernel_input, p->tangent.data, ADJ_UNPACK_COPY);
  }
  ADJ_CALL(adj_op_apply_after(status, p->halo, ADJ_ADJOINT, &padded, &padded));
  adj_box whole = adj_box_whole(dx->rank, dx->shape);
  if (!adj_op_is_identity(p->halo)) adj_tensor_copy_box(dx, &whole, &padded, &p->local.bulk, ADJ_UNPACK_COPY);
  return ADJ_SUCCESS;
}

static void adj_pool_layer_free(adj_pool_layer *p) {
  if (!p) return;
  adj_op_destroy(&p->halo);
  adj_tensor_destroy(&p->padded);
  adj_tensor_destroy(&p->d_padded);
  adj_tensor_destroy(&p->point);
  adj_tensor_destroy(&p->tangent);
  free(p);
}

static void adj_pool_layer_destroy(adj_layer *l) { adj_pool_layer_free(l->impl); }

/* ---- validation ------------------------------------------------------------------------- */

/* Max pooling, and averaging over input taps only, have no value for a window
 * of padding only: some output's taps o*s - pad + j*d (j < k) all miss [0, n). */
static int adj_pool_check_max_windows(const char *who, const adj_window_geometry *w, const int64_t *in,
                                      const int64_t *out) {
  for (int d = 0; d < w->spatial_dims; d++) {
    int64_t s = w->stride[d] ? w->stride[d] : 1, dil = w->dilation[d] ? w->dilation[d] : 1;
    for (int64_t o = 0; o < out[d]; o++) {
      bool hit = false;
      for (int64_t j = 0; j < w->kernel[d] && !hit; j++) {
        int64_t i = o * s - w->padding_left[d] + j * dil;
        hit = i >= 0 && i < in[d];
      }
      ADJ_CHECK(hit, ADJ_ERR_SIZE,
                "%s: spatial dimension %d: the pooling window of output %lld covers only padding (input "
                "extent %lld, padding %lld/%lld, kernel %lld)",
                who, d, (long long)o, (long long)in[d], (long long)w->padding_left[d],
                (long long)w->padding_right[d], (long long)w->kernel[d]);
    }
  }
  return ADJ_SUCCESS;
}

/* Shared-argument checks: the same outcome and message on every rank. */
static int adj_pool_layer_validate(const char *who, const adj_pool_layer_config *c) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  ADJ_CHECK(c->kind == ADJ_POOL_MAX || c->kind == ADJ_POOL_AVG || c->kind == ADJ_POOL_AVG_EXCLUDE_PAD, ADJ_ERR_ARG,
            "%s: unknown pooling kind %d", who, (int)c->kind);
  int sd = c->window.spatial_dims, rank = adj_decomposition_rank(c->input);
  ADJ_CHECK(sd >= 1 && sd <= ADJ_MAX_SPATIAL_DIMS, ADJ_ERR_ARG, "%s: window.spatial_dims is %d, not 1, 2 or 3", who,
            sd);
  ADJ_CHECK(rank == 2 + sd, ADJ_ERR_SIZE,
            "%s: the input partition has %d dimensions but a window with %d spatial dimensions needs %d "
            "(N, C, spatial...)",
            who, rank, sd, 2 + sd);
  const int64_t *in = adj_decomposition_global_shape(c->input) + 2;
  int64_t out[ADJ_MAX_SPATIAL_DIMS];
  int status = adj_window_output_shape(&c->window, in, out);
  if (status) {
    char message[512];
    snprintf(message, sizeof message, "%s", adj_last_error());
    return adj_error_set(status, "%s: %s", who, message);
  }
  return c->kind != ADJ_POOL_AVG ? adj_pool_check_max_windows(who, &c->window, in, out) : ADJ_SUCCESS;
}

/* ---- planning --------------------------------------------------------------------------- */

/* The pooling window on the spatial dimensions, kernel 1 (no halo) on batch and channel. */
static adj_halo_kernel adj_pool_halo_kernel(const adj_window_geometry *w) {
  adj_halo_kernel k = {.size = {1, 1}};
  for (int d = 0; d < w->spatial_dims; d++) {
    k.size[2 + d] = w->kernel[d];
    k.stride[2 + d] = w->stride[d];
    k.dilation[2 + d] = w->dilation[d];
    k.padding[2 + d][0] = w->padding_left[d];
    k.padding[2 + d][1] = w->padding_right[d];
  }
  return k;
}

/* The output layout is exactly the geometry's output blocks (balanced over the
 * output), on the input's partition. */
static int adj_pool_output_layout(const adj_decomposition *input, const adj_halo_geometry *g,
                                  adj_decomposition **output) {
  int rank = adj_halo_geometry_rank(g);
  const int *parts = adj_halo_geometry_parts(g);
  int64_t needed = 0, used = 0;
  for (int i = 0; i < rank; i++) needed += parts[i] + 1;
  int64_t *all = malloc(sizeof *all * (size_t)needed), *cuts[ADJ_MAX_RANK];
  int status = adj_layer_agree(input, all ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "pool layer: out of memory"));
  for (int i = 0; i < rank && !status; i++) {
    cuts[i] = all + used;
    for (int p = 0; p < parts[i]; p++) cuts[i][p] = adj_halo_geometry_dim(g, i, p)->output[0];
    cuts[i][parts[i]] = adj_halo_geometry_output_shape(g)[i];
    used += parts[i] + 1;
  }
  if (!status)
    status = adj_decomposition_create_explicit(adj_decomposition_partition(input), rank,
                                               adj_halo_geometry_output_shape(g), (const int64_t *const *)cuts, output);
  free(all);
  return status;
}

/* This worker's window: the layer's kernel with the local padding. */
static void adj_pool_local_window(const adj_window_geometry *w, const adj_halo_local *local, adj_window_geometry *out) {
  *out = *w;
  for (int d = 0; d < w->spatial_dims; d++) {
    out->padding_left[d] = local->padding[2 + d][0];
    out->padding_right[d] = local->padding[2 + d][1];
  }
}

/* The buffers, and a check that the local window on the kernel-input box
 * yields exactly this worker's output block (the geometry's promise; a
 * mismatch found only here would otherwise fail one rank mid-application).
 * Fails on this rank only: the caller agrees. */
static int adj_pool_layer_buffers(adj_pool_layer *p, adj_dtype dtype) {
  adj_halo_local *local = &p->local;
  p->computes = adj_box_volume(&local->output) > 0;
  for (int d = 0; d < local->rank; d++)
    p->trims |= local->kernel_input.start[d] != 0 || local->kernel_input.extent[d] != local->shape[d];
  ADJ_CALL(adj_tensor_create(&p->padded, dtype, local->rank, local->shape));
  ADJ_CALL(adj_tensor_create(&p->d_padded, dtype, local->rank, local->shape));
  if (p->trims) {
    ADJ_CALL(adj_tensor_create(&p->point, dtype, local->rank, local->kernel_input.extent));
    ADJ_CALL(adj_tensor_create(&p->tangent, dtype, local->rank, local->kernel_input.extent));
  }
  if (!p->computes) return ADJ_SUCCESS;
  int64_t out[ADJ_MAX_SPATIAL_DIMS];
  ADJ_CALL(adj_window_output_shape(&p->window, local->kernel_input.extent + 2, out));
  for (int d = 0; d < p->window.spatial_dims; d++)
    ADJ_CHECK(out[d] == local->output.extent[2 + d], ADJ_ERR_STATE,
              "pool layer: spatial dimension %d: the local window yields %lld outputs but the block holds %lld", d,
              (long long)out[d], (long long)local->output.extent[2 + d]);
  return ADJ_SUCCESS;
}

/* Plans the halo exchange and buffers of this worker.  Collective. */
static int adj_pool_layer_plan(const adj_pool_layer_config *c, const adj_halo_geometry *g, adj_pool_layer **out) {
  *out = NULL;
  const adj_partition *partition = adj_decomposition_partition(c->input);
  adj_pool_layer *p = calloc(1, sizeof *p);
  int status = p ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "pool layer: out of memory");
  if (p) {
    p->kind = c->kind;
    p->global = c->window;
    adj_halo_geometry_local(g, adj_partition_active(partition) ? adj_partition_coords(partition) : NULL, &p->local);
    adj_pool_local_window(&c->window, &p->local, &p->window);
    status = adj_pool_layer_buffers(p, c->dtype);
  }
  status = adj_layer_agree(c->input, status);
  if (!status) status = adj_halo_create(c->dtype, partition, g, &p->halo);
  /* The halo only ever sees the layer's own buffers, shaped right by construction. */
  if (!status) adj_op_set_checks(p->halo, false);
  if (status) adj_pool_layer_free(p);
  else *out = p;
  return status;
}

int adj_pool_layer_create(const adj_pool_layer_config *c, adj_layer **layer) {
  static const char who[] = "pool layer";
  *layer = NULL;
  ADJ_CALL(adj_pool_layer_validate(who, c));
  adj_halo_kernel kernel = adj_pool_halo_kernel(&c->window);
  adj_halo_geometry *g;
  ADJ_CALL(adj_halo_geometry_create_for(c->input, &kernel, &g));
  adj_decomposition *output = NULL;
  adj_pool_layer *p = NULL;
  int status = adj_pool_output_layout(c->input, g, &output);
  if (!status) status = adj_pool_layer_plan(c, g, &p);
  char name[64];
  static const char *const kinds[] = {"max", "avg", "avg_nopad"};
  snprintf(name, sizeof name, "%s_pool%dd", kinds[c->kind], c->window.spatial_dims);
  static const adj_layer_methods methods = {adj_pool_layer_forward, adj_pool_layer_jvp, adj_pool_layer_backward,
                                            adj_pool_layer_destroy};
  if (!status) status = adj_layer_alloc_between(name, c->dtype, c->input, output, &methods, p, layer);
  if (status) adj_pool_layer_free(p);
  adj_decomposition_destroy(&output);
  adj_halo_geometry_destroy(&g);
  return status;
}

static adj_pool_layer *adj_pool_of(const adj_layer *layer) {
  return layer && layer->methods.forward == adj_pool_layer_forward ? layer->impl : NULL;
}

bool adj_pool_layer_describe(const adj_layer *layer, adj_stage_description *d) {
  const adj_pool_layer *p = adj_pool_of(layer);
  if (!p) return false;
  *d = (adj_stage_description){.kind = ADJ_STAGE_POOL, .window = p->global, .pool = p->kind};
  return true;
}

int adj_pool_layer_halo_counters(const adj_layer *layer, adj_op_counters *counters) {
  const adj_pool_layer *p = adj_pool_of(layer);
  ADJ_CHECK(p && counters, ADJ_ERR_ARG, "pool layer counters: %s is not a pool layer (or counters is NULL)",
            layer ? layer->name : "(NULL)");
  adj_op_get_counters(p->halo, counters);
  return ADJ_SUCCESS;
}

int adj_pool_layer_halo_op(adj_layer *layer, adj_op **halo) {
  const adj_pool_layer *p = adj_pool_of(layer);
  ADJ_CHECK(p && halo, ADJ_ERR_ARG, "pool layer ops: %s is not a pool layer", layer ? layer->name : "(NULL)");
  *halo = p->halo;
  return ADJ_SUCCESS;
}

void adj_pool_layer_reset_counters(adj_layer *layer) {
  adj_pool_layer *p = adj_pool_of(layer);
  if (p) adj_op_reset_counters(p->halo);
}
