/* The training loop (see include/adjoin/train.h). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/agree.h"
#include "adjoin/checkpoint.h"
#include "adjoin/loss_layers.h"
#include "adjoin/xent_layer.h"
#include "adjoin/threads.h"
#include "adjoin/train.h"
#include "agree_impl.h"
#include "error_impl.h"
#include "layer_impl.h"
#include "threads_impl.h"

/* What the network's loss layer takes as targets, and where. */
typedef enum trainer_loss {
  TRAINER_XENT,        /* xent_layer.h: the batch's labels on its root */
  TRAINER_NLL,         /* loss_layers.h NLL: the labels of each worker's batch rows */
  TRAINER_ELEMENTWISE, /* the other losses: a block of the target array on each worker */
} trainer_loss;

/* A score and its class, for MPI_MAXLOC (MPI_DOUBLE_INT). */
typedef struct trainer_argmax {
  double score;
  int index;
} trainer_argmax;

struct adj_trainer {
  adj_trainer_config config;
  adj_layer *loss;         /* the network's last stage */
  trainer_loss loss_kind;
  bool summed;             /* the loss is a sum over samples (reduction sum), not a mean */
  int loss_rank;           /* cross-entropy: the rank of the network's communicator holding the loss */
  int64_t classes;         /* classification: C */
  adj_box input_box;       /* this rank's block of the network's input */
  adj_box loss_box;        /* this rank's block of the loss layer's input */
  MPI_Comm comm;           /* every rank of every replica (the network's without replicas) */
  MPI_Comm net_comm;       /* the network's */
  MPI_Comm figures_comm;   /* a duplicate of it for the figures' messages, apart from the user's */
  int rank;                /* in the network's communicator */
  int64_t batch_size;      /* the network's batch */
  int64_t global_batch;    /* batch_size x replicas x micro-batches */
  int replicas, replica, micro;
  adj_gradient_reducer *reducer; /* NULL without replicas */
  bool reducing;           /* the backward under way marks gradients final */
  double t0;               /* trace clock origin */
  adj_tensor x;            /* this rank's block of the input */
  adj_tensor y, dy;        /* the loss: [1] on the loss layer's root, [0] elsewhere; dy = 1 */
  adj_tensor target;       /* elementwise losses: this rank's block of the targets */
  int64_t *labels;         /* cross-entropy: the batch's (B) on the root; NLL: this rank's batch rows */
  trainer_argmax *argmax;  /* NLL: each sample's largest score and its class (B) */
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
  return adj_replicas_reducer_stage_done(t->config.network, t->reducer, index);
}

/* Replicas start from replica 0's parameters (or must already agree), and a
 * reducer over dimension 0 of the replica grid gets every gradient, last
 * parameter first. */
static int trainer_replicas(adj_trainer *t) {
  const adj_trainer_config *c = &t->config;
  if (c->require_equal_start) ADJ_CALL(adj_replicas_check_sync(c->replicas, c->network, NULL));
  else ADJ_CALL(adj_replicas_broadcast_parameters(c->replicas, c->network, 0));
  ADJ_CALL(adj_replicas_reducer_create(c->replicas, c->network, c->bucket_caps, trainer_reducer_event, t,
                                       &t->reducer));
  return adj_network_set_backward_hook(c->network, trainer_backward_hook, t);
}

/* ---- creation ------------------------------------------------------------------------------- */

/* The loss layer: cross-entropy, or a reduced loss of loss_layers.h. */
static int trainer_find_loss(adj_trainer *t) {
  adj_layer *net = t->config.network;
  t->loss = adj_layer_is_network(net) ? adj_network_layer(net, adj_network_depth(net) - 1) : NULL;
  ADJ_CHECK(t->loss, ADJ_ERR_ARG, "trainer: '%s' is not a network of layers ending in a loss", adj_layer_name(net));
  const adj_decomposition *in = adj_layer_input_layout(t->loss);
  ADJ_CHECK(in && adj_decomposition_rank(in) >= 1, ADJ_ERR_ARG, "trainer: the loss layer '%s' has no batched input",
            adj_layer_name(t->loss));
  t->loss_box = adj_decomposition_local_block(in);
  t->classes = adj_decomposition_rank(in) == 2 ? adj_decomposition_global_shape(in)[1] : 0;
  if (adj_xent_layer_set_labels(t->loss, NULL, 0) == ADJ_SUCCESS) {
    t->loss_kind = TRAINER_XENT;
    return ADJ_SUCCESS;
  }
  adj_loss_kind kind;
  adj_loss_reduction reduction;
  ADJ_CHECK(!adj_loss_layer_describe(t->loss, &kind, &reduction), ADJ_ERR_ARG,
            "trainer: the network's last stage '%s' is not a loss layer (xent_layer.h or loss_layers.h)",
            adj_layer_name(t->loss));
  ADJ_CHECK(reduction != ADJ_LOSS_NONE, ADJ_ERR_ARG,
            "trainer: the loss layer '%s' keeps one loss per element (reduction none); training needs one number "
            "(mean, sum or batchmean)", adj_layer_name(t->loss));
  t->loss_kind = kind == ADJ_LOSS_NLL ? TRAINER_NLL : TRAINER_ELEMENTWISE;
  t->summed = reduction == ADJ_LOSS_SUM;
  return ADJ_SUCCESS;
}

/* Shapes equal but for extents of 1. */
static bool trainer_same_squeezed(int ra, const int64_t *a, int rb, const int64_t *b) {
  int i = 0, j = 0;
  for (;;) {
    while (i < ra && a[i] == 1) i++;
    while (j < rb && b[j] == 1) j++;
    if (i == ra || j == rb) return i == ra && j == rb;
    if (a[i++] != b[j++]) return false;
  }
}

/* A layout's sample shape (its shape without the batch), which the data's
 * must equal but for extents of 1; *rank and *want return it. */
static int trainer_check_samples(const adj_decomposition *layout, int have_rank, const int64_t *have,
                                 const char *whose, const char *source, int *rank, const int64_t **want) {
  *rank = adj_decomposition_rank(layout) - 1;
  *want = adj_decomposition_global_shape(layout) + 1;
  char have_text[96], want_text[96];
  ADJ_CHECK(trainer_same_squeezed(*rank, *want, have_rank, have), ADJ_ERR_SIZE,
            "trainer: %s samples of shape %s but the %s are %s", whose,
            adj_shape_format(want_text, sizeof want_text, *rank, *want), source,
            adj_shape_format(have_text, sizeof have_text, have_rank, have));
  return ADJ_SUCCESS;
}

/* The samples of `data` read as the network's input, shape for shape. */
static int trainer_fit_inputs(const adj_trainer *t, adj_dataset *data) {
  int rank;
  const int64_t *want;
  ADJ_CALL(trainer_check_samples(adj_layer_input_layout(t->config.network), adj_dataset_input_rank(data),
                                 adj_dataset_input_shape(data), "the network takes", adj_dataset_describe_inputs(data),
                                 &rank, &want));
  return adj_dataset_set_input_shape(data, rank, want);
}

/* The targets: labels of at most C classes, or arrays shaped like one
 * sample of the loss's input. */
static int trainer_fit_targets(const adj_trainer *t, adj_dataset *data) {
  const char *loss = adj_layer_name(t->loss);
  if (t->loss_kind != TRAINER_ELEMENTWISE) {
    ADJ_CHECK(adj_dataset_classes(data) > 0, ADJ_ERR_ARG,
              "trainer: the loss '%s' takes class labels but the %s are arrays (open the set with n_classes > 0)",
              loss, adj_dataset_describe_targets(data));
    ADJ_CHECK(adj_dataset_classes(data) <= t->classes, ADJ_ERR_ARG,
              "trainer: the data set has %d classes but the loss '%s' scores %lld", adj_dataset_classes(data), loss,
              (long long)t->classes);
    return ADJ_SUCCESS;
  }
  ADJ_CHECK(adj_dataset_classes(data) == 0, ADJ_ERR_ARG,
            "trainer: the loss '%s' compares with target arrays but the %s are labels (open the set with n_classes 0)",
            loss, adj_dataset_describe_targets(data));
  int rank;
  const int64_t *want;
  char whose[128];
  snprintf(whose, sizeof whose, "the loss '%s' compares", loss);
  ADJ_CALL(trainer_check_samples(adj_layer_input_layout(t->loss), adj_dataset_target_rank(data),
                                 adj_dataset_target_shape(data), whose, adj_dataset_describe_targets(data), &rank,
                                 &want));
  return adj_dataset_set_target_shape(data, rank, want);
}

static int trainer_fit_data(const adj_trainer *t, adj_dataset *data) {
  ADJ_CHECK(data, ADJ_ERR_ARG, "trainer: no data set");
  ADJ_CALL(trainer_fit_inputs(t, data));
  return trainer_fit_targets(t, data);
}

/* Checks every rank can make alike: a loss stage, data that fit. */
static int trainer_check(adj_trainer *t) {
  const adj_trainer_config *c = &t->config;
  ADJ_CHECK(c->network && c->optimizer && c->train, ADJ_ERR_ARG, "trainer: network, optimizer and data are required");
  ADJ_CHECK(c->micro_batches >= 0, ADJ_ERR_ARG, "trainer: %d micro-batches (need 1 or more; 0 means 1)",
            c->micro_batches);
  const adj_decomposition *in = adj_layer_input_layout(c->network);
  ADJ_CHECK(in && adj_decomposition_rank(in) >= 1, ADJ_ERR_SIZE, "trainer: the network '%s' has no batched input",
            adj_layer_name(c->network));
  t->input_box = adj_decomposition_local_block(in);
  t->batch_size = adj_decomposition_global_shape(in)[0];
  ADJ_CALL(trainer_find_loss(t));
  const int64_t loss_batch = adj_decomposition_global_shape(adj_layer_input_layout(t->loss))[0];
  ADJ_CHECK(loss_batch == t->batch_size, ADJ_ERR_SIZE, "trainer: the network takes batches of %lld but its loss '%s' "
            "batches of %lld", (long long)t->batch_size, adj_layer_name(t->loss), (long long)loss_batch);
  return trainer_fit_data(t, c->train);
}

/* Buffers; local, so the caller agrees on the outcome. */
static int trainer_buffers(adj_trainer *t) {
  ADJ_CALL(adj_layer_create_input(t->config.network, &t->x));
  ADJ_CALL(adj_layer_create_output(t->config.network, &t->y));
  ADJ_CALL(adj_layer_create_output(t->config.network, &t->dy));
  if (adj_tensor_volume(&t->dy)) adj_tensor_set(&t->dy, 0, 1.0);
  if (t->loss_kind == TRAINER_ELEMENTWISE)
    ADJ_CALL(adj_tensor_create(&t->target, adj_layer_dtype(t->loss), t->loss_box.rank, t->loss_box.extent));
  size_t b = (size_t)t->batch_size;
  t->labels = calloc(b + 1, sizeof *t->labels);
  t->argmax = t->loss_kind == TRAINER_NLL ? calloc(b + 1, sizeof *t->argmax) : NULL;
  t->indices = calloc(b, sizeof *t->indices);
  t->order = calloc((size_t)adj_dataset_count(t->config.train) + 1, sizeof *t->order);
  ADJ_CHECK(t->labels && t->indices && t->order && (t->argmax || t->loss_kind != TRAINER_NLL), ADJ_ERR_MEM,
            "trainer: out of memory");
  ADJ_CALL(adj_rng_create(t->config.seed, &t->rng));
  ADJ_CALL(adj_rng_create(t->config.seed, &t->epoch_rng));
  t->rng_buffer = malloc(adj_rng_state_size(t->rng));
  ADJ_CHECK(t->rng_buffer, ADJ_ERR_MEM, "trainer: out of memory");
  return ADJ_SUCCESS;
}

/* The figures' communicator, and which of its ranks holds the loss (its
 * output block is [1]), so the cross-entropy's figures can be sent to rank 0. */
static int trainer_find_loss_rank(adj_trainer *t) {
  ADJ_CALL_MPI(MPI_Comm_dup(t->net_comm, &t->figures_comm));
  int mine = adj_tensor_volume(&t->y) == 1 ? t->rank : -1;
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Iallreduce(&mine, &t->loss_rank, 1, MPI_INT, MPI_MAX, t->figures_comm, &request));
  return adj_wait_all(1, &request, ADJ_WAIT_YIELD);
}

int adj_trainer_create(const adj_trainer_config *c, adj_trainer **trainer) {
  ADJ_CHECK(trainer, ADJ_ERR_ARG, "trainer: output trainer pointer is NULL");
  *trainer = NULL;
  MPI_Comm comm = c && c->replicas ? adj_replicas_comm(c->replicas) : c && c->network ? adj_layer_comm(c->network)
                                                                                       : MPI_COMM_WORLD;
  adj_trainer *t = calloc(1, sizeof *t);
  int status = !c ? adj_error_set(ADJ_ERR_ARG, "trainer: configuration is NULL")
               : t ? ADJ_SUCCESS
                   : adj_error_set(ADJ_ERR_MEM, "trainer: out of memory");
  if (!status) *t = (adj_trainer){.config = *c, .comm = comm, .figures_comm = MPI_COMM_NULL, .replicas = 1,
                                  .t0 = MPI_Wtime(), .micro = c->micro_batches > 1 ? c->micro_batches : 1};
  if (!status) status = trainer_check(t);
  status = adj_status_agree(comm, status, ADJ_WAIT_YIELD);
  if (status) {
    free(t);
    return status;
  }
  int64_t batch = t->batch_size;
  t->net_comm = adj_layer_comm(c->network);
  if (c->replicas) t->replicas = adj_replicas_count(c->replicas), t->replica = adj_replicas_index(c->replicas);
  t->global_batch = batch * t->replicas * t->micro;
  status = c->global_batch >= 0 && c->global_batch <= t->global_batch
                   ? ADJ_SUCCESS
                   : adj_error_set(ADJ_ERR_ARG,
                                   "trainer: global batch %lld is outside 0..%lld (network batch %lld x %d replicas x "
                                   "%d micro-batches)",
                                   (long long)c->global_batch, (long long)t->global_batch, (long long)batch, t->replicas,
                                   t->micro);
  if (!status && c->global_batch) t->global_batch = c->global_batch;
  MPI_Comm_rank(t->net_comm, &t->rank);
  if (!status) status = trainer_buffers(t);
  status = adj_status_agree(comm, status, ADJ_WAIT_YIELD);
  if (!status) status = trainer_find_loss_rank(t);
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
  adj_tensor_destroy(&t->x), adj_tensor_destroy(&t->y), adj_tensor_destroy(&t->dy), adj_tensor_destroy(&t->target);
  free(t->labels), free(t->argmax), free(t->indices), free(t->order), free(t->rng_buffer);
  adj_rng_destroy(&t->rng), adj_rng_destroy(&t->epoch_rng);
  if (t->figures_comm != MPI_COMM_NULL) MPI_Comm_free(&t->figures_comm);
  free(t);
  *trainer = NULL;
}

int64_t adj_trainer_batches_per_epoch(const adj_trainer *t) {
  return (adj_dataset_count(t->config.train) + t->global_batch - 1) / t->global_batch;
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
 * next agreement (the fill's, trainer_check_finite's), so divergence costs no
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

/* This rank's targets for the batch indices[0..count), read where the loss
 * layer needs them and handed to it.  The loss layers' setters are
 * collective, so every rank calls them whatever its reads gave (with zeros
 * after a failed read); the first failure is returned. */
static int trainer_set_targets(adj_trainer *t, adj_dataset *data, const int64_t *indices, int64_t count, int status) {
  if (t->loss_kind == TRAINER_XENT) {
    if (t->rank != t->loss_rank) return status;
    if (!status) status = adj_dataset_read_labels(data, indices, count, 0, count, t->labels);
    return status ? status : adj_xent_layer_set_labels(t->loss, t->labels, count);
  }
  int set;
  if (t->loss_kind == TRAINER_NLL) {
    int64_t rows = t->loss_box.extent[0];
    if (!status) status = adj_dataset_read_labels(data, indices, count, t->loss_box.start[0], rows, t->labels);
    if (status) memset(t->labels, 0, sizeof *t->labels * (size_t)rows);
    set = adj_loss_layer_set_labels(t->loss, t->labels, rows);
  } else {
    if (!status) status = adj_dataset_read_targets(data, indices, count, &t->loss_box, &t->target);
    if (status) adj_tensor_zero(&t->target);
    set = adj_loss_layer_set_target(t->loss, &t->target);
  }
  int counted = adj_loss_layer_set_count(t->loss, count);
  return status ? status : set ? set : counted;
}

/* Each rank reads its block of the batch's inputs, and the targets the loss
 * needs from it.  Local but for the loss layers' setters: the caller agrees. */
static int trainer_fill_local(adj_trainer *t, adj_dataset *data, const int64_t *indices, int64_t count) {
  int status = trainer_check_loss(t);
  if (!status) status = adj_dataset_read_inputs(data, indices, count, &t->input_box, &t->x);
  return trainer_set_targets(t, data, indices, count, status);
}

/* NLL, after a forward: each of this rank's counted rows' largest score
 * (the first, on ties) and its class, over its columns.  Local. */
static void trainer_nll_scores(adj_trainer *t, int64_t n) {
  const adj_tensor *x = t->loss->input;
  int64_t r0 = t->loss_box.start[0], rows = t->loss_box.extent[0];
  int64_t c0 = t->loss_box.start[1], cols = t->loss_box.extent[1];
  for (int64_t p = 0; p < t->batch_size; p++) t->argmax[p] = (trainer_argmax){-INFINITY, INT_MAX};
  for (int64_t i = 0; i < rows && r0 + i < n; i++)
    for (int64_t j = 0; j < cols; j++) {
      double v = adj_tensor_get(x, i * cols + j);
      if (v > t->argmax[r0 + i].score) t->argmax[r0 + i] = (trainer_argmax){v, (int)(c0 + j)};
    }
}

/* NLL: the scores combined over the workers that split the classes
 * (MPI_MAXLOC keeps the smaller class on ties), and the correct samples
 * counted by the workers holding the first class and summed.  Collective
 * on the network's communicator; call after an agreement. */
static int trainer_nll_correct(adj_trainer *t, int64_t n, int64_t *correct) {
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Iallreduce(MPI_IN_PLACE, t->argmax, (int)t->batch_size, MPI_DOUBLE_INT, MPI_MAXLOC, t->figures_comm,
                              &request));
  ADJ_CALL(adj_wait_all(1, &request, ADJ_WAIT_YIELD));
  int64_t r0 = t->loss_box.start[0], mine = 0, total = 0;
  for (int64_t i = 0; t->loss_box.start[1] == 0 && i < t->loss_box.extent[0] && r0 + i < n; i++)
    mine += t->argmax[r0 + i].index == t->labels[i];
  ADJ_CALL_MPI(MPI_Iallreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, t->figures_comm, &request));
  ADJ_CALL(adj_wait_all(1, &request, ADJ_WAIT_YIELD));
  *correct += total;
  return ADJ_SUCCESS;
}

/* The last forward's figures where they are valid, local: the loss (times n
 * for a mean, as it is for a sum) and, for cross-entropy, the correct
 * count; NLL's scores, combined later by trainer_nll_correct. */
static void trainer_figures(adj_trainer *t, int64_t n, double *loss_sum, int64_t *correct) {
  if (t->loss_kind == TRAINER_XENT) {
    *loss_sum += adj_xent_layer_loss(t->loss) * (double)n;
    *correct += adj_xent_layer_correct(t->loss);
    return;
  }
  double value = adj_loss_layer_value(t->loss);
  *loss_sum += t->summed ? value : value * (double)n;
  if (t->loss_kind == TRAINER_NLL) trainer_nll_scores(t, n);
}

/* Cross-entropy computes its figures on its root: sends them to rank 0.
 * The loss layers' are on every rank already. */
static int trainer_figures_to_rank0(adj_trainer *t, double *loss_sum, int64_t *correct) {
  if (t->loss_kind != TRAINER_XENT || t->loss_rank <= 0 || (t->rank != 0 && t->rank != t->loss_rank))
    return ADJ_SUCCESS;
  double figures[2] = {*loss_sum, (double)*correct};
  MPI_Request request;
  if (t->rank == t->loss_rank)
    ADJ_CALL_MPI(MPI_Isend(figures, 2, MPI_DOUBLE, 0, 0, t->figures_comm, &request));
  else ADJ_CALL_MPI(MPI_Irecv(figures, 2, MPI_DOUBLE, t->loss_rank, 0, t->figures_comm, &request));
  ADJ_CALL(adj_wait_all(1, &request, ADJ_WAIT_YIELD));
  *loss_sum = figures[0];
  *correct = (int64_t)figures[1];
  return ADJ_SUCCESS;
}

static void trainer_finish_stats(const adj_trainer *t, adj_train_stats *stats, double start) {
  stats->loss = stats->samples ? stats->loss / (double)stats->samples : 0.0;
  stats->classification = t->loss_kind != TRAINER_ELEMENTWISE;
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
 * backward (and NLL's correct count after).  Three agreements: the fill's outcome rides on the forward's
 * argument check, the forward's on the backward's, and the backward's is
 * agreed at the end, before the optimizer uses the gradients.  Replicas agree
 * on the fill across all of them, since a replica that stopped alone would
 * leave the others waiting in the gradient reduction. */
static int trainer_pass(adj_trainer *t, const int64_t *indices, int64_t n, int64_t count, int m, double *loss_sum,
                        int64_t *correct) {
  adj_layer *net = t->config.network;
  int status = trainer_fill_local(t, t->config.train, indices, n);
  if (t->config.replicas) ADJ_CALL(adj_status_agree(t->comm, status, ADJ_WAIT_YIELD));
  /* A mean's gradient is scaled by this pass's share of the step; a sum's
   * passes add up to the step's sum as they are. */
  if (adj_tensor_volume(&t->dy)) adj_tensor_set(&t->dy, 0, t->summed ? 1.0 : (double)n / (double)count);
  trainer_trace(t, "forward", m);
  bool agreed;
  trainer_span(t, ADJ_TRACE_COMPUTE, "forward", m);
  status = adj_layer_forward_open(status, net, &t->x, &t->y, &agreed);
  trainer_span(t, ADJ_TRACE_COMPUTE, NULL, m);
  if (agreed && status) return status;
  if (!status) trainer_figures(t, n, loss_sum, correct);
  t->reducing = t->reducer && m == t->micro - 1 && !t->config.reduce_after_backward;
  trainer_span(t, ADJ_TRACE_COMPUTE, "backward", m);
  status = adj_layer_backward_open(status, net, &t->dy, NULL, &agreed);
  trainer_span(t, ADJ_TRACE_COMPUTE, NULL, m);
  t->reducing = false;
  ADJ_CALL(agreed ? status : trainer_agree(t, status));
  return t->loss_kind == TRAINER_NLL ? trainer_nll_correct(t, n, correct) : ADJ_SUCCESS;
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
  ADJ_CALL(status);
  return trainer_figures_to_rank0(t, loss_sum, correct);
}

/* One optimizer step on the global batch order[0..count): this replica's
 * share in micro-batches, each one's loss scaled by its share of the global
 * count (so the replicas' summed gradients are the global mean's), the
 * reductions posted during the last micro-batch's backward, one wait, the
 * step.  Adds the batch's loss sum and correct count (valid on this replica's
 * rank 0). */
static int trainer_step(adj_trainer *t, const int64_t *order, int64_t count, double *loss_sum, int64_t *correct) {
  trainer_span(t, ADJ_TRACE_COMPUTE, "step", t->batch);
  int status = trainer_step_passes(t, order, count, loss_sum, correct);
  trainer_span(t, ADJ_TRACE_COMPUTE, NULL, t->batch);
  return status;
}

/* The step's loss sum and correct count over the replicas' ranks 0. */
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
  adj_shuffle_indices(t->rng, adj_dataset_count(t->config.train), t->order);
  t->order_drawn = true;
  return ADJ_SUCCESS;
}

int adj_trainer_run(adj_trainer *t, int64_t max_batches, adj_train_progress *progress, void *ctx,
                    adj_train_stats *stats) {
  *stats = (adj_train_stats){0};
  double start = MPI_Wtime();
  if (!t->order_drawn) ADJ_CALL(trainer_begin_epoch(t));
  int64_t batches = adj_trainer_batches_per_epoch(t), n = adj_dataset_count(t->config.train);
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
  trainer_finish_stats(t, stats, start);
  return ADJ_SUCCESS;
}

/* Each batch: fill (agreed), forward (agreed by the network), figures. */
static int trainer_evaluate_batches(adj_trainer *t, adj_dataset *data, adj_train_stats *stats) {
  int64_t samples = adj_dataset_count(data);
  for (int64_t first = 0; first < samples; first += t->batch_size) {
    int64_t count = samples - first < t->batch_size ? samples - first : t->batch_size;
    for (int64_t i = 0; i < count; i++) t->indices[i] = first + i;
    ADJ_CALL(trainer_agree(t, trainer_fill_local(t, data, t->indices, count)));
    ADJ_CALL(adj_layer_forward(t->config.network, &t->x, &t->y));
    trainer_figures(t, count, &stats->loss, &stats->correct);
    if (t->loss_kind == TRAINER_NLL) ADJ_CALL(trainer_nll_correct(t, count, &stats->correct));
    stats->samples += count;
    stats->batches++;
  }
  return trainer_figures_to_rank0(t, &stats->loss, &stats->correct);
}

/* In evaluation mode: batch norm uses its running statistics and leaves them
 * alone, so evaluating never changes what training continues from. */
int adj_trainer_evaluate(adj_trainer *t, adj_dataset *data, adj_train_stats *stats) {
  *stats = (adj_train_stats){0};
  double start = MPI_Wtime();
  ADJ_CALL(trainer_agree(t, trainer_fit_data(t, data)));
  ADJ_CALL(adj_network_set_training(t->config.network, false));
  int status = trainer_evaluate_batches(t, data, stats);
  int restored = adj_network_set_training(t->config.network, true);
  ADJ_CALL(status ? status : restored);
  trainer_finish_stats(t, stats, start);
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
