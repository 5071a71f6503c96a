/* Halo geometry: which input each worker of a sliding-kernel layer needs.
 *
 * A convolution or pooling kernel (size k, stride s, dilation d, padding
 * pad_left/pad_right, per dimension) maps an input of extent n to an output of
 * extent m = floor((n + pad_left + pad_right - d(k-1) - 1) / s) + 1.  Following
 * the DistDL paper (section 3, appendix B) the *output* is load balanced: each
 * worker of a dimension gets a balanced block [o0, o1) of m.  That block reads
 * input [o0 s - pad_left, (o1-1) s - pad_left + d(k-1) + 1), clipped to [0, n)
 * (padding is not data): the *needed* range.  The worker holds its *bulk* of the
 * input (balanced over n, or explicit cuts, e.g. straight from a repartition).
 * Per side, the needed range either reaches past the bulk (a *halo* to receive
 * from the workers holding it) or stops short of it (surplus to *trim* before
 * the local kernel runs: the paper's unpadding shim).  The local tensor the
 * exchange works on is the bulk extended by both halos; the local kernel reads
 * its "kernel input" box (local tensor minus trims) with local zero padding
 * only where the needed range was clipped at a global boundary, and then
 * reproduces exactly the worker's block of the sequential output.  A layer
 * places its bulk block in the local tensor with adj_tensor_copy_box(&local,
 * &l.bulk, &block, &whole, ADJ_UNPACK_COPY), runs the exchange, and hands
 * l.kernel_input and l.padding to its kernel (l from adj_halo_geometry_local).
 *
 * Dimensions are independent and every worker's geometry follows from shared
 * arguments, so any worker computes any other's without communication.  This
 * module is pure computation (no MPI), which is why it is a header of its own:
 * the adjoin-halo tool and layer planning use it without an operator or MPI
 * ranks; halo.h builds the exchange operator on top of it.
 *
 * Edge cases, decided here once for every user:
 *  - a worker whose output block is empty, or whose needed range is empty (all
 *    of its outputs read only padding), needs nothing: no halo, the whole bulk
 *    is trimmed (trim = [0, bulk extent]);
 *  - a needed range may extend beyond the adjacent worker's bulk (narrow or
 *    empty blocks from explicit cuts); the halo is then filled from every
 *    worker whose bulk it overlaps, not only the adjacent one;
 *  - a needed range disjoint from the bulk (possible with explicit cuts or
 *    strides larger than a block) still gets a halo contiguous with the bulk,
 *    so the local tensor stays one box; the unused part is trimmed;
 *  - n = 0 without padding is an empty dimension (m = 0); otherwise the dilated
 *    kernel must fit in the padded input, else creation fails naming the
 *    dimension and both sizes. */
#ifndef ADJOIN_HALO_GEOMETRY_H
#define ADJOIN_HALO_GEOMETRY_H

#include <stdint.h>

#include "adjoin/decomposition.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Kernel parameters per dimension.  Zero means the default for size, stride
 * and dilation (1), so dimensions like batch and channel need no entry:
 *   &(adj_halo_kernel){.size = {1, 1, 5, 5}, .padding = {[2] = {2, 2}, [3] = {2, 2}}} */
typedef struct adj_halo_kernel {
  int64_t size[ADJ_MAX_RANK];       /* k >= 1 */
  int64_t stride[ADJ_MAX_RANK];     /* s >= 1 */
  int64_t dilation[ADJ_MAX_RANK];   /* d >= 1 */
  int64_t padding[ADJ_MAX_RANK][2]; /* {left, right} >= 0 */
} adj_halo_kernel;

/* One worker in one dimension.  Ranges are half-open [a, b) in global indices;
 * halo, trim and padding are entry counts {left, right}. */
typedef struct adj_halo_dim {
  int64_t bulk[2];    /* input the worker owns */
  int64_t output[2];  /* output it computes (balanced over m) */
  int64_t needed[2];  /* input that output reads, clipped to [0, n) */
  int64_t halo[2];    /* entries received beyond the bulk */
  int64_t trim[2];    /* entries of bulk+halo dropped before the local kernel */
  int64_t padding[2]; /* zero padding the local kernel adds (global boundaries only) */
} adj_halo_dim;

/* A worker's view of all dimensions, as boxes ready for the local kernel. */
typedef struct adj_halo_local {
  int rank;
  int64_t shape[ADJ_MAX_RANK];      /* local tensor: bulk + halos */
  adj_box input;                    /* global input range of the local tensor */
  adj_box bulk;                     /* the bulk inside the local tensor */
  adj_box kernel_input;             /* the local tensor minus trims */
  int64_t padding[ADJ_MAX_RANK][2]; /* local kernel padding {left, right} */
  adj_box output;                   /* global output block */
} adj_halo_local;

typedef struct adj_halo_geometry adj_halo_geometry;

/* Longest run of kernels one geometry composes. */
#define ADJ_MAX_RUN_STAGES 32

/* One kernel of a run on one worker in one dimension: the output range [a, b)
 * it computes (global indices of that kernel's output) and the zero padding
 * {left, right} its local kernel adds (global boundaries only). */
typedef struct adj_halo_stage {
  int64_t output[2];
  int64_t padding[2];
} adj_halo_stage;

/* Geometry of a rank-`rank` input of global `shape` cut over a grid of `parts`
 * workers per dimension (0 counts as 1).  cuts may be NULL (balanced bulks) or
 * hold per dimension NULL or parts[i] + 1 nondecreasing offsets from 0 to
 * shape[i].  kernel may be NULL (identity kernel: no halo).  Not collective. */
int adj_halo_geometry_create(int rank, const int64_t *shape, const int *parts, const int64_t *const *cuts,
                             const adj_halo_kernel *kernel, adj_halo_geometry **geometry);
/* The same for the bulk of an existing decomposition (balanced or explicit). */
int adj_halo_geometry_create_for(const adj_decomposition *input, const adj_halo_kernel *kernel,
                                 adj_halo_geometry **geometry);
/* Deep halos: the geometry of a run of `count` kernels applied one after
 * another to the input's bulk (stage j's input extent is stage j-1's output
 * extent).  The output is the last kernel's, balanced; each worker's ranges
 * are mapped back through the run, last kernel first, each stage computing
 * exactly the input the next one reads (clipped to that stage's extent), so
 * the first kernel's needed range, and the one halo exchange that fills it,
 * serve the whole run.  adj_halo_geometry_dim's padding is the first kernel's;
 * adj_halo_geometry_stage gives every stage's range and padding.  A worker
 * whose outputs at some stage read only padding makes the run unfusable
 * (ADJ_ERR_SIZE naming dimension, worker and kernel).  Not collective. */
int adj_halo_geometry_create_run(const adj_decomposition *input, int count, const adj_halo_kernel *kernels,
                                 adj_halo_geometry **geometry);
/* Kernels composed: 1 for a geometry made by adj_halo_geometry_create(_for). */
int adj_halo_geometry_stages(const adj_halo_geometry *geometry);
/* Stage `stage` (0 <= stage < stages) of worker `part` in dimension dim; the
 * last stage's output is adj_halo_geometry_dim's output. */
adj_halo_stage adj_halo_geometry_stage(const adj_halo_geometry *geometry, int stage, int dim, int part);
/* NULL-safe; sets *geometry to NULL. */
void adj_halo_geometry_destroy(adj_halo_geometry **geometry);

int adj_halo_geometry_rank(const adj_halo_geometry *geometry);
const int64_t *adj_halo_geometry_input_shape(const adj_halo_geometry *geometry);
const int64_t *adj_halo_geometry_output_shape(const adj_halo_geometry *geometry);
const int *adj_halo_geometry_parts(const adj_halo_geometry *geometry);
/* Number of workers (product of parts). */
int adj_halo_geometry_workers(const adj_halo_geometry *geometry);
/* Kernel parameters with defaults filled in (size, stride, dilation >= 1). */
const adj_halo_kernel *adj_halo_geometry_kernel(const adj_halo_geometry *geometry);
/* Geometry of worker `part` (0 <= part < parts[dim]) in dimension dim. */
const adj_halo_dim *adj_halo_geometry_dim(const adj_halo_geometry *geometry, int dim, int part);
/* The worker at coords; coords == NULL gives an inactive worker's zero-volume view. */
void adj_halo_geometry_local(const adj_halo_geometry *geometry, const int *coords, adj_halo_local *local);

ADJ_END_DECLS

#endif
