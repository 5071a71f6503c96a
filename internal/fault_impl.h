/* Failure injection for tests of collective safety (private).
 *
 * A test arms a named site on one rank; the next time the library passes that
 * site on that process it fails there as a real local failure would (an
 * allocation, a kernel's check), with ADJ_ERR_MEM and a message naming the
 * site.  The test then checks that every rank returns the same error instead
 * of some waiting in a collective.  Unarmed, a site costs one load and
 * branch.  Sites:
 *   "<layer name> forward|jvp|backward"  after any layer's method (layers/layer.c)
 *   "<layer name> <call> local"          at the local step of a layer that a
 *                                        collective follows in that call:
 *     affine, affine15            forward, backward
 *     pool, upsample, deep halo   backward (the forwards' local steps come
 *                                 after their exchanges)
 *     batch norm                  forward, jvp, backward (before the
 *                                 statistics / sums reduction)
 *     reduced losses (loss_layers.h)   forward, jvp (backward reduces dy first)
 *     phantom                     forward, backward (while the gather runs)
 *     tensor-parallel             backward (before the all-reduce)
 *     softmax cross-entropy       backward (on the root, before the scatter)
 *   "optimizer create"                   adj_optimizer_create's allocations
 * tests/net/t409 and t414 arm each of them (tests/net/fault_check.c). */
#ifndef ADJOIN_CORE_FAULT_IMPL_H
#define ADJOIN_CORE_FAULT_IMPL_H

/* Arms `site` on this process for its next pass (NULL disarms).  Not
 * thread-safe: tests arm from the thread that calls the library. */
void adj_fault_arm(const char *site);

/* Returns status unchanged unless it is ADJ_SUCCESS and `prefix suffix` is the
 * armed site, in which case the site is disarmed and ADJ_ERR_MEM returned. */
int adj_fault_at(const char *prefix, const char *suffix, int status);

#endif
