/* Failure injection shared by the network tests (see fault_check.h). */
#include <stdio.h>
#include <string.h>

#include "fault_check.h"
#include "fault_impl.h"

typedef enum fc_call { FC_FORWARD, FC_JVP, FC_BACKWARD } fc_call;

static fc_call fc_call_of(const char *site) {
  return strstr(site, " backward") ? FC_BACKWARD : strstr(site, " jvp") ? FC_JVP : FC_FORWARD;
}

static int fc_call_run(fc_run *r, fc_call call) {
  if (call == FC_BACKWARD) return adj_layer_backward(r->layer, &r->dy, &r->dx);
  if (call == FC_JVP) return adj_layer_jvp(r->layer, &r->dx, &r->dt);
  return adj_layer_forward(r->layer, &r->x, &r->y);
}

/* One clean forward and backward; every rank gets the agreed status. */
static int fc_pass(fc_run *r) {
  int status = fc_call_run(r, FC_FORWARD);
  return status ? status : fc_call_run(r, FC_BACKWARD);
}

bool fc_run_begin(adj_test *t, fc_run *r, adj_layer *layer) {
  *r = (fc_run){.layer = layer};
  int status = adj_layer_create_input(layer, &r->x);
  if (!status) status = adj_layer_create_input(layer, &r->dx);
  if (!status) status = adj_layer_create_output(layer, &r->y);
  if (!status) status = adj_layer_create_output(layer, &r->dy);
  if (!status) status = adj_layer_create_output(layer, &r->dt);
  for (int64_t i = 0; !status && i < adj_tensor_volume(&r->x); i++) {
    adj_tensor_set(&r->x, i, 0.05 + 0.9 * (double)(i % 997) / 996.0);
    adj_tensor_set(&r->dx, i, 0.5);
  }
  for (int64_t i = 0; !status && i < adj_tensor_volume(&r->dy); i++) adj_tensor_set(&r->dy, i, 1.0);
  if (!status) status = fc_pass(r);
  ADJ_TEST_CHECK(t, status == ADJ_SUCCESS, "%s: the clean pass before any failure: %s: %s", adj_layer_name(layer),
                 adj_status_name(status), adj_last_error());
  return status == ADJ_SUCCESS;
}

void fc_run_end(fc_run *r) {
  adj_tensor *owned[] = {&r->x, &r->y, &r->dx, &r->dy, &r->dt};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) adj_tensor_destroy(owned[i]);
  adj_layer_destroy(&r->layer);
}

void fc_inject_on(adj_test *t, fc_run *r, const char *site, int failing) {
  char label[200], phrase[200];
  snprintf(label, sizeof label, "%s on rank %d", site, failing);
  fc_call call = fc_call_of(site);
  /* The jvp and backward need a forward first. */
  if (call != FC_FORWARD) ADJ_TEST_OK(t, fc_call_run(r, FC_FORWARD));
  adj_clear_error();
  if (t->rank == failing) adj_fault_arm(site);
  int status = fc_call_run(r, call);
  adj_fault_arm(NULL);
  /* One rank agrees with no one, so its message has no rank prefix. */
  if (t->size > 1) snprintf(phrase, sizeof phrase, "rank %d: %s: injected failure", failing, site);
  else snprintf(phrase, sizeof phrase, "%s: injected failure", site);
  adj_test_expect_error(t, label, status, ADJ_ERR_MEM, phrase);
  int clean = fc_pass(r);
  ADJ_TEST_CHECK(t, clean == ADJ_SUCCESS, "%s: the pass after the failure: %s: %s", label, adj_status_name(clean),
                 adj_last_error());
}

void fc_inject(adj_test *t, fc_run *r, const char *site) {
  fc_inject_on(t, r, site, 0);
  if (t->size > 1) fc_inject_on(t, r, site, t->size - 1);
  r->sites++;
}

int fc_local_sites(const char *name, const char **kinds) {
  static const struct {
    const char *marker; /* in the layer's name (at its start: prefix) */
    bool prefix;
    const char *kinds[4];
  } table[] = {
      {"affine", false, {"forward local", "backward local"}}, /* affine and affine15 */
      {"fc", true, {"forward local", "backward local"}},      /* LeNet-5's affine layers */
      {"pool", false, {"backward local"}},
      {"batchnorm", false, {"forward local", "jvp local", "backward local"}},
      {"upsample", false, {"backward local"}},
      {"deep halo", false, {"backward local"}},
      {"_loss", false, {"forward local", "jvp local"}}, /* loss_layers.h, reduced */
      {"softmax_xent", false, {"backward local"}},
      {"phantom[", true, {"forward local", "backward local"}},
      {"tp[", true, {"backward local"}},
  };
  int n = 0;
  for (size_t i = 0; i < sizeof table / sizeof table[0] && !n; i++) {
    const char *at = strstr(name, table[i].marker);
    bool match = at && (!table[i].prefix || at == name);
    for (int k = 0; match && k < 4 && table[i].kinds[k]; k++) kinds[n++] = table[i].kinds[k];
  }
  kinds[n] = NULL;
  return n;
}

enum { FC_MAX_NAMES = 64 };

/* The names of a layer and, for a network, of its stages in forward order
 * (nested networks included), each once. */
static void fc_layer_names(adj_layer *layer, const char **names, int *n) {
  bool seen = false;
  for (int p = 0; p < *n && !seen; p++) seen = !strcmp(names[p], adj_layer_name(layer));
  if (!seen && *n < FC_MAX_NAMES) names[(*n)++] = adj_layer_name(layer);
  for (int s = 0; adj_layer_is_network(layer) && s < adj_network_depth(layer); s++)
    fc_layer_names(adj_network_layer(layer, s), names, n);
}

void fc_inject_stages(adj_test *t, fc_run *r) {
  const char *names[FC_MAX_NAMES];
  int n = 0;
  fc_layer_names(r->layer, names, &n);
  for (int s = 0; s < n; s++) {
    const char *kinds[8] = {"forward", "jvp", "backward"};
    fc_local_sites(names[s], kinds + 3);
    for (int k = 0; kinds[k]; k++) {
      char site[160];
      snprintf(site, sizeof site, "%s %s", names[s], kinds[k]);
      fc_inject(t, r, site);
    }
  }
}
