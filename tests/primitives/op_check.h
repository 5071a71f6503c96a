/* Checks any operator gets, shared by the primitive tests (t21x, t22x): the
 * dot-product test and split phase against the blocking application. */
#ifndef ADJOIN_TESTS_OP_CHECK_H
#define ADJOIN_TESTS_OP_CHECK_H

#include "harness.h"

/* Creates op's input and output tensors for `direction` (domain and range, or
 * range and domain); the output is filled with -123 so unwritten entries show. */
int op_check_make_pair(adj_op *op, adj_direction direction, adj_tensor *in, adj_tensor *out);
/* Dot-product test with the dtype's tolerance; prints the figure. */
void op_check_dottest(adj_test *t, const char *label, adj_op *op);
/* begin / local work / end equals the blocking application bit for bit. */
void op_check_split_phase(adj_test *t, const char *label, adj_op *op, adj_direction direction);

/* This rank's call failed and its message contains `needle`: for errors a rank
 * finds on its own (argument parsing, a check level that does not agree), where
 * the harness's every-rank adj_test_expect_error does not apply. */
void op_check_local_error(adj_test *t, int status, const char *needle, const char *what);

#endif
