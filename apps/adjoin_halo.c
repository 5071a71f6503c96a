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
 * error; messages go to stderr.  It needs no mpiexec; under one, every rank
 * computes the same and rank 0 alone prints. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/halo_geometry.h"
#include "adjoin/init.h"
#include "adjoin/status.h"
#include "tool_output.h"

enum { EXIT_GEOMETRY = 1, EXIT_USAGE = 2 };
enum { HALO_HELP = -1 }; /* the usage was asked for and printed */

static const char usage[] =
    "usage: adjoin-halo --shape N[,N...] [--partition P,...] [--kernel K,...] [--stride S,...]\n"
    "                   [--padding P|L:R,...] [--dilation D,...] [--cuts C0:C1:...:CP|-,...]\n";

typedef struct adj_halo_args {
  int rank;
  int64_t shape[ADJ_MAX_RANK];
  int parts[ADJ_MAX_RANK];
  adj_halo_kernel kernel;
  int64_t cut_storage[ADJ_MAX_RANK][65];
  int n_cuts[ADJ_MAX_RANK]; /* entries given; 0 = balanced */
} adj_halo_args;

static int adj_fail(const char *option, const char *message, const char *text) {
  tool_complain("%s: %s '%s'\n%s", option, message, text, usage);
  return EXIT_USAGE;
}

/* Parses one integer ending at one of `ends`; advances *text. */
static int adj_parse_int(const char **text, const char *ends, int64_t *value) {
  char *end;
  errno = 0;
  long long v = strtoll(*text, &end, 10);
  if (end == *text || errno || !strchr(ends, *end)) return -1;
  *value = v;
  *text = end;
  return 0;
}

/* Splits a comma list into entries, calling parse on each; returns the count
 * or -1. */
static int adj_split(const char *text, int max, int (*parse)(const char *entry, size_t length, int index, void *ctx),
                     void *ctx) {
  int n = 0;
  for (const char *p = text;; n++) {
    const char *comma = strchr(p, ',');
    size_t length = comma ? (size_t)(comma - p) : strlen(p);
    if (n >= max || parse(p, length, n, ctx)) return -1;
    if (!comma) return n + 1;
    p = comma + 1;
  }
}

typedef struct adj_list_ctx {
  int64_t *values; /* one per entry, or pairs for padding */
  int pairs;       /* 1: entries are N or L:R */
} adj_list_ctx;

static int adj_parse_entry(const char *entry, size_t length, int index, void *ctx) {
  adj_list_ctx *c = ctx;
  char buf[64];
  if (length == 0 || length >= sizeof buf) return -1;
  memcpy(buf, entry, length);
  buf[length] = '\0';
  const char *p = buf;
  int64_t first, second;
  if (adj_parse_int(&p, c->pairs ? ":" : "", &first)) return -1;
  if (!c->pairs) {
    c->values[index] = first;
    return 0;
  }
  second = first;
  if (*p == ':' && (p++, adj_parse_int(&p, "", &second))) return -1;
  c->values[2 * index] = first;
  c->values[2 * index + 1] = second;
  return 0;
}

static int adj_parse_cut_entry(const char *entry, size_t length, int index, void *ctx) {
  adj_halo_args *a = ctx;
  if (length == 1 && entry[0] == '-') return 0;
  char buf[1024];
  if (length == 0 || length >= sizeof buf) return -1;
  memcpy(buf, entry, length);
  buf[length] = '\0';
  const char *p = buf;
  int n = 0;
  for (;; n++) {
    if (n >= 65 || adj_parse_int(&p, ":", &a->cut_storage[index][n])) return -1;
    if (!*p) break;
    p++;
  }
  a->n_cuts[index] = n + 1;
  return 0;
}

/* Parses a per-dimension list into int64 values; returns the entry count. */
static int adj_parse_list(const char *option, const char *text, int pairs, int64_t *values, int *count) {
  adj_list_ctx ctx = {.values = values, .pairs = pairs};
  *count = adj_split(text, ADJ_MAX_RANK, adj_parse_entry, &ctx);
  if (*count < 0)
    return adj_fail(option, pairs ? "expected integers or L:R pairs, got" : "expected integers, got", text);
  return 0;
}

typedef struct adj_option {
  const char *name;
  const char *text;
} adj_option;

enum { OPT_SHAPE, OPT_PARTITION, OPT_KERNEL, OPT_STRIDE, OPT_PADDING, OPT_DILATION, OPT_CUTS, OPT_COUNT };
static const char *const option_names[OPT_COUNT] = {"--shape",   "--partition", "--kernel", "--stride",
                                                    "--padding", "--dilation",  "--cuts"};

static int adj_collect(int argc, char **argv, const char **texts) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      if (!tool_quiet()) fputs(usage, stdout);
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

/* Each optional list must have one entry per dimension of --shape. */
static int adj_fill_list(int option, const char *text, int rank, int pairs, int64_t *values) {
  int count;
  if (!text) return 0;
  if (adj_parse_list(option_names[option], text, pairs, values, &count)) return EXIT_USAGE;
  if (count != rank) {
    tool_complain("%s has %d entries but --shape has %d dimensions\n", option_names[option], count, rank);
    return EXIT_USAGE;
  }
  return 0;
}

static int adj_parse_args(int argc, char **argv, adj_halo_args *a) {
  const char *texts[OPT_COUNT] = {0};
  memset(a, 0, sizeof *a);
  int code = adj_collect(argc, argv, texts);
  if (code) return code;
  if (adj_parse_list("--shape", texts[OPT_SHAPE], 0, a->shape, &a->rank)) return EXIT_USAGE;
  int64_t parts[ADJ_MAX_RANK], padding[2 * ADJ_MAX_RANK] = {0};
  for (int i = 0; i < ADJ_MAX_RANK; i++) parts[i] = 1; /* without --partition: one worker per dimension */
  code = adj_fill_list(OPT_PARTITION, texts[OPT_PARTITION], a->rank, 0, parts);
  if (!code) code = adj_fill_list(OPT_KERNEL, texts[OPT_KERNEL], a->rank, 0, a->kernel.size);
  if (!code) code = adj_fill_list(OPT_STRIDE, texts[OPT_STRIDE], a->rank, 0, a->kernel.stride);
  if (!code) code = adj_fill_list(OPT_DILATION, texts[OPT_DILATION], a->rank, 0, a->kernel.dilation);
  if (!code) code = adj_fill_list(OPT_PADDING, texts[OPT_PADDING], a->rank, 1, padding);
  if (code) return code;
  for (int i = 0; i < a->rank; i++) {
    if (parts[i] < 1 || parts[i] > INT_MAX) {
      tool_complain("--partition: worker counts are 1 to 2147483647, got %lld in '%s'\n%s", (long long)parts[i],
                texts[OPT_PARTITION], usage);
      return EXIT_USAGE;
    }
    a->parts[i] = (int)parts[i];
    a->kernel.padding[i][0] = padding[2 * i];
    a->kernel.padding[i][1] = padding[2 * i + 1];
  }
  if (!texts[OPT_CUTS]) return 0;
  int n = adj_split(texts[OPT_CUTS], ADJ_MAX_RANK, adj_parse_cut_entry, a);
  if (n < 0) return adj_fail("--cuts", "expected colon-separated offsets or '-' per dimension, got", texts[OPT_CUTS]);
  if (n != a->rank) {
    tool_complain("--cuts has %d entries but --shape has %d dimensions\n", n, a->rank);
    return EXIT_USAGE;
  }
  return 0;
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
  }
  printf("  ]}\n");
}

static int adj_halo_run(int argc, char **argv) {
  adj_halo_args a;
  int code = adj_parse_args(argc, argv, &a);
  if (!code) code = adj_check_cut_counts(&a);
  if (code) return code == HALO_HELP ? 0 : code;
  const int64_t *cuts[ADJ_MAX_RANK];
  for (int i = 0; i < a.rank; i++) cuts[i] = a.n_cuts[i] ? a.cut_storage[i] : NULL;
  adj_halo_geometry *g;
  if (adj_halo_geometry_create(a.rank, a.shape, a.parts, cuts, &a.kernel, &g)) {
    tool_complain("%s\n", tool_error());
    return EXIT_GEOMETRY;
  }
  if (!tool_quiet()) adj_print_json(g);
  adj_halo_geometry_destroy(&g);
  return 0;
}

int main(int argc, char **argv) {
  if (tool_begin("adjoin-halo", &argc, &argv, NULL)) return EXIT_GEOMETRY;
  int code = adj_halo_run(argc, argv);
  adj_finalize();
  return code;
}
