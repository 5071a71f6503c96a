/* adjoin-phantom: model sizes, communication and energy of a feed-forward
 * network of width n and depth L under tensor parallelism (TP) and phantom
 * parallelism (PP) on p ranks (paper 003; include/adjoin/phantom_layer.h and
 * energy.h), and under adjoin's 1.5D affine layer on a P_r = p, P_c = 1 grid
 * (pure model parallelism, "1.5D": the same dense weights as TP, an
 * all-gather forward and a reduce-scatter backward per layer).  Pure
 * arithmetic unless --calibrate, which measures alpha and beta with MPI (run
 * it under mpiexec with the ranks to model; every rank computes the same and
 * rank 0 alone prints).  Without --calibrate it never starts MPI
 * (tool_output.h).
 *
 *   adjoin-phantom [--n N] [--p P] [--k K] [--layers L] [--batch B]
 *                  [--A WATTS] [--B WATTS] [--model table3|alpha-beta]
 *                  [--alpha S] [--beta S_PER_BYTE] [--calibrate] [--gflops G]
 *                  [--tp-times TCOMP,TCOMM] [--pp-times TCOMP,TCOMM]
 *                  [--mp15-times TCOMP,TCOMM]
 *                  [--iterations TP_NU,PP_NU] [--table1] [--allow-large-k]
 *
 * Times are seconds per iteration per rank; --tp-times / --pp-times /
 * --mp15-times replace the modelled ones with measured ones (e.g. from
 * bench-phantom).  Energy is
 * per iteration for one rank and for all p ranks, and for the whole run when
 * --iterations gives nu.  Exit status 0, 1 on a model error, 2 on a usage
 * error; messages go to stderr. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/energy.h"
#include "adjoin/parse.h"
#include "adjoin/phantom_layer.h"
#include "adjoin/status.h"
#include "tool_output.h"

enum { EXIT_MODEL = 1, EXIT_USAGE = 2 };
enum { PHANTOM_HELP = -1 }; /* parse_args: the usage was asked for and printed */
/* The largest watts, seconds, GFLOP/s or iteration count taken: products of
 * such figures stay far from overflowing a double. */
#define PHANTOM_REAL_MAX 1e12

static const char usage[] =
    "usage: adjoin-phantom [--n N] [--p P] [--k K] [--layers L] [--batch B] [--A W] [--B W]\n"
    "                      [--model table3|alpha-beta] [--alpha S] [--beta S_PER_BYTE] [--calibrate]\n"
    "                      [--gflops G] [--tp-times TCOMP,TCOMM] [--pp-times TCOMP,TCOMM]\n"
    "                      [--mp15-times TCOMP,TCOMM]\n"
    "                      [--iterations TP_NU,PP_NU] [--table1] [--allow-large-k]\n";

typedef struct phantom_args {
  adj_ffn_shape shape;
  double p_busy, p_idle, alpha, beta, gflops;
  double tp_times[2], pp_times[2], mp15_times[2], iterations[2];
  bool alpha_beta, calibrate, table1, allow_large_k, tp_measured, pp_measured, mp15_measured, have_iterations;
} phantom_args;

static int fail(const char *option, const char *message, const char *text) {
  tool_complain("%s: %s '%s'\n%s", option, message, text ? text : "", usage);
  return EXIT_USAGE;
}

/* count comma-separated non-negative finite numbers (count 1: one number). */
static int parse_reals(const char *option, const char *text, int count, double *out) {
  double values[2];
  int n = 0;
  if (adj_parse_real_list(text, ',', count, 0, PHANTOM_REAL_MAX, option, values, &n)) {
    tool_complain("%s\n%s", adj_last_error(), usage);
    return EXIT_USAGE;
  }
  if (n != count) return fail(option, "expects A,B non-negative numbers, got", text);
  memcpy(out, values, sizeof *out * (size_t)count);
  return 0;
}

/* An integer option stored in an int. */
static int parse_int(const char *option, const char *text, int64_t max, int *out) {
  int64_t v = 0;
  int bad = tool_int64(option, text, 1, max, usage, &v);
  if (!bad) *out = (int)v;
  return bad;
}

static int parse_args(int argc, char **argv, phantom_args *a) {
  *a = (phantom_args){.shape = {.n = 16384, .p = 8, .k = 16, .layers = 2, .batch = 64},
                      .p_busy = ADJ_ENERGY_P_BUSY, .p_idle = ADJ_ENERGY_P_IDLE, .gflops = 100};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(o, "--table1")) a->table1 = true;
    else if (!strcmp(o, "--calibrate")) a->calibrate = a->alpha_beta = true;
    else if (!strcmp(o, "--allow-large-k")) a->allow_large_k = true;
    else if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      if (!tool_quiet()) fputs(usage, stdout);
      return PHANTOM_HELP;
    } else {
      i++;
      if (!strcmp(o, "--n")) bad = tool_int64(o, v, 1, INT64_C(1) << 40, usage, &a->shape.n);
      else if (!strcmp(o, "--p")) bad = parse_int(o, v, 1 << 20, &a->shape.p);
      else if (!strcmp(o, "--k")) bad = tool_int64(o, v, 1, INT64_C(1) << 40, usage, &a->shape.k);
      else if (!strcmp(o, "--layers")) bad = parse_int(o, v, 1 << 20, &a->shape.layers);
      else if (!strcmp(o, "--batch")) bad = tool_int64(o, v, 1, INT64_C(1) << 40, usage, &a->shape.batch);
      else if (!strcmp(o, "--A")) bad = parse_reals(o, v, 1, &a->p_busy);
      else if (!strcmp(o, "--B")) bad = parse_reals(o, v, 1, &a->p_idle);
      else if (!strcmp(o, "--alpha")) bad = parse_reals(o, v, 1, &a->alpha), a->alpha_beta = true;
      else if (!strcmp(o, "--beta")) bad = parse_reals(o, v, 1, &a->beta), a->alpha_beta = true;
      else if (!strcmp(o, "--gflops")) bad = tool_real(o, v, 1e-9, PHANTOM_REAL_MAX, usage, &a->gflops);
      else if (!strcmp(o, "--tp-times")) bad = parse_reals(o, v, 2, a->tp_times), a->tp_measured = true;
      else if (!strcmp(o, "--pp-times")) bad = parse_reals(o, v, 2, a->pp_times), a->pp_measured = true;
      else if (!strcmp(o, "--mp15-times")) bad = parse_reals(o, v, 2, a->mp15_times), a->mp15_measured = true;
      else if (!strcmp(o, "--iterations")) bad = parse_reals(o, v, 2, a->iterations), a->have_iterations = true;
      else if (!strcmp(o, "--model")) {
        if (v && !strcmp(v, "table3")) a->alpha_beta = false;
        else if (v && !strcmp(v, "alpha-beta")) a->alpha_beta = true;
        else bad = fail(o, "expects table3 or alpha-beta, got", v);
      } else return fail(o, "unknown option", o);
      if (bad) return bad;
    }
  }
  if (a->shape.n < a->shape.p) {
    tool_complain("--n %lld is smaller than --p %d: every rank needs a feature\n", (long long)a->shape.n, a->shape.p);
    return EXIT_USAGE;
  }
  return 0;
}

/* Parameters of the whole model (L layers) in Table I's four columns: total
 * and rank 0, weights alone and with biases; rows TP and PP. */
typedef struct phantom_sizes {
  int64_t tp[4], pp[4];
} phantom_sizes;

/* L times the weights and the weights + biases of `all` and `rank0`; nonzero
 * when a count does not fit int64 (adj_phantom_layer_size gives -1 then). */
static int scale_sizes(int layers, adj_phantom_size all, adj_phantom_size rank0, int64_t out[4]) {
  adj_phantom_size one[2] = {all, rank0};
  for (int i = 0; i < 2; i++) {
    int64_t with_bias;
    if (one[i].weights < 0 || adj_int64_add(one[i].weights, one[i].biases, "weights + biases", &with_bias) ||
        adj_int64_mul(layers, one[i].weights, "layers x weights", &out[2 * i]) ||
        adj_int64_mul(layers, with_bias, "layers x (weights + biases)", &out[2 * i + 1]))
      return -1;
  }
  return 0;
}

/* Model sizes of Table I: L (n^2/p + p k n) for PP, L n^2 for TP; a model
 * whose parameter count does not fit int64 is refused naming the sizes. */
static int count_sizes(const adj_ffn_shape *s, phantom_sizes *out) {
  if (!scale_sizes(s->layers, adj_tp_layer_size(s->n, s->n, s->p, -1), adj_tp_layer_size(s->n, s->n, s->p, 0),
                   out->tp) &&
      !scale_sizes(s->layers, adj_phantom_layer_size(s->n, s->n, s->p, s->k, -1),
                   adj_phantom_layer_size(s->n, s->n, s->p, s->k, 0), out->pp))
    return 0;
  tool_complain("--n %lld with --layers %d: the dense model's %d x %lld x %lld parameters (or the phantom model's) "
                "are more than int64 counts\n",
                (long long)s->n, s->layers, s->layers, (long long)s->n, (long long)s->n);
  return EXIT_USAGE;
}

static double mega(int64_t v) { return (double)v / 1e6; }

static void print_sizes(const adj_ffn_shape *s, const phantom_sizes *z) {
  printf("model size (parameters; L = %d layers)\n", s->layers);
  printf("  %-4s %16s %16s %16s %16s\n", "", "total", "total+bias", "rank 0", "rank 0+bias");
  printf("  %-4s %16lld %16lld %16lld %16lld   (%.1f M)\n", "TP", (long long)z->tp[0], (long long)z->tp[1],
         (long long)z->tp[2], (long long)z->tp[3], mega(z->tp[0]));
  printf("  %-4s the same dense weights as TP, rows split over P_r = %d\n", "1.5D", s->p);
  printf("  %-4s %16lld %16lld %16lld %16lld   (%.1f M)\n", "PP", (long long)z->pp[0], (long long)z->pp[1],
         (long long)z->pp[2], (long long)z->pp[3], mega(z->pp[0]));
}

static void print_table1(void) {
  static const int pairs[][2] = {{8, 16}, {16, 6}, {32, 4}, {64, 2}, {128, 2}, {256, 4}};
  printf("Table I model sizes, n = 16384, L = 2 (M = 1e6 parameters, weights only as the paper prints)\n");
  printf("  %5s %3s %10s %10s %14s\n", "p", "k", "TP (M)", "PP (M)", "PP+bias (M)");
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
    adj_phantom_size pp = adj_phantom_layer_size(16384, 16384, pairs[i][0], pairs[i][1], -1);
    adj_phantom_size tp = adj_tp_layer_size(16384, 16384, pairs[i][0], -1);
    printf("  %5d %3d %10.0f %10.0f %14.2f\n", pairs[i][0], pairs[i][1], mega(2 * tp.weights), mega(2 * pp.weights),
           mega(2 * (pp.weights + pp.biases)));
  }
}

static void print_comm(const adj_comm_model *m, const adj_ffn_shape *s) {
  double full = (double)s->n * s->batch, part = full / s->p, ghosts = (double)s->k * s->batch;
  printf("communication per layer and iteration (Table II message sizes in floats; %s model)\n",
         m->kind == ADJ_COMM_FITTED ? "Table III fitted" : "alpha-beta");
  if (m->kind == ADJ_COMM_ALPHA_BETA)
    printf("  alpha %.3e s, beta %.3e s/B (%.2f GB/s)\n", m->alpha, m->beta, m->beta > 0 ? 1e-9 / m->beta : 0.0);
  const struct {
    const char *model;
    adj_collective c;
    double m;
  } rows[] = {{"TP", ADJ_COLL_BROADCAST, full},    {"TP", ADJ_COLL_ALL_GATHER, part},
              {"TP", ADJ_COLL_ALL_REDUCE, full},   {"TP", ADJ_COLL_REDUCE_SCATTER, part},
              {"1.5D", ADJ_COLL_ALL_GATHER, part}, {"1.5D", ADJ_COLL_REDUCE_SCATTER, part},
              {"PP", ADJ_COLL_ALL_GATHER, ghosts}, {"PP", ADJ_COLL_REDUCE_SCATTER, ghosts}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    printf("  %-4s %-15s m = %12.0f  %12.3f us\n", rows[i].model, adj_collective_name(rows[i].c), rows[i].m,
           1e6 * adj_comm_time(m, rows[i].c, rows[i].m, s->p));
  /* Bytes of one layer's step, counted as the layers' operators count them. */
  adj_ffn_shape one = *s;
  one.layers = 1;
  printf("  bytes per rank and layer (sent + received, mean over ranks): TP %.0f, 1.5D %.0f, PP %.0f\n",
         m->word_bytes * adj_tp_message_floats(&one), m->word_bytes * adj_mp15_message_floats(&one),
         m->word_bytes * adj_pp_message_floats(&one));
}

static void print_energy(const phantom_args *a, const adj_comm_model *m) {
  const adj_ffn_shape *s = &a->shape;
  double tp[2] = {adj_tp_flops(s) / (a->gflops * 1e9), adj_tp_comm_time(m, s)};
  double pp[2] = {adj_pp_flops(s) / (a->gflops * 1e9), adj_pp_comm_time(m, s)};
  double mp[2] = {adj_mp15_flops(s) / (a->gflops * 1e9), adj_mp15_comm_time(m, s)};
  if (a->tp_measured) tp[0] = a->tp_times[0], tp[1] = a->tp_times[1];
  if (a->pp_measured) pp[0] = a->pp_times[0], pp[1] = a->pp_times[1];
  if (a->mp15_measured) mp[0] = a->mp15_times[0], mp[1] = a->mp15_times[1];
  bool measured = a->tp_measured || a->pp_measured || a->mp15_measured;
  printf("energy per iteration (A = %.0f W busy, B = %.0f W idle; t_comp %s, t_comm %s)\n", a->p_busy, a->p_idle,
         measured ? "measured where given" : "from flops at --gflops", measured ? "measured where given" : "modelled");
  printf("  %-4s %12s %12s %14s %14s %12s\n", "", "t_comp (s)", "t_comm (s)", "e/rank (J)", "e, p ranks (J)",
         "floats moved");
  /* The iteration counts to the target (--iterations) are TP's and PP's;
   * the 1.5D layer computes TP's function, so it takes TP's. */
  const double *times[3] = {tp, mp, pp};
  const char *names[3] = {"TP", "1.5D", "PP"};
  double floats[3] = {adj_tp_message_floats(s), adj_mp15_message_floats(s), adj_pp_message_floats(s)};
  double nu[3] = {a->iterations[0], a->iterations[0], a->iterations[1]};
  for (int i = 0; i < 3; i++) {
    double e = adj_energy(a->p_busy, a->p_idle, times[i][0], times[i][1]);
    printf("  %-4s %12.4e %12.4e %14.4e %14.4e %12.0f", names[i], times[i][0], times[i][1], e, e * s->p, floats[i]);
    if (a->have_iterations) printf("   E(nu = %.0f) = %.4e J", nu[i], e * s->p * nu[i]);
    printf("\n");
  }
  double e_tp = adj_energy(a->p_busy, a->p_idle, tp[0], tp[1]), e_pp = adj_energy(a->p_busy, a->p_idle, pp[0], pp[1]);
  double e_mp = adj_energy(a->p_busy, a->p_idle, mp[0], mp[1]);
  printf("  PP / TP: energy per iteration %.3f, communication time %.3f\n", e_tp > 0 ? e_pp / e_tp : 0.0,
         tp[1] > 0 ? pp[1] / tp[1] : 0.0);
  printf("  PP / 1.5D: energy per iteration %.3f, communication time %.3f\n", e_mp > 0 ? e_pp / e_mp : 0.0,
         mp[1] > 0 ? pp[1] / mp[1] : 0.0);
}

static int phantom_run(int argc, char **argv, int ranks) {
  phantom_args a;
  int bad = parse_args(argc, argv, &a);
  if (bad) return bad == PHANTOM_HELP ? 0 : bad;
  const adj_ffn_shape *s = &a.shape;
  phantom_sizes sizes;
  bad = count_sizes(s, &sizes);
  if (bad) return bad;
  adj_comm_model model = a.alpha_beta ? adj_comm_model_alpha_beta(a.alpha, a.beta, 4) : adj_comm_model_table3();
  /* The calibration's status is agreed, so every rank returns alike. */
  if (a.calibrate && adj_comm_model_calibrate(MPI_COMM_WORLD, &model)) {
    tool_complain("calibrate: %s\n", tool_error());
    return EXIT_MODEL;
  }
  bool within = adj_phantom_k_within_bound(s->n, s->p, s->k);
  if (!tool_quiet()) {
    if (a.calibrate) printf("calibrated on %d ranks of this machine\n", ranks);
    printf("FFN n = %lld, L = %d, batch %lld, p = %d, k = %lld\n", (long long)s->n, s->layers, (long long)s->batch,
           s->p, (long long)s->k);
  }
  if (!within)
    tool_complain("k = %lld is not below the eq. 8 bound (n/p)(1 - 1/p) = %.3f: the phantom model is not smaller "
                  "than the dense one%s\n",
                  (long long)s->k, (double)s->n / s->p * (1.0 - 1.0 / s->p), a.allow_large_k ? " (allowed)" : "");
  if (!within && !a.allow_large_k) return EXIT_MODEL;
  if (tool_quiet()) return 0;
  print_sizes(s, &sizes);
  print_comm(&model, s);
  print_energy(&a, &model);
  if (a.table1) print_table1();
  return 0;
}

/* MPI only for --calibrate: otherwise a plain process (tool_output.h). */
int main(int argc, char **argv) {
  int ranks = 1;
  tool_begin("adjoin-phantom");
  if (tool_has_flag(argc, argv, "--calibrate") && tool_begin_mpi(&argc, &argv, &ranks)) return EXIT_MODEL;
  return tool_end(phantom_run(argc, argv, ranks));
}
