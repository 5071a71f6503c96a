/* A run beside its prediction (step_report.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/network.h"
#include "adjoin/step_report.h"
#include "error_impl.h"

int adj_step_measurement_take(const adj_layer *network, int64_t steps, double seconds, adj_step_measurement *m) {
  ADJ_CHECK(m && steps >= 1, ADJ_ERR_ARG, "step report: no measurement, or %lld steps", (long long)steps);
  *m = (adj_step_measurement){0};
  int n = adj_network_depth(network);
  ADJ_CHECK(n >= 1, ADJ_ERR_ARG, "step report: %s", adj_last_error());
  m->forward = calloc((size_t)n, sizeof *m->forward);
  m->backward = calloc((size_t)n, sizeof *m->backward);
  if (!m->forward || !m->backward) {
    adj_step_measurement_free(m);
    return adj_error_set(ADJ_ERR_MEM, "step report: out of memory for %d stages", n);
  }
  m->n = n, m->steps = steps, m->step = seconds / (double)steps;
  for (int i = 0; i < n; i++) {
    ADJ_CALL(adj_network_stage_seconds(network, i, &m->forward[i], &m->backward[i]));
    m->forward[i] /= (double)steps, m->backward[i] /= (double)steps;
  }
  return ADJ_SUCCESS;
}

int adj_step_measurement_add(adj_step_measurement *m, const adj_layer *network, int64_t steps, double seconds) {
  ADJ_CHECK(m, ADJ_ERR_ARG, "step report: no measurement");
  adj_step_measurement run;
  ADJ_CALL(adj_step_measurement_take(network, steps, seconds, &run));
  if (!m->n) {
    *m = run;
    return ADJ_SUCCESS;
  }
  ADJ_CHECK(m->n == run.n, ADJ_ERR_ARG, "step report: %d stages measured before, %d now", m->n, run.n);
  double before = (double)m->steps, now = (double)run.steps, all = before + now;
  for (int i = 0; i < m->n; i++) {
    m->forward[i] = (m->forward[i] * before + run.forward[i] * now) / all;
    m->backward[i] = (m->backward[i] * before + run.backward[i] * now) / all;
  }
  m->step = (m->step * before + run.step * now) / all;
  m->steps += run.steps;
  adj_step_measurement_free(&run);
  return ADJ_SUCCESS;
}

void adj_step_measurement_keep_best(adj_step_measurement *m, const adj_step_measurement *other) {
  if (!m || !other || m->n != other->n) return;
  for (int i = 0; i < m->n; i++) {
    m->forward[i] = fmin(m->forward[i], other->forward[i]);
    m->backward[i] = fmin(m->backward[i], other->backward[i]);
  }
  m->step = fmin(m->step, other->step);
  m->steps += other->steps;
}

void adj_step_measurement_free(adj_step_measurement *m) {
  if (!m) return;
  free(m->forward), free(m->backward);
  *m = (adj_step_measurement){0};
}

double adj_step_measured_phase(const adj_step_measurement *m, adj_step_phase phase) {
  double forward = 0, backward = 0;
  for (int i = 0; i < m->n; i++) forward += m->forward[i], backward += m->backward[i];
  if (phase == ADJ_STEP_FORWARD) return forward;
  if (phase == ADJ_STEP_BACKWARD) return backward;
  return m->step - forward - backward;
}

/* "1.234" or "-" where the prediction is 0. */
static const char *report_ratio(double measured, double predicted, char *buf, size_t size) {
  if (predicted > 0) snprintf(buf, size, "%.3f", measured / predicted);
  else snprintf(buf, size, "-");
  return buf;
}

static void report_stages(const adj_step_prediction *p, const adj_step_measurement *m, const adj_layer *network,
                          FILE *out) {
  fprintf(out, "%-4s %-24s %-16s %11s %11s %7s %11s %11s %7s\n", "#", "stage (built)", "stage (model)", "pred fwd s",
          "meas fwd s", "ratio", "pred bwd s", "meas bwd s", "ratio");
  for (int i = 0; i < m->n; i++) {
    const adj_step_stage *s = &p->stages[i];
    double fwd = s->compute[ADJ_STEP_FORWARD] + s->comm[ADJ_STEP_FORWARD];
    double bwd = s->compute[ADJ_STEP_BACKWARD] + s->comm[ADJ_STEP_BACKWARD];
    char r1[16], r2[16];
    adj_layer *stage = adj_network_layer((adj_layer *)network, i);
    fprintf(out, "%-4d %-24.24s %-16.16s %11.4e %11.4e %7s %11.4e %11.4e %7s\n", i,
            stage ? adj_layer_name(stage) : "?", s->name, fwd, m->forward[i], report_ratio(m->forward[i], fwd, r1, 16),
            bwd, m->backward[i], report_ratio(m->backward[i], bwd, r2, 16));
  }
}

void adj_step_report_print(const adj_step_prediction *p, const adj_step_measurement *m, const adj_layer *network,
                           FILE *out) {
  if (!p || !m || !out) return;
  if (p->n == m->n) report_stages(p, m, network, out);
  else
    fprintf(out, "note: the network has %d stages and the model %d; only the phases are compared\n", m->n, p->n);
  char r[16];
  fprintf(out, "%-24s %11s %11s %7s\n", "phase", "predicted s", "measured s", "ratio");
  for (int phase = 0; phase < ADJ_STEP_PHASES; phase++) {
    double predicted = p->phase[phase] + (phase == ADJ_STEP_OPTIMIZER ? p->agreements : 0);
    double measured = adj_step_measured_phase(m, (adj_step_phase)phase);
    fprintf(out, "%-24s %11.4e %11.4e %7s\n", phase == ADJ_STEP_OPTIMIZER ? "optimizer and the rest" : adj_step_phase_name((adj_step_phase)phase), predicted, measured,
            report_ratio(measured, predicted, r, sizeof r));
  }
  fprintf(out, "%-24s %11.4e %11.4e %7s\n", "step", p->step, m->step, report_ratio(m->step, p->step, r, sizeof r));
  if (m->peak_rss > 0)
    fprintf(out, "%-24s %11.2f %11.2f %7s   (MiB, rank 0)\n", "peak memory", (double)p->memory_total / (1 << 20),
            (double)m->peak_rss / (1 << 20),
            report_ratio((double)m->peak_rss, (double)p->memory_total, r, sizeof r));
}
