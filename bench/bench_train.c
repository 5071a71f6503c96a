/* Training throughput of LeNet-5: images per second over an epoch (forward,
 * backward and Adam step of every batch; adjoin-train's "images/s"), for one
 * layout in float32 and float64.
 *
 *   mpiexec.mpich -n 1 bench-train                 the sequential network
 *   mpiexec.mpich -n 4 bench-train dist4           Table 1's 4-worker layout
 *   bench-train [--deep-halos] [LAYOUT [IMAGES [EPOCHS [BATCH [f32|f64|both]]]]]
 *       defaults: sequential on 1 rank, distN on N ranks; 8192 images; 3;
 *       256; both (one dtype alone is for profiling).  --deep-halos fuses
 *       the convolution blocks over one halo exchange (docs/deep-halos.md),
 *       as adjoin-train's flag of that name does.
 *
 * The images are synthetic (their values do not change the work), so the
 * benchmark needs no data set.  Each figure is the best of `repetitions`
 * epochs after one warm-up epoch, so a neighbour's burst on the shared
 * machine lowers no figure.  Each rank gets cores / ranks kernel threads
 * (adj_train_share_cores) unless ADJ_NUM_THREADS says otherwise.  The
 * PyTorch twin is tools/pytorch/bench_pytorch_lenet.py (same network, batch and
 * optimizer); the README compares the two.  For float32 it also prints each
 * stage's forward and backward time per batch, to show where the time goes. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/adjoin.h"
#include "bench_host.h"

/* ---- per-stage breakdown -------------------------------------------------------------- */

/* Milliseconds per batch of each stage's forward and backward (slowest rank,
 * best of `repetitions`), running the stages one by one on their own buffers,
 * so a person sees where an epoch's time goes. */
typedef struct stage_run {
  adj_layer *layer;
  adj_tensor x, y, dx, dy; /* input, output and their gradients */
  bool first;              /* no stage before it has parameters: as in training, it computes no input gradient */
} stage_run;

static double time_call(int (*call)(adj_layer *, const adj_tensor *, adj_tensor *), stage_run *s, bool backward,
                        int repetitions) {
  double best = 1e30;
  for (int r = 0; r < repetitions; r++) {
    bench_barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    int status = backward ? call(s->layer, &s->dy, s->first ? NULL : &s->dx) : call(s->layer, &s->x, &s->y);
    double seconds = bench_max(MPI_COMM_WORLD, MPI_Wtime() - start);
    if (status) return -1;
    if (seconds < best) best = seconds;
  }
  return 1e3 * best;
}

static void breakdown(adj_layer *net, int rank, int repetitions) {
  int n = adj_network_depth(net);
  double total[2] = {0, 0};
  adj_rng *rng = NULL;
  adj_rng_create((uint64_t)rank + 1, &rng);
  bool trainable_before = false;
  for (int i = 0; i < n && rng; i++) {
    stage_run s = {.layer = adj_network_layer(net, i), .first = !trainable_before};
    trainable_before |= adj_layer_parameter_count(s.layer) > 0;
    adj_layer_create_input(s.layer, &s.x), adj_layer_create_input(s.layer, &s.dx);
    adj_layer_create_output(s.layer, &s.y), adj_layer_create_output(s.layer, &s.dy);
    adj_rng_fill_uniform(rng, &s.x, -1, 1), adj_rng_fill_uniform(rng, &s.dy, -1, 1);
    double forward = time_call(adj_layer_forward, &s, false, repetitions);
    double backward = time_call(adj_layer_backward, &s, true, repetitions);
    total[0] += forward, total[1] += backward;
    adj_conv_algorithm algorithm = adj_conv_layer_algorithm(s.layer); /* rank 0's, for a convolution */
    if (rank == 0)
      printf("    %2d %-18s forward %7.3f ms  backward %7.3f ms%s%s\n", i, adj_layer_name(s.layer), forward, backward,
             algorithm ? "  algorithm " : "", algorithm ? adj_conv_algorithm_name(algorithm) : "");
    adj_tensor_destroy(&s.x), adj_tensor_destroy(&s.dx), adj_tensor_destroy(&s.y), adj_tensor_destroy(&s.dy);
  }
  if (rank == 0) printf("    total              forward %7.3f ms  backward %7.3f ms per batch\n", total[0], total[1]);
  adj_rng_destroy(&rng);
}

/* LeNet-5 in `layout` with Adam and a trainer over `data`. */
static int setup(const char *layout, bool deep_halos, adj_dtype dtype, int64_t batch, adj_dataset *data,
                 adj_layer **net, adj_optimizer **opt, adj_trainer **trainer) {
  adj_network_build_options bo = {.dtype = dtype, .batch = batch, .deep_halos = deep_halos};
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3};
  int status = adj_network_build_file(MPI_COMM_WORLD, BENCH_LENET5, layout, &bo, net);
  if (!status) status = adj_network_init_uniform(*net, 1);
  if (!status) status = adj_optimizer_create(*net, &oc, opt);
  adj_trainer_config tc = {.network = *net, .optimizer = *opt, .train = data, .seed = 1};
  if (!status) status = adj_trainer_create(&tc, trainer);
  return status;
}

/* Best images/s over `repetitions` epochs after a warm-up (0 on failure),
 * then, for float32, the per-stage breakdown. */
static double measure(const char *layout, bool deep_halos, adj_dtype dtype, int64_t batch, adj_dataset *data,
                      int repetitions) {
  adj_layer *net = NULL;
  adj_optimizer *opt = NULL;
  adj_trainer *trainer = NULL;
  int status = setup(layout, deep_halos, dtype, batch, data, &net, &opt, &trainer);
  double best = 0;
  for (int r = 0; r <= repetitions && !status; r++) {
    adj_train_stats stats;
    bench_barrier(MPI_COMM_WORLD);
    status = adj_trainer_run(trainer, -1, NULL, NULL, &stats);
    double seconds = bench_max(MPI_COMM_WORLD, stats.seconds);
    if (r > 0 && !status && (double)adj_dataset_count(data) / seconds > best)
      best = (double)adj_dataset_count(data) / seconds;
  }
  if (status) fprintf(stderr, "bench-train: %s %s: %s\n", layout, adj_dtype_name(dtype), adj_last_error());
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (!status && dtype == ADJ_FLOAT32) breakdown(net, rank, repetitions);
  adj_trainer_destroy(&trainer);
  adj_optimizer_destroy(&opt);
  adj_layer_destroy(&net);
  return status ? 0 : best;
}

typedef struct train_args {
  bool deep_halos;
  const char *layout, *dtypes;
  long long images, epochs, batch;
} train_args;

static const char usage[] = "usage: bench-train [--deep-halos] [LAYOUT [IMAGES [EPOCHS [BATCH [f32|f64|both]]]]]";

/* The layout known and within the run's `size` ranks; false after saying why (when `say`). */
static bool layout_fits(const char *layout, int size, bool say) {
  int needs = adj_network_file_ranks(MPI_COMM_WORLD, BENCH_LENET5, layout, 0);
  if (!needs && say) fprintf(stderr, "bench-train: LAYOUT '%s' is not one of %s\n", layout, BENCH_LENET5_PLACEMENTS);
  if (needs > size && say)
    fprintf(stderr, "bench-train: LAYOUT '%s' needs %d ranks, the run has %d\n", layout, needs, size);
  return needs && needs <= size;
}

/* The command line into *a (the layout defaults to `fallback`); BENCH_RUN, or the status to exit with. */
static int parse(int argc, char **argv, int size, bool say, const char *fallback, train_args *a) {
  *a = (train_args){.layout = fallback, .dtypes = "both", .images = 8192, .epochs = 3, .batch = 256};
  const bench_option options[] = {{"--deep-halos", BENCH_FLAG, 0, 0, &a->deep_halos}};
  const char *given[5] = {0};
  int n = 0, status = bench_parse_arguments("bench-train", usage, argc, argv, options, 1, 5, given, &n, say);
  if (status != BENCH_RUN) return status;
  if (n > 0) a->layout = given[0];
  if (n > 4) a->dtypes = given[4];
  bool ok = layout_fits(a->layout, size, say) &&
            (n <= 1 || bench_parse_count("bench-train", "IMAGES", given[1], 1, 1LL << 30, say, &a->images)) &&
            (n <= 2 || bench_parse_count("bench-train", "EPOCHS", given[2], 1, 1000, say, &a->epochs)) &&
            (n <= 3 || bench_parse_count("bench-train", "BATCH", given[3], 1, 1LL << 20, say, &a->batch));
  if (ok && strcmp(a->dtypes, "both") && strcmp(a->dtypes, "f32") && strcmp(a->dtypes, "f64")) {
    if (say) fprintf(stderr, "bench-train: DTYPES '%s' is not one of f32, f64, both\n", a->dtypes);
    ok = false;
  }
  if (!ok && say) fprintf(stderr, "%s\n", usage);
  return ok ? BENCH_RUN : 2;
}

int main(int argc, char **argv) {
  int rank, size;
  if (adj_init(&argc, &argv, &rank, &size)) {
    fprintf(stderr, "bench-train: %s\n", adj_last_error());
    return 1;
  }
  char fallback[16];
  snprintf(fallback, sizeof fallback, size == 1 ? "sequential" : "dist%d", size);
  train_args a;
  int status = parse(argc, argv, size, rank == 0, fallback, &a);
  if (status != BENCH_RUN) {
    adj_finalize();
    return status;
  }
  int repetitions = (int)a.epochs;
  int threads = adj_train_share_cores(MPI_COMM_WORLD);
  adj_dataset *data = NULL;
  adj_dataset_random(a.images, 3, (const int64_t[]){1, 28, 28}, 10, 1, &data);
  char host[64] = "?", cpu[256];
  gethostname(host, sizeof host);
  bench_cpu_model(cpu, sizeof cpu);
  if (rank == 0) {
    printf("bench-train: host %s, CPU %s, kernels %s, OpenBLAS kernels %s, %ld online cores, %d ranks x %d kernel "
           "threads, LeNet-5 %s%s, batch %lld, %lld images per epoch, Adam, best of %d epochs\n", host, cpu,
           adj_kernels_isa(), openblas_get_corename(), sysconf(_SC_NPROCESSORS_ONLN), size, threads, a.layout,
           a.deep_halos ? " (deep halos)" : "", a.batch, a.images, repetitions);
    bench_blas_note(stdout);
  }
  int failed = !data;
  for (int d = 0; d < 2 && data; d++) {
    adj_dtype dtype = d == 0 ? ADJ_FLOAT32 : ADJ_FLOAT64;
    if (strcmp(a.dtypes, "both") && strcmp(a.dtypes, d == 0 ? "f32" : "f64")) continue;
    double rate = measure(a.layout, a.deep_halos, dtype, a.batch, data, repetitions);
    failed |= rate == 0;
    if (rank == 0 && rate > 0) /* a failed run has said why (measure) and has no rate */
      printf("  %-10s %s  %8.0f images/s  (%.2f s per 8000-image epoch)\n", a.layout, adj_dtype_name(dtype), rate,
             8000 / rate);
  }
  adj_dataset_destroy(&data);
  adj_finalize();
  return failed;
}
