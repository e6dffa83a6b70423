/* kmi4_avx512.c - AVX-512 VNNI kernels for the kmi4 layouts.
 *
 * kmi4 (down projection, neuron-major): the body in x86_kmi4_body.h with
 * 512-bit vectors and vpdpbusd. The high nibble is used in place (masked
 * with 0xf0, not shifted): its sum H is 16x, undone by the float scale, and
 * starts at -128 S. The low sum L takes the whole byte (lo + 16 hi, no mask)
 * from -8 S, so the low nibbles' sum is L - H - 128 S (vpdpbusd does not
 * saturate: 8 quads x 4 x 255 x 128 fits in int32).
 *
 * kmi4r (rows): a 512-weight tile is four 64-byte vectors whose lane i holds
 * 4 weights of block i, so vpdpbusd accumulates whole blocks in lanes and one
 * multiply by the 16 block scales finishes the tile. */
#include <immintrin.h>

#include "../srt_kern.h"

#define SRT_SFX(name) name##_avx512
#define VI __m512i
#define VF __m512
#define VB 64
#define VI_LOAD(p) _mm512_loadu_si512(p)
#define VI_SET1(x) _mm512_set1_epi32(x)
#define VI_UNPACKLO8(a, b) _mm512_unpacklo_epi8(a, b)
#define VI_UNPACKHI8(a, b) _mm512_unpackhi_epi8(a, b)
#define VI_UNPACKLO16(a, b) _mm512_unpacklo_epi16(a, b)
#define VI_UNPACKHI16(a, b) _mm512_unpackhi_epi16(a, b)
#define KD_LO(v) (v)
#define KD_HI(v) _mm512_and_si512(v, _mm512_set1_epi8((char)0xf0))
#define KD_HI_MUL 16
#define KD_DOT(acc, w, a) ((acc) = _mm512_dpbusd_epi32((acc), (w), (a)))
#define KD_INIT(off) _mm512_sub_epi32(_mm512_setzero_si512(), (off))
#define KD_LO_FINAL(L, H, off_lo, off_hi) _mm512_sub_epi32(_mm512_sub_epi32(L, H), off_hi)
#define KD_HI_FINAL(H, off_hi) (H)
#define VF_SCALES(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define VF_SET1(x) _mm512_set1_ps(x)
#define VF_LOAD(p) _mm512_load_ps(p)
#define VF_STORE(p, v) _mm512_store_ps(p, v)
#define VF_MUL(a, b) _mm512_mul_ps(a, b)
#define VF_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VF_CVT(v) _mm512_cvtepi32_ps(v)
/* the longest vectors whose L2 look-ahead goes out in address order (x86_kmi4_body.h; Zen 4: 2 KB
 * vectors that way ran 5% slower) */
#define KD_SEQ_L2_MAX 1024
#include "x86_kmi4_body.h"
/* kmi8: the sign bit flipped makes the weights w + 128 as unsigned bytes, so vpdpbusd started from
 * -128 S (S: the K-block's sum of live activations) sums exactly w h */
#define K8_INIT(S) _mm512_set1_epi32(-128 * (S))
#define K8_DOT(acc, q, a) ((acc) = _mm512_dpbusd_epi32((acc), _mm512_xor_si512((q), _mm512_set1_epi8((char)0x80)), (a)))
#include "x86_kmi8_body.h"

/* ---- kmi4r rows ------------------------------------------------------------------ */

static inline __m512i kr_tile(const uint8_t *w, const int8_t *a, const int32_t *sum) {
    const __m512i m_lo = _mm512_set1_epi8(0x0f), m_hi = _mm512_set1_epi8((char)0xf0);
    __m512i lo = _mm512_setzero_si512(), hi = lo;
    for (int p = 0; p < 4; p++) {
        const __m512i v = _mm512_loadu_si512(w + 64 * p);
        lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(v, m_lo), _mm512_loadu_si512(a + 64 * p));
        hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(v, m_hi), _mm512_loadu_si512(a + 256 + 64 * p));
    }
    const __m512i off = _mm512_slli_epi32(_mm512_loadu_si512(sum), 3);
    return _mm512_sub_epi32(_mm512_add_epi32(lo, _mm512_srai_epi32(hi, 4)), off);
}

static void kr_avx512(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t cp = j->cols, ntile = cp / SRT_KR_TILE;
    const int8_t *aq = j->xq->q;
    const float *ad = j->xq->d;
    const int32_t *as = j->xq->sum;
    const int64_t ahead = j->pf.l1, far = j->pf.l2; /* prefetch distances in rows (srt_kern.h) */
    int64_t i = i0;
    for (int64_t k = i0; k < i1 && k < i0 + ahead; k++) { /* the first rows, before the loop's window reaches them */
        const uint8_t *pr = j->w + (j->idx ? (int64_t)j->idx[k] : k) * j->row_bytes;
        for (int64_t o = 0; o < j->row_bytes; o += 64) _mm_prefetch((const char *)(pr + o), _MM_HINT_T0);
    }
    const int64_t nl = j->row_bytes / 64, pe = srt_rows_pf_end(j, i1);
    for (; i + 1 < i1; i += 2) {
        const int64_t r0 = j->idx ? j->idx[i] : i, r1 = j->idx ? j->idx[i + 1] : i + 1;
        const uint8_t *w0 = j->w + r0 * j->row_bytes, *w1 = j->w + r1 * j->row_bytes;
        /* the rows `ahead` list positions ahead into L1 and `far` ahead into L2, a
         * tile's share of their lines per tile (spread over the loop rather than in one
         * burst per pair; the far one took 9% off dense and 20% off scattered rows) */
        const uint8_t *pf0 = NULL, *pf1 = NULL, *pg0 = NULL, *pg1 = NULL;
        if (i + ahead + 1 < pe) {
            pf0 = j->w + (j->idx ? (int64_t)j->idx[i + ahead] : i + ahead) * j->row_bytes;
            pf1 = j->w + (j->idx ? (int64_t)j->idx[i + ahead + 1] : i + ahead + 1) * j->row_bytes;
        }
        if (i + far + 1 < pe) {
            pg0 = j->w + (j->idx ? (int64_t)j->idx[i + far] : i + far) * j->row_bytes;
            pg1 = j->w + (j->idx ? (int64_t)j->idx[i + far + 1] : i + far + 1) * j->row_bytes;
        }
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
        int64_t l = 0, due = 0;
        for (int64_t T = 0; T < ntile; T++) {
            for (const int64_t le = l + srt_pf_share(&due, nl, ntile); l < le; l++) {
                if (pf0) _mm_prefetch((const char *)(pf0 + 64 * l), _MM_HINT_T0), _mm_prefetch((const char *)(pf1 + 64 * l), _MM_HINT_T0);
                if (pg0) _mm_prefetch((const char *)(pg0 + 64 * l), _MM_HINT_T1), _mm_prefetch((const char *)(pg1 + 64 * l), _MM_HINT_T1);
            }
            const __m512 da = _mm512_loadu_ps(ad + 16 * T);
            const __m512i s0 = kr_tile(w0 + 256 * T, aq + 512 * T, as + 16 * T);
            const __m512i s1 = kr_tile(w1 + 256 * T, aq + 512 * T, as + 16 * T);
            const __m512 d0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w0 + cp / 2 + 32 * T)));
            const __m512 d1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w1 + cp / 2 + 32 * T)));
            acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s0), _mm512_mul_ps(d0, da), acc0);
            acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s1), _mm512_mul_ps(d1, da), acc1);
        }
        j->y[r0] = _mm512_reduce_add_ps(acc0);
        j->y[r1] = _mm512_reduce_add_ps(acc1);
    }
    for (; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *w = j->w + r * j->row_bytes;
        __m512 acc = _mm512_setzero_ps();
        for (int64_t T = 0; T < ntile; T++) {
            const __m512i s = kr_tile(w + 256 * T, aq + 512 * T, as + 16 * T);
            const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + cp / 2 + 32 * T)));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_loadu_ps(ad + 16 * T)), acc);
        }
        j->y[r] = _mm512_reduce_add_ps(acc);
    }
}

/* Prefill: kr_avx512's arithmetic for four inputs at once (each input's tile sums and accumulator
 * its own, in the same order: the same bits per input), so a tile's weights are loaded and their
 * nibbles masked once for four inputs instead of once per input; a short last group repeats its last
 * input and drops the copies. The first group of inputs prefetches the row j->pf.l1 ahead (the
 * others find the rows in cache). */
static void kr_multi_avx512(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec,
                            int64_t i0, int64_t i1) {
    const int64_t cp = j->cols, ntile = cp / SRT_KR_TILE, nl = j->row_bytes / 64;
    const __m512i m_lo = _mm512_set1_epi8(0x0f), m_hi = _mm512_set1_epi8((char)0xf0);
    for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
        const srt_act *a[4];
        srt_multi_group(xq, nvec, v0, a);
        for (int64_t r = i0; r < i1; r++) {
            const uint8_t *w = j->w + r * j->row_bytes;
            const uint8_t *pf = v0 == 0 && r + j->pf.l1 < i1 ? w + j->pf.l1 * j->row_bytes : NULL;
            __m512 acc[4];
            for (int k = 0; k < 4; k++) acc[k] = _mm512_setzero_ps();
            int64_t l = 0, due = 0;
            for (int64_t T = 0; T < ntile; T++) {
                srt_pf_l1_step(pf, &l, &due, nl, ntile);
                const uint8_t *wt = w + 256 * T;
                __m512i lo[4], hi[4];
                for (int p = 0; p < 4; p++) {
                    const __m512i v = _mm512_loadu_si512(wt + 64 * p);
                    lo[p] = _mm512_and_si512(v, m_lo);
                    hi[p] = _mm512_and_si512(v, m_hi);
                }
                const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + cp / 2 + 32 * T)));
                for (int k = 0; k < 4; k++) {
                    const int8_t *aq = a[k]->q + 512 * T;
                    __m512i sl = _mm512_setzero_si512(), sh = sl;
                    for (int p = 0; p < 4; p++) {
                        sl = _mm512_dpbusd_epi32(sl, lo[p], _mm512_loadu_si512(aq + 64 * p));
                        sh = _mm512_dpbusd_epi32(sh, hi[p], _mm512_loadu_si512(aq + 256 + 64 * p));
                    }
                    const __m512i off = _mm512_slli_epi32(_mm512_loadu_si512(a[k]->sum + 16 * T), 3);
                    const __m512i sv = _mm512_sub_epi32(_mm512_add_epi32(sl, _mm512_srai_epi32(sh, 4)), off);
                    acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sv), _mm512_mul_ps(d, _mm512_loadu_ps(a[k]->d + 16 * T)),
                                             acc[k]);
                }
            }
            for (int k = 0; k < 4 && v0 + k < nvec; k++) y[v0 + k][r] = _mm512_reduce_add_ps(acc[k]);
        }
    }
}

/* The streaming floor: plain loads, and each line prefetched 8 KB ahead into
 * L2 (4% faster than the loads alone on a 2-vCPU Sapphire Rapids VM, so the
 * floor the kernels are compared with is the faster read). */
static uint64_t stream_avx512(const uint8_t *p, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i + 256 <= n; i += 256) {
        for (int k = 0; k < 4; k++) _mm_prefetch((const char *)(p + i + 8192 + 64 * k), _MM_HINT_T1);
        a = _mm512_xor_si512(a, _mm512_load_si512(p + i));
        b = _mm512_xor_si512(b, _mm512_load_si512(p + i + 64));
        c = _mm512_xor_si512(c, _mm512_load_si512(p + i + 128));
        d = _mm512_xor_si512(d, _mm512_load_si512(p + i + 192));
    }
    for (size_t i = n / 256 * 256; i + 64 <= n; i += 64) a = _mm512_xor_si512(a, _mm512_load_si512(p + i));
    _Alignas(64) uint64_t lanes[8];
    _mm512_store_si512(lanes, _mm512_xor_si512(_mm512_xor_si512(a, b), _mm512_xor_si512(c, d)));
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) x ^= lanes[i];
    return x;
}

void srt_avx512_kmi4_register(srt_kernels *k) {
    k->stream = stream_avx512;
    k->kmi4 = kd_avx512;
    k->kmi8 = k8_avx512;
    k->rows_kmi4r = kr_avx512;
    k->rows_kmi4r_multi = kr_multi_avx512;
}
