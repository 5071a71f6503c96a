/* A main for the fuzz targets without libFuzzer (any compiler): runs the
 * target once on each file named on the command line, so the corpus and
 * crafted inputs are regression tests in every build, sanitizers included.
 * With --write-seed PATH, the checkpoint target writes its seed instead. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

/* Defined by fuzz_checkpoint.c only; weak so the IDX replay links alone. */
int fuzz_checkpoint_write_seed(const char *path) __attribute__((weak));
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--write-seed") && fuzz_checkpoint_write_seed) {
    int status = fuzz_checkpoint_write_seed(argv[2]);
    MPI_Finalize();
    return status;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  int runs = 0;
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) {
      fprintf(stderr, "fuzz replay: cannot open %s\n", argv[i]);
      return 1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc((size_t)size + 1);
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) return 1;
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)size);
    free(data);
    runs++;
  }
  printf("fuzz replay: %d inputs ran without a crash\n", runs);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Finalize();
  return 0;
}
