/* Fuzz target: the IDX reader (net/idx.c) on arbitrary bytes, raw or gzip.
 * The first input byte picks the dimension count the reader expects (1 to 4;
 * the loader asks for 1 and 3); the rest is the file.  A refusal is the
 * expected outcome for nearly every input: what must never happen is a crash,
 * a read or write out of bounds, a leak or an allocation past what the
 * file can hold (the reader bounds it by the file size; see idx.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "idx_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int ndims = 1 + data[0] % 4;
  const char *path = fuzz_file(data + 1, size - 1);
  if (!path) return 0;
  adj_idx_blob blob;
  if (adj_idx_read_ubyte("fuzz", path, ndims, &blob) == 0) {
    /* Accepted: the payload is exactly the product of the extents. */
    int64_t volume = 1;
    for (int d = 0; d < ndims; d++) volume *= blob.dims[d];
    if (volume != blob.bytes) abort();
    volatile uint8_t sink = blob.bytes ? blob.data[blob.bytes - 1] : 0;
    (void)sink;
    adj_idx_blob_free(&blob);
  }
  return 0;
}
