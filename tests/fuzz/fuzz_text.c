/* Fuzz target: the text formats adjoin reads from files, from their text
 * (the file readers add only file.h's open, fuzzed by the IDX and checkpoint
 * targets' paths).  The first input byte picks the format, the rest is the
 * text:
 *   0  a planner network description (plan.h), then, when accepted, its cost
 *      on every grid of P = 1..8 in each mode and conv layout;
 *   1  a calibration file (plan.h);
 *   2  the algorithm table of the summing primitives (algorithm_table_impl.h).
 * A refusal is the expected outcome for most inputs; what must never happen
 * is a crash, undefined behaviour (UBSan: no overflow in the planner's
 * arithmetic), a leak, or an accepted input that breaks the format's promises
 * (abort() marks those). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/plan.h"
#include "algorithm_table_impl.h"
#include "fuzz.h"

enum { FORMAT_NETWORK, FORMAT_CALIBRATION, FORMAT_ALGORITHM_TABLE, FORMAT_COUNT };

/* Every grid of P = 1..8 in each mode and conv layout: totals are finite and
 * at least 0 (a grid that cannot split a layer is refused, not priced). */
static void fuzz_costs(const adj_plan_network *net) {
  int64_t parameters = 0;
  for (int i = 0; i < net->n; i++) parameters += net->layers[i].weights + net->layers[i].biases;
  if (parameters != adj_plan_network_parameters(net) || parameters < 0) abort();
  for (int mode = ADJ_PLAN_PAPER_EQ4; mode <= ADJ_PLAN_ADJOIN; mode++)
    for (int conv = ADJ_PLAN_CONV_SAME; conv <= ADJ_PLAN_CONV_DOMAIN; conv++)
      for (int p = 1; p <= 8; p++) {
        adj_plan_config c = {.mode = (adj_plan_mode)mode, .conv = (adj_plan_conv_layout)conv, .p = p, .batch = 64,
                             .alpha = 2e-6, .beta = 1.0 / 6e9, .word_bytes = 4};
        for (int p_r = 1; p_r <= p; p_r++) {
          adj_plan_result r;
          if (p % p_r || adj_plan_evaluate(net, &c, p_r, p / p_r, &r)) continue;
          if (!isfinite(r.total) || r.total < 0) abort();
          adj_plan_result_free(&r);
        }
      }
}

static void fuzz_network(const char *text) {
  adj_plan_network *net = NULL;
  if (adj_plan_network_parse(text, "fuzz.net", &net)) return;
  if (!net || net->n < 1) abort();
  fuzz_costs(net);
  adj_plan_network_destroy(&net);
}

static void fuzz_calibration(const char *text) {
  adj_plan_calibration cal;
  if (adj_plan_calibration_parse(text, "fuzz-calibration", &cal)) return;
  if (!(cal.alpha > 0 && cal.beta > 0 && isfinite(cal.alpha) && isfinite(cal.beta))) abort();
  if (cal.collective_ranks && (cal.collective_ranks < 2 || !(cal.collective_alpha > 0 && cal.collective_beta > 0)))
    abort();
}

static void fuzz_algorithm_table(const char *text) {
  adj_algorithm_table table;
  if (adj_algorithm_table_parse(text, "fuzz-table", &table)) {
    if (table.n != 0) abort(); /* a refused table is empty */
    return;
  }
  if (table.n < 0 || table.n > ADJ_ALGORITHM_TABLE_MAX) abort();
  for (int i = 0; i < table.n; i++) {
    const adj_algorithm_entry *e = &table.entries[i];
    if (e->group < 2 || e->bytes < 0 || e->algorithm < 1 || e->algorithm >= ADJ_SUM_ALGORITHM_COUNT) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  switch (data[0] % FORMAT_COUNT) {
  case FORMAT_NETWORK: fuzz_network(text); break;
  case FORMAT_CALIBRATION: fuzz_calibration(text); break;
  default: fuzz_algorithm_table(text); break;
  }
  free(text);
  return 0;
}
