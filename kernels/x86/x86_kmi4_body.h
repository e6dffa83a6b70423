/* x86_kmi4_body.h - the kmi4 (neuron-major down projection) kernel for x86,
 * one body compiled per ISA: kmi4_avx512.c (512-bit vectors, vpdpbusd) and
 * kmi4_avx2.c (256-bit vectors, vpmaddubsw into int16 pair sums) define the
 * vector operations below and include this file (the pattern of
 * kernels/arm/arm_dot_body.h).
 *
 * The scheme: live neurons are taken four at a time (a quad) within a
 * 32-neuron K-block. A 64-byte neuron tile (128 outputs) has in byte
 * 16L + 4m + e the nibbles of outputs 16m + 4L + e (low) and 64 + 16m + 4L + e
 * (high); two rounds of byte/word unpacks of the quad's four tiles leave, in
 * every 32-bit lane of q_m, the four neurons' nibbles of one output, and a
 * four-way byte dot with the four int8 activations broadcast accumulates
 * them. At the end of a K-block the integer sums, minus 8 x (sum of the live
 * activations) for the -8 offset, are scaled by s[o, kb] * d_h[kb] into float.
 *
 * Memory order (what decides the speed: the kernel is bound by how many
 * lines it keeps in flight, and the hardware prefetchers do little for it):
 * a pass takes two quads and reads their eight vectors together from the
 * first tile to the last, eight short sequential streams, while it
 * prefetches the same lines of the next pass's eight vectors (and the next
 * K-block's scales) into L1 and those four passes ahead into L2. Sweeping a
 * tile across all 32 vectors of a K-block instead (the order before) ran
 * 1.2-1.3x the streaming floor dense against 1.06-1.11x now (the CLAWS
 * paper's cold 6144 -> 1536 GEMV, memory quiet; both 1.13x while other
 * processes saturated it), and a bare read of the same lines in that order
 * 1.24x against 1.08x. The K-block's integer sums live in an L1 buffer
 * between passes: the first pass starts them, the last finishes them into
 * the float outputs with the scales, and a K-block of at most two quads
 * never stores them.
 *
 * The includer defines:
 *   SRT_SFX(name)        symbol suffix
 *   VI, VF, VB           integer / float vector types, bytes per vector (32 or 64)
 *   VI_LOAD(p) VI_SET1(x) (32-bit)
 *   VI_UNPACKLO8/HI8/LO16/HI16(a, b)   unpacks within 128-bit lanes
 *   KD_LO(v), KD_HI(v)   the low / high nibbles as unsigned bytes; KD_HI_MUL is
 *                        the factor KD_HI leaves on them (16 in place, 1 shifted)
 *   KD_DOT(acc, w, a)    acc += the four-byte dots of w (unsigned) and a (signed)
 *   KD_INIT(off)         a fresh accumulator for a K-block whose offset is off
 *   KD_LO_FINAL(L, H, off_lo, off_hi), KD_HI_FINAL(H, off_hi)
 *                        the low / high sums as int32 lanes, offsets removed
 *                        (AVX-512 takes the whole byte as "low", lo + 16 hi,
 *                        and subtracts the high sum at the end: one AND less
 *                        per vector)
 *   VF_SCALES(p)         VB/4 fp16 values at p as floats
 *   KD_SEQ_L2_MAX        the longest vectors (bytes) whose L2 look-ahead goes in address order (kd_pass)
 *   VF_SET1 VF_LOAD VF_STORE VF_MUL VF_FMA VF_CVT (int32 -> float) */
#include "../srt_kern.h"

#define KD_MAX_QUADS 8 /* 32 neurons per K-block */
#define KD_NH (64 / VB) /* vectors per 64-byte tile */
#define KD_LANES (VB / 4)
/* Prefetch distances in quads (j->pf, srt_kern.h): every line twice, j->pf.l2
 * quads ahead into L2 (enough requests in flight when the memory is slow,
 * other processes reading too) and again j->pf.l1 ahead into L1. Either alone
 * ran 1.2x the floor dense and lost to the old order in turns with the
 * machine's load; both together 1.06-1.11x with the memory quiet, 6-9% faster
 * sparse (an Intel Xeon; L2 6 to 24 alike). */

static inline int64_t SRT_SFX(kd_entry)(const srt_kd_job *j, int64_t p) { return j->idx ? (int64_t)j->idx[p] : p; }

/* One pass over tiles [c0, c1) with NQ (1 or 2) quads: integer sums in ia
 * (first: started from the offsets; last: finished into the float outputs fa
 * with the K-block's scales sc). Every 64-byte step also prefetches one line
 * of each vector in pf (the quads j->pf.l1 ahead, into L1) and pf2 (j->pf.l2
 * ahead, into L2), and of their K-blocks' scales when those are new. */
static inline __attribute__((always_inline)) void SRT_SFX(kd_pass)(const uint8_t *const *ptr, const int32_t *word,
                                                                   const int NQ, int64_t c0, int64_t c1, VI *ia,
                                                                   float *fa, const uint8_t *sc, VF d_lo, VF d_hi,
                                                                   VI off_lo, VI off_hi, const uint8_t *const *pf,
                                                                   const uint8_t *pf_sc, const uint8_t *const *pf2,
                                                                   const uint8_t *pf2_sc, const int first,
                                                                   const int last) {
    const VI av[2] = {VI_SET1(word[0]), VI_SET1(word[NQ - 1])};
    /* When the vectors a look-ahead asks for are one run in memory (each the pass's whole span after the
     * last: a dense K-block, or consecutive live neurons), their lines go out in address order instead,
     * the same lines: one stream, not 4 NQ streams too short for the hardware to follow. Into L1 for
     * vectors of up to 1 KB (longer runs asked for in order sit in L1 a pass early, where the pass's sums
     * need the room), into L2 up to the includer's KD_SEQ_L2_MAX. Zen 4, dense kmi4, medians of 3-6
     * alternated rounds at one thread: 5632 -> 2048 (1 KB vectors) 1.48x -> 1.38x the streaming floor with
     * AVX-512, 1.56x -> 1.20x with AVX2; 5632 -> 1024 4-6% faster; 14336 -> 4096 (2 KB) 6-13% faster with
     * AVX2 in L2, 5% slower with AVX-512 (so its limit stays 1 KB). Sorted, distinct vectors at least a
     * vector apart (clamped ones repeat) span exactly (4 NQ - 1) x span only when they are consecutive and
     * a pass covers them whole. */
    const int64_t span = 64 * (c1 - c0), nl = 4 * NQ;
    const int run1 = c0 == 0 && span <= 1024 && pf[nl - 1] == pf[0] + (nl - 1) * span;
    const int run2 = c0 == 0 && span <= KD_SEQ_L2_MAX && pf2[nl - 1] == pf2[0] + (nl - 1) * span;
    for (int64_t t = c0; t < c1; t++)
        for (int h = 0; h < KD_NH; h++) {
            if (h == 0) {
                const int64_t seq = 64 * nl * (t - c0); /* this step's share of a run, in address order */
                for (int r = 0; r < nl; r++)
                    _mm_prefetch((const char *)(run1 ? pf[0] + seq + 64 * r : pf[r] + 64 * t), _MM_HINT_T0);
                for (int r = 0; r < nl; r++)
                    _mm_prefetch((const char *)(run2 ? pf2[0] + seq + 64 * r : pf2[r] + 64 * t), _MM_HINT_T1);
                if (pf2_sc)
                    for (int l = 0; l < 4; l++) _mm_prefetch((const char *)(pf2_sc + 256 * t + 64 * l), _MM_HINT_T1);
                if (pf_sc)
                    for (int l = 0; l < 4; l++) _mm_prefetch((const char *)(pf_sc + 256 * t + 64 * l), _MM_HINT_T0);
            }
            VI *acc = ia + ((t - c0) * KD_NH + h) * 8;
            VI l0, l1, l2, l3, h0, h1, h2, h3;
            if (first) {
                l0 = l1 = l2 = l3 = KD_INIT(off_lo);
                h0 = h1 = h2 = h3 = KD_INIT(off_hi);
            } else {
                l0 = acc[0], l1 = acc[1], l2 = acc[2], l3 = acc[3];
                h0 = acc[4], h1 = acc[5], h2 = acc[6], h3 = acc[7];
            }
            const int64_t to = 64 * t + VB * h;
            for (int qq = 0; qq < NQ; qq++) {
                const uint8_t *const *pq = ptr + 4 * qq;
                const VI a = av[qq];
                const VI A = VI_LOAD(pq[0] + to), B = VI_LOAD(pq[1] + to);
                const VI C = VI_LOAD(pq[2] + to), D = VI_LOAD(pq[3] + to);
                const VI u0 = VI_UNPACKLO8(A, B), u1 = VI_UNPACKHI8(A, B);
                const VI u2 = VI_UNPACKLO8(C, D), u3 = VI_UNPACKHI8(C, D);
                const VI q0 = VI_UNPACKLO16(u0, u2), q1 = VI_UNPACKHI16(u0, u2);
                const VI q2 = VI_UNPACKLO16(u1, u3), q3 = VI_UNPACKHI16(u1, u3);
                KD_DOT(l0, KD_LO(q0), a);
                KD_DOT(h0, KD_HI(q0), a);
                KD_DOT(l1, KD_LO(q1), a);
                KD_DOT(h1, KD_HI(q1), a);
                KD_DOT(l2, KD_LO(q2), a);
                KD_DOT(h2, KD_HI(q2), a);
                KD_DOT(l3, KD_LO(q3), a);
                KD_DOT(h3, KD_HI(q3), a);
            }
            if (!last) {
                acc[0] = l0, acc[1] = l1, acc[2] = l2, acc[3] = l3;
                acc[4] = h0, acc[5] = h1, acc[6] = h2, acc[7] = h3;
                continue;
            }
            /* outputs 128t + 16m + KD_LANES h + lane (low nibbles) and + 64 (high) */
            const int64_t ob = 128 * t + KD_LANES * h;
            float *ya = fa + (ob - 128 * c0);
#define KD_EPI(m, LO, HI)                                                                                         \
    do {                                                                                                          \
        const VF slo = VF_MUL(VF_SCALES(sc + 2 * (ob + 16 * (m))), d_lo);                                         \
        const VF shi = VF_MUL(VF_SCALES(sc + 2 * (ob + 64 + 16 * (m))), d_hi);                                    \
        VF_STORE(ya + 16 * (m), VF_FMA(VF_CVT(KD_LO_FINAL(LO, HI, off_lo, off_hi)), slo, VF_LOAD(ya + 16 * (m))));  \
        VF_STORE(ya + 64 + 16 * (m), VF_FMA(VF_CVT(KD_HI_FINAL(HI, off_hi)), shi, VF_LOAD(ya + 64 + 16 * (m))));   \
    } while (0)
            KD_EPI(0, l0, h0);
            KD_EPI(1, l1, h1);
            KD_EPI(2, l2, h2);
            KD_EPI(3, l3, h3);
#undef KD_EPI
        }
}

/* The vectors of the 4 NQ live entries at list positions [f, f + 4 NQ)
 * (clamped to the last), to prefetch, and the scales of the K-block the first
 * falls in (NULL when that block's were already asked for). */
static inline void SRT_SFX(kd_ahead)(const srt_kd_job *j, int64_t f, int64_t p1, int NQ, const uint8_t *pf[8],
                                     const uint8_t **pf_sc, const uint8_t **last_sc) {
    const int64_t rp = j->rows_pad, bb = srt_kd_block_bytes(rp), vb = rp / 2;
    for (int r = 0; r < 4 * NQ; r++) {
        const int64_t pos = f + r < p1 ? f + r : p1 - 1, ch = SRT_SFX(kd_entry)(j, pos);
        pf[r] = j->w + (ch / SRT_QK) * bb + 2 * rp + (ch % SRT_QK) * vb;
    }
    const int64_t ch = SRT_SFX(kd_entry)(j, f < p1 ? f : p1 - 1);
    const uint8_t *sc = j->w + (ch / SRT_QK) * bb;
    *pf_sc = sc != *last_sc ? sc : NULL;
    *last_sc = sc;
}

static void SRT_SFX(kd)(const srt_kd_job *j, int64_t p0, int64_t p1, float *y) {
    const int64_t rp = j->rows_pad, bb = srt_kd_block_bytes(rp), vb = rp / 2, pe = srt_kd_pf_end(j, p1);
    int64_t t0, nt;
    srt_kd_tiles_of(j, SRT_KD_TILE, rp / SRT_KD_TILE, &t0, &nt);
    const int8_t *hq = j->h->q;
    /* a pass's outputs: their float sums fa and a K-block's integer sums ia (in L1 at 16 tiles, 16 KB) */
    _Alignas(64) float fa[SRT_KD_PASS_MAX * SRT_KD_TILE];
    _Alignas(64) VI ia[SRT_KD_PASS_MAX * KD_NH * 8];
    const int64_t chunk = j->pass_tiles < 1 ? 1 : j->pass_tiles > SRT_KD_PASS_MAX ? SRT_KD_PASS_MAX : j->pass_tiles;
    for (int64_t c0 = t0; c0 < nt; c0 += chunk) {
        const int64_t c1 = c0 + chunk < nt ? c0 + chunk : nt;
        srt_kd_start(j, fa, c0 * SRT_KD_TILE, (c1 - c0) * SRT_KD_TILE);
        const uint8_t *last_sc = NULL, *last_sc2 = NULL;
        for (int64_t f = p0; f < p1 && f < p0 + 4 * (int64_t)j->pf.l1; f++) { /* what the passes' look-ahead skips */
            const int64_t ch = SRT_SFX(kd_entry)(j, f);
            const uint8_t *v = j->w + (ch / SRT_QK) * bb + 2 * rp + (ch % SRT_QK) * vb;
            for (int64_t t = c0; t < c1; t++) _mm_prefetch((const char *)(v + 64 * t), _MM_HINT_T0);
            if (f == p0)
                for (int64_t o = 256 * c0; o < 256 * c1; o += 64) _mm_prefetch((const char *)(j->w + (ch / SRT_QK) * bb + o), _MM_HINT_T0);
        }
        int64_t p = p0;
        while (p < p1) {
            const int64_t kb = SRT_SFX(kd_entry)(j, p) / SRT_QK, e = srt_kd_run_end(j, p, p1);
            const uint8_t *blk = j->w + kb * bb, *vec0 = blk + 2 * rp;
            const int nq = (int)((e - p + 3) / 4);
            const uint8_t *ptr[KD_MAX_QUADS * 4];
            int32_t word[KD_MAX_QUADS], S = 0;
            for (int q = 0; q < nq; q++) {
                uint32_t wd = 0;
                for (int r = 0; r < 4; r++) {
                    const int64_t pos = p + 4 * q + r;
                    if (pos < e) {
                        const int64_t ch = SRT_SFX(kd_entry)(j, pos);
                        ptr[4 * q + r] = vec0 + (ch % SRT_QK) * vb;
                        wd |= (uint32_t)(uint8_t)hq[ch] << (8 * r);
                        S += hq[ch];
                    } else {
                        ptr[4 * q + r] = ptr[4 * q]; /* padding: zero activation */
                    }
                }
                word[q] = (int32_t)wd;
            }
            const float dk = j->h->d[kb];
            const VF d_lo = VF_SET1(dk), d_hi = VF_SET1(dk / KD_HI_MUL);
            const VI off_lo = VI_SET1(8 * S), off_hi = VI_SET1(8 * KD_HI_MUL * S);
            /* passes of two quads (the last one alone when nq is odd) */
            const uint8_t *pf[8], *pf_sc, *pf2[8], *pf2_sc;
#define KD_PASS(q, NQ, first, last)                                                                               \
    do {                                                                                                          \
        SRT_SFX(kd_ahead)(j, p + 4 * (q) + 4 * (int64_t)j->pf.l1, pe, NQ, pf, &pf_sc, &last_sc);                  \
        SRT_SFX(kd_ahead)(j, p + 4 * (q) + 4 * (int64_t)j->pf.l2, pe, NQ, pf2, &pf2_sc, &last_sc2);                \
        SRT_SFX(kd_pass)(ptr + 4 * (q), word + (q), NQ, c0, c1, ia, fa, blk, d_lo, d_hi, off_lo, off_hi, pf, pf_sc, \
                         pf2, pf2_sc, first, last);                                                               \
    } while (0)
            if (nq <= 2) {
                if (nq == 1) KD_PASS(0, 1, 1, 1);
                else KD_PASS(0, 2, 1, 1);
            } else {
                KD_PASS(0, 2, 1, 0);
                int q = 2;
                for (; q + 2 < nq; q += 2) KD_PASS(q, 2, 0, 0);
                if (q + 2 == nq) KD_PASS(q, 2, 0, 1);
                else KD_PASS(q, 1, 0, 1);
            }
#undef KD_PASS
            p = e;
        }
        for (int64_t t = c0; t < c1; t++) {
            const int64_t o0 = t * SRT_KD_TILE, cnt = j->rows - o0 < SRT_KD_TILE ? j->rows - o0 : SRT_KD_TILE;
            memcpy(y + o0, fa + (t - c0) * SRT_KD_TILE, (size_t)cnt * sizeof(float));
        }
    }
}

