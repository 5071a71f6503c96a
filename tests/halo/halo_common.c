#include <stdio.h>

#include "halo_common.h"

static const int64_t rows_b2[] = {0, 7, 12}, cols_b2[] = {0, 8, 11};
static const int64_t empty_block[] = {0, 5, 5, 6, 12}, right_surplus[] = {0, 9, 11};
static const int64_t skewed[] = {0, 1, 9, 9, 13};

static const halo_case cases[] = {
    {"B2 conv k=5 pad 2", 1, {11}, {3}, {.size = {5}, .padding = {{2, 2}}}, {0}},
    {"B3 conv k=5", 1, {11}, {3}, {.size = {5}}, {0}},
    {"B4 pool k=2 s=2", 1, {10}, {3}, {.size = {2}, .stride = {2}}, {0}},
    {"B5 pool k=2 s=2", 1, {20}, {6}, {.size = {2}, .stride = {2}}, {0}},
    {"B.2 2x2 unequal", 2, {12, 11}, {2, 2}, {.size = {7, 4}, .padding = {{3, 3}, {1, 2}}}, {rows_b2, cols_b2}},
    {"empty block, halo across it", 1, {12}, {4}, {.size = {5}, .padding = {{2, 2}}}, {empty_block}},
    {"surplus on the right", 1, {11}, {2}, {.size = {3}, .padding = {{1, 1}}}, {right_surplus}},
    {"skewed cuts 2-D",
     2,
     {13, 6},
     {4, 2},
     {.size = {4, 3}, .dilation = {2, 1}, .padding = {{3, 1}, {1, 1}}},
     {skewed, NULL}},
    {"single worker, padded", 2, {5, 4}, {1, 1}, {.size = {3, 3}, .padding = {{1, 1}, {2, 0}}}, {0}},
    {"1-D P=7 k=4 s=3 d=2", 1, {23}, {7}, {.size = {4}, .stride = {3}, .dilation = {2}, .padding = {{1, 3}}}, {0}},
    {"2-D 2x3 mixed",
     2,
     {9, 10},
     {2, 3},
     {.size = {3, 4}, .stride = {1, 2}, .dilation = {2, 1}, .padding = {{1, 2}, {0, 1}}},
     {0}},
    {"2-D 5x1", 2, {17, 4}, {5, 1}, {.size = {6, 3}, .padding = {{2, 3}, {1, 1}}}, {0}},
    {"3-D 2x2x2 corners", 3, {7, 6, 9}, {2, 2, 2}, {.size = {3, 3, 3}, .padding = {{1, 1}, {1, 1}, {1, 1}}}, {0}},
    {"3-D 1x2x3", 3, {5, 10, 7}, {1, 2, 3}, {.size = {1, 5, 2}, .stride = {1, 1, 2}, .dilation = {1, 2, 1}}, {0}},
    {"4-D NCHW 1x1x2x2",
     4,
     {2, 3, 10, 9},
     {1, 1, 2, 2},
     {.size = {1, 1, 3, 5}, .padding = {{0, 0}, {0, 0}, {1, 1}, {2, 2}}},
     {0}},
    {"4-D 1x2x3x1",
     4,
     {3, 7, 8, 5},
     {1, 2, 3, 1},
     {.size = {1, 3, 2, 1}, .stride = {1, 1, 2, 1}, .dilation = {1, 2, 1, 1}},
     {0}},
    {"4-D 2x1x2x2",
     4,
     {4, 5, 6, 7},
     {2, 1, 2, 2},
     {.size = {3, 1, 3, 3}, .padding = {{1, 1}, {0, 0}, {0, 2}, {1, 1}}},
     {0}},
};

int halo_case_workers(const halo_case *c) {
  int workers = 1;
  for (int i = 0; i < c->rank; i++) workers *= c->parts[i];
  return workers;
}

int halo_case_count(void) { return (int)(sizeof cases / sizeof cases[0]); }
const halo_case *halo_case_get(int i) { return &cases[i]; }

const char *halo_case_describe(const halo_case *c, char *buf, size_t size) {
  char shape[64], parts[64];
  adj_shape_format(shape, sizeof shape, c->rank, c->shape);
  int64_t p[ADJ_MAX_RANK];
  for (int i = 0; i < c->rank; i++) p[i] = c->parts[i];
  adj_shape_format(parts, sizeof parts, c->rank, p);
  snprintf(buf, size, "%s: shape %s parts %s", c->name, shape, parts);
  return buf;
}

int halo_setup_create(const halo_case *c, adj_dtype dtype, halo_setup *s) {
  *s = (halo_setup){.c = c, .workers = halo_case_workers(c), .index = -1};
  int status = adj_partition_create(MPI_COMM_WORLD, c->rank, c->parts, s->workers, NULL, &s->partition);
  if (!status) status = adj_halo_geometry_create(c->rank, c->shape, c->parts, c->cuts, &c->kernel, &s->geometry);
  if (!status) status = adj_halo_create(dtype, s->partition, s->geometry, &s->op);
  if (status) return status;
  bool active = adj_partition_active(s->partition);
  s->index = active ? adj_partition_index(s->partition, adj_partition_coords(s->partition)) : -1;
  adj_halo_geometry_local(s->geometry, active ? adj_partition_coords(s->partition) : NULL, &s->local);
  return ADJ_SUCCESS;
}

int halo_setup_retype(halo_setup *s, adj_dtype dtype) {
  adj_op_destroy(&s->op);
  return adj_halo_create(dtype, s->partition, s->geometry, &s->op);
}

long long halo_sum(MPI_Comm comm, long long value) {
  long long total = 0;
  MPI_Request request;
  MPI_Iallreduce(&value, &total, 1, MPI_LONG_LONG, MPI_SUM, comm, &request);
  adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  return total;
}

void halo_setup_destroy(halo_setup *s) {
  adj_op_destroy(&s->op);
  adj_halo_geometry_destroy(&s->geometry);
  adj_partition_destroy(&s->partition);
}

void halo_global_coords(const adj_halo_local *local, int64_t flat, int64_t *coords) {
  for (int d = local->rank - 1; d >= 0; d--) {
    coords[d] = local->input.start[d] + flat % local->shape[d];
    flat /= local->shape[d];
  }
}

int halo_in_box(const adj_box *box, const int64_t *coords) {
  for (int d = 0; d < box->rank; d++)
    if (coords[d] < box->start[d] || coords[d] >= box->start[d] + box->extent[d]) return 0;
  return 1;
}

adj_box halo_global_bulk(const adj_halo_local *local) {
  adj_box box = local->bulk;
  for (int d = 0; d < local->rank; d++) box.start[d] += local->input.start[d];
  return box;
}

int64_t halo_flat(int rank, const int64_t *shape, const int64_t *coords) {
  int64_t flat = 0;
  for (int d = 0; d < rank; d++) flat = flat * shape[d] + coords[d];
  return flat;
}
