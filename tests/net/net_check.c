/* Shared helpers of the network and training tests (see net_check.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net_check.h"

adj_dataset *nc_synthetic(int64_t count, uint64_t seed) {
  adj_dataset *ds = NULL;
  adj_dataset_random(count, 3, (const int64_t[]){1, 28, 28}, 10, seed, &ds);
  return ds;
}

int nc_run_create(const char *layout, adj_dtype dtype, int64_t batch, adj_dataset *data, uint64_t seed,
                  nc_run *run) {
  return nc_run_create_model("lenet", layout, dtype, batch, data, seed, run);
}

const char *nc_network_file(const char *model) {
  static char path[1024];
  const char *file = !strcmp(model, "encdec") ? "encdec.net" : !strcmp(model, "mlp") ? "shallowspeed.net" : "lenet5.net";
  snprintf(path, sizeof path, "%s/%s", NC_NETWORKS_DIR, file);
  return path;
}

/* The placement name a test's layout means: the encoder-decoder's grids
 * are spatial. */
static const char *nc_placement_name(const char *model, const char *layout, char *buf, size_t size) {
  int rows, cols;
  char tail;
  if (!strcmp(model, "encdec") && sscanf(layout, "%dx%d%c", &rows, &cols, &tail) == 2)
    snprintf(buf, size, "window=1x1x%dx%d", rows, cols);
  else snprintf(buf, size, "%s", layout);
  return buf;
}

int nc_build_network(const char *model, const char *layout, const adj_network_build_options *options,
                     adj_layer **net) {
  return nc_build_network_on(MPI_COMM_WORLD, model, layout, options, net);
}

int nc_build_network_on(MPI_Comm comm, const char *model, const char *layout, const adj_network_build_options *options,
                        adj_layer **net) {
  char name[128];
  return adj_network_build_file(comm, nc_network_file(model), nc_placement_name(model, layout, name, sizeof name),
                                options, net);
}

int nc_build_text(const char *text, const char *placement, const adj_network_build_options *options, adj_layer **net) {
  *net = NULL;
  adj_description *d = NULL;
  adj_placement *p = NULL;
  int status = adj_description_parse(text, "test network", &d);
  if (!status) status = adj_placement_find(MPI_COMM_WORLD, d, NULL, placement, &p);
  if (!status) status = adj_network_build(d, p, MPI_COMM_WORLD, options, net);
  adj_placement_destroy(&p);
  adj_description_destroy(&d);
  return status;
}

int nc_layout_ranks(const char *model, const char *layout) {
  char name[128];
  int ranks = adj_network_file_ranks(MPI_COMM_WORLD, nc_network_file(model),
                                     nc_placement_name(model, layout, name, sizeof name), 0);
  adj_clear_error();
  return ranks;
}

static int nc_build(const char *model, const char *layout, adj_dtype dtype, int64_t batch, adj_layer **net) {
  return nc_build_network(model, layout, &(adj_network_build_options){.dtype = dtype, .batch = batch}, net);
}

int nc_run_create_model(const char *model, const char *layout, adj_dtype dtype, int64_t batch,
                        adj_dataset *data, uint64_t seed, nc_run *run) {
  *run = (nc_run){0};
  int status = nc_build(model, layout, dtype, batch, &run->net);
  if (!status) status = adj_network_init_uniform(run->net, seed);
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-3};
  if (!status) status = adj_optimizer_create(run->net, &oc, &run->opt);
  adj_trainer_config tc = {.network = run->net, .optimizer = run->opt, .train = data, .seed = seed};
  if (!status) status = adj_trainer_create(&tc, &run->trainer);
  return status;
}

void nc_run_destroy(nc_run *run) {
  adj_trainer_destroy(&run->trainer);
  adj_optimizer_destroy(&run->opt);
  adj_layer_destroy(&run->net);
}

/* Gathers parameter i of net (or its gradient) whole onto rank 0 (a
 * zero-volume tensor elsewhere). */
static int nc_gather(adj_layer *net, int i, bool gradient, adj_tensor *whole) {
  const adj_parameter *p = adj_layer_parameter(net, i);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int64_t zeros[ADJ_MAX_RANK] = {0};
  const int64_t *shape = rank == 0 ? adj_decomposition_global_shape(p->layout) : zeros;
  int status = adj_tensor_create(whole, adj_layer_dtype(net), adj_decomposition_rank(p->layout), shape);
  if (status) return status;
  return gradient ? adj_layer_get_gradient(net, i, 0, whole) : adj_layer_get_parameter(net, i, 0, whole);
}

/* The running statistics of a's and b's batch norm stages, block by block
 * on every worker; the worst difference and bitwise equality over all. */
static double nc_running_stats_diff(adj_layer *a, adj_layer *b, bool *bitwise) {
  double worst = 0;
  int same = 1;
  for (int i = 0; i < adj_network_depth(a) && i < adj_network_depth(b); i++) {
    adj_layer *sa = adj_network_layer(a, i), *sb = adj_network_layer(b, i);
    if (!adj_layer_is_batchnorm(sa) || !adj_layer_is_batchnorm(sb)) continue;
    adj_tensor ma, va, mb, vb;
    adj_batchnorm_layer_running_stats(sa, &ma, &va);
    adj_batchnorm_layer_running_stats(sb, &mb, &vb);
    if (adj_tensor_volume(&ma) != adj_tensor_volume(&mb)) continue; /* different blocks: nothing to compare */
    worst = fmax(worst, fmax(adj_test_max_rel_diff(&ma, &mb), adj_test_max_rel_diff(&va, &vb)));
    same = same && !memcmp(ma.data, mb.data, adj_tensor_bytes(&ma)) && !memcmp(va.data, vb.data, adj_tensor_bytes(&va));
  }
  MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  *bitwise = same;
  return worst;
}

/* The worst gathered difference of parameters or gradients (rank 0). */
static double nc_gathered_diff(adj_layer *a, adj_layer *b, bool gradient, bool *bitwise) {
  double worst = 0;
  *bitwise = true;
  for (int i = 0; i < adj_layer_parameter_count(a); i++) {
    adj_tensor ta = {0}, tb = {0};
    if (nc_gather(a, i, gradient, &ta) || nc_gather(b, i, gradient, &tb)) worst = INFINITY, *bitwise = false;
    else {
      worst = fmax(worst, adj_test_max_rel_diff(&ta, &tb));
      *bitwise = *bitwise && !memcmp(ta.data, tb.data, adj_tensor_bytes(&ta));
    }
    adj_tensor_destroy(&ta), adj_tensor_destroy(&tb);
  }
  return worst;
}

double nc_parameter_diff(adj_layer *a, adj_layer *b, bool *bitwise) {
  bool same_stats, same_parameters;
  double stats = nc_running_stats_diff(a, b, &same_stats);
  double parameters = nc_gathered_diff(a, b, false, &same_parameters);
  *bitwise = same_stats && same_parameters;
  return fmax(stats, parameters);
}

double nc_gradient_diff(adj_layer *a, adj_layer *b) {
  bool bitwise;
  return nc_gathered_diff(a, b, true, &bitwise);
}

int nc_layouts_fitting(int size, const char **layouts) {
  static const char *const all[NC_MAX_LAYOUTS - 1] = {"sequential",    "dist2", "dist4", "hybrid4",
                                                      "hybrid4-batch", "dist8", "4x2"};
  int n = 0;
  for (int i = 0; i < NC_MAX_LAYOUTS - 1; i++)
    if (nc_layout_ranks("lenet", all[i]) <= size) layouts[n++] = all[i];
  layouts[n] = NULL;
  return n;
}

unsigned char *nc_read_file(const char *path, long *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  *size = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *data = *size >= 0 ? malloc((size_t)*size + 1) : NULL;
  if (data && fread(data, 1, (size_t)*size, f) != (size_t)*size) free(data), data = NULL;
  fclose(f);
  return data;
}

void nc_write_file(const char *path, const void *data, long size) {
  FILE *f = fopen(path, "wb");
  if (f) fwrite(data, 1, (size_t)size, f), fclose(f);
}

void nc_make_dir(adj_test *t, const char *tag, char *dir, size_t size) {
  snprintf(dir, size, "/tmp/adjoin-%s-XXXXXX", tag);
  int ok = t->rank != 0 || mkdtemp(dir) != NULL;
  MPI_Bcast(dir, (int)size, MPI_CHAR, 0, t->comm);
  MPI_Bcast(&ok, 1, MPI_INT, 0, t->comm);
  ADJ_TEST_CHECK(t, ok, "cannot create %s", dir);
}

void nc_remove_dir(adj_test *t, const char *dir) {
  MPI_Barrier(t->comm);
  if (t->rank != 0) return;
  char command[700];
  snprintf(command, sizeof command, "rm -rf '%s'", dir);
  ADJ_TEST_CHECK(t, system(command) == 0, "cannot remove %s", dir);
}

double nc_reduction_length(int64_t batch) { return 28.0 * 28.0 * (double)batch; }

void nc_check_jacobian(adj_test *t, adj_layer *net, uint64_t seed, adj_dtype dtype, const char *label) {
  adj_dottest_result r = {0};
  ADJ_TEST_OK(t, adj_dottest_layer(net, seed, &r));
  double tolerance = adj_dottest_tolerance(dtype, 1);
  adj_test_report(t, "%s %s ranks %d: <J v, u> = %.17g, <v, J^T u> = %.17g, relative error %.3e", label,
                  adj_dtype_name(dtype), t->size, r.range_inner, r.domain_inner, r.relative_error);
  ADJ_TEST_CHECK(t, r.relative_error < tolerance && r.norm_Fx > 0 && r.norm_Fty > 0,
                 "%s %s: relative error %.3e (tolerance %.0e), |Jv| %.3e, |J^T u| %.3e", label, adj_dtype_name(dtype),
                 r.relative_error, tolerance, r.norm_Fx, r.norm_Fty);
}
