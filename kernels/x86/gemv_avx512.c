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
    const __m128i v = _mm_loadu_si128((const __m128i *)(blk + SRT_BLK_QS)), m = _mm_set1_epi8(0x0f);
    const __m256i w = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
    const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, _mm256_loadu_si256((const __m256i *)a));
    return _mm256_sub_epi32(s, _mm256_zextsi128_si256(_mm_cvtsi32_si128(8 * asum)));
}

static inline __m256i dot_q8(const uint8_t *blk, const int8_t *a) {
    const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + SRT_BLK_QS)), x = _mm256_loadu_si256((const __m256i *)a);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
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

static float q4_row_avx512(const q4_consts *cp, const uint8_t *row, const srt_act *a, int64_t nb) {
    const q4_consts c = *cp;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const int64_t ng = nb / 8;
    for (int64_t g = 0; g < ng; g++) {
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

/* ---- zigzag: integer dots, 256 rows (8 groups) per pass ---------------------------------------
 *
 * The channels of a 32-channel run (ref_zigzag) are quantised first: c = x * s
 * for the chunk's 8 groups (one 16-byte row of fp16 scales per channel), per
 * group d = amax / 127 and q = rint(c / d), bit for bit as srt_act_q8_block.
 * Then four channels at a time (a quad), like kmi4: a 64-byte load from each
 * channel's column covers four groups (one per 128-bit lane), two rounds of
 * unpacks put the four channels' nibbles of one row into every 32-bit lane,
 * and vpdpbusd multiplies them by the quad's four int8 values of that lane's
 * group (one vpermd spreads the four groups' words over the lanes). Lane
 * 4L + k of q_m holds rows 32(4h + L) + 4m + k (low nibble) and + 16 (high);
 * the float outputs keep that order and are put in row order at the end. */

#define ZZ_AHEAD 32 /* prefetch distances in channels: into L1 */
#define ZZ_FAR 128  /* into L2 (scattered channels 3-9% faster) */

typedef struct zz_run_q {
    _Alignas(32) uint64_t qb[SRT_QK]; /* per channel, 8 int8 (one per group) */
    __m256 d;                         /* per group */
    __m256i sum;                      /* per group: sum of q */
} zz_run_q;

static inline void zz_quant(zz_run_q *r, const uint8_t *sc, int64_t G, const float *x, const uint32_t *idx,
                            int64_t first, int64_t n, __mmask8 gm) {
    _Alignas(64) float cb[SRT_QK][8];
    __m512 vmax = _mm512_setzero_ps(), fin = vmax;
    for (int64_t k = 0; k < n; k += 2) { /* two channels per vector */
        const int64_t c0 = idx ? idx[first + k] : first + k;
        const int64_t c1 = k + 1 < n ? (idx ? idx[first + k + 1] : first + k + 1) : c0;
        const __mmask16 live = k + 1 < n ? 0xffff : 0x00ff;
        const __m256i s16 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_maskz_loadu_epi16(gm, sc + 2 * c0 * G)),
                                                    _mm_maskz_loadu_epi16(gm, sc + 2 * c1 * G), 1);
        const __m512 xv = _mm512_mask_broadcastss_ps(_mm512_set1_ps(x[c0]), 0xff00, _mm_set_ss(x[c1]));
        const __m512 c = _mm512_maskz_mul_ps(live, _mm512_cvtph_ps(s16), xv);
        _mm512_store_ps(cb[k], c);
        vmax = _mm512_max_ps(vmax, _mm512_abs_ps(c));
        fin = _mm512_add_ps(fin, _mm512_sub_ps(c, c)); /* NaN iff a c is not finite */
    }
    const __m256 vmax8 = _mm256_max_ps(_mm512_castps512_ps256(vmax), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(vmax), 1)));
    const __m256 fin8 = _mm256_add_ps(_mm512_castps512_ps256(fin), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(fin), 1)));
    __m256 d = _mm256_div_ps(vmax8, _mm256_set1_ps(127.0f));
    const __mmask8 ok = _mm256_cmp_ps_mask(d, _mm256_set1_ps(1e-30f), _CMP_GE_OQ);
    const __mmask8 bad = _mm256_cmp_ps_mask(fin8, fin8, _CMP_UNORD_Q);
    const __m256 id8 = _mm256_maskz_div_ps(ok, _mm256_set1_ps(1.0f), d);
    d = _mm256_mask_mov_ps(_mm256_maskz_mov_ps(ok, d), bad, _mm256_set1_ps(SRT_ACT_BAD_D));
    const __m512 id = _mm512_shuffle_f32x4(_mm512_castps256_ps512(id8), _mm512_castps256_ps512(id8), 0x44);
    const __mmask16 good = (__mmask16)(~((unsigned)bad | (unsigned)bad << 8));
    const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
    __m512i sum = _mm512_setzero_si512();
    for (int64_t k = 0; k < n; k += 2) {
        __m512i q = _mm512_maskz_cvtps_epi32(good, _mm512_mul_ps(_mm512_load_ps(cb[k]), id));
        q = _mm512_max_epi32(_mm512_min_epi32(q, lim), nlim);
        sum = _mm512_add_epi32(sum, q);
        _mm_store_si128((__m128i *)(void *)(r->qb + k), _mm512_cvtepi32_epi8(q));
    }
    for (int64_t k = (n + 1) / 2 * 2; k < SRT_QK; k++) r->qb[k] = 0;
    r->d = d;
    r->sum = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
}

/* The int8 words of channels 4k4 .. 4k4+3 for groups 0-3 (w[0]) and 4-7 (w[1]). */
static inline void zz_words(const zz_run_q *r, int k4, __m128i w[2]) {
    const __m256i shuf = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15, 0, 8, 1, 9, 2, 10, 3,
                                          11, 4, 12, 5, 13, 6, 14, 7, 15);
    const __m256i v = _mm256_shuffle_epi8(_mm256_load_si256((const __m256i *)(const void *)(r->qb + 4 * k4)), shuf);
    const __m128i X = _mm256_castsi256_si128(v), Y = _mm256_extracti128_si256(v, 1);
    w[0] = _mm_unpacklo_epi16(X, Y);
    w[1] = _mm_unpackhi_epi16(X, Y);
}

/* One 256-row chunk (G8 <= 8 groups) of a row-block. IDX and NH (halves of
 * four groups: 1 or 2) are constants in every inlined copy. */
static inline __attribute__((always_inline)) void zz_chunk_body(const srt_zz_job *j, const uint32_t *idx,
                                                                int64_t first, int64_t n, int64_t ck, int G8,
                                                                float *y, const int IDX, const int NH) {
    const int64_t R = j->R, G = R / SRT_QK, cs = R / 2;
    const uint8_t *nib0 = j->w + ck * 128, *sc0 = j->w + srt_zz_nib_bytes(j->cols, R) + 2 * 8 * ck;
    const __mmask8 gm = (__mmask8)((1u << G8) - 1);
    const __mmask64 lm0 = G8 >= 4 ? ~(__mmask64)0 : ((__mmask64)1 << (16 * G8)) - 1;
    const __mmask64 lm1 = G8 >= 8 ? ~(__mmask64)0 : G8 > 4 ? ((__mmask64)1 << (16 * (G8 - 4))) - 1 : 0;
    const __m512i bidx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i m_hi = _mm512_set1_epi8((char)0xf0);
#define ZZ_CH(pos) (IDX ? (int64_t)idx[first + (pos)] : first + (pos))
    _Alignas(64) float fa[2][2][4][16]; /* half, low/high, m, lane */
    for (int i = 0; i < 256; i += 16) _mm512_store_ps(&fa[0][0][0][0] + i, _mm512_setzero_ps());
    zz_run_q rq;
    int64_t p = 0;
    while (p < n) {
        const int64_t kb = ZZ_CH(p) / SRT_QK;
        int64_t e = p;
        while (e < n && ZZ_CH(e) / SRT_QK == kb) e++;
        zz_quant(&rq, sc0, G, j->x, IDX ? idx : NULL, first + p, e - p, gm);
        _Alignas(32) float dg[8];
        _Alignas(32) int32_t sg[8];
        _mm256_store_ps(dg, rq.d);
        _mm256_store_si256((__m256i *)(void *)sg, rq.sum);
        const __m512i s0 = _mm512_permutexvar_epi32(bidx, _mm512_castsi128_si512(_mm_load_si128((const __m128i *)(const void *)sg)));
        const __m512i s1 = _mm512_permutexvar_epi32(bidx, _mm512_castsi128_si512(_mm_load_si128((const __m128i *)(const void *)(sg + 4))));
        const __m512i ol0 = _mm512_slli_epi32(s0, 3), oh0 = _mm512_slli_epi32(s0, 7);
        const __m512i ol1 = _mm512_slli_epi32(s1, 3), oh1 = _mm512_slli_epi32(s1, 7);
        const __m512i z = _mm512_setzero_si512();
        __m512i L00 = _mm512_sub_epi32(z, ol0), L01 = L00, L02 = L00, L03 = L00;
        __m512i H00 = _mm512_sub_epi32(z, oh0), H01 = H00, H02 = H00, H03 = H00;
        __m512i L10 = _mm512_sub_epi32(z, ol1), L11 = L10, L12 = L10, L13 = L10;
        __m512i H10 = _mm512_sub_epi32(z, oh1), H11 = H10, H12 = H10, H13 = H10;
        for (int64_t q = p; q < e; q += 4) {
            const uint8_t *c0 = nib0 + ZZ_CH(q) * cs;
            const uint8_t *c1 = nib0 + ZZ_CH(q + 1 < e ? q + 1 : q) * cs;
            const uint8_t *c2 = nib0 + ZZ_CH(q + 2 < e ? q + 2 : q) * cs;
            const uint8_t *c3 = nib0 + ZZ_CH(q + 3 < e ? q + 3 : q) * cs;
            for (int r = 0; r < 4 && q + ZZ_AHEAD + r < n; r++) {
                const int64_t nx = ZZ_CH(q + ZZ_AHEAD + r);
                _mm_prefetch((const char *)(nib0 + nx * cs), _MM_HINT_T0);
                if (NH == 2) _mm_prefetch((const char *)(nib0 + nx * cs + 64), _MM_HINT_T0);
                if (IDX || r == 0) _mm_prefetch((const char *)(sc0 + 2 * nx * G), _MM_HINT_T0);
            }
            for (int r = 0; r < 4 && q + ZZ_FAR + r < n; r++) { /* and into L2 */
                const int64_t nx = ZZ_CH(q + ZZ_FAR + r);
                _mm_prefetch((const char *)(nib0 + nx * cs), _MM_HINT_T1);
                if (NH == 2) _mm_prefetch((const char *)(nib0 + nx * cs + 64), _MM_HINT_T1);
                if (IDX || r == 0) _mm_prefetch((const char *)(sc0 + 2 * nx * G), _MM_HINT_T1);
            }
            __m128i w[2];
            zz_words(&rq, (int)((q - p) / 4), w);
#define ZZ_HALF(h, LM, X0, X1, X2, X3, Y0, Y1, Y2, Y3)                                                            \
    do {                                                                                                          \
        const __m512i a = _mm512_permutexvar_epi32(bidx, _mm512_castsi128_si512(w[h]));                          \
        const __m512i A = _mm512_maskz_loadu_epi8(LM, c0 + 64 * (h)), B = _mm512_maskz_loadu_epi8(LM, c1 + 64 * (h)); \
        const __m512i C = _mm512_maskz_loadu_epi8(LM, c2 + 64 * (h)), D = _mm512_maskz_loadu_epi8(LM, c3 + 64 * (h)); \
        const __m512i u0 = _mm512_unpacklo_epi8(A, B), u1 = _mm512_unpackhi_epi8(A, B);                          \
        const __m512i u2 = _mm512_unpacklo_epi8(C, D), u3 = _mm512_unpackhi_epi8(C, D);                          \
        const __m512i q0 = _mm512_unpacklo_epi16(u0, u2), q1 = _mm512_unpackhi_epi16(u0, u2);                    \
        const __m512i q2 = _mm512_unpacklo_epi16(u1, u3), q3 = _mm512_unpackhi_epi16(u1, u3);                    \
        X0 = _mm512_dpbusd_epi32(X0, q0, a);                                                                      \
        Y0 = _mm512_dpbusd_epi32(Y0, _mm512_and_si512(q0, m_hi), a);                                              \
        X1 = _mm512_dpbusd_epi32(X1, q1, a);                                                                      \
        Y1 = _mm512_dpbusd_epi32(Y1, _mm512_and_si512(q1, m_hi), a);                                              \
        X2 = _mm512_dpbusd_epi32(X2, q2, a);                                                                      \
        Y2 = _mm512_dpbusd_epi32(Y2, _mm512_and_si512(q2, m_hi), a);                                              \
        X3 = _mm512_dpbusd_epi32(X3, q3, a);                                                                      \
        Y3 = _mm512_dpbusd_epi32(Y3, _mm512_and_si512(q3, m_hi), a);                                              \
    } while (0)
            ZZ_HALF(0, lm0, L00, L01, L02, L03, H00, H01, H02, H03);
            if (NH == 2) ZZ_HALF(1, lm1, L10, L11, L12, L13, H10, H11, H12, H13);
#undef ZZ_HALF
        }
        /* low sums L take the whole byte (lo + 16 hi, from -8 S): lo = L - H - 128 S; H is 16 x (hi - 8) */
#define ZZ_EPI(h, m, LL, HH, OH)                                                                                 \
    do {                                                                                                         \
        const __m512i lo_ = _mm512_sub_epi32(_mm512_sub_epi32(LL, HH), OH);                                     \
        _mm512_store_ps(fa[h][0][m], _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo_), dl, _mm512_load_ps(fa[h][0][m]))); \
        _mm512_store_ps(fa[h][1][m], _mm512_fmadd_ps(_mm512_cvtepi32_ps(HH), dh, _mm512_load_ps(fa[h][1][m])));  \
    } while (0)
        {
            const __m512 dl = _mm512_permutexvar_ps(bidx, _mm512_castps128_ps512(_mm_load_ps(dg)));
            const __m512 dh = _mm512_mul_ps(dl, _mm512_set1_ps(0.0625f));
            ZZ_EPI(0, 0, L00, H00, oh0);
            ZZ_EPI(0, 1, L01, H01, oh0);
            ZZ_EPI(0, 2, L02, H02, oh0);
            ZZ_EPI(0, 3, L03, H03, oh0);
        }
        if (NH == 2) {
            const __m512 dl = _mm512_permutexvar_ps(bidx, _mm512_castps128_ps512(_mm_load_ps(dg + 4)));
            const __m512 dh = _mm512_mul_ps(dl, _mm512_set1_ps(0.0625f));
            ZZ_EPI(1, 0, L10, H10, oh1);
            ZZ_EPI(1, 1, L11, H11, oh1);
            ZZ_EPI(1, 2, L12, H12, oh1);
            ZZ_EPI(1, 3, L13, H13, oh1);
        }
#undef ZZ_EPI
        p = e;
    }
#undef ZZ_CH
    /* lane 4L + k of (h, m) is row 32(4h + L) + 4m + k, + 16 for the high nibbles */
    for (int g = 0; g < G8; g++)
        for (int m = 0; m < 4; m++)
            for (int hl = 0; hl < 2; hl++)
                memcpy(y + 32 * g + 16 * hl + 4 * m, &fa[g / 4][hl][m][4 * (g % 4)], 4 * sizeof(float));
}

static void zz_chunk(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, int64_t ck, int G8,
                     float *y) {
    if (idx) {
        if (G8 > 4) zz_chunk_body(j, idx, first, n, ck, G8, y, 1, 2);
        else zz_chunk_body(j, idx, first, n, ck, G8, y, 1, 1);
    } else {
        if (G8 > 4) zz_chunk_body(j, idx, first, n, ck, G8, y, 0, 2);
        else zz_chunk_body(j, idx, first, n, ck, G8, y, 0, 1);
    }
}

static void zigzag_avx512(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, float *y) {
    for (int64_t ck = j->g0 / 8; ck * 8 < j->g1; ck++) {
        const int G8 = (int)(j->g1 - ck * 8 < 8 ? j->g1 - ck * 8 : 8);
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
