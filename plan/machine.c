/* A machine's communication, compute and memory figures (machine.h): the
 * alpha-beta lines per MPI pattern, the text format, and their measurement
 * on this host. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <malloc.h>

#include "adjoin/agree.h"
#include "adjoin/file.h"
#include "adjoin/layer_timing.h"
#include "adjoin/machine.h"
#include "adjoin/network_build.h"
#include "adjoin/parse.h"
#include "adjoin/plan.h"
#include "adjoin/wait.h"
#include "error_impl.h"
#include "plan_impl.h"
#include "threads_impl.h"

static const char *const adj_comm_kind_names[ADJ_COMM_KINDS] = {"p2p",       "broadcast",      "reduce",
                                                                  "allreduce", "reduce-scatter", "allgather"};

const char *adj_comm_kind_name(adj_comm_kind kind) {
  return kind >= 0 && kind < ADJ_COMM_KINDS ? adj_comm_kind_names[kind] : "?";
}

/* ---- the model ------------------------------------------------------------------------------ */

static double adj_machine_log2(int q) {
  int k = 0;
  while ((1 << k) < q && k < 30) k++;
  return k;
}

/* The per-byte volume of a pattern on q members, relative to the block. */
static double adj_machine_volume(adj_comm_kind kind, int q) {
  switch (kind) {
  case ADJ_COMM_ALLREDUCE:
  case ADJ_COMM_REDUCE_SCATTER: return 2.0 * (q - 1) / q;
  case ADJ_COMM_ALLGATHER: return (double)(q - 1) / q;
  default: return 1;
  }
}

/* The fit of a pattern, or the p2p line when the pattern was not measured. */
static const adj_comm_fit *adj_machine_fit(const adj_machine *m, adj_comm_kind kind) {
  const adj_comm_fit *fit = &m->comm[kind];
  return fit->ranks >= 1 ? fit : &m->comm[ADJ_COMM_P2P];
}

double adj_machine_comm_time(const adj_machine *m, adj_comm_kind kind, int q, double bytes, double messages) {
  if (!m || q <= 1 || kind < 0 || kind >= ADJ_COMM_KINDS) return 0;
  const adj_comm_fit *fit = adj_machine_fit(m, kind);
  int q0 = fit->ranks >= 2 ? fit->ranks : 2;
  if (kind == ADJ_COMM_P2P) return fit->alpha * (messages > 0 ? messages : 1) + fit->beta * bytes;
  double latency = fit->alpha * adj_machine_log2(q) / adj_machine_log2(q0);
  return latency + fit->beta * bytes * adj_machine_volume(kind, q) / adj_machine_volume(kind, q0);
}

int adj_machine_threads(const adj_machine *m, int ranks) {
  int requested = adj_threads_requested();
  if (requested > 0) return requested;
  int on_node = m && m->ranks_per_node > 0 ? m->ranks_per_node : ranks;
  int cores = m && m->cores > 0 ? m->cores : 1;
  int threads = on_node > 0 ? cores / on_node : cores;
  return threads >= 1 ? threads : 1;
}

/* ---- the text format ------------------------------------------------------------------------- */

typedef struct adj_machine_line {
  const char *source;
  int line;
  char *word[5];
  int words;
} adj_machine_line;

/* "SOURCE:LINE: KEY" for parse.h's messages. */
static const char *adj_machine_what(const adj_machine_line *l, char *buf, size_t size) {
  snprintf(buf, size, "%s:%d: %s", l->source, l->line, l->word[0]);
  return buf;
}

static int adj_machine_comm_line(const adj_machine_line *l, adj_comm_kind kind, adj_machine *m) {
  char what[320];
  adj_machine_what(l, what, sizeof what);
  ADJ_CHECK(l->words == 4, ADJ_ERR_ARG, "%s: needs alpha (s), beta (s/B) and the group size of the fit", what);
  adj_comm_fit fit;
  ADJ_CALL(adj_parse_real(l->word[1], 0, 1, what, &fit.alpha));
  ADJ_CALL(adj_parse_real(l->word[2], 0, 1, what, &fit.beta));
  ADJ_CALL(adj_parse_int(l->word[3], 2, 1 << 24, what, &fit.ranks));
  ADJ_CHECK(fit.alpha > 0 || fit.beta > 0, ADJ_ERR_ARG, "%s: alpha and beta are both 0", what);
  m->comm[kind] = fit;
  return ADJ_SUCCESS;
}

static int adj_machine_scalar_line(const adj_machine_line *l, adj_machine *m) {
  char what[320];
  adj_machine_what(l, what, sizeof what);
  const char *key = l->word[0];
  ADJ_CHECK(l->words == 2, ADJ_ERR_ARG, "%s: needs one value", what);
  if (!strcmp(key, "machine")) {
    ADJ_CHECK(strlen(l->word[1]) < sizeof m->name, ADJ_ERR_ARG, "%s: name '%s' is longer than %zu characters", what,
              l->word[1], sizeof m->name - 1);
    snprintf(m->name, sizeof m->name, "%s", l->word[1]);
    return ADJ_SUCCESS;
  }
  if (!strcmp(key, "cores")) return adj_parse_int(l->word[1], 1, 1 << 20, what, &m->cores);
  if (!strcmp(key, "ranks_per_node")) return adj_parse_int(l->word[1], 1, 1 << 20, what, &m->ranks_per_node);
  if (!strcmp(key, "memory")) return adj_parse_bytes(l->word[1], 1, INT64_MAX, what, &m->memory);
  if (!strcmp(key, "baseline")) return adj_parse_bytes(l->word[1], 0, INT64_MAX, what, &m->baseline);
  if (!strcmp(key, "flops")) return adj_parse_real(l->word[1], 1, 1e21, what, &m->flops);
  if (!strcmp(key, "bandwidth")) return adj_parse_real(l->word[1], 1, 1e21, what, &m->bandwidth);
  return adj_error_set(ADJ_ERR_ARG,
                       "%s: unknown key (machine, cores, ranks_per_node, memory, baseline, flops, bandwidth, p2p, "
                       "broadcast, reduce, allreduce, reduce-scatter, allgather)",
                       what);
}

static int adj_machine_line_parse(adj_machine_line *l, char *text, adj_machine *m) {
  text[strcspn(text, "#")] = '\0';
  l->words = 0;
  char *save = NULL;
  for (char *tok = strtok_r(text, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
    ADJ_CHECK(l->words < 5, ADJ_ERR_ARG, "%s:%d: too many values", l->source, l->line);
    l->word[l->words++] = tok;
  }
  if (!l->words) return ADJ_SUCCESS;
  for (int k = 0; k < ADJ_COMM_KINDS; k++)
    if (!strcmp(l->word[0], adj_comm_kind_names[k])) return adj_machine_comm_line(l, (adj_comm_kind)k, m);
  return adj_machine_scalar_line(l, m);
}

int adj_machine_parse(const char *text, const char *source, adj_machine *machine) {
  ADJ_CHECK(text && machine, ADJ_ERR_ARG, "machine: text or output is NULL");
  adj_machine m = {.cores = 1};
  adj_machine_line l = {.source = source ? source : "machine"};
  char *copy = strdup(text);
  ADJ_CHECK(copy, ADJ_ERR_MEM, "%s: out of memory", l.source);
  int status = ADJ_SUCCESS;
  char *line = copy;
  while (!status && line) {
    char *next = strchr(line, '\n');
    if (next) *next++ = '\0';
    l.line++;
    status = adj_machine_line_parse(&l, line, &m);
    line = next;
  }
  free(copy);
  ADJ_CALL(status);
  ADJ_CHECK(m.comm[ADJ_COMM_P2P].ranks >= 1 || m.flops == 0, ADJ_ERR_ARG,
            "%s: no p2p line: every pattern without a line of its own takes p2p's", l.source);
  if (!m.name[0]) snprintf(m.name, sizeof m.name, "%s", l.source);
  *machine = m;
  return ADJ_SUCCESS;
}

int adj_machine_read(const char *path, adj_machine *machine) {
  ADJ_CHECK(path && machine, ADJ_ERR_ARG, "machine: path or output is NULL");
  char *text = NULL;
  ADJ_CALL(adj_file_read_text(path, "machine file", 1 << 20, &text, NULL));
  int status = adj_machine_parse(text, path, machine);
  free(text);
  return status;
}

/* Rates in %.17g: a cached machine reads back the very doubles measured, so
 * a plan from the cache is the measuring run's plan. */
int adj_machine_write(const adj_machine *m, FILE *out) {
  ADJ_CHECK(m && out, ADJ_ERR_ARG, "machine: machine or stream is NULL");
  int bad = fprintf(out, "machine %s\ncores %d\n", m->name[0] ? m->name : "unnamed", m->cores) < 0;
  if (m->ranks_per_node) bad |= fprintf(out, "ranks_per_node %d\n", m->ranks_per_node) < 0;
  if (m->memory) bad |= fprintf(out, "memory %lld\n", (long long)m->memory) < 0;
  bad |= fprintf(out, "baseline %lld\n", (long long)m->baseline) < 0;
  if (m->flops) bad |= fprintf(out, "flops %.17g\n", m->flops) < 0;
  if (m->bandwidth) bad |= fprintf(out, "bandwidth %.17g\n", m->bandwidth) < 0;
  for (int k = 0; k < ADJ_COMM_KINDS; k++)
    if (m->comm[k].ranks >= 2)
      bad |= fprintf(out, "%s %.17g %.17g %d\n", adj_comm_kind_names[k], m->comm[k].alpha, m->comm[k].beta,
                     m->comm[k].ranks) < 0;
  ADJ_CHECK(!bad, ADJ_ERR_IO, "machine: writing failed");
  return ADJ_SUCCESS;
}

/* ---- measurement -------------------------------------------------------------------------- */

/* Buffers of the largest sweep size (doubles) and the per-rank counts a
 * scattering pattern splits them by. */
typedef struct adj_sweep {
  MPI_Comm comm;
  adj_wait_policy policy;
  int q, rank;
  double *send, *recv;
  int *counts, *displs;
} adj_sweep;

static void adj_sweep_split(adj_sweep *s, int count) {
  for (int r = 0, at = 0; r < s->q; r++) {
    s->counts[r] = count / s->q + (r < count % s->q);
    s->displs[r] = at;
    at += s->counts[r];
  }
}

/* One operation of `kind` on `count` doubles, completed. */
static int adj_sweep_once(adj_sweep *s, adj_comm_kind kind, int count) {
  MPI_Request r[2];
  int n = 1;
  switch (kind) {
  case ADJ_COMM_BROADCAST: ADJ_CALL_MPI(MPI_Ibcast(s->send, count, MPI_DOUBLE, 0, s->comm, r)); break;
  case ADJ_COMM_REDUCE:
    ADJ_CALL_MPI(MPI_Ireduce(s->send, s->recv, count, MPI_DOUBLE, MPI_SUM, 0, s->comm, r));
    break;
  case ADJ_COMM_ALLREDUCE:
    ADJ_CALL_MPI(MPI_Iallreduce(s->send, s->recv, count, MPI_DOUBLE, MPI_SUM, s->comm, r));
    break;
  case ADJ_COMM_REDUCE_SCATTER:
    adj_sweep_split(s, count);
    ADJ_CALL_MPI(MPI_Ireduce_scatter(s->send, s->recv, s->counts, MPI_DOUBLE, MPI_SUM, s->comm, r));
    ADJ_CALL(adj_wait_all(1, r, s->policy));
    ADJ_CALL_MPI(MPI_Igatherv(s->recv, s->counts[s->rank], MPI_DOUBLE, s->send, s->counts, s->displs, MPI_DOUBLE, 0,
                              s->comm, r));
    break;
  default:
    adj_sweep_split(s, count);
    ADJ_CALL_MPI(MPI_Iallgatherv(s->send + s->displs[s->rank], s->counts[s->rank], MPI_DOUBLE, s->recv, s->counts,
                                 s->displs, MPI_DOUBLE, s->comm, r));
    break;
  }
  return adj_wait_all(n, r, s->policy);
}

/* The pattern's line: each size's slowest rank's best of `repeats`. */
static int adj_sweep_fit(adj_sweep *s, adj_comm_kind kind, int repeats, adj_comm_fit *fit) {
  double mine[ADJ_PLAN_SIZES], t[ADJ_PLAN_SIZES];
  for (int i = 0; i < ADJ_PLAN_SIZES; i++) {
    mine[i] = INFINITY;
    for (int k = 0; k < repeats; k++) {
      double t0 = MPI_Wtime();
      ADJ_CALL(adj_sweep_once(s, kind, 1 << i));
      mine[i] = fmin(mine[i], MPI_Wtime() - t0);
    }
  }
  MPI_Request r;
  ADJ_CALL_MPI(MPI_Iallreduce(mine, t, ADJ_PLAN_SIZES, MPI_DOUBLE, MPI_MAX, s->comm, &r));
  ADJ_CALL(adj_wait_all(1, &r, s->policy));
  double c0, c1;
  adj_plan_fit_line(t, &c0, &c1);
  /* No call costs more than the smallest one measured: an intercept above it
   * is a fit tilted by a slow large size on a busy host. */
  *fit = (adj_comm_fit){.alpha = c0 > 0 && c0 < t[0] ? c0 : t[0], .beta = c1 > 0 ? c1 : 0, .ranks = s->q};
  return ADJ_SUCCESS;
}

static int adj_machine_sweeps(MPI_Comm comm, int repeats, adj_machine *m) {
  adj_sweep s = {.comm = comm};
  MPI_Comm_size(comm, &s.q);
  MPI_Comm_rank(comm, &s.rank);
  ADJ_CALL(adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &s.policy));
  size_t largest = (size_t)1 << (ADJ_PLAN_SIZES - 1);
  s.send = calloc(largest, sizeof *s.send), s.recv = calloc(largest, sizeof *s.recv);
  s.counts = calloc((size_t)s.q, sizeof *s.counts), s.displs = calloc((size_t)s.q, sizeof *s.displs);
  int status = s.send && s.recv && s.counts && s.displs ? ADJ_SUCCESS
                                                       : adj_error_set(ADJ_ERR_MEM, "machine calibration: out of memory");
  status = adj_status_agree(comm, status, s.policy);
  for (int k = ADJ_COMM_BROADCAST; k < ADJ_COMM_KINDS && !status; k++)
    status = adj_sweep_fit(&s, (adj_comm_kind)k, repeats, &m->comm[k]);
  free(s.send), free(s.recv), free(s.counts), free(s.displs);
  return status;
}

/* What a process holds before its network: MPI after small collectives and
 * the kernels after a first call (the BLAS's buffers, the threads' stacks),
 * the most of any rank.  Measured before the sweeps, whose large messages
 * make MPI keep buffers a network's traffic may never need. */
static int adj_machine_baseline(MPI_Comm comm, int64_t *baseline) {
  adj_description *d = NULL;
  adj_layer *network = NULL;
  ADJ_CALL(adj_description_parse("input 4 8 8\nconv c out=4 k=3 p=1\nrelu\npool k=2 s=2\nfc f out=8\n",
                                 "baseline warm-up", &d));
  adj_network_build_options o = {.dtype = ADJ_FLOAT32, .batch = 2, .logits_only = true};
  int status = adj_network_build(d, NULL, MPI_COMM_SELF, &o, &network);
  adj_layer_timing timing;
  adj_layer_timing_config c = {.round_seconds = 1e-4, .rounds = 1};
  if (!status) status = adj_layer_time(network, &c, &timing);
  adj_layer_destroy(&network);
  adj_description_destroy(&d);
  ADJ_CALL(adj_status_agree(comm, status, ADJ_WAIT_YIELD));
  malloc_trim(0);
  long long mine = adj_resident_bytes(), most = mine;
  ADJ_CALL_MPI(MPI_Allreduce(&mine, &most, 1, MPI_LONG_LONG, MPI_MAX, comm));
  *baseline = most;
  return ADJ_SUCCESS;
}

int adj_machine_calibrate(MPI_Comm comm, int repeats, adj_machine *machine) {
  ADJ_CHECK(machine && repeats >= 1, ADJ_ERR_ARG, "machine calibration: repeats %d must be >= 1 (or no output)",
            repeats);
  adj_machine m = {.cores = (int)sysconf(_SC_NPROCESSORS_ONLN)};
  if (m.cores < 1) m.cores = 1;
  gethostname(m.name, sizeof m.name - 1);
  int size;
  ADJ_CALL_MPI(MPI_Comm_size(comm, &size));
  ADJ_CALL(adj_machine_baseline(comm, &m.baseline));
  if (size >= 2) {
    ADJ_CALL(adj_plan_calibrate(comm, repeats, &m.comm[ADJ_COMM_P2P].alpha, &m.comm[ADJ_COMM_P2P].beta));
    m.comm[ADJ_COMM_P2P].ranks = 2;
    ADJ_CALL(adj_machine_sweeps(comm, repeats, &m));
  }
  ADJ_CALL_MPI(MPI_Bcast(&m, (int)sizeof m, MPI_BYTE, 0, comm));
  *machine = m;
  return ADJ_SUCCESS;
}

/* ---- the host's cache --------------------------------------------------------------------- */

void adj_plan_cache_dir(char *buf, size_t size) {
  const char *explicit = getenv("ADJ_PLAN_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (explicit && *explicit) snprintf(buf, size, "%s", explicit);
  else if (xdg && *xdg) snprintf(buf, size, "%s/adjoin", xdg);
  else if (home && *home) snprintf(buf, size, "%s/.cache/adjoin", home);
  else if (size) buf[0] = '\0';
}

/* Rank 0's attempt at the cached file: 1 when read. */
static int adj_machine_cached(const char *path, adj_machine *m) {
  if (!path[0] || access(path, R_OK)) return 0;
  if (adj_machine_read(path, m)) {
    fprintf(stderr, "adjoin: warning: ignoring the machine cache (%s); measuring again\n", adj_last_error());
    adj_clear_error();
    return 0;
  }
  return 1;
}

/* mkdir -p of dir (changed in place and restored). */
static void adj_plan_make_dirs(char *dir) {
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = '\0';
    adj_plan_make_dirs(dir);
    *slash = '/';
  }
  mkdir(dir, 0755);
}

void adj_plan_make_parent(const char *path) {
  char dir[1100];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash || slash == dir) return;
  *slash = '\0';
  adj_plan_make_dirs(dir);
}

static void adj_machine_save(const char *path, const adj_machine *m) {
  if (!path[0]) return;
  adj_plan_make_parent(path);
  FILE *f = NULL;
  int status = adj_file_open_output(path, "machine cache", &f);
  if (!status) {
    adj_machine_write(m, f);
    status = adj_file_close_output(f, path, "machine cache");
  }
  if (status) {
    fprintf(stderr, "adjoin: warning: %s\n", adj_last_error());
    adj_clear_error();
  }
}

int adj_machine_host(MPI_Comm comm, adj_machine *machine) {
  ADJ_CHECK(machine, ADJ_ERR_ARG, "machine: output is NULL");
  int rank, size;
  ADJ_CALL_MPI(MPI_Comm_rank(comm, &rank));
  ADJ_CALL_MPI(MPI_Comm_size(comm, &size));
  char dir[1024], path[1100] = "";
  adj_plan_cache_dir(dir, sizeof dir);
  if (dir[0]) snprintf(path, sizeof path, "%s/machine-%d", dir, size);
  int found = rank == 0 ? adj_machine_cached(path, machine) : 0;
  ADJ_CALL_MPI(MPI_Bcast(&found, 1, MPI_INT, 0, comm));
  if (found) return MPI_Bcast(machine, (int)sizeof *machine, MPI_BYTE, 0, comm) == MPI_SUCCESS
                        ? ADJ_SUCCESS
                        : adj_error_set(ADJ_ERR_MPI, "machine: broadcast of the cached figures failed");
  ADJ_CALL(adj_machine_calibrate(comm, 10, machine));
  if (rank == 0) adj_machine_save(path, machine);
  return ADJ_SUCCESS;
}

int adj_plan_grow(void **items, int count, int *capacity, size_t size, int first, const char *what) {
  if (count < *capacity) return ADJ_SUCCESS;
  int cap = *capacity ? 2 * *capacity : first;
  void *grown = realloc(*items, size * (size_t)cap);
  ADJ_CHECK(grown, ADJ_ERR_MEM, "%s: out of memory for %d", what, cap);
  *items = grown, *capacity = cap;
  return ADJ_SUCCESS;
}

/* ---- resident memory ------------------------------------------------------------------------ */

static int64_t adj_status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  long long kib = 0;
  size_t n = strlen(key);
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, key, n) && sscanf(line + n, " %lld", &kib) == 1) break;
  fclose(f);
  return (int64_t)kib * 1024;
}

int64_t adj_resident_bytes(void) { return adj_status_kib("VmRSS:"); }
int64_t adj_peak_resident_bytes(void) { return adj_status_kib("VmHWM:"); }
