/* kmi4_avx2.c - AVX2 kernels for the kmi4 layouts (see kmi4_avx512.c for
 * the scheme). Without VNNI the four-way byte dot is vpmaddubsw (pairs into
 * int16) and the int16 pair sums of a whole K-block (at most 8 quads, so at
 * most 8 x 2 x 15 x 127 = 30480) are widened once with vpmaddwd. A 64-byte
 * neuron tile is two 32-byte halves (outputs 16m + 8h + 0..7 per half h). */
#include <immintrin.h>

#include "../srt_kern.h"

#define KD_MAX_QUADS 8
#define KD_CHUNK 16
#define KD_AHEAD 32

static inline int64_t entry(const srt_kd_job *j, int64_t p) { return j->idx ? (int64_t)j->idx[p] : p; }

static void kd_avx2(const srt_kd_job *j, int64_t p0, int64_t p1, float *y) {
    const int64_t rp = j->rows_pad, bb = rp * 18, vb = rp / 2;
    const int64_t n = p1, t0 = 0, t1 = j->rows_pad / SRT_KD_TILE;
    const int8_t *hq = j->h->q;
    const __m256i m_lo = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    _Alignas(64) float acc[KD_CHUNK * SRT_KD_TILE];
    for (int64_t c0 = t0; c0 < t1; c0 += KD_CHUNK) {
        const int64_t c1 = c0 + KD_CHUNK < t1 ? c0 + KD_CHUNK : t1;
        memset(acc, 0, sizeof(float) * (size_t)((c1 - c0) * SRT_KD_TILE));
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
                        ptr[q][r] = ptr[q][0];
                    }
                }
                abc[q] = (int32_t)word;
            }
            const uint8_t *pf[SRT_QK];
            int npf = 0;
            for (int64_t f = p + KD_AHEAD; f < e + KD_AHEAD && f < n; f++) {
                int64_t ch = entry(j, f);
                pf[npf++] = j->w + (ch / SRT_QK) * bb + 2 * rp + (ch % SRT_QK) * vb;
            }
            const __m256 dk = _mm256_set1_ps(j->h->d[kb]);
            const __m256i off = _mm256_set1_epi32(8 * S);
            for (int64_t t = c0; t < c1; t++) {
                float *ya = acc + (t - c0) * SRT_KD_TILE;
                const uint8_t *sc = blk + 2 * SRT_KD_TILE * t;
                for (int h = 0; h < 2; h++) {
                    const int64_t to = t * 64 + 32 * h;
                    __m256i l0 = _mm256_setzero_si256(), l1 = l0, l2 = l0, l3 = l0, h0 = l0, h1 = l0, h2 = l0, h3 = l0;
                    for (int q = 0; q < nq; q++) {
                        const __m256i A = _mm256_loadu_si256((const __m256i *)(ptr[q][0] + to));
                        const __m256i B = _mm256_loadu_si256((const __m256i *)(ptr[q][1] + to));
                        const __m256i C = _mm256_loadu_si256((const __m256i *)(ptr[q][2] + to));
                        const __m256i D = _mm256_loadu_si256((const __m256i *)(ptr[q][3] + to));
                        const __m256i a = _mm256_set1_epi32(abc[q]);
                        const __m256i u0 = _mm256_unpacklo_epi8(A, B), u1 = _mm256_unpackhi_epi8(A, B);
                        const __m256i u2 = _mm256_unpacklo_epi8(C, D), u3 = _mm256_unpackhi_epi8(C, D);
                        const __m256i q0 = _mm256_unpacklo_epi16(u0, u2), q1 = _mm256_unpackhi_epi16(u0, u2);
                        const __m256i q2 = _mm256_unpacklo_epi16(u1, u3), q3 = _mm256_unpackhi_epi16(u1, u3);
#define DOT(acc, v) acc = _mm256_add_epi16(acc, _mm256_maddubs_epi16(v, a))
                        DOT(l0, _mm256_and_si256(q0, m_lo));
                        DOT(h0, _mm256_and_si256(_mm256_srli_epi16(q0, 4), m_lo));
                        DOT(l1, _mm256_and_si256(q1, m_lo));
                        DOT(h1, _mm256_and_si256(_mm256_srli_epi16(q1, 4), m_lo));
                        DOT(l2, _mm256_and_si256(q2, m_lo));
                        DOT(h2, _mm256_and_si256(_mm256_srli_epi16(q2, 4), m_lo));
                        DOT(l3, _mm256_and_si256(q3, m_lo));
                        DOT(h3, _mm256_and_si256(_mm256_srli_epi16(q3, 4), m_lo));
#undef DOT
                    }
#define KD_EPI(m, L, H)                                                                                         \
    do {                                                                                                        \
        const int64_t ol = 16 * (m) + 8 * h, oh = 64 + 16 * (m) + 8 * h;                                       \
        const __m256 sl = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 2 * ol))), dk); \
        const __m256 sh = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 2 * oh))), dk); \
        const __m256i il = _mm256_sub_epi32(_mm256_madd_epi16(L, ones), off);                                   \
        const __m256i ih = _mm256_sub_epi32(_mm256_madd_epi16(H, ones), off);                                   \
        _mm256_store_ps(ya + ol, _mm256_fmadd_ps(_mm256_cvtepi32_ps(il), sl, _mm256_load_ps(ya + ol)));         \
        _mm256_store_ps(ya + oh, _mm256_fmadd_ps(_mm256_cvtepi32_ps(ih), sh, _mm256_load_ps(ya + oh)));         \
    } while (0)
                    KD_EPI(0, l0, h0);
                    KD_EPI(1, l1, h1);
                    KD_EPI(2, l2, h2);
                    KD_EPI(3, l3, h3);
#undef KD_EPI
                }
                for (int f = 0; f < npf; f++) _mm_prefetch((const char *)(pf[f] + t * 64), _MM_HINT_T0);
            }
            p = e;
        }
        for (int64_t t = c0; t < c1; t++) {
            int64_t o0 = t * SRT_KD_TILE, cnt = j->rows - o0 < SRT_KD_TILE ? j->rows - o0 : SRT_KD_TILE;
            memcpy(y + o0, acc + (t - c0) * SRT_KD_TILE, (size_t)cnt * sizeof(float));
        }
    }
}

/* ---- kmi4r rows: each 32-byte half of a tile covers 8 blocks in its lanes ---------- */

static inline __m256i kr_half(const uint8_t *w, const int8_t *a, const int32_t *sum) {
    const __m256i m_lo = _mm256_set1_epi8(0x0f);
    __m256i s16 = _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(w + 64 * p));
        const __m256i lo = _mm256_and_si256(v, m_lo), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m_lo);
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(a + 64 * p))));
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(a + 256 + 64 * p))));
    }
    const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1));
    return _mm256_sub_epi32(s32, _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)sum), 3));
}

static void kr_avx2(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t cp = j->cols, ntile = cp / SRT_KR_TILE;
    const srt_act *a = j->xq;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *w = j->w + r * j->row_bytes, *sc = w + cp / 2;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t T = 0; T < ntile; T++)
            for (int h = 0; h < 2; h++) {
                const int64_t b = 16 * T + 8 * h;
                const __m256i s = kr_half(w + 256 * T + 32 * h, a->q + 512 * T + 32 * h, a->sum + b);
                const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(sc + 2 * b))),
                                               _mm256_loadu_ps(a->d + b));
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
            }
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        s = _mm_add_ss(s, _mm_movehdup_ps(s));
        j->y[r] = _mm_cvtss_f32(s);
    }
}

static uint64_t stream_avx2(const uint8_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i + 128 <= n; i += 128) {
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
    k->rows_kmi4r = kr_avx2;
}
