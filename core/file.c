/* Files a program is given by name (include/adjoin/file.h). */
#include "adjoin/file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error_impl.h"

/* What a file that is not a regular one is, for a message. */
static const char *adj_file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISSOCK(mode)) return "a socket";
  return "something else";
}

/* Closes fd and returns status: the refusal paths of the openers. */
static int adj_file_close_with(int fd, int status) {
  close(fd);
  return status;
}

int adj_file_open_input(const char *path, const char *what, int64_t max_bytes, int *fd, int64_t *bytes) {
  what = what ? what : "input file";
  ADJ_CHECK(fd, ADJ_ERR_ARG, "adj_file_open_input: `fd` is required");
  ADJ_CHECK(path && *path, ADJ_ERR_ARG, "%s: no path given", what);
  /* O_NONBLOCK: the open of a FIFO returns at once instead of waiting for a
   * writer; it changes nothing for a regular file and is cleared below. */
  int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ADJ_CHECK(f >= 0, ADJ_ERR_IO, "%s %s: cannot open it: %s", what, path, strerror(errno));
  struct stat st;
  if (fstat(f, &st) != 0)
    return adj_file_close_with(f, ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: %s", what, path, strerror(errno))));
  if (!S_ISREG(st.st_mode))
    return adj_file_close_with(f, ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: is %s, not a regular file", what, path,
                                                          adj_file_kind(st.st_mode))));
  if (max_bytes >= 0 && st.st_size > max_bytes)
    return adj_file_close_with(f, ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: %lld bytes, more than the %lld it may "
                                                          "hold", what, path, (long long)st.st_size,
                                                          (long long)max_bytes)));
  int flags = fcntl(f, F_GETFL);
  if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return adj_file_close_with(f, ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: %s", what, path, strerror(errno))));
  *fd = f;
  if (bytes) *bytes = (int64_t)st.st_size;
  return ADJ_SUCCESS;
}

/* Reads fd to its end, at most max_bytes + 1 bytes: the extra byte finds a
 * file that grew past its limit, and reading to the end rather than to the
 * size fstat gave also reads a /proc file, whose size says 0. */
static int adj_file_slurp(int fd, const char *what, const char *path, int64_t max_bytes, int64_t size, char **text,
                          size_t *length) {
  size_t limit = (size_t)max_bytes, capacity = (size_t)(size < max_bytes ? size : max_bytes) + 1, got = 0;
  char *buffer = malloc(capacity + 1);
  ADJ_CHECK(buffer, ADJ_ERR_MEM, "%s %s: out of memory for %zu bytes", what, path, capacity);
  for (ssize_t n = 1; n != 0 && got <= limit;) {
    if (got == capacity) {
      capacity = capacity > limit / 2 ? limit + 1 : 2 * capacity;
      char *bigger = realloc(buffer, capacity + 1);
      if (!bigger) return free(buffer), ADJ_FRAME(adj_error_set(ADJ_ERR_MEM, "%s %s: out of memory", what, path));
      buffer = bigger;
    }
    n = read(fd, buffer + got, capacity - got);
    if (n < 0 && errno != EINTR)
      return free(buffer), ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: cannot read it: %s", what, path,
                                                   strerror(errno)));
    if (n > 0) got += (size_t)n;
  }
  if (got > limit)
    return free(buffer), ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: more than the %lld bytes it may hold", what, path,
                                                 (long long)max_bytes));
  buffer[got] = '\0';
  *text = buffer, *length = got;
  return ADJ_SUCCESS;
}

int adj_file_read_text(const char *path, const char *what, int64_t max_bytes, char **text, size_t *length) {
  what = what ? what : "text file";
  ADJ_CHECK(text && max_bytes >= 0 && (uint64_t)max_bytes < SIZE_MAX / 2, ADJ_ERR_ARG,
            "adj_file_read_text: `text` is required and max_bytes %lld must be >= 0", (long long)max_bytes);
  *text = NULL;
  int fd;
  int64_t size;
  ADJ_CALL(adj_file_open_input(path, what, max_bytes, &fd, &size));
  size_t got = 0;
  char *buffer = NULL;
  int status = adj_file_slurp(fd, what, path, max_bytes, size, &buffer, &got);
  close(fd);
  ADJ_CALL(status);
  if (memchr(buffer, '\0', got)) {
    free(buffer);
    return ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: holds a NUL byte, so it is not text", what, path));
  }
  *text = buffer;
  if (length) *length = got;
  return ADJ_SUCCESS;
}

/* The directory a new file at path would be created in must exist and take
 * new files. */
static int adj_file_check_directory(const char *path, const char *what) {
  char *copy = strdup(path);
  ADJ_CHECK(copy, ADJ_ERR_MEM, "%s %s: out of memory", what, path);
  const char *dir = dirname(copy);
  struct stat st;
  int status = ADJ_SUCCESS;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
    status = ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: its directory %s does not exist", what, path, dir));
  else if (access(dir, W_OK | X_OK) != 0)
    status = ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: cannot create files in its directory %s: %s", what, path, dir,
                                     strerror(errno)));
  free(copy);
  return status;
}

int adj_file_check_output(const char *path, const char *what) {
  what = what ? what : "output file";
  ADJ_CHECK(path && *path, ADJ_ERR_ARG, "%s: no path given", what);
  struct stat st;
  if (stat(path, &st) == 0) {
    ADJ_CHECK(S_ISREG(st.st_mode), ADJ_ERR_IO, "%s %s: exists and is %s, not a regular file; refusing to write to it",
              what, path, adj_file_kind(st.st_mode));
    ADJ_CHECK(access(path, W_OK) == 0, ADJ_ERR_IO, "%s %s: cannot write it: %s", what, path, strerror(errno));
    return ADJ_SUCCESS;
  }
  ADJ_CHECK(errno == ENOENT, ADJ_ERR_IO, "%s %s: %s", what, path, strerror(errno));
  ADJ_CALL(adj_file_check_directory(path, what));
  return ADJ_SUCCESS;
}

int adj_file_open_output(const char *path, const char *what, FILE **file) {
  what = what ? what : "output file";
  ADJ_CHECK(file, ADJ_ERR_ARG, "adj_file_open_output: `file` is required");
  *file = NULL;
  ADJ_CALL(adj_file_check_output(path, what));
  /* A FIFO put at path since the check: without a reader this open fails
   * (ENXIO) rather than waits; with one, fstat refuses it. */
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK | O_CLOEXEC, 0666);
  ADJ_CHECK(fd >= 0, ADJ_ERR_IO, "%s %s: cannot open it for writing: %s", what, path, strerror(errno));
  struct stat st;
  int flags = fcntl(fd, F_GETFL);
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0)
    return adj_file_close_with(fd, ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: is not a regular file", what, path)));
  *file = fdopen(fd, "w");
  if (!*file)
    return adj_file_close_with(fd, ADJ_FRAME(adj_error_set(ADJ_ERR_IO, "%s %s: %s", what, path, strerror(errno))));
  return ADJ_SUCCESS;
}

int adj_file_close_output(FILE *file, const char *path, const char *what) {
  if (!file) return ADJ_SUCCESS;
  /* A write that failed while its bytes sat in the buffer left only the
   * error flag; errno then no longer says why. */
  const char *why = ferror(file) ? "a write failed" : NULL;
  if (fflush(file) != 0) why = strerror(errno);
  if (fclose(file) != 0 && !why) why = strerror(errno);
  ADJ_CHECK(!why, ADJ_ERR_IO, "%s %s: writing it failed: %s", what ? what : "output file", path ? path : "(unnamed)",
            why);
  return ADJ_SUCCESS;
}
