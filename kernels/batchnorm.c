/* Batch normalisation's local passes (adjoin/batchnorm.h): argument checks,
 * the split over the kernels' team and the typed loops. */
#include <string.h>

#include "adjoin/batchnorm.h"
#include "kernels_impl.h"

/* The float64 lanes of the sums: 8, one AVX-512 register, two AVX2 ones or
 * four SSE2 ones, so every level sums in the same order.  They are kept as two
 * halves of four: a vector of eight doubles is one register at AVX-512, but
 * below it GCC keeps such a vector on the stack, and the sums ran 4x slower at
 * x86-64-v3.  Lane l sums the same elements in the same order either way. */
enum { ADJ_BN_LANES = 8, ADJ_BN_HALF = ADJ_BN_LANES / 2 };
typedef double adj_bn_half __attribute__((vector_size(ADJ_BN_HALF * sizeof(double))));

/* The sum of both halves' lanes, lane 0 to ADJ_BN_LANES - 1. */
static inline double adj_bn_halves_sum(const adj_bn_half *lo, const adj_bn_half *hi) {
  double total = 0;
  for (int l = 0; l < ADJ_BN_HALF; l++) total += (*lo)[l];
  for (int l = 0; l < ADJ_BN_HALF; l++) total += (*hi)[l];
  return total;
}

#define ADJ_TYPED_FILE "batchnorm_typed.inc"
#include "instantiate.h"

/* The (n, c, s) view of x; fails unless x is a float tensor of rank 2..5. */
static int adj_bn_view(const char *who, const adj_tensor *x, int64_t *n, int64_t *c, int64_t *s) {
  ADJ_CHECK(x, ADJ_ERR_ARG, "%s: input x is NULL", who);
  ADJ_CALL(adj_dtype_check_compute(who, "input x", x->dtype));
  ADJ_CHECK(x->rank >= 2 && x->rank <= 5, ADJ_ERR_SIZE,
            "%s: input x has rank %d; batch norm takes (N, C) or (N, C, spatial...) with 0-3 spatial dimensions",
            who, x->rank);
  *n = x->shape[0], *c = x->shape[1], *s = 1;
  for (int d = 2; d < x->rank; d++) *s *= x->shape[d];
  return ADJ_SUCCESS;
}

/* Fails unless each of the `count` figure arrays is given. */
static int adj_bn_figures(const char *who, int count, const double *const *figures, const char *const *names) {
  for (int k = 0; k < count; k++) ADJ_CHECK(figures[k], ADJ_ERR_ARG, "%s: %s is NULL", who, names[k]);
  return ADJ_SUCCESS;
}

/* ---- statistics: channels over a team --------------------------------------------------- */

typedef struct adj_bn_stats {
  const adj_tensor *v, *x;
  int64_t n, c, s;
  const double *mean, *inv; /* the sums' centre and scale; NULL for the moments */
  double *first, *second;   /* mean and m2, or sum_v and sum_vxhat */
} adj_bn_stats;

static void adj_bn_channels(void *arg, int64_t first, int64_t count, int member) {
  const adj_bn_stats *w = arg;
  if (w->s == 1 && !w->mean)
    ADJ_DISPATCH(w->x->dtype, bn_moments_features, w->x->data, w->n, w->c, first, count, w->first, w->second);
  else if (w->s == 1)
    ADJ_DISPATCH(w->x->dtype, bn_sums_features, w->v->data, w->x->data, w->n, w->c, first, count, w->mean, w->inv,
                 w->first, w->second);
  else if (!w->mean)
    ADJ_DISPATCH(w->x->dtype, bn_moments, w->x->data, w->n, w->c, w->s, first, count, w->first, w->second);
  else
    ADJ_DISPATCH(w->x->dtype, bn_sums, w->v->data, w->x->data, w->n, w->c, w->s, first, count, w->mean, w->inv,
                 w->first, w->second);
}

static void adj_bn_stats_run(adj_bn_stats *w) {
  adj_team_run(adj_team_size(w->c, w->n * w->c * w->s), w->c, adj_bn_channels, w);
}

int adj_batchnorm_moments(const adj_tensor *x, double *mean, double *m2) {
  static const char who[] = "batchnorm moments";
  adj_bn_stats w = {.x = x, .first = mean, .second = m2};
  ADJ_CALL(adj_bn_view(who, x, &w.n, &w.c, &w.s));
  ADJ_CALL(adj_bn_figures(who, 2, (const double *const[]){mean, m2}, (const char *const[]){"mean", "m2"}));
  adj_bn_stats_run(&w);
  return ADJ_SUCCESS;
}

int adj_batchnorm_sums(const adj_tensor *v, const adj_tensor *x, const double *mean, const double *inv,
                       double *sum_v, double *sum_vxhat) {
  static const char who[] = "batchnorm sums";
  adj_bn_stats w = {.v = v, .x = x, .mean = mean, .inv = inv, .first = sum_v, .second = sum_vxhat};
  ADJ_CALL(adj_bn_view(who, x, &w.n, &w.c, &w.s));
  ADJ_CALL(adj_check_tensor(who, "v", v, x->dtype, x->rank, x->shape));
  ADJ_CALL(adj_bn_figures(who, 4, (const double *const[]){mean, inv, sum_v, sum_vxhat},
                          (const char *const[]){"mean", "inv", "sum_v", "sum_vxhat"}));
  adj_bn_stats_run(&w);
  return ADJ_SUCCESS;
}

/* ---- the map: planes over a team -------------------------------------------------------- */

typedef struct adj_bn_map_work {
  const adj_tensor *v, *x;
  int64_t c, s;
  const adj_batchnorm_map *map;
  adj_tensor *out;
} adj_bn_map_work;

static void adj_bn_planes(void *arg, int64_t first, int64_t count, int member) {
  const adj_bn_map_work *w = arg;
  if (w->s == 1)
    ADJ_DISPATCH(w->x->dtype, bn_apply_features, w->v ? w->v->data : NULL, w->x->data, w->c, first, count, w->map,
                 w->out->data);
  else ADJ_DISPATCH(w->x->dtype, bn_apply, w->v ? w->v->data : NULL, w->x->data, w->c, w->s, first, count, w->map,
               w->out->data);
}

int adj_batchnorm_apply(const adj_tensor *v, const adj_tensor *x, const adj_batchnorm_map *map, adj_tensor *out) {
  static const char who[] = "batchnorm apply";
  adj_bn_map_work w = {.v = v, .x = x, .map = map, .out = out};
  int64_t n;
  ADJ_CALL(adj_bn_view(who, x, &n, &w.c, &w.s));
  ADJ_CALL(adj_check_optional(who, "v", v, x->dtype, x->rank, x->shape));
  ADJ_CALL(adj_check_tensor(who, "output out", out, x->dtype, x->rank, x->shape));
  ADJ_CHECK(map, ADJ_ERR_ARG, "%s: map is NULL", who);
  ADJ_CALL(adj_bn_figures(who, 2, (const double *const[]){map->mean, map->slope},
                          (const char *const[]){"mean", "slope"}));
  ADJ_CHECK(!v || map->scale, ADJ_ERR_ARG, "%s: v is given but map->scale is NULL", who);
  adj_team_run(adj_team_size(n * w.c, n * w.c * w.s), n * w.c, adj_bn_planes, &w);
  return ADJ_SUCCESS;
}
