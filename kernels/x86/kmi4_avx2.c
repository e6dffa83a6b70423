/* kmi4_avx2.c - AVX2 kernels for the kmi4 layouts.
 *
 * kmi4: the body in x86_kmi4_body.h with 256-bit vectors (a 64-byte neuron
 * tile is two halves: outputs 16m + 8h + 0..7 per half h). Without VNNI the
 * four-way byte dot is vpmaddubsw into int16 pair sums, which hold a whole
 * K-block (at most 8 quads: 8 x 2 x 15 x 127 = 30480 < 32767) and are
 * widened once with vpmaddwd; the nibbles are shifted down (vpmaddubsw
 * saturates, so the high nibble cannot stay in place). */
#include <immintrin.h>

#include "../srt_kern.h"

#define SRT_SFX(name) name##_avx2
#define VI __m256i
#define VF __m256
#define VB 32
#define VI_LOAD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define VI_SET1(x) _mm256_set1_epi32(x)
#define VI_UNPACKLO8(a, b) _mm256_unpacklo_epi8(a, b)
#define VI_UNPACKHI8(a, b) _mm256_unpackhi_epi8(a, b)
#define VI_UNPACKLO16(a, b) _mm256_unpacklo_epi16(a, b)
#define VI_UNPACKHI16(a, b) _mm256_unpackhi_epi16(a, b)
#define KD_LO(v) _mm256_and_si256(v, _mm256_set1_epi8(0x0f))
#define KD_HI(v) _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f))
#define KD_HI_MUL 1
#define KD_DOT(acc, w, a) ((acc) = _mm256_add_epi16((acc), _mm256_maddubs_epi16((w), (a))))
#define KD_INIT(off) _mm256_setzero_si256()
#define KD_LO_FINAL(L, H, off_lo, off_hi) _mm256_sub_epi32(_mm256_madd_epi16(L, _mm256_set1_epi16(1)), off_lo)
#define KD_HI_FINAL(H, off_hi) _mm256_sub_epi32(_mm256_madd_epi16(H, _mm256_set1_epi16(1)), off_hi)
#define VF_SCALES(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define VF_SET1(x) _mm256_set1_ps(x)
#define VF_LOAD(p) _mm256_load_ps(p)
#define VF_STORE(p, v) _mm256_store_ps(p, v)
#define VF_MUL(a, b) _mm256_mul_ps(a, b)
#define VF_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VF_CVT(v) _mm256_cvtepi32_ps(v)
/* the longest vectors whose L2 look-ahead goes out in address order (x86_kmi4_body.h; Zen 4: 2 KB
 * vectors that way were 6-13% faster) */
#define KD_SEQ_L2_MAX 4096
#include "x86_kmi4_body.h"
/* kmi8: vpmaddubsw of |w| and h with w's sign (|w| <= 128, so a pair is at most 2 x 128 x 127 < 2^15),
 * widened at once with vpmaddwd */
#define K8_INIT(S) _mm256_setzero_si256()
#define K8_DOT(acc, q, a)                                                                                   \
    ((acc) = _mm256_add_epi32((acc), _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8((a), (q))), \
                                                       _mm256_set1_epi16(1))))
#include "x86_kmi8_body.h"

/* ---- kmi4r rows: each 32-byte half of a tile covers 8 blocks in its lanes ---------- */

/* A half tile's nibbles as unsigned bytes: lo[p], hi[p] for its four 64-byte-apart vectors. */
static inline void kr_prep(const uint8_t *w, __m256i lo[4], __m256i hi[4]) {
    const __m256i m_lo = _mm256_set1_epi8(0x0f);
    for (int p = 0; p < 4; p++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 64 * p));
        lo[p] = _mm256_and_si256(v, m_lo);
        hi[p] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m_lo);
    }
}

/* The half tile's eight block sums against activations a (minus 8 x their sums). */
static inline __m256i kr_dot(const __m256i lo[4], const __m256i hi[4], const int8_t *a, const int32_t *sum) {
    __m256i s16 = _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(lo[p], _mm256_loadu_si256((const __m256i *)(a + 64 * p))));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi[p], _mm256_loadu_si256((const __m256i *)(a + 256 + 64 * p))));
    }
    const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
    return _mm256_sub_epi32(s32, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)sum), 3));
}

static inline __m256i kr_half(const uint8_t *w, const int8_t *a, const int32_t *sum) {
    __m256i lo[4], hi[4];
    kr_prep(w, lo, hi);
    return kr_dot(lo, hi, a, sum);
}

static inline __m256 kr_fin(__m256 acc, __m256i s, const uint8_t *sc, const float *ad) {
    const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)sc)), _mm256_loadu_ps(ad));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
}

static inline float kr_hsum(__m256 acc) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Two rows per step, with the AVX-512 kernel's prefetch schedule (rows j->pf.l1
 * list positions ahead into L1, j->pf.l2 ahead into L2, a tile's share of their
 * lines per tile): one row at a time and the hardware prefetcher alone ran at
 * 2x the streaming floor. */
static void kr_avx2(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t cp = j->cols, ntile = cp / SRT_KR_TILE, nl = j->row_bytes / 64;
    const int64_t ahead = j->pf.l1, far = j->pf.l2;
    const srt_act *a = j->xq;
#define KR_ROW(k) (j->w + (j->idx ? (int64_t)j->idx[k] : (k)) * j->row_bytes)
    for (int64_t k = i0; k < i1 && k < i0 + ahead; k++) {
        const uint8_t *pr = KR_ROW(k);
        for (int64_t o = 0; o < j->row_bytes; o += 64) _mm_prefetch((const char *)(pr + o), _MM_HINT_T0);
    }
    int64_t i = i0;
    const int64_t pe = srt_rows_pf_end(j, i1);
    for (; i + 1 < i1; i += 2) {
        const int64_t r0 = j->idx ? j->idx[i] : i, r1 = j->idx ? j->idx[i + 1] : i + 1;
        const uint8_t *w0 = j->w + r0 * j->row_bytes, *w1 = j->w + r1 * j->row_bytes;
        const uint8_t *pf0 = NULL, *pf1 = NULL, *pg0 = NULL, *pg1 = NULL;
        if (i + ahead + 1 < pe) pf0 = KR_ROW(i + ahead), pf1 = KR_ROW(i + ahead + 1);
        if (i + far + 1 < pe) pg0 = KR_ROW(i + far), pg1 = KR_ROW(i + far + 1);
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
        int64_t l = 0, due = 0;
        for (int64_t T = 0; T < ntile; T++) {
            for (const int64_t le = l + srt_pf_share(&due, nl, ntile); l < le; l++) {
                if (pf0) _mm_prefetch((const char *)(pf0 + 64 * l), _MM_HINT_T0), _mm_prefetch((const char *)(pf1 + 64 * l), _MM_HINT_T0);
                if (pg0) _mm_prefetch((const char *)(pg0 + 64 * l), _MM_HINT_T1), _mm_prefetch((const char *)(pg1 + 64 * l), _MM_HINT_T1);
            }
            for (int h = 0; h < 2; h++) {
                const int64_t b = 16 * T + 8 * h;
                const __m256i s0 = kr_half(w0 + 256 * T + 32 * h, a->q + 512 * T + 32 * h, a->sum + b);
                const __m256i s1 = kr_half(w1 + 256 * T + 32 * h, a->q + 512 * T + 32 * h, a->sum + b);
                acc0 = kr_fin(acc0, s0, w0 + cp / 2 + 2 * b, a->d + b);
                acc1 = kr_fin(acc1, s1, w1 + cp / 2 + 2 * b, a->d + b);
            }
        }
        j->y[r0] = kr_hsum(acc0);
        j->y[r1] = kr_hsum(acc1);
    }
    for (; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *w = j->w + r * j->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t T = 0; T < ntile; T++)
            for (int h = 0; h < 2; h++) {
                const int64_t b = 16 * T + 8 * h;
                acc = kr_fin(acc, kr_half(w + 256 * T + 32 * h, a->q + 512 * T + 32 * h, a->sum + b), w + cp / 2 + 2 * b, a->d + b);
            }
        j->y[r] = kr_hsum(acc);
    }
#undef KR_ROW
}

/* Prefill: kr_avx2 for four inputs at once, each half tile's nibbles unpacked once for the four
 * (the same arithmetic per input: the same bits); as kr_multi_avx512. */
static void kr_multi_avx2(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec, int64_t i0,
                          int64_t i1) {
    const int64_t cp = j->cols, ntile = cp / SRT_KR_TILE, nl = j->row_bytes / 64;
    for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
        const srt_act *a[4];
        srt_multi_group(xq, nvec, v0, a);
        for (int64_t r = i0; r < i1; r++) {
            const uint8_t *w = j->w + r * j->row_bytes;
            const uint8_t *pf = v0 == 0 && r + j->pf.l1 < i1 ? w + j->pf.l1 * j->row_bytes : NULL;
            __m256 acc[4];
            for (int k = 0; k < 4; k++) acc[k] = _mm256_setzero_ps();
            int64_t l = 0, due = 0;
            for (int64_t T = 0; T < ntile; T++) {
                srt_pf_l1_step(pf, &l, &due, nl, ntile);
                for (int h = 0; h < 2; h++) {
                    const int64_t b = 16 * T + 8 * h;
                    __m256i lo[4], hi[4];
                    kr_prep(w + 256 * T + 32 * h, lo, hi);
                    for (int k = 0; k < 4; k++)
                        acc[k] = kr_fin(acc[k], kr_dot(lo, hi, a[k]->q + 512 * T + 32 * h, a[k]->sum + b),
                                        w + cp / 2 + 2 * b, a[k]->d + b);
                }
            }
            for (int k = 0; k < 4 && v0 + k < nvec; k++) y[v0 + k][r] = kr_hsum(acc[k]);
        }
    }
}

static uint64_t stream_avx2(const uint8_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i + 128 <= n; i += 128) { /* prefetched 8 KB ahead into L2, as stream_avx512 */
        _mm_prefetch((const char *)(p + i + 8192), _MM_HINT_T1);
        _mm_prefetch((const char *)(p + i + 8192 + 64), _MM_HINT_T1);
        a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *)(p + i + 32)));
        c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i *)(p + i + 64)));
        d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    for (size_t i = n / 128 * 128; i + 32 <= n; i += 32) a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(p + i)));
    const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    return (uint64_t)_mm256_extract_epi64(x, 0) ^ (uint64_t)_mm256_extract_epi64(x, 3);
}

void srt_avx2_kmi4_register(srt_kernels *k) {
    k->stream = stream_avx2;
    k->kmi4 = kd_avx2;
    k->kmi8 = k8_avx2;
    k->rows_kmi4r = kr_avx2;
    k->rows_kmi4r_multi = kr_multi_avx2;
}
