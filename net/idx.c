/* IDX files of unsigned bytes: reading with validation, and writing.
 *
 * Both directions go through zlib's gzFile: gzread reads gzip and raw files
 * alike (it recognises the 1f 8b magic bytes), and gzopen's "T" mode writes a
 * raw file, so compressed and raw data share one code path. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "adjoin/dataset.h"
#include "error_impl.h"
#include "idx_impl.h"

/* gzread and gzwrite take unsigned lengths but return int, so one call moves at
 * most this many bytes. */
#define IDX_CHUNK ((int64_t)1 << 30)
/* The payload buffer starts at most this large and doubles as data arrive, so a
 * corrupt header that promises terabytes fails as a truncated file instead of as
 * an allocation of terabytes. */
#define IDX_FIRST_CAPACITY ((int64_t)1 << 20)
/* Deflate's largest expansion is 1032 output bytes per input byte (a stream
 * of maximal-length matches), so a gzip file of C bytes holds at most about
 * 1032 C bytes; the slack covers headers and tiny files. */
#define IDX_GZIP_MAX_RATIO 1032
#define IDX_GZIP_SLACK ((int64_t)1 << 16)

static int64_t idx_min(int64_t a, int64_t b) { return a < b ? a : b; }

static uint32_t idx_magic(int ndims) { return 0x800u | (uint32_t)ndims; }

static uint32_t idx_get_be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void idx_put_be32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (24 - 8 * i));
}

/* Product of the extents; false when it does not fit in int64 (a corrupt or
 * hostile header, whose extents are each below 2^32). */
static bool idx_volume(int ndims, const int64_t *dims, int64_t *volume) {
  int64_t v = 1;
  for (int d = 0; d < ndims; d++) {
    if (dims[d] != 0 && v > INT64_MAX / dims[d]) return false;
    v *= dims[d];
  }
  *volume = v;
  return true;
}

/* The same message for a short and a long file, raw or compressed: the reader
 * learns which file, both sizes, and whether the sizes are after decompression. */
static int idx_size_error(gzFile f, const char *role, const char *path, int64_t expected, int64_t actual) {
  return adj_error_set(ADJ_ERR_IO, "%s file '%s' %s: expected %lld bytes%s, found %lld", role, path,
                       actual < expected ? "is truncated" : "has trailing data", (long long)expected,
                       gzdirect(f) ? "" : " after decompression", (long long)actual);
}

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

static int idx_read_header(gzFile f, const char *role, const char *path, adj_idx_blob *blob) {
  uint8_t head[4 * ADJ_MAX_RANK];
  int64_t got = 0, header_bytes = 4 + 4 * (int64_t)blob->ndims;
  ADJ_CALL(idx_read(f, role, path, head, 4, &got));
  if (got < 4) return idx_size_error(f, role, path, header_bytes, got);
  uint32_t magic = idx_get_be32(head), want = idx_magic(blob->ndims);
  ADJ_CHECK(magic == want, ADJ_ERR_IO,
            "%s file '%s': magic number 0x%08x, expected 0x%08x (IDX unsigned bytes, %d dimensions)", role, path,
            (unsigned)magic, (unsigned)want, blob->ndims);
  ADJ_CALL(idx_read(f, role, path, head, header_bytes - 4, &got));
  if (got < header_bytes - 4) return idx_size_error(f, role, path, header_bytes, 4 + got);
  for (int d = 0; d < blob->ndims; d++) {
    blob->dims[d] = idx_get_be32(head + 4 * d);
    ADJ_CHECK(blob->dims[d] > 0, ADJ_ERR_IO, "%s file '%s': dimension %d has extent 0", role, path, d);
  }
  ADJ_CHECK(idx_volume(blob->ndims, blob->dims, &blob->bytes), ADJ_ERR_IO,
            "%s file '%s': its extents multiply to more than 2^63 bytes", role, path);
  return ADJ_SUCCESS;
}

/* What the header claims against what the file can hold, before any payload
 * is read: a raw file's size is known exactly, a gzip file's decompressed
 * size is bounded by deflate's largest ratio.  So a lying header fails at
 * once instead of after decompressing gigabytes into memory. */
static int idx_check_claim(gzFile f, const char *role, const char *path, int64_t file_bytes, adj_idx_blob *blob) {
  int64_t header_bytes = 4 + 4 * (int64_t)blob->ndims, claimed = header_bytes + blob->bytes;
  if (gzdirect(f)) {
    if (claimed != file_bytes) return idx_size_error(f, role, path, claimed, file_bytes);
    return ADJ_SUCCESS;
  }
  int64_t most = file_bytes > (INT64_MAX - IDX_GZIP_SLACK) / IDX_GZIP_MAX_RATIO
                     ? INT64_MAX
                     : file_bytes * IDX_GZIP_MAX_RATIO + IDX_GZIP_SLACK;
  ADJ_CHECK(claimed <= most, ADJ_ERR_IO,
            "%s file '%s' is truncated: its header claims %lld bytes after decompression, but %lld bytes of gzip "
            "hold at most %lld", role, path, (long long)claimed, (long long)file_bytes, (long long)most);
  return ADJ_SUCCESS;
}

static int idx_read_payload(gzFile f, const char *role, const char *path, adj_idx_blob *blob) {
  int64_t header_bytes = 4 + 4 * (int64_t)blob->ndims, have = 0, got = 0;
  int64_t capacity = idx_min(blob->bytes, IDX_FIRST_CAPACITY);
  for (;;) {
    uint8_t *grown = realloc(blob->data, (size_t)capacity);
    ADJ_CHECK(grown, ADJ_ERR_MEM, "%s file '%s': out of memory for %lld bytes", role, path, (long long)capacity);
    blob->data = grown;
    ADJ_CALL(idx_read(f, role, path, blob->data + have, capacity - have, &got));
    have += got;
    if (have < capacity || capacity == blob->bytes) break;
    capacity = idx_min(2 * capacity, blob->bytes);
  }
  if (have < blob->bytes) return idx_size_error(f, role, path, header_bytes + blob->bytes, header_bytes + have);
  /* One more byte decides: trailing data is refused at its first byte, never
   * counted, so an endless stream cannot keep the reader busy. */
  uint8_t extra;
  int64_t got_extra = 0;
  ADJ_CALL(idx_read(f, role, path, &extra, 1, &got_extra));
  ADJ_CHECK(got_extra == 0, ADJ_ERR_IO, "%s file '%s' has trailing data: expected %lld bytes%s, found more", role, path,
            (long long)(header_bytes + blob->bytes), gzdirect(f) ? "" : " after decompression");
  return ADJ_SUCCESS;
}

int adj_idx_read_ubyte(const char *role, const char *path, int ndims, adj_idx_blob *blob) {
  *blob = (adj_idx_blob){.ndims = ndims};
  ADJ_CHECK(path && *path, ADJ_ERR_ARG, "%s file: no path given", role);
  /* Only regular files: a FIFO or a device could block the open or the read
   * forever or never end.  O_NONBLOCK keeps the open of a FIFO from waiting
   * for a writer; it has no effect on a regular file's reads. */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ADJ_CHECK(fd >= 0, ADJ_ERR_IO, "cannot open %s file '%s': %s", role, path, strerror(errno));
  struct stat st = {0};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return adj_error_set(ADJ_ERR_IO, "cannot open %s file '%s': %s", role, path,
                         S_ISDIR(st.st_mode) ? "Is a directory" : "not a regular file");
  }
  errno = 0;
  gzFile f = gzdopen(fd, "rb");
  if (!f) {
    close(fd);
    return adj_error_set(ADJ_ERR_IO, "cannot open %s file '%s': %s", role, path,
                         errno ? strerror(errno) : "out of memory");
  }
  int status = idx_read_header(f, role, path, blob);
  if (!status) status = idx_check_claim(f, role, path, (int64_t)st.st_size, blob);
  if (!status) status = idx_read_payload(f, role, path, blob);
  gzclose(f);
  if (status) adj_idx_blob_free(blob);
  return status;
}

void adj_idx_blob_free(adj_idx_blob *blob) {
  free(blob->data);
  blob->data = NULL;
}

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
  idx_put_be32(head, idx_magic(ndims));
  for (int d = 0; d < ndims; d++) {
    ADJ_CHECK(dims[d] >= 0 && dims[d] <= (int64_t)UINT32_MAX, ADJ_ERR_ARG,
              "adj_idx_write_ubyte: extent %lld of dimension %d does not fit in 32 bits", (long long)dims[d], d);
    idx_put_be32(head + 4 + 4 * d, (uint32_t)dims[d]);
  }
  int64_t bytes = 0;
  ADJ_CHECK(idx_volume(ndims, dims, &bytes), ADJ_ERR_ARG, "adj_idx_write_ubyte: extents overflow");
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
