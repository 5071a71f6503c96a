/* Creation of the distributed convolution layer (the algorithm is in
 * conv_layer.h; its application in conv_layer_apply.c).
 *
 * Validation first: every check is a function of arguments all ranks share,
 * so every rank fails the same way without communication.  Then, in an order
 * every rank follows: the partitions (collective, agreed inside), the layouts
 * and halo geometry (local, agreed once), the operators (collective, agreed
 * inside) and the buffers (local, agreed once).  Everything lives on the
 * layer's own duplicate of the communicator, so the caller may free theirs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/conv_layer.h"
#include "adjoin/agree.h"
#include "adjoin/broadcast.h"
#include "conv_layer_impl.h"
#include "stage_impl.h"

/* The configuration, validated and normalised. */
typedef struct adj_conv_spec {
  const char *name;
  int rank, dims;                    /* R = 2 + D, D */
  int64_t x_shape[ADJ_MAX_RANK];     /* (N, C_in, in...) */
  int64_t y_shape[ADJ_MAX_RANK];     /* (N, C_out, out...) */
  int64_t w_shape[ADJ_MAX_RANK];     /* (C_out, C_in, kernel...) */
  int x_parts[ADJ_MAX_RANK];         /* P_x = (P_n, P_ci, P_0, ...) */
  int p_n, p_co, p_ci;
  int n_x, n_w, n_y;                 /* workers of P_x, P_w, P_y */
} adj_conv_spec;

/* ---- validation --------------------------------------------------------------------- */

static int adj_conv_check_input_layout(const adj_conv_layer_config *cfg, adj_conv_spec *s) {
  const adj_decomposition *in = cfg->input;
  const adj_partition *p = adj_decomposition_partition(in);
  int rank = adj_decomposition_rank(in), same = MPI_UNEQUAL;
  ADJ_CHECK(rank == s->rank, ADJ_ERR_SIZE,
            "%s: the input partition has %d dimensions but a %d-D convolution takes a rank-%d input "
            "(N, C_in, spatial...)", s->name, rank, s->dims, s->rank);
  int given = cfg->input_ranks != NULL;
  for (int i = 0; i < ADJ_MAX_RANK; i++) given |= cfg->input_parts[i] != 0;
  ADJ_CHECK(!given, ADJ_ERR_ARG, "%s: give the input as a decomposition or as input_parts/input_ranks, not both",
            s->name);
  ADJ_CALL_MPI(MPI_Comm_compare(cfg->comm, adj_partition_base_comm(p), &same));
  ADJ_CHECK(same == MPI_IDENT || same == MPI_CONGRUENT, ADJ_ERR_INCOMPATIBLE,
            "%s: the input decomposition lives on another communicator than config->comm", s->name);
  const int64_t *global = adj_decomposition_global_shape(in);
  char a[160], b[160];
  for (int i = 0; i < rank; i++) {
    ADJ_CHECK(cfg->input_shape[0] == 0 || cfg->input_shape[i] == global[i], ADJ_ERR_SIZE,
              "%s: input_shape %s differs from the input decomposition's global shape %s", s->name,
              adj_shape_format(a, sizeof a, rank, cfg->input_shape), adj_shape_format(b, sizeof b, rank, global));
    s->x_shape[i] = global[i];
    s->x_parts[i] = adj_partition_shape(p)[i];
  }
  /* The weight blocks follow the balanced channel split, so x must too. */
  for (int p_i = 0; p_i < s->x_parts[1]; p_i++) {
    int64_t start, extent;
    adj_balanced_block(global[1], s->x_parts[1], p_i, &start, &extent);
    ADJ_CHECK(adj_decomposition_cuts(in, 1)[p_i] == start, ADJ_ERR_ARG,
              "%s: the input decomposition cuts the channels unevenly; only spatial dimensions may have "
              "explicit cuts", s->name);
  }
  return ADJ_SUCCESS;
}

static int adj_conv_check_input_parts(const adj_conv_layer_config *cfg, adj_conv_spec *s) {
  for (int i = 0; i < ADJ_MAX_RANK; i++) {
    int p = cfg->input_parts[i];
    ADJ_CHECK(p >= 0, ADJ_ERR_ARG, "%s: input partition extent %d in dimension %d is negative", s->name, p, i);
    ADJ_CHECK(i < s->rank || (p <= 1 && cfg->input_shape[i] == 0), ADJ_ERR_SIZE,
              "%s: the input partition or shape has an entry in dimension %d but a %d-D convolution takes a "
              "rank-%d input (N, C_in, spatial...)", s->name, i, s->dims, s->rank);
    if (i < s->rank) {
      s->x_parts[i] = p ? p : 1;
      s->x_shape[i] = cfg->input_shape[i];
    }
  }
  return ADJ_SUCCESS;
}

/* The kernel must fit the padded input: the window module's check, named. */
static int adj_conv_check_window(const adj_conv_layer_config *cfg, adj_conv_spec *s) {
  int status = adj_window_output_shape(&cfg->window, &s->x_shape[2], &s->y_shape[2]);
  if (status) {
    char message[1024];
    snprintf(message, sizeof message, "%s", adj_last_error());
    return adj_error_set(status, "%s: %s", s->name, message);
  }
  return ADJ_SUCCESS;
}

static int adj_conv_check_channels(const adj_conv_layer_config *cfg, adj_conv_spec *s) {
  for (int i = 0; i < s->rank; i++)
    ADJ_CHECK(s->x_shape[i] >= 1, ADJ_ERR_SIZE, "%s: input extent %lld in dimension %d must be at least 1", s->name,
              (long long)s->x_shape[i], i);
  ADJ_CHECK(cfg->out_channels >= 1, ADJ_ERR_ARG, "%s: out_channels is %lld, must be at least 1", s->name,
            (long long)cfg->out_channels);
  ADJ_CHECK(cfg->in_channels == 0 || cfg->in_channels == s->x_shape[1], ADJ_ERR_SIZE,
            "%s: the weights take %lld input channels but the input has %lld", s->name,
            (long long)cfg->in_channels, (long long)s->x_shape[1]);
  ADJ_CHECK(cfg->out_channel_parts >= 0, ADJ_ERR_ARG, "%s: out_channel_parts %d is negative", s->name,
            cfg->out_channel_parts);
  s->p_n = s->x_parts[0];
  s->p_ci = s->x_parts[1];
  ADJ_CHECK(s->p_n <= s->x_shape[0], ADJ_ERR_SIZE, "%s: %d batch workers for a batch of %lld", s->name, s->p_n,
            (long long)s->x_shape[0]);
  s->p_co = cfg->out_channel_parts ? cfg->out_channel_parts : 1;
  ADJ_CHECK(s->p_ci <= s->x_shape[1], ADJ_ERR_SIZE, "%s: %d input-channel workers for %lld input channels", s->name,
            s->p_ci, (long long)s->x_shape[1]);
  ADJ_CHECK(s->p_co <= cfg->out_channels, ADJ_ERR_SIZE, "%s: %d output-channel workers for %lld output channels",
            s->name, s->p_co, (long long)cfg->out_channels);
  return ADJ_SUCCESS;
}

static int adj_conv_check_workers(const adj_conv_layer_config *cfg, adj_conv_spec *s) {
  int size;
  ADJ_CALL_MPI(MPI_Comm_size(cfg->comm, &size));
  int spatial = 1;
  for (int d = 0; d < s->dims; d++) spatial *= s->x_parts[2 + d];
  s->n_x = s->p_n * s->p_ci * spatial;
  s->n_w = s->p_co * s->n_x;
  s->n_y = s->p_n * s->p_co * spatial;
  ADJ_CHECK(s->n_w <= size, ADJ_ERR_SIZE,
            "%s: the work partition P_n x P_co x P_ci x spatial needs %d x %d x %d x %d = %d workers but the "
            "communicator has %d ranks", s->name, s->p_n, s->p_co, s->p_ci, spatial, s->n_w, size);
  return ADJ_SUCCESS;
}

static int adj_conv_validate(const adj_conv_layer_config *cfg, adj_conv_spec *s) {
  ADJ_CHECK(cfg, ADJ_ERR_ARG, "conv layer: config is NULL");
  *s = (adj_conv_spec){.name = cfg->name ? cfg->name : "conv layer", .dims = cfg->window.spatial_dims};
  ADJ_CALL(adj_dtype_check_compute(s->name, "the config", cfg->dtype));
  ADJ_CHECK(s->dims >= 1 && s->dims <= ADJ_MAX_SPATIAL_DIMS, ADJ_ERR_ARG, "%s: window.spatial_dims is %d, not 1, 2 or 3",
            s->name, s->dims);
  s->rank = 2 + s->dims;
  ADJ_CALL(cfg->input ? adj_conv_check_input_layout(cfg, s) : adj_conv_check_input_parts(cfg, s));
  ADJ_CALL(adj_conv_check_channels(cfg, s));
  ADJ_CALL(adj_conv_check_window(cfg, s));
  s->y_shape[0] = s->x_shape[0];
  s->y_shape[1] = cfg->out_channels;
  s->w_shape[0] = cfg->out_channels;
  s->w_shape[1] = s->x_shape[1];
  for (int d = 0; d < s->dims; d++) s->w_shape[2 + d] = cfg->window.kernel[d];
  return adj_conv_check_workers(cfg, s);
}

/* ---- partitions (collective) ---------------------------------------------------------- */

/* adj_partition_create on the layer's communicator, its message prefixed with
 * the layer and the partition ("conv layer: work partition: ..."). */
static int adj_conv_grid(adj_layer *l, const char *what, int ndim, const int *shape, int n, const int *ranks,
                         adj_partition **p) {
  int status = adj_partition_create(l->comm, ndim, shape, n, ranks, p);
  if (status) {
    char message[1024];
    snprintf(message, sizeof message, "%s", adj_last_error());
    adj_error_set(status, "%s: %s: %s", l->name, what, message);
  }
  return status;
}

/* Nonzero when both partitions list the same ranks in the same grid order. */
static bool adj_conv_same_workers(const adj_partition *a, const adj_partition *b) {
  if (adj_partition_size(a) != adj_partition_size(b)) return false;
  for (int i = 0; i < adj_partition_size(a); i++)
    if (adj_partition_rank_of_index(a, i) != adj_partition_rank_of_index(b, i)) return false;
  return true;
}

/* Base ranks of P_w's workers at (n = 0, co, ci, 0, ...), co < p_co, ci < p_ci, in that order. */
static void adj_conv_column_ranks(const adj_partition *pw, int p_co, int p_ci, int *ranks) {
  int coords[ADJ_MAX_RANK] = {0}, n = 0;
  for (coords[1] = 0; coords[1] < p_co; coords[1]++)
    for (coords[2] = 0; coords[2] < p_ci; coords[2]++) ranks[n++] = adj_partition_rank_at(pw, coords);
}

/* Shapes of P_w (P_n, P_co, P_ci, P_0...), P_x's wide form (P_n, 1, P_ci,
 * P_0...) from which x broadcasts over P_co, P_y (P_n, P_co, P_0...) and its
 * wide form (P_n, P_co, 1, P_0...) onto which y sums over P_ci, P_r (P_co,
 * P_ci, 1...) and the bias destination (P_n, P_0, ..., P_co): the ci = 0 slab
 * of P_w with co last, so the bias (C_out) on P_b (P_co) broadcasts to it by
 * the right-aligned rule, as the weights on P_r broadcast over P_n. */
typedef struct adj_conv_grids {
  int w[ADJ_MAX_RANK], x_wide[ADJ_MAX_RANK], y[ADJ_MAX_RANK], y_wide[ADJ_MAX_RANK], r[ADJ_MAX_RANK],
      b_slab[ADJ_MAX_RANK];
} adj_conv_grids;

static void adj_conv_grid_shapes(const adj_conv_spec *s, adj_conv_grids *g) {
  for (int i = 0; i < ADJ_MAX_RANK; i++) g->w[i] = g->x_wide[i] = g->y[i] = g->y_wide[i] = g->r[i] = g->b_slab[i] = 1;
  g->w[0] = g->x_wide[0] = g->y[0] = g->y_wide[0] = g->b_slab[0] = s->p_n;
  g->w[1] = g->y[1] = g->y_wide[1] = g->r[0] = g->b_slab[1 + s->dims] = s->p_co;
  g->w[2] = g->x_wide[2] = g->r[1] = s->p_ci;
  for (int d = 0; d < s->dims; d++)
    g->w[3 + d] = g->x_wide[3 + d] = g->y[2 + d] = g->y_wide[3 + d] = g->b_slab[1 + d] = s->x_parts[2 + d];
}

/* Base ranks of P_w's ci = 0 workers in (n, spatial..., co) row-major order. */
static void adj_conv_slab_ranks(const adj_partition *pw, const adj_conv_spec *s, int *ranks) {
  int spatial = s->n_y / (s->p_n * s->p_co), coords[ADJ_MAX_RANK] = {0}, n = 0;
  for (coords[0] = 0; coords[0] < s->p_n; coords[0]++)
    for (int k = 0; k < spatial; k++)
      for (coords[1] = 0; coords[1] < s->p_co; coords[1]++) {
        for (int d = s->dims - 1, rest = k; d >= 0; d--) {
          coords[3 + d] = rest % s->x_parts[2 + d];
          rest /= s->x_parts[2 + d];
        }
        ranks[n++] = adj_partition_rank_at(pw, coords);
      }
}

static int adj_conv_make_parameter_grids(adj_layer *l, const adj_conv_spec *s, const adj_conv_grids *g,
                                         int *ranks) {
  adj_conv_layer *c = l->impl;
  adj_conv_column_ranks(c->pw, s->p_co, s->p_ci, ranks);
  ADJ_CALL(adj_conv_grid(l, "weight partition", s->rank, g->r, s->p_co * s->p_ci, ranks, &c->pr));
  if (!c->bias) return ADJ_SUCCESS;
  adj_conv_column_ranks(c->pw, s->p_co, 1, ranks);
  ADJ_CALL(adj_conv_grid(l, "bias partition", 1, &s->p_co, s->p_co, ranks, &c->pb));
  adj_conv_slab_ranks(c->pw, s, ranks);
  return adj_conv_grid(l, "bias work partition", s->dims + 2, g->b_slab, s->n_y, ranks, &c->pw_bias);
}

static int adj_conv_make_partitions(adj_layer *l, const adj_conv_layer_config *cfg, const adj_conv_spec *s) {
  adj_conv_layer *c = l->impl;
  int R = s->rank;
  adj_conv_grids g;
  adj_conv_grid_shapes(s, &g);
  int *ranks = malloc(sizeof(int) * (size_t)s->n_w);
  int status = ranks ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", s->name);
  ADJ_CALL_GOTO(adj_status_agree(l->comm, status, l->wait), done);
  if (!cfg->input) {
    adj_partition *px;
    ADJ_CALL_GOTO(adj_conv_grid(l, "input partition", R, s->x_parts, s->n_x, cfg->input_ranks, &px), done);
    status = adj_decomposition_create(px, R, s->x_shape, &c->x);
    adj_partition_destroy(&px);
    ADJ_CALL_GOTO(status, done);
  } else {
    c->x = adj_decomposition_reference((adj_decomposition *)cfg->input); /* a reference count, not a change */
  }
  ADJ_CALL_GOTO(adj_conv_grid(l, "work partition", R + 1, g.w, s->n_w, cfg->work_ranks, &c->pw), done);
  /* With P_co = 1 on the same workers, P_w is P_x with a unit dimension and
   * the broadcast of x is the identity on every worker; with P_ci = 1 on the
   * same workers, P_w is P_y with a unit dimension and so is the sum-reduce
   * of y (op.h: the layer then aliases instead of copying). */
  const adj_partition *px = adj_decomposition_partition(c->x);
  for (int i = 0; i < s->n_x; i++) ranks[i] = adj_partition_rank_of_index(px, i);
  ADJ_CALL_GOTO(adj_conv_grid(l, "input partition", R + 1, g.x_wide, s->n_x, ranks, &c->px_wide), done);
  ADJ_CALL_GOTO(adj_conv_grid(l, "output partition", R, g.y, s->n_y, cfg->output_ranks, &c->py), done);
  ADJ_CALL_GOTO(adj_conv_grid(l, "output partition", R + 1, g.y_wide, s->n_y, cfg->output_ranks, &c->py_wide), done);
  c->moves_features = s->p_co > 1 || !adj_conv_same_workers(px, c->pw) || s->p_ci > 1 ||
                      !adj_conv_same_workers(c->py, c->pw);
  status = adj_conv_make_parameter_grids(l, s, &g, ranks);
done:
  free(ranks);
  return status;
}

/* ---- layouts and geometry (local) ------------------------------------------------------- */

/* The halo-extended blocks as a decomposition over P_x's wide form (a unit
 * dimension after the batch): block p of dimension i spans bulk and halos of
 * part p, so the x broadcast moves whole exchange buffers.  Dimensions are
 * independent, which is what makes this a grid. */
static int adj_conv_padded_layout(adj_conv_layer *c) {
  const int *parts = adj_partition_shape(c->px_wide);
  int64_t *cuts[ADJ_MAX_RANK] = {0}, shape[ADJ_MAX_RANK];
  int status = ADJ_SUCCESS;
  for (int i = 0; i <= c->rank && !status; i++) {
    cuts[i] = malloc(sizeof(int64_t) * (size_t)(parts[i] + 1));
    if (!cuts[i]) {
      status = adj_error_set(ADJ_ERR_MEM, "conv layer: out of memory");
      break;
    }
    cuts[i][0] = 0;
    for (int p = 0; p < parts[i]; p++) {
      const adj_halo_dim *d = i == 1 ? NULL : adj_halo_geometry_dim(c->geometry, i - (i > 1), p);
      cuts[i][p + 1] = cuts[i][p] + (d ? d->bulk[1] - d->bulk[0] + d->halo[0] + d->halo[1] : 1);
    }
    shape[i] = cuts[i][parts[i]];
  }
  if (!status)
    status = adj_decomposition_create_explicit(c->px_wide, c->rank + 1, shape, (const int64_t *const *)cuts,
                                               &c->x_padded);
  for (int i = 0; i <= c->rank; i++) free(cuts[i]);
  return status;
}

static int adj_conv_make_layouts(adj_conv_layer *c, const adj_conv_layer_config *cfg, const adj_conv_spec *s) {
  int R = s->rank;
  int64_t y_wide[ADJ_MAX_RANK];
  memcpy(y_wide, s->y_shape, sizeof(int64_t) * 2);
  y_wide[2] = 1;
  memcpy(&y_wide[3], &s->y_shape[2], sizeof(int64_t) * (size_t)s->dims);
  ADJ_CALL(adj_decomposition_create(c->py, R, s->y_shape, &c->y));
  ADJ_CALL(adj_decomposition_create(c->py_wide, R + 1, y_wide, &c->y_wide));
  ADJ_CALL(adj_decomposition_create(c->pr, R, s->w_shape, &c->w));
  if (c->bias) ADJ_CALL(adj_decomposition_create(c->pb, 1, &s->y_shape[1], &c->b));
  adj_halo_kernel kernel = {0};
  for (int d = 0; d < s->dims; d++) {
    kernel.size[2 + d] = cfg->window.kernel[d];
    kernel.stride[2 + d] = cfg->window.stride[d];
    kernel.dilation[2 + d] = cfg->window.dilation[d];
    kernel.padding[2 + d][0] = cfg->window.padding_left[d];
    kernel.padding[2 + d][1] = cfg->window.padding_right[d];
  }
  ADJ_CALL(adj_halo_geometry_create_for(c->x, &kernel, &c->geometry));
  return adj_conv_padded_layout(c);
}

/* Where this worker stands: its P_x view, the P_x source of its P_w block and
 * the local kernel (global kernel, local padding). */
static void adj_conv_locate(adj_conv_layer *c, const adj_window_geometry *window) {
  const adj_partition *px = adj_decomposition_partition(c->x);
  adj_halo_geometry_local(c->geometry, adj_partition_active(px) ? adj_partition_coords(px) : NULL, &c->x_local);
  const int *cw = adj_partition_coords(c->pw);
  int cx[ADJ_MAX_RANK] = {0};
  if (adj_partition_active(c->pw)) {
    cx[0] = cw[0];
    for (int i = 1; i < c->rank; i++) cx[i] = cw[i + 1]; /* (n, co, ci, s...) -> (n, ci, s...) */
  }
  adj_halo_geometry_local(c->geometry, adj_partition_active(c->pw) ? cx : NULL, &c->w_local);
  c->computes = adj_partition_active(c->pw) && adj_box_volume(&c->w_local.output) > 0;
  const adj_box *k = &c->w_local.kernel_input;
  for (int i = 0; i < c->rank; i++) c->trims |= c->computes && k->extent[i] != c->w_local.shape[i];
  c->local = *window;
  for (int d = 0; d < window->spatial_dims; d++) {
    c->local.padding_left[d] = c->w_local.padding[2 + d][0];
    c->local.padding_right[d] = c->w_local.padding[2 + d][1];
  }
}

/* ---- operators (collective) ------------------------------------------------------------ */

static int adj_conv_make_ops(adj_layer *l) {
  adj_conv_layer *c = l->impl;
  const adj_partition *px = adj_decomposition_partition(c->x);
  ADJ_CALL(adj_halo_create(l->dtype, px, c->geometry, &c->halo));
  ADJ_CALL(adj_broadcast_create(l->dtype, c->x_padded, c->pw, &c->x_bcast));
  ADJ_CALL(adj_sum_reduce_create(l->dtype, c->pw, c->y_wide, &c->y_reduce));
  ADJ_CALL(adj_broadcast_create(l->dtype, c->w, c->pw, &c->w_bcast));
  if (c->bias) ADJ_CALL(adj_broadcast_create(l->dtype, c->b, c->pw_bias, &c->b_bcast));
  /* The layer checks the caller's tensors once per call; the internal buffers
   * match the operators by construction, so the per-operator agreement (one
   * all-reduce each) would only add latency. */
  adj_op *ops[] = {c->halo, c->x_bcast, c->y_reduce, c->w_bcast, c->b_bcast};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i]) adj_op_set_checks(ops[i], false);
  /* The adjoints sum the weight gradients straight into the parameters'
   * gradients, which backward accumulates (layer.h). */
  ADJ_CALL(adj_op_set_accumulate(c->w_bcast, ADJ_ADJOINT, true));
  return c->b_bcast ? adj_op_set_accumulate(c->b_bcast, ADJ_ADJOINT, true) : ADJ_SUCCESS;
}

/* ---- buffers (local) --------------------------------------------------------------------- */

static int adj_conv_pair(adj_tensor *a, adj_tensor *b, adj_dtype dtype, int rank, const int64_t *shape) {
  ADJ_CALL(adj_tensor_create(a, dtype, rank, shape));
  return adj_tensor_create(b, dtype, rank, shape);
}

/* The local conv must produce exactly this worker's output block: a cross-check
 * of the halo geometry against the kernel's own output formula. */
static int adj_conv_check_local(const adj_conv_layer *c) {
  if (!c->computes) return ADJ_SUCCESS;
  int64_t out[ADJ_MAX_SPATIAL_DIMS];
  const adj_box *k = &c->w_local.kernel_input;
  ADJ_CALL(adj_window_output_shape(&c->local, &k->extent[2], out));
  for (int d = 0; d < c->local.spatial_dims; d++)
    ADJ_CHECK(out[d] == c->w_local.output.extent[2 + d], ADJ_ERR_STATE,
              "conv layer: internal: spatial dimension %d computes %lld outputs locally but the block has %lld", d,
              (long long)out[d], (long long)c->w_local.output.extent[2 + d]);
  ADJ_CHECK(c->w_hat.shape[1] == k->extent[1], ADJ_ERR_STATE,
            "conv layer: internal: weight block has %lld input channels but the input block %lld",
            (long long)c->w_hat.shape[1], (long long)k->extent[1]);
  return ADJ_SUCCESS;
}

static int adj_conv_make_buffers(adj_layer *l) {
  adj_conv_layer *c = l->impl;
  adj_dtype t = l->dtype;
  ADJ_CALL(adj_conv_pair(&c->x_pad, &c->dx_pad, t, c->rank, adj_op_domain_shape(c->halo)));
  /* The broadcast's range (N, 1, C_in_blk, padded...) without its unit dimension. */
  const int64_t *x_wide = adj_op_range_shape(c->x_bcast);
  int64_t x_shape[ADJ_MAX_RANK] = {x_wide[0]};
  memcpy(&x_shape[1], &x_wide[2], sizeof(int64_t) * (size_t)(c->rank - 1));
  ADJ_CALL(adj_conv_pair(&c->x_hat, &c->dx_hat, t, c->rank, x_shape));
  if (c->trims) ADJ_CALL(adj_conv_pair(&c->x_k, &c->dx_k, t, c->rank, c->w_local.kernel_input.extent));
  ADJ_CALL(adj_conv_pair(&c->w_hat, &c->dw_hat, t, c->rank, adj_op_range_shape(c->w_bcast)));
  if (c->b_bcast) {
    ADJ_CALL(adj_conv_pair(&c->b_hat, &c->db_hat, t, 1, adj_op_range_shape(c->b_bcast)));
  }
  /* The reduce's domain (N, C_out_blk, 1, out...) without its unit dimension. */
  const int64_t *y_wide = adj_op_domain_shape(c->y_reduce);
  int64_t y_shape[ADJ_MAX_RANK] = {y_wide[0], y_wide[1]};
  memcpy(&y_shape[2], &y_wide[3], sizeof(int64_t) * (size_t)(c->rank - 2));
  ADJ_CALL(adj_conv_pair(&c->y_hat, &c->dy_hat, t, c->rank, y_shape));
  ADJ_CALL(adj_conv_check_local(c));
  if (!c->computes) return ADJ_SUCCESS;
  adj_tensor x_template = {.dtype = t, .rank = c->rank};
  memcpy(x_template.shape, c->w_local.kernel_input.extent, sizeof x_template.shape);
  adj_conv_plan_config pc = {.geometry = c->local, .algorithm = c->algorithm};
  ADJ_CALL(adj_conv_plan_create(&pc, &x_template, &c->w_hat, &c->plan));
  return adj_workspace_reserve(&c->ws, adj_conv_plan_workspace_size(c->plan));
}

/* ---- the layer ---------------------------------------------------------------------------- */

static void adj_conv_layer_free(adj_layer *l) {
  adj_conv_layer *c = l->impl;
  if (!c) return;
  adj_op *ops[] = {c->halo, c->x_bcast, c->y_reduce, c->w_bcast, c->b_bcast};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) adj_op_destroy(&ops[i]);
  adj_tensor *tensors[] = {&c->x_pad, &c->dx_pad, &c->x_hat, &c->dx_hat, &c->x_k,   &c->dx_k,  &c->w_hat,
                           &c->dw_hat, &c->b_hat, &c->db_hat, &c->y_hat, &c->dy_hat};
  for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) adj_tensor_destroy(tensors[i]);
  adj_decomposition *layouts[] = {c->x, c->y, c->y_wide, c->w, c->b, c->x_padded};
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) adj_decomposition_destroy(&layouts[i]);
  adj_partition *grids[] = {c->pw, c->px_wide, c->py, c->py_wide, c->pr, c->pb, c->pw_bias};
  for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++) adj_partition_destroy(&grids[i]);
  adj_halo_geometry_destroy(&c->geometry);
  adj_conv_plan_destroy(&c->plan);
  adj_workspace_release(&c->ws);
  free(c);
  l->impl = NULL;
}

static const adj_layer_methods adj_conv_layer_methods = {adj_conv_layer_forward, adj_conv_layer_jvp,
                                                         adj_conv_layer_backward, adj_conv_layer_free};

/* The plan behind a created layer: partitions, layouts, operators, buffers,
 * parameters and the local block shapes. */
static int adj_conv_build(adj_layer *l, const adj_conv_layer_config *cfg, const adj_conv_spec *s) {
  adj_conv_layer *c = l->impl;
  ADJ_CALL(adj_conv_make_partitions(l, cfg, s));
  int status = adj_conv_make_layouts(c, cfg, s);
  ADJ_CALL(adj_status_agree(l->comm, status, l->wait));
  adj_conv_locate(c, &cfg->window);
  ADJ_CALL(adj_conv_make_ops(l));
  status = adj_conv_make_buffers(l);
  if (!status) status = adj_layer_add_parameter(l, "weight", c->w);
  if (!status && c->bias) status = adj_layer_add_parameter(l, "bias", c->b);
  ADJ_CALL(adj_status_agree(l->comm, status, l->wait));
  adj_layer_set_layouts(l, c->x, c->y);
  adj_box in = adj_decomposition_local_block(c->x), out = adj_decomposition_local_block(c->y);
  memcpy(l->input_shape, in.extent, sizeof(int64_t) * (size_t)c->rank);
  memcpy(l->output_shape, out.extent, sizeof(int64_t) * (size_t)c->rank);
  return ADJ_SUCCESS;
}

static adj_conv_layer *adj_conv_of(const adj_layer *layer) {
  bool conv = layer && layer->methods.forward == adj_conv_layer_methods.forward && layer->impl;
  return conv ? layer->impl : NULL;
}

adj_conv_algorithm adj_conv_layer_algorithm(const adj_layer *layer) {
  const adj_conv_layer *c = adj_conv_of(layer);
  return c && c->plan ? adj_conv_plan_algorithm(c->plan) : ADJ_CONV_ALGORITHM_AUTO;
}


bool adj_conv_layer_describe(const adj_layer *layer, adj_stage_description *d) {
  const adj_conv_layer *c = adj_conv_of(layer);
  if (!c) return false;
  *d = (adj_stage_description){.kind = ADJ_STAGE_CONV, .window = c->local, .bias = c->bias,
                               .out_channels = adj_decomposition_global_shape(c->y)[1], .weight = c->w,
                               .bias_layout = c->b, .algorithm = adj_conv_plan_algorithm(c->plan)};
  const adj_halo_kernel *k = adj_halo_geometry_kernel(c->geometry);
  for (int i = 0; i < c->local.spatial_dims; i++) {
    d->window.padding_left[i] = k->padding[2 + i][0];
    d->window.padding_right[i] = k->padding[2 + i][1];
  }
  const adj_partition *px = adj_decomposition_partition(c->x);
  d->feature_split = c->moves_features || !adj_conv_same_workers(px, adj_decomposition_partition(c->y)) ||
                     adj_partition_size(c->pw) != adj_partition_size(px);
  return true;
}

int adj_conv_layer_ops(adj_layer *layer, adj_op **halo, adj_op **weight, adj_op **bias) {
  const adj_conv_layer *c = adj_conv_of(layer);
  ADJ_CHECK(c && halo && weight && bias, ADJ_ERR_ARG, "conv layer ops: %s is not a convolution layer",
            layer ? layer->name : "(NULL)");
  *halo = c->halo, *weight = c->w_bcast, *bias = c->b_bcast;
  return ADJ_SUCCESS;
}

int adj_conv_layer_counters(const adj_layer *layer, adj_conv_counters *counters) {
  const adj_conv_layer *c = adj_conv_of(layer);
  ADJ_CHECK(c && counters, ADJ_ERR_ARG, "conv layer counters: %s is not a convolution layer (or counters is NULL)",
            layer ? layer->name : "(NULL)");
  *counters = (adj_conv_counters){0};
  adj_op *ops[] = {c->halo, c->x_bcast, c->y_reduce, c->w_bcast, c->b_bcast};
  adj_op_counters *into[] = {&counters->halo, &counters->input, &counters->output, &counters->weight,
                             &counters->bias};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i]) adj_op_get_counters(ops[i], into[i]);
  return ADJ_SUCCESS;
}

void adj_conv_layer_reset_counters(adj_layer *layer) {
  adj_conv_layer *c = adj_conv_of(layer);
  if (!c) return;
  adj_op *ops[] = {c->halo, c->x_bcast, c->y_reduce, c->w_bcast, c->b_bcast};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i]) adj_op_reset_counters(ops[i]);
}

int adj_conv_layer_create(const adj_conv_layer_config *cfg, adj_layer **layer) {
  ADJ_CHECK(layer, ADJ_ERR_ARG, "conv layer: output layer pointer is NULL");
  *layer = NULL;
  adj_conv_spec s;
  ADJ_CALL(adj_conv_validate(cfg, &s));
  static const int64_t zeros[ADJ_MAX_RANK];
  adj_layer *l;
  ADJ_CALL(adj_layer_alloc(s.name, cfg->comm, cfg->dtype, s.rank, zeros, s.rank, zeros, &adj_conv_layer_methods,
                           NULL, &l));
  adj_conv_layer *c = calloc(1, sizeof *c);
  int status = c ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", s.name);
  status = adj_status_agree(l->comm, status, l->wait);
  if (!status) {
    *c = (adj_conv_layer){.rank = s.rank, .bias = !cfg->no_bias, .algorithm = cfg->algorithm};
    l->impl = c;
    status = adj_conv_build(l, cfg, &s);
  } else {
    free(c);
  }
  if (status) adj_layer_destroy(&l);
  *layer = l;
  return status;
}
