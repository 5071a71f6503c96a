/* What the command-line tools print, and the checks every tool makes on its
 * arguments and files.
 *
 * A tool that only computes (adjoin-halo; adjoin-plan and adjoin-phantom
 * without --calibrate) is a plain process: it never starts MPI, so it runs
 * inside an MPI job like any other command (popen from a rank, a job script
 * that mpiexec runs and that calls it twice) and, under mpiexec itself, each
 * process prints its own answer.  A tool that communicates starts MPI with
 * tool_begin_mpi; then every rank parses and computes the same and rank 0
 * alone prints, so each line appears once and every rank exits alike. */
#ifndef ADJOIN_TOOL_OUTPUT_H
#define ADJOIN_TOOL_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>

/* Names the program for tool_complain; starts nothing. */
void tool_begin(const char *program);

/* Starts MPI (adj_init) for a tool that communicates.  Nonzero when MPI
 * cannot start (said on stderr).  ranks may be NULL. */
int tool_begin_mpi(int *argc, char ***argv, int *ranks);

/* The exit status to return from main: stdout is flushed first, and a write
 * that failed (a full disk, stdout on /dev/full) turns 0 into 1 with a
 * message, since the answer was lost.  Ends MPI when tool_begin_mpi started
 * it. */
int tool_end(int code);

/* True on every rank but 0 of a tool that started MPI: print nothing there. */
bool tool_quiet(void);

/* The library's last error as a tool prints it: the message, then the
 * frames it passed ("  at kernels/conv.c:412 (adj_conv_plan_create)"), one
 * per line (status.h).  The text lives until the next call. */
const char *tool_error(void);

/* "<program>: " and the message on stderr, from rank 0 only. */
void tool_complain(const char *format, ...) __attribute__((format(printf, 1, 2)));

/* Whether argv holds `flag` as an argument of its own (before any "--"): a
 * tool that communicates only for some flags knows before it parses. */
bool tool_has_flag(int argc, char **argv, const char *flag);

/* option's value text as an integer in [min, max] or a finite real in
 * [min, max], through parse.h; on a refusal the parser's message (naming
 * the option and the text) and the usage, and the tool's usage exit
 * status 2. */
int tool_int64(const char *option, const char *text, int64_t min, int64_t max, const char *usage, int64_t *out);
int tool_real(const char *option, const char *text, double min, double max, const char *usage, double *out);

/* An output path checked before any work is spent on it (file.h): 0, or the
 * reason on stderr and 1. */
int tool_check_output(const char *option, const char *path);

#endif
