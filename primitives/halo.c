/* Halo exchange: the nested, unbalanced exchange of eq. 11 and its adjoint
 * (eq. 12), planned once from the geometry, in one of two algorithms.
 *
 * Nested: phase i (one per tensor dimension) moves, between workers that
 * differ only in coordinate i, boxes that span: in dimension i the overlap of
 * the receiver's halo with the sender's bulk; in dimensions j < i the whole
 * local range (bulk and the halos received in earlier phases, hence the
 * corners); in dimensions j > i the bulk.  Workers on a line along dimension i
 * share their geometry in every other dimension, so a box means the same
 * global region on both ends.  Every halo entry is written by exactly one
 * phase (the last dimension in which it lies outside the bulk), which is what
 * makes the adjoint a clean add-and-clear in reverse order.
 *
 * Direct: one round in which every worker receives each halo region straight
 * from the worker whose bulk holds it, corners from the diagonal neighbours,
 * so nothing is relayed and nothing waits for an earlier phase.  It moves the
 * same entries (an entry is received exactly when, in every dimension, some
 * worker's bulk holds its index) and its adjoint adds every halo copy into the
 * one bulk entry it came from, so both algorithms are the same operator; the
 * adjoint's sums may associate differently, within rounding.  It sends more,
 * smaller messages (up to 3^d - 1 peers against 2d) and posts all of them at
 * once: begin returns without waiting, which the nested exchange cannot do
 * beyond its last phase.  halo.h says which one the operator takes.
 *
 * Each box travels in place as an MPI datatype made at creation (a contiguous
 * box as a run of elements, any other as a subarray of the local tensor), as a
 * hand-written exchange would: the forward sends from the bulk and receives
 * straight into the halo, with no pack or unpack of its own.  Only the adjoint
 * stages what it receives in a buffer, because it must add, not overwrite. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#include "adjoin/agree.h"
#include "adjoin/halo.h"
#include "box_type_impl.h"
#include "op_impl.h"
#include "dtype_mpi_impl.h"
#include "setting_impl.h"

typedef struct adj_halo_message {
  int peer;             /* rank in the operator's communicator */
  adj_box box;          /* region of the local tensor */
  adj_box_type place;   /* the box in place in the local tensor */
  int64_t offset;       /* bulk pieces: elements into the adjoint's receive buffer */
  int count;            /* elements in the box */
} adj_halo_message;

/* Forward: bulk pieces are sent, halo pieces received.  The adjoint swaps them. */
typedef struct adj_halo_phase {
  int n_bulk, n_halo;
  adj_halo_message *bulk, *halo;
} adj_halo_phase;

typedef struct adj_halo {
  int phases; /* nested: the tensor rank; direct: 1 (phase[0]); 0 when inactive */
  adj_halo_phase phase[ADJ_MAX_RANK];
  size_t esize;
  MPI_Datatype type;    /* element type */
  adj_halo_local local; /* this worker's local tensor */
  char *buffer;         /* adjoint receives, sized for the largest phase */
  MPI_Request *requests;
  int posted; /* requests of the phase in flight */
} adj_halo;

static void adj_halo_free_messages(adj_halo_message *list, int n) {
  for (int m = 0; list && m < n; m++) adj_box_type_free(&list[m].place);
  free(list);
}

static void adj_halo_free(adj_halo *h) {
  if (!h) return;
  for (int i = 0; i < ADJ_MAX_RANK; i++) {
    adj_halo_free_messages(h->phase[i].bulk, h->phase[i].n_bulk);
    adj_halo_free_messages(h->phase[i].halo, h->phase[i].n_halo);
  }
  free(h->buffer);
  free(h->requests);
  free(h);
}

static void adj_halo_destroy(adj_op *op) { adj_halo_free(op->impl); }

/* ---- planning ----------------------------------------------------------------- */

static int64_t adj_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t adj_min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Overlap of `halo_owner`'s halos with `bulk_owner`'s bulk, as a global range.
 * The bulk lies on one side of the halo owner's bulk, so at most one of the two
 * halos can overlap it. */
static void adj_halo_overlap(const adj_halo_dim *halo_owner, const adj_halo_dim *bulk_owner, int64_t *lo, int64_t *hi) {
  const int64_t *b = halo_owner->bulk, *h = halo_owner->halo;
  int64_t ranges[2][2] = {{b[0] - h[0], b[0]}, {b[1], b[1] + h[1]}};
  *lo = *hi = 0;
  for (int side = 0; side < 2; side++) {
    int64_t a = adj_max64(ranges[side][0], bulk_owner->bulk[0]);
    int64_t z = adj_min64(ranges[side][1], bulk_owner->bulk[1]);
    if (z > a) *lo = a, *hi = z;
  }
}

/* The box of phase `dim` covering global range [lo, hi) in that dimension. */
static adj_box adj_halo_phase_box(const adj_halo_local *local, int dim, int64_t lo, int64_t hi) {
  adj_box box = {.rank = local->rank};
  for (int j = 0; j < local->rank; j++) {
    if (j < dim) {
      box.extent[j] = local->shape[j];
    } else if (j > dim) {
      box.start[j] = local->bulk.start[j];
      box.extent[j] = local->bulk.extent[j];
    } else {
      box.start[j] = lo - local->input.start[j];
      box.extent[j] = hi - lo;
    }
  }
  return box;
}

static int adj_halo_add_message(adj_halo *h, adj_halo_message *list, int *n, int peer, adj_box box, int64_t *offset) {
  int64_t volume = adj_box_volume(&box);
  if (volume == 0) return ADJ_SUCCESS;
  ADJ_CHECK(volume <= INT_MAX, ADJ_ERR_SIZE, "halo: a message of %lld elements exceeds MPI's int count",
            (long long)volume);
  adj_halo_message *m = &list[*n];
  *m = (adj_halo_message){.peer = peer, .box = box, .offset = *offset, .count = (int)volume};
  ADJ_CALL(adj_box_type_create("halo", &box, h->local.shape, h->type, &m->place));
  (*n)++;
  *offset += volume;
  return ADJ_SUCCESS;
}

typedef struct adj_halo_sizes {
  int64_t bulk; /* largest phase total of bulk pieces, in elements */
  int requests; /* largest phase message count */
} adj_halo_sizes;

/* Messages of phase `dim` for the worker at `coords`, one per other worker on
 * its line whose bulk it needs or who needs its bulk. */
static int adj_halo_plan_phase(adj_halo *h, const adj_partition *partition, const adj_halo_geometry *g,
                               const int *coords, int dim, adj_halo_sizes *sizes) {
  int parts = adj_halo_geometry_parts(g)[dim];
  adj_halo_phase *ph = &h->phase[dim];
  ph->bulk = malloc(sizeof *ph->bulk * (size_t)parts);
  ph->halo = malloc(sizeof *ph->halo * (size_t)parts);
  ADJ_CHECK(ph->bulk && ph->halo, ADJ_ERR_MEM, "halo: out of memory planning %d peers", parts);
  const adj_halo_local *local = &h->local;
  const adj_halo_dim *mine = adj_halo_geometry_dim(g, dim, coords[dim]);
  int peer_coords[ADJ_MAX_RANK];
  memcpy(peer_coords, coords, sizeof(int) * (size_t)local->rank);
  int64_t bulk_total = 0, halo_total = 0;
  for (int q = 0; q < parts; q++) {
    if (q == coords[dim]) continue;
    const adj_halo_dim *other = adj_halo_geometry_dim(g, dim, q);
    peer_coords[dim] = q;
    int peer = adj_partition_rank_at(partition, peer_coords);
    int64_t lo, hi;
    adj_halo_overlap(mine, other, &lo, &hi);
    ADJ_CALL(adj_halo_add_message(h, ph->halo, &ph->n_halo, peer, adj_halo_phase_box(local, dim, lo, hi), &halo_total));
    adj_halo_overlap(other, mine, &lo, &hi);
    ADJ_CALL(adj_halo_add_message(h, ph->bulk, &ph->n_bulk, peer, adj_halo_phase_box(local, dim, lo, hi), &bulk_total));
  }
  sizes->bulk = adj_max64(sizes->bulk, bulk_total);
  if (ph->n_bulk + ph->n_halo > sizes->requests) sizes->requests = ph->n_bulk + ph->n_halo;
  return ADJ_SUCCESS;
}

/* Dimension `dim` of a direct message between this worker (coordinate
 * `mine`) and the worker at `other`, as a global range: where the two share
 * the coordinate, the common bulk; else the overlap of the receiver's halos
 * with the sender's bulk (this worker receives when `receiving`). */
static void adj_halo_direct_range(const adj_halo_geometry *g, int dim, int mine, int other, bool receiving,
                                  int64_t *lo, int64_t *hi) {
  const adj_halo_dim *me = adj_halo_geometry_dim(g, dim, mine);
  if (other == mine) {
    *lo = me->bulk[0], *hi = me->bulk[1];
    return;
  }
  const adj_halo_dim *them = adj_halo_geometry_dim(g, dim, other);
  if (receiving) adj_halo_overlap(me, them, lo, hi);
  else adj_halo_overlap(them, me, lo, hi);
}

/* The region of the local tensor that a direct message with the worker at
 * `peer` fills (receiving) or reads (sending); empty when any dimension is. */
static adj_box adj_halo_direct_box(const adj_halo_geometry *g, const adj_halo_local *local, const int *coords,
                                   const int *peer, bool receiving) {
  adj_box box = {.rank = local->rank};
  for (int j = 0; j < local->rank; j++) {
    int64_t lo, hi;
    adj_halo_direct_range(g, j, coords[j], peer[j], receiving, &lo, &hi);
    if (hi <= lo) return (adj_box){.rank = local->rank};
    box.start[j] = lo - local->input.start[j];
    box.extent[j] = hi - lo;
  }
  return box;
}

/* The direct exchange's messages, all in phase[0]: one each way with every
 * other worker whose bulk meets this worker's halos or whose halos meet its
 * bulk, in rank order of the grid (which fixes the adjoint's order of sums). */
static int adj_halo_plan_direct(adj_halo *h, const adj_partition *partition, const adj_halo_geometry *g,
                                const int *coords, adj_halo_sizes *sizes) {
  const int *parts = adj_halo_geometry_parts(g);
  int rank = h->local.rank, workers = 1;
  for (int j = 0; j < rank; j++) workers *= parts[j];
  adj_halo_phase *ph = &h->phase[0];
  ph->bulk = malloc(sizeof *ph->bulk * (size_t)workers);
  ph->halo = malloc(sizeof *ph->halo * (size_t)workers);
  ADJ_CHECK(ph->bulk && ph->halo, ADJ_ERR_MEM, "halo: out of memory planning %d peers", workers);
  int64_t bulk_total = 0, halo_total = 0;
  for (int w = 0; w < workers; w++) {
    int peer[ADJ_MAX_RANK], rest = w;
    bool self = true;
    for (int j = rank - 1; j >= 0; j--) {
      peer[j] = rest % parts[j], rest /= parts[j];
      self &= peer[j] == coords[j];
    }
    if (self) continue;
    int peer_rank = adj_partition_rank_at(partition, peer);
    ADJ_CALL(adj_halo_add_message(h, ph->halo, &ph->n_halo, peer_rank,
                                  adj_halo_direct_box(g, &h->local, coords, peer, true), &halo_total));
    ADJ_CALL(adj_halo_add_message(h, ph->bulk, &ph->n_bulk, peer_rank,
                                  adj_halo_direct_box(g, &h->local, coords, peer, false), &bulk_total));
  }
  sizes->bulk = bulk_total;
  sizes->requests = ph->n_bulk + ph->n_halo;
  h->phases = 1;
  return ADJ_SUCCESS;
}

static int adj_halo_plan(adj_halo *h, adj_dtype dtype, const adj_partition *partition, const adj_halo_geometry *g,
                         adj_halo_algorithm algorithm) {
  h->esize = adj_dtype_size(dtype);
  h->type = adj_dtype_mpi(dtype);
  bool active = adj_partition_active(partition);
  adj_halo_geometry_local(g, active ? adj_partition_coords(partition) : NULL, &h->local);
  if (!active) return ADJ_SUCCESS;
  adj_halo_sizes sizes = {0};
  if (algorithm == ADJ_HALO_DIRECT) {
    ADJ_CALL(adj_halo_plan_direct(h, partition, g, adj_partition_coords(partition), &sizes));
  } else {
    h->phases = adj_halo_geometry_rank(g);
    for (int dim = 0; dim < h->phases; dim++)
      ADJ_CALL(adj_halo_plan_phase(h, partition, g, adj_partition_coords(partition), dim, &sizes));
  }
  /* One extra element keeps the pointers non-NULL when nothing moves. */
  h->buffer = malloc((size_t)(sizes.bulk + 1) * h->esize);
  h->requests = malloc(sizeof(MPI_Request) * (size_t)(sizes.requests + 1));
  ADJ_CHECK(h->buffer && h->requests, ADJ_ERR_MEM, "halo: out of memory for an exchange buffer of %lld elements",
            (long long)sizes.bulk);
  return ADJ_SUCCESS;
}

/* ---- application -------------------------------------------------------------- */

/* Posts phase `dim`, receives first.  The forward sends bulk pieces and
 * receives halo pieces, both in place.  The adjoint sends the halo pieces back
 * and receives the owners' share into the buffer, to be added. */
static int adj_halo_phase_post(adj_op *op, int dim, adj_direction direction, adj_tensor *t) {
  adj_halo *h = op->impl;
  const adj_halo_phase *ph = &h->phase[dim];
  bool forward = direction == ADJ_FORWARD;
  const adj_halo_message *send = forward ? ph->bulk : ph->halo, *recv = forward ? ph->halo : ph->bulk;
  int n_send = forward ? ph->n_bulk : ph->n_halo, n_recv = forward ? ph->n_halo : ph->n_bulk;
  h->posted = 0;
  for (int m = 0; m < n_recv; m++) {
    if (forward)
      ADJ_CALL_MPI(MPI_Irecv(adj_box_type_address(&recv[m].place, t, h->esize), recv[m].place.count,
                             recv[m].place.type, recv[m].peer, dim, op->comm, &h->requests[h->posted++]));
    else
      ADJ_CALL_MPI(MPI_Irecv(h->buffer + recv[m].offset * (int64_t)h->esize, recv[m].count, h->type, recv[m].peer, dim,
                             op->comm, &h->requests[h->posted++]));
    adj_op_count_recv(op, (size_t)recv[m].count * h->esize);
  }
  for (int m = 0; m < n_send; m++) {
    ADJ_CALL_MPI(MPI_Isend(adj_box_type_address(&send[m].place, t, h->esize), send[m].place.count, send[m].place.type,
                           send[m].peer, dim, op->comm, &h->requests[h->posted++]));
    adj_op_count_send(op, (size_t)send[m].count * h->esize);
  }
  return ADJ_SUCCESS;
}

/* Completes phase `dim`.  The forward is done once the messages are; the
 * adjoint adds what arrived into the bulk and clears the halo it sent (the
 * K_T* S* of eq. 12: a copy's adjoint is add, then clear). */
static int adj_halo_phase_finish(adj_op *op, int dim, adj_direction direction, adj_tensor *t) {
  adj_halo *h = op->impl;
  const adj_halo_phase *ph = &h->phase[dim];
  ADJ_CALL(adj_wait_all(h->posted, h->requests, op->wait));
  h->posted = 0;
  if (direction == ADJ_FORWARD) return ADJ_SUCCESS;
  for (int m = 0; m < ph->n_bulk; m++)
    adj_tensor_unpack(t, &ph->bulk[m].box, h->buffer + ph->bulk[m].offset * (int64_t)h->esize, ADJ_UNPACK_ADD);
  for (int m = 0; m < ph->n_halo; m++) adj_tensor_clear_box(t, &ph->halo[m].box);
  return ADJ_SUCCESS;
}

/* Forward visits dimensions 0..d-1, the adjoint d-1..0.  Phase k+1 packs what
 * phase k received, so every phase but the last completes here; the last is
 * only posted and adj_halo_end completes it. */
static int adj_halo_dim_of_step(const adj_halo *h, adj_direction direction, int step) {
  return direction == ADJ_FORWARD ? step : h->phases - 1 - step;
}

static int adj_halo_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)in; /* in place: the dispatcher checked in and out share storage */
  adj_halo *h = op->impl;
  for (int step = 0; step < h->phases; step++) {
    int dim = adj_halo_dim_of_step(h, direction, step);
    ADJ_CALL(adj_halo_phase_post(op, dim, direction, out));
    if (step + 1 < h->phases) ADJ_CALL(adj_halo_phase_finish(op, dim, direction, out));
  }
  return ADJ_SUCCESS;
}

static int adj_halo_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)in;
  adj_halo *h = op->impl;
  if (h->phases == 0) return ADJ_SUCCESS;
  return adj_halo_phase_finish(op, adj_halo_dim_of_step(h, direction, h->phases - 1), direction, out);
}

/* ---- creation ----------------------------------------------------------------- */

/* No message in any phase and no halo around the bulk: the exchange neither
 * fills nor returns anything here, so it is the identity on this worker. */
static bool adj_halo_is_identity(const adj_halo *h) {
  for (int dim = 0; dim < h->phases; dim++)
    if (h->phase[dim].n_bulk || h->phase[dim].n_halo) return false;
  const adj_halo_local *local = &h->local;
  for (int i = 0; i < local->rank; i++)
    if (local->bulk.start[i] != 0 || local->bulk.extent[i] != local->shape[i]) return false;
  return true;
}

static int adj_halo_check_args(adj_dtype dtype, const adj_partition *partition, const adj_halo_geometry *g) {
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "halo: invalid dtype %d", (int)dtype);
  ADJ_CHECK(partition && g, ADJ_ERR_ARG, "halo: partition and geometry must not be NULL");
  int ndim = adj_partition_ndim(partition), rank = adj_halo_geometry_rank(g);
  ADJ_CHECK(ndim == rank, ADJ_ERR_SIZE, "halo: the partition has %d dimensions but the geometry %d", ndim, rank);
  const int *shape = adj_partition_shape(partition), *parts = adj_halo_geometry_parts(g);
  for (int i = 0; i < rank; i++)
    ADJ_CHECK(shape[i] == parts[i], ADJ_ERR_SIZE,
              "halo: dimension %d of the partition has %d workers but the geometry was made for %d", i, shape[i],
              parts[i]);
  return ADJ_SUCCESS;
}

static uint64_t adj_fnv(uint64_t hash, int64_t value) {
  for (int b = 0; b < 8; b++) hash = (hash ^ (uint64_t)((value >> (8 * b)) & 0xff)) * 1099511628211ull;
  return hash;
}

/* A fingerprint of everything that shapes the message plan. */
static int64_t adj_halo_fingerprint(adj_dtype dtype, const adj_halo_geometry *g, adj_halo_algorithm algorithm) {
  uint64_t hash = adj_fnv(adj_fnv(14695981039346656037ull, dtype), algorithm);
  const adj_halo_kernel *k = adj_halo_geometry_kernel(g);
  for (int i = 0; i < adj_halo_geometry_rank(g); i++) {
    int64_t values[] = {adj_halo_geometry_input_shape(g)[i],
                        adj_halo_geometry_parts(g)[i],
                        k->size[i],
                        k->stride[i],
                        k->dilation[i],
                        k->padding[i][0],
                        k->padding[i][1]};
    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) hash = adj_fnv(hash, values[v]);
    for (int p = 0; p < adj_halo_geometry_parts(g)[i]; p++) {
      const adj_halo_dim *d = adj_halo_geometry_dim(g, i, p);
      hash = adj_fnv(adj_fnv(adj_fnv(hash, d->bulk[0]), d->halo[0]), d->halo[1]);
    }
  }
  return (int64_t)(hash >> 1);
}

/* A rank passing a different geometry would post messages nobody matches; every
 * rank compares the fingerprint's max and min and fails together instead. */
static int adj_halo_agree_geometry(MPI_Comm base, adj_wait_policy policy, int64_t fingerprint, int local) {
  int64_t mine[2] = {fingerprint, -fingerprint}, most[2];
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Iallreduce(mine, most, 2, MPI_INT64_T, MPI_MAX, base, &request));
  ADJ_CALL(adj_wait_all(1, &request, policy));
  if (!local && (most[0] != fingerprint || -most[1] != fingerprint))
    local = adj_error_set(ADJ_ERR_ARG,
                          "halo: ranks passed different geometries (dtype, shape, cuts or kernel) or algorithms");
  return adj_status_agree(base, local, policy);
}

static const char *const adj_halo_algorithm_names[] = {"auto", "nested", "direct"};
enum { ADJ_HALO_ALGORITHMS = sizeof adj_halo_algorithm_names / sizeof adj_halo_algorithm_names[0] };

static adj_setting adj_halo_algorithm_setting = ADJ_SETTING_INIT("ADJ_HALO_ALGORITHM");

ADJ_SETTING_CHOICE_ACCESSORS(adj_halo_algorithm, adj_halo_algorithm, adj_halo_algorithm_setting,
                             adj_halo_algorithm_names)

/* AUTO resolved: the process's default (its setter or the environment), else
 * nested (halo.h says why).  The environment is the same on every rank under
 * mpiexec, so a bad value fails alike everywhere. */
static int adj_halo_algorithm_resolve(adj_halo_algorithm requested, adj_halo_algorithm *resolved) {
  *resolved = requested;
  if (requested == ADJ_HALO_AUTO) ADJ_CALL(adj_halo_algorithm_get_default(resolved));
  if (*resolved == ADJ_HALO_AUTO) *resolved = ADJ_HALO_NESTED;
  return ADJ_SUCCESS;
}

int adj_halo_create(adj_dtype dtype, const adj_partition *partition, const adj_halo_geometry *g, adj_op **op) {
  return adj_halo_create_with_algorithm(dtype, partition, g, ADJ_HALO_AUTO, op);
}

int adj_halo_create_with_algorithm(adj_dtype dtype, const adj_partition *partition, const adj_halo_geometry *g,
                                   adj_halo_algorithm algorithm, adj_op **op) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "halo: output operator pointer is NULL");
  *op = NULL;
  ADJ_CHECK(partition && g, ADJ_ERR_ARG, "halo: partition and geometry are required");
  ADJ_CHECK(algorithm >= ADJ_HALO_AUTO && algorithm <= ADJ_HALO_DIRECT, ADJ_ERR_ARG,
            "halo: algorithm %d is not ADJ_HALO_AUTO, ADJ_HALO_NESTED or ADJ_HALO_DIRECT", (int)algorithm);
  ADJ_CALL(adj_halo_check_args(dtype, partition, g));
  adj_halo_algorithm chosen;
  ADJ_CALL(adj_halo_algorithm_resolve(algorithm, &chosen));
  MPI_Comm base = adj_partition_base_comm(partition);
  adj_halo *h = calloc(1, sizeof *h);
  int status = h ? adj_halo_plan(h, dtype, partition, g, chosen) : adj_error_set(ADJ_ERR_MEM, "halo: out of memory");
  status = adj_halo_agree_geometry(base, adj_partition_wait_policy(partition),
                                   adj_halo_fingerprint(dtype, g, chosen), status);
  if (status) {
    adj_halo_free(h);
    return status;
  }
  const adj_halo_local *local = &h->local;
  char name[64], text[48];
  snprintf(name, sizeof name, "halo%s",
           adj_shape_format(text, sizeof text, local->rank, adj_halo_geometry_input_shape(g)));
  static const adj_op_methods methods = {adj_halo_begin, adj_halo_end, adj_halo_destroy};
  status = adj_op_alloc(name, base, dtype, local->rank, local->shape, local->rank, local->shape, &methods, h, op);
  if (status) {
    adj_halo_free(h);
    return status;
  }
  (*op)->in_place = true;
  (*op)->identity = adj_halo_is_identity(h);
  snprintf((*op)->algorithm, sizeof (*op)->algorithm, "%s", adj_halo_algorithm_names[chosen]);
  return ADJ_SUCCESS;
}
