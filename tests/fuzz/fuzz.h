/* Shared by the fuzz targets: libFuzzer's entry point, and the input as a
 * file (the readers under test take paths). */
#ifndef ADJOIN_TEST_FUZZ_H
#define ADJOIN_TEST_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Writes data to this process's scratch file (created once, rewritten each
 * time) and returns its path; NULL if it cannot. */
const char *fuzz_file(const uint8_t *data, size_t size);

#endif
