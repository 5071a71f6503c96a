/* bench-data: the memory a rank needs to read its shard of every batch of an
 * epoch, against what it needed when every rank held the whole data set.
 *
 *   mpiexec -n P bench-data DIR [BATCH]
 *
 * opens the training half of DIR (IDX, .npy or HDF5: adj_dataset_open_dir),
 * then reads one shuffled epoch in global batches of BATCH (default 8192),
 * each rank only its balanced share of every batch (the block a
 * batch-parallel input layout gives it) into float32, with its targets.  It
 * prints the largest peak resident set (VmHWM) over the ranks, and the part
 * of it above what the rank held before reading.  Then, as the reference
 * measured in the same run, every rank reads the whole set into one float32
 * tensor (what each rank held before data sets were read by shard) and the
 * peak again.  tools/bench-data-rss.sh runs it at 1, 2 and 4 ranks on .npy
 * and HDF5 copies of Fashion-MNIST and prints the ratios. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"
#include "bench_host.h"

static const char usage[] = "usage: mpiexec -n P bench-data DIR [BATCH]";

/* VmHWM or VmRSS of this process from /proc/self/status, in MiB; 0 where
 * there is none. */
static double status_mib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  double kib = 0;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, n) && line[n] == ':') kib = strtod(line + n + 1, NULL);
  if (f) fclose(f);
  return kib / 1024;
}

static int out_of_memory(void) {
  fprintf(stderr, "bench-data: out of memory\n");
  return ADJ_ERR_MEM;
}

/* Batch rows [start, start + share) of whole samples of the given shape. */
static adj_box rows_box(int64_t start, int64_t share, int sample_rank, const int64_t *sample_shape) {
  adj_box box = {.rank = sample_rank + 1, .start = {start}, .extent = {share}};
  memcpy(box.extent + 1, sample_shape, sizeof(int64_t) * (size_t)sample_rank);
  return box;
}

/* This rank's share of every global batch of one shuffled epoch: inputs and
 * targets. */
static int read_epoch(adj_dataset *ds, int64_t batch, int rank, int ranks) {
  int64_t n = adj_dataset_count(ds), start, share;
  adj_balanced_block(batch, ranks, rank, &start, &share);
  adj_box in = rows_box(start, share, adj_dataset_input_rank(ds), adj_dataset_input_shape(ds));
  adj_box out = rows_box(start, share, adj_dataset_target_rank(ds), adj_dataset_target_shape(ds));
  int64_t *order = malloc(sizeof *order * (size_t)n);
  adj_rng *rng = NULL;
  adj_tensor inputs = {0}, targets = {0};
  int status = order ? adj_rng_create(1, &rng) : out_of_memory();
  if (!status) status = adj_tensor_create(&inputs, ADJ_FLOAT32, in.rank, in.extent);
  if (!status) status = adj_tensor_create(&targets, ADJ_FLOAT32, out.rank, out.extent);
  if (!status) adj_shuffle_indices(rng, n, order);
  for (int64_t first = 0; !status && first < n; first += batch) {
    int64_t count = n - first < batch ? n - first : batch;
    status = adj_dataset_read_inputs(ds, order + first, count, &in, &inputs);
    if (!status) status = adj_dataset_read_targets(ds, order + first, count, &out, &targets);
  }
  adj_tensor_destroy(&inputs), adj_tensor_destroy(&targets);
  adj_rng_destroy(&rng);
  free(order);
  return status;
}

/* Every sample into one tensor, as each rank held the set before. */
static int read_whole(adj_dataset *ds) {
  int64_t n = adj_dataset_count(ds);
  adj_box box = rows_box(0, n, adj_dataset_input_rank(ds), adj_dataset_input_shape(ds));
  int64_t *indices = malloc(sizeof *indices * (size_t)n);
  adj_tensor all = {0};
  int status = indices ? adj_tensor_create(&all, ADJ_FLOAT32, box.rank, box.extent) : out_of_memory();
  for (int64_t i = 0; indices && i < n; i++) indices[i] = i;
  if (!status) status = adj_dataset_read_inputs(ds, indices, n, &box, &all);
  adj_tensor_destroy(&all);
  free(indices);
  return status;
}

typedef struct figures {
  double before, shard, whole, seconds; /* MiB, MiB, MiB, s: each the largest over the ranks */
} figures;

static int measure(adj_dataset *ds, int64_t batch, int rank, int ranks, figures *f) {
  f->before = bench_max(MPI_COMM_WORLD, status_mib("VmRSS"));
  bench_barrier(MPI_COMM_WORLD);
  double start = MPI_Wtime();
  int status = read_epoch(ds, batch, rank, ranks);
  f->seconds = bench_max(MPI_COMM_WORLD, MPI_Wtime() - start);
  f->shard = bench_max(MPI_COMM_WORLD, status_mib("VmHWM"));
  if (!status) status = read_whole(ds);
  f->whole = bench_max(MPI_COMM_WORLD, status_mib("VmHWM"));
  return status;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, ranks;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const char *given[2] = {0};
  int n = 0, parsed = bench_parse_arguments("bench-data", usage, argc, argv, NULL, 0, 2, given, &n, rank == 0);
  long long batch = 8192;
  if (parsed == BENCH_RUN && n < 1) {
    if (rank == 0) fprintf(stderr, "bench-data: DIR is required\n%s\n", usage);
    parsed = 2;
  }
  if (parsed == BENCH_RUN && n > 1 && !bench_parse_count("bench-data", "BATCH", given[1], ranks, 1LL << 30, rank == 0, &batch))
    parsed = 2;
  if (parsed != BENCH_RUN) {
    MPI_Finalize();
    return parsed;
  }
  adj_dataset *ds = NULL;
  figures f = {0};
  int status = adj_dataset_open_dir(MPI_COMM_WORLD, given[0], "train", 0, &ds);
  if (!status) status = measure(ds, batch, rank, ranks, &f);
  if (!status && rank == 0) {
    printf("bench-data: %s\n", adj_dataset_describe_inputs(ds));
    printf("bench-data: %d rank%s, global batch %lld: peak RSS per rank %.1f MiB, %.1f MiB above the %.1f MiB "
           "before reading; every rank holding the whole set: %.1f MiB (%.1f above); one epoch read in %.2f s\n",
           ranks, ranks == 1 ? "" : "s", batch, f.shard, f.shard - f.before, f.before, f.whole, f.whole - f.before,
           f.seconds);
  }
  if (status && rank == 0) fprintf(stderr, "bench-data: %s\n", adj_last_error());
  adj_dataset_destroy(&ds);
  MPI_Finalize();
  return status ? 1 : 0;
}
