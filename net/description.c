/* Network descriptions: the `.net` parser (include/adjoin/description.h,
 * docs/network-format.md).
 *
 * One line at a time: the line is cut into words, the first names what the
 * line is (network, input, replicas, or a layer keyword), a layer's next word
 * is its name unless it holds '=', and the rest are key=value options.  Each
 * layer kind's reader takes the options it knows (desc_take); any left over
 * is refused with the list of the kind's keys.  The current per-sample shape
 * runs through the file: each layer checks its input against its options and
 * sets its output, so a shape that does not chain is refused at the line
 * that breaks it. */
#include "adjoin/description.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/file.h"
#include "adjoin/parse.h"
#include "description_impl.h"
#include "error_impl.h"

/* Bounds of what a description may say: generous for real networks, small
 * enough that no product of them overflows int64 unchecked. */
#define DESC_MAX_EXTENT ((int64_t)1 << 31)
#define DESC_MAX_WINDOW ((int64_t)1 << 20)

/* ---- words and options ------------------------------------------------------------------- */

/* Cuts a line (comment removed) into at most DESC_MAX_WORDS words in place. */
static int desc_words(desc_parser *p, char *line, char **words, int *count) {
  char *hash = strchr(line, '#');
  if (hash) *hash = '\0';
  *count = 0;
  char *save = NULL;
  for (char *w = strtok_r(line, " \t\r\v\f", &save); w; w = strtok_r(NULL, " \t\r\v\f", &save)) {
    ADJ_CHECK(*count < DESC_MAX_WORDS, ADJ_ERR_ARG, "%s:%d: more than %d words on one line", p->source, p->line,
              DESC_MAX_WORDS);
    words[(*count)++] = w;
  }
  return ADJ_SUCCESS;
}

/* Splits key=value words into p->options (refusing a word without '=' and a
 * key given twice). */
int desc_split_options(desc_parser *p, char **words, int count) {
  p->n_options = 0;
  for (int i = 0; i < count; i++) {
    char *eq = strchr(words[i], '=');
    ADJ_CHECK(eq && eq != words[i], ADJ_ERR_ARG, "%s:%d: %s: option '%.40s' is not key=value", p->source, p->line,
              p->what, words[i]);
    *eq = '\0';
    for (int j = 0; j < p->n_options; j++)
      ADJ_CHECK(strcmp(p->options[j].key, words[i]), ADJ_ERR_ARG, "%s:%d: %s: option '%s' given twice", p->source,
                p->line, p->what, words[i]);
    p->options[p->n_options++] = (desc_option){.key = words[i], .value = eq + 1};
  }
  return ADJ_SUCCESS;
}

bool desc_given(const desc_parser *p, const char *key) {
  for (int i = 0; i < p->n_options; i++)
    if (!strcmp(p->options[i].key, key)) return true;
  return false;
}

const char *desc_take(desc_parser *p, const char *key) {
  for (int i = 0; i < p->n_options; i++)
    if (!p->options[i].used && !strcmp(p->options[i].key, key)) {
      p->options[i].used = true;
      return p->options[i].value;
    }
  return NULL;
}

/* "SOURCE:LINE: WHAT KEY", what the checked numbers of parse.h name. */
static const char *desc_what(desc_parser *p, const char *key) {
  snprintf(p->what_key, sizeof p->what_key, "%s:%d: %s %s", p->source, p->line, p->what, key);
  return p->what_key;
}

int desc_int(desc_parser *p, const char *key, int64_t min, int64_t max, int64_t *out) {
  const char *v = desc_take(p, key);
  return v ? adj_parse_int64(v, min, max, desc_what(p, key), out) : ADJ_SUCCESS;
}

int desc_real(desc_parser *p, const char *key, double min, double max, double *out) {
  const char *v = desc_take(p, key);
  return v ? adj_parse_real(v, min, max, desc_what(p, key), out) : ADJ_SUCCESS;
}

int desc_choice(desc_parser *p, const char *key, const char *const *names, int n, int *out) {
  const char *v = desc_take(p, key);
  if (!v) return ADJ_SUCCESS;
  for (int i = 0; i < n; i++)
    if (!strcmp(v, names[i])) return *out = i, ADJ_SUCCESS;
  char list[160] = "";
  for (int i = 0; i < n; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
  return adj_error_set(ADJ_ERR_ARG, "%s '%.40s' is not one of %s", desc_what(p, key), v, list);
}

int desc_bool(desc_parser *p, const char *key, bool *out) {
  int v = *out ? 1 : 0;
  ADJ_CALL(desc_choice(p, key, (const char *const[]){"no", "yes"}, 2, &v));
  *out = v == 1;
  return ADJ_SUCCESS;
}

/* "AxBxC": 1..max_count entries separated by 'x', each cut by its own parser
 * (int64 within [min, max], or "a:b" for padding); `count` gets how many. */
static int desc_list(desc_parser *p, const char *key, const char *text, int max_count, char items[][40],
                     int *count) {
  *count = 0;
  const char *s = text;
  for (;;) {
    const char *x = strchr(s, 'x');
    size_t len = x ? (size_t)(x - s) : strlen(s);
    ADJ_CHECK(*count < max_count && len < 40, ADJ_ERR_ARG, "%s '%.40s' has more than %d entries (or an entry too long)",
              desc_what(p, key), text, max_count);
    memcpy(items[*count], s, len);
    items[(*count)++][len] = '\0';
    if (!x) return ADJ_SUCCESS;
    s = x + 1;
  }
}

/* Option `key`'s list, one entry per dimension: *given is false when the
 * option is absent; one entry stands for every dimension. */
typedef struct desc_items {
  char item[ADJ_DESC_MAX_DIMS + 1][40];
  int n;
  bool given;
} desc_items;

static int desc_take_list(desc_parser *p, const char *key, int want, desc_items *it) {
  const char *v = desc_take(p, key);
  it->given = v != NULL, it->n = 0;
  if (!v) return ADJ_SUCCESS;
  ADJ_CALL(desc_list(p, key, v, ADJ_DESC_MAX_DIMS + 1, it->item, &it->n));
  ADJ_CHECK(it->n == 1 || it->n == want, ADJ_ERR_ARG, "%s '%.40s' has %d entries; give 1 or %d", desc_what(p, key), v,
            it->n, want);
  return ADJ_SUCCESS;
}

/* The entry of dimension i. */
static char *desc_item(desc_items *it, int i) { return it->item[it->n == 1 ? 0 : i]; }

int desc_ints(desc_parser *p, const char *key, int want, int64_t min, int64_t max, int64_t *out) {
  desc_items it;
  ADJ_CALL(desc_take_list(p, key, want, &it));
  for (int i = 0; it.given && i < want; i++) ADJ_CALL(adj_parse_int64(desc_item(&it, i), min, max, desc_what(p, key), &out[i]));
  return ADJ_SUCCESS;
}

int desc_reals(desc_parser *p, const char *key, int want, double min, double max, double *out) {
  desc_items it;
  ADJ_CALL(desc_take_list(p, key, want, &it));
  for (int i = 0; it.given && i < want; i++) ADJ_CALL(adj_parse_real(desc_item(&it, i), min, max, desc_what(p, key), &out[i]));
  return ADJ_SUCCESS;
}

/* Padding "P", "PxQ..." (both sides) or with "L:R" entries (left, right). */
int desc_padding(desc_parser *p, const char *key, int want, int64_t padding[][2]) {
  desc_items it;
  ADJ_CALL(desc_take_list(p, key, want, &it));
  for (int i = 0; it.given && i < want; i++) {
    char *item = desc_item(&it, i), *colon = strchr(item, ':');
    if (colon) *colon = '\0';
    ADJ_CALL(adj_parse_int64(item, 0, DESC_MAX_WINDOW, desc_what(p, key), &padding[i][0]));
    ADJ_CALL(adj_parse_int64(colon ? colon + 1 : item, 0, DESC_MAX_WINDOW, desc_what(p, key), &padding[i][1]));
    if (colon) *colon = ':';
  }
  return ADJ_SUCCESS;
}

/* Refuses an option whose key is not in the comma-separated `known`, before
 * any reader complains about what is missing (a misspelt key is the
 * likelier mistake). */
static int desc_refuse_unknown(desc_parser *p, const char *known) {
  for (int i = 0; i < p->n_options; i++) {
    size_t len = strlen(p->options[i].key);
    bool found = false;
    for (const char *k = known; *k && !found; k += strcspn(k, ",") + (k[strcspn(k, ",")] ? 2 : 0))
      found = strcspn(k, ",") == len && !strncmp(k, p->options[i].key, len);
    ADJ_CHECK(found, ADJ_ERR_ARG, "%s:%d: %s: unknown option '%.40s' (%s)", p->source, p->line, p->what,
              p->options[i].key, known);
  }
  return ADJ_SUCCESS;
}

int desc_refuse_leftover(desc_parser *p, const char *known) {
  for (int i = 0; i < p->n_options; i++)
    ADJ_CHECK(p->options[i].used, ADJ_ERR_ARG, "%s:%d: %s: unknown option '%.40s' (%s)", p->source, p->line, p->what,
              p->options[i].key, known);
  return ADJ_SUCCESS;
}

/* ---- placement keys ----------------------------------------------------------------------- */

int desc_placement_options(desc_parser *p, int ndim, bool out_parts, bool grid, adj_layer_placement *out) {
  int64_t parts[ADJ_DESC_MAX_DIMS + 1] = {0}, fo = 0, g[2] = {0, 0};
  const char *parts_text = desc_take(p, "parts");
  if (parts_text) {
    char items[ADJ_DESC_MAX_DIMS + 1][40];
    int n = 0;
    ADJ_CALL(desc_list(p, "parts", parts_text, ADJ_DESC_MAX_DIMS + 1, items, &n));
    ADJ_CHECK(ndim < 0 || n == ndim, ADJ_ERR_ARG,
              "%s '%.40s' has %d entries but the input (batch first) has %d dimensions", desc_what(p, "parts"),
              parts_text, n, ndim);
    if (ndim < 0) ndim = n;
    for (int i = 0; i < n; i++) ADJ_CALL(adj_parse_int64(items[i], 1, ADJ_PLACE_MAX_PARTS, desc_what(p, "parts"), &parts[i]));
  }
  if (out_parts) ADJ_CALL(desc_int(p, "out_parts", 1, ADJ_PLACE_MAX_PARTS, &fo));
  if (grid) ADJ_CALL(desc_ints(p, "grid", 2, 1, ADJ_PLACE_MAX_PARTS, g));
  ADJ_CHECK(!g[0] || (!parts_text && !fo), ADJ_ERR_ARG, "%s:%d: %s: grid= is a placement of its own; give it without parts= and out_parts=",
            p->source, p->line, p->what);
  ADJ_CHECK(!fo || parts_text, ADJ_ERR_ARG, "%s:%d: %s: out_parts= needs parts= (the input's partition)", p->source,
            p->line, p->what);
  if (g[0]) *out = (adj_layer_placement){.kind = ADJ_PLACE_GRID, .grid = {(int)g[0], (int)g[1]}, .line = p->line};
  else if (parts_text) {
    *out = (adj_layer_placement){.kind = ADJ_PLACE_PARTS, .ndim = ndim, .out_parts = (int)fo, .line = p->line};
    for (int i = 0; i < ndim; i++) out->parts[i] = (int)parts[i];
  }
  int64_t size = adj_layer_placement_workers(out);
  ADJ_CHECK(size <= ADJ_PLACE_MAX_WORKERS, ADJ_ERR_ARG, "%s:%d: %s: the placement needs %lld workers (at most %d)",
            p->source, p->line, p->what, (long long)size, ADJ_PLACE_MAX_WORKERS);
  return ADJ_SUCCESS;
}

int64_t adj_layer_placement_workers(const adj_layer_placement *pl) {
  int factors[ADJ_DESC_MAX_DIMS + 2], n_factors = 0;
  if (pl->kind == ADJ_PLACE_GRID) factors[n_factors++] = pl->grid[0], factors[n_factors++] = pl->grid[1];
  for (int i = 0; pl->kind == ADJ_PLACE_PARTS && i < pl->ndim && i <= ADJ_DESC_MAX_DIMS; i++)
    factors[n_factors++] = pl->parts[i];
  if (pl->kind == ADJ_PLACE_PARTS) factors[n_factors++] = pl->out_parts;
  /* Each factor is at most ADJ_PLACE_MAX_PARTS: stop before the product could overflow. */
  int64_t n = 1;
  for (int i = 0; i < n_factors && n <= ADJ_PLACE_MAX_WORKERS; i++) n *= factors[i] > 1 ? factors[i] : 1;
  return n;
}

/* ---- layers ----------------------------------------------------------------------------- */

static const struct {
  const char *keyword;
  adj_desc_kind kind;
} desc_keywords[] = {
    {"conv", ADJ_DESC_CONV},          {"pool", ADJ_DESC_POOL},        {"fc", ADJ_DESC_AFFINE},
    {"affine", ADJ_DESC_AFFINE},      {"relu", ADJ_DESC_ACTIVATION},  {"leaky_relu", ADJ_DESC_ACTIVATION},
    {"tanh", ADJ_DESC_ACTIVATION},    {"sigmoid", ADJ_DESC_ACTIVATION}, {"batchnorm", ADJ_DESC_BATCHNORM},
    {"upsample", ADJ_DESC_UPSAMPLE},  {"pad", ADJ_DESC_PAD},          {"phantom", ADJ_DESC_PHANTOM},
    {"flatten", ADJ_DESC_FLATTEN},    {"loss", ADJ_DESC_LOSS},
};
enum { DESC_N_KEYWORDS = sizeof desc_keywords / sizeof desc_keywords[0] };

const char *adj_desc_kind_name(adj_desc_kind kind) {
  static const char *const names[ADJ_DESC_KINDS] = {"conv",    "pool",     "fc",  "activation", "batchnorm", "upsample",
                                                    "pad",     "phantom",  "flatten", "loss",    "xent"};
  return (int)kind >= 0 && kind < ADJ_DESC_KINDS ? names[kind] : "?";
}

const char *adj_desc_layer_keyword(const adj_desc_layer *l) {
  static const char *const activations[] = {"relu", "leaky_relu", "tanh", "sigmoid"};
  if (l->kind == ADJ_DESC_ACTIVATION && (int)l->u.activation.kind >= 0 && l->u.activation.kind <= ADJ_SIGMOID)
    return activations[l->u.activation.kind];
  return adj_desc_kind_name(l->kind);
}

/* A new layer at the end of the description, its input the current shape. */
static int desc_append(desc_parser *p, adj_desc_layer **out) {
  adj_description *d = p->d;
  ADJ_CHECK(d->n < ADJ_DESC_MAX_LAYERS, ADJ_ERR_ARG, "%s:%d: more than %d layers", p->source, p->line,
            ADJ_DESC_MAX_LAYERS);
  if (d->n == p->capacity) {
    int cap = p->capacity ? 2 * p->capacity : 16;
    adj_desc_layer *grown = realloc(d->layers, sizeof *grown * (size_t)cap);
    ADJ_CHECK(grown, ADJ_ERR_MEM, "%s:%d: out of memory for %d layers", p->source, p->line, cap);
    d->layers = grown, p->capacity = cap;
  }
  adj_desc_layer *l = &d->layers[d->n++];
  *l = (adj_desc_layer){.line = p->line, .in_rank = p->rank};
  memcpy(l->in_shape, p->shape, sizeof l->in_shape);
  *out = l;
  return ADJ_SUCCESS;
}

/* A per-sample activation's volume must fit int64, so every product the
 * builder and the planner form from it does too. */
static int desc_check_volume(desc_parser *p, int rank, const int64_t *shape) {
  char what[320];
  snprintf(what, sizeof what, "%s:%d: %s: its per-sample activation", p->source, p->line, p->what);
  int64_t volume = 1;
  for (int i = 0; i < rank; i++) ADJ_CALL(adj_int64_mul(volume, shape[i], what, &volume));
  return ADJ_SUCCESS;
}

/* The current shape becomes the layer's output. */
static void desc_advance(desc_parser *p, const adj_desc_layer *l) {
  p->rank = l->out_rank;
  memcpy(p->shape, l->out_shape, sizeof p->shape);
}

/* The flatten an affine or phantom layer on a (C, spatial...) input gets. */
static int desc_implicit_flatten(desc_parser *p, const char *name) {
  adj_desc_layer *l;
  ADJ_CALL(desc_append(p, &l));
  l->kind = ADJ_DESC_FLATTEN;
  l->implicit = true;
  snprintf(l->name, sizeof l->name, "%.*s.flatten", (int)sizeof l->name - 9, name);
  ADJ_CALL(desc_infer_flatten(p, l));
  desc_advance(p, l);
  return ADJ_SUCCESS;
}

/* Names: letters, digits, '_', '-', '.'; unique. */
static int desc_check_name(desc_parser *p, const char *name) {
  size_t len = strlen(name);
  ADJ_CHECK(len > 0 && len < ADJ_DESC_NAME_SIZE, ADJ_ERR_ARG, "%s:%d: layer name '%.40s' is longer than %d characters",
            p->source, p->line, name, ADJ_DESC_NAME_SIZE - 1);
  for (size_t i = 0; i < len; i++)
    ADJ_CHECK(isalnum((unsigned char)name[i]) || strchr("_-.", name[i]), ADJ_ERR_ARG,
              "%s:%d: layer name '%.40s' holds '%c' (letters, digits, '_', '-' and '.' only)", p->source, p->line,
              name, name[i]);
  int other = adj_description_find(p->d, name);
  ADJ_CHECK(other < 0, ADJ_ERR_ARG, "%s:%d: layer name '%s' is already used on line %d", p->source, p->line, name,
            other >= 0 ? p->d->layers[other].line : 0);
  return ADJ_SUCCESS;
}

/* The layer's name: the word after the keyword unless it is an option, else
 * the keyword and a count ("relu3"). */
static int desc_name(desc_parser *p, const char *keyword, char **words, int *count, char *name) {
  if (*count > 0 && !strchr(words[0], '=')) {
    ADJ_CALL(desc_check_name(p, words[0]));
    snprintf(name, ADJ_DESC_NAME_SIZE, "%s", words[0]);
    memmove(words, words + 1, sizeof *words * (size_t)--*count);
    return ADJ_SUCCESS;
  }
  for (int k = 1;; k++) {
    snprintf(name, ADJ_DESC_NAME_SIZE, "%s%d", keyword, k);
    if (adj_description_find(p->d, name) < 0) return ADJ_SUCCESS;
  }
}

static int desc_layer(desc_parser *p, const char *keyword, char **words, int count) {
  int k = 0;
  while (k < DESC_N_KEYWORDS && strcmp(desc_keywords[k].keyword, keyword)) k++;
  ADJ_CHECK(k < DESC_N_KEYWORDS, ADJ_ERR_ARG,
            "%s:%d: unknown layer type '%.40s' (conv, pool, fc, affine, relu, leaky_relu, tanh, sigmoid, batchnorm, "
            "upsample, pad, phantom, flatten, loss)",
            p->source, p->line, keyword);
  ADJ_CHECK(p->have_input, ADJ_ERR_ARG, "%s:%d: layer before the input line", p->source, p->line);
  ADJ_CHECK(!p->have_loss, ADJ_ERR_ARG, "%s:%d: %s after the loss on line %d (the loss is the last layer)", p->source,
            p->line, keyword, p->d->layers[p->d->n - 1].line);
  char name[ADJ_DESC_NAME_SIZE];
  ADJ_CALL(desc_name(p, keyword, words, &count, name));
  snprintf(p->what, sizeof p->what, "%s %s", keyword, name);
  ADJ_CALL(desc_split_options(p, words, count));
  adj_desc_kind kind = desc_keywords[k].kind;
  ADJ_CALL(desc_refuse_unknown(p, desc_known_keys(kind)));
  bool flat_input = kind == ADJ_DESC_AFFINE || kind == ADJ_DESC_PHANTOM;
  if (flat_input && p->rank > 1) ADJ_CALL(desc_implicit_flatten(p, name));
  adj_desc_layer *l;
  ADJ_CALL(desc_append(p, &l));
  l->kind = kind;
  snprintf(l->name, sizeof l->name, "%s", name);
  ADJ_CALL(desc_infer(p, keyword, l));
  ADJ_CALL(desc_refuse_leftover(p, desc_known_keys(l->kind)));
  ADJ_CALL(desc_check_volume(p, l->out_rank, l->out_shape));
  p->have_loss = l->kind == ADJ_DESC_LOSS || l->kind == ADJ_DESC_XENT;
  desc_advance(p, l);
  return adj_int64_add(p->d->parameter_count, l->parameter_count, "parameter count", &p->d->parameter_count);
}

/* ---- the lines that are not layers -------------------------------------------------------- */

static int desc_network_line(desc_parser *p, char **words, int count) {
  ADJ_CHECK(count == 1, ADJ_ERR_ARG, "%s:%d: network needs one name (got %d words)", p->source, p->line, count);
  ADJ_CHECK(!p->have_name, ADJ_ERR_ARG, "%s:%d: a second network line", p->source, p->line);
  ADJ_CHECK(strlen(words[0]) < ADJ_DESC_NAME_SIZE, ADJ_ERR_ARG, "%s:%d: network name '%.40s...' is longer than %d characters",
            p->source, p->line, words[0], ADJ_DESC_NAME_SIZE - 1);
  snprintf(p->d->name, sizeof p->d->name, "%s", words[0]);
  p->have_name = true;
  return ADJ_SUCCESS;
}

static int desc_input_line(desc_parser *p, char **words, int count) {
  ADJ_CHECK(!p->have_input, ADJ_ERR_ARG, "%s:%d: a second input line", p->source, p->line);
  int n = 0;
  while (n < count && !strchr(words[n], '=')) n++;
  ADJ_CHECK(n >= 1 && n <= ADJ_DESC_MAX_DIMS, ADJ_ERR_ARG,
            "%s:%d: input needs 1 to %d extents (F, C L, C H W or C D H W), got %d", p->source, p->line,
            ADJ_DESC_MAX_DIMS, n);
  snprintf(p->what, sizeof p->what, "input");
  for (int i = 0; i < n; i++)
    ADJ_CALL(adj_parse_int64(words[i], 1, DESC_MAX_EXTENT, desc_what(p, "extent"), &p->shape[i]));
  p->rank = n;
  ADJ_CALL(desc_check_volume(p, n, p->shape));
  ADJ_CALL(desc_split_options(p, words + n, count - n));
  ADJ_CALL(desc_placement_options(p, n + 1, false, false, &p->d->input_placement));
  ADJ_CALL(desc_refuse_leftover(p, "parts"));
  p->d->input_rank = n;
  memcpy(p->d->input_shape, p->shape, sizeof p->shape);
  p->have_input = true;
  return ADJ_SUCCESS;
}

static int desc_replicas_line(desc_parser *p, char **words, int count) {
  ADJ_CHECK(count == 1, ADJ_ERR_ARG, "%s:%d: replicas needs one count (got %d words)", p->source, p->line, count);
  int64_t r;
  snprintf(p->what, sizeof p->what, "replicas");
  ADJ_CALL(adj_parse_int64(words[0], 1, ADJ_PLACE_MAX_WORKERS, desc_what(p, "count"), &r));
  p->d->replicas = (int)r;
  return ADJ_SUCCESS;
}

static int desc_line(desc_parser *p, char *line) {
  char *words[DESC_MAX_WORDS];
  int count;
  ADJ_CALL(desc_words(p, line, words, &count));
  if (count == 0) return ADJ_SUCCESS;
  if (!strcmp(words[0], "network")) return desc_network_line(p, words + 1, count - 1);
  if (!strcmp(words[0], "input")) return desc_input_line(p, words + 1, count - 1);
  if (!strcmp(words[0], "replicas")) return desc_replicas_line(p, words + 1, count - 1);
  return desc_layer(p, words[0], words + 1, count - 1);
}

/* ---- public ---------------------------------------------------------------------------- */

int adj_description_parse(const char *text, const char *source, adj_description **out) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_description_parse: output pointer is NULL");
  *out = NULL;
  ADJ_CHECK(text, ADJ_ERR_ARG, "adj_description_parse: text is NULL");
  desc_parser p = {.source = source ? source : "network"};
  p.d = calloc(1, sizeof *p.d);
  char *copy = strdup(text);
  int status = p.d && copy ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", p.source);
  if (!status) snprintf(p.d->source, sizeof p.d->source, "%s", p.source);
  for (char *line = copy, *next; !status && line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    p.line++;
    status = desc_line(&p, line);
  }
  if (!status && !p.have_input) status = adj_error_set(ADJ_ERR_ARG, "%s: no input line", p.source);
  if (!status && p.d->n == 0) status = adj_error_set(ADJ_ERR_ARG, "%s: no layers", p.source);
  if (!status && !p.have_name) snprintf(p.d->name, sizeof p.d->name, "%.*s", ADJ_DESC_NAME_SIZE - 1, p.source);
  free(copy);
  if (status) adj_description_destroy(&p.d);
  *out = p.d;
  return status;
}

int desc_read_text(const char *path, const char *what, char **text) {
  char kind[32];
  snprintf(kind, sizeof kind, "%s file", what);
  return adj_file_read_text(path, kind, ADJ_DESC_MAX_TEXT, text, NULL);
}

int adj_description_read(const char *path, adj_description **out) {
  ADJ_CHECK(out && path, ADJ_ERR_ARG, "adj_description_read: path or output pointer is NULL");
  *out = NULL;
  char *text;
  ADJ_CALL(desc_read_text(path, "network", &text));
  int status = adj_description_parse(text, path, out);
  free(text);
  return status;
}

int desc_share_text(MPI_Comm comm, const char *path, const char *what, char **text) {
  int rank;
  adj_wait_policy wait;
  ADJ_CALL_MPI(MPI_Comm_rank(comm, &rank));
  ADJ_CALL(adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &wait));
  *text = NULL;
  int status = rank == 0 ? (path ? desc_read_text(path, what, text)
                                 : adj_error_set(ADJ_ERR_ARG, "no %s file given", what))
                         : ADJ_SUCCESS;
  ADJ_CALL(adj_status_agree(comm, status, wait));
  int64_t length = rank == 0 ? (int64_t)strlen(*text) : 0;
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Ibcast(&length, 1, MPI_INT64_T, 0, comm, &r));
  ADJ_CALL(adj_wait_all(1, &r, wait));
  if (rank != 0) *text = malloc((size_t)length + 1);
  status = *text ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "out of memory for a %lld-byte %s file", (long long)length, what);
  status = adj_status_agree(comm, status, wait);
  if (!status && MPI_Ibcast(*text, (int)length + 1, MPI_CHAR, 0, comm, &r) == MPI_SUCCESS) status = adj_wait_all(1, &r, wait);
  if (status) free(*text), *text = NULL;
  return status;
}

int adj_description_read_all(MPI_Comm comm, const char *path, adj_description **out) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_description_read_all: output pointer is NULL");
  *out = NULL;
  char *text;
  ADJ_CALL(desc_share_text(comm, path, "network", &text));
  int status = adj_description_parse(text, path, out);
  free(text);
  return status;
}

void adj_description_destroy(adj_description **d) {
  if (!d || !*d) return;
  free((*d)->layers);
  free(*d);
  *d = NULL;
}

int adj_description_find(const adj_description *d, const char *name) {
  for (int i = 0; d && name && i < d->n; i++)
    if (!strcmp(d->layers[i].name, name)) return i;
  return -1;
}

int adj_description_loss(const adj_description *d) {
  if (!d || d->n == 0) return -1;
  adj_desc_kind k = d->layers[d->n - 1].kind;
  return k == ADJ_DESC_LOSS || k == ADJ_DESC_XENT ? d->n - 1 : -1;
}

const char *adj_desc_shape_format(int rank, const int64_t *shape, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "(");
  for (int i = 0; i < rank && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (used < size) snprintf(buf + used, size - used, ")");
  return buf;
}

void adj_description_print(const adj_description *d, FILE *out) {
  char in[64], outs[64], place[64];
  fprintf(out, "network %s: input %s, %d layers, %lld parameters\n", d->name,
          adj_desc_shape_format(d->input_rank, d->input_shape, in, sizeof in), d->n, (long long)d->parameter_count);
  for (int i = 0; i < d->n; i++) {
    const adj_desc_layer *l = &d->layers[i];
    fprintf(out, "  %-16s %-10s %-16s -> %-16s %10lld  %s\n", l->name, adj_desc_layer_keyword(l),
            adj_desc_shape_format(l->in_rank, l->in_shape, in, sizeof in),
            adj_desc_shape_format(l->out_rank, l->out_shape, outs, sizeof outs), (long long)l->parameter_count,
            adj_layer_placement_format(&l->placement, place, sizeof place));
  }
}

const char *adj_layer_placement_format(const adj_layer_placement *pl, char *buf, size_t size) {
  if (pl->kind == ADJ_PLACE_GRID) snprintf(buf, size, "grid=%dx%d", pl->grid[0], pl->grid[1]);
  else if (pl->kind != ADJ_PLACE_PARTS) snprintf(buf, size, "-");
  else {
    size_t used = (size_t)snprintf(buf, size, "parts=");
    for (int i = 0; i < pl->ndim && used < size; i++)
      used += (size_t)snprintf(buf + used, size - used, "%s%d", i ? "x" : "", pl->parts[i]);
    if (pl->out_parts > 1 && used < size) snprintf(buf + used, size - used, " out_parts=%d", pl->out_parts);
  }
  return buf;
}
