/* Tensors and boxes: pack, unpack (copy and add), clear and box-to-box copy
 * and add against element-by-element reference loops, for ranks 0-5, both
 * dtypes, random boxes including zero-volume ones and boxes spanning whole
 * rows (runs of 1-6 elements, so every short-run copy size is met). */
#include <string.h>

#include "harness.h"

/* Flat index of the element at `index` (box-relative) of box inside shape. */
static int64_t flat_of(int rank, const int64_t *shape, const adj_box *box, const int64_t *index) {
  int64_t flat = 0;
  for (int d = 0; d < rank; d++) flat = flat * shape[d] + box->start[d] + index[d];
  return flat;
}

static int next_index(const adj_box *box, int64_t *index) {
  for (int d = box->rank - 1; d >= 0; d--) {
    if (++index[d] < box->extent[d]) return 1;
    index[d] = 0;
  }
  return 0;
}

static adj_box random_box(adj_rng *rng, int rank, const int64_t *shape) {
  adj_box b = {.rank = rank};
  for (int d = 0; d < rank; d++) {
    b.start[d] = (int64_t)adj_rng_below(rng, (uint64_t)shape[d] + 1);
    b.extent[d] = (int64_t)adj_rng_below(rng, (uint64_t)(shape[d] - b.start[d]) + 1);
    if (adj_rng_uniform(rng) < 0.3) b.start[d] = 0, b.extent[d] = shape[d]; /* whole rows */
  }
  return b;
}

static void check_pack_unpack(adj_test *t, adj_rng *rng, adj_dtype dtype, int rank) {
  int64_t shape[ADJ_MAX_RANK];
  for (int d = 0; d < rank; d++) shape[d] = 1 + (int64_t)adj_rng_below(rng, 6);
  adj_tensor a, b, buf;
  adj_tensor_create(&a, dtype, rank, shape);
  adj_tensor_create(&b, dtype, rank, shape);
  adj_rng_fill_uniform(rng, &a, -1, 1);
  adj_rng_fill_uniform(rng, &b, -1, 1);
  adj_box box = random_box(rng, rank, shape);
  int64_t n = adj_box_volume(&box);
  adj_tensor_create(&buf, dtype, 1, &n);
  adj_tensor_pack(&a, &box, buf.data);
  int64_t index[ADJ_MAX_RANK] = {0}, k = 0, bad = 0;
  if (n > 0) do {
      bad += adj_tensor_get(&buf, k++) != adj_tensor_get(&a, flat_of(rank, shape, &box, index));
    } while (next_index(&box, index));
  ADJ_TEST_CHECK(t, bad == 0 && k == n, "pack rank %d %s: %lld wrong of %lld", rank, adj_dtype_name(dtype), (long long)bad, (long long)n);
  /* unpack ADD into b, then compare with reference b + a on the box. */
  adj_tensor ref;
  adj_tensor_create(&ref, dtype, rank, shape);
  adj_tensor_copy(&ref, &b);
  memset(index, 0, sizeof index);
  if (n > 0) do {
      int64_t f = flat_of(rank, shape, &box, index);
      adj_tensor_set(&ref, f, adj_tensor_get(&ref, f) + adj_tensor_get(&a, f));
    } while (next_index(&box, index));
  adj_tensor_unpack(&b, &box, buf.data, ADJ_UNPACK_ADD);
  ADJ_TEST_CHECK(t, adj_test_max_rel_diff(&b, &ref) == 0, "unpack-add rank %d %s differs", rank, adj_dtype_name(dtype));
  /* clear, then unpack COPY restores exactly the packed values. */
  adj_tensor_clear_box(&b, &box);
  adj_tensor_unpack(&b, &box, buf.data, ADJ_UNPACK_COPY);
  memset(index, 0, sizeof index);
  bad = 0;
  if (n > 0) do {
      int64_t f = flat_of(rank, shape, &box, index);
      bad += adj_tensor_get(&b, f) != adj_tensor_get(&a, f);
    } while (next_index(&box, index));
  ADJ_TEST_CHECK(t, bad == 0, "unpack-copy rank %d: %lld wrong", rank, (long long)bad);
  adj_tensor_destroy(&a), adj_tensor_destroy(&b), adj_tensor_destroy(&buf), adj_tensor_destroy(&ref);
}

static void check_copy_box(adj_test *t, adj_rng *rng, adj_dtype dtype, int rank, adj_unpack_mode mode) {
  int64_t sshape[ADJ_MAX_RANK], dshape[ADJ_MAX_RANK];
  adj_box sbox = {.rank = rank}, dbox = {.rank = rank};
  for (int d = 0; d < rank; d++) {
    sshape[d] = 2 + (int64_t)adj_rng_below(rng, 5);
    dshape[d] = 2 + (int64_t)adj_rng_below(rng, 5);
    int64_t e = (int64_t)adj_rng_below(rng, (uint64_t)(sshape[d] < dshape[d] ? sshape[d] : dshape[d]) + 1);
    sbox.extent[d] = dbox.extent[d] = e;
    sbox.start[d] = (int64_t)adj_rng_below(rng, (uint64_t)(sshape[d] - e) + 1);
    dbox.start[d] = (int64_t)adj_rng_below(rng, (uint64_t)(dshape[d] - e) + 1);
  }
  adj_tensor s, dst, ref;
  adj_tensor_create(&s, dtype, rank, sshape);
  adj_tensor_create(&dst, dtype, rank, dshape);
  adj_tensor_create(&ref, dtype, rank, dshape);
  adj_rng_fill_uniform(rng, &s, -1, 1);
  adj_rng_fill_uniform(rng, &dst, -1, 1);
  adj_tensor_copy(&ref, &dst);
  int64_t index[ADJ_MAX_RANK] = {0};
  if (adj_box_volume(&sbox) > 0) do {
      int64_t fd = flat_of(rank, dshape, &dbox, index), fs = flat_of(rank, sshape, &sbox, index);
      double kept = mode == ADJ_UNPACK_ADD ? adj_tensor_get(&ref, fd) : 0;
      adj_tensor_set(&ref, fd, kept + adj_tensor_get(&s, fs));
    } while (next_index(&sbox, index));
  adj_tensor_copy_box(&dst, &dbox, &s, &sbox, mode);
  ADJ_TEST_CHECK(t, adj_test_max_rel_diff(&dst, &ref) == 0, "copy_box %s rank %d %s differs",
                 mode == ADJ_UNPACK_ADD ? "add" : "copy", rank, adj_dtype_name(dtype));
  adj_tensor_destroy(&s), adj_tensor_destroy(&dst), adj_tensor_destroy(&ref);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t100-tensor-boxes");
  adj_rng *rng;
  adj_rng_create(100, &rng);
  int trials = 0;
  for (int trial = 0; trial < 200; trial++)
    for (int dt = 0; dt < 2; dt++)
      for (int rank = 0; rank <= 5; rank++, trials++) {
        check_pack_unpack(&t, rng, (adj_dtype)dt, rank);
        check_copy_box(&t, rng, (adj_dtype)dt, rank, ADJ_UNPACK_ADD);
        check_copy_box(&t, rng, (adj_dtype)dt, rank, ADJ_UNPACK_COPY);
      }
  /* Zero-volume tensors have storage and copy cleanly. */
  adj_tensor z;
  int64_t zero_shape[2] = {0, 5};
  ADJ_TEST_OK(&t, adj_tensor_create(&z, ADJ_FLOAT64, 2, zero_shape));
  ADJ_TEST_CHECK(&t, z.data != NULL && adj_tensor_volume(&z) == 0, "zero-volume tensor must have non-NULL storage");
  adj_tensor_destroy(&z);
  /* Bad shapes are rejected with the value named. */
  int64_t negative[1] = {-3};
  int status = adj_tensor_create(&z, ADJ_FLOAT32, 1, negative);
  ADJ_TEST_CHECK(&t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "-3"), "negative extent: %s", adj_last_error());
  status = adj_tensor_create(&z, ADJ_FLOAT32, 9, negative);
  ADJ_TEST_CHECK(&t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "rank 9"), "rank 9: %s", adj_last_error());
  adj_test_report(&t, "%d random box trials (ranks 0-5, float32 and float64) matched the reference loops", trials);
  adj_rng_destroy(&rng);
  return adj_test_finish(&t);
}
