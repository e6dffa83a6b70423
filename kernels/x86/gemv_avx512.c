/* gemv_avx512.c - AVX-512 (F/BW/VL + VNNI) kernels for the activation
 * quantiser, the GGML-format rows (f32, q8_0, q4_0), the PowerInfer-style
 * q4_0t axpy scatter, zigzag/stripe column-sparse GEMV and compaction. */
#include <immintrin.h>
#include <math.h>

#include "../srt_kern.h"

static inline float half(const uint8_t *p) { return _cvtsh_ss(srt_rd16(p)); }

/* ---- activations: bit-identical to the reference ------------------------------- */

static void act_q8_avx512(int8_t *q, float *d, int32_t *sum, const float *x, int64_t n) {
    for (int64_t b = 0; b < n / SRT_QK; b++) {
        const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
        const __m512 fin = _mm512_add_ps(_mm512_sub_ps(x0, x0), _mm512_sub_ps(x1, x1)); /* NaN iff non-finite */
        if (_mm512_cmp_ps_mask(fin, fin, _CMP_UNORD_Q)) { /* as srt_act_q8_block: never convert inf/NaN */
            memset(q + 32 * b, 0, 32);
            sum[b] = 0;
            d[b] = SRT_ACT_BAD_D;
            continue;
        }
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        float db = amax / 127.0f;
        const float id = db >= 1e-30f ? 1.0f / db : 0.0f;
        if (id == 0.0f) db = 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, vid)), q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, vid));
        _mm_storeu_si128((__m128i *)(q + 32 * b), _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *)(q + 32 * b + 16), _mm512_cvtepi32_epi8(q1));
        sum[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        d[b] = db;
    }
}

/* ---- f32 rows ---------------------------------------------------------------------- */

static void rows_f32_avx512(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t n = j->cols, n16 = n / 16 * 16;
    const __mmask16 tail = (__mmask16)((1u << (n - n16)) - 1);
    int64_t i = i0;
    for (; i + 3 < i1; i += 4) {
        int64_t r[4];
        const float *w[4];
        for (int k = 0; k < 4; k++) {
            r[k] = j->idx ? j->idx[i + k] : i + k;
            w[k] = (const float *)(const void *)(j->w + r[k] * j->row_bytes);
        }
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t c = 0; c < n16; c += 16) {
            const __m512 xv = _mm512_loadu_ps(j->xf + c);
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(w[0] + c), xv, a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(w[1] + c), xv, a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(w[2] + c), xv, a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(w[3] + c), xv, a3);
        }
        if (tail) {
            const __m512 xv = _mm512_maskz_loadu_ps(tail, j->xf + n16);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w[0] + n16), xv, a0);
            a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w[1] + n16), xv, a1);
            a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w[2] + n16), xv, a2);
            a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w[3] + n16), xv, a3);
        }
        j->y[r[0]] = _mm512_reduce_add_ps(a0);
        j->y[r[1]] = _mm512_reduce_add_ps(a1);
        j->y[r[2]] = _mm512_reduce_add_ps(a2);
        j->y[r[3]] = _mm512_reduce_add_ps(a3);
    }
    for (; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const float *w = (const float *)(const void *)(j->w + r * j->row_bytes);
        __m512 a = _mm512_setzero_ps();
        for (int64_t c = 0; c < n16; c += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(w + c), _mm512_loadu_ps(j->xf + c), a);
        if (tail) a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, w + n16), _mm512_maskz_loadu_ps(tail, j->xf + n16), a);
        j->y[r] = _mm512_reduce_add_ps(a);
    }
}

/* ---- q8_0 / q4_0 rows (GGML blocks, one block per 256-bit step) ------------------- */

/* int32 lanes summing to the block dot; the int4 offset (-8 x block sum of
 * the activation) goes into lane 0. */
static inline __m256i dot_q4(const uint8_t *blk, const int8_t *a, int32_t asum) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(blk + 2)), m = _mm_set1_epi8(0x0f);
    const __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
    const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, _mm256_loadu_si256((const __m256i *)a));
    return _mm256_sub_epi32(s, _mm256_zextsi128_si256(_mm_cvtsi32_si128(8 * asum)));
}

static inline __m256i dot_q8(const uint8_t *blk, const int8_t *a) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2)), x = _mm256_loadu_si256((const __m256i *)a);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Eight q4_0 blocks (144 bytes) of one row, two per 512-bit step: vpermw
 * (the nibbles of a pair's blocks sit at words 1-8 and 10-17) lays them out
 * as [b0 | b0 | b1 | b1] and one AND keeps the
 * low nibbles in the first copy of each and the high nibbles, in place (x16),
 * in the second, so vpdpbusd against 64 natural activation values (the same
 * two blocks) leaves in every 32-bit lane four products of one block. Per
 * lane the -8 offset (x16 on high lanes) comes off as an integer
 * (lane_off), and the float scale dw * da (/16 on high lanes) is the
 * block's: the eight fp16 scales are gathered once from the pair vectors
 * (vpermt2w), times lane_d, and spread per pair with vpermps. acc[4] take
 * the four pairs. */
typedef struct q4_consts {
    __m512i pidx, nmask, widx, sidx[4];
} q4_consts;

static q4_consts q4_consts_make(void) {
    q4_consts c;
    _Alignas(64) uint8_t mb[64];
    _Alignas(64) uint16_t pb[32], wb[32];
    _Alignas(64) int32_t sb[4][16];
    for (int j = 0; j < 64; j++) mb[j] = (j / 16) % 2 ? 0xf0 : 0x0f;
    for (int k = 0; k < 32; k++) pb[k] = (uint16_t)((k < 16 ? 1 : 10) + k % 8);
    for (int k = 0; k < 32; k++) wb[k] = (uint16_t)(k % 8 < 4 ? 9 * (k % 4) : 32 + 9 * (k % 4));
    for (int q = 0; q < 4; q++)
        for (int l = 0; l < 16; l++) sb[q][l] = 2 * q + (l >= 8) + ((l / 4) % 2 ? 8 : 0);
    c.pidx = _mm512_load_si512(pb);
    c.nmask = _mm512_load_si512(mb);
    c.widx = _mm512_load_si512(wb);
    for (int q = 0; q < 4; q++) c.sidx[q] = _mm512_load_si512(sb[q]);
    return c;
}

#define Q4_PAIR(acc, r, q)                                                                                      \
    do {                                                                                                        \
        const __m512i w_ = _mm512_and_si512(_mm512_permutexvar_epi16(c.pidx, r), c.nmask);                       \
        __m512i v_ = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_, _mm512_load_si512(aq + 64 * (q)));         \
        v_ = _mm512_sub_epi32(v_, _mm512_load_si512(ao + 16 * (q)));                                            \
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v_), _mm512_permutexvar_ps(c.sidx[q], d16), acc);              \
    } while (0)

static float q4_row_avx512(const q4_consts *cp, const uint8_t *row, const srt_act *a, int64_t nb) {
    const q4_consts c = *cp;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const int64_t ng = nb / 8;
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *p = row + 144 * g;
        const int8_t *aq = a->q + 256 * g;
        const int32_t *ao = a->lane_off + 64 * g;
        const __m512i r0 = _mm512_loadu_si512(p), r1 = _mm512_loadu_si512(p + 36), r2 = _mm512_loadu_si512(p + 72);
        const __m512i r3 = _mm512_maskz_loadu_epi8((__mmask64)0xfffffffffull, p + 108); /* not past the group */
        const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi16(r0, c.widx, r2)));
        const __m512 d16 = _mm512_mul_ps(dw, _mm512_load_ps(a->lane_d + 16 * g));
        Q4_PAIR(acc0, r0, 0);
        Q4_PAIR(acc1, r1, 1);
        Q4_PAIR(acc2, r2, 2);
        Q4_PAIR(acc3, r3, 3);
    }
    float y = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3)));
    if (ng * 8 < nb) { /* the last 1-7 blocks, one at a time */
        __m256 t = _mm256_setzero_ps();
        for (int64_t b = ng * 8; b < nb; b++) {
            const uint8_t *b0 = row + b * SRT_Q4_BYTES;
            t = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_q4(b0, a->q + 32 * b, a->sum[b])),
                                _mm256_set1_ps(half(b0) * a->d[b]), t);
        }
        y += hsum256(t);
    }
    return y;
}
#undef Q4_PAIR

static void rows_q4_0_avx512(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK;
    const q4_consts c = q4_consts_make();
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        if (i + 6 < i1) { /* six rows ahead into L2 (live rows are scattered; dense ones help the prefetcher) */
            const uint8_t *pr = j->w + (j->idx ? (int64_t)j->idx[i + 6] : i + 6) * j->row_bytes;
            for (int64_t o = 0; o < j->row_bytes; o += 64) _mm_prefetch((const char *)(pr + o), _MM_HINT_T1);
            _mm_prefetch((const char *)(pr + j->row_bytes - 1), _MM_HINT_T1);
        }
        j->y[r] = q4_row_avx512(&c, j->w + r * j->row_bytes, j->xq, nb);
    }
}

static void rows_q8_0_avx512(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK;
    const srt_act *a = j->xq;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *row = j->w + r * j->row_bytes;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
        int64_t b = 0;
        for (; b + 1 < nb; b += 2) {
            const uint8_t *b0 = row + b * SRT_Q8_BYTES, *b1 = b0 + SRT_Q8_BYTES;
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_q8(b0, a->q + 32 * b)), _mm256_set1_ps(half(b0) * a->d[b]),
                                   acc0);
            acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_q8(b1, a->q + 32 * b + 32)),
                                   _mm256_set1_ps(half(b1) * a->d[b + 1]), acc1);
        }
        if (b < nb) {
            const uint8_t *b0 = row + b * SRT_Q8_BYTES;
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_q8(b0, a->q + 32 * b)), _mm256_set1_ps(half(b0) * a->d[b]),
                                   acc0);
        }
        j->y[r] = hsum256(_mm256_add_ps(acc0, acc1));
    }
}

/* ---- q4_0t axpy: y[block] += h_j * d * (q - 8), two channels per pass ------------- */

static inline void axpy_block(float *y, const uint8_t *blk, float c) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + 2)));
    const __m512i eight = _mm512_set1_epi32(8);
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_and_si512(v, _mm512_set1_epi32(15)), eight));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight));
    const __m512 cv = _mm512_set1_ps(c * half(blk));
    _mm512_storeu_ps(y, _mm512_fmadd_ps(lo, cv, _mm512_loadu_ps(y)));
    _mm512_storeu_ps(y + 16, _mm512_fmadd_ps(hi, cv, _mm512_loadu_ps(y + 16)));
}

static void axpy_q4_0t_avx512(const srt_axpy_job *j, int64_t b0, int64_t b1) {
    float *y = j->y + b0 * SRT_QK;
    for (int64_t k = 0; k < (b1 - b0) * SRT_QK; k += 16) _mm512_storeu_ps(y + k, _mm512_setzero_ps());
    for (int64_t p = 0; p < j->n_idx; p++) {
        const int64_t ch = j->idx ? j->idx[p] : p;
        const uint8_t *row = j->w + ch * j->row_bytes;
        const float c = j->h[ch];
        if (p + 8 < j->n_idx) {
            const int64_t nx = j->idx ? j->idx[p + 8] : p + 8;
            const uint8_t *pr = j->w + nx * j->row_bytes + b0 * SRT_Q4_BYTES;
            for (int64_t o = 0; o < (b1 - b0) * SRT_Q4_BYTES; o += 64) _mm_prefetch((const char *)(pr + o), _MM_HINT_T0);
        }
        for (int64_t b = b0; b < b1; b++) axpy_block(y + (b - b0) * SRT_QK, row + b * SRT_Q4_BYTES, c);
    }
}

/* ---- zigzag: 256 rows (8 groups of 32) in 16 registers per pass ------------------ */

static void zz_chunk(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, int64_t ck, int G8,
                     float *y) {
    const int64_t R = j->R, G = R / SRT_QK;
    const uint8_t *sc = j->w + srt_zz_nib_bytes(j->cols, R);
    __m512 acc[16];
    for (int k = 0; k < 16; k++) acc[k] = _mm512_setzero_ps();
    /* nibble -> weight by table lookup: vpermps reads bits 3:0 of each lane */
    const __m512 lut = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    __m512i lane[8];
    for (int g = 0; g < 8; g++) lane[g] = _mm512_set1_epi32(g);
    const __mmask8 gm = (__mmask8)((1u << G8) - 1);
    for (int64_t p = 0; p < n; p++) {
        const int64_t ch = idx ? idx[first + p] : first + p;
        const uint8_t *nib = j->w + ch * (R / 2) + ck * 128;
        if (idx && p + 16 < n) { /* scattered channels: prefetch 16 ahead */
            const int64_t nx = idx[first + p + 16];
            _mm_prefetch((const char *)(j->w + nx * (R / 2) + ck * 128), _MM_HINT_T0);
            _mm_prefetch((const char *)(j->w + nx * (R / 2) + ck * 128 + 64 * (G8 > 4)), _MM_HINT_T0);
            _mm_prefetch((const char *)(sc + 2 * (nx * G + ck * 8)), _MM_HINT_T0);
        }
        const __m128i s16 = _mm_maskz_loadu_epi16(gm, sc + 2 * (ch * G + ck * 8));
        /* the 8 group scales times x[ch], in lanes 0..7 */
        const __m512 c16 = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtph_ps(s16), _mm256_set1_ps(j->x[ch])));
        for (int g = 0; g < G8; g++) {
            const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(nib + 16 * g)));
            const __m512 cg = _mm512_permutexvar_ps(lane[g], c16);
            const __m512 lo = _mm512_permutexvar_ps(v, lut);
            const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), lut);
            acc[2 * g] = _mm512_fmadd_ps(lo, cg, acc[2 * g]);
            acc[2 * g + 1] = _mm512_fmadd_ps(hi, cg, acc[2 * g + 1]);
        }
    }
    for (int g = 0; g < G8; g++) {
        _mm512_storeu_ps(y + 32 * g, acc[2 * g]);
        _mm512_storeu_ps(y + 32 * g + 16, acc[2 * g + 1]);
    }
}

static void zigzag_avx512(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, float *y) {
    const int64_t G = j->R / SRT_QK;
    for (int64_t ck = 0; ck * 8 < G; ck++) {
        const int G8 = (int)(G - ck * 8 < 8 ? G - ck * 8 : 8);
        zz_chunk(j, idx, first, n, ck, G8, y + ck * SRT_ZZ_CHUNK);
    }
}

/* ---- compaction: vpcompressd ------------------------------------------------------------ */

static int64_t compact_avx512(uint32_t *idx, const float *x, const float *tv, float t, int64_t n) {
    const __m512 tb = _mm512_set1_ps(t);
    __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i step = _mm512_set1_epi32(16);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 ld = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 ax = _mm512_abs_ps(_mm512_maskz_loadu_ps(ld, x + i));
        const __m512 th = tv ? _mm512_maskz_loadu_ps(ld, tv + i) : tb;
        const __mmask16 k = _mm512_mask_cmp_ps_mask(ld, ax, th, _CMP_GT_OQ);
        _mm512_mask_compressstoreu_epi32(idx + m, k, iota);
        m += __builtin_popcount(k);
        iota = _mm512_add_epi32(iota, step);
    }
    return m;
}

/* ---- activation and attention -------------------------------------------------------------- */

/* e^x: x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r (Cephes' expf coefficients, about
 * 1 ulp) scaled by 2^n with vscalefps (overflow to inf, underflow to 0). NaN stays NaN. */
static inline __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

static inline __m512 act512(__m512 u, bool gelu) {
    const __m512 one = _mm512_set1_ps(1.0f);
    if (!gelu) return _mm512_div_ps(u, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), u))));
    /* tanh z = 1 - 2 / (1 + e^2z) */
    const __m512 u3 = _mm512_mul_ps(_mm512_mul_ps(u, u), u);
    const __m512 z = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), u3, u));
    const __m512 th = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(one, exp512(_mm512_add_ps(z, z)))));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), u), _mm512_add_ps(one, th));
}

static void act_avx512(float *a, const float *u, int64_t n, bool gelu) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(a + i, act512(_mm512_loadu_ps(u + i), gelu));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(a + i, m, act512(_mm512_maskz_loadu_ps(m, u + i), gelu));
    }
}

static void attn_head_avx512(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                             int64_t stride, int64_t hd, float scale) {
    const int64_t h16 = hd / 16 * 16;
    const __mmask16 tail = (__mmask16)((1u << (hd - h16)) - 1);
    for (int64_t t = 0; t < n; t++) {
        const float *kr = K + t * stride;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t i = 0; i < h16; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(kr + i), acc);
        if (tail) acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + h16), _mm512_maskz_loadu_ps(tail, kr + h16), acc);
        s[t] = scale * _mm512_reduce_add_ps(acc);
    }
    __m512 vmx = _mm512_set1_ps(-INFINITY);
    int64_t t = 0;
    for (; t + 16 <= n; t += 16) vmx = _mm512_max_ps(vmx, _mm512_loadu_ps(s + t));
    const __mmask16 nt = (__mmask16)((1u << (n - t)) - 1);
    vmx = _mm512_mask_max_ps(vmx, nt, vmx, _mm512_maskz_loadu_ps(nt, s + t));
    const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmx));
    __m512 vs = _mm512_setzero_ps();
    for (t = 0; t + 16 <= n; t += 16) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + t), mx));
        _mm512_storeu_ps(s + t, e);
        vs = _mm512_add_ps(vs, e);
    }
    if (nt) {
        const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(nt, s + t), mx));
        _mm512_mask_storeu_ps(s + t, nt, e);
        vs = _mm512_add_ps(vs, _mm512_maskz_mov_ps(nt, e));
    }
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vs));
    for (t = 0; t + 16 <= n; t += 16) _mm512_storeu_ps(s + t, _mm512_mul_ps(_mm512_loadu_ps(s + t), inv));
    if (nt) _mm512_mask_storeu_ps(s + t, nt, _mm512_mul_ps(_mm512_maskz_loadu_ps(nt, s + t), inv));
    /* out: 64 values at a time in registers */
    for (int64_t i0 = 0; i0 < hd; i0 += 64) {
        __m512 o[4];
        __mmask16 mk[4];
        for (int c = 0; c < 4; c++) {
            const int64_t left = hd - i0 - 16 * c;
            mk[c] = left >= 16 ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
            o[c] = _mm512_setzero_ps();
        }
        for (t = 0; t < n; t++) {
            const __m512 p = _mm512_set1_ps(s[t]);
            const float *vr = V + t * stride + i0;
            for (int c = 0; c < 4; c++) o[c] = _mm512_fmadd_ps(p, _mm512_maskz_loadu_ps(mk[c], vr + 16 * c), o[c]);
        }
        for (int c = 0; c < 4; c++) _mm512_mask_storeu_ps(out + i0 + 16 * c, mk[c], o[c]);
    }
}

void srt_avx512_register(srt_kernels *k) {
    k->act_q8 = act_q8_avx512;
    k->rows_f32 = rows_f32_avx512;
    k->rows_q8_0 = rows_q8_0_avx512;
    k->rows_q4_0 = rows_q4_0_avx512;
    k->axpy_q4_0t = axpy_q4_0t_avx512;
    k->zigzag = zigzag_avx512;
    k->compact = compact_avx512;
    k->act = act_avx512;
    k->attn_head = attn_head_avx512;
}
