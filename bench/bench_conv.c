/* Local convolution throughput (forward + backward, float32) against OpenBLAS
 * sgemm on a square 2048 matrix measured in the same run, for the algorithm
 * the plan chooses and for each algorithm forced (adj_conv_plan), so the
 * report shows the choice against im2col + GEMM on this host.
 *
 *   bench-conv [repetitions]
 *
 * Each figure is the best of `repetitions` timed runs (and 0.3 s at least) after one warm-up, so a
 * neighbour's burst on the shared machine lowers no figure; sgemm is measured
 * before and after the convolutions and the better rate is the reference.
 * FLOPs: forward 2 N C_out C_in K out_volume; backward twice that (input and
 * weight gradients); bias terms are not counted. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "adjoin/adjoin.h"
#include "bench_host.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* sgemm with every core: the kernels' thread teams leave OpenBLAS
 * single-threaded (kernels_impl.h), so the reference asks for its threads back
 * (OPENBLAS_NUM_THREADS, if set, decides how many). */
static double sgemm_rate(int reps) {
  const char *asked = getenv("OPENBLAS_NUM_THREADS");
  openblas_set_num_threads(asked && atoi(asked) > 0 ? atoi(asked) : (int)sysconf(_SC_NPROCESSORS_ONLN));
  const int n = 2048;
  float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
  if (!a || !b || !c) return 0;
  for (long i = 0; i < (long)n * n; i++) a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f, c[i] = 0;
  double best = 1e30;
  for (int r = 0; r <= reps; r++) {
    double t = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    t = now() - t;
    if (r > 0 && t < best) best = t; /* r == 0 warms up */
  }
  free(a), free(b), free(c);
  return 2.0 * n * n * (double)n / best * 1e-9;
}

typedef struct conv_shape {
  const char *name;
  int64_t n, c_in, c_out, h, w, k, pad;
} conv_shape;

static const conv_shape shapes[] = {
    {"LeNet-5 conv1  1->6  5x5 pad 2  28x28 N=256", 256, 1, 6, 28, 28, 5, 2},
    {"LeNet-5 conv2  6->16 5x5 pad 0  14x14 N=256", 256, 6, 16, 14, 14, 5, 0},
    /* One dist4 worker's blocks: a quarter of each plane plus its halo. */
    {"dist4 conv1 block  1->6  5x5  18x18 N=256", 256, 1, 6, 18, 18, 5, 0},
    {"dist4 conv2 block  6->16 5x5   9x9  N=256", 256, 6, 16, 9, 9, 5, 0},
    {"large  64->64 3x3 pad 1  56x56 N=32", 32, 64, 64, 56, 56, 3, 1},
};

enum { N_SHAPES = sizeof shapes / sizeof *shapes, N_ALGORITHMS = 4 }; /* auto, direct, shifted, im2col */

/* One shape's tensors and a plan per algorithm (AUTO: the plan's own
 * choice), sharing one workspace of the largest plan's size. */
typedef struct conv_run {
  adj_window_geometry g;
  adj_tensor x, w, b, y, dx, dw, db;
  adj_conv_plan *plans[N_ALGORITHMS];
  adj_workspace ws;
} conv_run;

static int conv_setup(const conv_shape *s, conv_run *r, adj_rng *rng) {
  r->g = (adj_window_geometry){.spatial_dims = 2, .kernel = {s->k, s->k}, .padding_left = {s->pad, s->pad},
                               .padding_right = {s->pad, s->pad}};
  int64_t xs[4] = {s->n, s->c_in, s->h, s->w}, ws[4] = {s->c_out, s->c_in, s->k, s->k}, ys[4] = {s->n, s->c_out};
  int status = adj_window_output_shape(&r->g, xs + 2, ys + 2);
  if (!status) status = adj_tensor_create(&r->x, ADJ_FLOAT32, 4, xs);
  if (!status) status = adj_tensor_create(&r->dx, ADJ_FLOAT32, 4, xs);
  if (!status) status = adj_tensor_create(&r->w, ADJ_FLOAT32, 4, ws);
  if (!status) status = adj_tensor_create(&r->dw, ADJ_FLOAT32, 4, ws);
  if (!status) status = adj_tensor_create(&r->b, ADJ_FLOAT32, 1, &s->c_out);
  if (!status) status = adj_tensor_create(&r->db, ADJ_FLOAT32, 1, &s->c_out);
  if (!status) status = adj_tensor_create(&r->y, ADJ_FLOAT32, 4, ys);
  size_t bytes = 0;
  for (int a = 0; a < N_ALGORITHMS && !status; a++) {
    adj_conv_plan_config config = {.geometry = r->g, .algorithm = (adj_conv_algorithm)a};
    status = adj_conv_plan_create(&config, &r->x, &r->w, &r->plans[a]);
    size_t need = adj_conv_plan_workspace_size(r->plans[a]);
    bytes = need > bytes ? need : bytes;
  }
  if (!status) status = adj_workspace_reserve(&r->ws, bytes);
  if (status) return status;
  adj_rng_fill_uniform(rng, &r->x, -1, 1);
  adj_rng_fill_uniform(rng, &r->w, -0.1, 0.1);
  adj_rng_fill_uniform(rng, &r->b, -0.1, 0.1);
  return ADJ_SUCCESS;
}

static void conv_teardown(conv_run *r) {
  adj_tensor *all[] = {&r->x, &r->w, &r->b, &r->y, &r->dx, &r->dw, &r->db};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) adj_tensor_destroy(all[i]);
  adj_workspace_release(&r->ws);
  for (int a = 0; a < N_ALGORITHMS; a++) adj_conv_plan_destroy(&r->plans[a]);
}

/* Best forward, forward+backward and first-layer backward times of each
 * plan; y doubles as the output gradient.  A network's first layer computes
 * no dx, and its weight gradient then reads dy where it lies instead of on
 * the grid, a path the full backward never takes.  The plans take turns
 * within each repetition, so a burst of load on the shared machine hits all
 * of them alike. */
static int conv_time(conv_run *r, int reps, double forward[N_ALGORITHMS], double both[N_ALGORITHMS],
                     double first[N_ALGORITHMS]) {
  for (int a = 0; a < N_ALGORITHMS; a++) forward[a] = both[a] = first[a] = 1e30;
  /* At least 0.3 s of runs: OpenBLAS's threads keep spinning for about 0.1 s
   * after the sgemm reference, and the first runs share the cores with them. */
  double start = now();
  for (int rep = 0; rep <= reps || now() - start < 0.3; rep++)
    for (int a = 0; a < N_ALGORITHMS; a++) {
      double t0 = now();
      int status = adj_conv_plan_forward(r->plans[a], &r->x, &r->w, &r->b, &r->y, &r->ws);
      double t1 = now();
      if (!status) status = adj_conv_plan_backward(r->plans[a], &r->x, &r->w, &r->y, &r->dx, &r->dw, &r->db, &r->ws);
      double t2 = now();
      if (!status) status = adj_conv_plan_backward(r->plans[a], &r->x, &r->w, &r->y, NULL, &r->dw, &r->db, &r->ws);
      double t3 = now();
      if (status) return status;
      if (rep == 0) continue;
      if (t1 - t0 < forward[a]) forward[a] = t1 - t0;
      if (t2 - t0 < both[a]) both[a] = t2 - t0;
      if (t3 - t2 < first[a]) first[a] = t3 - t2;
    }
  return ADJ_SUCCESS;
}

/* GFLOP/s forward, forward + backward and first-layer backward (dw and db)
 * of shape s under each plan, and the algorithm each plan runs. */
static int conv_measure(const conv_shape *s, int reps, adj_rng *rng, double rates[N_ALGORITHMS][3],
                        adj_conv_algorithm ran[N_ALGORITHMS], adj_conv_algorithm *ran_without_dx) {
  conv_run r = {0};
  double forward[N_ALGORITHMS], both[N_ALGORITHMS], first[N_ALGORITHMS];
  int status = conv_setup(s, &r, rng);
  if (!status) status = conv_time(&r, reps, forward, both, first);
  if (!status) {
    double flops = 2.0 * (double)(s->n * s->c_out * s->c_in * s->k * s->k * r.y.shape[2] * r.y.shape[3]);
    for (int a = 0; a < N_ALGORITHMS; a++) {
      rates[a][0] = flops / forward[a] * 1e-9;
      rates[a][1] = 3.0 * flops / both[a] * 1e-9;
      rates[a][2] = flops / first[a] * 1e-9;
      ran[a] = adj_conv_plan_algorithm(r.plans[a]);
    }
    *ran_without_dx = adj_conv_plan_algorithm_without_dx(r.plans[0]);
  }
  conv_teardown(&r);
  return status;
}

/* Each algorithm forced, the rates of column `column` (1: forward +
 * backward, 2: the first layer's backward), and the chosen plan's against
 * im2col + GEMM's. */
static void print_forced(double results[N_SHAPES][N_ALGORITHMS][3], adj_conv_algorithm ran[N_SHAPES][N_ALGORITHMS],
                         int column, const char *what) {
  printf("each algorithm forced, %s GFLOP/s (chosen / im2col: the choice against im2col + GEMM)\n", what);
  printf("%-46s %10s %10s %10s %16s\n", "", "direct", "shifted", "im2col", "chosen / im2col");
  for (size_t i = 0; i < N_SHAPES; i++) {
    printf("%-46s", shapes[i].name);
    for (int a = ADJ_CONV_ALGORITHM_DIRECT; a <= ADJ_CONV_ALGORITHM_IM2COL; a++)
      if (ran[i][a] == (adj_conv_algorithm)a) printf(" %10.1f", results[i][a][column]);
      else printf(" %10s", "n/a");
    printf(" %15.2fx\n", results[i][0][column] / results[i][ADJ_CONV_ALGORITHM_IM2COL][column]);
  }
}

int main(int argc, char **argv) {
  static const char usage[] = "usage: bench-conv [REPETITIONS]";
  long long repetitions = 5;
  const char *given[1];
  int n_given = 0, status = bench_parse_arguments("bench-conv", usage, argc, argv, NULL, 0, 1, given, &n_given, true);
  if (status != BENCH_RUN) return status;
  if (n_given && !bench_parse_count("bench-conv", "REPETITIONS", given[0], 1, 100000, true, &repetitions)) {
    fprintf(stderr, "%s\n", usage);
    return 2;
  }
  int reps = (int)repetitions;
  char host[256] = "?", cpu[256];
  gethostname(host, sizeof host);
  bench_cpu_model(cpu, sizeof cpu);
  const char *threads = getenv("OPENBLAS_NUM_THREADS");
  printf("bench-conv: host %s, CPU %s, kernels %s, %ld online cores, OPENBLAS_NUM_THREADS=%s, %d kernel threads, "
         "best of %d\n", host, cpu, adj_kernels_isa(), sysconf(_SC_NPROCESSORS_ONLN), threads ? threads : "(unset)",
         adj_threads_get(), reps);
  double sgemm = sgemm_rate(reps);
  /* OpenBLAS picks its kernels for the CPU, not for the level adj kernels were
   * built for; OPENBLAS_CORETYPE (e.g. Haswell) holds it to another. */
  printf("sgemm 2048^3: %.1f GFLOP/s (OpenBLAS kernels %s)\n", sgemm, openblas_get_corename());
  bench_blas_note(stdout);
  adj_rng *rng;
  if (adj_rng_create(7, &rng)) return 1;
  /* [shape][algorithm][fwd, fwd+bwd, first-layer bwd]; the algorithm each plan ran (a forced
   * one that does not apply runs im2col and is not reported). */
  double results[N_SHAPES][N_ALGORITHMS][3] = {{{0}}};
  adj_conv_algorithm ran[N_SHAPES][N_ALGORITHMS], ran_without_dx[N_SHAPES];
  for (size_t i = 0; i < N_SHAPES; i++)
    if (conv_measure(&shapes[i], reps, rng, results[i], ran[i], &ran_without_dx[i])) {
      fprintf(stderr, "bench-conv: %s: %s\n", shapes[i].name, adj_last_error());
      return 1;
    }
  double again = sgemm_rate(reps);
  printf("sgemm 2048^3 (after): %.1f GFLOP/s\n", again);
  if (again > sgemm) sgemm = again;
  printf("%-46s %-8s %12s %16s %10s %18s  %s\n", "float32 convolution", "chosen", "fwd GFLOP/s", "fwd+bwd GFLOP/s",
         "of sgemm", "bwd no dx GFLOP/s", "chosen");
  for (size_t i = 0; i < N_SHAPES; i++)
    printf("%-46s %-8s %12.1f %16.1f %9.0f%% %18.1f  %s\n", shapes[i].name, adj_conv_algorithm_name(ran[i][0]),
           results[i][0][0], results[i][0][1], 100.0 * results[i][0][1] / sgemm, results[i][0][2],
           adj_conv_algorithm_name(ran_without_dx[i]));
  print_forced(results, ran, 1, "fwd+bwd");
  print_forced(results, ran, 2, "bwd no dx");
  adj_rng_destroy(&rng);
  return 0;
}
