/* Failure injection (internal/fault_impl.h) shared by t409 and t414: a layer
 * (a network or a lone layer) with its tensors; a site armed on one rank;
 * the same ADJ_ERR_MEM and message naming the site expected on every rank
 * (a hang is the test's timeout); then a clean pass, which must succeed.
 * Every function is collective on the layer's communicator. */
#ifndef ADJOIN_TEST_FAULT_CHECK_H
#define ADJOIN_TEST_FAULT_CHECK_H

#include "harness.h"

typedef struct fc_run {
  adj_layer *layer;
  adj_tensor x, y, dx, dy, dt; /* input and output, their gradients, the jvp's output */
  int sites;                   /* sites injected so far */
} fc_run;

/* Takes `layer` over (fc_run_end destroys it), creates its tensors, fills x
 * with values in [0.05, 0.95] (inside every loss's domain) and dy with ones,
 * and checks that a clean pass succeeds.  False (a failure recorded) if not. */
bool fc_run_begin(adj_test *t, fc_run *r, adj_layer *layer);
void fc_run_end(fc_run *r);

/* Arms `site` on rank `failing` and runs the call its words name ("...
 * backward ...": backward, "... jvp ...": jvp, else forward) after the
 * forward it needs; checks the error on every rank and the clean pass after.
 * A site that never fires leaves the call successful: a failed check, so the
 * test cannot pass vacuously. */
void fc_inject_on(adj_test *t, fc_run *r, const char *site, int failing);
/* The same on rank 0 and on the last rank. */
void fc_inject(adj_test *t, fc_run *r, const char *site);

/* The layer and, for a network, every stage (nested networks included): the
 * forward, jvp and backward sites of each name (layers/layer.c; a name once,
 * as its site fires at the first stage that reaches it), and the "local"
 * sites of the layers whose local step comes before a collective
 * (fc_local_sites). */
void fc_inject_stages(adj_test *t, fc_run *r);

/* The local sites' suffixes of a layer by its name, NULL-terminated in
 * `kinds` (room for 4); returns how many. */
int fc_local_sites(const char *name, const char **kinds);

#endif
