/* test_kernels_layouts.c - the runtime's formats: fp16 conversion against an
 * independent transcription of GGML's generic conversion (and the F16C
 * instruction where present), q4_0/q8_0 bytes against an independent
 * transcription of GGML's reference quantisers plus hand-checked golden
 * blocks, pack/unpack round trips within each format's error bound, the
 * int4 layouts holding exactly the q4_0 values, hostile arguments, and exact
 * top-K selection against a sort. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "srt.h"
#include "srt_kern.h"
#include "testing.h"

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t f16c_fp32_to_fp16(float f) {
    return (uint16_t)_cvtss_sh(f, 0);
}
#endif

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd_u32(void) { return sc_test_u32(&rng); }
static float rnd_unit(void) { return (float)(rnd_u32() & 0xffffff) / 16777216.0f; }
static float rnd_gauss(void) {
    float u = rnd_unit() + 1e-7f, v = rnd_unit();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}
/* Gaussian weights with 1% outliers (x30) and some exact zeros and ties. */
static void fill_weights(float *w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = rnd_gauss() * 0.05f;
        uint32_t r = rnd_u32() % 1000;
        if (r < 10) v *= 30.0f;
        if (r == 11) v = 0.0f;
        if (r == 12 && i > 0) v = -w[i - 1];
        w[i] = v;
    }
}

/* ---- independent transcriptions of GGML (for comparison only) ---------------- */

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
/* GGML's generic fp32 -> fp16 (the FP16 library's scaling trick). */
static uint16_t ggml_fp16(float f) {
    float base = (fabsf(f) * 0x1.0p+112f) * 0x1.0p-110f;
    const uint32_t w = f_bits(f), shl1_w = w + w, sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = bits_f((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = f_bits(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u, mantissa_bits = bits & 0x00000FFFu;
    return (uint16_t)((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : exp_bits + mantissa_bits));
}
static void ggml_q4_0(uint8_t *y, const float *x, int64_t k) {
    for (int64_t i = 0; i < k / 32; i++) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float v = x[i * 32 + j];
            if (amax < fabsf(v)) {
                amax = fabsf(v);
                max = v;
            }
        }
        const float d = max / -8, id = d ? 1.0f / d : 0.0f;
        uint16_t h = ggml_fp16(d);
        memcpy(y + i * 18, &h, 2);
        for (int j = 0; j < 16; ++j) {
            const float x0 = x[i * 32 + j] * id, x1 = x[i * 32 + 16 + j] * id;
            const int8_t a = (int8_t)(x0 + 8.5f), b = (int8_t)(x1 + 8.5f);
            const uint8_t xi0 = (uint8_t)(a < 15 ? a : 15), xi1 = (uint8_t)(b < 15 ? b : 15);
            y[i * 18 + 2 + j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}
static void ggml_q8_0(uint8_t *y, const float *x, int64_t k) {
    for (int64_t i = 0; i < k / 32; i++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[i * 32 + j]));
        const float d = amax / ((1 << 7) - 1), id = d ? 1.0f / d : 0.0f;
        uint16_t h = ggml_fp16(d);
        memcpy(y + i * 34, &h, 2);
        for (int j = 0; j < 32; ++j) y[i * 34 + 2 + j] = (uint8_t)(int8_t)roundf(x[i * 32 + j] * id);
    }
}

/* ---- fp16 ---------------------------------------------------------------------- */

static void test_fp16(void) {
    int bad = 0, bad_f16c = 0, checked = 0;
#if defined(__x86_64__)
    const bool have_f16c = (srt_cpu_features() & SRT_CPU_F16C) != 0;
#endif
    const char *quick = getenv("SRT_TEST_QUICK");
    const int n = quick && *quick && *quick != '0' ? 300000 : 3000000;
    for (int i = 0; i < n; i++) {
        float f;
        uint32_t u = rnd_u32() << 16 ^ rnd_u32();
        if (i % 3 == 0) u = (u & 0x80000000u) | (0x33000000u + u % 0x14800000u); /* the half range */
        if (i % 3 == 1) u = (u & 0x80001fffu) | ((0x38000000u + (u % 0x0f800000u)) & ~0x1fffu) | 0x1000u; /* ties */
        f = bits_f(u);
        if (isnan(f)) continue;
        uint16_t a = srt_fp32_to_fp16(f);
        bad += a != ggml_fp16(f);
#if defined(__x86_64__)
        if (have_f16c) bad_f16c += a != f16c_fp32_to_fp16(f);
#endif
        checked++;
    }
    CHECK_MSG(bad == 0, "%d of %d conversions differ from GGML's generic fp16", bad, checked);
    CHECK_MSG(bad_f16c == 0, "%d of %d conversions differ from F16C", bad_f16c, checked);
    int rt = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = srt_fp16_to_fp32((uint16_t)h);
        if (isnan(f)) {
            rt += (h & 0x7c00) != 0x7c00 || (h & 0x3ff) == 0;
            continue;
        }
        rt += srt_fp32_to_fp16(f) != h;
    }
    CHECK_MSG(rt == 0, "%d halves do not round-trip", rt);
    CHECK(srt_fp32_to_fp16(1.0f) == 0x3c00 && srt_fp32_to_fp16(-2.0f) == 0xc000);
    CHECK(srt_fp32_to_fp16(65504.0f) == 0x7bff && srt_fp32_to_fp16(65520.0f) == 0x7c00);
    CHECK(srt_fp32_to_fp16(0x1p-24f) == 0x0001 && srt_fp32_to_fp16(0x1p-25f) == 0x0000);
    CHECK(srt_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3c00);          /* tie to even (down) */
    CHECK(srt_fp32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02);      /* tie to even (up) */
    CHECK(srt_fp16_to_fp32(0x0001) == 0x1p-24f && srt_fp16_to_fp32(0x7bff) == 65504.0f);
    /* the f16 cache's saturating store: the plain conversion below 65520 in magnitude, +-65504 at and
     * above it (where the plain one gives inf), NaN kept */
    int sat = 0;
    for (uint32_t h = 0; h < 65536; h++) { /* every finite half: the same as the plain conversion */
        const float f = srt_fp16_to_fp32((uint16_t)h);
        if (!isnan(f) && !isinf(f)) sat += srt_fp32_to_fp16_sat(f) != h;
    }
    CHECK_MSG(sat == 0, "%d finite halves change under the saturating store", sat);
    CHECK(srt_fp32_to_fp16_sat(65519.0f) == 0x7bff && srt_fp32_to_fp16_sat(65520.0f) == 0x7bff);
    CHECK(srt_fp32_to_fp16_sat(1e6f) == 0x7bff && srt_fp32_to_fp16_sat(-1e30f) == 0xfbff);
    CHECK(srt_fp32_to_fp16_sat(INFINITY) == 0x7bff && srt_fp32_to_fp16_sat(-INFINITY) == 0xfbff);
    CHECK(srt_fp32_to_fp16_sat(1.0f + 3 * 0x1p-11f) == 0x3c02); /* rounding as the plain conversion */
    const uint16_t hn = srt_fp32_to_fp16_sat(NAN);
    CHECK((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0);
}

/* ---- GGML byte compatibility ----------------------------------------------------- */

static void test_ggml_bytes(void) {
    const int64_t rows = 97, cols = 1024;
    float *w = malloc(sizeof(float) * rows * cols);
    fill_weights(w, rows * cols);
    for (int j = 0; j < 32; j++) w[j] = 0.0f;            /* an all-zero block */
    for (int j = 32; j < 64; j++) w[j] = 1e-6f * (float)(j - 40); /* a tiny one */
    w[64] = 70000.0f;                                     /* a scale fp16 cannot hold */
    srt_matrix m4, m8;
    size_t b4, b8;
    CHECK(srt_layout_get(SRT_LAYOUT_Q4_0)->size(&b4, rows, cols, 0) == SRT_OK && b4 == (size_t)(rows * cols / 32 * 18));
    CHECK(srt_layout_get(SRT_LAYOUT_Q8_0)->size(&b8, rows, cols, 0) == SRT_OK && b8 == (size_t)(rows * cols / 32 * 34));
    uint8_t *p4 = srt_alloc(b4), *p8 = srt_alloc(b8), *g4 = malloc(b4), *g8 = malloc(b8);
    CHECK(srt_layout_get(SRT_LAYOUT_Q4_0)->pack(&m4, p4, b4, w, rows, cols, 0) == SRT_OK);
    CHECK(srt_layout_get(SRT_LAYOUT_Q8_0)->pack(&m8, p8, b8, w, rows, cols, 0) == SRT_OK);
    ggml_q4_0(g4, w, rows * cols);
    ggml_q8_0(g8, w, rows * cols);
    CHECK_MSG(memcmp(p4, g4, b4) == 0, "q4_0 bytes differ from GGML's reference quantiser");
    CHECK_MSG(memcmp(p8, g8, b8) == 0, "q8_0 bytes differ from GGML's reference quantiser");

    /* Golden blocks, worked by hand. x[j] = j - 16: the largest magnitude is
     * x[0] = -16, so d = -16 / -8 = 2 (fp16 0x4000), 1/d = 0.5; element j
     * becomes trunc((j - 16) / 2 + 8.5) = trunc(j / 2 + 0.5): 0 1 1 2 2 3 ...,
     * element j + 16 becomes trunc(j / 2 + 8.5) capped at 15: 8 9 9 10 ... 15 15. */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    static const uint8_t gold4[18] = {0x00, 0x40, 0x80, 0x91, 0x91, 0xa2, 0xa2, 0xb3, 0xb3, 0xc4,
                                      0xc4, 0xd5, 0xd5, 0xe6, 0xe6, 0xf7, 0xf7, 0xf8};
    uint8_t blk[34];
    srt_matrix mb;
    uint8_t *one = srt_alloc(64);
    CHECK(srt_layout_get(SRT_LAYOUT_Q4_0)->pack(&mb, one, 64, x, 1, 32, 0) == SRT_OK);
    memcpy(blk, one, 18);
    CHECK_MSG(memcmp(blk, gold4, 18) == 0, "q4_0 golden block");
    /* q8_0: x[0] = -127 makes amax 127, d = 1 (fp16 0x3c00), 1/d = 1, and
     * q = roundf(x) rounds halves away from zero: 2.5 -> 3, -2.5 -> -3,
     * 0.5 -> 1, 1.5 -> 2, -0.49 -> 0; the rest are x[j] = j - 16. */
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    x[0] = -127.0f;
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 0.5f;
    x[4] = -0.49f;
    x[5] = 1.5f;
    CHECK(srt_layout_get(SRT_LAYOUT_Q8_0)->pack(&mb, one, 64, x, 1, 32, 0) == SRT_OK);
    CHECK(one[0] == 0x00 && one[1] == 0x3c);
    static const int8_t gold8[8] = {-127, 3, -3, 1, 0, 2, -10, -9};
    for (int j = 0; j < 8; j++) CHECK((int8_t)one[2 + j] == gold8[j]);
    CHECK((int8_t)one[2 + 16] == 0 && (int8_t)one[2 + 31] == 15);
    /* A block whose largest magnitude is positive: d is negative. */
    for (int j = 0; j < 32; j++) x[j] = j == 5 ? 8.0f : 0.5f;
    CHECK(srt_layout_get(SRT_LAYOUT_Q4_0)->pack(&mb, one, 64, x, 1, 32, 0) == SRT_OK);
    /* d = 8 / -8 = -1 (0xbc00); 8 -> trunc(-8 + 8.5) = 0; 0.5 -> trunc(-0.5 + 8.5) = 8 */
    CHECK(one[0] == 0x00 && one[1] == 0xbc && one[2 + 5] == 0x80 && one[2 + 0] == 0x88);
    srt_free(one);
    srt_free(p4);
    srt_free(p8);
    free(g4);
    free(g8);
    free(w);
}

/* ---- pack / unpack round trips -------------------------------------------------- */

static float *unpack_new(const srt_matrix *m) {
    float *w = malloc(sizeof(float) * (size_t)(m->rows * m->cols));
    CHECK(srt_layout_get(m->layout)->unpack(w, m) == SRT_OK);
    return w;
}

static bool pack_new(srt_matrix *m, srt_layout l, const float *w, int64_t rows, int64_t cols, int64_t group) {
    size_t b;
    const srt_layout_traits *t = srt_layout_get(l);
    if (t->size(&b, rows, cols, group) != SRT_OK) return false;
    void *p = srt_alloc(b);
    if (t->pack(m, p, b, w, rows, cols, group) != SRT_OK) {
        srt_free(p);
        return false;
    }
    return srt_matrix_check(m) == SRT_OK;
}

static void test_roundtrip(int64_t rows, int64_t cols) {
    float *w = malloc(sizeof(float) * rows * cols), *wt = malloc(sizeof(float) * rows * cols);
    fill_weights(w, rows * cols);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) wt[c * rows + r] = w[r * cols + c];
    srt_matrix m[SRT_LAYOUT_COUNT];
    float *u[SRT_LAYOUT_COUNT] = {0};
    for (int l = 0; l < SRT_LAYOUT_COUNT; l++) {
        bool ok = pack_new(&m[l], (srt_layout)l, w, rows, cols, l == SRT_LAYOUT_STRIPE ? 64 : 0);
        bool expect = (l != SRT_LAYOUT_Q4_0T || rows % 32 == 0);
        CHECK_MSG(ok == expect, "pack %s %lldx%lld", srt_layout_get((srt_layout)l)->name, (long long)rows,
                  (long long)cols);
        if (ok) u[l] = unpack_new(&m[l]);
    }
    /* error bounds: f32 exact; q8_0 within 0.57 d per block; q4_0 within d */
    double e8 = 0, e4 = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < cols / 32; b++) {
            float amax = 0;
            for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(w[r * cols + b * 32 + k]));
            for (int k = 0; k < 32; k++) {
                int64_t i = r * cols + b * 32 + k;
                if (amax == 0) continue;
                e8 = fmax(e8, fabs(u[SRT_LAYOUT_Q8_0][i] - w[i]) / (amax / 127.0));
                e4 = fmax(e4, fabs(u[SRT_LAYOUT_Q4_0][i] - w[i]) / (amax / 8.0));
            }
        }
    CHECK(memcmp(u[SRT_LAYOUT_F32], w, sizeof(float) * rows * cols) == 0);
    CHECK_MSG(e8 <= 0.57, "q8_0 error %.3f d", e8);
    CHECK_MSG(e4 <= 1.01, "q4_0 error %.3f d", e4);
    /* kmi4r and kmi4 hold exactly the q4_0 values of W, kmi8 the q8_0 values; zigzag/stripe and
     * q4_0t hold exactly the q4_0 values of W^T (groups down a column). */
    size_t n = sizeof(float) * rows * cols;
    CHECK_MSG(memcmp(u[SRT_LAYOUT_KMI4R], u[SRT_LAYOUT_Q4_0], n) == 0, "kmi4r != q4_0 (%lldx%lld)", (long long)rows,
              (long long)cols);
    CHECK_MSG(memcmp(u[SRT_LAYOUT_KMI4], u[SRT_LAYOUT_Q4_0], n) == 0, "kmi4 != q4_0 (%lldx%lld)", (long long)rows,
              (long long)cols);
    CHECK_MSG(memcmp(u[SRT_LAYOUT_KMI8], u[SRT_LAYOUT_Q8_0], n) == 0, "kmi8 != q8_0 (%lldx%lld)", (long long)rows,
              (long long)cols);
    if (rows % 32 == 0) {
        srt_matrix mt;
        CHECK(pack_new(&mt, SRT_LAYOUT_Q4_0, wt, cols, rows, 0));
        float *ut = unpack_new(&mt), *back = malloc(n);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) back[r * cols + c] = ut[c * rows + r];
        CHECK(memcmp(u[SRT_LAYOUT_Q4_0T], back, n) == 0);
        CHECK(memcmp(u[SRT_LAYOUT_ZIGZAG], back, n) == 0);
        CHECK(memcmp(u[SRT_LAYOUT_STRIPE], back, n) == 0);
        srt_free((void *)mt.data);
        free(ut);
        free(back);
    }
    for (int l = 0; l < SRT_LAYOUT_COUNT; l++) {
        if (u[l]) srt_free((void *)m[l].data);
        free(u[l]);
    }
    free(w);
    free(wt);
}

/* The row-blocks pack gives zigzag (and stripe) when its group is 0: the whole column up to 256 rows,
 * then the longest of 1024, 512 and 256 rows that pads no more than 256 would; a pack with group 0
 * takes it. */
static void test_default_group(void) {
    const int64_t zz[][2] = {{1, 32},      {64, 64},     {250, 256},   {256, 256},   {300, 512},  {1000, 1024},
                             {1024, 1024}, {1536, 512},  {2048, 1024}, {2304, 256},  {5632, 512}, {8192, 1024},
                             {14336, 1024}, {11008, 256}, {2560, 512}};
    for (size_t i = 0; i < sizeof zz / sizeof zz[0]; i++)
        CHECK_MSG(srt_layout_default_group(SRT_LAYOUT_ZIGZAG, zz[i][0]) == zz[i][1], "zigzag %lld rows: %lld, want %lld",
                  (long long)zz[i][0], (long long)srt_layout_default_group(SRT_LAYOUT_ZIGZAG, zz[i][0]),
                  (long long)zz[i][1]);
    CHECK(srt_layout_default_group(SRT_LAYOUT_STRIPE, 100) == 128 && srt_layout_default_group(SRT_LAYOUT_STRIPE, 5000) == 512);
    CHECK(srt_layout_default_group(SRT_LAYOUT_KMI4, 2048) == 0);
    float *w = malloc(sizeof(float) * 1000 * 64);
    fill_weights(w, 1000 * 64);
    srt_matrix m;
    if (pack_new(&m, SRT_LAYOUT_ZIGZAG, w, 1000, 64, 0)) {
        CHECK(m.group == 1024);
        srt_free((void *)m.data);
    } else {
        CHECK(!"zigzag 1000 x 64 packs");
    }
    free(w);
}

static void test_hostile(void) {
    const srt_layout_traits *t = srt_layout_get(SRT_LAYOUT_KMI4);
    size_t b;
    CHECK(t->size(&b, 64, 33, 0) == SRT_EINVAL);
    CHECK(t->size(&b, 0, 32, 0) == SRT_EINVAL);
    CHECK(t->size(&b, 64, INT64_C(1) << 40, 0) == SRT_EINVAL);
    CHECK(srt_layout_get(SRT_LAYOUT_ZIGZAG)->size(&b, 64, 32, 48) == SRT_EINVAL);
    CHECK(srt_layout_get(SRT_LAYOUT_Q4_0T)->size(&b, 33, 32, 0) == SRT_EINVAL);
    float w[64 * 32];
    fill_weights(w, 64 * 32);
    w[100] = NAN;
    void *p = srt_alloc(1 << 16);
    srt_matrix m;
    CHECK(t->pack(&m, p, 1 << 16, w, 64, 32, 0) == SRT_EINVAL);
    w[100] = INFINITY;
    CHECK(t->pack(&m, p, 1 << 16, w, 64, 32, 0) == SRT_EINVAL);
    w[100] = 0;
    CHECK(t->pack(&m, p, 10, w, 64, 32, 0) == SRT_EINVAL);                  /* too small */
    CHECK(t->pack(&m, (char *)p + 4, 1000, w, 64, 32, 0) == SRT_EINVAL);    /* misaligned */
    CHECK(t->pack(&m, p, 1 << 16, w, 64, 32, 0) == SRT_OK);
    srt_matrix bad = m;
    bad.bytes = m.bytes - 1;
    CHECK(srt_matrix_check(&bad) == SRT_EINVAL);
    bad = m;
    bad.group = 32;
    CHECK(srt_matrix_check(&bad) == SRT_EINVAL);
    bad = m;
    bad.layout = SRT_LAYOUT_COUNT;
    CHECK(srt_matrix_check(&bad) == SRT_EINVAL);
    srt_layout l;
    CHECK(srt_layout_parse("kmi4", &l) == SRT_OK && l == SRT_LAYOUT_KMI4);
    CHECK(srt_layout_parse("zigzag", &l) == SRT_OK && l == SRT_LAYOUT_ZIGZAG);
    CHECK(srt_layout_parse("nope", &l) == SRT_EINVAL);
    srt_isa isa;
    CHECK(srt_isa_parse("avx512", &isa) == SRT_OK && isa == SRT_ISA_AVX512);
    CHECK(srt_isa_parse("sse9", &isa) == SRT_EISA);
    CHECK(srt_isa_parse("i8mm", &isa) == SRT_OK && isa == SRT_ISA_I8MM && strcmp(srt_isa_name(isa), "i8mm") == 0);
    CHECK(srt_isa_parse("amx", &isa) == SRT_OK && isa == SRT_ISA_AMX && strcmp(srt_isa_name(isa), "amx") == 0);
    CHECK(srt_isa_available(SRT_ISA_SCALAR));
    /* the i8mm table is dotprod's plus the smmla kernels: never offered without dotprod; amx likewise
     * avx512's plus the tiles */
    CHECK(!srt_isa_available(SRT_ISA_I8MM) || srt_isa_available(SRT_ISA_DOTPROD));
    CHECK(!srt_isa_available(SRT_ISA_AMX) || srt_isa_available(SRT_ISA_AVX512));
    srt_ctx *ctx;
    CHECK(srt_ctx_create(&ctx, SRT_ISA_SCALAR, 0) == SRT_EINVAL);
#if defined(__x86_64__)
    CHECK(srt_ctx_create(&ctx, SRT_ISA_NEON, 1) == SRT_EISA);
    CHECK(srt_ctx_create(&ctx, SRT_ISA_I8MM, 1) == SRT_EISA);
#else
    CHECK(srt_ctx_create(&ctx, SRT_ISA_AMX, 1) == SRT_EISA);
#endif
    srt_free(p);
}

/* ---- top-K ---------------------------------------------------------------------- */

static const float *sort_keys;
static unsigned sort_flags;
static float keyv(int64_t i) {
    float v = sort_keys[i];
    if (isnan(v)) return -INFINITY;
    return (sort_flags & SRT_SELECT_ABS) ? fabsf(v) : v;
}
static int by_rank(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    float x = keyv(i), y = keyv(j);
    bool nx = isnan(sort_keys[i]), ny = isnan(sort_keys[j]);
    if (nx != ny) return nx ? 1 : -1;
    if (x != y) return x > y ? -1 : 1;
    /* -0 below +0 unless ABS */
    bool sx = signbit(x), sy = signbit(y);
    if (sx != sy) return sx ? 1 : -1;
    return i < j ? -1 : 1;
}
static int by_index(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    return (i > j) - (i < j);
}

/* The sort's top k of v (ascending indices) into want. */
static void topk_by_sort(uint32_t *want, const float *v, int64_t n, int64_t k, unsigned flags) {
    for (int64_t i = 0; i < n; i++) want[i] = (uint32_t)i;
    sort_keys = v;
    sort_flags = flags;
    qsort(want, (size_t)n, 4, by_rank);
    qsort(want, (size_t)k, 4, by_index);
}

/* Scores that stress a selection: Gaussian; few distinct values (ties); NaN and -0 among Gaussians; a
 * narrow range (keys that differ in the low mantissa bits only, so the vector bisection runs its most
 * steps); any bits (infinities, subnormals, NaN payloads); all equal. */
static float topk_score(int kind) {
    uint32_t u;
    float f;
    switch (kind) {
    case 1: return (float)(rnd_u32() % 7) - 3.0f;
    case 2: return rnd_u32() % 50 == 0 ? ((rnd_u32() & 1) ? NAN : -0.0f) : rnd_gauss();
    case 3: u = 0x3f800000u + rnd_u32() % 4096; memcpy(&f, &u, 4); return (rnd_u32() & 1) ? f : -f;
    case 4: u = rnd_u32(); memcpy(&f, &u, 4); return f;
    case 5: return 0.5f;
    default: return rnd_gauss();
    }
}

/* Every ISA's selection against the reference on short lists whose low (or middle) keys recur at one lane
 * position (a period of 1-16): the bisection's range comes from reductions across lanes, and a reduction
 * that misses a lane shows up here (test_topk's random scores rarely put the extremes in one lane). */
static void test_topk_lanes(void) {
    uint32_t want[216], got[216], ws[2 * 216 + 1];
    float v[216];
    int bad = 0, runs = 0;
    for (int t = 0; t < 8000; t++) {
        const int64_t n = 17 + (int64_t)(rnd_u32() % 200), k = 1 + (int64_t)(rnd_u32() % (uint32_t)(n - 1));
        const uint32_t per = 1 + rnd_u32() % 16, ph = rnd_u32() % 16, spread = 1 + (uint32_t)t % 4;
        for (int64_t i = 0; i < n; i++) {
            const bool lane = ((uint32_t)i + ph) % per == 0;
            if (t & 1) /* middle keys at the lane position, low and high ones elsewhere: the k-th is often a
                          middle one, the least key of the upper half */
                v[i] = lane ? 5.0f + (float)(rnd_u32() % 2) : (rnd_u32() & 1) ? 1.0f : 10.0f + (float)(rnd_u32() % spread);
            else
                v[i] = lane ? 1.0f + (float)(rnd_u32() % 3) : 10.0f + (float)(rnd_u32() % spread);
        }
        srt_select_radix(want, v, n, k, 0, ws);
        for (int isa = 1; isa < SRT_ISA_COUNT; isa++) {
            if (!srt_isa_available((srt_isa)isa)) continue;
            srt_kernels_get((srt_isa)isa)->select_topk(got, v, n, k, 0, ws);
            bad += memcmp(got, want, 4 * (size_t)k) != 0;
            runs++;
        }
    }
    CHECK_MSG(bad == 0, "%d of %d lane-patterned top-k selections differ from the reference", bad, runs);
}

static void test_topk(void) {
    const int64_t sizes[] = {1, 2, 7, 15, 16, 17, 33, 100, 5632, 6144, 14336};
    int bad = 0, runs = 0;
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        float *v = malloc(sizeof(float) * n);
        uint32_t *got = malloc(4 * n), *want = malloc(4 * n);
        for (int trial = 0; trial < 12; trial++) {
            for (int64_t i = 0; i < n; i++) v[i] = topk_score(trial % 6);
            unsigned flags = (trial / 6) ? SRT_SELECT_ABS : 0;
            int64_t ks[] = {0, 1, n / 2, n - 1, n, (int64_t)(rnd_u32() % (uint32_t)n)};
            for (size_t q = 0; q < 6; q++) {
                int64_t k = ks[q];
                topk_by_sort(want, v, n, k, flags);
                /* exactly k entries, so that a write past them is an ASan error */
                uint32_t *gk = malloc(4 * (size_t)(k ? k : 1));
                if (srt_select_topk(gk, v, n, k, flags) != SRT_OK) {
                    bad++;
                    free(gk);
                    continue;
                }
                memcpy(got, gk, 4 * (size_t)k);
                bad += memcmp(got, want, 4 * (size_t)k) != 0;
                /* with a workspace of exactly 2n + 1 entries: the same list */
                uint32_t *ws = malloc(4 * (size_t)(2 * n + 1));
                bad += srt_select_topk_ws(gk, v, n, k, flags, ws) != SRT_OK || memcmp(got, gk, 4 * (size_t)k) != 0;
                /* every ISA's kernel (0 < k < n) against the sort */
                for (int isa = 0; isa < SRT_ISA_COUNT && k > 0 && k < n; isa++) {
                    if (!srt_isa_available((srt_isa)isa)) continue;
                    memset(gk, 0xff, 4 * (size_t)k);
                    srt_kernels_get((srt_isa)isa)->select_topk(gk, v, n, k, flags, ws);
                    bad += memcmp(gk, want, 4 * (size_t)k) != 0;
                    runs++;
                }
                free(ws);
                free(gk);
                runs++;
            }
        }
        free(v);
        free(got);
        free(want);
    }
    CHECK_MSG(bad == 0, "%d of %d top-k selections differ from the sort", bad, runs);
    float v3[3] = {1, 2, 3};
    uint32_t o[3];
    CHECK(srt_select_topk(o, v3, 3, -1, 0) == SRT_EINVAL);
    CHECK(srt_select_topk(NULL, v3, 3, 1, 0) == SRT_EINVAL);
}

int main(void) {
    test_fp16();
    test_ggml_bytes();
    const int64_t shapes[][2] = {{1, 32}, {3, 64}, {32, 96}, {100, 512}, {128, 544}, {129, 1056}, {300, 64}, {64, 32}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) test_roundtrip(shapes[i][0], shapes[i][1]);
    test_hostile();
    test_default_group();
    test_topk();
    test_topk_lanes();
    return sc_test_finish();
}
