/* adjoin-halo: prints the halo geometry of a sliding-kernel layer as JSON, for
 * scripts and for planning a decomposition.  It only computes (no MPI ranks).
 *
 *   adjoin-halo --shape 11 --partition 3 --kernel 5 [--stride S] [--padding P|L:R]
 *               [--dilation D] [--cuts 0:4:8:11]
 *
 * Every list has one comma-separated entry per tensor dimension; --cuts gives
 * explicit input offsets per dimension (colon-separated, "-" for balanced).
 * Output: {"output_shape": [...], "workers": [{"coords": [...], "dims": [{"bulk",
 * "output", "needed", "halo", "trim", "padding"}, ...]}, ...]} with workers in
 * row-major order of coordinates and ranges half-open in global indices.
 * Exit status: 0 on success, 1 when the geometry cannot be served, 2 on a usage
 * error; messages go to stderr.  It never starts MPI (tool_output.h), so it
 * runs inside an MPI job like any other command. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/halo_geometry.h"
#include "adjoin/parse.h"
#include "adjoin/status.h"
#include "tool_output.h"

enum { EXIT_GEOMETRY = 1, EXIT_USAGE = 2 };
enum { HALO_HELP = -1 };        /* the usage was asked for and printed */
enum { ADJ_HALO_MAX_CUTS = 65 }; /* explicit offsets per dimension: 64 workers */
enum { HALO_MAX_WORKERS = 1 << 20 }; /* workers described, in all */

static const char usage[] =
    "usage: adjoin-halo --shape N[,N...] [--partition P,...] [--kernel K,...] [--stride S,...]\n"
    "                   [--padding P|L:R,...] [--dilation D,...] [--cuts C0:C1:...:CP|-,...]\n";

typedef struct adj_halo_args {
  int rank;
  int64_t shape[ADJ_MAX_RANK];
  int parts[ADJ_MAX_RANK];
  adj_halo_kernel kernel;
  int64_t cut_storage[ADJ_MAX_RANK][ADJ_HALO_MAX_CUTS];
  int n_cuts[ADJ_MAX_RANK]; /* entries given; 0 = balanced */
} adj_halo_args;

static int adj_fail(const char *option, const char *message, const char *text) {
  tool_complain("%s: %s '%s'\n%s", option, message, text, usage);
  return EXIT_USAGE;
}

/* The parser's refusal (parse.h: it names the option, the text and the bad
 * entry) and the usage. */
static int adj_refused(void) {
  tool_complain("%s\n%s", adj_last_error(), usage);
  return EXIT_USAGE;
}

enum { OPT_SHAPE, OPT_PARTITION, OPT_KERNEL, OPT_STRIDE, OPT_PADDING, OPT_DILATION, OPT_CUTS, OPT_COUNT };
static const char *const option_names[OPT_COUNT] = {"--shape",   "--partition", "--kernel", "--stride",
                                                    "--padding", "--dilation",  "--cuts"};

/* An entry count that must match --shape's dimensions. */
static int adj_check_count(int option, int count, int rank) {
  if (count == rank) return 0;
  tool_complain("%s has %d entries but --shape has %d dimensions\n", option_names[option], count, rank);
  return EXIT_USAGE;
}

/* A per-dimension list of integers in [min, max], one entry per dimension of
 * --shape (rank of them; --shape itself passes rank 0 and gets its count). */
static int adj_fill_list(int option, const char *text, int rank, int64_t min, int64_t max, int64_t *values,
                         int *count) {
  int n = 0;
  if (!text) return 0;
  if (adj_parse_int64_list(text, ',', ADJ_MAX_RANK, min, max, option_names[option], values, &n)) return adj_refused();
  if (count) *count = n;
  return rank ? adj_check_count(option, n, rank) : 0;
}

/* Calls parse on each comma-separated entry of an option's text, as its own
 * string and named for messages ("--padding of dimension 1"); the entry
 * count in *count. */
static int adj_each_entry(int option, const char *text, int (*parse)(const char *entry, const char *name, int index,
                                                                     void *ctx),
                          void *ctx, int *count) {
  int n = 0;
  for (const char *p = text; p; n++) {
    const char *comma = strchr(p, ',');
    if (n == ADJ_MAX_RANK) return adj_fail(option_names[option], "has more entries than a tensor has dimensions", text);
    char *entry = strndup(p, comma ? (size_t)(comma - p) : strlen(p)), name[64];
    snprintf(name, sizeof name, "%s of dimension %d", option_names[option], n);
    int bad = entry ? parse(entry, name, n, ctx) : adj_fail(option_names[option], "out of memory for", text);
    free(entry);
    if (bad) return bad;
    p = comma ? comma + 1 : NULL;
  }
  *count = n;
  return 0;
}

/* One dimension's padding: P, or L:R. */
static int adj_parse_padding(const char *entry, const char *name, int index, void *ctx) {
  int64_t(*padding)[2] = ctx, pair[2];
  int n = 0;
  if (adj_parse_int64_list(entry, ':', 2, 0, INT64_MAX, name, pair, &n)) return adj_refused();
  padding[index][0] = pair[0];
  padding[index][1] = n == 2 ? pair[1] : pair[0];
  return 0;
}

/* One dimension's explicit offsets C0:C1:...:CP, or '-' for balanced. */
static int adj_parse_cuts(const char *entry, const char *name, int index, void *ctx) {
  adj_halo_args *a = ctx;
  if (!strcmp(entry, "-")) return 0;
  return adj_parse_int64_list(entry, ':', ADJ_HALO_MAX_CUTS, 0, INT64_MAX, name, a->cut_storage[index],
                              &a->n_cuts[index])
             ? adj_refused()
             : 0;
}

static int adj_collect(int argc, char **argv, const char **texts) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      fputs(usage, stdout);
      return HALO_HELP;
    }
    int found = -1;
    const char *value = NULL;
    for (int o = 0; o < OPT_COUNT; o++) {
      size_t len = strlen(option_names[o]);
      if (!strncmp(argv[i], option_names[o], len) && (argv[i][len] == '=' || !argv[i][len])) {
        found = o;
        value = argv[i][len] == '=' ? argv[i] + len + 1 : (i + 1 < argc ? argv[++i] : NULL);
      }
    }
    if (found < 0) return adj_fail("argument", "unknown option", argv[i]);
    if (!value) return tool_complain("%s needs a value\n%s", option_names[found], usage), EXIT_USAGE;
    texts[found] = value;
  }
  if (!texts[OPT_SHAPE]) return tool_complain("--shape is required\n%s", usage), EXIT_USAGE;
  return 0;
}

/* The optional lists; without --partition, one worker per dimension. */
static int adj_parse_lists(const char *const *texts, adj_halo_args *a) {
  int64_t parts[ADJ_MAX_RANK], padding[ADJ_MAX_RANK][2] = {{0}};
  for (int i = 0; i < ADJ_MAX_RANK; i++) parts[i] = 1;
  int code = adj_fill_list(OPT_PARTITION, texts[OPT_PARTITION], a->rank, 1, HALO_MAX_WORKERS, parts, NULL);
  int n = a->rank;
  if (!code) code = adj_fill_list(OPT_KERNEL, texts[OPT_KERNEL], a->rank, 1, INT64_MAX, a->kernel.size, NULL);
  if (!code) code = adj_fill_list(OPT_STRIDE, texts[OPT_STRIDE], a->rank, 1, INT64_MAX, a->kernel.stride, NULL);
  if (!code) code = adj_fill_list(OPT_DILATION, texts[OPT_DILATION], a->rank, 1, INT64_MAX, a->kernel.dilation, NULL);
  if (!code && texts[OPT_PADDING])
    code = adj_each_entry(OPT_PADDING, texts[OPT_PADDING], adj_parse_padding, padding, &n);
  if (!code) code = adj_check_count(OPT_PADDING, n, a->rank);
  if (code) return code;
  for (int i = 0; i < a->rank; i++) {
    a->parts[i] = (int)parts[i];
    a->kernel.padding[i][0] = padding[i][0];
    a->kernel.padding[i][1] = padding[i][1];
  }
  return 0;
}

static int adj_parse_args(int argc, char **argv, adj_halo_args *a) {
  const char *texts[OPT_COUNT] = {0};
  memset(a, 0, sizeof *a);
  int code = adj_collect(argc, argv, texts);
  if (!code) code = adj_fill_list(OPT_SHAPE, texts[OPT_SHAPE], 0, 0, INT64_MAX, a->shape, &a->rank);
  if (!code) code = adj_parse_lists(texts, a);
  if (code || !texts[OPT_CUTS]) return code;
  int n = 0;
  code = adj_each_entry(OPT_CUTS, texts[OPT_CUTS], adj_parse_cuts, a, &n);
  return code ? code : adj_check_count(OPT_CUTS, n, a->rank);
}

/* The JSON holds one entry per worker, so their number is bounded: a grid
 * of 2^31 workers would take hundreds of gigabytes to describe. */
static int adj_check_workers(const adj_halo_args *a) {
  int64_t workers = 1;
  char grid[ADJ_MAX_RANK * 12] = "";
  for (int i = 0; i < a->rank; i++) {
    if (workers <= HALO_MAX_WORKERS) workers *= a->parts[i]; /* each part <= 2^20: at most 2^40 */
    snprintf(grid + strlen(grid), sizeof grid - strlen(grid), "%s%d", i ? "x" : "", a->parts[i]);
  }
  if (workers <= HALO_MAX_WORKERS) return 0;
  tool_complain("--partition %s makes more than the %d workers adjoin-halo describes (one JSON entry each)\n", grid,
                HALO_MAX_WORKERS);
  return EXIT_USAGE;
}

static int adj_check_cut_counts(const adj_halo_args *a) {
  for (int i = 0; i < a->rank; i++)
    if (a->n_cuts[i] && a->n_cuts[i] != a->parts[i] + 1) {
      tool_complain("--cuts of dimension %d has %d offsets but %d workers need %d\n", i, a->n_cuts[i], a->parts[i],
                a->parts[i] + 1);
      return EXIT_GEOMETRY;
    }
  return 0;
}

static void adj_print_pair(const char *key, const int64_t *v, const char *after) {
  printf("\"%s\": [%lld, %lld]%s", key, (long long)v[0], (long long)v[1], after);
}

static void adj_print_worker(const adj_halo_geometry *g, const int *coords) {
  int rank = adj_halo_geometry_rank(g);
  printf("    {\"coords\": [");
  for (int i = 0; i < rank; i++) printf(i ? ", %d" : "%d", coords[i]);
  printf("], \"dims\": [");
  for (int i = 0; i < rank; i++) {
    const adj_halo_dim *d = adj_halo_geometry_dim(g, i, coords[i]);
    printf(i ? ", {" : "{");
    adj_print_pair("bulk", d->bulk, ", ");
    adj_print_pair("output", d->output, ", ");
    adj_print_pair("needed", d->needed, ", ");
    adj_print_pair("halo", d->halo, ", ");
    adj_print_pair("trim", d->trim, ", ");
    adj_print_pair("padding", d->padding, "}");
  }
  printf("]}");
}

static void adj_print_json(const adj_halo_geometry *g) {
  int rank = adj_halo_geometry_rank(g), workers = adj_halo_geometry_workers(g);
  const int *parts = adj_halo_geometry_parts(g);
  const int64_t *out = adj_halo_geometry_output_shape(g);
  printf("{\"output_shape\": [");
  for (int i = 0; i < rank; i++) printf(i ? ", %lld" : "%lld", (long long)out[i]);
  printf("],\n  \"workers\": [\n");
  for (int w = 0; w < workers; w++) {
    int coords[ADJ_MAX_RANK], rest = w;
    for (int i = rank - 1; i >= 0; i--) {
      coords[i] = rest % parts[i];
      rest /= parts[i];
    }
    adj_print_worker(g, coords);
    printf(w + 1 < workers ? ",\n" : "\n");
    if (ferror(stdout)) return; /* lost: tool_end says so; the rest would be too */
  }
  printf("  ]}\n");
}

static int adj_halo_run(int argc, char **argv) {
  adj_halo_args a;
  int code = adj_parse_args(argc, argv, &a);
  if (!code) code = adj_check_workers(&a);
  if (!code) code = adj_check_cut_counts(&a);
  if (code) return code == HALO_HELP ? 0 : code;
  const int64_t *cuts[ADJ_MAX_RANK];
  for (int i = 0; i < a.rank; i++) cuts[i] = a.n_cuts[i] ? a.cut_storage[i] : NULL;
  adj_halo_geometry *g;
  if (adj_halo_geometry_create(a.rank, a.shape, a.parts, cuts, &a.kernel, &g)) {
    tool_complain("%s\n", tool_error());
    return EXIT_GEOMETRY;
  }
  adj_print_json(g);
  adj_halo_geometry_destroy(&g);
  return 0;
}

int main(int argc, char **argv) {
  tool_begin("adjoin-halo");
  return tool_end(adj_halo_run(argc, argv));
}
