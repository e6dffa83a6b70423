/* x86_attn_body.h - the grouped attention kernels for x86, one body compiled per ISA: gemv_avx2.c
 * (256-bit vectors, two heads' outputs in registers) and gemv_avx512.c (512-bit, four) define the
 * operations below, then include this file after their softmax (the pattern of x86_kmi4_body.h).
 *
 * g heads that share K and V (grouped-query attention): head h's query q + h hd, scores s + h n,
 * output out + h hd. Each K and V row is read once for the group (from L1 for the rest): one head at
 * a time read them from L2 for every head, as a GQA cache's 1 KB row stride leaves few L1 sets for
 * them. Every head's sums are the one-head kernel's (g = 1), in the same order. The cache holds f32
 * (ATT_GROUP) or f16 (ATT_GROUP_H) values; the f16 kernel widens each value as it loads it and then
 * runs the f32 kernel's operations in its order, so its result is the f32 kernel's on the widened
 * cache, bit for bit.
 *
 * The including file defines:
 *   ATT_GROUP, ATT_GROUP_H  the two functions' names
 *   ATT_VEC, ATT_W          the float vector type and its lanes
 *   ATT_ZERO(), ATT_SET1(x), ATT_MUL(a, b), ATT_FMA(a, b, c), ATT_SUM(v)
 *   ATT_SUMW(a)             the ATT_SUMs of ATT_W vectors as one vector (lane k: a[k]'s)
 *   ATT_LD(p), ATT_LDN(p, r)     ATT_W floats at p; the first r (0 < r < ATT_W), zeros after
 *   ATT_LDH(p), ATT_LDHN(p, r)   the same from f16 values, widened
 *   ATT_ST(p, v), ATT_STN(p, v, r)
 *   ATT_SOFTMAX(s, n)       p = softmax(s[0..n)) in place
 *   ATT_NH                  heads (2 or 4) whose outputs one pass keeps in registers, 4 ATT_W each
 *   ATT_AHEAD               K and V rows ahead of the one being read that are prefetched: the cache
 *                           comes from DRAM or L3 in decode (the layer's weights went through since),
 *                           and a group's loop per row is too long for the out-of-order window to
 *                           reach the next rows' misses by itself */

#define ATT_SPAN (4 * ATT_W)
#ifndef ATT_PV_AHEAD
#define ATT_PV_AHEAD 8
#endif

/* Lanes [i, i + ATT_W) of a cache row (f32 or f16), the first r of them when r < ATT_W. */
static inline __attribute__((always_inline)) ATT_VEC att_row(const void *row, int64_t i, int64_t r, const bool half) {
    if (half) {
        const uint16_t *p = (const uint16_t *)row + i;
        return r >= ATT_W ? ATT_LDH(p) : ATT_LDHN(p, r);
    }
    const float *p = (const float *)row + i;
    return r >= ATT_W ? ATT_LD(p) : ATT_LDN(p, r);
}

/* out[h][i0 .. i0 + ATT_SPAN) = sum_t p[h][t] V_t for NH heads (p[h] = s + h n), each V_t read once for all */
static inline __attribute__((always_inline)) void att_pv(float *out, const float *s, const void *V, int64_t n,
                                                         int64_t stride, int64_t hd, int64_t i0, const int NH,
                                                         const bool half) {
    const int64_t esz = half ? 2 : 4;
    ATT_VEC o[4][4];
    int64_t left[4];
    for (int c = 0; c < 4; c++) {
        left[c] = hd - i0 - ATT_W * c;
        for (int h = 0; h < NH; h++) o[h][c] = ATT_ZERO();
    }
    const bool whole = left[3] >= ATT_W;
    const int64_t pf = (hd - i0 < ATT_SPAN ? hd - i0 : ATT_SPAN) * esz; /* the bytes of a row this pass reads */
    for (int64_t t = 0; t < n; t++) {
        const char *vr = (const char *)V + (t * stride + i0) * esz;
        if (t + ATT_PV_AHEAD < n)
            for (int64_t b = 0; b < pf; b += 64) _mm_prefetch(vr + ATT_PV_AHEAD * stride * esz + b, _MM_HINT_T0);
        ATT_VEC v[4];
        for (int c = 0; c < 4; c++)
            v[c] = whole ? att_row(vr, ATT_W * c, ATT_W, half) : left[c] > 0 ? att_row(vr, ATT_W * c, left[c], half) : ATT_ZERO();
        for (int h = 0; h < NH; h++) {
            const ATT_VEC p = ATT_SET1(s[h * n + t]);
            for (int c = 0; c < 4; c++) o[h][c] = ATT_FMA(p, v[c], o[h][c]);
        }
    }
    for (int h = 0; h < NH; h++)
        for (int c = 0; c < 4; c++) {
            float *d = out + h * hd + i0 + ATT_W * c;
            if (left[c] >= ATT_W) ATT_ST(d, o[h][c]);
            else if (left[c] > 0) ATT_STN(d, o[h][c], left[c]);
        }
}

/* Head size up to which an f16 K block is widened once for a group's heads (ATT_W rows of it on the stack) */
#define ATT_WK_HD 256

/* The dot products of qh with ATT_W rows (rows + k rs bytes; f32 or f16), reduced together */
static inline __attribute__((always_inline)) ATT_VEC att_scores_w(const float *qh, const char *rows, int64_t rs,
                                                                  int64_t hd, const bool half) {
    const int64_t hw = hd / ATT_W * ATT_W;
    ATT_VEC acc[ATT_W];
    for (int k = 0; k < ATT_W; k++) acc[k] = ATT_ZERO();
    for (int64_t i = 0; i < hw; i += ATT_W) {
        const ATT_VEC qv = ATT_LD(qh + i);
        for (int k = 0; k < ATT_W; k++) acc[k] = ATT_FMA(qv, att_row(rows + k * rs, i, ATT_W, half), acc[k]);
    }
    if (hw < hd) {
        const ATT_VEC qv = ATT_LDN(qh + hw, hd - hw);
        for (int k = 0; k < ATT_W; k++) acc[k] = ATT_FMA(qv, att_row(rows + k * rs, hw, hd - hw, half), acc[k]);
    }
    return ATT_SUMW(acc);
}

static inline __attribute__((always_inline)) void att_group(float *out, float *s, const float *q, const void *K,
                                                            const void *V, int64_t n, int64_t stride, int64_t hd,
                                                            int64_t g, float scale, const bool half) {
    const int64_t hw = hd / ATT_W * ATT_W, esz = half ? 2 : 4;
    int64_t t = 0;
    /* ATT_W positions at a time: each head's ATT_W dot products, then their reductions together
     * (ATT_SUMW, each in ATT_SUM's order: the same scores, bit for bit); the next block's rows
     * prefetched. An f16 block read by several heads is widened once into wk (the same values, so the
     * same bits) */
    float wk[ATT_W * ATT_WK_HD] __attribute__((aligned(64)));
    const bool widen = half && g > 1 && hd <= ATT_WK_HD;
    for (; t + ATT_W <= n; t += ATT_W) {
        const char *kb = (const char *)K + t * stride * esz;
        if (widen)
            for (int k = 0; k < ATT_W; k++)
                for (int64_t i = 0; i < hd; i += ATT_W) {
                    const ATT_VEC v = att_row(kb + k * stride * esz, i, hd - i, true);
                    if (hd - i >= ATT_W) ATT_ST(wk + k * hd + i, v);
                    else ATT_STN(wk + k * hd + i, v, hd - i);
                }
        for (int64_t h = 0; h < g; h++) {
            /* the next block's rows, spread over the heads (a burst of them stalls on the fill buffers) */
            for (int64_t r = ATT_W + ATT_W * h / g, r1 = ATT_W + ATT_W * (h + 1) / g; r < r1 && t + r < n; r++)
                for (int64_t b = 0; b < hd * esz; b += 64) _mm_prefetch(kb + r * stride * esz + b, _MM_HINT_T0);
            const ATT_VEC sc = widen ? att_scores_w(q + h * hd, (const char *)wk, hd * 4, hd, false)
                                     : att_scores_w(q + h * hd, kb, stride * esz, hd, half);
            ATT_ST(s + h * n + t, ATT_MUL(ATT_SET1(scale), sc));
        }
    }
    for (; t < n; t++) {
        const char *kr = (const char *)K + t * stride * esz;
        if (t + ATT_AHEAD < n)
            for (int64_t b = 0; b < hd * esz; b += 64) _mm_prefetch(kr + ATT_AHEAD * stride * esz + b, _MM_HINT_T0);
        for (int64_t h = 0; h < g; h++) {
            const float *qh = q + h * hd;
            ATT_VEC acc = ATT_ZERO();
            for (int64_t i = 0; i < hw; i += ATT_W) acc = ATT_FMA(ATT_LD(qh + i), att_row(kr, i, ATT_W, half), acc);
            if (hw < hd) acc = ATT_FMA(ATT_LDN(qh + hw, hd - hw), att_row(kr, hw, hd - hw, half), acc);
            s[h * n + t] = scale * ATT_SUM(acc);
        }
    }
    for (int64_t h = 0; h < g; h++) ATT_SOFTMAX(s + h * n, n);
    /* out: ATT_SPAN values of up to ATT_NH heads at a time in registers */
    for (int64_t i0 = 0; i0 < hd; i0 += ATT_SPAN)
        for (int64_t h = 0; h < g; h += ATT_NH) {
            float *oh = out + h * hd;
            const float *sh = s + h * n;
            switch (g - h < ATT_NH ? g - h : ATT_NH) {
            case 1: att_pv(oh, sh, V, n, stride, hd, i0, 1, half); break;
#if ATT_NH > 2
            case 2: att_pv(oh, sh, V, n, stride, hd, i0, 2, half); break;
            case 3: att_pv(oh, sh, V, n, stride, hd, i0, 3, half); break;
#endif
            default: att_pv(oh, sh, V, n, stride, hd, i0, ATT_NH, half); break;
            }
        }
}

static void ATT_GROUP(float *out, float *s, const float *q, const float *K, const float *V, int64_t n, int64_t stride,
                      int64_t hd, int64_t g, float scale) {
    att_group(out, s, q, K, V, n, stride, hd, g, scale, false);
}

static void ATT_GROUP_H(float *out, float *s, const float *q, const uint16_t *K, const uint16_t *V, int64_t n,
                        int64_t stride, int64_t hd, int64_t g, float scale) {
    att_group(out, s, q, K, V, n, stride, hd, g, scale, true);
}
