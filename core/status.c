#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "adjoin/status.h"
#include "error_impl.h"

/* One message per thread, like errno: the library keeps no other global state. */
static _Thread_local char adj_error_message[1024];

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

void adj_clear_error(void) { adj_error_message[0] = '\0'; }

int adj_error_set(int code, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(adj_error_message, sizeof adj_error_message, fmt, args);
  va_end(args);
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
