/* Files a program is given by name.  An input is opened so that only a
 * regular file is ever read: a FIFO, a device or a directory is refused at
 * once instead of being waited on, read without end or read as nonsense.  An
 * output path is checked before any work is spent on what it will receive,
 * and its writes are checked when it is closed, so a full disk or /dev/full
 * is an error, never a run that ends well with its output lost.
 *
 * `what` names the file as the user knows it ("--calibration", "network
 * file", "--trace"); every refusal is ADJ_ERR_IO (ADJ_ERR_ARG for a NULL or
 * empty path) with a message naming `what`, the path and the reason:
 *   --calibration /tmp/fifo: is a FIFO, not a regular file
 *   --trace /dev/full: exists and is a character device, not a regular file
 *   --metrics out/m.csv: its directory out does not exist
 * Not collective: a caller whose ranks share a path agrees on the outcome
 * (agree.h) or lets one rank check for all. */
#ifndef ADJOIN_FILE_H
#define ADJOIN_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Opens path for reading, refusing at once anything but a regular file (the
 * open does not wait for a FIFO's writer: O_NONBLOCK, then fstat) and, when
 * max_bytes >= 0, a file larger than max_bytes.  On success *fd is a
 * descriptor with blocking reads (the caller closes it) and *bytes the
 * file's size (bytes may be NULL). */
int adj_file_open_input(const char *path, const char *what, int64_t max_bytes, int *fd, int64_t *bytes);

/* The whole of a text file of at most max_bytes bytes, opened as
 * adj_file_open_input does, with a terminating NUL, in *text (free() it);
 * *length (may be NULL) is its length.  A NUL byte inside is refused: the
 * file is not text. */
int adj_file_read_text(const char *path, const char *what, int64_t max_bytes, char **text, size_t *length);

/* Whether an output could be written at path: it is a regular file this
 * process may write, or it is absent and its directory exists and takes new
 * files.  Anything else is refused: a FIFO (a write would wait for a reader),
 * a device (/dev/full loses every byte, /dev/null all of them), a
 * directory. */
int adj_file_check_output(const char *path, const char *what);

/* Opens path for writing ("w": created or truncated) after
 * adj_file_check_output, without waiting on a FIFO put there since the
 * check (O_NONBLOCK; its open then fails).  *file is a stdio stream; close it
 * with adj_file_close_output. */
int adj_file_open_output(const char *path, const char *what, FILE **file);

/* Closes a stream written to path: a write that failed, while buffered or at
 * the close, is an error naming the file and the reason.  file may be NULL
 * (nothing to close). */
int adj_file_close_output(FILE *file, const char *path, const char *what);

ADJ_END_DECLS

#endif
