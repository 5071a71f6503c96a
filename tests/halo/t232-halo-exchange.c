/* Halo exchange against a sequential reference, rank 1-4 tensors on 1-8
 * workers (ranks beyond a case's workers are inactive): after the forward every
 * halo entry, corners included, holds the owner's value; after the adjoint every
 * bulk entry holds its own value plus every halo copy of it, and halos are 0. */
#include <stdlib.h>
#include <string.h>

#include "halo_common.h"

/* Small integers, so float32 sums are exact. */
static double adjoint_input(int worker, int64_t j) { return (double)((worker * 7919 + j * 31) % 13) - 6.0; }

static void fill_forward_input(const halo_setup *s, adj_tensor *x) {
  adj_box bulk = halo_global_bulk(&s->local);
  int64_t g[ADJ_MAX_RANK];
  for (int64_t i = 0; i < adj_tensor_volume(x); i++) {
    halo_global_coords(&s->local, i, g);
    adj_tensor_set(x, i, halo_in_box(&bulk, g) ? (double)(1 + halo_flat(s->c->rank, s->c->shape, g)) : -7.0);
  }
}

static int64_t check_forward(adj_test *t, const halo_setup *s, adj_dtype dtype) {
  adj_tensor x;
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(s->op, &x));
  fill_forward_input(s, &x);
  adj_op_reset_counters(s->op);
  ADJ_TEST_OK(t, adj_op_forward(s->op, &x, &x));
  int64_t n = adj_tensor_volume(&x), wrong = 0, first = -1, g[ADJ_MAX_RANK];
  for (int64_t i = 0; i < n; i++) {
    halo_global_coords(&s->local, i, g);
    double want = adj_test_as_dtype(dtype, (double)(1 + halo_flat(s->c->rank, s->c->shape, g)));
    if (adj_tensor_get(&x, i) != want && wrong++ == 0) first = i;
  }
  char text[160];
  ADJ_TEST_CHECK(t, wrong == 0, "%s %s: %lld of %lld local entries wrong after forward (first: local %lld)",
                 halo_case_describe(s->c, text, sizeof text), adj_dtype_name(dtype), (long long)wrong, (long long)n,
                 (long long)first);
  /* Every halo entry arrives exactly once, from whichever worker owns it. */
  adj_op_counters counters;
  adj_op_get_counters(s->op, &counters);
  int64_t halo_entries = n - adj_box_volume(&s->local.bulk);
  ADJ_TEST_CHECK(t, counters.bytes_received == (uint64_t)halo_entries * adj_dtype_size(dtype),
                 "%s: received %llu bytes for %lld halo entries", text, (unsigned long long)counters.bytes_received,
                 (long long)halo_entries);
  adj_tensor_destroy(&x);
  return halo_entries;
}

/* Adds every other worker's halo copies of my bulk entries into expected. */
static void add_halo_copies(const halo_setup *s, adj_tensor *expected) {
  adj_box mine = halo_global_bulk(&s->local);
  int64_t g[ADJ_MAX_RANK], local[ADJ_MAX_RANK];
  for (int w = 0; w < s->workers; w++) {
    int coords[ADJ_MAX_RANK];
    adj_halo_local other;
    adj_partition_coords_of_index(s->partition, w, coords);
    adj_halo_geometry_local(s->geometry, coords, &other);
    adj_box owned = halo_global_bulk(&other);
    int64_t n = 1;
    for (int d = 0; d < other.rank; d++) n *= other.shape[d];
    for (int64_t j = 0; j < n; j++) {
      halo_global_coords(&other, j, g);
      if (halo_in_box(&owned, g) || !halo_in_box(&mine, g)) continue;
      for (int d = 0; d < other.rank; d++) local[d] = g[d] - s->local.input.start[d];
      int64_t at = halo_flat(other.rank, s->local.shape, local);
      adj_tensor_set(expected, at, adj_tensor_get(expected, at) + adjoint_input(w, j));
    }
  }
}

static void check_adjoint(adj_test *t, const halo_setup *s, adj_dtype dtype) {
  adj_tensor y, expected;
  ADJ_TEST_OK(t, adj_op_create_range_tensor(s->op, &y));
  ADJ_TEST_OK(t, adj_op_create_range_tensor(s->op, &expected));
  adj_box bulk = halo_global_bulk(&s->local);
  int64_t n = adj_tensor_volume(&y), g[ADJ_MAX_RANK];
  for (int64_t i = 0; i < n; i++) {
    adj_tensor_set(&y, i, adjoint_input(s->index, i));
    halo_global_coords(&s->local, i, g);
    adj_tensor_set(&expected, i, halo_in_box(&bulk, g) ? adjoint_input(s->index, i) : 0.0);
  }
  if (s->index >= 0) add_halo_copies(s, &expected);
  ADJ_TEST_OK(t, adj_op_adjoint(s->op, &y, &y));
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i++) wrong += adj_tensor_get(&y, i) != adj_tensor_get(&expected, i);
  char text[160];
  ADJ_TEST_CHECK(t, wrong == 0, "%s %s: %lld of %lld local entries wrong after adjoint",
                 halo_case_describe(s->c, text, sizeof text), adj_dtype_name(dtype), (long long)wrong, (long long)n);
  adj_tensor_destroy(&y);
  adj_tensor_destroy(&expected);
}

/* The geometry made from a decomposition (as a layer after a repartition does)
 * equals the one made from shape, parts and cuts. */
static void check_from_decomposition(adj_test *t, const halo_setup *s) {
  adj_decomposition *decomposition = NULL;
  adj_halo_geometry *g = NULL;
  ADJ_TEST_OK(t, adj_decomposition_create_explicit(s->partition, s->c->rank, s->c->shape, s->c->cuts, &decomposition));
  ADJ_TEST_OK(t, adj_halo_geometry_create_for(decomposition, &s->c->kernel, &g));
  int same = g != NULL;
  for (int d = 0; same && d < s->c->rank; d++)
    for (int p = 0; p < s->c->parts[d]; p++)
      same &= !memcmp(adj_halo_geometry_dim(g, d, p), adj_halo_geometry_dim(s->geometry, d, p), sizeof(adj_halo_dim));
  ADJ_TEST_CHECK(t, same, "%s: the geometry made from the decomposition differs", s->c->name);
  adj_halo_geometry_destroy(&g);
  adj_decomposition_destroy(&decomposition);
}

/* The algorithm taken: the one ADJ_HALO_ALGORITHM forces, else nested (halo.h). */
static const char *check_algorithm(adj_test *t, const halo_setup *s) {
  const char *forced = getenv("ADJ_HALO_ALGORITHM"), *chosen = adj_op_algorithm(s->op);
  const char *want = forced && *forced && strcmp(forced, "auto") ? forced : "nested";
  ADJ_TEST_CHECK(t, !strcmp(chosen, want), "%s: the exchange took '%s', expected '%s'", s->c->name, chosen, want);
  return chosen;
}

/* Every dtype on one partition and geometry (uint8 values wrap at 256, in the
 * reference as in the operator). */
static void run_case(adj_test *t, const halo_case *c) {
  halo_setup s;
  int status = halo_setup_create(c, ADJ_FLOAT64, &s);
  ADJ_TEST_CHECK(t, status == 0, "%s: setup failed: %s", c->name, adj_last_error());
  if (!status) check_from_decomposition(t, &s);
  char algorithm[48] = "none"; /* the op is remade for each dtype */
  if (!status) snprintf(algorithm, sizeof algorithm, "%s", check_algorithm(t, &s));
  for (int i = 0; !status && i < ADJ_TEST_MOVEMENT_DTYPES; i++) {
    adj_dtype dtype = adj_test_movement_dtypes[i];
    if (i > 0) ADJ_TEST_OK(t, status = halo_setup_retype(&s, dtype));
    if (status) break;
    long long halo = check_forward(t, &s, dtype);
    check_adjoint(t, &s, dtype);
    char text[160];
    adj_test_report(t, "%s, %d of %d ranks, %s, %s: forward and adjoint exact, %lld halo entries",
                    halo_case_describe(c, text, sizeof text), s.workers, t->size, algorithm, adj_dtype_name(dtype),
                    halo_sum(t->comm, halo));
  }
  halo_setup_destroy(&s);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t232-halo-exchange");
  for (int i = 0; i < halo_case_count(); i++) {
    const halo_case *c = halo_case_get(i);
    if (halo_case_workers(c) <= t.size) run_case(&t, c);
  }
  return adj_test_finish(&t);
}
