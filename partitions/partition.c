#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#include "adjoin/agree.h"
#include "adjoin/partition.h"
#include "adjoin/status.h"
#include "error_impl.h"

struct adj_partition {
  int refcount;
  MPI_Comm base;          /* the caller's communicator (not owned) */
  MPI_Comm comm;          /* active workers in grid order, made on request; else MPI_COMM_NULL */
  adj_wait_policy wait;   /* resolved for base */
  int ndim;
  int shape[ADJ_MAX_RANK];
  int size;               /* product of shape */
  int *ranks;             /* base rank of grid index i */
  int *index_of_rank;     /* grid index of base rank r, or -1 */
  int base_size;
  int coords[ADJ_MAX_RANK];
  int index;              /* this worker's grid index or -1 */
};

/* Validates arguments every rank shares, so the same error appears everywhere
 * without communication. */
static int adj_partition_validate(MPI_Comm base, int ndim, const int *shape, int nranks, const int *ranks) {
  int base_size;
  ADJ_CALL_MPI(MPI_Comm_size(base, &base_size));
  ADJ_CHECK(ndim >= 1 && ndim <= ADJ_MAX_RANK, ADJ_ERR_ARG, "partition: ndim %d is outside 1..%d", ndim,
            ADJ_MAX_RANK);
  ADJ_CHECK(shape, ADJ_ERR_ARG, "partition: shape is NULL");
  for (int i = 0; i < ndim; i++)
    ADJ_CHECK(shape[i] >= 1, ADJ_ERR_ARG, "partition: extent %d in dimension %d must be at least 1", shape[i], i);
  char buf[128] = "[";
  for (int i = 0, used = 1; i < ndim && used < (int)sizeof buf; i++)
    used += snprintf(buf + used, sizeof buf - (size_t)used, i + 1 < ndim ? "%d, " : "%d]", shape[i]);
  /* The worker count is an int (nranks, the grid index); stopping at INT_MAX
   * keeps the product from overflowing on the way. */
  long long product = 1;
  for (int i = 0; i < ndim; i++) {
    ADJ_CHECK(product <= INT_MAX / shape[i], ADJ_ERR_ARG, "partition: shape %s has more than %d workers", buf,
              INT_MAX);
    product *= shape[i];
  }
  ADJ_CHECK(product == nranks, ADJ_ERR_SIZE,
            "partition: shape %s has %lld workers but %d ranks were listed", buf, product, nranks);
  ADJ_CHECK(nranks <= base_size, ADJ_ERR_SIZE,
            "partition: shape %s needs %d ranks but the communicator has %d", buf, nranks, base_size);
  if (ranks) {
    for (int i = 0; i < nranks; i++) {
      ADJ_CHECK(ranks[i] >= 0 && ranks[i] < base_size, ADJ_ERR_ARG,
                "partition: rank %d at position %d is outside the communicator of size %d", ranks[i], i, base_size);
      for (int j = 0; j < i; j++)
        ADJ_CHECK(ranks[j] != ranks[i], ADJ_ERR_ARG, "partition: rank %d is listed twice (positions %d and %d)",
                  ranks[i], j, i);
    }
  }
  return ADJ_SUCCESS;
}

static void adj_partition_free(adj_partition *p) {
  if (!p) return;
  if (p->comm != MPI_COMM_NULL) MPI_Comm_free(&p->comm);
  free(p->ranks);
  free(p->index_of_rank);
  free(p);
}

int adj_partition_create(MPI_Comm base, int ndim, const int *shape, int nranks, const int *ranks,
                         adj_partition **partition) {
  int status = ADJ_SUCCESS;
  ADJ_CHECK(partition, ADJ_ERR_ARG, "adj_partition_create: output partition pointer is NULL");
  *partition = NULL;
  ADJ_CALL(adj_partition_validate(base, ndim, shape, nranks, ranks));
  adj_partition *p = calloc(1, sizeof *p);
  int base_rank;
  MPI_Comm_rank(base, &base_rank);
  if (p) {
    MPI_Comm_size(base, &p->base_size);
    p->ranks = malloc(sizeof(int) * (size_t)nranks);
    p->index_of_rank = malloc(sizeof(int) * (size_t)p->base_size);
  }
  int local = (!p || !p->ranks || !p->index_of_rank)
                  ? adj_error_set(ADJ_ERR_MEM, "partition: out of memory for %d ranks", nranks)
                  : ADJ_SUCCESS;
  ADJ_CALL_GOTO(adj_status_agree(base, local, ADJ_WAIT_YIELD), fail);
  p->refcount = 1;
  p->base = base;
  p->comm = MPI_COMM_NULL;
  p->ndim = ndim;
  p->size = nranks;
  memcpy(p->shape, shape, sizeof(int) * (size_t)ndim);
  for (int r = 0; r < p->base_size; r++) p->index_of_rank[r] = -1;
  for (int i = 0; i < nranks; i++) {
    p->ranks[i] = ranks ? ranks[i] : i;
    p->index_of_rank[p->ranks[i]] = i;
  }
  p->index = p->index_of_rank[base_rank];
  if (p->index >= 0)
    adj_partition_coords_of_index(p, p->index, p->coords);
  else
    for (int i = 0; i < ADJ_MAX_RANK; i++) p->coords[i] = -1;
  ADJ_CALL_GOTO(adj_wait_policy_resolve(base, ADJ_WAIT_AUTO, &p->wait), fail);
  *partition = p;
  return ADJ_SUCCESS;
fail:
  adj_partition_free(p);
  return status;
}

int adj_partition_create_sub(const adj_partition *parent, const int *start, const int *shape, adj_partition **sub) {
  ADJ_CHECK(sub, ADJ_ERR_ARG, "adj_partition_create_sub: output partition pointer is NULL");
  *sub = NULL;
  ADJ_CHECK(parent && start && shape, ADJ_ERR_ARG, "adj_partition_create_sub: parent, start and shape are required");
  int n = 1;
  for (int i = 0; i < parent->ndim; i++) {
    ADJ_CHECK(start[i] >= 0 && shape[i] >= 1 && start[i] <= parent->shape[i] &&
                  shape[i] <= parent->shape[i] - start[i],
              ADJ_ERR_ARG, "sub-partition: dimension %d range [%d, %lld) is outside the parent's extent %d", i,
              start[i], (long long)start[i] + shape[i], parent->shape[i]);
    n *= shape[i];
  }
  int *ranks = malloc(sizeof(int) * (size_t)n);
  int local = ranks ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "sub-partition: out of memory");
  ADJ_CALL(adj_status_agree(parent->base, local, parent->wait));
  int coords[ADJ_MAX_RANK];
  for (int k = 0; k < n; k++) {
    /* k-th sub-grid index (row-major) to parent coordinates. */
    int rest = k;
    for (int i = parent->ndim - 1; i >= 0; i--) {
      coords[i] = start[i] + rest % shape[i];
      rest /= shape[i];
    }
    ranks[k] = adj_partition_rank_at(parent, coords);
  }
  int status = adj_partition_create(parent->base, parent->ndim, shape, n, ranks, sub);
  free(ranks);
  return status;
}

adj_partition *adj_partition_reference(adj_partition *p) {
  if (p) p->refcount++;
  return p;
}

void adj_partition_destroy(adj_partition **partition) {
  if (!partition || !*partition) return;
  if (--(*partition)->refcount == 0) adj_partition_free(*partition);
  *partition = NULL;
}

MPI_Comm adj_partition_base_comm(const adj_partition *p) { return p->base; }
int adj_partition_get_comm(adj_partition *p, MPI_Comm *comm) {
  *comm = MPI_COMM_NULL;
  if (p->index < 0) return ADJ_SUCCESS;
  if (p->comm == MPI_COMM_NULL) {
    MPI_Group base_group, group;
    ADJ_CALL_MPI(MPI_Comm_group(p->base, &base_group));
    int status = MPI_Group_incl(base_group, p->size, p->ranks, &group);
    MPI_Group_free(&base_group);
    if (status != MPI_SUCCESS) return adj_error_mpi(status, "MPI_Group_incl");
    /* Collective over the group only: inactive ranks need not take part. */
    status = MPI_Comm_create_group(p->base, group, 0, &p->comm);
    MPI_Group_free(&group);
    if (status != MPI_SUCCESS) return adj_error_mpi(status, "MPI_Comm_create_group");
  }
  *comm = p->comm;
  return ADJ_SUCCESS;
}
int adj_partition_ndim(const adj_partition *p) { return p->ndim; }
const int *adj_partition_shape(const adj_partition *p) { return p->shape; }
int adj_partition_size(const adj_partition *p) { return p->size; }
bool adj_partition_active(const adj_partition *p) { return p->index >= 0; }
const int *adj_partition_coords(const adj_partition *p) { return p->coords; }
adj_wait_policy adj_partition_wait_policy(const adj_partition *p) { return p->wait; }

int adj_partition_index(const adj_partition *p, const int *coords) {
  int index = 0;
  for (int i = 0; i < p->ndim; i++) index = index * p->shape[i] + coords[i];
  return index;
}

void adj_partition_coords_of_index(const adj_partition *p, int index, int *coords) {
  for (int i = p->ndim - 1; i >= 0; i--) {
    coords[i] = index % p->shape[i];
    index /= p->shape[i];
  }
}

int adj_partition_rank_at(const adj_partition *p, const int *coords) {
  return p->ranks[adj_partition_index(p, coords)];
}

int adj_partition_rank_of_index(const adj_partition *p, int index) { return p->ranks[index]; }

int adj_partition_index_of_rank(const adj_partition *p, int base_rank) {
  return base_rank >= 0 && base_rank < p->base_size ? p->index_of_rank[base_rank] : -1;
}

const char *adj_partition_format(const adj_partition *p, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < p->ndim && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ", %d" : "%d", p->shape[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}

int adj_partition_check_broadcast(const adj_partition *src, const adj_partition *dst) {
  char a[96], b[96];
  int same = MPI_UNEQUAL;
  ADJ_CALL_MPI(MPI_Comm_compare(src->base, dst->base, &same));
  ADJ_CHECK(same == MPI_IDENT || same == MPI_CONGRUENT, ADJ_ERR_INCOMPATIBLE,
            "broadcast: partitions %s and %s live on different base communicators",
            adj_partition_format(src, a, sizeof a), adj_partition_format(dst, b, sizeof b));
  ADJ_CHECK(src->ndim <= dst->ndim, ADJ_ERR_INCOMPATIBLE,
            "broadcast: source partition %s has more dimensions (%d) than destination %s (%d)",
            adj_partition_format(src, a, sizeof a), src->ndim, adj_partition_format(dst, b, sizeof b), dst->ndim);
  int offset = dst->ndim - src->ndim;
  for (int i = 0; i < src->ndim; i++) {
    int ps = src->shape[i], pd = dst->shape[offset + i];
    ADJ_CHECK(ps == 1 || ps == pd, ADJ_ERR_INCOMPATIBLE,
              "broadcast: partition %s cannot broadcast to %s: dimension %d has source extent %d and "
              "destination extent %d (source must be 1 or equal)",
              adj_partition_format(src, a, sizeof a), adj_partition_format(dst, b, sizeof b), offset + i, ps, pd);
  }
  return ADJ_SUCCESS;
}
