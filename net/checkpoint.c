/* Checkpoints (see include/adjoin/checkpoint.h and docs/checkpoint.md).
 *
 * Rank 0 does all file work: on save it receives every tensor whole through
 * the parameter layouts' gathers and builds the file in memory; on load it
 * reads and verifies the whole file before anything changes, then scatters
 * each tensor.  Numbers are encoded little-endian byte by byte, so the format
 * does not depend on the host. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "adjoin/agree.h"
#include "adjoin/checkpoint.h"
#include "adjoin/file.h"
#include "adjoin/batchnorm_layer.h"
#include "adjoin/network.h"
#include "error_impl.h"

static const char ck_magic[8] = {'A', 'D', 'J', 'C', 'K', 'P', 'T', '\n'};
/* Version 1 headers end at byte 64; version 2 adds the batch size. */
enum { CK_HEADER_V1_BYTES = 64, CK_HEADER_BYTES = 72, CK_NO_OPTIMIZER = 255, CK_MAX_NAME = 47 };
/* Limits on what a file may claim, checked before the value is used: the
 * generator state is GSL's mt19937 (5,000 bytes here), step counts past 2^53
 * are not exact in the float64 arithmetic of Adam's bias correction. */
#define CK_MAX_RNG_BYTES ((uint32_t)1 << 20)
#define CK_MAX_COUNT ((int64_t)1 << 53)

/* The fixed-size header after the magic; every rank holds a copy after load. */
typedef struct ck_header {
  uint32_t version, dtype, optimizer_kind, n_state, n_parameters, rng_bytes;
  int64_t steps, epoch, batch, batch_size;
  uint64_t seed;
} ck_header;

static size_t ck_header_bytes(uint32_t version) { return version == 1 ? CK_HEADER_V1_BYTES : CK_HEADER_BYTES; }

/* ---- little-endian byte buffers -------------------------------------------------------- */

typedef struct ck_writer {
  uint8_t *data;
  size_t size, capacity;
  bool failed; /* out of memory: later puts are dropped, the save fails at the end */
} ck_writer;

static void ck_put(ck_writer *w, const void *bytes, size_t n) {
  if (w->failed) return;
  if (w->size + n > w->capacity) {
    size_t capacity = 2 * (w->size + n) + 4096;
    uint8_t *grown = realloc(w->data, capacity);
    if (!grown) {
      w->failed = true;
      return;
    }
    w->data = grown, w->capacity = capacity;
  }
  memcpy(w->data + w->size, bytes, n);
  w->size += n;
}

static void ck_put_uint(ck_writer *w, uint64_t v, int bytes) {
  uint8_t b[8];
  for (int i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
  ck_put(w, b, (size_t)bytes);
}

static void ck_put_f64(ck_writer *w, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  ck_put_uint(w, bits, 8);
}

typedef struct ck_reader {
  const uint8_t *data;
  size_t size, pos;
  bool short_read; /* a get ran past the end: the values read are zeros */
} ck_reader;

static uint64_t ck_get_uint(ck_reader *r, int bytes) {
  if (r->pos + (size_t)bytes > r->size) {
    r->short_read = true;
    return 0;
  }
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)r->data[r->pos + (size_t)i] << (8 * i);
  r->pos += (size_t)bytes;
  return v;
}

static double ck_get_f64(ck_reader *r) {
  uint64_t bits = ck_get_uint(r, 8);
  double v;
  memcpy(&v, &bits, sizeof v);
  return v;
}

/* ---- what the network holds --------------------------------------------------------- */

/* This worker's blocks of parameter i: its value, then the optimizer's state
 * buffers at the parameter's offset in their flat layout (network.h).  Returns
 * how many (1 + state buffers). */
static int ck_parts(adj_layer *net, adj_optimizer *opt, int index, adj_tensor parts[3]) {
  adj_parameter *p = adj_layer_parameter(net, index);
  parts[0] = p->value;
  adj_tensor state[2];
  int n_state = opt ? adj_optimizer_state_buffers(opt, state) : 0;
  int64_t offset = 0;
  for (int i = 0; i < index; i++) offset += adj_tensor_volume(&adj_layer_parameter(net, i)->value);
  size_t esize = adj_dtype_size(p->value.dtype);
  for (int k = 0; k < n_state; k++)
    adj_tensor_view(&parts[1 + k], p->value.dtype, p->value.rank, p->value.shape,
                    (char *)state[k].data + (size_t)offset * esize);
  return 1 + n_state;
}

/* Memory every rank must agree on (one failing fails all). */
static void *ck_agreed_calloc(adj_layer *net, size_t count, size_t size, int *status) {
  void *p = calloc(count + 1, size);
  *status = adj_status_agree(adj_layer_comm(net), p ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "checkpoint: out of "
                             "memory"), ADJ_WAIT_YIELD);
  if (*status) free(p), p = NULL;
  return p;
}

/* ---- network state: batch norm running statistics ------------------------------------- */

/* State buffer k of a network: running mean (k even) or variance (k odd) of
 * its (k / 2)-th batch norm stage.  Not parameters (the optimizer never sees
 * them), but a resumed run needs them and evaluation uses them. */
typedef struct ck_buffer {
  adj_layer *stage;
  bool variance;
  int64_t volume; /* the global channel count */
} ck_buffer;

static const char *ck_buffer_name(const ck_buffer *b) { return b->variance ? "running_var" : "running_mean"; }

/* How many state buffers the network holds; fills out[0..n) when not NULL. */
static int ck_buffers(adj_layer *net, ck_buffer *out) {
  int n = 0;
  for (int i = 0; adj_layer_is_network(net) && i < adj_network_depth(net); i++) {
    adj_layer *stage = adj_network_layer(net, i);
    if (!adj_layer_is_batchnorm(stage)) continue;
    int64_t channels = adj_decomposition_global_shape(adj_layer_input_layout(stage))[1];
    for (int k = 0; k < 2; k++, n++)
      if (out) out[n] = (ck_buffer){stage, k == 1, channels};
  }
  return n;
}

/* This worker's block of a buffer (float64 view), its first channel, and
 * whether it is the one worker of its channel group that speaks for it
 * (batch and spatial coordinates 0; the group's members hold the same bits). */
static bool ck_buffer_block(const ck_buffer *b, adj_tensor *block, int64_t *first) {
  adj_tensor mean, var;
  adj_batchnorm_layer_running_stats(b->stage, &mean, &var);
  *block = b->variance ? var : mean;
  const adj_decomposition *layout = adj_layer_input_layout(b->stage);
  const adj_partition *p = adj_decomposition_partition(layout);
  *first = adj_decomposition_local_block(layout).start[1];
  if (!adj_partition_active(p)) return false;
  for (int d = 0; d < adj_decomposition_rank(layout); d++)
    if (d != 1 && adj_partition_coords(p)[d] != 0) return false;
  return true;
}

/* The whole buffer summed onto rank 0 from the worker speaking for each
 * channel block.  Collective. */
static int ck_gather_buffer(adj_layer *net, const ck_buffer *b, double *whole) {
  adj_tensor block;
  int64_t first;
  bool speaks = ck_buffer_block(b, &block, &first);
  int status;
  double *mine = ck_agreed_calloc(net, (size_t)b->volume, sizeof *mine, &status);
  if (status) return status;
  if (speaks) memcpy(mine + first, block.data, (size_t)adj_tensor_volume(&block) * sizeof *mine);
  MPI_Request request;
  if (MPI_Ireduce(mine, whole, (int)b->volume, MPI_DOUBLE, MPI_SUM, 0, adj_layer_comm(net), &request) != MPI_SUCCESS)
    status = adj_error_set(ADJ_ERR_MPI, "checkpoint: gathering %s failed", ck_buffer_name(b));
  else
    status = adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  free(mine);
  return status;
}

/* Rank 0's whole buffer to every worker holding a block of it. */
static int ck_scatter_buffer(adj_layer *net, const ck_buffer *b, double *whole) {
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Ibcast(whole, (int)b->volume, MPI_DOUBLE, 0, adj_layer_comm(net), &request));
  ADJ_CALL(adj_wait_all(1, &request, ADJ_WAIT_YIELD));
  adj_tensor block;
  int64_t first;
  ck_buffer_block(b, &block, &first);
  memcpy(block.data, whole + first, (size_t)adj_tensor_volume(&block) * sizeof *whole);
  return ADJ_SUCCESS;
}

static uint32_t ck_optimizer_kind(const adj_optimizer *opt) {
  return opt ? (uint32_t)adj_optimizer_get_config(opt)->kind : CK_NO_OPTIMIZER;
}

/* ---- save -------------------------------------------------------------------------------- */

/* Version 3 only where it is needed: a network without state buffers writes
 * the version 2 file older builds read. */
static uint32_t ck_write_version(adj_layer *net) { return ck_buffers(net, NULL) ? ADJ_CHECKPOINT_VERSION : 2; }

static void ck_write_header(ck_writer *w, adj_layer *net, adj_optimizer *opt, const adj_rng *rng,
                            const adj_checkpoint_position *pos) {
  adj_tensor state[2];
  uint32_t fields[6] = {ck_write_version(net), (uint32_t)adj_layer_dtype(net), ck_optimizer_kind(opt),
                        opt ? (uint32_t)adj_optimizer_state_buffers(opt, state) : 0,
                        (uint32_t)adj_layer_parameter_count(net), rng ? (uint32_t)adj_rng_state_size(rng) : 0};
  ck_put(w, ck_magic, sizeof ck_magic);
  for (int i = 0; i < 6; i++) ck_put_uint(w, fields[i], 4);
  ck_put_uint(w, (uint64_t)(opt ? adj_optimizer_steps(opt) : 0), 8);
  ck_put_uint(w, (uint64_t)pos->epoch, 8);
  ck_put_uint(w, (uint64_t)pos->batch, 8);
  ck_put_uint(w, pos->seed, 8);
  ck_put_uint(w, (uint64_t)pos->batch_size, 8);
  if (!rng) return;
  size_t n = adj_rng_state_size(rng);
  uint8_t *bytes = malloc(n);
  if (!bytes) {
    w->failed = true;
    return;
  }
  adj_rng_state_save(rng, bytes);
  ck_put(w, bytes, n);
  free(bytes);
}

static void ck_write_descriptors(ck_writer *w, adj_layer *net) {
  for (int i = 0; i < adj_layer_parameter_count(net); i++) {
    const adj_parameter *p = adj_layer_parameter(net, i);
    size_t len = strlen(p->name);
    ck_put_uint(w, len, 4);
    ck_put(w, p->name, len);
    int rank = adj_decomposition_rank(p->layout);
    ck_put_uint(w, (uint64_t)rank, 4);
    for (int d = 0; d < rank; d++) ck_put_uint(w, (uint64_t)adj_decomposition_global_shape(p->layout)[d], 8);
  }
}

/* The whole of parameter i, in the network's dtype, on rank 0 (an empty
 * tensor elsewhere).  Collective: every rank learns whether it succeeded. */
static int ck_whole(adj_layer *net, int index, bool root, adj_tensor *whole) {
  const adj_parameter *p = adj_layer_parameter(net, index);
  *whole = (adj_tensor){0};
  int status = root ? adj_tensor_create(whole, adj_layer_dtype(net), adj_decomposition_rank(p->layout),
                                        adj_decomposition_global_shape(p->layout))
                    : ADJ_SUCCESS;
  return adj_status_agree(adj_layer_comm(net), status, ADJ_WAIT_YIELD);
}

/* Gathers every part of parameter i onto rank 0, which appends them as float64. */
static int ck_write_parameter(ck_writer *w, adj_layer *net, adj_optimizer *opt, int index, bool root) {
  adj_tensor parts[3], whole;
  int n = ck_parts(net, opt, index, parts), status = ADJ_SUCCESS;
  ADJ_CALL(ck_whole(net, index, root, &whole));
  for (int k = 0; k < n && !status; k++) {
    status = adj_layer_move_parameter_data(net, index, 0, false, &parts[k], root ? &whole : NULL);
    for (int64_t e = 0; root && !status && e < adj_tensor_volume(&whole); e++) ck_put_f64(w, adj_tensor_get(&whole, e));
  }
  adj_tensor_destroy(&whole);
  return status;
}

/* Calls visit for every state buffer of the network in order, with a
 * float64 array of the buffer's whole length.  Collective. */
typedef int ck_buffer_visit(void *ctx, adj_layer *net, const ck_buffer *b, double *whole, bool root);
static int ck_each_buffer(adj_layer *net, bool root, ck_buffer_visit *visit, void *ctx) {
  int n = ck_buffers(net, NULL), status;
  ck_buffer *buffers = ck_agreed_calloc(net, (size_t)n, sizeof *buffers, &status);
  if (status) return status;
  ck_buffers(net, buffers);
  for (int k = 0; k < n && !status; k++) {
    double *whole = ck_agreed_calloc(net, (size_t)buffers[k].volume, sizeof *whole, &status);
    if (!status) status = visit(ctx, net, &buffers[k], whole, root);
    free(whole);
  }
  free(buffers);
  return status;
}

/* Gathers one buffer onto rank 0, which appends its name, volume, values. */
static int ck_write_buffer(void *ctx, adj_layer *net, const ck_buffer *b, double *whole, bool root) {
  ck_writer *w = ctx;
  ADJ_CALL(ck_gather_buffer(net, b, whole));
  if (!root) return ADJ_SUCCESS;
  const char *name = ck_buffer_name(b);
  ck_put_uint(w, strlen(name), 4);
  ck_put(w, name, strlen(name));
  ck_put_uint(w, (uint64_t)b->volume, 8);
  for (int64_t e = 0; e < b->volume; e++) ck_put_f64(w, whole[e]);
  return ADJ_SUCCESS;
}

/* Version 3's state section: the count, then each buffer. */
static int ck_write_buffers(ck_writer *w, adj_layer *net, bool root) {
  int n = ck_buffers(net, NULL);
  if (!n) return ADJ_SUCCESS;
  if (root) ck_put_uint(w, (uint64_t)n, 4);
  return ck_each_buffer(net, root, ck_write_buffer, w);
}

int adj_checkpoint_check_target(const char *path) {
  ADJ_CALL(adj_file_check_output(path, "checkpoint"));
  return ADJ_SUCCESS;
}

/* Writes all of data to fd; false on any short or failed write. */
static bool ck_write_all(int fd, const uint8_t *data, size_t size) {
  while (size) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n, size -= (size_t)n;
  }
  return true;
}

/* Appends the CRC32 and replaces `path` atomically: a fresh temporary file in
 * the same directory (mkstemp: O_CREAT|O_EXCL, so a file or symlink planted
 * under the temporary name is never followed or overwritten), fsync, rename.
 * A target that exists but is not a regular file (a device, a FIFO, a
 * directory) is refused: the rename would replace it. */
static int ck_write_file(const char *path, ck_writer *w) {
  ADJ_CHECK(!w->failed, ADJ_ERR_MEM, "checkpoint %s: out of memory while building the file", path);
  ck_put_uint(w, crc32_z(crc32_z(0, NULL, 0), w->data, w->size), 4);
  ADJ_CHECK(!w->failed, ADJ_ERR_MEM, "checkpoint %s: out of memory while building the file", path);
  ADJ_CALL(adj_checkpoint_check_target(path));
  char tmp[4096];
  ADJ_CHECK(snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) < (int)sizeof tmp, ADJ_ERR_ARG,
            "checkpoint: path too long: %s", path);
  int fd = mkstemp(tmp);
  ADJ_CHECK(fd >= 0, ADJ_ERR_IO, "checkpoint %s: cannot create a temporary file beside it: %s; the previous "
            "checkpoint is kept", path, strerror(errno));
  mode_t mask = umask(0);
  umask(mask);
  bool ok = fchmod(fd, 0666 & ~mask) == 0 && ck_write_all(fd, w->data, w->size) && fsync(fd) == 0;
  int saved = errno;
  ok = close(fd) == 0 && ok;
  if (ok) ok = rename(tmp, path) == 0, saved = errno;
  if (!ok) unlink(tmp);
  ADJ_CHECK(ok, ADJ_ERR_IO, "checkpoint %s: writing %s or renaming it failed (%s); the previous checkpoint is kept",
            path, tmp, strerror(saved));
  return ADJ_SUCCESS;
}

int adj_checkpoint_save(const char *path, adj_layer *net, adj_optimizer *opt, const adj_rng *rng,
                        const adj_checkpoint_position *pos) {
  ADJ_CHECK(path && net && pos, ADJ_ERR_ARG, "adj_checkpoint_save: path, network and position are required");
  int rank;
  MPI_Comm_rank(adj_layer_comm(net), &rank);
  ck_writer w = {0};
  if (rank == 0) ck_write_header(&w, net, opt, rng, pos), ck_write_descriptors(&w, net);
  int status = ADJ_SUCCESS;
  for (int i = 0; i < adj_layer_parameter_count(net) && !status; i++)
    status = ck_write_parameter(&w, net, opt, i, rank == 0);
  if (!status) status = ck_write_buffers(&w, net, rank == 0);
  if (rank == 0 && !status) status = ck_write_file(path, &w);
  free(w.data);
  return adj_status_agree(adj_layer_comm(net), status, ADJ_WAIT_YIELD);
}

/* ---- load: verification on rank 0 ---------------------------------------------------------- */

/* The largest file a checkpoint of this network can be: every header field
 * at its limit, names of the longest length, two state buffers. */
static size_t ck_max_size(adj_layer *net) {
  size_t size = CK_HEADER_BYTES + CK_MAX_RNG_BYTES + 4;
  for (int i = 0; i < adj_layer_parameter_count(net); i++) {
    const adj_decomposition *layout = adj_layer_parameter(net, i)->layout;
    int64_t volume = 1;
    for (int d = 0; d < adj_decomposition_rank(layout); d++) volume *= adj_decomposition_global_shape(layout)[d];
    size += 4 + CK_MAX_NAME + 4 + 8 * ADJ_MAX_RANK + (size_t)volume * 3 * 8;
  }
  int n = ck_buffers(net, NULL);
  ck_buffer *buffers = n ? calloc((size_t)n, sizeof *buffers) : NULL;
  if (n && !buffers) return SIZE_MAX; /* the read then finds memory short itself */
  if (buffers) ck_buffers(net, buffers);
  size += 4;
  for (int k = 0; k < n; k++) size += 4 + CK_MAX_NAME + 8 + (size_t)buffers[k].volume * 8;
  free(buffers);
  return size;
}

/* Reads the whole file, which must be a regular file (file.h: a FIFO or a
 * device is refused at open) no larger than a checkpoint of this network can
 * be: an endless or sparse file would otherwise exhaust memory. */
static int ck_read_file(const char *path, adj_layer *net, uint8_t **data, size_t *size) {
  *data = NULL;
  int fd;
  int64_t bytes;
  ADJ_CALL(adj_file_open_input(path, "checkpoint", -1, &fd, &bytes));
  int status = ADJ_SUCCESS;
  size_t limit = ck_max_size(net);
  if ((uint64_t)bytes > limit)
    status = adj_error_set(ADJ_ERR_IO, "checkpoint %s: %lld bytes, more than a checkpoint of network %s can be (%zu)",
                           path, (long long)bytes, adj_layer_name(net), limit);
  else if (!(*data = malloc((size_t)bytes + 1)))
    status = adj_error_set(ADJ_ERR_MEM, "checkpoint %s: out of memory for %lld bytes", path, (long long)bytes);
  size_t got = 0;
  while (!status && got < (size_t)bytes) {
    ssize_t n = read(fd, *data + got, (size_t)bytes - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) status = adj_error_set(ADJ_ERR_IO, "checkpoint %s: cannot read it: %s", path,
                                       n < 0 ? strerror(errno) : "it shrank while being read");
    else got += (size_t)n;
  }
  close(fd);
  *size = got;
  return status;
}

/* Magic, size, checksum and version: is this an intact checkpoint at all? */
static int ck_check_envelope(const char *path, const uint8_t *data, size_t size) {
  ADJ_CHECK(size >= CK_HEADER_BYTES + 4, ADJ_ERR_IO, "checkpoint %s: truncated: %zu bytes, fewer than a header", path,
            size);
  ADJ_CHECK(!memcmp(data, ck_magic, sizeof ck_magic), ADJ_ERR_IO, "checkpoint %s: not an adjoin checkpoint (bad magic)",
            path);
  ck_reader tail = {data, size, size - 4, false};
  uint32_t stored = (uint32_t)ck_get_uint(&tail, 4), computed = (uint32_t)crc32_z(crc32_z(0, NULL, 0), data, size - 4);
  ADJ_CHECK(stored == computed, ADJ_ERR_IO,
            "checkpoint %s: CRC32 mismatch (stored %08x, computed %08x): the file is corrupted or truncated", path,
            stored, computed);
  ck_reader r = {data, size, sizeof ck_magic, false};
  uint32_t version = (uint32_t)ck_get_uint(&r, 4);
  ADJ_CHECK(version >= 1 && version <= ADJ_CHECKPOINT_VERSION, ADJ_ERR_IO,
            "checkpoint %s: format version %u, this build reads 1 to %d", path, version, ADJ_CHECKPOINT_VERSION);
  ADJ_CHECK(size >= ck_header_bytes(version) + 4, ADJ_ERR_IO, "checkpoint %s: truncated: %zu bytes, fewer than a "
            "header", path, size);
  return ADJ_SUCCESS;
}

static void ck_read_header(ck_reader *r, ck_header *h) {
  r->pos = sizeof ck_magic;
  uint32_t *fields[6] = {&h->version, &h->dtype, &h->optimizer_kind, &h->n_state, &h->n_parameters, &h->rng_bytes};
  for (int i = 0; i < 6; i++) *fields[i] = (uint32_t)ck_get_uint(r, 4);
  h->steps = (int64_t)ck_get_uint(r, 8);
  h->epoch = (int64_t)ck_get_uint(r, 8);
  h->batch = (int64_t)ck_get_uint(r, 8);
  h->seed = ck_get_uint(r, 8);
  h->batch_size = h->version == 1 ? 0 : (int64_t)ck_get_uint(r, 8);
}

/* The header against what the caller wants restored. */
static int ck_check_header(const char *path, const ck_header *h, adj_layer *net, adj_optimizer *opt, adj_rng *rng) {
  ADJ_CHECK(adj_dtype_valid((adj_dtype)h->dtype), ADJ_ERR_IO, "checkpoint %s: unknown dtype %u", path, h->dtype);
  ADJ_CHECK(adj_dtype_is_float((adj_dtype)h->dtype), ADJ_ERR_IO,
            "checkpoint %s: dtype %s, but network parameters are float32 or float64", path,
            adj_dtype_name((adj_dtype)h->dtype));
  ADJ_CHECK(h->n_parameters == (uint32_t)adj_layer_parameter_count(net), ADJ_ERR_IO,
            "checkpoint %s: holds %u parameters but the network %s has %d", path, h->n_parameters,
            adj_layer_name(net), adj_layer_parameter_count(net));
  adj_tensor state[2];
  int n_state = opt ? adj_optimizer_state_buffers(opt, state) : 0;
  ADJ_CHECK(!opt || (h->optimizer_kind == ck_optimizer_kind(opt) && h->n_state == (uint32_t)n_state), ADJ_ERR_IO,
            "checkpoint %s: optimizer kind %u with %u state buffers, but this run's is kind %u with %d", path,
            h->optimizer_kind, h->n_state, ck_optimizer_kind(opt), n_state);
  ADJ_CHECK(h->n_state <= 2, ADJ_ERR_IO, "checkpoint %s: %u optimizer state buffers (at most 2)", path, h->n_state);
  ADJ_CHECK(!rng || h->rng_bytes == adj_rng_state_size(rng), ADJ_ERR_IO,
            "checkpoint %s: generator state of %u bytes, this generator has %zu", path, h->rng_bytes,
            rng ? adj_rng_state_size(rng) : (size_t)0);
  ADJ_CHECK(h->rng_bytes <= CK_MAX_RNG_BYTES, ADJ_ERR_IO, "checkpoint %s: generator state of %u bytes (at most %u)",
            path, h->rng_bytes, CK_MAX_RNG_BYTES);
  const struct { const char *name; int64_t value; } counts[] = {
      {"optimizer step count", h->steps}, {"epoch", h->epoch}, {"batch", h->batch}, {"batch size", h->batch_size}};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
    ADJ_CHECK(counts[i].value >= 0 && counts[i].value <= CK_MAX_COUNT, ADJ_ERR_IO,
              "checkpoint %s: %s %lld is outside [0, 2^53]", path, counts[i].name, (long long)counts[i].value);
  return ADJ_SUCCESS;
}

/* The stored position against what the caller's run can continue from. */
static int ck_check_position(const char *path, const ck_header *h, const adj_checkpoint_expect *expect) {
  if (!expect) return ADJ_SUCCESS;
  ADJ_CHECK(expect->batches_per_epoch <= 0 || h->batch < expect->batches_per_epoch, ADJ_ERR_IO,
            "checkpoint %s: position epoch %lld batch %lld does not fit %lld batches per epoch", path,
            (long long)h->epoch, (long long)h->batch, (long long)expect->batches_per_epoch);
  ADJ_CHECK(expect->batch_size <= 0 || h->batch == 0 || h->batch_size == expect->batch_size, ADJ_ERR_IO,
            "checkpoint %s: saved after batch %lld of an epoch with batch size %lld; resuming mid-epoch needs the "
            "same batch size, not %lld%s",
            path, (long long)h->batch, (long long)h->batch_size, (long long)expect->batch_size,
            h->batch_size == 0 ? " (a version 1 file does not record it)" : "");
  return ADJ_SUCCESS;
}

/* Every stored value finite and of sane magnitude, Adam's second moments
 * non-negative (their square roots are taken): a file with a valid CRC can
 * still hold values no training run produces, and they would only surface
 * later as a NaN loss. */
static int ck_check_values(const char *path, ck_reader *r, const ck_header *h, adj_layer *net) {
  size_t pos = r->pos;
  for (int i = 0; i < adj_layer_parameter_count(net); i++) {
    const adj_parameter *p = adj_layer_parameter(net, i);
    int64_t volume = 1;
    for (int d = 0; d < adj_decomposition_rank(p->layout); d++)
      volume *= adj_decomposition_global_shape(p->layout)[d];
    for (uint32_t k = 0; k <= h->n_state; k++)
      for (int64_t e = 0; e < volume; e++) {
        double v = ck_get_f64(r);
        bool second_moment = h->optimizer_kind == ADJ_OPTIMIZER_ADAM && k == 2;
        ADJ_CHECK(isfinite(v) && fabs(v) <= ADJ_CHECKPOINT_MAX_MAGNITUDE && !(second_moment && v < 0), ADJ_ERR_IO,
                  "checkpoint %s: parameter %d ('%s') %s element %lld is %g%s", path, i, p->name,
                  k == 0 ? "value" : k == 1 ? "optimizer state 1" : "optimizer state 2", (long long)e, v,
                  second_moment && v < 0 ? " (a second moment must be >= 0)" : " (values must be finite, |v| <= 1e30)");
      }
  }
  r->pos = pos;
  return ADJ_SUCCESS;
}

/* Each stored parameter must have the network's name and global shape; adds
 * up the float64 payload the file must then hold. */
static int ck_check_descriptors(const char *path, ck_reader *r, adj_layer *net, int64_t *values) {
  *values = 0;
  for (int i = 0; i < adj_layer_parameter_count(net); i++) {
    const adj_parameter *p = adj_layer_parameter(net, i);
    uint32_t len = (uint32_t)ck_get_uint(r, 4);
    char name[CK_MAX_NAME + 1] = "";
    if (len <= CK_MAX_NAME && r->pos + len <= r->size) memcpy(name, r->data + r->pos, len), name[len] = '\0';
    r->pos += len;
    uint32_t rank = (uint32_t)ck_get_uint(r, 4);
    bool same = !strcmp(name, p->name) && rank == (uint32_t)adj_decomposition_rank(p->layout);
    /* The volume is the network's: stored extents are only compared, so a
     * hostile extent never enters arithmetic. */
    int64_t volume = 1;
    for (int d = 0; d < adj_decomposition_rank(p->layout); d++) {
      int64_t extent = same ? (int64_t)ck_get_uint(r, 8) : 0;
      same = same && extent == adj_decomposition_global_shape(p->layout)[d];
      volume *= adj_decomposition_global_shape(p->layout)[d];
    }
    ADJ_CHECK(!r->short_read, ADJ_ERR_IO, "checkpoint %s: truncated in the description of parameter %d", path, i);
    char shape[160];
    ADJ_CHECK(same, ADJ_ERR_IO, "checkpoint %s: parameter %d is '%s' of rank %u, but the network's is '%s' %s", path, i,
              name, rank, p->name,
              adj_shape_format(shape, sizeof shape, adj_decomposition_rank(p->layout),
                               adj_decomposition_global_shape(p->layout)));
    *values += volume;
  }
  return ADJ_SUCCESS;
}

/* One stored state buffer against the network's: name, volume, values
 * (finite, in range, a variance >= 0). */
static int ck_check_buffer(const char *path, ck_reader *r, int k, const ck_buffer *b) {
  uint32_t len = (uint32_t)ck_get_uint(r, 4);
  char name[CK_MAX_NAME + 1] = "";
  if (len <= CK_MAX_NAME && r->pos + len <= r->size) memcpy(name, r->data + r->pos, len), name[len] = '\0';
  r->pos += len;
  uint64_t volume = ck_get_uint(r, 8);
  ADJ_CHECK(!r->short_read && !strcmp(name, ck_buffer_name(b)) && volume == (uint64_t)b->volume, ADJ_ERR_IO,
            "checkpoint %s: state buffer %d is '%s' of %llu values, but the network's is '%s' of %lld (batch norm "
            "stage %s)", path, k, name, (unsigned long long)volume, ck_buffer_name(b), (long long)b->volume,
            adj_layer_name(b->stage));
  for (int64_t e = 0; e < b->volume; e++) {
    double v = ck_get_f64(r);
    ADJ_CHECK(r->short_read || (isfinite(v) && fabs(v) <= ADJ_CHECKPOINT_MAX_MAGNITUDE && !(b->variance && v < 0)),
              ADJ_ERR_IO, "checkpoint %s: state buffer %d ('%s') element %lld is %g (values must be finite, "
              "|v| <= 1e30%s)", path, k, name, (long long)e, v, b->variance ? ", a variance >= 0" : "");
  }
  ADJ_CHECK(!r->short_read, ADJ_ERR_IO, "checkpoint %s: truncated in state buffer %d", path, k);
  return ADJ_SUCCESS;
}

/* Version 3's state section, from r's position, against the network's state
 * buffers; an older file must come from a network without any. */
static int ck_check_buffers(const char *path, ck_reader *r, const ck_header *h, adj_layer *net) {
  int n = ck_buffers(net, NULL);
  if (h->version < 3) {
    ADJ_CHECK(n == 0, ADJ_ERR_IO, "checkpoint %s: version %u holds no batch norm running statistics, but network %s "
              "has %d state buffers", path, h->version, adj_layer_name(net), n);
    return ADJ_SUCCESS;
  }
  uint32_t count = (uint32_t)ck_get_uint(r, 4);
  ADJ_CHECK(!r->short_read && count == (uint32_t)n, ADJ_ERR_IO,
            "checkpoint %s: holds %u state buffers but the network %s has %d", path, count, adj_layer_name(net), n);
  ck_buffer *buffers = calloc((size_t)n + 1, sizeof *buffers);
  ADJ_CHECK(buffers, ADJ_ERR_MEM, "checkpoint %s: out of memory", path);
  ck_buffers(net, buffers);
  int status = ADJ_SUCCESS;
  for (int k = 0; k < n && !status; k++) status = ck_check_buffer(path, r, k, &buffers[k]);
  free(buffers);
  return status;
}

/* Reads and verifies the whole file; on success r is positioned at the
 * tensors and h holds the header. */
static int ck_verify(const char *path, adj_layer *net, adj_optimizer *opt, adj_rng *rng,
                     const adj_checkpoint_expect *expect, ck_reader *r, ck_header *h) {
  uint8_t *data = NULL;
  size_t size = 0;
  int status = ck_read_file(path, net, &data, &size);
  *r = (ck_reader){data, size, 0, false};
  ADJ_CALL(status);
  ADJ_CALL(ck_check_envelope(path, data, size));
  ck_read_header(r, h);
  ADJ_CALL(ck_check_header(path, h, net, opt, rng));
  ADJ_CALL(ck_check_position(path, h, expect));
  size_t state_at = r->pos;
  ADJ_CHECK(h->rng_bytes <= size - state_at, ADJ_ERR_IO, "checkpoint %s: generator state of %u bytes runs past the "
            "end of the file", path, h->rng_bytes);
  if (rng && adj_rng_state_check(rng, data + state_at, h->rng_bytes)) {
    char why[256]; /* the message is rewritten in place, so copy it first */
    snprintf(why, sizeof why, "%s", adj_last_error());
    return adj_error_set(ADJ_ERR_IO, "checkpoint %s: %s", path, why);
  }
  r->pos += h->rng_bytes;
  int64_t values;
  ADJ_CALL(ck_check_descriptors(path, r, net, &values));
  ck_reader state = *r;
  state.pos += (size_t)values * (1 + h->n_state) * 8;
  ADJ_CHECK(state.pos + 4 <= size, ADJ_ERR_IO, "checkpoint %s: %zu bytes, fewer than its header describes (%zu)", path,
            size, state.pos + 4);
  ADJ_CALL(ck_check_buffers(path, &state, h, net));
  size_t expected = state.pos + 4;
  ADJ_CHECK(expected == size, ADJ_ERR_IO, "checkpoint %s: %zu bytes, but its header describes %zu", path, size,
            expected);
  return ck_check_values(path, r, h, net);
}

/* ---- load: distribution ------------------------------------------------------------------- */

/* Every rank gets the header and the generator state from rank 0. */
static int ck_share_header(MPI_Comm comm, const ck_reader *r, ck_header *h, uint8_t **rng_state) {
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Ibcast(h, (int)sizeof *h, MPI_BYTE, 0, comm, &request));
  ADJ_CALL(adj_wait_all(1, &request, ADJ_WAIT_YIELD));
  *rng_state = malloc(h->rng_bytes + 1);
  int rank;
  MPI_Comm_rank(comm, &rank);
  if (*rng_state && rank == 0) memcpy(*rng_state, r->data + ck_header_bytes(h->version), h->rng_bytes);
  int status = *rng_state ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "checkpoint: out of memory");
  ADJ_CALL(adj_status_agree(comm, status, ADJ_WAIT_YIELD));
  ADJ_CALL_MPI(MPI_Ibcast(*rng_state, (int)h->rng_bytes, MPI_BYTE, 0, comm, &request));
  return adj_wait_all(1, &request, ADJ_WAIT_YIELD);
}

/* Rank 0 decodes each stored part of parameter i (value, then the state
 * buffers) and scatters it; parts the caller does not restore are skipped. */
static int ck_read_parameter(ck_reader *r, const ck_header *h, adj_layer *net, adj_optimizer *opt, int index,
                             bool root) {
  adj_tensor parts[3], whole;
  int n = ck_parts(net, opt, index, parts), status = ADJ_SUCCESS;
  ADJ_CALL(ck_whole(net, index, root, &whole));
  for (int k = 0; k < 1 + (int)h->n_state && !status; k++) {
    for (int64_t e = 0; root && e < adj_tensor_volume(&whole); e++) adj_tensor_set(&whole, e, ck_get_f64(r));
    if (k < n) status = adj_layer_move_parameter_data(net, index, 0, true, &parts[k], root ? &whole : NULL);
  }
  adj_tensor_destroy(&whole);
  return status;
}

/* Rank 0 decodes one verified buffer and sends it to the workers holding it. */
static int ck_read_buffer(void *ctx, adj_layer *net, const ck_buffer *b, double *whole, bool root) {
  ck_reader *r = ctx;
  if (root) {
    size_t name_bytes = (size_t)ck_get_uint(r, 4);
    r->pos += name_bytes + 8; /* name and volume, verified already */
    for (int64_t e = 0; e < b->volume; e++) whole[e] = ck_get_f64(r);
  }
  return ck_scatter_buffer(net, b, whole);
}

static int ck_read_buffers(ck_reader *r, adj_layer *net, bool root) {
  if (root && ck_buffers(net, NULL)) ck_get_uint(r, 4); /* the count, verified already */
  return ck_each_buffer(net, root, ck_read_buffer, r);
}

static int ck_restore(ck_reader *r, const ck_header *h, adj_layer *net, adj_optimizer *opt, adj_rng *rng,
                      const uint8_t *rng_state, adj_checkpoint_position *pos, bool root) {
  for (int i = 0; i < adj_layer_parameter_count(net); i++) ADJ_CALL(ck_read_parameter(r, h, net, opt, i, root));
  ADJ_CALL(ck_read_buffers(r, net, root));
  if (opt) ADJ_CALL(adj_optimizer_set_steps(opt, h->steps));
  if (rng) ADJ_CALL(adj_rng_state_load(rng, rng_state, h->rng_bytes));
  if (pos)
    *pos = (adj_checkpoint_position){.epoch = h->epoch, .batch = h->batch, .seed = h->seed, .batch_size = h->batch_size};
  return ADJ_SUCCESS;
}

int adj_checkpoint_load(const char *path, adj_layer *net, adj_optimizer *opt, adj_rng *rng,
                        adj_checkpoint_position *pos) {
  return adj_checkpoint_load_expect(path, net, opt, rng, pos, NULL);
}

int adj_checkpoint_load_expect(const char *path, adj_layer *net, adj_optimizer *opt, adj_rng *rng,
                               adj_checkpoint_position *pos, const adj_checkpoint_expect *expect) {
  ADJ_CHECK(path && net, ADJ_ERR_ARG, "adj_checkpoint_load: path and network are required (got %s, %s)",
            path ? "a path" : "NULL", net ? "a network" : "NULL");
  MPI_Comm comm = adj_layer_comm(net);
  int rank;
  MPI_Comm_rank(comm, &rank);
  ck_reader r = {0};
  ck_header h = {0};
  int status = rank == 0 ? ck_verify(path, net, opt, rng, expect, &r, &h) : ADJ_SUCCESS;
  status = adj_status_agree(comm, status, ADJ_WAIT_YIELD);
  uint8_t *rng_state = NULL;
  if (!status) status = ck_share_header(comm, &r, &h, &rng_state);
  if (!status) status = ck_restore(&r, &h, net, opt, rng, rng_state, pos, rank == 0);
  free(rng_state);
  free((void *)r.data);
  return status;
}
