/* The affine kernel y = x W^T + b over a batch, one GEMM, with forward, jvp
 * and backward as conv.h describes for every local kernel. */
#ifndef ADJOIN_AFFINE_H
#define ADJOIN_AFFINE_H

#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* y = x W^T + b over a batch, one GEMM. */
int adj_affine_forward(const adj_tensor *x, /* (N, F_in) */
                       const adj_tensor *w, /* (F_out, F_in) */
                       const adj_tensor *b, /* (F_out) or NULL */
                       adj_tensor *y);      /* (N, F_out) overwritten */

/* dy = dx W^T + x dW^T + db. */
int adj_affine_jvp(const adj_tensor *x,  /* (N, F_in) */
                   const adj_tensor *w,  /* (F_out, F_in) */
                   const adj_tensor *dx, /* (N, F_in) or NULL */
                   const adj_tensor *dw, /* (F_out, F_in) or NULL */
                   const adj_tensor *db, /* (F_out) or NULL */
                   adj_tensor *dy);      /* (N, F_out) overwritten */

int adj_affine_backward(const adj_tensor *x,  /* (N, F_in) */
                        const adj_tensor *w,  /* (F_out, F_in) */
                        const adj_tensor *dy, /* (N, F_out) */
                        adj_tensor *dx,       /* (N, F_in) overwritten, or NULL */
                        adj_tensor *dw,       /* (F_out, F_in) +=, or NULL */
                        adj_tensor *db);      /* (F_out) +=, or NULL */

ADJ_END_DECLS

#endif
