/* What the command-line tools print.  A tool needs no mpiexec; under one,
 * every rank parses and computes the same and rank 0 alone prints, so each
 * line appears once and every rank exits with the same status. */
#ifndef ADJOIN_TOOL_OUTPUT_H
#define ADJOIN_TOOL_OUTPUT_H

#include <stdbool.h>

/* Starts MPI and names the program for tool_complain.  Nonzero when MPI
 * cannot start (said on stderr).  ranks may be NULL. */
int tool_begin(const char *program, int *argc, char ***argv, int *ranks);

/* True on every rank but 0: print nothing there. */
bool tool_quiet(void);

/* The library's last error as a tool prints it: the message, then the
 * frames it passed ("  at kernels/conv.c:412 (adj_conv_plan_create)"), one
 * per line (status.h).  The text lives until the next call. */
const char *tool_error(void);

/* "<program>: " and the message on stderr, from rank 0 only. */
void tool_complain(const char *format, ...) __attribute__((format(printf, 1, 2)));

#endif
