/* Data sets without files: random samples computed when read, and arrays
 * copied into memory (see include/adjoin/dataset.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/dataset.h"
#include "data_impl.h"
#include "error_impl.h"

/* ---- random --------------------------------------------------------------------------------- */

typedef struct random_array {
  uint64_t seed;
  int n_classes; /* 0: uniform elements; else labels */
} random_array;

/* SplitMix64's finaliser: a well-mixed 64-bit hash of z. */
static uint64_t random_mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15u;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

/* Element e of sample s as a uniform double in [0, 1). */
static double random_uniform(uint64_t seed, uint64_t s, int64_t volume, int64_t e) {
  return (double)(random_mix(seed ^ random_mix(s * (uint64_t)volume + (uint64_t)e)) >> 11) * 0x1p-53;
}

static int random_read(adj_data_array *a, const int64_t *samples, int64_t n, const adj_box *box, void *raw) {
  const random_array *r = a->impl;
  adj_data_runs runs;
  adj_data_runs_init(&runs, a->rank - 1, a->shape + 1, box->start, box->extent);
  int64_t volume = adj_data_sample_volume(a), per = adj_box_volume(box);
  for (int64_t i = 0; i < n; i++)
    for (int64_t k = 0; k < runs.count; k++) {
      int64_t offset = adj_data_run_offset(&runs, k), at = i * per + k * runs.length;
      for (int64_t j = 0; j < runs.length; j++) {
        double u = random_uniform(r->seed, (uint64_t)samples[i], volume, offset + j);
        if (r->n_classes) ((int64_t *)raw)[at + j] = (int64_t)(u * r->n_classes);
        else ((double *)raw)[at + j] = u;
      }
    }
  return ADJ_SUCCESS;
}

static void random_close(adj_data_array *a) { free(a->impl); }

static int random_array_init(adj_data_array *a, const char *role, int rank, const int64_t *shape, uint64_t seed,
                             int n_classes) {
  random_array *r = malloc(sizeof *r);
  ADJ_CHECK(r, ADJ_ERR_MEM, "random data set: out of memory");
  *r = (random_array){.seed = seed, .n_classes = n_classes};
  snprintf(a->role, sizeof a->role, "%s", role);
  snprintf(a->source, sizeof a->source, "(random, seed %llu)", (unsigned long long)seed);
  a->format = "random";
  a->rank = rank;
  memcpy(a->shape, shape, sizeof(int64_t) * (size_t)rank);
  a->elem = (adj_data_elem){.kind = n_classes ? 'i' : 'f', .size = 8};
  a->impl = r, a->read = random_read, a->close = random_close;
  return ADJ_SUCCESS;
}

int adj_dataset_random(int64_t count, int rank, const int64_t *sample_shape, int n_classes, uint64_t seed,
                       adj_dataset **out) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "random data set: output pointer is NULL");
  *out = NULL;
  ADJ_CHECK(count >= 1 && rank >= 1 && rank < ADJ_MAX_RANK && sample_shape && n_classes >= 1, ADJ_ERR_ARG,
            "random data set: count %lld, sample rank %d (1..%d) and classes %d must be positive", (long long)count,
            rank, ADJ_MAX_RANK - 1, n_classes);
  int64_t shape[ADJ_MAX_RANK] = {count};
  for (int d = 0; d < rank; d++) {
    ADJ_CHECK(sample_shape[d] >= 1, ADJ_ERR_ARG, "random data set: sample extent %lld in dimension %d",
              (long long)sample_shape[d], d);
    shape[d + 1] = sample_shape[d];
  }
  adj_dataset *ds = NULL;
  ADJ_CALL(adj_dataset_alloc(&ds));
  ds->n_classes = n_classes;
  int status = random_array_init(&ds->arrays[ADJ_DATA_INPUTS], "inputs", rank + 1, shape, seed, 0);
  if (!status) status = random_array_init(&ds->arrays[ADJ_DATA_TARGETS], "targets", 1, shape, ~seed, n_classes);
  if (!status) status = adj_dataset_finish(ds);
  if (status) adj_dataset_destroy(&ds);
  *out = ds;
  return status;
}

/* ---- arrays in memory ----------------------------------------------------------------------- */

static adj_data_elem memory_elem(adj_dtype dtype) {
  switch (dtype) {
  case ADJ_FLOAT32: return (adj_data_elem){.kind = 'f', .size = 4};
  case ADJ_FLOAT64: return (adj_data_elem){.kind = 'f', .size = 8};
  case ADJ_INT32: return (adj_data_elem){.kind = 'i', .size = 4};
  case ADJ_INT64: return (adj_data_elem){.kind = 'i', .size = 8};
  default: return (adj_data_elem){.kind = 'u', .size = 1};
  }
}

static int memory_array_init(adj_data_array *a, const char *role, const adj_tensor *t) {
  ADJ_CHECK(t && t->rank >= 1 && adj_dtype_valid(t->dtype) && t->shape[0] >= 1, ADJ_ERR_ARG,
            "data set from arrays: the %s need a tensor of rank 1 or more with at least one sample", role);
  a->owned = malloc(adj_tensor_bytes(t) + 1);
  ADJ_CHECK(a->owned, ADJ_ERR_MEM, "data set from arrays: out of memory for %zu bytes of %s", adj_tensor_bytes(t), role);
  memcpy(a->owned, t->data, adj_tensor_bytes(t));
  snprintf(a->role, sizeof a->role, "%s", role);
  snprintf(a->source, sizeof a->source, "(memory)");
  a->format = "memory";
  a->rank = t->rank;
  memcpy(a->shape, t->shape, sizeof(int64_t) * (size_t)t->rank);
  a->elem = memory_elem(t->dtype);
  a->base = a->owned;
  return ADJ_SUCCESS;
}

int adj_dataset_from_arrays(const adj_tensor *inputs, const adj_tensor *targets, int n_classes, adj_dataset **out) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "data set from arrays: output pointer is NULL");
  *out = NULL;
  ADJ_CHECK(n_classes >= 0, ADJ_ERR_ARG, "data set from arrays: n_classes %d is negative", n_classes);
  ADJ_CHECK(inputs && (inputs->dtype == ADJ_FLOAT32 || inputs->dtype == ADJ_FLOAT64 || inputs->dtype == ADJ_UINT8),
            ADJ_ERR_DTYPE, "data set from arrays: inputs of dtype %s (float32, float64 or uint8)",
            inputs ? adj_dtype_name(inputs->dtype) : "(none)");
  adj_dataset *ds = NULL;
  ADJ_CALL(adj_dataset_alloc(&ds));
  ds->n_classes = n_classes;
  int status = memory_array_init(&ds->arrays[ADJ_DATA_INPUTS], "inputs", inputs);
  if (!status) status = memory_array_init(&ds->arrays[ADJ_DATA_TARGETS], "targets", targets);
  if (!status) status = adj_dataset_finish(ds);
  if (!status) status = adj_dataset_check_labels(ds, 0, ds->count);
  if (status) adj_dataset_destroy(&ds);
  *out = ds;
  return status;
}
