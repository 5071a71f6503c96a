/* Distributed upsampling (see include/adjoin/upsample_layer.h):
 *   y = W T H x,   jvp dy = W T H dx,   backward dx = H* T* W^T dy
 * with H the halo exchange of a size-2 (nearest: size-1) stride-1 kernel,
 * T the trim to the kernel-input box and W the local interpolation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/halo.h"
#include "adjoin/upsample.h"
#include "adjoin/upsample_layer.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"
#include "op_after_impl.h"

typedef struct adj_upsample {
  adj_interp_mode mode;
  bool align_corners;
  int sd;                     /* spatial dimensions */
  int64_t n[3], m[3];         /* global input and output extents */
  double ratio[3];            /* n / m, or 1 / scale_factor */
  adj_upsample_plan *plan;    /* the local interpolation; NULL when this worker has no outputs */
  adj_halo_local local;
  adj_op *halo;
  adj_tensor padded, box;     /* bulk + halos; the kernel-input box */
} adj_upsample;

/* Source taps of global output o in dimension d (global input indices). */
static void adj_interp_source(const adj_upsample *u, int d, int64_t o, int64_t *i0, int64_t *i1, double *l) {
  int64_t n = u->n[d];
  if (u->mode == ADJ_INTERP_NEAREST) {
    int64_t i = (int64_t)floor((double)o * u->ratio[d]);
    *i0 = *i1 = i < n - 1 ? i : n - 1;
    *l = 0;
    return;
  }
  double src = u->align_corners ? (u->m[d] > 1 ? (double)o * (double)(n - 1) / (double)(u->m[d] - 1) : 0)
                                : ((double)o + 0.5) * u->ratio[d] - 0.5;
  if (src < 0) src = 0;
  int64_t i = (int64_t)src;
  if (i > n - 1) i = n - 1;
  *i0 = i;
  *i1 = i < n - 1 ? i + 1 : i;
  *l = src - (double)i;
}

/* First output whose i0 is at least a. */
static int64_t adj_interp_first_output(const adj_upsample *u, int d, int64_t a) {
  int64_t lo = 0, hi = u->m[d];
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2, i0, i1;
    double l;
    adj_interp_source(u, d, mid, &i0, &i1, &l);
    if (i0 >= a) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/* ---- application ------------------------------------------------------------------------ */

static int adj_upsample_layer_apply(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_upsample *u = l->impl;
  adj_box whole = adj_box_whole(x->rank, x->shape);
  adj_tensor_copy_box(&u->padded, &u->local.bulk, x, &whole, ADJ_UNPACK_COPY);
  ADJ_CALL(adj_op_forward(u->halo, &u->padded, &u->padded));
  adj_tensor_pack(&u->padded, &u->local.kernel_input, u->box.data);
  if (!adj_tensor_volume(y)) return ADJ_SUCCESS;
  return adj_upsample_forward(u->plan, &u->box, y);
}

static int adj_upsample_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  return adj_upsample_layer_apply(l, x, y);
}

static int adj_upsample_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  if (dx) return adj_upsample_layer_apply(l, dx, dy);
  adj_tensor_zero(dy);
  return ADJ_SUCCESS;
}

static int adj_upsample_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_upsample *u = l->impl;
  if (!dx) return ADJ_SUCCESS;
  int status = ADJ_SUCCESS;
  if (adj_tensor_volume(dy)) status = adj_upsample_adjoint(u->plan, dy, &u->box);
  else adj_tensor_zero(&u->box);
  /* A local failure here reaches every rank at the halo adjoint, which every
   * rank makes (the forward's only local step before its exchange is a copy). */
  status = adj_fault_at(l->name, "backward local", status);
  adj_tensor_zero(&u->padded);
  adj_tensor_unpack(&u->padded, &u->local.kernel_input, u->box.data, ADJ_UNPACK_COPY);
  ADJ_CALL(adj_op_apply_after(status, u->halo, ADJ_ADJOINT, &u->padded, &u->padded));
  adj_box whole = adj_box_whole(dx->rank, dx->shape);
  adj_tensor_copy_box(dx, &whole, &u->padded, &u->local.bulk, ADJ_UNPACK_COPY);
  return ADJ_SUCCESS;
}

static void adj_upsample_free(adj_upsample *u) {
  if (!u) return;
  adj_op_destroy(&u->halo);
  adj_tensor_destroy(&u->padded), adj_tensor_destroy(&u->box);
  adj_upsample_plan_destroy(&u->plan);
  free(u);
}

static void adj_upsample_destroy(adj_layer *l) { adj_upsample_free(l->impl); }

static const adj_layer_methods adj_upsample_methods = {adj_upsample_layer_forward, adj_upsample_layer_jvp,
                                                       adj_upsample_layer_backward, adj_upsample_destroy};

/* ---- validation ------------------------------------------------------------------------- */

/* Checks the configuration and fills the global extents and ratios. */
static int adj_upsample_validate(const char *who, const adj_upsample_layer_config *c, adj_upsample *u) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  int sd = c->spatial_dims, rank = adj_decomposition_rank(c->input);
  ADJ_CHECK(sd >= 1 && sd <= 3, ADJ_ERR_ARG, "%s: spatial_dims is %d, not 1, 2 or 3", who, sd);
  ADJ_CHECK(rank == 2 + sd, ADJ_ERR_SIZE, "%s: the input has rank %d but %d spatial dimensions need %d (N, C, spatial...)",
            who, rank, sd, 2 + sd);
  ADJ_CHECK(c->mode == ADJ_INTERP_NEAREST || c->mode == ADJ_INTERP_LINEAR, ADJ_ERR_ARG, "%s: unknown mode %d", who,
            (int)c->mode);
  ADJ_CHECK(!(c->align_corners && c->mode == ADJ_INTERP_NEAREST), ADJ_ERR_ARG,
            "%s: align_corners is for the linear modes, not nearest", who);
  bool by_size = false, by_scale = false;
  for (int d = 0; d < sd; d++) by_size |= c->size[d] != 0, by_scale |= c->scale_factor[d] != 0;
  ADJ_CHECK(by_size != by_scale, ADJ_ERR_ARG, "%s: give either size or scale_factor (%s)", who,
            by_size ? "both are set" : "neither is set");
  const int64_t *shape = adj_decomposition_global_shape(c->input);
  for (int d = 0; d < sd; d++) {
    u->n[d] = shape[2 + d];
    if (by_size) {
      ADJ_CHECK(c->size[d] > 0, ADJ_ERR_ARG, "%s: size %lld in spatial dimension %d must be > 0", who,
                (long long)c->size[d], d);
      u->m[d] = c->size[d];
      u->ratio[d] = (double)u->n[d] / (double)u->m[d];
    } else {
      double s = c->scale_factor[d];
      ADJ_CHECK(s > 0 && isfinite(s), ADJ_ERR_ARG, "%s: scale factor %g in spatial dimension %d must be > 0", who, s,
                d);
      u->m[d] = (int64_t)floor((double)u->n[d] * s);
      u->ratio[d] = 1 / s;
    }
    ADJ_CHECK(u->n[d] > 0 && u->m[d] > 0, ADJ_ERR_SIZE,
              "%s: spatial dimension %d maps %lld inputs to %lld outputs; both must be > 0", who, d,
              (long long)u->n[d], (long long)u->m[d]);
  }
  return ADJ_SUCCESS;
}

/* ---- planning --------------------------------------------------------------------------- */

static adj_halo_kernel adj_upsample_kernel(const adj_upsample *u) {
  adj_halo_kernel k = {.size = {1, 1}};
  for (int d = 0; d < u->sd; d++) {
    k.size[2 + d] = u->mode == ADJ_INTERP_LINEAR ? 2 : 1;
    k.padding[2 + d][1] = u->mode == ADJ_INTERP_LINEAR ? 1 : 0;
  }
  return k;
}

/* Output cuts: batch and channels as the geometry balances them, spatial
 * dimensions where i0 crosses the geometry's balanced input positions. */
static int adj_upsample_output_layout(const adj_upsample *u, const adj_decomposition *input,
                                      const adj_halo_geometry *g, adj_decomposition **output) {
  int rank = 2 + u->sd;
  const int *parts = adj_halo_geometry_parts(g);
  int64_t storage[5][65], shape[5];
  const int64_t *cuts[5];
  for (int i = 0; i < rank; i++) {
    ADJ_CHECK(parts[i] <= 64, ADJ_ERR_ARG, "upsample layer: %d parts in dimension %d; at most 64 are supported",
              parts[i], i);
    shape[i] = i < 2 ? adj_halo_geometry_output_shape(g)[i] : u->m[i - 2];
    for (int p = 0; p < parts[i]; p++) {
      int64_t a = adj_halo_geometry_dim(g, i, p)->output[0];
      storage[i][p] = i < 2 ? a : adj_interp_first_output(u, i - 2, a);
    }
    storage[i][parts[i]] = shape[i];
    cuts[i] = storage[i];
  }
  return adj_decomposition_create_explicit(adj_decomposition_partition(input), rank, shape, cuts, output);
}

/* Dimension d's map for this worker's outputs into `axis` (its tables at
 * idx, w: 2 x out entries each), indices local to the kernel-input box. */
static int adj_upsample_axis_fill(const adj_upsample *u, const adj_box *out, int d, int64_t *idx, double *w,
                                  adj_upsample_axis *axis) {
  const adj_halo_local *local = &u->local;
  int64_t n = out->extent[2 + d], first = local->input.start[2 + d] + local->kernel_input.start[2 + d];
  *axis = (adj_upsample_axis){.in = local->kernel_input.extent[2 + d], .out = n, .index = {idx, idx + n},
                              .weight = {w, w + n}};
  for (int64_t o = 0; o < n; o++) {
    int64_t i0, i1;
    double l;
    adj_interp_source(u, d, out->start[2 + d] + o, &i0, &i1, &l);
    i0 -= first, i1 -= first;
    ADJ_CHECK(i0 >= 0 && i1 < axis->in, ADJ_ERR_STATE,
              "upsample layer: spatial dimension %d: output %lld reads local input %lld..%lld outside 0..%lld", d,
              (long long)(out->start[2 + d] + o), (long long)i0, (long long)i1, (long long)axis->in - 1);
    idx[o] = i0, idx[n + o] = i1, w[o] = 1 - l, w[n + o] = l;
  }
  return ADJ_SUCCESS;
}

/* This worker's interpolation plan (none without outputs). */
static int adj_upsample_local_plan(adj_upsample *u, const adj_box *out) {
  int64_t total = 0;
  for (int d = 0; d < u->sd; d++) {
    if (out->extent[2 + d] == 0) return ADJ_SUCCESS;
    total += 2 * out->extent[2 + d];
  }
  int64_t *idx = malloc((size_t)total * sizeof *idx);
  double *w = malloc((size_t)total * sizeof *w);
  adj_upsample_axis axes[3];
  int status = idx && w ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "upsample layer: out of memory");
  int64_t at = 0;
  for (int d = 0; d < u->sd && !status; d++) {
    status = adj_upsample_axis_fill(u, out, d, idx + at, w + at, &axes[d]);
    at += 2 * out->extent[2 + d];
  }
  if (!status) status = adj_upsample_plan_create(u->mode, u->sd, axes, &u->plan);
  free(idx), free(w);
  return status;
}

/* This worker's plan and buffers (this rank only; the caller agrees). */
static int adj_upsample_buffers(adj_upsample *u, adj_dtype dtype, const adj_decomposition *output) {
  adj_box out = adj_decomposition_local_block(output);
  ADJ_CALL(adj_upsample_local_plan(u, &out));
  ADJ_CALL(adj_tensor_create(&u->padded, dtype, u->local.rank, u->local.shape));
  return adj_tensor_create(&u->box, dtype, u->local.rank, u->local.kernel_input.extent);
}

int adj_upsample_layer_create(const adj_upsample_layer_config *c, adj_layer **layer) {
  static const char who[] = "upsample layer";
  *layer = NULL;
  adj_upsample probe = {0};
  ADJ_CALL(adj_upsample_validate(who, c, &probe));
  adj_upsample *u = calloc(1, sizeof *u);
  ADJ_CALL(adj_layer_agree(c->input, u ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", who)));
  *u = probe;
  u->mode = c->mode;
  u->align_corners = c->align_corners;
  u->sd = c->spatial_dims;
  adj_halo_kernel kernel = adj_upsample_kernel(u);
  adj_halo_geometry *g = NULL;
  adj_decomposition *output = NULL;
  const adj_partition *p = adj_decomposition_partition(c->input);
  int status = adj_halo_geometry_create_for(c->input, &kernel, &g);
  if (!status) status = adj_upsample_output_layout(u, c->input, g, &output);
  if (!status) {
    adj_halo_geometry_local(g, adj_partition_active(p) ? adj_partition_coords(p) : NULL, &u->local);
    status = adj_layer_agree(c->input, adj_upsample_buffers(u, c->dtype, output));
  }
  if (!status) status = adj_halo_create(c->dtype, p, g, &u->halo);
  if (!status) adj_op_set_checks(u->halo, false);
  char name[64];
  static const char *const modes[2][3] = {{"nearest1d", "nearest2d", "nearest3d"},
                                          {"linear", "bilinear", "trilinear"}};
  snprintf(name, sizeof name, "upsample_%s%s", modes[c->mode][c->spatial_dims - 1], c->align_corners ? "_ac" : "");
  if (!status) status = adj_layer_alloc_between(name, c->dtype, c->input, output, &adj_upsample_methods, u, layer);
  if (status) adj_upsample_free(u);
  adj_decomposition_destroy(&output);
  adj_halo_geometry_destroy(&g);
  return status;
}
