/* t442: the step model's memory (step_model.h) against what the allocator
 * hands out: for LeNet-5, the MLP and the encoder-decoder at every uniform
 * placement of the run's ranks (and, on 1 and 2 ranks, a small network of
 * tanh and sigmoid, which keep their outputs), the bytes glibc's allocator counts in use
 * (mallinfo2: arenas and mapped blocks) after the network is built, an Adam
 * optimizer made and the input, output and output-gradient tensors created,
 * less before, on rank 0, against the model's rank-0 parameters, gradients,
 * optimizer state, activations, buffers and workspace (the machine's
 * baseline excluded).  The model counts the tensors each layer allocates
 * from its creation code; what it leaves out is small bookkeeping (partitions,
 * decompositions, communicators, plans), held within 10%.  A first network
 * is built and dropped before anything is counted: MPI allocates about 1 MB
 * once per process at its first collectives on a communicator, which belongs
 * to the process's baseline (machine.h), not to any network. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uniform_walk.h"

enum { BATCH = 32 };

static const adj_machine rates = {.name = "t442", .comm = {[ADJ_COMM_P2P] = {2e-6, 1e-9, 2}}, .cores = 2,
                                  .flops = 2e10, .bandwidth = 5e9};

static double heap_in_use(void) {
  struct mallinfo2 m = mallinfo2();
  return (double)(m.uordblks + m.hblkhd);
}

/* Whether mallinfo2 counts this process's allocations: a sanitizer's
 * allocator (ASan's) replaces glibc's and it counts nothing. */
static bool heap_counted(void) {
  double before = heap_in_use();
  volatile char *block = malloc(1 << 20);
  if (block) block[0] = 1;
  double grown = heap_in_use() - before;
  free((void *)block);
  return grown >= (1 << 20);
}

/* The model's rank-0 bytes besides the baseline. */
static double modelled(adj_test *t, const adj_description *d, const adj_placement *p, int threads) {
  adj_network_layout layout = {0};
  adj_step_prediction pred = {0};
  adj_step_model *model = NULL;
  adj_machine m = rates;
  m.cores = threads * t->size;
  adj_step_options o = {.dtype = ADJ_FLOAT32, .batch = BATCH, .ranks = t->size, .replicas = 1, .machine = &m,
                        .optimizer = ADJ_OPTIMIZER_ADAM};
  ADJ_TEST_OK(t, adj_placement_resolve(d, p, BATCH, &layout));
  ADJ_TEST_OK(t, adj_step_model_create(&o, &model));
  if (model && layout.layers) ADJ_TEST_OK(t, adj_step_model_predict(model, d, &layout, &pred));
  double bytes = (double)(pred.memory_total - pred.baseline);
  adj_step_model_destroy(&model);
  adj_step_prediction_free(&pred);
  adj_network_layout_free(&layout);
  return bytes;
}

/* What building, an optimizer and the step's tensors allocate on this rank. */
static double allocated(adj_test *t, const adj_description *d, const adj_placement *p) {
  adj_network_build_options bo = {.dtype = ADJ_FLOAT32, .batch = BATCH};
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3};
  adj_layer *net = NULL;
  adj_optimizer *opt = NULL;
  adj_tensor x = {0}, y = {0}, dy = {0};
  malloc_trim(0);
  double before = heap_in_use();
  ADJ_TEST_OK(t, adj_network_build(d, p, MPI_COMM_WORLD, &bo, &net));
  if (net) {
    ADJ_TEST_OK(t, adj_optimizer_create(net, &oc, &opt));
    ADJ_TEST_OK(t, adj_layer_create_input(net, &x));
    ADJ_TEST_OK(t, adj_layer_create_output(net, &y));
    ADJ_TEST_OK(t, adj_layer_create_output(net, &dy));
  }
  double bytes = heap_in_use() - before;
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dy);
  adj_optimizer_destroy(&opt);
  adj_layer_destroy(&net);
  return bytes;
}

static void check_placement(adj_test *t, const adj_description *d, const adj_placement *p, const char *name) {
  static bool warm;
  if (!warm) allocated(t, d, p), warm = true;
  double got = allocated(t, d, p), want = modelled(t, d, p, adj_threads_get());
  if (t->rank == 0)
    ADJ_TEST_CHECK(t, got >= 0.9 * want && got <= 1.1 * want,
                   "%s %s on %d ranks: rank 0 allocated %.0f bytes, the model counts %.0f", d->name, name, t->size, got,
                   want);
  adj_test_report(t, "  %-8s %-36s rank 0 allocated %9.0f bytes, modelled %9.0f: %.3f", d->name, name, got, want,
                  want > 0 ? got / want : 0);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t442-step-model-memory");
  if (!heap_counted()) return adj_test_skip(&t, "mallinfo2 counts no allocation here (a sanitizer's allocator?)");
  for (const char *const *net = uniform_walk_networks; *net; net++) {
    adj_description *d = uniform_walk(&t, argc > 1 ? argv[1] : "networks", *net, BATCH, check_placement);
    adj_description_destroy(&d);
  }
  /* tanh and sigmoid keep their outputs for backward (pointwise_layer.c).
   * About 12 MB on one rank, so that the bookkeeping the model leaves out
   * (MPI's share grows with the ranks and differs between MPIs: 0.35 MB on 2
   * ranks of Open MPI) stays within the bound; walked on 1 and 2 ranks, as
   * its placements on 4 take minutes on 2 cores. */
  static const char smooth[] = "network smooth\ninput 3 32 32\nconv c1 out=16 k=3 p=1\ntanh\nconv c2 out=8 k=3 p=1\n"
                               "sigmoid\nfc f out=10\ntanh\nloss type=mse\n";
  adj_description *d = NULL;
  if (t.size <= 2) ADJ_TEST_OK(&t, adj_description_parse(smooth, "t442", &d));
  if (d) uniform_walk_description(&t, d, BATCH, check_placement);
  adj_description_destroy(&d);
  return adj_test_finish(&t);
}
