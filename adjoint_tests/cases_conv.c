/* Battery cases for the distributed convolution layer, and the case machinery
 * the tests t310-t312 share (conv_cases.h).
 *
 * The table covers the paper's three forms: feature-space partitions
 * (P_ci = P_co = 1: halo exchange and a weight broadcast, LeNet-5's C1 and
 * C3), channel partitions (spatial extent 1: input broadcast over P_co,
 * output sum-reduce over P_ci) and the general form with both; 1-D to 3-D,
 * asymmetric padding, strides and dilations, more spatial workers than
 * outputs (empty blocks, blocks that read only padding), with and without
 * bias, on the first ranks or scattered over the communicator.  Each case is
 * the Jacobian dot-product test of adj_dottest_layer (input and parameter
 * perturbations at once). */
#include <stdio.h>
#include <string.h>

#include "battery.h"
#include "conv_cases.h"
#include "error_impl.h"
#include "adjoin/layer_dottest.h"

/* Shorthands so the table reads as a table: window W(dims, kernel, stride,
 * dilation, padding left, padding right). */
#define W(d, k, s, dl, pl, pr)                                                                    \
  {.spatial_dims = d, .kernel = k, .stride = s, .dilation = dl, .padding_left = pl, .padding_right = pr}
#define V(...) {__VA_ARGS__}
#define FIRST ADJ_CONV_RANKS_FIRST
#define SCAT ADJ_CONV_RANKS_SCATTERED

const adj_conv_case adj_conv_cases[] = {
    /* feature-space: LeNet-5 C1 (k5, pad 2) and C3 (k5, no padding) */
    {2, 1, 6, V(16, 16), W(2, V(5, 5), V(1, 1), V(1, 1), V(2, 2), V(2, 2)), false, 1, 1, V(2, 2), FIRST, 1},
    {2, 6, 16, V(7, 7), W(2, V(5, 5), V(1, 1), V(1, 1), V(0, 0), V(0, 0)), false, 1, 1, V(2, 1), SCAT, 1},
    {2, 3, 4, V(13), W(1, V(3), V(2), V(2), V(1), V(2)), false, 1, 1, V(3), SCAT, 1},
    {1, 2, 3, V(5, 6, 4), W(3, V(3, 3, 3), V(1, 1, 1), V(1, 1, 1), V(1, 1, 1), V(1, 1, 1)), false, 1, 1,
     V(2, 1, 2), FIRST, 1},
    /* more workers than outputs: empty blocks; k1 pad 2 makes blocks of padding only */
    {2, 2, 2, V(4), W(1, V(3), V(2), V(1), V(0), V(0)), false, 1, 1, V(4), SCAT, 1},
    {1, 2, 3, V(3), W(1, V(1), V(1), V(1), V(2), V(2)), false, 1, 1, V(4), FIRST, 1},
    /* channel partitions: input channels only (sum-reduce), output channels only
     * (broadcast), both */
    {2, 5, 3, V(6, 5), W(2, V(3, 3), V(1, 1), V(1, 1), V(1, 1), V(1, 1)), false, 3, 1, V(1, 1), SCAT, 1},
    {2, 3, 4, V(6, 5), W(2, V(2, 3), V(2, 1), V(1, 1), V(0, 1), V(1, 0)), false, 1, 2, V(1, 1), FIRST, 1},
    {2, 2, 5, V(9), W(1, V(4), V(1), V(1), V(0), V(0)), true, 2, 2, V(1), FIRST, 1},
    /* the general form */
    {2, 3, 4, V(9, 8), W(2, V(3, 2), V(1, 2), V(2, 1), V(0, 1), V(2, 0)), false, 2, 2, V(2, 1), SCAT, 1},
    {1, 4, 3, V(11), W(1, V(5), V(1), V(1), V(2), V(2)), false, 2, 1, V(3), SCAT, 1},
    {2, 2, 2, V(6, 5, 7), W(3, V(2, 3, 1), V(2, 1, 1), V(1, 2, 1), V(1, 0, 2), V(0, 2, 1)), true, 2, 1,
     V(1, 2, 1), FIRST, 1},
    {1, 2, 2, V(7), W(1, V(3), V(1), V(1), V(1), V(1)), false, 2, 1, V(1), SCAT, 1},
    /* domain x batch: LeNet-5's C1 and C3 on 2 x 2 and 4 x 2 (space x batch,
     * one empty spatial block), uneven batch blocks, and batch with channels */
    {4, 1, 6, V(16, 16), W(2, V(5, 5), V(1, 1), V(1, 1), V(2, 2), V(2, 2)), false, 1, 1, V(2, 1), FIRST, 2},
    {5, 6, 16, V(7, 7), W(2, V(5, 5), V(1, 1), V(1, 1), V(0, 0), V(0, 0)), false, 1, 1, V(4, 1), SCAT, 2},
    {4, 2, 3, V(9), W(1, V(3), V(1), V(1), V(1), V(1)), false, 1, 1, V(2), SCAT, 3},
    {3, 3, 4, V(6, 5), W(2, V(3, 3), V(1, 1), V(1, 1), V(1, 1), V(1, 1)), false, 2, 2, V(1, 1), SCAT, 2},
};
const int adj_conv_case_count = (int)(sizeof adj_conv_cases / sizeof adj_conv_cases[0]);

static int adj_one(int v) { return v ? v : 1; }

int adj_conv_case_workers(const adj_conv_case *c) {
  int workers = adj_one(c->p_n) * adj_one(c->p_ci) * adj_one(c->p_co);
  for (int d = 0; d < c->window.spatial_dims; d++) workers *= adj_one(c->parts[d]);
  return workers;
}

/* "(3,2)" from the first dims entries of v. */
static void adj_conv_tuple(char *buf, size_t size, int dims, const int64_t *v) {
  adj_battery_format_int64s(buf, size, dims, v);
  buf[0] = '(';
  buf[strlen(buf) - 1] = ')';
}

void adj_conv_case_format(char *buf, size_t size, const adj_conv_case *c) {
  const adj_window_geometry *g = &c->window;
  int d = g->spatial_dims, parts[ADJ_MAX_SPATIAL_DIMS];
  int64_t shape[2 + ADJ_MAX_SPATIAL_DIMS] = {c->n, c->c_in}, s[3], dl[3];
  for (int i = 0; i < d; i++) {
    shape[2 + i] = c->in[i];
    parts[i] = adj_one(c->parts[i]);
    s[i] = g->stride[i] ? g->stride[i] : 1;
    dl[i] = g->dilation[i] ? g->dilation[i] : 1;
  }
  char x[64], k[32], st[32], di[32], pl[32], pr[32], p[32];
  adj_battery_format_int64s(x, sizeof x, 2 + d, shape);
  adj_conv_tuple(k, sizeof k, d, g->kernel), adj_conv_tuple(st, sizeof st, d, s), adj_conv_tuple(di, sizeof di, d, dl);
  adj_battery_format_int64s(pl, sizeof pl, d, g->padding_left);
  adj_battery_format_int64s(pr, sizeof pr, d, g->padding_right);
  adj_battery_format_ints(p, sizeof p, d, parts);
  snprintf(buf, size, "%dd x%s co%lld%s k%s s%s d%s pad%s%s | Pn%d Pci%d Pco%d %s %s", d, x, (long long)c->c_out,
           c->no_bias ? " nobias" : "", k, st, di, pl, pr, adj_one(c->p_n), adj_one(c->p_ci), adj_one(c->p_co), p,
           c->ranks == ADJ_CONV_RANKS_SCATTERED ? "scattered" : "first");
}

void adj_conv_case_config(const adj_conv_case *c, MPI_Comm comm, adj_dtype dtype, adj_conv_case_ranks *ranks,
                          adj_conv_layer_config *config) {
  int d = c->window.spatial_dims, size;
  MPI_Comm_size(comm, &size);
  *config = (adj_conv_layer_config){.comm = comm,
                                    .dtype = dtype,
                                    .window = c->window,
                                    .out_channels = c->c_out,
                                    .no_bias = c->no_bias,
                                    .input_shape = {c->n, c->c_in},
                                    .input_parts = {adj_one(c->p_n), adj_one(c->p_ci)},
                                    .out_channel_parts = adj_one(c->p_co)};
  for (int i = 0; i < d; i++) {
    config->input_shape[2 + i] = c->in[i];
    config->input_parts[2 + i] = adj_one(c->parts[i]);
  }
  if (c->ranks != ADJ_CONV_RANKS_SCATTERED) return;
  for (int k = 0; k < size && k < ADJ_CONV_CASE_MAX_WORKERS; k++) {
    ranks->input[k] = (k + 1) % size;
    ranks->work[k] = size - 1 - k;
    ranks->output[k] = (k + 2) % size;
  }
  config->input_ranks = ranks->input;
  config->work_ranks = ranks->work;
  config->output_ranks = ranks->output;
}

/* ---- random cases ---------------------------------------------------------------------- */

static int64_t adj_conv_pick(adj_rng *rng, int64_t lo, int64_t hi) {
  return lo + (int64_t)adj_rng_below(rng, (uint64_t)(hi - lo + 1));
}

static int64_t adj_min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Whether some output of spatial dimension i reads a real input entry (with
 * enough padding and stride every window can fall on padding, and the layer
 * is then the constant bias: valid, but useless for a Taylor test). */
static bool adj_conv_reads_input(const adj_window_geometry *g, int i, int64_t in) {
  int64_t m = (in + g->padding_left[i] + g->padding_right[i] - g->dilation[i] * (g->kernel[i] - 1) - 1) /
                  g->stride[i] + 1;
  for (int64_t o = 0; o < m; o++)
    for (int64_t k = 0; k < g->kernel[i]; k++) {
      int64_t at = o * g->stride[i] - g->padding_left[i] + k * g->dilation[i];
      if (at >= 0 && at < in) return true;
    }
  return false;
}

/* Kernel, stride, dilation and padding of spatial dimension i, and an input
 * extent from the smallest the kernel fits in (and some output reads) to a
 * few entries more. */
static void adj_conv_random_dim(adj_rng *rng, adj_conv_case *c, int i) {
  adj_window_geometry *g = &c->window;
  g->kernel[i] = adj_conv_pick(rng, 1, 5);
  g->stride[i] = adj_conv_pick(rng, 1, 2);
  g->dilation[i] = adj_conv_pick(rng, 1, 2);
  g->padding_left[i] = adj_conv_pick(rng, 0, 2);
  g->padding_right[i] = adj_conv_pick(rng, 0, 2);
  int64_t span = g->dilation[i] * (g->kernel[i] - 1) + 1;
  int64_t smallest = span - g->padding_left[i] - g->padding_right[i];
  c->in[i] = (smallest > 1 ? smallest : 1) + adj_conv_pick(rng, 0, g->spatial_dims == 3 ? 3 : 6);
  while (!adj_conv_reads_input(g, i, c->in[i])) c->in[i]++;
}

void adj_conv_case_random_problem(adj_rng *rng, adj_conv_case *c) {
  memset(c, 0, sizeof *c);
  int d = (int)adj_conv_pick(rng, 1, 3);
  c->window.spatial_dims = d;
  c->n = adj_conv_pick(rng, 1, 3);
  c->c_in = adj_conv_pick(rng, 1, 4);
  c->c_out = adj_conv_pick(rng, 1, 4);
  c->no_bias = adj_rng_below(rng, 4) == 0;
  for (int i = 0; i < d; i++) adj_conv_random_dim(rng, c, i);
}

/* A factor in [1, limit]: the largest with probability 1/2, so most cases
 * use most of the workers they may. */
static int adj_conv_factor(adj_rng *rng, int64_t limit) {
  return (int)(adj_rng_below(rng, 2) ? limit : adj_conv_pick(rng, 1, limit));
}

void adj_conv_case_random_partition(adj_rng *rng, int max_workers, adj_conv_form form, adj_conv_case *c) {
  /* The general form leaves the spatial dimensions a share of the workers. */
  int budget = max_workers, share = form == ADJ_CONV_GENERAL || form == ADJ_CONV_BATCH ? 2 : 1;
  c->p_n = c->p_co = c->p_ci = 1;
  if (form == ADJ_CONV_BATCH) {
    c->p_n = adj_conv_factor(rng, adj_min64(c->n, budget / share > 1 ? budget / share : 1));
    budget /= c->p_n;
  }
  if (form == ADJ_CONV_CHANNEL || form == ADJ_CONV_GENERAL) {
    c->p_co = adj_conv_factor(rng, adj_min64(c->c_out, budget / share > 1 ? budget / share : 1));
    budget /= c->p_co;
    c->p_ci = adj_conv_factor(rng, adj_min64(c->c_in, budget / share > 1 ? budget / share : 1));
    budget /= c->p_ci;
  }
  for (int i = 0; i < c->window.spatial_dims; i++) {
    c->parts[i] = form == ADJ_CONV_CHANNEL ? 1 : adj_conv_factor(rng, adj_min64(3, budget));
    budget /= c->parts[i];
  }
  c->ranks = (adj_conv_rank_style)adj_rng_below(rng, 2);
}

void adj_conv_case_random(adj_rng *rng, int max_workers, adj_conv_case *c) {
  adj_conv_case_random_problem(rng, c);
  adj_conv_case_random_partition(rng, max_workers, (adj_conv_form)adj_rng_below(rng, ADJ_CONV_FORMS), c);
}

/* ---- the battery ------------------------------------------------------------------------- */

static int adj_conv_run(MPI_Comm comm, const adj_battery_case *b, adj_dottest_result *r) {
  adj_conv_case_ranks ranks;
  adj_conv_layer_config config;
  adj_conv_case_config(&adj_conv_cases[b->params[0]], comm, b->dtype, &ranks, &config);
  adj_layer *layer;
  ADJ_CALL(adj_conv_layer_create(&config, &layer));
  int status = adj_dottest_layer(layer, b->seed + 310 + (uint64_t)b->params[0], r);
  adj_layer_destroy(&layer);
  return status;
}

static int adj_conv_add(adj_battery *b, int index, adj_dtype dtype) {
  const adj_conv_case *c = &adj_conv_cases[index];
  adj_battery_case bc = {.dtype = dtype, .ranks = adj_conv_case_workers(c), .is_layer = 1, .run = adj_conv_run};
  bc.params[0] = index;
  int d = c->window.spatial_dims, parts[ADJ_MAX_SPATIAL_DIMS];
  int64_t shape[2 + ADJ_MAX_SPATIAL_DIMS] = {c->n, c->c_in};
  for (int i = 0; i < d; i++) parts[i] = adj_one(c->parts[i]), shape[2 + i] = c->in[i];
  char spatial[32];
  adj_battery_format_ints(spatial, sizeof spatial, d, parts);
  snprintf(bc.op, sizeof bc.op, "conv_layer");
  char batch[16] = "";
  if (adj_one(c->p_n) > 1) snprintf(batch, sizeof batch, "n%d ", c->p_n);
  snprintf(bc.partitions, sizeof bc.partitions, "%sco%d ci%d %s%s", batch, adj_one(c->p_co), adj_one(c->p_ci), spatial,
           c->ranks == ADJ_CONV_RANKS_SCATTERED ? " scattered" : "");
  adj_battery_format_int64s(bc.shape, sizeof bc.shape, 2 + d, shape);
  snprintf(bc.name, sizeof bc.name, "conv_layer/%d/n%dco%dci%d%s/%s", index, adj_one(c->p_n), adj_one(c->p_co),
           adj_one(c->p_ci), spatial, adj_dtype_name(dtype));
  return adj_battery_add(b, &bc);
}

int adj_battery_add_conv(adj_battery *b) {
  for (int i = 0; i < adj_conv_case_count; i++) {
    ADJ_CALL(adj_conv_add(b, i, ADJ_FLOAT64));
    ADJ_CALL(adj_conv_add(b, i, ADJ_FLOAT32));
  }
  return ADJ_SUCCESS;
}
