/* arm_dot_body.h - the integer-dot kernels for AArch64, one body compiled
 * twice: kmi4_neon.c defines SRT_DOT with widening multiplies and pairwise
 * adds (plain Advanced SIMD), kmi4_dotprod.c with the sdot instruction. The
 * includer defines SRT_DOT(acc, w, a): acc (int32x4) += the 4-byte dot of
 * each lane of w and a (int8x16), and SRT_SFX(name) for symbol names.
 *
 * kmi4: a 128-bit lane L of a neuron tile holds outputs 16m + 4L + e (low
 * nibble) and 64 + 16m + 4L + e (high nibble) of byte 16L + 4m + e; two
 * rounds of zips interleave four live neurons so each 32-bit lane holds
 * their nibbles for one output (see kmi4_avx512.c). kmi8 (int8 values, k8)
 * is the same with bytes. */
#include <arm_neon.h>

#include "../srt_kern.h"
#include "arm_rows.h"

#define KD_MAX_QUADS 8
#define KD_CHUNK 16
#define KD_AHEAD 32

static inline int64_t SRT_SFX(entry)(const srt_kd_job *j, int64_t p) { return j->idx ? (int64_t)j->idx[p] : p; }

static inline float32x4_t SRT_SFX(half4)(const uint8_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}

static void SRT_SFX(kd)(const srt_kd_job *j, int64_t p0, int64_t p1, float *y) {
    const int64_t rp = j->rows_pad, bb = srt_kd_block_bytes(rp), vb = rp / 2;
    const int64_t n = p1;
    int64_t t0, t1;
    srt_kd_tiles_of(j, SRT_KD_TILE, rp / SRT_KD_TILE, &t0, &t1);
    const int8_t *hq = j->h->q;
    const uint8x16_t m_lo = vdupq_n_u8(0x0f);
    float acc[KD_CHUNK * SRT_KD_TILE];
    for (int64_t c0 = t0; c0 < t1; c0 += KD_CHUNK) {
        const int64_t c1 = c0 + KD_CHUNK < t1 ? c0 + KD_CHUNK : t1;
        srt_kd_start(j, acc, c0 * SRT_KD_TILE, (c1 - c0) * SRT_KD_TILE);
        int64_t p = p0;
        while (p < n) {
            const int64_t kb = SRT_SFX(entry)(j, p) / SRT_QK, e = srt_kd_run_end(j, p, n);
            const uint8_t *blk = j->w + kb * bb, *vec0 = blk + 2 * rp;
            const int nq = (int)((e - p + 3) / 4);
            const uint8_t *ptr[KD_MAX_QUADS][4];
            int32_t abc[KD_MAX_QUADS], S = 0;
            for (int q = 0; q < nq; q++) {
                uint32_t word = 0;
                for (int r = 0; r < 4; r++) {
                    int64_t pos = p + 4 * q + r;
                    if (pos < e) {
                        int64_t ch = SRT_SFX(entry)(j, pos);
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
                int64_t ch = SRT_SFX(entry)(j, f);
                pf[npf++] = j->w + (ch / SRT_QK) * bb + 2 * rp + (ch % SRT_QK) * vb;
            }
            const float dk = j->h->d[kb];
            const int32x4_t off = vdupq_n_s32(8 * S);
            for (int64_t t = c0; t < c1; t++) {
                float *ya = acc + (t - c0) * SRT_KD_TILE;
                const uint8_t *sc = blk + 2 * SRT_KD_TILE * t;
                for (int L = 0; L < 4; L++) {
                    const int64_t to = t * 64 + 16 * L;
                    int32x4_t l0 = vdupq_n_s32(0), l1 = l0, l2 = l0, l3 = l0, h0 = l0, h1 = l0, h2 = l0, h3 = l0;
                    for (int q = 0; q < nq; q++) {
                        const uint8x16_t A = vld1q_u8(ptr[q][0] + to), B = vld1q_u8(ptr[q][1] + to);
                        const uint8x16_t C = vld1q_u8(ptr[q][2] + to), D = vld1q_u8(ptr[q][3] + to);
                        const int8x16_t a = vreinterpretq_s8_s32(vdupq_n_s32(abc[q]));
                        const uint16x8_t u0 = vreinterpretq_u16_u8(vzip1q_u8(A, B));
                        const uint16x8_t u1 = vreinterpretq_u16_u8(vzip2q_u8(A, B));
                        const uint16x8_t u2 = vreinterpretq_u16_u8(vzip1q_u8(C, D));
                        const uint16x8_t u3 = vreinterpretq_u16_u8(vzip2q_u8(C, D));
                        const uint8x16_t q0 = vreinterpretq_u8_u16(vzip1q_u16(u0, u2));
                        const uint8x16_t q1 = vreinterpretq_u8_u16(vzip2q_u16(u0, u2));
                        const uint8x16_t q2 = vreinterpretq_u8_u16(vzip1q_u16(u1, u3));
                        const uint8x16_t q3 = vreinterpretq_u8_u16(vzip2q_u16(u1, u3));
                        SRT_DOT(l0, vreinterpretq_s8_u8(vandq_u8(q0, m_lo)), a);
                        SRT_DOT(h0, vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), a);
                        SRT_DOT(l1, vreinterpretq_s8_u8(vandq_u8(q1, m_lo)), a);
                        SRT_DOT(h1, vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), a);
                        SRT_DOT(l2, vreinterpretq_s8_u8(vandq_u8(q2, m_lo)), a);
                        SRT_DOT(h2, vreinterpretq_s8_u8(vshrq_n_u8(q2, 4)), a);
                        SRT_DOT(l3, vreinterpretq_s8_u8(vandq_u8(q3, m_lo)), a);
                        SRT_DOT(h3, vreinterpretq_s8_u8(vshrq_n_u8(q3, 4)), a);
                    }
                    const int32x4_t ls[4] = {l0, l1, l2, l3}, hs[4] = {h0, h1, h2, h3};
                    for (int m = 0; m < 4; m++) {
                        const int64_t ol = 16 * m + 4 * L, oh = 64 + ol;
                        const float32x4_t sl = vmulq_n_f32(SRT_SFX(half4)(sc + 2 * ol), dk);
                        const float32x4_t sh = vmulq_n_f32(SRT_SFX(half4)(sc + 2 * oh), dk);
                        vst1q_f32(ya + ol, vfmaq_f32(vld1q_f32(ya + ol), vcvtq_f32_s32(vsubq_s32(ls[m], off)), sl));
                        vst1q_f32(ya + oh, vfmaq_f32(vld1q_f32(ya + oh), vcvtq_f32_s32(vsubq_s32(hs[m], off)), sh));
                    }
                }
                for (int f = 0; f < npf; f++) __builtin_prefetch(pf[f] + t * 64);
            }
            p = e;
        }
        for (int64_t t = c0; t < c1; t++) {
            int64_t o0 = t * SRT_KD_TILE, cnt = j->rows - o0 < SRT_KD_TILE ? j->rows - o0 : SRT_KD_TILE;
            memcpy(y + o0, acc + (t - c0) * SRT_KD_TILE, (size_t)cnt * sizeof(float));
        }
    }
}

/* kmi8 (neuron-major int8, q8_0 values): lane L of a 64-output tile holds
 * output 16m + 4L + e in byte 16L + 4m + e, so the same two rounds of zips
 * of a quad's four 16-byte lanes put the quad's bytes of outputs
 * 16m + 4L + 0..3 in the four 32-bit lanes of q_m, natural order, and one
 * dot with the quad's four activations (a broadcast 32-bit word; a short
 * last quad repeats its first neuron with a zero activation) sums them
 * exactly: the values are signed, so no offset. Without sdot the byte pairs
 * go through int16 exactly (|a| <= 127: 2 x 128 x 127 fits).
 *
 * Memory order as x86_kmi4_body.h: a pass takes two quads of a K-block and
 * reads their eight columns together over a chunk of K8_CHUNK output tiles
 * (eight short sequential streams, not a tile swept across all 32 columns),
 * prefetching the same lines of the columns K8_AHEAD list positions ahead
 * into L1 and K8_FAR ahead into L2 (the x86 distances: not measured on ARM).
 * The chunk's int32 sums stay in an L1 buffer between passes (a K-block of
 * at most two quads never stores them); the last pass adds them times
 * s[o] d_h[kb] into the float outputs, K-block after K-block as ref_kmi8. */
#define K8_CHUNK 32 /* output tiles per pass (2048 outputs: 8 KB of sums, 8 KB of floats) */
#define K8_AHEAD 8  /* prefetch distances in list positions: one pass ahead into L1 */
#define K8_FAR 32   /* and four passes ahead into L2 */

/* The columns of the 4 NQ entries at list positions [f, f + 4 NQ), clamped to
 * the last, to prefetch. */
static inline void SRT_SFX(k8_ahead)(const srt_kd_job *j, int64_t f, int64_t p1, int NQ, int64_t bb,
                                     const uint8_t *pf[8]) {
    for (int r = 0; r < 4 * NQ; r++) {
        const int64_t ch = SRT_SFX(entry)(j, f + r < p1 ? f + r : p1 - 1);
        pf[r] = j->w + (ch / SRT_QK) * bb + 2 * j->rows_pad + (ch % SRT_QK) * j->rows_pad;
    }
}

/* One pass of NQ (1 or 2) quads over tiles [c0, c1): the int32 sums of
 * chunk output o in ia[o] (first: started from 0; last: finished into fa with
 * the K-block's scales sc times dk instead of stored). */
static inline __attribute__((always_inline)) void SRT_SFX(k8_pass)(const uint8_t *const *ptr, const int32_t *word,
                                                                   const int NQ, int64_t c0, int64_t c1, int32_t *ia,
                                                                   float *fa, const uint8_t *sc, float dk,
                                                                   const uint8_t *const *pf, const uint8_t *const *pg,
                                                                   const int first, const int last) {
    const int8x16_t av[2] = {vreinterpretq_s8_s32(vdupq_n_s32(word[0])),
                             vreinterpretq_s8_s32(vdupq_n_s32(word[NQ - 1]))};
    for (int64_t t = c0; t < c1; t++) {
        for (int r = 0; r < 4 * NQ; r++) {
            __builtin_prefetch(pf[r] + 64 * t, 0, 3);
            __builtin_prefetch(pg[r] + 64 * t, 0, 2);
        }
        for (int L = 0; L < 4; L++) {
            /* lane L's bytes in the columns; q_m's outputs are ob + 16m + 0..3 in the chunk */
            const int64_t to = 64 * t + 16 * L, ob = 64 * (t - c0) + 4 * L;
            int32x4_t s0, s1, s2, s3;
            if (first) {
                s0 = s1 = s2 = s3 = vdupq_n_s32(0);
            } else {
                s0 = vld1q_s32(ia + ob), s1 = vld1q_s32(ia + ob + 16);
                s2 = vld1q_s32(ia + ob + 32), s3 = vld1q_s32(ia + ob + 48);
            }
            for (int qq = 0; qq < NQ; qq++) {
                const uint8_t *const *pq = ptr + 4 * qq;
                const int8x16_t A = vld1q_s8((const int8_t *)(pq[0] + to)), B = vld1q_s8((const int8_t *)(pq[1] + to));
                const int8x16_t C = vld1q_s8((const int8_t *)(pq[2] + to)), D = vld1q_s8((const int8_t *)(pq[3] + to));
                const int16x8_t u0 = vreinterpretq_s16_s8(vzip1q_s8(A, B)), u1 = vreinterpretq_s16_s8(vzip2q_s8(A, B));
                const int16x8_t u2 = vreinterpretq_s16_s8(vzip1q_s8(C, D)), u3 = vreinterpretq_s16_s8(vzip2q_s8(C, D));
                const int8x16_t q0 = vreinterpretq_s8_s16(vzip1q_s16(u0, u2));
                const int8x16_t q1 = vreinterpretq_s8_s16(vzip2q_s16(u0, u2));
                const int8x16_t q2 = vreinterpretq_s8_s16(vzip1q_s16(u1, u3));
                const int8x16_t q3 = vreinterpretq_s8_s16(vzip2q_s16(u1, u3));
                SRT_DOT(s0, q0, av[qq]);
                SRT_DOT(s1, q1, av[qq]);
                SRT_DOT(s2, q2, av[qq]);
                SRT_DOT(s3, q3, av[qq]);
            }
            if (!last) {
                vst1q_s32(ia + ob, s0), vst1q_s32(ia + ob + 16, s1);
                vst1q_s32(ia + ob + 32, s2), vst1q_s32(ia + ob + 48, s3);
                continue;
            }
            const int32x4_t ss[4] = {s0, s1, s2, s3};
            const uint8_t *so = sc + 2 * (64 * t + 4 * L);
            for (int m = 0; m < 4; m++) {
                float *ya = fa + ob + 16 * m;
                const float32x4_t s = vmulq_n_f32(SRT_SFX(half4)(so + 32 * m), dk);
                vst1q_f32(ya, vfmaq_f32(vld1q_f32(ya), vcvtq_f32_s32(ss[m]), s));
            }
        }
    }
}

static void SRT_SFX(k8)(const srt_kd_job *j, int64_t p0, int64_t p1, float *y) {
    const int64_t rp = j->rows_pad, bb = srt_k8_block_bytes(j->rows);
    int64_t t0, nt; /* of the tiles holding outputs */
    srt_kd_tiles_of(j, SRT_K8_TILE, (j->rows + SRT_K8_TILE - 1) / SRT_K8_TILE, &t0, &nt);
    const int8_t *hq = j->h->q;
    float fa[K8_CHUNK * SRT_K8_TILE];
    int32_t ia[K8_CHUNK * SRT_K8_TILE];
    for (int64_t c0 = t0; c0 < nt; c0 += K8_CHUNK) {
        const int64_t c1 = c0 + K8_CHUNK < nt ? c0 + K8_CHUNK : nt, nc = c1 - c0;
        srt_kd_start(j, fa, c0 * SRT_K8_TILE, nc * SRT_K8_TILE);
        for (int64_t f = p0; f < p1 && f < p0 + K8_AHEAD; f++) { /* what the passes' look-ahead skips */
            const int64_t ch = SRT_SFX(entry)(j, f);
            const uint8_t *v = j->w + (ch / SRT_QK) * bb + 2 * rp + (ch % SRT_QK) * rp;
            for (int64_t t = c0; t < c1; t++) __builtin_prefetch(v + 64 * t, 0, 3);
            if (f == p0) /* and the first K-block's scales */
                for (int64_t o = 128 * c0; o < 128 * c1; o += 64)
                    __builtin_prefetch(j->w + (ch / SRT_QK) * bb + o, 0, 3);
        }
        int64_t p = p0;
        while (p < p1) {
            const int64_t kb = SRT_SFX(entry)(j, p) / SRT_QK, e = srt_kd_run_end(j, p, p1);
            const uint8_t *blk = j->w + kb * bb, *vec0 = blk + 2 * rp;
            if (e < p1) { /* the next K-block's scales for this pass, into L2 */
                const uint8_t *nsc = j->w + (SRT_SFX(entry)(j, e) / SRT_QK) * bb;
                for (int64_t o = 128 * c0; o < 128 * c1; o += 64) __builtin_prefetch(nsc + o, 0, 2);
            }
            const int nq = (int)((e - p + 3) / 4);
            const uint8_t *ptr[KD_MAX_QUADS * 4];
            int32_t word[KD_MAX_QUADS];
            for (int q = 0; q < nq; q++) {
                uint32_t wd = 0;
                for (int r = 0; r < 4; r++) {
                    const int64_t pos = p + 4 * q + r;
                    if (pos < e) {
                        const int64_t ch = SRT_SFX(entry)(j, pos);
                        ptr[4 * q + r] = vec0 + (ch % SRT_QK) * rp;
                        wd |= (uint32_t)(uint8_t)hq[ch] << (8 * r);
                    } else {
                        ptr[4 * q + r] = ptr[4 * q]; /* padding: zero activation */
                    }
                }
                word[q] = (int32_t)wd;
            }
            const float dk = j->h->d[kb];
            const uint8_t *pf[8], *pg[8];
#define K8_PASS(q, NQ, first, last)                                                                              \
    do {                                                                                                         \
        SRT_SFX(k8_ahead)(j, p + 4 * (q) + K8_AHEAD, p1, NQ, bb, pf);                                            \
        SRT_SFX(k8_ahead)(j, p + 4 * (q) + K8_FAR, p1, NQ, bb, pg);                                              \
        SRT_SFX(k8_pass)(ptr + 4 * (q), word + (q), NQ, c0, c1, ia, fa, blk, dk, pf, pg, first, last);          \
    } while (0)
            if (nq <= 2) {
                if (nq == 1) K8_PASS(0, 1, 1, 1);
                else K8_PASS(0, 2, 1, 1);
            } else {
                K8_PASS(0, 2, 1, 0);
                int q = 2;
                for (; q + 2 < nq; q += 2) K8_PASS(q, 2, 0, 0);
                if (q + 2 == nq) K8_PASS(q, 2, 0, 1);
                else K8_PASS(q, 1, 0, 1);
            }
#undef K8_PASS
            p = e;
        }
        const int64_t o0 = SRT_K8_TILE * c0, cnt = j->rows - o0 < nc * SRT_K8_TILE ? j->rows - o0 : nc * SRT_K8_TILE;
        memcpy(y + o0, fa, (size_t)cnt * sizeof(float));
    }
}

/* kmi4r rows: a 16-byte quarter of each of the tile's four vectors covers
 * four blocks (one per 32-bit lane). kr_prep unpacks quarter k of tile T of a
 * row (the 16 bytes at 64p + 16k of each vector p: low and high nibbles),
 * kr_dot dots them with one input's q (lane e: block 16T + 4k + e's sum, from
 * the offset -8 sum), and srt_arm_kr_step adds it times the scales; the
 * multi-input kernel unpacks once for four inputs. */
static inline void SRT_SFX(kr_prep)(const uint8_t *wt, int k, int8x16_t lo[4], int8x16_t hi[4]) {
    const uint8x16_t m_lo = vdupq_n_u8(0x0f);
    for (int p = 0; p < 4; p++) {
        const uint8x16_t v = vld1q_u8(wt + 64 * p + 16 * k);
        lo[p] = vreinterpretq_s8_u8(vandq_u8(v, m_lo));
        hi[p] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
}

static inline int32x4_t SRT_SFX(kr_dot)(const int8x16_t lo[4], const int8x16_t hi[4], const srt_act *a, int64_t T,
                                        int k) {
    const int8_t *aq = a->q + 512 * T + 16 * k;
    int32x4_t s = srt_arm_kr_off(a, 16 * T + 4 * k);
    for (int p = 0; p < 4; p++) {
        SRT_DOT(s, lo[p], vld1q_s8(aq + 64 * p));
        SRT_DOT(s, hi[p], vld1q_s8(aq + 256 + 64 * p));
    }
    return s;
}

static void SRT_SFX(kr)(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t cp = j->cols, ntile = cp / SRT_KR_TILE;
    const srt_act *a = j->xq;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *w = j->w + r * j->row_bytes, *sc = w + cp / 2;
        float32x4_t acc = vdupq_n_f32(0.0f);
        for (int64_t T = 0; T < ntile; T++)
            for (int k = 0; k < 4; k++) {
                int8x16_t lo[4], hi[4];
                SRT_SFX(kr_prep)(w + 256 * T, k, lo, hi);
                const int64_t b = 16 * T + 4 * k;
                acc = srt_arm_kr_step(acc, SRT_SFX(kr_dot)(lo, hi, a, T, k), a, b, srt_arm_half4(sc + 2 * b));
            }
        j->y[r] = vaddvq_f32(acc);
    }
}

/* Prefill: kr for four inputs at once (each input's sums its own, in the same
 * order: the same bits per input), so a quarter tile is loaded and unpacked
 * once for four inputs; a short last group repeats its last input and drops
 * the copies. The first group prefetches the row j->pf.l1 ahead into L1
 * while it reads from memory (the x86 distance: not measured on ARM). */
static void SRT_SFX(kr_multi)(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec,
                              int64_t i0, int64_t i1) {
    const int64_t cp = j->cols, ntile = cp / SRT_KR_TILE, nl = j->row_bytes / 64;
    for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
        const srt_act *a[4];
        srt_multi_group(xq, nvec, v0, a);
        for (int64_t r = i0; r < i1; r++) {
            const uint8_t *w = j->w + r * j->row_bytes, *sc = w + cp / 2;
            const uint8_t *pf = v0 == 0 && r + j->pf.l1 < i1 ? w + j->pf.l1 * j->row_bytes : NULL;
            float32x4_t acc[4];
            for (int q = 0; q < 4; q++) acc[q] = vdupq_n_f32(0.0f);
            int64_t l = 0, due = 0;
            for (int64_t T = 0; T < ntile; T++) {
                srt_pf_l1_step(pf, &l, &due, nl, ntile);
                for (int k = 0; k < 4; k++) {
                    int8x16_t lo[4], hi[4];
                    SRT_SFX(kr_prep)(w + 256 * T, k, lo, hi);
                    const int64_t b = 16 * T + 4 * k;
                    const float32x4_t dw = srt_arm_half4(sc + 2 * b);
                    for (int q = 0; q < 4; q++)
                        acc[q] = srt_arm_kr_step(acc[q], SRT_SFX(kr_dot)(lo, hi, a[q], T, k), a[q], b, dw);
                }
            }
            for (int q = 0; q < 4 && v0 + q < nvec; q++) y[v0 + q][r] = vaddvq_f32(acc[q]);
        }
    }
}

/* GGML q4_0 / q8_0 rows: blocks of 32 as two int8x16 halves. */
static void SRT_SFX(rows_q4_0)(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK;
    const srt_act *a = j->xq;
    const uint8x16_t m_lo = vdupq_n_u8(0x0f);
    const int8x16_t eight = vdupq_n_s8(8);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *row = j->w + r * j->row_bytes;
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * SRT_Q4_BYTES;
            const uint8x16_t v = vld1q_u8(blk + SRT_BLK_QS);
            const int8x16_t w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(v, m_lo)), eight);
            const int8x16_t w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(v, 4)), eight);
            int32x4_t s = vdupq_n_s32(0);
            SRT_DOT(s, w0, vld1q_s8(a->q + 32 * b));
            SRT_DOT(s, w1, vld1q_s8(a->q + 32 * b + 16));
            acc += (srt_fp16_to_fp32(srt_rd16(blk)) * a->d[b]) * (float)vaddvq_s32(s);
        }
        j->y[r] = acc;
    }
}

/* q8_0: block b's integer dot of one input's q with the block's two halves w0, w1. */
static inline int32x4_t SRT_SFX(q8_dot)(int8x16_t w0, int8x16_t w1, const int8_t *q) {
    int32x4_t s = vdupq_n_s32(0);
    SRT_DOT(s, w0, vld1q_s8(q));
    SRT_DOT(s, w1, vld1q_s8(q + 16));
    return s;
}

static void SRT_SFX(rows_q8_0)(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK;
    const srt_act *a = j->xq;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *row = j->w + r * j->row_bytes;
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * SRT_Q8_BYTES;
            const int32x4_t s = SRT_SFX(q8_dot)(vld1q_s8((const int8_t *)(blk + SRT_BLK_QS)),
                                                vld1q_s8((const int8_t *)(blk + SRT_BLK_QS + 16)), a->q + 32 * b);
            acc += (srt_arm_half1(blk) * a->d[b]) * (float)vaddvq_s32(s);
        }
        j->y[r] = acc;
    }
}

/* Prefill: rows_q8_0 for four inputs at once, a block loaded once for the
 * four; their integer dots land in the four lanes of one vector (exact), and
 * srt_arm_q8_step is rows_q8_0's float step lane by lane: the same bits per
 * input. A short last group repeats its last input and drops the copies. */
static void SRT_SFX(rows_q8_0_multi)(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec,
                                     int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK;
    for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
        const srt_act *a[4];
        srt_multi_group(xq, nvec, v0, a);
        for (int64_t r = i0; r < i1; r++) {
            const uint8_t *row = j->w + r * j->row_bytes;
            float32x4_t acc = vdupq_n_f32(0.0f);
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * SRT_Q8_BYTES;
                const int8x16_t w0 = vld1q_s8((const int8_t *)(blk + SRT_BLK_QS));
                const int8x16_t w1 = vld1q_s8((const int8_t *)(blk + SRT_BLK_QS + 16));
                int32x4_t s[4];
                for (int q = 0; q < 4; q++) s[q] = SRT_SFX(q8_dot)(w0, w1, a[q]->q + 32 * b);
                const int32x4_t S = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3])); /* lane q: input q */
                acc = srt_arm_q8_step(acc, srt_arm_half1(blk), srt_arm_d4(a, b), S);
            }
            srt_arm_put4(y, v0, nvec, r, acc);
        }
    }
}
