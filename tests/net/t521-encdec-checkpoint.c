/* Checkpoints of the batch norm encoder-decoder (format version 3, the
 * running statistics in a state section; docs/checkpoint.md):
 *  - a 2x2 run's checkpoint loads into a sequential network and back into a
 *    fresh 2x2 one: parameters and running statistics bit-identical, and the
 *    statistics are not the fresh network's 0 and 1;
 *  - crafted files with a valid CRC are refused on every rank with a message
 *    naming the bad value, and change nothing: a negative running variance,
 *    a NaN running mean, a renamed buffer, a buffer of the wrong length, a
 *    version 2 file without the section, a truncated section. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "net_check.h"

enum { BATCH = 6, SAMPLES = 20, CHANNELS = 16 };

static void put_le(unsigned char *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void fix_crc(unsigned char *d, long size) { put_le(d + size - 4, crc32(0L, d, (uInt)(size - 4)), 4); }

/* The state section: the 4-byte count just before the first buffer's name
 * length (the name "running_mean" appears nowhere else in the file). */
static long state_section(const unsigned char *d, long size) {
  for (long i = 8; i + 12 <= size; i++)
    if (!memcmp(d + i, "running_mean", 12)) return i - 8;
  return -1;
}

/* First buffer: count (4), name length (4), name (12), n (8), values. */
static long first_mean(const unsigned char *d, long size) { return state_section(d, size) + 4 + 4 + 12 + 8; }
/* Second buffer (running_var of the first stage) follows CHANNELS values. */
static long first_var(const unsigned char *d, long size) { return first_mean(d, size) + 8 * CHANNELS + 4 + 11 + 8; }

static long put_value(unsigned char *d, long at, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  put_le(d + at, bits, 8);
  return 0;
}

static long negative_variance(unsigned char *d, long size) { return put_value(d, first_var(d, size) + 8, -0.5); }
static long nan_mean(unsigned char *d, long size) { return put_value(d, first_mean(d, size) + 16, NAN); }
static long renamed(unsigned char *d, long size) { return d[state_section(d, size) + 8 + 10] = 'x', 0; }
static long wrong_length(unsigned char *d, long size) {
  return put_le(d + state_section(d, size) + 8 + 12, CHANNELS + 1, 8), 0;
}
/* Version 2 and no state section: the file ends after the parameters. */
static long version_2(unsigned char *d, long size) {
  long at = state_section(d, size);
  put_le(d + 8, 2, 4);
  return size - (at + 4);
}
static long truncated(unsigned char *d, long size) {
  (void)d, (void)size;
  return 8;
}

typedef struct craft {
  const char *label;
  long (*edit)(unsigned char *d, long size); /* returns how many bytes to drop before the CRC */
  const char *phrase;
} craft;

static const craft cases[] = {
    {"negative running variance", negative_variance, "state buffer 1 ('running_var') element 1 is -0.5"},
    {"NaN running mean", nan_mean, "state buffer 0 ('running_mean') element 2 is nan"},
    {"renamed state buffer", renamed, "state buffer 0 is 'running_mexn'"},
    {"state buffer of 17 values", wrong_length, "of 17 values, but the network's is 'running_mean' of 16"},
    {"version 2, no statistics", version_2, "version 2 holds no batch norm running statistics"},
    {"truncated state section", truncated, "truncated in state buffer 5"},
};

/* Writes the crafted copy of `good` to `bad` (rank 0). */
static void craft_file(adj_test *t, const craft *c, const unsigned char *good, long size, const char *bad) {
  if (t->rank != 0) return;
  unsigned char *d = malloc((size_t)size);
  memcpy(d, good, (size_t)size);
  long drop = c->edit(d, size);
  memmove(d + size - 4 - drop, d + size - 4, 4);
  fix_crc(d, size - drop);
  nc_write_file(bad, d, size - drop);
  free(d);
}

static void crafted(adj_test *t, const char *dir, const char *good, nc_run *target, nc_run *fresh) {
  long size = 0;
  unsigned char *bytes = t->rank == 0 ? nc_read_file(good, &size) : NULL;
  int found = t->rank != 0 || (bytes && state_section(bytes, size) > 0);
  MPI_Bcast(&found, 1, MPI_INT, 0, t->comm);
  ADJ_TEST_CHECK(t, found, "%s: no state section found", good);
  char bad[600];
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
  for (size_t i = 0; found && i < sizeof cases / sizeof cases[0]; i++) {
    craft_file(t, &cases[i], bytes, size, bad);
    adj_test_expect_error(t, cases[i].label, adj_trainer_load(target->trainer, bad), ADJ_ERR_IO, cases[i].phrase);
    bool untouched;
    nc_parameter_diff(target->net, fresh->net, &untouched);
    ADJ_TEST_CHECK(t, untouched, "%s: the refused load changed the network", cases[i].label);
  }
  free(bytes);
}

/* The first batch norm stage's running variance on rank 0 (channel 0). */
static double first_running_var(adj_layer *net) {
  for (int i = 0; i < adj_network_depth(net); i++) {
    adj_layer *stage = adj_network_layer(net, i);
    adj_tensor mean, var;
    if (adj_layer_is_batchnorm(stage) && !adj_batchnorm_layer_running_stats(stage, &mean, &var))
      return adj_tensor_volume(&var) ? adj_tensor_get(&var, 0) : 1;
  }
  return 1;
}

static void round_trip(adj_test *t, const char *path, nc_run *trained, adj_dataset *data) {
  nc_run seq, back;
  ADJ_TEST_OK(t, nc_run_create_model("encdec", "sequential", ADJ_FLOAT32, BATCH, data, 5211, &seq));
  ADJ_TEST_OK(t, nc_run_create_model("encdec", "2x2", ADJ_FLOAT32, BATCH, data, 5212, &back));
  if (seq.trainer && back.trainer) {
    ADJ_TEST_OK(t, adj_trainer_load(seq.trainer, path));
    ADJ_TEST_OK(t, adj_trainer_save(seq.trainer, path));
    ADJ_TEST_OK(t, adj_trainer_load(back.trainer, path));
    bool to_seq, round;
    double d1 = nc_parameter_diff(seq.net, trained->net, &to_seq), d2 = nc_parameter_diff(back.net, trained->net, &round);
    double var = first_running_var(trained->net);
    adj_test_report(t, "2x2 -> sequential: bit-identical %s (%.3e); -> 2x2 again: bit-identical %s (%.3e); "
                    "running variance of channel 0 %.6f", to_seq ? "yes" : "NO", d1, round ? "yes" : "NO", d2, var);
    ADJ_TEST_CHECK(t, to_seq && round, "the round trip changed parameters or statistics (%.3e, %.3e)", d1, d2);
    ADJ_TEST_CHECK(t, t->rank != 0 || var != 1, "the running statistics were never updated");
  }
  nc_run_destroy(&seq), nc_run_destroy(&back);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t521-encdec-checkpoint");
  if (t.size < 4) return adj_test_skip(&t, "the 2x2 layout needs 4 ranks");
  char dir[128], good[600];
  nc_make_dir(&t, "t521", dir, sizeof dir);
  snprintf(good, sizeof good, "%s/good.ckpt", dir);
  adj_dataset *data = nc_synthetic(SAMPLES, 521);
  nc_run trained, target, fresh;
  ADJ_TEST_OK(&t, nc_run_create_model("encdec", "2x2", ADJ_FLOAT32, BATCH, data, 521, &trained));
  ADJ_TEST_OK(&t, nc_run_create_model("encdec", "2x2", ADJ_FLOAT32, BATCH, data, 522, &target));
  ADJ_TEST_OK(&t, nc_run_create_model("encdec", "2x2", ADJ_FLOAT32, BATCH, data, 522, &fresh));
  if (trained.trainer && target.trainer && fresh.trainer) {
    adj_train_stats stats;
    ADJ_TEST_OK(&t, adj_trainer_run(trained.trainer, 3, NULL, NULL, &stats));
    ADJ_TEST_OK(&t, adj_trainer_save(trained.trainer, good));
    crafted(&t, dir, good, &target, &fresh);
    round_trip(&t, good, &trained, data);
  }
  nc_run_destroy(&trained), nc_run_destroy(&target), nc_run_destroy(&fresh);
  adj_dataset_destroy(&data);
  nc_remove_dir(&t, dir);
  return adj_test_finish(&t);
}
