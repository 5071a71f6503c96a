/* Every layer kind, one at a time, against PyTorch's op at the same shape:
 * forward and forward + backward, float32 and float64, at the shapes of the
 * tree's networks (LeNet-5, the MLP, the encoder-decoder) and at a few larger
 * ones, each timed by adj_layer_time (adjoin/layer_timing.h), the measurement
 * the planner's compute calibration makes too.
 *
 *   bench-layers [--rounds R] [--seconds S] [--dtype f32|f64|both] [--filter TEXT]
 *                [--twin COMMAND] [--cpu-time] [--best] [--list]
 *
 * With --twin the PyTorch twin (tools/pytorch/bench_layers.py) runs beside
 * this program as a child process reading one case per line on its stdin
 * (the case's spec, as --list prints it) and answering its four times; each
 * case is timed here, then by the twin, then here again in the next round,
 * so a slow spell of a shared machine falls on both alike.  Figures are the
 * medians over the R rounds of each round's median (adj_layer_time's), and
 * each ratio is the median of the rounds' own ratios, PyTorch's time over
 * adjoin's: above 1 adjoin is faster.  One rank (MPI singleton or
 * mpiexec -n 1): the cases are sequential layers.  --cpu-time times the
 * process's CPU time on both sides instead of the wall clock: with one
 * thread (ADJ_NUM_THREADS=1) a loaded machine disturbs it far less.  --best
 * reports the fastest round's figures instead of medians (and the ratio of
 * the two fastest), which drops a shared machine's slow spells. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adjoin/adjoin.h"
#include "adjoin/affine_layer.h"
#include "adjoin/layer_timing.h"
#include "adjoin/pool_layer.h"
#include "bench_host.h"

extern char **environ;

/* ---- the cases ------------------------------------------------------------------------ */

typedef enum {
  LAYER_CONV, LAYER_MAXPOOL, LAYER_AVGPOOL, LAYER_AFFINE, LAYER_ACTIVATION, LAYER_BATCHNORM,
  LAYER_UPSAMPLE, LAYER_PAD, LAYER_LOSS, LAYER_XENT, LAYER_PHANTOM,
} layer_kind;

static const char *const kind_names[] = {"conv", "maxpool", "avgpool", "affine", "activation", "batchnorm",
                                         "upsample", "pad", "loss", "xent", "phantom"};

typedef struct bench_case {
  const char *name;
  layer_kind kind;
  int rank;                /* of the input: (N, C, spatial...) or (N, F) */
  int64_t shape[5];        /* the input's */
  int64_t out;             /* output channels or features */
  int64_t kernel, stride, padding; /* the same in every spatial dimension */
  const char *mode;        /* activation, interpolation, padding mode or loss kind */
  double scale;            /* upsampling factor */
  bool bias, first;        /* with bias; no input gradient (a network's first layer) */
} bench_case;

#define CONV(name, n, c, s, out, k, p, bias, first) \
  {name, LAYER_CONV, 4, {n, c, s, s}, out, k, 1, p, NULL, 0, bias, first}
#define POOL(name, kind, n, c, s) {name, kind, 4, {n, c, s, s}, 0, 2, 2, 0, NULL, 0, false, false}
#define AFFINE(name, n, in, out, first) {name, LAYER_AFFINE, 2, {n, in}, out, 0, 0, 0, NULL, 0, true, first}
#define ACT(name, mode, n, c, s) {name, LAYER_ACTIVATION, 4, {n, c, s, s}, 0, 0, 0, 0, mode, 0, false, false}
#define ACT2(name, n, f) {name, LAYER_ACTIVATION, 2, {n, f}, 0, 0, 0, 0, "relu", 0, false, false}
#define BN(name, n, c, s) {name, LAYER_BATCHNORM, 4, {n, c, s, s}, 0, 0, 0, 0, NULL, 0, true, false}
#define UP(name, mode, n, c, s) {name, LAYER_UPSAMPLE, 4, {n, c, s, s}, 0, 0, 0, 0, mode, 2, false, false}
#define PAD(name, mode, n, c, s) {name, LAYER_PAD, 4, {n, c, s, s}, 0, 0, 0, 1, mode, 0, false, false}
#define LOSS(name, mode, n, f) {name, LAYER_LOSS, 2, {n, f}, 0, 0, 0, 0, mode, 0, false, false}
#define XENT(name, n, f) {name, LAYER_XENT, 2, {n, f}, 0, 0, 0, 0, NULL, 0, false, false}

static const bench_case cases[] = {
    /* LeNet-5, batch 256 (net/lenet.c): conv, pool, ReLU twice, then 400-120-84-10. */
    CONV("lenet conv1 1->6 5x5 p2 28", 256, 1, 28, 6, 5, 2, true, true),
    POOL("lenet pool1 6x28", LAYER_MAXPOOL, 256, 6, 28),
    ACT("lenet relu1 6x14", "relu", 256, 6, 14),
    CONV("lenet conv2 6->16 5x5 14", 256, 6, 14, 16, 5, 0, true, false),
    POOL("lenet pool2 16x10", LAYER_MAXPOOL, 256, 16, 10),
    ACT("lenet relu2 16x5", "relu", 256, 16, 5),
    AFFINE("lenet fc1 400->120", 256, 400, 120, false),
    ACT2("lenet relu3 120", 256, 120),
    AFFINE("lenet fc2 120->84", 256, 120, 84, false),
    AFFINE("lenet fc3 84->10", 256, 84, 10, false),
    XENT("lenet xent 10", 256, 10),
    /* The MLP 784-128-127-126-125-124-123-10, batch 256 (net/mlp.c). */
    AFFINE("mlp fc1 784->128", 256, 784, 128, true),
    ACT2("mlp relu 128", 256, 128),
    AFFINE("mlp fc2 128->127", 256, 128, 127, false),
    AFFINE("mlp fc7 123->10", 256, 123, 10, false),
    XENT("mlp xent 10", 256, 10),
    /* The encoder-decoder, batch 128 (net/encdec.c): 3x3 convolutions without
     * bias, batch norm, max-pool, ReLU, nearest upsampling. */
    CONV("encdec enc1 1->16 3x3 28", 128, 1, 28, 16, 3, 1, false, true),
    BN("encdec bn1 16x28", 128, 16, 28),
    POOL("encdec pool1 16x28", LAYER_MAXPOOL, 128, 16, 28),
    ACT("encdec relu1 16x14", "relu", 128, 16, 14),
    CONV("encdec enc2 16->32 3x3 14", 128, 16, 14, 32, 3, 1, false, false),
    BN("encdec bn2 32x14", 128, 32, 14),
    POOL("encdec pool2 32x14", LAYER_MAXPOOL, 128, 32, 14),
    ACT("encdec relu2 32x7", "relu", 128, 32, 7),
    UP("encdec up nearest 32x7", "nearest", 128, 32, 7),
    CONV("encdec dec 32->16 3x3 14", 128, 32, 14, 16, 3, 1, false, false),
    BN("encdec bn3 16x14", 128, 16, 14),
    ACT("encdec relu3 16x14", "relu", 128, 16, 14),
    POOL("encdec pool3 16x14", LAYER_MAXPOOL, 128, 16, 14),
    AFFINE("encdec fc 784->10", 128, 784, 10, false),
    XENT("encdec xent 10", 128, 10),
    /* The other kinds, and larger shapes. */
    CONV("more conv 64->64 3x3 56", 32, 64, 56, 64, 3, 1, true, false),
    CONV("more conv 64->64 3x3 7", 128, 64, 7, 64, 3, 1, true, false),
    CONV("more conv 32->64 1x1 14", 128, 32, 14, 64, 1, 0, true, false),
    {"more conv1d 16->32 k3 256", LAYER_CONV, 3, {64, 16, 256}, 32, 3, 1, 1, NULL, 0, true, false},
    {"more conv3d 8->16 3x3x3 16", LAYER_CONV, 5, {8, 8, 16, 16, 16}, 16, 3, 1, 1, NULL, 0, true, false},
    POOL("more avgpool 32x28", LAYER_AVGPOOL, 64, 32, 28),
    {"more maxpool3d 8x16", LAYER_MAXPOOL, 5, {8, 8, 16, 16, 16}, 0, 2, 2, 0, NULL, 0, false, false},
    ACT("more tanh 32x28", "tanh", 64, 32, 28),
    ACT("more sigmoid 32x28", "sigmoid", 64, 32, 28),
    ACT("more leaky_relu 32x28", "leaky_relu", 64, 32, 28),
    {"more bn1d 128", LAYER_BATCHNORM, 2, {256, 128}, 0, 0, 0, 0, NULL, 0, true, false},
    {"more bn3d 8x16", LAYER_BATCHNORM, 5, {8, 8, 16, 16, 16}, 0, 0, 0, 0, NULL, 0, true, false},
    BN("more bn 64x56", 32, 64, 56),
    UP("more up bilinear 32x14", "linear", 64, 32, 14),
    UP("more up nearest 32x28", "nearest", 64, 32, 28),
    {"more up nearest1d 16x256", LAYER_UPSAMPLE, 3, {64, 16, 256}, 0, 0, 0, 0, "nearest", 2, false, false},
    {"more up trilinear 8x8", LAYER_UPSAMPLE, 5, {8, 8, 8, 8, 8}, 0, 0, 0, 0, "linear", 2, false, false},
    PAD("more pad zeros 16x28", "zeros", 64, 16, 28),
    PAD("more pad reflect 16x28", "reflect", 64, 16, 28),
    PAD("more pad replicate 16x28", "replicate", 64, 16, 28),
    PAD("more pad circular 16x28", "circular", 64, 16, 28),
    LOSS("more loss mse 1000", "mse", 256, 1000),
    LOSS("more loss l1 1000", "l1", 256, 1000),
    LOSS("more loss bce 1000", "bce", 256, 1000),
    LOSS("more loss bce_logits 1000", "bce_logits", 256, 1000),
    LOSS("more loss kl 1000", "kl", 256, 1000),
    LOSS("more loss poisson 1000", "poisson", 256, 1000),
    LOSS("more loss nll 1000", "nll", 256, 1000),
    XENT("more xent 1000", 256, 1000),
    {"more phantom 512->512", LAYER_PHANTOM, 2, {256, 512}, 512, 0, 0, 0, NULL, 0, true, false},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

/* ---- creating a case's layer ----------------------------------------------------------- */

static adj_window_geometry case_window(const bench_case *c, int64_t kernel, int64_t stride, int64_t padding) {
  adj_window_geometry g = {.spatial_dims = c->rank - 2};
  for (int d = 0; d < c->rank - 2; d++)
    g.kernel[d] = kernel, g.stride[d] = stride, g.padding_left[d] = g.padding_right[d] = padding;
  return g;
}

static int case_activation(const char *mode, adj_activation *a) {
  static const char *const names[] = {"relu", "leaky_relu", "tanh", "sigmoid"};
  for (int k = 0; k < 4; k++)
    if (!strcmp(mode, names[k])) return *a = (adj_activation){(adj_activation_kind)k, 0.01}, 0;
  return 1;
}

static int case_loss_kind(const char *mode, adj_loss_kind *kind) {
  static const char *const names[] = {"l1", "mse", "bce", "bce_logits", "kl", "poisson", "nll"};
  for (int k = 0; k < 7; k++)
    if (!strcmp(mode, names[k])) return *kind = (adj_loss_kind)k, 0;
  return 1;
}

/* Labels in [0, classes) or a target in the loss's domain ([0, 1) fits every kind). */
static int case_targets(const bench_case *c, adj_layer *layer) {
  int64_t n = c->shape[0], f = c->shape[1];
  if (c->kind == LAYER_XENT || !strcmp(c->mode, "nll")) {
    int64_t *labels = malloc(sizeof *labels * (size_t)n);
    if (!labels) return ADJ_ERR_MEM;
    for (int64_t i = 0; i < n; i++) labels[i] = (i * 7) % f;
    int status = c->kind == LAYER_XENT ? adj_xent_layer_set_labels(layer, labels, n)
                                       : adj_loss_layer_set_labels(layer, labels, n);
    free(labels);
    return status;
  }
  adj_tensor target;
  int status = adj_layer_create_input(layer, &target);
  if (status) return status;
  for (int64_t i = 0; i < adj_tensor_volume(&target); i++) adj_tensor_set(&target, i, (double)((i * 37) % 100) / 100);
  status = adj_loss_layer_set_target(layer, &target);
  adj_tensor_destroy(&target);
  return status;
}

/* The case's layer on a one-worker layout of its input shape. */
static int case_layer_create(const bench_case *c, adj_dtype dtype, const adj_decomposition *in, adj_layer **layer) {
  switch (c->kind) {
    case LAYER_CONV: {
      adj_conv_layer_config cc = {.comm = MPI_COMM_WORLD, .dtype = dtype, .input = in, .out_channels = c->out,
                                  .window = case_window(c, c->kernel, c->stride, c->padding), .no_bias = !c->bias};
      return adj_conv_layer_create(&cc, layer);
    }
    case LAYER_MAXPOOL:
    case LAYER_AVGPOOL: {
      adj_pool_layer_config pc = {.dtype = dtype, .input = in, .window = case_window(c, c->kernel, c->stride, 0),
                                  .kind = c->kind == LAYER_MAXPOOL ? ADJ_POOL_MAX : ADJ_POOL_AVG};
      return adj_pool_layer_create(&pc, layer);
    }
    case LAYER_AFFINE: {
      adj_affine_layer_config ac = {.dtype = dtype, .input = in, .in_features = c->shape[1],
                                    .out_features = c->out, .no_bias = !c->bias};
      return adj_affine_layer_create(&ac, layer);
    }
    case LAYER_ACTIVATION: {
      adj_activation_layer_config ac = {.dtype = dtype, .input = in};
      if (case_activation(c->mode, &ac.activation)) return ADJ_ERR_ARG;
      return adj_activation_layer_create(&ac, layer);
    }
    case LAYER_BATCHNORM: {
      adj_batchnorm_layer_config bc = {.dtype = dtype, .input = in, .num_features = c->shape[1], .eps = 1e-5,
                                       .momentum = 0.1};
      return adj_batchnorm_layer_create(&bc, layer);
    }
    case LAYER_UPSAMPLE: {
      adj_upsample_layer_config uc = {.dtype = dtype, .input = in, .spatial_dims = c->rank - 2,
                                      .mode = strcmp(c->mode, "nearest") ? ADJ_INTERP_LINEAR : ADJ_INTERP_NEAREST};
      for (int d = 0; d < c->rank - 2; d++) uc.scale_factor[d] = c->scale;
      return adj_upsample_layer_create(&uc, layer);
    }
    case LAYER_PAD: {
      adj_pad_layer_config pc = {.dtype = dtype, .input = in, .spatial_dims = c->rank - 2};
      if (adj_padding_mode_parse(c->mode, &pc.mode)) return ADJ_ERR_ARG;
      for (int d = 0; d < c->rank - 2; d++) pc.padding[d][0] = pc.padding[d][1] = c->padding;
      return adj_pad_layer_create(&pc, layer);
    }
    case LAYER_LOSS: {
      adj_loss_layer_config lc = {.dtype = dtype, .input = in, .reduction = ADJ_LOSS_MEAN};
      if (case_loss_kind(c->mode, &lc.kind)) return ADJ_ERR_ARG;
      return adj_loss_layer_create(&lc, layer);
    }
    case LAYER_XENT: return adj_xent_layer_create(&(adj_xent_layer_config){.dtype = dtype, .input = in}, layer);
    case LAYER_PHANTOM: {
      adj_phantom_layer_config pc = {.dtype = dtype, .input = in, .in_features = c->shape[1],
                                     .out_features = c->out, .ghosts = 1, .allow_large_k = true};
      return adj_phantom_layer_create(&pc, layer);
    }
  }
  return ADJ_ERR_ARG;
}

/* BCE reads probabilities: its input lies in [0, 1). */
static int case_input(const bench_case *c, adj_layer *layer, adj_tensor *x, bool *given) {
  *given = c->kind == LAYER_LOSS && !strcmp(c->mode, "bce");
  if (!*given) return ADJ_SUCCESS;
  int status = adj_layer_create_input(layer, x);
  for (int64_t i = 0; !status && i < adj_tensor_volume(x); i++) adj_tensor_set(x, i, (double)((i * 53) % 97) / 97);
  return status;
}

/* Times one case in one dtype (the twin gets the same calls and rounds). */
static int case_time(const bench_case *c, adj_dtype dtype, double seconds, int rounds, bool cpu_time,
                     adj_layer_timing *timing) {
  int parts[5] = {1, 1, 1, 1, 1};
  adj_decomposition *in = NULL;
  adj_layer *layer = NULL;
  adj_tensor x = {0};
  bool given = false;
  int status = adj_decomposition_create_on_first_ranks(MPI_COMM_WORLD, c->rank, parts, c->shape, &in);
  if (!status) status = case_layer_create(c, dtype, in, &layer);
  if (!status && (c->kind == LAYER_LOSS || c->kind == LAYER_XENT)) status = case_targets(c, layer);
  if (!status) status = case_input(c, layer, &x, &given);
  adj_layer_timing_config tc = {.round_seconds = seconds, .rounds = rounds, .no_input_gradient = c->first,
                                .input = given ? &x : NULL, .clock = cpu_time ? ADJ_TIMING_CPU : ADJ_TIMING_WALL};
  if (!status) status = adj_layer_time(layer, &tc, timing);
  adj_tensor_destroy(&x);
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&in);
  return status;
}

/* ---- the twin ------------------------------------------------------------------------- */

/* The case as one line for the twin: key=value words it reads back. */
static void case_spec(const bench_case *c, const char *dtype, int calls, int rounds, bool cpu_time, char *text,
                      size_t size) {
  int at = snprintf(text, size, "kind=%s dtype=%s threads=%d calls=%d rounds=%d clock=%s shape=", kind_names[c->kind],
                    dtype, adj_threads_get(), calls, rounds, cpu_time ? "cpu" : "wall");
  for (int d = 0; d < c->rank; d++)
    at += snprintf(text + at, size - (size_t)at, "%s%lld", d ? "," : "", (long long)c->shape[d]);
  snprintf(text + at, size - (size_t)at,
           " out=%lld kernel=%lld stride=%lld padding=%lld mode=%s scale=%g bias=%d first=%d", (long long)c->out,
           (long long)c->kernel, (long long)c->stride, (long long)c->padding, c->mode ? c->mode : "-", c->scale,
           c->bias, c->first);
}

/* The twin: a child process with a pipe each way. */
typedef struct twin {
  pid_t pid;
  FILE *to, *from;
} twin;

static int twin_start(const char *command, twin *t) {
  int down[2], up[2];
  if (pipe(down) || pipe(up)) return 1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, down[0], 0);
  posix_spawn_file_actions_adddup2(&actions, up[1], 1);
  posix_spawn_file_actions_addclose(&actions, down[1]);
  posix_spawn_file_actions_addclose(&actions, up[0]);
  char *argv[] = {"sh", "-c", (char *)command, NULL};
  int failed = posix_spawnp(&t->pid, "sh", &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(down[0]), close(up[1]);
  t->to = fdopen(down[1], "w");
  t->from = fdopen(up[0], "r");
  return failed || !t->to || !t->from;
}

static void twin_stop(twin *t) {
  if (t->to) fclose(t->to);
  if (t->from) fclose(t->from);
  if (t->pid > 0) waitpid(t->pid, NULL, 0);
}

/* The twin's timing of one spec: "forward forward_backward forward_best
 * forward_backward_best" in seconds per call. */
static int twin_time(twin *t, const char *spec, adj_layer_timing *timing) {
  char line[512];
  fprintf(t->to, "%s\n", spec);
  fflush(t->to);
  if (!fgets(line, sizeof line, t->from)) return 1;
  return sscanf(line, "%lf %lf %lf %lf", &timing->forward, &timing->forward_backward, &timing->forward_best,
                &timing->forward_backward_best) != 4;
}

/* ---- the run --------------------------------------------------------------------------- */

enum { MAX_ROUNDS = 100 };

typedef struct bench_options {
  long long rounds;
  double seconds;
  const char *dtypes, *filter, *twin;
  bool cpu_time, best, list;
} bench_options;

/* One case in one dtype over the rounds: adjoin's and the twin's times. */
typedef struct case_result {
  double ours[2][MAX_ROUNDS], theirs[2][MAX_ROUNDS]; /* [forward, forward + backward][round] */
  bool twin;
} case_result;

static double median(const double *values, int n) {
  double sorted[MAX_ROUNDS];
  memcpy(sorted, values, sizeof *values * (size_t)n);
  qsort(sorted, (size_t)n, sizeof *sorted, bench_compare_doubles);
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

static double smallest(const double *values, int n) {
  double least = values[0];
  for (int k = 1; k < n; k++) least = values[k] < least ? values[k] : least;
  return least;
}

/* The figure of a column over the rounds: the median, or the fastest. */
static double figure(const double *values, int n, bool best) { return best ? smallest(values, n) : median(values, n); }

/* theirs / ours for one column: the median of the rounds' ratios, or the fastest over the fastest. */
static double ratio(const case_result *r, int column, int rounds, bool best) {
  if (best) return smallest(r->theirs[column], rounds) / smallest(r->ours[column], rounds);
  double each[MAX_ROUNDS];
  for (int k = 0; k < rounds; k++) each[k] = r->theirs[column][k] / r->ours[column][k];
  return median(each, rounds);
}

static void print_case(const bench_case *c, const char *dtype, const case_result *r, int rounds, bool best) {
  printf("%-32s %-4s %10.4f %10.4f", c->name, dtype, 1e3 * figure(r->ours[0], rounds, best),
         1e3 * figure(r->ours[1], rounds, best));
  if (r->twin)
    printf(" %10.4f %10.4f %7.2fx %7.2fx", 1e3 * figure(r->theirs[0], rounds, best),
           1e3 * figure(r->theirs[1], rounds, best), ratio(r, 0, rounds, best), ratio(r, 1, rounds, best));
  printf("\n");
  fflush(stdout);
}

/* Runs case c in `dtype` for every round, alternating with the twin. */
static int run_case(const bench_options *o, const bench_case *c, const char *dtype, twin *t, case_result *r) {
  adj_dtype type = !strcmp(dtype, "f32") ? ADJ_FLOAT32 : ADJ_FLOAT64;
  r->twin = t != NULL;
  for (int k = 0; k < o->rounds; k++) {
    adj_layer_timing mine, theirs;
    if (case_time(c, type, o->seconds, 3, o->cpu_time, &mine)) {
      fprintf(stderr, "bench-layers: %s %s: %s\n", c->name, dtype, adj_last_error());
      return 1;
    }
    r->ours[0][k] = o->best ? mine.forward_best : mine.forward;
    r->ours[1][k] = o->best ? mine.forward_backward_best : mine.forward_backward;
    if (!t) continue;
    char spec[512];
    case_spec(c, dtype, mine.calls, mine.rounds, o->cpu_time, spec, sizeof spec);
    if (twin_time(t, spec, &theirs)) {
      fprintf(stderr, "bench-layers: the twin gave no times for: %s\n", spec);
      return 1;
    }
    r->theirs[0][k] = o->best ? theirs.forward_best : theirs.forward;
    r->theirs[1][k] = o->best ? theirs.forward_backward_best : theirs.forward_backward;
  }
  return 0;
}

/* The command line; `say` on one rank only (every rank parses it alike). */
static int parse_options(int argc, char **argv, bool say, bench_options *o) {
  static const char usage[] =
      "usage: bench-layers [--rounds R] [--seconds S] [--dtype f32|f64|both] [--filter TEXT] [--twin COMMAND]\n"
      "                    [--cpu-time] [--best] [--list]";
  *o = (bench_options){.rounds = 3, .seconds = 0.05, .dtypes = "both", .filter = ""};
  const bench_option options[] = {{"--rounds", BENCH_COUNT, 1, MAX_ROUNDS, &o->rounds},
                                  {"--seconds", BENCH_REAL, 0, 60, &o->seconds},
                                  {"--dtype", BENCH_TEXT, 0, 0, &o->dtypes},
                                  {"--filter", BENCH_TEXT, 0, 0, &o->filter},
                                  {"--twin", BENCH_TEXT, 0, 0, &o->twin},
                                  {"--cpu-time", BENCH_FLAG, 0, 0, &o->cpu_time},
                                  {"--best", BENCH_FLAG, 0, 0, &o->best},
                                  {"--list", BENCH_FLAG, 0, 0, &o->list}};
  int status = bench_parse_arguments("bench-layers", usage, argc, argv, options, 8, 0, NULL, NULL, say);
  if (status != BENCH_RUN) return status;
  if (strcmp(o->dtypes, "f32") && strcmp(o->dtypes, "f64") && strcmp(o->dtypes, "both")) {
    if (say) fprintf(stderr, "bench-layers: --dtype '%s' is not one of f32, f64, both\n%s\n", o->dtypes, usage);
    return 2;
  }
  return BENCH_RUN;
}

static void print_header(const bench_options *o, twin *t) {
  char cpu[256], twin_line[256] = "";
  bench_cpu_model(cpu, sizeof cpu);
  if (t && fgets(twin_line, sizeof twin_line, t->from)) twin_line[strcspn(twin_line, "\n")] = 0;
  printf("bench-layers: CPU %s, kernels %s, %d kernel threads, %lld rounds of 3 x %.3g s each (%s), %s clock, %s\n",
         cpu, adj_kernels_isa(), adj_threads_get(), o->rounds, o->seconds, o->best ? "fastest" : "medians",
         o->cpu_time ? "CPU time" : "wall", t ? twin_line : "no twin");
  bench_blas_note(stdout);
  printf("%-32s %-4s %10s %10s", "case (times in ms per call)", "", "fwd", "fwd+bwd");
  if (t) printf(" %10s %10s %8s %8s", "torch fwd", "fwd+bwd", "fwd x", "f+b x");
  printf("\n");
}

/* Runs every case the filter keeps in each dtype asked for; 0, or 1 after a failure. */
static int run_all(const bench_options *o, twin *t) {
  const char *dtypes[2] = {"f32", "f64"};
  for (int d = 0; d < 2; d++) {
    if (strcmp(o->dtypes, "both") && strcmp(o->dtypes, dtypes[d])) continue;
    for (size_t i = 0; i < N_CASES; i++) {
      if (!strstr(cases[i].name, o->filter)) continue;
      case_result r;
      if (run_case(o, &cases[i], dtypes[d], t, &r)) return 1;
      print_case(&cases[i], dtypes[d], &r, (int)o->rounds, o->best);
    }
  }
  return 0;
}

/* Every case's spec, as the twin reads it. */
static void list_cases(void) {
  for (size_t i = 0; i < N_CASES; i++) {
    char spec[512];
    case_spec(&cases[i], "f32", 1, 1, false, spec, sizeof spec);
    printf("%s: %s\n", cases[i].name, spec);
  }
}

int main(int argc, char **argv) {
  int rank, size;
  if (adj_init(&argc, &argv, &rank, &size)) {
    fprintf(stderr, "bench-layers: %s\n", adj_last_error());
    return 1;
  }
  bench_options o;
  int status = parse_options(argc, argv, rank == 0, &o);
  twin t = {0};
  if (status == BENCH_RUN && size != 1) {
    if (rank == 0) fprintf(stderr, "bench-layers: runs on one rank, not %d\n", size);
    status = 2;
  } else if (status == BENCH_RUN && o.list) {
    list_cases();
    status = 0;
  } else if (status == BENCH_RUN) {
    status = o.twin && twin_start(o.twin, &t) ? 1 : 0;
    if (status) fprintf(stderr, "bench-layers: cannot start the twin '%s'\n", o.twin);
    if (!status) print_header(&o, o.twin ? &t : NULL);
    if (!status) status = run_all(&o, o.twin ? &t : NULL);
    twin_stop(&t);
  }
  adj_finalize();
  return status;
}
