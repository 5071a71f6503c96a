/* The dot-product test of a layer's Jacobian (any layer, a whole network
 * included) and the Taylor test of its tangent-linear map, on the machinery of
 * dottest.h. */
#ifndef ADJOIN_LAYER_DOTTEST_H
#define ADJOIN_LAYER_DOTTEST_H

#include "adjoin/dottest.h"
#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* The Jacobian dot-product test of a layer at a random point: x0 and the
 * parameter values are drawn uniformly from [-1, 1) (overwriting the layer's
 * parameters), forward runs at that point, then the test compares
 * <J (dx, dtheta), dy> with <(dx, dtheta), J^T dy> over the input and every
 * parameter at once.  Collective on the layer's communicator. */
int adj_dottest_layer(adj_layer *layer, uint64_t seed, adj_dottest_result *result);

/* The Taylor test of a layer at a random point in a random direction v =
 * (dx, dtheta): for h = h0, h0/2, ..., h0/2^(n-1) it records the remainder
 * r(h) = || f(x + h dx; theta + h dtheta) - f(x; theta) - h J v || and returns
 * the observed orders log2(r(h)/r(h/2)) (n-1 of them); second order is ~2.
 * Parameters are restored afterwards.  Collective. */
int adj_taylor_test_layer(adj_layer *layer, uint64_t seed, double h0, int n, double *remainders,
                          double *orders);

ADJ_END_DECLS

#endif
