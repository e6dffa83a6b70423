/* test_prefetch.c - the software prefetch distances a context runs with: the spec syntax
 * (srt_ctx_set_prefetch: every accepted form, every rejected one leaving the distances as they
 * were), SPARSECAL_PREFETCH at context creation, and that the distances change no result: every
 * layout whose kernels read them (q8_0, q4_0 and kmi4r rows, kmi4 and kmi8 neuron vectors; dense,
 * sparse and batched; zigzag read channel by channel or whole, zz) gives the same bits under extreme
 * and odd distances as under this CPU's,
 * for every ISA here at 1 and 2 threads. The kmi4 shape (4,300 outputs) takes several passes at
 * every pass width from 1 tile to 32. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "srt.h"
#include "testing.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void) { return sc_test_u32(&rng); }
static float rnd_sym(void) { return ((float)(rnd_u32() & 0xffffff) / 8388608.0f) - 1.0f; }

static void test_syntax(void) {
    srt_ctx *c = NULL;
    CHECK(srt_ctx_create(&c, SRT_ISA_SCALAR, 1) == SRT_OK);
    if (!c) return;
    char base[128], got[128];
    srt_ctx_prefetch(c, base, sizeof base);
    /* every accepted form, each from the CPU's distances */
    static const struct {
        const char *spec, *want; /* want: NULL = unchanged */
    } ok[] = {
        {"", NULL},
        {"default", NULL},
        {" , ", NULL},
        {"kr=0/0,q8=0/0,kd=0/0,pass=1,zz=0", "kr=0/0,q8=0/0,kd=0/0,pass=1,zz=0"},
        {"kr=64/1024 q8=64/1024 kd=64/1024 pass=32 zz=2", "kr=64/1024,q8=64/1024,kd=64/1024,pass=32,zz=2"},
        {"zz=0.5,pass=7,kd=2/3,kr=3/5,q8=1/2", "kr=3/5,q8=1/2,kd=2/3,pass=7,zz=0.5"},
        {"kr=1/2,kr=4/9", NULL}, /* the last one counts: checked below */
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        srt_ctx *d = NULL;
        CHECK(srt_ctx_create(&d, SRT_ISA_SCALAR, 1) == SRT_OK);
        if (!d) continue;
        CHECK_MSG(srt_ctx_set_prefetch(d, ok[i].spec) == SRT_OK, "'%s'", ok[i].spec);
        srt_ctx_prefetch(d, got, sizeof got);
        if (ok[i].want) CHECK_MSG(strcmp(got, ok[i].want) == 0, "'%s' -> %s", ok[i].spec, got);
        else if (strncmp(ok[i].spec, "kr=1/2", 6) == 0) CHECK_MSG(strncmp(got, "kr=4/9,", 7) == 0, "%s", got);
        else CHECK_MSG(strcmp(got, base) == 0, "'%s' -> %s", ok[i].spec, got);
        srt_ctx_free(d);
    }
    /* rejected: nothing changes, even where a valid item came first */
    static const char *bad[] = {"kr=1",      "kr=65/1", "kr=1/1025", "pass=0",    "pass=33",   "xx=1/2",
                                "kr=1/2x",   "kr=-1/2", "kr=+1/2",   "kr",        "kr=1/2;",   "pass=1/2",
                                "kd=1/8,zz", "kr=/3",   "kr=3/",     "q8=99999999999999999999/1", "defaults",
                                "kd=1/8,pass=40", "kr 1/2", "kr=1//2", "zz=2.5", "zz=-1", "zz=x", "zz=0.5x",
                                "zz=", "zz=nan", "zz=1e400", "zz=.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(srt_ctx_set_prefetch(c, bad[i]) == SRT_EPREFETCH, "'%s' accepted", bad[i]);
        srt_ctx_prefetch(c, got, sizeof got);
        CHECK_MSG(strcmp(got, base) == 0, "'%s' changed the distances to %s", bad[i], got);
    }
    CHECK(srt_ctx_set_prefetch(NULL, "kr=1/2") == SRT_EINVAL && srt_ctx_set_prefetch(c, NULL) == SRT_EINVAL);
    CHECK(strstr(srt_status_str(SRT_EPREFETCH), "kr=L1/L2") != NULL);
    srt_ctx_free(c);

    /* SPARSECAL_PREFETCH at creation */
    CHECK(setenv("SPARSECAL_PREFETCH", "kd=3/30,pass=5", 1) == 0);
    c = NULL;
    CHECK(srt_ctx_create(&c, SRT_ISA_SCALAR, 2) == SRT_OK);
    if (c) {
        srt_ctx_prefetch(c, got, sizeof got);
        CHECK_MSG(strstr(got, "kd=3/30,pass=5") != NULL, "%s", got);
        /* a spec applied later goes on top of the variable's */
        CHECK(srt_ctx_set_prefetch(c, "pass=6") == SRT_OK);
        srt_ctx_prefetch(c, got, sizeof got);
        CHECK_MSG(strstr(got, "kd=3/30,pass=6") != NULL, "%s", got);
        srt_ctx_free(c);
    }
    CHECK(setenv("SPARSECAL_PREFETCH", "kd=3/30,pass=50", 1) == 0);
    c = (srt_ctx *)&rng; /* must come back NULL */
    CHECK(srt_ctx_create(&c, SRT_ISA_SCALAR, 2) == SRT_EPREFETCH && c == NULL);
    CHECK(unsetenv("SPARSECAL_PREFETCH") == 0);
}

/* Distances to compare with the CPU's: none ahead, far ahead, odd */
static const char *specs[] = {"kr=0/0,q8=0/0,kd=0/0,pass=1,zz=0", "kr=64/1024,q8=64/1024,kd=64/1024,pass=32,zz=2",
                              "kr=3/5,q8=1/2,kd=2/3,pass=7,zz=0.5", "kr=1/1,q8=2/40,kd=1/1,pass=13,zz=0.3"};
#define NSPEC (int)(sizeof specs / sizeof specs[0])
#define NV 5 /* batch inputs */

/* y[r] = 0 for the rows r off lv's list */
static void keep_live(float *y, const srt_live *lv, int64_t rows) {
    int64_t k = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (k < lv->n && lv->idx[k] == (uint32_t)r) k++;
        else y[r] = 0.0f;
    }
}

static void test_same_bits(srt_layout l, int64_t rows, int64_t cols) {
    const srt_layout_traits *t = srt_layout_get(l);
    float *w = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) w[i] = 0.05f * rnd_sym();
    size_t bytes;
    CHECK(t->size(&bytes, rows, cols, 0) == SRT_OK);
    void *mem = srt_alloc(bytes);
    srt_matrix m;
    CHECK(t->pack(&m, mem, bytes, w, rows, cols, 0) == SRT_OK);
    /* the inputs (quantised by one context: the inputs are not what is compared) */
    srt_ctx *q = NULL;
    CHECK(srt_ctx_create(&q, SRT_ISA_SCALAR, 1) == SRT_OK);
    float *x = malloc(sizeof(float) * (size_t)(NV * cols));
    void *am[NV];
    srt_act act[NV];
    srt_input in[NV];
    for (int v = 0; v < NV; v++) {
        for (int64_t c = 0; c < cols; c++) x[v * cols + c] = rnd_sym();
        in[v] = (srt_input){x + v * cols, NULL};
        am[v] = NULL;
        if (t->input != SRT_IN_F32) {
            am[v] = srt_alloc(srt_act_bytes(cols));
            CHECK(srt_act_init(&act[v], am[v], srt_act_bytes(cols), cols,
                               t->input == SRT_IN_Q8_TILED ? SRT_ACT_TILED : SRT_ACT_NATURAL) == SRT_OK);
            CHECK(srt_act_quantize(q, &act[v], in[v].f) == SRT_OK);
            in[v].q = &act[v];
        }
    }
    /* a random half of the rows (row layouts) or of the neurons (kmi4, kmi8) live, per input */
    const int64_t span = t->sparse == SRT_SPARSE_ROWS ? rows : cols;
    uint32_t *idx = malloc(sizeof(uint32_t) * (size_t)(NV * span));
    srt_live live[NV];
    for (int v = 0; v < NV; v++) {
        int64_t n = 0;
        for (int64_t i = 0; i < span; i++)
            if (rnd_u32() & 1) idx[v * span + n++] = (uint32_t)i;
        live[v] = (srt_live){idx + v * span, n, NULL};
    }
    /* y[s][kind]: s = 0 the CPU's distances; kinds: dense, sparse, batch dense (NV), batch sparse (NV) */
    const int64_t ny = (2 + 2 * NV) * rows;
    float *y = malloc(sizeof(float) * (size_t)((NSPEC + 1) * ny));
    for (int isa = 0; isa < SRT_ISA_COUNT; isa++) {
        if (!srt_isa_available((srt_isa)isa)) continue;
        for (int th = 1; th <= 2; th++) {
            for (int s = 0; s <= NSPEC; s++) {
                srt_ctx *c = NULL;
                CHECK(srt_ctx_create(&c, (srt_isa)isa, th) == SRT_OK);
                if (!c) continue;
                if (s > 0) CHECK(srt_ctx_set_prefetch(c, specs[s - 1]) == SRT_OK);
                float *ys = y + s * ny, *yb[NV], *ybs[NV];
                for (int v = 0; v < NV; v++) yb[v] = ys + (2 + v) * rows, ybs[v] = ys + (2 + NV + v) * rows;
                CHECK(t->gemv(c, &m, &in[0], ys) == SRT_OK);
                CHECK(t->gemv_sparse(c, &m, &in[0], &live[0], ys + rows) == SRT_OK);
                CHECK(srt_gemv_batch(c, &m, in, NV, yb) == SRT_OK);
                CHECK(srt_gemv_batch_sparse(c, &m, in, live, NV, ybs) == SRT_OK);
                /* sparse outputs off the list are not defined for row layouts: zero them in every copy */
                if (t->sparse == SRT_SPARSE_ROWS) {
                    keep_live(ys + rows, &live[0], rows);
                    for (int v = 0; v < NV; v++) keep_live(ybs[v], &live[v], rows);
                }
                if (s > 0)
                    CHECK_MSG(memcmp(ys, y, sizeof(float) * (size_t)ny) == 0, "%s %lldx%lld %s x%d: '%s' changed the result",
                              t->name, (long long)rows, (long long)cols, srt_isa_name((srt_isa)isa), th, specs[s - 1]);
                srt_ctx_free(c);
            }
        }
    }
    for (int v = 0; v < NV; v++) srt_free(am[v]);
    srt_ctx_free(q);
    free(y);
    free(idx);
    free(x);
    srt_free(mem);
    free(w);
}

/* zz=F is the line for 256-row row-blocks (128-byte pieces); from 512 rows on, read in one pass,
 * the line is 2F (zz=0.35 with 1,000 channels: 350 and 700 live). */
static void test_zz_line(void) {
    const srt_layout_traits *t = srt_layout_get(SRT_LAYOUT_ZIGZAG);
    const int64_t rows = 2048, cols = 1000, groups[] = {256, 512, 1024};
    float *w = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) w[i] = 0.05f * rnd_sym();
    srt_ctx *c = NULL;
    CHECK(srt_ctx_create(&c, SRT_ISA_SCALAR, 1) == SRT_OK && srt_ctx_set_prefetch(c, "zz=0.35") == SRT_OK);
    for (int g = 0; g < 3 && c; g++) {
        size_t bytes;
        CHECK(t->size(&bytes, rows, cols, groups[g]) == SRT_OK);
        void *mem = srt_alloc(bytes);
        srt_matrix m;
        CHECK(t->pack(&m, mem, bytes, w, rows, cols, groups[g]) == SRT_OK && m.group == groups[g]);
        const bool short_pieces = groups[g] == 256;
        CHECK(!srt_zz_reads_all(c, &m, 340) && srt_zz_reads_all(c, &m, 360) == short_pieces);
        CHECK(srt_zz_reads_all(c, &m, 690) == short_pieces && srt_zz_reads_all(c, &m, 710));
        srt_free(mem);
    }
    srt_ctx_free(c);
    free(w);
}

int main(void) {
    CHECK(unsetenv("SPARSECAL_PREFETCH") == 0); /* the test sets its own */
    test_syntax();
    test_same_bits(SRT_LAYOUT_KMI4R, 301, 1024);
    test_same_bits(SRT_LAYOUT_Q4_0, 301, 1056);
    test_same_bits(SRT_LAYOUT_Q8_0, 133, 1056);
    test_same_bits(SRT_LAYOUT_KMI4, 4300, 320);
    test_same_bits(SRT_LAYOUT_KMI8, 1000, 192);
    test_same_bits(SRT_LAYOUT_ZIGZAG, 300, 1056); /* zz: every channel read or the live ones only */
    test_zz_line();
    return sc_test_finish();
}
