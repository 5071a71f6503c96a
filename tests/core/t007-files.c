/* t007: files given by name (file.h).  An input that is a FIFO with no
 * writer, a device or a directory is refused at once (the FIFO's open does
 * not wait), as is one past its size limit or, read as text, one holding a
 * NUL byte; a /proc file, whose size says 0, is read whole.  An output path
 * that is a FIFO, a device (/dev/full, /dev/null) or a directory, or whose
 * directory is missing, is refused before anything is written; a write that
 * fails (to /dev/full) is reported when the stream is closed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "adjoin/file.h"
#include "adjoin/status.h"
#include "harness.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A refusal with ADJ_ERR_IO naming `what`, the path and the reason, within
 * a second (nothing waited on). */
static void expect_io(adj_test *t, const char *label, int status, double started, const char *path,
                      const char *reason) {
  double seconds = now() - started;
  const char *m = adj_last_error();
  ADJ_TEST_CHECK(t, status == ADJ_ERR_IO && strstr(m, path) && strstr(m, reason) && seconds < 1.0,
                 "%s: status %s after %.3f s, message '%s' (wanted '%s' and '%s')", label, adj_status_name(status),
                 seconds, m, path, reason);
  adj_test_report(t, "%-32s refused in %.4f s: %s", label, seconds, m);
}

static void write_file(adj_test *t, const char *path, const char *data, size_t size) {
  FILE *f = fopen(path, "wb");
  ADJ_TEST_CHECK(t, f && fwrite(data, 1, size, f) == size && fclose(f) == 0, "cannot write %s", path);
}

static void check_inputs(adj_test *t, const char *dir) {
  char fifo[512], text[512], nul[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(text, sizeof text, "%s/text", dir);
  snprintf(nul, sizeof nul, "%s/nul", dir);
  ADJ_TEST_CHECK(t, mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
  write_file(t, text, "alpha 1\nbeta 2\n", 15);
  write_file(t, nul, "alpha\0", 6);
  char *read = NULL;
  int fd = -1;
  double t0 = now();
  expect_io(t, "a FIFO without a writer", adj_file_read_text(fifo, "--calibration", 100, &read, NULL), t0, fifo,
            "is a FIFO, not a regular file");
  t0 = now();
  expect_io(t, "/dev/zero", adj_file_open_input("/dev/zero", "network file", -1, &fd, NULL), t0, "network file /dev/zero",
            "is a character device, not a regular file");
  t0 = now();
  expect_io(t, "a directory", adj_file_read_text(dir, "network file", 100, &read, NULL), t0, dir,
            "is a directory, not a regular file");
  t0 = now();
  expect_io(t, "15 bytes with a limit of 14", adj_file_read_text(text, "table", 14, &read, NULL), t0, text,
            "15 bytes, more than the 14");
  t0 = now();
  expect_io(t, "a NUL byte", adj_file_read_text(nul, "table", 100, &read, NULL), t0, nul, "not text");
  ADJ_TEST_CHECK(t, read == NULL, "a refused read returned text");
  size_t length = 0;
  ADJ_TEST_OK(t, adj_file_read_text(text, "table", 15, &read, &length));
  ADJ_TEST_CHECK(t, read && length == 15 && !strcmp(read, "alpha 1\nbeta 2\n"), "read %zu bytes '%s'", length,
                 read ? read : "(null)");
  free(read);
  ADJ_TEST_OK(t, adj_file_read_text("/proc/self/status", "status", 1 << 20, &read, &length));
  ADJ_TEST_CHECK(t, read && length > 0 && strstr(read, "Pid:"), "/proc/self/status read as %zu bytes", length);
  adj_test_report(t, "%-32s read %zu bytes though its size says 0", "/proc/self/status", length);
  free(read);
}

static void check_outputs(adj_test *t, const char *dir) {
  char fifo[512], missing[512], fresh[512];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(missing, sizeof missing, "%s/no-such-dir/trace.txt", dir);
  snprintf(fresh, sizeof fresh, "%s/fresh.txt", dir);
  static const struct {
    const char *path, *reason;
  } devices[] = {{"/dev/full", "exists and is a character device"}, {"/dev/null", "exists and is a character device"}};
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
    double t0 = now();
    expect_io(t, devices[i].path, adj_file_check_output(devices[i].path, "--trace"), t0, devices[i].path,
              devices[i].reason);
  }
  double t0 = now();
  FILE *f = NULL;
  expect_io(t, "a FIFO as output", adj_file_open_output(fifo, "--trace", &f), t0, fifo, "is a FIFO, not a regular file");
  t0 = now();
  expect_io(t, "a directory as output", adj_file_check_output(dir, "--metrics"), t0, dir, "is a directory");
  t0 = now();
  expect_io(t, "a missing directory", adj_file_check_output(missing, "--metrics"), t0, missing, "does not exist");
  ADJ_TEST_OK(t, adj_file_open_output(fresh, "--trace", &f));
  if (f) fputs("event\n", f);
  ADJ_TEST_OK(t, adj_file_close_output(f, fresh, "--trace"));
  /* A stream opened around the check: its lost bytes are found at close. */
  f = fopen("/dev/full", "w");
  ADJ_TEST_CHECK(t, f != NULL, "cannot open /dev/full");
  if (f) fputs("lost\n", f);
  t0 = now();
  expect_io(t, "a write to /dev/full", adj_file_close_output(f, "/dev/full", "--trace"), t0, "/dev/full",
            "No space left on device");
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t007-files");
  char dir[] = "/tmp/adjoin-t007-XXXXXX";
  ADJ_TEST_CHECK(&t, mkdtemp(dir) != NULL, "mkdtemp");
  check_inputs(&t, dir);
  check_outputs(&t, dir);
  char command[600];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  ADJ_TEST_CHECK(&t, system(command) == 0, "cannot remove %s", dir);
  return adj_test_finish(&t);
}
