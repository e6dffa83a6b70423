/* gemv_neon.c - Advanced SIMD (AArch64 baseline) kernels for the activation
 * quantiser, f32 rows, the q4_0t axpy scatter, zigzag/stripe, compaction,
 * the gate activation and attention heads. The integer-dot kernels are in
 * kmi4_neon.c / kmi4_dotprod.c. */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "../srt_kern.h"

static inline float half(const uint8_t *p) { return srt_fp16_to_fp32(srt_rd16(p)); }

/* ---- activations: bit-identical to the reference ----------------------------------- */

static void act_q8_neon(int8_t *q, float *d, int32_t *sum, const float *x, int64_t n) {
    for (int64_t b = 0; b < n / SRT_QK; b++) {
        float32x4_t v[8];
        float32x4_t m = vdupq_n_f32(0.0f), fin = m;
        for (int k = 0; k < 8; k++) {
            v[k] = vld1q_f32(x + 32 * b + 4 * k);
            m = vmaxq_f32(m, vabsq_f32(v[k]));
            fin = vaddq_f32(fin, vsubq_f32(v[k], v[k])); /* NaN iff non-finite */
        }
        if (vminvq_u32(vceqq_f32(fin, fin)) == 0) { /* as srt_act_q8_block: never convert inf/NaN */
            memset(q + 32 * b, 0, 32);
            sum[b] = 0;
            d[b] = SRT_ACT_BAD_D;
            continue;
        }
        float db = vmaxvq_f32(m) / 127.0f;
        const float id = db >= 1e-30f ? 1.0f / db : 0.0f;
        if (id == 0.0f) db = 0.0f;
        int32x4_t s = vdupq_n_s32(0);
        int16x8_t h[4];
        for (int k = 0; k < 4; k++) {
            const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k], id));
            const int32x4_t c = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k + 1], id));
            s = vaddq_s32(s, vaddq_s32(a, c));
            h[k] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(c));
        }
        vst1q_s8(q + 32 * b, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
        vst1q_s8(q + 32 * b + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
        sum[b] = vaddvq_s32(s);
        d[b] = db;
    }
}

/* ---- f32 rows ---------------------------------------------------------------------------- */

static void rows_f32_neon(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t n = j->cols, n4 = n / 4 * 4;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const float *w = (const float *)(const void *)(j->w + r * j->row_bytes);
        float32x4_t a0 = vdupq_n_f32(0.0f), a1 = a0;
        int64_t c = 0;
        for (; c + 7 < n4; c += 8) {
            a0 = vfmaq_f32(a0, vld1q_f32(w + c), vld1q_f32(j->xf + c));
            a1 = vfmaq_f32(a1, vld1q_f32(w + c + 4), vld1q_f32(j->xf + c + 4));
        }
        for (; c < n4; c += 4) a0 = vfmaq_f32(a0, vld1q_f32(w + c), vld1q_f32(j->xf + c));
        float s = vaddvq_f32(vaddq_f32(a0, a1));
        for (; c < n; c++) s += w[c] * j->xf[c];
        j->y[r] = s;
    }
}

/* (q - 8) of the 16 low nibbles (k = 0) or high nibbles (k = 1) of a GGML
 * block, as four float32x4. */
static inline void nibbles_f32(float32x4_t out[4], uint8x16_t v, int k) {
    const int8x16_t s = vsubq_s8(vreinterpretq_s8_u8(k ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(0x0f))),
                                 vdupq_n_s8(8));
    const int16x8_t lo = vmovl_s8(vget_low_s8(s)), hi = vmovl_high_s8(s);
    out[0] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo)));
    out[1] = vcvtq_f32_s32(vmovl_high_s16(lo));
    out[2] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi)));
    out[3] = vcvtq_f32_s32(vmovl_high_s16(hi));
}

/* ---- q4_0t axpy ------------------------------------------------------------------------------ */

static void axpy_q4_0t_neon(const srt_axpy_job *j, int64_t b0, int64_t b1) {
    float *y = j->y + b0 * SRT_QK;
    memset(y, 0, sizeof(float) * (size_t)((b1 - b0) * SRT_QK));
    for (int64_t p = 0; p < j->n_idx; p++) {
        const int64_t ch = j->idx ? j->idx[p] : p;
        const uint8_t *row = j->w + ch * j->row_bytes;
        for (int64_t b = b0; b < b1; b++) {
            const uint8_t *blk = row + b * SRT_Q4_BYTES;
            const float c = j->h[ch] * half(blk);
            const uint8x16_t v = vld1q_u8(blk + 2);
            float *yb = y + (b - b0) * SRT_QK;
            for (int k = 0; k < 2; k++) {
                float32x4_t f[4];
                nibbles_f32(f, v, k);
                for (int u = 0; u < 4; u++) vst1q_f32(yb + 16 * k + 4 * u, vfmaq_n_f32(vld1q_f32(yb + 16 * k + 4 * u), f[u], c));
            }
        }
    }
}

/* ---- zigzag: per 32-channel run and chunk, its int8 values (ref_zigzag), then 64 rows (two groups)
 * in 16 registers per pass; the products q (w - 8) are small integers, so the float sums
 * of a run are exact and one multiply by the group's d finishes them ------------------------- */

/* A run's c = x * s for groups 8ck .. 8ck+7 quantised per group, bit for bit as
 * srt_act_q8_block: qf[k][g] (as floats), d[g]. */
static void zz_quant_neon(float (*qf)[8], float *d_out, const uint8_t *sc, int64_t G, int G8, const float *x,
                          const uint32_t *idx, int64_t first, int64_t n) {
    float32x4_t vmax[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, fin[2] = {vmax[0], vmax[0]};
    for (int64_t k = 0; k < n; k++) {
        const int64_t ch = idx ? idx[first + k] : first + k;
        float s[8] = {0};
        for (int g = 0; g < G8; g++) s[g] = half(sc + 2 * (ch * G + g));
        for (int h = 0; h < 2; h++) {
            const float32x4_t c = vmulq_f32(vdupq_n_f32(x[ch]), vld1q_f32(s + 4 * h));
            vst1q_f32(qf[k] + 4 * h, c);
            vmax[h] = vmaxq_f32(vmax[h], vabsq_f32(c));
            fin[h] = vaddq_f32(fin[h], vsubq_f32(c, c));
        }
    }
    uint32x4_t bad[2];
    float32x4_t id[2];
    for (int h = 0; h < 2; h++) {
        float32x4_t d = vdivq_f32(vmax[h], vdupq_n_f32(127.0f));
        const uint32x4_t ok = vcgeq_f32(d, vdupq_n_f32(1e-30f));
        bad[h] = vmvnq_u32(vceqq_f32(fin[h], fin[h]));
        id[h] = vreinterpretq_f32_u32(vandq_u32(ok, vreinterpretq_u32_f32(vdivq_f32(vdupq_n_f32(1.0f), d))));
        d = vreinterpretq_f32_u32(vandq_u32(ok, vreinterpretq_u32_f32(d)));
        vst1q_f32(d_out + 4 * h, vbslq_f32(bad[h], vdupq_n_f32(SRT_ACT_BAD_D), d));
    }
    for (int64_t k = 0; k < n; k++)
        for (int h = 0; h < 2; h++) {
            int32x4_t q = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(qf[k] + 4 * h), id[h]));
            q = vmaxq_s32(vminq_s32(q, vdupq_n_s32(127)), vdupq_n_s32(-127));
            q = vreinterpretq_s32_u32(vbicq_u32(vreinterpretq_u32_s32(q), bad[h]));
            vst1q_f32(qf[k] + 4 * h, vcvtq_f32_s32(q));
        }
}

static void zigzag_neon(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, float *y) {
    const int64_t R = j->R, G = R / SRT_QK;
    const uint8_t *sc = j->w + srt_zz_nib_bytes(j->cols, R);
    for (int64_t o = SRT_QK * j->g0; o < SRT_QK * j->g1; o++) y[o] = 0.0f;
    float qf[SRT_QK][8], d[8];
    /* run by run, each chunk of the call's in turn (as the x86 kernels): a live channel's piece for
     * these rows is read in one sweep; every row adds its runs' terms in list order either way */
    int64_t p = 0;
    while (p < n) {
        const int64_t kb = (idx ? idx[first + p] : first + p) / SRT_QK;
        int64_t e = p;
        while (e < n && (idx ? idx[first + e] : first + e) / SRT_QK == kb) e++;
        for (int64_t ck = j->g0 / 8; ck * 8 < j->g1; ck++) {
            const int G8 = (int)(j->g1 - ck * 8 < 8 ? j->g1 - ck * 8 : 8);
            zz_quant_neon(qf, d, sc + 2 * 8 * ck, G, G8, j->x, idx, first + p, e - p);
            for (int g0 = 0; g0 < G8; g0 += 2) {
                const int ng = G8 - g0 >= 2 ? 2 : 1;
                float32x4_t acc[16];
                for (int k = 0; k < 16; k++) acc[k] = vdupq_n_f32(0.0f);
                for (int64_t k = 0; k < e - p; k++) {
                    const int64_t ch = idx ? idx[first + p + k] : first + p + k;
                    const uint8_t *nib = j->w + ch * (R / 2) + 16 * (8 * ck + g0);
                    for (int g = 0; g < ng; g++) {
                        const float c = qf[k][g0 + g];
                        const uint8x16_t v = vld1q_u8(nib + 16 * g);
                        for (int h = 0; h < 2; h++) {
                            float32x4_t f[4];
                            nibbles_f32(f, v, h);
                            for (int u = 0; u < 4; u++) acc[8 * g + 4 * h + u] = vfmaq_n_f32(acc[8 * g + 4 * h + u], f[u], c);
                        }
                    }
                }
                for (int g = 0; g < ng; g++) {
                    float *yg = y + 32 * (8 * ck + g0 + g);
                    for (int k = 0; k < 8; k++) vst1q_f32(yg + 4 * k, vfmaq_n_f32(vld1q_f32(yg + 4 * k), acc[8 * g + k], d[g0 + g]));
                }
            }
        }
        p = e;
    }
}

/* ---- compaction ------------------------------------------------------------------------------ */

static int64_t compact_neon(uint32_t *idx, const float *x, const float *tv, float t, int64_t n) {
    int64_t m = 0, i = 0;
    const float32x4_t tb = vdupq_n_f32(t);
    for (; i + 4 <= n; i += 4) {
        const uint32x4_t k = vcgtq_f32(vabsq_f32(vld1q_f32(x + i)), tv ? vld1q_f32(tv + i) : tb);
        if (vmaxvq_u32(k) == 0) continue;
        uint32_t lanes[4];
        vst1q_u32(lanes, k);
        for (int l = 0; l < 4; l++)
            if (lanes[l]) idx[m++] = (uint32_t)(i + l);
    }
    for (; i < n; i++)
        if (__builtin_fabsf(x[i]) > (tv ? tv[i] : t)) idx[m++] = (uint32_t)i;
    return m;
}

static uint64_t stream_neon(const uint8_t *p, size_t n) {
    uint64x2_t a = vdupq_n_u64(0), b = a, c = a, d = a;
    for (size_t i = 0; i + 64 <= n; i += 64) {
        a = veorq_u64(a, vld1q_u64((const uint64_t *)(const void *)(p + i)));
        b = veorq_u64(b, vld1q_u64((const uint64_t *)(const void *)(p + i + 16)));
        c = veorq_u64(c, vld1q_u64((const uint64_t *)(const void *)(p + i + 32)));
        d = veorq_u64(d, vld1q_u64((const uint64_t *)(const void *)(p + i + 48)));
    }
    const uint64x2_t x = veorq_u64(veorq_u64(a, b), veorq_u64(c, d));
    return vgetq_lane_u64(x, 0) ^ vgetq_lane_u64(x, 1);
}

/* ---- activation and attention -------------------------------------------------------------- */

/* e^x by the rule of srt_kern.h (SRT_EXP_*), 2^n from exponent bits in two halves (each normal, so the
 * product overflows to inf and underflows through the subnormals as one scaling would). FMIN/FMAX
 * return NaN for a NaN operand, so NaN stays NaN. */
static inline float32x4_t exp_neon(float32x4_t x) {
    x = vminq_f32(vdupq_n_f32(SRT_EXP_MAX), vmaxq_f32(vdupq_n_f32(SRT_EXP_MIN), x));
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, SRT_EXP_LOG2E));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(SRT_EXP_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(SRT_EXP_LN2_LO));
    float32x4_t p = vdupq_n_f32(SRT_EXP_P5);
    p = vfmaq_f32(vdupq_n_f32(SRT_EXP_P4), p, r);
    p = vfmaq_f32(vdupq_n_f32(SRT_EXP_P3), p, r);
    p = vfmaq_f32(vdupq_n_f32(SRT_EXP_P2), p, r);
    p = vfmaq_f32(vdupq_n_f32(SRT_EXP_P1), p, r);
    p = vfmaq_f32(vdupq_n_f32(SRT_EXP_P0), p, r);
    p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), vmulq_f32(p, r), r);
    const int32x4_t ni = vcvtq_s32_f32(n), n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
    const int32x4_t bias = vdupq_n_s32(127);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
    return vmulq_f32(vmulq_f32(p, s1), s2);
}

static inline float32x4_t act_v(float32x4_t u, bool gelu) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    if (!gelu) return vdivq_f32(u, vaddq_f32(one, exp_neon(vnegq_f32(u))));
    /* tanh z = 1 - 2 / (1 + e^2z) */
    const float32x4_t u3 = vmulq_f32(vmulq_f32(u, u), u);
    const float32x4_t z = vmulq_n_f32(vfmaq_f32(u, vdupq_n_f32(0.044715f), u3), 0.7978845608028654f);
    const float32x4_t th = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(one, exp_neon(vaddq_f32(z, z)))));
    return vmulq_f32(vmulq_n_f32(u, 0.5f), vaddq_f32(one, th));
}

static void act_neon(float *a, const float *u, int64_t n, bool gelu) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(a + i, act_v(vld1q_f32(u + i), gelu));
    if (i < n) { /* the last 1-3 through a zero-padded vector */
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        memcpy(t, u + i, sizeof(float) * (size_t)(n - i));
        vst1q_f32(t, act_v(vld1q_f32(t), gelu));
        memcpy(a + i, t, sizeof(float) * (size_t)(n - i));
    }
}

/* Four cache values from row + i: f32, or f16 widened; one value. */
static inline __attribute__((always_inline)) float32x4_t kv4(const void *row, int64_t i, const bool half) {
    return half ? vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)row + i))) : vld1q_f32((const float *)row + i);
}
static inline __attribute__((always_inline)) float kv1(const void *row, int64_t i, const bool half) {
    return half ? vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_dup_u16((const uint16_t *)row + i))), 0)
                : ((const float *)row)[i];
}

/* p = softmax(s[0..n)) in place: the max, e^(s - max) four at a time (the last 1-3 through a vector
 * padded with -inf, e = 0), their sum, then each times 1 / sum. */
static void softmax_neon(float *s, int64_t n) {
    float mx = -INFINITY;
    for (int64_t t = 0; t < n; t++) mx = s[t] > mx ? s[t] : mx;
    const float32x4_t vmx = vdupq_n_f32(mx);
    float32x4_t vs = vdupq_n_f32(0.0f);
    int64_t t = 0;
    for (; t + 4 <= n; t += 4) {
        const float32x4_t e = exp_neon(vsubq_f32(vld1q_f32(s + t), vmx));
        vst1q_f32(s + t, e);
        vs = vaddq_f32(vs, e);
    }
    float sum = vaddvq_f32(vs);
    if (t < n) {
        float tl[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        memcpy(tl, s + t, sizeof(float) * (size_t)(n - t));
        const float32x4_t e = exp_neon(vsubq_f32(vld1q_f32(tl), vmx));
        vst1q_f32(tl, e);
        memcpy(s + t, tl, sizeof(float) * (size_t)(n - t));
        sum += vaddvq_f32(e);
    }
    const float inv = 1.0f / sum;
    for (t = 0; t < n; t++) s[t] *= inv;
}

/* out[h][i0 .. i0 + 16) = sum_t p[h][t] V_t for NH heads (p[h] = s + h n), each V span read once for them:
 * per output the one-head order (t ascending, one fma each). */
static inline __attribute__((always_inline)) void attn_pv16(float *out, const float *s, const void *V, int64_t n,
                                                            int64_t stride, int64_t hd, int64_t i0, const int NH,
                                                            const bool half) {
    const int64_t esz = half ? 2 : 4;
    float32x4_t o[4][4];
    for (int h = 0; h < NH; h++)
        for (int c = 0; c < 4; c++) o[h][c] = vdupq_n_f32(0.0f);
    for (int64_t t = 0; t < n; t++) {
        const void *vr = (const char *)V + t * stride * esz;
        const float32x4_t v0 = kv4(vr, i0, half), v1 = kv4(vr, i0 + 4, half), v2 = kv4(vr, i0 + 8, half),
                          v3 = kv4(vr, i0 + 12, half);
        for (int h = 0; h < NH; h++) {
            const float p = s[h * n + t];
            o[h][0] = vfmaq_n_f32(o[h][0], v0, p);
            o[h][1] = vfmaq_n_f32(o[h][1], v1, p);
            o[h][2] = vfmaq_n_f32(o[h][2], v2, p);
            o[h][3] = vfmaq_n_f32(o[h][3], v3, p);
        }
    }
    for (int h = 0; h < NH; h++)
        for (int c = 0; c < 4; c++) vst1q_f32(out + h * hd + i0 + 4 * c, o[h][c]);
}

/* g heads that share K and V over an f32 or f16 cache (the f16 one: the f32 one's operations on the
 * widened values). Each K row is read once for the group and each V span once for up to four heads
 * (the other heads find them in L1), while every head's operations are the one-head kernel's in its
 * order: g = 1 is that kernel. */
static inline __attribute__((always_inline)) void attn_group_t(float *out, float *s, const float *q, const void *K,
                                                               const void *V, int64_t n, int64_t stride, int64_t hd,
                                                               int64_t g, float scale, const bool half) {
    const int64_t h4 = hd / 4 * 4, esz = half ? 2 : 4;
    for (int64_t t = 0; t < n; t++) {
        const void *kr = (const char *)K + t * stride * esz;
        for (int64_t h = 0; h < g; h++) {
            const float *qh = q + h * hd;
            float32x4_t acc = vdupq_n_f32(0.0f);
            for (int64_t i = 0; i < h4; i += 4) acc = vfmaq_f32(acc, vld1q_f32(qh + i), kv4(kr, i, half));
            float dot = vaddvq_f32(acc);
            for (int64_t i = h4; i < hd; i++) dot += qh[i] * kv1(kr, i, half);
            s[h * n + t] = scale * dot;
        }
    }
    for (int64_t h = 0; h < g; h++) softmax_neon(s + h * n, n);
    /* out: 16 values of up to four heads at a time in registers, then 4, then the last hd % 4 in scalars */
    int64_t i0 = 0;
    for (; i0 + 16 <= h4; i0 += 16)
        for (int64_t h = 0; h < g; h += 4) {
            float *oh = out + h * hd;
            const float *sh = s + h * n;
            switch (g - h < 4 ? g - h : 4) {
            case 1: attn_pv16(oh, sh, V, n, stride, hd, i0, 1, half); break;
            case 2: attn_pv16(oh, sh, V, n, stride, hd, i0, 2, half); break;
            case 3: attn_pv16(oh, sh, V, n, stride, hd, i0, 3, half); break;
            default: attn_pv16(oh, sh, V, n, stride, hd, i0, 4, half); break;
            }
        }
    for (; i0 < h4; i0 += 4)
        for (int64_t h = 0; h < g; h++) {
            float32x4_t o = vdupq_n_f32(0.0f);
            for (int64_t t = 0; t < n; t++) o = vfmaq_n_f32(o, kv4((const char *)V + t * stride * esz, i0, half), s[h * n + t]);
            vst1q_f32(out + h * hd + i0, o);
        }
    for (; i0 < hd; i0++)
        for (int64_t h = 0; h < g; h++) {
            float o = 0.0f;
            for (int64_t t = 0; t < n; t++) o += s[h * n + t] * kv1((const char *)V + t * stride * esz, i0, half);
            out[h * hd + i0] = o;
        }
}

static void attn_head_neon(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                           int64_t stride, int64_t hd, float scale) {
    attn_group_t(out, s, q, K, V, n, stride, hd, 1, scale, false);
}

static void attn_group_neon(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                            int64_t stride, int64_t hd, int64_t g, float scale) {
    attn_group_t(out, s, q, K, V, n, stride, hd, g, scale, false);
}

static void attn_group_h_neon(float *out, float *s, const float *q, const uint16_t *K, const uint16_t *V, int64_t n,
                              int64_t stride, int64_t hd, int64_t g, float scale) {
    attn_group_t(out, s, q, K, V, n, stride, hd, g, scale, true);
}

/* The saturating f16 store, 4 values a step: clamped to +-65504, a NaN replaced by the quiet NaN of its
 * sign (which converts to the scalar store's sign | 0x7e00), then converted with the default rounding,
 * to nearest even; the last n % 4 by the scalar store. */
static void f16_store_neon(uint16_t *dst, const float *x, int64_t n) {
    const float32x4_t hi = vdupq_n_f32(65504.0f), lo = vdupq_n_f32(-65504.0f);
    const uint32x4_t sign = vdupq_n_u32(0x80000000u), qnan = vdupq_n_u32(0x7fc00000u);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        const float32x4_t c = vmaxq_f32(lo, vminq_f32(hi, v));
        const float32x4_t nan = vreinterpretq_f32_u32(vorrq_u32(vandq_u32(vreinterpretq_u32_f32(v), sign), qnan));
        const float32x4_t r = vbslq_f32(vceqq_f32(v, v), c, nan);
        vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(r)));
    }
    for (; i < n; i++) dst[i] = srt_fp32_to_fp16_sat(x[i]);
}

void srt_neon_register(srt_kernels *k) {
    k->stream = stream_neon;
    k->act_q8 = act_q8_neon;
    k->rows_f32 = rows_f32_neon;
    k->axpy_q4_0t = axpy_q4_0t_neon;
    k->zigzag = zigzag_neon;
    k->compact = compact_neon;
    k->act = act_neon;
    k->attn_head = attn_head_neon;
    k->attn_group = attn_group_neon;
    k->attn_group_h = attn_group_h_neon;
    k->f16_store = f16_store_neon;
}
