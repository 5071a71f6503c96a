/* Placements: where each layer of a description (description.h) runs.
 *
 * A placement gives some layers an adj_layer_placement and the whole network
 * a replica count.  It comes from the description's own keys (parts=,
 * out_parts=, grid= on a layer line), from a placement file, which overrides
 * them layer by layer, or from a name (adj_placement_find).  A placement
 * file (docs/placement.md), one item a line, '#' starting a comment:
 *
 *   placement dist4            optional name
 *   ranks 4                    optional: refused unless the layers use 4 ranks
 *   replicas 2                 optional: data-parallel replicas of the whole net
 *   input parts=1x1x1x1        where the input enters (default: whole on rank 0)
 *   conv1 parts=1x1x2x2        a layer by name, then its placement keys
 *   fc1 parts=1x2 out_parts=2
 *   fc2 grid=2x2
 *
 * What the keys mean for each kind of layer (every partition lives on the
 * first ranks of the network's communicator, in row-major grid order):
 *   conv      parts = P_n x P_ci x P_0 x ... (its input), out_parts = P_co:
 *             the work runs on P_n x P_co x P_ci x P_0 ..., the output lives on
 *             P_n x P_co x P_0 x ... (conv_layer.h)
 *   fc        parts = P_b x P_fi, out_parts = P_fo: the DistDL affine layer
 *             (affine_layer.h; its P_b x P_fo x P_fi), or grid = P_r x P_c:
 *             the 1.5D layer, features over P_r, the batch over P_c
 *             (affine15_layer.h)
 *   phantom   parts = 1 x p (phantom_layer.h)
 *   any other parts = the partition of its input, batch first
 *
 * A layer without a placement of its own (ADJ_PLACE_INHERIT) takes
 *   conv, fc, phantom   the placement of the previous layer of the same kind,
 *                       or, for the first of its kind, the layout its input
 *                       arrives in (with out_parts 1);
 *   flatten             the partition the next layer needs, its channels cut
 *                       so that each worker flattens its own feature range
 *                       (no worker gathers the whole block), or in place
 *                       when that would not give the next layer's blocks;
 *   any other kind      the layout its input arrives in (nothing moves).
 * So an empty placement is the sequential network on rank 0, and a file
 * names only the layers where the layout changes.  Between two layers whose
 * layouts differ the builder inserts a repartition (network_build.h).
 *
 * Parsing is a pure function of (text, source), as for descriptions;
 * adj_placement_resolve checks a placement against a description (unknown
 * layer names, parts that do not match a layer's rank, more workers than a
 * dimension has entries, too few ranks), naming the file, line and value. */
#ifndef ADJOIN_PLACEMENT_H
#define ADJOIN_PLACEMENT_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/description.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_placement_entry {
  char layer[ADJ_DESC_NAME_SIZE]; /* a layer's name, or "input" */
  adj_layer_placement placement;
} adj_placement_entry;

typedef struct adj_placement {
  char name[ADJ_DESC_NAME_SIZE];
  char source[256];
  int ranks;                      /* a `ranks N` line (0: none) */
  int replicas;                   /* a `replicas R` line (0: none) */
  bool whole;                     /* says where every layer runs: the description's own keys are
                                   * ignored (named schemes); a file overrides them layer by layer */
  int n;
  adj_placement_entry *entries;   /* (n), each layer at most once */
} adj_placement;

/* Parses a placement file's text; `source` names it in messages.  Not
 * collective. */
int adj_placement_parse(const char *text, const char *source, adj_placement **placement);
/* Reads a file on this rank (refused as adj_description_read refuses). */
int adj_placement_read(const char *path, adj_placement **placement);
void adj_placement_destroy(adj_placement **placement);

/* The placement `name` of a network read from `network_path`, on every rank
 * of comm (rank 0 looks for files; collective):
 *   - a path to a placement file;
 *   - NAME: the file <dir>/<network>/NAME.place beside the network file
 *     <dir>/<network>.net (the shipped placements: networks/lenet5/dist4.place);
 *   - "sequential": every layer on rank 0 (the description's own keys ignored);
 *   - "RxC": rows of the first spatial dimension over R and the batch over C
 *     in the convolution, pooling and pointwise layers, 1.5D affine layers on
 *     R x C, phantom layers on 1 x RC;
 *   - a uniform placement, comma-separated (adj_placement_uniform):
 *       window=AxBx...  the partition of every conv, pool and pointwise layer
 *                       before the first fc or phantom layer, batch first
 *       fc=grid:RxC     every fc layer 1.5D on R x C, or
 *       fc=BxOxI        every fc layer a DistDL affine layer on P_b x P_fo x P_fi
 *       phantom=P       every phantom layer on 1 x P
 *       replicas=R
 *     e.g. "window=4x1x1x1,fc=grid:2x2" (paper 001's Fig. 7 for LeNet-5).
 * NULL or "" is the description's own placement (its keys and replicas line). */
int adj_placement_find(MPI_Comm comm, const adj_description *description, const char *network_path,
                       const char *name, adj_placement **placement);

/* The names of the placement files shipped beside a network file (NAME for
 * each NAME.place in <dir>/<network>/), sorted, each followed by `separator`,
 * into buf (truncated to whole names); "" when there are none.  Reads a
 * directory on this rank alone: not collective. */
const char *adj_placement_names(const char *network_path, const char *separator, char *buf, size_t size);

/* A uniform placement: one partition for the window layers (conv, pool,
 * pointwise before the head), one for every fc layer, one for every phantom
 * layer, and replicas.  A field of all zeros (or ndim 0) leaves those layers
 * sequential. */
typedef struct adj_uniform_placement {
  int window_ndim;
  int window[ADJ_DESC_MAX_DIMS + 1];
  adj_layer_placement fc;  /* PARTS (P_b x P_fi, out_parts P_fo) or GRID */
  int phantom;             /* p; 0 means 1 */
  int replicas;            /* 0 means 1 */
} adj_uniform_placement;

/* The placement a uniform one gives a description: an entry for each conv,
 * fc and phantom layer (and the first layer when it is a window layer before
 * any conv), named by adj_uniform_placement_format.  ADJ_ERR_ARG when the
 * window partition's rank is not the window layers' (naming both). */
int adj_placement_uniform(const adj_description *description, const adj_uniform_placement *uniform,
                          adj_placement **placement);
/* "window=1x1x2x2,fc=grid:2x2" (fields at their default left out;
 * "sequential" when all are), which adj_placement_find reads back. */
const char *adj_uniform_placement_format(const adj_uniform_placement *uniform, char *buf, size_t size);

/* ---- resolution --------------------------------------------------------------------------- */

/* A layer placed: its placement after inheritance (never INHERIT), the
 * partitions of its input and output (batch first), and the workers it
 * computes on (the first `workers` ranks). */
typedef struct adj_layer_layout {
  adj_layer_placement placement;
  bool explicit_input;            /* the input partition was asked for, not taken as it arrived */
  int inherited_from;             /* the layer whose placement this one repeats; -1 when none */
  int in_ndim, out_ndim;
  int in_parts[ADJ_DESC_MAX_DIMS + 1], out_parts[ADJ_DESC_MAX_DIMS + 1];
  int workers;
} adj_layer_layout;

typedef struct adj_network_layout {
  int n;                          /* = description->n */
  adj_layer_layout *layers;       /* (n) */
  int input_ndim;
  int input_parts[ADJ_DESC_MAX_DIMS + 1];
  int ranks;                      /* ranks of one replica: the most any layer uses */
  int replicas;                   /* 1 when none given */
} adj_network_layout;

/* Applies the inheritance rules above to the description's own placement
 * overridden by `placement` (NULL: the description's alone; placement
 * "sequential" ignores the description's keys), and checks that every layer
 * can run so: a name no layer has, parts with the wrong number of entries, a
 * dimension split over more workers than its extent (the batch against
 * `batch` when > 0), a grid or phantom width the layer refuses, a `ranks`
 * line that differs from what the layers use.  Pure; not collective.
 * adj_network_layout_free releases *layout. */
int adj_placement_resolve(const adj_description *description, const adj_placement *placement, int64_t batch,
                          adj_network_layout *layout);
void adj_network_layout_free(adj_network_layout *layout);

/* Every uniform placement of the description on exactly `ranks` ranks per
 * replica (replicas 1) that adj_placement_resolve accepts for a batch of
 * `batch`: the window layers on every factorisation of `ranks` over their
 * batch, channels and spatial dimensions (or sequential), every fc layer on
 * every 1.5D grid and DistDL P_b x P_fo x P_fi of `ranks` (or sequential),
 * phantom layers on 1 x ranks (or sequential); not all sequential when ranks
 * > 1.  *count placements in *list, in a fixed order; free with
 * adj_uniform_placement_list_free.  Pure; not collective. */
int adj_placement_enumerate(const adj_description *description, int ranks, int64_t batch,
                            adj_uniform_placement **list, int *count);
void adj_uniform_placement_list_free(adj_uniform_placement **list);

ADJ_END_DECLS

#endif
