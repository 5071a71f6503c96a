/* Max and average pooling kernels on one worker's block (N, C, spatial...),
 * with forward, jvp and backward as conv.h describes for every local kernel. */
#ifndef ADJOIN_POOL_H
#define ADJOIN_POOL_H

#include "adjoin/tensor.h"
#include "adjoin/window.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Max pooling ignores padding (a window must hold at least one real element;
 * ties go to the first maximum in row-major window order, and that element
 * receives the whole gradient).  Average pooling divides by the full kernel
 * volume, padding included (PyTorch's count_include_pad=True), so it is a
 * fixed linear map (its jvp is itself).  ADJ_POOL_AVG_EXCLUDE_PAD divides each
 * window by the number of its taps inside the input instead
 * (count_include_pad=False), still a fixed linear map; a window of padding
 * only has no such taps and is refused as for max pooling. */
typedef enum adj_pool_kind { ADJ_POOL_MAX = 0, ADJ_POOL_AVG = 1, ADJ_POOL_AVG_EXCLUDE_PAD = 2 } adj_pool_kind;

int adj_pool_forward(adj_pool_kind kind, const adj_window_geometry *g,
                     const adj_tensor *x, /* (N, C, in...) */
                     adj_tensor *y);      /* (N, C, out...) overwritten */

int adj_pool_jvp(adj_pool_kind kind, const adj_window_geometry *g,
                 const adj_tensor *x,  /* (N, C, in...) the linearisation point */
                 const adj_tensor *dx, /* (N, C, in...) */
                 adj_tensor *dy);      /* (N, C, out...) overwritten */

int adj_pool_backward(adj_pool_kind kind, const adj_window_geometry *g,
                      const adj_tensor *x,  /* (N, C, in...) */
                      const adj_tensor *dy, /* (N, C, out...) */
                      adj_tensor *dx);      /* (N, C, in...) overwritten */

ADJ_END_DECLS

#endif
