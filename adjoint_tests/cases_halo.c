/* Battery cases for the halo exchange: generated, deterministic configurations
 * covering odd and even kernels 1-7, strides 1-3, dilations 1-3, paddings 0-3
 * (symmetric and not), 1-D/2-D/3-D partitions of 1-8 workers, tensors of rank
 * 1-4 (an unpartitioned leading dimension plays batch or channel), extents not
 * divisible by the partition, and every fifth case with explicit, unbalanced
 * input cuts (empty blocks included) in its first partitioned dimension.
 *
 * The first partitioned dimension cycles kernel (i mod 7), stride (i/7 mod 3)
 * and dilation (i/21 mod 3) through every combination; the rest come from a
 * fixed linear congruential sequence seeded by the case index, so a case name
 * always means the same configuration. */
#include <stdio.h>
#include <string.h>

#include "adjoin/halo.h"
#include "battery.h"
#include "error_impl.h"

enum {
  HALO_CASES = 216,
  /* params layout: [0] rank, [1] cut seed (0 = balanced), [2] the dimension
   * cut, then per dimension HALO_FIELDS values starting at HALO_DIMS. */
  HALO_DIMS = 3,
  HALO_FIELDS = 7 /* n, parts, k, s, d, pad left, pad right */
};

static int64_t *halo_field(adj_battery_case *c, int dim) { return &c->params[HALO_DIMS + HALO_FIELDS * dim]; }
static const int64_t *halo_field_const(const adj_battery_case *c, int dim) {
  return &c->params[HALO_DIMS + HALO_FIELDS * dim];
}

static uint64_t halo_next(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return *state >> 33;
}

/* Nondecreasing cuts 0 = c_0 <= ... <= c_P = n drawn from seed; blocks may be empty. */
static void halo_cuts(uint64_t seed, int64_t n, int parts, int64_t *cuts) {
  uint64_t state = seed;
  cuts[0] = 0;
  cuts[parts] = n;
  for (int p = 1; p < parts; p++) cuts[p] = (int64_t)(halo_next(&state) % (uint64_t)(n + 1));
  for (int p = 1; p < parts; p++)
    for (int q = p; q > 1 && cuts[q - 1] > cuts[q]; q--) {
      int64_t tmp = cuts[q];
      cuts[q] = cuts[q - 1];
      cuts[q - 1] = tmp;
    }
}

static void halo_decode(const adj_battery_case *c, int *rank, int64_t *shape, int *parts, adj_halo_kernel *k) {
  *rank = (int)c->params[0];
  memset(k, 0, sizeof *k);
  for (int i = 0; i < *rank; i++) {
    const int64_t *f = halo_field_const(c, i);
    shape[i] = f[0];
    parts[i] = (int)f[1];
    k->size[i] = f[2], k->stride[i] = f[3], k->dilation[i] = f[4];
    k->padding[i][0] = f[5], k->padding[i][1] = f[6];
  }
}

static int halo_run(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  int rank, parts[ADJ_MAX_RANK];
  int64_t shape[ADJ_MAX_RANK], cut_storage[9];
  adj_halo_kernel kernel;
  halo_decode(c, &rank, shape, parts, &kernel);
  const int64_t *cuts[ADJ_MAX_RANK] = {0};
  int cut_dim = (int)c->params[2];
  if (c->params[1]) {
    halo_cuts((uint64_t)c->params[1], shape[cut_dim], parts[cut_dim], cut_storage);
    cuts[cut_dim] = cut_storage;
  }
  adj_partition *partition = NULL;
  adj_halo_geometry *geometry = NULL;
  adj_op *op = NULL;
  int status = adj_partition_create(comm, rank, parts, c->ranks, NULL, &partition);
  if (!status) status = adj_halo_geometry_create(rank, shape, parts, cuts, &kernel, &geometry);
  if (!status) status = adj_halo_create(c->dtype, partition, geometry, &op);
  if (!status) status = adj_dottest_op(op, c->seed + 1000 + (uint64_t)c->params[1], r);
  adj_op_destroy(&op);
  adj_halo_geometry_destroy(&geometry);
  adj_partition_destroy(&partition);
  return status;
}

/* Splits `workers` over `dims` partitioned dimensions by its prime factors. */
static void halo_split_workers(uint64_t *state, int workers, int dims, int *parts) {
  for (int i = 0; i < dims; i++) parts[i] = 1;
  for (int f = 2; workers > 1; f++)
    while (workers % f == 0) {
      parts[halo_next(state) % (uint64_t)dims] *= f;
      workers /= f;
    }
}

/* A kernel dimension: the extent is at least what the kernel needs and not a
 * multiple of the worker count. */
static void halo_kernel_dim(uint64_t *state, int64_t *f, int parts, int64_t k, int64_t s, int64_t d) {
  int64_t left = (int64_t)(halo_next(state) % 4);
  int64_t right = halo_next(state) % 2 ? left : (int64_t)(halo_next(state) % 4);
  int64_t span = d * (k - 1) + 1, least = span - left - right > 1 ? span - left - right : 1;
  int64_t n = least + (int64_t)(halo_next(state) % (uint64_t)(2 * parts + 5));
  if (parts > 1 && n % parts == 0) n++;
  int64_t values[HALO_FIELDS] = {n, parts, k, s, d, left, right};
  memcpy(f, values, sizeof values);
}

static void halo_describe(adj_battery_case *c, int index) {
  int rank = (int)c->params[0];
  int64_t shape[ADJ_MAX_RANK], v[5][ADJ_MAX_RANK];
  int parts[ADJ_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    shape[i] = halo_field(c, i)[0];
    parts[i] = (int)halo_field(c, i)[1];
    for (int j = 0; j < 5; j++) v[j][i] = halo_field(c, i)[2 + j];
  }
  char k[20], s[20], d[20], p[32] = "";
  adj_battery_format_int64s(k, sizeof k, rank, v[0]);
  adj_battery_format_int64s(s, sizeof s, rank, v[1]);
  adj_battery_format_int64s(d, sizeof d, rank, v[2]);
  for (int i = 0, used = 0; i < rank; i++)
    used += snprintf(p + used, sizeof p - (size_t)used, "%s%lld:%lld", i ? "," : "", (long long)v[3][i],
                     (long long)v[4][i]);
  adj_battery_format_ints(c->partitions, sizeof c->partitions, rank, parts);
  if (c->params[1]) strncat(c->partitions, " cuts", sizeof c->partitions - strlen(c->partitions) - 1);
  adj_battery_format_int64s(c->shape, sizeof c->shape, rank, shape);
  /* The worker count leads, so --filter halo/w4/ selects the cases of one run size. */
  snprintf(c->name, sizeof c->name, "halo/w%d/%03d/k%ss%sd%sp[%s]/%s", c->ranks, index, k, s, d, p,
           adj_dtype_name(c->dtype));
}

static void halo_generate(int index, adj_battery_case *c) {
  uint64_t state = 0x9e3779b97f4a7c15ull ^ (uint64_t)index;
  int dims = 1 + index % 3, workers = 1 + (index / 3) % 8, parts[3];
  int lead = (int)(halo_next(&state) % 2); /* an unpartitioned batch/channel dimension */
  halo_split_workers(&state, workers, dims, parts);
  memset(c, 0, sizeof *c);
  c->params[0] = lead + dims;
  c->params[1] = index % 5 == 4 ? 7919 * (index + 1) : 0;
  c->params[2] = lead;
  if (lead) {
    int64_t batch[HALO_FIELDS] = {1 + (int64_t)(halo_next(&state) % 3), 1, 1, 1, 1, 0, 0};
    memcpy(halo_field(c, 0), batch, sizeof batch);
  }
  for (int i = 0; i < dims; i++) {
    bool cycled = i == 0;
    int64_t k = cycled ? 1 + index % 7 : 1 + (int64_t)(halo_next(&state) % 7);
    int64_t s = cycled ? 1 + (index / 7) % 3 : 1 + (int64_t)(halo_next(&state) % 3);
    int64_t d = cycled ? 1 + (index / 21) % 3 : 1 + (int64_t)(halo_next(&state) % 3);
    halo_kernel_dim(&state, halo_field(c, lead + i), parts[i], k, s, d);
  }
  c->ranks = workers;
  c->run = halo_run;
  snprintf(c->op, sizeof c->op, "halo");
}

int adj_battery_add_halo(adj_battery *b) {
  for (int i = 0; i < HALO_CASES; i++) {
    adj_battery_case c;
    halo_generate(i, &c);
    /* Every configuration in float64; every third also in float32; every
     * fourth also in an integer dtype, int32, int64 and uint8 in turn. */
    static const adj_dtype integers[] = {ADJ_INT32, ADJ_INT64, ADJ_UINT8};
    adj_dtype dtypes[3] = {ADJ_FLOAT64, ADJ_FLOAT32, integers[(i / 4) % 3]};
    bool wanted[3] = {true, i % 3 == 0, i % 4 == 1};
    for (int k = 0; k < 3; k++) {
      if (!wanted[k]) continue;
      c.dtype = dtypes[k];
      halo_describe(&c, i);
      ADJ_CALL(adj_battery_add(b, &c));
    }
  }
  return ADJ_SUCCESS;
}
