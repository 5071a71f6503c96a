/* Battery cases for the memory primitives and for composition.
 *
 * Memory primitives are local, so each case runs on one rank.  Composition
 * cases chain memory primitives so the adjoint of the chain (reversed adjoints)
 * is tested independently of the distributed primitives. */
#include <stdio.h>
#include <string.h>

#include "adjoin/memory.h"
#include "battery.h"
#include "error_impl.h"

enum { FLAT_ALLOCATE, FLAT_DEALLOCATE, FLAT_COPY, FLAT_MOVE };

static int adj_make_flat(adj_dtype dtype, int kind, int64_t m, int64_t n, adj_op **op) {
  switch (kind) {
  case FLAT_ALLOCATE: return adj_allocate_create(dtype, m, n, op);
  case FLAT_DEALLOCATE: return adj_deallocate_create(dtype, m, n, op);
  case FLAT_COPY: return adj_copy_create(dtype, m, op);
  default: return adj_move_create(dtype, m, op);
  }
}

static int adj_run_op(adj_op *op, uint64_t seed, adj_dottest_result *r) {
  int status = adj_dottest_op(op, seed + 17, r);
  adj_op_destroy(&op);
  return status;
}

/* params: kind, m, n */
static int adj_run_flat(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  (void)comm;
  adj_op *op;
  ADJ_CALL(adj_make_flat(c->dtype, (int)c->params[0], c->params[1], c->params[2], &op));
  return adj_run_op(op, c->seed, r);
}

/* params: kind, rank, shape[0..rank), a.start, b.start, extent (each rank entries) */
static void adj_unpack_in_place(const adj_battery_case *c, int *rank, int64_t *shape, adj_box *a, adj_box *b) {
  *rank = (int)c->params[1];
  *a = (adj_box){.rank = *rank};
  *b = (adj_box){.rank = *rank};
  for (int i = 0; i < *rank; i++) {
    shape[i] = c->params[2 + i];
    a->start[i] = c->params[2 + *rank + i];
    b->start[i] = c->params[2 + 2 * *rank + i];
    a->extent[i] = b->extent[i] = c->params[2 + 3 * *rank + i];
  }
}

static int adj_run_in_place(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  (void)comm;
  int rank;
  int64_t shape[ADJ_MAX_RANK];
  adj_box a, b;
  adj_unpack_in_place(c, &rank, shape, &a, &b);
  adj_op *op;
  ADJ_CALL(adj_memory_in_place_create(c->dtype, (adj_memory_kind)c->params[0], rank, shape, &a, &b, &op));
  return adj_run_op(op, c->seed, r);
}

/* allocate(m, n) -> in-place copy of the first m entries onto the last n=m ->
 * in-place add back -> deallocate: a chain whose adjoint crosses every kind. */
static int adj_run_chain(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  (void)comm;
  int64_t m = c->params[0], total = 2 * m;
  adj_box first = {.rank = 1, .start = {0}, .extent = {m}}, second = {.rank = 1, .start = {m}, .extent = {m}};
  adj_op *ops[5] = {0}, *chain = NULL;
  int status = adj_allocate_create(c->dtype, m, m, &ops[0]);
  if (!status) status = adj_memory_in_place_create(c->dtype, ADJ_MEMORY_COPY, 1, &total, &first, &second, &ops[1]);
  if (!status) status = adj_memory_in_place_create(c->dtype, ADJ_MEMORY_ADD, 1, &total, &second, &first, &ops[2]);
  if (!status) status = adj_memory_in_place_create(c->dtype, ADJ_MEMORY_MOVE, 1, &total, &first, &second, &ops[3]);
  if (!status) status = adj_deallocate_create(c->dtype, m, m, &ops[4]);
  if (!status) status = adj_op_compose(5, ops, &chain);
  for (int i = 0; i < 5; i++) adj_op_destroy(&ops[i]);
  if (status) return status;
  return adj_run_op(chain, c->seed, r);
}

static int adj_add_case(adj_battery *b, adj_battery_case *c, const char *op, const char *shape, adj_dtype dtype) {
  snprintf(c->op, sizeof c->op, "%s", op);
  snprintf(c->partitions, sizeof c->partitions, "local");
  snprintf(c->shape, sizeof c->shape, "%s", shape);
  c->dtype = dtype;
  c->ranks = 1;
  snprintf(c->name, sizeof c->name, "%s/%s/%s", op, shape, adj_dtype_name(dtype));
  return adj_battery_add(b, c);
}

int adj_battery_add_memory(adj_battery *b) {
  static const char *const flat_names[] = {"allocate", "deallocate", "copy", "move"};
  static const int64_t sizes[][2] = {{7, 5}, {64, 1}, {1, 33}, {0, 4}};
  for (int k = 0; k < ADJ_BATTERY_MOVEMENT_DTYPES; k++)
    for (int kind = 0; kind < 4; kind++)
      for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        adj_battery_case c = {.run = adj_run_flat, .params = {kind, sizes[s][0], sizes[s][1]}};
        char shape[64];
        snprintf(shape, sizeof shape, "m=%lld,n=%lld", (long long)sizes[s][0], (long long)sizes[s][1]);
        ADJ_CALL(adj_add_case(b, &c, flat_names[kind], shape, adj_battery_movement_dtype(kind + (int)s, k)));
      }
  /* In-place kinds on tensors of rank 1 to 5, with boxes that start off the
   * origin and do not span whole rows (so strided runs are exercised). */
  static const char *const box_names[] = {"clear", "add", "copy-in-place", "move-in-place"};
  for (int k = 0; k < ADJ_BATTERY_MOVEMENT_DTYPES; k++)
    for (int kind = 0; kind < 4; kind++)
      for (int rank = 1; rank <= 5; rank++) {
        adj_battery_case c = {.run = adj_run_in_place, .params = {kind, rank}};
        int64_t shape[ADJ_MAX_RANK];
        for (int i = 0; i < rank; i++) {
          shape[i] = i == 0 ? 8 : 3 + i;
          c.params[2 + i] = shape[i];
          c.params[2 + rank + i] = i == 0 ? 0 : 1;          /* a.start */
          c.params[2 + 2 * rank + i] = i == 0 ? 4 : 0;      /* b.start: disjoint along dim 0 */
          c.params[2 + 3 * rank + i] = i == 0 ? 3 : 2;      /* extent */
        }
        char text[64];
        adj_battery_format_int64s(text, sizeof text, rank, shape);
        ADJ_CALL(adj_add_case(b, &c, box_names[kind], text, adj_battery_movement_dtype(kind + rank, k)));
      }
  return ADJ_SUCCESS;
}

int adj_battery_add_compose(adj_battery *b) {
  static const int64_t sizes[] = {1, 9, 100};
  for (int k = 0; k < ADJ_BATTERY_MOVEMENT_DTYPES; k++)
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
      adj_battery_case c = {.run = adj_run_chain, .params = {sizes[s]}};
      char shape[32];
      snprintf(shape, sizeof shape, "m=%lld", (long long)sizes[s]);
      ADJ_CALL(adj_add_case(b, &c, "compose-memory", shape, adj_battery_movement_dtype((int)s, k)));
    }
  return ADJ_SUCCESS;
}
