/* select_avx512.c - the live lists with AVX-512: threshold compaction (CATS thresholds, TEAL, CETT) and
 * exact top-K selection (srt_select_topk's contract) with vector counts and compression instead of the
 * reference's scalar histograms: 3x faster at a model's 5,632 neurons, which decode ranks in every layer
 * under CATS and CLAWS.
 *
 * The keys (srt_select_key: order-preserving uint32, NaN lowest) are written once with their minimum and
 * maximum. Then the range [lo, hi] that holds the k-th largest key is halved until it is one key or at
 * most 16 keys remain: a pass counts the keys at or above the midpoint, a second compresses the half that
 * holds the rank into the workspace (in place after the first time), and the range shrinks to that half's
 * own minimum or maximum. The winners are the indices whose key is above the k-th, plus the first keys
 * equal to it in index order, as the reference takes them. The compression goes through a register and a
 * masked store (a compressing store to memory is microcoded on some cores). */
#include <immintrin.h>

#include "../srt_kern.h"

/* the lanes of 16 entries from position i of n */
static inline __mmask16 lanes(int64_t i, int64_t n) {
    return n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
}

/* srt_select_key on 16 floats' bits */
static inline __m512i keys16(__m512i u, unsigned flags) {
    const __m512i sign = _mm512_set1_epi32(INT32_MIN), absm = _mm512_set1_epi32(INT32_MAX);
    if (flags & SRT_SELECT_ABS) u = _mm512_and_si512(u, absm);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, absm), _mm512_set1_epi32(0x7f800000));
    const __mmask16 neg = _mm512_test_epi32_mask(u, sign);
    const __m512i key = _mm512_mask_xor_epi32(_mm512_or_si512(u, sign), neg, u, _mm512_set1_epi32(-1));
    return _mm512_maskz_mov_epi32((__mmask16)~nan, key);
}

/* dst[m..) = the entries v of lanes s; returns the new m */
static inline int64_t put(uint32_t *dst, int64_t m, __mmask16 s, __m512i v) {
    const int c = __builtin_popcount(s);
    _mm512_mask_storeu_epi32(dst + m, (__mmask16)((1u << c) - 1), _mm512_maskz_compress_epi32(s, v));
    return m + c;
}

/* ---- compaction ---------------------------------------------------------------------------- */

static int64_t compact_avx512(uint32_t *idx, const float *x, const float *tv, float t, int64_t n) {
    const __m512 tb = _mm512_set1_ps(t);
    __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 ld = lanes(i, n);
        const __m512 ax = _mm512_abs_ps(_mm512_maskz_loadu_ps(ld, x + i));
        const __m512 th = tv ? _mm512_maskz_loadu_ps(ld, tv + i) : tb;
        m = put(idx, m, _mm512_mask_cmp_ps_mask(ld, ax, th, _CMP_GT_OQ), iota);
        iota = _mm512_add_epi32(iota, _mm512_set1_epi32(16));
    }
    return m;
}

/* ---- top-K ----------------------------------------------------------------------------------- */

static void select_topk_avx512(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags,
                               uint32_t *ws) {
    uint32_t *keys = ws, *buf = ws + n;
    __m512i vmin = _mm512_set1_epi32(-1), vmax = _mm512_setzero_si512();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 ld = lanes(i, n);
        const __m512i key = keys16(_mm512_maskz_loadu_epi32(ld, score + i), flags);
        _mm512_mask_storeu_epi32(keys + i, ld, key);
        vmin = _mm512_mask_min_epu32(vmin, ld, vmin, key);
        vmax = _mm512_mask_max_epu32(vmax, ld, vmax, key);
    }
    /* c[0..nc) are exactly the keys in [lo, hi]; the k-th largest key is the r-th largest of them */
    uint32_t lo = (uint32_t)_mm512_reduce_min_epu32(vmin), hi = (uint32_t)_mm512_reduce_max_epu32(vmax);
    const uint32_t *c = keys;
    int64_t nc = n, r = k;
    while (lo < hi && nc > 16) {
        const uint32_t mid = lo + ((hi - lo) >> 1) + 1; /* lo < mid <= hi */
        const __m512i vm = _mm512_set1_epi32((int)mid);
        int64_t nu = 0;
        for (int64_t j = 0; j < nc; j += 16) {
            const __mmask16 ld = lanes(j, nc);
            nu += __builtin_popcount(_mm512_mask_cmpge_epu32_mask(ld, _mm512_maskz_loadu_epi32(ld, c + j), vm));
        }
        const bool upper = nu >= r;
        __m512i ext = upper ? _mm512_set1_epi32(-1) : _mm512_setzero_si512();
        int64_t m = 0;
        for (int64_t j = 0; j < nc; j += 16) { /* into buf; in place once c is buf (m <= j: no entry is
                                                  overwritten before it is read) */
            const __mmask16 ld = lanes(j, nc);
            const __m512i v = _mm512_maskz_loadu_epi32(ld, c + j);
            const __mmask16 ge = _mm512_mask_cmpge_epu32_mask(ld, v, vm), s = upper ? ge : (__mmask16)(ld & ~ge);
            ext = upper ? _mm512_mask_min_epu32(ext, s, ext, v) : _mm512_mask_max_epu32(ext, s, ext, v);
            m = put(buf, m, s, v);
        }
        if (upper) {
            lo = (uint32_t)_mm512_reduce_min_epu32(ext);
        } else {
            hi = (uint32_t)_mm512_reduce_max_epu32(ext);
            r -= nu;
        }
        c = buf, nc = m;
    }
    /* the k-th largest key t; need: how many keys equal to t win; eq: how many there are */
    uint32_t t = lo;
    int64_t need = r, eq = nc;
    if (lo < hi) { /* at most 16 keys left: rank them by counting */
        for (int64_t a = 0; a < nc; a++) {
            int64_t gt = 0, ge = 0;
            for (int64_t b = 0; b < nc; b++) gt += c[b] > c[a], ge += c[b] >= c[a];
            if (gt < r && ge >= r) {
                t = c[a], need = r - gt, eq = ge - gt;
                break;
            }
        }
    }
    const __m512i vt = _mm512_set1_epi32((int)t);
    if (need == eq) { /* every key >= t wins: k of them */
        __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        int64_t m = 0;
        for (int64_t i = 0; i < n; i += 16) {
            const __mmask16 ld = lanes(i, n);
            m = put(idx, m, _mm512_mask_cmpge_epu32_mask(ld, _mm512_maskz_loadu_epi32(ld, keys + i), vt), iota);
            iota = _mm512_add_epi32(iota, _mm512_set1_epi32(16));
        }
        return;
    }
    /* a tie split at t: the keys above it and the first `need` equal to it, in index order (the
     * reference's branch-free loop) */
    uint32_t sink;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t key = keys[i];
        const int64_t e = key == t, take = (key > t) | (e & (need > 0));
        *(m < k ? &idx[m] : &sink) = (uint32_t)i;
        m += take;
        need -= e & take;
    }
}

void srt_avx512_select_register(srt_kernels *k) {
    k->compact = compact_avx512;
    k->select_topk = select_topk_avx512;
}
