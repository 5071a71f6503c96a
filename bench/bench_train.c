/* Training throughput of LeNet-5: images per second over an epoch (forward,
 * backward and Adam step of every batch; adjoin-train's "images/s"), for one
 * layout in float32 and float64.
 *
 *   mpiexec.mpich -n 1 bench-train                 the sequential network
 *   mpiexec.mpich -n 4 bench-train dist4           Table 1's 4-worker layout
 *   bench-train [layout [images [repetitions [batch]]]]   defaults: sequential
 *       on 1 rank, distN on N ranks; 8192 images; 3; 256
 *
 * The images are synthetic (their values do not change the work), so the
 * benchmark needs no data set.  Each figure is the best of `repetitions`
 * epochs after one warm-up epoch, so a neighbour's burst on the shared
 * machine lowers no figure.  OpenBLAS gets cores / ranks threads per rank
 * (adj_train_share_cores) unless OPENBLAS_NUM_THREADS says otherwise.  The
 * PyTorch twin is tools/bench_pytorch_lenet.py (same network, batch and
 * optimizer); the README compares the two. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "adjoin/adjoin.h"

/* Best images/s over `repetitions` epochs after a warm-up; 0 on failure. */
static double measure(const char *layout, adj_dtype dtype, int64_t batch, const adj_dataset *data, int repetitions) {
  adj_layer *net = NULL;
  adj_optimizer *opt = NULL;
  adj_trainer *trainer = NULL;
  adj_lenet_config lc = {.comm = MPI_COMM_WORLD, .dtype = dtype, .layout = layout, .batch = batch};
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3};
  int status = adj_lenet_create(&lc, &net);
  if (!status) status = adj_network_init_uniform(net, 1);
  if (!status) status = adj_optimizer_create(net, &oc, &opt);
  adj_trainer_config tc = {.network = net, .optimizer = opt, .train = data, .seed = 1};
  if (!status) status = adj_trainer_create(&tc, &trainer);
  double best = 0;
  for (int r = 0; r <= repetitions && !status; r++) {
    adj_train_stats stats;
    MPI_Barrier(MPI_COMM_WORLD);
    status = adj_trainer_run(trainer, -1, NULL, NULL, &stats);
    double seconds = stats.seconds;
    MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (r > 0 && !status && (double)data->count / seconds > best) best = (double)data->count / seconds;
  }
  if (status) fprintf(stderr, "bench-train: %s %s: %s\n", layout, adj_dtype_name(dtype), adj_last_error());
  adj_trainer_destroy(&trainer);
  adj_optimizer_destroy(&opt);
  adj_layer_destroy(&net);
  return status ? 0 : best;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char fallback[16];
  snprintf(fallback, sizeof fallback, size == 1 ? "sequential" : "dist%d", size);
  const char *layout = argc > 1 ? argv[1] : fallback;
  int64_t images = argc > 2 ? atoll(argv[2]) : 8192, batch = argc > 4 ? atoll(argv[4]) : 256;
  int repetitions = argc > 3 ? atoi(argv[3]) : 3;
  int threads = adj_train_share_cores(MPI_COMM_WORLD);
  adj_dataset *data = NULL;
  if (images > 0) adj_dataset_random(images, 28, 28, 10, 1, &data);
  char host[64] = "?";
  gethostname(host, sizeof host);
  if (rank == 0)
    printf("bench-train: host %s, %ld online cores, %d ranks x %d OpenBLAS threads, LeNet-5 %s, batch %lld, "
           "%lld images per epoch, Adam, best of %d epochs\n", host, sysconf(_SC_NPROCESSORS_ONLN), size, threads,
           layout, (long long)batch, (long long)images, repetitions);
  int failed = !data;
  for (int d = 0; d < 2 && data; d++) {
    adj_dtype dtype = d == 0 ? ADJ_FLOAT32 : ADJ_FLOAT64;
    double rate = measure(layout, dtype, batch, data, repetitions);
    failed |= rate == 0;
    if (rank == 0) printf("  %-10s %s  %8.0f images/s  (%.2f s per 8000-image epoch)\n", layout, adj_dtype_name(dtype),
                          rate, rate > 0 ? 8000 / rate : 0);
  }
  adj_dataset_destroy(&data);
  MPI_Finalize();
  return failed;
}
