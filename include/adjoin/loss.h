/* Loss kernels on one worker's block: softmax cross-entropy over logits and
 * mean-squared error, summed in float64, with forward, jvp and backward as
 * conv.h describes (a loss's forward is a scalar).  The distributed losses of
 * loss_layers.h and xent_layer.h are built on them. */
#ifndef ADJOIN_LOSS_H
#define ADJOIN_LOSS_H

#include <stdint.h>

#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Sum over the batch, or mean: softmax cross-entropy divides by N (samples),
 * mean-squared error by the number of elements (PyTorch's conventions).  A
 * distributed layer whose batch is split uses SUM and scales by the global count. */
typedef enum adj_reduction { ADJ_REDUCE_MEAN = 0, ADJ_REDUCE_SUM = 1 } adj_reduction;

/* loss = reduce_n ( logsumexp(z_n) - z_n[label_n] ), accumulated in float64.
 * labels[n] must lie in [0, C). */
int adj_softmax_xent_forward(const adj_tensor *logits, /* (N, C) */
                             const int64_t *labels,    /* (N) */
                             adj_reduction reduction, double *loss);
/* dloss = reduce_n < softmax(z_n) - onehot(label_n), dz_n >. */
int adj_softmax_xent_jvp(const adj_tensor *logits, /* (N, C) */
                         const int64_t *labels,    /* (N) */
                         adj_reduction reduction,
                         const adj_tensor *dlogits, /* (N, C) */
                         double *dloss);
/* dz = dloss * scale * (softmax(z) - onehot(label)); dloss is 1 for plain training. */
int adj_softmax_xent_backward(const adj_tensor *logits, /* (N, C) */
                              const int64_t *labels,    /* (N) */
                              adj_reduction reduction, double dloss,
                              adj_tensor *dlogits);     /* (N, C) overwritten */
/* correct = the samples whose largest logit (the first, on a tie) is at their
 * label: the accuracy's numerator. */
int adj_softmax_xent_correct(const adj_tensor *logits, /* (N, C) */
                             const int64_t *labels,    /* (N) */
                             int64_t *correct);

/* loss = reduce (y - target)^2 over every element; the target is data (no gradient). */
int adj_mse_forward(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction, double *loss);
/* dloss = scale * 2 <y - target, dy>. */
int adj_mse_jvp(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction,
                const adj_tensor *dy, double *dloss);
/* dy = dloss * scale * 2 (y - target), overwritten. */
int adj_mse_backward(const adj_tensor *y, const adj_tensor *target, adj_reduction reduction, double dloss,
                     adj_tensor *dy);

ADJ_END_DECLS

#endif
