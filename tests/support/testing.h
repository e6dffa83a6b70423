/* testing.h - a tiny test harness: CHECK macros that count failures, asset
 * lookup through SPARSECAL_ASSETS (else ../shared/assets), temp files, and
 * running the CLI. Each test program prints "N passed, N failed". */
#ifndef SC_TESTING_H
#define SC_TESTING_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int sc_test_passed, sc_test_failed;

/* The tests' reproducible random stream: xorshift64 (13, 7, 17) on *s, bits 16-47 of the new state. */
static inline uint32_t sc_test_u32(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s >> 16);
}

struct sc_model;
struct sc_layer;
/* The f32 weights of layer l (sc_model_layer; the view of a layer converted on
 * use stays valid until the model's next sc_model_layer call for another
 * layer). Aborts the test on error. */
const struct sc_layer *sc_test_layer(const struct sc_model *m, int64_t l);

/* An owned f32 copy of the token embedding / the classifier [vocab, dim],
 * read through the accessors (free() it). Aborts the test on error. */
float *sc_test_embedding(const struct sc_model *m);
float *sc_test_classifier(const struct sc_model *m);

/* stories260K (llama2.c checkpoint), its tok512 tokenizer and the first max_docs stories of
 * text/tinystories_valid_a.txt, the set-up many tests share. false when an asset is missing (the
 * test then skips) or a load failed (counted as a failed check). */
struct sc_tokenizer;
struct sc_dataset;
bool sc_test_stories(int64_t max_docs, struct sc_model **m, struct sc_tokenizer **tok, struct sc_dataset *d);

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (cond) {                                                                    \
            sc_test_passed++;                                                          \
        } else {                                                                       \
            sc_test_failed++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
        }                                                                              \
    } while (0)

#define CHECK_MSG(cond, ...)                                                           \
    do {                                                                               \
        if (cond) {                                                                    \
            sc_test_passed++;                                                          \
        } else {                                                                       \
            sc_test_failed++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);   \
            fprintf(stderr, __VA_ARGS__);                                              \
            fputc('\n', stderr);                                                       \
        }                                                                              \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                           \
    do {                                                                                                \
        double ca_ = (double)(a), cb_ = (double)(b);                                                    \
        CHECK_MSG(fabs(ca_ - cb_) <= (tol), "%s = %.9g, %s = %.9g, tol %g", #a, ca_, #b, cb_, (double)(tol)); \
    } while (0)

/* Prints the summary line and returns the process exit status. */
int sc_test_finish(void);

/* Path of an asset (relative to the assets directory) in a static buffer
 * ring; returns NULL, prints a notice and counts a failure if it is missing. */
const char *sc_asset(const char *rel);
/* A fresh temporary directory for this test process (created once). */
const char *sc_test_tmpdir(void);
/* Joins the temp dir and name into a static buffer ring. */
const char *sc_tmp_path(const char *name);
/* true when both files can be read and hold the same bytes. */
bool sc_files_equal(const char *a, const char *b);
/* Writes bytes to a file; returns false on failure. */
bool sc_write_bytes(const char *path, const void *data, size_t n);
/* Runs a shell command, capturing stdout (up to cap bytes, NUL-terminated)
 * into out (may be NULL) and returns its exit status (-1 if it did not exit). */
int sc_run(const char *cmd, char *out, size_t cap);
/* sc_run of "CLI ARGS", ARGS formatted from fmt (commands up to 16 KiB); tests define
 * cli(...) as sc_run_cli(SC_CLI_PATH, out, sizeof out, __VA_ARGS__) */
int sc_run_cli(const char *cli, char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
