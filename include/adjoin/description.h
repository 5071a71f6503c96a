/* Network descriptions: what a network computes, written once as text (the
 * `.net` format of docs/network-format.md) and read by everything that
 * handles networks: the builder (network_build.h), the planner (plan.h), the
 * battery (adjoin-dottest --net) and the trainer (adjoin-train --net).
 *
 * A description is a chain of layers after an input line:
 *
 *   network lenet5
 *   input 1 28 28                        per-sample shape (C, H, W)
 *   conv conv1 out=6 k=5 p=2
 *   relu
 *   pool pool1 k=2 s=2
 *   ...
 *   fc fc3 out=10
 *   loss type=xent
 *
 * Every shape is inferred from the input: each layer's per-sample input and
 * output shapes (the batch is not part of a description; the builder takes
 * it), hyper-parameters and parameter shapes are in adj_desc_layer, checked
 * as they are read (a kernel larger than its padded input, channels that do
 * not divide into groups, a loss that is not last...).  An affine or phantom
 * layer on a (C, spatial...) input gets a flatten before it (`implicit`).
 *
 * A layer may also say where it runs (parts=, out_parts=, grid=; placement.h
 * describes these keys, and placement files that override them), so one
 * file can carry its own placement and still be placed any other way.
 *
 * Parsing is a pure function of (text, source name): no file, no MPI, no
 * global state, so a fuzzer can call it.  Every refusal is ADJ_ERR_ARG with
 * a message that names the source, the line and the value, e.g.
 *   lenet5.net:7: conv conv2 k '0' is out of range 1..1048576
 *   lenet5.net:9: fc fc1: unknown option 'outt' (out, bias, parts, out_parts, grid)
 * adj_description_read_all reads a file on one rank and parses it on every
 * rank, so a bad file is the same error on every rank.  Descriptions are
 * plain data: read them freely, never change them after parsing. */
#ifndef ADJOIN_DESCRIPTION_H
#define ADJOIN_DESCRIPTION_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "adjoin/activation.h"
#include "adjoin/loss_layers.h"
#include "adjoin/pad_layer.h"
#include "adjoin/pool.h"
#include "adjoin/upsample_layer.h"
#include "adjoin/window.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

enum {
  ADJ_DESC_NAME_SIZE = 48,      /* layer and network names, NUL included */
  ADJ_DESC_MAX_DIMS = 4,        /* per-sample rank: (F), (C, L), (C, H, W), (C, D, H, W) */
  ADJ_DESC_MAX_PARAMETERS = 4,  /* parameters of one layer */
  ADJ_DESC_MAX_LAYERS = 1024,   /* layers of one description, implicit flattens included */
  ADJ_DESC_MAX_TEXT = 1 << 20,  /* bytes of a description or placement file */
  ADJ_PLACE_MAX_PARTS = 4096,   /* workers along one dimension of a placement */
  ADJ_PLACE_MAX_WORKERS = 1 << 16, /* workers of one layer's placement, and replicas */
};

/* ---- where a layer runs -------------------------------------------------------------- */

/* How a layer's placement is given. */
typedef enum adj_placement_kind {
  ADJ_PLACE_INHERIT = 0, /* not given: placement.h's inheritance rule decides */
  ADJ_PLACE_PARTS = 1,   /* a partition of the layer's input, plus output parts */
  ADJ_PLACE_GRID = 2,    /* affine layers: the 1.5D layer on a P_r x P_c grid */
} adj_placement_kind;

/* One layer's placement (placement.h says what each kind means per layer).
 *   PARTS  parts[0..ndim): the partition of the layer's input tensor, batch
 *          first: (N, C, spatial...) for window and pointwise layers, (N, F)
 *          for affine and phantom layers; out_parts: P_co of a convolution,
 *          P_fo of an affine layer (the DistDL affine layer's P_b x P_fo x
 *          P_fi is parts = P_b x P_fi, out_parts = P_fo).
 *   GRID   grid = {P_r, P_c}: features over P_r, the batch over P_c.
 * line is where it was written (0: not from a file). */
typedef struct adj_layer_placement {
  adj_placement_kind kind;
  int ndim;
  int parts[ADJ_DESC_MAX_DIMS + 1];
  int out_parts; /* 0 means 1 */
  int grid[2];
  int line;
} adj_layer_placement;

/* Workers the placement names: the product of parts and out_parts, or of the
 * grid; 1 for INHERIT. */
int64_t adj_layer_placement_workers(const adj_layer_placement *placement);
/* "parts=1x1x2x2 out_parts=2", "grid=2x2" or "-" into buf. */
const char *adj_layer_placement_format(const adj_layer_placement *placement, char *buf, size_t size);

/* ---- layers -------------------------------------------------------------------------- */

typedef enum adj_desc_kind {
  ADJ_DESC_CONV = 0,       /* conv 1-3d: conv_layer.h */
  ADJ_DESC_POOL = 1,       /* max / average pooling: pool_layer.h */
  ADJ_DESC_AFFINE = 2,     /* fc / affine: affine_layer.h, or affine15_layer.h on a grid */
  ADJ_DESC_ACTIVATION = 3, /* relu, leaky_relu, tanh, sigmoid: pointwise_layer.h */
  ADJ_DESC_BATCHNORM = 4,  /* batchnorm_layer.h */
  ADJ_DESC_UPSAMPLE = 5,   /* upsample_layer.h */
  ADJ_DESC_PAD = 6,        /* pad_layer.h */
  ADJ_DESC_PHANTOM = 7,    /* phantom_layer.h */
  ADJ_DESC_FLATTEN = 8,    /* pointwise_layer.h */
  ADJ_DESC_LOSS = 9,       /* loss_layers.h: l1, mse, bce, ..., nll */
  ADJ_DESC_XENT = 10,      /* softmax cross-entropy gathered on rank 0: xent_layer.h */
  ADJ_DESC_KINDS = 11
} adj_desc_kind;

/* conv (kernel k, stride s, dilation d, padding p, groups g, padding mode). */
typedef struct adj_desc_conv {
  adj_window_geometry window;    /* padding_left/right: what p= gives */
  adj_padding_mode padding_mode; /* zeros: the window's own; other modes: a pad layer, then no padding */
  int64_t out_channels;          /* C_out */
  int64_t groups;                /* g (the planner prices g > 1; the builder refuses it) */
  bool bias;
} adj_desc_conv;

typedef struct adj_desc_pool {
  adj_window_geometry window;
  adj_padding_mode padding_mode; /* as for conv */
  adj_pool_kind kind;            /* max, avg (counting the padding), avg excluding it */
} adj_desc_pool;

typedef struct adj_desc_affine {
  int64_t out_features;
  bool bias;
} adj_desc_affine;

typedef struct adj_desc_batchnorm {
  double eps, momentum;
  bool affine;        /* learnable gamma and beta */
  bool running_stats; /* track running statistics */
} adj_desc_batchnorm;

typedef struct adj_desc_upsample {
  adj_interp_mode mode;
  bool align_corners;
  int64_t size[ADJ_MAX_SPATIAL_DIMS];         /* output extents, or all 0 */
  double scale_factor[ADJ_MAX_SPATIAL_DIMS];  /* or all 0 */
} adj_desc_upsample;

typedef struct adj_desc_pad {
  adj_padding_mode mode;
  int64_t padding[ADJ_MAX_SPATIAL_DIMS][2]; /* {left, right} per spatial dimension */
} adj_desc_pad;

typedef struct adj_desc_phantom {
  int64_t out_features; /* n_out */
  int64_t ghosts;       /* k */
  bool allow_large_k;
  bool bias;
} adj_desc_phantom;

/* loss_layers.h's configuration, or (XENT) nothing: softmax cross-entropy,
 * the mean over the batch, on rank 0. */
typedef struct adj_desc_loss {
  adj_loss_kind kind;
  adj_loss_reduction reduction;
  bool log_target;           /* kl_div */
  bool poisson_linear_input; /* poisson_nll: log_input=no */
  bool poisson_full;         /* poisson_nll: full=yes */
  double poisson_eps;        /* poisson_nll with a linear input; 0: 1e-8 */
} adj_desc_loss;

/* One parameter as the layer lists it (layer.h): the same name and global
 * shape in every placement, so checkpoints move between placements.  The
 * phantom layer's shapes depend on its worker count p (phantom_layer.h);
 * they are given for the p of the description's own placement, 1 without one. */
typedef struct adj_desc_parameter {
  char name[16];
  int rank;
  int64_t shape[ADJ_DESC_MAX_DIMS + 1];
  int64_t count;
} adj_desc_parameter;

typedef struct adj_desc_layer {
  char name[ADJ_DESC_NAME_SIZE];
  adj_desc_kind kind;
  int line;      /* source line; an implicit flatten has its affine layer's */
  bool implicit; /* a flatten the parser put before an affine or phantom layer */
  /* Per-sample shapes, batch excluded: (C, spatial...) or (F). */
  int in_rank, out_rank;
  int64_t in_shape[ADJ_DESC_MAX_DIMS], out_shape[ADJ_DESC_MAX_DIMS];
  union {
    adj_desc_conv conv;
    adj_desc_pool pool;
    adj_desc_affine affine;
    adj_activation activation;
    adj_desc_batchnorm batchnorm;
    adj_desc_upsample upsample;
    adj_desc_pad pad;
    adj_desc_phantom phantom;
    adj_desc_loss loss;
  } u;
  int n_parameters;
  adj_desc_parameter parameters[ADJ_DESC_MAX_PARAMETERS];
  int64_t parameter_count; /* sum of the parameters' counts */
  adj_layer_placement placement; /* as written in the description (INHERIT when not) */
} adj_desc_layer;

typedef struct adj_description {
  char name[ADJ_DESC_NAME_SIZE]; /* the `network` line, else the source */
  char source[256];              /* what messages call it (a path, or the caller's name) */
  int input_rank;                /* per sample: 1 (F) .. 4 (C, D, H, W) */
  int64_t input_shape[ADJ_DESC_MAX_DIMS];
  adj_layer_placement input_placement; /* where the input enters (INHERIT: whole on rank 0) */
  int replicas;                  /* a `replicas R` line; 0 when none */
  int n;                         /* layers, implicit flattens included */
  adj_desc_layer *layers;        /* (n) */
  int64_t parameter_count;       /* of every layer */
} adj_description;

/* Parses a description from NUL-terminated text; `source` (may be NULL:
 * "network") names it in messages.  On error *description is NULL.  Not
 * collective; the same text gives the same result on every rank. */
int adj_description_parse(const char *text, const char *source, adj_description **description);

/* Reads and parses the file at `path` on this rank alone.  Refused: a file
 * that is not a regular file (a FIFO or a device is refused without reading
 * from it), larger than ADJ_DESC_MAX_TEXT, or holding a NUL byte. */
int adj_description_read(const char *path, adj_description **description);

/* Rank 0 of comm reads the file (the other ranks never open it), every rank
 * parses the same text, so every rank returns the same description or the
 * same error.  Collective on comm. */
int adj_description_read_all(MPI_Comm comm, const char *path, adj_description **description);

void adj_description_destroy(adj_description **description);

/* Index of the layer called `name`, or -1. */
int adj_description_find(const adj_description *description, const char *name);

/* The index of the last layer if it is a loss (LOSS or XENT), else -1. */
int adj_description_loss(const adj_description *description);

/* The layer kind's keyword ("conv", "pool", "fc", "relu" for any activation:
 * see adj_desc_layer_keyword, ...), or "?" for an unknown kind. */
const char *adj_desc_kind_name(adj_desc_kind kind);
/* The keyword a layer is written with: its kind's, or the activation's
 * ("relu", "leaky_relu", "tanh", "sigmoid"). */
const char *adj_desc_layer_keyword(const adj_desc_layer *layer);

/* A table of the layers (name, kind, input and output shapes, parameters,
 * placement) to `out`, one line each.  Not collective. */
void adj_description_print(const adj_description *description, FILE *out);

/* The per-sample shape "(1, 28, 28)" of a rank/shape pair into buf. */
const char *adj_desc_shape_format(int rank, const int64_t *shape, char *buf, size_t size);

ADJ_END_DECLS

#endif
