/* t518: the tools that only compute run inside an MPI job.  Every rank of
 * the job popen()s adjoin-halo, adjoin-plan (without --calibrate) and
 * adjoin-phantom twice each, as a program or a job script under mpiexec
 * would: each call returns its whole answer and exits 0, and the job itself
 * goes on to finish cleanly (a tool that started MPI here would join the
 * job's process-manager connection: the second call then dies of SIGPIPE and
 * takes the job with it).
 *
 *   mpiexec -n 2 t518-tools-in-mpi-job ADJOIN_HALO ADJOIN_PLAN ADJOIN_PHANTOM NETWORKS_DIR */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "harness.h"

/* Runs command through popen; its exit status (-1 when it did not exit)
 * and its output's first line holding `marker`, in *line. */
static int run_tool(const char *command, const char *marker, char *line, size_t size, int *bytes) {
  FILE *pipe = popen(command, "r");
  if (!pipe) return -1;
  char buffer[512];
  line[0] = '\0';
  *bytes = 0;
  while (fgets(buffer, sizeof buffer, pipe)) {
    *bytes += (int)strlen(buffer);
    if (!line[0] && strstr(buffer, marker)) snprintf(line, size, "%.*s", (int)strcspn(buffer, "\n"), buffer);
  }
  int status = pclose(pipe);
  return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t518-tools-in-mpi-job");
  if (argc != 5) {
    ADJ_TEST_CHECK(&t, 0, "usage: t518-tools-in-mpi-job ADJOIN_HALO ADJOIN_PLAN ADJOIN_PHANTOM NETWORKS_DIR");
    return adj_test_finish(&t);
  }
  /* A pipe whose reader left must not kill this rank unseen. */
  signal(SIGPIPE, SIG_IGN);
  char commands[3][1024];
  snprintf(commands[0], sizeof commands[0], "'%s' --shape 8,6 --partition 2,1 --kernel 3,3 --padding 1,1 2>&1",
           argv[1]);
  snprintf(commands[1], sizeof commands[1], "'%s' --procs 4 --batch 64 --json '%s/lenet5.net' 2>&1", argv[2],
           argv[4]);
  snprintf(commands[2], sizeof commands[2], "'%s' --n 64 --p 2 --k 2 2>&1", argv[3]);
  static const char *const markers[3] = {"\"output_shape\": [8, 6]", "\"network\": \"lenet5\"", "PP / TP: energy"};
  static const char *const names[3] = {"adjoin-halo", "adjoin-plan", "adjoin-phantom"};
  for (int tool = 0; tool < 3; tool++)
    for (int call = 1; call <= 2; call++) {
      char line[160];
      int bytes = 0, status = run_tool(commands[tool], markers[tool], line, sizeof line, &bytes);
      ADJ_TEST_CHECK(&t, status == 0 && line[0], "rank %d: %s call %d: exit %d, %d bytes, no '%s' in its output",
                     t.rank, names[tool], call, status, bytes, markers[tool]);
      adj_test_report(&t, "rank 0: %-14s call %d: exit %d, %5d bytes: %.70s", names[tool], call, status, bytes, line);
    }
  return adj_test_finish(&t);
}
