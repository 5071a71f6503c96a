/* Checkpoints: a checkpoint written by one layout loads into another
 * (distributed into sequential and back) with parameters bit-identical and
 * Adam's moments, step count, shuffle state and position restored, so both
 * runs go on to the same parameters; corrupted, truncated, foreign and
 * mismatched files are refused on every rank with a message and change
 * nothing. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "net_check.h"

enum { BATCH = 8, SAMPLES = 45, STEPS = 3, MORE_STEPS = 4 };

/* ---- files, touched by rank 0 only --------------------------------------------------------- */

/* Writes `src` to `dst` after `edit` changed it; with fix_crc the checksum
 * is recomputed, so only the deeper checks can catch the change. */
static void tamper(adj_test *t, const char *src, const char *dst, void (*edit)(unsigned char *, long *), bool fix_crc) {
  if (t->rank != 0) return;
  long size = 0;
  unsigned char *data = nc_read_file(src, &size);
  ADJ_TEST_CHECK(t, data && size > 100, "cannot read %s", src);
  if (!data) return;
  edit(data, &size);
  if (fix_crc) {
    uLong crc = crc32(0L, data, (uInt)(size - 4));
    for (int i = 0; i < 4; i++) data[size - 4 + i] = (unsigned char)(crc >> (8 * i));
  }
  nc_write_file(dst, data, size);
  free(data);
}

static void flip_payload_byte(unsigned char *d, long *size) { d[*size - 100] ^= 0x10; }
static void truncate_tail(unsigned char *d, long *size) { *size -= 1000; (void)d; }
static void break_magic(unsigned char *d, long *size) { d[0] = 'X'; (void)size; }
/* The first parameter's name starts after the 64-byte header and the
 * generator state; find "weight" and misspell it. */
static void rename_parameter(unsigned char *d, long *size) {
  for (long i = 64; i + 6 < *size; i++)
    if (!memcmp(d + i, "weight", 6)) {
      d[i] = 'W';
      return;
    }
}

/* ---- checks ------------------------------------------------------------------------------ */

/* Trains `from` a few steps, saves, loads into `to` (started from other
 * parameters), then runs both on. */
static void round_trip(adj_test *t, const char *dir, const char *from, const char *to, adj_dataset *data) {
  char path[600];
  snprintf(path, sizeof path, "%s/%s-to-%s.ckpt", dir, from, to);
  nc_run a, b;
  ADJ_TEST_OK(t, nc_run_create(from, ADJ_FLOAT64, BATCH, data, 5020, &a));
  ADJ_TEST_OK(t, nc_run_create(to, ADJ_FLOAT64, BATCH, data, 5021, &b));
  if (a.trainer && b.trainer) {
    adj_train_stats stats;
    ADJ_TEST_OK(t, adj_trainer_run(a.trainer, STEPS, NULL, NULL, &stats));
    ADJ_TEST_OK(t, adj_trainer_save(a.trainer, path));
    ADJ_TEST_OK(t, adj_trainer_load(b.trainer, path));
    bool bitwise;
    double diff = nc_parameter_diff(b.net, a.net, &bitwise);
    ADJ_TEST_CHECK(t, bitwise, "%s -> %s: loaded parameters differ by %.3e", from, to, diff);
    ADJ_TEST_CHECK(t, adj_optimizer_steps(b.opt) == STEPS && adj_trainer_batch(b.trainer) == STEPS,
                   "%s -> %s: steps %lld, batch %lld after loading", from, to, (long long)adj_optimizer_steps(b.opt),
                   (long long)adj_trainer_batch(b.trainer));
    /* Without the moments, the step count and the shuffle state the next
     * updates would differ by about the learning rate. */
    ADJ_TEST_OK(t, adj_trainer_run(a.trainer, MORE_STEPS, NULL, NULL, &stats));
    ADJ_TEST_OK(t, adj_trainer_run(b.trainer, MORE_STEPS, NULL, NULL, &stats));
    double after = nc_parameter_diff(b.net, a.net, &bitwise);
    adj_test_report(t, "%-10s -> %-10s float64 %d ranks: loaded bit-identical %s, after %d more Adam steps (into "
                    "the next epoch) max rel diff %.3e", from, to, t->size, diff == 0 ? "yes" : "no", MORE_STEPS, after);
    double tol = adj_test_training_tolerance(ADJ_FLOAT64, nc_reduction_length(BATCH), MORE_STEPS);
    ADJ_TEST_CHECK(t, after < tol, "%s -> %s: runs diverge by %.3e after loading (tolerance %.1e)", from, to, after,
                   tol);
  }
  nc_run_destroy(&a), nc_run_destroy(&b);
}

static void refuse_each(adj_test *t, const char *dir, const char *layout, adj_dataset *data, nc_run *a,
                        nc_run *b);

/* Every bad file is refused and leaves the network as it was. */
static void refusals(adj_test *t, const char *dir, const char *layout, adj_dataset *data) {
  nc_run a, b;
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, BATCH, data, 5022, &a));
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, BATCH, data, 5023, &b));
  if (a.trainer && b.trainer) refuse_each(t, dir, layout, data, &a, &b);
  nc_run_destroy(&a), nc_run_destroy(&b);
}

static void refuse_each(adj_test *t, const char *dir, const char *layout, adj_dataset *data, nc_run *a,
                        nc_run *b) {
  char good[600], bad[600], missing[600];
  snprintf(good, sizeof good, "%s/good.ckpt", dir);
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
  snprintf(missing, sizeof missing, "%s/missing.ckpt", dir);
  ADJ_TEST_OK(t, adj_trainer_save(a->trainer, good));
  struct { const char *label; void (*edit)(unsigned char *, long *); bool fix_crc; const char *phrase; } cases[] = {
      {"one flipped payload bit", flip_payload_byte, false, "CRC32 mismatch"},
      {"truncated by 1000 bytes", truncate_tail, false, "CRC32 mismatch"},
      {"foreign magic number", break_magic, false, "not an adjoin checkpoint"},
      {"renamed parameter (valid CRC)", rename_parameter, true, "but the network's is 'weight'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tamper(t, good, bad, cases[i].edit, cases[i].fix_crc);
    adj_test_expect_error(t, cases[i].label, adj_trainer_load(b->trainer, bad), ADJ_TEST_ANY_ERROR, cases[i].phrase);
  }
  adj_test_expect_error(t, "missing file", adj_trainer_load(b->trainer, missing), ADJ_TEST_ANY_ERROR, "cannot open");
  adj_optimizer *sgd = NULL;
  adj_optimizer_config sgd_config = {.kind = ADJ_OPTIMIZER_SGD, .learning_rate = 0.1, .momentum = 0.9};
  ADJ_TEST_OK(t, adj_optimizer_create(b->net, &sgd_config, &sgd));
  if (sgd) adj_test_expect_error(t, "Adam state into SGD", adj_checkpoint_load(good, b->net, sgd, NULL, NULL),
                                 ADJ_TEST_ANY_ERROR, "optimizer kind");
  adj_optimizer_destroy(&sgd);
  bool bitwise;
  nc_run fresh;
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT64, BATCH, data, 5023, &fresh));
  if (fresh.net) nc_parameter_diff(b->net, fresh.net, &bitwise);
  ADJ_TEST_CHECK(t, fresh.net && bitwise && adj_optimizer_steps(b->opt) == 0, "refused loads changed the network");
  nc_run_destroy(&fresh);
  /* A save that cannot complete (a full disk) keeps the old checkpoint:
   * t507-hostile-files. */
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t502-checkpoint");
  char dir[256];
  nc_make_dir(&t, "t502", dir, sizeof dir);
  adj_dataset *data = nc_synthetic(SAMPLES, 502);
  const char *layouts[NC_MAX_LAYOUTS];
  int n = nc_layouts_fitting(t.size, layouts);
  const char *widest = layouts[n - 1];
  round_trip(&t, dir, widest, "sequential", data);
  round_trip(&t, dir, "sequential", widest, data);
  if (n > 2) round_trip(&t, dir, layouts[1], widest, data);
  refusals(&t, dir, widest, data);
  adj_dataset_destroy(&data);
  nc_remove_dir(&t, dir);
  return adj_test_finish(&t);
}
