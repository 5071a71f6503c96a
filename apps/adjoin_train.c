/* adjoin-train: trains any described network (description.h, a .net file)
 * at any placement (placement.h), sequential, distributed or data parallel,
 * on IDX image data (MNIST by default).  --model lenet|mlp|encdec names the
 * shipped LeNet-5 of the DistDL paper, ShallowSpeed's MLP and the batch-norm
 * encoder-decoder (networks/NAME.net; Fashion-MNIST by default for encdec), and
 * --layout the names adjoin-train has always taken for them.
 *
 *   mpiexec.mpich -n 4 adjoin-train --layout dist4 --epochs 10 --batch 256 --lr 0.001 --optimizer adam
 *   mpiexec.mpich -n 4 adjoin-train --net networks/lenet5.net --placement fig7 --check
 *   mpiexec.mpich -n 4 adjoin-train --layout dp              (4 sequential replicas)
 *   mpiexec.mpich -n 8 adjoin-train --layout dist4 --replicas 2
 *   mpiexec.mpich -n 6 adjoin-train --model mlp --layout 2x3
 *   mpiexec.mpich -n 8 adjoin-train --model encdec --layout 2x2 --replicas 2
 *
 * --check proves the network before it trains (network_check.h): its
 * Jacobian dot-product test and distributed == sequential on the first batch
 * of the training data, in float64; a failure stops the run.
 *
 * Rank 0 prints a progress bar per epoch (plain lines when stdout is not a
 * terminal), a summary line per epoch, and as its last line the final test
 * accuracy as `test_accuracy=0.9812`.  Exit codes: 0 done, 1 a run-time error
 * (unreadable data or network file, refused checkpoint, a metrics file that
 * cannot be written, a failed --check; the message names it), 2 bad or
 * conflicting flags (a placement that does not exist or does not fit the
 * ranks included), 3 stopped on purpose by --stop-after-batches (a simulated
 * crash, even after the run's last batch). */
#include <float.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/adjoin.h"
#include "tool_output.h"
#include "report.h"
#include "train_select.h"

typedef struct train_options {
  const char *data;           /* directory of the four IDX files; NULL: the model's default */
  int64_t epochs, batch;
  double lr, momentum, weight_decay;
  adj_optimizer_kind optimizer;
  adj_lr_schedule lr_schedule;
  uint64_t seed;
  adj_dtype dtype;
  const char *model;          /* "lenet", "mlp", "encdec", or NULL with --net */
  const char *net;            /* --net FILE */
  const char *layout;         /* --layout or --placement; NULL: chosen from the rank count */
  bool check;                 /* prove the network before training */
  const char *checkpoint;     /* NULL: none */
  bool resume;
  const char *metrics;        /* CSV path; the SVG plot goes beside it */
  int64_t checkpoint_every;   /* batches between mid-epoch checkpoints; 0: epoch ends only */
  int64_t stop_after;         /* batches after which to stop without saving; -1: never */
  int64_t train_limit, test_limit; /* use only the first N samples; 0: all */
  int64_t replicas;           /* data-parallel replicas of the layout; 0: 1, or every rank for dp */
  int64_t micro_batches;      /* per step and replica */
  int64_t caps[2];            /* first and later gradient buckets, bytes */
  bool reduce_after_backward;
  bool deep_halos;            /* fuse runs of conv, pool and activation layers over one halo exchange */
  bool per_replica_batchnorm; /* batch norm statistics of each replica's share alone, not SyncBN */
  const char *trace;          /* Chrome trace-event timeline of every rank; NULL: none */
  const char *trace_events;   /* event list of rank 0; NULL: none */
} train_options;

static const char usage[] =
    "usage: mpiexec.mpich -n RANKS adjoin-train [options]\n"
    "  --data DIR            directory with train-images-idx3-ubyte, train-labels-idx1-ubyte,\n"
    "                        t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (raw or .gz)\n"
    "                        [data/mnist, encdec: data/fashion-mnist; provision them with:\n"
    "                        sh tools/provision-data.sh]\n"
    "  --epochs N            [10]       --batch B        [256; at most the training images]\n"
    "  --lr RATE             [0.001]    --optimizer adam|sgd [adam]\n"
    "  --lr-schedule constant|cosine  cosine: the rate falls to 0 over the run's steps\n"
    "                        (PyTorch's CosineAnnealingLR stepped per batch) [constant]\n"
    "  --momentum M          SGD only, below 1 [0]      --weight-decay D  [0]\n"
    "  --seed S              initial parameters and shuffle [1]\n"
    "  --dtype f32|f64       [f32]\n"
    "  --net FILE            the network to train, a .net description (docs/network-format.md)\n"
    "  --placement P         where its layers run: a placement file, a name of networks/NET/*.place,\n"
    "                        sequential, dp (a sequential replica per rank), RxC (rows x batch in\n"
    "                        the convolutions, 1.5D fc layers; C > 1 runs as C replicas of Rx1) or\n"
    "                        window=...,fc=... (docs/placement.md), or auto: the planner's best for\n"
    "                        these ranks, with predicted and measured time per layer at the end\n"
    "                        (docs/planner.md) [the file's own]\n"
    "  --check               prove the network first: its Jacobian dot-product test and\n"
    "                        distributed == sequential on the first batch, in float64\n"
    "  --model lenet|mlp|encdec  the shipped LeNet-5, ShallowSpeed's MLP 784-128-127-126-125-124-123-10\n"
    "                        or the batch-norm encoder-decoder (networks/*.net) [lenet]\n"
    "  --layout NAME         --placement for --model: LeNet-5 sequential, dist2, dist4, dist8,\n"
    "                        hybrid4, hybrid4-batch, fig7 or a grid RxC [sequential on 1 rank, distN\n"
    "                        on N = 2, 4, 8]; MLP: sequential or a 1.5D grid PrxPc, e.g. 2x3 [1xN];\n"
    "                        encdec: sequential or a spatial grid P0xP1 (rows x columns), e.g. 2x2\n"
    "                        [Nx1]; any: dp\n"
    "  --per-replica-batchnorm  with replicas, normalise by each replica's share of the batch\n"
    "                        (default: synchronised batch norm over the replicas, SyncBN)\n"
    "  --deep-halos          fuse each run of convolution, pool and activation layers into one deep\n"
    "                        halo layer (one halo exchange per run; docs/deep-halos.md)\n"
    "  --replicas R          data parallel: R replicas of the layout, RANKS = R x its ranks [1]\n"
    "  --micro-batches N     gradient accumulation passes per step [1]; --batch is the global batch\n"
    "  --bucket-cap BYTES    gradient buckets (0 = one per parameter, 25M, unlimited) [25MiB]\n"
    "  --first-bucket-cap BYTES  the first bucket's cap [1MiB, at most --bucket-cap]\n"
    "  --reduce-after-backward   no overlap: reduce gradients after the whole backward\n"
    "  --trace FILE.json     every rank's steps, layers, buckets and waits on one timeline\n"
    "                        (Chrome trace-event JSON for Perfetto or chrome://tracing)\n"
    "  --trace-events FILE   rank 0's events (backward stages, buckets, wait, step), one per line\n"
    "  --checkpoint PATH     save parameters and optimizer state after every epoch\n"
    "  --checkpoint-every N  ... and also every N batches\n"
    "  --resume              continue from --checkpoint (a fresh start if it does not exist yet)\n"
    "  --metrics FILE.csv    per-epoch metrics; the plot goes to FILE.svg\n"
    "  --train-limit N, --test-limit N   use only the first N samples\n"
    "  --stop-after-batches N  stop after N training batches without saving (simulates a crash;\n"
    "                        exit 3, also when batch N is the run's last)\n"
    "  -h, --help            this text\n"
    "\n"
    "       adjoin-train --openblas-coretype\n"
    "  prints the OPENBLAS_CORETYPE value to export before mpiexec when this OpenBLAS\n"
    "  would run kernels below the CPU's level (a line SkylakeX or Haswell), else nothing\n";

/* ---- options ------------------------------------------------------------------------------ */

/* Every rank parses the flags (so all agree on the outcome); rank 0 alone
 * complains. */
static int speaker = 1;
static bool first_cap_given; /* --first-bucket-cap was passed */

__attribute__((format(printf, 1, 2))) static void complain(const char *fmt, ...) {
  if (!speaker) return;
  va_list args;
  va_start(args, fmt);
  fputs("adjoin-train: ", stderr);
  vfprintf(stderr, fmt, args);
  va_end(args);
}

/* Whole-string integer / real parsing: "12x" and "" are errors. */
static int parse_int_in(const char *flag, const char *text, int64_t min, int64_t max, int64_t *out) {
  if (!adj_parse_int64(text, min, max, flag, out)) return 0;
  if (max == INT64_MAX) complain("%s needs an integer >= %lld, got '%s'\n", flag, (long long)min, text);
  else complain("%s needs an integer from %lld to %lld, got '%s'\n", flag, (long long)min, (long long)max, text);
  return -1;
}

static int parse_int(const char *flag, const char *text, int64_t min, int64_t *out) {
  return parse_int_in(flag, text, min, INT64_MAX, out);
}

static int parse_real(const char *flag, const char *text, double *out) {
  if (!adj_parse_real(text, 0, DBL_MAX, flag, out)) return 0;
  complain("%s needs a finite non-negative number, got '%s'\n", flag, text);
  return -1;
}

/* A flag naming one of two choices (e.g. "adam" or "sgd"): *choice is its
 * index; -1 with a message on anything else. */
static int parse_choice(const char *flag, const char *text, const char *const names[2], int *choice) {
  for (int i = 0; i < 2; i++)
    if (!strcmp(text, names[i])) return *choice = i, 0;
  complain("%s is %s or %s, got '%s'\n", flag, names[0], names[1], text);
  return -1;
}

enum {
  OPT_MOMENTUM = 256, OPT_DECAY, OPT_EVERY, OPT_STOP, OPT_TRAIN_LIMIT, OPT_TEST_LIMIT, OPT_REPLICAS, OPT_MICRO,
  OPT_CAP, OPT_FIRST_CAP, OPT_AFTER, OPT_TRACE, OPT_TRACE_EVENTS, OPT_MODEL, OPT_DEEP_HALOS, OPT_LR_SCHEDULE,
  OPT_NET, OPT_PLACEMENT, OPT_CHECK, OPT_PER_REPLICA_BN
};

static const struct option long_options[] = {
    {"data", required_argument, NULL, 'd'},       {"epochs", required_argument, NULL, 'e'},
    {"batch", required_argument, NULL, 'b'},      {"lr", required_argument, NULL, 'l'},
    {"optimizer", required_argument, NULL, 'o'},  {"seed", required_argument, NULL, 's'},
    {"dtype", required_argument, NULL, 't'},      {"layout", required_argument, NULL, 'L'},
    {"checkpoint", required_argument, NULL, 'c'}, {"resume", no_argument, NULL, 'r'},
    {"metrics", required_argument, NULL, 'm'},    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"weight-decay", required_argument, NULL, OPT_DECAY},
    {"checkpoint-every", required_argument, NULL, OPT_EVERY},
    {"stop-after-batches", required_argument, NULL, OPT_STOP},
    {"train-limit", required_argument, NULL, OPT_TRAIN_LIMIT},
    {"test-limit", required_argument, NULL, OPT_TEST_LIMIT},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    {"micro-batches", required_argument, NULL, OPT_MICRO},
    {"bucket-cap", required_argument, NULL, OPT_CAP},
    {"first-bucket-cap", required_argument, NULL, OPT_FIRST_CAP},
    {"reduce-after-backward", no_argument, NULL, OPT_AFTER},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"trace-events", required_argument, NULL, OPT_TRACE_EVENTS},
    {"model", required_argument, NULL, OPT_MODEL},
    {"deep-halos", no_argument, NULL, OPT_DEEP_HALOS},
    {"lr-schedule", required_argument, NULL, OPT_LR_SCHEDULE},
    {"net", required_argument, NULL, OPT_NET},
    {"placement", required_argument, NULL, OPT_PLACEMENT},
    {"check", no_argument, NULL, OPT_CHECK},
    {"per-replica-batchnorm", no_argument, NULL, OPT_PER_REPLICA_BN},
    {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};

/* A bucket cap; -1 (and the parser's message) on a bad one. */
static int parse_cap(const char *flag, const char *text, int64_t *out) {
  if (!adj_bucket_cap_parse(text, out)) return 0;
  complain("%s: %s\n", flag, adj_last_error());
  return -1;
}

/* One flag; -1 on a bad value. */
static int apply_option(train_options *o, int c, const char *arg) {
  int64_t v = 0;
  int choice = 0;
  switch (c) {
  case 'd': o->data = arg; return 0;
  case 'e': return parse_int("--epochs", arg, 1, &o->epochs);
  case 'b': return parse_int("--batch", arg, 1, &o->batch);
  case 'l': return parse_real("--lr", arg, &o->lr);
  case 'o':
    /* The index is the adj_optimizer_kind. */
    return parse_choice("--optimizer", arg, (const char *const[2]){"sgd", "adam"}, &choice) ? -1
                                                                                       : (o->optimizer = choice, 0);
  case 's': return parse_int("--seed", arg, 0, &v) ? -1 : (o->seed = (uint64_t)v, 0);
  case 't':
    /* Integer dtypes parse but cannot train: the network computes in floats. */
    if (!adj_dtype_parse(arg, &o->dtype) && adj_dtype_is_float(o->dtype)) return 0;
    complain("--dtype is f32 or f64, got '%s'\n", arg);
    return -1;
  case 'L':
  case OPT_PLACEMENT:
    if (o->layout) {
      complain("give one of --layout and --placement, once\n");
      return -1;
    }
    o->layout = arg;
    return 0;
  case OPT_NET: o->net = arg; return 0;
  case OPT_CHECK: o->check = true; return 0;
  case OPT_PER_REPLICA_BN: o->per_replica_batchnorm = true; return 0;
  case 'c': o->checkpoint = arg; return 0;
  case 'r': o->resume = true; return 0;
  case 'm': o->metrics = arg; return 0;
  case OPT_MOMENTUM: return parse_real("--momentum", arg, &o->momentum);
  case OPT_DECAY: return parse_real("--weight-decay", arg, &o->weight_decay);
  case OPT_EVERY: return parse_int("--checkpoint-every", arg, 1, &o->checkpoint_every);
  case OPT_STOP: return parse_int("--stop-after-batches", arg, 0, &o->stop_after);
  case OPT_TRAIN_LIMIT: return parse_int("--train-limit", arg, 1, &o->train_limit);
  case OPT_TEST_LIMIT: return parse_int("--test-limit", arg, 1, &o->test_limit);
  /* Both are ints in the trainer. */
  case OPT_REPLICAS: return parse_int_in("--replicas", arg, 1, INT_MAX, &o->replicas);
  case OPT_MICRO: return parse_int_in("--micro-batches", arg, 1, INT_MAX, &o->micro_batches);
  case OPT_CAP: return parse_cap("--bucket-cap", arg, &o->caps[1]);
  case OPT_FIRST_CAP: return parse_cap("--first-bucket-cap", arg, &o->caps[0]) ? -1 : (first_cap_given = true, 0);
  case OPT_AFTER: o->reduce_after_backward = true; return 0;
  case OPT_TRACE: o->trace = arg; return 0;
  case OPT_TRACE_EVENTS: o->trace_events = arg; return 0;
  case OPT_DEEP_HALOS: o->deep_halos = true; return 0;
  case OPT_LR_SCHEDULE: /* the index is the adj_lr_schedule */
    return parse_choice("--lr-schedule", arg, (const char *const[2]){"constant", "cosine"}, &choice)
               ? -1
               : (o->lr_schedule = choice, 0);
  case OPT_MODEL:
    if (!strcmp(arg, "lenet") || !strcmp(arg, "mlp") || !strcmp(arg, "encdec")) return o->model = arg, 0;
    complain("--model is lenet, mlp or encdec, got '%s'\n", arg);
    return -1;
  default: return -1; /* getopt has printed what was wrong */
  }
}

/* Flags given with an optimizer that would ignore them. */
static int check_conflicts(const train_options *o) {
  if (o->momentum > 0 && o->optimizer == ADJ_OPTIMIZER_ADAM) {
    complain("--momentum %g is SGD's; --optimizer adam would ignore it (give --optimizer sgd)\n", o->momentum);
    return -1;
  }
  return 0;
}

/* Flags that only make sense together, and the layout against the ranks. */
static int check_options(train_options *o, int ranks) {
  if (o->model && o->net) {
    complain("--model names a shipped network; give --model or --net, not both\n");
    return -1;
  }
  if (!o->net && !o->model) o->model = "lenet";
  if (!o->data) o->data = o->model && !strcmp(o->model, "encdec") ? "data/fashion-mnist" : "data/mnist";
  if (!first_cap_given && o->caps[0] > o->caps[1]) o->caps[0] = o->caps[1];
  if ((o->resume || o->checkpoint_every) && !o->checkpoint) {
    complain("--resume and --checkpoint-every need --checkpoint PATH\n");
    return -1;
  }
  if (!(o->lr > 0)) {
    complain("--lr must be positive, got %g\n", o->lr);
    return -1;
  }
  if (o->momentum >= 1) {
    complain("--momentum must be below 1, got %g\n", o->momentum);
    return -1;
  }
  return check_conflicts(o);
}

/* Parses argv identically on every rank, so every rank agrees on the
 * outcome; only rank 0 speaks.  Returns 0, 1 for --help, -1 on a bad flag. */
static int parse_options(int argc, char **argv, int rank, int ranks, train_options *o) {
  *o = (train_options){.epochs = 10, .batch = 256, .lr = 1e-3,
                       .optimizer = ADJ_OPTIMIZER_ADAM, .seed = 1, .dtype = ADJ_FLOAT32, .stop_after = -1,
                       .micro_batches = 1,
                       .caps = {ADJ_REDUCER_DEFAULT_FIRST_BUCKET_BYTES, ADJ_REDUCER_DEFAULT_BUCKET_BYTES}};
  speaker = rank == 0;
  opterr = speaker;
  int c, status = 0;
  while (!status && (c = getopt_long(argc, argv, "h", long_options, NULL)) != -1)
    status = c == 'h' ? 1 : apply_option(o, c, optarg);
  if (!status && optind < argc) {
    complain("unexpected argument '%s'\n", argv[optind]);
    status = -1;
  }
  if (!status) status = check_options(o, ranks);
  if (status && rank == 0) fputs(usage, status > 0 ? stdout : stderr);
  return status;
}

/* ---- the run ---------------------------------------------------------------------------- */

typedef struct train_run {
  train_options options;
  int rank, ranks;
  adj_dataset *train, *test;
  adj_layer *net;
  adj_optimizer *optimizer;
  adj_trainer *trainer;
  adj_replicas *replicas;
  train_selection selection;  /* the description, placement and replicas */
  adj_step_measurement measured; /* --placement auto: the training steps, stage by stage */
  FILE *trace;
  adj_trace *timeline;
  report_row rows[REPORT_MAX_EPOCHS];
  int n_rows;
  int64_t batches_left; /* before --stop-after-batches stops the run; -1: no limit */
} train_run;

/* Prints adj_last_error() once (rank 0) with a hint, and returns 1. */
static int fail(const train_run *r, const char *what, const char *hint) {
  if (r->rank == 0) complain("%s: %s\n%s%s", what, tool_error(), hint ? hint : "", hint ? "\n" : "");
  return 1;
}

static void limit(adj_dataset *ds, int64_t n) {
  if (n > 0 && n < adj_dataset_count(ds)) adj_dataset_limit(ds, n);
}

static bool same_samples(const adj_dataset *a, const adj_dataset *b) {
  int rank = adj_dataset_input_rank(a);
  return rank == adj_dataset_input_rank(b) &&
         !memcmp(adj_dataset_input_shape(a), adj_dataset_input_shape(b), sizeof(int64_t) * (size_t)rank);
}

static int load_data(train_run *r) {
  const train_options *o = &r->options;
  static const char hint[] = "hint: provision MNIST and Fashion-MNIST with `sh tools/provision-data.sh`, or pass "
                             "--data DIR holding the four standard IDX files";
  if (adj_dataset_open_dir(MPI_COMM_WORLD, o->data, "train", 10, &r->train)) return fail(r, "training data", hint);
  if (adj_dataset_open_dir(MPI_COMM_WORLD, o->data, "test", 10, &r->test)) return fail(r, "test data", hint);
  limit(r->train, o->train_limit);
  limit(r->test, o->test_limit);
  /* Found now rather than by the first evaluation, after a whole epoch. */
  if (!same_samples(r->test, r->train)) {
    if (r->rank == 0)
      complain("test data: the samples of %s differ in shape from the training samples of %s\n",
               adj_dataset_describe_inputs(r->test), adj_dataset_describe_inputs(r->train));
    return 1;
  }
  return 0;
}

/* Rank 0's status, on every rank: rank 0 alone touches the output files (and
 * looks for the checkpoint), so every rank takes the branch its outcome says. */
static int rank0_status(int status) {
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return status;
}

/* The checkpoint and metrics paths must be usable before the first epoch is
 * spent: rank 0 writes them, so rank 0 checks them and tells the others. */
static int check_output_paths(train_run *r) {
  const train_options *o = &r->options;
  int status = 0;
  if (r->rank == 0 && o->checkpoint && adj_checkpoint_check_target(o->checkpoint)) {
    complain("--checkpoint: %s\n", tool_error());
    status = 1;
  }
  if (r->rank == 0 && !status && o->metrics) status = report_check_target(o->metrics) ? 1 : 0;
  if (r->rank == 0 && !status && o->trace && adj_file_check_output(o->trace, "--trace")) {
    complain("%s\n", adj_last_error());
    status = 1;
  }
  if (r->rank == 0 && !status && o->trace_events && adj_file_check_output(o->trace_events, "--trace-events")) {
    complain("%s\n", adj_last_error());
    status = 1;
  }
  return rank0_status(status);
}

/* A batch larger than the training set would be mostly padding: zero images
 * computed and stored for nothing.  Exit 2, as for a bad flag. */
static int check_batch(const train_run *r) {
  int64_t count = adj_dataset_count(r->train);
  if (r->options.batch <= count) return 0;
  if (r->rank == 0)
    complain("--batch %lld is larger than the %lld training images in use; give --batch %lld or less\n",
             (long long)r->options.batch, (long long)count, (long long)count);
  return 2;
}

/* The shuffle draws from another stream than the initial parameters. */
static uint64_t shuffle_seed(uint64_t seed) { return seed ^ 0x9e3779b97f4a7c15u; }

static int build_network(train_run *r, int64_t batch) {
  const train_options *o = &r->options;
  adj_network_build_options bo = {.dtype = o->dtype, .batch = batch, .deep_halos = o->deep_halos,
                                  .replicas = r->replicas, .per_replica_batchnorm = o->per_replica_batchnorm};
  if (adj_network_build(r->selection.description, r->selection.placement, adj_replicas_model_comm(r->replicas), &bo,
                        &r->net))
    return fail(r, "building the network", NULL);
  return 0;
}

static int build(train_run *r) {
  const train_options *o = &r->options;
  int replicas = r->selection.replicas;
  if (adj_replicas_create(MPI_COMM_WORLD, replicas, &r->replicas)) return fail(r, "splitting replicas", NULL);
  int64_t passes = replicas * o->micro_batches, local = (o->batch + passes - 1) / passes;
  if (build_network(r, local)) return 1;
  if (r->selection.planned && adj_network_set_timing(r->net, true)) return fail(r, "timing the stages", NULL);
  if (adj_network_init_uniform(r->net, o->seed)) return fail(r, "initialising the parameters", NULL);
  /* The trainer's steps: one per global batch (adj_trainer_batches_per_epoch). */
  int64_t steps = (adj_dataset_count(r->train) + o->batch - 1) / o->batch * o->epochs;
  adj_optimizer_config oc = {.kind = o->optimizer, .learning_rate = o->lr, .momentum = o->momentum,
                             .weight_decay = o->weight_decay, .lr_schedule = o->lr_schedule,
                             .lr_total_steps = steps};
  if (adj_optimizer_create(r->net, &oc, &r->optimizer)) return fail(r, "creating the optimizer", NULL);
  if (rank0_status(r->rank == 0 && o->trace_events &&
                   adj_file_open_output(o->trace_events, "--trace-events", &r->trace))) {
    if (r->rank == 0) complain("%s\n", adj_last_error());
    return 1;
  }
  if (o->trace && adj_trace_create(MPI_COMM_WORLD, o->trace, &r->timeline)) return fail(r, "--trace", NULL);
  bool dp = replicas > 1;
  adj_trainer_config tc = {.network = r->net, .optimizer = r->optimizer, .train = r->train,
                           .seed = shuffle_seed(o->seed), .replicas = dp ? r->replicas : NULL,
                           .micro_batches = (int)o->micro_batches, .global_batch = o->batch, .bucket_caps = o->caps,
                           .reduce_after_backward = o->reduce_after_backward, .trace = r->trace,
                           .timeline = r->timeline};
  if (adj_trainer_create(&tc, &r->trainer)) return fail(r, "creating the trainer", NULL);
  return 0;
}

/* --resume: continue from the checkpoint when there is one.  Every rank
 * asks rank 0 whether the file exists, so all take the same branch. */
static int resume(train_run *r) {
  const train_options *o = &r->options;
  if (!rank0_status(r->rank == 0 && access(o->checkpoint, F_OK) == 0)) {
    if (r->rank == 0) printf("no checkpoint at %s yet: starting a new run\n", o->checkpoint);
    return 0;
  }
  if (adj_trainer_load(r->trainer, o->checkpoint)) return fail(r, "resuming", "the checkpoint file was left as it is");
  int64_t epoch = adj_trainer_epoch(r->trainer);
  if (r->rank == 0) {
    printf("resumed from %s at epoch %lld, batch %lld\n", o->checkpoint, (long long)epoch + 1,
           (long long)adj_trainer_batch(r->trainer));
    if (o->metrics) r->n_rows = report_read_csv(o->metrics, epoch, r->rows, REPORT_MAX_EPOCHS);
    /* Not an error (the run is done), but nothing happens, which must not
     * pass unnoticed. */
    if (epoch >= o->epochs)
      complain("note: %s already holds %lld epoch%s (--epochs %lld): no training done, only the evaluation\n",
               o->checkpoint, (long long)epoch, epoch == 1 ? "" : "s", (long long)o->epochs);
  }
  return 0;
}

static void print_header(const train_run *r) {
  const train_options *o = &r->options;
  if (r->rank != 0) return;
  printf("adjoin-train: %s, layout %s on %d rank%s, %s, %s lr %g%s, batch %lld, %lld epochs, seed %llu\n",
         r->selection.description->name, r->selection.placement_name, r->ranks, r->ranks == 1 ? "" : "s", adj_dtype_name(o->dtype),
         o->optimizer == ADJ_OPTIMIZER_ADAM ? "Adam" : "SGD", o->lr, o->lr_schedule == ADJ_LR_COSINE ? " (cosine)" : "",
         (long long)o->batch, (long long)o->epochs, (unsigned long long)o->seed);
  printf("data: %s (%lld training, %lld test images)\n", o->data, (long long)adj_dataset_count(r->train),
         (long long)adj_dataset_count(r->test));
  char advice[256];
  if (adj_blas_kernels_behind(advice, sizeof advice)) fprintf(stderr, "adjoin-train: note: %s\n", advice);
  int replicas = r->selection.replicas;
  if (replicas > 1 || o->micro_batches > 1) {
    adj_gradient_reducer *red = adj_trainer_reducer(r->trainer);
    printf("data parallel: %lld replica%s of %s, %lld micro-batch%s per step, %d gradient bucket%s%s\n",
           (long long)replicas, replicas == 1 ? "" : "s", r->selection.placement_name, (long long)o->micro_batches,
           o->micro_batches == 1 ? "" : "es", red ? adj_gradient_reducer_buckets(red) : 0,
           red && adj_gradient_reducer_buckets(red) == 1 ? "" : "s",
           o->reduce_after_backward ? ", reduced after the backward" : ", overlapped with the backward");
  }
  fflush(stdout);
}

static void progress(void *ctx, int64_t batch, int64_t batches, double loss) {
  report_progress *p = ctx;
  if (p) report_progress_update(p, batch, batches, loss);
}

/* Adds a run of batches to the epoch's totals (loss weighted by samples). */
static void accumulate(adj_train_stats *total, const adj_train_stats *part) {
  total->loss += part->loss * (double)part->samples;
  total->correct += part->correct;
  total->samples += part->samples;
  total->seconds += part->seconds;
  total->batches += part->batches;
  total->reduced_bytes += part->reduced_bytes;
  total->reduced_messages += part->reduced_messages;
  total->reduce_wait_seconds += part->reduce_wait_seconds;
  total->reduce_progress_seconds += part->reduce_progress_seconds;
}

/* The rest of the current epoch, in runs between mid-epoch checkpoints.
 * Returns 0, 1 on error, 3 when --stop-after-batches is reached. */
static int train_epoch(train_run *r, adj_train_stats *total) {
  const train_options *o = &r->options;
  report_progress bar;
  report_progress_begin(&bar, adj_trainer_epoch(r->trainer) + 1, o->epochs);
  *total = (adj_train_stats){0};
  int64_t epoch = adj_trainer_epoch(r->trainer);
  while (adj_trainer_epoch(r->trainer) == epoch) {
    int64_t chunk = o->checkpoint_every ? o->checkpoint_every : -1;
    if (r->batches_left >= 0 && (chunk < 0 || r->batches_left < chunk)) chunk = r->batches_left;
    if (chunk == 0) {
      if (r->rank == 0) report_progress_end(&bar);
      return 3;
    }
    adj_train_stats part;
    /* The stage times of the training steps alone, not of the evaluations between them. */
    if (r->selection.planned && adj_network_set_timing(r->net, true)) return fail(r, "timing the stages", NULL);
    if (adj_trainer_run(r->trainer, chunk, progress, r->rank == 0 ? &bar : NULL, &part)) return fail(r, "training", NULL);
    if (r->selection.planned && part.batches &&
        adj_step_measurement_add(&r->measured, r->net, part.batches, part.seconds))
      return fail(r, "timing the stages", NULL);
    accumulate(total, &part);
    if (r->batches_left >= 0) r->batches_left -= part.batches;
    bool boundary = adj_trainer_epoch(r->trainer) != epoch;
    /* --stop-after-batches simulates a crash right after its last batch:
     * nothing is saved at that point, whatever --checkpoint-every says. */
    bool stopping = r->batches_left == 0;
    if (o->checkpoint && !stopping && (boundary || o->checkpoint_every) && adj_trainer_save(r->trainer, o->checkpoint))
      return fail(r, "saving the checkpoint", "the previous checkpoint was kept");
  }
  if (r->rank == 0) report_progress_end(&bar);
  total->loss = total->samples ? total->loss / (double)total->samples : 0;
  return 0;
}

/* The reducer's per-rank all-reduce volume so far (bytes; 0 without one). */
static double reducer_volume(train_run *r) {
  adj_gradient_reducer *reducer = adj_trainer_reducer(r->trainer);
  adj_reducer_counters counters = {0};
  if (reducer) adj_gradient_reducer_get_counters(reducer, &counters);
  return counters.logical_bytes;
}

/* Rank 0: the epoch's summary line, and its row in the metrics CSV and plot.
 * Returns 0, or 1 when the metrics could not be written (report_write says
 * which file and why). */
static int report_epoch(train_run *r, const adj_train_stats *train, const adj_train_stats *test, double volume) {
  report_row row = {.epoch = adj_trainer_epoch(r->trainer), .loss = train->loss,
                    .train_acc = train->samples ? (double)train->correct / (double)train->samples : 0,
                    .test_acc = (double)test->correct / (double)test->samples, .seconds = train->seconds,
                    .images_per_s = train->seconds > 0 ? (double)train->samples / train->seconds : 0};
  report_summary(&row, r->options.epochs);
  if (r->selection.replicas > 1 && train->batches)
    printf("  gradient reducer per step: %.0f bytes in %.1f messages (all-reduce volume %.0f bytes per rank), "
           "wait %.3f ms, posts and pokes %.3f ms\n", (double)train->reduced_bytes / (double)train->batches,
           (double)train->reduced_messages / (double)train->batches, volume / (double)train->batches,
           1e3 * train->reduce_wait_seconds / (double)train->batches,
           1e3 * train->reduce_progress_seconds / (double)train->batches);
  if (r->n_rows < REPORT_MAX_EPOCHS) r->rows[r->n_rows++] = row;
  char title[sizeof r->selection.placement_name + 128];
  snprintf(title, sizeof title, "%s %s, %d rank%s, %s", r->selection.description->name, r->selection.placement_name,
           r->ranks, r->ranks == 1 ? "" : "s",
           adj_dtype_name(r->options.dtype));
  return r->options.metrics && report_write(r->options.metrics, r->rows, r->n_rows, title) ? 1 : 0;
}

/* One epoch: train, evaluate, report.  Returns as train_epoch. */
static int run_epoch(train_run *r) {
  adj_train_stats train, test;
  double volume = reducer_volume(r);
  int status = train_epoch(r, &train);
  if (status) return status;
  volume = reducer_volume(r) - volume;
  if (adj_trainer_evaluate(r->trainer, r->test, &test)) return fail(r, "evaluating", NULL);
  /* A metrics file that fails to write stops the run on every rank. */
  return rank0_status(r->rank == 0 ? report_epoch(r, &train, &test, volume) : 0);
}

/* The network the flags name, and what this trainer can train of it. */
static int select_network(train_run *r) {
  const train_options *o = &r->options;
  train_choice c = {.model = o->model, .net = o->net, .placement = o->layout, .replicas = o->replicas,
                    .passes = o->micro_batches, .batch = o->batch, .dtype = o->dtype, .optimizer = o->optimizer,
                    .momentum = o->momentum > 0};
  int status = train_select(&c, r->ranks, complain, &r->selection);
  if (status) return status;
  const adj_description *d = r->selection.description;
  int loss = adj_description_loss(d);
  if (loss < 0 || d->layers[loss].kind != ADJ_DESC_XENT) {
    complain("%s: network %s ends in %s; adjoin-train trains networks ending in loss type=xent\n",
             r->selection.net_path, d->name, loss < 0 ? "no loss" : adj_loss_kind_name(d->layers[loss].u.loss.kind));
    return 1;
  }
  bool windows = false;
  for (int i = 0; i < d->n; i++) windows |= d->layers[i].kind == ADJ_DESC_CONV || d->layers[i].kind == ADJ_DESC_POOL;
  if (o->deep_halos && !windows) {
    complain("--deep-halos fuses runs of convolution, pool and activation layers; network %s has no convolution "
             "or pool\n", d->name);
    return 2;
  }
  return 0;
}

/* The first `batch` training samples (the set repeated when it is smaller)
 * as one float64 tensor, and their labels, for --check. */
static int first_batch(adj_dataset *ds, int64_t batch, int64_t *indices, adj_tensor *x, int64_t *labels) {
  adj_box box = {.rank = adj_dataset_input_rank(ds) + 1, .extent = {batch}};
  for (int d = 1; d < box.rank; d++) box.extent[d] = adj_dataset_input_shape(ds)[d - 1];
  for (int64_t i = 0; i < batch; i++) indices[i] = i % adj_dataset_count(ds);
  int status = adj_tensor_create(x, ADJ_FLOAT64, box.rank, box.extent);
  if (!status) status = adj_dataset_read_inputs(ds, indices, batch, &box, x);
  return status ? status : adj_dataset_read_labels(ds, indices, batch, 0, batch, labels);
}

/* --check: the network proven on the first batch of the training data. */
static int prove(train_run *r) {
  const train_options *o = &r->options;
  int64_t passes = (int64_t)r->selection.replicas * o->micro_batches, batch = (o->batch + passes - 1) / passes;
  adj_tensor x = {0};
  int64_t *labels = calloc((size_t)batch, sizeof *labels), *indices = calloc((size_t)batch, sizeof *indices);
  if (!labels || !indices) {
    free(labels), free(indices);
    complain("--check: out of memory for a batch of %lld\n", (long long)batch);
    return 1;
  }
  int status = first_batch(r->train, batch, indices, &x, labels);
  adj_network_check_config c = {.description = r->selection.description, .placement = r->selection.placement,
                                .comm = MPI_COMM_WORLD, .dtype = ADJ_FLOAT64, .batch = batch, .seed = o->seed,
                                .deep_halos = o->deep_halos, .input = &x, .labels = labels};
  adj_network_check_result res;
  if (!status) status = adj_network_check(&c, &res);
  adj_tensor_destroy(&x), free(labels), free(indices);
  if (status) return fail(r, "--check", NULL);
  if (r->rank == 0)
    printf("check: %s at %s on %d rank%s, the first %lld training images, float64: Jacobian dot-product test "
           "%.2e (tolerance %.0e); distributed vs sequential: loss %.2e, input gradient %.2e, parameter gradients "
           "%.2e (tolerance %.0e): %s\n", r->selection.description->name, r->selection.placement_name, res.ranks,
           res.ranks == 1 ? "" : "s", (long long)batch, res.jacobian.relative_error, res.jacobian_tolerance,
           res.output_diff, res.input_gradient_diff, res.parameter_gradient_diff, res.tolerance,
           res.passed ? "proven" : "FAILED");
  if (!res.passed) complain("--check failed: the network is not trained\n");
  return res.passed ? 0 : 1;
}

/* Exit 3 for --stop-after-batches, with the line that says so. */
static int stopped(const train_run *r) {
  if (r->rank == 0)
    printf("stopped after %lld batch%s (--stop-after-batches); nothing saved since the last checkpoint\n",
           (long long)r->options.stop_after, r->options.stop_after == 1 ? "" : "es");
  return 3;
}

static int run(train_run *r) {
  r->batches_left = r->options.stop_after;
  int status = select_network(r);
  if (status) return status;
  if (check_output_paths(r) || load_data(r)) return 1;
  status = check_batch(r);
  if (status) return status;
  if (r->options.check && prove(r)) return 1;
  if (build(r)) return 1;
  if (r->options.resume && resume(r)) return 1;
  print_header(r);
  while (adj_trainer_epoch(r->trainer) < r->options.epochs) {
    status = run_epoch(r);
    if (status) return status == 3 ? stopped(r) : status;
  }
  /* A stop at the run's last batch is a crash like any other: it comes
   * before the final checkpoint is saved, so a resume can redo that batch. */
  if (r->batches_left == 0) return stopped(r);
  if (r->timeline && adj_trace_write(r->timeline)) return fail(r, "writing the --trace timeline", NULL);
  uint64_t hash;
  if (adj_trainer_check_sync(r->trainer, &hash)) return fail(r, "checking the replicas", NULL);
  if (r->rank == 0 && r->selection.replicas > 1)
    printf("replicas in sync: every replica holds parameters with hash %016llx\n", (unsigned long long)hash);
  adj_train_stats test;
  if (adj_trainer_evaluate(r->trainer, r->test, &test)) return fail(r, "evaluating", NULL);
  if (r->rank == 0) printf("test_accuracy=%.4f\n", (double)test.correct / (double)test.samples);
  if (r->rank == 0 && r->selection.planned && r->measured.steps) {
    r->measured.peak_rss = adj_peak_resident_bytes();
    printf("predicted and measured per training step on rank 0 (the measured step includes reading the batch; "
           "the peak memory the data set, which the model leaves out):\n");
    adj_step_report_print(&r->selection.prediction, &r->measured, r->net, stdout);
  }
  return 0;
}

static void teardown(train_run *r) {
  adj_step_measurement_free(&r->measured);
  adj_trainer_destroy(&r->trainer);
  adj_optimizer_destroy(&r->optimizer);
  adj_layer_destroy(&r->net);
  adj_replicas_destroy(&r->replicas);
  train_selection_free(&r->selection);
  adj_trace_destroy(&r->timeline);
  adj_dataset_destroy(&r->train);
  adj_dataset_destroy(&r->test);
}

/* The trace's writes are checked as it closes: one that failed (a full
 * disk) loses events, so the run exits 1 on every rank, saying so. */
static int close_trace(train_run *r, int status) {
  int failed = r->rank == 0 && adj_file_close_output(r->trace, r->options.trace_events, "--trace-events");
  r->trace = NULL;
  if (failed) complain("%s\n", adj_last_error());
  return rank0_status(failed) ? 1 : status;
}

/* --openblas-coretype, alone: answered without MPI, since a launcher asks it
 * before starting the ranks (OpenBLAS reads the variable only as it loads). */
static bool print_openblas_coretype(int argc, char **argv) {
  if (argc != 2 || strcmp(argv[1], "--openblas-coretype") != 0) return false;
  const char *coretype = adj_blas_kernels_coretype();
  if (coretype) puts(coretype);
  return true;
}

int main(int argc, char **argv) {
  static train_run r; /* the metrics history is large for the stack */
  if (print_openblas_coretype(argc, argv)) return 0;
  if (adj_init(&argc, &argv, &r.rank, &r.ranks)) {
    fprintf(stderr, "adjoin-train: %s\n", tool_error());
    return 1;
  }
  int status = parse_options(argc, argv, r.rank, r.ranks, &r.options);
  if (status) {
    adj_finalize();
    return status > 0 ? 0 : 2;
  }
  adj_train_share_cores(MPI_COMM_WORLD);
  status = run(&r);
  teardown(&r);
  status = close_trace(&r, status);
  adj_finalize();
  return status;
}
