/* Fuzz target: the command lines of the programs that parse without MPI:
 * adjoin-halo, adjoin-plan and adjoin-phantom (their main, renamed at
 * compile time), and the benchmarks' shared parser (bench_host.h).  The
 * first input byte picks the program; the rest, split at NUL bytes, is its
 * arguments (at most 32).  "@net" and "@cal" stand for a real network
 * description and calibration file written at start, so mutations reach the
 * planner behind the parser.  "--calibrate" is dropped: it would start MPI
 * and measure.
 *
 * What must never happen: a crash, undefined behaviour, a leak, an exit
 * status other than the documented 0, 1 and 2, or a benchmark option
 * accepted outside its range (abort() marks the last two).  Run with
 * libFuzzer's -close_fd_mask=3: the programs' own output is not wanted. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_host.h"
#include "fuzz.h"

int adjoin_halo_main(int argc, char **argv);
int adjoin_plan_main(int argc, char **argv);
int adjoin_phantom_main(int argc, char **argv);

enum { PROGRAM_HALO, PROGRAM_PLAN, PROGRAM_PHANTOM, PROGRAM_BENCH, PROGRAM_COUNT, MAX_ARGS = 32 };

static char net_path[64], cal_path[64];

static void fuzz_cli_remove(void) {
  unlink(net_path);
  unlink(cal_path);
}

/* A scratch file holding text; its path in path. */
static int fuzz_cli_scratch(char *path, size_t size, const char *text) {
  snprintf(path, size, "/tmp/adjoin-fuzz-cli-XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  static const char net[] = "network lenet5\ninput 1 28 28\nconv conv1 out=6 k=5 p=2\npool pool1 k=2 s=2\n"
                            "conv conv2 out=16 k=5\npool pool2 k=2 s=2\nfc fc1 out=120\nfc fc2 out=84\nfc fc3 out=10\n";
  static const char cal[] = "alpha 2.5e-06\nbeta 1.25e-10\nallreduce_alpha 7.5e-06\nallreduce_beta 3.125e-10\n"
                            "allreduce_ranks 4\n";
  if (fuzz_cli_scratch(net_path, sizeof net_path, net) || fuzz_cli_scratch(cal_path, sizeof cal_path, cal)) {
    fprintf(stderr, "fuzz-cli: cannot write its scratch files in /tmp\n");
    abort();
  }
  atexit(fuzz_cli_remove);
  return 0;
}

/* The benchmarks' parser with one option of each kind and two positionals:
 * an accepted value lies in its option's range. */
static void fuzz_bench(int argc, char **argv) {
  long long trials = -1;
  double seconds = -1;
  const char *csv = NULL, *positionals[2];
  bool teacher = false;
  const bench_option options[] = {{"--trials", BENCH_COUNT, 1, 1000, &trials},
                                  {"--seconds", BENCH_REAL, 0, 60, &seconds},
                                  {"--csv", BENCH_TEXT, 0, 0, &csv},
                                  {"--teacher", BENCH_FLAG, 0, 0, &teacher}};
  int n = 0, status = bench_parse_arguments("fuzz-bench", "usage: fuzz-bench", argc, argv, options, 4, 2, positionals,
                                            &n, true);
  if (status != BENCH_RUN && status != 0 && status != 2) abort();
  if (status == BENCH_RUN && (n < 0 || n > 2 || (trials != -1 && (trials < 1 || trials > 1000)) ||
                              (seconds != -1 && !(seconds > 0 && seconds <= 60))))
    abort();
}

/* The arguments: NUL-separated words of text (its last byte is a NUL),
 * with the stand-ins replaced and --calibrate left out. */
static int fuzz_cli_args(char *text, size_t size, char **argv) {
  int argc = 1;
  argv[0] = "fuzz-cli";
  for (char *word = text; word < text + size && argc < MAX_ARGS; word += strlen(word) + 1) {
    if (!strcmp(word, "--calibrate")) continue;
    argv[argc++] = !strcmp(word, "@net") ? net_path : !strcmp(word, "@cal") ? cal_path : word;
  }
  argv[argc] = NULL;
  return argc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  char *text = malloc(size), *argv[MAX_ARGS + 1];
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  int argc = fuzz_cli_args(text, size - 1, argv), status = 0;
  switch (data[0] % PROGRAM_COUNT) {
  case PROGRAM_HALO: status = adjoin_halo_main(argc, argv); break;
  case PROGRAM_PLAN: status = adjoin_plan_main(argc, argv); break;
  case PROGRAM_PHANTOM: status = adjoin_phantom_main(argc, argv); break;
  default: fuzz_bench(argc, argv); break;
  }
  free(text);
  if (status < 0 || status > 2) abort(); /* not a documented exit status */
  return 0;
}
