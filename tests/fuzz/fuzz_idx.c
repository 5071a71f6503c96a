/* Fuzz target: the data file readers (net/idx.c, net/npy.c) on arbitrary
 * bytes.  The first input byte is ignored (it picked the dimension count in
 * an older version of the target; the seed corpus keeps it); the rest is the
 * file.  A gzip stream goes through the decompressor, as a gzip data set
 * does, into a second scratch file; then the file is mapped and parsed as
 * IDX or .npy by its first bytes.  A refusal is the expected outcome for
 * nearly every input: what must never happen is a crash, a read or write out
 * of bounds, a leak, or an accepted header whose payload is not the file's
 * size. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data_impl.h"
#include "fuzz.h"

/* Parses path as IDX or .npy; on success the payload must end at the file's end. */
static void fuzz_parse(const char *path) {
  adj_data_array a = {.fd = -1};
  snprintf(a.role, sizeof a.role, "fuzz");
  snprintf(a.path, sizeof a.path, "%s", path);
  snprintf(a.source, sizeof a.source, "'%s'", path);
  if (adj_data_map(&a, path) == 0) {
    const uint8_t *m = a.mapping;
    bool npy = a.mapping_bytes >= 6 && !memcmp(m, "\x93NUMPY", 6);
    if ((npy ? adj_npy_parse(&a) : adj_idx_parse(&a)) == 0) {
      int64_t payload = adj_data_sample_volume(&a) * a.shape[0] * a.elem.size;
      if (a.base + payload != m + a.mapping_bytes) abort();
      volatile uint8_t sink = a.base[payload - 1];
      (void)sink;
    }
  }
  adj_data_array_close(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const char *path = fuzz_file(data + 1, size - 1);
  if (!path) return 0;
  if (size >= 3 && data[1] == 0x1f && data[2] == 0x8b) {
    char out[96];
    snprintf(out, sizeof out, "%s.raw", path);
    unlink(out);
    if (adj_idx_gunzip_file("fuzz", path, out) == 0) fuzz_parse(out);
    unlink(out);
    return 0;
  }
  fuzz_parse(path);
  return 0;
}
