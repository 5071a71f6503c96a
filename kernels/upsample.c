/* Upsampling's local interpolation and its adjoint (adjoin/upsample.h): the
 * plan, the split of planes over the kernels' team and the typed loops. */
#include <stdlib.h>
#include <string.h>

#include "adjoin/upsample.h"
#include "kernels_impl.h"

/* The map per dimension, padded at the front to three (extent 1, index 0,
 * weight 1); both taps' tables always filled (nearest: the second tap is the
 * first with weight 0). */
struct adj_upsample_plan {
  int64_t in[3], out[3];
  int taps[3];
  int64_t factor[3]; /* out = in * factor and output o reads o / factor, in every dimension (repeats) */
  bool repeats;
  int64_t *index[3][2];
  double *weight[3][2];
  void *storage;
};

#define ADJ_TYPED_FILE "upsample_typed.inc"
#include "instantiate.h"

/* Whether dimension d's nearest map reads o / factor for a whole factor. */
static bool adj_upsample_whole_factor(const adj_upsample_plan *p, int d) {
  if (p->out[d] % p->in[d]) return false;
  int64_t f = p->out[d] / p->in[d];
  for (int64_t o = 0; o < p->out[d]; o++)
    if (p->index[d][0][o] != o / f) return false;
  return true;
}

/* Copies axes into the padded tables; fails naming a missing table or an index out of range. */
static int adj_upsample_tables(const char *who, adj_interp_mode mode, int sd, const adj_upsample_axis *axes,
                               adj_upsample_plan *p) {
  int64_t total = 0;
  for (int d = 0; d < 3; d++) {
    const adj_upsample_axis *a = d >= 3 - sd ? &axes[d - (3 - sd)] : NULL;
    p->in[d] = a ? a->in : 1, p->out[d] = a ? a->out : 1;
    p->taps[d] = a && mode == ADJ_INTERP_LINEAR ? 2 : 1;
    ADJ_CHECK(p->in[d] >= 1 && p->out[d] >= 0, ADJ_ERR_ARG, "%s: dimension %d maps %lld inputs to %lld outputs", who,
              d - (3 - sd), (long long)p->in[d], (long long)p->out[d]);
    for (int t = 0; a && t < p->taps[d]; t++)
      ADJ_CHECK(a->index[t] && (mode == ADJ_INTERP_NEAREST || a->weight[t]), ADJ_ERR_ARG,
                "%s: dimension %d has no index or weight table for tap %d", who, d - (3 - sd), t);
    total += p->out[d];
  }
  p->storage = malloc((size_t)(2 * total + 1) * (sizeof(int64_t) + sizeof(double)));
  ADJ_CHECK(p->storage, ADJ_ERR_MEM, "%s: out of memory", who);
  int64_t *ip = p->storage;
  double *wp = (double *)(ip + 2 * total + 1);
  for (int d = 0; d < 3; d++) {
    const adj_upsample_axis *a = d >= 3 - sd ? &axes[d - (3 - sd)] : NULL;
    for (int t = 0; t < 2; t++, ip += p->out[d], wp += p->out[d]) {
      p->index[d][t] = ip, p->weight[d][t] = wp;
      int tap = t < p->taps[d] ? t : 0;
      for (int64_t o = 0; o < p->out[d]; o++) {
        ip[o] = a ? a->index[tap][o] : 0;
        wp[o] = t >= p->taps[d] ? 0 : mode == ADJ_INTERP_NEAREST || !a ? 1 : a->weight[tap][o];
        ADJ_CHECK(ip[o] >= 0 && ip[o] < p->in[d], ADJ_ERR_ARG, "%s: dimension %d: output %lld reads input %lld of %lld",
                  who, d - (3 - sd), (long long)o, (long long)ip[o], (long long)p->in[d]);
      }
    }
  }
  return ADJ_SUCCESS;
}

int adj_upsample_plan_create(adj_interp_mode mode, int spatial_dims, const adj_upsample_axis *axes,
                             adj_upsample_plan **plan) {
  static const char who[] = "upsample plan";
  ADJ_CHECK(plan, ADJ_ERR_ARG, "%s: plan is NULL", who);
  *plan = NULL;
  ADJ_CHECK(mode == ADJ_INTERP_NEAREST || mode == ADJ_INTERP_LINEAR, ADJ_ERR_ARG, "%s: unknown mode %d", who,
            (int)mode);
  ADJ_CHECK(spatial_dims >= 1 && spatial_dims <= 3 && axes, ADJ_ERR_ARG,
            "%s: %d spatial dimensions (1, 2 or 3, with their axes)", who, spatial_dims);
  adj_upsample_plan *p = calloc(1, sizeof *p);
  ADJ_CHECK(p, ADJ_ERR_MEM, "%s: out of memory", who);
  int status = adj_upsample_tables(who, mode, spatial_dims, axes, p);
  if (status) {
    adj_upsample_plan_destroy(&p);
    return status;
  }
  p->repeats = mode == ADJ_INTERP_NEAREST;
  for (int d = 0; d < 3 && p->repeats; d++) {
    p->repeats = adj_upsample_whole_factor(p, d);
    p->factor[d] = p->repeats ? p->out[d] / p->in[d] : 0;
  }
  *plan = p;
  return ADJ_SUCCESS;
}

void adj_upsample_plan_destroy(adj_upsample_plan **plan) {
  if (!plan || !*plan) return;
  free((*plan)->storage);
  free(*plan);
  *plan = NULL;
}

int adj_upsample_plan_repeats(const adj_upsample_plan *plan) { return plan && plan->repeats; }

/* ---- application: planes over a team ----------------------------------------------------- */

typedef struct adj_upsample_work {
  const adj_upsample_plan *p;
  adj_dtype dtype;
  bool adjoint;
  const void *in;
  void *out;
  int failed; /* a member's scratch could not be allocated (atomic) */
} adj_upsample_work;

/* The float64 scratch one plane of the table path needs. */
static int64_t adj_upsample_scratch(const adj_upsample_plan *p) {
  return p->in[0] * p->in[1] * p->out[2] + p->in[0] * p->out[1] * p->out[2] + p->in[2];
}

static void adj_upsample_table_planes(const adj_upsample_work *w, int64_t first, int64_t count, double *t) {
  const adj_upsample_plan *p = w->p;
  int64_t in_plane = p->in[0] * p->in[1] * p->in[2], out_plane = p->out[0] * p->out[1] * p->out[2];
  double *t1 = t, *t2 = t1 + p->in[0] * p->in[1] * p->out[2], *row = t2 + p->in[0] * p->out[1] * p->out[2];
  for (int64_t plane = first; plane < first + count; plane++) {
    if (w->adjoint)
      ADJ_DISPATCH(w->dtype, table_adjoint, p, adj_at_const(w->in, w->dtype, plane * out_plane), t2, t1, row,
                   adj_at(w->out, w->dtype, plane * in_plane));
    else
      ADJ_DISPATCH(w->dtype, table_forward, p, adj_at_const(w->in, w->dtype, plane * in_plane), t1, t2,
                   adj_at(w->out, w->dtype, plane * out_plane));
  }
}

static void adj_upsample_planes(void *arg, int64_t first, int64_t count, int member) {
  adj_upsample_work *w = arg;
  const adj_upsample_plan *p = w->p;
  int64_t in_plane = p->in[0] * p->in[1] * p->in[2], out_plane = p->out[0] * p->out[1] * p->out[2];
  int64_t from = (w->adjoint ? out_plane : in_plane) * first, to = (w->adjoint ? in_plane : out_plane) * first;
  if (p->repeats) {
    const void *in = adj_at_const(w->in, w->dtype, from);
    void *out = adj_at(w->out, w->dtype, to);
    if (w->adjoint) ADJ_DISPATCH(w->dtype, repeat_adjoint, p, count, in, out);
    else ADJ_DISPATCH(w->dtype, repeat_forward, p, count, in, out);
    return;
  }
  double *scratch = malloc(sizeof(double) * (size_t)adj_upsample_scratch(p));
  if (!scratch) {
    __atomic_store_n(&w->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  adj_upsample_table_planes(w, first, count, scratch);
  free(scratch);
}

/* Checks both tensors against the plan and runs the map or its adjoint. */
static int adj_upsample_run(const char *who, const adj_upsample_plan *p, bool adjoint, const adj_tensor *in,
                            const char *in_name, adj_tensor *out, const char *out_name) {
  ADJ_CHECK(p, ADJ_ERR_ARG, "%s: plan is NULL", who);
  ADJ_CHECK(in && in->rank >= 3 && in->rank <= 5, ADJ_ERR_SIZE, "%s: %s must be (N, C, spatial...) of rank 3-5", who,
            in_name);
  ADJ_CALL(adj_dtype_check_compute(who, in_name, in->dtype));
  int64_t in_shape[5] = {in->shape[0], in->shape[1]}, out_shape[5] = {in->shape[0], in->shape[1]};
  for (int d = 0; d < in->rank - 2; d++) {
    int pd = d + 5 - in->rank;
    in_shape[2 + d] = adjoint ? p->out[pd] : p->in[pd], out_shape[2 + d] = adjoint ? p->in[pd] : p->out[pd];
  }
  for (int d = 0; d < 5 - in->rank; d++)
    ADJ_CHECK(p->in[d] == 1 && p->out[d] == 1, ADJ_ERR_SIZE, "%s: the plan has %d spatial dimensions, %s %d", who,
              3 - d, in_name, in->rank - 2);
  ADJ_CALL(adj_check_tensor(who, in_name, in, in->dtype, in->rank, in_shape));
  ADJ_CALL(adj_check_tensor(who, out_name, out, in->dtype, in->rank, out_shape));
  int64_t planes = in->shape[0] * in->shape[1];
  adj_upsample_work w = {p, in->dtype, adjoint, in->data, out->data, 0};
  int64_t volume = planes * (p->out[0] * p->out[1] * p->out[2]);
  adj_team_run(adj_team_size(planes, volume), planes, adj_upsample_planes, &w);
  ADJ_CHECK(!w.failed, ADJ_ERR_MEM, "%s: out of memory for the scratch", who);
  return ADJ_SUCCESS;
}

int adj_upsample_forward(const adj_upsample_plan *plan, const adj_tensor *x, adj_tensor *y) {
  return adj_upsample_run("upsample forward", plan, false, x, "input x", y, "output y");
}

int adj_upsample_adjoint(const adj_upsample_plan *plan, const adj_tensor *dy, adj_tensor *dx) {
  return adj_upsample_run("upsample adjoint", plan, true, dy, "output gradient dy", dx, "input gradient dx");
}
