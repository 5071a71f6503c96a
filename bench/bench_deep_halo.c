/* Benchmark: a run of convolution/pool layers fused into one deep halo layer
 * (deep_halo_layer.h) against the same layers one by one, on the same
 * partition in the same run: forward and forward + backward time per batch,
 * the ratio layers/fused (above 1: fusing saves time), and the halo messages
 * each sends per forward (summed over the ranks).
 *
 *   mpiexec -n 4 build/bench/bench-deep-halo [--seconds 0.3] [--trials 5] [--batch 8]
 *
 * Runs (float32, the training dtype):
 *   lenet    (B, 1, 28, 28): conv 1->6 k5 p2, max-pool 2, ReLU, conv 6->16 k5,
 *            max-pool 2, ReLU (LeNet-5's convolution blocks)
 *   256x256  (B, 3, 256, 256): conv 3->8 k3 p1, ReLU, conv 8->8 k3 p1, ReLU,
 *            max-pool 2, conv 8->16 k3 p1, ReLU
 * on a P x 1 grid of image rows and on the most square P0 x P1 grid of the
 * ranks.  Timing alternates the two versions trial by trial and keeps the
 * best of each; a trial repeats the step for about --seconds (slowest rank).  Before timing,
 * the two outputs are compared (relative difference printed). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"
#include "adjoin/pool_layer.h"
#include "bench_host.h"

typedef struct bench_options {
  double seconds;
  int trials;
  int64_t batch;
} bench_options;

typedef struct stage {
  char kind; /* 'c' conv (k, pad), 'm' max pool 2/2, 'r' ReLU */
  int64_t channels, k, pad;
} stage;

typedef struct run {
  const char *name;
  int64_t channels, side;
  int count;
  stage stages[8];
} run;

static const run runs[] = {
    {"lenet", 1, 28, 6, {{'c', 6, 5, 2}, {'m', 0, 2, 0}, {'r', 0, 0, 0}, {'c', 16, 5, 0}, {'m', 0, 2, 0}, {'r', 0, 0, 0}}},
    {"256x256", 3, 256, 7,
     {{'c', 8, 3, 1}, {'r', 0, 0, 0}, {'c', 8, 3, 1}, {'r', 0, 0, 0}, {'m', 0, 2, 0}, {'c', 16, 3, 1}, {'r', 0, 0, 0}}},
};

static void die_on(int status, const char *what) {
  if (!status) return;
  fprintf(stderr, "bench-deep-halo: %s: %s\n", what, adj_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static int create_stage(const stage *s, const adj_decomposition *in, adj_layer **layer) {
  const adj_partition *p = adj_decomposition_partition(in);
  adj_window_geometry w = {.spatial_dims = 2, .kernel = {s->k, s->k}, .padding_left = {s->pad, s->pad},
                           .padding_right = {s->pad, s->pad}};
  if (s->kind == 'c') {
    int ranks[1024];
    for (int i = 0; i < adj_partition_size(p); i++) ranks[i] = adj_partition_rank_of_index(p, i);
    adj_conv_layer_config c = {.comm = adj_partition_base_comm(p), .dtype = ADJ_FLOAT32, .window = w,
                               .out_channels = s->channels, .input = in, .work_ranks = ranks, .output_ranks = ranks};
    return adj_conv_layer_create(&c, layer);
  }
  if (s->kind == 'm') {
    w.stride[0] = w.stride[1] = 2;
    return adj_pool_layer_create(&(adj_pool_layer_config){.dtype = ADJ_FLOAT32, .kind = ADJ_POOL_MAX, .input = in,
                                                          .window = w},
                                 layer);
  }
  return adj_activation_layer_create(
      &(adj_activation_layer_config){.dtype = ADJ_FLOAT32, .input = in, .activation = {ADJ_RELU, 0}}, layer);
}

/* The run layer by layer (a network) and fused, on `input`, with the same parameters. */
static void build(const run *r, const adj_decomposition *input, adj_layer **net, adj_layer **fused) {
  adj_layer *layers[8];
  const adj_decomposition *in = input;
  for (int j = 0; j < r->count; j++) {
    die_on(create_stage(&r->stages[j], in, &layers[j]), "layer");
    in = adj_layer_output_layout(layers[j]);
  }
  die_on(adj_network_create(r->name, r->count, layers, net), "network");
  die_on(adj_network_init_uniform(*net, 7), "init");
  /* Fused after the initialisation: it copies the layers' parameter values. */
  die_on(adj_deep_halo_layer_create(&(adj_deep_halo_config){.count = r->count, .layers = layers}, fused), "fuse");
  for (int j = 0; j < r->count; j++) adj_layer_destroy(&layers[j]);
}

typedef struct buffers {
  adj_tensor x, y, dy, dx;
} buffers;

static void buffers_make(adj_layer *layer, buffers *b) {
  adj_layer_create_input(layer, &b->x), adj_layer_create_input(layer, &b->dx);
  adj_layer_create_output(layer, &b->y), adj_layer_create_output(layer, &b->dy);
  adj_rng *rng;
  adj_rng_create(11, &rng);
  adj_rng_fill_uniform(rng, &b->x, 0, 1);
  adj_rng_fill_uniform(rng, &b->dy, -1, 1);
  adj_rng_destroy(&rng);
}

static void buffers_free(buffers *b) {
  adj_tensor_destroy(&b->x), adj_tensor_destroy(&b->y), adj_tensor_destroy(&b->dy), adj_tensor_destroy(&b->dx);
}

static void step(adj_layer *layer, buffers *b, bool backward) {
  die_on(adj_layer_forward(layer, &b->x, &b->y), "forward");
  if (backward) die_on(adj_layer_backward(layer, &b->dy, &b->dx), "backward");
}

static double slowest_since(double start) {
  return bench_max(MPI_COMM_WORLD, MPI_Wtime() - start);
}

/* Seconds per step over one trial of about `seconds`: one timed step sets the
 * repeat count, the same on every rank (every step is collective). */
static double trial(adj_layer *layer, buffers *b, bool backward, double seconds) {
  bench_barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  step(layer, b, backward);
  double once = slowest_since(start);
  int reps = once > 0 ? (int)fmin(1e6, fmax(1, seconds / once)) : 1;
  bench_barrier(MPI_COMM_WORLD);
  start = MPI_Wtime();
  for (int i = 0; i < reps; i++) step(layer, b, backward);
  return slowest_since(start) / reps;
}

static uint64_t messages(adj_layer *net, adj_layer *fused, bool of_fused) {
  uint64_t mine = 0, all = 0;
  adj_op_counters c;
  if (of_fused) {
    adj_deep_halo_layer_counters(fused, &c);
    mine = c.messages_sent;
  } else {
    for (int j = 0; j < adj_network_depth(net); j++) {
      adj_layer *l = adj_network_layer(net, j);
      adj_conv_counters cc;
      if (!adj_conv_layer_counters(l, &cc)) mine += cc.halo.messages_sent;
      else if (!adj_pool_layer_halo_counters(l, &c)) mine += c.messages_sent;
    }
  }
  MPI_Allreduce(&mine, &all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

static double max_rel_diff(const adj_tensor *a, const adj_tensor *b) {
  double d = 0, m = 1, all[2];
  for (int64_t i = 0; i < adj_tensor_volume(a); i++) {
    d = fmax(d, fabs(adj_tensor_get(a, i) - adj_tensor_get(b, i)));
    m = fmax(m, fabs(adj_tensor_get(b, i)));
  }
  double mine[2] = {d, -m};
  MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return all[0] / -all[1];
}

static void bench(const run *r, const int *grid, const bench_options *o, int me) {
  int parts[4] = {1, 1, grid[0], grid[1]};
  adj_decomposition *input;
  die_on(adj_decomposition_create_on_first_ranks(MPI_COMM_WORLD, 4, parts,
                                                 (const int64_t[4]){o->batch, r->channels, r->side, r->side}, &input),
         "input layout");
  adj_layer *net, *fused;
  build(r, input, &net, &fused);
  buffers bn, bf;
  buffers_make(net, &bn), buffers_make(fused, &bf);
  step(net, &bn, false), step(fused, &bf, false);
  double diff = max_rel_diff(&bf.y, &bn.y);
  for (int j = 0; j < adj_network_depth(net); j++) {
    adj_conv_layer_reset_counters(adj_network_layer(net, j));
    adj_pool_layer_reset_counters(adj_network_layer(net, j));
  }
  adj_deep_halo_layer_reset_counters(fused);
  step(net, &bn, false), step(fused, &bf, false);
  uint64_t m_net = messages(net, fused, false), m_fused = messages(net, fused, true);
  for (int backward = 0; backward <= 1; backward++) {
    double best_net = INFINITY, best_fused = INFINITY;
    for (int k = 0; k < o->trials; k++) {
      best_net = fmin(best_net, trial(net, &bn, backward, o->seconds));
      best_fused = fmin(best_fused, trial(fused, &bf, backward, o->seconds));
    }
    if (me == 0)
      printf("%-8s %dx%d  %-16s layers %9.3f ms  fused %9.3f ms  ratio layers/fused %.3f  halo messages/forward "
             "%llu vs %llu  max rel diff %.1e\n",
             r->name, grid[0], grid[1], backward ? "forward+backward" : "forward", best_net * 1e3, best_fused * 1e3,
             best_net / best_fused, (unsigned long long)m_net, (unsigned long long)m_fused, diff);
  }
  buffers_free(&bn), buffers_free(&bf);
  adj_layer_destroy(&net), adj_layer_destroy(&fused);
  adj_decomposition_destroy(&input);
}

static const char usage[] = "usage: mpiexec -n P bench-deep-halo [--seconds S] [--trials N] [--batch B]";

/* The options into *o; BENCH_RUN, or the status to exit with. */
static int parse(int argc, char **argv, bool say, bench_options *o) {
  long long trials = 5, batch = 8;
  *o = (bench_options){.seconds = 0.3};
  const bench_option options[] = {{"--seconds", BENCH_REAL, 0, 60, &o->seconds},
                                  {"--trials", BENCH_COUNT, 1, 1000, &trials},
                                  {"--batch", BENCH_COUNT, 1, 1 << 20, &batch}};
  int status = bench_parse_arguments("bench-deep-halo", usage, argc, argv, options, 3, 0, NULL, NULL, say);
  o->trials = (int)trials, o->batch = batch;
  return status;
}

int main(int argc, char **argv) {
  int me, size;
  if (adj_init(&argc, &argv, &me, &size)) {
    fprintf(stderr, "bench-deep-halo: %s\n", adj_last_error());
    return 1;
  }
  bench_options o;
  int status = parse(argc, argv, me == 0, &o);
  if (status != BENCH_RUN) {
    adj_finalize();
    return status;
  }
  char cpu[128];
  bench_cpu_model(cpu, sizeof cpu);
  if (me == 0)
    printf("bench-deep-halo: %d ranks, batch %lld, float32, best of %d trials of ~%.2f s; cpu %s, kernels %s\n",
           size, (long long)o.batch, o.trials, o.seconds, cpu, adj_kernels_isa());
  int square = 1;
  for (int f = 1; f * f <= size; f++)
    if (size % f == 0) square = f;
  const int grids[2][2] = {{size, 1}, {size / square, square}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
    for (int g = 0; g < (square > 1 ? 2 : 1); g++) bench(&runs[i], grids[g], &o, me);
  adj_finalize();
  return 0;
}
