/* Private: reading one unsigned-byte IDX file on one rank (the collective
 * loader in dataset.c decides which rank reads and shares the result). */
#ifndef ADJOIN_NET_IDX_IMPL_H
#define ADJOIN_NET_IDX_IMPL_H

#include <stdint.h>

#include "adjoin/tensor.h"

typedef struct adj_idx_blob {
  int ndims;
  int64_t dims[ADJ_MAX_RANK]; /* extents from the header */
  int64_t bytes;              /* payload size: the product of dims */
  uint8_t *data;              /* (dims...) row-major payload */
} adj_idx_blob;

/* Reads path (raw or gzip) as an IDX file of unsigned bytes with ndims
 * dimensions, checking the magic number 0x0000080<ndims>, that every extent is
 * positive and that the payload is exactly as long as the header says.  role
 * ("images", "labels") starts every message.  Not collective.  ADJ_ERR_IO
 * names the file and the bad value; ADJ_ERR_MEM. */
int adj_idx_read_ubyte(const char *role, const char *path, int ndims, adj_idx_blob *blob);

void adj_idx_blob_free(adj_idx_blob *blob);

#endif
