/* Communication and energy model of phantom parallelism (energy.h). */
#include <math.h>
#include <stdlib.h>

#include "adjoin/agree.h"
#include "adjoin/energy.h"
#include "adjoin/status.h"
#include "adjoin/wait.h"
#include "error_impl.h"

static const char *const adj_collective_names[ADJ_COLL_COUNT] = {"broadcast", "all-reduce", "all-gather",
                                                                 "reduce-scatter"};

const char *adj_collective_name(adj_collective c) {
  return c >= 0 && c < ADJ_COLL_COUNT ? adj_collective_names[c] : "unknown";
}

adj_comm_model adj_comm_model_table3(void) {
  /* Table III, in the order of adj_collective: c1 (us per log2 p), c2 (us per float). */
  return (adj_comm_model){.kind = ADJ_COMM_FITTED,
                          .c1 = {35.5, 33.4, 149.94, 145.52},
                          .c2 = {1.12e-3, 2.56e-3, 2.07e-3, 2.40e-3},
                          .c3 = {0, 0, 0, 0},
                          .word_bytes = 4};
}

adj_comm_model adj_comm_model_alpha_beta(double alpha, double beta, int word_bytes) {
  return (adj_comm_model){.kind = ADJ_COMM_ALPHA_BETA, .alpha = alpha, .beta = beta, .word_bytes = word_bytes};
}

static double adj_log2_steps(int p) { return p > 1 ? ceil(log2((double)p)) : 0; }

/* Logical bytes per rank of a collective whose per-rank message is m floats:
 * all-gather and reduce-scatter move (p-1)/p of the p m gathered floats;
 * broadcast and all-reduce of m floats move 2 (p-1)/p m. */
static double adj_logical_bytes(const adj_comm_model *model, adj_collective c, double m, int p) {
  double share = (double)(p - 1) / p;
  double floats = c == ADJ_COLL_ALL_GATHER || c == ADJ_COLL_REDUCE_SCATTER ? share * p * m : 2 * share * m;
  return floats * model->word_bytes;
}

double adj_comm_time(const adj_comm_model *model, adj_collective c, double m, int p) {
  if (p <= 1 || c < 0 || c >= ADJ_COLL_COUNT) return 0;
  if (model->kind == ADJ_COMM_FITTED) return 1e-6 * (model->c1[c] * log2((double)p) + model->c2[c] * m + model->c3[c]);
  return model->alpha * adj_log2_steps(p) + model->beta * adj_logical_bytes(model, c, m, p);
}

/* One row of Table II: a collective and its message size m in floats. */
typedef struct adj_table2_row {
  adj_collective collective;
  double m;
} adj_table2_row;

/* The layers the model knows: Table II's TP and PP, and adjoin's 1.5D
 * affine layer on a P_r = p, P_c = 1 grid (model parallel), whose input
 * all-gather and its adjoint reduce-scatter are TP's without the broadcast
 * and the all-reduce (its weight broadcasts over P_c = 1 move nothing). */
typedef enum adj_ffn_kind { ADJ_FFN_TP, ADJ_FFN_PP, ADJ_FFN_MP15 } adj_ffn_kind;

/* Table II's rows of one layer and iteration (and the 1.5D layer's in the
 * same terms); returns how many. */
static int adj_table2(const adj_ffn_shape *s, adj_ffn_kind kind, adj_table2_row rows[4]) {
  double full = (double)s->n * s->batch, part = full / s->p, ghosts = (double)s->k * s->batch;
  if (kind == ADJ_FFN_PP) {
    rows[0] = (adj_table2_row){ADJ_COLL_ALL_GATHER, ghosts};
    rows[1] = (adj_table2_row){ADJ_COLL_REDUCE_SCATTER, ghosts};
    return 2;
  }
  rows[0] = (adj_table2_row){ADJ_COLL_ALL_GATHER, part};
  rows[1] = (adj_table2_row){ADJ_COLL_REDUCE_SCATTER, part};
  if (kind == ADJ_FFN_MP15) return 2;
  rows[2] = (adj_table2_row){ADJ_COLL_BROADCAST, full};
  rows[3] = (adj_table2_row){ADJ_COLL_ALL_REDUCE, full};
  return 4;
}

static double adj_ffn_comm_time(const adj_comm_model *model, const adj_ffn_shape *s, adj_ffn_kind kind) {
  adj_table2_row rows[4];
  double layer = 0;
  for (int i = 0, n = adj_table2(s, kind, rows); i < n; i++)
    layer += adj_comm_time(model, rows[i].collective, rows[i].m, s->p);
  return s->layers * layer;
}

double adj_tp_comm_time(const adj_comm_model *model, const adj_ffn_shape *s) {
  return adj_ffn_comm_time(model, s, ADJ_FFN_TP);
}

double adj_pp_comm_time(const adj_comm_model *model, const adj_ffn_shape *s) {
  return adj_ffn_comm_time(model, s, ADJ_FFN_PP);
}

double adj_mp15_comm_time(const adj_comm_model *model, const adj_ffn_shape *s) {
  return adj_ffn_comm_time(model, s, ADJ_FFN_MP15);
}

double adj_tp_flops(const adj_ffn_shape *s) {
  /* W_j (n/p, n) against N columns: forward, input gradient, weight gradient. */
  return s->layers * 3.0 * 2.0 * s->batch * ((double)s->n / s->p) * (double)s->n;
}

/* The same GEMMs as TP: W_r (n/p, n) against the gathered input. */
double adj_mp15_flops(const adj_ffn_shape *s) { return adj_tp_flops(s); }

double adj_pp_flops(const adj_ffn_shape *s) {
  /* L_j (n/p, n/p), C_j (k, n/p) and p-1 blocks D_ij (n/p, k), three GEMMs each. */
  double np = (double)s->n / s->p;
  return s->layers * 3.0 * 2.0 * s->batch * (np * np + (double)s->k * np + (double)(s->p - 1) * np * s->k);
}

/* Floats one collective with Table II's message m moves per rank, sent plus
 * received, mean over the p ranks, as adjoin's operator counters count them:
 * an all-gather sends m and receives (p-1) m (its own chunk counts as sent
 * even on one rank); a reduce-scatter sends and receives (p-1) m; a
 * broadcast's root sends m and the p-1 others receive it; an all-reduce
 * sends and receives m everywhere; on one rank the last two are local
 * copies. */
static double adj_counted_floats(adj_collective c, double m, int p) {
  switch (c) {
  case ADJ_COLL_ALL_GATHER: return p * m;
  case ADJ_COLL_REDUCE_SCATTER: return 2.0 * (p - 1) * m;
  case ADJ_COLL_BROADCAST: return p > 1 ? m : 0;
  default: return p > 1 ? 2.0 * m : 0;
  }
}

static double adj_ffn_message_floats(const adj_ffn_shape *s, adj_ffn_kind kind) {
  adj_table2_row rows[4];
  double layer = 0;
  for (int i = 0, n = adj_table2(s, kind, rows); i < n; i++)
    layer += adj_counted_floats(rows[i].collective, rows[i].m, s->p);
  return s->layers * layer;
}

double adj_tp_message_floats(const adj_ffn_shape *s) { return adj_ffn_message_floats(s, ADJ_FFN_TP); }

double adj_pp_message_floats(const adj_ffn_shape *s) { return adj_ffn_message_floats(s, ADJ_FFN_PP); }

double adj_mp15_message_floats(const adj_ffn_shape *s) { return adj_ffn_message_floats(s, ADJ_FFN_MP15); }

double adj_energy(double p_busy, double p_idle, double t_comp, double t_comm) {
  return p_busy * t_comp + p_idle * t_comm;
}

/* ---- calibration ------------------------------------------------------------------------ */

enum { ADJ_CAL_SIZES = 6, ADJ_CAL_REPEATS = 20 };

/* The minimum over repeats is the least disturbed by other
 * processes on a shared machine.  Every rank returns rank 0's time. */
static int adj_cal_time(MPI_Comm comm, adj_wait_policy policy, int count, float *send, float *recv,
                        double *seconds) {
  double best = INFINITY;
  for (int r = 0; r < ADJ_CAL_REPEATS; r++) {
    MPI_Request request;
    double t0 = MPI_Wtime();
    ADJ_CALL_MPI(MPI_Iallgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, comm, &request));
    ADJ_CALL(adj_wait_all(1, &request, policy));
    best = fmin(best, MPI_Wtime() - t0);
  }
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Ibcast(&best, 1, MPI_DOUBLE, 0, comm, &request));
  ADJ_CALL(adj_wait_all(1, &request, policy));
  *seconds = best;
  return ADJ_SUCCESS;
}

int adj_comm_model_calibrate(MPI_Comm comm, adj_comm_model *model) {
  int p;
  MPI_Comm_size(comm, &p);
  ADJ_CHECK(p >= 2, ADJ_ERR_ARG, "comm model calibrate: needs at least 2 ranks, the communicator has %d", p);
  static const int counts[ADJ_CAL_SIZES] = {1, 256, 4096, 16384, 65536, 262144};
  int most = counts[ADJ_CAL_SIZES - 1];
  float *send = calloc((size_t)most, sizeof *send), *recv = calloc((size_t)most * (size_t)p, sizeof *recv);
  adj_wait_policy policy = ADJ_WAIT_YIELD;
  int status = adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &policy);
  if (!status && !(send && recv)) status = adj_error_set(ADJ_ERR_MEM, "comm model calibrate: out of memory");
  status = adj_status_agree(comm, status, ADJ_WAIT_YIELD);
  /* Least squares of t = alpha steps + beta V over the sizes. */
  double sx = 0, sy = 0, sxx = 0, sxy = 0, steps = adj_log2_steps(p);
  for (int i = 0; !status && i < ADJ_CAL_SIZES; i++) {
    double t = 0;
    status = adj_cal_time(comm, policy, counts[i], send, recv, &t);
    double v = (double)(p - 1) * counts[i] * sizeof(float);
    sx += v, sy += t, sxx += v * v, sxy += v * t;
  }
  free(send), free(recv);
  ADJ_CALL(status);
  double n = ADJ_CAL_SIZES, beta = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double intercept = (sy - beta * sx) / n;
  *model = adj_comm_model_alpha_beta(fmax(intercept, 0) / steps, fmax(beta, 0), 4);
  return ADJ_SUCCESS;
}
