/* select_avx512.c - the live lists with AVX-512: threshold compaction (CATS thresholds, TEAL, CETT) and
 * the exact top-K selection of x86_select_body.h with 16 lanes. Both compress through a register and a
 * masked store (a compressing store to memory is microcoded on some cores, Zen 4 among them). */
#include <immintrin.h>

#include "../srt_kern.h"

/* v's lanes s in order to dst[m..); returns the new m */
static inline int64_t put16(uint32_t *dst, int64_t m, unsigned s, __m512i v) {
    const int c = __builtin_popcount(s);
    _mm512_mask_storeu_epi32(dst + m, (__mmask16)((1u << c) - 1), _mm512_maskz_compress_epi32((__mmask16)s, v));
    return m + c;
}

/* ---- compaction ---------------------------------------------------------------------------- */

static int64_t compact_avx512(uint32_t *idx, const float *x, const float *tv, float t, int64_t n) {
    const __m512 tb = _mm512_set1_ps(t);
    __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 ld = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 ax = _mm512_abs_ps(_mm512_maskz_loadu_ps(ld, x + i));
        const __m512 th = tv ? _mm512_maskz_loadu_ps(ld, tv + i) : tb;
        m = put16(idx, m, _mm512_mask_cmp_ps_mask(ld, ax, th, _CMP_GT_OQ), iota);
        iota = _mm512_add_epi32(iota, _mm512_set1_epi32(16));
    }
    return m;
}

/* ---- top-K ----------------------------------------------------------------------------------- */

#define SEL_SFX(name) name##_avx512
#define SV __m512i
#define SN 16
#define SV_LOAD(p, ld) _mm512_maskz_loadu_epi32((__mmask16)(ld), (const void *)(p))
#define SV_GE(v, t, ld) ((unsigned)_mm512_mask_cmpge_epu32_mask((__mmask16)(ld), v, t))
#define SV_MINM(a, s, v) _mm512_mask_min_epu32(a, (__mmask16)(s), a, v)
#define SV_MAXM(a, s, v) _mm512_mask_max_epu32(a, (__mmask16)(s), a, v)
#define SV_RMIN(a) ((uint32_t)_mm512_reduce_min_epu32(a))
#define SV_RMAX(a) ((uint32_t)_mm512_reduce_max_epu32(a))
#define SV_PUT(dst, m, s, v) put16(dst, m, s, v)
#define SV_STORE(p, ld, v) _mm512_mask_storeu_epi32((void *)(p), (__mmask16)(ld), v)
#define SV_SET1(x) _mm512_set1_epi32(x)
#define SV_IOTA _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define SV_ADD(a, b) _mm512_add_epi32(a, b)
#define SV_OR(a, b) _mm512_or_si512(a, b)
#define SV_XOR(a, b) _mm512_xor_si512(a, b)
#define SV_AND(a, b) _mm512_and_si512(a, b)
#define SV_ANDNOT(a, b) _mm512_andnot_si512(a, b)
#define SV_SRAI31(v) _mm512_srai_epi32(v, 31)
#define SV_GT_SIGNED(a, b) _mm512_maskz_mov_epi32(_mm512_cmpgt_epi32_mask(a, b), _mm512_set1_epi32(-1))
#include "x86_select_body.h"

void srt_avx512_select_register(srt_kernels *k) {
    k->compact = compact_avx512;
    k->select_topk = select_topk_avx512;
}
