/* Seeded random numbers (GSL's mt19937).  One generator per object, no hidden
 * global state, so a run is reproducible from its seed and independent streams
 * can coexist (per rank, per layer, per data loader). */
#ifndef ADJOIN_RNG_H
#define ADJOIN_RNG_H

#include <stdint.h>

#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_rng adj_rng;

int adj_rng_create(uint64_t seed, adj_rng **rng);
void adj_rng_destroy(adj_rng **rng);
/* Reseeds the generator in place. */
void adj_rng_seed(adj_rng *rng, uint64_t seed);
/* Uniform on [0, 1). */
double adj_rng_uniform(adj_rng *rng);
/* Standard normal. */
double adj_rng_normal(adj_rng *rng);
/* Uniform integer in [0, n), for every n (two 32-bit draws make one when n
 * exceeds 2^32 - 1); 0 when n is 0, which has no such integer. */
uint64_t adj_rng_below(adj_rng *rng, uint64_t n);
/* Fills t with uniform values on [lo, hi). */
void adj_rng_fill_uniform(adj_rng *rng, adj_tensor *t, double lo, double hi);
/* Fills t with normal values of the given mean and standard deviation. */
void adj_rng_fill_normal(adj_rng *rng, adj_tensor *t, double mean, double stddev);
/* Serialised generator state for checkpoints: size in bytes, then save/restore. */
size_t adj_rng_state_size(const adj_rng *rng);
void adj_rng_state_save(const adj_rng *rng, void *buf);
/* Restores a saved state after adj_rng_state_check accepted it; a refused
 * state leaves the generator as it was. */
int adj_rng_state_load(adj_rng *rng, const void *buf, size_t size);
/* Whether buf could be a state of rng's generator (it may come from a file):
 * the size, the Mersenne-Twister index in [0, 624], 32-bit words, not all
 * zero.  ADJ_ERR_SIZE or ADJ_ERR_ARG naming the bad value. */
int adj_rng_state_check(const adj_rng *rng, const void *buf, size_t size);

ADJ_END_DECLS

#endif
