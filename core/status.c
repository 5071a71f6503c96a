#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>

#include "adjoin/status.h"
#include "error_impl.h"

/* One message and its trail per thread, like errno: the library keeps no
 * other global state.  The trail holds one line per frame the error passed,
 * innermost first, each "  at FILE:LINE (FUNCTION)". */
static _Thread_local char adj_error_message[1024];
static _Thread_local char adj_error_trail[2048];

static const char *const adj_status_names[ADJ_STATUS_COUNT] = {
    "ADJ_SUCCESS",         "ADJ_ERR_ARG",   "ADJ_ERR_SIZE",  "ADJ_ERR_DTYPE",
    "ADJ_ERR_INCOMPATIBLE", "ADJ_ERR_STATE", "ADJ_ERR_MEM",   "ADJ_ERR_MPI",
    "ADJ_ERR_IO",          "ADJ_ERR_NUMERIC", "ADJ_ERR_REMOTE",
};

const char *adj_status_name(int status) {
  if (status < 0 || status >= ADJ_STATUS_COUNT) return "ADJ_ERR_UNKNOWN";
  return adj_status_names[status];
}

const char *adj_last_error(void) { return adj_error_message; }

const char *adj_last_error_trace(void) { return adj_error_trail; }

void adj_clear_error(void) { adj_error_message[0] = adj_error_trail[0] = '\0'; }

/* The path from the source tree's top: __FILE__ holds a path as the compiler
 * was given it, relative to the build directory ("../../src/adjoin/kernels/conv.c"),
 * and every file of the build has the same prefix as this one, so the trail
 * names files as a reader of the tree finds them. */
static const char *adj_error_tree_path(const char *file) {
  static const char self[] = __FILE__, name[] = "core/status.c";
  size_t prefix = sizeof self > sizeof name ? sizeof self - sizeof name : 0;
  return strncmp(file, self, prefix) ? file : file + prefix;
}

int adj_error_frame(int code, const char *file, int line, const char *function) {
  size_t used = strlen(adj_error_trail);
  if (used + 1 < sizeof adj_error_trail) {
    int n = snprintf(adj_error_trail + used, sizeof adj_error_trail - used, "  at %s:%d (%s)\n",
                     adj_error_tree_path(file), line, function);
    /* A frame that does not fit is dropped whole, so the trail ends in a line. */
    if (n < 0 || (size_t)n >= sizeof adj_error_trail - used) adj_error_trail[used] = '\0';
  }
  return code;
}

void adj_error_set_trace(const char *trail) { snprintf(adj_error_trail, sizeof adj_error_trail, "%s", trail); }

int adj_error_set(int code, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(adj_error_message, sizeof adj_error_message, fmt, args);
  va_end(args);
  adj_error_trail[0] = '\0';
  return code;
}

void adj_error_set_message(const char *message) {
  snprintf(adj_error_message, sizeof adj_error_message, "%s", message);
}

int adj_error_mpi(int mpi_code, const char *what) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(mpi_code, text, &length) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", mpi_code);
  return adj_error_set(ADJ_ERR_MPI, "MPI call failed: %s: %s", what, text);
}
