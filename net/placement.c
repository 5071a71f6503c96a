/* Placement files, named placements and uniform placements (placement.h,
 * docs/placement.md).  Resolution and enumeration are in placement_resolve.c. */
#include "adjoin/placement.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/agree.h"
#include "adjoin/parse.h"
#include "description_impl.h"
#include "error_impl.h"

/* ---- placement files ------------------------------------------------------------------------ */

typedef struct place_parser {
  desc_parser base; /* source, line, options and the option readers */
  adj_placement *placement;
  int capacity;
  bool have_name;
} place_parser;

static int place_add(place_parser *q, const char *layer, const adj_layer_placement *pl) {
  adj_placement *p = q->placement;
  for (int i = 0; i < p->n; i++)
    ADJ_CHECK(strcmp(p->entries[i].layer, layer), ADJ_ERR_ARG, "%s:%d: '%s' is placed twice (first on line %d)",
              q->base.source, q->base.line, layer, p->entries[i].placement.line);
  ADJ_CHECK(p->n < ADJ_DESC_MAX_LAYERS + 1, ADJ_ERR_ARG, "%s:%d: more than %d entries", q->base.source, q->base.line,
            ADJ_DESC_MAX_LAYERS + 1);
  if (p->n == q->capacity) {
    int cap = q->capacity ? 2 * q->capacity : 16;
    adj_placement_entry *grown = realloc(p->entries, sizeof *grown * (size_t)cap);
    ADJ_CHECK(grown, ADJ_ERR_MEM, "%s: out of memory", q->base.source);
    p->entries = grown, q->capacity = cap;
  }
  adj_placement_entry *e = &p->entries[p->n++];
  *e = (adj_placement_entry){.placement = *pl};
  snprintf(e->layer, sizeof e->layer, "%s", layer);
  return ADJ_SUCCESS;
}

/* `ranks N` and `replicas R`. */
static int place_count(place_parser *q, const char *key, char **words, int count, int *out) {
  desc_parser *p = &q->base;
  ADJ_CHECK(count == 1, ADJ_ERR_ARG, "%s:%d: %s needs one count (got %d words)", p->source, p->line, key, count);
  char what[320];
  snprintf(what, sizeof what, "%s:%d: %s", p->source, p->line, key);
  return adj_parse_int(words[0], 1, ADJ_PLACE_MAX_WORKERS, what, out);
}

static int place_line(place_parser *q, char *line) {
  desc_parser *p = &q->base;
  char *hash = strchr(line, '#');
  if (hash) *hash = '\0';
  char *words[DESC_MAX_WORDS];
  int count = 0;
  char *save = NULL;
  for (char *w = strtok_r(line, " \t\r\v\f", &save); w; w = strtok_r(NULL, " \t\r\v\f", &save)) {
    ADJ_CHECK(count < DESC_MAX_WORDS, ADJ_ERR_ARG, "%s:%d: more than %d words on one line", p->source, p->line,
              DESC_MAX_WORDS);
    words[count++] = w;
  }
  if (count == 0) return ADJ_SUCCESS;
  if (!strcmp(words[0], "ranks")) return place_count(q, "ranks", words + 1, count - 1, &q->placement->ranks);
  if (!strcmp(words[0], "replicas")) return place_count(q, "replicas", words + 1, count - 1, &q->placement->replicas);
  if (!strcmp(words[0], "placement")) {
    ADJ_CHECK(count == 2 && !q->have_name && strlen(words[1]) < ADJ_DESC_NAME_SIZE, ADJ_ERR_ARG,
              "%s:%d: placement needs one name of at most %d characters, once", p->source, p->line,
              ADJ_DESC_NAME_SIZE - 1);
    snprintf(q->placement->name, sizeof q->placement->name, "%s", words[1]);
    q->have_name = true;
    return ADJ_SUCCESS;
  }
  ADJ_CHECK(strlen(words[0]) < ADJ_DESC_NAME_SIZE && !strchr(words[0], '='), ADJ_ERR_ARG,
            "%s:%d: '%.40s' is not a layer name (a line is: LAYER parts=... [out_parts=...] or LAYER grid=RxC)",
            p->source, p->line, words[0]);
  snprintf(p->what, sizeof p->what, "%s", words[0]);
  ADJ_CALL(desc_split_options(p, words + 1, count - 1));
  adj_layer_placement pl = {0};
  ADJ_CALL(desc_placement_options(p, -1, true, true, &pl));
  ADJ_CALL(desc_refuse_leftover(p, "parts, out_parts, grid"));
  ADJ_CHECK(pl.kind != ADJ_PLACE_INHERIT, ADJ_ERR_ARG, "%s:%d: %s: no parts= or grid=", p->source, p->line, p->what);
  return place_add(q, words[0], &pl);
}

int adj_placement_parse(const char *text, const char *source, adj_placement **out) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_placement_parse: output pointer is NULL");
  *out = NULL;
  ADJ_CHECK(text, ADJ_ERR_ARG, "adj_placement_parse: text is NULL");
  place_parser q = {.base = {.source = source ? source : "placement"}};
  q.placement = calloc(1, sizeof *q.placement);
  char *copy = strdup(text);
  int status = q.placement && copy ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", q.base.source);
  if (!status) snprintf(q.placement->source, sizeof q.placement->source, "%s", q.base.source);
  for (char *line = copy, *next; !status && line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    q.base.line++;
    status = place_line(&q, line);
  }
  if (!status && !q.have_name) snprintf(q.placement->name, sizeof q.placement->name, "%.*s", ADJ_DESC_NAME_SIZE - 1, q.base.source);
  free(copy);
  if (status) adj_placement_destroy(&q.placement);
  *out = q.placement;
  return status;
}

int adj_placement_read(const char *path, adj_placement **out) {
  ADJ_CHECK(out && path, ADJ_ERR_ARG, "adj_placement_read: path or output pointer is NULL");
  *out = NULL;
  char *text = NULL;
  int status = desc_read_text(path, "placement", &text);
  if (!status) status = adj_placement_parse(text, path, out);
  free(text);
  return status;
}

void adj_placement_destroy(adj_placement **p) {
  if (!p || !*p) return;
  free((*p)->entries);
  free(*p);
  *p = NULL;
}

/* ---- uniform placements ---------------------------------------------------------------------- */

bool place_window_layer(const adj_description *d, int i) {
  for (int j = 0; j <= i; j++)
    if (d->layers[j].kind == ADJ_DESC_AFFINE || d->layers[j].kind == ADJ_DESC_PHANTOM) return false;
  adj_desc_kind k = d->layers[i].kind;
  return k != ADJ_DESC_FLATTEN && k != ADJ_DESC_LOSS && k != ADJ_DESC_XENT;
}

static adj_layer_placement place_parts(int ndim, const int *parts, int out_parts) {
  adj_layer_placement pl = {.kind = ADJ_PLACE_PARTS, .ndim = ndim, .out_parts = out_parts};
  for (int i = 0; i < ndim; i++) pl.parts[i] = parts[i] > 0 ? parts[i] : 1;
  return pl;
}

/* The entry a uniform placement gives layer i, if any. */
static bool place_uniform_entry(const adj_description *d, const adj_uniform_placement *u, int i, bool first_window,
                                adj_layer_placement *pl) {
  const adj_desc_layer *l = &d->layers[i];
  static const int ones[ADJ_DESC_MAX_DIMS + 1] = {1, 1, 1, 1, 1};
  if (l->kind == ADJ_DESC_AFFINE) {
    *pl = u->fc.kind == ADJ_PLACE_INHERIT ? place_parts(2, ones, 1) : u->fc;
    return true;
  }
  if (l->kind == ADJ_DESC_PHANTOM) {
    *pl = place_parts(2, (const int[2]){1, u->phantom > 0 ? u->phantom : 1}, 0);
    return true;
  }
  if (!place_window_layer(d, i) || (l->kind != ADJ_DESC_CONV && !first_window)) return false;
  *pl = place_parts(l->in_rank + 1, u->window_ndim ? u->window : ones, 1);
  return true;
}

int adj_placement_uniform(const adj_description *d, const adj_uniform_placement *u, adj_placement **out) {
  ADJ_CHECK(out && d && u, ADJ_ERR_ARG, "adj_placement_uniform: description, uniform placement or output is NULL");
  *out = NULL;
  for (int i = 0; u->window_ndim && i < d->n; i++)
    ADJ_CHECK(!place_window_layer(d, i) || d->layers[i].in_rank + 1 == u->window_ndim, ADJ_ERR_ARG,
              "placement: window=... has %d entries but layer %s of %s takes %d dimensions (batch first)",
              u->window_ndim, d->layers[i].name, d->name, d->layers[i].in_rank + 1);
  place_parser q = {.base = {.source = "uniform placement"}};
  q.placement = calloc(1, sizeof *q.placement);
  ADJ_CHECK(q.placement, ADJ_ERR_MEM, "placement: out of memory");
  adj_uniform_placement_format(u, q.placement->name, sizeof q.placement->name);
  snprintf(q.placement->source, sizeof q.placement->source, "placement %s", q.placement->name);
  q.placement->replicas = u->replicas;
  q.placement->whole = true;
  int status = ADJ_SUCCESS;
  for (int i = 0; !status && i < d->n; i++) {
    adj_layer_placement pl;
    if (place_uniform_entry(d, u, i, i == 0, &pl)) status = place_add(&q, d->layers[i].name, &pl);
  }
  if (status) adj_placement_destroy(&q.placement);
  *out = q.placement;
  return status;
}

const char *adj_uniform_placement_format(const adj_uniform_placement *u, char *buf, size_t size) {
  char items[4][96];
  int n = 0;
  if (u->window_ndim) {
    size_t used = (size_t)snprintf(items[n], sizeof items[n], "window=");
    for (int i = 0; i < u->window_ndim && used < sizeof items[n]; i++)
      used += (size_t)snprintf(items[n] + used, sizeof items[n] - used, "%s%d", i ? "x" : "", u->window[i]);
    n++;
  }
  if (u->fc.kind == ADJ_PLACE_GRID) snprintf(items[n++], sizeof items[0], "fc=grid:%dx%d", u->fc.grid[0], u->fc.grid[1]);
  else if (u->fc.kind == ADJ_PLACE_PARTS)
    snprintf(items[n++], sizeof items[0], "fc=%dx%dx%d", u->fc.parts[0], u->fc.out_parts > 0 ? u->fc.out_parts : 1,
             u->fc.parts[1]);
  if (u->phantom > 1) snprintf(items[n++], sizeof items[0], "phantom=%d", u->phantom);
  if (u->replicas > 1) snprintf(items[n++], sizeof items[0], "replicas=%d", u->replicas);
  size_t used = (size_t)snprintf(buf, size, "%s", n ? "" : "sequential");
  for (int i = 0; i < n && used < size; i++) used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "," : "", items[i]);
  return buf;
}

/* ---- named placements --------------------------------------------------------------------- */

/* "AxBx...": 1..max entries, each 1..ADJ_PLACE_MAX_PARTS. */
static int place_factors(const char *spec, const char *text, int max, int *out, int *count) {
  char what[160];
  snprintf(what, sizeof what, "placement '%.80s'", spec);
  *count = 0;
  for (const char *s = text;;) {
    const char *x = strchr(s, 'x');
    char item[24];
    size_t len = x ? (size_t)(x - s) : strlen(s);
    ADJ_CHECK(*count < max && len < sizeof item, ADJ_ERR_ARG, "%s: '%.40s' has more than %d entries", what, text, max);
    memcpy(item, s, len);
    item[len] = '\0';
    ADJ_CALL(adj_parse_int(item, 1, ADJ_PLACE_MAX_PARTS, what, &out[(*count)++]));
    if (!x) return ADJ_SUCCESS;
    s = x + 1;
  }
}

/* One item of a uniform placement's name: window=, fc=, phantom=, replicas=. */
static int place_uniform_item(const char *spec, char *item, adj_uniform_placement *u) {
  char *eq = strchr(item, '=');
  ADJ_CHECK(eq, ADJ_ERR_ARG, "placement '%.80s': '%.40s' is not key=value (window, fc, phantom, replicas)", spec, item);
  *eq = '\0';
  const char *v = eq + 1;
  int f[ADJ_DESC_MAX_DIMS + 1], n = 0;
  if (!strcmp(item, "window")) {
    ADJ_CALL(place_factors(spec, v, ADJ_DESC_MAX_DIMS + 1, u->window, &u->window_ndim));
  } else if (!strcmp(item, "fc") && !strncmp(v, "grid:", 5)) {
    ADJ_CALL(place_factors(spec, v + 5, 2, f, &n));
    ADJ_CHECK(n == 2, ADJ_ERR_ARG, "placement '%.80s': fc=grid:RxC needs two entries", spec);
    u->fc = (adj_layer_placement){.kind = ADJ_PLACE_GRID, .grid = {f[0], f[1]}};
  } else if (!strcmp(item, "fc")) {
    ADJ_CALL(place_factors(spec, v, 3, f, &n));
    ADJ_CHECK(n == 3, ADJ_ERR_ARG, "placement '%.80s': fc=BxOxI needs P_b x P_fo x P_fi (or fc=grid:RxC)", spec);
    u->fc = (adj_layer_placement){.kind = ADJ_PLACE_PARTS, .ndim = 2, .parts = {f[0], f[2]}, .out_parts = f[1]};
  } else if (!strcmp(item, "phantom") || !strcmp(item, "replicas")) {
    ADJ_CALL(place_factors(spec, v, 1, f, &n));
    *(!strcmp(item, "phantom") ? &u->phantom : &u->replicas) = f[0];
  } else {
    return adj_error_set(ADJ_ERR_ARG, "placement '%.80s': unknown item '%.40s' (window, fc, phantom, replicas)", spec,
                         item);
  }
  return ADJ_SUCCESS;
}

int place_window_ndim(const adj_description *d) {
  for (int i = 0; i < d->n; i++)
    if (place_window_layer(d, i)) return d->layers[i].in_rank + 1;
  return 0;
}

/* Whether a name has a grid's shape: digits, 'x', digits. */
static bool place_looks_like_grid(const char *name) {
  size_t a = strspn(name, "0123456789"), b = a && name[a] == 'x' ? strspn(name + a + 1, "0123456789") : 0;
  return b && !name[a + 1 + b];
}

/* "RxC": the grid layout of the integrated model, batch and domain papers;
 * R and C each 1..ADJ_PLACE_MAX_PARTS (parse.h: "4294967297x1" is refused,
 * never read as 1x1). */
static int place_grid_name(const adj_description *d, const char *name, adj_uniform_placement *u) {
  int64_t grid[2];
  ADJ_CALL(adj_parse_int64_pair(name, 'x', 1, ADJ_PLACE_MAX_PARTS, "placement", grid));
  int rows = (int)grid[0], cols = (int)grid[1];
  *u = (adj_uniform_placement){.fc = {.kind = ADJ_PLACE_GRID, .grid = {rows, cols}}, .phantom = rows * cols};
  u->window_ndim = place_window_ndim(d);
  for (int i = 0; i < u->window_ndim; i++) u->window[i] = 1;
  if (u->window_ndim) u->window[0] = cols;
  if (u->window_ndim >= 3) u->window[2] = rows;
  else if (u->window_ndim == 2) u->window[1] = rows;
  return ADJ_SUCCESS;
}

static int place_scheme(const adj_description *d, const char *name, adj_placement **out) {
  adj_uniform_placement u = {0};
  if (place_looks_like_grid(name)) ADJ_CALL(place_grid_name(d, name, &u));
  else if (strcmp(name, "sequential")) {
    ADJ_CHECK(strchr(name, '='), ADJ_ERR_ARG,
              "placement '%.80s' of %s: no such file, no %s placement of that name, and not sequential, RxC or a "
              "uniform placement (window=...,fc=...)",
              name, d->source, d->name);
    char copy[512];
    ADJ_CHECK(strlen(name) < sizeof copy, ADJ_ERR_ARG, "placement name of %zu characters is too long", strlen(name));
    strcpy(copy, name);
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save))
      ADJ_CALL(place_uniform_item(name, item, &u));
  }
  ADJ_CALL(adj_placement_uniform(d, &u, out));
  snprintf((*out)->name, sizeof (*out)->name, "%.*s", ADJ_DESC_NAME_SIZE - 1, name);
  return ADJ_SUCCESS;
}

/* The length of a network file's path without its extension: the
 * directory of its shipped placements. */
static int place_stem(const char *network_path) {
  const char *dot = strrchr(network_path, '.'), *slash = strrchr(network_path, '/');
  return dot && (!slash || dot > slash) ? (int)(dot - network_path) : (int)strlen(network_path);
}

/* The file a name means, decided on rank 0: the name itself when it is a
 * readable path, else the shipped <dir>/<network>/NAME.place; "" when
 * neither (a scheme). */
static void place_file_of(const char *network_path, const char *name, char *path, size_t size) {
  path[0] = '\0';
  if (strchr(name, '/') || access(name, R_OK) == 0) {
    snprintf(path, size, "%s", name);
    return;
  }
  if (!network_path || strchr(name, '=')) return;
  char candidate[1024];
  snprintf(candidate, sizeof candidate, "%.*s/%s.place", place_stem(network_path), network_path, name);
  if (access(candidate, R_OK) == 0) snprintf(path, size, "%s", candidate);
}

const char *adj_placement_names(const char *network_path, const char *separator, char *buf, size_t size) {
  if (size) buf[0] = '\0';
  if (!network_path || !size) return buf;
  char dir[1024];
  snprintf(dir, sizeof dir, "%.*s", place_stem(network_path), network_path);
  struct dirent **names = NULL;
  int n = scandir(dir, &names, NULL, alphasort);
  for (int i = 0; i < n; i++) {
    size_t len = strlen(names[i]->d_name), used = strlen(buf);
    if (len > 6 && !strcmp(names[i]->d_name + len - 6, ".place") && used + len - 6 + strlen(separator) < size)
      snprintf(buf + used, size - used, "%.*s%s", (int)len - 6, names[i]->d_name, separator);
    free(names[i]);
  }
  free(names);
  return buf;
}

int adj_placement_find(MPI_Comm comm, const adj_description *d, const char *network_path, const char *name,
                       adj_placement **out) {
  ADJ_CHECK(out && d, ADJ_ERR_ARG, "adj_placement_find: description or output pointer is NULL");
  *out = NULL;
  if (!name || !name[0]) {
    *out = calloc(1, sizeof **out);
    ADJ_CHECK(*out, ADJ_ERR_MEM, "placement: out of memory");
    snprintf((*out)->name, sizeof (*out)->name, "%s", "own");
    snprintf((*out)->source, sizeof (*out)->source, "%s", d->source);
    return ADJ_SUCCESS;
  }
  int rank;
  ADJ_CALL_MPI(MPI_Comm_rank(comm, &rank));
  char path[1024] = "";
  if (rank == 0) place_file_of(network_path, name, path, sizeof path);
  adj_wait_policy wait;
  ADJ_CALL(adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &wait));
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Ibcast(path, (int)sizeof path, MPI_CHAR, 0, comm, &r));
  ADJ_CALL(adj_wait_all(1, &r, wait));
  if (!path[0]) return place_scheme(d, name, out);
  char *text;
  ADJ_CALL(desc_share_text(comm, path, "placement", &text));
  int status = adj_placement_parse(text, path, out);
  free(text);
  return status;
}
