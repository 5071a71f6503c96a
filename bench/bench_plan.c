/* bench-plan: the cost model against the machine.  For every P_r x P_c grid
 * of the run it builds, from the same descriptions the planner reads
 * (network_build.h), two MLPs of 1.5D layers (784-512-256-10 and
 * 784-1024-1024-10, the input entering on the grid) and LeNet-5 at the
 * placement "RxC" (conv and pool rows over R, the batch over C, 1.5D affine
 * layers on R x C; R <= 5, pool2's output rows), batch 64, float32, and times the
 * communication of one training step per layer, then prints it next to the
 * planner's adjoin mode for the same layer and grid.
 *
 * Method: the communication the planner models is exactly the layers' own
 * operators (the 1.5D layer's input all-gather, its reduce-scatter adjoint
 * and the weight and bias broadcasts / sum-reduces; the conv layer's halo
 * exchange and weight and bias broadcasts; the pool layer's halo exchange).
 * Each operator is applied alone on its own buffers, forward and then
 * adjoint as the step does (the first layer's gather has no adjoint), so
 * no computation is timed, and starts after a barrier (not timed), so no
 * rank's lateness from the operator before is charged to it.  A layer's measured time is the sum of its
 * operators' times, each the best of REPEATS (after one warm-up) of the
 * slowest rank, as the calibration takes each size's best.  The repartitions
 * that move the data between LeNet's stages are not modelled by the planner
 * (specs A10) and not timed.
 *
 *   mpiexec -n P bench-plan CALIBRATION_FILE [REPEATS]
 *
 * CALIBRATION_FILE is `adjoin-plan --calibrate`'s; with its all-reduce fit
 * the collectives are priced by it and the halos by the ping-pong fit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "adjoin/adjoin.h"
#include "adjoin/pool_layer.h"
#include "bench_host.h"

enum { BATCH = 64, MAX_OPS = 32, MAX_LAYERS = 16, LENET_MAX_ROWS = 5 };

static void die(const char *what) {
  fprintf(stderr, "bench-plan: %s: %s\n", what, adj_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

/* One communication operator of the step, the planner layer it belongs to,
 * and buffers to apply it on. */
typedef struct timed_op {
  adj_op *op;
  int layer;
  bool adjoint;
  adj_tensor domain, range;
} timed_op;

typedef struct step_comm {
  int n, layers;
  timed_op ops[MAX_OPS];
} step_comm;

static void add_op(step_comm *s, adj_op *op, bool adjoint) {
  if (!op) return;
  if (s->n == MAX_OPS) die("too many operators");
  timed_op *t = &s->ops[s->n++];
  *t = (timed_op){.op = op, .layer = s->layers, .adjoint = adjoint};
  if (adj_op_create_domain_tensor(op, &t->domain)) die("domain tensor");
  if (!adj_op_in_place(op) && adj_op_create_range_tensor(op, &t->range)) die("range tensor");
}

/* The modelled operators of every conv, pool and 1.5D stage, in network
 * order, which is the planner network's layer order. */
static void collect(adj_layer *net, step_comm *s) {
  *s = (step_comm){0};
  for (int i = 0; i < adj_network_depth(net); i++) {
    adj_layer *stage = adj_network_layer(net, i);
    adj_op *a, *b, *c;
    if (!adj_conv_layer_ops(stage, &a, &b, &c)) {
      add_op(s, a, true), add_op(s, b, true), add_op(s, c, true);
    } else if (!adj_pool_layer_halo_op(stage, &a)) {
      add_op(s, a, true);
    } else if (!adj_affine15_layer_ops(stage, &a, &b, &c)) {
      add_op(s, a, s->layers > 0), add_op(s, b, true), add_op(s, c, true);
    } else {
      continue;
    }
    s->layers++;
  }
}

static void release(step_comm *s) {
  for (int j = 0; j < s->n; j++) adj_tensor_destroy(&s->ops[j].domain), adj_tensor_destroy(&s->ops[j].range);
}

/* A barrier with adjoin's wait policy (wait.h), so an oversubscribed host
 * does not busy-poll in it. */
static void barrier(adj_wait_policy policy) {
  MPI_Request r;
  if (MPI_Ibarrier(MPI_COMM_WORLD, &r) != MPI_SUCCESS || adj_wait_all(1, &r, policy)) die("barrier");
}

/* Starts after a barrier, so the time is the operator's and not the wait for
 * a rank still busy with the previous one. */
static double apply_once(timed_op *t, adj_wait_policy policy) {
  adj_tensor *r = adj_op_in_place(t->op) ? &t->domain : &t->range;
  barrier(policy);
  double s = MPI_Wtime();
  if (adj_op_forward(t->op, &t->domain, r)) die("forward");
  if (t->adjoint && adj_op_adjoint(t->op, r, &t->domain)) die("adjoint");
  return MPI_Wtime() - s;
}

/* Per layer: the sum over its operators of each one's best time (slowest rank). */
static void measure(step_comm *s, int repeats, double *layer_seconds) {
  adj_wait_policy policy;
  if (adj_wait_policy_resolve(MPI_COMM_WORLD, ADJ_WAIT_AUTO, &policy)) die("wait policy");
  double best[MAX_OPS], mine[MAX_OPS], slowest[MAX_OPS];
  for (int j = 0; j < s->n; j++) best[j] = INFINITY;
  for (int k = 0; k < repeats + 1; k++) {
    for (int j = 0; j < s->n; j++) mine[j] = apply_once(&s->ops[j], policy);
    MPI_Allreduce(mine, slowest, s->n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    for (int j = 0; k > 0 && j < s->n; j++) best[j] = fmin(best[j], slowest[j]);
  }
  for (int i = 0; i < s->layers; i++) layer_seconds[i] = 0;
  for (int j = 0; j < s->n; j++) layer_seconds[s->ops[j].layer] += best[j];
}

static void print_row(const char *label, const char *grid, const char *layer, double predicted, double measured) {
  printf("%-18s %-6s %-6s %12.4e %12.4e", label, grid, layer, predicted, measured);
  if (predicted > 0) printf(" %9.2f\n", measured / predicted);
  else printf(" %9s\n", "-"); /* nothing modelled (no split) */
}

/* Times `net` and prints each layer's prediction, measurement and ratio. */
static void report(const char *label, adj_layer *net, const adj_plan_network *plan_net, const adj_plan_config *config,
                   int p_r, int p_c, int repeats) {
  step_comm s;
  collect(net, &s);
  if (s.layers != plan_net->n) die("network stages do not match the planner's layers");
  adj_plan_result plan;
  if (adj_plan_evaluate(plan_net, config, p_r, p_c, &plan)) die("plan");
  double measured[MAX_LAYERS], total = 0;
  measure(&s, repeats, measured);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char grid[24];
  snprintf(grid, sizeof grid, "%dx%d", p_r, p_c);
  for (int i = 0; rank == 0 && i < plan.n; i++) {
    total += measured[i];
    print_row(label, grid, plan_net->layers[i].name, plan.layers[i].total, measured[i]);
  }
  if (rank == 0) print_row(label, grid, "total", plan.total, total);
  adj_plan_result_free(&plan);
  release(&s);
}

/* The network of a description text at a placement text, float32, without
 * a loss. */
static adj_layer *build(const char *label, const char *text, const char *placement_text) {
  adj_description *d;
  adj_placement *p;
  adj_layer *net;
  if (adj_description_parse(text, label, &d) || adj_placement_parse(placement_text, label, &p)) die("description");
  adj_network_build_options o = {.dtype = ADJ_FLOAT32, .batch = BATCH, .logits_only = true};
  if (adj_network_build(d, p, MPI_COMM_WORLD, &o, &net)) die(label);
  adj_placement_destroy(&p);
  adj_description_destroy(&d);
  return net;
}

/* The MLP with its input entering on the grid, so its first layer has no
 * input gradient, as the planner's first layer. */
static void bench_mlp(const char *label, const char *text, int p_r, int p_c, const adj_plan_config *config,
                      int repeats) {
  adj_plan_network *plan_net;
  if (adj_plan_network_parse(text, label, &plan_net)) die("network");
  char placement[96];
  snprintf(placement, sizeof placement, "input parts=%dx%d\nfc1 grid=%dx%d\n", p_c, p_r, p_r, p_c);
  adj_layer *net = build(label, text, placement);
  report(label, net, plan_net, config, p_r, p_c, repeats);
  adj_layer_destroy(&net);
  adj_plan_network_destroy(&plan_net);
}

static const char lenet_text[] = "input 1 28 28\nconv conv1 out=6 k=5 p=2\npool pool1 k=2 s=2\n"
                                 "conv conv2 out=16 k=5\npool pool2 k=2 s=2\nfc fc1 out=120\nfc fc2 out=84\n"
                                 "fc fc3 out=10\n";

static void bench_lenet(int p_r, int p_c, const adj_plan_config *config, int repeats) {
  adj_plan_network *plan_net;
  if (adj_plan_network_parse(lenet_text, "lenet5", &plan_net)) die("network");
  char placement[96];
  snprintf(placement, sizeof placement, "conv1 parts=%dx1x%dx1\nfc1 grid=%dx%d\n", p_c, p_r, p_r, p_c);
  adj_layer *net = build("lenet5", lenet_text, placement);
  report("lenet5", net, plan_net, config, p_r, p_c, repeats);
  adj_layer_destroy(&net);
  adj_plan_network_destroy(&plan_net);
}

static void print_header(int size, int repeats, const adj_plan_calibration *cal) {
  printf("bench-plan: %d ranks, batch %d, float32, best of %d, adjoin mode\n"
         "ping-pong fit: alpha %.3e s, beta %.3e s/B (halo exchanges", size, BATCH, repeats, cal->alpha, cal->beta);
  if (cal->collective_ranks)
    printf(")\nall-reduce fit on %d ranks: alpha %.3e s, beta %.3e s/B (collectives)\n", cal->collective_ranks,
           cal->collective_alpha, cal->collective_beta);
  else
    printf(" and collectives: the file has no all-reduce fit)\n");
  printf("%-18s %-6s %-6s %12s %12s %9s\n", "network", "grid", "layer", "predicted s", "measured s", "meas/pred");
}

static const char usage[] = "usage: mpiexec -n P bench-plan CALIBRATION_FILE [REPEATS]";

/* The command line into *path and *repeats; BENCH_RUN, or the status to exit with. */
static int parse(int argc, char **argv, bool say, const char **path, long long *repeats) {
  const char *given[2] = {0};
  int n = 0, status = bench_parse_arguments("bench-plan", usage, argc, argv, NULL, 0, 2, given, &n, say);
  if (status != BENCH_RUN) return status;
  if (n < 1 && say) fprintf(stderr, "bench-plan: needs CALIBRATION_FILE\n");
  bool ok = n >= 1 && (n < 2 || bench_parse_count("bench-plan", "REPEATS", given[1], 1, 100000, say, repeats));
  if (!ok && say) fprintf(stderr, "%s\n", usage);
  *path = given[0];
  return ok ? BENCH_RUN : 2;
}

/* The calibration from `path` on every rank; false on every rank, after one
 * line from the lowest rank that could not read it, when any could not. */
static bool load_calibration(const char *path, int rank, int size, adj_plan_calibration *cal) {
  int mine = adj_plan_calibration_load(path, cal) ? rank : size, first;
  MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == first) fprintf(stderr, "bench-plan: calibration: %s\n", adj_last_error());
  return first == size;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int size, rank;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const char *path = NULL;
  long long asked = 10;
  int status = parse(argc, argv, !rank, &path, &asked);
  adj_plan_calibration cal;
  if (status == BENCH_RUN && !load_calibration(path, rank, size, &cal)) status = 1;
  if (status != BENCH_RUN) {
    MPI_Finalize();
    return status;
  }
  int repeats = (int)asked;
  adj_plan_config config = {.mode = ADJ_PLAN_ADJOIN, .p = size, .batch = BATCH, .word_bytes = 4};
  adj_plan_calibration_apply(&cal, &config);
  if (!rank) print_header(size, repeats, &cal);
  for (int p_r = 1; p_r <= size; p_r++) {
    if (size % p_r) continue;
    bench_mlp("mlp-512-256-10", "input 784\nfc fc1 out=512\nfc fc2 out=256\nfc fc3 out=10\n", p_r, size / p_r, &config,
              repeats);
    bench_mlp("mlp-1024-1024-10", "input 784\nfc fc1 out=1024\nfc fc2 out=1024\nfc fc3 out=10\n", p_r, size / p_r,
              &config, repeats);
  }
  for (int p_r = 1; p_r <= size && p_r <= LENET_MAX_ROWS; p_r++)
    if (size % p_r == 0) bench_lenet(p_r, size / p_r, &config, repeats);
  MPI_Finalize();
  return 0;
}
