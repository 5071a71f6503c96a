/* t430: network descriptions (description.h).  A worked example of every
 * layer kind, its inferred shapes and parameter counts checked against
 * figures computed by hand; the shipped networks' parameter counts; and
 * refusals, each naming the source, the line and the value: an unknown
 * layer, shapes that do not chain, huge and negative numbers, a layer after
 * the loss, and hostile files (1 GB, a FIFO, a NUL byte, a missing file),
 * the same message on every rank when the file is read on one rank and
 * parsed on all.  Usage: t430-description NETWORKS_DIR. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static adj_description *parse(adj_test *t, const char *text) {
  adj_description *d = NULL;
  ADJ_TEST_OK(t, adj_description_parse(text, "t430.net", &d));
  return d;
}

/* Layer `name`'s output shape and parameter count against the expected. */
static void expect_layer(adj_test *t, const adj_description *d, const char *name, int rank, const int64_t *shape,
                         int64_t parameters) {
  int i = adj_description_find(d, name);
  ADJ_TEST_CHECK(t, i >= 0, "no layer %s", name);
  if (i < 0) return;
  const adj_desc_layer *l = &d->layers[i];
  char got[64], want[64];
  adj_desc_shape_format(l->out_rank, l->out_shape, got, sizeof got);
  adj_desc_shape_format(rank, shape, want, sizeof want);
  adj_test_report(t, "  %-10s %-10s %-16s -> %-16s %6lld parameters", name, adj_desc_layer_keyword(l),
                  adj_desc_shape_format(l->in_rank, l->in_shape, want, sizeof want), got, (long long)l->parameter_count);
  adj_desc_shape_format(rank, shape, want, sizeof want);
  ADJ_TEST_CHECK(t, !strcmp(got, want) && l->parameter_count == parameters, "%s: %s with %lld parameters, expected %s with %lld",
                 name, got, (long long)l->parameter_count, want, (long long)parameters);
}

/* One worked example per layer kind: conv 1-d (stride, dilation, padding),
 * conv 3-d (a kernel per dimension), pools, batch norm, upsample, pad,
 * activations, phantom, flatten (implicit), and losses. */
static void test_kinds(adj_test *t) {
  adj_description *d = parse(t, "network kinds\ninput 3 20\n"
                                 "conv c1 out=4 k=3 s=2 d=2 p=1 mode=circular\n" /* (20+2-5)/2+1 = 9 */
                                 "leaky_relu slope=0.2\n"
                                 "pool q1 k=3 s=1 type=avg count_pad=no p=1\n"   /* (9+2-3)/1+1 = 9 */
                                 "batchnorm bn1 eps=1e-3 momentum=0.5\n"
                                 "upsample u1 scale=2 mode=linear align_corners=yes\n" /* 18 */
                                 "pad p1 p=1:2 mode=reflect\n"                   /* 21 */
                                 "fc f1 out=16 bias=no\n"                        /* flatten 4*21 = 84 */
                                 "phantom ph out=8 k=2 parts=1x2\n"
                                 "sigmoid\n"
                                 "loss type=bce reduction=sum\n");
  if (d) {
    expect_layer(t, d, "c1", 2, (const int64_t[]){4, 9}, 4 * 3 * 3 + 4);
    expect_layer(t, d, "q1", 2, (const int64_t[]){4, 9}, 0);
    expect_layer(t, d, "bn1", 2, (const int64_t[]){4, 9}, 8);
    expect_layer(t, d, "u1", 2, (const int64_t[]){4, 18}, 0);
    expect_layer(t, d, "p1", 2, (const int64_t[]){4, 21}, 0);
    expect_layer(t, d, "f1.flatten", 1, (const int64_t[]){84}, 0);
    expect_layer(t, d, "f1", 1, (const int64_t[]){16}, 16 * 84);
    /* p = 2: L blocks 4x8 twice, C (2, 16), D (8, 2), bias 8. */
    expect_layer(t, d, "ph", 1, (const int64_t[]){8}, 64 + 32 + 16 + 8);
    const adj_desc_layer *l = &d->layers[adj_description_find(d, "q1")];
    ADJ_TEST_CHECK(t, l->u.pool.kind == ADJ_POOL_AVG_EXCLUDE_PAD, "count_pad=no: pool kind %d", (int)l->u.pool.kind);
    l = &d->layers[adj_description_find(d, "c1")];
    ADJ_TEST_CHECK(t, l->u.conv.padding_mode == ADJ_PAD_CIRCULAR && l->u.conv.window.dilation[0] == 2,
                   "conv mode %d dilation %lld", (int)l->u.conv.padding_mode, (long long)l->u.conv.window.dilation[0]);
    ADJ_TEST_CHECK(t, d->layers[adj_description_find(d, "ph")].placement.kind == ADJ_PLACE_PARTS, "ph: no placement");
    ADJ_TEST_CHECK(t, adj_description_loss(d) == d->n - 1 && d->layers[d->n - 1].u.loss.kind == ADJ_LOSS_BCE,
                   "the loss is not the last layer, or not bce");
  }
  adj_description_destroy(&d);
  d = parse(t, "input 2 6 8 10\nconv c3 out=3 k=3x3x1 p=1x1x0\npool k=2 s=2\nfc out=5\n"
               "loss type=kl_div reduction=batchmean log_target=yes\n");
  if (d) {
    expect_layer(t, d, "c3", 4, (const int64_t[]){3, 6, 8, 10}, 3 * 2 * 9 + 3);
    expect_layer(t, d, "pool1", 4, (const int64_t[]){3, 3, 4, 5}, 0);
    ADJ_TEST_CHECK(t, d->layers[d->n - 1].u.loss.log_target, "kl_div log_target=yes not recorded");
  }
  adj_description_destroy(&d);
  d = parse(t, "input 10\ntanh\nfc out=3\nloss type=poisson_nll log_input=no full=yes eps=1e-6\n");
  if (d) {
    const adj_desc_loss *q = &d->layers[d->n - 1].u.loss;
    ADJ_TEST_CHECK(t, q->poisson_linear_input && q->poisson_full && q->poisson_eps == 1e-6,
                   "poisson options %d %d %g", q->poisson_linear_input, q->poisson_full, q->poisson_eps);
  }
  adj_description_destroy(&d);
}

static void test_shipped(adj_test *t, const char *dir) {
  static const struct {
    const char *file;
    int64_t parameters;
  } shipped[] = {{"alexnet.net", 60965224}, {"lenet5.net", 61706}, {"mlp.net", 535818}, {"encdec.net", 17338},
                 {"shallowspeed.net", 181105}};
  for (size_t i = 0; i < sizeof shipped / sizeof shipped[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, shipped[i].file);
    adj_description *d = NULL;
    ADJ_TEST_OK(t, adj_description_read_all(t->comm, path, &d));
    if (!d) continue;
    adj_test_report(t, "%-16s %3d layers, %9lld parameters", shipped[i].file, d->n, (long long)d->parameter_count);
    ADJ_TEST_CHECK(t, d->parameter_count == shipped[i].parameters, "%s: %lld parameters, expected %lld", path,
                   (long long)d->parameter_count, (long long)shipped[i].parameters);
    adj_description_destroy(&d);
  }
}

static void expect_refused(adj_test *t, const char *text, const char *phrase) {
  adj_description *d = NULL;
  char label[80];
  snprintf(label, sizeof label, "refused: %.60s", phrase);
  adj_test_expect_error(t, label, adj_description_parse(text, "x.net", &d), ADJ_ERR_ARG, phrase);
  ADJ_TEST_CHECK(t, !d, "a refused description was returned");
}

static void test_refusals(adj_test *t) {
  expect_refused(t, "input 8\nfc a out=3\nlstm b out=3\n", "x.net:3: unknown layer type 'lstm'");
  expect_refused(t, "input 1 4 4\nconv c out=2 k=7\n", "x.net:2: conv c: kernel 7 (dilation 1) exceeds the padded input 4");
  expect_refused(t, "input 1 4 4\nconv c out=2 k=3\nloss type=xent\n", "x.net:3: loss loss1: type=xent takes (N, C) scores");
  expect_refused(t, "input 8\nfc a out=99999999999999999999\n", "x.net:2: fc a out '99999999999999999999' is out of range");
  expect_refused(t, "input 1 8 8\nconv c out=2 k=-3\n", "x.net:2: conv c k '-3' is out of range 1..1048576");
  expect_refused(t, "input -1 8\n", "x.net:1: input extent '-1' is out of range");
  expect_refused(t, "input 8\nfc a out=3\nloss type=mse\nrelu\n", "x.net:4: relu after the loss on line 3");
  expect_refused(t, "input 8\nfc a out=3\nfc a out=2\n", "x.net:3: layer name 'a' is already used on line 2");
  expect_refused(t, "input 8\nfc a outt=3\n", "x.net:2: fc a: unknown option 'outt'");
  expect_refused(t, "input 1 8 8\nconv c out=2 k=3 parts=1x2\n", "x.net:2: conv c parts '1x2' has 2 entries but the input");
  expect_refused(t, "input 1 8 8\npool q k=2 mode=symmetric\n", "x.net:2: pool q mode 'symmetric' is not one of");
  expect_refused(t, "fc a out=3\n", "x.net:1: layer before the input line");
  expect_refused(t, "input 8\n", "x.net: no layers");
  expect_refused(t, "input 8\nfc a out=4 grid=2x2 parts=1x2\n", "x.net:2: fc a: grid= is a placement of its own");
  expect_refused(t, "input 1 8 8\nconv c out=2 k=3 grid=2x2\n", "x.net:2: conv c: unknown option 'grid'");
  expect_refused(t, "input 8\nfc a out=4 parts=4096x4096\n", "the placement needs 16777216 workers");
}

/* A file written on rank 0 (a FIFO, a sparse 1 GB file, ...), read on rank
 * 0 and refused on every rank with the same message. */
static void expect_file_refused(adj_test *t, const char *label, const char *path, const char *phrase) {
  adj_description *d = NULL;
  adj_test_expect_error(t, label, adj_description_read_all(t->comm, path, &d), ADJ_TEST_ANY_ERROR, phrase);
  ADJ_TEST_CHECK(t, !d, "%s: a refused file gave a description", label);
}

static void test_files(adj_test *t) {
  char dir[256], path[512];
  snprintf(dir, sizeof dir, "/tmp/adjoin-t430-XXXXXX");
  int ok = t->rank != 0 || mkdtemp(dir) != NULL;
  MPI_Bcast(dir, (int)sizeof dir, MPI_CHAR, 0, t->comm);
  ADJ_TEST_CHECK(t, ok, "cannot create %s", dir);
  snprintf(path, sizeof path, "%s/fifo.net", dir);
  if (t->rank == 0) ADJ_TEST_CHECK(t, mkfifo(path, 0600) == 0, "mkfifo %s", path);
  expect_file_refused(t, "a FIFO", path, "fifo.net: is a FIFO, not a regular file");
  snprintf(path, sizeof path, "%s/huge.net", dir);
  if (t->rank == 0) {
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    ADJ_TEST_CHECK(t, fd >= 0 && ftruncate(fd, (off_t)1 << 30) == 0, "cannot make a 1 GB file");
    if (fd >= 0) close(fd);
  }
  expect_file_refused(t, "a 1 GB file", path, "huge.net: 1073741824 bytes, more than the 1048576 it may hold");
  snprintf(path, sizeof path, "%s/nul.net", dir);
  if (t->rank == 0) {
    FILE *f = fopen(path, "wb");
    if (f) fwrite("input 8\n\0fc a out=3\n", 1, 20, f), fclose(f);
  }
  expect_file_refused(t, "a NUL byte", path, "holds a NUL byte");
  snprintf(path, sizeof path, "%s/missing.net", dir);
  expect_file_refused(t, "a missing file", path, "missing.net: cannot open it");
  snprintf(path, sizeof path, "%s/bad.net", dir);
  if (t->rank == 0) {
    FILE *f = fopen(path, "w");
    if (f) fputs("network bad\ninput 1 28 28\nconv c out=6 k=5\nfc f out=-2\n", f), fclose(f);
  }
  char phrase[600];
  snprintf(phrase, sizeof phrase, "%s:4: fc f out '-2' is out of range", path);
  expect_file_refused(t, "a bad value in a file", path, phrase);
  MPI_Barrier(t->comm);
  if (t->rank == 0) {
    char command[400];
    snprintf(command, sizeof command, "rm -rf '%s'", dir);
    ADJ_TEST_CHECK(t, system(command) == 0, "cannot remove %s", dir);
  }
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t430-description");
  ADJ_TEST_CHECK(&t, argc >= 2, "usage: t430-description NETWORKS_DIR");
  test_kinds(&t);
  if (argc >= 2) test_shipped(&t, argv[1]);
  test_refusals(&t);
  test_files(&t);
  return adj_test_finish(&t);
}
