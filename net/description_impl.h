/* Private to the description and placement parsers (description.c,
 * description_layers.c, placement.c): the parser's state and the option
 * readers each layer kind's reader calls. */
#ifndef ADJOIN_NET_DESCRIPTION_IMPL_H
#define ADJOIN_NET_DESCRIPTION_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "adjoin/description.h"

enum { DESC_MAX_WORDS = 64 };

typedef struct desc_option {
  const char *key, *value;
  bool used;
} desc_option;

typedef struct desc_parser {
  const char *source;
  int line;
  adj_description *d;
  int capacity;                        /* of d->layers */
  int rank;                            /* the current per-sample shape */
  int64_t shape[ADJ_DESC_MAX_DIMS];
  bool have_name, have_input, have_loss;
  char what[2 * ADJ_DESC_NAME_SIZE];   /* "conv conv1": what messages call the line */
  char what_key[512];                  /* "net:7: conv conv1 k" */
  desc_option options[DESC_MAX_WORDS];
  int n_options;
} desc_parser;

/* Splits key=value words into p->options (refusing a word without '=' and a
 * key given twice), and refuses the options no reader took, listing the keys
 * the line knows. */
int desc_split_options(desc_parser *p, char **words, int count);
int desc_refuse_leftover(desc_parser *p, const char *known);
/* Whether option `key` is on the line (not marking it used). */
bool desc_given(const desc_parser *p, const char *key);
/* The value of option `key` (marked used), or NULL when not given. */
const char *desc_take(desc_parser *p, const char *key);
/* Readers of one option each: leave *out as it is when the option is absent,
 * refuse (ADJ_ERR_ARG, naming source:line, the layer, the key and the text)
 * a value that does not parse or lies outside [min, max]. */
int desc_int(desc_parser *p, const char *key, int64_t min, int64_t max, int64_t *out);
int desc_real(desc_parser *p, const char *key, double min, double max, double *out);
int desc_choice(desc_parser *p, const char *key, const char *const *names, int n, int *out);
int desc_bool(desc_parser *p, const char *key, bool *out); /* no / yes */
/* "AxB...": 1 entry (for every dimension) or `want` entries. */
int desc_ints(desc_parser *p, const char *key, int want, int64_t min, int64_t max, int64_t *out);
int desc_reals(desc_parser *p, const char *key, int want, double min, double max, double *out);
/* Padding per dimension: "P" or "L:R" entries. */
int desc_padding(desc_parser *p, const char *key, int want, int64_t padding[][2]);
/* parts= (ndim entries; any number up to ADJ_DESC_MAX_DIMS + 1 when ndim <
 * 0), out_parts= (when allowed) and grid= (when allowed) into *out; leaves it
 * as it is when none is given. */
int desc_placement_options(desc_parser *p, int ndim, bool out_parts, bool grid, adj_layer_placement *out);

/* Reads the options of layer l (kind set, input shape set), checks them
 * against its input, and sets its output shape and parameters. */
int desc_infer(desc_parser *p, const char *keyword, adj_desc_layer *l);
int desc_infer_flatten(desc_parser *p, adj_desc_layer *l);
/* The option keys a kind takes, for the message refusing another. */
const char *desc_known_keys(adj_desc_kind kind);

/* A regular text file of at most ADJ_DESC_MAX_TEXT bytes, NUL-terminated
 * (malloc'd); `what` names its kind in messages ("network", "placement"). */
int desc_read_text(const char *path, const char *what, char **text);
/* Rank 0 reads it, every rank of comm gets the same text or the same error.
 * Collective. */
int desc_share_text(MPI_Comm comm, const char *path, const char *what, char **text);

/* Whether layer i is one of the window layers a uniform placement's
 * `window` places: any but fc, phantom, flatten and losses before the first
 * fc or phantom layer; and the first such layer's rank, batch included (0:
 * none). */
bool place_window_layer(const adj_description *d, int i);
int place_window_ndim(const adj_description *d);

#endif
