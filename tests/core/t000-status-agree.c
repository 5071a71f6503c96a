/* Status agreement: an error seen by one rank becomes the same error, with the
 * failing rank's message, on every rank; no rank hangs.  Checked through the
 * reduction on the caller's communicator and through the private agreement on
 * a communicator adjoin owns (point-to-point proposals up to
 * ADJ_AGREEMENT_EXCHANGE_MAX ranks, the reduction beyond), including a
 * choice that differs between ranks and two agreements in flight at once. */
#include <string.h>

#include "agree_impl.h"
#include "error_impl.h"
#include "harness.h"

typedef int (*agree_fn)(MPI_Comm comm, int status, bool choice, const char *what, adj_wait_policy policy);

static void check_failures(adj_test *t, MPI_Comm comm, agree_fn agree, const char *how) {
  ADJ_TEST_CHECK(t, agree(comm, ADJ_SUCCESS, false, NULL, ADJ_WAIT_YIELD) == ADJ_SUCCESS,
                 "%s: success must agree to success", how);
  for (int failing = 0; failing < t->size; failing++) {
    adj_clear_error();
    int local = ADJ_SUCCESS;
    if (t->rank == failing) local = adj_error_set(ADJ_ERR_SIZE, "tensor has shape [%d] but expected [4]", 3 + failing);
    int agreed = agree(comm, local, false, NULL, ADJ_WAIT_YIELD);
    char expected[128];
    /* On one rank there is nobody to tell, so no rank prefix is added. */
    if (t->size > 1)
      snprintf(expected, sizeof expected, "rank %d: tensor has shape [%d] but expected [4]", failing, 3 + failing);
    else
      snprintf(expected, sizeof expected, "tensor has shape [%d] but expected [4]", 3 + failing);
    ADJ_TEST_CHECK(t, agreed == ADJ_ERR_SIZE, "%s, failing rank %d: agreed status %s, expected ADJ_ERR_SIZE", how,
                   failing, adj_status_name(agreed));
    ADJ_TEST_CHECK(t, strcmp(adj_last_error(), expected) == 0, "%s: message '%s', expected '%s'", how,
                   adj_last_error(), expected);
  }
  /* Two failing ranks: the lowest one's code and message win everywhere. */
  if (t->size >= 3) {
    int local = t->rank == t->size - 1 ? adj_error_set(ADJ_ERR_IO, "late")
                : t->rank == 1         ? adj_error_set(ADJ_ERR_ARG, "early")
                                       : 0;
    int agreed = agree(comm, local, false, NULL, ADJ_WAIT_SPIN);
    ADJ_TEST_CHECK(t, agreed == ADJ_ERR_ARG && strstr(adj_last_error(), "rank 1: early"),
                   "%s: lowest failing rank wins: got %s '%s'", how, adj_status_name(agreed), adj_last_error());
  }
  /* A choice the last rank alone makes differently is refused everywhere. */
  if (t->size >= 2) {
    adj_clear_error();
    int agreed = agree(comm, ADJ_SUCCESS, t->rank == t->size - 1, "dx is NULL", ADJ_WAIT_YIELD);
    char expected[160];
    snprintf(expected, sizeof expected, "dx is NULL on some ranks and not on others (a collective choice): so on rank %d, "
             "not on rank 0", t->size - 1);
    ADJ_TEST_CHECK(t, agreed == ADJ_ERR_ARG && strcmp(adj_last_error(), expected) == 0,
                   "%s: a differing choice gave %s '%s'", how, adj_status_name(agreed), adj_last_error());
  }
}

/* Two private agreements posted before either completes, each with its own
 * failing rank: each completes with its own outcome on every rank. */
static void check_in_flight(adj_test *t, MPI_Comm comm) {
  if (t->size < 2) return;
  int first_bad = t->size - 1, second_bad = t->size / 2;
  adj_agreement first, second;
  adj_clear_error();
  ADJ_TEST_OK(t, adj_status_agree_post_private(comm, t->rank == first_bad ? ADJ_ERR_IO : ADJ_SUCCESS, false, &first));
  ADJ_TEST_OK(t, adj_status_agree_post_private(comm, t->rank == second_bad ? ADJ_ERR_DTYPE : ADJ_SUCCESS, false,
                                               &second));
  if (t->rank == first_bad) adj_error_set(ADJ_ERR_IO, "first");
  int a = adj_status_agree_complete(&first, NULL, ADJ_WAIT_YIELD);
  if (t->rank == second_bad) adj_error_set(ADJ_ERR_DTYPE, "second");
  int b = adj_status_agree_complete(&second, NULL, ADJ_WAIT_YIELD);
  ADJ_TEST_CHECK(t, a == ADJ_ERR_IO && b == ADJ_ERR_DTYPE && strstr(adj_last_error(), "second"),
                 "two agreements in flight: %s then %s, last message '%s'", adj_status_name(a), adj_status_name(b),
                 adj_last_error());
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t000-status-agree");
  check_failures(&t, t.comm, adj_status_agree_choice, "reduction");
  MPI_Comm own;
  ADJ_TEST_OK(&t, adj_comm_dup(t.comm, &own));
  check_failures(&t, own, adj_status_agree_private, "private");
  check_in_flight(&t, own);
  MPI_Comm_free(&own);
  adj_test_report(&t, "status agreement on %d ranks, each failing in turn: through the reduction and the private "
                  "agreement (%s)", t.size,
                  t.size == 1 ? "nobody to agree with"
                  : t.size <= ADJ_AGREEMENT_EXCHANGE_MAX ? "proposals point to point"
                                                         : "a reduction beyond the exchange's limit");
  return adj_test_finish(&t);
}
