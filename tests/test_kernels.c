/* test_kernels.c - every kernel of every ISA this machine runs (the dispatch
 * is forced per context) at 1, 2 and 3 threads against the scalar reference,
 * on awkward shapes (tails, tiny n, padding), live densities 0, 0.01, 0.5,
 * 0.99 and 1, all-dead groups and partial quads, random data with outliers.
 * The reference itself is checked against double-precision math on the
 * unpacked weights and the dequantised activations. Non-finite activations
 * quantise to the same bytes on every ISA and poison every output. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "srt.h"
#include "testing.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd_u32(void) { return sc_test_u32(&rng); }
static float rnd_unit(void) { return (float)(rnd_u32() & 0xffffff) / 16777216.0f; }
static float rnd_gauss(void) {
    float u = rnd_unit() + 1e-7f, v = rnd_unit();
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}
static void fill(float *x, int64_t n, float scale) {
    for (int64_t i = 0; i < n; i++) {
        float v = rnd_gauss() * scale;
        if (rnd_u32() % 100 == 0) v *= 25.0f;
        x[i] = v;
    }
}

static srt_ctx *ctx_ref;

/* Contexts for every available ISA at 1 and 2 threads (the scalar one, whose
 * 1-thread run is the reference, at 2 and 3). */
static srt_ctx *ctxs[SRT_ISA_COUNT * 2];
static int nctx;
static bool quick; /* SRT_TEST_QUICK: fewer shapes (under qemu) */

static void make_ctxs(void) {
    for (int i = 0; i < SRT_ISA_COUNT; i++) {
        if (!srt_isa_available((srt_isa)i)) continue;
        for (int t = i == SRT_ISA_SCALAR ? 2 : 1; t <= (i == SRT_ISA_SCALAR ? 3 : 2); t++) {
            srt_ctx *c;
            if (srt_ctx_create(&c, (srt_isa)i, t) == SRT_OK) ctxs[nctx++] = c;
            else CHECK_MSG(0, "ctx %s x%d", srt_isa_name((srt_isa)i), t);
        }
    }
    CHECK(srt_ctx_create(&ctx_ref, SRT_ISA_SCALAR, 1) == SRT_OK);
    char buf[200];
    fprintf(stderr, "cpu: %s; ISAs:", srt_cpu_feature_names(srt_cpu_features(), buf, sizeof buf));
    for (int i = 0; i < SRT_ISA_COUNT; i++)
        if (srt_isa_available((srt_isa)i)) fprintf(stderr, " %s", srt_isa_name((srt_isa)i));
    fprintf(stderr, "\n");
}

typedef struct act_buf {
    srt_act a;
    void *mem;
} act_buf;

static void act_make(act_buf *b, int64_t n, srt_act_order order) {
    size_t bytes = srt_act_bytes(n);
    b->mem = srt_alloc(bytes);
    CHECK(srt_act_init(&b->a, b->mem, bytes, n, order) == SRT_OK);
}

/* ---- activation quantisation: identical bytes on every ISA --------------------- */

static void test_act(void) {
    const int64_t ns[] = {1, 31, 32, 33, 100, 512, 1536, 6147};
    int bad = 0;
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        int64_t n = ns[s];
        float *x = malloc(sizeof(float) * n);
        fill(x, n, 1.0f);
        for (int64_t i = 0; i < n && i < 32; i++) x[i] = 0.0f;                 /* an all-zero block */
        for (int64_t i = 32; i < n && i < 64; i++) x[i] = 1e-33f * (float)i;   /* below the d cut-off */
        for (int o = 0; o < 2; o++) {
            act_buf r, t;
            act_make(&r, n, (srt_act_order)o);
            CHECK(srt_act_quantize(ctx_ref, &r.a, x) == SRT_OK);
            /* reference semantics: |q d - x| <= d / 2 */
            for (int64_t i = 0; i < n && o == 0; i++) {
                float d = r.a.d[i / 32];
                if (fabsf((float)r.a.q[i] * d - x[i]) > d * 0.5001f + 1e-30f) bad++;
            }
            for (int c = 0; c < nctx; c++) {
                act_make(&t, n, (srt_act_order)o);
                CHECK(srt_act_quantize(ctxs[c], &t.a, x) == SRT_OK);
                bool same = memcmp(t.a.q, r.a.q, (size_t)r.a.cap) == 0 &&
                            memcmp(t.a.d, r.a.d, sizeof(float) * (size_t)(r.a.cap / 32)) == 0 &&
                            memcmp(t.a.sum, r.a.sum, sizeof(int32_t) * (size_t)(r.a.cap / 32)) == 0;
                CHECK_MSG(same, "act n=%lld order %d on %s", (long long)n, o, srt_isa_name(srt_ctx_isa(ctxs[c])));
                srt_free(t.mem);
            }
            srt_free(r.mem);
        }
        free(x);
    }
    CHECK_MSG(bad == 0, "%d activation values off by more than d/2", bad);
}

/* ---- non-finite activations: every ISA as the reference ------------------------------ */

/* A block holding NaN or inf quantises to q = 0, sum = 0, d = NaN on every ISA
 * (the same bytes), so every GEMV output that reads it is non-finite, as in
 * f32 arithmetic, instead of a clamped or wrapped integer (the AVX-512
 * quantiser used to convert inf to 0x80000000 and overflow the q4 offset). */
static void test_act_nonfinite(void) {
    const int64_t ns[] = {32, 100, 256};
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        const int64_t n = ns[s], nb = (n + 31) / 32;
        float *x = malloc(sizeof(float) * (size_t)n);
        for (int variant = 0; variant < 4; variant++) {
            fill(x, n, 1.0f);
            const float bad = variant == 0 ? NAN : variant == 1 ? INFINITY : variant == 2 ? -INFINITY : 3e38f;
            const int64_t at = (variant * 37 + 5) % n; /* a different block (and the tail block of n = 100) */
            x[at] = bad;
            if (variant == 3 && n > 40) x[n - 1] = NAN; /* huge but finite in one block, NaN in the last */
            bool *bad_block = calloc((size_t)nb, 1);
            for (int64_t i = 0; i < n; i++) bad_block[i / 32] |= !isfinite(x[i]);
            for (int o = 0; o < 2; o++) {
                act_buf r, t;
                act_make(&r, n, (srt_act_order)o);
                CHECK(srt_act_quantize(ctx_ref, &r.a, x) == SRT_OK);
                for (int64_t b = 0; b < nb; b++) {
                    int nz = 0;
                    for (int k = 0; k < 32 && o == 0; k++) nz += r.a.q[b * 32 + k] != 0;
                    if (bad_block[b])
                        CHECK_MSG(isnan(r.a.d[b]) && r.a.sum[b] == 0 && nz == 0, "n %lld variant %d block %lld",
                                  (long long)n, variant, (long long)b);
                    else
                        CHECK_MSG(isfinite(r.a.d[b]) && r.a.d[b] > 0, "n %lld variant %d block %lld", (long long)n,
                                  variant, (long long)b);
                }
                for (int c = 0; c < nctx; c++) {
                    act_make(&t, n, (srt_act_order)o);
                    CHECK(srt_act_quantize(ctxs[c], &t.a, x) == SRT_OK);
                    bool same = memcmp(t.a.q, r.a.q, (size_t)r.a.cap) == 0 &&
                                memcmp(t.a.d, r.a.d, sizeof(float) * (size_t)(r.a.cap / 32)) == 0 &&
                                memcmp(t.a.sum, r.a.sum, sizeof(int32_t) * (size_t)(r.a.cap / 32)) == 0;
                    CHECK_MSG(same, "non-finite act n=%lld variant %d order %d on %s", (long long)n, variant, o,
                              srt_isa_name(srt_ctx_isa(ctxs[c])));
                    srt_free(t.mem);
                }
                srt_free(r.mem);
            }
            free(bad_block);
        }
        free(x);
    }
    /* every layout's dense GEMV on every ISA: a non-finite input gives non-finite outputs, never a number */
    const int64_t rows = 64, cols = 256;
    float *w = malloc(sizeof(float) * rows * cols), *x = malloc(sizeof(float) * cols), *y = malloc(sizeof(float) * rows);
    fill(w, rows * cols, 0.05f);
    for (int l = 0; l < SRT_LAYOUT_COUNT; l++) {
        const srt_layout_traits *t = srt_layout_get((srt_layout)l);
        const int64_t group = l == SRT_LAYOUT_ZIGZAG || l == SRT_LAYOUT_STRIPE ? 32 : 0;
        size_t bytes;
        if (t->size(&bytes, rows, cols, group) != SRT_OK) {
            CHECK_MSG(0, "size %s", t->name);
            continue;
        }
        void *mem = srt_alloc(bytes);
        srt_matrix m;
        CHECK(t->pack(&m, mem, bytes, w, rows, cols, group) == SRT_OK);
        for (int variant = 0; variant < 3; variant++) {
            fill(x, cols, 1.0f);
            x[77] = variant == 0 ? NAN : variant == 1 ? INFINITY : -INFINITY;
            act_buf ab = {0};
            srt_input in = {x, NULL};
            if (t->input != SRT_IN_F32) {
                act_make(&ab, cols, t->input == SRT_IN_Q8_TILED ? SRT_ACT_TILED : SRT_ACT_NATURAL);
                in.q = &ab.a;
            }
            for (int c = -1; c < nctx; c++) {
                srt_ctx *ctx = c < 0 ? ctx_ref : ctxs[c];
                if (in.q) CHECK(srt_act_quantize(ctx, &ab.a, x) == SRT_OK);
                for (int64_t r = 0; r < rows; r++) y[r] = 0.0f;
                CHECK(t->gemv(ctx, &m, &in, y) == SRT_OK);
                int64_t finite = 0;
                for (int64_t r = 0; r < rows; r++) finite += isfinite(y[r]) != 0;
                CHECK_MSG(finite == 0, "%s on %s, input %s: %lld of %lld outputs finite", t->name,
                          srt_isa_name(srt_ctx_isa(ctx)), variant == 0 ? "NaN" : variant == 1 ? "+inf" : "-inf",
                          (long long)finite, (long long)rows);
            }
            if (ab.mem) srt_free(ab.mem);
        }
        srt_free(mem);
    }
    free(w);
    free(x);
    free(y);
}

/* ---- live lists ------------------------------------------------------------------- */

typedef enum { L_DENSITY, L_ALT_GROUPS, L_PARTIAL_QUADS } list_kind;

/* Ascending list over [0, n): density p, or every other 32-group dead, or
 * 1..5 live per 32-group. */
static int64_t make_list(uint32_t *idx, int64_t n, list_kind kind, double p) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        bool live;
        if (kind == L_DENSITY)
            live = p >= 1.0 || (p > 0 && rnd_unit() < p);
        else if (kind == L_ALT_GROUPS)
            live = (i / 32) % 2 == 1 && rnd_unit() < 0.7;
        else
            live = (i % 32) < 1 + (i / 32) % 5;
        if (live) idx[m++] = (uint32_t)i;
    }
    return m;
}

/* ---- zigzag's activations ------------------------------------------------------------ */

#define SRT_QK_TEST 32

/* zigzag/stripe quantise c = x_i * s[g, i] per row group g over the live channels of each
 * 32-channel block (as one activation block: srt_act_quantize's rule); the kernels' result is
 * the unpacked weights times x_eff[g, i] = q d / s[g, i] (s read from the packed bytes,
 * docs/LAYOUTS.md). xz[(global group) * cols + i] = x_eff (0 where the weight group is 0). */
static void zz_effective_x(double *xz, const srt_matrix *m, const float *x, const bool *live_col) {
    const int64_t R = m->group, G = R / 32, cols = m->cols, nrb = (m->rows + R - 1) / R;
    const int64_t nib = (cols * (R / 2) + 63) / 64 * 64, rbb = nib + (cols * (R / 16) + 63) / 64 * 64;
    act_buf ab;
    act_make(&ab, 32, SRT_ACT_NATURAL);
    for (int64_t rb = 0; rb < nrb; rb++)
        for (int64_t g = 0; g < G; g++) {
            const uint8_t *sc = (const uint8_t *)m->data + rb * rbb + nib;
            double *xo = xz + (rb * G + g) * cols;
            for (int64_t kb = 0; kb < cols / 32 + (cols % 32 != 0); kb++) {
                float c[32] = {0}, s[32] = {0};
                for (int64_t i = 32 * kb; i < cols && i < 32 * kb + 32; i++) {
                    uint16_t h;
                    memcpy(&h, sc + 2 * (i * G + g), 2);
                    s[i - 32 * kb] = srt_fp16_to_fp32(h);
                    if (live_col[rb * cols + i]) c[i - 32 * kb] = x[i] * s[i - 32 * kb];
                }
                CHECK(srt_act_quantize(ctx_ref, &ab.a, c) == SRT_OK);
                for (int64_t i = 32 * kb; i < cols && i < 32 * kb + 32; i++) {
                    const int k = (int)(i - 32 * kb);
                    xo[i] = s[k] != 0.0f ? (double)ab.a.q[k] * ab.a.d[0] / s[k] : 0.0;
                }
            }
        }
    srt_free(ab.mem);
}

/* ---- GEMV cases --------------------------------------------------------------------- */

static int n_cases, n_bad_ref, n_bad_isa;

/* Compares y with want on the rows in check (all if NULL), tolerance relative
 * to bound[r] = sum |W||x| over the contributing entries. */
static bool close_enough(const float *y, const float *want, const double *bound, int64_t rows, double rel) {
    for (int64_t r = 0; r < rows; r++) {
        double tol = rel * bound[r] + 1e-30;
        if (!(fabs((double)y[r] - (double)want[r]) <= tol)) {
            fprintf(stderr, "  row %lld: got %.9g want %.9g (tol %.3g)\n", (long long)r, y[r], want[r], tol);
            return false;
        }
    }
    return true;
}

static void run_case(srt_layout l, int64_t rows, int64_t cols, int64_t group) {
    const srt_layout_traits *t = srt_layout_get(l);
    float *w = malloc(sizeof(float) * rows * cols), *wd = malloc(sizeof(float) * rows * cols);
    fill(w, rows * cols, 0.05f);
    size_t bytes;
    if (t->size(&bytes, rows, cols, group) != SRT_OK) {
        CHECK_MSG(0, "size %s", t->name);
        return;
    }
    void *mem = srt_alloc(bytes);
    srt_matrix m;
    CHECK(t->pack(&m, mem, bytes, w, rows, cols, group) == SRT_OK);
    CHECK(t->unpack(wd, &m) == SRT_OK);
    float *x = malloc(sizeof(float) * cols), *xe = malloc(sizeof(float) * cols);
    fill(x, cols, 1.0f);
    act_buf ab = {0};
    srt_input in = {x, NULL};
    if (t->input != SRT_IN_F32) {
        act_make(&ab, cols, t->input == SRT_IN_Q8_TILED ? SRT_ACT_TILED : SRT_ACT_NATURAL);
        srt_act nat;
        act_buf nb;
        act_make(&nb, cols, SRT_ACT_NATURAL);
        nat = nb.a;
        CHECK(srt_act_quantize(ctx_ref, &ab.a, x) == SRT_OK);
        CHECK(srt_act_quantize(ctx_ref, &nat, x) == SRT_OK);
        for (int64_t c = 0; c < cols; c++) xe[c] = (float)nat.q[c] * nat.d[c / 32];
        srt_free(nb.mem);
        in.q = &ab.a;
    } else {
        memcpy(xe, x, sizeof(float) * cols);
    }
    const int64_t nlist = t->sparse == SRT_SPARSE_ROWS ? rows : cols;
    const int64_t R = m.group, nrb = R ? (rows + R - 1) / R : 1;
    uint32_t *idx = malloc(4 * (size_t)(nlist * nrb + 1));
    int64_t *off = malloc(sizeof(int64_t) * (size_t)(nrb + 1));
    float *yref = malloc(sizeof(float) * rows), *y = malloc(sizeof(float) * rows);
    double *bound = malloc(sizeof(double) * rows), *exact = malloc(sizeof(double) * rows);
    bool *live_col = malloc((size_t)(cols * nrb) + 1), *live_row = malloc((size_t)rows + 1);
    const bool zz = l == SRT_LAYOUT_ZIGZAG || l == SRT_LAYOUT_STRIPE;
    double *xz = zz ? malloc(sizeof(double) * (size_t)(nrb * R / SRT_QK_TEST * cols)) : NULL;
    const double dens[] = {-1, 0.0, 0.01, 0.5, 0.99, 1.0};
    for (int v = 0; v < 8; v++) {
        /* v 0: dense kernel; 1..5: densities; 6: dead groups; 7: partial quads */
        srt_live live = {idx, 0, NULL};
        memset(live_col, v == 0, (size_t)(cols * nrb));
        memset(live_row, v == 0, (size_t)rows);
        if (v > 0) {
            list_kind k = v == 6 ? L_ALT_GROUPS : v == 7 ? L_PARTIAL_QUADS : L_DENSITY;
            if (t->sparse == SRT_SPARSE_STRIPES) {
                off[0] = 0;
                for (int64_t s = 0; s < nrb; s++) {
                    double p = k == L_DENSITY ? dens[v] : 0.3;
                    if (s % 3 == 2 && v > 2) p = 0.0; /* an empty stripe */
                    off[s + 1] = off[s] + make_list(idx + off[s], cols, k, p);
                    for (int64_t i = off[s]; i < off[s + 1]; i++) live_col[s * cols + idx[i]] = true;
                }
                live.n = off[nrb];
                live.offsets = off;
            } else {
                live.n = make_list(idx, nlist, k, v <= 5 ? dens[v] : 0.5);
                for (int64_t i = 0; i < live.n; i++) {
                    if (t->sparse == SRT_SPARSE_ROWS) live_row[idx[i]] = true;
                    else
                        for (int64_t s = 0; s < nrb; s++) live_col[s * cols + idx[i]] = true;
                }
            }
        }
        if (zz) zz_effective_x(xz, &m, x, live_col);
        /* exact semantics in double */
        for (int64_t r = 0; r < rows; r++) {
            double acc = 0, b = 0;
            int64_t s = R ? r / R : 0;
            bool row_on = t->sparse != SRT_SPARSE_ROWS || live_row[r];
            const double *xr = zz ? xz + (r / SRT_QK_TEST) * cols : NULL;
            for (int64_t c = 0; c < cols; c++) {
                bool on = t->sparse == SRT_SPARSE_ROWS ? row_on : live_col[s * cols + c];
                if (!on) continue;
                const double xc = zz ? xr[c] : xe[c];
                acc += (double)wd[r * cols + c] * xc;
                b += fabs((double)wd[r * cols + c] * xc) + fabs((double)wd[r * cols + c]) * 1e-3;
            }
            exact[r] = acc;
            bound[r] = b + 1e-20;
        }
        const float sentinel = 1234.5f;
        for (int64_t r = 0; r < rows; r++) yref[r] = sentinel;
        srt_status st = v == 0 ? t->gemv(ctx_ref, &m, &in, yref) : t->gemv_sparse(ctx_ref, &m, &in, &live, yref);
        CHECK_MSG(st == SRT_OK, "%s ref gemv: %s", t->name, srt_status_str(st));
        /* rows a row-sparse kernel does not compute are left untouched */
        bool ok = true;
        for (int64_t r = 0; r < rows; r++) {
            if (t->sparse == SRT_SPARSE_ROWS && !live_row[r]) {
                ok &= yref[r] == sentinel;
                yref[r] = 0.0f;
            }
        }
        float *ye = malloc(sizeof(float) * rows);
        for (int64_t r = 0; r < rows; r++) ye[r] = (float)exact[r];
        ok &= close_enough(yref, ye, bound, rows, 1e-5);
        free(ye);
        n_cases++;
        if (!ok) {
            n_bad_ref++;
            fprintf(stderr, "reference %s %lldx%lld g%lld variant %d disagrees with the dequantised math\n", t->name,
                    (long long)rows, (long long)cols, (long long)R, v);
        }
        for (int c = 0; c < nctx; c++) {
            for (int64_t r = 0; r < rows; r++) y[r] = sentinel;
            st = v == 0 ? t->gemv(ctxs[c], &m, &in, y) : t->gemv_sparse(ctxs[c], &m, &in, &live, y);
            bool good = st == SRT_OK;
            for (int64_t r = 0; r < rows && good; r++)
                if (t->sparse == SRT_SPARSE_ROWS && !live_row[r]) {
                    good &= y[r] == sentinel;
                    y[r] = 0.0f;
                }
            good = good && close_enough(y, yref, bound, rows, 3e-5);
            n_cases++;
            if (!good) {
                n_bad_isa++;
                fprintf(stderr, "%s %s x%d %lldx%lld g%lld variant %d (n_live %lld): differs from the reference\n",
                        t->name, srt_isa_name(srt_ctx_isa(ctxs[c])), srt_ctx_threads(ctxs[c]), (long long)rows,
                        (long long)cols, (long long)R, v, (long long)live.n);
            }
        }
    }
    free(xz);
    free(live_col);
    free(live_row);
    free(bound);
    free(exact);
    free(y);
    free(yref);
    free(off);
    free(idx);
    if (ab.mem) srt_free(ab.mem);
    free(x);
    free(xe);
    srt_free(mem);
    free(w);
    free(wd);
}

/* Shapes: 4,300 outputs take kmi4 two passes of 32 output tiles (AMD's width) or three of 16 (Intel's). */
static void test_gemv(void) {
    const int64_t shapes[][2] = {{1, 32}, {3, 64}, {100, 512}, {129, 1056}, {300, 64}, {32, 96}, {128, 544},
                                 {256, 1024}, {64, 2048}, {1536, 512}, {2200, 96}, {4300, 64}};
    const size_t nshapes = quick ? 5 : sizeof shapes / sizeof shapes[0];
    for (size_t s = 0; s < nshapes; s++)
        for (int l = 0; l < SRT_LAYOUT_COUNT; l++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            if (l == SRT_LAYOUT_Q4_0T && rows % 32) continue;
            if (l == SRT_LAYOUT_ZIGZAG) {
                const int64_t groups[] = {32, 256, 320, 512, 2048};
                for (int g = 0; g < 5; g++) run_case((srt_layout)l, rows, cols, groups[g]);
            } else if (l == SRT_LAYOUT_STRIPE) {
                run_case((srt_layout)l, rows, cols, 64);
                run_case((srt_layout)l, rows, cols, 0);
            } else {
                run_case((srt_layout)l, rows, cols, 0);
            }
        }
    CHECK_MSG(n_bad_ref == 0, "%d of %d reference results disagree with the dequantised math", n_bad_ref, n_cases);
    CHECK_MSG(n_bad_isa == 0, "%d of %d ISA results differ from the reference", n_bad_isa, n_cases);
    fprintf(stderr, "gemv: %d comparisons\n", n_cases);
}

/* ---- compaction ---------------------------------------------------------------------- */

static void test_compact(void) {
    const int64_t ns[] = {1, 7, 16, 17, 100, 1000, 6147};
    int bad = 0;
    for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++) {
        int64_t n = ns[s];
        float *x = malloc(sizeof(float) * n), *tv = malloc(sizeof(float) * n);
        uint32_t *want = malloc(4 * n), *got = malloc(4 * n);
        fill(x, n, 1.0f);
        for (int64_t i = 0; i < n; i++) {
            tv[i] = fabsf(rnd_gauss());
            if (i % 9 == 0) x[i] = 0.5f; /* exactly at the threshold: not live */
        }
        const float ts[] = {-1.0f, 0.0f, 0.5f, 1.0f, 100.0f};
        for (int q = 0; q < 6; q++) {
            int64_t m = 0;
            for (int64_t i = 0; i < n; i++)
                if (fabsf(x[i]) > (q == 5 ? tv[i] : ts[q])) want[m++] = (uint32_t)i;
            for (int c = 0; c < nctx; c++) {
                int64_t g = q == 5 ? srt_compact_vec(ctxs[c], got, x, tv, n) : srt_compact(ctxs[c], got, x, n, ts[q]);
                bad += g != m || memcmp(got, want, 4 * (size_t)m) != 0;
            }
        }
        free(x);
        free(tv);
        free(want);
        free(got);
    }
    CHECK_MSG(bad == 0, "%d compactions differ", bad);
}

/* ---- gate activation and attention heads ---------------------------------------------------- */

/* Every ISA against the reference, and the reference against double precision: SiLU and GELU-tanh
 * within a few ulp (SIMD e^x is a polynomial, ~1 ulp, then a division; GELU's 1 + tanh cancels for
 * negative u, so there the error is relative to |u| / 2), large |u| saturating
 * exactly as the reference (e^-u overflows to inf: u / inf = -0). */
static void test_act_fn(void) {
    const int64_t n = 1000;
    float *u = malloc(sizeof(float) * n), *a = malloc(sizeof(float) * n), *r = malloc(sizeof(float) * n);
    fill(u, n, 3.0f);
    const float edge[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 88.0f, -88.0f, 100.0f, -100.0f, 200.0f, -200.0f, 10.0f, -10.0f};
    memcpy(u, edge, sizeof edge);
    int bad = 0;
    for (int g = 0; g < 2; g++) {
        srt_activate(ctx_ref, r, u, n, g);
        for (int64_t i = 0; i < n; i++) {
            double x = u[i], k = 0.7978845608028654;
            double want = g ? 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x))) : x / (1.0 + exp(-x));
            /* GELU: 1 + tanh cancels for negative u, so its error is relative to |u| / 2 */
            double tol = 4e-7 * fabs(want) + (g ? 2.4e-7 * fabs(x) : 0.0) + 1e-37;
            if (!(fabs(r[i] - want) <= tol) && bad < 5)
                fprintf(stderr, "act ref gelu=%d u=%.9g: %.9g vs %.9g\n", g, x, r[i], want);
            bad += !(fabs(r[i] - want) <= tol);
        }
        for (int c = 0; c < nctx; c++)
            for (int64_t len = 1; len <= n; len = len * 3 + 1) { /* tails */
                for (int64_t i = 0; i < n; i++) a[i] = 1234.5f;
                srt_activate(ctxs[c], a, u, len, g);
                for (int64_t i = 0; i < n; i++) {
                    double tol = 1e-6 * fabs((double)r[i]) + (g ? 4.8e-7 * fabs((double)u[i]) : 0.0) + 1e-37;
                    bool ok = i < len ? fabs((double)a[i] - r[i]) <= tol : a[i] == 1234.5f;
                    if (!ok && bad < 5)
                        fprintf(stderr, "act %s gelu=%d u=%.9g: %.9g vs %.9g\n", srt_isa_name(srt_ctx_isa(ctxs[c])), g,
                                u[i], a[i], r[i]);
                    bad += !ok;
                }
            }
    }
    CHECK_MSG(bad == 0, "%d activations differ", bad);
    free(u);
    free(a);
    free(r);
}

/* Heads of several sizes (tails of 2, 8, 16 and 64) over 1..130 positions with GQA strides: the reference
 * against double math, every ISA against the reference (sums in another order: relative to sum |p v|). */
static void test_attention(void) {
    const int64_t hds[] = {8, 64, 24, 80, 38}, ns[] = {1, 2, 15, 16, 17, 130};
    int bad = 0, cases = 0;
    for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            const int64_t hd = hds[a], n = ns[b], stride = 2 * hd + 8;
            float *K = malloc(sizeof(float) * n * stride), *V = malloc(sizeof(float) * n * stride), *q = malloc(sizeof(float) * hd);
            float *o = malloc(sizeof(float) * hd), *ro = malloc(sizeof(float) * hd), *p = malloc(sizeof(float) * n),
                  *rp = malloc(sizeof(float) * n);
            fill(K, n * stride, 1.0f);
            fill(V, n * stride, 1.0f);
            fill(q, hd, 1.0f);
            const float scale = 1.0f / sqrtf((float)hd);
            srt_attention_head(ctx_ref, ro, rp, q, K, V, n, stride, hd, scale);
            double *sd = malloc(sizeof(double) * n), mx = -INFINITY, z = 0;
            for (int64_t t = 0; t < n; t++) {
                double d = 0;
                for (int64_t i = 0; i < hd; i++) d += (double)q[i] * K[t * stride + i];
                sd[t] = scale * d;
                mx = fmax(mx, sd[t]);
            }
            for (int64_t t = 0; t < n; t++) z += (sd[t] = exp(sd[t] - mx));
            for (int64_t i = 0; i < hd; i++) {
                double w = 0, bound = 0;
                for (int64_t t = 0; t < n; t++) {
                    w += sd[t] / z * V[t * stride + i];
                    bound += sd[t] / z * fabs(V[t * stride + i]);
                }
                bad += !(fabs(ro[i] - w) <= 1e-4 * bound + 1e-30);
                for (int c = 0; c < nctx; c++) {
                    if (i == 0) srt_attention_head(ctxs[c], o, p, q, K, V, n, stride, hd, scale);
                    cases++;
                    bad += !(fabs((double)o[i] - ro[i]) <= 1e-4 * bound + 1e-30);
                }
            }
            free(sd);
            free(K);
            free(V);
            free(q);
            free(o);
            free(ro);
            free(p);
            free(rp);
        }
    CHECK_MSG(bad == 0, "%d of %d attention outputs differ", bad, cases);
}

/* Heads that share K and V (srt_attention_group: 1-8 heads, the AVX-512 kernel reads each K/V row once
 * for them): every head's output and probabilities are srt_attention_head's bits on the same context.
 * Over an f16 cache (srt_attention_group_h) they are the f32 group's bits on the cache widened to f32 (head
 * size 264: above the 256 up to which the x86 kernels widen a block once for the group). */
/* The f16 cache's store on every ISA: srt_fp32_to_fp16_sat's bits for every kind of float (halves'
 * range, ties, subnormals, beyond 65504, infinities, NaNs with payloads), at lengths that end in every
 * vector tail. */
static void test_f16_store(void) {
    enum { N = 4099 };
    float *x = malloc(sizeof(float) * N);
    uint16_t *want = malloc(sizeof(uint16_t) * N), *got = malloc(sizeof(uint16_t) * N);
    for (int i = 0; i < N; i++) {
        uint32_t u = rnd_u32() << 16 ^ rnd_u32();
        if (i % 4 == 0) u = (u & 0x80000000u) | (0x33000000u + u % 0x14800000u); /* the half range and above */
        if (i % 4 == 1) u = (u & 0x80001fffu) | ((0x38000000u + (u % 0x0f800000u)) & ~0x1fffu) | 0x1000u; /* ties */
        if (i % 97 == 2) u = (u & 0x80000000u) | 0x7f800000u | (i % 3 ? rnd_u32() & 0x7fffffu : 0); /* inf, NaN */
        memcpy(&x[i], &u, sizeof u);
        want[i] = srt_fp32_to_fp16_sat(x[i]);
    }
    int bad = 0, cases = 0;
    const int64_t lens[] = {1, 3, 4, 7, 8, 9, 15, 16, 17, 33, 64, 100, N};
    for (int c = 0; c < nctx; c++)
        for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++)
            for (int64_t off = 0; off + lens[k] <= N; off += lens[k] == N ? N : 389) {
                memset(got, 0xab, sizeof(uint16_t) * N);
                srt_f16_store(ctxs[c], got + off, x + off, lens[k]);
                for (int64_t i = 0; i < N; i++) {
                    const bool inside = i >= off && i < off + lens[k];
                    const bool ok = inside ? got[i] == want[i] : got[i] == 0xabab;
                    if (!ok && bad < 5)
                        fprintf(stderr, "f16 store %s: x[%lld] = %a: %04x, want %04x\n", srt_isa_name(srt_ctx_isa(ctxs[c])),
                                (long long)i, (double)x[i], got[i], inside ? want[i] : 0xabab);
                    bad += !ok;
                }
                cases++;
            }
    CHECK_MSG(bad == 0, "%d values of %d stores differ from srt_fp32_to_fp16_sat", bad, cases);
    CHECK(srt_fp32_to_fp16_sat(-NAN) == 0xfe00 && srt_fp32_to_fp16_sat(NAN) == 0x7e00);
    free(x);
    free(want);
    free(got);
}

static void test_attention_group(void) {
    const int64_t hds[] = {8, 64, 24, 80, 38, 128, 264}, ns[] = {1, 15, 16, 17, 130}, gs[] = {1, 2, 3, 4, 5, 8};
    int bad = 0, bad_h = 0, cases = 0;
    for (size_t a = 0; a < sizeof hds / sizeof hds[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++)
            for (size_t gi = 0; gi < sizeof gs / sizeof gs[0]; gi++) {
                const int64_t hd = hds[a], n = ns[b], g = gs[gi], stride = 3 * hd + 8;
                float *K = malloc(sizeof(float) * n * stride), *V = malloc(sizeof(float) * n * stride);
                float *Kw = malloc(sizeof(float) * n * stride), *Vw = malloc(sizeof(float) * n * stride);
                uint16_t *Kh = malloc(sizeof(uint16_t) * n * stride), *Vh = malloc(sizeof(uint16_t) * n * stride);
                float *q = malloc(sizeof(float) * g * hd), *o = malloc(sizeof(float) * g * hd), *og = malloc(sizeof(float) * g * hd);
                float *p = malloc(sizeof(float) * g * n), *pg = malloc(sizeof(float) * g * n);
                fill(K, n * stride, 1.0f);
                fill(V, n * stride, 1.0f);
                fill(q, g * hd, 1.0f);
                for (int64_t i = 0; i < n * stride; i++) {
                    Kh[i] = srt_fp32_to_fp16(K[i]), Vh[i] = srt_fp32_to_fp16(V[i]);
                    Kw[i] = srt_fp16_to_fp32(Kh[i]), Vw[i] = srt_fp16_to_fp32(Vh[i]);
                }
                const float scale = 1.0f / sqrtf((float)hd);
                for (int c = 0; c < nctx; c++) {
                    for (int64_t h = 0; h < g; h++) srt_attention_head(ctxs[c], o + h * hd, p + h * n, q + h * hd, K, V, n, stride, hd, scale);
                    for (int64_t i = 0; i < g * hd; i++) og[i] = -7.0f;
                    srt_attention_group(ctxs[c], og, pg, q, K, V, n, stride, hd, g, scale);
                    bad += memcmp(o, og, sizeof(float) * (size_t)(g * hd)) != 0 || memcmp(p, pg, sizeof(float) * (size_t)(g * n)) != 0;
                    srt_attention_group(ctxs[c], o, p, q, Kw, Vw, n, stride, hd, g, scale);
                    for (int64_t i = 0; i < g * hd; i++) og[i] = -7.0f;
                    srt_attention_group_h(ctxs[c], og, pg, q, Kh, Vh, n, stride, hd, g, scale);
                    bad_h += memcmp(o, og, sizeof(float) * (size_t)(g * hd)) != 0 || memcmp(p, pg, sizeof(float) * (size_t)(g * n)) != 0;
                    cases++;
                }
                free(K);
                free(V);
                free(Kw);
                free(Vw);
                free(Kh);
                free(Vh);
                free(q);
                free(o);
                free(og);
                free(p);
                free(pg);
            }
    CHECK_MSG(bad == 0, "%d of %d attention groups differ from their heads one at a time", bad, cases);
    CHECK_MSG(bad_h == 0, "%d of %d attention groups over an f16 cache differ from the f32 group on it widened", bad_h,
              cases);
}

/* ---- several inputs at once ---------------------------------------------------------------- */

/* srt_gemv_batch on 5 inputs equals 5 single GEMVs bit for bit, every layout and context (row
 * layouts: the same kernel on the same rows; column layouts: the same GEMV); srt_gemv_batch_sparse
 * likewise against srt_gemv_sparse. kmi4 / kmi8 run their batches in K windows of 256 KB (with
 * 2100 outputs 6 and 3 K-blocks: the 33 K-blocks here take 6 and 11 windows, each call continuing
 * the sums of the one before), and 70 inputs take more than one run (64 at a time, their lists'
 * second halves in the context's shared scratch). */
static void test_batch(void) {
    /* 301 rows: the multi-input kernels' row ranges (blocks of 32 rows split between threads) end in
     * short row tiles (i8mm: 4 rows for q8_0, pairs for kmi4r) at 1 and 2 threads */
    const int64_t rows = 301, cols = 1056;
    int bad = 0;
    for (int l = 0; l < SRT_LAYOUT_COUNT; l++)
        /* 5, 6, 7 inputs: the multi-input kernels' last group of four holds 1, 2 or 3 (which i8mm takes
         * in pairs); 70: more than one multi-input kernel call takes */
        for (int64_t nv = 5; nv <= 70; nv = nv < 7 ? nv + 1 : nv + 63) {
            if ((nv == 6 || nv == 7) && l != SRT_LAYOUT_Q8_0 && l != SRT_LAYOUT_KMI4R) continue;
            const bool kd = l == SRT_LAYOUT_KMI4 || l == SRT_LAYOUT_KMI8;
            if (nv > 5 && l != SRT_LAYOUT_Q8_0 && l != SRT_LAYOUT_KMI4R && !kd) continue;
            if (nv > 5 && kd && quick) continue; /* under qemu: the windows, not the runs of 16 */
            const srt_layout_traits *t = srt_layout_get((srt_layout)l);
            const int64_t g = l == SRT_LAYOUT_ZIGZAG || l == SRT_LAYOUT_STRIPE ? 64 : 0,
                          r = l == SRT_LAYOUT_Q4_0T ? 320 : kd ? 2100 : rows;
            size_t bytes;
            if (t->size(&bytes, r, cols, g) != SRT_OK) {
                bad++;
                continue;
            }
            float *w = malloc(sizeof(float) * r * cols), *x = malloc(sizeof(float) * nv * cols);
            float *y = malloc(sizeof(float) * nv * r), *yb = malloc(sizeof(float) * nv * r);
            fill(w, r * cols, 0.05f);
            fill(x, nv * cols, 1.0f);
            void *mem = srt_alloc(bytes);
            srt_matrix m;
            CHECK(t->pack(&m, mem, bytes, w, r, cols, g) == SRT_OK);
            act_buf ab[70] = {{{0}, NULL}};
            srt_input in[70];
            float *yp[70];
            for (int64_t v = 0; v < nv; v++) {
                in[v].f = x + v * cols;
                in[v].q = NULL;
                if (t->input != SRT_IN_F32) {
                    act_make(&ab[v], cols, t->input == SRT_IN_Q8_TILED ? SRT_ACT_TILED : SRT_ACT_NATURAL);
                    CHECK(srt_act_quantize(ctx_ref, &ab[v].a, in[v].f) == SRT_OK);
                    in[v].q = &ab[v].a;
                }
                yp[v] = yb + v * r;
            }
            for (int c = 0; c < nctx; c++) {
                for (int64_t v = 0; v < nv; v++) CHECK(t->gemv(ctxs[c], &m, &in[v], y + v * r) == SRT_OK);
                for (int64_t i = 0; i < nv * r; i++) yb[i] = -7.0f; /* not the last context's outputs */
                CHECK(srt_gemv_batch(ctxs[c], &m, in, nv, yp) == SRT_OK);
                bad += memcmp(y, yb, sizeof(float) * (size_t)(nv * r)) != 0;
            }
            /* with live lists (row and column layouts): input 0 dense, then lists of density 0.5, 0.1,
             * one entry and none; each output as srt_gemv_sparse's on its list, the dead rows untouched */
            if (t->sparse == SRT_SPARSE_ROWS || t->sparse == SRT_SPARSE_COLS) {
                const int64_t lim = t->sparse == SRT_SPARSE_ROWS ? r : cols;
                uint32_t *ix = malloc(sizeof(uint32_t) * (size_t)(nv * lim));
                srt_live lv[70]; /* 70 inputs with lists: one single-input sparse GEMV each */
                const double keep[5] = {1.0, 0.5, 0.1, -1.0, 0.0};
                for (int64_t v = 0; v < nv; v++) {
                    int64_t n = 0;
                    for (int64_t i = 0; i < lim; i++)
                        if (keep[v % 5] < 0 ? i == lim / 3 : rnd_unit() < keep[v % 5]) ix[v * lim + n++] = (uint32_t)i;
                    lv[v] = (srt_live){v == 0 ? NULL : ix + v * lim, n, NULL};
                }
                for (int c = 0; c < nctx; c++) {
                    for (int64_t i = 0; i < nv * r; i++) y[i] = yb[i] = -7.0f;
                    for (int64_t v = 0; v < nv; v++)
                        CHECK((v == 0 ? t->gemv(ctxs[c], &m, &in[v], y + v * r)
                                      : t->gemv_sparse(ctxs[c], &m, &in[v], &lv[v], y + v * r)) == SRT_OK);
                    CHECK(srt_gemv_batch_sparse(ctxs[c], &m, in, lv, nv, yp) == SRT_OK);
                    bad += memcmp(y, yb, sizeof(float) * (size_t)(nv * r)) != 0;
                }
                lv[1].n = lim + 1; /* a list longer than the matrix: refused */
                CHECK(srt_gemv_batch_sparse(ctx_ref, &m, in, lv, nv, yp) == SRT_EINVAL);
                free(ix);
            }
            CHECK(srt_gemv_batch(ctx_ref, &m, in, 0, yp) == SRT_OK);
            for (int64_t v = 0; v < nv; v++) srt_free(ab[v].mem);
            srt_free(mem);
            free(w);
            free(x);
            free(y);
            free(yb);
        }
    CHECK_MSG(bad == 0, "%d batched GEMVs differ from single ones", bad);
}

/* srt_gemv_batch (lists false) or srt_gemv_batch_sparse against one GEMV per input on every context,
 * layout l, r x cols, nv <= 17 inputs; the lists hold 90% of the neurons (input 1's skipping K-block 7,
 * where its input holds a NaN, so its scale there is NaN: the block must be skipped, not added as 0;
 * input 2's a single entry). Returns the contexts whose outputs differ; counts the cases. */
static int batch_vs_single(srt_layout l, int64_t r, int64_t cols, int64_t nv, bool lists, int *cases) {
    const srt_layout_traits *t = srt_layout_get(l);
    size_t bytes;
    CHECK(t->size(&bytes, r, cols, 0) == SRT_OK);
    float *w = malloc(sizeof(float) * r * cols), *x = malloc(sizeof(float) * nv * cols);
    float *y = malloc(sizeof(float) * nv * r), *yb = malloc(sizeof(float) * nv * r);
    uint32_t *ix = malloc(sizeof(uint32_t) * (size_t)(nv * cols));
    fill(w, r * cols, 0.05f);
    fill(x, nv * cols, 1.0f);
    if (lists) x[cols + 7 * 32 + 3] = NAN; /* in the K-block input 1's list skips: no output may see it */
    void *mem = srt_alloc(bytes);
    srt_matrix m;
    CHECK(t->pack(&m, mem, bytes, w, r, cols, 0) == SRT_OK);
    act_buf ab[17];
    srt_input in[17];
    srt_live lv[17];
    float *yp[17];
    for (int64_t v = 0; v < nv; v++) {
        act_make(&ab[v], cols, SRT_ACT_NATURAL);
        in[v].f = x + v * cols;
        CHECK(srt_act_quantize(ctx_ref, &ab[v].a, in[v].f) == SRT_OK);
        in[v].q = &ab[v].a;
        yp[v] = yb + v * r;
        int64_t n = 0;
        for (int64_t i = 0; lists && i < cols; i++) {
            const bool keep = v == 2 ? i == 500 : v == 1 ? i / 32 != 7 && rnd_unit() < 0.9 : rnd_unit() < 0.9;
            if (keep) ix[v * cols + n++] = (uint32_t)i;
        }
        lv[v] = (srt_live){ix + v * cols, n, NULL};
    }
    int bad = 0;
    for (int c = 0; c < nctx; c++) {
        for (int64_t i = 0; i < nv * r; i++) y[i] = yb[i] = -7.0f;
        for (int64_t v = 0; v < nv; v++)
            CHECK((lists ? t->gemv_sparse(ctxs[c], &m, &in[v], &lv[v], y + v * r) : t->gemv(ctxs[c], &m, &in[v], y + v * r)) ==
                  SRT_OK);
        CHECK((lists ? srt_gemv_batch_sparse(ctxs[c], &m, in, lv, nv, yp) : srt_gemv_batch(ctxs[c], &m, in, nv, yp)) == SRT_OK);
        bad += memcmp(y, yb, sizeof(float) * (size_t)(nv * r)) != 0;
        (*cases)++;
    }
    for (int64_t v = 0; v < nv; v++) srt_free(ab[v].mem);
    srt_free(mem);
    free(w);
    free(x);
    free(y);
    free(yb);
    free(ix);
    return bad;
}

/* q8_0 batches at the edges of the x86 row kernels' shapes (SRT_Q8_LANES): 1, 10, 16 and 17 blocks
 * (lanes no block reaches, a group of 16 cut short), 16 and 47 rows (whole AMX row tiles and not),
 * 2 to 17 inputs (one tile's worth, and one more): every output the single-input kernel's bits. */
static void test_batch_q8_shapes(void) {
    const int64_t colss[] = {32, 320, 512, 544}, rowss[] = {16, 47}, nvs[] = {2, 16, 17};
    int bad = 0, cases = 0;
    for (size_t ci = 0; ci < 4; ci++)
        for (size_t ri = 0; ri < 2; ri++)
            for (size_t vi = 0; vi < 3; vi++) bad += batch_vs_single(SRT_LAYOUT_Q8_0, rowss[ri], colss[ci], nvs[vi], false, &cases);
    CHECK_MSG(bad == 0, "%d of %d q8_0 batches differ from single GEMVs", bad, cases);
}

/* kmi4 / kmi8 batches with dense live lists: on AMX these take the tiles (they pay from 60% / 20% of
 * the pairs live), each output the single-input sparse GEMV's bits, at 5 and 17 inputs (two runs of 16). */
static void test_batch_kd_lists(void) {
    int bad = 0, cases = 0;
    for (int64_t nv = 5; nv <= 17; nv += 12) {
        bad += batch_vs_single(SRT_LAYOUT_KMI4, 300, 1056, nv, true, &cases);
        bad += batch_vs_single(SRT_LAYOUT_KMI8, 300, 1056, nv, true, &cases);
    }
    CHECK_MSG(bad == 0, "%d of %d kmi4/kmi8 list batches differ from single sparse GEMVs", bad, cases);
}

/* kmi4 / kmi8 at 1, 2 and 3 threads (srt_gemv.c: the list's two fixed halves, their outputs dealt
 * to the threads): every output the 1-thread run's bits, for single GEMVs (sparse and dense) and
 * batches (K windows; AMX tiles for the dense batch where there are tiles), on every ISA. 300 outputs
 * are 3 tiles of 128 (at 3 threads the middle thread takes the first half's last tile and the second
 * half's first), 2100 are 17; the lists: all, about half, one neuron, one K-block (an empty second
 * half), none. Outputs start at -7, so one that no thread writes differs. */
static void test_kd_threads(void) {
    const srt_layout ls[] = {SRT_LAYOUT_KMI4, SRT_LAYOUT_KMI8};
    const int64_t rs[] = {300, 2100}, cols = 1056, nv = 5;
    float *w = malloc(sizeof(float) * 2100 * cols), *x = malloc(sizeof(float) * nv * cols);
    float *y1[2], *y = malloc(sizeof(float) * nv * 2100);
    uint32_t *ix = malloc(sizeof(uint32_t) * (size_t)(nv * cols));
    for (int k = 0; k < 2; k++) y1[k] = malloc(sizeof(float) * nv * 2100);
    fill(w, 2100 * cols, 0.05f);
    fill(x, nv * cols, 1.0f);
    act_buf ab[5];
    srt_input in[5];
    srt_live lv[5];
    for (int64_t v = 0; v < nv; v++) {
        act_make(&ab[v], cols, SRT_ACT_NATURAL);
        CHECK(srt_act_quantize(ctx_ref, &ab[v].a, x + v * cols) == SRT_OK);
        in[v] = (srt_input){x + v * cols, &ab[v].a};
        int64_t n = 0;
        for (int64_t i = 0; i < cols; i++) {
            const bool keep = v == 0 || (v == 1 && rnd_unit() < 0.5) || (v == 2 && i == 517) || (v == 3 && i / 32 == 9);
            if (keep) ix[v * cols + n++] = (uint32_t)i;
        }
        lv[v] = (srt_live){ix + v * cols, n, NULL};
    }
    int bad = 0, cases = 0;
    for (size_t li = 0; li < 2; li++)
        for (size_t ri = 0; ri < 2; ri++) {
            const srt_layout_traits *t = srt_layout_get(ls[li]);
            const int64_t r = rs[ri];
            size_t bytes;
            CHECK(t->size(&bytes, r, cols, 0) == SRT_OK);
            void *mem = srt_alloc(bytes);
            srt_matrix m;
            CHECK(t->pack(&m, mem, bytes, w, r, cols, 0) == SRT_OK);
            float *yp[5];
            for (int64_t v = 0; v < nv; v++) yp[v] = y + v * r;
            for (int isa = 0; isa < SRT_ISA_COUNT; isa++) {
                if (!srt_isa_available((srt_isa)isa)) continue;
                for (int nth = 1; nth <= 3; nth++) {
                    srt_ctx *c;
                    CHECK(srt_ctx_create(&c, (srt_isa)isa, nth) == SRT_OK);
                    /* kinds: single sparse GEMVs, their batch, single dense GEMVs, their batch */
                    for (int kind = 0; kind < 4; kind++) {
                        const bool dense = kind >= 2, batch = kind & 1;
                        for (int64_t i = 0; i < nv * r; i++) y[i] = -7.0f;
                        if (batch)
                            CHECK((dense ? srt_gemv_batch(c, &m, in, nv, yp) : srt_gemv_batch_sparse(c, &m, in, lv, nv, yp)) ==
                                  SRT_OK);
                        else
                            for (int64_t v = 0; v < nv; v++)
                                CHECK((dense ? t->gemv(c, &m, &in[v], yp[v]) : t->gemv_sparse(c, &m, &in[v], &lv[v], yp[v])) ==
                                      SRT_OK);
                        if (nth == 1 && !batch) {
                            memcpy(y1[dense], y, sizeof(float) * (size_t)(nv * r));
                            continue;
                        }
                        bad += memcmp(y, y1[dense], sizeof(float) * (size_t)(nv * r)) != 0;
                        cases++;
                    }
                    srt_ctx_free(c);
                }
            }
            srt_free(mem);
        }
    for (int64_t v = 0; v < nv; v++) srt_free(ab[v].mem);
    free(w);
    free(x);
    free(y1[0]);
    free(y1[1]);
    free(y);
    free(ix);
    CHECK_MSG(bad == 0, "%d of %d kmi4/kmi8 runs at 1-3 threads differ from 1 thread", bad, cases);
    printf("kmi4/kmi8 at 1-3 threads: %d runs, %d differ from 1 thread\n", cases, bad);
}

/* Row GEMVs whose shares are taken in pieces and stolen (srt_gemv.c rows_run): at 2 and 3 threads (3 on
 * a 2-core machine is oversubscribed, so threads fall behind and others take their backs) every row is
 * the 1-thread run's, bit for bit (same kernel, same inputs, independent rows), and rows off the list
 * stay untouched. */
static void test_rows_shared(void) {
    const srt_layout ls[] = {SRT_LAYOUT_KMI4R, SRT_LAYOUT_Q8_0, SRT_LAYOUT_F32};
    const int64_t r = quick ? 1001 : 3001, cols = 512;
    const int reps = quick ? 8 : 40;
    float *w = malloc(sizeof(float) * r * cols), *x = malloc(sizeof(float) * cols);
    float *y1 = malloc(sizeof(float) * r), *y = malloc(sizeof(float) * r);
    uint32_t *ix = malloc(sizeof(uint32_t) * r);
    fill(w, r * cols, 0.05f);
    fill(x, cols, 1.0f);
    int64_t n = 0;
    for (int64_t i = 0; i < r; i++)
        if (rnd_unit() < 0.6) ix[n++] = (uint32_t)i;
    const srt_live live = {ix, n, NULL};
    int bad = 0, cases = 0;
    for (size_t li = 0; li < sizeof ls / sizeof ls[0]; li++) {
        const srt_layout_traits *t = srt_layout_get(ls[li]);
        act_buf ab;
        act_make(&ab, cols, t->input == SRT_IN_Q8_TILED ? SRT_ACT_TILED : SRT_ACT_NATURAL);
        CHECK(srt_act_quantize(ctx_ref, &ab.a, x) == SRT_OK);
        const srt_input in = {x, &ab.a};
        size_t bytes;
        CHECK(t->size(&bytes, r, cols, 0) == SRT_OK);
        void *mem = srt_alloc(bytes);
        srt_matrix m;
        CHECK(t->pack(&m, mem, bytes, w, r, cols, 0) == SRT_OK);
        for (int isa = 0; isa < SRT_ISA_COUNT; isa++) {
            if (!srt_isa_available((srt_isa)isa)) continue;
            srt_ctx *c1, *cn[2];
            CHECK(srt_ctx_create(&c1, (srt_isa)isa, 1) == SRT_OK && srt_ctx_create(&cn[0], (srt_isa)isa, 2) == SRT_OK &&
                  srt_ctx_create(&cn[1], (srt_isa)isa, 3) == SRT_OK);
            for (int sparse = 0; sparse < 2; sparse++) {
                for (int64_t i = 0; i < r; i++) y1[i] = -7.0f;
                CHECK((sparse ? t->gemv_sparse(c1, &m, &in, &live, y1) : t->gemv(c1, &m, &in, y1)) == SRT_OK);
                for (int rep = 0; rep < reps; rep++) {
                    for (int64_t i = 0; i < r; i++) y[i] = -7.0f;
                    srt_ctx *c = cn[rep & 1];
                    CHECK((sparse ? t->gemv_sparse(c, &m, &in, &live, y) : t->gemv(c, &m, &in, y)) == SRT_OK);
                    bad += memcmp(y, y1, sizeof(float) * (size_t)r) != 0;
                    cases++;
                }
            }
            srt_ctx_free(c1);
            srt_ctx_free(cn[0]);
            srt_ctx_free(cn[1]);
        }
        srt_free(mem);
        srt_free(ab.mem);
    }
    free(w);
    free(x);
    free(y1);
    free(y);
    free(ix);
    CHECK_MSG(bad == 0, "%d of %d row GEMVs at 2-3 threads differ from 1 thread", bad, cases);
}

/* ---- the pool ---------------------------------------------------------------------------- */

typedef struct pool_arg {
    int hits[8];
} pool_arg;
static void pool_fn(void *a, int tid, int nth) {
    pool_arg *p = a;
    if (tid < 8 && nth <= 8) p->hits[tid]++;
}

static void test_pool(void) {
    srt_ctx *c;
    CHECK(srt_ctx_create(&c, SRT_ISA_SCALAR, 4) == SRT_OK);
    pool_arg a = {{0}};
    for (int i = 0; i < 2000; i++) srt_ctx_run(c, pool_fn, &a);
    CHECK(a.hits[0] == 2000 && a.hits[1] == 2000 && a.hits[2] == 2000 && a.hits[3] == 2000 && a.hits[4] == 0);
    srt_ctx_free(c);
    srt_ctx_free(NULL);
}

int main(void) {
    const char *q = getenv("SRT_TEST_QUICK");
    quick = q && *q && *q != '0';
    make_ctxs();
    test_pool();
    test_act();
    test_act_nonfinite();
    test_compact();
    test_act_fn();
    test_attention();
    test_attention_group();
    test_f16_store();
    test_batch();
    test_batch_q8_shapes();
    test_batch_kd_lists();
    test_kd_threads();
    test_rows_shared();
    test_gemv();
    for (int c = 0; c < nctx; c++) srt_ctx_free(ctxs[c]);
    srt_ctx_free(ctx_ref);
    return sc_test_finish();
}
