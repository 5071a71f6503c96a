/* The adjoint-test battery: named cases, each building an operator (or a layer
 * or network Jacobian) on some number of ranks and running the dot-product test
 * on it.  Every primitive family, layer and network contributes its cases from
 * its own cases_*.c file through an adj_battery_add_* function listed in
 * battery.c.  The CLI adjoin-dottest and the test suite run the same table. */
#ifndef ADJOIN_ADJOINT_TESTS_BATTERY_H
#define ADJOIN_ADJOINT_TESTS_BATTERY_H

#include <mpi.h>
#include <stdint.h>

#include "adjoin/dottest.h"
#include "adjoin/partition.h"

typedef struct adj_battery_case adj_battery_case;

/* Runs the case's dot-product test on comm (of exactly case->ranks ranks) and
 * fills result.  Returns a status; the result is read only on success. */
typedef int (*adj_battery_run_fn)(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *result);

struct adj_battery_case {
  char name[128];        /* unique, e.g. "broadcast/[1,2]->[2,2]/[7,5]/f64" */
  char op[32];           /* operator or layer family, e.g. "broadcast" */
  char partitions[96];   /* e.g. "[1,2]->[2,2]" */
  char shape[64];        /* global shape, e.g. "[7,5]" */
  adj_dtype dtype;
  int ranks;             /* ranks the case needs */
  int is_layer;          /* chooses the tolerance */
  adj_battery_run_fn run;
  int64_t params[48];    /* interpreted by run */
  uint64_t seed;         /* added to the case's own seed by run; 0 in the table, adjoin-dottest --seed sets it */
};

typedef struct adj_battery {
  int count, capacity;
  adj_battery_case *cases;
} adj_battery;

/* Appends a copy of c.  Returns ADJ_ERR_MEM on failure. */
int adj_battery_add(adj_battery *b, const adj_battery_case *c);
/* Names c "op/partitions/shape/dtype" and appends it once per dtype. */
int adj_battery_add_both_dtypes(adj_battery *b, adj_battery_case *c);
/* Data-movement families run each table row in ADJ_BATTERY_MOVEMENT_DTYPES
 * dtypes: float32, float64, int32, then int64 on even rows and uint8 on odd
 * ones, so every integer dtype meets every family without tripling the table.
 * adj_battery_movement_dtype gives the k-th (k < ADJ_BATTERY_MOVEMENT_DTYPES). */
enum { ADJ_BATTERY_MOVEMENT_DTYPES = 4 };
adj_dtype adj_battery_movement_dtype(int row, int k);
/* Builds the full table. */
int adj_battery_build(adj_battery *b);
void adj_battery_free(adj_battery *b);

/* Formats helpers for case descriptions. */
void adj_battery_format_ints(char *buf, size_t size, int n, const int *v);
void adj_battery_format_int64s(char *buf, size_t size, int n, const int64_t *v);

/* Contributions, one per family, each in its own cases_<family>.c; add the
 * declaration here and the function to the table in battery.c. */
int adj_battery_add_memory(adj_battery *b);
int adj_battery_add_halo(adj_battery *b);
int adj_battery_add_compose(adj_battery *b);
int adj_battery_add_conv(adj_battery *b);
int adj_battery_add_repartition(adj_battery *b);
int adj_battery_add_all_gather(adj_battery *b);
int adj_battery_add_send_receive(adj_battery *b);
int adj_battery_add_broadcast(adj_battery *b);
int adj_battery_add_all_sum_reduce(adj_battery *b);
int adj_battery_add_layers(adj_battery *b);
int adj_battery_add_norm(adj_battery *b);
int adj_battery_add_losses(adj_battery *b);
int adj_battery_add_upsample(adj_battery *b);
int adj_battery_add_pad(adj_battery *b);
int adj_battery_add_deep_halo(adj_battery *b);

/* The partition of ndim dims listing the ranks given as digits in grid order
 * ("3210"), and one more than the largest of those ranks (cases_broadcast.c). */
int adj_battery_partition(MPI_Comm comm, int ndim, const int *shape, const char *ranks, adj_partition **p);
int adj_battery_ranks_needed(const char *ranks);

#endif
