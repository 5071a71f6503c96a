/* example-mlp-dp: ShallowSpeed's reference MLP (paper 004) trained data
 * parallel on MNIST: sizes 784-128-127-126-125-124-123-10, ReLU, global batch
 * 128 in 4 micro-batches per replica, SGD with learning rate 0.006, one
 * sequential replica per rank (1, 2, 4 or 8 ranks all train the same global
 * batches), initialised as ShallowSpeed does (W ~ N(0, 1) / sqrt(F_in),
 * b = 0).  Softmax cross-entropy replaces ShallowSpeed's softmax + MSE
 * (adjoin's trainer trains a cross-entropy head).
 *
 *   mpiexec.mpich -n 4 example-mlp-dp [DATA_DIR [EPOCHS [SEED [IMAGES]]]]
 *   example-mlp-dp --help
 *
 * IMAGES: train on the first IMAGES training images only (default: all).
 * EPOCHS, SEED and IMAGES are whole numbers; anything else exits 2 naming it.
 *
 * Prints per epoch the mean loss, test accuracy, images/s and the reducer's
 * bytes and wait per step; at the end the parameter hash, equal on every
 * replica (ShallowSpeed's assert_sync), and the same for every rank count
 * when the parameters are. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"

enum { GLOBAL_BATCH = 128, MICRO_BATCHES = 4 };

static const char usage[] =
    "usage: mpiexec.mpich -n R example-mlp-dp [DATA_DIR [EPOCHS [SEED [IMAGES]]]]\n"
    "  DATA_DIR  the MNIST IDX files [data/mnist]\n"
    "  EPOCHS    1 or more [20]\n"
    "  SEED      initial parameters and shuffle [1]\n"
    "  IMAGES    train on the first IMAGES training images only [0: all]\n";

typedef struct mlp_args {
  const char *dir;
  int epochs;
  uint64_t seed;
  int64_t images;
} mlp_args;

static int fail(int rank, const char *what) {
  if (rank == 0) fprintf(stderr, "example-mlp-dp: %s: %s\n", what, adj_last_error());
  return 1;
}

/* ShallowSpeed's initialisation: W ~ N(0, 1) / sqrt(F_in), b = 0.  The MLP is
 * sequential on every replica, so each rank holds every parameter whole
 * (and the trainer starts all replicas from replica 0's values). */
static int init_shallowspeed(adj_layer *net, uint64_t seed) {
  adj_rng *rng = NULL;
  if (adj_rng_create(seed, &rng)) return 1;
  for (int i = 0; i < adj_layer_parameter_count(net); i++) {
    adj_parameter *p = adj_layer_parameter(net, i);
    if (p->value.rank == 2) adj_rng_fill_normal(rng, &p->value, 0, 1 / sqrt((double)p->value.shape[1]));
    else memset(p->value.data, 0, adj_tensor_bytes(&p->value));
  }
  adj_rng_destroy(&rng);
  return 0;
}

/* The network, described as a .net file would (docs/network-format.md) and
 * built sequentially on this replica's ranks. */
static int build(MPI_Comm comm, const adj_dataset *data, int64_t batch, adj_layer **net) {
  char text[512] = "network shallowspeed\ninput";
  for (int d = 0; d < adj_dataset_input_rank(data); d++)
    snprintf(text + strlen(text), sizeof text - strlen(text), " %lld", (long long)adj_dataset_input_shape(data)[d]);
  snprintf(text + strlen(text), sizeof text - strlen(text),
           "\nfc out=128\nrelu\nfc out=127\nrelu\nfc out=126\nrelu\nfc out=125\nrelu\nfc out=124\nrelu\n"
           "fc out=123\nrelu\nfc out=10\nloss type=xent\n");
  adj_description *d = NULL;
  int status = adj_description_parse(text, "example-mlp-dp", &d);
  adj_network_build_options o = {.dtype = ADJ_FLOAT32, .batch = batch};
  if (!status) status = adj_network_build(d, NULL, comm, &o, net);
  adj_description_destroy(&d);
  return status;
}

static int train(int rank, int ranks, const char *dir, int epochs, uint64_t seed, int64_t images) {
  adj_dataset *train_set = NULL, *test_set = NULL;
  if (adj_dataset_open_dir(MPI_COMM_WORLD, dir, "train", 10, &train_set) ||
      adj_dataset_open_dir(MPI_COMM_WORLD, dir, "test", 10, &test_set))
    return fail(rank, "loading data (run sh tools/provision-data.sh)");
  if (images > 0 && images < adj_dataset_count(train_set)) adj_dataset_limit(train_set, images);
  adj_replicas *replicas = NULL;
  adj_layer *net = NULL;
  adj_optimizer *opt = NULL;
  adj_trainer *trainer = NULL;
  int status = 1;
  int64_t local = (GLOBAL_BATCH + ranks * MICRO_BATCHES - 1) / (ranks * MICRO_BATCHES);
  if (adj_replicas_create(MPI_COMM_WORLD, ranks, &replicas)) goto done;
  if (build(adj_replicas_model_comm(replicas), train_set, local, &net) || init_shallowspeed(net, seed)) goto done;
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.006};
  if (adj_optimizer_create(net, &oc, &opt)) goto done;
  adj_trainer_config tc = {.network = net, .optimizer = opt, .train = train_set, .seed = seed,
                           .replicas = ranks > 1 ? replicas : NULL, .micro_batches = MICRO_BATCHES,
                           .global_batch = GLOBAL_BATCH};
  if (adj_trainer_create(&tc, &trainer)) goto done;
  if (rank == 0)
    printf("MLP 784-128-127-126-125-124-123-10 on %d rank%s: global batch %d, %d micro-batches of %lld per replica, "
           "SGD 0.006, %lld training images\n",
           ranks, ranks == 1 ? "" : "s", GLOBAL_BATCH, MICRO_BATCHES, (long long)local,
           (long long)adj_dataset_count(train_set));
  for (int e = 0; e < epochs; e++) {
    adj_train_stats s, test;
    if (adj_trainer_run(trainer, -1, NULL, NULL, &s) || adj_trainer_evaluate(trainer, test_set, &test)) goto done;
    if (rank == 0)
      printf("epoch %d: loss %.6f, test accuracy %.4f, %.0f images/s, reducer per step %.0f bytes, wait %.3f ms\n",
             e + 1, s.loss, (double)test.correct / (double)test.samples, (double)s.samples / s.seconds,
             (double)s.reduced_bytes / (double)s.batches, 1e3 * s.reduce_wait_seconds / (double)s.batches);
  }
  /* The replicas' own check hashes the parameters on one rank too (where the
   * trainer has no replicas to compare), so the hash is comparable across
   * rank counts. */
  uint64_t hash;
  if (adj_replicas_check_sync(replicas, net, &hash)) goto done;
  if (rank == 0 && ranks > 1) printf("replicas in sync (hash %016llx)\n", (unsigned long long)hash);
  if (rank == 0 && ranks == 1)
    printf("replicas in sync: one replica, so nothing compared (parameter hash %016llx)\n", (unsigned long long)hash);
  status = 0;
done:
  if (status) fail(rank, "training");
  adj_trainer_destroy(&trainer);
  adj_optimizer_destroy(&opt);
  adj_layer_destroy(&net);
  adj_replicas_destroy(&replicas);
  adj_dataset_destroy(&train_set);
  adj_dataset_destroy(&test_set);
  return status;
}

/* A positional number: decimal digits only, from min to max; otherwise rank 0
 * says so naming it and false. */
static bool whole(int rank, const char *what, const char *text, unsigned long long min, unsigned long long max,
                  unsigned long long *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (text[0] >= '0' && text[0] <= '9' && !errno && !*end && v >= min && v <= max) return *out = v, true;
  if (rank == 0)
    fprintf(stderr, "example-mlp-dp: %s '%s' is not a whole number from %llu to %llu\n", what, text, min, max);
  return false;
}

/* 0, 2 on a usage error (said by rank 0), -1 when --help printed the usage. */
static int parse_args(int argc, char **argv, int rank, mlp_args *a) {
  static const char *const names[3] = {"EPOCHS", "SEED", "IMAGES"};
  static const unsigned long long lo[3] = {1, 0, 0}, hi[3] = {INT_MAX, UINT64_MAX, INT64_MAX};
  unsigned long long v[3] = {20, 1, 0}; /* ShallowSpeed's EPOCHS; seed 1; every image */
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      if (rank == 0) fputs(usage, stdout);
      return -1;
    }
  /* DATA_DIR comes first, so a leading dash there is a mistyped option. */
  if (argc > 5 || (argc > 1 && argv[1][0] == '-')) {
    if (rank == 0) fprintf(stderr, "example-mlp-dp: unexpected argument '%s'\n%s", argv[argc > 5 ? 5 : 1], usage);
    return 2;
  }
  for (int k = 0; k + 2 < argc; k++)
    if (!whole(rank, names[k], argv[k + 2], lo[k], hi[k], &v[k])) return 2;
  *a = (mlp_args){.dir = argc > 1 ? argv[1] : "data/mnist", .epochs = (int)v[0], .seed = v[1], .images = (int64_t)v[2]};
  return 0;
}

int main(int argc, char **argv) {
  int rank, ranks;
  if (adj_init(&argc, &argv, &rank, &ranks)) {
    fprintf(stderr, "example-mlp-dp: %s\n", adj_last_error());
    return 1;
  }
  mlp_args a;
  int status = parse_args(argc, argv, rank, &a);
  adj_train_share_cores(MPI_COMM_WORLD);
  if (!status) status = train(rank, ranks, a.dir, a.epochs, a.seed, a.images);
  adj_finalize();
  return status < 0 ? 0 : status;
}
