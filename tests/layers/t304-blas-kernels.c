/* OpenBLAS's kernels against the CPU: the judgement flags kernels without
 * AVX2 and FMA on x86-64-v3 and v4 CPUs, names the kernels, the CPU and the
 * OPENBLAS_CORETYPE value of the level, and stays quiet when the CPU is below
 * v3, when the kernels have AVX2 (any case of their name) and when the user
 * has set OPENBLAS_CORETYPE; the width of each kernel family's vectors; then
 * this host's own answer, which agrees with what OpenBLAS reports, and the
 * value to export names what the advice says. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "threads_impl.h"

typedef struct judge_case {
  const char *core;
  int cpu_level;
  const char *coretype;
  bool behind;
  const char *names; /* in the advice, when behind */
} judge_case;

static const judge_case cases[] = {
    {"Prescott", 4, NULL, true, "SkylakeX"},
    {"Prescott", 3, NULL, true, "Haswell"},
    {"Sandybridge", 4, NULL, true, "SkylakeX"},
    {"Prescott", 4, "Prescott", false, NULL},
    {"Prescott", 0, NULL, false, NULL},
    {"SkylakeX", 4, NULL, false, NULL},
    {"HASWELL", 3, NULL, false, NULL},
    {"Zen", 4, NULL, false, NULL},
    {NULL, 4, NULL, false, NULL},
};

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t304-blas-kernels");
  char advice[256];
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const judge_case *c = &cases[i];
    memset(advice, 'x', sizeof advice);
    bool behind = adj_blas_kernels_judge(c->core, c->cpu_level, c->coretype, "family 6 model 207", advice,
                                         sizeof advice);
    adj_test_report(&t, "%-11s on level %d, OPENBLAS_CORETYPE %-8s: %s '%s'", c->core ? c->core : "(none)",
                    c->cpu_level, c->coretype ? c->coretype : "unset", behind ? "behind" : "fine", advice);
    ADJ_TEST_CHECK(&t, behind == c->behind, "%s on level %d: behind %d, expected %d", c->core ? c->core : "NULL",
                   c->cpu_level, behind, c->behind);
    if (c->behind)
      ADJ_TEST_CHECK(&t, strstr(advice, c->core) && strstr(advice, c->names) && strstr(advice, "model 207"),
                     "advice '%s' names neither the kernels, the value %s nor the CPU", advice, c->names);
    else
      ADJ_TEST_CHECK(&t, advice[0] == '\0', "no advice expected, got '%.40s'", advice);
  }
  /* A short buffer gets a terminated prefix. */
  char small[8];
  adj_blas_kernels_judge("Prescott", 4, NULL, "?", small, sizeof small);
  ADJ_TEST_CHECK(&t, strlen(small) == sizeof small - 1, "an 8-byte buffer holds '%s'", small);

  /* The width of each family's GEMM vectors, which the convolution's rule
   * weighs against its own kernels'. */
  static const struct {
    const char *core;
    int bytes;
  } widths[] = {{"SkylakeX", 64}, {"cooperlake", 64}, {"SapphireRapids", 64}, {"Haswell", 32}, {"ZEN", 32},
                {"Excavator", 32}, {"Sandybridge", 16}, {"Prescott", 16}, {"NEOVERSEN1", 16}, {NULL, 16}};
  for (size_t i = 0; i < sizeof widths / sizeof *widths; i++) {
    int bytes = adj_blas_core_vector_bytes(widths[i].core);
    adj_test_report(&t, "%-14s GEMM vectors of %d bytes", widths[i].core ? widths[i].core : "(none)", bytes);
    ADJ_TEST_CHECK(&t, bytes == widths[i].bytes, "%s: %d bytes, expected %d", widths[i].core ? widths[i].core : "NULL",
                   bytes, widths[i].bytes);
  }

  bool behind = adj_blas_kernels_behind(advice, sizeof advice);
  const char *core = openblas_get_corename();
  adj_test_report(&t, "this host: OpenBLAS kernels %s, OPENBLAS_CORETYPE %s: %s '%s'", core,
                  getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "unset", behind ? "behind" : "fine",
                  advice);
  ADJ_TEST_CHECK(&t, !behind || strstr(advice, core), "advice '%s' does not name the kernels %s", advice, core);
  const char *coretype = adj_blas_kernels_coretype();
  char wanted[32] = "";
  if (coretype) snprintf(wanted, sizeof wanted, "OPENBLAS_CORETYPE=%s ", coretype);
  adj_test_report(&t, "this host: the value to export is %s", coretype ? coretype : "(none)");
  ADJ_TEST_CHECK(&t, behind == (coretype != NULL) && (!coretype || strstr(advice, wanted)),
                 "adj_blas_kernels_coretype '%s' against the advice '%s'", coretype ? coretype : "(none)", advice);
  setenv("OPENBLAS_CORETYPE", core, 1); /* the user's choice stands */
  ADJ_TEST_CHECK(&t, adj_blas_kernels_coretype() == NULL, "with OPENBLAS_CORETYPE set: the value to export is %s",
                 adj_blas_kernels_coretype());
  ADJ_TEST_CHECK(&t, !adj_blas_kernels_behind(advice, sizeof advice) && advice[0] == '\0',
                 "with OPENBLAS_CORETYPE set: advice '%s'", advice);
  ADJ_TEST_CHECK(&t, !adj_blas_kernels_behind(NULL, 0), "a NULL advice buffer");
  return adj_test_finish(&t);
}
