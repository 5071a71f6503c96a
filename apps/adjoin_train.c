/* adjoin-train: trains LeNet-5, sequential or distributed, on IDX image data
 * (MNIST by default), as in section 5 of the DistDL paper; or ShallowSpeed's
 * MLP, sequential or with 1.5D layers on a P_r x P_c grid; or the batch-norm
 * encoder-decoder classifier (encdec.h, Fashion-MNIST by default), sequential
 * or on a spatial grid.
 *
 *   mpiexec.mpich -n 4 adjoin-train --layout dist4 --epochs 10 --batch 256 --lr 0.001 --optimizer adam
 *   mpiexec.mpich -n 4 adjoin-train --layout dp              (4 sequential replicas)
 *   mpiexec.mpich -n 8 adjoin-train --layout dist4 --replicas 2
 *   mpiexec.mpich -n 6 adjoin-train --model mlp --layout 2x3
 *   mpiexec.mpich -n 8 adjoin-train --model encdec --layout 2x2 --replicas 2
 *
 * Rank 0 prints a progress bar per epoch (plain lines when stdout is not a
 * terminal), a summary line per epoch, and as its last line the final test
 * accuracy as `test_accuracy=0.9812`.  Exit codes: 0 done, 1 a run-time error
 * (unreadable data, refused checkpoint, a metrics file that cannot be written;
 * the message names it), 2 bad or conflicting flags, 3 stopped on purpose by
 * --stop-after-batches (a simulated crash, even after the run's last batch). */
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

typedef struct train_options {
  const char *data;           /* directory of the four IDX files; NULL: the model's default */
  int64_t epochs, batch;
  double lr, momentum, weight_decay;
  adj_optimizer_kind optimizer;
  adj_lr_schedule lr_schedule;
  uint64_t seed;
  adj_dtype dtype;
  const char *model;          /* "lenet", "mlp" or "encdec" */
  const char *layout;         /* NULL: chosen from the rank count */
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
  bool deep_halos;            /* LeNet-5: fuse the convolution blocks over one halo exchange */
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
    "  --model lenet|mlp|encdec  LeNet-5, ShallowSpeed's MLP 784-128-127-126-125-124-123-10, or\n"
    "                        the batch-norm encoder-decoder classifier (encdec.h) [lenet]\n"
    "  --layout NAME         LeNet-5: sequential, dist2, dist4, dist8, hybrid4,\n"
    "                        hybrid4-batch, or a grid RxC (rows x batch in the convolutions,\n"
    "                        1.5D affine layers) [sequential on 1 rank, distN on N = 2, 4, 8];\n"
    "                        MLP: sequential or a 1.5D grid PrxPc, e.g. 2x3 [1xN on N ranks];\n"
    "                        encdec: sequential or a spatial grid P0xP1 (rows x columns,\n"
    "                        1..7 each), e.g. 2x2 [Nx1 on N = 1..7 ranks];\n"
    "                        either: dp (a sequential replica per rank)\n"
    "  --deep-halos          LeNet-5 only: fuse conv1 .. the second ReLU into one deep halo layer\n"
    "                        (one halo exchange instead of four; docs/deep-halos.md)\n"
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
  OPT_CAP, OPT_FIRST_CAP, OPT_AFTER, OPT_TRACE, OPT_TRACE_EVENTS, OPT_MODEL, OPT_DEEP_HALOS, OPT_LR_SCHEDULE
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
  case 'L': o->layout = arg; return 0;
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

static bool is_mlp(const train_options *o) { return !strcmp(o->model, "mlp"); }
static bool is_encdec(const train_options *o) { return !strcmp(o->model, "encdec"); }

static const char *model_name(const train_options *o) {
  return is_mlp(o) ? "MLP" : is_encdec(o) ? "encoder-decoder" : "LeNet-5";
}

/* A grid layout "PrxPc", each 1 to 4096 (parse.h: "4294967297x1" is no
 * grid, never 1x1); false otherwise. */
static bool grid_layout(const char *layout, int *rows, int *cols) {
  int64_t grid[2];
  if (adj_parse_int64_pair(layout, 'x', 1, 4096, "--layout", grid)) return false;
  *rows = (int)grid[0], *cols = (int)grid[1];
  return true;
}

/* An MLP layout: "sequential" (0 x 0) or a grid; false otherwise. */
static bool mlp_grid(const char *layout, int *rows, int *cols) {
  *rows = *cols = 0;
  return !strcmp(layout, "sequential") || grid_layout(layout, rows, cols);
}

/* A grid P_r x P_c runs as P_c data-parallel replicas of P_r x 1: the same
 * split of batch and features, with the weight gradients summed over P_c by
 * the bucketed reducer, overlapped with the backward (issue 13 item 1). */
static void grid_as_replicas(train_options *o) {
  static char replica_layout[32];
  int rows, cols;
  /* The encoder-decoder's grid is spatial: rows and columns of the image. */
  if (is_encdec(o) || !grid_layout(o->layout, &rows, &cols) || cols == 1) return;
  snprintf(replica_layout, sizeof replica_layout, "%dx1", rows);
  o->layout = replica_layout;
  o->replicas = (o->replicas ? o->replicas : 1) * cols;
}

/* The layouts the model accepts, for messages. */
static const char *layout_choices(const train_options *o) {
  static char lenet[256];
  if (is_mlp(o)) return "sequential, a grid PrxPc such as 2x3, or dp";
  if (is_encdec(o)) return "sequential, a spatial grid P0xP1 with P0, P1 in 1..7 such as 2x2, or dp";
  snprintf(lenet, sizeof lenet, "layouts: %s, dp", adj_lenet_layout_names());
  return lenet;
}

/* Ranks the model's layout needs, 0 for an unknown layout (and a message).
 * A layout the user did not type (by_default) is named as the default for
 * the rank count, with the choices to give instead. */
static int layout_ranks(const train_options *o, int ranks, bool by_default) {
  int rows, cols, need = 0;
  if (is_mlp(o)) need = mlp_grid(o->layout, &rows, &cols) ? (rows ? rows * cols : 1) : 0;
  else if (is_encdec(o)) need = adj_encdec_layout_ranks(o->layout);
  else need = adj_lenet_layout_ranks(o->layout);
  if (need && is_mlp(o) && rows > 10) {
    complain("MLP layout %s puts %d feature workers on the 10 classes (at most 10)\n", o->layout, rows);
    return 0;
  }
  if (need) return need;
  if (by_default)
    complain("no default %s layout for %d ranks%s; give --layout (%s)\n", model_name(o), ranks,
             o->replicas > 1 ? " per replica" : "", layout_choices(o));
  else if (is_mlp(o) || is_encdec(o))
    complain("no %s layout '%s' (%s)\n", is_mlp(o) ? "MLP" : "encdec", o->layout, layout_choices(o));
  else complain("no layout '%s' (%s)\n", o->layout, layout_choices(o));
  return 0;
}

/* The layout for a replica's rank count when --layout is not given:
 * sequential on 1 rank, else distN (LeNet-5), 1xN (MLP) or Nx1 (encdec),
 * which may not exist. */
static const char *default_layout(const train_options *o, int ranks) {
  static char name[16];
  const char *grid = is_mlp(o) ? "1x%d" : is_encdec(o) ? "%dx1" : "dist%d";
  if (ranks == 1) return "sequential";
  snprintf(name, sizeof name, grid, ranks);
  return name;
}

/* Every pass of a step (a micro-batch on a replica) takes a share of
 * --batch: more passes than samples would leave passes empty, and their
 * product is formed in int64 (replicas and micro-batches are at most
 * INT_MAX, a grid's columns 4096). */
static int check_passes(const train_options *o) {
  int64_t passes;
  if (!adj_int64_mul(o->replicas, o->micro_batches, "replicas x micro-batches", &passes) && passes <= o->batch)
    return 0;
  complain("--micro-batches %lld on %lld replica%s makes more passes per step than the %lld samples of --batch\n",
           (long long)o->micro_batches, (long long)o->replicas, o->replicas == 1 ? "" : "s", (long long)o->batch);
  return -1;
}

/* The replicas as the user asked for them, for a message: "--replicas 3 of
 * layout 1x2 (6 replicas of 1x1: its 2 columns run as replicas)". */
static const char *asked_replicas(const train_options *o, int64_t asked, const char *typed, char *text,
                                  size_t size) {
  int used = asked ? snprintf(text, size, "--replicas %lld of layout %s", (long long)asked, typed)
                   : snprintf(text, size, "layout %s", typed);
  if (used >= 0 && (size_t)used < size && strcmp(typed, o->layout))
    snprintf(text + used, size - (size_t)used, " (%lld replicas of %s: its columns run as replicas)",
             (long long)o->replicas, o->layout);
  return text;
}

/* The layout against the ranks and replicas; 0 or -1 with a message. */
static int check_layout(train_options *o, int ranks) {
  bool by_default = !o->layout;
  int replica_ranks = o->replicas && ranks % o->replicas == 0 ? ranks / (int)o->replicas : ranks;
  if (by_default) o->layout = default_layout(o, replica_ranks);
  if (strcmp(o->layout, "dp") == 0) {
    if (o->replicas && o->replicas != ranks) {
      complain("--layout dp makes one replica per rank (%d), not --replicas %lld\n", ranks, (long long)o->replicas);
      return -1;
    }
    o->layout = "sequential", o->replicas = ranks;
  }
  int64_t asked = o->replicas;
  const char *typed = o->layout;
  char text[160];
  grid_as_replicas(o);
  if (!o->replicas) o->replicas = 1;
  int need = layout_ranks(o, replica_ranks, by_default);
  if (!need) return -1;
  if (ranks % o->replicas) {
    complain("%d ranks do not divide into %s\n", ranks, asked_replicas(o, asked, typed, text, sizeof text));
    return -1;
  }
  if (need > ranks / o->replicas) {
    complain("%s needs %d ranks per replica; run it with mpiexec.mpich -n %lld\n",
             asked_replicas(o, asked, typed, text, sizeof text), need, (long long)(need * o->replicas));
    return -1;
  }
  return check_passes(o);
}

/* Flags given with a model or optimizer that would ignore them. */
static int check_conflicts(const train_options *o) {
  if (o->deep_halos && strcmp(o->model, "lenet")) {
    complain("--deep-halos fuses LeNet-5's convolution blocks; it does nothing for --model %s\n", o->model);
    return -1;
  }
  if (o->momentum > 0 && o->optimizer == ADJ_OPTIMIZER_ADAM) {
    complain("--momentum %g is SGD's; --optimizer adam would ignore it (give --optimizer sgd)\n", o->momentum);
    return -1;
  }
  return 0;
}

/* Flags that only make sense together, and the layout against the ranks. */
static int check_options(train_options *o, int ranks) {
  if (!o->data) o->data = is_encdec(o) ? "data/fashion-mnist" : "data/mnist";
  if (check_layout(o, ranks)) return -1;
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
  *o = (train_options){.model = "lenet", .epochs = 10, .batch = 256, .lr = 1e-3,
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

/* The images' height and width: a sample's last two extents. */
static void image_size(const adj_dataset *ds, int64_t *rows, int64_t *cols) {
  int rank = adj_dataset_input_rank(ds);
  const int64_t *shape = adj_dataset_input_shape(ds);
  *rows = rank >= 2 ? shape[rank - 2] : 1;
  *cols = rank >= 1 ? shape[rank - 1] : 1;
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

/* ShallowSpeed's reference MLP (paper 004). */
static const int64_t mlp_sizes[] = {784, 128, 127, 126, 125, 124, 123, 10};

static int build_network(train_run *r, int64_t batch) {
  const train_options *o = &r->options;
  MPI_Comm comm = adj_replicas_model_comm(r->replicas);
  if (is_encdec(o)) {
    adj_encdec_config ec = {.comm = comm, .dtype = o->dtype, .layout = o->layout, .batch = batch};
    return adj_encdec_create(&ec, &r->net) ? fail(r, "building the encoder-decoder", NULL) : 0;
  }
  if (!is_mlp(o)) {
    adj_lenet_config lc = {.comm = comm, .dtype = o->dtype, .layout = o->layout, .batch = batch,
                           .deep_halos = o->deep_halos};
    return adj_lenet_create(&lc, &r->net) ? fail(r, "building LeNet-5", NULL) : 0;
  }
  adj_mlp_config mc = {.comm = comm, .dtype = o->dtype, .batch = batch, .n_sizes = 8, .sizes = mlp_sizes};
  image_size(r->train, &mc.rows, &mc.cols);
  mlp_grid(o->layout, &mc.grid_rows, &mc.grid_cols);
  return adj_mlp_create(&mc, &r->net) ? fail(r, "building the MLP", NULL) : 0;
}

static int build(train_run *r) {
  const train_options *o = &r->options;
  if (adj_replicas_create(MPI_COMM_WORLD, (int)o->replicas, &r->replicas)) return fail(r, "splitting replicas", NULL);
  int64_t passes = o->replicas * o->micro_batches, local = (o->batch + passes - 1) / passes;
  if (build_network(r, local)) return 1;
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
  bool dp = o->replicas > 1;
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
         model_name(o), o->layout, r->ranks, r->ranks == 1 ? "" : "s", adj_dtype_name(o->dtype),
         o->optimizer == ADJ_OPTIMIZER_ADAM ? "Adam" : "SGD", o->lr, o->lr_schedule == ADJ_LR_COSINE ? " (cosine)" : "",
         (long long)o->batch, (long long)o->epochs, (unsigned long long)o->seed);
  printf("data: %s (%lld training, %lld test images)\n", o->data, (long long)adj_dataset_count(r->train),
         (long long)adj_dataset_count(r->test));
  char advice[256];
  if (adj_blas_kernels_behind(advice, sizeof advice)) fprintf(stderr, "adjoin-train: note: %s\n", advice);
  if (o->replicas > 1 || o->micro_batches > 1) {
    adj_gradient_reducer *red = adj_trainer_reducer(r->trainer);
    printf("data parallel: %lld replica%s of %s, %lld micro-batch%s per step, %d gradient bucket%s%s\n",
           (long long)o->replicas, o->replicas == 1 ? "" : "s", o->layout, (long long)o->micro_batches,
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
    if (adj_trainer_run(r->trainer, chunk, progress, r->rank == 0 ? &bar : NULL, &part)) return fail(r, "training", NULL);
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
  if (r->options.replicas > 1 && train->batches)
    printf("  gradient reducer per step: %.0f bytes in %.1f messages (all-reduce volume %.0f bytes per rank), "
           "wait %.3f ms, posts and pokes %.3f ms\n", (double)train->reduced_bytes / (double)train->batches,
           (double)train->reduced_messages / (double)train->batches, volume / (double)train->batches,
           1e3 * train->reduce_wait_seconds / (double)train->batches,
           1e3 * train->reduce_progress_seconds / (double)train->batches);
  if (r->n_rows < REPORT_MAX_EPOCHS) r->rows[r->n_rows++] = row;
  char title[160];
  snprintf(title, sizeof title, "%s %s, %d rank%s, %s", model_name(&r->options), r->options.layout, r->ranks, r->ranks == 1 ? "" : "s",
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

/* Exit 3 for --stop-after-batches, with the line that says so. */
static int stopped(const train_run *r) {
  if (r->rank == 0)
    printf("stopped after %lld batch%s (--stop-after-batches); nothing saved since the last checkpoint\n",
           (long long)r->options.stop_after, r->options.stop_after == 1 ? "" : "es");
  return 3;
}

static int run(train_run *r) {
  r->batches_left = r->options.stop_after;
  if (check_output_paths(r) || load_data(r)) return 1;
  int status = check_batch(r);
  if (status) return status;
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
  if (r->rank == 0 && r->options.replicas > 1)
    printf("replicas in sync: every replica holds parameters with hash %016llx\n", (unsigned long long)hash);
  adj_train_stats test;
  if (adj_trainer_evaluate(r->trainer, r->test, &test)) return fail(r, "evaluating", NULL);
  if (r->rank == 0) printf("test_accuracy=%.4f\n", (double)test.correct / (double)test.samples);
  return 0;
}

static void teardown(train_run *r) {
  adj_trainer_destroy(&r->trainer);
  adj_optimizer_destroy(&r->optimizer);
  adj_layer_destroy(&r->net);
  adj_replicas_destroy(&r->replicas);
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
