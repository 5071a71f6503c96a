/* The CPU's x86-64 level and model as the library reads them, against the
 * kernel's own account in /proc/cpuinfo: level 4 exactly when the CPU has
 * x86-64-v4's AVX-512 subsets and v3's features, level 3 when it has only
 * v3's, else 0; "family F model M" as /proc/cpuinfo numbers them.  Elsewhere
 * (no /proc/cpuinfo, not x86-64) the level must be 0 and the model "?". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"
#include "harness.h"

#if defined(__x86_64__)
/* Whether the space-separated flag list has `flag` as a whole word. */
static bool has_flag(const char *flags, const char *flag) {
  size_t n = strlen(flag);
  for (const char *p = flags; (p = strstr(p, flag)); p += n)
    if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0')) return true;
  return false;
}

/* The first processor's flags, family and model; false without /proc/cpuinfo. */
static bool read_cpuinfo(char *flags, size_t size, int *family, int *model) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return false;
  char line[8192];
  flags[0] = '\0';
  *family = *model = -1;
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "flags", 5) && !flags[0]) snprintf(flags, size, "%s", strchr(line, ':') + 1);
    else if (!strncmp(line, "cpu family", 10) && *family < 0) *family = atoi(strchr(line, ':') + 1);
    else if (!strncmp(line, "model\t", 6) && *model < 0) *model = atoi(strchr(line, ':') + 1);
  }
  fclose(f);
  return flags[0] != '\0';
}

/* Level and model against /proc/cpuinfo's flags, family and model. */
static void check_x86(adj_test *t, int level, const char *model, const char *flags, int family, int number) {
  static const char *const v3[] = {"avx", "avx2", "bmi1", "bmi2", "fma", "f16c", "movbe", "abm"};
  static const char *const v4[] = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};
  bool has_v3 = true, has_v4 = true;
  for (size_t i = 0; i < sizeof v3 / sizeof *v3; i++) has_v3 &= has_flag(flags, v3[i]);
  for (size_t i = 0; i < sizeof v4 / sizeof *v4; i++) has_v4 &= has_flag(flags, v4[i]);
  int expected = has_v3 && has_v4 ? 4 : has_v3 ? 3 : 0;
  char want_model[64];
  snprintf(want_model, sizeof want_model, "family %d model %d", family, number);
  adj_test_report(t, "this CPU: level %d (from /proc/cpuinfo's flags: %d), '%s' (/proc/cpuinfo: '%s')", level,
                  expected, model, want_model);
  ADJ_TEST_CHECK(t, level == expected, "level %d, /proc/cpuinfo's flags say %d", level, expected);
  ADJ_TEST_CHECK(t, !strcmp(model, want_model), "model '%s', /proc/cpuinfo says '%s'", model, want_model);
}
#endif

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t005-cpu-level");
  int level = adj_cpu_x86_level();
  char model[64];
  adj_cpu_family_model(model, sizeof model);
  bool x86 = false;
#if defined(__x86_64__)
  char flags[8192];
  int family = -1, number = -1;
  x86 = read_cpuinfo(flags, sizeof flags, &family, &number);
  if (x86) check_x86(&t, level, model, flags, family, number);
#else
  ADJ_TEST_CHECK(&t, !strcmp(model, "?"), "model '%s' off x86-64 (expected '?')", model);
#endif
  if (!x86) {
    adj_test_report(&t, "no x86-64 /proc/cpuinfo: level %d, model '%s'", level, model);
    ADJ_TEST_CHECK(&t, level == 0, "level %d off x86-64 (expected 0)", level);
  }
  ADJ_TEST_CHECK(&t, adj_cpu_x86_level() == level, "a second call answered differently");
  return adj_test_finish(&t);
}
