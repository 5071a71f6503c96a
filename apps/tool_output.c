#include "tool_output.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "adjoin/init.h"
#include "adjoin/status.h"

static const char *tool_program = "adjoin";
static bool tool_is_quiet;

int tool_begin(const char *program, int *argc, char ***argv, int *ranks) {
  int rank;
  tool_program = program;
  if (adj_init(argc, argv, &rank, ranks)) {
    fprintf(stderr, "%s: %s\n", program, tool_error());
    return 1;
  }
  tool_is_quiet = rank != 0;
  return 0;
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
