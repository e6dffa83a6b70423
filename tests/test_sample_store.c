/* test_sample_store.c - stored samples on the heap or in a spill file:
 *   1. a block keeps its bytes while it grows from the heap into a spill file,
 *      grows and shrinks there, and is counted while it exists;
 *   2. a spill directory that cannot take the block is a one-line error naming
 *      it, and the block the caller had is untouched;
 *   3. a calibration with every sampling method (CETT's h, CLADA's signals,
 *      TEAL's sample, coact's live sets) writes the same file byte for byte
 *      whether every sample lives in spill files or on the heap, and a file
 *      loaded into spilled samples saves back to the same bytes. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "sample_store.h"
#include "scal.h"
#include "testing.h"

static sc_err err;

static bool pattern_ok(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 131u + seed)) return false;
    return true;
}

static void fill(unsigned char *p, size_t from, size_t n, unsigned seed) {
    for (size_t i = from; i < n; i++) p[i] = (unsigned char)(i * 131u + seed);
}

static void blocks(void) {
    sc_sample_spill(sc_test_tmpdir(), 1 << 16);
    size_t base = sc_sample_spilled_bytes();
    void *p = NULL;
    CHECK(sc_sample_resize(&p, 1000, "t", &err) == SC_OK && p);
    fill(p, 0, 1000, 7);
    CHECK(sc_sample_spilled_bytes() == base); /* below the bound: heap */
    CHECK_MSG(sc_sample_resize(&p, 3 << 20, "t", &err) == SC_OK, "%s", err.msg);
    CHECK(pattern_ok(p, 1000, 7));
    CHECK(sc_sample_spilled_bytes() >= base + (3 << 20)); /* now a spill file */
    fill(p, 1000, 3 << 20, 7);
    CHECK(sc_sample_resize(&p, 9 << 20, "t", &err) == SC_OK && pattern_ok(p, 3 << 20, 7));
    fill(p, 3 << 20, 9 << 20, 7);
    CHECK(sc_sample_resize(&p, 5000, "t", &err) == SC_OK && pattern_ok(p, 5000, 7)); /* shrinks in its file */
    CHECK(sc_sample_spilled_bytes() < base + (1 << 20) && sc_sample_spilled_peak() >= (9u << 20));
    sc_sample_free(p);
    CHECK(sc_sample_spilled_bytes() == base);

    /* 2. no such directory: an error naming it; the heap block stays as it was */
    sc_sample_spill("/nonexistent/spill", 1 << 16);
    p = NULL;
    CHECK(sc_sample_resize(&p, 4096, "t", &err) == SC_OK);
    fill(p, 0, 4096, 3);
    void *before = p;
    CHECK(sc_sample_resize(&p, 1 << 20, "cett: the h sample", &err) == SC_EIO);
    CHECK(p == before && pattern_ok(p, 4096, 3));
    CHECK(strstr(err.msg, "cett: the h sample") && strstr(err.msg, "/nonexistent/spill") && !strchr(err.msg, '\n'));
    printf("unusable spill directory: %s\n", err.msg);
    sc_sample_free(p);
    sc_sample_free(NULL);
}

static void calibration(void) {
    sc_model *m = NULL;
    sc_tokenizer *tok = NULL;
    sc_dataset d;
    if (!sc_test_stories(24, &m, &tok, &d)) return;
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    const char *all[] = {"cett", "clada", "teal", "coact"};
    for (int i = 0; i < 4; i++) co.methods[i] = all[i];
    co.n_methods = 4;
    co.seq_len = 64;
    co.max_seqs = 12;
    co.params = "teal_seqs=3,teal_len=8,stride=2";
    const char *heap = sc_tmp_path("heap.scal"), *spilled = sc_tmp_path("spilled.scal"),
               *again = sc_tmp_path("again.scal");
    sc_calib *c = NULL;
    sc_sample_spill(NULL, 0);
    CHECK_MSG(sc_calib_compute(m, &d, &co, &c, &err) == SC_OK, "%s", err.msg);
    CHECK(c && sc_calib_save(c, m, heap, 3, &err) == SC_OK);
    sc_calib_free(c);
    c = NULL;

    sc_sample_spill(sc_test_tmpdir(), 0); /* every sample in a spill file */
    size_t base = sc_sample_spilled_bytes();
    CHECK_MSG(sc_calib_compute(m, &d, &co, &c, &err) == SC_OK, "%s", err.msg);
    size_t held = sc_sample_spilled_bytes() - base;
    printf("samples held in spill files: %zu bytes\n", held);
    CHECK(held > 0);
    CHECK(c && sc_calib_save(c, m, spilled, 3, &err) == SC_OK);
    sc_calib_free(c);
    CHECK(sc_sample_spilled_bytes() == base); /* freed with the calibration */
    CHECK(sc_files_equal(heap, spilled));

    c = NULL;
    CHECK_MSG(sc_calib_load(spilled, m, &c, &err) == SC_OK, "%s", err.msg);
    CHECK(sc_sample_spilled_bytes() > base);
    CHECK(c && sc_calib_save(c, m, again, 3, &err) == SC_OK);
    sc_calib_free(c);
    CHECK(sc_files_equal(heap, again));
    sc_sample_spill(NULL, 0);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
}

int main(void) {
    blocks();
    calibration();
    return sc_test_finish();
}
