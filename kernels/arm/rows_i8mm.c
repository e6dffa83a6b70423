/* rows_i8mm.c - the multi-input q8_0 and kmi4r row kernels of prefill with the Armv8.6 smmla
 * instruction (built with +i8mm, chosen only when the CPU reports it; the rest of the i8mm table
 * is dotprod's). smmla (vmmlaq_s32) takes two 16-byte operands as 2 x 8 int8 matrices A and B and
 * adds the 2 x 2 int32 product A B^T to its accumulator: lane 2i + j gets row i of A dotted with row
 * j of B. With A = 8 bytes each of two weight rows and B = the matching 8 bytes of two inputs, one
 * instruction does the 32 multiply-adds of two rows x two inputs, twice an sdot's 16.
 *
 * The integer block sums are exact whatever computes them, and the float steps are arm_rows.h's,
 * with the single-input kernels' operands in the same order: each input's outputs are bit for bit
 * those of the dotprod (and neon) single-input rows_q8_0 / kr for that input. A short last
 * group of inputs repeats its last input (srt_multi_group) and a short last tile of rows its last
 * row; the copies' results are dropped. Correctness is checked under qemu-user (test_kernels'
 * batch test); no ARM hardware was at hand, so neither kernel's speed has been measured. */
#include <arm_neon.h>

#include "../srt_kern.h"
#include "arm_rows.h"

/* Two rows' (or two inputs') 16 bytes x and y as the operands of two smmla: bytes 0-7 of each, and
 * bytes 8-15 of each. */
static inline int8x16_t pair_lo(int8x16_t x, int8x16_t y) {
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}
static inline int8x16_t pair_hi(int8x16_t x, int8x16_t y) {
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(x), vreinterpretq_s64_s8(y)));
}

/* ---- q8_0: four rows x four inputs per block ------------------------------------------------
 *
 * Per block, the four rows' 32 bytes become 2 row pairs x 4 smmla operands and the four inputs'
 * likewise, and 16 smmla give the 4 x 4 integer dots (the row pairs' 2 x 2 results put back together
 * as one vector per row, lane k: input k); then each row's srt_arm_q8_step, as the single-input
 * kernel's float step per lane. Against the dotprod multi-input kernel (one row at a time: 8 sdot
 * and three pairwise adds per row and block for four inputs) this is 4 smmla per row and block, at
 * the cost of 16 zips per four rows. */
#define Q8_ROWS 4

static void rows_q8_0_multi_i8mm(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec,
                                 int64_t i0, int64_t i1) {
    const int64_t nb = j->cols / SRT_QK;
    for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
        const srt_act *a[4];
        srt_multi_group(xq, nvec, v0, a);
        for (int64_t r0 = i0; r0 < i1; r0 += Q8_ROWS) {
            const uint8_t *row[Q8_ROWS];
            for (int i = 0; i < Q8_ROWS; i++) row[i] = j->w + (r0 + i < i1 ? r0 + i : i1 - 1) * j->row_bytes;
            float32x4_t acc[Q8_ROWS];
            for (int i = 0; i < Q8_ROWS; i++) acc[i] = vdupq_n_f32(0.0f);
            for (int64_t b = 0; b < nb; b++) {
                const int64_t o = b * SRT_Q8_BYTES + SRT_BLK_QS;
                int8x16_t wp[2][4], ap[2][4]; /* [row or input pair][8-byte quarter of the block] */
                for (int P = 0; P < 2; P++) {
                    const int8_t *x = (const int8_t *)(row[2 * P] + o), *z = (const int8_t *)(row[2 * P + 1] + o);
                    const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16), z0 = vld1q_s8(z), z1 = vld1q_s8(z + 16);
                    wp[P][0] = pair_lo(x0, z0), wp[P][1] = pair_hi(x0, z0);
                    wp[P][2] = pair_lo(x1, z1), wp[P][3] = pair_hi(x1, z1);
                    const int8_t *u = a[2 * P]->q + 32 * b, *t = a[2 * P + 1]->q + 32 * b;
                    const int8x16_t u0 = vld1q_s8(u), u1 = vld1q_s8(u + 16), t0 = vld1q_s8(t), t1 = vld1q_s8(t + 16);
                    ap[P][0] = pair_lo(u0, t0), ap[P][1] = pair_hi(u0, t0);
                    ap[P][2] = pair_lo(u1, t1), ap[P][3] = pair_hi(u1, t1);
                }
                int32x4_t c[2][2]; /* [row pair P][input pair Q]: rows 2P, 2P + 1 x inputs 2Q, 2Q + 1 */
                for (int P = 0; P < 2; P++)
                    for (int Q = 0; Q < 2; Q++) {
                        c[P][Q] = vdupq_n_s32(0);
                        for (int h = 0; h < 4; h++) c[P][Q] = vmmlaq_s32(c[P][Q], wp[P][h], ap[Q][h]);
                    }
                const float32x4_t d = srt_arm_d4(a, b);
                for (int P = 0; P < 2; P++) {
                    const int64x2_t c0 = vreinterpretq_s64_s32(c[P][0]), c1 = vreinterpretq_s64_s32(c[P][1]);
                    const int32x4_t s0 = vreinterpretq_s32_s64(vzip1q_s64(c0, c1)); /* row 2P, inputs 0-3 */
                    const int32x4_t s1 = vreinterpretq_s32_s64(vzip2q_s64(c0, c1)); /* row 2P + 1 */
                    acc[2 * P] = srt_arm_q8_step(acc[2 * P], srt_arm_half1(row[2 * P] + b * SRT_Q8_BYTES), d, s0);
                    acc[2 * P + 1] =
                        srt_arm_q8_step(acc[2 * P + 1], srt_arm_half1(row[2 * P + 1] + b * SRT_Q8_BYTES), d, s1);
                }
            }
            for (int i = 0; i < Q8_ROWS && r0 + i < i1; i++) srt_arm_put4(y, v0, nvec, r0 + i, acc[i]);
        }
    }
}

/* ---- kmi4r: two rows x four inputs per quarter tile, the inputs rearranged once per tile -------
 *
 * Quarter k of a tile holds, in each of its four 64-byte vectors p, the bytes 16k + 4e + 0..3 of
 * block e (e = 0..3): block e's 32 nibbles are four 4-byte groups, one per p, and their low and high
 * nibbles meet the input's q at 64p + 16k + 4e (low) and 256 + the same (high). smmla needs 8 bytes
 * of one block per row, so two rounds of 32-bit zips of two rows' raw bytes, (row 0, row 1) within
 * each p and then (p, p + 1), leave [row 0: block e's groups of p and p + 1, row 1: the same] in one
 * vector per block and p pair; masking and shifting it gives the low and high nibble operands. The
 * inputs' q go through the same two rounds, pairing inputs instead of rows; that depends on the
 * inputs and the tile only, so it is done once per tile for all rows (kr_acts_fill, into a buffer)
 * instead of once per row pair, and for that the loop runs over the tiles outside the rows of a
 * block of at most KR_ROWS, keeping each row's four running sums in a buffer between tiles (the
 * order of each sum's terms is still kr's: tiles ascending, quarters ascending within a tile).
 * Each smmla accumulator starts from the inputs' -8 sum (kr's nibble offset, exact in int32); four
 * of them, one per block of the quarter, transposed give per row and input the four blocks' sums in
 * kr's lanes, which srt_arm_kr_step finishes. */
#define KR_ROWS 32 /* rows per block: 2 KB of running sums (and 2.5 KB of rearranged inputs) */

/* Per quarter k and input pair Q of a tile: the 16 smmla operands [block e][p pair][low, high], then
 * the four accumulator starts [block e]: lanes (input 2Q, input 2Q + 1, input 2Q, input 2Q + 1) of
 * -8 sum of block 16T + 4k + e. */
typedef struct kr_acts {
    int8x16_t q[4][2][4][2][2];
    int32x4_t off[4][2][4];
} kr_acts;

static inline void zip32(int8x16_t x, int8x16_t y, int8x16_t *lo, int8x16_t *hi) {
    const int32x4_t a = vreinterpretq_s32_s8(x), b = vreinterpretq_s32_s8(y);
    *lo = vreinterpretq_s8_s32(vzip1q_s32(a, b));
    *hi = vreinterpretq_s8_s32(vzip2q_s32(a, b));
}

/* The two rounds of zips of two sources' quarter: x[s] + 64p (s = 0, 1; p = 0..3) to out[e][p pair]
 * = [source 0: block e's bytes of p = 2 pp and 2 pp + 1, source 1: the same]. */
static inline void kr_pairs(const int8_t *x0, const int8_t *x1, int8x16_t out[4][2]) {
    int8x16_t z[4][2]; /* [p][blocks 0-1, blocks 2-3] */
    for (int p = 0; p < 4; p++) zip32(vld1q_s8(x0 + 64 * p), vld1q_s8(x1 + 64 * p), &z[p][0], &z[p][1]);
    for (int pp = 0; pp < 2; pp++)
        for (int h = 0; h < 2; h++) zip32(z[2 * pp][h], z[2 * pp + 1][h], &out[2 * h][pp], &out[2 * h + 1][pp]);
}

static void kr_acts_fill(kr_acts *t, const srt_act *const a[4], int64_t T) {
    for (int k = 0; k < 4; k++)
        for (int Q = 0; Q < 2; Q++) {
            const srt_act *u = a[2 * Q], *v = a[2 * Q + 1];
            for (int h = 0; h < 2; h++) { /* low nibbles' q, high nibbles' q */
                int8x16_t o[4][2];
                kr_pairs(u->q + 512 * T + 256 * h + 16 * k, v->q + 512 * T + 256 * h + 16 * k, o);
                for (int e = 0; e < 4; e++)
                    for (int pp = 0; pp < 2; pp++) t->q[k][Q][e][pp][h] = o[e][pp];
            }
            const int64_t b = 16 * T + 4 * k;
            const int32x4_t su = srt_arm_kr_off(u, b), sv = srt_arm_kr_off(v, b);
            const int64x2_t lo = vreinterpretq_s64_s32(vzip1q_s32(su, sv));
            const int64x2_t hi = vreinterpretq_s64_s32(vzip2q_s32(su, sv));
            t->off[k][Q][0] = vreinterpretq_s32_s64(vdupq_laneq_s64(lo, 0));
            t->off[k][Q][1] = vreinterpretq_s32_s64(vdupq_laneq_s64(lo, 1));
            t->off[k][Q][2] = vreinterpretq_s32_s64(vdupq_laneq_s64(hi, 0));
            t->off[k][Q][3] = vreinterpretq_s32_s64(vdupq_laneq_s64(hi, 1));
        }
}

/* Rows w0, w1 (their bytes of tile T), quarter k, for the group's four inputs: the running sums
 * f[0][q] (row 0, input q) and f[1][q] advanced by the quarter's four blocks. */
static inline void kr_quarter(const uint8_t *w0, const uint8_t *w1, const uint8_t *sc0, const uint8_t *sc1, int64_t T,
                              int k, const kr_acts *t, const srt_act *const a[4], float32x4_t f[2][4]) {
    const uint8x16_t m_lo = vdupq_n_u8(0x0f);
    int8x16_t raw[4][2];
    kr_pairs((const int8_t *)(w0 + 256 * T + 16 * k), (const int8_t *)(w1 + 256 * T + 16 * k), raw);
    int8x16_t wn[4][2][2]; /* [block e][p pair][low, high nibbles] */
    for (int e = 0; e < 4; e++)
        for (int pp = 0; pp < 2; pp++) {
            const uint8x16_t v = vreinterpretq_u8_s8(raw[e][pp]);
            wn[e][pp][0] = vreinterpretq_s8_u8(vandq_u8(v, m_lo));
            wn[e][pp][1] = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
        }
    const int64_t b = 16 * T + 4 * k;
    const float32x4_t dw0 = srt_arm_half4(sc0 + 2 * b), dw1 = srt_arm_half4(sc1 + 2 * b);
    for (int Q = 0; Q < 2; Q++) {
        int32x4_t c[4]; /* block e: (row 0, input 2Q), (row 0, 2Q + 1), (row 1, 2Q), (row 1, 2Q + 1) */
        for (int e = 0; e < 4; e++) {
            c[e] = t->off[k][Q][e];
            for (int pp = 0; pp < 2; pp++)
                for (int h = 0; h < 2; h++) c[e] = vmmlaq_s32(c[e], wn[e][pp][h], t->q[k][Q][e][pp][h]);
        }
        /* transposed: per row and input, lane e = block b + e */
        const int32x4_t t0 = vtrn1q_s32(c[0], c[1]), t1 = vtrn2q_s32(c[0], c[1]);
        const int32x4_t t2 = vtrn1q_s32(c[2], c[3]), t3 = vtrn2q_s32(c[2], c[3]);
        const int64x2_t t0d = vreinterpretq_s64_s32(t0), t1d = vreinterpretq_s64_s32(t1);
        const int64x2_t t2d = vreinterpretq_s64_s32(t2), t3d = vreinterpretq_s64_s32(t3);
        const int32x4_t s00 = vreinterpretq_s32_s64(vzip1q_s64(t0d, t2d)); /* row 0, input 2Q */
        const int32x4_t s10 = vreinterpretq_s32_s64(vzip2q_s64(t0d, t2d)); /* row 1, input 2Q */
        const int32x4_t s01 = vreinterpretq_s32_s64(vzip1q_s64(t1d, t3d)); /* row 0, input 2Q + 1 */
        const int32x4_t s11 = vreinterpretq_s32_s64(vzip2q_s64(t1d, t3d)); /* row 1, input 2Q + 1 */
        f[0][2 * Q] = srt_arm_kr_step(f[0][2 * Q], s00, a[2 * Q], b, dw0);
        f[0][2 * Q + 1] = srt_arm_kr_step(f[0][2 * Q + 1], s01, a[2 * Q + 1], b, dw0);
        f[1][2 * Q] = srt_arm_kr_step(f[1][2 * Q], s10, a[2 * Q], b, dw1);
        f[1][2 * Q + 1] = srt_arm_kr_step(f[1][2 * Q + 1], s11, a[2 * Q + 1], b, dw1);
    }
}

static void kr_multi_i8mm(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec, int64_t i0,
                          int64_t i1) {
    const int64_t cp = j->cols, ntile = cp / SRT_KR_TILE, rb = j->row_bytes;
    kr_acts t;
    float32x4_t f[KR_ROWS][4]; /* per row of the block and input of the group: kr's running sums */
    for (int64_t v0 = 0; v0 < nvec; v0 += 4) {
        const srt_act *a[4];
        srt_multi_group(xq, nvec, v0, a);
        for (int64_t r0 = i0; r0 < i1; r0 += KR_ROWS) {
            const int64_t n = i1 - r0 < KR_ROWS ? i1 - r0 : KR_ROWS;
            for (int64_t i = 0; i < n + (n & 1); i++)
                for (int q = 0; q < 4; q++) f[i][q] = vdupq_n_f32(0.0f);
            for (int64_t T = 0; T < ntile; T++) {
                kr_acts_fill(&t, a, T);
                for (int64_t i = 0; i < n; i += 2) {
                    /* a short last pair repeats its row (into f[n], which is dropped) */
                    const uint8_t *w0 = j->w + (r0 + i) * rb, *w1 = i + 1 < n ? w0 + rb : w0;
                    if (v0 == 0 && T + 1 < ntile) /* the first group reads from memory: the next tile into L1 */
                        for (int l = 0; l < 4; l++) {
                            __builtin_prefetch(w0 + 256 * (T + 1) + 64 * l, 0, 3);
                            __builtin_prefetch(w1 + 256 * (T + 1) + 64 * l, 0, 3);
                        }
                    for (int k = 0; k < 4; k++) kr_quarter(w0, w1, w0 + cp / 2, w1 + cp / 2, T, k, &t, a, f + i);
                }
            }
            for (int64_t i = 0; i < n; i++)
                for (int q = 0; q < 4 && v0 + q < nvec; q++) y[v0 + q][r0 + i] = vaddvq_f32(f[i][q]);
        }
    }
}

void srt_i8mm_register(srt_kernels *k) {
    k->rows_q8_0_multi = rows_q8_0_multi_i8mm;
    k->rows_kmi4r_multi = kr_multi_i8mm;
}
