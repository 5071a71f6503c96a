#include <stdio.h>
#include <string.h>

#include "adjoin/status.h"
#include "error_impl.h"
#include "fault_impl.h"

/* The armed site ("" when none).  Process-wide like the test that sets it. */
static char adj_fault_site[128];

void adj_fault_arm(const char *site) { snprintf(adj_fault_site, sizeof adj_fault_site, "%s", site ? site : ""); }

int adj_fault_at(const char *prefix, const char *suffix, int status) {
  if (!adj_fault_site[0] || status) return status;
  size_t n = strlen(prefix);
  if (strncmp(adj_fault_site, prefix, n) || adj_fault_site[n] != ' ' || strcmp(adj_fault_site + n + 1, suffix))
    return status;
  adj_fault_site[0] = '\0';
  return adj_error_set(ADJ_ERR_MEM, "%s %s: injected failure (allocation failed)", prefix, suffix);
}
