/* Resumption and reproducibility of training (float32, the widest layout
 * that fits the ranks, 4 epochs of 6 batches with a padded last batch):
 *  - a run "killed" during epoch 3 (its objects destroyed without saving) and
 *    resumed in fresh objects from its last checkpoint, taken at the end of
 *    epoch 2, ends with parameters bit-identical to an uninterrupted run;
 *  - so does a run resumed from a checkpoint taken in the middle of epoch 3;
 *  - two runs with the same seed, layout and dtype are bit-identical, and a
 *    run with another seed is not.
 * With the argument "encdec" the same checks run on the batch norm
 * encoder-decoder (networks/encdec.net; registered as t520-encdec-resume) in layout 2x2
 * (sequential below 4 ranks), and "bit-identical" covers the running
 * statistics too (nc_parameter_diff). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net_check.h"

enum { BATCH = 8, SAMPLES = 45, EPOCHS = 4, SEED = 503 };

static const char *model = "lenet"; /* or "encdec", from the command line */

static void run_epochs(adj_test *t, nc_run *r, int64_t until, const char *checkpoint) {
  adj_train_stats stats;
  while (r->trainer && adj_trainer_epoch(r->trainer) < until) {
    ADJ_TEST_OK(t, adj_trainer_run(r->trainer, -1, NULL, NULL, &stats));
    if (checkpoint) ADJ_TEST_OK(t, adj_trainer_save(r->trainer, checkpoint));
  }
}

/* Trains 2 epochs with checkpoints, then `batches` of epoch 3, saving after
 * them when save_mid; then "crashes". */
static void crash_in_epoch_3(adj_test *t, const char *layout, adj_dataset *data, const char *path,
                             int64_t batches, bool save_mid) {
  nc_run r;
  ADJ_TEST_OK(t, nc_run_create_model(model, layout, ADJ_FLOAT32, BATCH, data, SEED, &r));
  run_epochs(t, &r, 2, path);
  adj_train_stats stats;
  if (r.trainer) ADJ_TEST_OK(t, adj_trainer_run(r.trainer, batches, NULL, NULL, &stats));
  if (r.trainer && save_mid) ADJ_TEST_OK(t, adj_trainer_save(r.trainer, path));
  nc_run_destroy(&r);
}

/* Fresh objects (another seed, so everything must come from the file). */
static void resume_and_compare(adj_test *t, const char *label, const char *layout, adj_dataset *data,
                               const char *path, adj_layer *reference) {
  nc_run r;
  ADJ_TEST_OK(t, nc_run_create_model(model, layout, ADJ_FLOAT32, BATCH, data, SEED + 1000, &r));
  if (r.trainer) ADJ_TEST_OK(t, adj_trainer_load(r.trainer, path));
  int64_t epoch = r.trainer ? adj_trainer_epoch(r.trainer) : -1, batch = r.trainer ? adj_trainer_batch(r.trainer) : -1;
  run_epochs(t, &r, EPOCHS, NULL);
  bool bitwise = false;
  double diff = r.net ? nc_parameter_diff(r.net, reference, &bitwise) : 1;
  adj_test_report(t, "%-44s %s, %d ranks: resumed at epoch %lld batch %lld; after %d epochs bit-identical %s "
                  "(max rel diff %.3e)", label, layout, t->size, (long long)epoch + 1, (long long)batch, EPOCHS,
                  bitwise ? "yes" : "NO", diff);
  ADJ_TEST_CHECK(t, bitwise, "%s: the resumed run differs by %.3e", label, diff);
  nc_run_destroy(&r);
}

static void reproducibility(adj_test *t, const char *layout, adj_dataset *data, adj_layer *reference) {
  nc_run again, other;
  ADJ_TEST_OK(t, nc_run_create_model(model, layout, ADJ_FLOAT32, BATCH, data, SEED, &again));
  ADJ_TEST_OK(t, nc_run_create_model(model, layout, ADJ_FLOAT32, BATCH, data, SEED + 1, &other));
  run_epochs(t, &again, EPOCHS, NULL);
  run_epochs(t, &other, EPOCHS, NULL);
  bool same = false, same_other = true;
  double diff = again.net ? nc_parameter_diff(again.net, reference, &same) : 1;
  double diff_other = other.net ? nc_parameter_diff(other.net, reference, &same_other) : 0;
  adj_test_report(t, "%-44s %s, %d ranks: same seed bit-identical %s (%.3e), other seed differs by %.3e",
                  "reproducibility", layout, t->size, same ? "yes" : "NO", diff, diff_other);
  ADJ_TEST_CHECK(t, same, "two runs with one seed differ by %.3e", diff);
  /* Only rank 0 holds the gathered parameters. */
  ADJ_TEST_CHECK(t, t->rank != 0 || (!same_other && diff_other > 1e-3), "a run with another seed differs only by %.3e",
                 diff_other);
  nc_run_destroy(&again), nc_run_destroy(&other);
}

int main(int argc, char **argv) {
  adj_test t;
  if (argc > 1 && !strcmp(argv[argc - 1], "encdec")) model = "encdec";
  adj_test_begin(&t, &argc, &argv, strcmp(model, "encdec") ? "t503-resume" : "t520-encdec-resume");
  char path[64];
  snprintf(path, sizeof path, "/tmp/adjoin-t503-%d.ckpt", t.rank == 0 ? (int)getpid() : 0);
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, t.comm);
  adj_dataset *data = nc_synthetic(SAMPLES, SEED);
  const char *layouts[NC_MAX_LAYOUTS];
  const char *layout = layouts[nc_layouts_fitting(t.size, layouts) - 1];
  if (!strcmp(model, "encdec")) layout = t.size >= 4 ? "2x2" : "sequential";
  nc_run reference;
  ADJ_TEST_OK(&t, nc_run_create_model(model, layout, ADJ_FLOAT32, BATCH, data, SEED, &reference));
  run_epochs(&t, &reference, EPOCHS, NULL);
  if (reference.net) {
    crash_in_epoch_3(&t, layout, data, path, 3, false);
    resume_and_compare(&t, "killed in epoch 3, resumed from epoch 2's end", layout, data, path, reference.net);
    crash_in_epoch_3(&t, layout, data, path, 4, true);
    resume_and_compare(&t, "resumed from a checkpoint in epoch 3", layout, data, path, reference.net);
    reproducibility(&t, layout, data, reference.net);
  }
  nc_run_destroy(&reference);
  adj_dataset_destroy(&data);
  if (t.rank == 0) remove(path);
  return adj_test_finish(&t);
}
