/* t441: the step model (step_model.h) against what is built and what its
 * operators count, for LeNet-5, the MLP and the encoder-decoder at every
 * uniform placement of the run's ranks (adj_placement_enumerate) and at the
 * planner's own plans (per-layer, with replicas dropped: one replica here):
 *   - the model's stages are the built network's, one for one: as many, the
 *     repartitions where the builder put them, each convolution by name;
 *   - after one forward, the bytes each operator of a convolution, a pool or
 *     a 1.5D affine layer counted (adj_conv_layer_counters,
 *     adj_pool_layer_halo_counters, adj_affine15_layer_counters), the most
 *     any rank counted, equal the block the model charges that operator
 *     (0 where the model charges nothing): the halo exchange's received
 *     entries (nested rounds, corners relayed), the broadcasts of the input,
 *     the weights and the bias (a member receives the block), the sum of
 *     partial outputs (a member sends the block, whatever the algorithm), the
 *     1.5D layer's gather (its own block sent and the others' received);
 *   - the stages after the first with parameters, and only they, compute
 *     their input gradient, with a positive backward time (compute and
 *     communication).
 * float64, a batch of 8. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/pool_layer.h"
#include "uniform_walk.h"

enum { BATCH = 8 };

static const char *networks_dir;

static const adj_machine rates = {.name = "t441", .comm = {[ADJ_COMM_P2P] = {2e-6, 1e-9, 2}}, .cores = 4,
                                  .flops = 2e10, .bandwidth = 5e9};

/* The block the model charges operator `what` in the forward (0: none). */
static double model_bytes(const adj_step_stage *s, const char *what) {
  for (int k = 0; k < s->n_ops; k++)
    if (s->ops[k].phase == ADJ_STEP_FORWARD && !strcmp(s->ops[k].what, what)) return s->ops[k].bytes;
  return 0;
}

static double most(adj_test *t, double mine) {
  double all = mine;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, t->comm);
  return all;
}

static void expect_bytes(adj_test *t, const char *where, const adj_step_stage *s, const char *what, double counted) {
  double modelled = model_bytes(s, what), measured = most(t, counted);
  ADJ_TEST_CHECK(t, modelled == measured, "%s: stage %s %s: the model charges %.0f bytes, the operators counted %.0f",
                 where, s->name, what, modelled, measured);
}

/* The counted operators of one built stage against its modelled stage. */
static int compare_stage(adj_test *t, const char *where, adj_layer *stage, const adj_step_stage *s) {
  adj_conv_counters c;
  adj_affine15_counters a;
  adj_op_counters h;
  if (!strcmp(s->kind, "conv") && adj_conv_layer_counters(stage, &c) == ADJ_SUCCESS) {
    expect_bytes(t, where, s, "halo", (double)c.halo.bytes_received);
    expect_bytes(t, where, s, "input broadcast", (double)c.input.bytes_received);
    expect_bytes(t, where, s, "output sum", (double)c.output.bytes_sent);
    expect_bytes(t, where, s, "weight broadcast", (double)c.weight.bytes_received);
    expect_bytes(t, where, s, "bias broadcast", (double)c.bias.bytes_received);
    return 5;
  }
  if (!strcmp(s->kind, "pool") && adj_pool_layer_halo_counters(stage, &h) == ADJ_SUCCESS) {
    expect_bytes(t, where, s, "halo", (double)h.bytes_received);
    return 1;
  }
  if (!strcmp(s->kind, "fc") && adj_affine15_layer_counters(stage, &a) == ADJ_SUCCESS) {
    double gathered = (double)(a.gather.bytes_sent + a.gather.bytes_received);
    expect_bytes(t, where, s, "input gather", model_bytes(s, "input gather") ? gathered : 0);
    expect_bytes(t, where, s, "weight broadcast", (double)a.weight.bytes_received);
    expect_bytes(t, where, s, "bias broadcast", (double)a.bias.bytes_received);
    return 3;
  }
  adj_clear_error();
  return 0;
}

/* One forward on inputs of 0.25 and labels 0. */
static int forward_once(adj_layer *net) {
  adj_tensor x = {0}, y = {0};
  int status = adj_layer_create_input(net, &x);
  if (!status) status = adj_layer_create_output(net, &y);
  for (int64_t i = 0; !status && i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, 0.25);
  int64_t labels[BATCH] = {0};
  adj_layer *loss = adj_network_build_loss(net);
  if (!status && loss) status = adj_xent_layer_set_labels(loss, labels, BATCH);
  if (!status) status = adj_layer_forward(net, &x, &y);
  adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  return status;
}

/* The built stages against the modelled ones, and their operators' bytes. */
static void check_placement(adj_test *t, const adj_description *d, const adj_placement *p, const char *name) {
  adj_network_layout layout = {0};
  adj_step_prediction pred = {0};
  adj_step_model *model = NULL;
  adj_layer *net = NULL;
  adj_step_options o = {.dtype = ADJ_FLOAT64, .batch = BATCH, .ranks = t->size, .replicas = 1, .machine = &rates};
  adj_network_build_options bo = {.dtype = ADJ_FLOAT64, .batch = BATCH};
  ADJ_TEST_OK(t, adj_placement_resolve(d, p, BATCH, &layout));
  ADJ_TEST_OK(t, adj_step_model_create(&o, &model));
  if (layout.layers && model) ADJ_TEST_OK(t, adj_step_model_predict(model, d, &layout, &pred));
  ADJ_TEST_OK(t, adj_network_build(d, p, MPI_COMM_WORLD, &bo, &net));
  char where[256];
  snprintf(where, sizeof where, "%s %s on %d ranks", d->name, name, t->size);
  int compared = 0, depth = adj_network_depth(net);
  ADJ_TEST_CHECK(t, !net || depth == pred.n, "%s: the builder made %d stages, the model %d", where, depth, pred.n);
  if (net && depth == pred.n) {
    bool trained = false;
    ADJ_TEST_OK(t, forward_once(net));
    for (int i = 0; i < depth; i++) {
      adj_layer *stage = adj_network_layer(net, i);
      const adj_step_stage *s = &pred.stages[i];
      bool moves = !strcmp(adj_layer_name(stage), "repartition"), modelled = !strcmp(s->kind, "repartition");
      ADJ_TEST_CHECK(t, moves == modelled, "%s: stage %d is %s built, %s modelled", where, i, adj_layer_name(stage),
                     s->name);
      ADJ_TEST_CHECK(t, strcmp(s->kind, "conv") || !strcmp(adj_layer_name(stage), s->name),
                     "%s: stage %d is %s built, conv %s modelled", where, i, adj_layer_name(stage), s->name);
      compared += compare_stage(t, where, stage, s);
      /* From the stage after the first with parameters on, the network's
       * backward computes every stage's input gradient (network.h). */
      double backward = s->compute[ADJ_STEP_BACKWARD] + s->comm[ADJ_STEP_BACKWARD];
      ADJ_TEST_CHECK(t, s->input_gradient == trained && (!trained || backward > 0),
                     "%s: stage %d (%s): the model's input gradient %d, backward %.3e s; a stage with parameters "
                     "before it: %d", where, i, s->name, s->input_gradient, backward, trained);
      int first = 0, count = 0;
      ADJ_TEST_OK(t, adj_network_stage_parameters(net, i, &first, &count));
      MPI_Allreduce(MPI_IN_PLACE, &count, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      trained |= count > 0;
    }
  }
  adj_test_report(t, "  %-58.58s %2d stages, %2d operators compared", where, depth, compared);
  adj_layer_destroy(&net);
  adj_step_model_destroy(&model);
  adj_step_prediction_free(&pred);
  adj_network_layout_free(&layout);
}

static void check_network(adj_test *t, const char *file) {
  adj_description *d = uniform_walk(t, networks_dir, file, BATCH, check_placement);
  if (!d) return;
  adj_plan_search_options o = {.step = {.dtype = ADJ_FLOAT64, .batch = BATCH, .ranks = t->size, .machine = &rates},
                               .keep = 3};
  adj_plan_list plans = {0};
  ADJ_TEST_OK(t, adj_plan_search(d, &o, &plans));
  for (int i = 0; i < plans.n; i++) check_placement(t, d, plans.plans[i].placement, plans.plans[i].summary);
  adj_plan_list_free(&plans);
  adj_description_destroy(&d);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t441-step-model-counters");
  networks_dir = argc > 1 ? argv[1] : "networks";
  for (const char *const *net = uniform_walk_networks; *net; net++) check_network(&t, *net);
  return adj_test_finish(&t);
}
