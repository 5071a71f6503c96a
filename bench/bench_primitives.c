/* Benchmark: adjoin's broadcast, sum-reduce, all-sum-reduce and repartition
 * against the raw MPI calls that move the same data (MPI_Bcast, MPI_Reduce,
 * MPI_Allreduce, and a hand-written pack + MPI_Alltoallv straight into place)
 * on the same buffers in the same run: the raw calls read and write the
 * operator's own tensors.  Prints time per call and the ratio adjoin / raw for
 * message sizes from 8 KB to 64 MB.
 *
 * Never give a raw call buffers of its own from calloc: an untouched calloc
 * block maps every page to the kernel's one shared zero page, which stays in
 * cache however large the block, so an MPI_Bcast from such a root ran 1.6-2x
 * faster than from written memory and made the operator look slow.
 *
 *   mpiexec -n 2 build/bench/bench-primitives [--max-mb 64] [--seconds 0.2] [--trials 7] [--calibrate]
 *
 * --calibrate instead times the sum-reduce of the whole world onto rank 0
 * under each summing algorithm at each size and writes the fastest per size
 * into the algorithm table (docs/primitive-algorithms.md) for this group size,
 * keeping the table's other group sizes, and prints the alpha-beta fit of the
 * link between ranks 0 and 1 (its rate on an emulated cluster, docs/cluster.md).
 * Run it once per rank count.
 *
 * Timing: after a warm-up call, each measurement repeats the call for about
 * --seconds (at least 3 times) and reports the best of --trials such runs,
 * adjoin's and raw runs alternating, so one-off stalls on a shared machine do
 * not decide a ratio.
 *
 * Raw MPI waits as adjoin does: where the wait policy resolves to yield (more
 * ranks on the node than cores), a blocking MPI call spins while the rank it
 * waits for needs its core, so the raw ways are MPI's nonblocking calls
 * (MPI_Ibcast, MPI_Ireduce, ...) completed by MPI_Testall and sched_yield,
 * the fastest way MPI has there; elsewhere the blocking calls.  The header
 * says which. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/adjoin.h"
#include "algorithm_table_impl.h"
#include "bench_host.h"

typedef struct bench_ctx {
  int rank, size;
  double seconds;
  int trials;
  bool raw_yield; /* raw MPI by nonblocking calls and yielding (see the top) */
} bench_ctx;

typedef int (*bench_fn)(void *arg);

/* Calls per timed run, so a run lasts about ctx->seconds: chosen from one timed
 * call after a warm-up, agreed (max over ranks) so every rank makes the same
 * calls. */
static int bench_reps(const bench_ctx *ctx, bench_fn fn, void *arg) {
  fn(arg);
  bench_barrier_yielding(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  fn(arg);
  return bench_repetitions(ctx->seconds, MPI_Wtime() - t0, 3, 10000);
}

/* Seconds per call of one run of `reps` calls, the slowest rank's.  No
 * collective runs inside the timed loop besides the calls themselves. */
static double bench_run(bench_fn fn, void *arg, int reps) {
  bench_barrier_yielding(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int k = 0; k < reps; k++) fn(arg);
  double per = (MPI_Wtime() - t0) / reps, worst;
  MPI_Allreduce(&per, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

typedef struct op_arg {
  adj_op *op;
  adj_direction direction;
  adj_tensor *in, *out;
} op_arg;

static int run_op(void *p) {
  op_arg *a = p;
  return adj_op_apply(a->op, a->direction, a->in, a->out);
}

typedef struct raw_arg {
  int kind; /* 0 bcast, 1 reduce, 2 allreduce, 3 alltoallv, 4 reduce_scatter + gatherv */
  bool yield; /* nonblocking calls completed by yielding (see the top) */
  const char *label;
  void *send, *recv;
  double *pack;
  int64_t n;
  int *counts, *displs;
  int rows_per_rank, cols, size, rank;
} raw_arg;

/* The repartition moves a [size*rows, size*cols] matrix from row blocks to
 * column blocks: worker r sends to worker q the (rows x cols) piece of its rows
 * in q's columns.  The raw version packs and exchanges with MPI_Alltoallv. */
static void raw_pack(const raw_arg *a) {
  int rows = a->rows_per_rank, cols = a->cols, width = a->size * cols;
  for (int q = 0; q < a->size; q++)
    for (int i = 0; i < rows; i++)
      memcpy(a->pack + (size_t)q * rows * cols + (size_t)i * cols,
             (const double *)a->send + (size_t)i * width + (size_t)q * cols, sizeof(double) * (size_t)cols);
}

/* A raw way by MPI's blocking call. */
static int run_raw_blocking(raw_arg *a) {
  switch (a->kind) {
  case 0: return MPI_Bcast(a->send, (int)a->n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  case 1: return MPI_Reduce(a->send, a->recv, (int)a->n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  /* Out of place, like the operator: the input survives. */
  case 2: return MPI_Allreduce(a->send, a->recv, (int)a->n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  case 4:
    /* Rank r sums chunk r, then the root gathers the chunks: Rabenseifner's
     * reduce to one root written with MPI's own two halves. */
    MPI_Reduce_scatter(a->send, a->pack, a->counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return MPI_Gatherv(a->pack, a->counts[a->rank], MPI_DOUBLE, a->recv, a->counts, a->displs, MPI_DOUBLE, 0,
                       MPI_COMM_WORLD);
  default:
    /* The piece from worker q is rows q*rows.. of my column block, which is
     * contiguous there, so the baseline receives straight into place. */
    return MPI_Alltoallv(a->pack, a->counts, a->displs, MPI_DOUBLE, a->recv, a->counts, a->displs, MPI_DOUBLE,
                         MPI_COMM_WORLD);
  }
}

/* The same by the nonblocking twin, waited by yielding. */
static int run_raw_yielding(raw_arg *a) {
  MPI_Request r;
  switch (a->kind) {
  case 0: MPI_Ibcast(a->send, (int)a->n, MPI_DOUBLE, 0, MPI_COMM_WORLD, &r); break;
  case 1: MPI_Ireduce(a->send, a->recv, (int)a->n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD, &r); break;
  case 2: MPI_Iallreduce(a->send, a->recv, (int)a->n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r); break;
  case 4:
    MPI_Ireduce_scatter(a->send, a->pack, a->counts, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r);
    adj_wait_all(1, &r, ADJ_WAIT_YIELD);
    MPI_Igatherv(a->pack, a->counts[a->rank], MPI_DOUBLE, a->recv, a->counts, a->displs, MPI_DOUBLE, 0,
                 MPI_COMM_WORLD, &r);
    break;
  default:
    MPI_Ialltoallv(a->pack, a->counts, a->displs, MPI_DOUBLE, a->recv, a->counts, a->displs, MPI_DOUBLE,
                   MPI_COMM_WORLD, &r);
  }
  return adj_wait_all(1, &r, ADJ_WAIT_YIELD);
}

static int run_raw(void *p) {
  raw_arg *a = p;
  if (a->kind == 3) raw_pack(a);
  return a->yield ? run_raw_yielding(a) : run_raw_blocking(a);
}

static int die(const char *what) {
  fprintf(stderr, "bench-primitives: %s: %s\n", what, adj_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

/* One row: adjoin's op in `direction` versus each of `nraw` raw ways to move
 * the same data, best of ctx->trials runs each.  They alternate run by run, so
 * a burst of load from another process slows all sides alike instead of
 * deciding the ratio, which is taken against the fastest raw way. */
static void bench_row(const bench_ctx *ctx, const char *name, size_t bytes, op_arg *ours, int nraw, raw_arg *raw) {
  int reps_ours = bench_reps(ctx, run_op, ours), reps_raw[4];
  double t_ours = 1e30, t_raw[4] = {1e30, 1e30, 1e30, 1e30};
  for (int k = 0; k < nraw; k++) {
    raw[k].yield = ctx->raw_yield;
    reps_raw[k] = bench_reps(ctx, run_raw, &raw[k]);
  }
  for (int trial = 0; trial < ctx->trials; trial++) {
    double a = bench_run(run_op, ours, reps_ours);
    if (a < t_ours) t_ours = a;
    for (int k = 0; k < nraw; k++) {
      double b = bench_run(run_raw, &raw[k], reps_raw[k]);
      if (b < t_raw[k]) t_raw[k] = b;
    }
  }
  int best = 0;
  for (int k = 1; k < nraw; k++)
    if (t_raw[k] < t_raw[best]) best = k;
  if (ctx->rank == 0) {
    printf("%-15s %10.3f MB  %12.1f us  %12.1f us  %7.3f  %-24s %s\n", name, bytes / 1048576.0, t_ours * 1e6,
           t_raw[best] * 1e6, t_ours / t_raw[best], raw[best].label, adj_op_algorithm(ours->op));
    fflush(stdout);
  }
}

static void bench_collectives(const bench_ctx *ctx, int64_t n) {
  MPI_Comm world = MPI_COMM_WORLD;
  int one[1] = {1}, all[1] = {ctx->size};
  adj_partition *root, *everyone;
  if (adj_partition_create(world, 1, one, 1, NULL, &root) ||
      adj_partition_create(world, 1, all, ctx->size, NULL, &everyone))
    die("partition");
  adj_decomposition *on_root;
  int64_t shape[1] = {n};
  if (adj_decomposition_create(root, 1, shape, &on_root)) die("decomposition");
  /* MPI_Bcast moves the root's buffer to every other rank and leaves the root
   * alone, so the like-for-like broadcast goes to the other ranks only.  (A
   * destination partition that includes the root also gives the root its own
   * copy of y: one extra local memcpy that MPI_Bcast never makes.) */
  adj_partition *others;
  int *other_ranks = malloc(sizeof(int) * (size_t)ctx->size), n_others[1] = {ctx->size - 1};
  for (int r = 1; r < ctx->size; r++) other_ranks[r - 1] = r;
  if (adj_partition_create(world, 1, n_others, ctx->size - 1, other_ranks, &others)) die("partition");
  free(other_ranks);
  adj_op *bcast, *reduce, *allreduce;
  int dims[1] = {0};
  if (adj_broadcast_create(ADJ_FLOAT64, on_root, others, &bcast)) die("broadcast");
  if (adj_sum_reduce_create(ADJ_FLOAT64, everyone, on_root, &reduce)) die("sum-reduce");
  if (adj_all_sum_reduce_create(ADJ_FLOAT64, everyone, 1, shape, 1, dims, &allreduce)) die("all-sum-reduce");
  adj_tensor bx, by, rx, ry, ax, ay;
  adj_op_create_domain_tensor(bcast, &bx), adj_op_create_range_tensor(bcast, &by);
  adj_op_create_domain_tensor(reduce, &rx), adj_op_create_range_tensor(reduce, &ry);
  adj_op_create_domain_tensor(allreduce, &ax), adj_op_create_range_tensor(allreduce, &ay);
  size_t bytes = (size_t)n * sizeof(double);
  op_arg ob = {bcast, ADJ_FORWARD, &bx, &by}, orr = {reduce, ADJ_FORWARD, &rx, &ry}, oa = {allreduce, ADJ_FORWARD, &ax, &ay};
  /* The root broadcasts its x; every other rank receives into its y. */
  raw_arg rb = {.kind = 0, .label = "MPI_Bcast", .send = ctx->rank == 0 ? bx.data : by.data, .n = n},
          ra = {.kind = 2, .label = "MPI_Allreduce", .send = ax.data, .recv = ay.data, .n = n};
  /* The sum-reduce's rivals: a reduce to the root; an all-reduce, which the
   * other ranks receive into a scratch block; reduce-scatter + gather. */
  double *scratch = malloc(bytes), *chunk = malloc(bytes);
  int *counts = malloc(sizeof(int) * (size_t)ctx->size), *displs = malloc(sizeof(int) * (size_t)ctx->size);
  for (int r = 0, start = 0; r < ctx->size; r++) {
    counts[r] = (int)(n / ctx->size + (r < n % ctx->size));
    displs[r] = start;
    start += counts[r];
  }
  raw_arg rr[3] = {
      {.kind = 1, .label = "MPI_Reduce", .send = rx.data, .recv = ry.data, .n = n},
      {.kind = 2, .label = "MPI_Allreduce", .send = rx.data, .recv = ctx->rank == 0 ? ry.data : scratch, .n = n},
      {.kind = 4, .label = "MPI_Reduce_scatter+Gatherv", .send = rx.data, .recv = ry.data, .pack = chunk, .n = n,
       .counts = counts, .displs = displs, .rank = ctx->rank},
  };
  bench_row(ctx, "broadcast", bytes, &ob, 1, &rb);
  bench_row(ctx, "sum-reduce", bytes, &orr, 3, rr);
  bench_row(ctx, "all-sum-reduce", bytes, &oa, 1, &ra);
  free(scratch), free(chunk), free(counts), free(displs);
  adj_tensor_destroy(&bx), adj_tensor_destroy(&by), adj_tensor_destroy(&rx), adj_tensor_destroy(&ry);
  adj_tensor_destroy(&ax), adj_tensor_destroy(&ay);
  adj_op_destroy(&bcast), adj_op_destroy(&reduce), adj_op_destroy(&allreduce);
  adj_decomposition_destroy(&on_root);
  adj_partition_destroy(&root), adj_partition_destroy(&everyone), adj_partition_destroy(&others);
}

/* Seconds per call of the sum-reduce of n float64 over the world onto rank 0
 * with `algorithm` forced, best of ctx->trials runs. */
static double time_sum_reduce(const bench_ctx *ctx, int64_t n, adj_sum_algorithm algorithm) {
  int one[1] = {1}, all[1] = {ctx->size};
  adj_partition *root, *everyone;
  adj_decomposition *on_root;
  adj_op *reduce;
  if (adj_sum_algorithm_set_default(algorithm) || adj_partition_create(MPI_COMM_WORLD, 1, one, 1, NULL, &root) ||
      adj_partition_create(MPI_COMM_WORLD, 1, all, ctx->size, NULL, &everyone) ||
      adj_decomposition_create(root, 1, (const int64_t[]){n}, &on_root) ||
      adj_sum_reduce_create(ADJ_FLOAT64, everyone, on_root, &reduce))
    die("sum-reduce");
  if (adj_sum_algorithm_set_default(ADJ_SUM_AUTO)) die("sum-reduce");
  adj_tensor x, y;
  adj_op_create_domain_tensor(reduce, &x), adj_op_create_range_tensor(reduce, &y);
  /* Written memory, not calloc's shared zero page (see the top). */
  for (int64_t k = 0; k < n; k++) ((double *)x.data)[k] = 1.0;
  op_arg arg = {reduce, ADJ_FORWARD, &x, &y};
  int reps = bench_reps(ctx, run_op, &arg);
  double best = 1e30;
  for (int trial = 0; trial < ctx->trials; trial++) {
    double t = bench_run(run_op, &arg, reps);
    if (t < best) best = t;
  }
  adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  adj_op_destroy(&reduce);
  adj_decomposition_destroy(&on_root);
  adj_partition_destroy(&root), adj_partition_destroy(&everyone);
  return best;
}

/* The fastest summing algorithm of this world size at each size, merged into
 * the cache file.  "reduce" (MPI_Ireduce) is a candidate, so the choice is
 * never slower than the plain MPI call in this measurement. */
static void calibrate(const bench_ctx *ctx, const int64_t *sizes, int nsizes) {
  adj_algorithm_entry entries[ADJ_ALGORITHM_TABLE_MAX];
  if (ctx->rank == 0) printf("%-12s %14s %14s %14s %14s  %s\n", "size", "reduce", "allreduce", "reduce-scatter",
                             "chain", "chosen");
  for (int i = 0; i < nsizes; i++) {
    int64_t n = sizes[i] / (int64_t)sizeof(double);
    double t[ADJ_SUM_ALGORITHM_COUNT];
    int best = 1;
    for (int a = 1; a < ADJ_SUM_ALGORITHM_COUNT; a++) {
      t[a] = time_sum_reduce(ctx, n, (adj_sum_algorithm)a);
      if (t[a] < t[best]) best = a;
    }
    /* The first size also covers every smaller block. */
    entries[i] = (adj_algorithm_entry){ctx->size, i == 0 ? 0 : sizes[i], best};
    if (ctx->rank == 0)
      printf("%9.3f MB %11.1f us %11.1f us %11.1f us %11.1f us  %s\n", sizes[i] / 1048576.0, t[1] * 1e6, t[2] * 1e6,
             t[3] * 1e6, t[4] * 1e6, adj_sum_algorithm_names[best]);
  }
  if (ctx->rank != 0) return;
  char path[1024];
  adj_algorithm_table table;
  adj_algorithm_table_path(path, sizeof path);
  if (adj_algorithm_table_read(path, &table)) fprintf(stderr, "bench-primitives: replacing %s\n", adj_last_error());
  if (adj_algorithm_table_set_group(&table, ctx->size, nsizes, entries) || adj_algorithm_table_write(path, &table))
    die("algorithm table");
  printf("wrote %d entries for groups of %d to %s\n", nsizes, ctx->size, path);
}

/* The link's alpha-beta fit (ping-pong between ranks 0 and 1, as adjoin-plan
 * --calibrate measures it), so a run on an emulated cluster's shaped links
 * (docs/cluster.md) shows the rate it recovered. */
static void calibrate_link(const bench_ctx *ctx) {
  double alpha, beta;
  if (adj_plan_calibrate(MPI_COMM_WORLD, 20, &alpha, &beta)) die("link calibration");
  if (ctx->rank == 0)
    printf("link (ping-pong, ranks 0 and 1): alpha %.3e s, beta %.4e s/B: %.3f GB/s, %.3f Gbit/s\n", alpha, beta,
           1e-9 / beta, 8e-9 / beta);
}

/* Repartition of a [size*rows, size*cols] float64 matrix from size x 1 row
 * blocks to 1 x size column blocks; total bytes per worker = 8*n. */
static void bench_repartition(const bench_ctx *ctx, int64_t n) {
  int size = ctx->size;
  int cols = 64, rows = (int)(n / ((int64_t)cols * size));
  if (rows < 1) rows = 1;
  int64_t global[2] = {(int64_t)size * rows, (int64_t)size * cols};
  int rows_shape[2] = {size, 1}, cols_shape[2] = {1, size};
  adj_partition *pr, *pc;
  adj_decomposition *dr, *dc;
  if (adj_partition_create(MPI_COMM_WORLD, 2, rows_shape, size, NULL, &pr) ||
      adj_partition_create(MPI_COMM_WORLD, 2, cols_shape, size, NULL, &pc) || adj_decomposition_create(pr, 2, global, &dr) ||
      adj_decomposition_create(pc, 2, global, &dc))
    die("repartition layout");
  adj_op *op;
  if (adj_repartition_create(ADJ_FLOAT64, dr, dc, &op)) die("repartition");
  adj_tensor x, y;
  adj_op_create_domain_tensor(op, &x), adj_op_create_range_tensor(op, &y);
  size_t local = (size_t)rows * cols * size;
  raw_arg raw = {.kind = 3, .label = "pack+MPI_Alltoallv", .send = x.data, .recv = y.data, .pack = malloc(local * sizeof(double)),
                 .counts = malloc(sizeof(int) * (size_t)size), .displs = malloc(sizeof(int) * (size_t)size),
                 .rows_per_rank = rows, .cols = cols, .size = size};
  for (int q = 0; q < size; q++) raw.counts[q] = rows * cols, raw.displs[q] = q * rows * cols;
  op_arg ours = {op, ADJ_FORWARD, &x, &y};
  bench_row(ctx, "repartition", local * sizeof(double), &ours, 1, &raw);
  free(raw.pack), free(raw.counts), free(raw.displs);
  adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  adj_op_destroy(&op);
  adj_decomposition_destroy(&dr), adj_decomposition_destroy(&dc);
  adj_partition_destroy(&pr), adj_partition_destroy(&pc);
}

static const char usage[] =
    "usage: mpiexec -n P bench-primitives [--calibrate] [--max-mb MB] [--seconds S] [--trials N]";

/* The options into ctx, *max_mb and *calibrating; BENCH_RUN, or the status to exit with. */
static int parse(int argc, char **argv, bench_ctx *ctx, double *max_mb, bool *calibrating) {
  long long trials = ctx->trials;
  const bench_option options[] = {{"--calibrate", BENCH_FLAG, 0, 0, calibrating},
                                  {"--max-mb", BENCH_REAL, 0, 65536, max_mb},
                                  {"--seconds", BENCH_REAL, 0, 60, &ctx->seconds},
                                  {"--trials", BENCH_COUNT, 1, 1000, &trials}};
  int status =
      bench_parse_arguments("bench-primitives", usage, argc, argv, options, 4, 0, NULL, NULL, ctx->rank == 0);
  ctx->trials = (int)trials;
  return status;
}

int main(int argc, char **argv) {
  bench_ctx ctx = {.seconds = 0.2, .trials = 7};
  double max_mb = 64;
  bool calibrating = false;
  if (adj_init(&argc, &argv, &ctx.rank, &ctx.size)) {
    fprintf(stderr, "bench-primitives: %s\n", adj_last_error());
    return 1;
  }
  int status = parse(argc, argv, &ctx, &max_mb, &calibrating);
  if (status == BENCH_RUN && ctx.size < 2) {
    if (ctx.rank == 0)
      fprintf(stderr, "bench-primitives: needs at least 2 ranks (run under mpiexec -n 2 or more)\n%s\n", usage);
    status = 2;
  }
  if (status != BENCH_RUN) {
    adj_finalize();
    return status;
  }
  adj_wait_policy policy;
  adj_wait_policy_resolve(MPI_COMM_WORLD, ADJ_WAIT_AUTO, &policy);
  ctx.raw_yield = policy == ADJ_WAIT_YIELD;
  if (ctx.rank == 0) {
    adj_check_level level = ADJ_CHECK_FIRST;
    adj_check_level_default(&level);
    adj_sum_algorithm algorithm = ADJ_SUM_AUTO;
    if (adj_sum_algorithm_get_default(&algorithm)) die("ADJ_SUM_REDUCE_ALGORITHM");
    printf("bench-primitives: %d ranks on %ld cores, wait policy %s, check level %s, sum-reduce algorithm %s, "
           "float64; raw MPI by %s\n",
           ctx.size, sysconf(_SC_NPROCESSORS_ONLN), adj_wait_policy_name(policy), adj_check_level_name(level),
           adj_sum_algorithm_names[algorithm],
           ctx.raw_yield ? "nonblocking calls completed by yielding" : "blocking calls");
    if (!calibrating)
      printf("%-15s %13s  %15s  %15s  %7s  %-24s %s\n", "operation", "size", "adjoin", "fastest MPI", "ratio",
             "fastest MPI way", "adjoin algorithm");
  }
  static const int64_t sizes[] = {8192, 65536, 1 << 20, 8 << 20, 64 << 20};
  int nsizes = 0;
  while (nsizes < (int)(sizeof sizes / sizeof sizes[0]) && sizes[nsizes] <= (int64_t)(max_mb * 1048576.0)) nsizes++;
  if (calibrating) {
    if (ctx.size > 1) calibrate(&ctx, sizes, nsizes), calibrate_link(&ctx);
    adj_finalize();
    return 0;
  }
  for (int i = 0; i < nsizes; i++) {
    int64_t n = sizes[i] / (int64_t)sizeof(double);
    bench_collectives(&ctx, n);
    bench_repartition(&ctx, n);
  }
  adj_finalize();
  return 0;
}
