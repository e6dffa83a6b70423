/* select_avx2.c - the exact top-K selection of x86_select_body.h with 8 lanes. AVX2 has no compressing
 * instruction: a lane mask's positions come from a table of 256 packed 3-bit permutations (built once
 * with the kernel tables), and vpermd moves the lanes together before a masked store. */
#include <immintrin.h>

#include "../srt_kern.h"

/* perm[s]: the positions of the set bits of s, 3 bits each, in order */
static uint32_t perm[256];

/* all-ones in the lanes of the bit mask s */
static inline __m256i lanes_of(unsigned s) {
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)s), bit), bit);
}

static inline unsigned ge8(__m256i v, __m256i t, unsigned ld) {
    const __m256i ge = _mm256_cmpeq_epi32(_mm256_max_epu32(v, t), v);
    return (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ge)) & ld;
}

static inline uint32_t rmin8(__m256i a) {
    __m128i x = _mm_min_epu32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, 0x4e));
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(x);
}

static inline uint32_t rmax8(__m256i a) {
    __m128i x = _mm_max_epu32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0x4e));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(x);
}

/* v's lanes s in order to dst[m..); returns the new m */
static inline int64_t put8(uint32_t *dst, int64_t m, unsigned s, __m256i v) {
    const int c = __builtin_popcount(s);
    const __m256i pos = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)perm[s]),
                                                           _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21)),
                                         _mm256_set1_epi32(7));
    _mm256_maskstore_epi32((int *)(dst + m), lanes_of((1u << c) - 1), _mm256_permutevar8x32_epi32(v, pos));
    return m + c;
}

#define SEL_SFX(name) name##_avx2
#define SV __m256i
#define SN 8
#define SV_LOAD(p, ld) _mm256_maskload_epi32((const int *)(const void *)(p), lanes_of(ld))
#define SV_GE(v, t, ld) ge8(v, t, ld)
#define SV_MINM(a, s, v) _mm256_blendv_epi8(a, _mm256_min_epu32(a, v), lanes_of(s))
#define SV_MAXM(a, s, v) _mm256_blendv_epi8(a, _mm256_max_epu32(a, v), lanes_of(s))
#define SV_RMIN(a) rmin8(a)
#define SV_RMAX(a) rmax8(a)
#define SV_PUT(dst, m, s, v) put8(dst, m, s, v)
#define SV_STORE(p, ld, v) _mm256_maskstore_epi32((int *)(void *)(p), lanes_of(ld), v)
#define SV_SET1(x) _mm256_set1_epi32(x)
#define SV_IOTA _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)
#define SV_ADD(a, b) _mm256_add_epi32(a, b)
#define SV_OR(a, b) _mm256_or_si256(a, b)
#define SV_XOR(a, b) _mm256_xor_si256(a, b)
#define SV_AND(a, b) _mm256_and_si256(a, b)
#define SV_ANDNOT(a, b) _mm256_andnot_si256(a, b)
#define SV_SRAI31(v) _mm256_srai_epi32(v, 31)
#define SV_GT_SIGNED(a, b) _mm256_cmpgt_epi32(a, b)
#include "x86_select_body.h"

void srt_avx2_select_register(srt_kernels *k) {
    for (unsigned s = 0; s < 256; s++) { /* once, from the tables' pthread_once */
        uint32_t p = 0;
        int c = 0;
        for (unsigned b = 0; b < 8; b++)
            if (s >> b & 1) p |= b << (3 * c++);
        perm[s] = p;
    }
    k->select_topk = select_topk_avx2;
}
