/* Checked numbers from text (include/adjoin/parse.h). */
#include "adjoin/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"

/* The text as it reads in a message: quoted, shortened when long. */
#define ADJ_PARSE_SHOWN "'%.40s%s'"
#define ADJ_PARSE_SHOW(text) (text), strlen(text) > 40 ? "..." : ""

int adj_parse_int64(const char *text, int64_t min, int64_t max, const char *what, int64_t *out) {
  ADJ_CHECK(what && out, ADJ_ERR_ARG, "adj_parse_int64: `what` and `out` are required");
  ADJ_CHECK(text, ADJ_ERR_ARG, "%s has no value", what);
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  bool digits = end != text && !isspace((unsigned char)text[0]);
  ADJ_CHECK(digits && *end == '\0', ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN " is not an integer", what,
            ADJ_PARSE_SHOW(text));
  ADJ_CHECK(errno != ERANGE && v >= min && v <= max, ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN " is out of range %lld..%lld",
            what, ADJ_PARSE_SHOW(text), (long long)min, (long long)max);
  *out = v;
  return ADJ_SUCCESS;
}

int adj_parse_int(const char *text, int min, int max, const char *what, int *out) {
  int64_t v = 0;
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_parse_int: `out` is required");
  ADJ_CALL(adj_parse_int64(text, min, max, what, &v));
  *out = (int)v;
  return ADJ_SUCCESS;
}

int adj_parse_uint64(const char *text, uint64_t max, const char *what, uint64_t *out) {
  ADJ_CHECK(what && out, ADJ_ERR_ARG, "adj_parse_uint64: `what` and `out` are required");
  ADJ_CHECK(text, ADJ_ERR_ARG, "%s has no value", what);
  char *end = NULL;
  errno = 0;
  /* strtoull would take "-1" as 2^64 - 1: only digits may start the text. */
  unsigned long long v = isdigit((unsigned char)text[0]) ? strtoull(text, &end, 10) : 0;
  ADJ_CHECK(end && *end == '\0', ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN " is not a whole number", what,
            ADJ_PARSE_SHOW(text));
  ADJ_CHECK(errno != ERANGE && v <= max, ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN " is out of range 0..%llu", what,
            ADJ_PARSE_SHOW(text), (unsigned long long)max);
  *out = v;
  return ADJ_SUCCESS;
}

/* The list entry that starts at *p, copied into *entry (free() it), and the
 * name it is refused by ("--shape '8,x': entry 2"); *p moves past the
 * separator, or to NULL after the last entry. */
static int adj_list_entry(const char *text, const char **p, char separator, int index, int most, const char *what,
                          char **entry, char *name, size_t name_size) {
  const char *end = strchr(*p, separator);
  size_t length = end ? (size_t)(end - *p) : strlen(*p);
  ADJ_CHECK(index < most, ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN ": more than %d entries", what, ADJ_PARSE_SHOW(text),
            most);
  ADJ_CHECK(length > 0, ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN ": entry %d is empty", what, ADJ_PARSE_SHOW(text),
            index + 1);
  *entry = strndup(*p, length);
  ADJ_CHECK(*entry, ADJ_ERR_MEM, "%s: out of memory", what);
  snprintf(name, name_size, "%s " ADJ_PARSE_SHOWN ": entry %d", what, ADJ_PARSE_SHOW(text), index + 1);
  *p = end ? end + 1 : NULL;
  return ADJ_SUCCESS;
}

/* Parses every entry of a list with parse(entry, name, index, ctx); the
 * entry count in *count. */
static int adj_parse_list(const char *text, char separator, int most, const char *what, int *count,
                          int (*parse)(const char *entry, const char *name, int index, void *ctx), void *ctx) {
  ADJ_CHECK(what && count && most >= 1 && separator, ADJ_ERR_ARG,
            "adj_parse_*_list: `what`, `count`, a separator and most >= 1 are required");
  ADJ_CHECK(text, ADJ_ERR_ARG, "%s has no value", what);
  int n = 0;
  for (const char *p = text; p; n++) {
    char *entry, name[256];
    ADJ_CALL(adj_list_entry(text, &p, separator, n, most, what, &entry, name, sizeof name));
    int status = parse(entry, name, n, ctx);
    free(entry);
    ADJ_CALL(status);
  }
  *count = n;
  return ADJ_SUCCESS;
}

/* One entry of each kind of list, into out[index]. */
typedef struct adj_int64_entries {
  int64_t min, max, *out;
} adj_int64_entries;
typedef struct adj_real_entries {
  double min, max, *out;
} adj_real_entries;

static int adj_int64_entry(const char *entry, const char *name, int index, void *ctx) {
  adj_int64_entries *e = ctx;
  return adj_parse_int64(entry, e->min, e->max, name, &e->out[index]);
}

static int adj_real_entry(const char *entry, const char *name, int index, void *ctx) {
  adj_real_entries *e = ctx;
  return adj_parse_real(entry, e->min, e->max, name, &e->out[index]);
}

int adj_parse_int64_list(const char *text, char separator, int most, int64_t min, int64_t max, const char *what,
                         int64_t *out, int *count) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_parse_int64_list: `out` is required");
  ADJ_CALL(adj_parse_list(text, separator, most, what, count, adj_int64_entry, &(adj_int64_entries){min, max, out}));
  return ADJ_SUCCESS;
}

int adj_parse_int64_pair(const char *text, char separator, int64_t min, int64_t max, const char *what, int64_t out[2]) {
  int64_t pair[2];
  int n = 0;
  ADJ_CALL(adj_parse_int64_list(text, separator, 2, min, max, what, pair, &n));
  ADJ_CHECK(n == 2, ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN " is not two numbers joined by '%c'", what,
            ADJ_PARSE_SHOW(text), separator);
  out[0] = pair[0], out[1] = pair[1];
  return ADJ_SUCCESS;
}

int adj_parse_real(const char *text, double min, double max, const char *what, double *out) {
  ADJ_CHECK(what && out, ADJ_ERR_ARG, "adj_parse_real: `what` and `out` are required");
  ADJ_CHECK(text, ADJ_ERR_ARG, "%s has no value", what);
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  bool number = end != text && !isspace((unsigned char)text[0]) && *end == '\0';
  ADJ_CHECK(number && isfinite(v) && errno != ERANGE, ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN " is not a finite number",
            what, ADJ_PARSE_SHOW(text));
  ADJ_CHECK(v >= min && v <= max, ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN " is out of range %g..%g", what,
            ADJ_PARSE_SHOW(text), min, max);
  *out = v;
  return ADJ_SUCCESS;
}

int adj_parse_real_list(const char *text, char separator, int most, double min, double max, const char *what,
                        double *out, int *count) {
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_parse_real_list: `out` is required");
  ADJ_CALL(adj_parse_list(text, separator, most, what, count, adj_real_entry, &(adj_real_entries){min, max, out}));
  return ADJ_SUCCESS;
}

int adj_parse_bytes(const char *text, int64_t min, int64_t max, const char *what, int64_t *out) {
  ADJ_CHECK(what && out, ADJ_ERR_ARG, "adj_parse_bytes: `what` and `out` are required");
  ADJ_CHECK(text, ADJ_ERR_ARG, "%s has no value", what);
  ADJ_CHECK(isdigit((unsigned char)text[0]), ADJ_ERR_ARG,
            "%s " ADJ_PARSE_SHOWN " is not a byte count (digits and an optional K, M, G, T, KiB, ..., e.g. 2GiB)",
            what, ADJ_PARSE_SHOW(text));
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  static const char units[] = "KMGT";
  int shift = 0;
  const char *unit = *end ? strchr(units, *end) : NULL;
  if (unit) shift = 10 * (int)(unit - units + 1), end++;
  if (shift && !strcmp(end, "iB")) end += 2;
  else if (!strcmp(end, "B")) end++;
  ADJ_CHECK(*end == '\0', ADJ_ERR_ARG,
            "%s " ADJ_PARSE_SHOWN " is not a byte count: '%s' follows the digits (suffixes: K, M, G, T, KiB, MiB, "
            "GiB, TiB)",
            what, ADJ_PARSE_SHOW(text), end);
  ADJ_CHECK(errno != ERANGE && v <= ((unsigned long long)INT64_MAX >> shift) &&
                (int64_t)(v << shift) >= min && (int64_t)(v << shift) <= max,
            ADJ_ERR_ARG, "%s " ADJ_PARSE_SHOWN " is out of range %lld..%lld bytes", what, ADJ_PARSE_SHOW(text),
            (long long)min, (long long)max);
  *out = (int64_t)(v << shift);
  return ADJ_SUCCESS;
}

int adj_int64_mul(int64_t a, int64_t b, const char *what, int64_t *out) {
  int64_t r;
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_int64_mul: `out` is required");
  ADJ_CHECK(!__builtin_mul_overflow(a, b, &r), ADJ_ERR_ARG, "%s: %lld x %lld is beyond int64", what ? what : "product",
            (long long)a, (long long)b);
  *out = r;
  return ADJ_SUCCESS;
}

int adj_int64_add(int64_t a, int64_t b, const char *what, int64_t *out) {
  int64_t r;
  ADJ_CHECK(out, ADJ_ERR_ARG, "adj_int64_add: `out` is required");
  ADJ_CHECK(!__builtin_add_overflow(a, b, &r), ADJ_ERR_ARG, "%s: %lld + %lld is beyond int64", what ? what : "sum",
            (long long)a, (long long)b);
  *out = r;
  return ADJ_SUCCESS;
}
