/* cmd_bench.c - `sparsecal bench`: the cold-cache layer-cycling GEMV
 * benchmark of the CLAWS paper (App. E). N distinct weight matrices per kernel
 * (35 by default) are visited in turn so the weights come from DRAM; after
 * warm-up passes, every GEMV of the timed passes is timed and the per-layer
 * median, min and max are reported; the whole measurement is repeated
 * (--runs) and the spread of the run medians is shown. All kernels are
 * interleaved pass by pass, so machine noise hits them alike.
 *
 * Rows: a streaming read of the q4_0 bytes (the floor), f32 cblas_sgemv,
 * GGML-style q4_0 rows, the PowerInfer-style per-live-row axpy over q4_0 rows
 * of W^T, kmi4 dense/sparse, zigzag dense/column-sparse, the full MLP
 * block (kmi4r gate dense, kmi4r up and kmi4 down sparse) dense vs sparse,
 * the same block with the gate input-sparse too (kmi4 over the live input
 * channels of a TEAL-like mask at the same sparsity, what teal-cats runs on a
 * kmi4-in artifact) against the dense block, and a bare read of exactly the
 * bytes sparse kmi4 needs (no arithmetic, its order and prefetch distances):
 * the floor for sparse kmi4, as the stream is for the dense kernels. */
#define _DEFAULT_SOURCE /* madvise */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "json_out.h"
#include "cli.h"
#include "srt.h"

#define MAX_SP 8
#define MAX_SHAPES 4
#define MAX_THREADS 4

typedef enum kind { K_FLOOR, K_F32, K_Q4, K_Q8, K_SCATTER, K_KMI4, K_KMI8, K_ZIGZAG, K_KMI4R, K_MLP, K_LIVE, K_MLPIN, K_COUNT } kind;
static const char *kind_name[K_COUNT] = {"stream floor (q4_0 bytes)", "f32 cblas_sgemv", "q4_0 rows (GGML-style)",
                                         "q8_0 rows (GGML-style)",
                                         "q4_0t scatter (PowerInfer-style)", "kmi4", "kmi8 (q8_0 values)", "zigzag",
                                         "kmi4r rows (up proj., OUT -> IN)", "MLP block (kmi4)",
                                         "kmi4 live bytes, bare read (× stream floor)",
                                         "MLP block, gate input-sparse (kmi4-in, × dense block)"};
static const char *kind_key[K_COUNT] = {"floor", "f32_sgemv", "q4_0",     "q8_0", "q4_0t_scatter", "kmi4", "kmi8",
                                        "zigzag", "kmi4r_up",  "mlp",      "kmi4_live_read", "mlp_input_sparse"};

typedef struct config {
    kind k;
    int sp; /* index into the sparsity list, -1 = dense */
    double *samples;
    int64_t ns;
    double run_med[16], med, lo, hi, rlo, rhi, bytes;
} config;

typedef struct layer {
    srt_matrix q4, q8, q4t, kd, k8, zz, g, u, gi; /* gi: the gate neuron-major (kmi4), read per live input */
    float *f32;
    uint32_t *live[MAX_SP], *live_in[MAX_SP]; /* live neurons; live input channels */
} layer;

typedef struct bench {
    int64_t in, out, nlayers, nsp, live[MAX_SP], live_in[MAX_SP];
    double sp[MAX_SP];
    layer *L;
    srt_ctx *ctx;
    int nth;
    /* vectors */
    float *x, *h, *y, *g, *a, *u, *hm, *xm;
    srt_act xt, hq, xq; /* xq: the masked input in natural order (the kmi4 gate's) */
    uint32_t *sel;
    config cfg[64];
    int ncfg;
    uint64_t sink;
    bool clustered;   /* live sets of whole groups of `group` neurons (a permuted model) */
    int64_t group;
    float *bias[MAX_SP]; /* clustered MLP: + on the layer's live set before top-K */
} bench;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static uint64_t rng_state = 0x853c49e6748fea9bull;
static float rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    /* pseudo-Gaussian: sum of three uniforms */
    float s = 0;
    for (int i = 0; i < 3; i++) s += (float)((rng_state >> (20 * i)) & 0xfffff) / 1048576.0f;
    return (s - 1.5f) * 2.0f;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- the MLP's activation: a cheap tanh-GELU, identical in dense and sparse ----- */

static void gelu(float *a, const float *g, int64_t n) {
    /* blocks of 16 with a fixed trip count, so the compiler vectorises */
    for (int64_t i = 0; i < n; i += 16) {
        float x[16], r[16];
        const int64_t m = n - i < 16 ? n - i : 16;
        memset(x, 0, sizeof x);
        memcpy(x, g + i, sizeof(float) * (size_t)m);
        for (int k = 0; k < 16; k++) {
            float z = 0.7978845608f * (x[k] + 0.044715f * x[k] * x[k] * x[k]);
            z = 0.5f * (z + 4.97f - fabsf(z - 4.97f)); /* min(z, 4.97) without a branch */
            z = 0.5f * (z - 4.97f + fabsf(z + 4.97f)); /* max(z, -4.97) */
            const float z2 = z * z;
            r[k] = 0.5f * x[k] * (1.0f + z * (27.0f + z2) / (27.0f + 9.0f * z2));
        }
        memcpy(a + i, r, sizeof(float) * (size_t)m);
    }
}

/* ---- one timed operation ------------------------------------------------------------ */

/* A bare read (one word per 64-byte line, no arithmetic) of the bytes sparse kmi4 reads for the live list
 * idx[0..n) of m, in its order (kernels/x86/x86_kmi4_body.h): per K-block of 32 neurons its rows_pad fp16
 * scales, then the block's live vectors (rows_pad / 2 bytes each) eight at a time, tile (64 bytes) after
 * tile across the eight, every line prefetched one pass (8 entries) ahead into L1 and four passes (32
 * entries) ahead into L2, as the kernel does. Threads take slices of the list, as the kernel's do. */
#define LIVE_PASS 8
static inline uint64_t word_at(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t kmi4_live_read(const srt_matrix *m, const uint32_t *idx, int64_t n) {
    const int64_t rp = (m->rows + 127) / 128 * 128, vb = rp / 2, bb = rp * 18, nt = vb / 64;
    const uint8_t *w = m->data;
    uint64_t s = 0;
    for (int64_t p = 0; p < n;) {
        const int64_t kb = idx[p] / 32;
        int64_t e = p;
        while (e < n && idx[e] / 32 == kb) e++;
        const uint8_t *sc = w + kb * bb;
        for (int64_t o = 0; o < 2 * rp; o += 64) s ^= word_at(sc + o);
        const uint8_t *sc_far = w + (int64_t)(idx[e + 4 * LIVE_PASS < n ? e + 4 * LIVE_PASS : n - 1] / 32) * bb;
        for (int64_t o = 0; o < 2 * rp; o += 64) __builtin_prefetch(sc_far + o, 0, 2);
        for (; p < e; p += LIVE_PASS) {
            const int c = (int)(e - p < LIVE_PASS ? e - p : LIVE_PASS);
            const uint8_t *v[LIVE_PASS], *nx[LIVE_PASS], *fa[LIVE_PASS];
            for (int r = 0; r < LIVE_PASS; r++) {
                const int64_t a = p + r < n ? p + r : n - 1, b = p + LIVE_PASS + r < n ? p + LIVE_PASS + r : n - 1,
                              f = p + 4 * LIVE_PASS + r < n ? p + 4 * LIVE_PASS + r : n - 1;
                v[r] = w + (int64_t)(idx[a] / 32) * bb + 2 * rp + (idx[a] % 32) * vb;
                nx[r] = w + (int64_t)(idx[b] / 32) * bb + 2 * rp + (idx[b] % 32) * vb;
                fa[r] = w + (int64_t)(idx[f] / 32) * bb + 2 * rp + (idx[f] % 32) * vb;
            }
            for (int64_t t = 0; t < nt; t++) {
                for (int r = 0; r < LIVE_PASS; r++) {
                    __builtin_prefetch(nx[r] + 64 * t, 0, 3);
                    __builtin_prefetch(fa[r] + 64 * t, 0, 2);
                }
                for (int r = 0; r < c; r++) s ^= word_at(v[r] + 64 * t);
            }
        }
    }
    return s;
}

typedef struct live_task {
    const srt_matrix *m;
    const uint32_t *idx;
    int64_t n;
    uint64_t sum[64];
} live_task;

static void live_thread(void *arg, int tid, int nth) {
    live_task *t = arg;
    const int64_t a = t->n * tid / nth, b = t->n * (tid + 1) / nth;
    t->sum[tid % 64] = b > a ? kmi4_live_read(t->m, t->idx + a, b - a) : 0;
}

/* The MLP block after the gate GEMV (B->g): GELU, then up (kmi4r rows, input `in`) and down (kmi4) on
 * every neuron, or at sparsity index sp >= 0 on the top-K of |a| (clustered: steered onto layer 0's set). */
static void mlp_tail(bench *B, const layer *l, int sp, const srt_input *in) {
    const srt_layout_traits *kr = srt_layout_get(SRT_LAYOUT_KMI4R), *kd = srt_layout_get(SRT_LAYOUT_KMI4);
    srt_ctx *ctx = B->ctx;
    const int64_t n = B->in;
    gelu(B->a, B->g, n);
    srt_input hin = {NULL, &B->hq};
    if (sp < 0) {
        kr->gemv(ctx, &l->u, in, B->u);
        for (int64_t j = 0; j < n; j++) B->hm[j] = B->a[j] * B->u[j];
        srt_act_quantize(ctx, &B->hq, B->hm);
        kd->gemv(ctx, &l->kd, &hin, B->y);
        return;
    }
    const int64_t k = B->live[sp];
    if (B->clustered)
        for (int64_t j = 0; j < n; j++) B->a[j] += B->bias[sp][j];
    srt_select_topk(B->sel, B->a, n, k, SRT_SELECT_ABS);
    srt_live lv = {B->sel, k, NULL};
    kr->gemv_sparse(ctx, &l->u, in, &lv, B->u);
    memset(B->hm, 0, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < k; i++) B->hm[B->sel[i]] = B->a[B->sel[i]] * B->u[B->sel[i]];
    srt_act_quantize(ctx, &B->hq, B->hm);
    kd->gemv_sparse(ctx, &l->kd, &hin, &lv, B->y);
}

static void run_op(bench *B, const config *c, const layer *l) {
    srt_ctx *ctx = B->ctx;
    const int sp = c->sp;
    srt_input in = {0};
    switch (c->k) {
    case K_FLOOR: B->sink ^= srt_stream_read(ctx, l->q4.data, l->q4.bytes); break;
    case K_F32:
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (int)B->out, (int)B->in, 1.0f, l->f32, (int)B->in, B->h, 1, 0.0f,
                    B->y, 1);
        break;
    case K_Q4:
        srt_act_quantize(ctx, &B->hq, B->h);
        in.q = &B->hq;
        srt_layout_get(SRT_LAYOUT_Q4_0)->gemv(ctx, &l->q4, &in, B->y);
        break;
    case K_Q8:
        srt_act_quantize(ctx, &B->hq, B->h);
        in.q = &B->hq;
        srt_layout_get(SRT_LAYOUT_Q8_0)->gemv(ctx, &l->q8, &in, B->y);
        break;
    case K_SCATTER: {
        srt_live lv = {l->live[sp], B->live[sp], NULL};
        in.f = B->h;
        srt_layout_get(SRT_LAYOUT_Q4_0T)->gemv_sparse(ctx, &l->q4t, &in, &lv, B->y);
        break;
    }
    case K_KMI4:
    case K_KMI8: {
        srt_act_quantize(ctx, &B->hq, B->h);
        in.q = &B->hq;
        srt_live lv = {sp < 0 ? NULL : l->live[sp], sp < 0 ? 0 : B->live[sp], NULL};
        const srt_layout_traits *t = srt_layout_get(c->k == K_KMI4 ? SRT_LAYOUT_KMI4 : SRT_LAYOUT_KMI8);
        const srt_matrix *m = c->k == K_KMI4 ? &l->kd : &l->k8;
        if (sp < 0)
            t->gemv(ctx, m, &in, B->y);
        else
            t->gemv_sparse(ctx, m, &in, &lv, B->y);
        break;
    }
    case K_ZIGZAG: {
        in.f = B->h;
        srt_live lv = {sp < 0 ? NULL : l->live[sp], sp < 0 ? 0 : B->live[sp], NULL};
        if (sp < 0)
            srt_layout_get(SRT_LAYOUT_ZIGZAG)->gemv(ctx, &l->zz, &in, B->y);
        else
            srt_layout_get(SRT_LAYOUT_ZIGZAG)->gemv_sparse(ctx, &l->zz, &in, &lv, B->y);
        break;
    }
    case K_KMI4R: {
        srt_act_quantize(ctx, &B->xt, B->x);
        in.q = &B->xt;
        srt_live lv = {sp < 0 ? NULL : l->live[sp], sp < 0 ? 0 : B->live[sp], NULL};
        if (sp < 0)
            srt_layout_get(SRT_LAYOUT_KMI4R)->gemv(ctx, &l->u, &in, B->u);
        else
            srt_layout_get(SRT_LAYOUT_KMI4R)->gemv_sparse(ctx, &l->u, &in, &lv, B->u);
        break;
    }
    case K_LIVE: {
        live_task t = {&l->kd, l->live[sp], B->live[sp], {0}};
        srt_ctx_run(ctx, live_thread, &t);
        for (int i = 0; i < 64; i++) B->sink ^= t.sum[i];
        break;
    }
    case K_MLP:
        srt_act_quantize(ctx, &B->xt, B->x);
        in.q = &B->xt;
        srt_layout_get(SRT_LAYOUT_KMI4R)->gemv(ctx, &l->g, &in, B->g);
        mlp_tail(B, l, sp, &in);
        break;
    case K_MLPIN: { /* the input masked to its live channels, the gate reading only theirs */
        memset(B->xm, 0, sizeof(float) * (size_t)B->out);
        for (int64_t i = 0; i < B->live_in[sp]; i++) B->xm[l->live_in[sp][i]] = B->x[l->live_in[sp][i]];
        srt_act_quantize(ctx, &B->xq, B->xm);
        srt_act_quantize(ctx, &B->xt, B->xm);
        srt_input gin = {NULL, &B->xq};
        srt_live lv = {l->live_in[sp], B->live_in[sp], NULL};
        srt_layout_get(SRT_LAYOUT_KMI4)->gemv_sparse(ctx, &l->gi, &gin, &lv, B->g);
        in.q = &B->xt;
        mlp_tail(B, l, sp, &in);
        break;
    }
    default: break;
    }
}

/* Bytes of weights a configuration reads (what the GB/s column divides). */
static double config_bytes(const bench *B, const config *c) {
    const layer *l = &B->L[0];
    const int64_t live = c->sp < 0 ? B->in : B->live[c->sp];
    const double frac = (double)live / (double)B->in;
    const int64_t rp = (B->out + 127) / 128 * 128, nblk = B->in / 32;
    /* K-blocks with at least one live neuron, expected for a uniform live set */
    const double blk_hit = c->sp < 0 ? (double)nblk : (double)nblk * (1.0 - pow(1.0 - frac, 32.0));
    switch (c->k) {
    case K_FLOOR:
    case K_Q4: return (double)l->q4.bytes;
    case K_Q8: return (double)l->q8.bytes;
    case K_F32: return (double)B->out * (double)B->in * 4.0;
    case K_SCATTER: return (double)l->q4t.bytes * frac;
    case K_KMI4:
    case K_LIVE: return (double)live * (double)(rp / 2) + blk_hit * (double)rp * 2.0;
    case K_KMI8: { /* 64-output tiles: whole bytes, rows padded to 64 */
        const int64_t r8 = (B->out + 63) / 64 * 64;
        return (double)live * (double)r8 + blk_hit * (double)r8 * 2.0;
    }
    case K_ZIGZAG: return (double)l->zz.bytes * (c->sp >= 0 && srt_zz_reads_all(B->ctx, &l->zz, live) ? 1.0 : frac);
    case K_KMI4R: return (double)l->u.bytes * frac;
    case K_MLP:
    case K_MLPIN: {
        double kdb = (double)live * (double)(rp / 2) + blk_hit * (double)rp * 2.0;
        if (c->k == K_MLP) return (double)l->g.bytes + (double)l->u.bytes * frac + kdb;
        /* the kmi4 gate: live input channels' vectors (B->in outputs) and their K-blocks' scales */
        const int64_t rg = (B->in + 127) / 128 * 128, li = B->live_in[c->sp];
        const double fi = (double)li / (double)B->out, bi = (double)(B->out / 32) * (1.0 - pow(1.0 - fi, 32.0));
        return (double)li * (double)(rg / 2) + bi * (double)rg * 2.0 + (double)l->u.bytes * frac + kdb;
    }
    default: return 0;
    }
}

/* ---- set-up ---------------------------------------------------------------------------- */

static bool huge_pages; /* --huge-pages: weights as `run --no-mmap` holds them */
static int64_t zz_rows;  /* --zz-rows: zigzag's row-block (0: pack's) */

/* A weight matrix's memory: srt_alloc's (64-byte aligned, 4 KB pages), or 2 MB aligned and
 * advised for transparent huge pages. Freed with srt_free either way (both come from malloc). */
static void *weight_alloc(size_t bytes) {
    if (!huge_pages) return srt_alloc(bytes);
    const size_t huge = (size_t)2 << 20, n = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, n) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    memset(p, 0, n);
    return p;
}

static int pack_copies(srt_matrix *dst, size_t stride, int64_t nl, srt_layout lay, const float *w, int64_t rows,
                       int64_t cols, int64_t group) {
    const srt_layout_traits *t = srt_layout_get(lay);
    size_t bytes;
    if (t->size(&bytes, rows, cols, group) != SRT_OK) return -1;
    srt_matrix first;
    for (int64_t i = 0; i < nl; i++) {
        void *p = weight_alloc(bytes);
        if (!p) return -1;
        srt_matrix *m = (srt_matrix *)(void *)((char *)dst + (size_t)i * stride);
        if (i == 0) {
            if (t->pack(m, p, bytes, w, rows, cols, group) != SRT_OK) return -1;
            first = *m;
        } else {
            memcpy(p, first.data, bytes);
            *m = first;
            m->data = p;
        }
    }
    return 0;
}

static void free_bench(bench *B) {
    if (B->L) {
        for (int64_t i = 0; i < B->nlayers; i++) {
            layer *l = &B->L[i];
            srt_free((void *)l->q4.data);
            srt_free((void *)l->q8.data);
            srt_free((void *)l->k8.data);
            srt_free((void *)l->q4t.data);
            srt_free((void *)l->kd.data);
            srt_free((void *)l->zz.data);
            srt_free((void *)l->g.data);
            srt_free((void *)l->u.data);
            srt_free((void *)l->gi.data);
            srt_free(l->f32);
            for (int s = 0; s < MAX_SP; s++) {
                free(l->live[s]);
                free(l->live_in[s]);
            }
        }
        free(B->L);
    }
    float *v[] = {B->x, B->h, B->y, B->g, B->a, B->u, B->hm, B->xm};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) srt_free(v[i]);
    srt_free(B->xt.q);
    srt_free(B->hq.q);
    srt_free(B->xq.q);
    free(B->sel);
    for (int i = 0; i < B->ncfg; i++) free(B->cfg[i].samples);
    for (int s = 0; s < MAX_SP; s++) srt_free(B->bias[s]);
}

/* Uniformly random ascending live set of k out of n (selection sampling). */
static void random_live(uint32_t *idx, int64_t n, int64_t k) {
    int64_t m = 0;
    for (int64_t i = 0; i < n && m < k; i++) {
        double u = (double)((rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull) >> 11) /
                   9007199254740992.0;
        if (u * (double)(n - i) < (double)(k - m)) idx[m++] = (uint32_t)i;
    }
}

/* Ascending live set of k out of n made of whole groups of G neurons chosen
 * at random (the last group partial): what a co-activation permutation aims
 * at. Runs of live neurons then average about G / (1 - k/n) neurons. */
static void clustered_live(uint32_t *idx, int64_t n, int64_t k, int64_t G) {
    const int64_t ng = n / G, full = k / G, rest = k % G;
    uint32_t *grp = malloc(sizeof(uint32_t) * (size_t)(ng + 1));
    if (!grp) return;
    random_live(grp, ng, full + (rest > 0));
    int64_t m = 0;
    for (int64_t g = 0; g < full + (rest > 0); g++)
        for (int64_t i = 0; i < (g == full ? rest : G); i++) idx[m++] = grp[g] * (uint32_t)G + (uint32_t)i;
    free(grp);
}

static int setup(bench *B, int64_t in, int64_t out, int64_t nlayers, const double *sp, int nsp, int64_t group) {
    memset(B, 0, sizeof *B);
    const bool clustered = group > 1;
    B->clustered = clustered;
    B->group = group;
    B->in = in;
    B->out = out;
    B->nlayers = nlayers;
    B->nsp = nsp;
    for (int s = 0; s < nsp; s++) {
        B->sp[s] = sp[s];
        B->live[s] = (int64_t)llround((1.0 - sp[s]) * (double)in);
        B->live_in[s] = (int64_t)llround((1.0 - sp[s]) * (double)out);
    }
    float *w = malloc(sizeof(float) * (size_t)(in * out));
    if (!w) return -1;
    for (int64_t i = 0; i < in * out; i++) w[i] = 0.02f * rnd();
    B->L = calloc((size_t)nlayers, sizeof(layer));
    if (!B->L) return free(w), -1;
    const size_t st = sizeof(layer);
    int bad = 0;
    fprintf(stderr, "bench: packing %lld layers of %lld -> %lld\n", (long long)nlayers, (long long)in, (long long)out);
    bad |= pack_copies(&B->L[0].q4, st, nlayers, SRT_LAYOUT_Q4_0, w, out, in, 0);
    bad |= pack_copies(&B->L[0].q8, st, nlayers, SRT_LAYOUT_Q8_0, w, out, in, 0);
    bad |= pack_copies(&B->L[0].q4t, st, nlayers, SRT_LAYOUT_Q4_0T, w, out, in, 0);
    bad |= pack_copies(&B->L[0].kd, st, nlayers, SRT_LAYOUT_KMI4, w, out, in, 0);
    bad |= pack_copies(&B->L[0].k8, st, nlayers, SRT_LAYOUT_KMI8, w, out, in, 0);
    bad |= pack_copies(&B->L[0].zz, st, nlayers, SRT_LAYOUT_ZIGZAG, w, out, in,
                       zz_rows ? zz_rows : srt_layout_default_group(SRT_LAYOUT_ZIGZAG, out));
    /* gate and up: in x out viewed as [in rows x out cols] (same random values) */
    bad |= pack_copies(&B->L[0].g, st, nlayers, SRT_LAYOUT_KMI4R, w, in, out, 0);
    bad |= pack_copies(&B->L[0].u, st, nlayers, SRT_LAYOUT_KMI4R, w, in, out, 0);
    bad |= pack_copies(&B->L[0].gi, st, nlayers, SRT_LAYOUT_KMI4, w, in, out, 0);
    for (int64_t i = 0; i < nlayers && !bad; i++) {
        layer *l = &B->L[i];
        l->f32 = srt_alloc(sizeof(float) * (size_t)(in * out));
        if (!l->f32) bad = 1;
        else memcpy(l->f32, w, sizeof(float) * (size_t)(in * out));
        for (int s = 0; s < nsp && !bad; s++) {
            l->live[s] = malloc(sizeof(uint32_t) * (size_t)B->live[s] + 4);
            if (!l->live[s]) bad = 1;
            else if (clustered) clustered_live(l->live[s], in, B->live[s], group);
            else random_live(l->live[s], in, B->live[s]);
            l->live_in[s] = malloc(sizeof(uint32_t) * (size_t)B->live_in[s] + 4);
            if (!l->live_in[s]) bad = 1;
            else random_live(l->live_in[s], out, B->live_in[s]); /* a TEAL mask: unclustered */
        }
    }
    free(w);
    if (bad) return -1;
    const size_t fv = sizeof(float) * (size_t)(in > out ? in : out);
    B->x = srt_alloc(fv);
    B->h = srt_alloc(fv);
    B->y = srt_alloc(fv);
    B->g = srt_alloc(fv);
    B->a = srt_alloc(fv);
    B->u = srt_alloc(fv);
    B->hm = srt_alloc(fv);
    B->xm = srt_alloc(fv);
    B->sel = malloc(sizeof(uint32_t) * (size_t)in);
    for (int s = 0; s < nsp && clustered; s++) {
        B->bias[s] = srt_alloc(sizeof(float) * (size_t)in);
        if (!B->bias[s]) return -1;
        for (int64_t i = 0; i < B->live[s]; i++) B->bias[s][B->L[0].live[s][i]] = 1000.0f;
    }
    if (!B->x || !B->h || !B->y || !B->g || !B->a || !B->u || !B->hm || !B->xm || !B->sel) return -1;
    for (int64_t i = 0; i < out; i++) B->x[i] = rnd();
    for (int64_t i = 0; i < in; i++) B->h[i] = rnd();
    size_t ab = srt_act_bytes(out), hb = srt_act_bytes(in);
    void *am = srt_alloc(ab), *hm = srt_alloc(hb), *qm = srt_alloc(ab);
    if (!am || !hm || !qm || srt_act_init(&B->xt, am, ab, out, SRT_ACT_TILED) != SRT_OK ||
        srt_act_init(&B->hq, hm, hb, in, SRT_ACT_NATURAL) != SRT_OK ||
        srt_act_init(&B->xq, qm, ab, out, SRT_ACT_NATURAL) != SRT_OK)
        return -1;
    /* configurations, interleaved pass by pass */
    for (int k = 0; k < K_COUNT; k++) {
        bool dense = k != K_SCATTER && k != K_LIVE && k != K_MLPIN,
             sparse = k == K_SCATTER || k == K_KMI4 || k == K_KMI8 || k == K_ZIGZAG || k == K_KMI4R || k == K_MLP || k == K_LIVE ||
                      k == K_MLPIN;
        if (dense) B->cfg[B->ncfg++] = (config){.k = (kind)k, .sp = -1};
        for (int s = 0; s < nsp && sparse; s++) B->cfg[B->ncfg++] = (config){.k = (kind)k, .sp = s};
    }
    return 0;
}

/* ---- measurement -------------------------------------------------------------------- */

typedef struct result {
    int64_t in, out, layers;
    int threads, sp_i;
    kind k;
    double sp, live, med, lo, hi, rlo, rhi, bytes, x_q4, x_own;
} result;

static int measure(bench *B, int64_t warm, int64_t passes, int runs) {
    const int64_t per = passes * B->nlayers;
    for (int i = 0; i < B->ncfg; i++) {
        free(B->cfg[i].samples);
        B->cfg[i].samples = malloc(sizeof(double) * (size_t)(per * runs));
        if (!B->cfg[i].samples) return -1;
        B->cfg[i].ns = 0;
    }
    double *tmp = malloc(sizeof(double) * (size_t)per);
    if (!tmp) return -1;
    sc_progress pr; /* between passes, outside the timed calls */
    sc_progress_start(&pr, stderr, "bench", "passes", (int64_t)runs * (warm + passes));
    pr.amount_unit = "kernel calls"; /* every configuration on every layer, per pass */
    pr.rate_unit = "calls/s";
    char what[96];
    snprintf(what, sizeof what, "%lld -> %lld, %d thread%s", (long long)B->in, (long long)B->out, B->nth,
             B->nth > 1 ? "s" : "");
    for (int r = 0; r < runs; r++) {
        for (int64_t p = 0; p < warm + passes; p++) {
            int64_t done = (int64_t)r * (warm + passes) + p;
            sc_progress_update(&pr, done, (double)(done * B->nlayers * B->ncfg), what);
            for (int i = 0; i < B->ncfg; i++) {
                config *c = &B->cfg[i];
                for (int64_t l = 0; l < B->nlayers; l++) {
                    double t0 = now_us();
                    run_op(B, c, &B->L[l]);
                    double t1 = now_us();
                    if (p >= warm) c->samples[c->ns++] = t1 - t0;
                }
            }
        }
        for (int i = 0; i < B->ncfg; i++) {
            config *c = &B->cfg[i];
            memcpy(tmp, c->samples + (size_t)r * (size_t)per, sizeof(double) * (size_t)per);
            qsort(tmp, (size_t)per, sizeof(double), cmp_d);
            c->run_med[r] = tmp[per / 2];
        }
    }
    int64_t all = (int64_t)runs * (warm + passes);
    sc_progress_update(&pr, all, (double)(all * B->nlayers * B->ncfg), what);
    sc_progress_end(&pr);
    for (int i = 0; i < B->ncfg; i++) {
        config *c = &B->cfg[i];
        qsort(c->samples, (size_t)c->ns, sizeof(double), cmp_d);
        c->lo = c->samples[0];
        c->hi = c->samples[c->ns - 1];
        double rm[16];
        memcpy(rm, c->run_med, sizeof(double) * (size_t)runs);
        qsort(rm, (size_t)runs, sizeof(double), cmp_d);
        c->med = rm[runs / 2];
        c->rlo = rm[0];
        c->rhi = rm[runs - 1];
        c->bytes = config_bytes(B, c);
    }
    free(tmp);
    return 0;
}

static const config *find_cfg(const bench *B, kind k, int sp) {
    for (int i = 0; i < B->ncfg; i++)
        if (B->cfg[i].k == k && B->cfg[i].sp == sp) return &B->cfg[i];
    return NULL;
}

static void collect(const bench *B, result *out, int *n) {
    const config *q4 = find_cfg(B, K_Q4, -1), *fl = find_cfg(B, K_FLOOR, -1);
    for (int i = 0; i < B->ncfg; i++) {
        const config *c = &B->cfg[i];
        const config *own = c->k == K_SCATTER ? q4
                            : c->k == K_LIVE  ? fl
                            : find_cfg(B, c->k == K_MLPIN ? K_MLP : c->k, -1);
        result r = {B->in, B->out, B->nlayers, B->nth, c->sp, c->k, c->sp < 0 ? 0.0 : B->sp[c->sp],
                    (double)(c->sp < 0 ? B->in : B->live[c->sp]), c->med, c->lo, c->hi, c->rlo, c->rhi, c->bytes,
                    q4->med / c->med, own->med / c->med};
        out[(*n)++] = r;
    }
}

/* ---- output -------------------------------------------------------------------------- */

static const result *find_res(const result *R, int n, int64_t in, int64_t out, int th, kind k, double sp) {
    for (int i = 0; i < n; i++)
        if (R[i].in == in && R[i].out == out && R[i].threads == th && R[i].k == k &&
            fabs(R[i].sp - sp) < 1e-9 && (sp > 0 || R[i].sp_i < 0))
            return &R[i];
    return NULL;
}

static void print_table(FILE *f, const result *R, int n, int64_t in, int64_t out, int th, const char *isa) {
    fprintf(f, "\n### %lld -> %lld, %d thread%s (%s)\n\n", (long long)in, (long long)out, th, th > 1 ? "s" : "", isa);
    fprintf(f, "| kernel | sparsity | live | median µs | min | max | run medians | × q4_0 dense | × own dense | MB read | GB/s |\n");
    fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < n; i++) {
        const result *r = &R[i];
        if (r->in != in || r->out != out || r->threads != th) continue;
        char sp[16];
        if (r->sp_i < 0) snprintf(sp, sizeof sp, "dense");
        else snprintf(sp, sizeof sp, "%.2f", r->sp);
        fprintf(f, "| %s | %s | %.0f | %.1f | %.1f | %.1f | %.1f-%.1f | %.2f | %.2f | %.2f | %.1f |\n", kind_name[r->k], sp,
                r->live, r->med, r->lo, r->hi, r->rlo, r->rhi, r->x_q4, r->x_own, r->bytes / 1e6,
                r->bytes / r->med / 1e3);
    }
}

static void print_targets(FILE *f, const result *R, int n, int64_t in, int64_t out, int th) {
    const result *fl = find_res(R, n, in, out, th, K_FLOOR, 0), *q4 = find_res(R, n, in, out, th, K_Q4, 0);
    const result *kd = find_res(R, n, in, out, th, K_KMI4, 0), *ks = find_res(R, n, in, out, th, K_KMI4, 0.5);
    const result *sc = find_res(R, n, in, out, th, K_SCATTER, 0.5), *md = find_res(R, n, in, out, th, K_MLP, 0);
    const result *ms = find_res(R, n, in, out, th, K_MLP, 0.5), *zd = find_res(R, n, in, out, th, K_ZIGZAG, 0);
    const result *zs = find_res(R, n, in, out, th, K_ZIGZAG, 0.5);
    fprintf(f, "\nTargets (%lld -> %lld, %d thread%s):\n\n", (long long)in, (long long)out, th, th > 1 ? "s" : "");
    if (fl && q4 && kd) {
        double best = kd->med < q4->med ? kd->med : q4->med;
        fprintf(f, "- dense int4 within 1.1x of the streaming floor: kmi4 %.2fx, q4_0 %.2fx of %.1f µs: %s\n",
                kd->med / fl->med, q4->med / fl->med, fl->med, best / fl->med <= 1.1 ? "met" : "missed");
    }
    const result *q8 = find_res(R, n, in, out, th, K_Q8, 0);
    if (fl && q8) /* the floor streams the q4_0 bytes: scaled to q8_0's */
        fprintf(f, "- dense q8_0 rows within 1.1x of the streaming floor for their bytes: %.2fx: %s\n",
                q8->med / (fl->med * q8->bytes / fl->bytes), q8->med / (fl->med * q8->bytes / fl->bytes) <= 1.1 ? "met" : "missed");
    const result *k8d = find_res(R, n, in, out, th, K_KMI8, 0), *k8s = find_res(R, n, in, out, th, K_KMI8, 0.5);
    if (fl && k8d && k8s)
        fprintf(f, "- kmi8 (q8_0 values) dense within 1.1x of the floor for its bytes: %.2fx; at sparsity 0.5 %.2fx its dense\n",
                k8d->med / (fl->med * k8d->bytes / fl->bytes), k8s->med / k8d->med);
    if (kd && ks && sc)
        fprintf(f, "- kmi4 at sparsity 0.5 <= 0.55x its dense and faster than the scatter: %.2fx, %.1f vs %.1f µs: %s\n",
                ks->med / kd->med, ks->med, sc->med, ks->med / kd->med <= 0.55 && ks->med < sc->med ? "met" : "missed");
    const result *lr = find_res(R, n, in, out, th, K_LIVE, 0.5);
    if (fl && kd && ks && lr) /* the bare reads: of the live bytes (lr) and of all of them (the floor) */
        fprintf(f, "- kmi4 at sparsity 0.5 against reading its bytes: the live bytes alone read in %.2fx the stream "
                   "floor's time, sparse kmi4 takes %.2fx that read, dense kmi4 %.2fx the floor; a kernel at both "
                   "reads would run at %.2fx its dense\n",
                lr->med / fl->med, ks->med / lr->med, kd->med / fl->med, lr->med / fl->med);
    if (md && ms)
        fprintf(f, "- MLP block at sparsity 0.5 >= 1.45x dense: %.2fx (%.1f vs %.1f µs): %s\n", md->med / ms->med,
                ms->med, md->med, md->med / ms->med >= 1.45 ? "met" : "missed");
    const result *mi = find_res(R, n, in, out, th, K_MLPIN, 0.5);
    if (md && mi)
        fprintf(f, "- MLP block with the gate input-sparse too (teal-cats on kmi4-in) at 0.5: %.2fx the dense block "
                   "(%.1f vs %.1f µs): %s\n",
                md->med / mi->med, mi->med, md->med, md->med / mi->med >= 1.45 ? "1.45x met" : "1.45x missed");
    if (zd && zs)
        fprintf(f, "- zigzag at sparsity 0.5 <= 0.6x its dense: %.2fx: %s\n", zs->med / zd->med,
                zs->med / zd->med <= 0.6 ? "met" : "missed");
}

static int write_csv(const char *path, const result *R, int n) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "in,out,layers,threads,kernel,sparsity,live,median_us,min_us,max_us,run_median_lo_us,run_median_hi_us,"
               "x_q4_0_dense,x_own_dense,mbytes,gbps\n");
    for (int i = 0; i < n; i++) {
        const result *r = &R[i];
        fprintf(f, "%lld,%lld,%lld,%d,%s,%.2f,%.0f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.3f,%.3f,%.2f\n", (long long)r->in,
                (long long)r->out, (long long)r->layers, r->threads, kind_key[r->k], r->sp, r->live, r->med, r->lo, r->hi, r->rlo, r->rhi, r->x_q4, r->x_own, r->bytes / 1e6,
                r->bytes / r->med / 1e3);
    }
    return fclose(f) == 0 ? 0 : -1;
}

/* Speed-up of each sparse kernel over its own dense version against
 * sparsity, one panel per thread count, drawn by gnuplot when present. */
static int write_png(const char *path, const result *R, int n, int64_t in, int64_t out, const int *th, int nth) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "bench: gnuplot not found; no plot written\n");
        return 0;
    }
    char dat[4200], gp[4200];
    snprintf(dat, sizeof dat, "%s.dat", path);
    snprintf(gp, sizeof gp, "%s.gp", path);
    FILE *f = fopen(dat, "w");
    if (!f) return -1;
    for (int t = 0; t < nth; t++) {
        fprintf(f, "# threads %d\n", th[t]);
        for (int i = 0; i < n; i++) {
            const result *r = &R[i];
            if (r->in != in || r->out != out || r->threads != th[t] || r->k != K_KMI4 || r->sp_i < 0) continue;
            const result *s = find_res(R, n, in, out, th[t], K_SCATTER, r->sp);
            const result *z = find_res(R, n, in, out, th[t], K_ZIGZAG, r->sp);
            const result *m = find_res(R, n, in, out, th[t], K_MLP, r->sp);
            fprintf(f, "%.2f %.3f %.3f %.3f %.3f\n", r->sp, r->x_own, s ? s->x_own : NAN, z ? z->x_own : NAN,
                    m ? m->x_own : NAN);
        }
        fprintf(f, "\n\n");
    }
    fclose(f);
    f = fopen(gp, "w");
    if (!f) return -1;
    fprintf(f, "set terminal png size %d,440 noenhanced\nset output '%s'\nset multiplot layout 1,%d\n", 520 * nth, path, nth);
    fprintf(f, "set key top left\nset grid\nset xlabel 'sparsity'\nset ylabel 'speed-up over its own dense'\n");
    for (int t = 0; t < nth; t++)
        fprintf(f,
                "set title '%lld -> %lld, %d thread%s'\nplot '%s' index %d using 1:2 with linespoints title 'kmi4', "
                "'' index %d using 1:3 with linespoints title 'q4_0t scatter (vs q4_0)', "
                "'' index %d using 1:4 with linespoints title 'zigzag', '' index %d using 1:5 with linespoints title "
                "'MLP block', 1/(1-x) with lines dashtype 2 title 'ideal'\n",
                (long long)in, (long long)out, th[t], th[t] > 1 ? "s" : "", dat, t, t, t, t);
    fprintf(f, "unset multiplot\n");
    fclose(f);
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp);
    int rc = system(cmd);
    remove(dat);
    remove(gp);
    return rc == 0 ? 0 : -1;
}

static void machine(char *cpu, size_t cap) {
    snprintf(cpu, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(cpu, cap, "%s", c + 2);
                cpu[strcspn(cpu, "\n")] = 0;
            }
            break;
        }
    fclose(f);
}

int cmd_bench(int argc, char **argv) {
    const char *dims = "6144:1536", *sps = "0.3,0.5,0.6,0.7", *ths = "1,2", *isa_name = "auto";
    const char *csv = NULL, *md = NULL, *png = NULL, *prefetch = NULL;
    int64_t layers = 35, warm = 5, passes = 50, runs = 3;
    double mem_gib = 6.0;
    bool json = false, quick = false;
    const char *live_kind = "random";
    const sc_opt opts[] = {
        {"dims", 0, SC_ARG_STR, &dims, "IN:OUT[,...]", "GEMV shapes, input -> output (default 6144:1536, Gemma-4-E2B down)", 0, 0},
        {"sparsity", 0, SC_ARG_STR, &sps, "LIST", "sparsities of the sparse rows (default 0.3,0.5,0.6,0.7)", 0, 0},
        {"threads", 't', SC_ARG_STR, &ths, "LIST", "thread counts, comma-separated as llama-bench's -t (default "
            "1,2)", 0, 0},
        {"layers", 0, SC_ARG_INT, &layers, "N", "distinct matrices cycled per kernel (default 35)", 1, 1000},
        {"warmup", 0, SC_ARG_INT, &warm, "N", "warm-up passes (default 5)", 0, 1000},
        {"passes", 0, SC_ARG_INT, &passes, "N", "timed passes (default 50)", 1, 100000},
        {"runs", 0, SC_ARG_INT, &runs, "N", "repeats of the whole measurement; medians of runs (default 3)", 1, 15},
        {"isa", 0, SC_ARG_STR, &isa_name, "ISA", "auto, scalar, avx2, avx512, amx, neon, dotprod, i8mm (default auto: "
            "the best here)", 0, 0},
        {"prefetch", 0, SC_ARG_STR, &prefetch, "SPEC", "software prefetch distances, " SRT_PREFETCH_SYNTAX
            " (default: this CPU kind's, with SPARSECAL_PREFETCH's on top)", 0, 0},
        {"mem-gib", 0, SC_ARG_FLOAT, &mem_gib, "G", "cap on weight memory; fewer layers above it (default 6)", 0.1, 1024},
        {"huge-pages", 0, SC_ARG_FLAG, &huge_pages, NULL, "weights in 2 MB-aligned memory advised for transparent huge pages (as run --no-mmap)", 0, 0},
        {"zz-rows", 0, SC_ARG_INT, &zz_rows, "R", "zigzag's row-block, a multiple of 32 (default: pack's, 1024 for 2048 outputs)", 32, 4096},
        {"csv", 0, SC_ARG_STR, &csv, "FILE", "also write the results as CSV (default: none)", 0, 0},
        {"md", 0, SC_ARG_STR, &md, "FILE", "also write the Markdown tables to FILE (default: none)", 0, 0},
        {"png", 0, SC_ARG_STR, &png, "FILE", "plot speed-ups against sparsity with gnuplot (default: none)", 0, 0},
        {"live", 0, SC_ARG_STR, &live_kind, "KIND", "random (default), clustered (whole 32-neuron groups live) or groups:G", 0, 0},
        {"quick", 0, SC_ARG_FLAG, &quick, NULL, "a smoke run: 1 run of 10 passes after 2 warm-up passes", 0, 0},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print JSON instead of Markdown", 0, 0},
        SC_OPTS_END("  sparsecal bench --sparsity 0.3,0.5,0.7 -t 1,2\n"
"  sparsecal bench --quick --dims 2048:8192 --csv k.csv --json"),
    };
    int r = sc_parse_args("bench",
                          "Cold-cache GEMV benchmark (the CLAWS paper, App. E): distinct weight matrices cycled so weights\n"
                          "come from DRAM; per-layer median/min/max µs of dense and sparse kernels, speed-ups, GB/s.",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    if (quick) {
        runs = 1;
        passes = 10;
        warm = 2;
    }
    double sp[MAX_SP], thd[MAX_THREADS], dd[2 * MAX_SHAPES];
    int nsp = cli_parse_list(sps, sp, MAX_SP, 0.0, 0.99, false), nth = cli_parse_list(ths, thd, MAX_THREADS, 1, 64, true);
    if (nsp <= 0 || nth <= 0) {
        fprintf(stderr, "sparsecal bench: %s\n", nsp <= 0 ? "--sparsity wants numbers in [0, 0.99], e.g. 0.3,0.5"
                                                        : "--threads wants whole numbers in [1, 64], e.g. 1,2");
        return 2;
    }
    int nd = 0;
    for (const char *s = dims; s && *s && nd < 2 * MAX_SHAPES;) {
        char *end;
        long long a = strtoll(s, &end, 10), b = *end == ':' ? strtoll(end + 1, &end, 10) : -1;
        if (a < 32 || b < 32 || a % 32 || b % 32 || a > 65536 || b > 65536 || (*end && *end != ',')) {
            fprintf(stderr, "sparsecal bench: --dims wants IN:OUT pairs, multiples of 32 (e.g. 14336:4096)\n");
            return 2;
        }
        dd[nd++] = (double)a;
        dd[nd++] = (double)b;
        s = *end ? end + 1 : end;
    }
    if (zz_rows % 32) {
        fprintf(stderr, "sparsecal bench: --zz-rows wants a multiple of 32 rows (e.g. 256, 1024)\n");
        return 2;
    }
    int64_t group = strcmp(live_kind, "clustered") == 0 ? 32 : strcmp(live_kind, "random") == 0 ? 1 : 0;
    if (!group && strncmp(live_kind, "groups:", 7) == 0) {
        char *gend;
        long long g = strtoll(live_kind + 7, &gend, 10);
        group = *gend || g < 1 || g > 4096 ? 0 : g;
    }
    if (!group) {
        fprintf(stderr, "sparsecal bench: --live must be random, clustered or groups:G (1 <= G <= 4096)\n");
        return 2;
    }
    const bool clustered = group > 1;
    char live_desc[96];
    snprintf(live_desc, sizeof live_desc, "whole %lld-neuron groups%s", (long long)group, group == 32 ? " (clustered)" : "");
    srt_isa isa;
    if (srt_isa_parse(isa_name, &isa) != SRT_OK || srt_isa_resolve(isa, &isa) != SRT_OK) {
        fprintf(stderr, "sparsecal bench: instruction set '%s' not available here\n", isa_name);
        return 2;
    }
    /* the distances every context below runs with (checked before the matrices are made) */
    char pf[128];
    {
        srt_ctx *c = NULL;
        sc_err err = {{0}};
        if (cli_ctx_create(&c, isa, 1, &err) != SC_OK || (prefetch && srt_ctx_set_prefetch(c, prefetch) != SRT_OK)) {
            if (c) snprintf(err.msg, sizeof err.msg, "--prefetch \"%s\" is malformed: expected %s", prefetch, SRT_PREFETCH_SYNTAX);
            fprintf(stderr, "sparsecal bench: %s\n", err.msg);
            srt_ctx_free(c);
            return 2;
        }
        srt_ctx_prefetch(c, pf, sizeof pf);
        srt_ctx_free(c);
    }
    int th[MAX_THREADS];
    for (int t = 0; t < nth; t++) th[t] = (int)thd[t];
    result *R = calloc((size_t)(nd / 2 * nth * 64), sizeof(result));
    if (!R) return 1;
    int nres = 0, rc = 0;
    for (int d = 0; d < nd && !rc; d += 2) {
        const int64_t in = (int64_t)dd[d], out = (int64_t)dd[d + 1];
        /* weight bytes per layer: five int4 layouts, kmi4r gate+up, f32 */
        const double per = (double)in * (double)out * (5 * 0.5625 + 4.0) + 8e5;
        int64_t nl = layers;
        if ((double)nl * per > mem_gib * 1073741824.0) {
            nl = (int64_t)(mem_gib * 1073741824.0 / per);
            nl = nl < 3 ? 3 : nl;
            fprintf(stderr, "bench: %lld -> %lld: %lld layers to stay under %.1f GiB\n", (long long)in, (long long)out,
                    (long long)nl, mem_gib);
        }
        bench *B = calloc(1, sizeof *B);
        if (!B || setup(B, in, out, nl, sp, nsp, group) != 0) {
            fprintf(stderr, "sparsecal bench: out of memory setting up %lld -> %lld\n", (long long)in, (long long)out);
            if (B) free_bench(B);
            free(B);
            rc = 1;
            break;
        }
        for (int t = 0; t < nth && !rc; t++) {
            B->nth = th[t];
            srt_status st = srt_ctx_create(&B->ctx, isa, th[t]);
            if (st == SRT_OK && prefetch) st = srt_ctx_set_prefetch(B->ctx, prefetch);
            if (st != SRT_OK) {
                fprintf(stderr, "sparsecal bench: %s\n", srt_status_str(st));
                rc = 1;
                break;
            }
            openblas_set_num_threads(th[t]);
            if (measure(B, warm, passes, (int)runs) != 0) rc = 1;
            else collect(B, R, &nres);
            srt_ctx_free(B->ctx);
        }
        free_bench(B);
        free(B);
    }
    char cpu[256], feat[256];
    machine(cpu, sizeof cpu);
    srt_cpu_feature_names(srt_cpu_features(), feat, sizeof feat);
    if (!rc && json) {
        cJSON *root = cJSON_CreateObject(), *res = cJSON_AddArrayToObject(root, "results");
        cJSON_AddStringToObject(root, "cpu", cpu);
        cJSON_AddStringToObject(root, "features", feat);
        cJSON_AddStringToObject(root, "isa", srt_isa_name(isa));
        cJSON_AddStringToObject(root, "prefetch", pf);
        cJSON_AddNumberToObject(root, "warmup", (double)warm);
        cJSON_AddNumberToObject(root, "passes", (double)passes);
        cJSON_AddNumberToObject(root, "runs", (double)runs);
        cJSON_AddBoolToObject(root, "huge_pages", huge_pages);
        cJSON_AddNumberToObject(root, "zz_rows", (double)zz_rows); /* 0: pack's rule */
        for (int i = 0; i < nres; i++) {
            const result *x = &R[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "in", (double)x->in);
            cJSON_AddNumberToObject(o, "out", (double)x->out);
            cJSON_AddNumberToObject(o, "layers", (double)x->layers);
            cJSON_AddNumberToObject(o, "threads", x->threads);
            cJSON_AddStringToObject(o, "kernel", kind_key[x->k]);
            cJSON_AddNumberToObject(o, "sparsity", x->sp);
            cJSON_AddNumberToObject(o, "live", x->live);
            cJSON_AddNumberToObject(o, "median_us", x->med);
            cJSON_AddNumberToObject(o, "min_us", x->lo);
            cJSON_AddNumberToObject(o, "max_us", x->hi);
            cJSON_AddNumberToObject(o, "run_median_lo_us", x->rlo);
            cJSON_AddNumberToObject(o, "run_median_hi_us", x->rhi);
            cJSON_AddNumberToObject(o, "x_q4_0_dense", x->x_q4);
            cJSON_AddNumberToObject(o, "x_own_dense", x->x_own);
            cJSON_AddNumberToObject(o, "bytes", x->bytes);
            cJSON_AddNumberToObject(o, "gbps", x->bytes / x->med / 1e3);
            cJSON_AddItemToArray(res, o);
        }
        char *s = sc_json_print(root, true);
        if (s) puts(s);
        free(s);
        cJSON_Delete(root);
    }
    FILE *mdf = md && !rc ? fopen(md, "w") : NULL;
    if (md && !rc && !mdf) {
        fprintf(stderr, "sparsecal bench: cannot write %s\n", md);
        rc = 2;
    }
    FILE *outs[2] = {json ? NULL : stdout, mdf};
    char zzr[40] = "as pack makes them"; /* srt_layout_default_group */
    if (zz_rows) snprintf(zzr, sizeof zzr, "of %lld rows", (long long)zz_rows);
    for (int o = 0; o < 2 && !rc; o++) {
        FILE *f = outs[o];
        if (!f) continue;
        fprintf(f, "Machine: %s, %ld CPUs online; features: %s; kernels: %s, prefetch %s. Settings: %lld warm-up + %lld "
                   "timed passes, %lld run%s (median of run medians; min/max over all timed GEMVs); live sets: %s; weights "
                   "in %s; zigzag row-blocks %s.\n",
                cpu, sysconf(_SC_NPROCESSORS_ONLN), feat, srt_isa_name(isa), pf, (long long)warm, (long long)passes,
                (long long)runs, runs > 1 ? "s" : "", clustered ? live_desc : "uniformly random per layer",
                huge_pages ? "huge-page-advised memory" : "4 KB pages", zzr);
        for (int d = 0; d < nd; d += 2)
            for (int t = 0; t < nth; t++) {
                print_table(f, R, nres, (int64_t)dd[d], (int64_t)dd[d + 1], th[t], srt_isa_name(isa));
                print_targets(f, R, nres, (int64_t)dd[d], (int64_t)dd[d + 1], th[t]);
            }
    }
    if (mdf) fclose(mdf);
    if (!rc && csv && write_csv(csv, R, nres) != 0) {
        fprintf(stderr, "sparsecal bench: cannot write %s\n", csv);
        rc = 2;
    }
    if (!rc && png && write_png(png, R, nres, (int64_t)dd[0], (int64_t)dd[1], th, nth) != 0) {
        fprintf(stderr, "sparsecal bench: gnuplot failed for %s\n", png);
        rc = 1;
    }
    free(R);
    return rc;
}
