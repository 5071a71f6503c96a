/* Test harness for adjoin's MPI tests (MPICH test-suite style).
 *
 * Each rank counts its own failures and prints at most a few of them, tagged
 * with its rank; adj_test_finish reduces the counts so every rank exits with the
 * same code, and rank 0 prints the total.  Measured figures are printed with
 * adj_test_report so a passing run still shows the numbers it checked. */
#ifndef ADJOIN_TEST_HARNESS_H
#define ADJOIN_TEST_HARNESS_H

#include <mpi.h>
#include <stdio.h>

#include "adjoin/adjoin.h"
#include "tolerance.h" /* every test compares within these */

typedef struct adj_test {
  const char *name;
  MPI_Comm comm;   /* MPI_COMM_WORLD */
  int rank, size;
  int errors;      /* this rank's failed checks */
  int checks;      /* this rank's checks */
} adj_test;

/* adj_init (MPI with the kernels' thread level) and bookkeeping; exits with
 * adj_last_error() if MPI cannot start. */
void adj_test_begin(adj_test *t, int *argc, char ***argv, const char *name);
/* Reduces error counts, prints the verdict on rank 0, adj_finalize; returns the
 * process exit code (0, or 1 if any rank failed any check). */
int adj_test_finish(adj_test *t);
/* Exit code 77 (meson's skip) when the run has the wrong number of ranks. */
int adj_test_skip(adj_test *t, const char *why);

/* Records one check. Prints the message (rank-tagged) for the first failures. */
void adj_test_record(adj_test *t, int ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Rank 0 prints a line (measured figures). */
void adj_test_report(adj_test *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define ADJ_TEST_CHECK(t, cond, ...) adj_test_record((t), !!(cond), __FILE__, __LINE__, __VA_ARGS__)
/* Checks that a status-returning call succeeded; prints adj_last_error() if not. */
#define ADJ_TEST_OK(t, expr)                                                                       \
  do {                                                                                             \
    int adj_test_status_ = (expr);                                                                 \
    adj_test_record((t), adj_test_status_ == 0, __FILE__, __LINE__, "%s failed: %s: %s", #expr,     \
                    adj_status_name(adj_test_status_), adj_last_error());                          \
  } while (0)

/* The one check of an expected failure: status is `code` (ADJ_TEST_ANY_ERROR:
 * any failure) and adj_last_error() contains `phrase`, on this rank, and the
 * message is the same on every rank of t->comm (compared with rank 0's), so a
 * failure seen by one rank has reached all of them.  Rank 0 prints the label
 * and the message.  Collective on t->comm; returns whether every rank passed. */
enum { ADJ_TEST_ANY_ERROR = -1 };
int adj_test_expect_error(adj_test *t, const char *label, int status, int code, const char *phrase);

/* value as an element of dtype stores it: rounded to float32, or truncated and
 * wrapped modulo 2^bits for the integer dtypes.  References computed in double
 * compare with what an integer operator produced through it. */
double adj_test_as_dtype(adj_dtype dtype, double value);
/* The dtypes data movement runs in: float64, float32, int32, int64, uint8. */
enum { ADJ_TEST_MOVEMENT_DTYPES = 5 };
extern const adj_dtype adj_test_movement_dtypes[ADJ_TEST_MOVEMENT_DTYPES];
/* Largest |a_i - b_i| / max(1, max|b_i|) over two tensors of equal shape. */
double adj_test_max_rel_diff(const adj_tensor *a, const adj_tensor *b);
/* Fills t with values that encode the global index of each element of a block
 * that starts at box->start inside a tensor of global shape `global`:
 * value = 1 + flat global index (exactly representable below 2^24). */
void adj_test_fill_global_index(adj_tensor *t, const adj_box *box, const int64_t *global);

/* affine, ReLU, affine, ..., affine: `layers` 1.5D affine layers
 * (affine15_layer.h) of the given output widths on the input's P_c x P_r
 * partition, composed into one network (network.h), so a test can give the
 * input any cuts (uneven or empty batch blocks).  Collective. */
int adj_test_mlp15(adj_dtype dtype, const adj_decomposition *input, int layers, const int64_t *widths,
                   adj_layer **net);

#endif
