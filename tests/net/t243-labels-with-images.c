/* t243: labels scattered with the images.  Rank 0 takes a batch of a data set
 * (float32 images, and its labels as uint8, int32 and int64) and scatters each onto the batch
 * dimension of P workers.  The images and the labels share the batch cuts, so
 * every worker must hold, for each of its images, that image's label: checked
 * against each sample read alone from the data set, the sequential
 * reference.  The gather (the scatter's adjoint) brings the labels back to rank
 * 0 unchanged, and the label scatter's exact dot-product test is printed.
 * Batches of 2P + 1 samples (uneven blocks) and of P - 2 (some workers hold
 * nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { ROWS = 5, COLS = 4, CLASSES = 10 };

static const adj_dtype label_dtypes[] = {ADJ_UINT8, ADJ_INT32, ADJ_INT64};

typedef struct batch {
  int64_t size;
  int64_t *indices;              /* the batch's samples, every rank */
  adj_decomposition *images, *labels; /* (B, 1, ROWS, COLS) and (B), batch on P workers */
} batch;

static void batch_create(adj_test *t, int64_t size, batch *b) {
  *b = (batch){.size = size, .indices = calloc((size_t)size + 1, sizeof(int64_t))};
  for (int64_t k = 0; k < size; k++) b->indices[k] = (7 * k + 3) % 97;
  ADJ_TEST_OK(t, adj_decomposition_create_on_first_ranks(t->comm, 4, (const int[]){t->size, 1, 1, 1},
                                                         (const int64_t[]){size, 1, ROWS, COLS}, &b->images));
  ADJ_TEST_OK(t, adj_decomposition_create_on_first_ranks(t->comm, 1, (const int[]){t->size}, &size, &b->labels));
}

static void batch_destroy(batch *b) {
  free(b->indices);
  adj_decomposition_destroy(&b->images), adj_decomposition_destroy(&b->labels);
}

/* Rank 0's whole batch (the scatters' domains: zero volume elsewhere), the
 * labels narrowed or kept from the data set's int64 to the labels' dtype. */
static void root_batch(adj_test *t, adj_dataset *ds, const batch *b, adj_op *scatter_images,
                       adj_op *scatter_labels, adj_tensor *images, adj_tensor *labels) {
  int64_t read[64];
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(scatter_images, images));
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(scatter_labels, labels));
  int64_t n = adj_tensor_volume(labels);
  adj_box box = adj_box_whole(4, images->shape);
  if (n) ADJ_TEST_OK(t, adj_dataset_read_inputs(ds, b->indices, n, &box, images));
  if (n) ADJ_TEST_OK(t, adj_dataset_read_labels(ds, b->indices, n, 0, n, read));
  for (int64_t k = 0; k < n; k++) adj_tensor_set_int(labels, k, read[k]);
}

/* One sample's pixels and label, read alone: the sequential reference. */
static void read_sample(adj_test *t, adj_dataset *ds, int64_t sample, adj_tensor *pixels, int64_t *label) {
  adj_box box = adj_box_whole(4, pixels->shape);
  ADJ_TEST_OK(t, adj_dataset_read_inputs(ds, &sample, 1, &box, pixels));
  ADJ_TEST_OK(t, adj_dataset_read_labels(ds, &sample, 1, 0, 1, label));
}

/* This worker's images and labels belong together: both are the samples of
 * its batch block, compared with the data set.  Returns the pairs that match. */
static int64_t check_pairs(adj_test *t, adj_dataset *ds, const batch *b, const adj_tensor *images,
                           const adj_tensor *labels) {
  adj_box block = adj_decomposition_local_block(b->labels);
  adj_box image_block = adj_decomposition_local_block(b->images);
  ADJ_TEST_CHECK(t, block.start[0] == image_block.start[0] && block.extent[0] == image_block.extent[0],
                 "rank %d: labels [%lld, +%lld) but images [%lld, +%lld)", t->rank, (long long)block.start[0],
                 (long long)block.extent[0], (long long)image_block.start[0], (long long)image_block.extent[0]);
  const int64_t pixels = ROWS * COLS;
  int64_t wrong = 0, label = -1;
  adj_tensor alone;
  ADJ_TEST_OK(t, adj_tensor_create(&alone, ADJ_FLOAT32, 4, (const int64_t[]){1, 1, ROWS, COLS}));
  for (int64_t k = 0; k < adj_tensor_volume(labels); k++) {
    read_sample(t, ds, b->indices[block.start[0] + k], &alone, &label);
    wrong += adj_tensor_get_int(labels, k) != label ||
             memcmp((const float *)images->data + k * pixels, alone.data, (size_t)pixels * sizeof(float)) != 0;
  }
  adj_tensor_destroy(&alone);
  ADJ_TEST_CHECK(t, wrong == 0, "rank %d: %lld labels or images are not the samples of its block", t->rank,
                 (long long)wrong);
  return adj_tensor_volume(labels) - wrong;
}

static void run(adj_test *t, adj_dataset *ds, int64_t size, adj_dtype dtype) {
  batch b;
  batch_create(t, size, &b);
  adj_op *scatter_images = NULL, *scatter_labels = NULL;
  ADJ_TEST_OK(t, adj_scatter_create(ADJ_FLOAT32, 0, b.images, &scatter_images));
  ADJ_TEST_OK(t, adj_scatter_create(dtype, 0, b.labels, &scatter_labels));
  adj_tensor images, labels, my_images, my_labels, back;
  root_batch(t, ds, &b, scatter_images, scatter_labels, &images, &labels);
  ADJ_TEST_OK(t, adj_op_create_range_tensor(scatter_images, &my_images));
  ADJ_TEST_OK(t, adj_op_create_range_tensor(scatter_labels, &my_labels));
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(scatter_labels, &back));
  ADJ_TEST_OK(t, adj_op_forward(scatter_images, &images, &my_images));
  ADJ_TEST_OK(t, adj_op_forward(scatter_labels, &labels, &my_labels));
  int64_t matched = check_pairs(t, ds, &b, &my_images, &my_labels), mine = adj_tensor_volume(&my_labels);
  ADJ_TEST_OK(t, adj_op_adjoint(scatter_labels, &my_labels, &back));
  ADJ_TEST_CHECK(t, memcmp(back.data, labels.data, adj_tensor_bytes(&labels)) == 0,
                 "rank %d: the gathered labels differ from the batch's", t->rank);
  adj_dottest_result r;
  ADJ_TEST_OK(t, adj_dottest_op(scatter_labels, 243, &r));
  ADJ_TEST_CHECK(t, r.exact && r.range_inner_int == r.domain_inner_int, "label scatter: <Fx,y> %lld, <x,F*y> %lld",
                 (long long)r.range_inner_int, (long long)r.domain_inner_int);
  long long local[2] = {matched, mine > 0}, total[2];
  MPI_Allreduce(local, total, 2, MPI_LONG_LONG, MPI_SUM, t->comm);
  adj_test_report(t, "batch %lld, %s labels: %lld of %lld (image, label) pairs on %lld of %d workers match the "
                  "data set; exact dot-product %lld = %lld",
                  (long long)size, adj_dtype_name(dtype), total[0], (long long)size, total[1], t->size,
                  (long long)r.range_inner_int, (long long)r.domain_inner_int);
  adj_tensor_destroy(&images), adj_tensor_destroy(&labels), adj_tensor_destroy(&my_images);
  adj_tensor_destroy(&my_labels), adj_tensor_destroy(&back);
  adj_op_destroy(&scatter_images), adj_op_destroy(&scatter_labels);
  batch_destroy(&b);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t243-labels-with-images");
  adj_dataset *ds = NULL;
  ADJ_TEST_OK(&t, adj_dataset_random(97, 3, (const int64_t[]){1, ROWS, COLS}, CLASSES, 243, &ds));
  int64_t sizes[2] = {2 * t.size + 1, t.size > 2 ? t.size - 2 : 1};
  for (int s = 0; ds && s < 2; s++)
    for (size_t d = 0; d < sizeof label_dtypes / sizeof label_dtypes[0]; d++) run(&t, ds, sizes[s], label_dtypes[d]);
  adj_dataset_destroy(&ds);
  return adj_test_finish(&t);
}
