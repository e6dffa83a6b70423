/* kmi4_avx512.c - AVX-512 VNNI kernels for the kmi4 layouts.
 *
 * kmi4 (down projection, neuron-major): live neurons are taken four at a
 * time within a 32-neuron K-block; their 64-byte tiles (128 outputs each) are
 * interleaved in registers (two rounds of unpacks) so that every 32-bit lane
 * holds the four neurons' nibbles for one output, and vpdpbusd multiplies
 * them by the four int8 activations broadcast. Time falls with the number of
 * live neurons, not with live 32-groups. The high nibble is used in place
 * (masked, not shifted): its products are 16x, undone by the float scale.
 * At the end of a K-block the int32 sums, minus 8 x (sum of the quad
 * activations) for the -8 offset, are scaled by s[o,kb] * d_h[kb].
 *
 * kmi4r (rows): a 512-weight tile is four 64-byte vectors whose lane i holds
 * 4 weights of block i, so vpdpbusd accumulates whole blocks in lanes and one
 * multiply by the 16 block scales finishes the tile. */
#include <immintrin.h>

#include "../srt_kern.h"

#define KD_MAX_QUADS 8  /* 32 neurons per K-block */
#define KD_CHUNK 16     /* output tiles accumulated per pass (2048 outputs) */
#define KD_AHEAD 32     /* prefetch distance in live entries (into L2) */
#define KR_AHEAD 6      /* kmi4r: prefetch distance in rows (into L2) */

static inline int64_t entry(const srt_kd_job *j, int64_t p) { return j->idx ? (int64_t)j->idx[p] : p; }

static void kd_avx512(const srt_kd_job *j, int64_t p0, int64_t p1, float *y) {
    const int64_t rp = j->rows_pad, bb = rp * 18, vb = rp / 2;
    const int64_t n = p1, t0 = 0, t1 = j->rows_pad / SRT_KD_TILE;
    const int8_t *hq = j->h->q;
    const __m512i m_lo = _mm512_set1_epi8(0x0f), m_hi = _mm512_set1_epi8((char)0xf0);
    _Alignas(64) float acc[KD_CHUNK * SRT_KD_TILE];
    for (int64_t c0 = t0; c0 < t1; c0 += KD_CHUNK) {
        const int64_t c1 = c0 + KD_CHUNK < t1 ? c0 + KD_CHUNK : t1;
        for (int64_t i = 0; i < (c1 - c0) * SRT_KD_TILE; i += 16) _mm512_store_ps(acc + i, _mm512_setzero_ps());
        for (int64_t f = p0; f < n && f < p0 + KD_AHEAD; f++) {
            int64_t ch = entry(j, f);
            const uint8_t *b = j->w + (ch / SRT_QK) * bb, *v = b + 2 * rp + (ch % SRT_QK) * vb;
            for (int64_t t = c0; t < c1; t++) {
                _mm_prefetch((const char *)(v + 64 * t), _MM_HINT_T1);
                if (f % SRT_QK == 0)
                    for (int l = 0; l < 4; l++) _mm_prefetch((const char *)(b + 256 * t + 64 * l), _MM_HINT_T1);
            }
        }
        int64_t p = p0;
        while (p < n) {
            const int64_t kb = entry(j, p) / SRT_QK;
            int64_t e = p;
            while (e < n && entry(j, e) / SRT_QK == kb) e++;
            const uint8_t *blk = j->w + kb * bb, *vec0 = blk + 2 * rp;
            const int nq = (int)((e - p + 3) / 4);
            const uint8_t *ptr[KD_MAX_QUADS][4];
            int32_t abc[KD_MAX_QUADS], S = 0;
            for (int q = 0; q < nq; q++) {
                uint32_t word = 0;
                for (int r = 0; r < 4; r++) {
                    int64_t pos = p + 4 * q + r;
                    if (pos < e) {
                        int64_t ch = entry(j, pos);
                        ptr[q][r] = vec0 + (ch % SRT_QK) * vb;
                        word |= (uint32_t)(uint8_t)hq[ch] << (8 * r);
                        S += hq[ch];
                    } else {
                        ptr[q][r] = ptr[q][0]; /* padding: zero activation */
                    }
                }
                abc[q] = (int32_t)word;
            }
            /* Prefetch: the entries [p + AHEAD, e + AHEAD) - one window per
             * K-block, so every live line is prefetched once - a tile at a
             * time, with the scales of the K-blocks they fall in. */
            const uint8_t *pf[SRT_QK], *pf_sc[SRT_QK];
            int npf = 0, nsc = 0;
            for (int64_t f = p + KD_AHEAD; f < e + KD_AHEAD && f < n; f++) {
                int64_t ch = entry(j, f);
                const uint8_t *b = j->w + (ch / SRT_QK) * bb;
                pf[npf++] = b + 2 * rp + (ch % SRT_QK) * vb;
                if (nsc == 0 || pf_sc[nsc - 1] != b) pf_sc[nsc++] = b;
            }
            const float dk = j->h->d[kb];
            const __m512 d_lo = _mm512_set1_ps(dk), d_hi = _mm512_set1_ps(dk * 0.0625f);
            const __m512i off_lo = _mm512_set1_epi32(8 * S), off_hi = _mm512_set1_epi32(128 * S);
            for (int64_t t = c0; t < c1; t++) {
                /* the -8 offset of the quads' activations, as the sums' starting value */
                __m512i lo0 = _mm512_sub_epi32(_mm512_setzero_si512(), off_lo), lo1 = lo0, lo2 = lo0, lo3 = lo0;
                __m512i hi0 = _mm512_sub_epi32(_mm512_setzero_si512(), off_hi), hi1 = hi0, hi2 = hi0, hi3 = hi0;
                const int64_t to = t * 64;
#define KD_QUAD(q)                                                                                          \
    do {                                                                                                    \
        const __m512i A = _mm512_loadu_si512(ptr[q][0] + to), B = _mm512_loadu_si512(ptr[q][1] + to);      \
        const __m512i C = _mm512_loadu_si512(ptr[q][2] + to), D = _mm512_loadu_si512(ptr[q][3] + to);      \
        const __m512i a = _mm512_set1_epi32(abc[q]);                                                        \
        const __m512i u0 = _mm512_unpacklo_epi8(A, B), u1 = _mm512_unpackhi_epi8(A, B);                     \
        const __m512i u2 = _mm512_unpacklo_epi8(C, D), u3 = _mm512_unpackhi_epi8(C, D);                     \
        const __m512i q0 = _mm512_unpacklo_epi16(u0, u2), q1 = _mm512_unpackhi_epi16(u0, u2);               \
        const __m512i q2 = _mm512_unpacklo_epi16(u1, u3), q3 = _mm512_unpackhi_epi16(u1, u3);               \
        lo0 = _mm512_dpbusd_epi32(lo0, _mm512_and_si512(q0, m_lo), a);                                      \
        hi0 = _mm512_dpbusd_epi32(hi0, _mm512_and_si512(q0, m_hi), a);                                      \
        lo1 = _mm512_dpbusd_epi32(lo1, _mm512_and_si512(q1, m_lo), a);                                      \
        hi1 = _mm512_dpbusd_epi32(hi1, _mm512_and_si512(q1, m_hi), a);                                      \
        lo2 = _mm512_dpbusd_epi32(lo2, _mm512_and_si512(q2, m_lo), a);                                      \
        hi2 = _mm512_dpbusd_epi32(hi2, _mm512_and_si512(q2, m_hi), a);                                      \
        lo3 = _mm512_dpbusd_epi32(lo3, _mm512_and_si512(q3, m_lo), a);                                      \
        hi3 = _mm512_dpbusd_epi32(hi3, _mm512_and_si512(q3, m_hi), a);                                      \
    } while (0)
                int q = 0;
                for (; q + 1 < nq; q += 2) {
                    KD_QUAD(q);
                    KD_QUAD(q + 1);
                }
                if (q < nq) KD_QUAD(q);
#undef KD_QUAD
                for (int f = 0; f < npf; f++) _mm_prefetch((const char *)(pf[f] + to), _MM_HINT_T1);
                for (int f = 0; f < nsc; f++)
                    for (int l = 0; l < 4; l++) _mm_prefetch((const char *)(pf_sc[f] + 256 * t + 64 * l), _MM_HINT_T1);
                /* outputs 128t + 16m + lane (low nibbles) and + 64 (high) */
                float *ya = acc + (t - c0) * SRT_KD_TILE;
                const uint8_t *sc = blk + 2 * SRT_KD_TILE * t;
#define KD_EPI(m, LO, HI)                                                                                   \
    do {                                                                                                    \
        __m512 slo = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 32 * (m)))), d_lo); \
        __m512 shi =                                                                                        \
            _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 128 + 32 * (m)))), d_hi); \
        _mm512_store_ps(ya + 16 * (m),                                                                      \
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(LO), slo,              \
                                        _mm512_load_ps(ya + 16 * (m))));                                    \
        _mm512_store_ps(ya + 64 + 16 * (m),                                                                 \
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(HI), shi,              \
                                        _mm512_load_ps(ya + 64 + 16 * (m))));                               \
    } while (0)
                KD_EPI(0, lo0, hi0);
                KD_EPI(1, lo1, hi1);
                KD_EPI(2, lo2, hi2);
                KD_EPI(3, lo3, hi3);
#undef KD_EPI
            }
            p = e;
        }
        for (int64_t t = c0; t < c1; t++) {
            int64_t o0 = t * SRT_KD_TILE, cnt = j->rows - o0 < SRT_KD_TILE ? j->rows - o0 : SRT_KD_TILE;
            memcpy(y + o0, acc + (t - c0) * SRT_KD_TILE, (size_t)cnt * sizeof(float));
        }
    }
}

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
    int64_t i = i0;
    for (int64_t k = i0; k < i1 && k < i0 + KR_AHEAD; k++) { /* the first rows, before the loop's window reaches them */
        const uint8_t *pr = j->w + (j->idx ? (int64_t)j->idx[k] : k) * j->row_bytes;
        for (int64_t o = 0; o < j->row_bytes; o += 64) _mm_prefetch((const char *)(pr + o), _MM_HINT_T0);
    }
    for (; i + 1 < i1; i += 2) {
        const int64_t r0 = j->idx ? j->idx[i] : i, r1 = j->idx ? j->idx[i + 1] : i + 1;
        const uint8_t *w0 = j->w + r0 * j->row_bytes, *w1 = j->w + r1 * j->row_bytes;
        if (!j->idx) { /* the pair of rows three pairs ahead, into L2 */
            const uint8_t *pf = w0 + KR_AHEAD * j->row_bytes;
            for (int64_t o = 0; o < 2 * j->row_bytes; o += 64) _mm_prefetch((const char *)(pf + o), _MM_HINT_T1);
        } else if (i + KR_AHEAD + 1 < i1) { /* gathered rows are scattered: the live rows as far ahead */
            for (int k = KR_AHEAD; k < KR_AHEAD + 2; k++) {
                const uint8_t *pr = j->w + (int64_t)j->idx[i + k] * j->row_bytes;
                for (int64_t o = 0; o < j->row_bytes; o += 64) _mm_prefetch((const char *)(pr + o), _MM_HINT_T1);
            }
        }
        __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
        for (int64_t T = 0; T < ntile; T++) {
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

static uint64_t stream_avx512(const uint8_t *p, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i + 256 <= n; i += 256) {
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
    k->rows_kmi4r = kr_avx512;
}
