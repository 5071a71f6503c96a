/* adjoin status codes and error messages.
 *
 * Every fallible adjoin function returns an int status: ADJ_SUCCESS (0) or one of
 * the codes below.  The library never exits or aborts; instead it records a
 * readable message that names the bad value, retrievable with adj_last_error(),
 * and the file:line:function of each frame the error passed on its way out
 * (adj_last_error_trace(), as PETSc's tracebacks).
 *
 * Collective safety: an error detected from arguments every rank shares is found
 * identically on every rank.  An error only one rank can see (a tensor of the
 * wrong local shape, a failed allocation, an unreadable file) is agreed on at
 * the entry of collective calls, so every rank returns the same code and the
 * same message (prefixed with the rank that found it) and none is left waiting
 * inside a collective. */
#ifndef ADJOIN_STATUS_H
#define ADJOIN_STATUS_H

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_status {
  ADJ_SUCCESS = 0,
  ADJ_ERR_ARG = 1,          /* an argument has a bad value */
  ADJ_ERR_SIZE = 2,         /* shapes or sizes do not match */
  ADJ_ERR_DTYPE = 3,        /* dtypes do not match */
  ADJ_ERR_INCOMPATIBLE = 4, /* partitions cannot be combined this way */
  ADJ_ERR_STATE = 5,        /* call made in the wrong state (e.g. end without begin) */
  ADJ_ERR_MEM = 6,          /* allocation failed */
  ADJ_ERR_MPI = 7,          /* an MPI call failed */
  ADJ_ERR_IO = 8,           /* file could not be read or written, or is malformed */
  ADJ_ERR_NUMERIC = 9,      /* a numerical library failed */
  ADJ_ERR_REMOTE = 10,      /* another rank failed; its message is in adj_last_error() */
  ADJ_STATUS_COUNT
} adj_status;

/* Short name of a status code ("ADJ_ERR_SIZE"). */
const char *adj_status_name(int status);

/* Message recorded by the most recent failure on this thread ("" if none). */
const char *adj_last_error(void);

/* The trail of the most recent failure: one line per function it passed on
 * its way out, innermost first, each "  at kernels/conv.c:412 (adj_conv_plan_create)"
 * and ending in a newline ("" if none).  An error agreed across ranks carries
 * the trail of the rank that found it (agree.h). */
const char *adj_last_error_trace(void);

/* Forget the recorded message and its trail. */
void adj_clear_error(void);

ADJ_END_DECLS

#endif
