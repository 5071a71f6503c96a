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

/* A whole-string finite real (strtod's syntax; no nan, no inf) within
 * [min, max]. */
int adj_parse_real(const char *text, double min, double max, const char *what, double *out);

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
