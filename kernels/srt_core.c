/* srt_core.c - status names, ISA choice, aligned memory, fp16 conversion,
 * the frozen per-ISA kernel tables and the runtime context. Compiled without
 * ISA flags. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srt_kern.h"
#include "srt_pool.h"

const char *srt_status_str(srt_status st) {
    switch (st) {
    case SRT_OK: return "ok";
    case SRT_EINVAL: return "invalid argument";
    case SRT_ENOMEM: return "out of memory";
    case SRT_EISA: return "instruction set not available";
    case SRT_ETHREAD: return "could not start a thread";
    case SRT_ESCRATCH: return "context scratch too small";
    case SRT_ENOTSUP: return "operation not supported by this layout";
    case SRT_ENONFINITE: return "non-finite values";
    case SRT_EPREFETCH: return "malformed prefetch spec (expected " SRT_PREFETCH_SYNTAX ")";
    }
    return "unknown status";
}

/* ---- ISAs ---------------------------------------------------------------- */

static const char *isa_names[SRT_ISA_COUNT] = {"scalar", "avx2", "avx512", "neon", "dotprod", "i8mm", "amx"};

const char *srt_isa_name(srt_isa isa) {
    if (isa == SRT_ISA_AUTO) return "auto";
    return (isa >= 0 && isa < SRT_ISA_COUNT) ? isa_names[isa] : "unknown";
}

srt_status srt_isa_parse(const char *name, srt_isa *out) {
    if (!name) return SRT_EINVAL;
    if (strcmp(name, "auto") == 0) {
        *out = SRT_ISA_AUTO;
        return SRT_OK;
    }
    for (int i = 0; i < SRT_ISA_COUNT; i++)
        if (strcmp(name, isa_names[i]) == 0) {
            *out = (srt_isa)i;
            return SRT_OK;
        }
    return SRT_EISA;
}

bool srt_isa_available(srt_isa isa) {
    uint32_t f = srt_cpu_features();
    switch (isa) {
    case SRT_ISA_SCALAR: return true;
#if defined(__x86_64__)
    case SRT_ISA_AVX2: {
        uint32_t need = SRT_CPU_AVX2 | SRT_CPU_FMA | SRT_CPU_F16C;
        return (f & need) == need;
    }
    case SRT_ISA_AVX512: {
        uint32_t need = SRT_CPU_AVX2 | SRT_CPU_FMA | SRT_CPU_F16C | SRT_CPU_AVX512F | SRT_CPU_AVX512BW |
                        SRT_CPU_AVX512VL | SRT_CPU_AVX512VNNI;
        return (f & need) == need;
    }
    case SRT_ISA_AMX: return srt_isa_available(SRT_ISA_AVX512) && (f & SRT_CPU_AMX);
#endif
#if defined(__aarch64__)
    case SRT_ISA_NEON: return (f & SRT_CPU_NEON) != 0;
    case SRT_ISA_DOTPROD: return (f & (SRT_CPU_NEON | SRT_CPU_DOTPROD)) == (SRT_CPU_NEON | SRT_CPU_DOTPROD);
    case SRT_ISA_I8MM: {
        uint32_t need = SRT_CPU_NEON | SRT_CPU_DOTPROD | SRT_CPU_I8MM;
        return (f & need) == need;
    }
#endif
    default: return false;
    }
}

srt_isa srt_isa_best(void) {
    for (int i = SRT_ISA_COUNT - 1; i > 0; i--)
        if (srt_isa_available((srt_isa)i)) return (srt_isa)i;
    return SRT_ISA_SCALAR;
}

srt_status srt_isa_resolve(srt_isa want, srt_isa *out) {
    if (want == SRT_ISA_AUTO) {
        const char *env = getenv("SPARSECAL_ISA");
        if (env && *env && strcmp(env, "auto") != 0) {
            srt_status st = srt_isa_parse(env, &want);
            if (st != SRT_OK) return st;
        } else {
            *out = srt_isa_best();
            return SRT_OK;
        }
    }
    if (want < 0 || want >= SRT_ISA_COUNT || !srt_isa_available(want)) return SRT_EISA;
    *out = want;
    return SRT_OK;
}

/* ---- memory ---------------------------------------------------------------- */

void *srt_alloc(size_t bytes) {
    if (bytes == 0 || bytes > SIZE_MAX - 64) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, (bytes + 63) / 64 * 64) != 0) return NULL;
    memset(p, 0, bytes);
    return p;
}

void srt_free(void *p) { free(p); }

/* ---- fp16 ---------------------------------------------------------------------- */

uint16_t srt_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u); /* NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (ax < 0x38800000u) {                                    /* below 2^-14: subnormal half */
        if (ax < 0x33000000u) return (uint16_t)sign;           /* below 2^-25: zero */
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126 - e;
        uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u); /* round to nearest even at bit 13 */
    r -= 0x38000000u;                             /* exponent bias 127 -> 15 */
    return (uint16_t)(sign | (r >> 13));
}

uint16_t srt_fp32_to_fp16_sat(float f) {
    return srt_fp32_to_fp16(f > 65504.0f ? 65504.0f : f < -65504.0f ? -65504.0f : f);
}

float srt_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31)
        x = sign | 0x7f800000u | (m << 13);
    else
        x = sign | ((e + 112) << 23) | (m << 13);
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* ---- kernel tables ---------------------------------------------------------------- */

static srt_kernels tables[SRT_ISA_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    const srt_pf_set pf = srt_cpu_prefetch();
    for (int i = 0; i < SRT_ISA_COUNT; i++) {
        srt_ref_register(&tables[i]);
        tables[i].isa = SRT_ISA_SCALAR;
        tables[i].pf = pf;
    }
#if defined(__x86_64__)
    /* each x86 table builds on the one before: avx2's, avx512's on top, then the AMX row tiles */
    static const srt_isa x86[] = {SRT_ISA_AVX2, SRT_ISA_AVX512, SRT_ISA_AMX};
    for (int k = 0; k < 3 && srt_isa_available(x86[k]); k++) {
        for (int i = k; i < 3; i++) {
            srt_kernels *t = &tables[x86[i]];
            if (k == 0) {
                srt_avx2_register(t);
                srt_avx2_kmi4_register(t);
            } else if (k == 1) {
                srt_avx512_register(t);
                srt_avx512_kmi4_register(t);
                srt_avx512_select_register(t);
            } else {
                srt_amx_register(t);
            }
        }
        tables[x86[k]].isa = x86[k];
    }
#endif
#if defined(__aarch64__)
    if (srt_isa_available(SRT_ISA_NEON)) {
        for (int i = SRT_ISA_NEON; i <= SRT_ISA_I8MM; i++) {
            srt_neon_register(&tables[i]);
            srt_neon_kmi4_register(&tables[i]);
        }
        tables[SRT_ISA_NEON].isa = SRT_ISA_NEON;
    }
    if (srt_isa_available(SRT_ISA_DOTPROD)) {
        for (int i = SRT_ISA_DOTPROD; i <= SRT_ISA_I8MM; i++) srt_dotprod_register(&tables[i]);
        tables[SRT_ISA_DOTPROD].isa = SRT_ISA_DOTPROD;
    }
    if (srt_isa_available(SRT_ISA_I8MM)) { /* the dotprod table with the smmla multi-input row kernels */
        srt_i8mm_register(&tables[SRT_ISA_I8MM]);
        tables[SRT_ISA_I8MM].isa = SRT_ISA_I8MM;
    }
#endif
}

const srt_kernels *srt_kernels_get(srt_isa isa) {
    if (isa < 0 || isa >= SRT_ISA_COUNT || !srt_isa_available(isa)) return NULL;
    pthread_once(&tables_once, build_tables);
    return &tables[isa];
}

/* ---- context ---------------------------------------------------------------------- */

struct srt_ctx {
    srt_isa isa;
    const srt_kernels *k; /* &kt */
    srt_kernels kt;       /* the ISA's table with this context's prefetch distances */
    int nthreads;
    srt_pool *pool;
    float *scratch; /* (nthreads - 1) x scratch_floats */
    int64_t scratch_floats;
    float *shared; /* srt_ctx_shared's */
    int64_t shared_floats;
};

srt_status srt_ctx_reserve(srt_ctx *ctx, int64_t floats) {
    if (!ctx || floats < 0) return SRT_EINVAL;
    floats = srt_round_up(floats, 16);
    if (floats <= ctx->scratch_floats || ctx->nthreads == 1) return SRT_OK;
    float *p = srt_alloc((size_t)floats * sizeof(float) * (size_t)(ctx->nthreads - 1));
    if (!p) return SRT_ENOMEM;
    srt_free(ctx->scratch);
    ctx->scratch = p;
    ctx->scratch_floats = floats;
    return SRT_OK;
}

srt_status srt_ctx_create(srt_ctx **out, srt_isa isa, int nthreads) {
    if (!out || nthreads < 1 || nthreads > SRT_MAX_THREADS) return SRT_EINVAL;
    *out = NULL;
    srt_isa chosen;
    srt_status st = srt_isa_resolve(isa, &chosen);
    if (st != SRT_OK) return st;
    srt_ctx *c = calloc(1, sizeof *c);
    if (!c) return SRT_ENOMEM;
    c->isa = chosen;
    c->kt = *srt_kernels_get(chosen);
    c->k = &c->kt;
    c->nthreads = nthreads;
    const char *pf = getenv("SPARSECAL_PREFETCH");
    if (pf && srt_ctx_set_prefetch(c, pf) != SRT_OK) {
        free(c);
        return SRT_EPREFETCH;
    }
    if (nthreads > 1) {
        st = srt_pool_create(&c->pool, nthreads);
        if (st == SRT_OK) st = srt_ctx_reserve(c, 65536);
        if (st != SRT_OK) {
            srt_ctx_free(c);
            return st;
        }
    }
    *out = c;
    return SRT_OK;
}

/* "N" or "A/B" at *p into v[0..n), each within [lo, hi] of its own; advances *p past it. */
static bool pf_ints(const char **p, int32_t *v, int n, const int32_t *lo, const int32_t *hi) {
    for (int i = 0; i < n; i++) {
        if (i > 0 && *(*p)++ != '/') return false;
        if (**p < '0' || **p > '9') return false;
        char *e;
        errno = 0;
        long x = strtol(*p, &e, 10);
        if (errno || x < lo[i] || x > hi[i]) return false;
        v[i] = (int32_t)x;
        *p = e;
    }
    return true;
}

srt_status srt_ctx_set_prefetch(srt_ctx *ctx, const char *spec) {
    if (!ctx || !spec) return SRT_EINVAL;
    srt_pf_set pf = ctx->kt.pf;
    const char *p = spec;
    while (*p == ' ' || *p == ',') p++;
    if (strcmp(p, "default") == 0) return SRT_OK;
    static const int32_t lo2[2] = {0, 0}, hi2[2] = {64, 1024}, lo1[1] = {1}, hi1[1] = {SRT_KD_PASS_MAX};
    while (*p) {
        const char *eq = strchr(p, '=');
        if (!eq) return SRT_EPREFETCH;
        const size_t kl = (size_t)(eq - p);
        int32_t v[2];
        srt_pf *dst = NULL;
        if (kl == 2 && strncmp(p, "kr", 2) == 0) dst = &pf.kr;
        else if (kl == 2 && strncmp(p, "q8", 2) == 0) dst = &pf.q8;
        else if (kl == 2 && strncmp(p, "kd", 2) == 0) dst = &pf.kd;
        else if (kl == 2 && strncmp(p, "zz", 2) == 0) { /* a fraction of the channels, 0-2 */
            p = eq + 1;
            if (*p < '0' || *p > '9') return SRT_EPREFETCH;
            char *e;
            errno = 0;
            const double f = strtod(p, &e);
            if (errno || !(f >= 0.0 && f <= 2.0) || (*e && *e != ' ' && *e != ',')) return SRT_EPREFETCH;
            pf.zz_dense_above = (float)f;
            p = e;
            while (*p == ' ' || *p == ',') p++;
            continue;
        } else if (!(kl == 4 && strncmp(p, "pass", 4) == 0)) return SRT_EPREFETCH;
        p = eq + 1;
        if (!pf_ints(&p, v, dst ? 2 : 1, dst ? lo2 : lo1, dst ? hi2 : hi1)) return SRT_EPREFETCH;
        if (dst) *dst = (srt_pf){v[0], v[1]};
        else pf.kd_pass_tiles = v[0];
        if (*p && *p != ' ' && *p != ',') return SRT_EPREFETCH;
        while (*p == ' ' || *p == ',') p++;
    }
    ctx->kt.pf = pf;
    return SRT_OK;
}

const char *srt_ctx_prefetch(const srt_ctx *ctx, char *buf, int cap) {
    if (!buf || cap < 1) return buf;
    const srt_pf_set *f = &ctx->kt.pf;
    snprintf(buf, (size_t)cap, "kr=%d/%d,q8=%d/%d,kd=%d/%d,pass=%d,zz=%.3g", (int)f->kr.l1, (int)f->kr.l2,
             (int)f->q8.l1, (int)f->q8.l2, (int)f->kd.l1, (int)f->kd.l2, (int)f->kd_pass_tiles,
             (double)f->zz_dense_above);
    return buf;
}

void srt_ctx_free(srt_ctx *ctx) {
    if (!ctx) return;
    srt_pool_free(ctx->pool);
    srt_free(ctx->scratch);
    srt_free(ctx->shared);
    free(ctx);
}

srt_isa srt_ctx_isa(const srt_ctx *ctx) { return ctx->isa; }
int srt_ctx_threads(const srt_ctx *ctx) { return ctx->nthreads; }
const srt_kernels *srt_ctx_kernels(const srt_ctx *ctx) { return ctx->k; }

float *srt_ctx_scratch(const srt_ctx *ctx, int tid, int64_t floats) {
    if (tid < 1 || tid >= ctx->nthreads || floats > ctx->scratch_floats) return NULL;
    return ctx->scratch + (size_t)(tid - 1) * (size_t)ctx->scratch_floats;
}

float *srt_ctx_shared(srt_ctx *ctx, int64_t floats) {
    if (floats < 0) return NULL;
    if (floats > ctx->shared_floats) {
        floats = srt_round_up(floats, 16);
        float *p = srt_alloc((size_t)floats * sizeof(float));
        if (!p) return NULL;
        srt_free(ctx->shared);
        ctx->shared = p;
        ctx->shared_floats = floats;
    }
    return ctx->shared;
}

void srt_ctx_run(srt_ctx *ctx, void (*fn)(void *, int, int), void *arg) {
    if (ctx->nthreads == 1 || !ctx->pool)
        fn(arg, 0, 1);
    else
        srt_pool_run(ctx->pool, fn, arg);
}
