/* The tests of the step model over every uniform placement of a network on
 * the run's ranks (placement.h's enumeration): t441, t442. */
#ifndef ADJOIN_TESTS_UNIFORM_WALK_H
#define ADJOIN_TESTS_UNIFORM_WALK_H

#include "harness.h"

/* The networks these tests walk: LeNet-5, the MLP, the encoder-decoder. */
extern const char *const uniform_walk_networks[];

/* Called with the description, a placement and its name. */
typedef void uniform_visit(adj_test *t, const adj_description *d, const adj_placement *p, const char *name);

/* Reads DIR/NET.net and calls visit for each of its uniform placements on
 * t->size ranks for a batch of `batch`; returns the description (the
 * caller destroys it), or NULL when it cannot be read. */
adj_description *uniform_walk(adj_test *t, const char *dir, const char *net, int64_t batch, uniform_visit *visit);

/* The same over a description at hand. */
void uniform_walk_description(adj_test *t, const adj_description *d, int64_t batch, uniform_visit *visit);

#endif
