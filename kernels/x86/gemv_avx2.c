/* gemv_avx2.c - AVX2 + FMA + F16C kernels for the activation quantiser, the
 * GGML-format rows (f32, q8_0, q4_0), the q4_0t axpy scatter, zigzag/stripe,
 * compaction, the gate activation and attention heads. Integer dots use
 * vpmaddubsw + vpmaddwd (no VNNI). */
#include <immintrin.h>
#include <math.h>

#include "../srt_kern.h"

static inline float half(const uint8_t *p) { return _cvtsh_ss(srt_rd16(p)); }

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* ---- activations ------------------------------------------------------------------- */

static void act_q8_avx2(int8_t *q, float *d, int32_t *sum, const float *x, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / SRT_QK; b++) {
        __m256 v[4], m = _mm256_setzero_ps(), fin = m;
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(x + 32 * b + 8 * k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
            fin = _mm256_add_ps(fin, _mm256_sub_ps(v[k], v[k])); /* NaN iff non-finite */
        }
        if (_mm256_movemask_ps(_mm256_cmp_ps(fin, fin, _CMP_UNORD_Q))) { /* as srt_act_q8_block */
            memset(q + 32 * b, 0, 32);
            sum[b] = 0;
            d[b] = SRT_ACT_BAD_D;
            continue;
        }
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        float db = _mm_cvtss_f32(h) / 127.0f;
        const float id = db >= 1e-30f ? 1.0f / db : 0.0f;
        if (id == 0.0f) db = 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i i[4];
        for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
        sum[b] = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3])));
        /* packs interleave 128-bit lanes; the final permute restores order */
        const __m256i p16a = _mm256_packs_epi32(i[0], i[1]), p16b = _mm256_packs_epi32(i[2], i[3]);
        const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        _mm256_storeu_si256((__m256i *)(q + 32 * b),
                            _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        d[b] = db;
    }
}

/* ---- rows ------------------------------------------------------------------------------ */

static void rows_f32_avx2(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t n = j->cols, n8 = n / 8 * 8;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const float *w = (const float *)(const void *)(j->w + r * j->row_bytes);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        int64_t c = 0;
        for (; c + 15 < n8; c += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + c), _mm256_loadu_ps(j->xf + c), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + c + 8), _mm256_loadu_ps(j->xf + c + 8), a1);
        }
        for (; c < n8; c += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + c), _mm256_loadu_ps(j->xf + c), a0);
        float s = hsum(_mm256_add_ps(a0, a1));
        for (; c < n; c++) s += w[c] * j->xf[c];
        j->y[r] = s;
    }
}

static inline __m256i dot_q4(const uint8_t *blk, const int8_t *a, int32_t asum) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(blk + SRT_BLK_QS)), m = _mm_set1_epi8(0x0f);
    const __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
    const __m256i p = _mm256_maddubs_epi16(w, _mm256_loadu_si256((const __m256i *)a));
    const __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    return _mm256_sub_epi32(s, _mm256_set_m128i(_mm_setzero_si128(), _mm_cvtsi32_si128(8 * asum)));
}

static inline __m256i dot_q8(const uint8_t *blk, const int8_t *a) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + SRT_BLK_QS)), x = _mm256_loadu_si256((const __m256i *)a);
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* Rows six list positions ahead prefetched into L2, as rows_q4_0_avx512 does: 2.7x -> 2.0x the
 * streaming floor at 2304 -> 9216 (two rows per step, sharing the activation loads, was slower). */
static void rows_q4_0_avx2(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK;
    const srt_act *a = j->xq;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        if (i + 6 < i1) {
            const uint8_t *pr = j->w + (j->idx ? (int64_t)j->idx[i + 6] : i + 6) * j->row_bytes;
            for (int64_t o = 0; o < j->row_bytes; o += 64) _mm_prefetch((const char *)(pr + o), _MM_HINT_T1);
            _mm_prefetch((const char *)(pr + j->row_bytes - 1), _MM_HINT_T1);
        }
        const uint8_t *row = j->w + r * j->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * SRT_Q4_BYTES;
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_q4(blk, a->q + 32 * b, a->sum[b])),
                                  _mm256_set1_ps(half(blk) * a->d[b]), acc);
        }
        j->y[r] = hsum(acc);
    }
}

static void rows_q8_0_avx2(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK;
    const srt_act *a = j->xq;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *row = j->w + r * j->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * SRT_Q8_BYTES;
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_q8(blk, a->q + 32 * b)), _mm256_set1_ps(half(blk) * a->d[b]),
                                  acc);
        }
        j->y[r] = hsum(acc);
    }
}

/* ---- q4_0t axpy ------------------------------------------------------------------------ */

static void axpy_q4_0t_avx2(const srt_axpy_job *j, int64_t b0, int64_t b1) {
    float *y = j->y + b0 * SRT_QK;
    memset(y, 0, sizeof(float) * (size_t)((b1 - b0) * SRT_QK));
    const __m256i m15 = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
    for (int64_t p = 0; p < j->n_idx; p++) {
        const int64_t ch = j->idx ? j->idx[p] : p;
        const uint8_t *row = j->w + ch * j->row_bytes;
        for (int64_t b = b0; b < b1; b++) {
            const uint8_t *blk = row + b * SRT_Q4_BYTES;
            const __m256 c = _mm256_set1_ps(j->h[ch] * half(blk));
            float *yb = y + (b - b0) * SRT_QK;
            for (int k = 0; k < 2; k++) {
                const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + SRT_BLK_QS + 8 * k)));
                const __m256 lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(v, m15), eight));
                const __m256 hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight));
                _mm256_storeu_ps(yb + 8 * k, _mm256_fmadd_ps(lo, c, _mm256_loadu_ps(yb + 8 * k)));
                _mm256_storeu_ps(yb + 16 + 8 * k, _mm256_fmadd_ps(hi, c, _mm256_loadu_ps(yb + 16 + 8 * k)));
            }
        }
    }
}

/* ---- zigzag: per 32-channel run, its int8 values (ref_zigzag), then 64 rows (two groups)
 * in 8 registers per pass; the products q (w - 8) are small integers, so the float sums
 * of a run are exact and one multiply by the group's d finishes them ---------------------- */

/* A run's c = x * s for groups 8ck .. 8ck+7 quantised per group, bit for bit as
 * srt_act_q8_block: qf[k][g] (as floats), d[g]. */
static void zz_quant_avx2(float (*qf)[8], float *d_out, const uint8_t *sc, int64_t G, int G8, const float *x,
                          const uint32_t *idx, int64_t first, int64_t n) {
    __m256 vmax = _mm256_setzero_ps(), fin = vmax;
    for (int64_t k = 0; k < n; k++) {
        const int64_t ch = idx ? idx[first + k] : first + k;
        _Alignas(16) uint16_t h[8] = {0};
        memcpy(h, sc + 2 * ch * G, 2 * (size_t)G8);
        const __m256 c = _mm256_mul_ps(_mm256_set1_ps(x[ch]), _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(void *)h)));
        _mm256_storeu_ps(qf[k], c);
        vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), c));
        fin = _mm256_add_ps(fin, _mm256_sub_ps(c, c));
    }
    __m256 d = _mm256_div_ps(vmax, _mm256_set1_ps(127.0f));
    const __m256 ok = _mm256_cmp_ps(d, _mm256_set1_ps(1e-30f), _CMP_GE_OQ);
    const __m256 bad = _mm256_cmp_ps(fin, fin, _CMP_UNORD_Q);
    const __m256 id = _mm256_and_ps(ok, _mm256_div_ps(_mm256_set1_ps(1.0f), d));
    d = _mm256_blendv_ps(_mm256_and_ps(ok, d), _mm256_set1_ps(SRT_ACT_BAD_D), bad);
    const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
    for (int64_t k = 0; k < n; k++) {
        __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(qf[k]), id));
        q = _mm256_andnot_si256(_mm256_castps_si256(bad), _mm256_max_epi32(_mm256_min_epi32(q, lim), nlim));
        _mm256_storeu_ps(qf[k], _mm256_cvtepi32_ps(q));
    }
    _mm256_storeu_ps(d_out, d);
}

static void zigzag_avx2(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, float *y) {
    const int64_t R = j->R, G = R / SRT_QK;
    const uint8_t *sc = j->w + srt_zz_nib_bytes(j->cols, R);
    const __m256i m15 = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
    for (int64_t o = SRT_QK * j->g0; o < SRT_QK * j->g1; o++) y[o] = 0.0f;
    float qf[SRT_QK][8], d[8];
    for (int64_t ck = j->g0 / 8; ck * 8 < j->g1; ck++) {
        const int G8 = (int)(j->g1 - ck * 8 < 8 ? j->g1 - ck * 8 : 8);
        int64_t p = 0;
        while (p < n) {
            const int64_t kb = (idx ? idx[first + p] : first + p) / SRT_QK;
            int64_t e = p;
            while (e < n && (idx ? idx[first + e] : first + e) / SRT_QK == kb) e++;
            zz_quant_avx2(qf, d, sc + 2 * 8 * ck, G, G8, j->x, idx, first + p, e - p);
            for (int g0 = 0; g0 < G8; g0 += 2) {
                const int ng = G8 - g0 >= 2 ? 2 : 1;
                __m256 acc[8];
                for (int k = 0; k < 8; k++) acc[k] = _mm256_setzero_ps();
                for (int64_t k = 0; k < e - p; k++) {
                    const int64_t ch = idx ? idx[first + p + k] : first + p + k;
                    const uint8_t *nib = j->w + ch * (R / 2) + 16 * (8 * ck + g0);
                    for (int g = 0; g < ng; g++) {
                        const __m256 c = _mm256_set1_ps(qf[k][g0 + g]);
                        for (int h = 0; h < 2; h++) {
                            const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(nib + 16 * g + 8 * h)));
                            const __m256 lo = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_and_si256(v, m15), eight));
                            const __m256 hi = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight));
                            acc[4 * g + h] = _mm256_fmadd_ps(lo, c, acc[4 * g + h]);
                            acc[4 * g + 2 + h] = _mm256_fmadd_ps(hi, c, acc[4 * g + 2 + h]);
                        }
                    }
                }
                for (int g = 0; g < ng; g++) {
                    float *yg = y + 32 * (8 * ck + g0 + g);
                    const __m256 dg = _mm256_set1_ps(d[g0 + g]);
                    for (int k = 0; k < 4; k++)
                        _mm256_storeu_ps(yg + 8 * k, _mm256_fmadd_ps(acc[4 * g + k], dg, _mm256_loadu_ps(yg + 8 * k)));
                }
            }
            p = e;
        }
    }
}

/* ---- compaction ------------------------------------------------------------------------- */

static int64_t compact_avx2(uint32_t *idx, const float *x, const float *tv, float t, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f), tb = _mm256_set1_ps(t);
    int64_t m = 0, i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 ax = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i));
        const __m256 th = tv ? _mm256_loadu_ps(tv + i) : tb;
        unsigned bits = (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(ax, th, _CMP_GT_OQ));
        while (bits) {
            idx[m++] = (uint32_t)(i + __builtin_ctz(bits));
            bits &= bits - 1;
        }
    }
    for (; i < n; i++)
        if (__builtin_fabsf(x[i]) > (tv ? tv[i] : t)) idx[m++] = (uint32_t)i;
    return m;
}

/* ---- activation and attention -------------------------------------------------------------- */

/* e^x as gemv_avx512.c's exp512 (x = n ln2 + r, the same degree-6 polynomial), with 2^n built from
 * exponent bits in two halves (each within the normal range, so the product overflows to inf and
 * underflows through the subnormals as the single scaling would). NaN stays NaN. */
static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

static inline __m256 act256(__m256 u, bool gelu) {
    const __m256 one = _mm256_set1_ps(1.0f);
    if (!gelu) return _mm256_div_ps(u, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), u))));
    /* tanh z = 1 - 2 / (1 + e^2z) */
    const __m256 u3 = _mm256_mul_ps(_mm256_mul_ps(u, u), u);
    const __m256 z = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), u3, u));
    const __m256 th = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(one, exp256(_mm256_add_ps(z, z)))));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), u), _mm256_add_ps(one, th));
}

/* lanes [0, left) of a maskload / maskstore (left may be <= 0 or >= 8) */
static inline __m256i lanes(int64_t left) {
    const int32_t l = left < 0 ? 0 : left > 8 ? 8 : (int32_t)left;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static void act_avx2(float *a, const float *u, int64_t n, bool gelu) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(a + i, act256(_mm256_loadu_ps(u + i), gelu));
    if (i < n) {
        const __m256i m = lanes(n - i);
        _mm256_maskstore_ps(a + i, m, act256(_mm256_maskload_ps(u + i, m), gelu));
    }
}

static inline float hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void attn_head_avx2(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                           int64_t stride, int64_t hd, float scale) {
    const int64_t h8 = hd / 8 * 8;
    const __m256i tail = lanes(hd - h8);
    for (int64_t t = 0; t < n; t++) {
        const float *kr = K + t * stride;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t i = 0; i < h8; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kr + i), acc);
        if (h8 < hd) acc = _mm256_fmadd_ps(_mm256_maskload_ps(q + h8, tail), _mm256_maskload_ps(kr + h8, tail), acc);
        s[t] = scale * hsum(acc);
    }
    const int64_t n8 = n / 8 * 8;
    const __m256i nt = lanes(n - n8);
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    for (int64_t t = 0; t < n8; t += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(s + t));
    /* masked-off lanes load 0: blend -inf into them before the max */
    if (n8 < n)
        vmx = _mm256_max_ps(vmx, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_maskload_ps(s + n8, nt), _mm256_castsi256_ps(nt)));
    const __m256 mx = _mm256_set1_ps(hmax(vmx));
    __m256 vs = _mm256_setzero_ps();
    for (int64_t t = 0; t < n8; t += 8) {
        const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + t), mx));
        _mm256_storeu_ps(s + t, e);
        vs = _mm256_add_ps(vs, e);
    }
    if (n8 < n) {
        const __m256 e = _mm256_and_ps(exp256(_mm256_sub_ps(_mm256_maskload_ps(s + n8, nt), mx)), _mm256_castsi256_ps(nt));
        _mm256_maskstore_ps(s + n8, nt, e);
        vs = _mm256_add_ps(vs, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / hsum(vs));
    for (int64_t t = 0; t < n8; t += 8) _mm256_storeu_ps(s + t, _mm256_mul_ps(_mm256_loadu_ps(s + t), inv));
    if (n8 < n) _mm256_maskstore_ps(s + n8, nt, _mm256_mul_ps(_mm256_maskload_ps(s + n8, nt), inv));
    /* out: 32 values at a time in registers */
    for (int64_t i0 = 0; i0 < hd; i0 += 32) {
        __m256 o[4];
        __m256i mk[4];
        for (int c = 0; c < 4; c++) {
            mk[c] = lanes(hd - i0 - 8 * c);
            o[c] = _mm256_setzero_ps();
        }
        for (int64_t t = 0; t < n; t++) {
            const __m256 p = _mm256_set1_ps(s[t]);
            const float *vr = V + t * stride + i0;
            for (int c = 0; c < 4; c++) o[c] = _mm256_fmadd_ps(p, _mm256_maskload_ps(vr + 8 * c, mk[c]), o[c]);
        }
        for (int c = 0; c < 4; c++) _mm256_maskstore_ps(out + i0 + 8 * c, mk[c], o[c]);
    }
}

void srt_avx2_register(srt_kernels *k) {
    k->act_q8 = act_q8_avx2;
    k->rows_f32 = rows_f32_avx2;
    k->rows_q8_0 = rows_q8_0_avx2;
    k->rows_q4_0 = rows_q4_0_avx2;
    k->axpy_q4_0t = axpy_q4_0t_avx2;
    k->zigzag = zigzag_avx2;
    k->compact = compact_avx2;
    k->act = act_avx2;
    k->attn_head = attn_head_avx2;
}
