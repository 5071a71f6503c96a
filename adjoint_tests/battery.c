#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "battery.h"
#include "error_impl.h"

int adj_battery_add(adj_battery *b, const adj_battery_case *c) {
  if (b->count == b->capacity) {
    int capacity = b->capacity ? 2 * b->capacity : 256;
    adj_battery_case *cases = realloc(b->cases, sizeof *cases * (size_t)capacity);
    ADJ_CHECK(cases, ADJ_ERR_MEM, "battery: out of memory for %d cases", capacity);
    b->cases = cases;
    b->capacity = capacity;
  }
  b->cases[b->count++] = *c;
  return ADJ_SUCCESS;
}

int adj_battery_add_both_dtypes(adj_battery *b, adj_battery_case *c) {
  for (int dt = 0; dt < 2; dt++) {
    c->dtype = (adj_dtype)dt;
    snprintf(c->name, sizeof c->name, "%.31s/%.60s/%.24s/%s", c->op, c->partitions, c->shape, adj_dtype_name(c->dtype));
    ADJ_CALL(adj_battery_add(b, c));
  }
  return ADJ_SUCCESS;
}

adj_dtype adj_battery_movement_dtype(int row, int k) {
  static const adj_dtype first[] = {ADJ_FLOAT32, ADJ_FLOAT64, ADJ_INT32};
  if (k < 3) return first[k];
  return row % 2 == 0 ? ADJ_INT64 : ADJ_UINT8;
}

void adj_battery_free(adj_battery *b) {
  free(b->cases);
  b->cases = NULL;
  b->count = b->capacity = 0;
}

void adj_battery_format_ints(char *buf, size_t size, int n, const int *v) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < n && used < size; i++) used += (size_t)snprintf(buf + used, size - used, i ? ",%d" : "%d", v[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

void adj_battery_format_int64s(char *buf, size_t size, int n, const int64_t *v) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < n && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, i ? ",%lld" : "%lld", (long long)v[i]);
  if (used < size) snprintf(buf + used, size - used, "]");
}

/* Families register here, in the order the table prints them. */
static int (*const adj_battery_families[])(adj_battery *) = {
    adj_battery_add_memory,
    adj_battery_add_compose,
    adj_battery_add_send_receive,
    adj_battery_add_broadcast,
    adj_battery_add_all_sum_reduce,
    adj_battery_add_repartition,
    adj_battery_add_all_gather,
    adj_battery_add_halo,
    adj_battery_add_conv,
    adj_battery_add_layers,
    adj_battery_add_norm,
    adj_battery_add_losses,
    adj_battery_add_upsample,
    adj_battery_add_pad,
    adj_battery_add_deep_halo,
};

int adj_battery_build(adj_battery *b) {
  memset(b, 0, sizeof *b);
  for (size_t i = 0; i < sizeof adj_battery_families / sizeof adj_battery_families[0]; i++)
    ADJ_CALL(adj_battery_families[i](b));
  return ADJ_SUCCESS;
}
