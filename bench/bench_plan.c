/* bench-plan: the cost model against the machine.  For every P_r x P_c grid
 * of the run, an MLP of 1.5D layers (784-512-256-10, batch 64, float32)
 * is built and the communication of one training step is timed alone: each
 * layer's input all-gather, reduce-scatter (not the first layer) and weight
 * and bias broadcasts and sum-reduces, applied through the layer's own
 * operators: the sum of each operator's best application over REPEATS steps
 * (slowest rank), and the best whole step.  The prediction is the
 * planner's adjoin mode with alpha and beta from `adjoin-plan --calibrate`.
 *
 *   mpiexec -n P bench-plan CALIBRATION_FILE [REPEATS]
 *
 * Prints per grid: predicted and measured seconds and measured / predicted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "adjoin/adjoin.h"

enum { N = 64, LAYERS = 3 };
static const int64_t widths[LAYERS] = {512, 256, 10};

static void die(const char *what) {
  fprintf(stderr, "bench-plan: %s: %s\n", what, adj_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One step's communication of the MLP's 1.5D layers: seconds per operator
 * (forward and, where the step has one, adjoint) into t[3 i + k]. */
static void step_comm(adj_layer *net, double *t) {
  for (int i = 0; i < LAYERS; i++) {
    adj_op *ops[3];
    if (adj_affine15_layer_ops(adj_network_layer(net, 2 * i), &ops[0], &ops[1], &ops[2])) die("ops");
    for (int k = 0; k < 3; k++) {
      t[3 * i + k] = 0;
      if (!ops[k]) continue;
      adj_tensor d, r;
      if (adj_op_create_domain_tensor(ops[k], &d) || adj_op_create_range_tensor(ops[k], &r)) die("tensors");
      double s = MPI_Wtime();
      if (adj_op_forward(ops[k], &d, &r)) die("forward");
      /* The first layer's all-gather has no adjoint: no input gradient. */
      if ((k > 0 || i > 0) && adj_op_adjoint(ops[k], &r, &d)) die("adjoint");
      t[3 * i + k] = MPI_Wtime() - s;
      adj_tensor_destroy(&d), adj_tensor_destroy(&r);
    }
  }
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc < 2) {
    if (!rank) fprintf(stderr, "usage: mpiexec -n P bench-plan CALIBRATION_FILE [REPEATS]\n");
    MPI_Finalize();
    return 2;
  }
  int repeats = argc > 2 ? atoi(argv[2]) : 10;
  adj_plan_config config = {.mode = ADJ_PLAN_ADJOIN, .p = size, .batch = N, .word_bytes = 4};
  if (adj_plan_calibration_read(argv[1], &config.alpha, &config.beta)) die("calibration");
  adj_plan_network *plan_net;
  if (adj_plan_network_parse("input 784\nfc fc1 out=512\nfc fc2 out=256\nfc fc3 out=10\n", "mlp", &plan_net))
    die("network");
  if (!rank)
    printf("bench-plan: %d ranks, MLP 784-512-256-10, batch %d, float32, alpha %.3e s, beta %.3e s/B, best of %d\n"
           "%-7s %12s %12s %9s %12s %9s\n",
           size, N, config.alpha, config.beta, repeats, "grid", "predicted s", "per-op s", "meas/pred", "step s", "step/pred");
  for (int p_r = 1; p_r <= size; p_r++) {
    if (size % p_r) continue;
    int p_c = size / p_r;
    adj_partition *p;
    adj_decomposition *in;
    adj_layer *net;
    if (adj_partition_create(MPI_COMM_WORLD, 2, (const int[2]){p_c, p_r}, size, NULL, &p)) die("partition");
    if (adj_decomposition_create(p, 2, (const int64_t[2]){N, 784}, &in)) die("decomposition");
    adj_mlp15_config mc = {.dtype = ADJ_FLOAT32, .input = in, .layers = LAYERS, .widths = widths};
    if (adj_mlp15_create(&mc, &net)) die("mlp");
    adj_plan_result plan;
    if (adj_plan_evaluate(plan_net, &config, p_r, p_c, &plan)) die("plan");
    /* Each operator's best application over the repeats (slowest rank), as
     * the calibration takes each size's best round trip; the first step
     * warms up.  "step" is the best whole step, for comparison. */
    double best_op[3 * LAYERS], step = INFINITY, best = 0;
    for (int j = 0; j < 3 * LAYERS; j++) best_op[j] = INFINITY;
    for (int k = 0; k < repeats + 1; k++) {
      double t[3 * LAYERS], slowest[3 * LAYERS], sum = 0;
      step_comm(net, t);
      MPI_Allreduce(t, slowest, 3 * LAYERS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      for (int j = 0; j < 3 * LAYERS; j++) sum += slowest[j];
      if (k == 0) continue;
      for (int j = 0; j < 3 * LAYERS; j++) best_op[j] = fmin(best_op[j], slowest[j]);
      step = fmin(step, sum);
    }
    for (int j = 0; j < 3 * LAYERS; j++) best += best_op[j];
    if (!rank) {
      char grid[24];
      snprintf(grid, sizeof grid, "%dx%d", p_r, p_c);
      printf("%-7s %12.4e %12.4e %8.2fx %12.4e %8.2fx\n", grid, plan.total, best, best / plan.total, step,
             step / plan.total);
    }
    adj_plan_result_free(&plan);
    adj_layer_destroy(&net);
    adj_decomposition_destroy(&in);
    adj_partition_destroy(&p);
  }
  adj_plan_network_destroy(&plan_net);
  MPI_Finalize();
  return 0;
}
