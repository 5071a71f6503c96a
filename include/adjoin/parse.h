/* Checked numbers from text: every integer, real and byte count that adjoin's
 * programs read from a command line or a file (network descriptions,
 * placements, calibration tables) goes through these, so a value is either
 * stored exactly in its type or refused with its source and text named.
 *
 * `what` names where the text came from, as the user would find it:
 * "--batch", "lenet5.net:7: conv1 out".  A refusal is ADJ_ERR_ARG with a
 * message such as
 *   --batch '4294967297x' is not an integer
 *   lenet5.net:7: conv1 out '-3' is out of range 1..2147483647
 * and leaves *out unchanged.  The checked products and sums refuse a result
 * that the type cannot hold, naming both operands.  Not collective: every
 * rank parsing the same text gets the same answer. */
#ifndef ADJOIN_PARSE_H
#define ADJOIN_PARSE_H

#include <stdint.h>

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* A whole-string decimal integer (optional sign; no space, no trailing
 * text) within [min, max]. */
int adj_parse_int64(const char *text, int64_t min, int64_t max, const char *what, int64_t *out);
int adj_parse_int(const char *text, int min, int max, const char *what, int *out);

/* The same for an unsigned 64-bit value in [0, max] (a seed): a sign, even
 * "-0", is refused rather than wrapped. */
int adj_parse_uint64(const char *text, uint64_t max, const char *what, uint64_t *out);

/* A list of integers, each within [min, max], separated by `separator`
 * ("8,8,3" with ',', "0:4:8" with ':'): at most `most` entries into out,
 * their number in *count.  An empty entry or one entry too many is refused,
 * and a bad entry is named with its place:
 *   --shape '8,,3': entry 2 is empty
 *   --grid '4294967297x1': entry 1 '4294967297' is out of range 1..2147483647
 * On a refusal *count is unchanged; out may hold the entries before the bad
 * one. */
int adj_parse_int64_list(const char *text, char separator, int most, int64_t min, int64_t max, const char *what,
                         int64_t *out, int *count);
/* Exactly two integers, as "RxC" or "P0:P1". */
int adj_parse_int64_pair(const char *text, char separator, int64_t min, int64_t max, const char *what, int64_t out[2]);

/* A whole-string finite real (strtod's syntax; no nan, no inf) within
 * [min, max]. */
int adj_parse_real(const char *text, double min, double max, const char *what, double *out);
/* A list of such reals separated by `separator`, as adj_parse_int64_list. */
int adj_parse_real_list(const char *text, char separator, int most, double min, double max, const char *what,
                        double *out, int *count);

/* A byte count: digits with an optional suffix K, M, G, T (powers of 1024,
 * also written KiB, MiB, GiB, TiB, or with a trailing B), within [min, max]:
 * "2GiB", "1048576", "25M". */
int adj_parse_bytes(const char *text, int64_t min, int64_t max, const char *what, int64_t *out);

/* *out = a * b, or a + b, refused (ADJ_ERR_ARG, "what: a x b is beyond
 * int64") when the result does not fit. */
int adj_int64_mul(int64_t a, int64_t b, const char *what, int64_t *out);
int adj_int64_add(int64_t a, int64_t b, const char *what, int64_t *out);

ADJ_END_DECLS

#endif
