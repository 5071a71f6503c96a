#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/rng.h"
#include "adjoin/status.h"
#include "error_impl.h"

struct adj_rng {
  gsl_rng *gen;
};

/* The layout of GSL's mt19937 state (gsl/rng/mt.c): 624 words of which only
 * the low 32 bits are used, and the index of the next word to temper.  A
 * saved state comes from a file, so it is checked against this before GSL
 * sees it: an index outside [0, 624] makes GSL read outside its buffer. */
enum { MT_WORDS = 624 };
typedef struct mt_state {
  unsigned long mt[MT_WORDS];
  int mti;
} mt_state;

int adj_rng_create(uint64_t seed, adj_rng **rng) {
  ADJ_CHECK(rng, ADJ_ERR_ARG, "adj_rng_create: output handle is NULL");
  *rng = NULL;
  adj_rng *r = calloc(1, sizeof *r);
  ADJ_CHECK(r, ADJ_ERR_MEM, "adj_rng_create: out of memory");
  r->gen = gsl_rng_alloc(gsl_rng_mt19937);
  if (!r->gen) {
    free(r);
    return adj_error_set(ADJ_ERR_MEM, "adj_rng_create: gsl_rng_alloc failed");
  }
  adj_rng_seed(r, seed);
  *rng = r;
  return ADJ_SUCCESS;
}

void adj_rng_destroy(adj_rng **rng) {
  if (!rng || !*rng) return;
  gsl_rng_free((*rng)->gen);
  free(*rng);
  *rng = NULL;
}

/* mt19937 takes an unsigned long seed; fold the high half in so 64-bit seeds that
 * differ only above bit 32 still give different streams. */
void adj_rng_seed(adj_rng *rng, uint64_t seed) {
  gsl_rng_set(rng->gen, (unsigned long)(seed ^ (seed >> 32) ^ 0x9e3779b9u));
}

double adj_rng_uniform(adj_rng *rng) { return gsl_rng_uniform(rng->gen); }

double adj_rng_normal(adj_rng *rng) { return gsl_ran_gaussian_ziggurat(rng->gen, 1.0); }

/* mt19937 yields 32 bits a draw, and gsl_rng_uniform_int calls GSL's error
 * handler (which aborts by default) for n above 2^32 - 1.  Below that bound
 * GSL draws, so seeded streams stay as they were; above it two draws make 64
 * bits, and GSL's own rejection scheme keeps the result unbiased: with
 * scale = floor((2^64 - 1) / n), each k < n has exactly scale preimages x with
 * x / scale == k, and x with x / scale >= n are drawn again (at most half of
 * all x, so the expected number of rounds is at most 2). */
uint64_t adj_rng_below(adj_rng *rng, uint64_t n) {
  if (n == 0) return 0;
  if (n <= 0xffffffffu) return (uint64_t)gsl_rng_uniform_int(rng->gen, (unsigned long)n);
  uint64_t scale = UINT64_MAX / n, k;
  do {
    uint64_t high = (uint64_t)gsl_rng_get(rng->gen) & 0xffffffffu;
    uint64_t low = (uint64_t)gsl_rng_get(rng->gen) & 0xffffffffu;
    k = ((high << 32) | low) / scale;
  } while (k >= n);
  return k;
}

void adj_rng_fill_uniform(adj_rng *rng, adj_tensor *t, double lo, double hi) {
  int64_t n = adj_tensor_volume(t);
  for (int64_t i = 0; i < n; i++) adj_tensor_set(t, i, lo + (hi - lo) * gsl_rng_uniform(rng->gen));
}

void adj_rng_fill_normal(adj_rng *rng, adj_tensor *t, double mean, double stddev) {
  int64_t n = adj_tensor_volume(t);
  for (int64_t i = 0; i < n; i++) adj_tensor_set(t, i, mean + stddev * gsl_ran_gaussian_ziggurat(rng->gen, 1.0));
}

size_t adj_rng_state_size(const adj_rng *rng) { return gsl_rng_size(rng->gen); }

void adj_rng_state_save(const adj_rng *rng, void *buf) {
  memcpy(buf, gsl_rng_state(rng->gen), gsl_rng_size(rng->gen));
}

int adj_rng_state_check(const adj_rng *rng, const void *buf, size_t size) {
  ADJ_CHECK(rng && buf, ADJ_ERR_ARG, "adj_rng_state_check: generator and state are required");
  ADJ_CHECK(size == gsl_rng_size(rng->gen), ADJ_ERR_SIZE,
            "generator state has %zu bytes, the generator needs %zu", size, gsl_rng_size(rng->gen));
  ADJ_CHECK(size == sizeof(mt_state), ADJ_ERR_SIZE, "generator state: GSL's mt19937 state has %zu bytes, not %zu",
            size, sizeof(mt_state));
  mt_state state;
  memcpy(&state, buf, sizeof state);
  ADJ_CHECK(state.mti >= 0 && state.mti <= MT_WORDS, ADJ_ERR_ARG,
            "generator state: Mersenne-Twister index %d is outside [0, %d]", state.mti, MT_WORDS);
  unsigned long any = 0;
  for (int i = 0; i < MT_WORDS; i++) {
    ADJ_CHECK(state.mt[i] <= 0xffffffffUL, ADJ_ERR_ARG, "generator state: word %d is %#lx, wider than 32 bits", i,
              state.mt[i]);
    any |= state.mt[i];
  }
  ADJ_CHECK(any, ADJ_ERR_ARG, "generator state: every word is zero (the generator would only ever return 0)");
  return ADJ_SUCCESS;
}

int adj_rng_state_load(adj_rng *rng, const void *buf, size_t size) {
  ADJ_CHECK(rng && buf, ADJ_ERR_ARG, "adj_rng_state_load: generator and state are required");
  ADJ_CALL(adj_rng_state_check(rng, buf, size));
  memcpy(gsl_rng_state(rng->gen), buf, size);
  return ADJ_SUCCESS;
}
