/* Data-parallel training throughput of LeNet-5 (float32, Adam), three runs
 * alternated epoch by epoch in one job, so a neighbour's burst on a shared
 * machine falls on all of them alike, their order rotating each epoch so none
 * always follows the same one (the run after `alone` starts with cores that
 * one rank left idle):
 *   alone    one replica of LAYOUT on the first M ranks with the whole global
 *            batch, the other ranks asleep, its ranks sharing the cores
 *            (the baseline: with LAYOUT sequential on 2 ranks, the sequential
 *            run with 2 kernel threads);
 *   overlap  R replicas on all R x M ranks, gradient buckets posted during
 *            the backward (adjoin-train --replicas R);
 *   after    the same, every bucket posted after the whole backward
 *            (adjoin-train --reduce-after-backward).
 * It prints images/s of each (best and median epoch), the ratios to alone
 * and of overlap to after, the wait before the optimizer step, the time the
 * posts and pokes take during the backward, and the share of the reduction
 * time the overlap hides: 1 - (wait + posts and pokes)(overlap) / wait(after),
 * where after's wait is the whole reduction, nothing of it overlapped.
 *
 *   mpiexec.mpich -n 2 bench-dp                     dp2 against sequential with 2 kernel threads
 *   mpiexec.mpich -n 8 bench-dp dist4 2             dist4 x 2 against dist4 on 4 ranks
 *   bench-dp [LAYOUT [REPLICAS [IMAGES [EPOCHS [BATCH [FIRST_CAP [CAP]]]]]]]
 *       defaults: sequential; ranks / LAYOUT's ranks; 4096 images; 5 epochs
 *       of each after one warm-up of each; global batch 256; buckets 16K then
 *       64K (LeNet-5's 240 KiB of float32 gradients fit PyTorch's 1 MiB first
 *       bucket whole, which would leave nothing to overlap).
 *
 * The images are synthetic (their values do not change the work). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "adjoin/adjoin.h"
#include "bench_host.h"

enum { RUNS = 3, MAX_EPOCHS = 256 };

typedef struct bench_run {
  const char *name;
  bool active;           /* this rank takes part */
  MPI_Comm cores_comm;   /* the ranks that share the cores during the run */
  adj_layer *net;
  adj_optimizer *opt;
  adj_trainer *trainer;
  int epochs;
  int threads;              /* kernel threads per rank (rank 0's) */
  double rate[MAX_EPOCHS];  /* images/s (slowest rank) */
  double wait[MAX_EPOCHS];  /* seconds per step the reducer's wait blocked (mean over ranks) */
  double progress[MAX_EPOCHS]; /* seconds per step in posts and pokes during the backward (mean over ranks) */
} bench_run;

typedef struct bench_setup {
  const char *layout;
  int replicas;
  int64_t batch;            /* global */
  int64_t caps[2];
  adj_dataset *data;
  adj_replicas *grid;
} bench_setup;

/* Ranks outside a run wait here without taking a core from it. */
static void sleep_barrier(void) {
  MPI_Request request;
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;)
    nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
}

/* One LeNet-5 of the setup's layout on this replica's ranks, with its trainer:
 * alone (replicas NULL, the whole batch) or one of the replicas. */
static int build(const bench_setup *s, bool alone, bool after, bench_run *run) {
  MPI_Comm model = adj_replicas_model_comm(s->grid);
  int64_t batch = alone ? s->batch : (s->batch + s->replicas - 1) / s->replicas;
  adj_network_build_options bo = {.dtype = ADJ_FLOAT32, .batch = batch};
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3};
  int status = adj_network_build_file(model, BENCH_LENET5, s->layout, &bo, &run->net);
  if (!status) status = adj_network_init_uniform(run->net, 1);
  if (!status) status = adj_optimizer_create(run->net, &oc, &run->opt);
  adj_trainer_config tc = {.network = run->net, .optimizer = run->opt, .train = s->data, .seed = 1,
                           .replicas = alone ? NULL : s->grid, .global_batch = s->batch, .bucket_caps = s->caps,
                           .reduce_after_backward = after};
  if (!status) status = adj_trainer_create(&tc, &run->trainer);
  if (status) fprintf(stderr, "bench-dp: %s: %s\n", run->name, adj_last_error());
  return status;
}

static int setup_runs(const bench_setup *s, bench_run runs[RUNS]) {
  bool first_replica = adj_replicas_index(s->grid) == 0;
  runs[0] = (bench_run){.name = "alone", .active = first_replica,
                        .cores_comm = first_replica ? adj_replicas_model_comm(s->grid) : MPI_COMM_NULL};
  runs[1] = (bench_run){.name = "overlap", .active = true, .cores_comm = MPI_COMM_WORLD};
  runs[2] = (bench_run){.name = "after", .active = true, .cores_comm = MPI_COMM_WORLD};
  int status = first_replica ? build(s, true, false, &runs[0]) : 0;
  MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  for (int k = 1; k < RUNS && !status; k++) status = build(s, false, k == 2, &runs[k]);
  return status;
}

/* One epoch of a run; recorded unless it is the warm-up.  Collective on the world. */
static int epoch(bench_run *run, bool record, int64_t images) {
  int status = 0;
  adj_train_stats stats = {0};
  if (run->active) {
    run->threads = adj_train_share_cores(run->cores_comm);
    bench_barrier(run->cores_comm);
    status = adj_trainer_run(run->trainer, -1, NULL, NULL, &stats);
  }
  sleep_barrier();
  int ranks;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  double steps = stats.batches ? (double)stats.batches : 1, seconds = stats.seconds;
  double reducer[2] = {stats.reduce_wait_seconds / steps, stats.reduce_progress_seconds / steps};
  MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, reducer, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (record && !status && run->epochs < MAX_EPOCHS) {
    run->rate[run->epochs] = (double)images / seconds;
    run->wait[run->epochs] = reducer[0] / ranks;
    run->progress[run->epochs++] = reducer[1] / ranks;
  }
  return status;
}

static double median(const double *v, int n) {
  double sorted[MAX_EPOCHS];
  memcpy(sorted, v, (size_t)n * sizeof *v);
  qsort(sorted, (size_t)n, sizeof *sorted, bench_compare_doubles);
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

static double best(const double *v, int n) {
  double b = 0;
  for (int i = 0; i < n; i++) b = v[i] > b ? v[i] : b;
  return b;
}

static void print_host(const bench_setup *s, int ranks, int64_t images, int epochs) {
  char host[64] = "?", cpu[256];
  gethostname(host, sizeof host);
  bench_cpu_model(cpu, sizeof cpu);
  struct utsname un;
  int m = adj_network_file_ranks(MPI_COMM_WORLD, BENCH_LENET5, s->layout, 0);
  printf("bench-dp: host %s, CPU %s, kernels %s, Linux %s, %ld online cores\n", host, cpu, adj_kernels_isa(),
         uname(&un) ? "?" : un.release, sysconf(_SC_NPROCESSORS_ONLN));
  printf("  LeNet-5 float32, Adam, global batch %lld, %lld synthetic images per epoch, buckets %lld then %lld bytes, "
         "runs alternated, %d epochs each after a warm-up\n", (long long)s->batch, (long long)images,
         (long long)s->caps[0], (long long)s->caps[1], epochs);
  printf("  alone:   %s on %d rank%s (the other %d asleep)\n", s->layout, m, m == 1 ? "" : "s", ranks - m);
  printf("  overlap: %d replicas of %s on %d ranks, buckets posted during the backward\n", s->replicas, s->layout,
         ranks);
  printf("  after:   the same, buckets posted after the backward\n");
}

static void print_results(const bench_run runs[RUNS], int replicas, int buckets) {
  double b[RUNS], med[RUNS];
  for (int k = 0; k < RUNS; k++) {
    b[k] = best(runs[k].rate, runs[k].epochs), med[k] = median(runs[k].rate, runs[k].epochs);
    printf("  %-8s %d kernel thread%s per rank: best %8.0f images/s, median %8.0f", runs[k].name, runs[k].threads,
           runs[k].threads == 1 ? " " : "s", b[k], med[k]);
    if (k)
      printf(", wait before the step %.3f ms, posts and pokes %.3f ms (medians)", 1e3 * median(runs[k].wait, runs[k].epochs),
             1e3 * median(runs[k].progress, runs[k].epochs));
    printf("\n");
  }
  printf("  ratios (best, median): overlap / alone %.3f, %.3f; after / alone %.3f, %.3f; overlap / after %.3f, %.3f\n",
         b[1] / b[0], med[1] / med[0], b[2] / b[0], med[2] / med[0], b[1] / b[2], med[1] / med[2]);
  printf("  per replica: overlap / %d / alone %.3f (median)\n", replicas, med[1] / replicas / med[0]);
  /* Each round runs all three back to back, so the per-round ratio cancels
   * the drift of a shared machine that the medians above carry. */
  double paired[MAX_EPOCHS];
  int rounds = runs[1].epochs < runs[2].epochs ? runs[1].epochs : runs[2].epochs, faster = 0;
  for (int i = 0; i < rounds; i++) paired[i] = runs[1].rate[i] / runs[2].rate[i], faster += paired[i] > 1;
  if (rounds)
    printf("  overlap / after, paired by round: median %.3f, overlap faster in %d of %d rounds\n",
           median(paired, rounds), faster, rounds);
  /* After's wait is the whole reduction; the overlap pays for its share in
   * posts and pokes during the backward as well as in its wait. */
  double visible = median(runs[1].wait, runs[1].epochs) + median(runs[1].progress, runs[1].epochs);
  double hidden = 1 - visible / median(runs[2].wait, runs[2].epochs);
  printf("  reduction hidden by the overlap: %.1f%% (1 - (wait + posts and pokes)(overlap) / wait(after), medians; "
         "%d buckets)\n", 100 * hidden, buckets);
}

static void destroy_runs(bench_run runs[RUNS]) {
  for (int k = 0; k < RUNS; k++) {
    adj_trainer_destroy(&runs[k].trainer);
    adj_optimizer_destroy(&runs[k].opt);
    adj_layer_destroy(&runs[k].net);
  }
}

static const char usage[] =
    "usage: mpiexec -n P bench-dp [LAYOUT [REPLICAS [IMAGES [EPOCHS [BATCH [FIRST_CAP [CAP]]]]]]]";

/* The command line into *s (layout, replicas, batch, caps), *images and
 * *epochs on a run of `ranks`; BENCH_RUN, or the status to exit with. */
static int parse(int argc, char **argv, int ranks, bool say, bench_setup *s, long long *images, long long *epochs) {
  const char *given[7] = {0};
  int n = 0, parsed = bench_parse_arguments("bench-dp", usage, argc, argv, NULL, 0, 7, given, &n, say);
  if (parsed != BENCH_RUN) return parsed;
  s->layout = n > 0 ? given[0] : "sequential";
  int m = adj_network_file_ranks(MPI_COMM_WORLD, BENCH_LENET5, s->layout, 0);
  long long replicas = m ? ranks / m : 0, batch = 256;
  bool counted = (n <= 1 || bench_parse_count("bench-dp", "REPLICAS", given[1], 2, 1 << 20, say, &replicas)) &&
                 (n <= 2 || bench_parse_count("bench-dp", "IMAGES", given[2], 1, 1LL << 30, say, images)) &&
                 (n <= 3 || bench_parse_count("bench-dp", "EPOCHS", given[3], 1, MAX_EPOCHS, say, epochs)) &&
                 (n <= 4 || bench_parse_count("bench-dp", "BATCH", given[4], 1, 1LL << 20, say, &batch));
  s->replicas = (int)replicas, s->batch = batch;
  bool bad = !counted || !m || s->replicas < 2 || s->replicas * m != ranks || s->batch < s->replicas ||
             (n > 5 && adj_bucket_cap_parse(given[5], &s->caps[0])) ||
             (n > 6 && adj_bucket_cap_parse(given[6], &s->caps[1]));
  if (bad && say)
    fprintf(stderr, "bench-dp: needs LAYOUT (%s) x REPLICAS >= 2 = %d ranks, IMAGES >= 1, 1 <= EPOCHS <= %d, "
            "BATCH >= REPLICAS, caps as adjoin-train's --bucket-cap; got %s x %d, %lld, %d, %lld\n%s\n",
            BENCH_LENET5_PLACEMENTS, ranks, MAX_EPOCHS, s->layout, s->replicas, *images, (int)*epochs,
            (long long)s->batch, usage);
  return bad ? 2 : BENCH_RUN;
}

int main(int argc, char **argv) {
  int provided; /* the kernels' thread teams never call MPI (adjoin/threads.h) */
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  bench_setup s = {.caps = {16 << 10, 64 << 10}};
  long long images = 4096, epochs = 5;
  int parsed = parse(argc, argv, ranks, rank == 0, &s, &images, &epochs);
  if (parsed != BENCH_RUN) {
    MPI_Finalize();
    return parsed;
  }
  adj_dataset *data = NULL;
  bench_run runs[RUNS] = {{0}};
  int status = adj_dataset_random(images, 3, (const int64_t[]){1, 28, 28}, 10, 1, &data);
  s.data = data;
  if (!status) status = adj_replicas_create(MPI_COMM_WORLD, s.replicas, &s.grid);
  if (!status) status = setup_runs(&s, runs);
  if (!status && rank == 0) print_host(&s, ranks, images, epochs);
  for (int e = 0; e <= epochs && !status; e++)
    for (int j = 0; j < RUNS && !status; j++) status = epoch(&runs[(j + e) % RUNS], e > 0, images);
  if (!status && rank == 0)
    print_results(runs, s.replicas, adj_gradient_reducer_buckets(adj_trainer_reducer(runs[1].trainer)));
  if (status && rank == 0) fprintf(stderr, "bench-dp: %s\n", adj_last_error());
  destroy_runs(runs);
  adj_replicas_destroy(&s.grid);
  adj_dataset_destroy(&data);
  MPI_Finalize();
  return status ? 1 : 0;
}
