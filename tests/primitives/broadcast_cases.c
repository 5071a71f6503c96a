#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broadcast_cases.h"
#include "op_check.h"

/* ---- configurations ----------------------------------------------------------------- */

static int grid_size(const bcast_grid *g) {
  int n = 1;
  for (int i = 0; i < g->ndim; i++) n *= g->shape[i];
  return n;
}

static void grid_format(char *buf, size_t size, const bcast_grid *g) {
  char shape[64];
  int64_t extents[ADJ_MAX_RANK];
  for (int i = 0; i < g->ndim; i++) extents[i] = g->shape[i];
  adj_shape_format(shape, sizeof shape, g->ndim, extents);
  int n = grid_size(g);
  int a = g->reverse ? g->first + n - 1 : g->first, b = g->reverse ? g->first : g->first + n - 1;
  snprintf(buf, size, "%s on ranks %d..%d", shape, a, b);
}

typedef struct config_list {
  int size, count;
  bcast_config *configs;
} config_list;

/* Adds the configuration when both partitions fit in the world and every
 * extent is positive (size-derived shapes vanish on small worlds). */
static void add(config_list *l, bcast_grid source, bcast_grid destination, int64_t const *global,
                const int64_t *cuts0) {
  const bcast_grid *g[2] = {&source, &destination};
  for (int k = 0; k < 2; k++) {
    if (g[k]->first < 0 || g[k]->first + grid_size(g[k]) > l->size) return;
    for (int i = 0; i < g[k]->ndim; i++)
      if (g[k]->shape[i] < 1) return;
  }
  bcast_config *c = &l->configs[l->count++];
  *c = (bcast_config){.source = source, .destination = destination, .cut0 = cuts0 != NULL};
  memcpy(c->global, global, sizeof(int64_t) * (size_t)source.ndim);
  if (cuts0) memcpy(c->cuts0, cuts0, sizeof(int64_t) * (size_t)(source.shape[0] + 1));
  char a[96], b[96], shape[96], cuts[96] = "";
  grid_format(a, sizeof a, &source);
  grid_format(b, sizeof b, &destination);
  adj_shape_format(shape, sizeof shape, source.ndim, global);
  if (cuts0) {
    strcpy(cuts, ", cuts0 ");
    adj_shape_format(cuts + strlen(cuts), sizeof cuts - strlen(cuts), source.shape[0] + 1, cuts0);
  }
  /* A label cut short would still name the case; the length is only checked. */
  if (snprintf(c->label, sizeof c->label, "%s -> %s, global %s%s", a, b, shape, cuts) >= (int)sizeof c->label)
    c->label[sizeof c->label - 2] = '~';
  /* Size-derived configurations coincide on small worlds; keep one. */
  for (int i = 0; i + 1 < l->count; i++)
    if (!strcmp(l->configs[i].label, c->label)) {
      l->count--;
      return;
    }
}

#define GRID(first_, reverse_, ...)                                                                \
  ((bcast_grid){.ndim = (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), .shape = {__VA_ARGS__}, \
                .first = (first_), .reverse = (reverse_)})
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

int bcast_configs(int n, bcast_config *configs) {
  config_list l = {.size = n, .configs = configs};
  /* One source to all, the source also a destination. */
  add(&l, GRID(0, false, 1), GRID(0, false, n), SHAPE(7), NULL);
  /* Disjoint: the last rank feeds all the others. */
  add(&l, GRID(n - 1, false, 1), GRID(0, false, n - 1), SHAPE(5), NULL);
  /* Source with fewer dimensions; an odd world leaves rank 0 out of P_y. */
  add(&l, GRID(0, false, 2), GRID(n % 2, true, n / 2, 2), SHAPE(9), NULL);
  add(&l, GRID(1, false, 1, 1), GRID(0, false, 2, n / 2), SHAPE(4, 3), NULL);
  add(&l, GRID(n / 2, false, 1), GRID(0, false, 2, 1, n / 2), SHAPE(6), NULL);
  /* Explicit cuts leaving the first source block empty. */
  add(&l, GRID(0, false, 3, 1), GRID(0, true, 3, n / 3), SHAPE(5, 6), SHAPE(0, 0, 4, 5));
  /* Disjoint source and destination workers, some ranks in neither. */
  add(&l, GRID(0, false, 1, 2), GRID(2, false, (n - 2) / 2, 2), SHAPE(3, 8), NULL);
  /* Equal partitions: local copies only, then a permutation (groups of 2). */
  add(&l, GRID(0, false, n), GRID(0, false, n), SHAPE(2 * n + 1), NULL);
  add(&l, GRID(0, false, n), GRID(0, true, n), SHAPE(2 * n + 1), NULL);
  /* Tensor ranks 3, 4 and 5. */
  add(&l, GRID(2, false, 1, 2, 1), GRID(0, false, 2, 1, 2, 1), SHAPE(4, 6, 2), NULL);
  add(&l, GRID(0, false, 2, 1, 1, 1), GRID(0, true, 2, 1, 3, 1), SHAPE(5, 2, 3, 2), NULL);
  add(&l, GRID(0, false, 1, 1, 2, 1, 1), GRID(n - 4, true, 1, 2, 2, 1, 1), SHAPE(2, 3, 5, 2, 3), NULL);
  /* Uneven reversed source whose second block is empty; zero global volume. */
  add(&l, GRID(n - 2, true, 2), GRID(0, false, 3, 2), SHAPE(7), SHAPE(0, 7, 7));
  add(&l, GRID(0, false, 2, 1), GRID(0, false, 2, 2), SHAPE(0, 4), NULL);
  /* Source and destination of equal rank, four groups of two. */
  add(&l, GRID(0, false, 2, 2), GRID(0, true, 2, 2, 2), SHAPE(3, 5), NULL);
  return l.count;
}

/* ---- setup ------------------------------------------------------------------------- */

int bcast_grid_create(MPI_Comm comm, const bcast_grid *g, adj_partition **p) {
  int n = grid_size(g), ranks[64];
  for (int i = 0; i < n; i++) ranks[i] = g->reverse ? g->first + n - 1 - i : g->first + i;
  return adj_partition_create(comm, g->ndim, g->shape, n, ranks, p);
}

int bcast_setup_create(MPI_Comm comm, const bcast_config *c, bcast_setup *s) {
  *s = (bcast_setup){0};
  int status = bcast_grid_create(comm, &c->source, &s->source);
  if (!status) status = bcast_grid_create(comm, &c->destination, &s->destination);
  const int64_t *cuts[ADJ_MAX_RANK] = {c->cut0 ? c->cuts0 : NULL};
  if (!status)
    status = adj_decomposition_create_explicit(s->source, c->source.ndim, c->global, cuts, &s->x);
  return status;
}

void bcast_setup_destroy(bcast_setup *s) {
  adj_decomposition_destroy(&s->x);
  adj_partition_destroy(&s->source);
  adj_partition_destroy(&s->destination);
}

/* ---- sequential reference ---------------------------------------------------------- */

/* P_x grid index feeding the destination at P_y grid index d: the broadcast
 * rule of the DistDL paper, written out independently of the library. */
static int source_of(const bcast_setup *s, int d) {
  int cy[ADJ_MAX_RANK], cx[ADJ_MAX_RANK];
  adj_partition_coords_of_index(s->destination, d, cy);
  int nx = adj_partition_ndim(s->source), offset = adj_partition_ndim(s->destination) - nx;
  for (int i = 0; i < nx; i++) cx[i] = adj_partition_shape(s->source)[i] == 1 ? 0 : cy[offset + i];
  return adj_partition_index(s->source, cx);
}

static int my_index(const adj_partition *p) {
  int rank;
  MPI_Comm_rank(adj_partition_base_comm(p), &rank);
  return adj_partition_index_of_rank(p, rank);
}

/* The block this worker receives: its source's block, empty off P_y. */
static adj_box destination_block(const bcast_setup *s) {
  int d = my_index(s->destination);
  adj_box none = {.rank = adj_decomposition_rank(s->x)};
  if (d < 0) return none;
  int coords[ADJ_MAX_RANK];
  adj_partition_coords_of_index(s->source, source_of(s, d), coords);
  return adj_decomposition_block(s->x, coords);
}

/* Input and output of op in `direction`, the output prefilled with a value the
 * operator must overwrite. */
static void check_shape(adj_test *t, const char *label, const char *role, const adj_tensor *x, const adj_box *b) {
  adj_tensor expected = {.rank = b->rank};
  memcpy(expected.shape, b->extent, sizeof b->extent);
  char s1[96], s2[96];
  ADJ_TEST_CHECK(t, adj_tensor_same_shape(x, &expected), "%s: %s block has shape %s, expected %s", label, role,
                 adj_shape_format(s1, sizeof s1, x->rank, x->shape), adj_shape_format(s2, sizeof s2, b->rank, b->extent));
}

/* Compares out with the global index fill of `box` scaled by `weight`, exactly. */
static void check_fill(adj_test *t, const char *label, const adj_tensor *out, const adj_box *box,
                       const int64_t *global, double weight) {
  check_shape(t, label, "output", out, box);
  int64_t n = adj_tensor_volume(out), bad = 0, first = -1;
  adj_tensor ref;
  adj_tensor_create(&ref, out->dtype, out->rank, out->shape);
  adj_test_fill_global_index(&ref, box, global);
  for (int64_t i = 0; i < n; i++)
    if (adj_tensor_get(out, i) != adj_test_as_dtype(out->dtype, weight * adj_tensor_get(&ref, i)) && bad++ == 0)
      first = i;
  ADJ_TEST_CHECK(t, bad == 0, "%s: %lld of %lld elements differ from the reference (first at %lld: %g, expected %g)",
                 label, (long long)bad, (long long)n, (long long)first, first >= 0 ? adj_tensor_get(out, first) : 0.0,
                 first >= 0 ? weight * adj_tensor_get(&ref, first) : 0.0);
  adj_tensor_destroy(&ref);
}

static void scale(adj_tensor *x, double w) {
  for (int64_t i = 0; i < adj_tensor_volume(x); i++) adj_tensor_set(x, i, w * adj_tensor_get(x, i));
}

/* sum (1 + d) over the destinations d fed by this worker's source block; 0 off P_x. */
static double sum_weight(const bcast_setup *s) {
  int g = my_index(s->source);
  double weight = 0;
  for (int d = 0; g >= 0 && d < adj_partition_size(s->destination); d++)
    if (source_of(s, d) == g) weight += 1 + d;
  return weight;
}

void bcast_check_reference(adj_test *t, const bcast_config *c, const bcast_setup *s, adj_op *op,
                           adj_direction direction, bool sums) {
  adj_tensor in, out;
  ADJ_TEST_OK(t, op_check_make_pair(op, direction, &in, &out));
  adj_box own = adj_decomposition_local_block(s->x), received = destination_block(s);
  /* Copies run from the source block to the destinations, sums back. */
  const adj_box *from = sums ? &received : &own, *to = sums ? &own : &received;
  check_shape(t, c->label, "input", &in, from);
  adj_test_fill_global_index(&in, from, c->global);
  if (sums) scale(&in, 1 + my_index(s->destination));
  ADJ_TEST_OK(t, adj_op_apply(op, direction, &in, &out));
  check_fill(t, c->label, &out, to, c->global, sums ? sum_weight(s) : 1.0);
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&out);
}

/* ---- the whole table -------------------------------------------------------------- */

/* Broadcast: forward copies, adjoint sums.  Sum-reduce (the broadcast's adjoint
 * built from the destination partition onto x): forward sums, adjoint copies.
 * The reduction direction also runs split phase. */
static void check_op(adj_test *t, const bcast_config *c, const bcast_setup *s, adj_dtype dtype, bool sum_reduce) {
  adj_op *op = NULL;
  int status = sum_reduce ? adj_sum_reduce_create(dtype, s->destination, s->x, &op)
                          : adj_broadcast_create(dtype, s->x, s->destination, &op);
  ADJ_TEST_OK(t, status);
  if (status) return;
  adj_direction copies = sum_reduce ? ADJ_ADJOINT : ADJ_FORWARD;
  adj_direction sums = sum_reduce ? ADJ_FORWARD : ADJ_ADJOINT;
  bcast_check_reference(t, c, s, op, copies, false);
  bcast_check_reference(t, c, s, op, sums, true);
  op_check_dottest(t, c->label, op);
  op_check_split_phase(t, c->label, op, sums);
  adj_op_destroy(&op);
}

void bcast_check_table(adj_test *t, bool sum_reduce) {
  bcast_config configs[BCAST_MAX_CONFIGS];
  int n = bcast_configs(t->size, configs);
  adj_test_report(t, "%d configurations on %d ranks", n, t->size);
  for (int i = 0; i < n; i++) {
    bcast_setup s;
    int status = bcast_setup_create(t->comm, &configs[i], &s);
    ADJ_TEST_OK(t, status);
    if (!status) {
      for (int k = 0; k < ADJ_TEST_MOVEMENT_DTYPES; k++)
        check_op(t, &configs[i], &s, adj_test_movement_dtypes[k], sum_reduce);
    }
    bcast_setup_destroy(&s);
  }
}

void sum_to_root_create(adj_test *t, int64_t count, sum_to_root *w) {
  *w = (sum_to_root){0};
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){t->size}, t->size, NULL, &w->all));
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){1}, 1, NULL, &w->root));
  ADJ_TEST_OK(t, adj_decomposition_create(w->root, 1, &count, &w->y));
  ADJ_TEST_OK(t, adj_sum_reduce_create(ADJ_FLOAT64, w->all, w->y, &w->op));
}

void sum_to_root_destroy(sum_to_root *w) {
  adj_op_destroy(&w->op);
  adj_decomposition_destroy(&w->y);
  adj_partition_destroy(&w->root), adj_partition_destroy(&w->all);
}

int chain_segments(int64_t elements, size_t element_size) {
  const char *env = getenv("ADJ_CHAIN_SEGMENT_BYTES");
  int64_t bytes = env && *env ? atoll(env) : 65536;
  int64_t segment = bytes >= (int64_t)element_size ? bytes / (int64_t)element_size : 1;
  return (int)((elements + segment - 1) / segment);
}
