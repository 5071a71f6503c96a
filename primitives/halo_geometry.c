/* Halo geometry: per dimension and worker, bulk, output, needed input, halos,
 * trims and local padding.  Pure functions of shared arguments (no MPI). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/halo_geometry.h"
#include "adjoin/status.h"
#include "error_impl.h"

struct adj_halo_geometry {
  int rank;
  int64_t input_shape[ADJ_MAX_RANK];
  int64_t output_shape[ADJ_MAX_RANK];
  int parts[ADJ_MAX_RANK];
  int workers;
  adj_halo_kernel kernel;           /* defaults filled in */
  adj_halo_dim *dims[ADJ_MAX_RANK]; /* dims[i][p], p < parts[i] */
  int stages;                       /* kernels applied in a run (1 for one kernel) */
  adj_halo_stage *runs[ADJ_MAX_RANK]; /* runs[i][p * stages + j]; NULL for one kernel */
};

/* One dimension's parameters, validated. */
typedef struct adj_halo_line {
  int dim, parts;
  int64_t n, m, k, s, d, pad_left, pad_right;
  const int64_t *cuts; /* NULL = balanced */
} adj_halo_line;

static int64_t adj_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t adj_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t adj_clamp64(int64_t v, int64_t lo, int64_t hi) { return adj_min64(adj_max64(v, lo), hi); }

/* Zero selects the default 1; negative values are errors. */
static int adj_halo_default_one(int dim, const char *what, int64_t given, int64_t *value) {
  ADJ_CHECK(given >= 0, ADJ_ERR_ARG, "halo geometry: dimension %d has %s %lld (must be >= 1, or 0 for the default 1)",
            dim, what, (long long)given);
  *value = given ? given : 1;
  return ADJ_SUCCESS;
}

static int adj_halo_check_cuts(const adj_halo_line *l) {
  const int64_t *c = l->cuts;
  ADJ_CHECK(c[0] == 0 && c[l->parts] == l->n, ADJ_ERR_ARG,
            "halo geometry: cuts of dimension %d must run from 0 to %lld, got %lld to %lld", l->dim, (long long)l->n,
            (long long)c[0], (long long)c[l->parts]);
  for (int p = 0; p < l->parts; p++)
    ADJ_CHECK(c[p] <= c[p + 1], ADJ_ERR_ARG, "halo geometry: cuts of dimension %d decrease at worker %d (%lld > %lld)",
              l->dim, p, (long long)c[p], (long long)c[p + 1]);
  return ADJ_SUCCESS;
}

/* m = floor((n + pl + pr - d(k-1) - 1) / s) + 1, once the kernel is known to fit.
 * The padded extent and the kernel's span must fit in int64: every later index
 * (needed ranges, local padding) lies between -pl and n + pr. */
static int adj_halo_output_extent(adj_halo_line *l) {
  int64_t padded, span;
  bool overflow = __builtin_add_overflow(l->n, l->pad_left, &padded) ||
                  __builtin_add_overflow(padded, l->pad_right, &padded) ||
                  __builtin_mul_overflow(l->d, l->k - 1, &span) || __builtin_add_overflow(span, 1, &span);
  ADJ_CHECK(!overflow, ADJ_ERR_ARG,
            "halo geometry: dimension %d: extent %lld with padding %lld:%lld, kernel %lld and dilation %lld "
            "overflow 64-bit indices", l->dim, (long long)l->n, (long long)l->pad_left, (long long)l->pad_right,
            (long long)l->k, (long long)l->d);
  if (l->n == 0 && l->pad_left == 0 && l->pad_right == 0) {
    l->m = 0;
    return ADJ_SUCCESS;
  }
  ADJ_CHECK(padded >= span, ADJ_ERR_SIZE,
            "halo geometry: dimension %d: kernel %lld with dilation %lld spans %lld input entries but the padded "
            "input has only %lld (n=%lld, padding %lld:%lld)",
            l->dim, (long long)l->k, (long long)l->d, (long long)span, (long long)padded, (long long)l->n,
            (long long)l->pad_left, (long long)l->pad_right);
  l->m = (padded - span) / l->s + 1;
  return ADJ_SUCCESS;
}

static int adj_halo_line_make(int dim, int64_t n, int parts, const int64_t *cuts, const adj_halo_kernel *kernel,
                              adj_halo_line *l) {
  *l = (adj_halo_line){.dim = dim, .n = n, .parts = parts ? parts : 1, .cuts = cuts};
  ADJ_CHECK(n >= 0, ADJ_ERR_ARG, "halo geometry: dimension %d has extent %lld (must be >= 0)", dim, (long long)n);
  ADJ_CHECK(parts >= 0, ADJ_ERR_ARG, "halo geometry: dimension %d has %d workers (must be >= 1, or 0 for 1)", dim,
            parts);
  ADJ_CALL(adj_halo_default_one(dim, "kernel size", kernel->size[dim], &l->k));
  ADJ_CALL(adj_halo_default_one(dim, "stride", kernel->stride[dim], &l->s));
  ADJ_CALL(adj_halo_default_one(dim, "dilation", kernel->dilation[dim], &l->d));
  l->pad_left = kernel->padding[dim][0];
  l->pad_right = kernel->padding[dim][1];
  ADJ_CHECK(l->pad_left >= 0 && l->pad_right >= 0, ADJ_ERR_ARG,
            "halo geometry: dimension %d has padding %lld:%lld (must be >= 0)", dim, (long long)l->pad_left,
            (long long)l->pad_right);
  if (cuts) ADJ_CALL(adj_halo_check_cuts(l));
  return adj_halo_output_extent(l);
}

/* Local padding: the unclipped needed range [a, b) has b - a entries; the part
 * before 0 and after n is zero padding the local kernel adds itself. */
static void adj_halo_local_padding(const adj_halo_line *l, int64_t a, int64_t b, adj_halo_dim *g) {
  int64_t length = b - a, inside = g->needed[1] - g->needed[0];
  g->padding[0] = adj_clamp64(-a, 0, length);
  g->padding[1] = length - g->padding[0] - inside;
}

/* The input range [needed) that the nonempty output range `output` of one
 * kernel reads, clipped to [0, n), and the zero padding beyond it. */
static void adj_halo_back_map(const adj_halo_line *l, const int64_t *output, adj_halo_dim *g) {
  int64_t a = output[0] * l->s - l->pad_left;
  int64_t b = (output[1] - 1) * l->s - l->pad_left + l->d * (l->k - 1) + 1;
  g->needed[0] = adj_clamp64(a, 0, l->n);
  g->needed[1] = adj_clamp64(b, 0, l->n);
  adj_halo_local_padding(l, a, b, g);
}

/* The bulk of worker p and, for g->output already set, the halos and trims
 * that bring the bulk to g->needed (found by `back_map`, which leaves g->needed
 * empty when the output reads nothing but padding). */
static void adj_halo_bulk_and_halo(const adj_halo_line *l, int p, adj_halo_dim *g, bool computes) {
  int64_t start, extent;
  if (l->cuts) {
    start = l->cuts[p];
    extent = l->cuts[p + 1] - start;
  } else {
    adj_balanced_block(l->n, l->parts, p, &start, &extent);
  }
  g->bulk[0] = start, g->bulk[1] = start + extent;
  /* Nothing to compute, or nothing but padding to read: the bulk is surplus. */
  if (!computes || g->needed[1] == g->needed[0]) {
    g->needed[0] = g->needed[1] = g->bulk[0];
    g->halo[0] = g->halo[1] = g->trim[0] = 0;
    g->trim[1] = g->bulk[1] - g->bulk[0];
    return;
  }
  g->halo[0] = adj_max64(0, g->bulk[0] - g->needed[0]);
  g->halo[1] = adj_max64(0, g->needed[1] - g->bulk[1]);
  g->trim[0] = g->needed[0] - (g->bulk[0] - g->halo[0]);
  g->trim[1] = g->bulk[1] + g->halo[1] - g->needed[1];
}

static void adj_halo_dim_compute(const adj_halo_line *l, int p, adj_halo_dim *g) {
  int64_t start, extent;
  memset(g, 0, sizeof *g);
  adj_balanced_block(l->m, l->parts, p, &start, &extent);
  g->output[0] = start, g->output[1] = start + extent;
  if (extent > 0) adj_halo_back_map(l, g->output, g);
  adj_halo_bulk_and_halo(l, p, g, extent > 0);
}

void adj_halo_geometry_destroy(adj_halo_geometry **geometry) {
  if (!geometry || !*geometry) return;
  for (int i = 0; i < ADJ_MAX_RANK; i++) free((*geometry)->dims[i]), free((*geometry)->runs[i]);
  free(*geometry);
  *geometry = NULL;
}

static int adj_halo_fill_dim(adj_halo_geometry *g, const adj_halo_line *l) {
  g->input_shape[l->dim] = l->n;
  g->output_shape[l->dim] = l->m;
  g->parts[l->dim] = l->parts;
  g->kernel.size[l->dim] = l->k;
  g->kernel.stride[l->dim] = l->s;
  g->kernel.dilation[l->dim] = l->d;
  g->kernel.padding[l->dim][0] = l->pad_left;
  g->kernel.padding[l->dim][1] = l->pad_right;
  g->dims[l->dim] = malloc(sizeof(adj_halo_dim) * (size_t)l->parts);
  ADJ_CHECK(g->dims[l->dim], ADJ_ERR_MEM, "halo geometry: out of memory for %d workers", l->parts);
  for (int p = 0; p < l->parts; p++) adj_halo_dim_compute(l, p, &g->dims[l->dim][p]);
  return ADJ_SUCCESS;
}

int adj_halo_geometry_create(int rank, const int64_t *shape, const int *parts, const int64_t *const *cuts,
                             const adj_halo_kernel *kernel, adj_halo_geometry **geometry) {
  ADJ_CHECK(geometry, ADJ_ERR_ARG, "halo geometry: output geometry pointer is NULL");
  *geometry = NULL;
  ADJ_CHECK(rank >= 1 && rank <= ADJ_MAX_RANK, ADJ_ERR_ARG, "halo geometry: rank %d is outside 1..%d", rank,
            ADJ_MAX_RANK);
  ADJ_CHECK(shape && parts, ADJ_ERR_ARG, "halo geometry: shape and parts must not be NULL");
  static const adj_halo_kernel identity;
  if (!kernel) kernel = &identity;
  adj_halo_line lines[ADJ_MAX_RANK];
  for (int i = 0; i < rank; i++)
    ADJ_CALL(adj_halo_line_make(i, shape[i], parts[i], cuts ? cuts[i] : NULL, kernel, &lines[i]));
  int64_t workers = 1;
  for (int i = 0; i < rank; i++) {
    workers *= lines[i].parts;
    ADJ_CHECK(workers <= INT_MAX, ADJ_ERR_ARG, "halo geometry: the worker grid has more than %d workers", INT_MAX);
  }
  adj_halo_geometry *g = calloc(1, sizeof *g);
  ADJ_CHECK(g, ADJ_ERR_MEM, "halo geometry: out of memory");
  g->rank = rank;
  g->workers = 1;
  g->stages = 1;
  for (int i = 0; i < rank; i++) {
    int status = adj_halo_fill_dim(g, &lines[i]);
    if (status) {
      adj_halo_geometry_destroy(&g);
      return status;
    }
    g->workers *= lines[i].parts;
  }
  *geometry = g;
  return ADJ_SUCCESS;
}

int adj_halo_geometry_create_for(const adj_decomposition *input, const adj_halo_kernel *kernel,
                                 adj_halo_geometry **geometry) {
  ADJ_CHECK(input && geometry, ADJ_ERR_ARG, "halo geometry: input decomposition and output pointer are required");
  const adj_partition *partition = adj_decomposition_partition(input);
  int rank = adj_decomposition_rank(input);
  const int64_t *cuts[ADJ_MAX_RANK];
  for (int i = 0; i < rank; i++) cuts[i] = adj_decomposition_cuts(input, i);
  return adj_halo_geometry_create(rank, adj_decomposition_global_shape(input), adj_partition_shape(partition), cuts,
                                  kernel, geometry);
}

/* ---- runs of kernels (deep halos) ---------------------------------------------------- */

/* Worker p's ranges through the run, last stage first: each stage's output is
 * the input the next stage reads (clipped to that stage's extent), so a stage
 * computes exactly what the rest of the run needs of it.  An output that would
 * read only padding cannot be extended into a local tensor: an error. */
static int adj_halo_run_part(const adj_halo_line *lines, int stages, int p, adj_halo_stage *run, adj_halo_dim *g) {
  const adj_halo_line *last = &lines[stages - 1];
  int64_t start, extent;
  memset(g, 0, sizeof *g);
  adj_balanced_block(last->m, last->parts, p, &start, &extent);
  g->output[0] = start, g->output[1] = start + extent;
  int64_t range[2] = {start, start + extent};
  for (int j = stages - 1; j >= 0; j--) {
    run[j] = (adj_halo_stage){.output = {range[0], range[1]}};
    if (extent == 0) continue;
    adj_halo_back_map(&lines[j], range, g);
    ADJ_CHECK(g->needed[1] > g->needed[0], ADJ_ERR_SIZE,
              "halo geometry: dimension %d: worker %d's outputs %lld..%lld of kernel %d read only padding, so the "
              "run cannot be fused there", lines[j].dim, p, (long long)range[0], (long long)range[1] - 1, j);
    run[j].padding[0] = g->padding[0], run[j].padding[1] = g->padding[1];
    range[0] = g->needed[0], range[1] = g->needed[1];
  }
  adj_halo_bulk_and_halo(&lines[0], p, g, extent > 0);
  return ADJ_SUCCESS;
}

/* Dimension `dim` of a run: every stage's line (stage j's input extent is
 * stage j-1's output extent), then every worker's ranges. */
static int adj_halo_fill_run_dim(adj_halo_geometry *g, int dim, const int64_t *cuts, int stages,
                                 const adj_halo_kernel *kernels) {
  adj_halo_line lines[ADJ_MAX_RUN_STAGES];
  int64_t n = g->input_shape[dim];
  for (int j = 0; j < stages; j++) {
    ADJ_CALL(adj_halo_line_make(dim, n, g->parts[dim], j == 0 ? cuts : NULL, &kernels[j], &lines[j]));
    n = lines[j].m;
  }
  g->output_shape[dim] = n;
  int parts = g->parts[dim];
  g->runs[dim] = malloc(sizeof(adj_halo_stage) * (size_t)parts * (size_t)stages);
  ADJ_CHECK(g->runs[dim], ADJ_ERR_MEM, "halo geometry: out of memory for a run of %d kernels", stages);
  for (int p = 0; p < parts; p++)
    ADJ_CALL(adj_halo_run_part(lines, stages, p, &g->runs[dim][p * stages], &g->dims[dim][p]));
  return ADJ_SUCCESS;
}

int adj_halo_geometry_create_run(const adj_decomposition *input, int count, const adj_halo_kernel *kernels,
                                 adj_halo_geometry **geometry) {
  ADJ_CHECK(geometry, ADJ_ERR_ARG, "halo geometry: output geometry pointer is NULL");
  *geometry = NULL;
  ADJ_CHECK(count >= 1 && count <= ADJ_MAX_RUN_STAGES, ADJ_ERR_ARG,
            "halo geometry: a run of %d kernels (must be 1..%d)", count, ADJ_MAX_RUN_STAGES);
  ADJ_CHECK(input && kernels, ADJ_ERR_ARG, "halo geometry: a run needs an input decomposition and its kernels");
  adj_halo_geometry *g;
  ADJ_CALL(adj_halo_geometry_create_for(input, &kernels[0], &g));
  g->stages = count;
  int status = ADJ_SUCCESS;
  for (int i = 0; i < g->rank && !status; i++)
    status = adj_halo_fill_run_dim(g, i, adj_decomposition_cuts(input, i), count, kernels);
  if (status) adj_halo_geometry_destroy(&g);
  *geometry = g;
  return status;
}

int adj_halo_geometry_stages(const adj_halo_geometry *g) { return g->stages; }

adj_halo_stage adj_halo_geometry_stage(const adj_halo_geometry *g, int stage, int dim, int part) {
  if (g->runs[dim]) return g->runs[dim][part * g->stages + stage];
  const adj_halo_dim *d = &g->dims[dim][part];
  return (adj_halo_stage){.output = {d->output[0], d->output[1]}, .padding = {d->padding[0], d->padding[1]}};
}

int adj_halo_geometry_rank(const adj_halo_geometry *g) { return g->rank; }
const int64_t *adj_halo_geometry_input_shape(const adj_halo_geometry *g) { return g->input_shape; }
const int64_t *adj_halo_geometry_output_shape(const adj_halo_geometry *g) { return g->output_shape; }
const int *adj_halo_geometry_parts(const adj_halo_geometry *g) { return g->parts; }
int adj_halo_geometry_workers(const adj_halo_geometry *g) { return g->workers; }
const adj_halo_kernel *adj_halo_geometry_kernel(const adj_halo_geometry *g) { return &g->kernel; }

const adj_halo_dim *adj_halo_geometry_dim(const adj_halo_geometry *g, int dim, int part) { return &g->dims[dim][part]; }

void adj_halo_geometry_local(const adj_halo_geometry *g, const int *coords, adj_halo_local *local) {
  memset(local, 0, sizeof *local);
  int rank = g->rank;
  local->rank = local->input.rank = local->bulk.rank = local->kernel_input.rank = local->output.rank = rank;
  if (!coords) return;
  for (int i = 0; i < rank; i++) {
    const adj_halo_dim *d = &g->dims[i][coords[i]];
    int64_t bulk = d->bulk[1] - d->bulk[0];
    local->shape[i] = bulk + d->halo[0] + d->halo[1];
    local->input.start[i] = d->bulk[0] - d->halo[0];
    local->input.extent[i] = local->shape[i];
    local->bulk.start[i] = d->halo[0];
    local->bulk.extent[i] = bulk;
    local->kernel_input.start[i] = d->trim[0];
    local->kernel_input.extent[i] = local->shape[i] - d->trim[0] - d->trim[1];
    local->padding[i][0] = d->padding[0];
    local->padding[i][1] = d->padding[1];
    local->output.start[i] = d->output[0];
    local->output.extent[i] = d->output[1] - d->output[0];
  }
}
