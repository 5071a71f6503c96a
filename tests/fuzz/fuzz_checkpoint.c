/* Fuzz target: the checkpoint loader (net/checkpoint.c) on arbitrary bytes,
 * into a small network (one affine layer, 3 -> 4 features, weight and bias)
 * with Adam and a generator.  Each input is loaded twice: as given (which
 * exercises the envelope checks) and with its last 4 bytes replaced by the
 * CRC32 of the rest, so mutations reach the checks behind the checksum (header
 * ranges, generator state, descriptors, values).  A refused file must leave
 * the network, optimizer and generator as they were; an accepted one must
 * hold only finite values.
 *
 * `fuzz-checkpoint --write-seed PATH` (no libFuzzer) saves a real checkpoint
 * of this network, the seed of the corpus. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "adjoin/adjoin.h"
#include "adjoin/affine_layer.h"
#include "fuzz.h"

static adj_partition *partition;
static adj_decomposition *input;
static adj_layer *net;
static adj_optimizer *opt;
static adj_rng *rng;

static int fuzz_setup(void) {
  if (net) return 0;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(NULL, NULL);
  int one[2] = {1, 1};
  if (adj_partition_create(MPI_COMM_SELF, 2, one, 1, NULL, &partition) ||
      adj_decomposition_create(partition, 2, (int64_t[]){2, 3}, &input))
    return -1;
  adj_affine_layer_config c = {.dtype = ADJ_FLOAT64, .input = input, .in_features = 3, .out_features = 4};
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3};
  adj_layer *affine = NULL;
  /* The optimizer and checkpoints work on a network (its flat parameters). */
  if (adj_affine_layer_create(&c, &affine) || adj_network_create("fuzz", 1, &affine, &net) ||
      adj_network_init_uniform(net, 1) || adj_optimizer_create(net, &oc, &opt) ||
      adj_rng_create(1, &rng))
    return -1;
  return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  if (fuzz_setup()) {
    fprintf(stderr, "fuzz-checkpoint: setup failed: %s\n", adj_last_error());
    abort();
  }
  return 0;
}

/* Parameters, optimizer state, step count and generator state, as bytes. */
static size_t fuzz_snapshot(uint8_t *out, size_t capacity) {
  size_t n = 0;
  adj_tensor state[2];
  int buffers = adj_optimizer_state_buffers(opt, state);
  adj_tensor parts[4] = {adj_layer_parameter(net, 0)->value, adj_layer_parameter(net, 1)->value};
  for (int k = 0; k < buffers; k++) parts[2 + k] = state[k];
  for (int k = 0; k < 2 + buffers && n + adj_tensor_bytes(&parts[k]) <= capacity; k++) {
    memcpy(out + n, parts[k].data, adj_tensor_bytes(&parts[k]));
    n += adj_tensor_bytes(&parts[k]);
  }
  int64_t steps = adj_optimizer_steps(opt);
  if (n + sizeof steps + adj_rng_state_size(rng) <= capacity) {
    memcpy(out + n, &steps, sizeof steps), n += sizeof steps;
    adj_rng_state_save(rng, out + n), n += adj_rng_state_size(rng);
  }
  return n;
}

static void fuzz_load(const uint8_t *data, size_t size) {
  const char *path = fuzz_file(data, size);
  if (!path) return;
  static uint8_t before[1 << 14], after[1 << 14];
  size_t n = fuzz_snapshot(before, sizeof before);
  adj_checkpoint_position pos;
  if (adj_checkpoint_load(path, net, opt, rng, &pos)) {
    if (fuzz_snapshot(after, sizeof after) != n || memcmp(before, after, n)) abort(); /* a refusal changed state */
    return;
  }
  for (int i = 0; i < 2; i++) {
    const adj_tensor *v = &adj_layer_parameter(net, i)->value;
    for (int64_t e = 0; e < adj_tensor_volume(v); e++)
      if (!isfinite(adj_tensor_get(v, e))) abort(); /* accepted a non-finite value */
  }
  if (pos.epoch < 0 || pos.batch < 0 || pos.batch_size < 0 || adj_optimizer_steps(opt) < 0) abort();
  (void)adj_rng_uniform(rng); /* the restored generator must be usable */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_load(data, size);
  if (size < 8 || size > (1 << 20)) return 0;
  uint8_t *copy = malloc(size);
  if (!copy) return 0;
  memcpy(copy, data, size);
  uLong crc = crc32(0L, copy, (uInt)(size - 4));
  for (int i = 0; i < 4; i++) copy[size - 4 + i] = (uint8_t)(crc >> (8 * i));
  fuzz_load(copy, size);
  free(copy);
  return 0;
}

/* The seed: a real checkpoint of the fuzzed network, two Adam steps in. */
int fuzz_checkpoint_write_seed(const char *path);
int fuzz_checkpoint_write_seed(const char *path) {
  if (fuzz_setup()) return 1;
  adj_checkpoint_position pos = {.epoch = 1, .batch = 2, .seed = 1, .batch_size = 2};
  if (adj_checkpoint_save(path, net, opt, rng, &pos)) {
    fprintf(stderr, "fuzz-checkpoint: %s\n", adj_last_error());
    return 1;
  }
  return 0;
}
