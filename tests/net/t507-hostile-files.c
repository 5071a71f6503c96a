/* Hostile files: checkpoints with a valid CRC but out-of-range contents
 * (generator index, step count, an integer dtype, non-finite or absurd values, a mid-epoch
 * position of another batch size), checkpoint targets and sources that are
 * not regular files (FIFO, directory, a symlink planted at the temporary
 * name, a sparse terabyte), IDX files that never end or lie about their size,
 * and training that diverges.  Each must end in a clear error on every rank,
 * change nothing in the network, and leave every file it does not own
 * byte-identical. */
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "adjoin/dataset.h"
#include "net_check.h"

enum { BATCH = 8, SAMPLES = 45 };

/* ---- files, touched by rank 0 only ------------------------------------------------------ */

static bool same_bytes(const char *path, const unsigned char *data, long size) {
  long now = -1;
  unsigned char *current = nc_read_file(path, &now);
  bool same = current && now == size && !memcmp(current, data, (size_t)size);
  free(current);
  return same;
}

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Where the first parameter's values start, and its volume (format:
 * docs/checkpoint.md, version 2: 72-byte header, then R bytes of generator
 * state, then the descriptors). */
static long first_values(const unsigned char *d, long *volume) {
  uint32_t n_parameters = (uint32_t)get_le(d + 24, 4), rng_bytes = (uint32_t)get_le(d + 28, 4);
  long pos = 72 + rng_bytes;
  *volume = 0;
  for (uint32_t i = 0; i < n_parameters; i++) {
    pos += 4 + (long)get_le(d + pos, 4);
    uint32_t rank = (uint32_t)get_le(d + pos, 4);
    long v = 1;
    for (uint32_t k = 0; k < rank; k++) v *= (long)get_le(d + pos + 4 + 8 * k, 8);
    if (i == 0) *volume = v;
    pos += 4 + 8 * rank;
  }
  return pos;
}

static void fix_crc(unsigned char *d, long size) {
  put_le(d + size - 4, crc32(0L, d, (uInt)(size - 4)), 4);
}

/* ---- crafted checkpoints ---------------------------------------------------------------- */

typedef struct craft {
  const char *label;
  void (*edit)(unsigned char *d, long size);
  const char *phrase;
} craft;

/* The generator state follows the 72-byte header: 624 8-byte words, then the
 * 4-byte Mersenne-Twister index. */
static void mt_index(unsigned char *d, int32_t index) { put_le(d + 72 + 624 * 8, (uint32_t)index, 4); }
static void index_int_min(unsigned char *d, long size) { (void)size, mt_index(d, INT32_MIN); }
static void index_minus_one(unsigned char *d, long size) { (void)size, mt_index(d, -1); }
static void index_625(unsigned char *d, long size) { (void)size, mt_index(d, 625); }
static void steps_minus_one(unsigned char *d, long size) { (void)size, put_le(d + 32, UINT64_MAX, 8); }
static void epoch_minus_one(unsigned char *d, long size) { (void)size, put_le(d + 40, UINT64_MAX, 8); }
static void huge_rng_bytes(unsigned char *d, long size) { (void)size, put_le(d + 28, UINT32_MAX, 4); }
static void dtype_int32(unsigned char *d, long size) { (void)size, put_le(d + 12, ADJ_INT32, 4); }
static void put_value(unsigned char *d, long at, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  put_le(d + at, bits, 8);
}
static void weight_nan(unsigned char *d, long size) {
  long volume, at = first_values(d, &volume);
  (void)size, put_value(d, at + 8 * 3, NAN);
}
static void weight_inf(unsigned char *d, long size) {
  long volume, at = first_values(d, &volume);
  (void)size, put_value(d, at, -INFINITY);
}
static void weight_1e300(unsigned char *d, long size) {
  long volume, at = first_values(d, &volume);
  (void)size, put_value(d, at, 1e300);
}
/* Adam's second moment of the first parameter follows its value and first moment. */
static void negative_second_moment(unsigned char *d, long size) {
  long volume, at = first_values(d, &volume);
  (void)size, put_value(d, at + 2 * 8 * volume, -1.0);
}

static void expect_refusal(adj_test *t, const char *label, int status, const char *phrase) {
  adj_test_expect_error(t, label, status, ADJ_TEST_ANY_ERROR, phrase);
}

/* b must still be its fresh self: parameters bitwise those of `fresh`, no
 * optimizer steps, at the start of the run. */
static void expect_untouched(adj_test *t, const char *label, nc_run *b, nc_run *fresh) {
  bool bitwise;
  nc_parameter_diff(b->net, fresh->net, &bitwise);
  ADJ_TEST_CHECK(t, bitwise && adj_optimizer_steps(b->opt) == 0 && adj_trainer_epoch(b->trainer) == 0 &&
                        adj_trainer_batch(b->trainer) == 0,
                 "%s: the refused load changed the trainer", label);
}

static void crafted_checkpoints(adj_test *t, const char *dir, const char *layout, adj_dataset *data) {
  char good[600], bad[600];
  snprintf(good, sizeof good, "%s/good.ckpt", dir);
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
  nc_run a, b, fresh;
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, BATCH, data, 5050, &a));
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, BATCH, data, 5051, &b));
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, BATCH, data, 5051, &fresh));
  if (!a.trainer || !b.trainer || !fresh.trainer) goto done;
  adj_train_stats stats;
  ADJ_TEST_OK(t, adj_trainer_run(a.trainer, 2, NULL, NULL, &stats));
  ADJ_TEST_OK(t, adj_trainer_save(a.trainer, good));
  const craft cases[] = {
      {"MT index INT_MIN (valid CRC)", index_int_min, "Mersenne-Twister index -2147483648"},
      {"MT index -1 (valid CRC)", index_minus_one, "Mersenne-Twister index -1"},
      {"MT index 625 (valid CRC)", index_625, "Mersenne-Twister index 625"},
      {"step count -1 (valid CRC)", steps_minus_one, "optimizer step count -1"},
      {"epoch -1 (valid CRC)", epoch_minus_one, "epoch -1"},
      {"generator 2^32-1 bytes (valid CRC)", huge_rng_bytes, "generator state of 4294967295 bytes"},
      {"dtype int32 (valid CRC)", dtype_int32, "dtype int32, but network parameters are float32 or float64"},
      {"NaN weight (valid CRC)", weight_nan, "element 3 is nan"},
      {"-Inf weight (valid CRC)", weight_inf, "is -inf"},
      {"1e300 weight (valid CRC)", weight_1e300, "is 1e+300"},
      {"negative Adam 2nd moment (valid CRC)", negative_second_moment, "second moment must be >= 0"},
  };
  long size = 0;
  unsigned char *original = t->rank == 0 ? nc_read_file(good, &size) : NULL;
  ADJ_TEST_CHECK(t, t->rank != 0 || (original && size > 6000), "cannot read %s", good);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (t->rank == 0 && original) {
      unsigned char *copy = malloc((size_t)size);
      memcpy(copy, original, (size_t)size);
      cases[i].edit(copy, size);
      fix_crc(copy, size);
      nc_write_file(bad, copy, size);
      free(copy);
    }
    expect_refusal(t, cases[i].label, adj_trainer_load(b.trainer, bad), cases[i].phrase);
    expect_untouched(t, cases[i].label, &b, &fresh);
  }
  /* A mid-epoch checkpoint (batch 2 of batch size 8) into a run of batch size 4:
   * the rest of the epoch would be other samples. */
  nc_run other;
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, 4, data, 5051, &other));
  if (other.trainer) {
    nc_run other_fresh;
    ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, 4, data, 5051, &other_fresh));
    expect_refusal(t, "mid-epoch, batch 8 into batch 4", adj_trainer_load(other.trainer, good), "same batch size");
    if (other_fresh.trainer) expect_untouched(t, "mid-epoch batch size", &other, &other_fresh);
    nc_run_destroy(&other_fresh);
  }
  nc_run_destroy(&other);
  if (t->rank == 0 && original)
    ADJ_TEST_CHECK(t, same_bytes(good, original, size), "loading changed the checkpoint file");
  /* The untouched original still loads. */
  ADJ_TEST_OK(t, adj_trainer_load(b.trainer, good));
  ADJ_TEST_CHECK(t, adj_trainer_batch(b.trainer) == 2, "good checkpoint: batch %lld", (long long)adj_trainer_batch(b.trainer));
  free(original);
done:
  nc_run_destroy(&a), nc_run_destroy(&b), nc_run_destroy(&fresh);
}

/* ---- targets and sources that are not regular files --------------------------------------- */

static void special_files(adj_test *t, const char *dir, const char *layout, adj_dataset *data) {
  char path[600], tmp_link[700], victim[600], fifo[600], sparse[600];
  snprintf(path, sizeof path, "%s/run.ckpt", dir);
  snprintf(victim, sizeof victim, "%s/victim.txt", dir);
  snprintf(fifo, sizeof fifo, "%s/fifo.ckpt", dir);
  snprintf(sparse, sizeof sparse, "%s/sparse.ckpt", dir);
  static const char victim_text[] = "a file the checkpoint must never overwrite\n";
  if (t->rank == 0) {
    nc_write_file(victim, victim_text, (long)strlen(victim_text));
    /* The old fixed temporary names: a symlink planted at each. */
    snprintf(tmp_link, sizeof tmp_link, "%s.tmp", path);
    ADJ_TEST_CHECK(t, symlink(victim, tmp_link) == 0, "cannot plant %s", tmp_link);
    ADJ_TEST_CHECK(t, mkfifo(fifo, 0600) == 0, "cannot make FIFO %s", fifo);
    int fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ADJ_TEST_CHECK(t, fd >= 0 && ftruncate(fd, (off_t)1 << 40) == 0, "cannot make a sparse 1 TB %s", sparse);
    if (fd >= 0) close(fd);
  }
  nc_run a;
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, BATCH, data, 5052, &a));
  if (!a.trainer) goto done;
  ADJ_TEST_OK(t, adj_trainer_save(a.trainer, path));
  if (t->rank == 0)
    ADJ_TEST_CHECK(t, same_bytes(victim, (const unsigned char *)victim_text, (long)strlen(victim_text)),
                   "the save wrote through the symlink at %s", tmp_link);
  adj_test_report(t, "%-36s saved beside it; the symlink's target is byte-identical", "symlink planted at PATH.tmp");
  expect_refusal(t, "save onto a FIFO", adj_trainer_save(a.trainer, fifo), "not a regular file");
  expect_refusal(t, "save onto a directory", adj_trainer_save(a.trainer, dir), "not a regular file");
  expect_refusal(t, "load from a FIFO", adj_trainer_load(a.trainer, fifo), "not a regular file");
  expect_refusal(t, "load from /dev/zero", adj_trainer_load(a.trainer, "/dev/zero"), "not a regular file");
  expect_refusal(t, "load a sparse 1 TB file", adj_trainer_load(a.trainer, sparse), "more than a checkpoint");
  char missing[700];
  snprintf(missing, sizeof missing, "%s/no-such-dir/run.ckpt", dir);
  expect_refusal(t, "save into a missing directory", adj_trainer_save(a.trainer, missing), "does not exist");
  if (t->rank == 0) {
    struct stat st;
    ADJ_TEST_CHECK(t, stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO was replaced");
  }
  /* A full disk, simulated by a file size limit on rank 0: the save fails
   * and the previous checkpoint stays byte-identical. */
  long size = 0;
  unsigned char *before = t->rank == 0 ? nc_read_file(path, &size) : NULL;
  adj_train_stats stats;
  ADJ_TEST_OK(t, adj_trainer_run(a.trainer, 1, NULL, NULL, &stats));
  struct rlimit old = {0};
  if (t->rank == 0) {
    signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old);
    struct rlimit small = {.rlim_cur = 4096, .rlim_max = old.rlim_max};
    setrlimit(RLIMIT_FSIZE, &small);
  }
  expect_refusal(t, "save on a full disk", adj_trainer_save(a.trainer, path), "previous checkpoint is kept");
  if (t->rank == 0) {
    setrlimit(RLIMIT_FSIZE, &old);
    ADJ_TEST_CHECK(t, before && same_bytes(path, before, size), "the failed save changed the previous checkpoint");
  }
  free(before);
done:
  nc_run_destroy(&a);
}

/* ---- IDX files that never end or lie ------------------------------------------------------ */

/* Images and labels with ten classes; gzip files decompress into dir/cache. */
static int open_set(adj_test *t, const char *dir, const char *images, const char *labels, adj_dataset **ds) {
  char cache[600];
  snprintf(cache, sizeof cache, "%s/cache", dir);
  adj_dataset_config c = {.inputs = images, .targets = labels, .n_classes = 10, .cache_dir = cache};
  return adj_dataset_open(t->comm, &c, ds);
}

static void expect_load_error(adj_test *t, const char *dir, const char *label, const char *images, const char *labels,
                              const char *phrase) {
  adj_dataset *ds = NULL;
  double start = MPI_Wtime();
  int status = open_set(t, dir, images, labels, &ds);
  double seconds = MPI_Wtime() - start;
  ADJ_TEST_CHECK(t, status == ADJ_ERR_IO && !ds && strstr(adj_last_error(), phrase),
                 "%s: status %s, message '%s' (wanted '%s')", label, adj_status_name(status), adj_last_error(), phrase);
  adj_test_report(t, "%-36s refused in %.3f s: %s", label, seconds, adj_last_error());
  adj_dataset_destroy(&ds);
}

static void hostile_idx(adj_test *t, const char *dir) {
  enum { N = 4, SIDE = 28 };
  char images[600], labels[600], fifo[600], sparse[600], zeros_gz[600], lying_gz[600];
  snprintf(images, sizeof images, "%s/ok-images-idx3-ubyte", dir);
  snprintf(labels, sizeof labels, "%s/ok-labels-idx1-ubyte", dir);
  snprintf(fifo, sizeof fifo, "%s/fifo-images", dir);
  snprintf(sparse, sizeof sparse, "%s/sparse-images", dir);
  snprintf(zeros_gz, sizeof zeros_gz, "%s/trailing-images.gz", dir);
  snprintf(lying_gz, sizeof lying_gz, "%s/lying-images.gz", dir);
  unsigned char head[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, SIDE, 0, 0, 0, SIDE};
  if (t->rank == 0) {
    static unsigned char pixels[N * SIDE * SIDE];
    ADJ_TEST_OK(t, adj_idx_write_ubyte(images, 3, (int64_t[]){N, SIDE, SIDE}, pixels, false));
    ADJ_TEST_OK(t, adj_idx_write_ubyte(labels, 1, (int64_t[]){N}, (const uint8_t[]){1, 2, 3, 4}, false));
    ADJ_TEST_CHECK(t, mkfifo(fifo, 0600) == 0, "cannot make FIFO %s", fifo);
    /* A valid header and payload, then a terabyte of (sparse) zeros. */
    int fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ADJ_TEST_CHECK(t, fd >= 0 && write(fd, head, sizeof head) == (ssize_t)sizeof head &&
                          ftruncate(fd, (off_t)1 << 40) == 0, "cannot make %s", sparse);
    if (fd >= 0) close(fd);
    /* A gzip stream: header, payload, then 16 MB of zeros (16 KB compressed). */
    gzFile g = gzopen(zeros_gz, "wb9");
    static unsigned char block[1 << 20];
    gzwrite(g, head, sizeof head);
    gzwrite(g, pixels, sizeof pixels);
    for (int i = 0; i < 16; i++) gzwrite(g, block, sizeof block);
    gzclose(g);
    /* A small gzip file whose header claims 2^31 - 1 images. */
    unsigned char lie[16] = {0, 0, 8, 3, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, SIDE, 0, 0, 0, SIDE};
    g = gzopen(lying_gz, "wb9");
    gzwrite(g, lie, sizeof lie);
    for (int i = 0; i < 4; i++) gzwrite(g, block, sizeof block);
    gzclose(g);
  }
  MPI_Barrier(t->comm); /* every rank opens the files rank 0 wrote */
  expect_load_error(t, dir, "images from a FIFO", fifo, labels, "not a regular file");
  expect_load_error(t, dir, "labels from /dev/zero", images, "/dev/zero", "not a regular file");
  expect_load_error(t, dir, "valid images + 1 TB of zeros", sparse, labels, "has trailing data");
  expect_load_error(t, dir, "gzip: payload + 16 MB of zeros", zeros_gz, labels, "has trailing data");
  expect_load_error(t, dir, "gzip header claiming 2^31-1 images", lying_gz, labels, "hold at most");
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(t, open_set(t, dir, images, labels, &ds));
  adj_dataset_destroy(&ds);
}

/* ---- divergence ------------------------------------------------------------------------- */

/* A run whose output bias holds a NaN (as a diverged step leaves it):
 * the next loss is NaN and the run must stop at once, on every rank. */
static void divergence(adj_test *t, const char *layout, adj_dataset *data) {
  adj_network_build_options o = {.dtype = ADJ_FLOAT32, .batch = BATCH};
  adj_layer *net = NULL;
  adj_optimizer *opt = NULL;
  adj_trainer *trainer = NULL;
  ADJ_TEST_OK(t, nc_build_network("lenet", layout, &o, &net));
  if (net) ADJ_TEST_OK(t, adj_network_init_uniform(net, 7));
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.1};
  if (net) ADJ_TEST_OK(t, adj_optimizer_create(net, &oc, &opt));
  adj_trainer_config tc = {.network = net, .optimizer = opt, .train = data, .seed = 7};
  if (opt) ADJ_TEST_OK(t, adj_trainer_create(&tc, &trainer));
  if (trainer) {
    adj_train_stats stats;
    ADJ_TEST_OK(t, adj_trainer_run(trainer, 1, NULL, NULL, &stats));
    /* The output layer's bias: the logits, hence the loss, become NaN. */
    adj_tensor *w = &adj_layer_parameter(net, adj_layer_parameter_count(net) - 1)->value;
    if (adj_tensor_volume(w)) adj_tensor_set(w, 0, NAN);
    int status = adj_trainer_run(trainer, -1, NULL, NULL, &stats);
    ADJ_TEST_CHECK(t, status == ADJ_ERR_NUMERIC && strstr(adj_last_error(), "training diverged"),
                   "a NaN weight: status %s, '%s'", adj_status_name(status), adj_last_error());
    ADJ_TEST_CHECK(t, stats.batches <= 1, "a NaN weight: %lld batches ran before the stop", (long long)stats.batches);
    adj_test_report(t, "%-36s stopped: %s", "NaN weight during training", adj_last_error());
  }
  adj_optimizer_config inf = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.1, .weight_decay = INFINITY};
  adj_optimizer *bad = NULL;
  if (net) expect_refusal(t, "weight decay inf", adj_optimizer_create(net, &inf, &bad), "weight decay inf");
  adj_trainer_destroy(&trainer);
  adj_optimizer_destroy(&opt);
  adj_layer_destroy(&net);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t507-hostile-files");
  char dir[256];
  nc_make_dir(&t, "t507", dir, sizeof dir);
  adj_dataset *data = nc_synthetic(SAMPLES, 505);
  const char *layouts[NC_MAX_LAYOUTS];
  const char *widest = layouts[nc_layouts_fitting(t.size, layouts) - 1];
  crafted_checkpoints(&t, dir, widest, data);
  special_files(&t, dir, widest, data);
  hostile_idx(&t, dir);
  divergence(&t, widest, data);
  adj_dataset_destroy(&data);
  nc_remove_dir(&t, dir);
  return adj_test_finish(&t);
}
