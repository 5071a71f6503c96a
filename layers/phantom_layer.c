/* Phantom-parallel and tensor-parallel feed-forward layers (phantom_layer.h), each
 * one all-gather operator around local GEMMs:
 *
 *   phantom   forward   g = C x^T;  G = A g;  y = x L^T + b + G_rem^T D^T
 *             jvp       dg = dC x^T + C dx^T;  dG = A dg;
 *                       dy = dx L^T + x dL^T + db + G_rem^T dD^T + dG_rem^T D^T
 *             backward  e_rem = D^T dy^T (own block 0);  dg = A* e;
 *                       grad L += dy^T x,  grad D += dy^T G_rem^T,  grad b += sum dy,
 *                       grad C += dg x,  dx = dy L + dg^T C
 *   tp        forward   X = B P A x;  y = X W^T + b
 *             jvp       dX = B P A dx;  dy = dX W^T + X dW^T + db
 *             backward  dX = dy W;  dx = A* P^T B* dX;  grad W += dy^T X
 *
 * A is adjoin's all-gather (A* its reduce-scatter); the local terms reuse the
 * affine kernel (affine.h).  For tp, P keeps the first rank's gathered copy
 * (P^T puts the gradient there and zeros on the others) and B broadcasts it
 * to every rank; B* is a sum-reduce that runs as an all-reduce, so the layer
 * performs exactly paper Table II's four collectives (phantom_layer.h).
 *
 * "G_rem" is G without this rank's own k rows:
 * rows [0, j k) and [(j+1) k, p k), which meet D's column blocks [0, j k) and
 * [j k, (p-1) k), so each remote product is two strided GEMMs.  Each
 * collective is posted before the local GEMM it does not depend on and
 * completed after it, so communication overlaps computation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/all_gather.h"
#include "adjoin/phantom_layer.h"
#include "adjoin/affine.h"
#include "broadcast_impl.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"
#include "blas_impl.h"

typedef struct adj_phantom_layer {
  bool tp;         /* the tensor-parallel baseline */
  bool active;     /* member of the input partition */
  int p, j;        /* ranks and this worker's position along the features */
  int64_t batch, n_in, n_out, k; /* this worker's block widths; k of the phantom */
  adj_op *gather;  /* phantom: (p k, N) along dim 0; tp: (N, n_in) along dim 1 */
  /* phantom: g, dg (k, N) and G, dG, e (p k, N); tp: G, dG the gathered (N, n_in). */
  adj_tensor g, dg, G, dG, e;
  /* tp only: the first rank's G to every rank (Table II's broadcast; its
   * adjoint, Table II's all-reduce, sums onto the first rank's copy). */
  adj_op *broadcast;
  bool root;          /* the broadcast's source: the first rank of the partition */
  adj_tensor copy, dcopy; /* the broadcast copy (N, n_in) the GEMMs read, and its tangent or gradient */
  adj_tensor sum;     /* the gradient of G: the broadcast's adjoint on the root, zeros elsewhere */
  adj_tensor none;    /* the broadcast's empty domain on the other ranks */
  double comm_seconds; /* inside the collective's post and wait calls since the last reset */
} adj_phantom_layer;

/* Rows of G without the own block and the matching columns of D. */
typedef struct adj_phantom_piece {
  int64_t row, col, width;
} adj_phantom_piece;

static void adj_phantom_pieces(const adj_phantom_layer *a, adj_phantom_piece pieces[2]) {
  int64_t own = a->j * a->k;
  pieces[0] = (adj_phantom_piece){0, 0, own};
  pieces[1] = (adj_phantom_piece){own + a->k, own, (a->p - 1 - a->j) * a->k};
}

/* ---- the collective, timed ---------------------------------------------------------------- */

static int adj_phantom_begin(adj_phantom_layer *a, adj_op *op, adj_direction direction, const adj_tensor *in,
                             adj_tensor *out) {
  double t0 = MPI_Wtime();
  int status = adj_op_begin(op, direction, in, out);
  a->comm_seconds += MPI_Wtime() - t0;
  return status;
}

static int adj_phantom_end(adj_phantom_layer *a, adj_op *op) {
  double t0 = MPI_Wtime();
  int status = adj_op_end(op);
  a->comm_seconds += MPI_Wtime() - t0;
  return status;
}

/* The whole collective (the tp layer has nothing to overlap it with). */
static int adj_phantom_apply(adj_phantom_layer *a, adj_op *op, adj_direction direction, const adj_tensor *in,
                             adj_tensor *out) {
  ADJ_CALL(adj_phantom_begin(a, op, direction, in, out));
  return adj_phantom_end(a, op);
}

/* ---- local products ---------------------------------------------------------------------- */

/* out (k, N) = beta out + C x^T */
static void adj_phantom_compress(const adj_phantom_layer *a, adj_dtype dt, const adj_tensor *c, const adj_tensor *x,
                                 double beta, adj_tensor *out) {
  adj_gemm_team(dt, false, true, a->k, a->batch, a->n_in, 1.0, c->data, a->n_in, x->data, a->n_in, beta, out->data,
                a->batch);
}

/* y (N, n_out) += G_rem^T D^T */
static void adj_phantom_decompress(const adj_phantom_layer *a, adj_dtype dt, const adj_tensor *g,
                                   const adj_tensor *d, adj_tensor *y) {
  adj_phantom_piece pieces[2];
  adj_phantom_pieces(a, pieces);
  int64_t ld = (a->p - 1) * a->k;
  for (int i = 0; i < 2; i++)
    if (pieces[i].width)
      adj_gemm_team(dt, true, true, a->batch, a->n_out, pieces[i].width, 1.0, adj_at_const(g->data, dt, pieces[i].row * a->batch),
                    a->batch, adj_at_const(d->data, dt, pieces[i].col), ld, 1.0, y->data, a->n_out);
}

/* e_rem (rows of (p k, N)) = D^T dy^T; the own block stays zero from creation. */
static void adj_phantom_error_compress(const adj_phantom_layer *a, adj_dtype dt, const adj_tensor *d,
                                       const adj_tensor *dy, adj_tensor *e) {
  adj_phantom_piece pieces[2];
  adj_phantom_pieces(a, pieces);
  int64_t ld = (a->p - 1) * a->k;
  for (int i = 0; i < 2; i++)
    if (pieces[i].width)
      adj_gemm_team(dt, true, true, pieces[i].width, a->batch, a->n_out, 1.0, adj_at_const(d->data, dt, pieces[i].col),
                    ld, dy->data, a->n_out, 0.0, adj_at(e->data, dt, pieces[i].row * a->batch), a->batch);
}

/* grad D += dy^T G_rem^T */
static void adj_phantom_decompressor_grad(const adj_phantom_layer *a, adj_dtype dt, const adj_tensor *dy,
                                          const adj_tensor *g, adj_tensor *grad_d) {
  adj_phantom_piece pieces[2];
  adj_phantom_pieces(a, pieces);
  int64_t ld = (a->p - 1) * a->k;
  for (int i = 0; i < 2; i++)
    if (pieces[i].width)
      adj_gemm_team(dt, true, true, a->n_out, pieces[i].width, a->batch, 1.0, dy->data, a->n_out,
                    adj_at_const(g->data, dt, pieces[i].row * a->batch), a->batch, 1.0,
                    adj_at(grad_d->data, dt, pieces[i].col), ld);
}

/* The parameter as the (rows, cols) matrix the GEMMs see (the local block L is
 * stored flat).  Made at each call: a network may move parameter storage. */
static int adj_phantom_matrix(const adj_tensor *t, int64_t rows, int64_t cols, adj_tensor *view) {
  return adj_reshape_view(t, 2, (const int64_t[2]){rows, cols}, view);
}

static adj_parameter *adj_phantom_bias(adj_layer *l) {
  int index = ((adj_phantom_layer *)l->impl)->tp ? 1 : 3;
  return l->n_parameters > index ? l->parameters[index] : NULL;
}

/* ---- phantom ---------------------------------------------------------------------------- */

static int adj_phantom_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_phantom_layer *a = l->impl;
  adj_parameter *c = l->parameters[1], *d = l->parameters[2], *b = adj_phantom_bias(l);
  if (a->active) adj_phantom_compress(a, l->dtype, &c->value, x, 0.0, &a->g);
  ADJ_CALL(adj_phantom_begin(a, a->gather, ADJ_FORWARD, &a->g, &a->G));
  int status = ADJ_SUCCESS;
  if (a->active) {
    adj_tensor lv;
    status = adj_phantom_matrix(&l->parameters[0]->value, a->n_out, a->n_in, &lv);
    if (!status) status = adj_affine_forward(x, &lv, b ? &b->value : NULL, y);
  }
  /* A local failure while the gather is in flight still completes it. */
  status = adj_fault_at(l->name, "forward local", status);
  int ended = adj_phantom_end(a, a->gather);
  ADJ_CALL(status ? status : ended);
  if (a->active) adj_phantom_decompress(a, l->dtype, &a->G, &d->value, y);
  return ADJ_SUCCESS;
}

static int adj_phantom_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_phantom_layer *a = l->impl;
  const adj_tensor *x = l->input;
  adj_parameter *lp = l->parameters[0], *c = l->parameters[1], *d = l->parameters[2], *b = adj_phantom_bias(l);
  if (a->active) {
    adj_phantom_compress(a, l->dtype, &c->tangent, x, 0.0, &a->dg);
    if (dx) adj_phantom_compress(a, l->dtype, &c->value, dx, 1.0, &a->dg);
  }
  ADJ_CALL(adj_phantom_begin(a, a->gather, ADJ_FORWARD, &a->dg, &a->dG));
  int status = ADJ_SUCCESS;
  if (a->active) {
    adj_tensor lv, dlv;
    status = adj_phantom_matrix(&lp->value, a->n_out, a->n_in, &lv);
    if (!status) status = adj_phantom_matrix(&lp->tangent, a->n_out, a->n_in, &dlv);
    if (!status) status = adj_affine_jvp(x, &lv, dx, &dlv, b ? &b->tangent : NULL, dy);
    if (!status) adj_phantom_decompress(a, l->dtype, &a->G, &d->tangent, dy);
  }
  int ended = adj_phantom_end(a, a->gather);
  ADJ_CALL(status ? status : ended);
  if (a->active) adj_phantom_decompress(a, l->dtype, &a->dG, &d->value, dy);
  return ADJ_SUCCESS;
}

static int adj_phantom_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_phantom_layer *a = l->impl;
  const adj_tensor *x = l->input;
  adj_parameter *lp = l->parameters[0], *c = l->parameters[1], *d = l->parameters[2], *b = adj_phantom_bias(l);
  if (a->active) adj_phantom_error_compress(a, l->dtype, &d->value, dy, &a->e);
  ADJ_CALL(adj_phantom_begin(a, a->gather, ADJ_ADJOINT, &a->e, &a->dg));
  int status = ADJ_SUCCESS;
  if (a->active) {
    adj_tensor lv, glv;
    status = adj_phantom_matrix(&lp->value, a->n_out, a->n_in, &lv);
    if (!status) status = adj_phantom_matrix(&lp->grad, a->n_out, a->n_in, &glv);
    if (!status) status = adj_affine_backward(x, &lv, dy, dx, &glv, b ? &b->grad : NULL);
    if (!status) adj_phantom_decompressor_grad(a, l->dtype, dy, &a->G, &d->grad);
  }
  status = adj_fault_at(l->name, "backward local", status);
  int ended = adj_phantom_end(a, a->gather);
  ADJ_CALL(status ? status : ended);
  if (!a->active) return ADJ_SUCCESS;
  /* grad C += dg x;  dx += dg^T C */
  adj_gemm_team(l->dtype, false, false, a->k, a->n_in, a->batch, 1.0, a->dg.data, a->batch, x->data, a->n_in, 1.0,
                c->grad.data, a->n_in);
  if (dx)
    adj_gemm_team(l->dtype, true, false, a->batch, a->n_in, a->k, 1.0, a->dg.data, a->batch, c->value.data, a->n_in,
                  1.0, dx->data, a->n_in);
  return ADJ_SUCCESS;
}

/* ---- tensor parallel -------------------------------------------------------------------- */

/* copy = B P A x: the global layer, gathered from the shards and then
 * broadcast from the first rank so every rank computes from that one copy. */
static int adj_tp_globalize(adj_phantom_layer *a, const adj_tensor *x, adj_tensor *gathered, adj_tensor *copy) {
  ADJ_CALL(adj_phantom_apply(a, a->gather, ADJ_FORWARD, x, gathered));
  return adj_phantom_apply(a, a->broadcast, ADJ_FORWARD, a->root ? gathered : &a->none, copy);
}

static int adj_tp_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_phantom_layer *a = l->impl;
  adj_parameter *b = adj_phantom_bias(l);
  ADJ_CALL(adj_tp_globalize(a, x, &a->G, &a->copy));
  return a->active ? adj_affine_forward(&a->copy, &l->parameters[0]->value, b ? &b->value : NULL, y) : ADJ_SUCCESS;
}

static int adj_tp_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_phantom_layer *a = l->impl;
  adj_parameter *w = l->parameters[0], *b = adj_phantom_bias(l);
  if (dx) ADJ_CALL(adj_tp_globalize(a, dx, &a->dG, &a->dcopy));
  if (!a->active) return ADJ_SUCCESS;
  return adj_affine_jvp(&a->copy, &w->value, dx ? &a->dcopy : NULL, &w->tangent, b ? &b->tangent : NULL, dy);
}

/* dx = A* P^T B* dX.  B* sums every rank's dX onto the first rank's copy by
 * an all-reduce; P^T leaves the other ranks' `sum` at its zeros, since the
 * broadcast read only the first rank's copy.  Without dx (a network's first
 * layer) no input gradient is wanted, and the pair is skipped. */
static int adj_tp_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_phantom_layer *a = l->impl;
  adj_parameter *w = l->parameters[0], *b = adj_phantom_bias(l);
  int status = ADJ_SUCCESS;
  if (a->active)
    status = adj_affine_backward(&a->copy, &w->value, dy, dx ? &a->dcopy : NULL, &w->grad, b ? &b->grad : NULL);
  /* A local failure does not skip the collectives after it (no rank is left
   * waiting in them); the layer's agreement spreads it. */
  status = adj_fault_at(l->name, "backward local", status);
  if (!dx) return status;
  ADJ_CALL(adj_phantom_apply(a, a->broadcast, ADJ_ADJOINT, &a->dcopy, a->root ? &a->sum : &a->none));
  ADJ_CALL(adj_phantom_apply(a, a->gather, ADJ_ADJOINT, &a->sum, dx));
  return status;
}

static void adj_phantom_free(adj_phantom_layer *a) {
  if (!a) return;
  adj_op_destroy(&a->gather);
  adj_op_destroy(&a->broadcast);
  adj_tensor *owned[] = {&a->g, &a->dg, &a->G, &a->dG, &a->e, &a->copy, &a->dcopy, &a->sum, &a->none};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) adj_tensor_destroy(owned[i]);
  free(a);
}

static void adj_phantom_destroy(adj_layer *l) { adj_phantom_free(l->impl); }

static const adj_layer_methods adj_phantom_methods = {adj_phantom_forward, adj_phantom_jvp, adj_phantom_backward,
                                                      adj_phantom_destroy};
static const adj_layer_methods adj_tp_methods = {adj_tp_forward, adj_tp_jvp, adj_tp_backward, adj_phantom_destroy};

/* ---- sizes ------------------------------------------------------------------------------ */

/* a * b + c, or -1 when any input is negative or the result overflows. */
static int64_t adj_phantom_mul_add(int64_t a, int64_t b, int64_t c) {
  int64_t r;
  if (a < 0 || b < 0 || c < 0 || __builtin_mul_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r)) return -1;
  return r;
}

static adj_phantom_size adj_phantom_rank_size(int64_t n_in, int64_t n_out, int p, int64_t k, int rank, bool tp) {
  int64_t start, in_j, out_j;
  adj_balanced_block(n_in, p, rank, &start, &in_j);
  adj_balanced_block(n_out, p, rank, &start, &out_j);
  if (tp) return (adj_phantom_size){adj_phantom_mul_add(out_j, n_in, 0), out_j};
  int64_t w = adj_phantom_mul_add(out_j, in_j, 0);
  w = w < 0 ? -1 : adj_phantom_mul_add(k, in_j, w);
  w = w < 0 ? -1 : adj_phantom_mul_add(adj_phantom_mul_add(p - 1, k, 0), out_j, w);
  return (adj_phantom_size){w, out_j};
}

static adj_phantom_size adj_phantom_size_of(int64_t n_in, int64_t n_out, int p, int64_t k, int rank, bool tp) {
  if (n_in < 0 || n_out < 0 || p < 1 || k < 0 || rank >= p) return (adj_phantom_size){-1, -1};
  if (rank >= 0) return adj_phantom_rank_size(n_in, n_out, p, k, rank, tp);
  adj_phantom_size total = {0, 0};
  for (int j = 0; j < p; j++) {
    adj_phantom_size s = adj_phantom_rank_size(n_in, n_out, p, k, j, tp);
    total.weights = s.weights < 0 || total.weights < 0 ? -1 : adj_phantom_mul_add(1, total.weights, s.weights);
    total.biases += s.biases;
  }
  return total;
}

adj_phantom_size adj_phantom_layer_size(int64_t n_in, int64_t n_out, int p, int64_t k, int rank) {
  return adj_phantom_size_of(n_in, n_out, p, k, rank, false);
}

adj_phantom_size adj_tp_layer_size(int64_t n_in, int64_t n_out, int p, int rank) {
  return adj_phantom_size_of(n_in, n_out, p, 0, rank, true);
}

bool adj_phantom_k_within_bound(int64_t n, int p, int64_t k) {
  /* k < (n/p)(1 - 1/p)  <=>  k p^2 < n (p - 1), in exact integers. */
  int64_t lhs, rhs;
  if (__builtin_mul_overflow(k, (int64_t)p * p, &lhs) || __builtin_mul_overflow(n, (int64_t)(p - 1), &rhs))
    return false;
  return lhs < rhs;
}

/* ---- validation ------------------------------------------------------------------------- */

static int adj_phantom_validate(const char *who, const adj_phantom_layer_config *c, bool tp) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  const adj_partition *px = adj_decomposition_partition(c->input);
  char grid[64];
  ADJ_CHECK(adj_decomposition_rank(c->input) == 2 && adj_partition_shape(px)[0] == 1, ADJ_ERR_SIZE,
            "%s: the input partition is %s but the layer takes x (N, n) on a 1 x p partition (features split)", who,
            adj_partition_format(px, grid, sizeof grid));
  const int64_t *shape = adj_decomposition_global_shape(c->input);
  int p = adj_partition_shape(px)[1];
  int64_t n_in = c->in_features, n_out = c->out_features ? c->out_features : c->in_features;
  ADJ_CHECK(n_in == shape[1], ADJ_ERR_SIZE,
            "%s: in_features %lld does not match the input's width %lld (the previous layer's output)", who,
            (long long)n_in, (long long)shape[1]);
  ADJ_CHECK(c->out_features >= 0, ADJ_ERR_ARG, "%s: out_features %lld is negative", who, (long long)c->out_features);
  ADJ_CHECK(n_in >= p && n_out >= p, ADJ_ERR_SIZE,
            "%s: widths n_in = %lld and n_out = %lld must be at least p = %d so every rank holds a feature", who,
            (long long)n_in, (long long)n_out, p);
  if (tp) return ADJ_SUCCESS;
  ADJ_CHECK(c->ghosts >= 1, ADJ_ERR_ARG, "%s: ghosts k = %lld must be >= 1", who, (long long)c->ghosts);
  int64_t n = n_in < n_out ? n_in : n_out;
  ADJ_CHECK(c->allow_large_k || adj_phantom_k_within_bound(n, p, c->ghosts), ADJ_ERR_ARG,
            "%s: ghosts k = %lld is not below the eq. 8 bound (n/p)(1 - 1/p) = %.3f for n = %lld, p = %d, so the "
            "phantom layer would have no fewer parameters than the dense one (set allow_large_k to accept it)",
            who, (long long)c->ghosts, (double)n / p * (1.0 - 1.0 / p), (long long)n, p);
  int64_t gathered = adj_phantom_mul_add(adj_phantom_mul_add(p, c->ghosts, 0), shape[0], 0);
  ADJ_CHECK(gathered >= 0 && gathered <= INT32_MAX, ADJ_ERR_SIZE, "%s: the gathered ghosts p k N = %d x %lld x %lld exceed %d elements", who, p,
            (long long)c->ghosts, (long long)shape[0], INT32_MAX);
  return ADJ_SUCCESS;
}

/* ---- planning --------------------------------------------------------------------------- */

/* Partitions and layouts that exist only while the layer is created. */
typedef struct adj_phantom_plan {
  int p;
  int64_t batch, n_in, n_out, k;
  adj_partition *flat, *rows; /* the input's ranks as p and as p x 1 */
  adj_partition *first;       /* tp: the input partition's first worker, 1 x 1 */
  adj_decomposition *y, *ghosts, *local, *compressor, *decompressor, *weight, *bias;
  adj_decomposition *global;  /* tp: x (N, n_in) whole on `first`, the broadcast's source */
  int64_t *local_cuts;
} adj_phantom_plan;

static void adj_phantom_plan_free(adj_phantom_plan *p) {
  adj_partition_destroy(&p->flat), adj_partition_destroy(&p->rows), adj_partition_destroy(&p->first);
  adj_decomposition **layouts[] = {&p->y,      &p->ghosts,       &p->local, &p->compressor,
                                   &p->decompressor, &p->weight, &p->bias, &p->global};
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) adj_decomposition_destroy(layouts[i]);
  free(p->local_cuts);
}

static int adj_phantom_layouts(const adj_phantom_layer_config *c, bool tp, adj_phantom_plan *p) {
  const adj_partition *px = adj_decomposition_partition(c->input);
  ADJ_CALL(adj_partition_reshape(px, 1, (const int[1]){p->p}, &p->flat));
  ADJ_CALL(adj_partition_reshape(px, 2, (const int[2]){p->p, 1}, &p->rows));
  ADJ_CALL(adj_decomposition_create(px, 2, (const int64_t[2]){p->batch, p->n_out}, &p->y));
  const int64_t *in_cuts = adj_decomposition_cuts(c->input, 1), *out_cuts = adj_decomposition_cuts(p->y, 1);
  if (!c->no_bias)
    ADJ_CALL(adj_decomposition_create_explicit(p->flat, 1, &p->n_out, (const int64_t *[1]){out_cuts}, &p->bias));
  if (tp) {
    ADJ_CALL(adj_partition_create_sub(px, (const int[2]){0, 0}, (const int[2]){1, 1}, &p->first));
    ADJ_CALL(adj_decomposition_create(p->first, 2, (const int64_t[2]){p->batch, p->n_in}, &p->global));
    return adj_decomposition_create_explicit(p->rows, 2, (const int64_t[2]){p->n_out, p->n_in},
                                             (const int64_t *[2]){out_cuts, NULL}, &p->weight);
  }
  ADJ_CALL(adj_decomposition_create(p->rows, 2, (const int64_t[2]){p->p * p->k, p->batch}, &p->ghosts));
  p->local_cuts = malloc(sizeof *p->local_cuts * (size_t)(p->p + 1));
  ADJ_CHECK(p->local_cuts, ADJ_ERR_MEM, "phantom layer: out of memory");
  p->local_cuts[0] = 0;
  for (int j = 0; j < p->p; j++)
    p->local_cuts[j + 1] = p->local_cuts[j] + (out_cuts[j + 1] - out_cuts[j]) * (in_cuts[j + 1] - in_cuts[j]);
  ADJ_CALL(adj_decomposition_create_explicit(p->flat, 1, &p->local_cuts[p->p],
                                             (const int64_t *[1]){p->local_cuts}, &p->local));
  ADJ_CALL(adj_decomposition_create_explicit(px, 2, (const int64_t[2]){p->k, p->n_in},
                                             (const int64_t *[2]){NULL, in_cuts}, &p->compressor));
  return adj_decomposition_create_explicit(p->rows, 2, (const int64_t[2]){p->n_out, (p->p - 1) * p->k},
                                           (const int64_t *[2]){out_cuts, NULL}, &p->decompressor);
}

/* The operator and work buffers of this worker.  Collective. */
static int adj_phantom_ops(const adj_phantom_layer_config *c, bool tp, const adj_phantom_plan *p,
                           adj_phantom_layer *a) {
  const adj_partition *px = adj_decomposition_partition(c->input);
  adj_box in = adj_decomposition_local_block(c->input), out = adj_decomposition_local_block(p->y);
  *a = (adj_phantom_layer){.tp = tp, .active = adj_partition_active(px), .p = p->p, .batch = p->batch,
                           .n_in = in.extent[1], .n_out = out.extent[1], .k = p->k};
  a->j = a->active ? adj_partition_coords(px)[1] : 0;
  a->root = a->active && a->j == 0;
  if (tp) ADJ_CALL(adj_all_gather_create(c->dtype, c->input, 1, &a->gather));
  else ADJ_CALL(adj_all_gather_create(c->dtype, p->ghosts, 0, &a->gather));
  if (tp) ADJ_CALL(adj_broadcast_create_summing_by_all_reduce(c->dtype, p->global, px, &a->broadcast));
  /* The layer dispatcher has checked and agreed on the caller's tensors; the
   * operators see only the layer's own buffers or those tensors. */
  adj_op_set_checks(a->gather, false);
  int status = adj_op_create_range_tensor(a->gather, &a->G);
  if (!status) status = adj_op_create_range_tensor(a->gather, &a->dG);
  if (tp) {
    adj_op_set_checks(a->broadcast, false);
    if (!status) status = adj_op_create_range_tensor(a->broadcast, &a->copy);
    if (!status) status = adj_op_create_range_tensor(a->broadcast, &a->dcopy);
    if (!status) status = adj_op_create_range_tensor(a->gather, &a->sum); /* zeroed: stays 0 off the root */
    if (!status && !a->root) status = adj_op_create_domain_tensor(a->broadcast, &a->none);
  } else {
    if (!status) status = adj_op_create_domain_tensor(a->gather, &a->g);
    if (!status) status = adj_op_create_domain_tensor(a->gather, &a->dg);
    if (!status) status = adj_op_create_range_tensor(a->gather, &a->e); /* zeroed: the own block stays 0 */
  }
  return adj_layer_agree(c->input, status);
}

static int adj_phantom_create_kind(const char *who, const adj_phantom_layer_config *c, bool tp, adj_layer **layer) {
  ADJ_CHECK(layer, ADJ_ERR_ARG, "%s: output layer pointer is NULL", who);
  *layer = NULL;
  ADJ_CALL(adj_phantom_validate(who, c, tp));
  const int64_t *shape = adj_decomposition_global_shape(c->input);
  adj_phantom_plan p = {.p = adj_partition_shape(adj_decomposition_partition(c->input))[1],
                        .batch = shape[0],
                        .n_in = c->in_features,
                        .n_out = c->out_features ? c->out_features : c->in_features,
                        .k = tp ? 0 : c->ghosts};
  adj_phantom_layer *a = calloc(1, sizeof *a);
  int status = adj_layer_agree(c->input, a ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", who));
  if (!status) status = adj_layer_agree(c->input, adj_phantom_layouts(c, tp, &p));
  if (!status) status = adj_phantom_ops(c, tp, &p, a);
  char name[64];
  if (tp) snprintf(name, sizeof name, "tp[%d]", p.p);
  else snprintf(name, sizeof name, "phantom[%d,k=%lld]", p.p, (long long)p.k);
  if (!status) status = adj_layer_alloc_between(name, c->dtype, c->input, p.y, tp ? &adj_tp_methods : &adj_phantom_methods,
                                                a, layer);
  if (status || !*layer) adj_phantom_free(a);
  if (!status && tp) status = adj_layer_add_parameter(*layer, "weight", p.weight);
  if (!status && !tp) status = adj_layer_add_parameter(*layer, "local", p.local);
  if (!status && !tp) status = adj_layer_add_parameter(*layer, "compressor", p.compressor);
  if (!status && !tp) status = adj_layer_add_parameter(*layer, "decompressor", p.decompressor);
  if (!status && p.bias) status = adj_layer_add_parameter(*layer, "bias", p.bias);
  status = *layer ? adj_layer_agree(c->input, status) : status;
  if (status) adj_layer_destroy(layer);
  adj_phantom_plan_free(&p);
  return status;
}

int adj_phantom_layer_create(const adj_phantom_layer_config *c, adj_layer **layer) {
  return adj_phantom_create_kind("phantom layer", c, false, layer);
}

int adj_tp_layer_create(const adj_phantom_layer_config *c, adj_layer **layer) {
  return adj_phantom_create_kind("tp layer", c, true, layer);
}

/* ---- counters --------------------------------------------------------------------------- */

static adj_phantom_layer *adj_phantom_of(const adj_layer *l) {
  bool ours = l && (l->methods.forward == adj_phantom_forward || l->methods.forward == adj_tp_forward);
  return ours ? l->impl : NULL;
}

int adj_phantom_layer_counters(const adj_layer *l, adj_op_counters *counters) {
  adj_phantom_layer *a = adj_phantom_of(l);
  ADJ_CHECK(a && counters, ADJ_ERR_ARG, "phantom counters: %s is not a phantom or tp layer",
            l ? l->name : "(NULL layer)");
  adj_op_get_counters(a->gather, counters);
  if (!a->broadcast) return ADJ_SUCCESS;
  adj_op_counters b;
  adj_op_get_counters(a->broadcast, &b);
  counters->forward_applications += b.forward_applications, counters->adjoint_applications += b.adjoint_applications;
  counters->bytes_sent += b.bytes_sent, counters->bytes_received += b.bytes_received;
  counters->messages_sent += b.messages_sent, counters->messages_received += b.messages_received;
  return ADJ_SUCCESS;
}

int adj_phantom_layer_reset_counters(adj_layer *l) {
  adj_phantom_layer *a = adj_phantom_of(l);
  ADJ_CHECK(a, ADJ_ERR_ARG, "phantom counters: %s is not a phantom or tp layer", l ? l->name : "(NULL layer)");
  adj_op_reset_counters(a->gather);
  if (a->broadcast) adj_op_reset_counters(a->broadcast);
  a->comm_seconds = 0;
  return ADJ_SUCCESS;
}

double adj_phantom_layer_comm_seconds(const adj_layer *l) {
  adj_phantom_layer *a = adj_phantom_of(l);
  return a ? a->comm_seconds : 0;
}
