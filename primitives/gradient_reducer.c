/* The bucketed, split-phase gradient reducer (see
 * include/adjoin/gradient_reducer.h).
 *
 * Each bucket is one all-sum-reduce operator over a 1-D partition of its
 * group's ranks, applied in place to a view of the bucket's contiguous
 * storage; the reducer only decides when to begin, test and end them.  The
 * groups get communicators of their own (split once at create), so replicas of
 * one model shard synchronise only with each other, never with the shards of
 * other groups. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/all_sum_reduce.h"
#include "adjoin/gradient_reducer.h"
#include "op_impl.h"

typedef struct adj_bucket {
  int first, count;      /* tensors first..first+count-1 (ready order) */
  int64_t elements;
  int64_t offset;        /* elements before it in the operator's concatenation */
  void *data;            /* contiguous storage of its tensors */
  adj_tensor view;       /* [elements] over data */
  adj_tensor face_view;  /* [elements] over the operator's output, during an application */
  adj_op *op;            /* all-sum-reduce over the group */
  int remaining;         /* tensors not yet final this round */
  bool posted, done;
} adj_bucket;

struct adj_gradient_reducer {
  adj_dtype dtype;
  int n;
  adj_tensor **tensors;
  int *bucket_of;        /* tensor -> bucket */
  bool *ready;           /* tensor final this round */
  int nbuckets, next_post;
  adj_bucket *buckets;
  void **moved;          /* per bucket: storage the reducer made (NULL when the tensors were adjacent) */
  MPI_Comm group;        /* this worker's replicas (itself alone when outside the partition) */
  int group_size;
  adj_partition *group_partition;
  adj_op *face;
  adj_wait_policy wait;
  int64_t total;
  uint64_t reductions;
  double wait_seconds, progress_seconds;
  void (*event)(void *ctx, adj_reducer_event event, int bucket);
  void *event_ctx;
  char empty[16];        /* storage of zero-volume buckets */
  /* ADJ_PROGRESS=thread: a thread tests the posted buckets while the caller
   * computes; every access to the buckets holds `lock`. */
  bool threaded, stopping;
  int progress_status;   /* the first error the thread met, for the caller */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t posted;
};

static void reducer_event(adj_gradient_reducer *r, adj_reducer_event e, int bucket) {
  if (r->event) r->event(r->event_ctx, e, bucket);
}

/* ---- planning ------------------------------------------------------------------------------ */

/* Cuts the tensors into buckets: a bucket takes the next tensor while its
 * bytes stay within the cap; an empty bucket always takes one. */
static int reducer_cut(adj_gradient_reducer *r, int64_t first_cap, int64_t cap) {
  r->buckets = calloc((size_t)r->n + 1, sizeof *r->buckets);
  r->moved = calloc((size_t)r->n + 1, sizeof *r->moved);
  r->bucket_of = calloc((size_t)r->n + 1, sizeof *r->bucket_of);
  r->ready = calloc((size_t)r->n + 1, sizeof *r->ready);
  ADJ_CHECK(r->buckets && r->moved && r->bucket_of && r->ready, ADJ_ERR_MEM, "gradient reducer: out of memory");
  size_t esize = adj_dtype_size(r->dtype);
  int b = -1;
  int64_t bytes = 0;
  for (int i = 0; i < r->n; i++) {
    int64_t tb = adj_tensor_volume(r->tensors[i]) * (int64_t)esize;
    int64_t limit = b <= 0 ? first_cap : cap;
    if (b < 0 || r->buckets[b].count == 0 || tb > limit - bytes) {
      b++;
      r->buckets[b].first = i;
      bytes = 0;
    }
    r->buckets[b].count++;
    r->buckets[b].elements += adj_tensor_volume(r->tensors[i]);
    bytes += tb;
    r->bucket_of[i] = b;
  }
  r->nbuckets = b + 1;
  for (int k = 0; k < r->nbuckets; k++) {
    r->buckets[k].offset = r->total;
    r->total += r->buckets[k].elements;
  }
  return ADJ_SUCCESS;
}

/* Where bucket b's tensors are adjacent in memory (in ready order or its
 * reverse), their storage is the bucket's; otherwise they move into new
 * storage and become views of it. */
static int reducer_place(adj_gradient_reducer *r, int b) {
  adj_bucket *k = &r->buckets[b];
  size_t esize = adj_dtype_size(r->dtype);
  /* Walk the non-empty tensors in order, comparing each with the previous. */
  adj_tensor *first = NULL, *prev = NULL;
  bool forward = true, backward = true;
  for (int i = k->first; i < k->first + k->count; i++) {
    adj_tensor *t = r->tensors[i];
    if (!adj_tensor_volume(t)) continue;
    if (prev) {
      forward &= (char *)prev->data + adj_tensor_bytes(prev) == (char *)t->data;
      backward &= (char *)t->data + adj_tensor_bytes(t) == (char *)prev->data;
    } else {
      first = t;
    }
    prev = t;
  }
  if (!first) {
    k->data = r->empty;
    return ADJ_SUCCESS;
  }
  if (forward || backward) {
    k->data = forward ? first->data : prev->data;
    return ADJ_SUCCESS;
  }
  r->moved[b] = malloc((size_t)k->elements * esize);
  ADJ_CHECK(r->moved[b], ADJ_ERR_MEM, "gradient reducer: cannot allocate %lld bytes for bucket %d",
            (long long)(k->elements * (int64_t)esize), b);
  char *at = r->moved[b];
  for (int i = k->first; i < k->first + k->count; i++) {
    adj_tensor *t = r->tensors[i], moved;
    if (!adj_tensor_volume(t)) continue;
    ADJ_CALL(adj_tensor_view(&moved, t->dtype, t->rank, t->shape, at));
    memcpy(at, t->data, adj_tensor_bytes(t));
    at += adj_tensor_bytes(t);
    adj_tensor_destroy(t);
    *t = moved;
  }
  k->data = r->moved[b];
  return ADJ_SUCCESS;
}

/* Checks every rank makes alike from the shared arguments. */
static int reducer_validate(const adj_gradient_reducer_config *c) {
  ADJ_CHECK(c, ADJ_ERR_ARG, "gradient reducer: configuration is NULL");
  ADJ_CHECK(adj_dtype_valid(c->dtype), ADJ_ERR_DTYPE, "gradient reducer: invalid dtype %d", (int)c->dtype);
  ADJ_CHECK(c->partition, ADJ_ERR_ARG, "gradient reducer: partition is NULL");
  ADJ_CHECK(c->n >= 0, ADJ_ERR_ARG, "gradient reducer: negative tensor count %d", c->n);
  ADJ_CHECK(c->n == 0 || c->tensors, ADJ_ERR_ARG, "gradient reducer: tensors is NULL for %d tensors", c->n);
  ADJ_CHECK(c->bucket_bytes >= 0, ADJ_ERR_ARG,
            "gradient reducer: bucket cap %lld bytes is negative (0 means one bucket per tensor)",
            (long long)c->bucket_bytes);
  ADJ_CHECK(c->first_bucket_bytes >= 0, ADJ_ERR_ARG,
            "gradient reducer: first bucket cap %lld bytes is negative (0 means one tensor)",
            (long long)c->first_bucket_bytes);
  int ndim = adj_partition_ndim(c->partition);
  ADJ_CHECK(c->ndims >= 0 && c->ndims <= ndim && (c->ndims == 0 || c->dims), ADJ_ERR_ARG,
            "gradient reducer: %d reduced dimensions for a partition of %d", c->ndims, ndim);
  for (int i = 0; i < c->ndims; i++)
    ADJ_CHECK(c->dims[i] >= 0 && c->dims[i] < ndim, ADJ_ERR_ARG,
              "gradient reducer: dimension %d is outside the partition's 0..%d", c->dims[i], ndim - 1);
  return ADJ_SUCCESS;
}

/* This worker's tensors: present and of the reducer's dtype (local). */
static int reducer_check_tensors(const adj_gradient_reducer_config *c) {
  for (int i = 0; i < c->n; i++) {
    ADJ_CHECK(c->tensors[i], ADJ_ERR_ARG, "gradient reducer: tensor %d is NULL", i);
    ADJ_CHECK(c->tensors[i]->dtype == c->dtype, ADJ_ERR_DTYPE, "gradient reducer: tensor %d holds %s, expected %s",
              i, adj_dtype_name(c->tensors[i]->dtype), adj_dtype_name(c->dtype));
  }
  return ADJ_SUCCESS;
}

/* The group: workers with equal coordinates on every dimension not reduced. */
static int reducer_group(adj_gradient_reducer *r, const adj_gradient_reducer_config *c) {
  const adj_partition *p = c->partition;
  MPI_Comm base = adj_partition_base_comm(p);
  int color = MPI_UNDEFINED, key = 0, base_rank;
  MPI_Comm_rank(base, &base_rank);
  if (adj_partition_active(p)) {
    bool reduced[ADJ_MAX_RANK] = {false};
    for (int i = 0; i < c->ndims; i++) reduced[c->dims[i]] = true;
    const int *shape = adj_partition_shape(p), *coords = adj_partition_coords(p);
    color = 0;
    for (int i = 0; i < adj_partition_ndim(p); i++)
      if (!reduced[i]) color = color * shape[i] + coords[i];
    key = adj_partition_index_of_rank(p, base_rank);
  }
  ADJ_CALL_MPI(MPI_Comm_split(base, color, key, &r->group));
  if (r->group == MPI_COMM_NULL) ADJ_CALL(adj_comm_dup(MPI_COMM_SELF, &r->group));
  MPI_Comm_size(r->group, &r->group_size);
  return ADJ_SUCCESS;
}

/* Members of a group must cut alike: equal bucket counts and sizes. */
static int reducer_check_cut(adj_gradient_reducer *r) {
  int64_t mine[4] = {r->nbuckets, -r->nbuckets, r->total, -r->total}, extreme[4];
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Iallreduce(mine, extreme, 4, MPI_INT64_T, MPI_MAX, r->group, &request));
  ADJ_CALL(adj_wait_all(1, &request, r->wait));
  ADJ_CHECK(extreme[0] == -extreme[1] && extreme[2] == -extreme[3], ADJ_ERR_SIZE,
            "gradient reducer: this worker holds %lld elements in %d buckets but a replica in its group holds "
            "%lld to %lld elements in %lld to %lld buckets (replicas must hold equal tensor shapes)",
            (long long)r->total, r->nbuckets, (long long)-extreme[3], (long long)extreme[2],
            (long long)-extreme[1], (long long)extreme[0]);
  return ADJ_SUCCESS;
}

static int reducer_make_ops(adj_gradient_reducer *r) {
  ADJ_CALL(adj_partition_create(r->group, 1, &r->group_size, r->group_size, NULL, &r->group_partition));
  int dim0 = 0;
  for (int b = 0; b < r->nbuckets; b++) {
    adj_bucket *k = &r->buckets[b];
    ADJ_CALL(adj_all_sum_reduce_create(r->dtype, r->group_partition, 1, &k->elements, 1, &dim0, &k->op));
    /* The reducer checked the shapes once; a per-post agreement would
     * synchronise the group at every bucket. */
    adj_op_set_checks(k->op, false);
    ADJ_CALL(adj_tensor_view(&k->view, r->dtype, 1, &k->elements, k->data));
  }
  return ADJ_SUCCESS;
}

/* ---- the operator face --------------------------------------------------------------------- */

static int reducer_face_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)direction;
  adj_gradient_reducer *r = op->impl;
  if (out->data != in->data) memcpy(out->data, in->data, adj_tensor_bytes(out));
  size_t esize = adj_dtype_size(r->dtype);
  for (int b = 0; b < r->nbuckets; b++) {
    adj_bucket *k = &r->buckets[b];
    ADJ_CALL(adj_tensor_view(&k->face_view, r->dtype, 1, &k->elements, (char *)out->data + k->offset * esize));
    ADJ_CALL(adj_op_begin(k->op, ADJ_FORWARD, &k->face_view, &k->face_view));
  }
  return ADJ_SUCCESS;
}

static int reducer_face_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)direction, (void)in, (void)out;
  adj_gradient_reducer *r = op->impl;
  int status = ADJ_SUCCESS;
  for (int b = 0; b < r->nbuckets; b++)
    if (adj_op_pending(r->buckets[b].op)) {
      int s = adj_op_end(r->buckets[b].op);
      if (!status) status = s;
    }
  return status;
}

static void reducer_round_reset(adj_gradient_reducer *r);

/* ---- the progress thread (ADJ_PROGRESS=thread) --------------------------------------------- */

static int reducer_test_posted(adj_gradient_reducer *r);

static void reducer_lock(adj_gradient_reducer *r) {
  if (r->threaded) pthread_mutex_lock(&r->lock);
}

static void reducer_unlock(adj_gradient_reducer *r) {
  if (r->threaded) pthread_mutex_unlock(&r->lock);
}

static bool reducer_outstanding(const adj_gradient_reducer *r) {
  for (int b = 0; b < r->next_post; b++)
    if (!r->buckets[b].done) return true;
  return false;
}

/* Sleeps on `posted` while nothing is in flight; otherwise tests the posted
 * buckets every PROGRESS_PERIOD_NS, releasing the lock between tests so the
 * caller's posts and pokes never wait long.  The period trades the core's
 * time taken from the caller's compute against how soon a transfer stage
 * (a rendezvous, the next segment of a pipelined all-reduce) is started. */
enum { PROGRESS_PERIOD_NS = 50000 };

static void *reducer_progress_main(void *arg) {
  adj_gradient_reducer *r = arg;
  pthread_mutex_lock(&r->lock);
  while (!r->stopping) {
    if (!reducer_outstanding(r) || r->progress_status) {
      pthread_cond_wait(&r->posted, &r->lock);
      continue;
    }
    r->progress_status = reducer_test_posted(r);
    pthread_mutex_unlock(&r->lock);
    nanosleep(&(struct timespec){0, PROGRESS_PERIOD_NS}, NULL);
    pthread_mutex_lock(&r->lock);
  }
  pthread_mutex_unlock(&r->lock);
  return NULL;
}

/* Starts the thread when ADJ_PROGRESS asks for it (adj_init then provided
 * MPI_THREAD_MULTIPLE; checked again here for a caller that started MPI). */
static int reducer_start_progress(adj_gradient_reducer *r) {
  adj_progress_mode mode;
  ADJ_CALL(adj_progress_mode_from_env(&mode));
  if (mode != ADJ_PROGRESS_THREAD) return ADJ_SUCCESS;
  int provided;
  MPI_Query_thread(&provided);
  ADJ_CHECK(provided == MPI_THREAD_MULTIPLE, ADJ_ERR_STATE,
            "gradient reducer: ADJ_PROGRESS=thread needs MPI_THREAD_MULTIPLE (MPI was started at level %d; "
            "start it with adj_init)", provided);
  ADJ_CHECK(pthread_mutex_init(&r->lock, NULL) == 0, ADJ_ERR_MEM, "gradient reducer: cannot make a mutex");
  if (pthread_cond_init(&r->posted, NULL) != 0) {
    pthread_mutex_destroy(&r->lock);
    return adj_error_set(ADJ_ERR_MEM, "gradient reducer: cannot make a condition variable");
  }
  if (pthread_create(&r->thread, NULL, reducer_progress_main, r) != 0) {
    pthread_cond_destroy(&r->posted);
    pthread_mutex_destroy(&r->lock);
    return adj_error_set(ADJ_ERR_MEM, "gradient reducer: cannot start the progress thread");
  }
  r->threaded = true;
  return ADJ_SUCCESS;
}

static void reducer_stop_progress(adj_gradient_reducer *r) {
  if (!r->threaded) return;
  pthread_mutex_lock(&r->lock);
  r->stopping = true;
  pthread_cond_signal(&r->posted);
  pthread_mutex_unlock(&r->lock);
  pthread_join(r->thread, NULL);
  pthread_cond_destroy(&r->posted);
  pthread_mutex_destroy(&r->lock);
  r->threaded = false;
}

/* ---- create / destroy ---------------------------------------------------------------------- */

static int reducer_build(adj_gradient_reducer *r, const adj_gradient_reducer_config *c) {
  ADJ_CALL(reducer_cut(r, c->first_bucket_bytes, c->bucket_bytes));
  for (int b = 0; b < r->nbuckets; b++) ADJ_CALL(reducer_place(r, b));
  return ADJ_SUCCESS;
}

int adj_gradient_reducer_create(const adj_gradient_reducer_config *c, adj_gradient_reducer **reducer) {
  ADJ_CHECK(reducer, ADJ_ERR_ARG, "gradient reducer: output pointer is NULL");
  *reducer = NULL;
  ADJ_CALL(reducer_validate(c));
  MPI_Comm base = adj_partition_base_comm(c->partition);
  adj_wait_policy policy = adj_partition_wait_policy(c->partition);
  int status = reducer_check_tensors(c);
  adj_gradient_reducer *r = status ? NULL : calloc(1, sizeof *r);
  if (!status && !r) status = adj_error_set(ADJ_ERR_MEM, "gradient reducer: out of memory");
  if (r) {
    *r = (adj_gradient_reducer){.dtype = c->dtype, .n = c->n, .group = MPI_COMM_NULL, .wait = policy,
                                .event = c->event, .event_ctx = c->event_ctx};
    r->tensors = malloc(((size_t)c->n + 1) * sizeof *r->tensors);
    if (!r->tensors) status = adj_error_set(ADJ_ERR_MEM, "gradient reducer: out of memory");
    else memcpy(r->tensors, c->tensors, (size_t)c->n * sizeof *r->tensors);
  }
  if (!status) status = reducer_build(r, c);
  status = adj_status_agree(base, status, policy);
  if (!status) status = adj_status_agree(base, reducer_group(r, c), policy);
  if (!status) status = adj_status_agree(r->group, reducer_check_cut(r), policy);
  if (!status) status = reducer_make_ops(r);
  if (!status) status = reducer_start_progress(r);
  status = adj_status_agree(base, status, policy);
  if (!status) {
    static const adj_op_methods methods = {reducer_face_begin, reducer_face_end, NULL};
    status = adj_op_alloc("gradient-reducer", base, c->dtype, 1, &r->total, 1, &r->total, &methods, r, &r->face);
  }
  if (status) {
    adj_gradient_reducer_destroy(&r);
    return status;
  }
  reducer_round_reset(r);
  *reducer = r;
  return ADJ_SUCCESS;
}

void adj_gradient_reducer_destroy(adj_gradient_reducer **reducer) {
  if (!reducer || !*reducer) return;
  adj_gradient_reducer *r = *reducer;
  *reducer = NULL;
  reducer_stop_progress(r);
  adj_op_destroy(&r->face);
  for (int b = 0; r->buckets && b < r->nbuckets; b++) {
    if (r->buckets[b].op && adj_op_pending(r->buckets[b].op)) adj_op_end(r->buckets[b].op);
    adj_op_destroy(&r->buckets[b].op);
    free(r->moved[b]);
  }
  adj_partition_destroy(&r->group_partition);
  if (r->group != MPI_COMM_NULL) MPI_Comm_free(&r->group);
  free(r->buckets), free(r->moved), free(r->bucket_of), free(r->ready), free(r->tensors);
  free(r);
}

/* ---- rounds -------------------------------------------------------------------------------- */

static int reducer_post(adj_gradient_reducer *r, int b) {
  adj_bucket *k = &r->buckets[b];
  ADJ_CALL(adj_op_begin(k->op, ADJ_FORWARD, &k->view, &k->view));
  k->posted = true;
  reducer_event(r, ADJ_REDUCER_POSTED, b);
  if (r->threaded) pthread_cond_signal(&r->posted);
  return ADJ_SUCCESS;
}

/* Posts buckets in index order while the next one is complete. */
static int reducer_post_ready(adj_gradient_reducer *r) {
  while (r->next_post < r->nbuckets && r->buckets[r->next_post].remaining == 0)
    ADJ_CALL(reducer_post(r, r->next_post++));
  return ADJ_SUCCESS;
}

static void reducer_round_reset(adj_gradient_reducer *r) {
  for (int b = 0; b < r->nbuckets; b++) {
    adj_bucket *k = &r->buckets[b];
    k->remaining = k->count;
    k->posted = k->done = false;
  }
  memset(r->ready, 0, (size_t)r->n * sizeof *r->ready);
  r->next_post = 0;
}

int adj_gradient_reducer_ready(adj_gradient_reducer *r, int index) {
  ADJ_CHECK(r, ADJ_ERR_ARG, "gradient reducer: reducer is NULL");
  ADJ_CHECK(index >= 0 && index < r->n, ADJ_ERR_ARG, "gradient reducer: tensor index %d is outside 0..%d", index,
            r->n - 1);
  ADJ_CHECK(!r->ready[index], ADJ_ERR_STATE, "gradient reducer: tensor %d marked final twice in one round", index);
  r->ready[index] = true;
  r->buckets[r->bucket_of[index]].remaining--;
  double start = MPI_Wtime();
  reducer_lock(r);
  int status = reducer_post_ready(r);
  reducer_unlock(r);
  r->progress_seconds += MPI_Wtime() - start;
  return status;
}

/* Tests the posted buckets in order and stops at the first still running:
 * one MPI_Test drives MPI's progress for every outstanding reduction, so
 * testing the later ones too would only add calls to each stage's backward. */
static int reducer_test_posted(adj_gradient_reducer *r) {
  int status = ADJ_SUCCESS;
  for (int b = 0; !status && b < r->next_post; b++) {
    adj_bucket *k = &r->buckets[b];
    if (k->done) continue;
    int done = 0;
    status = adj_op_test(k->op, &done);
    if (status || !done) break;
    k->done = true;
    reducer_event(r, ADJ_REDUCER_COMPLETED, b);
  }
  return status;
}

int adj_gradient_reducer_poke(adj_gradient_reducer *r) {
  ADJ_CHECK(r, ADJ_ERR_ARG, "gradient reducer: reducer is NULL");
  double start = MPI_Wtime();
  reducer_lock(r);
  int status = reducer_test_posted(r);
  if (!status) status = r->progress_status;
  reducer_unlock(r);
  r->progress_seconds += MPI_Wtime() - start;
  return status;
}

int adj_gradient_reducer_wait(adj_gradient_reducer *r) {
  ADJ_CHECK(r, ADJ_ERR_ARG, "gradient reducer: reducer is NULL");
  reducer_event(r, ADJ_REDUCER_WAIT_BEGIN, -1);
  double start = MPI_Wtime();
  reducer_lock(r);
  int status = r->progress_status;
  r->progress_status = ADJ_SUCCESS;
  while (!status && r->next_post < r->nbuckets) status = reducer_post(r, r->next_post++);
  for (int b = 0; b < r->nbuckets; b++) {
    adj_bucket *k = &r->buckets[b];
    if (!k->posted) continue;
    int s = adj_op_end(k->op);
    if (!status) status = s;
    if (!k->done) reducer_event(r, ADJ_REDUCER_COMPLETED, b);
  }
  r->wait_seconds += MPI_Wtime() - start;
  r->reductions++;
  reducer_round_reset(r);
  reducer_unlock(r);
  reducer_event(r, ADJ_REDUCER_WAIT_END, -1);
  return status;
}

/* ---- queries ------------------------------------------------------------------------------- */

int adj_gradient_reducer_buckets(const adj_gradient_reducer *r) { return r->nbuckets; }

int adj_gradient_reducer_bucket(const adj_gradient_reducer *r, int b, int *first, int *count, int64_t *bytes) {
  ADJ_CHECK(b >= 0 && b < r->nbuckets, ADJ_ERR_ARG, "gradient reducer: bucket %d is outside 0..%d", b,
            r->nbuckets - 1);
  if (first) *first = r->buckets[b].first;
  if (count) *count = r->buckets[b].count;
  if (bytes) *bytes = r->buckets[b].elements * (int64_t)adj_dtype_size(r->dtype);
  return ADJ_SUCCESS;
}

int adj_gradient_reducer_group_size(const adj_gradient_reducer *r) { return r->group_size; }

void adj_gradient_reducer_get_counters(const adj_gradient_reducer *r, adj_reducer_counters *c) {
  *c = (adj_reducer_counters){
      .reductions = r->reductions, .wait_seconds = r->wait_seconds, .progress_seconds = r->progress_seconds};
  for (int b = 0; b < r->nbuckets; b++) {
    adj_op_counters oc;
    adj_op_get_counters(r->buckets[b].op, &oc);
    c->bytes += oc.bytes_sent;
    c->messages += oc.messages_sent;
  }
  double q = r->group_size;
  c->logical_bytes = 2.0 * (q - 1.0) / q * (double)c->bytes;
}

void adj_gradient_reducer_reset_counters(adj_gradient_reducer *r) {
  r->reductions = 0;
  r->wait_seconds = r->progress_seconds = 0;
  for (int b = 0; b < r->nbuckets; b++) adj_op_reset_counters(r->buckets[b].op);
}

adj_op *adj_gradient_reducer_op(adj_gradient_reducer *r) { return r->face; }

/* ---- caps from text ------------------------------------------------------------------------ */

int adj_bucket_cap_parse(const char *text, int64_t *bytes) {
  ADJ_CHECK(text && bytes, ADJ_ERR_ARG, "bucket cap: text or result pointer is NULL");
  if (strcmp(text, "unlimited") == 0) {
    *bytes = ADJ_REDUCER_UNLIMITED;
    return ADJ_SUCCESS;
  }
  const char *s = text;
  while (isspace((unsigned char)*s)) s++;
  ADJ_CHECK(*s != '-', ADJ_ERR_ARG, "bucket cap '%s' is negative (give bytes >= 0, e.g. 0, 1M, 25MiB, unlimited)",
            text);
  ADJ_CHECK(isdigit((unsigned char)*s), ADJ_ERR_ARG,
            "bucket cap '%s' is not a number of bytes (e.g. 0, 1048576, 1M, 25MiB, unlimited)", text);
  errno = 0;
  char *end;
  unsigned long long value = strtoull(s, &end, 10);
  ADJ_CHECK(errno == 0, ADJ_ERR_ARG, "bucket cap '%s' is too large", text);
  int shift = 0;
  if (*end == 'K') shift = 10, end++;
  else if (*end == 'M') shift = 20, end++;
  else if (*end == 'G') shift = 30, end++;
  if (shift && strcmp(end, "iB") == 0) end += 2;
  else if (strcmp(end, "B") == 0) end++;
  ADJ_CHECK(*end == '\0', ADJ_ERR_ARG,
            "bucket cap '%s' is not a number of bytes: '%s' follows the digits (suffixes: K, M, G, KiB, MiB, GiB)",
            text, end);
  ADJ_CHECK(value <= (unsigned long long)(INT64_MAX >> shift), ADJ_ERR_ARG, "bucket cap '%s' is too large", text);
  *bytes = (int64_t)(value << shift);
  return ADJ_SUCCESS;
}
