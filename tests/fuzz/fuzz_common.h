/* fuzz_common.h - what the libFuzzer harnesses in tests/fuzz share.
 *
 * Each harness defines LLVMFuzzerTestOneInput over one reader of the
 * toolchain. The same harness is linked two ways: with libFuzzer (clang,
 * -DSC_FUZZ=ON: scripts/fuzz.sh, .ci/run's smoke run) and with replay_main.c
 * into an ordinary test that feeds it every file under tests/hostile/<name>/
 * (the crashes fuzzing found, kept as regression files). */
#ifndef SC_FUZZ_COMMON_H
#define SC_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A path whose file holds data[0..n) (an in-memory file reused across runs:
 * the readers take paths). NULL if it cannot be made. */
const char *fz_path(const uint8_t *data, size_t n);

/* A copy of data with every checksum of a sparsecal container recomputed
 * (sections, table, manifest, header) wherever the fields it reads are in
 * bounds, so that mutations reach the parsers behind the checksums; the
 * caller frees it. */
uint8_t *fz_resealed(const uint8_t *data, size_t n);

/* Encodes and decodes a fixed text (and the bytes given) with a tokenizer. */
struct sc_tokenizer;
void fz_exercise_tokenizer(const struct sc_tokenizer *t, const uint8_t *extra, size_t n);

#endif
