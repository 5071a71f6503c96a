/* The layer time table (layer_times.h): twins' keys, the rate estimate, the
 * cache file, and the measurement of missing twins. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/agree.h"
#include "adjoin/file.h"
#include "adjoin/layer_times.h"
#include "adjoin/layer_timing.h"
#include "adjoin/loss_layers.h"
#include "adjoin/network_build.h"
#include "adjoin/parse.h"
#include "adjoin/threads.h"
#include "adjoin/wait.h"
#include "adjoin/xent_layer.h"
#include "error_impl.h"
#include "plan_impl.h"

typedef struct adj_time_entry {
  char key[ADJ_LAYER_TIME_KEY];
  double forward, backward;
} adj_time_entry;

struct adj_layer_times {
  int n, capacity;
  adj_time_entry *entries;
  int n_missing, missing_capacity;
  adj_compute_twin *missing;
};

/* ---- keys ----------------------------------------------------------------------------------- */

/* "AxBxC" of n values, appended at *at. */
static void adj_key_list(char **at, char *end, const char *name, int n, const int64_t *v) {
  *at += snprintf(*at, (size_t)(end - *at), " %s=", name);
  for (int i = 0; i < n && *at < end; i++) *at += snprintf(*at, (size_t)(end - *at), i ? "x%lld" : "%lld", (long long)v[i]);
}

static void adj_key_window(char **at, char *end, const adj_window_geometry *w) {
  int64_t k[3], s[3], d[3];
  for (int i = 0; i < w->spatial_dims; i++) k[i] = w->kernel[i], s[i] = w->stride[i], d[i] = w->dilation[i];
  adj_key_list(at, end, "k", w->spatial_dims, k);
  adj_key_list(at, end, "s", w->spatial_dims, s);
  adj_key_list(at, end, "d", w->spatial_dims, d);
  *at += snprintf(*at, (size_t)(end - *at), " p=");
  for (int i = 0; i < w->spatial_dims && *at < end; i++)
    *at += snprintf(*at, (size_t)(end - *at), "%s%lld+%lld", i ? "x" : "", (long long)w->padding_left[i],
                    (long long)w->padding_right[i]);
}

/* The hyper-parameters of the twin's kind. */
static void adj_key_kind(char **at, char *end, const adj_desc_layer *l) {
  switch (l->kind) {
  case ADJ_DESC_CONV:
    adj_key_window(at, end, &l->u.conv.window);
    *at += snprintf(*at, (size_t)(end - *at), " out=%lld g=%lld bias=%d", (long long)l->u.conv.out_channels,
                    (long long)l->u.conv.groups, (int)l->u.conv.bias);
    break;
  case ADJ_DESC_POOL:
    adj_key_window(at, end, &l->u.pool.window);
    *at += snprintf(*at, (size_t)(end - *at), " type=%d", (int)l->u.pool.kind);
    break;
  case ADJ_DESC_AFFINE:
    *at += snprintf(*at, (size_t)(end - *at), " out=%lld bias=%d", (long long)l->u.affine.out_features,
                    (int)l->u.affine.bias);
    break;
  case ADJ_DESC_BATCHNORM: *at += snprintf(*at, (size_t)(end - *at), " affine=%d", (int)l->u.batchnorm.affine); break;
  case ADJ_DESC_UPSAMPLE:
    adj_key_list(at, end, "out", l->out_rank - 1, &l->out_shape[1]);
    *at += snprintf(*at, (size_t)(end - *at), " mode=%d", (int)l->u.upsample.mode);
    break;
  case ADJ_DESC_PAD: adj_key_list(at, end, "out", l->out_rank, l->out_shape); break;
  case ADJ_DESC_LOSS:
    *at += snprintf(*at, (size_t)(end - *at), " type=%d reduction=%d", (int)l->u.loss.kind, (int)l->u.loss.reduction);
    break;
  default: break;
  }
}

static const char *adj_optimizer_name(int optimizer) {
  return optimizer == 1 + ADJ_OPTIMIZER_ADAM ? "adam" : "sgd";
}

const char *adj_compute_twin_key(const adj_compute_twin *t, char *buf, size_t size) {
  if (t->optimizer) {
    snprintf(buf, size, "optimizer %s %s t%d", adj_optimizer_name(t->optimizer), adj_dtype_name(t->dtype), t->threads);
    return buf;
  }
  char *at = buf, *end = buf + size;
  at += snprintf(at, size, "%s %s t%d dx%d n=%lld", adj_desc_layer_keyword(&t->layer), adj_dtype_name(t->dtype),
                 t->threads, (int)t->input_gradient, (long long)t->batch);
  if (at < end) adj_key_list(&at, end, "in", t->layer.in_rank, t->layer.in_shape);
  if (at < end) adj_key_kind(&at, end, &t->layer);
  return buf;
}

/* ---- the rate estimate ------------------------------------------------------------------------ */

static double adj_twin_volume(int rank, const int64_t *shape) {
  double v = 1;
  for (int i = 0; i < rank; i++) v *= (double)shape[i];
  return v;
}

void adj_compute_twin_work(const adj_compute_twin *t, double *flops, double *bytes, double *backward_flops,
                           double *backward_bytes) {
  const adj_desc_layer *l = &t->layer;
  double n = (double)t->batch, esize = (double)adj_dtype_size(t->dtype);
  double in = n * adj_twin_volume(l->in_rank, l->in_shape), out = n * adj_twin_volume(l->out_rank, l->out_shape);
  double params = (double)l->parameter_count, f = 0;
  if (l->kind == ADJ_DESC_CONV) {
    const adj_window_geometry *w = &l->u.conv.window;
    double window = (double)(l->in_shape[0] / l->u.conv.groups);
    for (int i = 0; i < w->spatial_dims; i++) window *= (double)w->kernel[i];
    f = 2 * out * window;
  } else if (l->kind == ADJ_DESC_AFFINE) {
    f = 2 * n * (double)l->in_shape[0] * (double)l->u.affine.out_features;
  }
  *flops = f;
  *bytes = (in + out + params) * esize;
  /* The weight gradient, and the input gradient when asked for. */
  *backward_flops = f * (t->input_gradient ? 2 : 1);
  *backward_bytes = (in + out + 2 * params) * esize * (t->input_gradient ? 2 : 1);
}

static void adj_twin_estimate(const adj_machine *m, const adj_compute_twin *t, double *forward, double *backward) {
  double flops = m && m->flops > 0 ? m->flops : 1e10, bandwidth = m && m->bandwidth > 0 ? m->bandwidth : 1e10;
  double f, b, bf, bb;
  adj_compute_twin_work(t, &f, &b, &bf, &bb);
  *forward = f / flops + b / bandwidth;
  *backward = bf / flops + bb / bandwidth;
}

/* ---- the table -------------------------------------------------------------------------------- */

int adj_layer_times_create(adj_layer_times **times) {
  ADJ_CHECK(times, ADJ_ERR_ARG, "layer times: output is NULL");
  *times = calloc(1, sizeof **times);
  ADJ_CHECK(*times, ADJ_ERR_MEM, "layer times: out of memory");
  return ADJ_SUCCESS;
}

void adj_layer_times_destroy(adj_layer_times **times) {
  if (!times || !*times) return;
  free((*times)->entries);
  free((*times)->missing);
  free(*times);
  *times = NULL;
}

static adj_time_entry *adj_times_find(const adj_layer_times *t, const char *key) {
  for (int i = 0; i < t->n; i++)
    if (!strcmp(t->entries[i].key, key)) return &t->entries[i];
  return NULL;
}

int adj_layer_times_count(const adj_layer_times *times) { return times ? times->n : 0; }

int adj_layer_times_set(adj_layer_times *t, const char *key, double forward, double backward) {
  ADJ_CHECK(t && key && strlen(key) < ADJ_LAYER_TIME_KEY, ADJ_ERR_ARG, "layer times: no table, or key too long");
  ADJ_CHECK(forward >= 0 && backward >= 0 && isfinite(forward) && isfinite(backward), ADJ_ERR_ARG,
            "layer times: %s: times %g and %g must be finite and >= 0", key, forward, backward);
  adj_time_entry *e = adj_times_find(t, key);
  if (!e) {
    ADJ_CALL(adj_plan_grow((void **)&t->entries, t->n, &t->capacity, sizeof *t->entries, 64, "layer times"));
    e = &t->entries[t->n++];
    snprintf(e->key, sizeof e->key, "%s", key);
  }
  e->forward = forward, e->backward = backward;
  return ADJ_SUCCESS;
}

/* Remembers a missing twin once. */
static int adj_times_remember(adj_layer_times *t, const adj_compute_twin *twin, const char *key) {
  char other[ADJ_LAYER_TIME_KEY];
  for (int i = 0; i < t->n_missing; i++)
    if (!strcmp(adj_compute_twin_key(&t->missing[i], other, sizeof other), key)) return ADJ_SUCCESS;
  ADJ_CALL(adj_plan_grow((void **)&t->missing, t->n_missing, &t->missing_capacity, sizeof *t->missing, 32,
                         "layer times: missing twins"));
  t->missing[t->n_missing++] = *twin;
  return ADJ_SUCCESS;
}

int adj_layer_times_lookup(adj_layer_times *t, const adj_machine *m, const adj_compute_twin *twin, double *forward,
                           double *backward, bool *measured) {
  ADJ_CHECK(twin && forward && backward, ADJ_ERR_ARG, "layer times: twin or outputs are NULL");
  char key[ADJ_LAYER_TIME_KEY];
  adj_compute_twin_key(twin, key, sizeof key);
  const adj_time_entry *e = t ? adj_times_find(t, key) : NULL;
  if (measured) *measured = e != NULL;
  if (e) {
    *forward = e->forward, *backward = e->backward;
    return ADJ_SUCCESS;
  }
  adj_twin_estimate(m, twin, forward, backward);
  return t && (!m || m->flops == 0) ? adj_times_remember(t, twin, key) : ADJ_SUCCESS;
}

int adj_layer_times_optimizer(adj_layer_times *t, const adj_machine *m, adj_optimizer_kind kind, adj_dtype dtype,
                              int threads, int64_t count, double *seconds, bool *measured) {
  ADJ_CHECK(seconds, ADJ_ERR_ARG, "layer times: output is NULL");
  adj_compute_twin twin = {.dtype = dtype, .threads = threads, .optimizer = 1 + (int)kind};
  char key[ADJ_LAYER_TIME_KEY];
  adj_compute_twin_key(&twin, key, sizeof key);
  const adj_time_entry *e = t ? adj_times_find(t, key) : NULL;
  if (measured) *measured = e != NULL;
  if (e) {
    *seconds = e->forward + e->backward * (double)count;
    return ADJ_SUCCESS;
  }
  /* Adam reads the value, the gradient and two moments and writes three. */
  double bandwidth = m && m->bandwidth > 0 ? m->bandwidth : 1e10;
  *seconds = 8.0 * (double)count * (double)adj_dtype_size(dtype) / bandwidth;
  return t && (!m || m->flops == 0) ? adj_times_remember(t, &twin, key) : ADJ_SUCCESS;
}

int adj_layer_times_missing(const adj_layer_times *t) { return t ? t->n_missing : 0; }
void adj_layer_times_forget_missing(adj_layer_times *t) {
  if (t) t->n_missing = 0;
}

/* ---- the cache file --------------------------------------------------------------------------- */

void adj_layer_times_path(char *buf, size_t size) {
  const char *explicit = getenv("ADJ_LAYER_TIMES");
  char dir[1024];
  adj_plan_cache_dir(dir, sizeof dir);
  if (explicit && *explicit) snprintf(buf, size, "%s", explicit);
  else if (dir[0]) snprintf(buf, size, "%s/layer-times", dir);
  else if (size) buf[0] = '\0';
}

/* "<forward> <backward> <key>" */
static int adj_times_line(adj_layer_times *t, char *line, const char *source, int number) {
  line[strcspn(line, "#\r")] = '\0';
  char *fields[2], *rest = line;
  while (*rest == ' ' || *rest == '\t') rest++;
  if (!*rest) return ADJ_SUCCESS;
  char what[300];
  snprintf(what, sizeof what, "%s:%d", source, number);
  for (int k = 0; k < 2; k++) {
    fields[k] = rest;
    rest += strcspn(rest, " \t");
    ADJ_CHECK(*rest, ADJ_ERR_ARG, "%s: '%s' is not '<forward s> <backward s> <key>'", what, fields[0]);
    *rest++ = '\0';
    while (*rest == ' ' || *rest == '\t') rest++;
  }
  double forward, backward;
  ADJ_CALL(adj_parse_real(fields[0], 0, 1e6, what, &forward));
  ADJ_CALL(adj_parse_real(fields[1], 0, 1e6, what, &backward));
  ADJ_CHECK(*rest && strlen(rest) < ADJ_LAYER_TIME_KEY, ADJ_ERR_ARG, "%s: the key is empty or longer than %d bytes",
            what, ADJ_LAYER_TIME_KEY - 1);
  return adj_layer_times_set(t, rest, forward, backward);
}

int adj_layer_times_parse(adj_layer_times *t, const char *text, const char *source) {
  ADJ_CHECK(t && text, ADJ_ERR_ARG, "layer times: table or text is NULL");
  char *copy = strdup(text);
  ADJ_CHECK(copy, ADJ_ERR_MEM, "layer times: out of memory");
  int status = ADJ_SUCCESS, number = 0;
  for (char *line = copy, *next; !status && line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    status = adj_times_line(t, line, source ? source : "layer times", ++number);
  }
  free(copy);
  return status;
}

int adj_layer_times_save(const adj_layer_times *t, const char *path) {
  ADJ_CHECK(t && path && path[0], ADJ_ERR_ARG, "layer times: no table or no path (set ADJ_LAYER_TIMES or HOME)");
  adj_plan_make_parent(path);
  FILE *f = NULL;
  ADJ_CALL(adj_file_open_output(path, "layer time table", &f));
  /* %.17g: the very doubles measured read back, as adj_machine_write's. */
  fprintf(f, "# adjoin: forward and backward seconds of each local computation, measured here\n");
  for (int i = 0; i < t->n; i++)
    fprintf(f, "%.17g %.17g %s\n", t->entries[i].forward, t->entries[i].backward, t->entries[i].key);
  return adj_file_close_output(f, path, "layer time table");
}

/* Rank 0's text of the cache file, or NULL (none yet, or not a readable
 * regular text file: said on stderr). */
static char *adj_times_read_text(const char *path) {
  char *text = NULL;
  if (!path[0] || access(path, F_OK)) return NULL;
  if (adj_file_read_text(path, "layer time table", 16 << 20, &text, NULL)) {
    fprintf(stderr, "adjoin: warning: ignoring the layer time table (%s)\n", adj_last_error());
    adj_clear_error();
  }
  return text;
}

int adj_layer_times_load(MPI_Comm comm, adj_layer_times *t) {
  ADJ_CHECK(t, ADJ_ERR_ARG, "layer times: table is NULL");
  int rank;
  ADJ_CALL_MPI(MPI_Comm_rank(comm, &rank));
  char path[1100];
  adj_layer_times_path(path, sizeof path);
  char *text = rank == 0 ? adj_times_read_text(path) : NULL;
  long long length = text ? (long long)strlen(text) : -1;
  ADJ_CALL_MPI(MPI_Bcast(&length, 1, MPI_LONG_LONG, 0, comm));
  if (length < 0) return ADJ_SUCCESS;
  if (rank != 0) text = malloc((size_t)length + 1);
  int status = text ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "layer times: out of memory");
  if (!status && MPI_Bcast(text, (int)length + 1, MPI_CHAR, 0, comm) != MPI_SUCCESS)
    status = adj_error_set(ADJ_ERR_MPI, "layer times: broadcast of the table failed");
  adj_layer_times *read = NULL;
  if (!status) status = adj_layer_times_create(&read);
  if (!status && adj_layer_times_parse(read, text, path)) {
    if (rank == 0) fprintf(stderr, "adjoin: warning: ignoring the layer time table (%s)\n", adj_last_error());
    adj_clear_error();
  } else if (!status) {
    for (int i = 0; i < read->n && !status; i++)
      status = adj_layer_times_set(t, read->entries[i].key, read->entries[i].forward, read->entries[i].backward);
  }
  adj_layer_times_destroy(&read);
  free(text);
  return status;
}

/* ---- measurement ------------------------------------------------------------------------------ */

/* A loss twin's labels (class 0) or target (0.5, inside every loss's domain). */
static int adj_twin_targets(adj_layer *network, const adj_compute_twin *twin) {
  adj_layer *loss = adj_network_build_loss(network);
  if (!loss) return ADJ_SUCCESS;
  int64_t n = twin->batch;
  if (twin->layer.kind == ADJ_DESC_XENT || twin->layer.u.loss.kind == ADJ_LOSS_NLL) {
    int64_t *labels = calloc((size_t)n, sizeof *labels);
    ADJ_CHECK(labels, ADJ_ERR_MEM, "layer times: out of memory for %lld labels", (long long)n);
    int status = twin->layer.kind == ADJ_DESC_XENT ? adj_xent_layer_set_labels(loss, labels, n)
                                                   : adj_loss_layer_set_labels(loss, labels, n);
    free(labels);
    return status;
  }
  adj_tensor target;
  ADJ_CALL(adj_layer_create_input(loss, &target));
  for (int64_t i = 0; i < adj_tensor_volume(&target); i++) adj_tensor_set(&target, i, 0.5);
  int status = adj_loss_layer_set_target(loss, &target);
  adj_tensor_destroy(&target);
  return status;
}

/* Builds the twin alone on this rank and times it. */
static int adj_twin_time(const adj_compute_twin *twin, double round_seconds, int rounds, double *forward,
                         double *backward) {
  adj_desc_layer layer = twin->layer;
  layer.placement = (adj_layer_placement){0};
  adj_description d = {.name = "twin", .source = "layer twin", .input_rank = layer.in_rank, .n = 1, .layers = &layer,
                       .parameter_count = layer.parameter_count};
  memcpy(d.input_shape, layer.in_shape, sizeof d.input_shape);
  adj_network_build_options o = {.dtype = twin->dtype, .batch = twin->batch, .keep_order = true};
  adj_layer *network = NULL;
  ADJ_CALL(adj_network_build(&d, NULL, MPI_COMM_SELF, &o, &network));
  int status = adj_twin_targets(network, twin);
  adj_layer_timing timing;
  adj_layer_timing_config c = {.round_seconds = round_seconds, .rounds = rounds,
                               .no_input_gradient = !twin->input_gradient};
  if (!status) status = adj_layer_time(network, &c, &timing);
  adj_layer_destroy(&network);
  ADJ_CALL(status);
  /* The fastest rounds of the two kinds may come from different moments of
   * a busy host; where their difference vanishes, the medians' is taken. */
  *forward = timing.forward_best;
  *backward = timing.forward_backward_best - timing.forward_best;
  if (*backward <= 0) *backward = fmax(0, timing.forward_backward - timing.forward);
  return ADJ_SUCCESS;
}

/* The fastest of `repeats` zero-grad + step calls of an optimizer over an
 * affine twin of f x f weights: seconds and parameters. */
static int adj_optimizer_once(const adj_compute_twin *twin, int64_t f, int repeats, double *seconds, int64_t *count) {
  adj_desc_layer layer = {.kind = ADJ_DESC_AFFINE, .in_rank = 1, .out_rank = 1, .in_shape = {f}, .out_shape = {f},
                          .u.affine = {.out_features = f, .bias = true}, .parameter_count = f * f + f};
  adj_description d = {.name = "twin", .source = "optimizer twin", .input_rank = 1, .input_shape = {f}, .n = 1,
                       .layers = &layer, .parameter_count = layer.parameter_count};
  adj_network_build_options o = {.dtype = twin->dtype, .batch = 1, .logits_only = true};
  adj_layer *network = NULL;
  adj_optimizer *opt = NULL;
  ADJ_CALL(adj_network_build(&d, NULL, MPI_COMM_SELF, &o, &network));
  adj_optimizer_config c = {.kind = (adj_optimizer_kind)(twin->optimizer - 1), .learning_rate = 1e-3, .momentum = 0.9};
  int status = adj_optimizer_create(network, &c, &opt);
  *seconds = INFINITY, *count = layer.parameter_count;
  for (int k = 0; k < repeats && !status; k++) {
    double t0 = MPI_Wtime();
    adj_layer_zero_grad(network);
    status = adj_optimizer_step(opt);
    *seconds = fmin(*seconds, MPI_Wtime() - t0);
  }
  adj_optimizer_destroy(&opt);
  adj_layer_destroy(&network);
  return status;
}

/* The optimizer's line a + b count through a small and a large step. */
static int adj_optimizer_time(const adj_compute_twin *twin, int rounds, double *a, double *b) {
  double small, large;
  int64_t n_small, n_large;
  ADJ_CALL(adj_optimizer_once(twin, 32, 200 * rounds, &small, &n_small));
  ADJ_CALL(adj_optimizer_once(twin, 1024, 10 * rounds, &large, &n_large));
  *b = fmax(0, (large - small) / (double)(n_large - n_small));
  *a = fmax(0, small - *b * (double)n_small);
  return ADJ_SUCCESS;
}

enum { ADJ_LAYER_TIME_PASSES = 2 };

/* The slowest rank's figures. */
static int adj_times_slowest(MPI_Comm comm, adj_wait_policy policy, double *pair) {
  double mine[2] = {pair[0], pair[1]};
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Iallreduce(mine, pair, 2, MPI_DOUBLE, MPI_MAX, comm, &r));
  return adj_wait_all(1, &r, policy);
}

int adj_layer_times_measure(adj_layer_times *t, MPI_Comm comm, double round_seconds, int rounds, bool save) {
  ADJ_CHECK(t, ADJ_ERR_ARG, "layer times: table is NULL");
  adj_wait_policy policy;
  ADJ_CALL(adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &policy));
  int threads = adj_threads_get(), status = ADJ_SUCCESS;
  /* Two passes over the list, each twin's figures the faster pass's: a
   * shared host's slow spells last longer than one twin's rounds. */
  double *best = calloc(2 * (size_t)t->n_missing + 2, sizeof *best);
  if (!best) status = adj_error_set(ADJ_ERR_MEM, "layer times: no memory for %d measurements", t->n_missing);
  status = adj_status_agree(comm, status, policy);
  for (int pass = 0; pass < ADJ_LAYER_TIME_PASSES; pass++) {
    for (int i = 0; i < t->n_missing && !status; i++) {
      const adj_compute_twin *twin = &t->missing[i];
      status = adj_threads_set(twin->threads);
      double pair[2] = {0, 0};
      int r = rounds > 0 ? rounds : 7;
      if (!status && twin->optimizer) status = adj_optimizer_time(twin, r, &pair[0], &pair[1]);
      else if (!status) status = adj_twin_time(twin, round_seconds > 0 ? round_seconds : 0.01, r, &pair[0], &pair[1]);
      status = adj_status_agree(comm, status, policy);
      if (!status) status = adj_times_slowest(comm, policy, pair);
      for (int k = 0; k < 2 && !status; k++) best[2 * i + k] = pass ? fmin(best[2 * i + k], pair[k]) : pair[k];
    }
  }
  for (int i = 0; i < t->n_missing && !status; i++) {
    char key[ADJ_LAYER_TIME_KEY];
    status = adj_layer_times_set(t, adj_compute_twin_key(&t->missing[i], key, sizeof key), best[2 * i], best[2 * i + 1]);
  }
  free(best);
  adj_threads_set(threads);
  ADJ_CALL(status);
  t->n_missing = 0;
  int rank;
  MPI_Comm_rank(comm, &rank);
  if (save && rank == 0) {
    char path[1100];
    adj_layer_times_path(path, sizeof path);
    if (path[0] && adj_layer_times_save(t, path)) {
      fprintf(stderr, "adjoin: warning: %s\n", adj_last_error());
      adj_clear_error();
    }
  }
  return ADJ_SUCCESS;
}
