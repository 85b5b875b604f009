/*
 * What every harness in tests/fuzz defines for libFuzzer, declared so that
 * -Wmissing-prototypes holds for them as for the rest of the project. Each
 * harness is one program (build/fuzz/fuzz_NAME) with its corpus in
 * tests/fuzz/corpus/NAME; libFuzzer calls these on its one thread.
 */
#ifndef OFCD_FUZZ_H
#define OFCD_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/** Runs one input; returns 0 (libFuzzer's contract). Must not keep data. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/** Once before the first input; argc and argv are the fuzzer's own. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#endif
