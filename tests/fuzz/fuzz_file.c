/* The scratch file of the fuzz targets (see fuzz.h). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"

static char fuzz_path[64];
static int fuzz_fd = -1;

static void fuzz_remove(void) {
  if (fuzz_fd >= 0) unlink(fuzz_path);
}

const char *fuzz_file(const uint8_t *data, size_t size) {
  if (fuzz_fd < 0) {
    snprintf(fuzz_path, sizeof fuzz_path, "/tmp/adjoin-fuzz-XXXXXX");
    fuzz_fd = mkstemp(fuzz_path);
    if (fuzz_fd < 0) return NULL;
    atexit(fuzz_remove);
  }
  if (ftruncate(fuzz_fd, 0) != 0) return NULL;
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fuzz_fd, data + done, size - done, (off_t)done);
    if (n <= 0) return NULL;
    done += (size_t)n;
  }
  return fuzz_path;
}
