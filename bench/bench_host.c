/* bench_host.h */
#include "bench_host.h"

#include <stdio.h>
#include <string.h>

void bench_cpu_model(char *text, size_t size) {
  snprintf(text, size, "?");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (strncmp(line, "model name", 10) != 0 || !colon) continue;
    colon += 1 + (colon[1] == ' ');
    colon[strcspn(colon, "\n")] = 0;
    snprintf(text, size, "%s", colon);
    break;
  }
  fclose(f);
}
