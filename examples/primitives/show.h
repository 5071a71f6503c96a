/* Helpers shared by the primitive examples: print every worker's block in rank
 * order, and stop the program with adjoin's message when a call fails. */
#ifndef ADJOIN_EXAMPLES_SHOW_H
#define ADJOIN_EXAMPLES_SHOW_H

#include "adjoin/adjoin.h"

/* Rank 0 prints `title`, then one line per rank of comm: its block's shape and
 * values.  Collective on comm. */
void show_blocks(MPI_Comm comm, const char *title, const adj_tensor *t);

/* adj_init, and a clear stop when the world has fewer than 4 ranks (extra
 * ranks are fine: they sit outside the partitions and only watch).  Returns
 * this process's rank. */
int example_begin(int *argc, char ***argv, const char *name);

/* Examples stop at the first failure: print adj_last_error() and abort. */
#define EXAMPLE_CHECK(expr)                                                                        \
  do {                                                                                             \
    int example_status_ = (expr);                                                                  \
    if (example_status_) example_fail(#expr, example_status_);                                     \
  } while (0)
void example_fail(const char *what, int status);

#endif
