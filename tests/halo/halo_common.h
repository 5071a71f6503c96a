/* Shared by the halo exchange tests: a table of named configurations (paper
 * figures, appendix B.2, explicit cuts with empty blocks, rank 1-4 tensors on
 * 1-8 workers) and the setup of partition, geometry, operator and local view
 * for one of them on the first `workers` ranks of MPI_COMM_WORLD. */
#ifndef ADJOIN_TESTS_HALO_COMMON_H
#define ADJOIN_TESTS_HALO_COMMON_H

#include "harness.h"

typedef struct halo_case {
  const char *name;
  int rank;
  int64_t shape[ADJ_MAX_RANK];
  int parts[ADJ_MAX_RANK];
  adj_halo_kernel kernel;
  const int64_t *cuts[ADJ_MAX_RANK]; /* NULL = balanced */
} halo_case;

typedef struct halo_setup {
  const halo_case *c;
  int workers;
  adj_partition *partition;
  adj_halo_geometry *geometry;
  adj_op *op;
  int index;            /* this worker's grid index, -1 when inactive */
  adj_halo_local local; /* this worker's boxes (zero volume when inactive) */
} halo_setup;

int halo_case_count(void);
const halo_case *halo_case_get(int i);
/* "name: shape [..] parts [..]" for messages. */
const char *halo_case_describe(const halo_case *c, char *buf, size_t size);

/* Creates partition, geometry and operator; returns the (agreed) status. */
int halo_setup_create(const halo_case *c, adj_dtype dtype, halo_setup *s);
void halo_setup_destroy(halo_setup *s);
/* Replaces the operator by one of another dtype on the same partition. */
int halo_setup_retype(halo_setup *s, adj_dtype dtype);
/* Sum over comm without spinning (tests oversubscribe the cores). */
long long halo_sum(MPI_Comm comm, long long value);
/* Number of workers of a case. */
int halo_case_workers(const halo_case *c);

/* Global coordinates of element `flat` of the local tensor of the worker `local`. */
void halo_global_coords(const adj_halo_local *local, int64_t flat, int64_t *coords);
int halo_in_box(const adj_box *box, const int64_t *coords);
/* The worker's bulk in global indices. */
adj_box halo_global_bulk(const adj_halo_local *local);
/* Row-major flat index of coords in a tensor of the given shape. */
int64_t halo_flat(int rank, const int64_t *shape, const int64_t *coords);

#endif
