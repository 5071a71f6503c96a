/* A placement applied to a description: the inheritance rules of
 * placement.h, the checks every rank can make from the shapes alone, and
 * the enumeration of uniform placements. */
#include <stdlib.h>
#include <string.h>

#include "adjoin/decomposition.h"
#include "adjoin/phantom_layer.h"
#include "adjoin/placement.h"
#include "description_impl.h"
#include "error_impl.h"

typedef struct place_state {
  const adj_description *d;
  const adj_placement *p;
  int64_t batch;
  adj_network_layout *out;
  const adj_layer_placement *given; /* (n): each layer's own placement, INHERIT when none */
  int cur_ndim, cur[ADJ_DESC_MAX_DIMS + 1]; /* the partition the current activation lives on */
  int previous[ADJ_DESC_KINDS]; /* the last conv, fc and phantom layers; -1 before the first */
} place_state;

static const char *place_source(const place_state *s, const adj_layer_placement *pl) {
  return pl->line && s->p && !s->p->whole && s->p->n ? s->p->source : s->d->source;
}

/* "SOURCE:LINE: layer NAME" for messages about layer i. */
static const char *place_where(const place_state *s, int i, char *buf, size_t size) {
  const adj_desc_layer *l = &s->d->layers[i];
  const adj_layer_placement *pl = &s->out->layers[i].placement;
  int line = pl->line ? pl->line : l->line, from = s->out->layers[i].inherited_from;
  int n = snprintf(buf, size, "%s:%d: layer %s", pl->line ? place_source(s, pl) : s->d->source, line, l->name);
  int from_line = from >= 0 ? s->out->layers[from].placement.line : 0;
  if (from >= 0 && n > 0 && (size_t)n < size && from_line)
    snprintf(buf + n, size - (size_t)n, " (placed as %s, line %d)", s->d->layers[from].name, from_line);
  else if (from >= 0 && n > 0 && (size_t)n < size)
    snprintf(buf + n, size - (size_t)n, " (placed as %s)", s->d->layers[from].name);
  return buf;
}

/* Each layer's own placement: the description's keys (unless the placement
 * says where every layer runs), overridden by the placement's entries. */
static int place_given(place_state *s, adj_layer_placement *given, adj_layer_placement *input) {
  const adj_description *d = s->d;
  bool own = !s->p || !s->p->whole;
  for (int i = 0; i < d->n; i++) given[i] = own ? d->layers[i].placement : (adj_layer_placement){0};
  *input = own ? d->input_placement : (adj_layer_placement){0};
  for (int k = 0; s->p && k < s->p->n; k++) {
    const adj_placement_entry *e = &s->p->entries[k];
    int i = adj_description_find(d, e->layer);
    ADJ_CHECK(i >= 0 || !strcmp(e->layer, "input"), ADJ_ERR_ARG, "%s:%d: network %s has no layer '%s'",
              s->p->source, e->placement.line, d->name, e->layer);
    if (i < 0) *input = e->placement;
    else given[i] = e->placement;
  }
  return ADJ_SUCCESS;
}

/* parts against the layer's input rank, and each split against its extent. */
static int place_check_parts(const place_state *s, int i, const int *parts, int ndim) {
  const adj_desc_layer *l = &s->d->layers[i];
  char where[400];
  ADJ_CHECK(ndim == l->in_rank + 1, ADJ_ERR_ARG,
            "%s: parts has %d entries but the layer's input has %d dimensions (batch first)",
            place_where(s, i, where, sizeof where), ndim, l->in_rank + 1);
  ADJ_CHECK(s->batch <= 0 || parts[0] <= s->batch, ADJ_ERR_ARG, "%s: the batch of %lld is split over %d workers",
            place_where(s, i, where, sizeof where), (long long)s->batch, parts[0]);
  for (int k = 1; k < ndim; k++) {
    /* Every worker holds part of the input; a window layer that shrinks
     * the extent below the split leaves some workers an empty output block,
     * which the operators carry (nothing to send, nothing to compute). */
    int64_t extent = l->in_shape[k - 1];
    ADJ_CHECK(parts[k] <= extent, ADJ_ERR_ARG, "%s: dimension %d of extent %lld is split over %d workers",
              place_where(s, i, where, sizeof where), k, (long long)extent, parts[k]);
  }
  return ADJ_SUCCESS;
}

static adj_layer_placement place_current(const place_state *s) {
  adj_layer_placement pl = {.kind = ADJ_PLACE_PARTS, .ndim = s->cur_ndim, .out_parts = 1};
  memcpy(pl.parts, s->cur, sizeof pl.parts);
  return pl;
}

/* A conv, fc or phantom layer's placement: its own, its kind's previous one,
 * or the current layout. */
static adj_layer_placement place_inherit(place_state *s, int i, bool *explicit_input) {
  adj_desc_kind kind = s->d->layers[i].kind;
  *explicit_input = true;
  if (s->given[i].kind != ADJ_PLACE_INHERIT) return s->given[i];
  int from = s->previous[kind];
  if (from >= 0) {
    adj_layer_placement pl = s->out->layers[from].placement;
    pl.line = 0;
    int origin = s->out->layers[from].inherited_from;
    s->out->layers[i].inherited_from = origin >= 0 ? origin : from;
    return pl;
  }
  *explicit_input = false;
  return place_current(s);
}

static int place_conv(place_state *s, int i, adj_layer_layout *ll) {
  const adj_desc_layer *l = &s->d->layers[i];
  ll->placement = place_inherit(s, i, &ll->explicit_input);
  const adj_layer_placement *pl = &ll->placement;
  char where[400];
  ADJ_CHECK(pl->kind == ADJ_PLACE_PARTS, ADJ_ERR_ARG, "%s: grid= is for fc layers (a conv takes parts= and out_parts=)",
            place_where(s, i, where, sizeof where));
  ADJ_CALL(place_check_parts(s, i, pl->parts, pl->ndim));
  int co = pl->out_parts > 0 ? pl->out_parts : 1;
  ADJ_CHECK(co <= l->out_shape[0], ADJ_ERR_ARG, "%s: out_parts=%d splits %lld output channels",
            place_where(s, i, where, sizeof where), co, (long long)l->out_shape[0]);
  ll->in_ndim = ll->out_ndim = pl->ndim;
  memcpy(ll->in_parts, pl->parts, sizeof ll->in_parts);
  memcpy(ll->out_parts, pl->parts, sizeof ll->out_parts);
  ll->out_parts[1] = co;
  ll->workers = (int)adj_layer_placement_workers(pl);
  return ADJ_SUCCESS;
}

static int place_affine(place_state *s, int i, adj_layer_layout *ll) {
  const adj_desc_layer *l = &s->d->layers[i];
  ll->placement = place_inherit(s, i, &ll->explicit_input);
  const adj_layer_placement *pl = &ll->placement;
  char where[400];
  ll->in_ndim = ll->out_ndim = 2;
  if (pl->kind == ADJ_PLACE_GRID) {
    int r = pl->grid[0], c = pl->grid[1];
    ADJ_CHECK(r <= l->out_shape[0] && r <= l->in_shape[0], ADJ_ERR_ARG,
              "%s: grid=%dx%d puts %d row workers on %lld input and %lld output features",
              place_where(s, i, where, sizeof where), r, c, r, (long long)l->in_shape[0], (long long)l->out_shape[0]);
    ADJ_CHECK(s->batch <= 0 || c <= s->batch, ADJ_ERR_ARG, "%s: grid=%dx%d splits the batch of %lld over %d workers",
              place_where(s, i, where, sizeof where), r, c, (long long)s->batch, c);
    ll->in_parts[0] = ll->out_parts[0] = c;
    ll->in_parts[1] = ll->out_parts[1] = r;
  } else {
    ADJ_CALL(place_check_parts(s, i, pl->parts, pl->ndim));
    int fo = pl->out_parts > 0 ? pl->out_parts : 1;
    ADJ_CHECK(fo <= l->out_shape[0], ADJ_ERR_ARG, "%s: out_parts=%d splits %lld output features",
              place_where(s, i, where, sizeof where), fo, (long long)l->out_shape[0]);
    ll->in_parts[0] = ll->out_parts[0] = pl->parts[0];
    ll->in_parts[1] = pl->parts[1];
    ll->out_parts[1] = fo;
  }
  ll->workers = (int)adj_layer_placement_workers(pl);
  return ADJ_SUCCESS;
}

static int place_phantom(place_state *s, int i, adj_layer_layout *ll) {
  const adj_desc_layer *l = &s->d->layers[i];
  ll->placement = place_inherit(s, i, &ll->explicit_input);
  const adj_layer_placement *pl = &ll->placement;
  char where[400];
  ADJ_CHECK(pl->kind == ADJ_PLACE_PARTS && pl->ndim == 2 && pl->parts[0] == 1 && pl->out_parts <= 1, ADJ_ERR_ARG,
            "%s: a phantom layer runs on parts=1xP (the features over P workers)", place_where(s, i, where, sizeof where));
  ADJ_CALL(place_check_parts(s, i, pl->parts, pl->ndim));
  const adj_desc_phantom *ph = &l->u.phantom;
  int p = pl->parts[1];
  int64_t n = l->in_shape[0] < ph->out_features ? l->in_shape[0] : ph->out_features;
  ADJ_CHECK(p <= n, ADJ_ERR_ARG, "%s: %d workers for %lld features", place_where(s, i, where, sizeof where), p,
            (long long)n);
  ADJ_CHECK(ph->allow_large_k || adj_phantom_k_within_bound(n, p, ph->ghosts), ADJ_ERR_ARG,
            "%s: k=%lld is not below the bound (n/p)(1 - 1/p) of paper 003's eq. 8 for n = %lld on %d workers "
            "(large_k=yes allows it)",
            place_where(s, i, where, sizeof where), (long long)ph->ghosts, (long long)n, p);
  ll->in_ndim = ll->out_ndim = 2;
  memcpy(ll->in_parts, pl->parts, sizeof ll->in_parts);
  memcpy(ll->out_parts, pl->parts, sizeof ll->out_parts);
  ll->workers = p;
  return ADJ_SUCCESS;
}

/* Whether the channel blocks of C over parts, times the trailing volume, are
 * the balanced blocks of the C * trailing features over parts. */
static bool place_channels_flatten_balanced(int64_t channels, int64_t trailing, int parts) {
  if (channels < parts) return false;
  for (int k = 0; k < parts; k++) {
    int64_t c0, cn, f0, fn;
    adj_balanced_block(channels, parts, k, &c0, &cn);
    adj_balanced_block(channels * trailing, parts, k, &f0, &fn);
    if (c0 * trailing != f0 || cn * trailing != fn) return false;
  }
  return true;
}

/* The input partition the layer after a flatten will ask for, when its
 * placement does not depend on the flatten's output; false otherwise. */
static bool place_next_input(place_state *s, int i, int parts[2]) {
  if (i + 1 >= s->d->n) return false;
  adj_desc_kind kind = s->d->layers[i + 1].kind;
  if (kind != ADJ_DESC_AFFINE && kind != ADJ_DESC_PHANTOM) return false;
  int from = s->previous[kind];
  const adj_layer_placement *pl = s->given[i + 1].kind != ADJ_PLACE_INHERIT ? &s->given[i + 1]
                                  : from >= 0                               ? &s->out->layers[from].placement
                                                                            : NULL;
  if (!pl) return false;
  if (pl->kind == ADJ_PLACE_GRID) parts[0] = pl->grid[1], parts[1] = pl->grid[0];
  else parts[0] = pl->parts[0], parts[1] = pl->parts[1];
  return true;
}

static int place_flatten(place_state *s, int i, adj_layer_layout *ll) {
  const adj_desc_layer *l = &s->d->layers[i];
  int ndim = l->in_rank + 1, next[2];
  char where[400];
  ll->placement = s->given[i].kind != ADJ_PLACE_INHERIT ? s->given[i] : place_current(s);
  ll->explicit_input = s->given[i].kind != ADJ_PLACE_INHERIT;
  bool in_place = true;
  for (int k = 2; k < s->cur_ndim; k++) in_place &= s->cur[k] == 1;
  if (!ll->explicit_input && place_next_input(s, i, next)) {
    int64_t trailing = 1;
    for (int k = 1; k < l->in_rank; k++) trailing *= l->in_shape[k];
    bool split = place_channels_flatten_balanced(l->in_shape[0], trailing, next[1]);
    if (split || !in_place) {
      ll->placement = (adj_layer_placement){.kind = ADJ_PLACE_PARTS, .ndim = ndim, .out_parts = 1};
      for (int k = 0; k < ndim; k++) ll->placement.parts[k] = 1;
      ll->placement.parts[0] = next[0];
      ll->placement.parts[1] = split || next[1] <= l->in_shape[0] ? next[1] : (int)l->in_shape[0];
      ll->explicit_input = true;
    }
  } else if (!ll->explicit_input && !in_place) {
    /* Gather the spatial dimensions, keep the batch and channel split. */
    for (int k = 2; k < ndim; k++) ll->placement.parts[k] = 1;
    ll->explicit_input = true;
  }
  const adj_layer_placement *pl = &ll->placement;
  ADJ_CHECK(pl->kind == ADJ_PLACE_PARTS && pl->out_parts <= 1, ADJ_ERR_ARG, "%s: a flatten takes parts= alone",
            place_where(s, i, where, sizeof where));
  ADJ_CALL(place_check_parts(s, i, pl->parts, pl->ndim));
  for (int k = 2; k < pl->ndim; k++)
    ADJ_CHECK(pl->parts[k] == 1, ADJ_ERR_ARG, "%s: a flatten splits only the batch and the channels (parts=BxCx1...)",
              place_where(s, i, where, sizeof where));
  ll->in_ndim = pl->ndim;
  memcpy(ll->in_parts, pl->parts, sizeof ll->in_parts);
  ll->out_ndim = 2;
  ll->out_parts[0] = pl->parts[0], ll->out_parts[1] = pl->parts[1];
  ll->workers = (int)adj_layer_placement_workers(pl);
  return ADJ_SUCCESS;
}

/* Pool, activation, batch norm, upsample, pad and losses: their own
 * placement, else the layout their input arrives in. */
static int place_other(place_state *s, int i, adj_layer_layout *ll) {
  const adj_desc_layer *l = &s->d->layers[i];
  char where[400];
  ll->explicit_input = s->given[i].kind != ADJ_PLACE_INHERIT;
  ll->placement = ll->explicit_input ? s->given[i] : place_current(s);
  const adj_layer_placement *pl = &ll->placement;
  ADJ_CHECK(pl->kind == ADJ_PLACE_PARTS, ADJ_ERR_ARG, "%s: grid= is for fc layers", place_where(s, i, where, sizeof where));
  ADJ_CHECK(pl->out_parts <= 1, ADJ_ERR_ARG, "%s: out_parts= is for conv and fc layers",
            place_where(s, i, where, sizeof where));
  ADJ_CALL(place_check_parts(s, i, pl->parts, pl->ndim));
  bool classes = l->kind == ADJ_DESC_LOSS && l->u.loss.kind == ADJ_LOSS_NLL && l->u.loss.reduction == ADJ_LOSS_NONE;
  ADJ_CHECK(!classes || pl->parts[1] == 1, ADJ_ERR_ARG, "%s: nll with reduction=none needs the classes unsplit",
            place_where(s, i, where, sizeof where));
  ll->in_ndim = ll->out_ndim = pl->ndim;
  memcpy(ll->in_parts, pl->parts, sizeof ll->in_parts);
  memcpy(ll->out_parts, pl->parts, sizeof ll->out_parts);
  ll->workers = (int)adj_layer_placement_workers(pl);
  return ADJ_SUCCESS;
}

static int place_layer(place_state *s, int i) {
  adj_layer_layout *ll = &s->out->layers[i];
  adj_desc_kind kind = s->d->layers[i].kind;
  switch (kind) {
  case ADJ_DESC_CONV: ADJ_CALL(place_conv(s, i, ll)); break;
  case ADJ_DESC_AFFINE: ADJ_CALL(place_affine(s, i, ll)); break;
  case ADJ_DESC_PHANTOM: ADJ_CALL(place_phantom(s, i, ll)); break;
  case ADJ_DESC_FLATTEN: ADJ_CALL(place_flatten(s, i, ll)); break;
  default: ADJ_CALL(place_other(s, i, ll)); break;
  }
  if (kind == ADJ_DESC_CONV || kind == ADJ_DESC_AFFINE || kind == ADJ_DESC_PHANTOM) s->previous[kind] = i;
  char where[400];
  ADJ_CHECK(ll->workers <= ADJ_PLACE_MAX_WORKERS, ADJ_ERR_ARG, "%s: the placement needs %d workers (at most %d)",
            place_where(s, i, where, sizeof where), ll->workers, ADJ_PLACE_MAX_WORKERS);
  s->cur_ndim = ll->out_ndim;
  memcpy(s->cur, ll->out_parts, sizeof s->cur);
  if (ll->workers > s->out->ranks) s->out->ranks = ll->workers;
  return ADJ_SUCCESS;
}

static int place_input(place_state *s, const adj_layer_placement *input) {
  const adj_description *d = s->d;
  adj_network_layout *out = s->out;
  out->input_ndim = d->input_rank + 1;
  for (int k = 0; k < out->input_ndim; k++) out->input_parts[k] = 1;
  if (input->kind != ADJ_PLACE_INHERIT) {
    ADJ_CHECK(input->kind == ADJ_PLACE_PARTS && input->ndim == out->input_ndim, ADJ_ERR_ARG,
              "%s:%d: the input's parts= needs %d entries (batch first)", place_source(s, input), input->line,
              out->input_ndim);
    for (int k = 0; k < out->input_ndim; k++) {
      int64_t extent = k ? d->input_shape[k - 1] : s->batch;
      ADJ_CHECK(extent <= 0 || input->parts[k] <= extent, ADJ_ERR_ARG,
                "%s:%d: the input's dimension %d of extent %lld is split over %d workers", place_source(s, input),
                input->line, k, (long long)extent, input->parts[k]);
      out->input_parts[k] = input->parts[k];
    }
  }
  s->cur_ndim = out->input_ndim;
  memcpy(s->cur, out->input_parts, sizeof s->cur);
  out->ranks = (int)adj_layer_placement_workers(input);
  return ADJ_SUCCESS;
}

int adj_placement_resolve(const adj_description *d, const adj_placement *p, int64_t batch, adj_network_layout *out) {
  ADJ_CHECK(d && out, ADJ_ERR_ARG, "adj_placement_resolve: description or layout is NULL");
  *out = (adj_network_layout){.n = d->n};
  out->layers = calloc((size_t)d->n, sizeof *out->layers);
  adj_layer_placement *given = calloc((size_t)d->n, sizeof *given), input;
  int status = out->layers && given ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "placement: out of memory");
  place_state s = {.d = d, .p = p, .batch = batch, .out = out, .given = given};
  for (int k = 0; k < ADJ_DESC_KINDS; k++) s.previous[k] = -1;
  for (int i = 0; out->layers && i < d->n; i++) out->layers[i].inherited_from = -1;
  if (!status) status = place_given(&s, given, &input);
  if (!status) status = place_input(&s, &input);
  for (int i = 0; !status && i < d->n; i++) status = place_layer(&s, i);
  if (!status && p && p->ranks)
    status = p->ranks == out->ranks ? ADJ_SUCCESS
                                    : adj_error_set(ADJ_ERR_ARG, "%s: ranks %d, but its layers use %d ranks", p->source,
                                                    p->ranks, out->ranks);
  out->replicas = p && p->replicas ? p->replicas : d->replicas ? d->replicas : 1;
  free(given);
  if (status) adj_network_layout_free(out);
  return status;
}

void adj_network_layout_free(adj_network_layout *layout) {
  if (!layout) return;
  free(layout->layers);
  *layout = (adj_network_layout){0};
}

/* ---- enumeration --------------------------------------------------------------------------- */

/* Every ordered factorisation of n into `slots` factors, appended to
 * out[count][slots] (NULL out: only counted). */
static int place_factorisations(int n, int slots, int *prefix, int depth, int (*out)[ADJ_DESC_MAX_DIMS + 1], int count) {
  if (depth > ADJ_DESC_MAX_DIMS) return count;
  if (depth == slots - 1) {
    if (out) {
      memcpy(out[count], prefix, sizeof(int) * (size_t)depth);
      out[count][depth] = n;
    }
    return count + 1;
  }
  for (int f = 1; f <= n; f++)
    if (n % f == 0) {
      prefix[depth] = f;
      count = place_factorisations(n / f, slots, prefix, depth + 1, out, count);
    }
  return count;
}

typedef struct place_family {
  int count;
  int (*options)[ADJ_DESC_MAX_DIMS + 1];
} place_family;

static int place_family_create(int ranks, int slots, place_family *f) {
  int prefix[ADJ_DESC_MAX_DIMS + 1];
  f->count = slots ? place_factorisations(ranks, slots, prefix, 0, NULL, 0) : 0;
  f->options = calloc((size_t)f->count + 1, sizeof *f->options);
  ADJ_CHECK(f->options, ADJ_ERR_MEM, "placement enumeration: out of memory");
  if (slots) place_factorisations(ranks, slots, prefix, 0, f->options, 0);
  return ADJ_SUCCESS;
}

/* Appends u when it resolves. */
static int place_try(const adj_description *d, int64_t batch, const adj_uniform_placement *u,
                     adj_uniform_placement **list, int *count, int *capacity) {
  adj_placement *p = NULL;
  adj_network_layout layout;
  if (adj_placement_uniform(d, u, &p) || adj_placement_resolve(d, p, batch, &layout)) {
    adj_placement_destroy(&p);
    adj_clear_error();
    return ADJ_SUCCESS;
  }
  adj_network_layout_free(&layout);
  adj_placement_destroy(&p);
  if (*count == *capacity) {
    int cap = *capacity ? 2 * *capacity : 64;
    adj_uniform_placement *grown = realloc(*list, sizeof *grown * (size_t)cap);
    ADJ_CHECK(grown, ADJ_ERR_MEM, "placement enumeration: out of memory");
    *list = grown, *capacity = cap;
  }
  (*list)[(*count)++] = *u;
  return ADJ_SUCCESS;
}

/* The fc placements of `ranks`: option 0 sequential, then every grid, then
 * every P_b x P_fo x P_fi. */
static int place_fc_options(const place_family *grids, const place_family *distdl, int k, adj_layer_placement *fc) {
  if (k == 0) return *fc = (adj_layer_placement){0}, ADJ_SUCCESS;
  if (--k < grids->count)
    return *fc = (adj_layer_placement){.kind = ADJ_PLACE_GRID, .grid = {grids->options[k][0], grids->options[k][1]}},
           ADJ_SUCCESS;
  const int *f = distdl->options[k - grids->count];
  *fc = (adj_layer_placement){.kind = ADJ_PLACE_PARTS, .ndim = 2, .parts = {f[0], f[2]}, .out_parts = f[1]};
  return ADJ_SUCCESS;
}

int adj_placement_enumerate(const adj_description *d, int ranks, int64_t batch, adj_uniform_placement **list,
                            int *count) {
  ADJ_CHECK(d && list && count && ranks >= 1 && ranks <= ADJ_PLACE_MAX_PARTS, ADJ_ERR_ARG,
            "adj_placement_enumerate: bad arguments (ranks %d)", ranks);
  *list = NULL, *count = 0;
  bool has_fc = false, has_phantom = false;
  for (int i = 0; i < d->n; i++) has_fc |= d->layers[i].kind == ADJ_DESC_AFFINE, has_phantom |= d->layers[i].kind == ADJ_DESC_PHANTOM;
  int window_ndim = place_window_ndim(d), capacity = 0, status = ADJ_SUCCESS;
  place_family window = {0}, grids = {0}, distdl = {0};
  status = place_family_create(ranks, window_ndim, &window);
  if (!status) status = place_family_create(ranks, has_fc ? 2 : 0, &grids);
  if (!status) status = place_family_create(ranks, has_fc ? 3 : 0, &distdl);
  int n_fc = has_fc ? 1 + grids.count + distdl.count : 1;
  for (int w = 0; !status && w <= window.count; w++)
    for (int f = 0; !status && f < n_fc; f++)
      for (int ph = 0; !status && ph <= (has_phantom ? 1 : 0); ph++) {
        if (ranks > 1 && w == 0 && f == 0 && ph == 0) continue;
        if (ranks == 1 && (w || f || ph)) continue;
        adj_uniform_placement u = {.phantom = ph ? ranks : 0};
        if (w) u.window_ndim = window_ndim, memcpy(u.window, window.options[w - 1], sizeof u.window);
        place_fc_options(&grids, &distdl, f, &u.fc);
        status = place_try(d, batch, &u, list, count, &capacity);
      }
  free(window.options), free(grids.options), free(distdl.options);
  if (status) adj_uniform_placement_list_free(list), *count = 0;
  return status;
}

void adj_uniform_placement_list_free(adj_uniform_placement **list) {
  if (!list) return;
  free(*list);
  *list = NULL;
}
