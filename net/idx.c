#define _DEFAULT_SOURCE /* realpath, gethostname */
/* IDX files: the header of a mapped raw file, gzip files decompressed once
 * into a cache, and writing.
 *
 * An IDX file is a 4-byte magic number (two zero bytes, a type byte and the
 * number of dimensions), one big-endian uint32 extent per dimension, then
 * the row-major payload in big-endian elements.  Types: 0x08 uint8, 0x09
 * int8, 0x0b int16, 0x0c int32, 0x0d float32, 0x0e float64.
 *
 * A gzip file cannot be read at random, and a shuffled batch reads samples
 * anywhere, so it is decompressed once into a raw IDX file in a cache
 * directory and read like any raw file.  The stream is checked as it is
 * decompressed (header, the size it claims against what its gzip bytes can
 * hold, truncation, trailing data), so a bad .gz is refused with its own
 * name and no cache file is left behind.  zlib's gzFile does the reading
 * (gzread takes raw files too) and the writing (gzopen's "T" mode writes a
 * raw file). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "adjoin/agree.h"
#include "adjoin/dataset.h"
#include "adjoin/file.h"
#include "adjoin/parse.h"
#include "data_impl.h"
#include "error_impl.h"

/* gzread and gzwrite take unsigned lengths but return int, so one call moves at
 * most this many bytes. */
#define IDX_CHUNK ((int64_t)1 << 30)
/* Decompression copies through a buffer of this size. */
#define IDX_COPY_BYTES ((int64_t)1 << 20)
/* Deflate's largest expansion is 1032 output bytes per input byte (a stream
 * of maximal-length matches), so a gzip file of C bytes holds at most about
 * 1032 C bytes; the slack covers headers and tiny files. */
#define IDX_GZIP_MAX_RATIO 1032
#define IDX_GZIP_SLACK ((int64_t)1 << 16)

static int64_t idx_min(int64_t a, int64_t b) { return a < b ? a : b; }

static uint32_t idx_get_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void idx_put_be32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static bool idx_host_is_big_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 0;
}

/* The element type and dimension count of a magic number; false when it is
 * not an IDX magic number. */
static bool idx_decode_magic(uint32_t magic, adj_data_elem *e, int *ndims) {
  static const struct {
    uint8_t code;
    char kind;
    int size;
  } types[] = {{0x08, 'u', 1}, {0x09, 'i', 1}, {0x0b, 'i', 2}, {0x0c, 'i', 4}, {0x0d, 'f', 4}, {0x0e, 'f', 8}};
  *ndims = (int)(magic & 0xff);
  if (magic >> 16 || *ndims < 1 || *ndims > ADJ_MAX_RANK) return false;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (types[i].code == ((magic >> 8) & 0xff)) {
      *e = (adj_data_elem){.kind = types[i].kind, .size = types[i].size,
                           .swap = types[i].size > 1 && !idx_host_is_big_endian()};
      return true;
    }
  return false;
}

static int idx_bad_magic(const char *role, const char *path, uint32_t magic) {
  return adj_error_set(ADJ_ERR_IO,
                       "%s file '%s': magic number 0x%08x is not IDX (expected 0x0000TTDD: type TT 08, 09, 0b, 0c, "
                       "0d or 0e, and 1 to %d dimensions DD)", role, path, (unsigned)magic, ADJ_MAX_RANK);
}

/* The extents after the magic number, and the payload's size in bytes. */
static int idx_decode_extents(const char *role, const char *path, const uint8_t *head, adj_data_array *a,
                              int64_t *payload) {
  int64_t volume = a->elem.size;
  char what[PATH_MAX + 64];
  snprintf(what, sizeof what, "%s file '%s': payload bytes", role, path);
  for (int d = 0; d < a->rank; d++) {
    a->shape[d] = idx_get_be32(head + 4 * d);
    ADJ_CHECK(a->shape[d] > 0, ADJ_ERR_IO, "%s file '%s': dimension %d has extent 0", role, path, d);
    if (adj_int64_mul(volume, a->shape[d], what, &volume)) return adj_data_as_io();
  }
  *payload = volume;
  return ADJ_SUCCESS;
}

/* The same message for a short and a long file: which file, both sizes, and
 * whether the sizes are after decompression. */
static int idx_size_error(const char *role, const char *path, bool decompressed, int64_t expected, int64_t actual) {
  return adj_error_set(ADJ_ERR_IO, "%s file '%s' %s: expected %lld bytes%s, found %lld", role, path,
                       actual < expected ? "is truncated" : "has trailing data", (long long)expected,
                       decompressed ? " after decompression" : "", (long long)actual);
}

int adj_idx_parse(adj_data_array *a) {
  const uint8_t *head = a->mapping;
  int64_t bytes = a->mapping_bytes, payload = 0;
  if (bytes < 4) return idx_size_error(a->role, a->path, false, 4, bytes);
  uint32_t magic = idx_get_be32(head);
  if (!idx_decode_magic(magic, &a->elem, &a->rank)) return idx_bad_magic(a->role, a->path, magic);
  int64_t header = 4 + 4 * (int64_t)a->rank;
  if (bytes < header) return idx_size_error(a->role, a->path, false, header, bytes);
  ADJ_CALL(idx_decode_extents(a->role, a->path, head + 4, a, &payload));
  if (payload > INT64_MAX - header || header + payload != bytes)
    return idx_size_error(a->role, a->path, false, payload > INT64_MAX - header ? INT64_MAX : header + payload, bytes);
  a->base = head + header;
  a->format = "IDX";
  return ADJ_SUCCESS;
}

/* ---- gzip files ---------------------------------------------------------------------------- */

/* Reads up to n bytes; *got is how many arrived before the end of the file.  A
 * gzip stream cut short (zlib's Z_BUF_ERROR) is an early end of file too, so a
 * truncated .gz gets the same size message as a truncated raw file. */
static int idx_read(gzFile f, const char *role, const char *path, void *buf, int64_t n, int64_t *got) {
  *got = 0;
  while (*got < n) {
    int r = gzread(f, (uint8_t *)buf + *got, (unsigned)idx_min(n - *got, IDX_CHUNK));
    if (r == 0) return ADJ_SUCCESS;
    if (r < 0) {
      int code = Z_OK;
      const char *text = gzerror(f, &code);
      if (code == Z_BUF_ERROR) return ADJ_SUCCESS;
      return adj_error_set(ADJ_ERR_IO, "%s file '%s': read failed: %s", role, path,
                           code == Z_ERRNO ? strerror(errno) : text);
    }
    *got += r;
  }
  return ADJ_SUCCESS;
}

/* The header of a gzip stream, checked as adj_idx_parse checks a raw one,
 * and the claim it makes against what the compressed bytes can hold (a header
 * that promises terabytes fails before anything is decompressed).  The
 * header's bytes go to head, their count to *header. */
static int idx_gz_header(gzFile f, const char *role, const char *path, int64_t file_bytes, uint8_t *head,
                         int64_t *header, int64_t *payload) {
  adj_data_array a = {0};
  int64_t got = 0;
  ADJ_CALL(idx_read(f, role, path, head, 4, &got));
  if (got < 4) return idx_size_error(role, path, true, 4, got);
  uint32_t magic = idx_get_be32(head);
  if (!idx_decode_magic(magic, &a.elem, &a.rank)) return idx_bad_magic(role, path, magic);
  *header = 4 + 4 * (int64_t)a.rank;
  ADJ_CALL(idx_read(f, role, path, head + 4, *header - 4, &got));
  if (got < *header - 4) return idx_size_error(role, path, true, *header, 4 + got);
  ADJ_CALL(idx_decode_extents(role, path, head + 4, &a, payload));
  int64_t most = file_bytes > (INT64_MAX - IDX_GZIP_SLACK) / IDX_GZIP_MAX_RATIO
                     ? INT64_MAX
                     : file_bytes * IDX_GZIP_MAX_RATIO + IDX_GZIP_SLACK;
  ADJ_CHECK(*payload <= most - *header, ADJ_ERR_IO,
            "%s file '%s' is truncated: its header claims %lld bytes after decompression, but %lld bytes of gzip "
            "hold at most %lld", role, path, (long long)(*header + *payload), (long long)file_bytes, (long long)most);
  return ADJ_SUCCESS;
}

static int idx_write_all(int fd, const char *path, const uint8_t *data, int64_t n) {
  for (int64_t done = 0; done < n;) {
    ssize_t w = write(fd, data + done, (size_t)(n - done));
    ADJ_CHECK(w > 0, ADJ_ERR_IO, "writing '%s' failed: %s", path, w < 0 ? strerror(errno) : "no progress");
    done += w;
  }
  return ADJ_SUCCESS;
}

/* Copies the payload to fd, then refuses trailing data at its first byte (an
 * endless stream cannot keep the reader busy). */
static int idx_gz_copy(gzFile f, const char *role, const char *path, int fd, const char *out, int64_t header,
                       int64_t payload, uint8_t *buffer) {
  int64_t got = 0;
  for (int64_t done = 0; done < payload; done += got) {
    ADJ_CALL(idx_read(f, role, path, buffer, idx_min(payload - done, IDX_COPY_BYTES), &got));
    if (got == 0) return idx_size_error(role, path, true, header + payload, header + done);
    ADJ_CALL(idx_write_all(fd, out, buffer, got));
  }
  ADJ_CALL(idx_read(f, role, path, buffer, 1, &got));
  ADJ_CHECK(got == 0, ADJ_ERR_IO, "%s file '%s' has trailing data: expected %lld bytes after decompression, found more",
            role, path, (long long)(header + payload));
  return ADJ_SUCCESS;
}

/* Decompresses the open gzip stream f into the new file `out`. */
static int idx_gz_stream(gzFile f, const char *role, const char *path, int64_t file_bytes, int fd, const char *out) {
  uint8_t head[4 + 4 * ADJ_MAX_RANK];
  int64_t header = 0, payload = 0;
  ADJ_CALL(idx_gz_header(f, role, path, file_bytes, head, &header, &payload));
  ADJ_CALL(idx_write_all(fd, out, head, header));
  uint8_t *buffer = malloc((size_t)IDX_COPY_BYTES);
  ADJ_CHECK(buffer, ADJ_ERR_MEM, "%s file '%s': out of memory for the decompression buffer", role, path);
  int status = idx_gz_copy(f, role, path, fd, out, header, payload, buffer);
  free(buffer);
  return status;
}

/* Decompresses the gzip IDX file at path into the new file `out` (removed
 * again on failure).  Not collective. */
static int idx_gunzip(const char *role, const char *path, const char *out) {
  char what[32];
  snprintf(what, sizeof what, "%s file", role);
  int in = -1;
  int64_t bytes = 0;
  ADJ_CALL(adj_file_open_input(path, what, -1, &in, &bytes));
  gzFile f = gzdopen(in, "rb");
  if (!f) {
    close(in);
    return adj_error_set(ADJ_ERR_MEM, "%s %s: out of memory for its decompression", what, path);
  }
  int fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  int status = fd >= 0 ? idx_gz_stream(f, role, path, bytes, fd, out)
                       : adj_error_set(ADJ_ERR_IO, "cannot create the cache file '%s' for %s file '%s': %s", out, role,
                                       path, strerror(errno));
  if (fd >= 0 && close(fd) != 0 && !status)
    status = adj_error_set(ADJ_ERR_IO, "writing the cache file '%s' failed: %s", out, strerror(errno));
  gzclose(f);
  if (status && fd >= 0) unlink(out);
  return status;
}

int adj_idx_gunzip_file(const char *role, const char *path, const char *out) { return idx_gunzip(role, path, out); }

/* ---- the cache ------------------------------------------------------------------------------ */

/* The cache directory (dataset.h's order of choices), created if missing. */
static int idx_cache_dir(const char *given, char *dir, size_t size) {
  const char *env = getenv("ADJ_DATA_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  int n = given && *given ? snprintf(dir, size, "%s", given)
          : env && *env   ? snprintf(dir, size, "%s", env)
          : xdg && *xdg   ? snprintf(dir, size, "%s/adjoin", xdg)
          : home && *home ? snprintf(dir, size, "%s/.cache/adjoin", home)
                          : snprintf(dir, size, "/tmp/adjoin-cache");
  ADJ_CHECK(n > 0 && (size_t)n < size, ADJ_ERR_ARG, "the data cache directory name is too long");
  /* mkdir -p, one component at a time. */
  for (char *p = dir + 1;; p++) {
    bool end = *p == '\0';
    if (*p != '/' && !end) continue;
    *p = '\0';
    int made = mkdir(dir, 0755);
    int saved = errno;
    if (!end) *p = '/';
    ADJ_CHECK(made == 0 || saved == EEXIST, ADJ_ERR_IO,
              "cannot create the data cache directory '%s': %s (set ADJ_DATA_CACHE to a writable directory)", dir,
              strerror(saved));
    if (end) break;
  }
  struct stat st = {0};
  ADJ_CHECK(stat(dir, &st) == 0 && S_ISDIR(st.st_mode), ADJ_ERR_IO,
            "the data cache '%s' is not a directory (set ADJ_DATA_CACHE to a writable directory)", dir);
  return ADJ_SUCCESS;
}

static uint64_t idx_hash(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3u;
  return h;
}

/* dir/<name without .gz>.<hash of the file's real path, size and
 * modification time>: a new version of the file gets a new cache file. */
static int idx_cache_path(const char *role, const char *path, const char *dir, char *cached, size_t size) {
  struct stat st = {0};
  char real[PATH_MAX];
  ADJ_CHECK(stat(path, &st) == 0 && realpath(path, real), ADJ_ERR_IO, "cannot open %s file '%s': %s", role, path,
            strerror(errno));
  uint64_t h = idx_hash(0xcbf29ce484222325u, real, strlen(real));
  int64_t stamp[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec};
  h = idx_hash(h, stamp, sizeof stamp);
  const char *base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
  size_t keep = strlen(base) > 3 && !strcmp(base + strlen(base) - 3, ".gz") ? strlen(base) - 3 : strlen(base);
  int n = snprintf(cached, size, "%s/%.*s.%016llx", dir, (int)keep, base, (unsigned long long)h);
  ADJ_CHECK(n > 0 && (size_t)n < size, ADJ_ERR_ARG, "the cache path for '%s' is too long", path);
  return ADJ_SUCCESS;
}

/* Decompresses into a temporary name and renames it into place, so a reader
 * never sees half a file and two writers (nodes sharing a cache, two jobs)
 * both leave a whole one. */
static int idx_fill_cache(const char *role, const char *path, const char *cached) {
  if (access(cached, R_OK) == 0) return ADJ_SUCCESS;
  char temporary[PATH_MAX + 64];
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  int n = snprintf(temporary, sizeof temporary, "%s.%s.%ld.tmp", cached, host, (long)getpid());
  ADJ_CHECK(n > 0 && (size_t)n < sizeof temporary, ADJ_ERR_ARG, "the cache path for '%s' is too long", path);
  unlink(temporary);
  ADJ_CALL(idx_gunzip(role, path, temporary));
  if (rename(temporary, cached) != 0) {
    int saved = errno;
    unlink(temporary);
    return adj_error_set(ADJ_ERR_IO, "cannot move the cache file into place as '%s': %s", cached, strerror(saved));
  }
  return ADJ_SUCCESS;
}

int adj_idx_gunzip_cached(MPI_Comm comm, const char *role, const char *path, const char *cache_dir, char *cached,
                          size_t size) {
  char dir[PATH_MAX];
  int status = idx_cache_dir(cache_dir, dir, sizeof dir);
  if (!status) status = idx_cache_path(role, path, dir, cached, size);
  /* One rank per node decompresses; the others wait in the agreement. */
  MPI_Comm node;
  int node_rank = 0;
  ADJ_CALL_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &node_rank);
  MPI_Comm_free(&node);
  if (!status && node_rank == 0) status = idx_fill_cache(role, path, cached);
  return adj_status_agree(comm, status, ADJ_WAIT_YIELD);
}

/* ---- writing -------------------------------------------------------------------------------- */

static int idx_write(gzFile f, const char *path, const uint8_t *data, int64_t n) {
  for (int64_t done = 0; done < n;) {
    int w = gzwrite(f, data + done, (unsigned)idx_min(n - done, IDX_CHUNK));
    int code = Z_OK;
    const char *text = gzerror(f, &code);
    ADJ_CHECK(w > 0, ADJ_ERR_IO, "writing '%s' failed: %s", path, code == Z_ERRNO ? strerror(errno) : text);
    done += w;
  }
  return ADJ_SUCCESS;
}

int adj_idx_write_ubyte(const char *path, int ndims, const int64_t *dims, const uint8_t *data, bool gzip) {
  ADJ_CHECK(path && *path && dims, ADJ_ERR_ARG, "adj_idx_write_ubyte: path and dims are required");
  ADJ_CHECK(ndims >= 1 && ndims <= ADJ_MAX_RANK, ADJ_ERR_ARG, "adj_idx_write_ubyte: %d dimensions, expected 1 to %d",
            ndims, ADJ_MAX_RANK);
  uint8_t head[4 + 4 * ADJ_MAX_RANK];
  idx_put_be32(head, 0x800u | (uint32_t)ndims);
  int64_t bytes = 1;
  for (int d = 0; d < ndims; d++) {
    ADJ_CHECK(dims[d] >= 0 && dims[d] <= (int64_t)UINT32_MAX, ADJ_ERR_ARG,
              "adj_idx_write_ubyte: extent %lld of dimension %d does not fit in 32 bits", (long long)dims[d], d);
    idx_put_be32(head + 4 + 4 * d, (uint32_t)dims[d]);
    ADJ_CALL(adj_int64_mul(bytes, dims[d], "adj_idx_write_ubyte: extents", &bytes));
  }
  ADJ_CHECK(data || bytes == 0, ADJ_ERR_ARG, "adj_idx_write_ubyte: no data for %lld bytes", (long long)bytes);
  errno = 0;
  gzFile f = gzopen(path, gzip ? "wb" : "wbT");
  ADJ_CHECK(f, ADJ_ERR_IO, "cannot create '%s': %s", path, errno ? strerror(errno) : "out of memory");
  int status = idx_write(f, path, head, 4 + 4 * (int64_t)ndims);
  if (!status) status = idx_write(f, path, data, bytes);
  int closed = gzclose(f);
  if (!status && closed != Z_OK) status = adj_error_set(ADJ_ERR_IO, "closing '%s' failed (zlib code %d)", path, closed);
  return status;
}
