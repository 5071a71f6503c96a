/* NumPy .npy files: the header of a mapped file.
 *
 * Format (numpy.lib.format, versions 1 to 3): the magic "\x93NUMPY", major
 * and minor version bytes, the header's length (uint16 little-endian in
 * version 1, uint32 in 2 and 3), then the header, a Python dict literal
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 1, 28, 28), }
 * padded with spaces and a newline, then the array's bytes.  The parser
 * takes exactly those three keys, in any order, and refuses whatever a
 * C-order numeric array read by offset cannot be, naming the file and the
 * value. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/parse.h"
#include "data_impl.h"
#include "error_impl.h"

typedef struct npy_cursor {
  const adj_data_array *a;
  const char *p, *end;
} npy_cursor;

static void npy_skip_space(npy_cursor *c) {
  while (c->p < c->end && isspace((unsigned char)*c->p)) c->p++;
}

/* The next characters, for messages: up to 24 of them. */
static int npy_syntax(const npy_cursor *c, const char *expected) {
  int left = (int)(c->end - c->p);
  return adj_error_set(ADJ_ERR_IO, "%s file '%s': .npy header: expected %s at '%.*s'", c->a->role, c->a->path,
                       expected, left < 24 ? left : 24, c->p);
}

static bool npy_take(npy_cursor *c, char ch) {
  npy_skip_space(c);
  if (c->p < c->end && *c->p == ch) return c->p++, true;
  return false;
}

/* A quoted string (no escapes: numpy's keys and descrs have none). */
static int npy_string(npy_cursor *c, char *out, size_t size) {
  npy_skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return npy_syntax(c, "a quoted string");
  char quote = *c->p++;
  const char *start = c->p;
  while (c->p < c->end && *c->p != quote) c->p++;
  if (c->p >= c->end) return npy_syntax(c, "the end of a string");
  size_t n = (size_t)(c->p - start);
  c->p++;
  ADJ_CHECK(n < size, ADJ_ERR_IO, "%s file '%s': .npy header: string '%.*s' is too long", c->a->role, c->a->path,
            (int)(n < 64 ? n : 64), start);
  memcpy(out, start, n);
  out[n] = '\0';
  return ADJ_SUCCESS;
}

/* descr: byte order '<', '>', '|' or '=', kind u/i/f, size in bytes. */
static int npy_descr(npy_cursor *c, adj_data_array *a) {
  npy_skip_space(c);
  if (c->p < c->end && (*c->p == '[' || *c->p == '{'))
    return adj_error_set(ADJ_ERR_IO, "%s file '%s': structured arrays (a descr of fields) are not supported; save a "
                         "plain numeric array", a->role, a->path);
  char d[32];
  ADJ_CALL(npy_string(c, d, sizeof d));
  char order = d[0], kind = d[1];
  int size = 0;
  bool digits = d[2] && strspn(d + 2, "0123456789") == strlen(d + 2) && strlen(d + 2) <= 2;
  if (digits) size = atoi(d + 2);
  bool sized = size == 1 || size == 2 || size == 4 || size == 8;
  ADJ_CHECK(kind != 'O', ADJ_ERR_IO, "%s file '%s': descr '%s' is an object array (Python objects, not numbers)",
            a->role, a->path, d);
  ADJ_CHECK(order && strchr("<>|=", order) && (kind == 'u' || kind == 'i' || kind == 'f') && digits && sized &&
                !(kind == 'f' && size < 4),
            ADJ_ERR_IO,
            "%s file '%s': descr '%s' is not supported (unsigned or signed integers of 1, 2, 4 or 8 bytes, float32 or "
            "float64)", a->role, a->path, d);
  ADJ_CHECK(size == 1 || order != '|', ADJ_ERR_IO, "%s file '%s': descr '%s' has no byte order", a->role, a->path, d);
  const uint16_t one = 1;
  bool host_little = *(const uint8_t *)&one == 1;
  a->elem = (adj_data_elem){.kind = kind, .size = size,
                            .swap = size > 1 && ((order == '<' && !host_little) || (order == '>' && host_little))};
  return ADJ_SUCCESS;
}

static int npy_fortran(npy_cursor *c, adj_data_array *a) {
  npy_skip_space(c);
  if (c->end - c->p >= 5 && !strncmp(c->p, "False", 5)) return c->p += 5, ADJ_SUCCESS;
  ADJ_CHECK(!(c->end - c->p >= 4 && !strncmp(c->p, "True", 4)), ADJ_ERR_IO,
            "%s file '%s': fortran_order is True; only C order can be read by sample (save "
            "np.ascontiguousarray(x))", a->role, a->path);
  return npy_syntax(c, "False");
}

/* One extent: digits up to ',' or ')', through adj_parse_int64. */
static int npy_extent(npy_cursor *c, int d, int64_t *out) {
  npy_skip_space(c);
  const char *start = c->p;
  while (c->p < c->end && *c->p != ',' && *c->p != ')' && !isspace((unsigned char)*c->p)) c->p++;
  char text[40], what[PATH_MAX + 64];
  size_t n = (size_t)(c->p - start);
  snprintf(text, sizeof text, "%.*s", (int)(n < 39 ? n : 39), start);
  snprintf(what, sizeof what, "%s file '%s': shape entry %d", c->a->role, c->a->path, d);
  ADJ_CHECK(n > 0 && n < 39, ADJ_ERR_IO, "%s '%s' is not an integer", what, text);
  return adj_parse_int64(text, 0, INT64_MAX, what, out) ? adj_data_as_io() : ADJ_SUCCESS;
}

static int npy_shape(npy_cursor *c, adj_data_array *a) {
  if (!npy_take(c, '(')) return npy_syntax(c, "a shape tuple");
  a->rank = 0;
  while (!npy_take(c, ')')) {
    ADJ_CHECK(a->rank < ADJ_MAX_RANK, ADJ_ERR_IO, "%s file '%s': the shape has more than %d dimensions", a->role,
              a->path, ADJ_MAX_RANK);
    ADJ_CALL(npy_extent(c, a->rank, &a->shape[a->rank]));
    a->rank++;
    if (!npy_take(c, ',')) {
      if (npy_take(c, ')')) break;
      return npy_syntax(c, "',' or ')' in the shape");
    }
  }
  return ADJ_SUCCESS;
}

/* The dict: each of the three keys exactly once. */
static int npy_dict(npy_cursor *c, adj_data_array *a) {
  if (!npy_take(c, '{')) return npy_syntax(c, "'{'");
  bool seen[3] = {false, false, false};
  static const char *const keys[3] = {"descr", "fortran_order", "shape"};
  while (!npy_take(c, '}')) {
    char key[32];
    ADJ_CALL(npy_string(c, key, sizeof key));
    int k = !strcmp(key, keys[0]) ? 0 : !strcmp(key, keys[1]) ? 1 : !strcmp(key, keys[2]) ? 2 : -1;
    ADJ_CHECK(k >= 0 && !seen[k], ADJ_ERR_IO, "%s file '%s': .npy header key '%s' is %s", a->role, a->path, key,
              k < 0 ? "unknown (expected descr, fortran_order, shape)" : "given twice");
    seen[k] = true;
    if (!npy_take(c, ':')) return npy_syntax(c, "':'");
    ADJ_CALL(k == 0 ? npy_descr(c, a) : k == 1 ? npy_fortran(c, a) : npy_shape(c, a));
    if (!npy_take(c, ',')) {
      if (npy_take(c, '}')) break;
      return npy_syntax(c, "',' or '}'");
    }
  }
  for (int k = 0; k < 3; k++)
    ADJ_CHECK(seen[k], ADJ_ERR_IO, "%s file '%s': .npy header has no '%s'", a->role, a->path, keys[k]);
  return ADJ_SUCCESS;
}

/* The preamble: magic, version, header length; *start is where the dict
 * begins and *data where the array does. */
static int npy_preamble(adj_data_array *a, int64_t *start, int64_t *data) {
  const uint8_t *m = a->mapping;
  int64_t bytes = a->mapping_bytes;
  ADJ_CHECK(bytes >= 10 && !memcmp(m, "\x93NUMPY", 6), ADJ_ERR_IO, "%s file '%s' is not a .npy file (%s)", a->role,
            a->path, bytes < 10 ? "shorter than the 10-byte preamble" : "no \\x93NUMPY magic");
  int major = m[6];
  ADJ_CHECK(major >= 1 && major <= 3, ADJ_ERR_IO, "%s file '%s': .npy format version %d.%d (expected 1, 2 or 3)",
            a->role, a->path, major, m[7]);
  *start = major == 1 ? 10 : 12;
  ADJ_CHECK(bytes >= *start, ADJ_ERR_IO, "%s file '%s' is truncated: %lld bytes end inside the .npy preamble",
            a->role, a->path, (long long)bytes);
  int64_t length = major == 1 ? (int64_t)(m[8] | m[9] << 8)
                              : (int64_t)((uint32_t)m[8] | (uint32_t)m[9] << 8 | (uint32_t)m[10] << 16 |
                                          (uint32_t)m[11] << 24);
  *data = *start + length;
  ADJ_CHECK(*data <= bytes, ADJ_ERR_IO,
            "%s file '%s' is truncated: its .npy header claims %lld bytes, but the file has %lld in all", a->role,
            a->path, (long long)length, (long long)bytes);
  return ADJ_SUCCESS;
}

/* The payload must fill the rest of the file exactly. */
static int npy_check_size(adj_data_array *a, int64_t data) {
  ADJ_CHECK(a->rank >= 1, ADJ_ERR_IO, "%s file '%s': a 0-dimensional array holds no samples", a->role, a->path);
  int64_t payload = a->elem.size;
  char what[PATH_MAX + 64];
  snprintf(what, sizeof what, "%s file '%s': payload bytes", a->role, a->path);
  for (int d = 0; d < a->rank; d++) {
    ADJ_CHECK(a->shape[d] > 0, ADJ_ERR_IO, "%s file '%s': dimension %d has extent 0", a->role, a->path, d);
    if (adj_int64_mul(payload, a->shape[d], what, &payload)) return adj_data_as_io();
  }
  int64_t have = a->mapping_bytes - data;
  ADJ_CHECK(have == payload, ADJ_ERR_IO, "%s file '%s' %s: its shape and descr need %lld bytes of data, found %lld",
            a->role, a->path, have < payload ? "is truncated" : "has trailing data", (long long)payload,
            (long long)have);
  return ADJ_SUCCESS;
}

int adj_npy_parse(adj_data_array *a) {
  int64_t start = 0, data = 0;
  ADJ_CALL(npy_preamble(a, &start, &data));
  const char *text = (const char *)a->mapping;
  npy_cursor c = {.a = a, .p = text + start, .end = text + data};
  ADJ_CALL(npy_dict(&c, a));
  npy_skip_space(&c);
  ADJ_CHECK(c.p == c.end, ADJ_ERR_IO, "%s file '%s': .npy header has '%.*s' after its dict", a->role, a->path,
            (int)(c.end - c.p < 24 ? c.end - c.p : 24), c.p);
  ADJ_CALL(npy_check_size(a, data));
  a->base = (const uint8_t *)a->mapping + data;
  a->format = ".npy";
  return ADJ_SUCCESS;
}
