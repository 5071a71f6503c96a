/* Optimizers (SGD with momentum, Adam) and learning-rate schedules over a
 * network's flat parameter buffer (network.h).  An optimizer updates only this
 * worker's shards: every parameter block lives on exactly one worker
 * (distributed layers broadcast it where it is used and sum-reduce its
 * gradient back), so a local update is the global update. */
#ifndef ADJOIN_OPTIMIZER_H
#define ADJOIN_OPTIMIZER_H

#include <stdint.h>

#include "adjoin/layer.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_optimizer_kind { ADJ_OPTIMIZER_SGD = 0, ADJ_OPTIMIZER_ADAM = 1 } adj_optimizer_kind;

/* How the learning rate moves with the step count.  COSINE anneals it from
 * learning_rate at the first step to 0 after lr_total_steps, as PyTorch's
 * CosineAnnealingLR(T_max = lr_total_steps, eta_min = 0) stepped once per
 * optimizer step: step k (0-based) uses learning_rate (1 + cos(pi k / T)) / 2,
 * and steps past T keep the rate 0.  The rate follows the step count alone,
 * so a run resumed from a checkpoint continues the same schedule. */
typedef enum adj_lr_schedule { ADJ_LR_CONSTANT = 0, ADJ_LR_COSINE = 1 } adj_lr_schedule;

typedef struct adj_optimizer_config {
  adj_optimizer_kind kind;
  double learning_rate;
  double momentum;      /* SGD: heavy-ball momentum (0 = plain SGD) */
  double weight_decay;  /* L2 decay added to the gradient (both kinds) */
  double beta1, beta2;  /* Adam; 0 means the defaults 0.9 and 0.999 */
  double epsilon;       /* Adam; 0 means 1e-8; finite, not negative */
  adj_lr_schedule lr_schedule; /* ADJ_LR_CONSTANT (0) by default */
  int64_t lr_total_steps;      /* COSINE: the steps over which the rate falls to 0 (at least 1) */
} adj_optimizer_config;

typedef struct adj_optimizer adj_optimizer;

/* An optimizer for the flat parameter buffer of `network`.  Collective on the
 * network's communicator: an allocation that fails on one rank fails the call
 * on every rank.  ADJ_ERR_ARG if `network` is not a network. */
int adj_optimizer_create(adj_layer *network, const adj_optimizer_config *config, adj_optimizer **optimizer);
void adj_optimizer_destroy(adj_optimizer **optimizer);
/* One update of this worker's shards from their gradients.  Not collective.
 * ADJ_ERR_ARG if `optimizer` is NULL. */
int adj_optimizer_step(adj_optimizer *optimizer);
/* The configuration in use (defaults filled in). */
const adj_optimizer_config *adj_optimizer_get_config(const adj_optimizer *optimizer);
/* Steps taken so far. */
int64_t adj_optimizer_steps(const adj_optimizer *optimizer);
/* The learning rate the next step will use (the schedule at the step count). */
double adj_optimizer_learning_rate(const adj_optimizer *optimizer);
/* Sets the steps taken (a restored run's); ADJ_ERR_ARG for a negative count. */
int adj_optimizer_set_steps(adj_optimizer *optimizer, int64_t steps);
/* The optimizer's state buffers (SGD: velocity; Adam: first and second
 * moments), flat and laid out exactly like adj_network_flat_parameters, so a
 * checkpoint can gather them per parameter like the values.  Returns how many
 * (0, 1 or 2) and fills buffers[0..n); -1 if `optimizer` or `buffers` is
 * NULL. */
int adj_optimizer_state_buffers(adj_optimizer *optimizer, adj_tensor *buffers);

ADJ_END_DECLS

#endif
