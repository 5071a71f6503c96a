/* Status agreement: an error seen by one rank becomes the same error, with the
 * failing rank's message, on every rank; no rank hangs. */
#include <string.h>

#include "error_impl.h"
#include "harness.h"

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t000-status-agree");
  ADJ_TEST_CHECK(&t, adj_status_agree(t.comm, ADJ_SUCCESS, ADJ_WAIT_YIELD) == ADJ_SUCCESS, "success must agree to success");
  for (int failing = 0; failing < t.size; failing++) {
    adj_clear_error();
    int local = ADJ_SUCCESS;
    if (t.rank == failing) local = adj_error_set(ADJ_ERR_SIZE, "tensor has shape [%d] but expected [4]", 3 + failing);
    int agreed = adj_status_agree(t.comm, local, ADJ_WAIT_YIELD);
    char expected[128];
    /* On one rank there is nobody to tell, so no rank prefix is added. */
    if (t.size > 1)
      snprintf(expected, sizeof expected, "rank %d: tensor has shape [%d] but expected [4]", failing, 3 + failing);
    else
      snprintf(expected, sizeof expected, "tensor has shape [%d] but expected [4]", 3 + failing);
    ADJ_TEST_CHECK(&t, agreed == ADJ_ERR_SIZE, "failing rank %d: agreed status %s, expected ADJ_ERR_SIZE", failing,
                   adj_status_name(agreed));
    ADJ_TEST_CHECK(&t, strcmp(adj_last_error(), expected) == 0, "message '%s', expected '%s'", adj_last_error(), expected);
  }
  /* Two failing ranks: the lowest one's code and message win everywhere. */
  if (t.size >= 3) {
    int local = t.rank == t.size - 1 ? adj_error_set(ADJ_ERR_IO, "late") : t.rank == 1 ? adj_error_set(ADJ_ERR_ARG, "early") : 0;
    int agreed = adj_status_agree(t.comm, local, ADJ_WAIT_SPIN);
    ADJ_TEST_CHECK(&t, agreed == ADJ_ERR_ARG && strstr(adj_last_error(), "rank 1: early"), "lowest failing rank wins: got %s '%s'",
                   adj_status_name(agreed), adj_last_error());
  }
  adj_test_report(&t, "status agreement checked with each of %d ranks failing", t.size);
  return adj_test_finish(&t);
}
