/* What the collective error guarantee costs a training step: the agreement
 * reductions (adj_status_agree, one small all-reduce each) every rank takes
 * part in per optimizer step of LeNet-5, counted over a run of batches for
 * every layout that fits the world size, and held to the design's number:
 * the network checks once at the boundary of each public call (forward,
 * backward), the trainer agrees once on the batch it fills, and nothing
 * inside the network agrees again. */
#include <stdio.h>
#include <string.h>

#include "net_check.h"

enum { BATCH = 8, BATCHES = 6, SEED = 403 };

/* Per step: the trainer's fill of the batch, the network's forward and its
 * backward. */
static const double expected_per_step = 3;

static int comm_size(const adj_layer *net) {
  int size = 0;
  if (net) MPI_Comm_size(adj_layer_comm(net), &size);
  return size;
}

static void count_layout(adj_test *t, const char *layout, adj_dataset *data) {
  nc_run r;
  ADJ_TEST_OK(t, nc_run_create(layout, ADJ_FLOAT32, BATCH, data, SEED, &r));
  adj_train_stats stats;
  /* The first batch may plan and allocate; count the steady state. */
  if (r.trainer) ADJ_TEST_OK(t, adj_trainer_run(r.trainer, 1, NULL, NULL, &stats));
  uint64_t before = adj_status_agreements();
  if (r.trainer) ADJ_TEST_OK(t, adj_trainer_run(r.trainer, BATCHES, NULL, NULL, &stats));
  uint64_t used = adj_status_agreements() - before;
  /* adj_trainer_run ends with one agreement that every parameter is finite.
   * Ranks outside the layout hold no trainer and take part in nothing. */
  double per_step = r.trainer && used ? (double)(used - 1) / BATCHES : 0.0, low = per_step, high = per_step;
  MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_DOUBLE, MPI_MIN, t->comm);
  MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_DOUBLE, MPI_MAX, t->comm);
  double want = comm_size(r.net) > 1 ? expected_per_step : 0.0;
  adj_test_report(t, "%-14s %d ranks: %.2f to %.2f agreements per step over %d steps, design %.0f", layout,
                  t->size, low, high, BATCHES, want);
  ADJ_TEST_CHECK(t, !r.trainer || per_step == want, "%s: %.2f agreements per step, the design makes %.0f", layout,
                 per_step, want);
  nc_run_destroy(&r);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t403-agreements-per-step");
  adj_dataset *data = nc_synthetic(BATCH * (BATCHES + 1), SEED);
  const char *layouts[NC_MAX_LAYOUTS];
  int n = nc_layouts_fitting(t.size, layouts);
  for (int i = 0; i < n; i++) count_layout(&t, layouts[i], data);
  adj_dataset_destroy(&data);
  return adj_test_finish(&t);
}
