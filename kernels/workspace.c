/* The kernels' reusable, aligned scratch memory (kernels_impl.h). */
#include <stdint.h>
#include <stdlib.h>

#include "adjoin/workspace.h"
#include "kernels_impl.h"

enum { ADJ_WORKSPACE_ALIGN = 64 };

int adj_workspace_reserve(adj_workspace *ws, size_t bytes) {
  ADJ_CHECK(ws, ADJ_ERR_ARG, "workspace: pointer is NULL");
  if (ws->data && ws->bytes >= bytes) return ADJ_SUCCESS;
  /* Rounding up to the alignment must not wrap to a small size. */
  ADJ_CHECK(bytes <= SIZE_MAX - (ADJ_WORKSPACE_ALIGN - 1), ADJ_ERR_MEM,
            "workspace: cannot allocate %zu bytes (rounded up to %d they exceed the address space)", bytes,
            ADJ_WORKSPACE_ALIGN);
  size_t rounded = (bytes + ADJ_WORKSPACE_ALIGN - 1) / ADJ_WORKSPACE_ALIGN * ADJ_WORKSPACE_ALIGN;
  void *data = aligned_alloc(ADJ_WORKSPACE_ALIGN, rounded ? rounded : ADJ_WORKSPACE_ALIGN);
  ADJ_CHECK(data, ADJ_ERR_MEM, "workspace: cannot allocate %zu bytes", bytes);
  free(ws->data);
  ws->data = data;
  ws->bytes = rounded;
  return ADJ_SUCCESS;
}

void adj_workspace_release(adj_workspace *ws) {
  if (!ws) return;
  free(ws->data);
  ws->data = NULL;
  ws->bytes = 0;
}
