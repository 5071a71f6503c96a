/* Replicas of a network (see include/adjoin/data_parallel.h). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/data_parallel.h"
#include "adjoin/network.h"
#include "dtype_impl.h"
#include "dtype_mpi_impl.h"
#include "error_impl.h"

struct adj_replicas {
  MPI_Comm comm;          /* the caller's, not owned */
  MPI_Comm model, across; /* owned */
  int count, index, position, per_replica;
  adj_partition *grid;    /* [R, M] */
  adj_wait_policy wait;
};

int adj_replicas_create(MPI_Comm comm, int replicas, adj_replicas **out) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "data parallel: output pointer is NULL");
  *out = NULL;
  int size, rank;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  ADJ_CHECK(replicas >= 1, ADJ_ERR_ARG, "data parallel: %d replicas requested (need at least 1)", replicas);
  ADJ_CHECK(size % replicas == 0, ADJ_ERR_ARG,
            "data parallel: %d ranks do not divide into %d replicas (the rank count must be a multiple of the "
            "replica count)",
            size, replicas);
  adj_replicas *r = calloc(1, sizeof *r);
  adj_wait_policy wait = ADJ_WAIT_YIELD;
  adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &wait);
  ADJ_CALL(adj_status_agree(comm, r ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "data parallel: out of memory"), wait));
  *r = (adj_replicas){.comm = comm, .model = MPI_COMM_NULL, .across = MPI_COMM_NULL, .count = replicas,
                      .per_replica = size / replicas, .wait = wait};
  r->index = rank / r->per_replica;
  r->position = rank % r->per_replica;
  int status = MPI_Comm_split(comm, r->index, rank, &r->model) == MPI_SUCCESS &&
                       MPI_Comm_split(comm, r->position, rank, &r->across) == MPI_SUCCESS
                   ? ADJ_SUCCESS
                   : adj_error_set(ADJ_ERR_MPI, "data parallel: splitting %d ranks into replicas failed", size);
  status = adj_status_agree(comm, status, wait);
  if (!status)
    status = adj_partition_create(comm, 2, (const int[]){replicas, r->per_replica}, size, NULL, &r->grid);
  if (status) {
    adj_replicas_destroy(&r);
    return status;
  }
  *out = r;
  return ADJ_SUCCESS;
}

void adj_replicas_destroy(adj_replicas **r) {
  if (!r || !*r) return;
  adj_replicas *x = *r;
  *r = NULL;
  adj_partition_destroy(&x->grid);
  if (x->model != MPI_COMM_NULL) MPI_Comm_free(&x->model);
  if (x->across != MPI_COMM_NULL) MPI_Comm_free(&x->across);
  free(x);
}

MPI_Comm adj_replicas_comm(const adj_replicas *r) { return r->comm; }
MPI_Comm adj_replicas_model_comm(const adj_replicas *r) { return r->model; }
MPI_Comm adj_replicas_across_comm(const adj_replicas *r) { return r->across; }
int adj_replicas_count(const adj_replicas *r) { return r->count; }
int adj_replicas_index(const adj_replicas *r) { return r->index; }
const adj_partition *adj_replicas_partition(const adj_replicas *r) { return r->grid; }

int adj_replicas_broadcast_parameters(const adj_replicas *r, adj_layer *network, int root) {
  ADJ_CHECK(root >= 0 && root < r->count, ADJ_ERR_ARG, "data parallel: root replica %d is outside 0..%d", root,
            r->count - 1);
  adj_tensor values, grads;
  ADJ_CALL(adj_network_flat_parameters(network, &values, &grads));
  int64_t volume = adj_tensor_volume(&values);
  int status = volume <= 0x7fffffff ? ADJ_SUCCESS
                                    : adj_error_set(ADJ_ERR_SIZE, "data parallel: %lld parameters exceed one message",
                                                    (long long)volume);
  status = adj_status_agree(r->comm, status, r->wait);
  ADJ_CALL(status);
  MPI_Request request;
  MPI_Datatype type = adj_dtype_mpi(values.dtype);
  status = MPI_Ibcast(values.data, (int)volume, type, root, r->across, &request) == MPI_SUCCESS
               ? adj_wait_all(1, &request, r->wait)
               : adj_error_set(ADJ_ERR_MPI, "data parallel: parameter broadcast failed");
  return adj_status_agree(r->comm, status, r->wait);
}

/* FNV-1a over the bytes. */
static uint64_t hash_bytes(const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3u;
  return h;
}

int adj_replicas_check_sync(const adj_replicas *r, adj_layer *network, uint64_t *hash) {
  adj_tensor values, grads;
  ADJ_CALL(adj_network_flat_parameters(network, &values, &grads));
  uint64_t mine = hash_bytes(values.data, adj_tensor_bytes(&values));
  uint64_t *all = calloc((size_t)r->count, sizeof *all);
  int status = all ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "data parallel: out of memory");
  status = adj_status_agree(r->comm, status, r->wait);
  if (status) {
    free(all);
    return status;
  }
  MPI_Request request;
  status = MPI_Iallgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, r->across, &request) == MPI_SUCCESS
               ? adj_wait_all(1, &request, r->wait)
               : adj_error_set(ADJ_ERR_MPI, "data parallel: hash exchange failed");
  for (int q = 1; !status && q < r->count; q++)
    if (all[q] != all[0])
      status = adj_error_set(ADJ_ERR_STATE,
                             "data parallel: replica %d holds parameters that differ from replica 0's at model rank "
                             "%d (hash %016" PRIx64 " vs %016" PRIx64 ")",
                             q, r->position, all[q], all[0]);
  status = adj_status_agree(r->comm, status, r->wait);
  /* One hash for the whole of replica 0: its ranks' hashes, combined in order. */
  uint64_t combined = 0;
  if (!status) {
    uint64_t *shards = calloc((size_t)r->per_replica, sizeof *shards);
    if (!shards) status = adj_error_set(ADJ_ERR_MEM, "data parallel: out of memory");
    else if (MPI_Iallgather(&all[0], 1, MPI_UINT64_T, shards, 1, MPI_UINT64_T, r->model, &request) != MPI_SUCCESS)
      status = adj_error_set(ADJ_ERR_MPI, "data parallel: hash exchange failed");
    else status = adj_wait_all(1, &request, r->wait);
    if (!status) combined = hash_bytes(shards, (size_t)r->per_replica * sizeof *shards);
    free(shards);
  }
  free(all);
  status = adj_status_agree(r->comm, status, r->wait);
  if (!status && hash) *hash = combined;
  return status;
}

int adj_replicas_reducer_create(const adj_replicas *r, adj_layer *network, const int64_t *bucket_caps,
                                void (*event)(void *ctx, adj_reducer_event event, int bucket), void *event_ctx,
                                adj_gradient_reducer **reducer) {
  ADJ_CHECK(r && network && reducer, ADJ_ERR_ARG, "replicas reducer: replicas, network or reducer is NULL");
  int n = adj_layer_parameter_count(network);
  adj_tensor **grads = calloc((size_t)n + 1, sizeof *grads);
  int status = grads ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "replicas reducer: out of memory");
  status = adj_status_agree(r->comm, status, r->wait);
  if (status) {
    free(grads);
    return status;
  }
  for (int k = 0; k < n; k++) grads[n - 1 - k] = &adj_layer_parameter(network, k)->grad;
  const int64_t defaults[2] = {ADJ_REDUCER_DEFAULT_FIRST_BUCKET_BYTES, ADJ_REDUCER_DEFAULT_BUCKET_BYTES};
  const int64_t *cap = bucket_caps ? bucket_caps : defaults;
  status = adj_gradient_reducer_create(
      &(adj_gradient_reducer_config){.dtype = adj_layer_dtype(network), .partition = r->grid, .ndims = 1,
                                     .dims = (const int[]){0}, .n = n, .tensors = grads,
                                     .first_bucket_bytes = cap[0], .bucket_bytes = cap[1], .event = event,
                                     .event_ctx = event_ctx},
      reducer);
  free(grads);
  return status;
}

int adj_replicas_reducer_stage_done(adj_layer *network, adj_gradient_reducer *reducer, int index) {
  int first, count, n = adj_layer_parameter_count(network);
  ADJ_CALL(adj_network_stage_parameters(network, index, &first, &count));
  for (int k = first; k < first + count; k++) ADJ_CALL(adj_gradient_reducer_ready(reducer, n - 1 - k));
  return adj_gradient_reducer_poke(reducer);
}
