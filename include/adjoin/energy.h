/* Communication and energy model of phantom parallelism (paper 003, section
 * 2.4 of the specs): what a layer of width n costs per iteration under tensor
 * parallelism (TP) and phantom parallelism (PP) on p ranks, and the energy
 *
 *   e = P_busy * t_comp + P_idle * t_comm        (eq. 1; A = P_busy, B = P_idle)
 *   E = nu * e                                   (eq. 2; nu iterations to the target loss)
 *
 * per iteration, summed over the layers.  The paper's alpha / beta in eq. 1
 * are times; they are named t_comp / t_comm here so they do not clash with
 * the latency / inverse bandwidth of the alpha-beta model below.
 *
 * Collective times come from one of two models:
 *   fitted      Table III: t(m, p) = c1 log2(p) + c2 m + c3 microseconds for
 *               a message of m floats (eq. 26), fitted on Frontier;
 *   alpha-beta  t = alpha ceil(log2 p) + beta V, V the logical bytes per rank
 *               (specs section 0: (p-1)/p of the gathered or reduced buffer
 *               for all-gather and reduce-scatter, twice that for all-reduce
 *               and broadcast, as scatter + all-gather), with alpha and beta
 *               given or calibrated on this machine (adj_comm_model_calibrate).
 *
 * Per layer and iteration the collectives are Table II's, message sizes in
 * floats: TP broadcast n N, all-gather n/p N, all-reduce n N, reduce-scatter
 * n/p N; PP all-gather k N and reduce-scatter k N.  adjoin's 1.5D affine
 * layer (affine15_layer.h) on a P_r = p, P_c = 1 grid, pure model parallelism, is
 * modelled in the same terms ("mp15"): per layer an all-gather of n/p N
 * forward (the input features) and its adjoint, a reduce-scatter of n/p N,
 * backward; its weight broadcasts over P_c = 1 move nothing.  The compute
 * model counts the GEMM flops of forward and backward per rank (3 GEMMs per
 * product: the forward, the input gradient and the weight gradient).
 *
 * Everything but calibration is pure arithmetic; calibration is collective. */
#ifndef ADJOIN_ENERGY_H
#define ADJOIN_ENERGY_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_collective {
  ADJ_COLL_BROADCAST = 0,
  ADJ_COLL_ALL_REDUCE = 1,
  ADJ_COLL_ALL_GATHER = 2,
  ADJ_COLL_REDUCE_SCATTER = 3,
  ADJ_COLL_COUNT = 4,
} adj_collective;

const char *adj_collective_name(adj_collective c);

typedef enum adj_comm_model_kind { ADJ_COMM_FITTED = 0, ADJ_COMM_ALPHA_BETA = 1 } adj_comm_model_kind;

typedef struct adj_comm_model {
  adj_comm_model_kind kind;
  /* fitted: microseconds per log2(p), per float, and constant, per collective */
  double c1[ADJ_COLL_COUNT], c2[ADJ_COLL_COUNT], c3[ADJ_COLL_COUNT];
  /* alpha-beta: seconds per message step, seconds per byte */
  double alpha, beta;
  int word_bytes; /* bytes per float of the model's messages (4) */
} adj_comm_model;

/* Table III of the paper (c3 = 0, as the paper drops it). */
adj_comm_model adj_comm_model_table3(void);
/* The alpha-beta model with the given latency (s) and inverse bandwidth (s/B). */
adj_comm_model adj_comm_model_alpha_beta(double alpha, double beta, int word_bytes);
/* Measures alpha and beta on comm: times all-gathers of several sizes (the
 * layer's own operation) and fits t = alpha ceil(log2 p) + beta V by least
 * squares.  Collective; every rank gets the same model.  Needs >= 2 ranks. */
int adj_comm_model_calibrate(MPI_Comm comm, adj_comm_model *model);

/* Seconds one collective of m floats per rank (Table II's message size) takes
 * on p ranks; 0 when p == 1. */
double adj_comm_time(const adj_comm_model *model, adj_collective c, double m, int p);

typedef struct adj_ffn_shape {
  int64_t n;     /* width of every layer */
  int p;         /* ranks */
  int64_t k;     /* ghosts per rank (PP only) */
  int layers;    /* L */
  int64_t batch; /* N */
} adj_ffn_shape;

/* Communication seconds per iteration (all layers, forward and backward). */
double adj_tp_comm_time(const adj_comm_model *model, const adj_ffn_shape *s);
double adj_pp_comm_time(const adj_comm_model *model, const adj_ffn_shape *s);
double adj_mp15_comm_time(const adj_comm_model *model, const adj_ffn_shape *s);
/* GEMM flops per rank per iteration (forward and backward, all layers). */
double adj_tp_flops(const adj_ffn_shape *s);
double adj_pp_flops(const adj_ffn_shape *s);
double adj_mp15_flops(const adj_ffn_shape *s);
/* Floats each rank moves (sends plus receives) through Table II's
 * collectives per iteration, mean over the ranks, counted as adjoin's
 * operators count them, so it equals what adj_phantom_layer_counters report
 * for layers whose backward computes dx (test t324).  Per layer, p > 1:
 * TP n N (broadcast) + n N (all-gather) + 2 n N (all-reduce)
 * + 2 (p-1)/p n N (reduce-scatter); PP p k N + 2 (p-1) k N; mp15 n N
 * (all-gather) + 2 (p-1)/p n N (reduce-scatter), which equals what
 * adj_affine15_layer_counters report on a p x 1 grid (t324). */
double adj_tp_message_floats(const adj_ffn_shape *s);
double adj_pp_message_floats(const adj_ffn_shape *s);
double adj_mp15_message_floats(const adj_ffn_shape *s);

/* Printed defaults of the paper (Frontier MI250X, per device as printed). */
#define ADJ_ENERGY_P_BUSY 560.0
#define ADJ_ENERGY_P_IDLE 90.0

/* e = p_busy t_comp + p_idle t_comm (joules per rank). */
double adj_energy(double p_busy, double p_idle, double t_comp, double t_comm);

ADJ_END_DECLS

#endif
