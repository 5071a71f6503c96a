/* adjoin-train's choice of network: a description (--net FILE, or the
 * --model shorthand for a shipped file), a placement (--placement FILE|NAME,
 * or --layout with the names adjoin-train has always taken), and the
 * data-parallel replicas, checked against the run's ranks. */
#ifndef ADJOIN_TRAIN_SELECT_H
#define ADJOIN_TRAIN_SELECT_H

#include <mpi.h>
#include <stdint.h>

#include "adjoin/adjoin.h"

/* Prints a complaint on rank 0 ("adjoin-train: ..."). */
typedef void train_complain_fn(const char *format, ...);

typedef struct train_choice {
  const char *model;     /* "lenet", "mlp", "encdec" or NULL (--net) */
  const char *net;       /* --net FILE or NULL */
  const char *placement; /* --placement / --layout, NULL: the default */
  int64_t replicas;      /* --replicas, 0: not given */
  int64_t passes;        /* micro-batches per replica and step */
  int64_t batch;         /* the global batch */
  adj_dtype dtype;       /* what --placement auto plans for */
  adj_optimizer_kind optimizer;
  bool momentum;
} train_choice;

typedef struct train_selection {
  adj_description *description;
  adj_placement *placement;
  char net_path[1024];
  char placement_name[544]; /* as the user named it, or "auto: " and the plan (the header prints it) */
  char translated[128];     /* what it means: "2x1" for a grid 2x3 run as 3 replicas */
  int replicas;
  int ranks;                /* of one replica */
  bool by_default;          /* the flags named no placement */
  bool planned;             /* --placement auto: the planner chose, and predicted: */
  adj_step_prediction prediction;
} train_selection;

/* The shipped network file of a --model ("lenet", "mlp", "encdec"), or NULL. */
const char *train_model_file(const char *model);

/* Reads the description and placement on every rank (collective on
 * MPI_COMM_WORLD) and checks them against `ranks`.  --placement auto takes
 * the planner's best plan for `ranks` (plan_search.h's adj_plan_choose,
 * measured on this host) with its replicas.  Returns 0, 1 for a file
 * that cannot be read or parsed, 2 for a placement the flags name that does
 * not exist or does not fit (as a bad flag); complains on rank 0. */
int train_select(const train_choice *choice, int ranks, train_complain_fn *complain, train_selection *selection);
void train_selection_free(train_selection *selection);

#endif
