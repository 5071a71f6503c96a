/* Benchmark: adjoin's halo exchange (adj_halo_create) against a hand-written
 * MPI_Sendrecv halo exchange of exactly the same regions, on the same tensor in
 * the same run, for 2-D and 3-D tensors with a centred k=5 (padding 2) kernel.
 * The hand-written version is the classic one: per dimension, in the same
 * nested order, MPI_Sendrecv to the left neighbour / from the right one and
 * back, each region described in place (a run of doubles when it is
 * contiguous, else an MPI subarray datatype), so it copies nothing itself.
 *
 *   mpiexec -n 2 build/bench/bench-halo [--seconds 0.3] [--trials 5]
 *   mpiexec -n 4 build/bench/bench-halo
 *   ADJ_HALO_ALGORITHM=nested|direct mpiexec -n 4 build/bench/bench-halo
 *
 * The last column names the algorithm adjoin's exchange took (halo.h); the
 * environment variable forces one.
 *
 * The grid is the most square factorisation of the rank count over the first
 * dimensions.  Timing alternates the two exchanges trial by trial and keeps the
 * best of each (one-off noise on a shared machine does not decide a ratio); a
 * trial repeats the exchange for about --seconds.  The adjoint time is printed
 * for information.  The two results are compared entry by entry before timing. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/adjoin.h"
#include "bench_host.h"

typedef struct bench_options {
  double seconds;
  int trials;
} bench_options;

/* A region of the local tensor as MPI sees it in place. */
typedef struct region {
  MPI_Datatype type;
  int count;
  int64_t offset; /* elements from the tensor's start */
} region;

typedef struct handwritten {
  MPI_Comm comm;
  int rank;                                    /* tensor rank */
  int left[ADJ_MAX_RANK], right[ADJ_MAX_RANK]; /* neighbour ranks or MPI_PROC_NULL */
  /* Per dimension: [0] to the left, [1] to the right, as sent and received. */
  region send[ADJ_MAX_RANK][2], recv[ADJ_MAX_RANK][2];
} handwritten;

/* `box` of a tensor of `shape`: nothing when empty (subarray types may not have
 * zero extents), a run of doubles when contiguous, else a subarray. */
static region make_region(int rank, const int64_t *shape, const adj_box *box) {
  region r = {.type = MPI_DOUBLE};
  int64_t volume = adj_box_volume(box);
  if (volume == 0) return r;
  int first = 0, contiguous = 1;
  while (first < rank && box->extent[first] == 1) first++;
  for (int d = first + 1; d < rank; d++) contiguous &= box->extent[d] == shape[d];
  if (contiguous) {
    for (int d = 0; d < rank; d++) r.offset = r.offset * shape[d] + box->start[d];
    r.count = (int)volume;
    return r;
  }
  int sizes[ADJ_MAX_RANK], subsizes[ADJ_MAX_RANK], starts[ADJ_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    sizes[d] = (int)shape[d];
    subsizes[d] = (int)box->extent[d];
    starts[d] = (int)box->start[d];
  }
  MPI_Type_create_subarray(rank, sizes, subsizes, starts, MPI_ORDER_C, MPI_DOUBLE, &r.type);
  MPI_Type_commit(&r.type);
  r.count = 1;
  return r;
}

/* Phase `dim` box over global range [lo, hi) in that dimension, nested as in
 * the DistDL exchange: whole local range before dim, bulk after it. */
static adj_box phase_box(const adj_halo_local *l, int dim, int64_t lo, int64_t hi) {
  adj_box b = {.rank = l->rank};
  for (int j = 0; j < l->rank; j++) {
    b.start[j] = j < dim ? 0 : j > dim ? l->bulk.start[j] : lo - l->input.start[j];
    b.extent[j] = j < dim ? l->shape[j] : j > dim ? l->bulk.extent[j] : hi - lo;
  }
  return b;
}

/* Neighbours' needs follow from their geometry, as any hand-written code does. */
static void handwritten_create(const adj_partition *p, const adj_halo_geometry *g, handwritten *h) {
  const int *coords = adj_partition_coords(p), *parts = adj_partition_shape(p);
  adj_halo_local l;
  adj_halo_geometry_local(g, coords, &l);
  h->comm = MPI_COMM_WORLD;
  h->rank = l.rank;
  for (int d = 0; d < l.rank; d++) {
    const adj_halo_dim *me = adj_halo_geometry_dim(g, d, coords[d]);
    int nc[ADJ_MAX_RANK];
    memcpy(nc, coords, sizeof nc);
    nc[d] = coords[d] - 1;
    h->left[d] = coords[d] > 0 ? adj_partition_rank_at(p, nc) : MPI_PROC_NULL;
    nc[d] = coords[d] + 1;
    h->right[d] = coords[d] + 1 < parts[d] ? adj_partition_rank_at(p, nc) : MPI_PROC_NULL;
    int64_t need_left = coords[d] > 0 ? adj_halo_geometry_dim(g, d, coords[d] - 1)->halo[1] : 0;
    int64_t need_right = coords[d] + 1 < parts[d] ? adj_halo_geometry_dim(g, d, coords[d] + 1)->halo[0] : 0;
    adj_box to_left = phase_box(&l, d, me->bulk[0], me->bulk[0] + need_left);
    adj_box to_right = phase_box(&l, d, me->bulk[1] - need_right, me->bulk[1]);
    adj_box from_left = phase_box(&l, d, me->bulk[0] - me->halo[0], me->bulk[0]);
    adj_box from_right = phase_box(&l, d, me->bulk[1], me->bulk[1] + me->halo[1]);
    h->send[d][0] = make_region(l.rank, l.shape, &to_left);
    h->send[d][1] = make_region(l.rank, l.shape, &to_right);
    h->recv[d][0] = make_region(l.rank, l.shape, &from_left);
    h->recv[d][1] = make_region(l.rank, l.shape, &from_right);
  }
}

static void handwritten_destroy(handwritten *h) {
  for (int d = 0; d < h->rank; d++)
    for (int s = 0; s < 2; s++) {
      if (h->send[d][s].type != MPI_DOUBLE) MPI_Type_free(&h->send[d][s].type);
      if (h->recv[d][s].type != MPI_DOUBLE) MPI_Type_free(&h->recv[d][s].type);
    }
}

static void sendrecv(double *x, const region *send, int to, const region *recv, int from, int tag, MPI_Comm comm) {
  MPI_Sendrecv(x + send->offset, send->count, send->type, to, tag, x + recv->offset, recv->count, recv->type, from, tag,
               comm, MPI_STATUS_IGNORE);
}

static void handwritten_exchange(const handwritten *h, double *x) {
  for (int d = 0; d < h->rank; d++) {
    sendrecv(x, &h->send[d][0], h->left[d], &h->recv[d][1], h->right[d], d, h->comm);
    sendrecv(x, &h->send[d][1], h->right[d], &h->recv[d][0], h->left[d], d, h->comm);
  }
}

typedef struct bench_case {
  adj_op *op;
  handwritten hand;
  adj_tensor x;
} bench_case;

typedef enum { RUN_OP_FORWARD, RUN_OP_ADJOINT, RUN_HANDWRITTEN } run_kind;

static void run(bench_case *b, run_kind kind, int reps) {
  for (int k = 0; k < reps; k++) {
    if (kind == RUN_HANDWRITTEN)
      handwritten_exchange(&b->hand, b->x.data);
    else
      adj_op_apply(b->op, kind == RUN_OP_FORWARD ? ADJ_FORWARD : ADJ_ADJOINT, &b->x, &b->x);
  }
}

/* Seconds per exchange for each kind: best over trials of a run of `reps`
 * exchanges (slowest rank), kinds interleaved within each trial. */
static void bench_times(bench_case *b, const bench_options *o, double *best) {
  run(b, RUN_OP_FORWARD, 2);
  run(b, RUN_HANDWRITTEN, 2);
  bench_barrier_yielding(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  run(b, RUN_HANDWRITTEN, 3);
  int reps = bench_repetitions(o->seconds, (MPI_Wtime() - t0) / 3, 5, 20000);
  for (int kind = 0; kind < 3; kind++) best[kind] = 1e30;
  for (int trial = 0; trial < o->trials; trial++)
    for (int kind = 0; kind < 3; kind++) {
      bench_barrier_yielding(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      run(b, (run_kind)kind, reps);
      double per = (MPI_Wtime() - t0) / reps, worst;
      MPI_Allreduce(&per, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (worst < best[kind]) best[kind] = worst;
    }
}

/* Both exchanges from the same bulk must give the same tensor. */
static int same_result(bench_case *b) {
  adj_tensor ref;
  adj_tensor_create(&ref, ADJ_FLOAT64, b->x.rank, b->x.shape);
  for (int64_t i = 0; i < adj_tensor_volume(&b->x); i++) adj_tensor_set(&b->x, i, (double)(i % 1000) + 0.5);
  adj_tensor_copy(&ref, &b->x);
  adj_op_forward(b->op, &b->x, &b->x);
  handwritten_exchange(&b->hand, ref.data);
  int same = !memcmp(ref.data, b->x.data, adj_tensor_bytes(&ref)), all;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  adj_tensor_destroy(&ref);
  return all;
}

/* Most square grid of `size` workers over the first `dims` dimensions. */
static void grid(int size, int rank, int dims, int *parts) {
  for (int d = 0; d < rank; d++) parts[d] = 1;
  for (int f = 2; size > 1; f++)
    while (size % f == 0) {
      int smallest = 0;
      for (int d = 1; d < dims; d++)
        if (parts[d] < parts[smallest]) smallest = d;
      parts[smallest] *= f;
      size /= f;
    }
}

static void bench_shape(const bench_options *o, int rank, const int64_t *shape, int size, int me) {
  int parts[ADJ_MAX_RANK];
  grid(size, rank, rank, parts);
  adj_halo_kernel k = {0};
  for (int d = 0; d < rank; d++) k.size[d] = 5, k.padding[d][0] = k.padding[d][1] = 2;
  adj_partition *p;
  adj_halo_geometry *g;
  bench_case b = {0};
  adj_partition_create(MPI_COMM_WORLD, rank, parts, size, NULL, &p);
  adj_halo_geometry_create(rank, shape, parts, NULL, &k, &g);
  adj_halo_create(ADJ_FLOAT64, p, g, &b.op);
  adj_op_create_domain_tensor(b.op, &b.x);
  handwritten_create(p, g, &b.hand);
  adj_halo_local l;
  adj_halo_geometry_local(g, adj_partition_coords(p), &l);
  int same = same_result(&b);
  double checked[3], unchecked[3];
  bench_times(&b, o, checked);
  adj_op_set_checks(b.op, false);
  bench_times(&b, o, unchecked);
  long long halo = adj_tensor_volume(&b.x) - adj_box_volume(&l.bulk), total;
  MPI_Allreduce(&halo, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (me == 0) {
    char s[64], q[64];
    int64_t pp[ADJ_MAX_RANK];
    for (int d = 0; d < rank; d++) pp[d] = parts[d];
    printf("%-16s %-10s %9.1f KB  %10.2f %10.2f %10.2f  %6.3f %6.3f  %10.2f  %-4s  %s\n",
           adj_shape_format(s, sizeof s, rank, shape), adj_shape_format(q, sizeof q, rank, pp), total * 8.0 / 1024.0,
           1e6 * unchecked[RUN_HANDWRITTEN], 1e6 * unchecked[RUN_OP_FORWARD], 1e6 * checked[RUN_OP_FORWARD],
           unchecked[RUN_OP_FORWARD] / unchecked[RUN_HANDWRITTEN], checked[RUN_OP_FORWARD] / checked[RUN_HANDWRITTEN],
           1e6 * unchecked[RUN_OP_ADJOINT], same ? "yes" : "NO", adj_op_algorithm(b.op));
  }
  handwritten_destroy(&b.hand);
  adj_tensor_destroy(&b.x);
  adj_op_destroy(&b.op);
  adj_halo_geometry_destroy(&g);
  adj_partition_destroy(&p);
}

static const char usage[] = "usage: mpiexec -n P bench-halo [--seconds S] [--trials N]";

/* The options into *o; BENCH_RUN, or the status to exit with. */
static int parse(int argc, char **argv, bool say, bench_options *o) {
  long long trials = 5;
  *o = (bench_options){.seconds = 0.3};
  const bench_option options[] = {{"--seconds", BENCH_REAL, 0, 60, &o->seconds},
                                  {"--trials", BENCH_COUNT, 1, 1000, &trials}};
  int status = bench_parse_arguments("bench-halo", usage, argc, argv, options, 2, 0, NULL, NULL, say);
  o->trials = (int)trials;
  return status;
}

int main(int argc, char **argv) {
  int me, size;
  if (adj_init(&argc, &argv, &me, &size)) {
    fprintf(stderr, "bench-halo: %s\n", adj_last_error());
    return 1;
  }
  bench_options o;
  int status = parse(argc, argv, me == 0, &o);
  if (status != BENCH_RUN) {
    adj_finalize();
    return status;
  }
  if (me == 0) {
    char host[128] = "?";
    gethostname(host, sizeof host);
    const char *policy = getenv("ADJ_WAIT_POLICY");
    printf("bench-halo: %s, %ld online cores, %d ranks, float64, k=5 pad 2 in every dimension, wait policy %s\n", host,
           sysconf(_SC_NPROCESSORS_ONLN), size, policy ? policy : "auto");
    printf("times in microseconds per forward exchange (best of %d trials); ratio = adjoin / MPI_Sendrecv\n", o.trials);
    printf("%-16s %-10s %12s  %10s %10s %10s  %6s %6s  %10s  %-4s  %s\n", "global shape", "grid", "halo total",
           "Sendrecv", "adjoin", "+checks", "ratio", "+chk", "adjoint", "same", "algorithm");
  }
  static const int64_t shapes2[][2] = {{512, 512}, {2048, 2048}};
  static const int64_t shapes3[][3] = {{48, 48, 48}, {128, 128, 128}};
  for (int i = 0; i < 2; i++) bench_shape(&o, 2, shapes2[i], size, me);
  for (int i = 0; i < 2; i++) bench_shape(&o, 3, shapes3[i], size, me);
  adj_finalize();
  return 0;
}
