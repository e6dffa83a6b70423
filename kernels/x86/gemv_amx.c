/* gemv_amx.c - prefill with AMX int8 tiles: the q8_0 rows (16 weight rows x 16 inputs per tdpbssd)
 * and the kmi4 / kmi8 down projection (16 inputs x 16 outputs).
 *
 * q8_0 rows. Per block b of a tile of 16 rows: A = the rows' 32 values of block b (16 rows x 32 bytes, read in
 * place at the row stride), B = the inputs' values of the block (srt_q8_tiles: 8 rows x 64 bytes),
 * C = A B: the 16 x 16 exact integer dots w_b . x_b. Each is then scaled and added in the float order
 * every AVX-512 q8_0 row kernel keeps (SRT_Q8_LANES in srt_kern.h): lane b % 16 of the row's sum for
 * that input, so a row here is the single-input kernel's, bit for bit. The lanes live in acc[lane][row]
 * as vectors over the 16 inputs; at the tile's end they are added in the single kernel's pairs. */
#include <immintrin.h>
#include <string.h>

#include "../srt_kern.h"

/* the tiles (numbers, not enumerators: the intrinsics paste them into the instruction) */
#define T_C0 0
#define T_C1 1
#define T_A0 2
#define T_A1 3
#define T_B0 4
#define T_B1 5

typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static void tiles_configure(void) {
    _Alignas(64) tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = T_C0; t <= T_C1; t++) c.rows[t] = 16, c.colsb[t] = 64; /* 16 rows x 16 int32 */
    for (int t = T_A0; t <= T_A1; t++) c.rows[t] = 16, c.colsb[t] = 32; /* 16 rows x one block */
    for (int t = T_B0; t <= T_B1; t++) c.rows[t] = 8, c.colsb[t] = 64;  /* 32 values x 16 inputs */
    _tile_loadconfig(&c);
}

/* acc[b % 16][r] (vectors over the inputs) += C[r] * (dw[r] * d_b) for the 16 rows; the first block of
 * a lane starts it from +0, as the single kernel's zeroed accumulator. */
static inline void scale_add(float (*acc)[16][16], const int32_t (*cb)[16], const uint8_t *blk, const __m512i rowoff,
                             const float *d, int64_t b) {
    _Alignas(64) float dw[16];
    _mm512_store_ps(dw, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(rowoff, blk, 1))));
    const __m512 dx = _mm512_loadu_ps(d + 16 * b);
    float(*a)[16] = acc[b % 16];
    for (int r = 0; r < 16; r++) {
        const __m512 s = _mm512_mul_ps(_mm512_set1_ps(dw[r]), dx);
        const __m512 prev = b < 16 ? _mm512_setzero_ps() : _mm512_load_ps(a[r]);
        _mm512_store_ps(a[r], _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb[r])), s, prev));
    }
}

#define TILE_STEP(C, A, B, blk, bq, out)                                                                    \
    do {                                                                                                    \
        _tile_loadd(A, (blk) + SRT_BLK_QS, rb);                                                             \
        _tile_loadd(B, (bq), 64);                                                                           \
        _tile_zero(C);                                                                                      \
        _tile_dpbssd(C, A, B);                                                                              \
        _tile_stored(C, (out), 64);                                                                         \
    } while (0)

/* Software prefetch distance in blocks: the tile reads 16 rows at once, sixteen streams the hardware
 * prefetchers leave waiting on memory without it. */
#define AMX_AHEAD 24

static void rows_q8_0_tiles_amx(const srt_rows_job *j, const srt_q8_tiles *t, float *const *y, int64_t i0,
                                int64_t i1) {
    const int64_t nb = t->nblk, rb = j->row_bytes;
    _Alignas(64) float acc[16][16][16]; /* [lane][row][input] */
    _Alignas(64) int32_t cb[4][16][16]; /* block b's dots in cb[b % 4] */
    tiles_configure();
    _Alignas(64) int32_t off[16];
    for (int r = 0; r < 16; r++) off[r] = (int32_t)(r * rb);
    const __m512i rowoff = _mm512_load_si512(off);
    for (int64_t r0 = i0; r0 + 16 <= i1; r0 += 16) {
        const uint8_t *w = j->w + r0 * rb;
        for (int64_t l = nb; l < 16; l++) memset(acc[l], 0, sizeof acc[l]); /* lanes no block reaches */
        /* block b + 2's tiles go out before block b is scaled, so the tile unit and the vector units
         * overlap (C0 takes the even blocks, C1 the odd) */
#define ISSUE(b)                                                                                          \
    do {                                                                                                  \
        if ((b) & 1) TILE_STEP(T_C1, T_A1, T_B1, w + (b) * SRT_Q8_BYTES, t->q + 512 * (b), cb[(b) % 4]);   \
        else TILE_STEP(T_C0, T_A0, T_B0, w + (b) * SRT_Q8_BYTES, t->q + 512 * (b), cb[(b) % 4]);           \
    } while (0)
        ISSUE(0);
        if (nb > 1) ISSUE(1);
        for (int64_t b = 0; b < nb; b++) {
            /* the 16 rows AMX_AHEAD blocks on, running on into the next tile's rows */
            const int64_t ahead = b + AMX_AHEAD;
            const uint8_t *pf = ahead < nb ? w + ahead * SRT_Q8_BYTES
                                : r0 + 32 <= i1 ? w + 16 * rb + (ahead - nb) * SRT_Q8_BYTES : NULL;
            if (pf)
                for (int r = 0; r < 16; r++) _mm_prefetch((const char *)(pf + r * rb), _MM_HINT_T0);
            if (b + 2 < nb) ISSUE(b + 2);
            scale_add(acc, (const int32_t(*)[16])cb[b % 4], w + b * SRT_Q8_BYTES, rowoff, t->d, b);
        }
#undef ISSUE
        /* the lanes added in the single kernel's pairs: l + l + 8, + 4, + 2, + 1 */
        for (int r = 0; r < 16; r++) {
            __m512 s8[8], s4[4], s2[2];
            for (int l = 0; l < 8; l++) s8[l] = _mm512_add_ps(_mm512_load_ps(acc[l][r]), _mm512_load_ps(acc[l + 8][r]));
            for (int l = 0; l < 4; l++) s4[l] = _mm512_add_ps(s8[l], s8[l + 4]);
            for (int l = 0; l < 2; l++) s2[l] = _mm512_add_ps(s4[l], s4[l + 2]);
            _Alignas(64) float out[16];
            _mm512_store_ps(out, _mm512_add_ps(s2[0], s2[1]));
            for (int64_t v = 0; v < t->nvec; v++) y[v][r0 + r] = out[v];
        }
    }
    _tile_release();
}

/* ---- kmi4 / kmi8 (the down projection): A = the inputs' 32 values of a K-block (16 inputs x 32 bytes,
 * the dead neurons' zeroed), B = the block's weights of 16 outputs in the tile's layout (8 rows of
 * 16 x 4 bytes: row g has the quad 4g .. 4g + 3's weights of each output), built from the block's
 * four-vector quads with the kmi4 / kmi8 kernels' own byte and word unpacks (the layouts store a
 * tile's outputs so that these leave them in order: docs/LAYOUTS.md; kmi4's nibbles minus 8 as
 * signed bytes); C = A B, the exact integer dots of 16 inputs x 16 outputs, scaled and added per
 * output as those kernels add a K-block: out = fma(dot, s_o * d_v, out) (kmi4's high-nibble outputs
 * as its AVX-512 kernel has them: fma(16 dot, s_o * (d_v / 16), out), the same bits). ---- */

#define K_C0 0
#define K_C1 1
#define K_C2 2
#define K_C3 3
#define K_A 4
#define K_B0 5
#define K_B1 6

static void kd_tiles_configure(void) {
    _Alignas(64) tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = K_C0; t <= K_C3; t++) c.rows[t] = 16, c.colsb[t] = 64; /* 16 inputs x 16 outputs */
    c.rows[K_A] = 16, c.colsb[K_A] = 32;                                  /* 16 inputs x 32 values */
    for (int t = K_B0; t <= K_B1; t++) c.rows[t] = 8, c.colsb[t] = 64;  /* 32 values x 16 outputs */
    _tile_loadconfig(&c);
}

/* The B tiles of one 64-byte vector tile (at offset off) of the K-block's 32 vectors from v0 (stride
 * vs): kmi8, 64 outputs in bt[0..3]; kmi4, 128 outputs, the low nibbles' 64 in bt[0..3], the high
 * nibbles' in bt[4..7]. */
static inline void kd_b_tiles(int8_t (*bt)[512], const uint8_t *v0, int64_t vs, int64_t off, bool k4) {
    const __m512i nib = _mm512_set1_epi8(0x0f), eight = _mm512_set1_epi8(8);
    for (int g = 0; g < 8; g++) {
        const uint8_t *c = v0 + 4 * g * vs + off;
        const __m512i a = _mm512_loadu_si512(c), b = _mm512_loadu_si512(c + vs), cc = _mm512_loadu_si512(c + 2 * vs),
                      d = _mm512_loadu_si512(c + 3 * vs);
        const __m512i u0 = _mm512_unpacklo_epi8(a, b), u1 = _mm512_unpackhi_epi8(a, b);
        const __m512i u2 = _mm512_unpacklo_epi8(cc, d), u3 = _mm512_unpackhi_epi8(cc, d);
        /* q_m's 32-bit lane l: output 16 m + l's four bytes (kmi4: and output 64 + 16 m + l's in the high nibbles) */
        const __m512i q[4] = {_mm512_unpacklo_epi16(u0, u2), _mm512_unpackhi_epi16(u0, u2),
                              _mm512_unpacklo_epi16(u1, u3), _mm512_unpackhi_epi16(u1, u3)};
        for (int m = 0; m < 4; m++) {
            if (!k4) {
                _mm512_store_si512(bt[m] + 64 * g, q[m]);
                continue;
            }
            _mm512_store_si512(bt[m] + 64 * g, _mm512_sub_epi8(_mm512_and_si512(q[m], nib), eight));
            _mm512_store_si512(bt[4 + m] + 64 * g,
                               _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(q[m], 4), nib), eight));
        }
    }
}

static inline void kd_tiles_body(const srt_kd_job *j, const srt_kd_tiles *t, const int64_t *kb0, const int64_t *kb1,
                                 float *const *out, bool k4) {
    const int64_t rp = j->rows_pad, seg = k4 ? SRT_KD_TILE : SRT_K8_TILE;
    int64_t s0, ns;
    srt_kd_tiles_of(j, seg, rp / seg, &s0, &ns);
    const int64_t bb = k4 ? srt_kd_block_bytes(j->rows) : srt_k8_block_bytes(j->rows), vs = k4 ? rp / 2 : rp;
    int64_t lo = j->nblk, hi = 0;
    for (int64_t v = 0; v < t->nvec; v++)
        if (kb0[v] < kb1[v]) lo = kb0[v] < lo ? kb0[v] : lo, hi = kb1[v] > hi ? kb1[v] : hi;
    bool started[SRT_TILE_INPUTS] = {false};
    _Alignas(64) int8_t bt[8][512];
    _Alignas(64) int32_t cb[4][16][16];
    kd_tiles_configure();
    for (int64_t kb = lo; kb < hi; kb++) {
        uint32_t on = 0; /* the inputs that add this K-block */
        for (int64_t v = 0; v < t->nvec; v++)
            if (kb >= kb0[v] && kb < kb1[v] && t->live[SRT_TILE_INPUTS * kb + v]) on |= 1u << v;
        if (!on) continue;
        const uint8_t *blk = j->w + kb * bb, *vec0 = blk + 2 * rp;
        _tile_loadd(K_A, t->q + 512 * kb, 32);
        for (int64_t s = s0; s < ns; s++) {
            if (s + 2 < ns) /* the vectors' lines two steps on */
                for (int k = 0; k < 32; k++) _mm_prefetch((const char *)(vec0 + k * vs + 64 * (s + 2)), _MM_HINT_T0);
            kd_b_tiles(bt, vec0, vs, 64 * s, k4);
            for (int half = 0; half < (k4 ? 2 : 1); half++) {
                _tile_loadd(K_B0, bt[4 * half], 64);
                _tile_loadd(K_B1, bt[4 * half + 1], 64);
                _tile_zero(K_C0);
                _tile_zero(K_C1);
                _tile_dpbssd(K_C0, K_A, K_B0);
                _tile_dpbssd(K_C1, K_A, K_B1);
                _tile_loadd(K_B0, bt[4 * half + 2], 64);
                _tile_loadd(K_B1, bt[4 * half + 3], 64);
                _tile_zero(K_C2);
                _tile_zero(K_C3);
                _tile_dpbssd(K_C2, K_A, K_B0);
                _tile_dpbssd(K_C3, K_A, K_B1);
                _tile_stored(K_C0, cb[0], 64);
                _tile_stored(K_C1, cb[1], 64);
                _tile_stored(K_C2, cb[2], 64);
                _tile_stored(K_C3, cb[3], 64);
                for (int n = 0; n < 4; n++) {
                    const int64_t o = seg * s + 64 * half + 16 * n;
                    if (o >= j->rows) break;
                    const __mmask16 m = j->rows - o >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (j->rows - o)) - 1);
                    const __m512 sc = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 2 * o)));
                    for (int64_t v = 0; v < t->nvec; v++) {
                        if (!(on >> v & 1)) continue;
                        const float dv = t->d[SRT_TILE_INPUTS * kb + v];
                        __m512i dot = _mm512_load_si512(cb[n][v]);
                        if (half) dot = _mm512_slli_epi32(dot, 4);
                        const __m512 sv = _mm512_mul_ps(sc, _mm512_set1_ps(half ? dv / 16 : dv));
                        const __m512 prev = started[v] ? _mm512_maskz_loadu_ps(m, out[v] + o) : _mm512_setzero_ps();
                        _mm512_mask_storeu_ps(out[v] + o, m, _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sv, prev));
                    }
                }
            }
        }
        for (int64_t v = 0; v < t->nvec; v++) started[v] |= on >> v & 1;
    }
    _tile_release();
}

static void kmi4_tiles_amx(const srt_kd_job *j, const srt_kd_tiles *t, const int64_t *kb0, const int64_t *kb1,
                           float *const *out) {
    kd_tiles_body(j, t, kb0, kb1, out, true);
}

static void kmi8_tiles_amx(const srt_kd_job *j, const srt_kd_tiles *t, const int64_t *kb0, const int64_t *kb1,
                           float *const *out) {
    kd_tiles_body(j, t, kb0, kb1, out, false);
}

void srt_amx_register(srt_kernels *k) {
    k->rows_q8_0_tiles = rows_q8_0_tiles_amx;
    k->kmi4_tiles = kmi4_tiles_amx;
    k->kmi8_tiles = kmi8_tiles_amx;
}
