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

/* GGML q4_0 (Q4) or q8_0 rows with the AVX-512 kernels' prefetch schedule: rows j->pf.l1 list
 * positions ahead into L1 and j->pf.l2 ahead into L2 (the kmi4r distances for q4_0's bytes per weight,
 * q8_0's for its: rows_setup picks the pair), each step of eight blocks taking its share of their
 * lines (srt_pf_share: a division per block to find it cost the q8_0 rows more than their dots, 1.64x
 * the floor against 1.25x). */
static inline __attribute__((always_inline)) void rows_blocks_avx2(const srt_rows_job *j, int64_t i0, int64_t i1,
                                                                   const int Q4) {
    const int64_t bs = Q4 ? SRT_Q4_BYTES : SRT_Q8_BYTES, ahead = j->pf.l1, far = j->pf.l2;
    const int64_t nb = j->cols / SRT_QK, ng = nb / 8, rb = j->row_bytes, nl = (rb + 63) / 64;
    const srt_act *a = j->xq;
#define BL_ROW(k) (j->w + (j->idx ? (int64_t)j->idx[k] : (k)) * rb)
#define BL_DOT(blk, b) (Q4 ? dot_q4(blk, a->q + 32 * (b), a->sum[b]) : dot_q8(blk, a->q + 32 * (b)))
    for (int64_t i = i0; i < i1 && i < i0 + ahead; i++) /* the first rows, before the window reaches them */
        for (int64_t l = 0; l < nl; l++) _mm_prefetch((const char *)(BL_ROW(i) + 64 * l), _MM_HINT_T0);
    const int64_t pe = srt_rows_pf_end(j, i1);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *row = j->w + r * rb;
        const uint8_t *pf0 = i + ahead < pe ? BL_ROW(i + ahead) : NULL, *pf1 = i + far < pe ? BL_ROW(i + far) : NULL;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
        int64_t l = 0, due = 0; /* lines of the rows ahead prefetched */
        for (int64_t g = 0; g < ng; g++) {
            for (const int64_t le = l + srt_pf_share(&due, nl, ng); l < le; l++) {
                if (pf0) _mm_prefetch((const char *)(pf0 + 64 * l), _MM_HINT_T0);
                if (pf1) _mm_prefetch((const char *)(pf1 + 64 * l), _MM_HINT_T1);
            }
            for (int64_t b = 8 * g; b < 8 * g + 8; b += 2) {
                const uint8_t *b0 = row + b * bs, *b1 = b0 + bs;
                acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(BL_DOT(b0, b)), _mm256_set1_ps(half(b0) * a->d[b]), acc0);
                acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(BL_DOT(b1, b + 1)), _mm256_set1_ps(half(b1) * a->d[b + 1]), acc1);
            }
        }
        for (int64_t b = 8 * ng; b < nb; b++) { /* the last 1-7 blocks */
            const uint8_t *blk = row + b * bs;
            acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(BL_DOT(blk, b)), _mm256_set1_ps(half(blk) * a->d[b]), acc0);
        }
        j->y[r] = hsum(_mm256_add_ps(acc0, acc1));
    }
#undef BL_DOT
#undef BL_ROW
}

static void rows_q4_0_avx2(const srt_rows_job *j, int64_t i0, int64_t i1) { rows_blocks_avx2(j, i0, i1, 1); }
static void rows_q8_0_avx2(const srt_rows_job *j, int64_t i0, int64_t i1) { rows_blocks_avx2(j, i0, i1, 0); }

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

/* ---- zigzag: integer dots, 256 rows (8 groups) per quad --------------------------------------------
 *
 * The AVX-512 kernel's scheme (gemv_avx512.c) on 256-bit vectors without VNNI. The channels of a
 * 32-channel run (ref_zigzag) are quantised first: c = x * s for the chunk's 8 groups, per group
 * d = amax / 127 and q = rint(c / d), bit for bit as srt_act_q8_block. Then four channels at a time
 * (a quad), each channel's 128 bytes (8 groups) read before the next quad's, with the AVX-512 kernel's
 * prefetches: a 32-byte load covers two groups at position v (one per 128-bit lane), one round of
 * byte unpacks puts the nibbles of one row of channels A and B (C and D) side by side in every 16-bit
 * lane, and vpmaddubsw multiplies them (shifted down: it saturates, so the high nibble cannot stay in
 * place x16) by the pair's two int8 values of that lane's group, vectors the quantiser lays out per
 * quad, position and pair. Each int16 lane is thus one row: lane 8L + i of ia[v][m] is row
 * 32(2v + L) + 8m + i (m = 0, 1: the low nibbles of bytes 0-7 and 8-15; m = 2, 3: their high ones),
 * and the word unpacks of the AVX-512 kernel are not needed.
 *
 * Why int16 suffices: a vpmaddubsw pair is at most 2 x 15 x 127 = 3810 (no saturation), and vpaddw
 * wraps, so a lane holds the run's sum of q w mod 2^16. Taking off 8 x (sum of the group's q) mod
 * 2^16 leaves the sum of q (w - 8) mod 2^16, and that sum is exact in int16: at most 32 channels with
 * |q| <= 127 and |w - 8| <= 8 give |sum| <= 32512. Sign-extended to int32 (even / odd rows), it is
 * scaled by the group's d into float accumulators once per run, as in the AVX-512 kernel (the two
 * give the same bits). The 16 int16 accumulators of a chunk do not fit in the registers with the
 * rest, so they go through L1; doing the chunk in passes of two groups instead (all in registers,
 * the run's lines read four times from L1) ran 1.3x slower, the accesses no longer in stream order. */

#define ZZ_AHEAD 32         /* prefetch distances: into L1, in channels */
#define ZZ_FAR_BYTES 16384  /* into L2, in bytes of the channels' pieces (gemv_avx512.c) */

typedef struct zz_run {
    _Alignas(32) int8_t a[8][4][2][32]; /* quad, position v, pair: in 128-bit lane L its q of group 2v + L, x8 */
    _Alignas(32) int16_t off[4][16];    /* position v: 8 x (sum of q) of the lane's group */
    _Alignas(32) float d[4][8];         /* position v: the lane's group's d */
} zz_run;

/* A run of n channels for the chunk's G8 groups (scales at sc + 2 ch G). The clamp to +-127 of
 * srt_act_q8_block never acts on a finite block (|c| <= amax, so |c / d| <= 127 (1 + 2^-24)^3), and
 * the lanes of a non-finite group (whose conversions may give INT_MIN) are zeroed after the packs. */
static inline void zz_quant_avx2(zz_run *r, const uint8_t *sc, int64_t G, int G8, int npass, const float *x,
                                 const uint32_t *idx, int64_t first, int64_t n) {
    _Alignas(32) float cb[SRT_QK][8];
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256i vmax = _mm256_setzero_si256(); /* |c| as integers: the same order, and non-finite above 0x7f7fffff */
    for (int64_t k = 0; k < n; k++) {
        const int64_t ch = idx ? idx[first + k] : first + k;
        __m128i h;
        if (G8 == 8) {
            h = _mm_loadu_si128((const __m128i *)(const void *)(sc + 2 * ch * G));
        } else {
            _Alignas(16) uint16_t t[8] = {0};
            memcpy(t, sc + 2 * ch * G, 2 * (size_t)G8);
            h = _mm_load_si128((const __m128i *)(void *)t);
        }
        const __m256 c = _mm256_mul_ps(_mm256_set1_ps(x[ch]), _mm256_cvtph_ps(h));
        _mm256_store_ps(cb[k], c);
        vmax = _mm256_max_epi32(vmax, _mm256_castps_si256(_mm256_andnot_ps(sign, c)));
    }
    const int64_t n4 = (n + 3) / 4 * 4;
    for (int64_t k = n; k < n4; k++) _mm256_store_ps(cb[k], _mm256_setzero_ps()); /* the last quad's padding */
    const __m256i bad = _mm256_cmpgt_epi32(vmax, _mm256_set1_epi32(0x7f7fffff));
    __m256 d = _mm256_div_ps(_mm256_castsi256_ps(vmax), _mm256_set1_ps(127.0f));
    const __m256 ok = _mm256_cmp_ps(d, _mm256_set1_ps(1e-30f), _CMP_GE_OQ);
    const __m256 id = _mm256_and_ps(ok, _mm256_div_ps(_mm256_set1_ps(1.0f), d));
    d = _mm256_blendv_ps(_mm256_and_ps(ok, d), _mm256_set1_ps(SRT_ACT_BAD_D), _mm256_castsi256_ps(bad));
    /* packs leave in 128-bit lane h byte 4k + g' the q of channel k, group 4h + g'; the shuffles put
     * the q of channels 0, 1 (2, 3) of group 4h + g' in both words of dword g' */
    const __m256i tab = _mm256_setr_epi8(0, 4, 0, 4, 1, 5, 1, 5, 2, 6, 2, 6, 3, 7, 3, 7, 0, 4, 0, 4, 1, 5, 1, 5, 2, 6,
                                         2, 6, 3, 7, 3, 7);
    const __m256i tcd = _mm256_add_epi8(tab, _mm256_set1_epi8(8));
    const __m256i sel0 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), two = _mm256_set1_epi32(2);
    __m256i sum = _mm256_setzero_si256();
    for (int64_t k4 = 0; k4 < n4 / 4; k4++) {
        __m256i i[4];
        for (int k = 0; k < 4; k++) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(cb[4 * k4 + k]), id));
        sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3])));
        const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(i[0], i[1]), _mm256_packs_epi32(i[2], i[3]));
        const __m256i ab = _mm256_andnot_si256(bad, _mm256_shuffle_epi8(p8, tab));
        const __m256i cd = _mm256_andnot_si256(bad, _mm256_shuffle_epi8(p8, tcd));
        __m256i sel = sel0;
        for (int v = 0; v < npass; v++, sel = _mm256_add_epi32(sel, two)) {
            _mm256_store_si256((__m256i *)(void *)r->a[k4][v][0], _mm256_permutevar8x32_epi32(ab, sel));
            _mm256_store_si256((__m256i *)(void *)r->a[k4][v][1], _mm256_permutevar8x32_epi32(cd, sel));
        }
    }
    sum = _mm256_slli_epi32(_mm256_andnot_si256(bad, sum), 3); /* |8 sum| <= 8 x 32 x 127: packs keep it */
    __m256i sel = sel0;
    for (int v = 0; v < npass; v++, sel = _mm256_add_epi32(sel, two)) {
        const __m256i o = _mm256_permutevar8x32_epi32(sum, sel);
        _mm256_store_si256((__m256i *)(void *)r->off[v], _mm256_packs_epi32(o, o));
        _mm256_store_ps(r->d[v], _mm256_permutevar8x32_ps(d, sel));
    }
}

/* One quad (channel columns c[0..3], the chunk's bytes; activation vectors r->a[k4]) over the chunk's
 * groups: at position v (groups 2v and 2v + 1, or 2v alone when it is the last of an odd G8) the int16
 * row sums ia[v][0..3] gain the quad's dots. */
static inline __attribute__((always_inline)) void zz_quad(__m256i (*ia)[4], const uint8_t *const *c,
                                                          const zz_run *r, int k4, int npass, int odd) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int v = 0; v < npass; v++) {
        const int64_t o = 32 * (int64_t)v;
        __m256i A, B, C, D;
        if (odd && v == npass - 1) { /* not past the chunk's last group */
            A = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(c[0] + o)));
            B = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(c[1] + o)));
            C = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(c[2] + o)));
            D = _mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(c[3] + o)));
        } else {
            A = _mm256_loadu_si256((const __m256i *)(const void *)(c[0] + o));
            B = _mm256_loadu_si256((const __m256i *)(const void *)(c[1] + o));
            C = _mm256_loadu_si256((const __m256i *)(const void *)(c[2] + o));
            D = _mm256_loadu_si256((const __m256i *)(const void *)(c[3] + o));
        }
        const __m256i ab = _mm256_load_si256((const __m256i *)(const void *)r->a[k4][v][0]);
        const __m256i cd = _mm256_load_si256((const __m256i *)(const void *)r->a[k4][v][1]);
        const __m256i u[4] = {_mm256_unpacklo_epi8(A, B), _mm256_unpackhi_epi8(A, B), _mm256_unpacklo_epi8(C, D),
                              _mm256_unpackhi_epi8(C, D)};
        for (int h = 0; h < 2; h++) { /* rows 8h .. 8h + 7 (low nibbles) and 16 + 8h .. (high) */
            const __m256i lab = _mm256_maddubs_epi16(_mm256_and_si256(u[h], m4), ab);
            const __m256i lcd = _mm256_maddubs_epi16(_mm256_and_si256(u[2 + h], m4), cd);
            const __m256i hab = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(u[h], 4), m4), ab);
            const __m256i hcd = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(u[2 + h], 4), m4), cd);
            ia[v][h] = _mm256_add_epi16(ia[v][h], _mm256_add_epi16(lab, lcd));
            ia[v][2 + h] = _mm256_add_epi16(ia[v][2 + h], _mm256_add_epi16(hab, hcd));
        }
    }
}

/* Chunks [ck0, ck1) (256 rows each, G8 <= 8 groups in every one) of a row-block in one pass over the
 * list, as the AVX-512 kernel goes: run by run, each chunk of the run in turn, the float sums of chunk
 * ck at fa + 256 (ck - ck0) in the dots' lane order; every row adds its runs' terms in list order, so
 * the bits do not depend on the chunks taken together. IDX and FULL (G8 == 8) are constants in each
 * inlined copy. */
static inline __attribute__((always_inline)) void zz_body_avx2(const srt_zz_job *j, const uint32_t *idx,
                                                               int64_t first, int64_t n, int64_t ck0, int64_t ck1,
                                                               int G8_, float *fab, const int IDX, const int FULL,
                                                               const int ONE) {
    const int G8 = FULL ? 8 : G8_;
    const int64_t R = j->R, G = R / SRT_QK, cs = R / 2, nck = ONE ? 1 : ck1 - ck0;
    const uint8_t *const scb = j->w + srt_zz_nib_bytes(j->cols, R), *const nibf = j->w + ck0 * 128;
    const int npass = (G8 + 1) / 2, nh = G8 > 4 ? 2 : 1, odd = G8 % 2;
    const uint32_t *ix = IDX ? idx : NULL;
#define ZZ_CH(pos) (IDX ? (int64_t)idx[first + (pos)] : first + (pos))
    for (int64_t i = 0; i < 256 * nck; i += 8) _mm256_storeu_ps(fab + i, _mm256_setzero_ps());
    for (int64_t k = 0; k < n && k < ZZ_AHEAD; k++) /* what the quads' look-ahead skips */
        for (int l = 0; l < nh; l++) _mm_prefetch((const char *)(nibf + ZZ_CH(k) * cs + 64 * l), _MM_HINT_T0);
    /* into L2: a cursor over the channels' pieces (these chunks' bytes), ZZ_FAR_BYTES ahead */
    const int64_t pbytes = FULL ? 128 * nck : 64 * nh;
    const int64_t far = ZZ_FAR_BYTES / pbytes > ZZ_AHEAD + 16 ? ZZ_FAR_BYTES / pbytes : ZZ_AHEAD + 16;
    int64_t pfc = n < far ? n : far, pf_due = 0;
    zz_run rq;
    __m256i ia[4][4];
    int64_t p = 0;
    while (p < n) {
        const int64_t kb = ZZ_CH(p) / SRT_QK;
        int64_t e = p;
        while (e < n && ZZ_CH(e) / SRT_QK == kb) e++;
        for (int64_t ck = ck0; ck < ck1; ck++) {
            const uint8_t *nib0 = j->w + ck * 128, *sc0 = scb + 2 * 8 * ck;
            const bool nextck = !ONE && ck + 1 < ck1; /* the run's next chunk comes next */
            float(*fa)[4][2][8] = (float(*)[4][2][8])(void *)(fab + 256 * (ck - ck0)); /* position, m, even/odd, lane */
            zz_quant_avx2(&rq, sc0, G, G8, npass, j->x, ix, first + p, e - p);
            for (int v = 0; v < npass; v++)
                for (int m = 0; m < 4; m++) ia[v][m] = _mm256_setzero_si256();
            for (int64_t q = p; q < e; q += 4) {
                const uint8_t *c[4];
                for (int r = 0; r < 4; r++) c[r] = nib0 + ZZ_CH(q + r < e ? q + r : q) * cs;
                /* into L1: these channels' next chunk, or the next runs' first chunk; the scales ZZ_AHEAD on */
                if (nextck)
                    for (int r = 0; r < 4; r++)
                        for (int l = 0; l < nh; l++) _mm_prefetch((const char *)(c[r] + 128 + 64 * l), _MM_HINT_T0);
                for (int r = 0; r < 4 && q + ZZ_AHEAD + r < n; r++) {
                    const int64_t nx = ZZ_CH(q + ZZ_AHEAD + r);
                    if (!nextck)
                        for (int l = 0; l < nh; l++) _mm_prefetch((const char *)(nibf + nx * cs + 64 * l), _MM_HINT_T0);
                    if (IDX || r == 0) _mm_prefetch((const char *)(sc0 + 2 * nx * G), _MM_HINT_T0);
                }
                if (ONE) { /* one chunk: the lines of the channels `far` on, as they come */
                    for (int r = 0; r < 4 && q + far + r < n; r++) {
                        const int64_t nx = ZZ_CH(q + far + r);
                        for (int l = 0; l < nh; l++) _mm_prefetch((const char *)(nibf + nx * cs + 64 * l), _MM_HINT_T1);
                        if (IDX || r == 0) _mm_prefetch((const char *)(scb + 2 * nx * G + 16 * ck0), _MM_HINT_T1);
                    }
                } else { /* a cursor: whole pieces (these chunks' bytes) in list order, 4 / nck channels a
                     * quad; the same lines as gemv_avx512.c's (a shared inline function for both cost the dense
                     * 1024-row kernels 6-10%) */
                    for (pf_due += 4; pf_due >= nck && pfc < n; pf_due -= nck, pfc++) {
                        const int64_t ch = ZZ_CH(pfc);
                        for (int64_t o = 0; o < pbytes; o += 64) _mm_prefetch((const char *)(nibf + ch * cs + o), _MM_HINT_T1);
                        _mm_prefetch((const char *)(scb + 2 * ch * G + 16 * ck0), _MM_HINT_T1); /* its scales */
                        _mm_prefetch((const char *)(scb + 2 * ch * G + 16 * ck1 - 1), _MM_HINT_T1);
                    }
                }
                zz_quad(ia, c, &rq, (int)((q - p) / 4), npass, odd);
            }
            for (int v = 0; v < npass; v++) {
                const __m256i off = _mm256_load_si256((const __m256i *)(const void *)rq.off[v]);
                const __m256 d = _mm256_load_ps(rq.d[v]);
                for (int m = 0; m < 4; m++) { /* the sums mod 2^16, offset removed, are exact in int16 */
                    const __m256i s = _mm256_sub_epi16(ia[v][m], off);
                    const __m256i ev = _mm256_srai_epi32(_mm256_slli_epi32(s, 16), 16), od = _mm256_srai_epi32(s, 16);
                    _mm256_storeu_ps(fa[v][m][0], _mm256_fmadd_ps(_mm256_cvtepi32_ps(ev), d, _mm256_loadu_ps(fa[v][m][0])));
                    _mm256_storeu_ps(fa[v][m][1], _mm256_fmadd_ps(_mm256_cvtepi32_ps(od), d, _mm256_loadu_ps(fa[v][m][1])));
                }
            }
        }
        p = e;
    }
#undef ZZ_CH
}

/* fa (a chunk's float sums in the dots' lane order, G8 groups; 32-byte aligned) to y in row order:
 * lane 4L + k of (v, m, even/odd) is row 32(2v + L) + 8m + 2k (+ 1). */
static void zz_rows_avx2(float *y, const float *fab, int G8) {
    const float(*fa)[4][2][8] = (const float(*)[4][2][8])(const void *)fab;
    for (int g = 0; g < G8; g++)
        for (int m = 0; m < 4; m++) {
            const __m128 ev = _mm_load_ps(&fa[g / 2][m][0][4 * (g % 2)]);
            const __m128 od = _mm_load_ps(&fa[g / 2][m][1][4 * (g % 2)]);
            _mm_storeu_ps(y + 32 * g + 8 * m, _mm_unpacklo_ps(ev, od));
            _mm_storeu_ps(y + 32 * g + 8 * m + 4, _mm_unpackhi_ps(ev, od));
        }
}

static void zigzag_avx2(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, float *y) {
    const int64_t ck0 = j->g0 / 8, nfull = j->g1 / 8; /* chunks [ck0, nfull) are whole */
    if (nfull > ck0) {
        _Alignas(32) float fa[4096];
        if (nfull - ck0 == 1) { /* a single chunk (256-row row-blocks): the look-ahead as it comes */
            if (idx) zz_body_avx2(j, idx, first, n, ck0, nfull, 8, fa, 1, 1, 1);
            else zz_body_avx2(j, idx, first, n, ck0, nfull, 8, fa, 0, 1, 1);
        } else {
            if (idx) zz_body_avx2(j, idx, first, n, ck0, nfull, 8, fa, 1, 1, 0);
            else zz_body_avx2(j, idx, first, n, ck0, nfull, 8, fa, 0, 1, 0);
        }
        for (int64_t ck = ck0; ck < nfull; ck++) zz_rows_avx2(y + ck * SRT_ZZ_CHUNK, fa + (ck - ck0) * SRT_ZZ_CHUNK, 8);
    }
    if (nfull * 8 < j->g1 && nfull >= ck0) { /* a last chunk of fewer than 8 groups */
        const int G8 = (int)(j->g1 - nfull * 8);
        _Alignas(32) float fa[SRT_ZZ_CHUNK];
        if (idx) zz_body_avx2(j, idx, first, n, nfull, nfull + 1, G8, fa, 1, 0, 1);
        else zz_body_avx2(j, idx, first, n, nfull, nfull + 1, G8, fa, 0, 0, 1);
        zz_rows_avx2(y + nfull * SRT_ZZ_CHUNK, fa, G8);
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

/* e^x by the rule of srt_kern.h (SRT_EXP_*), with 2^n built from exponent bits in two halves (each
 * within the normal range, so the product overflows to inf and underflows through the subnormals as
 * a single scaling would). NaN stays NaN. */
static inline __m256 exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(SRT_EXP_MAX), _mm256_max_ps(_mm256_set1_ps(SRT_EXP_MIN), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(SRT_EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SRT_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SRT_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(SRT_EXP_P5);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SRT_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SRT_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SRT_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SRT_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SRT_EXP_P0));
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

/* p = softmax(s[0..n)) in place. */
static void softmax_avx2(float *s, int64_t n) {
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
}

/* K and V rows prefetched ahead (x86_attn_body.h) */
#define ATT_AHEAD 8

/* the first r (0 < r < 8) f16 values at p, widened, zeros after (AVX2 has no 16-bit masked load) */
static inline __m256 ldhn(const uint16_t *p, int64_t r) {
    uint16_t t[8] = {0};
    memcpy(t, p, (size_t)r * sizeof *p);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
}

/* [sum of a[0], ..., sum of a[7]], each in hsum's order (halves 4 apart, then 2, 1), as the AVX-512
 * kernel's sum16: each level adds two vectors' partial sums at once */
static inline __m256 sum8(const __m256 *a) {
    __m256 c[4], e[2];
    for (int k = 0; k < 4; k++) /* lanes i, i + 4: a[2k] into the low 128 bits, a[2k + 1] into the high */
        c[k] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x20), _mm256_permute2f128_ps(a[2 * k], a[2 * k + 1], 0x31));
    for (int k = 0; k < 2; k++) /* 2 apart: low 128 bits a[4k], a[4k + 2] (two lanes each), high a[4k + 1], a[4k + 3] */
        e[k] = _mm256_add_ps(_mm256_shuffle_ps(c[2 * k], c[2 * k + 1], 0x44), _mm256_shuffle_ps(c[2 * k], c[2 * k + 1], 0xee));
    /* 1 apart: lanes (a0, a2, a4, a6, a1, a3, a5, a7); the permutation puts a[t] in lane t */
    const __m256 r = _mm256_add_ps(_mm256_shuffle_ps(e[0], e[1], 0x88), _mm256_shuffle_ps(e[0], e[1], 0xdd));
    return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

#define ATT_GROUP attn_group_avx2
#define ATT_GROUP_H attn_group_h_avx2
#define ATT_VEC __m256
#define ATT_W 8
#define ATT_ZERO() _mm256_setzero_ps()
#define ATT_SET1(x) _mm256_set1_ps(x)
#define ATT_MUL(a, b) _mm256_mul_ps(a, b)
#define ATT_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define ATT_SUM(v) hsum(v)
#define ATT_SUMW(a) sum8(a)
#define ATT_LD(p) _mm256_loadu_ps(p)
#define ATT_LDN(p, r) _mm256_maskload_ps(p, lanes(r))
#define ATT_LDH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define ATT_LDHN(p, r) ldhn(p, r)
#define ATT_ST(p, v) _mm256_storeu_ps(p, v)
#define ATT_STN(p, v, r) _mm256_maskstore_ps(p, lanes(r), v)
#define ATT_SOFTMAX(s, n) softmax_avx2(s, n)
#define ATT_NH 2
#include "x86_attn_body.h"

static void attn_head_avx2(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                           int64_t stride, int64_t hd, float scale) {
    attn_group_avx2(out, s, q, K, V, n, stride, hd, 1, scale);
}

/* The saturating f16 store with F16C, 8 values a step: clamped to +-65504 (min/max return their second
 * operand, x, when it is NaN), a NaN replaced by the quiet NaN of its sign (which converts to the scalar
 * store's sign | 0x7e00), then converted with round to nearest even; the last n % 8 by the scalar store. */
static void f16_store_avx2(uint16_t *dst, const float *x, int64_t n) {
    const __m256 hi = _mm256_set1_ps(65504.0f), lo = _mm256_set1_ps(-65504.0f);
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        __m256 c = _mm256_max_ps(lo, _mm256_min_ps(hi, v));
        c = _mm256_blendv_ps(c, _mm256_or_ps(_mm256_and_ps(v, sign), qnan), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        _mm_storeu_si128((__m128i *)(void *)(dst + i), _mm256_cvtps_ph(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    for (; i < n; i++) dst[i] = srt_fp32_to_fp16_sat(x[i]);
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
    k->attn_group = attn_group_avx2;
    k->attn_group_h = attn_group_h_avx2;
    k->f16_store = f16_store_avx2;
}
