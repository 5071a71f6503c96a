#include <stdlib.h>
#include <string.h>

#include "adjoin/decomposition.h"
#include "adjoin/status.h"
#include "error_impl.h"

struct adj_decomposition {
  int refcount;
  adj_partition *partition;         /* referenced */
  int rank;
  int64_t global_shape[ADJ_MAX_RANK];
  int64_t *cuts[ADJ_MAX_RANK];      /* cuts[d][0..P_d] */
};

void adj_balanced_block(int64_t n, int parts, int part, int64_t *start, int64_t *extent) {
  int64_t base = n / parts, extra = n % parts;
  *extent = base + (part < extra ? 1 : 0);
  *start = part * base + (part < extra ? part : extra);
}

static void adj_decomposition_free(adj_decomposition *d) {
  if (!d) return;
  for (int i = 0; i < ADJ_MAX_RANK; i++) free(d->cuts[i]);
  adj_partition_destroy(&d->partition);
  free(d);
}

static int adj_check_cuts(int dim, int parts, int64_t n, const int64_t *cuts) {
  ADJ_CHECK(cuts[0] == 0 && cuts[parts] == n, ADJ_ERR_ARG,
            "decomposition: cuts of dimension %d must run from 0 to %lld, got %lld to %lld", dim, (long long)n,
            (long long)cuts[0], (long long)cuts[parts]);
  for (int p = 0; p < parts; p++)
    ADJ_CHECK(cuts[p] <= cuts[p + 1], ADJ_ERR_ARG, "decomposition: cuts of dimension %d decrease at %d (%lld > %lld)",
              dim, p, (long long)cuts[p], (long long)cuts[p + 1]);
  return ADJ_SUCCESS;
}

int adj_decomposition_create_explicit(const adj_partition *partition, int rank, const int64_t *global_shape,
                                      const int64_t *const *cuts, adj_decomposition **decomposition) {
  ADJ_CHECK(decomposition, ADJ_ERR_ARG, "decomposition: output decomposition pointer is NULL");
  *decomposition = NULL;
  ADJ_CHECK(partition, ADJ_ERR_ARG, "decomposition: partition is NULL");
  ADJ_CHECK(global_shape || rank == 0, ADJ_ERR_ARG, "decomposition: global shape is NULL for rank %d", rank);
  int ndim = adj_partition_ndim(partition);
  ADJ_CHECK(rank == ndim, ADJ_ERR_SIZE,
            "decomposition: tensor rank %d does not match the partition's %d dimensions", rank, ndim);
  const int *shape = adj_partition_shape(partition);
  for (int i = 0; i < rank; i++) {
    ADJ_CHECK(global_shape[i] >= 0, ADJ_ERR_ARG, "decomposition: global extent %lld in dimension %d is negative",
              (long long)global_shape[i], i);
    if (cuts && cuts[i]) ADJ_CALL(adj_check_cuts(i, shape[i], global_shape[i], cuts[i]));
  }
  adj_decomposition *d = calloc(1, sizeof *d);
  ADJ_CHECK(d, ADJ_ERR_MEM, "decomposition: out of memory");
  d->refcount = 1;
  d->partition = adj_partition_reference((adj_partition *)partition);
  d->rank = rank;
  for (int i = 0; i < rank; i++) {
    d->global_shape[i] = global_shape[i];
    d->cuts[i] = malloc(sizeof(int64_t) * (size_t)(shape[i] + 1));
    if (!d->cuts[i]) {
      adj_decomposition_free(d);
      return adj_error_set(ADJ_ERR_MEM, "decomposition: out of memory");
    }
    for (int p = 0; p <= shape[i]; p++) {
      int64_t start, extent;
      adj_balanced_block(global_shape[i], shape[i], p < shape[i] ? p : shape[i] - 1, &start, &extent);
      d->cuts[i][p] = (cuts && cuts[i]) ? cuts[i][p] : (p < shape[i] ? start : start + extent);
    }
  }
  *decomposition = d;
  return ADJ_SUCCESS;
}

int adj_decomposition_create(const adj_partition *partition, int rank, const int64_t *global_shape,
                             adj_decomposition **decomposition) {
  return adj_decomposition_create_explicit(partition, rank, global_shape, NULL, decomposition);
}

int adj_decomposition_create_on_first_ranks(MPI_Comm base, int rank, const int *parts, const int64_t *global_shape,
                                            adj_decomposition **decomposition) {
  ADJ_CHECK(parts && rank >= 1 && rank <= ADJ_MAX_RANK, ADJ_ERR_ARG,
            "decomposition on first ranks: rank %d (1..%d) or parts NULL", rank, ADJ_MAX_RANK);
  int n = 1;
  for (int i = 0; i < rank; i++) n *= parts[i];
  adj_partition *p = NULL;
  ADJ_CALL(adj_partition_create(base, rank, parts, n, NULL, &p));
  int status = adj_decomposition_create(p, rank, global_shape, decomposition);
  adj_partition_destroy(&p);
  return status;
}

adj_decomposition *adj_decomposition_reference(adj_decomposition *d) {
  if (d) d->refcount++;
  return d;
}

void adj_decomposition_destroy(adj_decomposition **decomposition) {
  if (!decomposition || !*decomposition) return;
  if (--(*decomposition)->refcount == 0) adj_decomposition_free(*decomposition);
  *decomposition = NULL;
}

const adj_partition *adj_decomposition_partition(const adj_decomposition *d) { return d->partition; }
int adj_decomposition_rank(const adj_decomposition *d) { return d->rank; }
const int64_t *adj_decomposition_global_shape(const adj_decomposition *d) { return d->global_shape; }
const int64_t *adj_decomposition_cuts(const adj_decomposition *d, int dim) { return d->cuts[dim]; }

adj_box adj_decomposition_block(const adj_decomposition *d, const int *coords) {
  adj_box b = {.rank = d->rank};
  for (int i = 0; i < d->rank; i++) {
    b.start[i] = d->cuts[i][coords[i]];
    b.extent[i] = d->cuts[i][coords[i] + 1] - b.start[i];
  }
  return b;
}

adj_box adj_decomposition_local_block(const adj_decomposition *d) {
  if (adj_partition_active(d->partition)) return adj_decomposition_block(d, adj_partition_coords(d->partition));
  adj_box b = {.rank = d->rank};
  return b;
}

int adj_decomposition_create_local(const adj_decomposition *d, adj_dtype dtype, adj_tensor *local) {
  ADJ_CHECK(d, ADJ_ERR_ARG, "adj_decomposition_create_local: decomposition is NULL");
  adj_box b = adj_decomposition_local_block(d);
  return adj_tensor_create(local, dtype, b.rank, b.extent);
}
