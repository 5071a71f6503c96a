/* The training loop (see include/adjoin/train.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/agree.h"
#include "adjoin/checkpoint.h"
#include "adjoin/xent_layer.h"
#include "adjoin/threads.h"
#include "adjoin/train.h"
#include "agree_impl.h"
#include "error_impl.h"
#include "layer_impl.h"
#include "threads_impl.h"

struct adj_trainer {
  adj_trainer_config config;
  adj_layer *loss;         /* the network's last stage */
  MPI_Comm comm;           /* every rank of every replica (the network's without replicas) */
  int rank;                /* in the network's communicator */
  int64_t batch_size;      /* the network's batch */
  int64_t global_batch;    /* batch_size x replicas x micro-batches */
  int replicas, replica, micro;
  adj_gradient_reducer *reducer; /* NULL without replicas */
  int nparams;
  bool reducing;           /* the backward under way marks gradients final */
  double t0;               /* trace clock origin */
  adj_tensor x;            /* (B, 1, rows, cols) on rank 0, zero volume elsewhere */
  adj_tensor y, dy;        /* the loss: [1] on rank 0, [0] elsewhere; dy = 1 */
  int64_t *labels;         /* (B) */
  uint8_t *label_bytes;    /* (B) as the data set stores them */
  int64_t *indices;        /* (B) sample indices of an evaluation batch */
  int64_t *order;          /* (N) the current epoch's order of the training set */
  adj_rng *rng;            /* shuffling generator; each epoch's draw advances it */
  adj_rng *epoch_rng;      /* the generator as it was when the current epoch began */
  void *rng_buffer;        /* one generator state, for copies between the two */
  bool order_drawn;        /* order holds the current epoch's permutation */
  int64_t epoch, batch;    /* epochs completed; batches done in the current one */
  double last_loss;        /* rank 0: the loss of the last training step */
  bool loss_pending;       /* last_loss not yet checked for being finite */
};

static int trainer_copy_rng(adj_trainer *t, adj_rng *dst, const adj_rng *src) {
  adj_rng_state_save(src, t->rng_buffer);
  return adj_rng_state_load(dst, t->rng_buffer, adj_rng_state_size(src));
}

/* ---- data parallelism: hook, trace ---------------------------------------------------------- */

static void trainer_trace(const adj_trainer *t, const char *event, int64_t arg) {
  if (t->config.trace) fprintf(t->config.trace, "%.9f %s %lld\n", MPI_Wtime() - t->t0, event, (long long)arg);
}

/* A span on the timeline, when there is one: opened with a name, closed. */
static void trainer_span(const adj_trainer *t, int track, const char *name, int64_t arg) {
  if (!t->config.timeline) return;
  if (name) adj_trace_begin(t->config.timeline, track, name, arg);
  else adj_trace_end(t->config.timeline, track);
}

static void trainer_reducer_event(void *ctx, adj_reducer_event event, int bucket) {
  static const char *const names[] = {"bucket_posted", "bucket_completed", "wait_begin", "wait_end"};
  trainer_trace(ctx, names[event], bucket);
  bool opens = event == ADJ_REDUCER_POSTED || event == ADJ_REDUCER_WAIT_BEGIN;
  int track = bucket < 0 ? ADJ_TRACE_REDUCER : ADJ_TRACE_BUCKET + bucket;
  trainer_span(ctx, track, opens ? (bucket < 0 ? "reduce wait" : "bucket") : NULL, bucket);
}

/* After a stage's backward its parameters' gradients are final: mark them
 * (the reducer lists them last parameter first) and poke the reductions. */
static int trainer_backward_hook(void *ctx, int index, adj_backward_event event) {
  adj_trainer *t = ctx;
  trainer_trace(t, event == ADJ_BACKWARD_BEGIN ? "backward_begin" : "backward_end", index);
  trainer_span(t, ADJ_TRACE_COMPUTE,
               event == ADJ_BACKWARD_BEGIN ? adj_layer_name(adj_network_layer(t->config.network, index)) : NULL, index);
  if (event != ADJ_BACKWARD_END || !t->reducing) return ADJ_SUCCESS;
  int first, count;
  ADJ_CALL(adj_network_stage_parameters(t->config.network, index, &first, &count));
  for (int k = first; k < first + count; k++) ADJ_CALL(adj_gradient_reducer_ready(t->reducer, t->nparams - 1 - k));
  return adj_gradient_reducer_poke(t->reducer);
}

/* Replicas start from replica 0's parameters (or must already agree), and a
 * reducer over dimension 0 of the replica grid gets every gradient, last
 * parameter first. */
static int trainer_replicas(adj_trainer *t) {
  const adj_trainer_config *c = &t->config;
  if (c->require_equal_start) ADJ_CALL(adj_replicas_check_sync(c->replicas, c->network, NULL));
  else ADJ_CALL(adj_replicas_broadcast_parameters(c->replicas, c->network, 0));
  t->nparams = adj_layer_parameter_count(c->network);
  adj_tensor **grads = calloc((size_t)t->nparams + 1, sizeof *grads);
  int status = grads ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "trainer: out of memory");
  status = adj_status_agree(t->comm, status, ADJ_WAIT_YIELD);
  if (status) {
    free(grads);
    return status;
  }
  for (int k = 0; k < t->nparams; k++) grads[t->nparams - 1 - k] = &adj_layer_parameter(c->network, k)->grad;
  const int64_t caps[2] = {ADJ_REDUCER_DEFAULT_FIRST_BUCKET_BYTES, ADJ_REDUCER_DEFAULT_BUCKET_BYTES};
  const int64_t *cap = c->bucket_caps ? c->bucket_caps : caps;
  status = adj_gradient_reducer_create(
      &(adj_gradient_reducer_config){.dtype = adj_layer_dtype(c->network), .partition = adj_replicas_partition(c->replicas),
                                     .ndims = 1, .dims = (const int[]){0}, .n = t->nparams, .tensors = grads,
                                     .first_bucket_bytes = cap[0], .bucket_bytes = cap[1],
                                     .event = trainer_reducer_event, .event_ctx = t},
      &t->reducer);
  free(grads);
  ADJ_CALL(status);
  return adj_network_set_backward_hook(c->network, trainer_backward_hook, t);
}

/* ---- creation ------------------------------------------------------------------------------- */

/* Checks every rank can make alike: a loss stage, input matching the images. */
static int trainer_check(const adj_trainer_config *c, adj_layer **loss, int64_t *batch) {
  ADJ_CHECK(c && c->network && c->optimizer && c->train, ADJ_ERR_ARG, "trainer: network, optimizer and data are required");
  ADJ_CHECK(c->micro_batches >= 0, ADJ_ERR_ARG, "trainer: %d micro-batches (need 1 or more; 0 means 1)",
            c->micro_batches);
  *loss = adj_network_layer(c->network, adj_network_depth(c->network) - 1);
  ADJ_CALL(adj_xent_layer_set_labels(*loss, NULL, 0));
  const adj_decomposition *in = adj_layer_input_layout(adj_network_layer(c->network, 0));
  ADJ_CHECK(in && adj_decomposition_rank(in) == 4, ADJ_ERR_SIZE, "trainer: the network does not take (B, 1, rows, cols)");
  const int64_t *shape = adj_decomposition_global_shape(in);
  ADJ_CHECK(shape[1] == 1 && shape[2] == c->train->rows && shape[3] == c->train->cols, ADJ_ERR_SIZE,
            "trainer: the network takes (B, %lld, %lld, %lld) but the images are (1, %lld, %lld)", (long long)shape[1],
            (long long)shape[2], (long long)shape[3], (long long)c->train->rows, (long long)c->train->cols);
  *batch = shape[0];
  return ADJ_SUCCESS;
}

/* Buffers; local, so the caller agrees on the outcome. */
static int trainer_buffers(adj_trainer *t) {
  ADJ_CALL(adj_layer_create_input(t->config.network, &t->x));
  ADJ_CALL(adj_layer_create_output(t->config.network, &t->y));
  ADJ_CALL(adj_layer_create_output(t->config.network, &t->dy));
  if (adj_tensor_volume(&t->dy)) adj_tensor_set(&t->dy, 0, 1.0);
  size_t b = (size_t)t->batch_size;
  t->labels = calloc(b, sizeof *t->labels);
  t->label_bytes = calloc(b, 1);
  t->indices = calloc(b, sizeof *t->indices);
  t->order = calloc((size_t)t->config.train->count + 1, sizeof *t->order);
  ADJ_CHECK(t->labels && t->label_bytes && t->indices && t->order, ADJ_ERR_MEM, "trainer: out of memory");
  ADJ_CALL(adj_rng_create(t->config.seed, &t->rng));
  ADJ_CALL(adj_rng_create(t->config.seed, &t->epoch_rng));
  t->rng_buffer = malloc(adj_rng_state_size(t->rng));
  ADJ_CHECK(t->rng_buffer, ADJ_ERR_MEM, "trainer: out of memory");
  return ADJ_SUCCESS;
}

int adj_trainer_create(const adj_trainer_config *c, adj_trainer **trainer) {
  ADJ_CHECK(trainer, ADJ_ERR_ARG, "trainer: output trainer pointer is NULL");
  *trainer = NULL;
  adj_layer *loss = NULL;
  int64_t batch = 0;
  MPI_Comm comm = c && c->replicas ? adj_replicas_comm(c->replicas) : c && c->network ? adj_layer_comm(c->network)
                                                                                       : MPI_COMM_WORLD;
  ADJ_CALL(adj_status_agree(comm, trainer_check(c, &loss, &batch), ADJ_WAIT_YIELD));
  adj_trainer *t = calloc(1, sizeof *t);
  ADJ_CALL(adj_status_agree(comm, t ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "trainer: out of memory"), ADJ_WAIT_YIELD));
  *t = (adj_trainer){.config = *c, .loss = loss, .comm = comm, .batch_size = batch, .replicas = 1,
                     .micro = c->micro_batches > 1 ? c->micro_batches : 1, .t0 = MPI_Wtime()};
  if (c->replicas) t->replicas = adj_replicas_count(c->replicas), t->replica = adj_replicas_index(c->replicas);
  t->global_batch = batch * t->replicas * t->micro;
  int status = c->global_batch >= 0 && c->global_batch <= t->global_batch
                   ? ADJ_SUCCESS
                   : adj_error_set(ADJ_ERR_ARG,
                                   "trainer: global batch %lld is outside 0..%lld (network batch %lld x %d replicas x "
                                   "%d micro-batches)",
                                   (long long)c->global_batch, (long long)t->global_batch, (long long)batch, t->replicas,
                                   t->micro);
  if (!status && c->global_batch) t->global_batch = c->global_batch;
  MPI_Comm_rank(adj_layer_comm(c->network), &t->rank);
  if (!status) status = trainer_buffers(t);
  status = adj_status_agree(comm, status, ADJ_WAIT_YIELD);
  if (!status && c->replicas) status = trainer_replicas(t);
  if (status) adj_trainer_destroy(&t);
  *trainer = t;
  return status;
}

adj_gradient_reducer *adj_trainer_reducer(adj_trainer *t) { return t->reducer; }

int adj_trainer_check_sync(adj_trainer *t, uint64_t *hash) {
  if (hash) *hash = 0;
  if (!t->config.replicas) return ADJ_SUCCESS;
  return adj_replicas_check_sync(t->config.replicas, t->config.network, hash);
}

void adj_trainer_destroy(adj_trainer **trainer) {
  if (!trainer || !*trainer) return;
  adj_trainer *t = *trainer;
  if (t->reducer) (void)adj_network_set_backward_hook(t->config.network, NULL, NULL);
  adj_gradient_reducer_destroy(&t->reducer);
  adj_tensor_destroy(&t->x), adj_tensor_destroy(&t->y), adj_tensor_destroy(&t->dy);
  free(t->labels), free(t->label_bytes), free(t->indices), free(t->order), free(t->rng_buffer);
  adj_rng_destroy(&t->rng), adj_rng_destroy(&t->epoch_rng);
  free(t);
  *trainer = NULL;
}

int64_t adj_trainer_batches_per_epoch(const adj_trainer *t) {
  return (t->config.train->count + t->global_batch - 1) / t->global_batch;
}
int64_t adj_trainer_epoch(const adj_trainer *t) { return t->epoch; }
int64_t adj_trainer_batch(const adj_trainer *t) { return t->batch; }

/* ---- batches ------------------------------------------------------------------------------- */

/* The trainer's agreements: point to point on the network's own
 * communicator; a reduction on the replicas' (the caller's communicator). */
static int trainer_agree(adj_trainer *t, int status) {
  return t->config.replicas ? adj_status_agree(t->comm, status, ADJ_WAIT_YIELD)
                            : adj_status_agree_private(t->comm, status, false, NULL, ADJ_WAIT_YIELD);
}

/* Rank 0: the last training step's loss must be finite.  Checked inside the
 * next agreement (trainer_fill, trainer_check_finite), so divergence costs no
 * collective of its own. */
static int trainer_check_loss(adj_trainer *t) {
  if (t->rank != 0 || !t->loss_pending) return ADJ_SUCCESS;
  t->loss_pending = false;
  ADJ_CHECK(isfinite(t->last_loss), ADJ_ERR_NUMERIC,
            "training diverged: the loss is %g after batch %lld of epoch %lld (try a lower learning rate)",
            t->last_loss, (long long)t->batch, (long long)t->epoch + 1);
  return ADJ_SUCCESS;
}

/* Every parameter block this worker holds is finite, and so is the last
 * loss; agreed.  Run at the end of each adj_trainer_run. */
static int trainer_check_finite(adj_trainer *t) {
  int status = trainer_check_loss(t);
  adj_layer *net = t->config.network;
  for (int i = 0; !status && i < adj_layer_parameter_count(net); i++) {
    const adj_parameter *p = adj_layer_parameter(net, i);
    int64_t n = adj_tensor_volume(&p->value);
    for (int64_t e = 0; e < n; e++)
      if (!isfinite(adj_tensor_get(&p->value, e))) {
        status = adj_error_set(ADJ_ERR_NUMERIC,
                               "training diverged: parameter %d ('%s') holds %g after batch %lld of epoch %lld (try "
                               "a lower learning rate)", i, p->name, adj_tensor_get(&p->value, e),
                               (long long)t->batch, (long long)t->epoch + 1);
        break;
      }
  }
  return trainer_agree(t, status);
}

/* Rank 0 copies `count` samples into the input, zeroes the padding rows and
 * hands the labels to the loss.  Local: trainer_fill agrees on it. */
static int trainer_fill_local(adj_trainer *t, const adj_dataset *data, const int64_t *indices, int64_t count) {
  int status = trainer_check_loss(t);
  if (t->rank == 0 && !status) {
    adj_tensor head = t->x;
    head.owns_data = false;
    head.shape[0] = count;
    size_t used = adj_tensor_bytes(&head);
    memset((char *)t->x.data + used, 0, adj_tensor_bytes(&t->x) - used);
    if (count) status = adj_dataset_batch(data, indices, count, &head, t->label_bytes);
    for (int64_t i = 0; i < count; i++) t->labels[i] = t->label_bytes[i];
    if (!status) status = adj_xent_layer_set_labels(t->loss, t->labels, count);
  }
  return status;
}

/* Agreed, so a bad index fails everywhere. */
static int trainer_fill(adj_trainer *t, const adj_dataset *data, const int64_t *indices, int64_t count) {
  return trainer_agree(t, trainer_fill_local(t, data, indices, count));
}

/* Adds the last forward's figures to stats (rank 0 holds them). */
static void trainer_tally(const adj_trainer *t, int64_t count, adj_train_stats *stats) {
  stats->loss += adj_xent_layer_loss(t->loss) * (double)count;
  stats->correct += adj_xent_layer_correct(t->loss);
  stats->samples += count;
  stats->batches++;
}

static void trainer_finish_stats(adj_train_stats *stats, double start) {
  stats->loss = stats->samples ? stats->loss / (double)stats->samples : 0.0;
  stats->seconds = MPI_Wtime() - start;
}

/* Start and length of share k of n items split k ways as evenly as possible
 * (the first n mod parts shares get one more). */
static void trainer_share(int64_t n, int64_t parts, int64_t k, int64_t *start, int64_t *length) {
  int64_t base = n / parts, extra = n % parts;
  *start = k * base + (k < extra ? k : extra);
  *length = base + (k < extra);
}

/* One micro-batch m of n samples (of the step's count): fill, forward, loss,
 * backward.  Three agreements: the fill's outcome rides on the forward's
 * argument check, the forward's on the backward's, and the backward's is
 * agreed at the end, before the optimizer uses the gradients.  Replicas agree
 * on the fill across all of them, since a replica that stopped alone would
 * leave the others waiting in the gradient reduction. */
static int trainer_pass(adj_trainer *t, const int64_t *indices, int64_t n, int64_t count, int m, double *loss_sum,
                        int64_t *correct) {
  adj_layer *net = t->config.network;
  int status = trainer_fill_local(t, t->config.train, indices, n);
  if (t->config.replicas) ADJ_CALL(adj_status_agree(t->comm, status, ADJ_WAIT_YIELD));
  if (adj_tensor_volume(&t->dy)) adj_tensor_set(&t->dy, 0, (double)n / (double)count);
  trainer_trace(t, "forward", m);
  bool agreed;
  trainer_span(t, ADJ_TRACE_COMPUTE, "forward", m);
  status = adj_layer_forward_open(status, net, &t->x, &t->y, &agreed);
  trainer_span(t, ADJ_TRACE_COMPUTE, NULL, m);
  if (agreed && status) return status;
  *loss_sum += adj_xent_layer_loss(t->loss) * (double)n;
  *correct += adj_xent_layer_correct(t->loss);
  t->reducing = t->reducer && m == t->micro - 1 && !t->config.reduce_after_backward;
  trainer_span(t, ADJ_TRACE_COMPUTE, "backward", m);
  status = adj_layer_backward_open(status, net, &t->dy, NULL, &agreed);
  trainer_span(t, ADJ_TRACE_COMPUTE, NULL, m);
  t->reducing = false;
  return agreed ? status : trainer_agree(t, status);
}

/* The step's passes, the reductions' wait and the optimizer. */
static int trainer_step_passes(adj_trainer *t, const int64_t *order, int64_t count, double *loss_sum,
                               int64_t *correct) {
  adj_layer *net = t->config.network;
  adj_layer_zero_grad(net);
  int64_t share_start, share;
  trainer_share(count, t->replicas, t->replica, &share_start, &share);
  for (int m = 0; m < t->micro; m++) {
    int64_t start, n;
    trainer_share(share, t->micro, m, &start, &n);
    ADJ_CALL(trainer_pass(t, order + share_start + start, n, count, m, loss_sum, correct));
  }
  if (t->reducer) ADJ_CALL(adj_gradient_reducer_wait(t->reducer));
  trainer_trace(t, "step", 0);
  trainer_span(t, ADJ_TRACE_COMPUTE, "optimizer", 0);
  int status = adj_optimizer_step(t->config.optimizer);
  trainer_span(t, ADJ_TRACE_COMPUTE, NULL, 0);
  return status;
}

/* One optimizer step on the global batch order[0..count): this replica's
 * share in micro-batches, each one's loss scaled by its share of the global
 * count (so the replicas' summed gradients are the global mean's), the
 * reductions posted during the last micro-batch's backward, one wait, the
 * step.  Adds the batch's loss sum and correct count (this replica's root). */
static int trainer_step(adj_trainer *t, const int64_t *order, int64_t count, double *loss_sum, int64_t *correct) {
  trainer_span(t, ADJ_TRACE_COMPUTE, "step", t->batch);
  int status = trainer_step_passes(t, order, count, loss_sum, correct);
  trainer_span(t, ADJ_TRACE_COMPUTE, NULL, t->batch);
  return status;
}

/* The step's loss sum and correct count over the replicas' roots. */
static int trainer_reduce_stats(adj_trainer *t, double *loss_sum, int64_t *correct) {
  if (!t->config.replicas) return ADJ_SUCCESS;
  double mine[2] = {*loss_sum, (double)*correct}, sum[2];
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Iallreduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, adj_replicas_across_comm(t->config.replicas), &request));
  ADJ_CALL(adj_wait_all(1, &request, ADJ_WAIT_YIELD));
  *loss_sum = sum[0];
  *correct = (int64_t)sum[1];
  return ADJ_SUCCESS;
}

/* Remembers the generator, then draws the epoch's order from it. */
static int trainer_begin_epoch(adj_trainer *t) {
  ADJ_CALL(trainer_copy_rng(t, t->epoch_rng, t->rng));
  adj_shuffle_indices(t->rng, t->config.train->count, t->order);
  t->order_drawn = true;
  return ADJ_SUCCESS;
}

int adj_trainer_run(adj_trainer *t, int64_t max_batches, adj_train_progress *progress, void *ctx,
                    adj_train_stats *stats) {
  *stats = (adj_train_stats){0};
  double start = MPI_Wtime();
  if (!t->order_drawn) ADJ_CALL(trainer_begin_epoch(t));
  int64_t batches = adj_trainer_batches_per_epoch(t), n = t->config.train->count;
  adj_reducer_counters before = {0}, after = {0};
  if (t->reducer) adj_gradient_reducer_get_counters(t->reducer, &before);
  for (int64_t done = 0; t->batch < batches && (max_batches < 0 || done < max_batches); done++) {
    int64_t first = t->batch * t->global_batch, count = n - first < t->global_batch ? n - first : t->global_batch;
    double loss_sum = 0;
    int64_t correct = 0;
    ADJ_CALL(trainer_step(t, t->order + first, count, &loss_sum, &correct));
    ADJ_CALL(trainer_reduce_stats(t, &loss_sum, &correct));
    stats->loss += loss_sum;
    stats->correct += correct;
    stats->samples += count;
    stats->batches++;
    t->batch++;
    if (t->rank == 0) t->last_loss = loss_sum / (double)count, t->loss_pending = true;
    if (progress) progress(ctx, t->batch, batches, t->rank == 0 && t->replica == 0 ? loss_sum / (double)count : 0.0);
  }
  if (t->reducer) {
    adj_gradient_reducer_get_counters(t->reducer, &after);
    stats->reduced_bytes = after.bytes - before.bytes;
    stats->reduced_messages = after.messages - before.messages;
    stats->reduce_wait_seconds = after.wait_seconds - before.wait_seconds;
    stats->reduce_progress_seconds = after.progress_seconds - before.progress_seconds;
  }
  ADJ_CALL(trainer_check_finite(t));
  if (t->batch == batches) t->epoch++, t->batch = 0, t->order_drawn = false;
  trainer_finish_stats(stats, start);
  return ADJ_SUCCESS;
}

static int trainer_evaluate_batches(adj_trainer *t, const adj_dataset *data, adj_train_stats *stats) {
  for (int64_t first = 0; first < data->count; first += t->batch_size) {
    int64_t count = data->count - first < t->batch_size ? data->count - first : t->batch_size;
    for (int64_t i = 0; i < count; i++) t->indices[i] = first + i;
    ADJ_CALL(trainer_fill(t, data, t->indices, count));
    ADJ_CALL(adj_layer_forward(t->config.network, &t->x, &t->y));
    trainer_tally(t, count, stats);
  }
  return ADJ_SUCCESS;
}

/* In evaluation mode: batch norm uses its running statistics and leaves them
 * alone, so evaluating never changes what training continues from. */
int adj_trainer_evaluate(adj_trainer *t, const adj_dataset *data, adj_train_stats *stats) {
  *stats = (adj_train_stats){0};
  double start = MPI_Wtime();
  ADJ_CALL(adj_network_set_training(t->config.network, false));
  int status = trainer_evaluate_batches(t, data, stats);
  int restored = adj_network_set_training(t->config.network, true);
  ADJ_CALL(status ? status : restored);
  trainer_finish_stats(stats, start);
  return ADJ_SUCCESS;
}

/* ---- checkpoints --------------------------------------------------------------------------- */

int adj_trainer_save(adj_trainer *t, const char *path) {
  /* Mid-epoch, the epoch's order must be redrawn on resume: save the
   * generator as the epoch found it.  At a boundary it is the live one. */
  const adj_rng *rng = t->order_drawn ? t->epoch_rng : t->rng;
  /* The recorded batch is the global one (--batch), so a checkpoint resumes
   * under any layout with the same global batch.  Replicas hold the same
   * state: replica 0 writes it. */
  adj_checkpoint_position position = {.epoch = t->epoch, .batch = t->batch, .seed = t->config.seed,
                                      .batch_size = t->global_batch};
  int status = t->replica == 0 ? adj_checkpoint_save(path, t->config.network, t->config.optimizer, rng, &position)
                               : ADJ_SUCCESS;
  return t->config.replicas ? adj_status_agree(t->comm, status, ADJ_WAIT_YIELD) : status;
}

int adj_trainer_load(adj_trainer *t, const char *path) {
  ADJ_CHECK(t && path, ADJ_ERR_ARG, "adj_trainer_load: trainer and path are required");
  /* The position is checked with the rest of the file, before anything is
   * restored, so a refused file leaves the trainer as it was. */
  adj_checkpoint_position position;
  adj_checkpoint_expect expect = {.batches_per_epoch = adj_trainer_batches_per_epoch(t), .batch_size = t->global_batch};
  int status = adj_checkpoint_load_expect(path, t->config.network, t->config.optimizer, t->epoch_rng, &position, &expect);
  if (t->config.replicas) status = adj_status_agree(t->comm, status, ADJ_WAIT_YIELD);
  ADJ_CALL(status);
  t->epoch = position.epoch;
  t->batch = position.batch;
  t->order_drawn = false;
  return trainer_copy_rng(t, t->rng, t->epoch_rng);
}

/* ---- threads -------------------------------------------------------------------------------- */

int adj_train_share_cores(MPI_Comm comm) {
  MPI_Comm node;
  int on_node = 1;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores > on_node ? (int)(cores / on_node) : 1;
  adj_blas_threads_share(threads);
  adj_threads_share_node(on_node);
  return adj_threads_get();
}
