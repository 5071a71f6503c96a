/* Caller-owned scratch memory for the local kernels: sized once at setup with
 * a kernel's *_workspace_size, reused by every call, so no kernel allocates. */
#ifndef ADJOIN_WORKSPACE_H
#define ADJOIN_WORKSPACE_H

#include <stddef.h>

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Caller-owned scratch reused across calls (im2col buffers). */
typedef struct adj_workspace {
  void *data;   /* 64-byte aligned */
  size_t bytes;
} adj_workspace;

/* Makes ws hold at least `bytes` (grows, never shrinks); call it at setup time. */
int adj_workspace_reserve(adj_workspace *ws, size_t bytes);
/* Frees the storage; NULL-safe. */
void adj_workspace_release(adj_workspace *ws);

ADJ_END_DECLS

#endif
