/* Battery cases for the distributed layers of pointwise_layer.h, pool_layer.h, affine_layer.h and
 * repartition_layer.h: activations, flatten,
 * max and average pooling, affine and repartition.  Each case is the Jacobian
 * dot-product test of adj_dottest_layer (input and parameter perturbations at
 * once) on one layout, in both dtypes.  Layouts spread over batch, channel and
 * spatial dimensions, list their ranks permuted, leave ranks out (inactive
 * workers) and cut unevenly with empty blocks; most need at most 4 ranks. */
#include <stdio.h>
#include <string.h>

#include "adjoin/pointwise_layer.h"
#include "adjoin/pool_layer.h"
#include "adjoin/affine_layer.h"
#include "adjoin/repartition_layer.h"
#include "adjoin/layer_dottest.h"
#include "battery.h"
#include "error_impl.h"
#include "layer_cases.h"

/* A tensor layout: global shape on a grid whose ranks are digits in grid
 * order; `uneven` cuts every dimension at n p^2 / P^2 (small, often empty,
 * first blocks). */
typedef struct adj_layout_spec {
  int ndim;
  int64_t shape[5];
  int parts[5];
  const char *ranks;
  bool uneven;
} adj_layout_spec;

typedef enum adj_layer_family {
  ADJ_FAMILY_ACTIVATION = 0,
  ADJ_FAMILY_FLATTEN = 1,
  ADJ_FAMILY_POOL = 2,
  ADJ_FAMILY_AFFINE = 3,
  ADJ_FAMILY_REPARTITION = 4
} adj_layer_family;

static const adj_layout_spec adj_activation_layouts[] = {
    {4, {4, 3, 7, 5}, {1, 1, 2, 1}, "01", false},
    {4, {4, 3, 7, 5}, {2, 1, 2, 1}, "3120", true},
    {2, {5, 6}, {1, 3}, "213", false},
};
static const adj_activation adj_activations[] = {
    {ADJ_RELU, 0}, {ADJ_LEAKY_RELU, 0.2}, {ADJ_TANH, 0}, {ADJ_SIGMOID, 0}};

static const adj_layout_spec adj_flatten_layouts[] = {
    {4, {6, 3, 4, 2}, {2, 1, 1, 1}, "01", false},
    {4, {6, 3, 4, 2}, {4, 1, 1, 1}, "3210", true},
    {3, {5, 2, 3}, {3, 1, 1}, "123", false},
};

typedef struct adj_pool_spec {
  adj_pool_kind kind;
  adj_window_geometry window;
  adj_layout_spec input;
} adj_pool_spec;

#define W2(k0, k1, s0, s1) {.spatial_dims = 2, .kernel = {k0, k1}, .stride = {s0, s1}}
static const adj_pool_spec adj_pool_specs[] = {
    {ADJ_POOL_MAX, W2(2, 2, 2, 2), {4, {2, 3, 11, 9}, {1, 1, 2, 2}, "0123", false}},
    {ADJ_POOL_AVG, W2(2, 2, 2, 2), {4, {2, 3, 11, 9}, {1, 1, 2, 2}, "3021", true}},
    {ADJ_POOL_MAX, {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1}, .padding_right = {1, 1}},
     {4, {2, 2, 9, 8}, {1, 1, 2, 1}, "10", false}},
    {ADJ_POOL_AVG, {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1}, .padding_right = {1, 1}},
     {4, {2, 2, 9, 8}, {1, 2, 1, 2}, "0132", false}},
    {ADJ_POOL_MAX, W2(3, 3, 3, 3), {4, {2, 2, 10, 11}, {2, 2, 1, 1}, "0213", false}},
    {ADJ_POOL_AVG, W2(3, 2, 1, 3), {4, {2, 2, 10, 11}, {1, 1, 1, 3}, "123", true}},
    {ADJ_POOL_MAX,
     {.spatial_dims = 2, .kernel = {2, 3}, .stride = {1, 2}, .dilation = {2, 2}, .padding_right = {1, 2}},
     {4, {1, 2, 12, 9}, {1, 1, 4, 1}, "3210", true}},
    {ADJ_POOL_AVG, {.spatial_dims = 1, .kernel = {3}, .stride = {2}, .padding_left = {1}, .padding_right = {1}},
     {3, {2, 3, 17}, {1, 1, 3}, "210", true}},
    {ADJ_POOL_MAX, {.spatial_dims = 3, .kernel = {2, 2, 2}, .stride = {1, 2, 2}},
     {5, {2, 2, 6, 5, 4}, {1, 1, 2, 1, 2}, "0123", false}},
    {ADJ_POOL_MAX, W2(2, 2, 2, 2), {4, {2, 3, 12, 10}, {1, 1, 2, 3}, "012345", false}},
};
#undef W2

const adj_affine_case adj_affine_cases[] = {
    {5, 13, 7, 1, 1, 1, false, false, "", "", "", ""},
    {5, 13, 7, 1, 1, 2, false, false, "", "", "", ""},
    {5, 13, 7, 1, 2, 1, false, false, "", "", "", ""},
    {5, 13, 7, 1, 2, 2, false, false, "", "", "", ""},
    {4, 11, 7, 1, 3, 1, false, false, "", "", "", ""},
    {4, 11, 7, 1, 1, 3, false, false, "", "", "", ""},
    {3, 5, 9, 1, 4, 1, false, false, "", "", "", ""},
    {3, 10, 8, 1, 3, 2, true, false, "", "", "", ""},
    {6, 13, 11, 1, 4, 2, false, false, "", "", "", ""},
    /* Batch partitioned: weights broadcast over P_b, gradients summed back. */
    {7, 6, 5, 3, 1, 1, false, false, "", "", "", ""},
    {7, 6, 5, 2, 2, 1, true, false, "", "", "", ""},
    {7, 6, 5, 2, 1, 2, false, false, "", "", "", ""},
    {7, 9, 5, 2, 2, 2, false, false, "", "", "", ""},
    /* Uneven cuts with empty blocks (a worker with no input features still
     * adds the bias on the fi = 0 column). */
    {5, 7, 6, 1, 2, 3, false, true, "", "", "", ""},
    {5, 6, 5, 2, 2, 2, false, true, "", "", "", ""},
    {7, 6, 5, 2, 1, 2, true, true, "", "", "", ""},
    /* Shuffled rank lists; ranks 0 (and 1) hold nothing in the last three. */
    {5, 13, 7, 1, 2, 2, false, false, "31", "2301", "3210", "12"},
    {6, 9, 4, 2, 2, 1, false, false, "42", "13", "4321", "1234"},
    {4, 8, 6, 1, 2, 2, false, false, "54", "5432", "2345", "45"},
    {4, 11, 7, 1, 3, 1, false, false, "2", "123", "321", "132"},
    {6, 13, 11, 1, 4, 2, false, true, "01", "01234567", "76543210", "0123"},
};
const int adj_affine_case_count = (int)(sizeof adj_affine_cases / sizeof adj_affine_cases[0]);

typedef struct adj_repartition_spec {
  adj_layout_spec x, y;
} adj_repartition_spec;

static const adj_repartition_spec adj_repartition_specs[] = {
    {{3, {6, 5, 7}, {4, 1, 1}, "0123", false}, {3, {6, 5, 7}, {1, 1, 4}, "3210", true}},
    {{3, {6, 5, 7}, {2, 1, 1}, "01", false}, {3, {6, 5, 7}, {1, 3, 1}, "123", false}},
    {{3, {6, 5, 7}, {1, 1, 1}, "0", false}, {3, {6, 5, 7}, {2, 2, 1}, "3210", true}},
};

/* ---- building layouts and layers -------------------------------------------------------- */

int adj_case_layout(MPI_Comm comm, int ndim, const int64_t *shape, const int *parts, const char *ranks, bool uneven,
                    adj_decomposition **d) {
  *d = NULL;
  int list[ADJ_MAX_RANK * 2], n = 1;
  for (int i = 0; i < ndim; i++) n *= parts[i];
  ADJ_CHECK(n <= (int)(sizeof list / sizeof list[0]), ADJ_ERR_ARG, "layer cases: %d workers are too many", n);
  for (int k = 0; k < n && *ranks; k++) list[k] = ranks[k] - '0';
  adj_partition *p;
  ADJ_CALL(adj_partition_create(comm, ndim, parts, n, *ranks ? list : NULL, &p));
  int64_t storage[ADJ_MAX_RANK][ADJ_MAX_RANK * 2 + 1];
  const int64_t *cuts[ADJ_MAX_RANK] = {NULL};
  for (int i = 0; uneven && i < ndim; i++) {
    for (int k = 0; k <= parts[i]; k++) storage[i][k] = shape[i] * k * k / (parts[i] * parts[i]);
    cuts[i] = storage[i];
  }
  int status = adj_decomposition_create_explicit(p, ndim, shape, cuts, d);
  adj_partition_destroy(&p);
  return status;
}

static int adj_layout_create(MPI_Comm comm, const adj_layout_spec *s, adj_decomposition **d) {
  return adj_case_layout(comm, s->ndim, s->shape, s->parts, s->ranks, s->uneven, d);
}

/* Digits to ranks in `storage`, or NULL for "". */
static const int *adj_digits(const char *digits, int *storage) {
  if (!*digits) return NULL;
  for (int i = 0; digits[i]; i++) storage[i] = digits[i] - '0';
  return storage;
}

int adj_affine_case_ranks(const adj_affine_case *c) {
  int ranks = c->p_b * c->p_fo * c->p_fi;
  const char *lists[] = {c->input, c->weight, c->work, c->output};
  for (int l = 0; l < 4; l++) {
    int needed = adj_battery_ranks_needed(lists[l]);
    ranks = needed > ranks ? needed : ranks;
  }
  return ranks;
}

void adj_affine_case_format(char *buf, size_t size, const adj_affine_case *c) {
  snprintf(buf, size, "[%d,%d,%d]@%s (%lld,%lld)->%lld%s%s", c->p_b, c->p_fo, c->p_fi, *c->work ? c->work : "first",
           (long long)c->n, (long long)c->f_in, (long long)c->f_out, c->no_bias ? " nobias" : "",
           c->uneven ? ":q" : "");
}

int adj_affine_case_input(MPI_Comm comm, const adj_affine_case *c, adj_decomposition **input) {
  return adj_case_layout(comm, 2, (const int64_t[2]){c->n, c->f_in}, (const int[2]){c->p_b, c->p_fi}, c->input,
                         c->uneven, input);
}

int adj_affine_case_create(const adj_affine_case *c, adj_dtype dtype, const adj_decomposition *input,
                           bool sequential, adj_layer **layer) {
  int weight[8], work[8], output[8];
  adj_affine_layer_config config = {.dtype = dtype, .input = input, .in_features = c->f_in,
                                    .out_features = c->f_out, .out_parts = sequential ? 1 : c->p_fo,
                                    .no_bias = c->no_bias};
  if (!sequential) {
    config.weight_ranks = adj_digits(c->weight, weight);
    config.work_ranks = adj_digits(c->work, work);
    config.output_ranks = adj_digits(c->output, output);
  }
  return adj_affine_layer_create(&config, layer);
}

/* The layer of a case with one input layout (every family but affine and
 * repartition). */
static int adj_single_layout_create(adj_layer_family family, int64_t index, adj_dtype dtype, const adj_decomposition *in,
                                    adj_layer **layer) {
  if (family == ADJ_FAMILY_ACTIVATION)
    return adj_activation_layer_create(
        &(adj_activation_layer_config){.dtype = dtype, .input = in, .activation = adj_activations[index]}, layer);
  if (family == ADJ_FAMILY_FLATTEN)
    return adj_flatten_layer_create(&(adj_flatten_layer_config){.dtype = dtype, .input = in}, layer);
  const adj_pool_spec *s = &adj_pool_specs[index];
  return adj_pool_layer_create(
      &(adj_pool_layer_config){.dtype = dtype, .kind = s->kind, .input = in, .window = s->window}, layer);
}

/* params: [0] family, [1] row of its table, [2] activation kind (activations). */
static int adj_layer_case_create(MPI_Comm comm, const adj_battery_case *c, adj_layer **layer) {
  adj_layer_family family = (adj_layer_family)c->params[0];
  int64_t row = c->params[1];
  if (family == ADJ_FAMILY_AFFINE) {
    adj_decomposition *input;
    ADJ_CALL(adj_affine_case_input(comm, &adj_affine_cases[row], &input));
    int status = adj_affine_case_create(&adj_affine_cases[row], c->dtype, input, false, layer);
    adj_decomposition_destroy(&input);
    return status;
  }
  const adj_layout_spec *x = family == ADJ_FAMILY_ACTIVATION ? &adj_activation_layouts[row]
                             : family == ADJ_FAMILY_FLATTEN  ? &adj_flatten_layouts[row]
                             : family == ADJ_FAMILY_POOL     ? &adj_pool_specs[row].input
                                                             : &adj_repartition_specs[row].x;
  adj_decomposition *in = NULL, *out = NULL;
  int status = adj_layout_create(comm, x, &in);
  if (!status && family == ADJ_FAMILY_REPARTITION) {
    status = adj_layout_create(comm, &adj_repartition_specs[row].y, &out);
    if (!status)
      status = adj_repartition_layer_create(
          &(adj_repartition_layer_config){.dtype = c->dtype, .input = in, .output = out}, layer);
  } else if (!status) {
    status = adj_single_layout_create(family, family == ADJ_FAMILY_ACTIVATION ? c->params[2] : row, c->dtype, in, layer);
  }
  adj_decomposition_destroy(&in), adj_decomposition_destroy(&out);
  return status;
}

static int adj_run_layer(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  adj_layer *layer = NULL;
  int status = adj_layer_case_create(comm, c, &layer);
  if (!status) status = adj_dottest_layer(layer, c->seed + 47, r);
  adj_layer_destroy(&layer);
  return status;
}

/* ---- the table ---------------------------------------------------------------------------- */

static void adj_layout_format(char *buf, size_t size, const adj_layout_spec *s) {
  char grid[24];
  adj_battery_format_ints(grid, sizeof grid, s->ndim, s->parts);
  snprintf(buf, size, "%s@%s%s", grid, s->ranks, s->uneven ? ":q" : "");
}

/* Adds the case in both dtypes; `shape` is the input's global shape. */
static int adj_layer_case_add(adj_battery *b, adj_battery_case *c, const char *op, const char *partitions,
                              const adj_layout_spec *shape, int ranks) {
  snprintf(c->op, sizeof c->op, "%s", op);
  snprintf(c->partitions, sizeof c->partitions, "%s", partitions);
  adj_battery_format_int64s(c->shape, sizeof c->shape, shape->ndim, shape->shape);
  c->ranks = ranks;
  c->is_layer = 1;
  c->run = adj_run_layer;
  for (int dt = 0; dt < 2; dt++) {
    c->dtype = (adj_dtype)dt;
    snprintf(c->name, sizeof c->name, "%s/%s/%s/%s", op, partitions, c->shape, adj_dtype_name(c->dtype));
    ADJ_CALL(adj_battery_add(b, c));
  }
  return ADJ_SUCCESS;
}

/* The case of a layer on one input layout, named after the layout. */
static int adj_add_layout_case(adj_battery *b, const char *op, const adj_layout_spec *s, adj_layer_family family,
                               int64_t row, int64_t kind) {
  adj_battery_case c = {.params = {family, row, kind}};
  char partitions[96];
  adj_layout_format(partitions, sizeof partitions, s);
  return adj_layer_case_add(b, &c, op, partitions, s, adj_battery_ranks_needed(s->ranks));
}

static int adj_add_activations(adj_battery *b) {
  static const char *const names[] = {"relu", "leaky_relu", "tanh", "sigmoid"};
  for (size_t row = 0; row < sizeof adj_activation_layouts / sizeof adj_activation_layouts[0]; row++)
    for (size_t k = 0; k < sizeof adj_activations / sizeof adj_activations[0]; k++)
      ADJ_CALL(adj_add_layout_case(b, names[k], &adj_activation_layouts[row], ADJ_FAMILY_ACTIVATION, (int64_t)row,
                                   (int64_t)k));
  return ADJ_SUCCESS;
}

static int adj_add_flatten_and_pool(adj_battery *b) {
  for (size_t row = 0; row < sizeof adj_flatten_layouts / sizeof adj_flatten_layouts[0]; row++)
    ADJ_CALL(adj_add_layout_case(b, "flatten", &adj_flatten_layouts[row], ADJ_FAMILY_FLATTEN, (int64_t)row, 0));
  for (size_t row = 0; row < sizeof adj_pool_specs / sizeof adj_pool_specs[0]; row++) {
    const adj_pool_spec *s = &adj_pool_specs[row];
    adj_battery_case c = {.params = {ADJ_FAMILY_POOL, (int64_t)row}};
    char grid[40], kernel[24], stride[24], partitions[96];
    adj_layout_format(grid, sizeof grid, &s->input);
    adj_battery_format_int64s(kernel, sizeof kernel, s->window.spatial_dims, s->window.kernel);
    int64_t strides[3];
    for (int d = 0; d < s->window.spatial_dims; d++) strides[d] = s->window.stride[d] ? s->window.stride[d] : 1;
    adj_battery_format_int64s(stride, sizeof stride, s->window.spatial_dims, strides);
    snprintf(partitions, sizeof partitions, "%s k%s s%s", grid, kernel, stride);
    ADJ_CALL(adj_layer_case_add(b, &c, s->kind == ADJ_POOL_MAX ? "max_pool" : "avg_pool", partitions, &s->input,
                                adj_battery_ranks_needed(s->input.ranks)));
  }
  return ADJ_SUCCESS;
}

static int adj_add_affine_and_repartition(adj_battery *b) {
  for (int row = 0; row < adj_affine_case_count; row++) {
    const adj_affine_case *s = &adj_affine_cases[row];
    adj_battery_case c = {.params = {ADJ_FAMILY_AFFINE, row}};
    char partitions[96];
    adj_affine_case_format(partitions, sizeof partitions, s);
    adj_layout_spec shape = {.ndim = 2, .shape = {s->n, s->f_in}};
    ADJ_CALL(adj_layer_case_add(b, &c, "affine", partitions, &shape, adj_affine_case_ranks(s)));
  }
  for (size_t row = 0; row < sizeof adj_repartition_specs / sizeof adj_repartition_specs[0]; row++) {
    const adj_repartition_spec *s = &adj_repartition_specs[row];
    adj_battery_case c = {.params = {ADJ_FAMILY_REPARTITION, (int64_t)row}};
    char x[44], y[44], partitions[96];
    adj_layout_format(x, sizeof x, &s->x), adj_layout_format(y, sizeof y, &s->y);
    snprintf(partitions, sizeof partitions, "%s->%s", x, y);
    int rx = adj_battery_ranks_needed(s->x.ranks), ry = adj_battery_ranks_needed(s->y.ranks);
    ADJ_CALL(adj_layer_case_add(b, &c, "repart_layer", partitions, &s->x, rx > ry ? rx : ry));
  }
  return ADJ_SUCCESS;
}

int adj_battery_add_layers(adj_battery *b) {
  ADJ_CALL(adj_add_activations(b));
  ADJ_CALL(adj_add_flatten_and_pool(b));
  return adj_add_affine_and_repartition(b);
}
