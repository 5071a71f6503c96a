/* Private error-handling helpers (PetscCall/CeedCall style).
 *
 * ADJ_CHECK(cond, code, fmt, ...)  records a formatted message and returns code.
 * ADJ_CALL(expr)                  propagates a nonzero status.
 * ADJ_CALL_MPI(expr)              turns an MPI failure into ADJ_ERR_MPI with
 *                                 MPI's own error string.
 * Each of them, and each _GOTO variant, adds the frame it fails in
 * (file:line:function) to the error's trail (status.h). */
#ifndef ADJOIN_CORE_ERROR_IMPL_H
#define ADJOIN_CORE_ERROR_IMPL_H


#include "adjoin/status.h"

#if defined(__GNUC__)
#define ADJ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ADJ_PRINTF(a, b)
#endif

/* Records the message, starts a new trail and returns code. */
int adj_error_set(int code, const char *fmt, ...) ADJ_PRINTF(2, 3);
/* Adds a frame to the trail and returns code. */
int adj_error_frame(int code, const char *file, int line, const char *function);
#define ADJ_FRAME(code) adj_error_frame((code), __FILE__, __LINE__, __func__)
/* Replaces the trail wholesale (an agreed error takes the failing rank's). */
void adj_error_set_trace(const char *trail);
/* Replaces the message wholesale (used when agreeing on a remote rank's error). */
void adj_error_set_message(const char *message);
/* Records an MPI failure. */
int adj_error_mpi(int mpi_code, const char *what);

#define ADJ_CHECK(cond, code, ...)                                                                \
  do {                                                                                            \
    if (!(cond)) return ADJ_FRAME(adj_error_set((code), __VA_ARGS__));                           \
  } while (0)

#define ADJ_CALL(expr)                                                                            \
  do {                                                                                            \
    int adj_call_status_ = (expr);                                                                \
    if (adj_call_status_ != 0) return ADJ_FRAME(adj_call_status_);                                \
  } while (0)

#define ADJ_CALL_MPI(expr)                                                                        \
  do {                                                                                            \
    int adj_mpi_status_ = (expr);                                                                 \
    if (adj_mpi_status_ != MPI_SUCCESS) return ADJ_FRAME(adj_error_mpi(adj_mpi_status_, #expr)); \
  } while (0)

/* Variants that jump to a cleanup label with `status` set, for functions that own
 * resources. */
#define ADJ_CHECK_GOTO(cond, label, code, ...)                                                    \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      status = ADJ_FRAME(adj_error_set((code), __VA_ARGS__));                                     \
      goto label;                                                                                 \
    }                                                                                             \
  } while (0)

#define ADJ_CALL_GOTO(expr, label)                                                                \
  do {                                                                                            \
    status = (expr);                                                                              \
    if (status != 0) {                                                                            \
      ADJ_FRAME(status);                                                                          \
      goto label;                                                                                 \
    }                                                                                             \
  } while (0)

#define ADJ_CALL_MPI_GOTO(expr, label)                                                            \
  do {                                                                                            \
    int adj_mpi_status_ = (expr);                                                                 \
    if (adj_mpi_status_ != MPI_SUCCESS) {                                                         \
      status = ADJ_FRAME(adj_error_mpi(adj_mpi_status_, #expr));                                  \
      goto label;                                                                                 \
    }                                                                                             \
  } while (0)

#endif
