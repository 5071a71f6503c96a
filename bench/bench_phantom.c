/* bench-phantom: phantom parallelism (PP) against tensor parallelism (TP) on
 * the ranks of the run (paper 003), and against adjoin's own model-parallel
 * layer: the 1.5D affine layer (affine15_layer.h) on a P_r = p, P_c = 1 grid.
 *
 * Step mode (default): a stack of L layers of width n, ReLU between, forward
 * and backward of one batch; TP, 1.5D and PP at each k run in turns (TP,
 * 1.5D, PP k1, PP k2, ..., TP, ...) so shared-machine load hits every
 * configuration alike.  Prints per configuration the step time (min / median
 * / max over rounds, the slowest rank per round), its ratios to TP and to
 * 1.5D, the counted bytes per rank and step and their ratios beside the
 * model's (Table II's collectives as the counters count them; the input
 * gradient is computed, so every layer runs all of its collectives), the
 * measured exposed communication t_comm and t_comp = step - t_comm, and the
 * energy per step e = A t_comp + B t_comm of all ranks together, measured
 * and modelled (Table III for t_comm).  TP's and PP's t_comm is the time
 * inside their collectives during the step; the 1.5D layer's operators are
 * blocking, so its t_comm is the time of its input all-gathers applied
 * alone (forward and adjoint) right after the step, on buffers of the
 * step's shapes.
 *
 *   mpiexec -n 4 bench-phantom [--n 4096] [--layers 2] [--batch 64] [--k 8,16,64]
 *                              [--rounds 7] [--A 560] [--B 90]
 *
 * Teacher mode (--teacher): the paper's experiment scaled down.  Data
 * y = relu(W relu(x)) with a fixed standard Gaussian W (n x n) scaled by
 * 1/sqrt(n) and x standard normal; models of L layers (each layer followed
 * by ReLU) trained with Adam on MSE until the mean training loss of the last
 * 10 batches falls below --target times the loss of the zero predictor (the
 * same threshold for every run), or --max-steps.  Per run: steps and wall time to the target,
 * counted bytes, t_comp and t_comm, energy; a CSV of loss against time and
 * an SVG plot of all runs, and a Table-I-like summary.
 *
 *   mpiexec -n 2 bench-phantom --teacher [--n 512] [--k 2,4,8] [--csv FILE]
 *
 * float32 throughout (the paper's runs are float32). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"
#include "adjoin/affine.h"
#include "bench_host.h"

enum { MAX_K = 8, MAX_ROUNDS = 64, MAX_LAYERS = 16 };

typedef struct bench_args {
  int64_t n, batch;
  int layers, rounds, n_k, max_steps;
  int64_t k[MAX_K];
  double p_busy, p_idle, target, lr;
  bool teacher;
  const char *csv;
} bench_args;

/* --k: k1,k2,... (parse.h), each 1 to 2^30. */
static int parse_ks(const char *text, bench_args *a) {
  return adj_parse_int64_list(text, ',', MAX_K, 1, 1 << 30, "--k", a->k, &a->n_k);
}

static const char usage[] =
    "usage: mpiexec -n P bench-phantom [--n N] [--layers L] [--batch B] [--k K1,K2,...] [--rounds R] [--A W] [--B W]\n"
    "       mpiexec -n P bench-phantom --teacher [--n N] [--k K1,K2,...] [--target F] [--lr R] [--max-steps S]\n"
    "                                  [--csv FILE]";

/* The command line into *a (rank 0 says what it refuses); BENCH_RUN, or the status to exit with. */
static int parse(int argc, char **argv, bool say, bench_args *a) {
  *a = (bench_args){.p_busy = ADJ_ENERGY_P_BUSY, .p_idle = ADJ_ENERGY_P_IDLE, .target = 0.5, .lr = 1e-3,
                    .csv = "phantom-teacher.csv"};
  long long n = 0, batch = 64, layers = 2, rounds = 7, max_steps = 3000; /* n 0: the mode's default */
  const char *ks = NULL;
  const bench_option options[] = {{"--teacher", BENCH_FLAG, 0, 0, &a->teacher},
                                  {"--n", BENCH_COUNT, 1, 1 << 30, &n},
                                  {"--batch", BENCH_COUNT, 1, 1 << 30, &batch},
                                  {"--layers", BENCH_COUNT, 1, MAX_LAYERS, &layers},
                                  {"--rounds", BENCH_COUNT, 1, MAX_ROUNDS, &rounds},
                                  {"--A", BENCH_REAL, 0, 1e6, &a->p_busy},
                                  {"--B", BENCH_REAL, 0, 1e6, &a->p_idle},
                                  {"--target", BENCH_REAL, 0, 1e6, &a->target},
                                  {"--lr", BENCH_REAL, 0, 1e3, &a->lr},
                                  {"--max-steps", BENCH_COUNT, 1, 1 << 30, &max_steps},
                                  {"--csv", BENCH_TEXT, 0, 0, &a->csv},
                                  {"--k", BENCH_TEXT, 0, 0, &ks}};
  int count = (int)(sizeof options / sizeof *options);
  int status = bench_parse_arguments("bench-phantom", usage, argc, argv, options, count, 0, NULL, NULL, say);
  if (status != BENCH_RUN) return status;
  a->n = n ? n : a->teacher ? 512 : 4096;
  a->batch = batch, a->layers = (int)layers, a->rounds = (int)rounds, a->max_steps = (int)max_steps;
  if (parse_ks(ks ? ks : a->teacher ? "2,4,8" : "8,16,64", a)) {
    if (say) fprintf(stderr, "bench-phantom: %s\n%s\n", adj_last_error(), usage);
    return 2;
  }
  /* The teacher runs' CSV and plot: refused now rather than after the runs. */
  if (a->teacher && adj_file_check_output(a->csv, "--csv")) {
    if (say) fprintf(stderr, "bench-phantom: %s\n", adj_last_error());
    return 1;
  }
  return BENCH_RUN;
}

static void die(const char *what) {
  fprintf(stderr, "bench-phantom: %s: %s\n", what, adj_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* ---- a stack of TP, 1.5D or PP layers with ReLU between them --------------------------- */

typedef enum stack_kind { STACK_TP, STACK_MP15, STACK_PP } stack_kind;

typedef struct stack {
  stack_kind kind;
  int depth;                      /* layers */
  adj_layer *layers[2 * MAX_LAYERS]; /* layer, ReLU, layer, ReLU, ... */
  adj_layer *net;
  /* dx: the input gradient, asked for so every layer, the first included,
   * performs all of its Table II collectives, as the model charges them. */
  adj_tensor x, y, dy, dx;
  adj_tensor gathered, scratch; /* 1.5D only: an all-gather's range and domain */
} stack;

static const char *const stack_names[] = {"tp-ffn", "mp15-ffn", "phantom-ffn"};

/* One layer of the stack's kind on `at`; the 1.5D layer reads the 1 x p
 * input partition as P_c = 1, P_r = p. */
static int stack_layer(const bench_args *a, stack_kind kind, const adj_decomposition *at, int64_t k,
                       adj_layer **layer) {
  adj_phantom_layer_config c = {.dtype = ADJ_FLOAT32, .input = at, .in_features = a->n, .ghosts = k};
  if (kind == STACK_PP) return adj_phantom_layer_create(&c, layer);
  if (kind == STACK_TP) return adj_tp_layer_create(&c, layer);
  adj_affine15_layer_config m = {.dtype = ADJ_FLOAT32, .input = at, .out_features = a->n};
  return adj_affine15_layer_create(&m, layer);
}

static void stack_create(const bench_args *a, const adj_decomposition *input, stack_kind kind, int64_t k, stack *s) {
  *s = (stack){.kind = kind, .depth = a->layers};
  const adj_decomposition *at = input;
  for (int l = 0; l < a->layers; l++) {
    if (stack_layer(a, kind, at, k, &s->layers[2 * l])) die("layer");
    adj_activation_layer_config r = {.dtype = ADJ_FLOAT32, .input = adj_layer_output_layout(s->layers[2 * l]),
                                     .activation = {.kind = ADJ_RELU}};
    if (adj_activation_layer_create(&r, &s->layers[2 * l + 1])) die("relu");
    at = adj_layer_output_layout(s->layers[2 * l + 1]);
  }
  if (adj_network_create(stack_names[kind], 2 * a->layers, s->layers, &s->net)) die("network");
  adj_layer_create_input(s->net, &s->x), adj_layer_create_input(s->net, &s->dx);
  adj_layer_create_output(s->net, &s->y), adj_layer_create_output(s->net, &s->dy);
  if (kind != STACK_MP15) return;
  adj_op *gather, *weight, *bias;
  if (adj_affine15_layer_ops(s->layers[0], &gather, &weight, &bias) ||
      adj_op_create_range_tensor(gather, &s->gathered) || adj_op_create_domain_tensor(gather, &s->scratch))
    die("buffers");
}

static void stack_reset_counters(stack *s) {
  for (int l = 0; l < s->depth; l++)
    if (s->kind == STACK_MP15) adj_affine15_layer_reset_counters(s->layers[2 * l]);
    else adj_phantom_layer_reset_counters(s->layers[2 * l]);
}

/* Uniform initialisation whose output variance matches the dense layer's
 * He initialisation (variance 2/n per weight, so a layer keeps E[y^2] at
 * 2 E[x^2]): W and L variance 2/n; C variance p/n, so each ghost keeps the
 * scale of its inputs; D variance 2/(p k), so the (p-1) k ghosts contribute
 * the (p-1)/p of the output variance that L's n/p inputs leave.  The plain
 * fan-in rule of specs A-P4 (k for D) doubles the output variance per layer
 * at p = 2 and more at larger p, which made the phantom models start an
 * order of magnitude above the dense one's loss.  Ranks draw their own
 * blocks from rank-dependent seeds. */
static void stack_init(stack *s, int64_t n, int p, int64_t k, uint64_t seed, int rank) {
  adj_rng *rng;
  adj_rng_create(seed * 1000003u + (uint64_t)rank, &rng);
  for (int l = 0; l < s->depth; l++) {
    adj_layer *layer = s->layers[2 * l];
    for (int i = 0; i < adj_layer_parameter_count(layer); i++) {
      adj_parameter *q = adj_layer_parameter(layer, i);
      double variance = !strcmp(q->name, "compressor")     ? (double)p / n
                        : !strcmp(q->name, "decompressor") ? 2.0 / ((double)p * k)
                                                            : 2.0 / n;
      double r = sqrt(3 * variance);
      if (!strcmp(q->name, "bias")) adj_tensor_zero(&q->value);
      else adj_rng_fill_uniform(rng, &q->value, -r, r);
    }
  }
  stack_reset_counters(s);
  adj_rng_destroy(&rng);
}

static void stack_destroy(stack *s) {
  adj_layer_destroy(&s->net);
  for (int i = 0; i < 2 * s->depth; i++) adj_layer_destroy(&s->layers[i]);
  adj_tensor_destroy(&s->x), adj_tensor_destroy(&s->y), adj_tensor_destroy(&s->dy), adj_tensor_destroy(&s->dx);
  adj_tensor_destroy(&s->gathered), adj_tensor_destroy(&s->scratch);
}

typedef struct stack_totals {
  uint64_t bytes_sent, bytes_received;
  double comm_seconds;
} stack_totals;

/* A 1.5D layer's bytes: its input all-gather and its weight and bias
 * broadcasts (which move nothing on a P_c = 1 grid), both directions. */
static void mp15_bytes(const adj_layer *layer, stack_totals *t) {
  adj_affine15_counters c;
  if (adj_affine15_layer_counters(layer, &c)) die("counters");
  const adj_op_counters *ops[] = {&c.gather, &c.weight, &c.bias};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    t->bytes_sent += ops[i]->bytes_sent, t->bytes_received += ops[i]->bytes_received;
}

/* Seconds of the 1.5D layers' input all-gathers applied alone, forward then
 * adjoint, as in one step (their weight broadcasts over P_c = 1 are local
 * copies).  The layers apply them with blocking calls, so this is the
 * communication a step cannot hide; the values do not matter, so every
 * layer uses the stack's scratch buffers. */
static double mp15_comm_seconds(stack *s) {
  double seconds = 0;
  for (int l = 0; l < s->depth; l++) {
    adj_op *gather, *weight, *bias;
    if (adj_affine15_layer_ops(s->layers[2 * l], &gather, &weight, &bias)) die("ops");
    double t0 = MPI_Wtime();
    if (adj_op_forward(gather, &s->x, &s->gathered) || adj_op_adjoint(gather, &s->gathered, &s->scratch))
      die("gather");
    seconds += MPI_Wtime() - t0;
  }
  return seconds;
}

static stack_totals stack_totals_get(stack *s) {
  stack_totals t = {0};
  for (int l = 0; l < s->depth; l++) {
    if (s->kind == STACK_MP15) {
      mp15_bytes(s->layers[2 * l], &t);
      continue;
    }
    adj_op_counters c;
    adj_phantom_layer_counters(s->layers[2 * l], &c);
    t.bytes_sent += c.bytes_sent, t.bytes_received += c.bytes_received;
    t.comm_seconds += adj_phantom_layer_comm_seconds(s->layers[2 * l]);
  }
  return t;
}

/* ---- step benchmark --------------------------------------------------------------------- */

/* Configurations in run order: 0 TP, 1 the 1.5D layer, then PP at each k. */
enum { CONFIG_TP = 0, CONFIG_MP15 = 1, CONFIG_PP = 2, MAX_CONFIGS = MAX_K + CONFIG_PP };

static stack_kind config_kind(int c) { return c == CONFIG_TP ? STACK_TP : c == CONFIG_MP15 ? STACK_MP15 : STACK_PP; }
static int64_t config_k(const bench_args *a, int c) { return c >= CONFIG_PP ? a->k[c - CONFIG_PP] : 0; }

/* Per configuration and round: the step's seconds and its communication
 * seconds on this rank; the bytes of one step. */
typedef struct step_figures {
  double step[MAX_CONFIGS][MAX_ROUNDS], comm[MAX_CONFIGS][MAX_ROUNDS];
  uint64_t bytes[MAX_CONFIGS];
} step_figures;

static void time_rounds(const bench_args *a, stack *stacks, int configs, step_figures *f) {
  for (int r = -1; r < a->rounds; r++) /* round -1 warms up */
    for (int c = 0; c < configs; c++) {
      stack *s = &stacks[c];
      stack_reset_counters(s);
      bench_barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (adj_layer_forward(s->net, &s->x, &s->y) || adj_layer_backward(s->net, &s->dy, &s->dx)) die("step");
      double t = MPI_Wtime() - t0;
      stack_totals tot = stack_totals_get(s);
      if (s->kind == STACK_MP15) tot.comm_seconds = mp15_comm_seconds(s);
      if (r < 0) continue;
      f->step[c][r] = t, f->comm[c][r] = tot.comm_seconds, f->bytes[c] = tot.bytes_sent + tot.bytes_received;
    }
}

/* One printed row's figures (medians over rounds of the slowest rank). */
typedef struct step_row {
  double min, med, max, t_comm, t_comp, bytes, model_bytes, e, model_e;
} step_row;

static step_row step_row_of(const bench_args *a, int p, int c, const step_figures *slowest, uint64_t bytes_all) {
  double sorted[MAX_ROUNDS], comms[MAX_ROUNDS];
  memcpy(sorted, slowest->step[c], sizeof(double) * (size_t)a->rounds);
  memcpy(comms, slowest->comm[c], sizeof(double) * (size_t)a->rounds);
  qsort(sorted, (size_t)a->rounds, sizeof(double), bench_compare_doubles);
  qsort(comms, (size_t)a->rounds, sizeof(double), bench_compare_doubles);
  step_row w = {.min = sorted[0], .med = sorted[a->rounds / 2], .max = sorted[a->rounds - 1],
                .t_comm = comms[a->rounds / 2], .bytes = (double)bytes_all / p};
  w.t_comp = fmax(w.med - w.t_comm, 0);
  adj_comm_model fit = adj_comm_model_table3();
  adj_ffn_shape shape = {.n = a->n, .p = p, .k = config_k(a, c), .layers = a->layers, .batch = a->batch};
  stack_kind kind = config_kind(c);
  double model_comm = kind == STACK_PP     ? adj_pp_comm_time(&fit, &shape)
                      : kind == STACK_TP   ? adj_tp_comm_time(&fit, &shape)
                                           : adj_mp15_comm_time(&fit, &shape);
  double floats = kind == STACK_PP     ? adj_pp_message_floats(&shape)
                  : kind == STACK_TP   ? adj_tp_message_floats(&shape)
                                       : adj_mp15_message_floats(&shape);
  w.model_bytes = sizeof(float) * floats;
  w.e = p * adj_energy(a->p_busy, a->p_idle, w.t_comp, w.t_comm);
  w.model_e = p * adj_energy(a->p_busy, a->p_idle, w.t_comp, model_comm);
  return w;
}

static void print_steps(const bench_args *a, int p, int configs, const step_figures *slowest,
                        const uint64_t *bytes_all) {
  printf("bench-phantom: n = %lld, L = %d, batch %lld, p = %d ranks, float32, %d rounds (TP, 1.5D and PP in turns; "
         "1.5D = affine15 on P_r = %d x P_c = 1)\n",
         (long long)a->n, a->layers, (long long)a->batch, p, a->rounds, p);
  printf("%-10s %9s %9s %9s %7s %7s %14s %9s %9s %14s %10s %10s %12s %7s %7s %12s\n", "config", "min ms", "median ms",
         "max ms", "vs TP", "vs 1.5D", "bytes/rank", "vs TP", "vs 1.5D", "model B/rank", "t_comp ms", "t_comm ms",
         "e/step (J)", "vs TP", "vs 1.5D", "model e (J)");
  step_row tp = step_row_of(a, p, CONFIG_TP, slowest, bytes_all[CONFIG_TP]);
  step_row mp = step_row_of(a, p, CONFIG_MP15, slowest, bytes_all[CONFIG_MP15]);
  for (int c = 0; c < configs; c++) {
    step_row w = step_row_of(a, p, c, slowest, bytes_all[c]);
    char name[32];
    if (c >= CONFIG_PP) snprintf(name, sizeof name, "PP k=%lld", (long long)config_k(a, c));
    else snprintf(name, sizeof name, "%s", c == CONFIG_TP ? "TP" : "1.5D");
    printf("%-10s %9.2f %9.2f %9.2f %7.3f %7.3f %14.0f %9.4f %9.4f %14.0f %10.2f %10.2f %12.4f %7.3f %7.3f %12.4f\n",
           name, 1e3 * w.min, 1e3 * w.med, 1e3 * w.max, w.med / tp.med, w.med / mp.med, w.bytes, w.bytes / tp.bytes,
           w.bytes / mp.bytes, w.model_bytes, 1e3 * w.t_comp, 1e3 * w.t_comm, w.e, w.e / tp.e, w.e / mp.e, w.model_e);
  }
  printf("e = p (A t_comp + B t_comm), A = %.0f W, B = %.0f W; t_comm measured inside the collectives (median; "
         "1.5D: its all-gathers applied alone), model e uses Table III's t_comm with the measured t_comp; "
         "bytes/rank counted (sent + received, mean over ranks), model B/rank the same from Table II's collectives "
         "(1.5D: all-gather and reduce-scatter of n/p N per layer; energy.h)\n",
         a->p_busy, a->p_idle);
}

static void run_steps(const bench_args *a, const adj_decomposition *input, int rank, int p) {
  int configs = CONFIG_PP + a->n_k;
  stack *stacks = calloc((size_t)configs, sizeof *stacks);
  step_figures *mine = calloc(1, sizeof *mine), *slowest = calloc(1, sizeof *slowest);
  for (int c = 0; c < configs; c++) {
    int64_t k = config_k(a, c);
    stack_create(a, input, config_kind(c), k, &stacks[c]);
    stack_init(&stacks[c], a->n, p, k, 7u, rank);
    adj_rng *rng;
    adj_rng_create(11u + (uint64_t)rank, &rng);
    adj_rng_fill_uniform(rng, &stacks[c].x, -1, 1), adj_rng_fill_uniform(rng, &stacks[c].dy, -1, 1);
    adj_rng_destroy(&rng);
  }
  time_rounds(a, stacks, configs, mine);
  /* The slowest rank decides a round; bytes are summed over ranks. */
  uint64_t bytes_all[MAX_CONFIGS];
  MPI_Reduce(mine->step, slowest->step, MAX_CONFIGS * MAX_ROUNDS, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(mine->comm, slowest->comm, MAX_CONFIGS * MAX_ROUNDS, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(mine->bytes, bytes_all, configs, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) print_steps(a, p, configs, slowest, bytes_all);
  free(mine), free(slowest);
  for (int c = 0; c < configs; c++) stack_destroy(&stacks[c]);
  free(stacks);
}

/* ---- teacher experiment ----------------------------------------------------------------- */

enum { TEACHER_SAMPLES = 2048, TEACHER_WINDOW = 10, MAX_POINTS = 4096, MAX_RUNS = MAX_K + 1 };

typedef struct run_result {
  char name[32];
  int64_t k, params;
  int steps, points;
  bool reached;
  double seconds, t_comm, t_comp, energy, bytes_per_rank;
  double time[MAX_POINTS], loss[MAX_POINTS];
} run_result;

/* relu(W relu(x)) for the whole data set, on every rank alike (float64). */
static void teacher_data(int64_t n, uint64_t seed, adj_tensor *x, adj_tensor *y) {
  adj_tensor w, h;
  adj_rng *rng;
  adj_rng_create(seed, &rng);
  adj_tensor_create(&w, ADJ_FLOAT64, 2, (const int64_t[2]){n, n});
  adj_tensor_create(x, ADJ_FLOAT64, 2, (const int64_t[2]){TEACHER_SAMPLES, n});
  adj_tensor_create(&h, ADJ_FLOAT64, 2, (const int64_t[2]){TEACHER_SAMPLES, n});
  adj_tensor_create(y, ADJ_FLOAT64, 2, (const int64_t[2]){TEACHER_SAMPLES, n});
  adj_rng_fill_normal(rng, &w, 0, 1 / sqrt((double)n));
  adj_rng_fill_normal(rng, x, 0, 1);
  adj_rng_destroy(&rng);
  double *hd = h.data, *xd = x->data;
  for (int64_t i = 0; i < TEACHER_SAMPLES * n; i++) hd[i] = fmax(xd[i], 0);
  if (adj_affine_forward(&h, &w, NULL, y)) die("teacher");
  double *yd = y->data;
  for (int64_t i = 0; i < TEACHER_SAMPLES * n; i++) yd[i] = fmax(yd[i], 0);
  adj_tensor_destroy(&w), adj_tensor_destroy(&h);
}

/* Rows [first, first + rows) and this rank's feature block of a float64
 * global (samples, n) into a float32 block. */
static void take_batch(const adj_tensor *global, int64_t first, const adj_box *block, adj_tensor *out) {
  int64_t n = global->shape[1], w = block->extent[1], rows = out->shape[0];
  const double *g = global->data;
  float *o = out->data;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < w; c++) o[r * w + c] = (float)g[((first + r) % TEACHER_SAMPLES) * n + block->start[1] + c];
}

static void run_teacher(const bench_args *a, const adj_decomposition *input, int64_t k, double threshold, int rank,
                        int p, run_result *res) {
  stack s;
  stack_create(a, input, k ? STACK_PP : STACK_TP, k, &s);
  stack_init(&s, a->n, p, k, 3u, rank);
  adj_optimizer *opt;
  if (adj_optimizer_create(s.net, &(adj_optimizer_config){.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = a->lr}, &opt))
    die("optimizer");
  adj_tensor gx, gy, target;
  teacher_data(a->n, 20261124u, &gx, &gy);
  adj_layer_create_output(s.net, &target);
  adj_box block = adj_decomposition_local_block(input);
  int64_t total = a->batch * a->n;
  *res = (run_result){.k = k};
  if (k) snprintf(res->name, sizeof res->name, "PP p=%d k=%lld", p, (long long)k);
  else snprintf(res->name, sizeof res->name, "TP p=%d", p);
  for (int l = 0; l < s.depth; l++) {
    adj_phantom_size size = k ? adj_phantom_layer_size(a->n, a->n, p, k, -1) : adj_tp_layer_size(a->n, a->n, p, -1);
    res->params += size.weights + size.biases;
  }
  bench_barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int step = 0; step < a->max_steps; step++) {
    take_batch(&gx, step * a->batch, &block, &s.x);
    take_batch(&gy, step * a->batch, &block, &target);
    adj_layer_zero_grad(s.net);
    if (adj_layer_forward(s.net, &s.x, &s.y)) die("forward");
    /* MSE over all global elements: d/dy = 2 (y - t) / (N n). */
    float *yv = s.y.data, *tv = target.data, *dv = s.dy.data;
    double local = 0, loss;
    for (int64_t i = 0; i < adj_tensor_volume(&s.y); i++) {
      double d = (double)yv[i] - tv[i];
      local += d * d, dv[i] = (float)(2 * d / (double)total);
    }
    MPI_Request request;
    MPI_Iallreduce(&local, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &request);
    if (adj_layer_backward(s.net, &s.dy, &s.dx) || adj_optimizer_step(opt)) die("backward");
    adj_wait_all(1, &request, ADJ_WAIT_YIELD);
    loss /= (double)total;
    double now = MPI_Wtime() - t0;
    if (res->points < MAX_POINTS) res->time[res->points] = now, res->loss[res->points++] = loss;
    res->steps = step + 1;
    /* The target counts as reached when the mean loss of the last WINDOW
     * batches is below it, so one lucky batch does not end a run. */
    double recent = 0;
    int window = res->points < TEACHER_WINDOW ? res->points : TEACHER_WINDOW;
    for (int i = res->points - window; i < res->points; i++) recent += res->loss[i];
    if (res->points >= TEACHER_WINDOW && recent / window <= threshold) {
      res->reached = true;
      break;
    }
  }
  res->seconds = MPI_Wtime() - t0;
  stack_totals tot = stack_totals_get(&s);
  double comm_max, seconds_max;
  uint64_t bytes_all, bytes_local = tot.bytes_sent + tot.bytes_received;
  MPI_Allreduce(&tot.comm_seconds, &comm_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&res->seconds, &seconds_max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&bytes_local, &bytes_all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  res->seconds = seconds_max, res->t_comm = comm_max, res->t_comp = fmax(seconds_max - comm_max, 0);
  res->bytes_per_rank = (double)bytes_all / p;
  res->energy = p * adj_energy(a->p_busy, a->p_idle, res->t_comp, res->t_comm);
  adj_optimizer_destroy(&opt);
  adj_tensor_destroy(&gx), adj_tensor_destroy(&gy), adj_tensor_destroy(&target);
  stack_destroy(&s);
}

/* Loss against wall time, one polyline per run, log-scale loss. */
static void write_svg(const char *path, const run_result *runs, int n_runs, double threshold) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "bench-phantom: cannot write %s\n", path);
    return;
  }
  static const char *colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                                 "#17becf", "#7f7f7f"};
  double tmax = 0, lo = INFINITY, hi = 0;
  for (int r = 0; r < n_runs; r++)
    for (int i = 0; i < runs[r].points; i++)
      tmax = fmax(tmax, runs[r].time[i]), lo = fmin(lo, runs[r].loss[i]), hi = fmax(hi, runs[r].loss[i]);
  lo = fmin(lo, threshold) / 1.2, hi *= 1.2;
  const double L = 70, T = 40, W = 560, H = 320;
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
             "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", L + W + 170, T + H + 50);
  fprintf(f, "<text x=\"%.0f\" y=\"20\" font-size=\"14\">Teacher FFN: training loss against wall time</text>\n", L);
  fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T, W, H);
  for (int i = 0; i <= 4; i++) {
    double v = exp(log(lo) + (log(hi) - log(lo)) * i / 4), y = T + H - H * i / 4.0;
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", L - 4, y + 4, v);
    double tv = tmax * i / 4, x = L + W * i / 4.0;
    fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.2f</text>\n", x, T + H + 16, tv);
  }
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">seconds</text>\n", L + W / 2, T + H + 36);
  fprintf(f, "<text x=\"14\" y=\"%.0f\" transform=\"rotate(-90 14 %.0f)\" text-anchor=\"middle\">MSE (log)</text>\n",
          T + H / 2, T + H / 2);
  double ty = T + H - H * (log(threshold) - log(lo)) / (log(hi) - log(lo));
  fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"gray\" stroke-dasharray=\"4 3\"/>\n", L,
          L + W, ty, ty);
  for (int r = 0; r < n_runs; r++) {
    const char *color = colors[r % 9];
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
    for (int i = 0; i < runs[r].points; i++)
      fprintf(f, "%.1f,%.1f ", L + W * runs[r].time[i] / (tmax > 0 ? tmax : 1),
              T + H - H * (log(runs[r].loss[i]) - log(lo)) / (log(hi) - log(lo)));
    fprintf(f, "\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", L + W + 10, T + 14 + 16.0 * r, color,
            runs[r].name);
  }
  fprintf(f, "</svg>\n");
  fclose(f);
}

static void run_teachers(const bench_args *a, const adj_decomposition *input, int rank, int p) {
  run_result *runs = calloc(MAX_RUNS, sizeof *runs);
  /* The threshold: target x the zero predictor's MSE over the data set. */
  adj_tensor gx, gy;
  teacher_data(a->n, 20261124u, &gx, &gy);
  double zero = 0;
  for (int64_t i = 0; i < adj_tensor_volume(&gy); i++) zero += adj_tensor_get(&gy, i) * adj_tensor_get(&gy, i);
  zero /= (double)adj_tensor_volume(&gy);
  adj_tensor_destroy(&gx), adj_tensor_destroy(&gy);
  double threshold = a->target * zero;
  int n_runs = 1 + a->n_k;
  for (int r = 0; r < n_runs; r++) run_teacher(a, input, r ? a->k[r - 1] : 0, threshold, rank, p, &runs[r]);
  if (rank == 0) {
    printf("teacher: y = relu(W relu(x)), n = %lld, L = %d, p = %d, batch %lld, Adam lr %.1e, float32; target MSE "
           "%.4e (%.2f x the zero predictor's %.4e)\n",
           (long long)a->n, a->layers, p, (long long)a->batch, a->lr, threshold, a->target, zero);
    printf("%-14s %10s %6s %8s %9s %14s %10s %10s %12s %7s\n", "run", "params", "steps", "reached", "wall s",
           "bytes/rank", "t_comp s", "t_comm s", "energy J", "vs TP");
    for (int r = 0; r < n_runs; r++)
      printf("%-14s %10lld %6d %8s %9.3f %14.0f %10.3f %10.3f %12.2f %7.3f\n", runs[r].name, (long long)runs[r].params,
             runs[r].steps, runs[r].reached ? "yes" : "no", runs[r].seconds, runs[r].bytes_per_rank, runs[r].t_comp,
             runs[r].t_comm, runs[r].energy, runs[r].energy / runs[0].energy);
    /* Table I's layout: per PP run, the TP run beside it; energy per step is
     * the run's energy over its steps. */
    printf("Table I layout (energies in J of all %d ranks, measured t_comp and t_comm):\n", p);
    printf("%3s %3s | %8s %10s %6s %10s | %8s %10s %6s %10s\n", "p", "k", "TP size", "TP J/step", "steps", "TP J",
           "PP size", "PP J/step", "steps", "PP J");
    for (int r = 1; r < n_runs; r++)
      printf("%3d %3lld | %8lld %10.2f %6d %10.1f | %8lld %10.2f %6d %10.1f\n", p, (long long)runs[r].k,
             (long long)runs[0].params, runs[0].energy / runs[0].steps, runs[0].steps, runs[0].energy,
             (long long)runs[r].params, runs[r].energy / runs[r].steps, runs[r].steps, runs[r].energy);
    FILE *f = fopen(a->csv, "w");
    if (f) {
      fprintf(f, "run,p,k,step,seconds,loss\n");
      for (int r = 0; r < n_runs; r++)
        for (int i = 0; i < runs[r].points; i++)
          fprintf(f, "%s,%d,%lld,%d,%.6f,%.6e\n", runs[r].name, p, (long long)runs[r].k, i + 1, runs[r].time[i],
                  runs[r].loss[i]);
      fclose(f);
      char svg[512];
      snprintf(svg, sizeof svg, "%s", a->csv);
      char *dot = strrchr(svg, '.');
      if (dot && !strcmp(dot, ".csv")) strcpy(dot, ".svg");
      else strncat(svg, ".svg", sizeof svg - strlen(svg) - 1);
      write_svg(svg, runs, n_runs, threshold);
      printf("wrote %s and %s\n", a->csv, svg);
    } else fprintf(stderr, "bench-phantom: cannot write %s\n", a->csv);
  }
  free(runs);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, p;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank), MPI_Comm_size(MPI_COMM_WORLD, &p);
  bench_args a;
  int status = parse(argc, argv, rank == 0, &a);
  if (status != BENCH_RUN) {
    MPI_Finalize();
    return status;
  }
  adj_partition *part;
  adj_decomposition *input;
  if (adj_partition_create(MPI_COMM_WORLD, 2, (const int[2]){1, p}, p, NULL, &part) ||
      adj_decomposition_create(part, 2, (const int64_t[2]){a.batch, a.n}, &input))
    die("layout");
  if (a.teacher) run_teachers(&a, input, rank, p);
  else run_steps(&a, input, rank, p);
  adj_decomposition_destroy(&input);
  adj_partition_destroy(&part);
  MPI_Finalize();
  return 0;
}
