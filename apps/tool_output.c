#include "tool_output.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "adjoin/file.h"
#include "adjoin/init.h"
#include "adjoin/parse.h"
#include "adjoin/status.h"

enum { TOOL_EXIT_FAILED = 1, TOOL_EXIT_USAGE = 2 };

static const char *tool_program = "adjoin";
static bool tool_is_quiet;

void tool_begin(const char *program) { tool_program = program; }

int tool_begin_mpi(int *argc, char ***argv, int *ranks) {
  int rank;
  if (adj_init(argc, argv, &rank, ranks)) {
    fprintf(stderr, "%s: %s\n", tool_program, tool_error());
    return 1;
  }
  tool_is_quiet = rank != 0;
  return 0;
}

int tool_end(int code) {
  /* stdout's buffer holds the answer until now: its write can fail here. */
  const char *why = fflush(stdout) != 0 ? strerror(errno) : ferror(stdout) ? "an earlier write failed" : NULL;
  if (why) {
    tool_complain("writing the output failed: %s\n", why);
    if (!code) code = TOOL_EXIT_FAILED;
  }
  adj_finalize();
  return code;
}

bool tool_quiet(void) { return tool_is_quiet; }

const char *tool_error(void) {
  static char text[4096];
  const char *trail = adj_last_error_trace();
  size_t n = strlen(trail);
  /* The trail's lines under the message, without its last newline. */
  snprintf(text, sizeof text, "%s%s%.*s", adj_last_error(), n ? "\n" : "", n ? (int)n - 1 : 0, trail);
  return text;
}

void tool_complain(const char *format, ...) {
  if (tool_is_quiet) return;
  va_list args;
  va_start(args, format);
  fprintf(stderr, "%s: ", tool_program);
  vfprintf(stderr, format, args);
  va_end(args);
}

bool tool_has_flag(int argc, char **argv, const char *flag) {
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], flag)) return true;
  return false;
}

/* The parser's refusal and the usage: the usage exit status. */
static int tool_refused(const char *usage) {
  tool_complain("%s\n%s", adj_last_error(), usage ? usage : "");
  return TOOL_EXIT_USAGE;
}

int tool_int64(const char *option, const char *text, int64_t min, int64_t max, const char *usage, int64_t *out) {
  return adj_parse_int64(text, min, max, option, out) ? tool_refused(usage) : 0;
}

int tool_real(const char *option, const char *text, double min, double max, const char *usage, double *out) {
  return adj_parse_real(text, min, max, option, out) ? tool_refused(usage) : 0;
}

int tool_check_output(const char *option, const char *path) {
  if (!adj_file_check_output(path, option)) return 0;
  tool_complain("%s\n", adj_last_error());
  return TOOL_EXIT_FAILED;
}
