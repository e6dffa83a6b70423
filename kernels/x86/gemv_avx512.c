/* gemv_avx512.c - AVX-512 (F/BW/VL + VNNI) kernels for the activation
 * quantiser, the GGML-format rows (f32, q8_0, q4_0), the PowerInfer-style
 * q4_0t axpy scatter and the zigzag/stripe column-sparse GEMV (compaction: select_avx512.c). */
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
    const __m128i v = _mm_loadu_si128((const __m128i *)(blk + SRT_BLK_QS)), m = _mm_set1_epi8(0x0f);
    const __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
    const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, _mm256_loadu_si256((const __m256i *)a));
    return _mm256_sub_epi32(s, _mm256_zextsi128_si256(_mm_cvtsi32_si128(8 * asum)));
}

static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Eight q4_0 blocks (8 x 18 bytes) of one row, two per 512-bit step: vpermw
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
    const int bw = (int)(SRT_Q4_BYTES / 2), qw = (int)(SRT_BLK_QS / 2); /* a block's words; its values' first */
    for (int k = 0; k < 32; k++) pb[k] = (uint16_t)((k < 16 ? qw : bw + qw) + k % 8);
    for (int k = 0; k < 32; k++) wb[k] = (uint16_t)(k % 8 < 4 ? bw * (k % 4) : 32 + bw * (k % 4));
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

/* One step of a row's ng: its share of the lines of the rows ahead (pf0 into L1, pf1 into L2, either
 * may be NULL), l counting the lines taken so far (srt_pf_share). */
static inline void pf_rows_step(const uint8_t *pf0, const uint8_t *pf1, int64_t *l, int64_t *due, int64_t nl,
                                int64_t ng) {
    for (const int64_t le = *l + srt_pf_share(due, nl, ng); *l < le; (*l)++) {
        if (pf0) _mm_prefetch((const char *)(pf0 + 64 * *l), _MM_HINT_T0);
        if (pf1) _mm_prefetch((const char *)(pf1 + 64 * *l), _MM_HINT_T1);
    }
}

static float q4_row_avx512(const q4_consts *cp, const uint8_t *row, const srt_act *a, int64_t nb, const uint8_t *pf0,
                           const uint8_t *pf1, int64_t nl) {
    const q4_consts c = *cp;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const int64_t ng = nb / 8;
    int64_t l = 0, due = 0; /* lines of the rows ahead prefetched */
    for (int64_t g = 0; g < ng; g++) {
        pf_rows_step(pf0, pf1, &l, &due, nl, ng);
        const uint8_t *p = row + 8 * SRT_Q4_BYTES * g;
        const int8_t *aq = a->q + 256 * g;
        const int32_t *ao = a->lane_off + 64 * g;
        const __m512i r0 = _mm512_loadu_si512(p), r1 = _mm512_loadu_si512(p + 2 * SRT_Q4_BYTES),
                      r2 = _mm512_loadu_si512(p + 4 * SRT_Q4_BYTES);
        const __m512i r3 = _mm512_maskz_loadu_epi8(((__mmask64)1 << (2 * SRT_Q4_BYTES)) - 1, p + 6 * SRT_Q4_BYTES); /* not past the group */
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

/* The kmi4r rows' prefetch schedule (rows j->pf.l1 ahead into L1, j->pf.l2 into L2, spread over the
 * row's steps; rows_setup gives q4_0 the kmi4r pair): the same bytes per weight. */
static void rows_q4_0_avx512(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK, rb = j->row_bytes, nl = (rb + 63) / 64;
    const q4_consts c = q4_consts_make();
#define Q4_ROW(k) (j->w + (j->idx ? (int64_t)j->idx[k] : (k)) * rb)
    const int64_t ahead = j->pf.l1, far = j->pf.l2;
    for (int64_t i = i0; i < i1 && i < i0 + ahead; i++) /* the first rows, before the loop's window reaches them */
        for (int64_t l = 0; l < nl; l++) _mm_prefetch((const char *)(Q4_ROW(i) + 64 * l), _MM_HINT_T0);
    const int64_t pe = srt_rows_pf_end(j, i1);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *pf0 = i + ahead < pe ? Q4_ROW(i + ahead) : NULL;
        const uint8_t *pf1 = i + far < pe ? Q4_ROW(i + far) : NULL;
        j->y[r] = q4_row_avx512(&c, j->w + r * rb, j->xq, nb, pf0, pf1, nl);
    }
#undef Q4_ROW
}

/* ---- q8_0 rows: one float order for every AVX-512 q8_0 row kernel (SRT_Q8_LANES in srt_kern.h:
 * block b's exact integer dot to float lane b % 16, then the lanes summed 8 + 8, 4 + 4, 2 + 2, 1 + 1),
 * so the single-input kernel, the multi-input one and the AMX tiles give the same bits ---- */

typedef struct q8_consts {
    __m512i t1a, t1b, t2a, t2b, t3a, t3b, sidx; /* the lane tree's vpermt2d indices; the scales' offsets */
} q8_consts;

static q8_consts q8_consts_make(void) {
    _Alignas(64) int32_t t[6][16], s[16];
    for (int l = 0; l < 16; l++) {
        const int h = l / 8 * 16; /* from the second register */
        t[0][l] = h + (l % 8) / 4 * 8 + l % 4, t[1][l] = t[0][l] + 4;  /* 8 lanes a block -> 4 */
        t[2][l] = h + (l % 8) / 2 * 4 + l % 2, t[3][l] = t[2][l] + 2;  /* 4 -> 2 */
        t[4][l] = 2 * l, t[5][l] = 2 * l + 1;                          /* 2 -> 1 */
        s[l] = (int32_t)(l * SRT_Q8_BYTES);
    }
    q8_consts c;
    c.t1a = _mm512_load_si512(t[0]), c.t1b = _mm512_load_si512(t[1]), c.t2a = _mm512_load_si512(t[2]);
    c.t2b = _mm512_load_si512(t[3]), c.t3a = _mm512_load_si512(t[4]), c.t3b = _mm512_load_si512(t[5]);
    c.sidx = _mm512_load_si512(s);
    return c;
}

static inline __m512i q8_fold(__m512i a, __m512i b, __m512i ia, __m512i ib) {
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, ia, b), _mm512_permutex2var_epi32(a, ib, b));
}

/* The weights of a group of 16 blocks at p (nblk <= 16 of them present; the others read as 0), two
 * blocks per register with their sign bit flipped: w + 128 as unsigned bytes. */
static inline void q8_load16(__m512i w[8], const uint8_t *p, int64_t nblk) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int k = 0; k < 8; k++) {
        const uint8_t *b0 = p + 2 * k * SRT_Q8_BYTES + SRT_BLK_QS, *b1 = b0 + SRT_Q8_BYTES;
        __m256i lo, hi;
        if (nblk >= 16) {
            lo = _mm256_loadu_si256((const __m256i *)b0), hi = _mm256_loadu_si256((const __m256i *)b1);
        } else {
            lo = 2 * k < nblk ? _mm256_loadu_si256((const __m256i *)b0) : _mm256_setzero_si256();
            hi = 2 * k + 1 < nblk ? _mm256_loadu_si256((const __m256i *)b1) : _mm256_setzero_si256();
        }
        w[k] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), flip);
    }
}

/* The 16 blocks' fp16 weight scales, as floats (lanes past nblk 0). */
static inline __m512 q8_scales16(const uint8_t *p, int64_t nblk, const q8_consts *c) {
    const __mmask16 m = nblk >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nblk) - 1);
    const __m512i s = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, c->sidx, p, 1);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(s));
}

/* acc[b % 16] += (w_b . x_b) * (dw_b * dx_b) for the group's blocks (16 g .. 16 g + nblk): vpdpbusd leaves
 * per lane four products of one block (plus 128 x their activations), lanes 0-7 the first block of a
 * register and 8-15 the second; three folds add a block's eight lanes into lane b % 16 and 128 x the
 * block's activation sum comes off, exact in int32; then one fma per lane. */
static inline __m512 q8_group(__m512 acc, const __m512i w[8], const srt_act *a, int64_t g, __m512 dw, int64_t nblk,
                              const q8_consts *c) {
    const int8_t *aq = a->q + 512 * g;
    __m512i d[8];
    for (int k = 0; k < 8; k++)
        d[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[k], _mm512_loadu_si512(aq + 64 * k));
    for (int k = 0; k < 4; k++) d[k] = q8_fold(d[2 * k], d[2 * k + 1], c->t1a, c->t1b);
    for (int k = 0; k < 2; k++) d[k] = q8_fold(d[2 * k], d[2 * k + 1], c->t2a, c->t2b);
    const __m512i dot = _mm512_sub_epi32(q8_fold(d[0], d[1], c->t3a, c->t3b),
                                         _mm512_slli_epi32(_mm512_loadu_si512(a->sum + 16 * g), 7));
    const __mmask16 m = nblk >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nblk) - 1);
    return _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_loadu_ps(a->d + 16 * g)), acc, m);
}

/* The 16 lanes' sum: lane l + lane l + 8, then + 4, + 2, + 1 (SRT_Q8_LANES). */
static inline float q8_lanes_sum(__m512 acc) {
    return hsum256(_mm256_add_ps(_mm512_castps512_ps256(acc),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1))));
}

static float q8_row_avx512(const uint8_t *row, const srt_act *a, int64_t nb, const q8_consts *c, const uint8_t *pf0,
                           const uint8_t *pf1, int64_t nl) {
    __m512 acc = _mm512_setzero_ps();
    const int64_t ng = (nb + 15) / 16;
    int64_t l = 0, due = 0; /* lines of the rows ahead prefetched */
    for (int64_t g = 0; g < ng; g++) {
        pf_rows_step(pf0, pf1, &l, &due, nl, ng);
        const uint8_t *p = row + 16 * SRT_Q8_BYTES * g;
        const int64_t n = nb - 16 * g;
        __m512i w[8];
        q8_load16(w, p, n);
        acc = q8_group(acc, w, a, g, q8_scales16(p, n, c), n, c);
    }
    return q8_lanes_sum(acc);
}

static void rows_q8_0_avx512(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK, rb = j->row_bytes, nl = (rb + 63) / 64;
    const int64_t ahead = j->pf.l1, far = j->pf.l2; /* prefetch distances in rows (srt_kern.h) */
    const q8_consts c = q8_consts_make();
    for (int64_t i = i0; i < i1 && i < i0 + ahead; i++) /* the first rows, before the loop's window reaches them */
        for (int64_t l = 0; l < nl; l++)
            _mm_prefetch((const char *)(j->w + (j->idx ? (int64_t)j->idx[i] : i) * rb + 64 * l), _MM_HINT_T0);
    const int64_t pe = srt_rows_pf_end(j, i1);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        /* the rows `ahead` list positions ahead into L1 and `far` ahead into L2, spread over this row's steps */
        const uint8_t *pf0 = i + ahead < pe ? j->w + (j->idx ? (int64_t)j->idx[i + ahead] : i + ahead) * rb : NULL;
        const uint8_t *pf1 = i + far < pe ? j->w + (j->idx ? (int64_t)j->idx[i + far] : i + far) * rb : NULL;
        j->y[r] = q8_row_avx512(j->w + r * rb, j->xq, nb, &c, pf0, pf1, nl);
    }
}

/* Prefill: q8_row_avx512 for four inputs at once (the same steps per input: the same bits), a group's
 * weights loaded, flipped and its scales gathered once for the four; a short last group repeats its
 * last input and drops the copies. */
static void rows_q8_0_multi_avx512(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec,
                                   int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK, ng = (nb + 15) / 16, rb = j->row_bytes;
    const q8_consts c = q8_consts_make();
    for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
        const srt_act *a[4];
        srt_multi_group(xq, nvec, v0, a);
        for (int64_t r = i0; r < i1; r++) {
            const uint8_t *row = j->w + r * rb;
            __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
            for (int64_t g = 0; g < ng; g++) {
                const uint8_t *p = row + 16 * SRT_Q8_BYTES * g;
                const int64_t n = nb - 16 * g;
                __m512i w[8];
                q8_load16(w, p, n);
                const __m512 dw = q8_scales16(p, n, &c);
                for (int k = 0; k < 4; k++) acc[k] = q8_group(acc[k], w, a[k], g, dw, n, &c);
            }
            for (int k = 0; k < 4 && v0 + k < nvec; k++) y[v0 + k][r] = q8_lanes_sum(acc[k]);
        }
    }
}

/* ---- q4_0t axpy: y[block] += h_j * d * (q - 8), two channels per pass ------------- */

static inline void axpy_block(float *y, const uint8_t *blk, float c) {
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(blk + SRT_BLK_QS)));
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

/* ---- zigzag: integer dots, 256 rows (8 groups) in the registers, a call's chunks in one pass ----
 *
 * The channels of a 32-channel run (ref_zigzag) are quantised first: c = x * s for the chunk's 8
 * groups (one 16-byte row of fp16 scales per channel), per group d = amax / 127 and q = rint(c / d),
 * bit for bit as srt_act_q8_block. The quantiser also lays the q out for the dots: per quad of four
 * channels and half h of the chunk (groups 4h .. 4h + 3), one 64-byte vector whose 128-bit lane L
 * holds in each dword the quad's four q of group 4h + L (eight channels: three packs, a vpshufb and
 * four vpermd, where the dots used to build them in every quad), and the dots only load these.
 *
 * The dots take four channels at a time (a quad), like kmi4: a 64-byte load from each channel's
 * column covers four groups (one per 128-bit lane), two rounds of unpacks put the four channels'
 * nibbles of one row into every 32-bit lane, and vpdpbusd multiplies them by the quad's vector. Lane
 * 4L + k of q_m holds rows 32(4h + L) + 4m + k (low nibble) and + 16 (high); the float outputs keep
 * that order and are put in row order at the end. vpdpbusd on the whole byte gives lo + 16 hi and on
 * the byte & 0xf0 gives 16 hi; a run adds at most 32 x 127 x 255 < 2^20 to a lane, and the sums start
 * at the -8 offsets (-128 S and -136 S, S the group's sum of q: |S| <= 32 x 127), so the int32 sums
 * are exact. The next run is quantised before the dots of the current one, so that its chain (loads,
 * divisions, shuffles) overlaps them. */

#define ZZ_AHEAD 32         /* prefetch distances: into L1, in channels */
#define ZZ_FAR_BYTES 16384  /* into L2, in bytes of the channels' pieces, at least 16 channels beyond L1's */

typedef struct zz_run_q {
    _Alignas(64) int8_t a[SRT_QK / 2][64]; /* quad x 2 + half h: lane L, every dword: the quad's q of group 4h + L */
    __m256 d;                                  /* per group */
    __m256i sum;                               /* per group: sum of q */
} zz_run_q;

/* A run of n <= 32 channels (idx[first ..] or first ..) for the chunk's groups (gm; FULL: all 8,
 * scales at sc + 2 ch G). Vector i of each eight channels holds channels i and i + 4 (groups 0-7 each)
 * so that packs(packs(Q0, Q1), packs(Q2, Q3)) has in 128-bit lane 2k + h, byte 4i + t, the q of
 * channel 4k + i, group 4h + t; a vpshufb transposes each lane's 4 x 4 bytes and a vpermd per quad and
 * half spreads dword L of lane 2k + h over lane L. The clamp to +-127 of srt_act_q8_block never acts
 * on a finite group (|c| <= amax, so |c / d| <= 127 (1 + 2^-24)^3 < 127.5), and the q of a non-finite
 * group are zeroed by the conversion's mask, so the packs do not saturate. */
static inline __attribute__((always_inline)) void zz_quant(zz_run_q *r, const uint8_t *sc, int64_t G, const float *x,
                                                           const uint32_t *idx, int64_t first, int64_t n, __mmask8 gm,
                                                           const int FULL) {
    _Alignas(64) float cb[SRT_QK / 2][16];
    const __m512i mabs = _mm512_set1_epi32(0x7fffffff);
    __m512i vmax = _mm512_setzero_si512(); /* |c| as integers: the same order, non-finite above 0x7f7fffff */
    const int64_t nv = (n + 7) / 8 * 4;
#define ZZ_QCH(k) (idx ? (int64_t)idx[first + (k)] : first + (k))
#define ZZ_QPAIR(v, c0, c1, live)                                                                                          \
    do {                                                                                                                   \
        __m256i s16;                                                                                                       \
        if (FULL)                                                                                                          \
            s16 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(sc + 2 * (c0) * G))), \
                                          _mm_loadu_si128((const __m128i *)(const void *)(sc + 2 * (c1) * G)), 1);        \
        else                                                                                                               \
            s16 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_maskz_loadu_epi16(gm, sc + 2 * (c0) * G)),            \
                                          _mm_maskz_loadu_epi16(gm, sc + 2 * (c1) * G), 1);                                \
        const __m512 xv = _mm512_mask_mov_ps(_mm512_set1_ps(x[c0]), 0xff00, _mm512_set1_ps(x[c1]));                       \
        const __m512 c = _mm512_maskz_mul_ps(live, _mm512_cvtph_ps(s16), xv);                                              \
        _mm512_store_ps(cb[v], c);                                                                                         \
        vmax = _mm512_max_epi32(vmax, _mm512_and_si512(_mm512_castps_si512(c), mabs));                                     \
    } while (0)
    for (int64_t k8 = 0; k8 < n; k8 += 8) { /* vector v = k8 / 2 + i: channels k8 + i and k8 + i + 4 */
        if (k8 + 8 <= n) {
            for (int i = 0; i < 4; i++) {
                const int64_t c0 = ZZ_QCH(k8 + i), c1 = ZZ_QCH(k8 + i + 4);
                ZZ_QPAIR(k8 / 2 + i, c0, c1, 0xffff);
            }
        } else { /* the last channels: missing ones take the first's scales, and are zeroed */
            for (int i = 0; i < 4; i++) {
                const int64_t k0 = k8 + i, k1 = k0 + 4;
                const int64_t c0 = ZZ_QCH(k0 < n ? k0 : 0), c1 = k1 < n ? ZZ_QCH(k1) : c0;
                ZZ_QPAIR(k8 / 2 + i, c0, c1, (__mmask16)((k0 < n ? 0x00ffu : 0u) | (k1 < n ? 0xff00u : 0u)));
            }
        }
    }
#undef ZZ_QPAIR
#undef ZZ_QCH
    const __m256i vmax8 = _mm256_max_epi32(_mm512_castsi512_si256(vmax), _mm512_extracti64x4_epi64(vmax, 1));
    const __mmask8 bad = _mm256_cmpgt_epi32_mask(vmax8, _mm256_set1_epi32(0x7f7fffff));
    __m256 d = _mm256_div_ps(_mm256_castsi256_ps(vmax8), _mm256_set1_ps(127.0f));
    const __mmask8 ok = _mm256_cmp_ps_mask(d, _mm256_set1_ps(1e-30f), _CMP_GE_OQ);
    const __m256 id8 = _mm256_maskz_div_ps(ok, _mm256_set1_ps(1.0f), d);
    d = _mm256_mask_mov_ps(_mm256_maskz_mov_ps(ok, d), bad, _mm256_set1_ps(SRT_ACT_BAD_D));
    const __m512 id = _mm512_shuffle_f32x4(_mm512_castps256_ps512(id8), _mm512_castps256_ps512(id8), 0x44);
    const __mmask16 good = (__mmask16)(~((unsigned)bad | (unsigned)bad << 8));
    const __m512i tr = _mm512_set4_epi32(0x0f0b0703, 0x0e0a0602, 0x0d090501, 0x0c080400); /* 4 x 4 byte transpose */
    const __m512i e0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3), four = _mm512_set1_epi32(4);
    const __m512i e1 = _mm512_add_epi32(e0, four), e2 = _mm512_add_epi32(e1, four), e3 = _mm512_add_epi32(e2, four);
    __m512i sum = _mm512_setzero_si512();
    for (int64_t v = 0; v < nv; v += 4) { /* eight channels, two quads */
        const __m512i q0 = _mm512_maskz_cvtps_epi32(good, _mm512_mul_ps(_mm512_load_ps(cb[v]), id));
        const __m512i q1 = _mm512_maskz_cvtps_epi32(good, _mm512_mul_ps(_mm512_load_ps(cb[v + 1]), id));
        const __m512i q2 = _mm512_maskz_cvtps_epi32(good, _mm512_mul_ps(_mm512_load_ps(cb[v + 2]), id));
        const __m512i q3 = _mm512_maskz_cvtps_epi32(good, _mm512_mul_ps(_mm512_load_ps(cb[v + 3]), id));
        sum = _mm512_add_epi32(sum, _mm512_add_epi32(_mm512_add_epi32(q0, q1), _mm512_add_epi32(q2, q3)));
        const __m512i b = _mm512_shuffle_epi8(_mm512_packs_epi16(_mm512_packs_epi32(q0, q1), _mm512_packs_epi32(q2, q3)), tr);
        int8_t(*a)[64] = r->a + v; /* quads v / 2, v / 2 + 1 */
        _mm512_store_si512((void *)a[0], _mm512_permutexvar_epi32(e0, b));
        _mm512_store_si512((void *)a[1], _mm512_permutexvar_epi32(e1, b));
        _mm512_store_si512((void *)a[2], _mm512_permutexvar_epi32(e2, b));
        _mm512_store_si512((void *)a[3], _mm512_permutexvar_epi32(e3, b));
    }
    r->d = d;
    r->sum = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
}

/* vpdpbusd accumulating in place: with the intrinsic GCC 12 copies every accumulator to a new register
 * at each call (two moves per dot in the loop) */
static inline __attribute__((always_inline)) __m512i zz_dp(__m512i acc, __m512i w, __m512i a) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(a));
    return acc;
}

/* Chunks [ck0, ck1) (256 rows each, G8 <= 8 groups in every one) of a row-block, in one pass over
 * the list: run by run (a 32-channel block), each chunk of the run in turn, so a live channel's
 * column piece for these rows (128 bytes a chunk) is read in one sweep. The float sums of chunk ck
 * live at fa + 256 (ck - ck0) in the dots' lane order. Every row still adds its runs' terms in list
 * order, one fma per run, so the bits do not depend on the chunks taken together. IDX, NH (halves of
 * four groups: 1 or 2) and FULL (G8 == 8) are constants in every inlined copy. */
static inline __attribute__((always_inline)) void zz_body(const srt_zz_job *j, const uint32_t *idx, int64_t first,
                                                          int64_t n, int64_t ck0, int64_t ck1, int G8, float *fab,
                                                          const int IDX, const int NH, const int FULL) {
    const int64_t R = j->R, G = R / SRT_QK, cs = R / 2;
    const uint8_t *const scb = j->w + srt_zz_nib_bytes(j->cols, R);
    const __mmask8 gm = (__mmask8)((1u << G8) - 1);
    const __mmask64 lm0 = FULL || G8 >= 4 ? ~(__mmask64)0 : ((__mmask64)1 << (16 * G8)) - 1;
    const __mmask64 lm1 = FULL || G8 >= 8 ? ~(__mmask64)0 : G8 > 4 ? ((__mmask64)1 << (16 * (G8 - 4))) - 1 : 0;
    const __m512i bidx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i bidx4 = _mm512_add_epi32(bidx, _mm512_set1_epi32(4));
    const __m512i m_hi = _mm512_set1_epi8((char)0xf0);
#define ZZ_CH(pos) (IDX ? (int64_t)idx[first + (pos)] : first + (pos))
    for (int64_t i = 0; i < 256 * (ck1 - ck0); i += 16) _mm512_storeu_ps(fab + i, _mm512_setzero_ps());
    zz_run_q rqs[2];
    /* the end of the run that starts at list position pn */
#define ZZ_RUN_END(pn, en)                                                                                                            \
    do {                                                                                                                             \
        const int64_t kb = ZZ_CH(pn) / SRT_QK;                                                                                       \
        if (IDX) { /* the list ascends: the run is the prefix of the next <= 32 entries below 32 (kb + 1) */                        \
            const int64_t left = n - (pn);                                                                                           \
            const __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);                                               \
            const __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;                         \
            const __m512i lim = _mm512_set1_epi32((int)((kb + 1) * SRT_QK));                                                         \
            const __mmask16 b0 = _mm512_mask_cmplt_epu32_mask(m0, _mm512_maskz_loadu_epi32(m0, idx + first + (pn)), lim);            \
            const __mmask16 b1 =                                                                                                     \
                _mm512_mask_cmplt_epu32_mask(m1, _mm512_maskz_loadu_epi32(m1, idx + first + (pn) + (left > 16 ? 16 : 0)), lim);     \
            en = (pn) + __builtin_ctzll(((uint64_t)b1 << 16 | b0) + 1); /* the length of the run of ones */                        \
        } else                                                                                                                       \
            en = (kb + 1) * SRT_QK - first < n ? (kb + 1) * SRT_QK - first : n;                                                      \
    } while (0)
    /* steps (run [p, e), chunk ck) in that order; the next step is quantised before the dots of the
     * current one, so that its chain (loads, divisions, shuffles) overlaps them */
    int64_t p = 0, e = 0, ck = ck0;
    const int64_t nck = ck1 - ck0, pbytes = FULL ? 128 * nck : 64 * NH; /* a channel's piece */
    const int64_t far = ZZ_FAR_BYTES / pbytes > ZZ_AHEAD + 16 ? ZZ_FAR_BYTES / pbytes : ZZ_AHEAD + 16;
    int64_t pfc = n < far ? n : far, pf_due = 0; /* the L2 cursor */
    if (n > 0) {
        ZZ_RUN_END(p, e);
        zz_quant(&rqs[0], scb + 16 * ck, G, j->x, IDX ? idx : NULL, first + p, e - p, gm, FULL);
    }
    for (int it = 0; n > 0; it++) {
        int64_t pn = p, en = e, ckn = ck + 1;
        if (ckn == ck1) { /* the next run */
            pn = e, ckn = ck0;
            if (pn < n) ZZ_RUN_END(pn, en);
        }
        const bool more = pn < n;
        if (more) zz_quant(&rqs[(it + 1) & 1], scb + 16 * ckn, G, j->x, IDX ? idx : NULL, first + pn, en - pn, gm, FULL);
        const uint8_t *nib0 = j->w + ck * 128, *sc0 = scb + 16 * ck, *nibf = j->w + ck0 * 128;
        const bool nextck = ck + 1 < ck1; /* the run's next chunk comes next */
        float(*fa)[2][4][16] = (float(*)[2][4][16])(void *)(fab + 256 * (ck - ck0)); /* half, low/high, m, lane */
        const zz_run_q *rqp = &rqs[it & 1];
        /* lanes 4L .. 4L + 3: group L (half 0) or 4 + L (half 1); H starts at -128 S (8 x 16 hi), L at
         * -136 S, so that L - H is the low nibbles' sum with its -8 S */
        const __m512i s0 = _mm512_permutexvar_epi32(bidx, _mm512_castsi256_si512(rqp->sum));
        const __m512i s1 = _mm512_permutexvar_epi32(bidx4, _mm512_castsi256_si512(rqp->sum));
        const __m512i z = _mm512_setzero_si512();
        __m512i H00 = _mm512_sub_epi32(z, _mm512_slli_epi32(s0, 7)), H01 = H00, H02 = H00, H03 = H00;
        __m512i L00 = _mm512_sub_epi32(H00, _mm512_slli_epi32(s0, 3)), L01 = L00, L02 = L00, L03 = L00;
        __m512i H10 = _mm512_sub_epi32(z, _mm512_slli_epi32(s1, 7)), H11 = H10, H12 = H10, H13 = H10;
        __m512i L10 = _mm512_sub_epi32(H10, _mm512_slli_epi32(s1, 3)), L11 = L10, L12 = L10, L13 = L10;
        for (int64_t q = p; q < e; q += 4) {
            const uint8_t *c0 = nib0 + ZZ_CH(q) * cs, *c1, *c2, *c3;
            if (IDX) {
                if (q + 4 <= e) {
                    c1 = nib0 + ZZ_CH(q + 1) * cs;
                    c2 = nib0 + ZZ_CH(q + 2) * cs;
                    c3 = nib0 + ZZ_CH(q + 3) * cs;
                } else { /* the run's last quad: missing channels repeat the first (their q are 0) */
                    c1 = nib0 + ZZ_CH(q + 1 < e ? q + 1 : q) * cs;
                    c2 = nib0 + ZZ_CH(q + 2 < e ? q + 2 : q) * cs;
                    c3 = nib0 + ZZ_CH(q + 3 < e ? q + 3 : q) * cs;
                }
                /* into L1: these channels' next chunk, or the next runs' first chunk and the scales of the
                 * channels ZZ_AHEAD on */
                if (nextck) {
                    const uint8_t *cq[4] = {c0, c1, c2, c3};
                    for (int r = 0; r < 4; r++) {
                        _mm_prefetch((const char *)(cq[r] + 128), _MM_HINT_T0);
                        if (NH == 2) _mm_prefetch((const char *)(cq[r] + 192), _MM_HINT_T0);
                    }
                }
                for (int r = 0; r < 4 && q + ZZ_AHEAD + r < n; r++) {
                    const int64_t nx = ZZ_CH(q + ZZ_AHEAD + r);
                    if (!nextck) {
                        _mm_prefetch((const char *)(nibf + nx * cs), _MM_HINT_T0);
                        if (NH == 2) _mm_prefetch((const char *)(nibf + nx * cs + 64), _MM_HINT_T0);
                    }
                    _mm_prefetch((const char *)(sc0 + 2 * nx * G), _MM_HINT_T0);
                }
            } else { /* consecutive channels */
                c1 = q + 1 < e ? c0 + cs : c0;
                c2 = q + 2 < e ? c0 + 2 * cs : c0;
                c3 = q + 3 < e ? c0 + 3 * cs : c0;
                if (nextck) /* into L1: these channels' next chunk */
                    for (int r = 0; r < 4; r++) {
                        _mm_prefetch((const char *)(c0 + r * cs + 128), _MM_HINT_T0);
                        if (NH == 2) _mm_prefetch((const char *)(c0 + r * cs + 192), _MM_HINT_T0);
                    }
                else if (q + ZZ_AHEAD + 4 <= n) { /* the next runs' first; the last channels were fetched before */
                    const uint8_t *f = c0 - nib0 + nibf + ZZ_AHEAD * cs;
                    for (int r = 0; r < 4; r++) {
                        _mm_prefetch((const char *)(f + r * cs), _MM_HINT_T0);
                        if (NH == 2) _mm_prefetch((const char *)(f + r * cs + 64), _MM_HINT_T0);
                    }
                    _mm_prefetch((const char *)(sc0 + 2 * (first + q + ZZ_AHEAD) * G), _MM_HINT_T0);
                }
            }
            /* into L2, `far` channels ahead */
            if (nck == 1) { /* one chunk: the lines of the channels `far` on, as they come */
                for (int r = 0; r < 4 && q + far + r < n; r++) {
                    const int64_t nx = ZZ_CH(q + far + r);
                    for (int l = 0; l < NH; l++) _mm_prefetch((const char *)(nibf + nx * cs + 64 * l), _MM_HINT_T1);
                    if (IDX || r == 0) _mm_prefetch((const char *)(scb + 2 * nx * G + 16 * ck0), _MM_HINT_T1);
                }
            } else { /* a cursor: whole pieces (these chunks' bytes) in list order, 4 / nck channels a
                 * quad; the same lines as gemv_avx2.c's (a shared inline function for both cost the dense
                 * 1024-row kernels 6-10%) */
                for (pf_due += 4; pf_due >= nck && pfc < n; pf_due -= nck, pfc++) {
                    const int64_t ch = ZZ_CH(pfc);
                    for (int64_t o = 0; o < pbytes; o += 64) _mm_prefetch((const char *)(nibf + ch * cs + o), _MM_HINT_T1);
                    _mm_prefetch((const char *)(scb + 2 * ch * G + 16 * ck0), _MM_HINT_T1); /* its scales */
                    _mm_prefetch((const char *)(scb + 2 * ch * G + 16 * ck1 - 1), _MM_HINT_T1);
                }
            }
            const int8_t(*av)[64] = rqp->a + (q - p) / 2;
#define ZZ_HALF(h, LM, X0, X1, X2, X3, Y0, Y1, Y2, Y3)                                                            \
    do {                                                                                                          \
        const __m512i a = _mm512_load_si512((const void *)av[h]);                                                 \
        const __m512i A = _mm512_maskz_loadu_epi8(LM, c0 + 64 * (h)), B = _mm512_maskz_loadu_epi8(LM, c1 + 64 * (h)); \
        const __m512i C = _mm512_maskz_loadu_epi8(LM, c2 + 64 * (h)), D = _mm512_maskz_loadu_epi8(LM, c3 + 64 * (h)); \
        const __m512i u0 = _mm512_unpacklo_epi8(A, B), u1 = _mm512_unpackhi_epi8(A, B);                          \
        const __m512i u2 = _mm512_unpacklo_epi8(C, D), u3 = _mm512_unpackhi_epi8(C, D);                          \
        const __m512i q0 = _mm512_unpacklo_epi16(u0, u2), q1 = _mm512_unpackhi_epi16(u0, u2);                    \
        const __m512i q2 = _mm512_unpacklo_epi16(u1, u3), q3 = _mm512_unpackhi_epi16(u1, u3);                    \
        X0 = zz_dp(X0, q0, a);                                                                                    \
        Y0 = zz_dp(Y0, _mm512_and_si512(q0, m_hi), a);                                                            \
        X1 = zz_dp(X1, q1, a);                                                                                    \
        Y1 = zz_dp(Y1, _mm512_and_si512(q1, m_hi), a);                                                            \
        X2 = zz_dp(X2, q2, a);                                                                                    \
        Y2 = zz_dp(Y2, _mm512_and_si512(q2, m_hi), a);                                                            \
        X3 = zz_dp(X3, q3, a);                                                                                    \
        Y3 = zz_dp(Y3, _mm512_and_si512(q3, m_hi), a);                                                            \
    } while (0)
            ZZ_HALF(0, lm0, L00, L01, L02, L03, H00, H01, H02, H03);
            if (NH == 2) ZZ_HALF(1, lm1, L10, L11, L12, L13, H10, H11, H12, H13);
#undef ZZ_HALF
        }
        /* L took the whole bytes (lo + 16 hi), H the high nibbles x 16 */
#define ZZ_EPI(h, m, LL, HH)                                                                                     \
    do {                                                                                                         \
        const __m512i lo_ = _mm512_sub_epi32(LL, HH);                                                            \
        _mm512_storeu_ps(fa[h][0][m], _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo_), dl, _mm512_loadu_ps(fa[h][0][m]))); \
        _mm512_storeu_ps(fa[h][1][m], _mm512_fmadd_ps(_mm512_cvtepi32_ps(HH), dh, _mm512_loadu_ps(fa[h][1][m]))); \
    } while (0)
        {
            const __m512 dl = _mm512_permutexvar_ps(bidx, _mm512_castps256_ps512(rqp->d));
            const __m512 dh = _mm512_mul_ps(dl, _mm512_set1_ps(0.0625f));
            ZZ_EPI(0, 0, L00, H00);
            ZZ_EPI(0, 1, L01, H01);
            ZZ_EPI(0, 2, L02, H02);
            ZZ_EPI(0, 3, L03, H03);
        }
        if (NH == 2) {
            const __m512 dl = _mm512_permutexvar_ps(bidx4, _mm512_castps256_ps512(rqp->d));
            const __m512 dh = _mm512_mul_ps(dl, _mm512_set1_ps(0.0625f));
            ZZ_EPI(1, 0, L10, H10);
            ZZ_EPI(1, 1, L11, H11);
            ZZ_EPI(1, 2, L12, H12);
            ZZ_EPI(1, 3, L13, H13);
        }
#undef ZZ_EPI
        if (!more) break;
        p = pn, e = en, ck = ckn;
    }
#undef ZZ_RUN_END
#undef ZZ_CH
}

/* fa (a chunk's float sums in the dots' lane order, G8 groups) to y in row order: lane 4L + k of
 * (h, m) is row 32(4h + L) + 4m + k, + 16 for the high nibbles. */
static void zz_rows(float *y, const float *fab, int G8) {
    const float(*fa)[2][4][16] = (const float(*)[2][4][16])(const void *)fab;
    for (int g = 0; g < G8; g++)
        for (int m = 0; m < 4; m++)
            for (int hl = 0; hl < 2; hl++)
                memcpy(y + 32 * g + 16 * hl + 4 * m, &fa[g / 4][hl][m][4 * (g % 4)], 4 * sizeof(float));
}

/* The full chunks [ck0, ck1) in one pass, their sums kept in y's own rows until put in row order. */
static void zz_full(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, int64_t ck0, int64_t ck1,
                    float *y) {
    _Alignas(64) float fa[4096];
    if (idx) zz_body(j, idx, first, n, ck0, ck1, 8, fa, 1, 2, 1);
    else zz_body(j, idx, first, n, ck0, ck1, 8, fa, 0, 2, 1);
    for (int64_t ck = 0; ck < ck1 - ck0; ck++) zz_rows(y + ck * SRT_ZZ_CHUNK, fa + ck * SRT_ZZ_CHUNK, 8);
}

/* A last chunk of G8 < 8 groups (row-blocks that are not a multiple of 256 rows). */
static void zz_part(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, int64_t ck, int G8,
                    float *y) {
    _Alignas(64) float fa[SRT_ZZ_CHUNK];
    if (idx) {
        if (G8 > 4) zz_body(j, idx, first, n, ck, ck + 1, G8, fa, 1, 2, 0);
        else zz_body(j, idx, first, n, ck, ck + 1, G8, fa, 1, 1, 0);
    } else {
        if (G8 > 4) zz_body(j, idx, first, n, ck, ck + 1, G8, fa, 0, 2, 0);
        else zz_body(j, idx, first, n, ck, ck + 1, G8, fa, 0, 1, 0);
    }
    zz_rows(y, fa, G8);
}

static void zigzag_avx512(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, float *y) {
    const int64_t ck0 = j->g0 / 8, nfull = j->g1 / 8; /* chunks [ck0, nfull) are whole */
    if (nfull > ck0) zz_full(j, idx, first, n, ck0, nfull, y + ck0 * SRT_ZZ_CHUNK);
    if (nfull * 8 < j->g1 && nfull >= ck0) zz_part(j, idx, first, n, nfull, (int)(j->g1 - nfull * 8), y + nfull * SRT_ZZ_CHUNK);
}

/* ---- activation and attention -------------------------------------------------------------- */

/* e^x by the rule of srt_kern.h (SRT_EXP_*), scaled by 2^n with vscalefps (overflow to inf, underflow to
 * 0). NaN stays NaN. */
static inline __m512 exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(SRT_EXP_MAX), _mm512_max_ps(_mm512_set1_ps(SRT_EXP_MIN), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(SRT_EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SRT_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SRT_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(SRT_EXP_P5);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SRT_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SRT_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SRT_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SRT_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SRT_EXP_P0));
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

/* p = softmax(s[0..n)) in place. */
static void softmax_avx512(float *s, int64_t n) {
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
}

/* K and V rows prefetched ahead (x86_attn_body.h) */
#define ATT_AHEAD 8

/* [sum of a[0], ..., sum of a[15]], each sum in _mm512_reduce_add_ps's order (halves 8 apart, then 4,
 * 2, 1), so a block of 16 scores has the bits of 16 single reductions, for about a third of their work:
 * each level adds two vectors' partial sums at once. */
static inline __m512 sum16(const __m512 *a) {
    __m512 c[8], e[4], g[2];
    for (int k = 0; k < 8; k++) /* lanes i, i + 8: a[2k] into the low half, a[2k + 1] into the high */
        c[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x44), _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xee));
    for (int k = 0; k < 4; k++) /* 4 apart: block j of e[k] holds a[4k + j] */
        e[k] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * k], c[2 * k + 1], 0x88), _mm512_shuffle_f32x4(c[2 * k], c[2 * k + 1], 0xdd));
    for (int k = 0; k < 2; k++) /* 2 apart: block j lanes 0-1 a[8k + j], lanes 2-3 a[8k + 4 + j] */
        g[k] = _mm512_add_ps(_mm512_shuffle_ps(e[2 * k], e[2 * k + 1], 0x44), _mm512_shuffle_ps(e[2 * k], e[2 * k + 1], 0xee));
    /* 1 apart: lane 4j + m holds a[4m + j]; the permutation puts a[t] in lane t */
    const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], 0x88), _mm512_shuffle_ps(g[0], g[1], 0xdd));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

#define ATT_GROUP attn_group_avx512
#define ATT_GROUP_H attn_group_h_avx512
#define ATT_VEC __m512
#define ATT_W 16
#define ATT_M(r) ((__mmask16)((1u << (r)) - 1))
#define ATT_ZERO() _mm512_setzero_ps()
#define ATT_SET1(x) _mm512_set1_ps(x)
#define ATT_MUL(a, b) _mm512_mul_ps(a, b)
#define ATT_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define ATT_SUM(v) _mm512_reduce_add_ps(v)
#define ATT_SUMW(a) sum16(a)
#define ATT_LD(p) _mm512_loadu_ps(p)
#define ATT_LDN(p, r) _mm512_maskz_loadu_ps(ATT_M(r), p)
#define ATT_LDH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define ATT_LDHN(p, r) _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(ATT_M(r), p))
#define ATT_ST(p, v) _mm512_storeu_ps(p, v)
#define ATT_STN(p, v, r) _mm512_mask_storeu_ps(p, ATT_M(r), v)
#define ATT_SOFTMAX(s, n) softmax_avx512(s, n)
#define ATT_NH 4
#include "x86_attn_body.h"

static void attn_head_avx512(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                             int64_t stride, int64_t hd, float scale) {
    attn_group_avx512(out, s, q, K, V, n, stride, hd, 1, scale);
}

void srt_avx512_register(srt_kernels *k) {
    k->act_q8 = act_q8_avx512;
    k->rows_f32 = rows_f32_avx512;
    k->rows_q8_0 = rows_q8_0_avx512;
    k->rows_q8_0_multi = rows_q8_0_multi_avx512;
    k->rows_q4_0 = rows_q4_0_avx512;
    k->axpy_q4_0t = axpy_q4_0t_avx512;
    k->zigzag = zigzag_avx512;
    k->act = act_avx512;
    k->attn_head = attn_head_avx512;
    k->attn_group = attn_group_avx512;
    k->attn_group_h = attn_group_h_avx512;
}
