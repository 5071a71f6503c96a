/* Private to plan/: the step model's walk (step_model.c) and its stages per
 * layer kind (step_stages.c). */
#ifndef ADJOIN_PLAN_STEP_MODEL_IMPL_H
#define ADJOIN_PLAN_STEP_MODEL_IMPL_H

#include "adjoin/step_model.h"
#include "algorithm_table_impl.h"

struct adj_step_model {
  adj_step_options o;
  adj_machine machine;
  adj_algorithm_table algorithms; /* the host's measured choices (empty: the fixed rule) */
  int forced;                     /* ADJ_SUM_REDUCE_ALGORITHM's algorithm, 0 when not forced */
};

/* A tensor's global shape on a partition of the first ranks.  Part p of
 * dimension k starts at ceil(a shape / from), a the start of part p of a
 * balanced split of `from` entries: from = shape (or 0) is the balanced
 * split itself; an upsampling's output keeps its input's split scaled. */
typedef struct step_layout {
  int ndim;
  int parts[ADJ_DESC_MAX_DIMS + 1];
  int64_t shape[ADJ_DESC_MAX_DIMS + 1]; /* batch first */
  int64_t from[ADJ_DESC_MAX_DIMS + 1];
} step_layout;

typedef struct step_walk {
  const adj_step_model *m;
  const adj_description *d;
  const adj_network_layout *layout;
  adj_step_prediction *p;
  int capacity;
  step_layout cur;       /* where the activation lives before the next stage */
  bool trainable_seen;   /* a stage with parameters came before */
  int threads;
  int64_t batch;         /* a replica's batch */
  double esize;
} step_walk;

/* Worker 0's extent of n split over parts: the largest block. */
static inline int64_t step_block(int64_t n, int parts) { return parts > 1 ? (n + parts - 1) / parts : n; }

int64_t step_workers(const step_layout *l);
/* Where part p of dimension k starts (p = parts: the extent), and worker 0's
 * extent there. */
int64_t step_cut(const step_layout *l, int k, int p);
int64_t step_first_block(const step_layout *l, int k);

/* Appends a stage of layer `layer` (its name, or `name` when given). */
int step_stage_new(step_walk *w, int layer, const char *kind, const char *name, adj_step_stage **stage);

/* Communication of a stage in a phase: one operation `what` of `kind` over
 * q members on `bytes` (the busiest member's), `messages` for p2p. */
void step_charge(const step_walk *w, adj_step_stage *s, adj_step_phase phase, const char *what, adj_comm_kind kind,
                 int q, double bytes, double messages);
/* A block broadcast over q members (and, at rank 0, the root, the scratch
 * block its summing plan keeps), and the sum of q copies onto one, by the
 * algorithm the operator will choose. */
void step_broadcast(const step_walk *w, adj_step_stage *s, adj_step_phase phase, const char *what, int q,
                    double bytes);
void step_sum(const step_walk *w, adj_step_stage *s, adj_step_phase phase, const char *what, int q, double bytes);

/* The stage's local computation as its twin (layer with local shapes). */
int step_compute(const step_walk *w, adj_step_stage *s, const adj_desc_layer *twin, int64_t batch, bool has_parameters);
/* A parameter block of rank 0 (count elements), its gradient, tangent and
 * optimizer state. */
void step_parameter(const step_walk *w, adj_step_stage *s, int64_t count);

/* One stage per layer kind: the layer's stage from w->cur and its layout;
 * each leaves w->cur at the layer's output layout. */
int step_conv(step_walk *w, int i);
int step_pool(step_walk *w, int i);
int step_affine(step_walk *w, int i);
int step_pointwise(step_walk *w, int i);
int step_loss(step_walk *w, int i);
int step_pad(step_walk *w, int i, const adj_padding_mode mode, const int64_t (*padding)[2]);

#endif
