/* t431: placements (placement.h).  The inheritance rules on LeNet-5's dist4
 * file (every layer's input and output partition, against the layout
 * worked out by hand), the named schemes, the enumeration, and refusals
 * naming the file, line and value: an unknown layer, parts that do not
 * match a layer, a split wider than a dimension, a grid on a convolution, a
 * `ranks` line that does not match, a placement that does not fit the
 * communicator (refused on every rank), huge and negative numbers and
 * hostile files.  Usage: t431-placement NETWORKS_DIR. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static const char *network_path(const char *dir) {
  static char path[1024];
  snprintf(path, sizeof path, "%s/lenet5.net", dir);
  return path;
}

static void expect_parts(adj_test *t, const adj_description *d, const adj_network_layout *l, const char *name,
                         const char *in, const char *out) {
  int i = adj_description_find(d, name);
  ADJ_TEST_CHECK(t, i >= 0, "no layer %s", name);
  if (i < 0) return;
  char got_in[64] = "", got_out[64] = "";
  for (int k = 0; k < l->layers[i].in_ndim; k++)
    snprintf(got_in + strlen(got_in), sizeof got_in - strlen(got_in), "%s%d", k ? "x" : "", l->layers[i].in_parts[k]);
  for (int k = 0; k < l->layers[i].out_ndim; k++)
    snprintf(got_out + strlen(got_out), sizeof got_out - strlen(got_out), "%s%d", k ? "x" : "", l->layers[i].out_parts[k]);
  adj_test_report(t, "  %-12s input %-8s output %-8s workers %d%s", name, got_in, got_out, l->layers[i].workers,
                  l->layers[i].explicit_input ? "" : " (as it arrives)");
  ADJ_TEST_CHECK(t, !strcmp(got_in, in) && !strcmp(got_out, out), "%s: input %s output %s, expected %s and %s", name,
                 got_in, got_out, in, out);
}

/* dist4: convolutions on 1x1x2x2, fc layers 1x2 inputs with 2 output
 * parts; the flatten splits the 16 channels over fc1's 2 input workers. */
static void test_dist4(adj_test *t, const char *dir) {
  adj_description *d = NULL;
  adj_placement *p = NULL;
  adj_network_layout l = {0};
  ADJ_TEST_OK(t, adj_description_read_all(t->comm, network_path(dir), &d));
  if (d) ADJ_TEST_OK(t, adj_placement_find(t->comm, d, network_path(dir), "dist4", &p));
  if (p) ADJ_TEST_OK(t, adj_placement_resolve(d, p, 4, &l));
  if (!l.layers) goto done;
  adj_test_report(t, "lenet5 at %s: %d ranks, %d replica", p->name, l.ranks, l.replicas);
  ADJ_TEST_CHECK(t, l.ranks == 4 && l.replicas == 1, "dist4 uses %d ranks, %d replicas", l.ranks, l.replicas);
  expect_parts(t, d, &l, "conv1", "1x1x2x2", "1x1x2x2");
  expect_parts(t, d, &l, "relu1", "1x1x2x2", "1x1x2x2");
  expect_parts(t, d, &l, "conv2", "1x1x2x2", "1x1x2x2");
  expect_parts(t, d, &l, "fc1.flatten", "1x2x1x1", "1x2");
  expect_parts(t, d, &l, "fc1", "1x2", "1x2");
  expect_parts(t, d, &l, "fc3", "1x2", "1x2");
  expect_parts(t, d, &l, "loss1", "1x2", "1x2");
done:
  adj_network_layout_free(&l);
  adj_placement_destroy(&p);
  adj_description_destroy(&d);
}

/* RxC, uniform names and the enumeration, each resolving to what it says. */
static void test_names(adj_test *t, const char *dir) {
  adj_description *d = NULL;
  ADJ_TEST_OK(t, adj_description_read_all(t->comm, network_path(dir), &d));
  if (!d) return;
  static const struct {
    const char *name;
    int ranks;
  } names[] = {{"sequential", 1}, {"2x3", 6}, {"window=4x1x1x1,fc=grid:2x2", 4}, {"fig7", 4},
               {"window=1x1x2x1,fc=1x2x2,replicas=3", 4}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    adj_placement *p = NULL;
    adj_network_layout l = {0};
    ADJ_TEST_OK(t, adj_placement_find(t->comm, d, network_path(dir), names[i].name, &p));
    if (p) ADJ_TEST_OK(t, adj_placement_resolve(d, p, 8, &l));
    adj_test_report(t, "placement %-36s %d ranks, %d replicas", names[i].name, l.ranks, l.replicas);
    ADJ_TEST_CHECK(t, l.ranks == names[i].ranks, "%s: %d ranks, expected %d", names[i].name, l.ranks, names[i].ranks);
    adj_network_layout_free(&l);
    adj_placement_destroy(&p);
  }
  for (int ranks = 1; ranks <= 8; ranks++) {
    adj_uniform_placement *list = NULL;
    int n = 0, fitting = 0;
    ADJ_TEST_OK(t, adj_placement_enumerate(d, ranks, 8, &list, &n));
    for (int i = 0; i < n; i++) {
      adj_placement *p = NULL;
      adj_network_layout l = {0};
      if (!adj_placement_uniform(d, &list[i], &p) && !adj_placement_resolve(d, p, 8, &l) && l.ranks == ranks)
        fitting++;
      adj_network_layout_free(&l);
      adj_placement_destroy(&p);
    }
    adj_test_report(t, "lenet5, batch 8: %3d uniform placements on %d ranks", n, ranks);
    ADJ_TEST_CHECK(t, n > 0 && fitting == n, "%d ranks: %d placements, %d resolve to %d ranks", ranks, n, fitting, ranks);
    adj_uniform_placement_list_free(&list);
  }
  adj_description_destroy(&d);
}

/* A placement text against LeNet-5, refused with `phrase`. */
static void expect_refused(adj_test *t, const adj_description *d, const char *text, const char *phrase) {
  adj_placement *p = NULL;
  adj_network_layout l = {0};
  int status = adj_placement_parse(text, "x.place", &p);
  if (!status) status = adj_placement_resolve(d, p, 4, &l);
  char label[100];
  snprintf(label, sizeof label, "refused: %.80s", phrase);
  adj_test_expect_error(t, label, status, ADJ_ERR_ARG, phrase);
  adj_network_layout_free(&l);
  adj_placement_destroy(&p);
}

static void test_refusals(adj_test *t, const char *dir) {
  adj_description *d = NULL;
  ADJ_TEST_OK(t, adj_description_read_all(t->comm, network_path(dir), &d));
  if (!d) return;
  expect_refused(t, d, "conv1 parts=1x1x2x2\nconv9 parts=1x1x1x1\n", "x.place:2: network lenet5 has no layer 'conv9'");
  expect_refused(t, d, "conv1 parts=1x2x2\n", "x.place:1: layer conv1: parts has 3 entries but the layer's input has 4");
  expect_refused(t, d, "conv1 parts=1x1x64x1\n", "x.place:1: layer conv1: dimension 2 of extent 28 is split over 64");
  expect_refused(t, d, "conv1 parts=8x1x1x1\n", "x.place:1: layer conv1: the batch of 4 is split over 8 workers");
  expect_refused(t, d, "conv1 grid=2x2\n", "x.place:1: layer conv1: grid= is for fc layers");
  expect_refused(t, d, "fc1 grid=11x1\n",
                 "layer fc3 (placed as fc1, line 1): grid=11x1 puts 11 row workers on 84 input and 10 output features");
  expect_refused(t, d, "pool1 parts=1x1x2x2 out_parts=2\n", "x.place:1: layer pool1: out_parts= is for conv and fc");
  expect_refused(t, d, "ranks 8\nconv1 parts=1x1x2x2\n", "x.place: ranks 8, but its layers use 4 ranks");
  expect_refused(t, d, "conv1 parts=99999999999x1x1x1\n", "x.place:1: conv1 parts '99999999999' is out of range 1..4096");
  expect_refused(t, d, "conv1 parts=-2x1x1x1\n", "x.place:1: conv1 parts '-2' is out of range 1..4096");
  expect_refused(t, d, "conv1 parts=1x1x2x2\nconv1 parts=1x1x1x1\n", "x.place:2: 'conv1' is placed twice (first on line 1)");
  expect_refused(t, d, "conv1 k=2\n", "x.place:1: conv1: unknown option 'k'");
  expect_refused(t, d, "replicas 0\n", "x.place:1: replicas '0' is out of range 1..65536");
  /* A placement that does not fit the communicator: refused on every rank. */
  adj_placement *p = NULL;
  adj_layer *net = NULL;
  ADJ_TEST_OK(t, adj_placement_find(t->comm, d, network_path(dir), "dist8", &p));
  if (p && t->size < 8) {
    char phrase[96];
    snprintf(phrase, sizeof phrase, "placement dist8 needs 8 ranks but the communicator has %d", t->size);
    adj_test_expect_error(t, "dist8 on too few ranks", adj_network_build(d, p, t->comm,
                          &(adj_network_build_options){.dtype = ADJ_FLOAT64, .batch = 4}, &net),
                          ADJ_ERR_SIZE, phrase);
    ADJ_TEST_CHECK(t, !net, "a refused build left a network");
  }
  adj_placement_destroy(&p);
  adj_test_expect_error(t, "an unknown placement name",
                        adj_placement_find(t->comm, d, network_path(dir), "dist3", &p), ADJ_ERR_ARG,
                        "placement 'dist3' of");
  adj_test_expect_error(t, "a uniform placement's bad item",
                        adj_placement_find(t->comm, d, network_path(dir), "window=1x1x2x2,fc=grid:2", &p), ADJ_ERR_ARG,
                        "fc=grid:RxC needs two entries");
  adj_description_destroy(&d);
}

/* Hostile placement files, read on rank 0 and refused on every rank. */
static void test_files(adj_test *t, const char *dir) {
  adj_description *d = NULL;
  ADJ_TEST_OK(t, adj_description_read_all(t->comm, network_path(dir), &d));
  char tmp[256], path[512];
  snprintf(tmp, sizeof tmp, "/tmp/adjoin-t431-XXXXXX");
  int ok = t->rank != 0 || mkdtemp(tmp) != NULL;
  MPI_Bcast(tmp, (int)sizeof tmp, MPI_CHAR, 0, t->comm);
  ADJ_TEST_CHECK(t, ok, "cannot create %s", tmp);
  adj_placement *p = NULL;
  snprintf(path, sizeof path, "%s/fifo.place", tmp);
  if (t->rank == 0) ADJ_TEST_CHECK(t, mkfifo(path, 0600) == 0, "mkfifo %s", path);
  if (d) adj_test_expect_error(t, "a FIFO placement", adj_placement_find(t->comm, d, NULL, path, &p), ADJ_ERR_IO,
                               "fifo.place: is a FIFO, not a regular file");
  snprintf(path, sizeof path, "%s/huge.place", tmp);
  if (t->rank == 0) {
    int fd = open(path, O_WRONLY | O_CREAT, 0600);
    ADJ_TEST_CHECK(t, fd >= 0 && ftruncate(fd, (off_t)1 << 30) == 0, "cannot make a 1 GB file");
    if (fd >= 0) close(fd);
  }
  if (d) adj_test_expect_error(t, "a 1 GB placement", adj_placement_find(t->comm, d, NULL, path, &p), ADJ_ERR_IO,
                               "huge.place: 1073741824 bytes, more than the 1048576");
  MPI_Barrier(t->comm);
  if (t->rank == 0) {
    char command[400];
    snprintf(command, sizeof command, "rm -rf '%s'", tmp);
    ADJ_TEST_CHECK(t, system(command) == 0, "cannot remove %s", tmp);
  }
  adj_description_destroy(&d);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t431-placement");
  ADJ_TEST_CHECK(&t, argc >= 2, "usage: t431-placement NETWORKS_DIR");
  if (argc >= 2) {
    test_dist4(&t, argv[1]);
    test_names(&t, argv[1]);
    test_refusals(&t, argv[1]);
    test_files(&t, argv[1]);
  }
  return adj_test_finish(&t);
}
