/* gguf_quant.c - see gguf_quant.h. One function per block type, each
 * dequantising one block; the arithmetic is the plain single-precision
 * product (and sum) the layout defines, in that order. */
#include "gguf_quant.h"

#include "common.h"

static float f16(const uint8_t *p) { return sc_f16_to_f32(sc_le16(p)); }

/* ---- 32-element blocks ---- */

static void q4_0(const uint8_t *b, float *y) {
    const float d = f16(b);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 0x0F) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

static void q4_1(const uint8_t *b, float *y) {
    const float d = f16(b), m = f16(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 0x0F) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

/* The fifth bits of Q5_0/Q5_1: bit j of qh belongs to value j (j < 32). */
static void q5_values(const uint8_t *qh4, const uint8_t *qs, int q[32]) {
    const uint32_t qh = sc_le32(qh4);
    for (int j = 0; j < 16; j++) {
        q[j] = (qs[j] & 0x0F) | (int)(((qh >> j) & 1u) << 4);
        q[j + 16] = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
    }
}

static void q5_0(const uint8_t *b, float *y) {
    const float d = f16(b);
    int q[32];
    q5_values(b + 2, b + 6, q);
    for (int j = 0; j < 32; j++) y[j] = (float)(q[j] - 16) * d;
}

static void q5_1(const uint8_t *b, float *y) {
    const float d = f16(b), m = f16(b + 2);
    int q[32];
    q5_values(b + 4, b + 8, q);
    for (int j = 0; j < 32; j++) y[j] = (float)q[j] * d + m;
}

static void q8_0(const uint8_t *b, float *y) {
    const float d = f16(b);
    for (int j = 0; j < 32; j++) y[j] = d * (float)(int8_t)b[2 + j];
}

/* ---- 256-element blocks ---- */

/* Scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K/Q5_K: for j < 4 the low 6 bits of
 * bytes j (scale) and j + 4 (min); for j >= 4 a nibble of byte j + 4 plus the top two bits of bytes j - 4
 * (scale) and j (min). */
static void scale_min_k4(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (uint8_t)((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
        *m = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

/* Q4_K (qh NULL) and Q5_K: sub-blocks 2i and 2i+1 share 32 bytes of qs (low, then high nibbles); the fifth
 * bit of value l of sub-block k is bit k of qh[l]. */
static void qk_45(const uint8_t *b, const uint8_t *qh, const uint8_t *qs, float *y) {
    const float d = f16(b), dmin = f16(b + 2);
    const uint8_t *scales = b + 4;
    for (int i = 0; i < 4; i++) {
        for (int h = 0; h < 2; h++) {
            const int k = 2 * i + h;
            uint8_t sc, m;
            scale_min_k4(k, scales, &sc, &m);
            const float dk = d * (float)sc, mk = dmin * (float)m;
            for (int l = 0; l < 32; l++) {
                int q = h ? qs[32 * i + l] >> 4 : qs[32 * i + l] & 0x0F;
                if (qh && (qh[l] >> k & 1)) q += 16;
                y[32 * k + l] = dk * (float)q - mk;
            }
        }
    }
}

static void q4_k(const uint8_t *b, float *y) { qk_45(b, NULL, b + 16, y); }
static void q5_k(const uint8_t *b, float *y) { qk_45(b, b + 16, b + 48, y); }

/* Q6_K: two halves of 128 values; in each, value l (< 32) of the four quarters takes its low 4 bits from
 * ql[l] / ql[l + 32] (low nibble: quarters 0, 1; high nibble: quarters 2, 3) and its top 2 bits from qh[l],
 * bits 2r..2r+1 for quarter r; sub-block (16 values) scales are int8. */
static void q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(const void *)(b + 192);
    const float d = f16(b + 208);
    for (int half = 0; half < 2; half++) {
        const uint8_t *l4 = ql + 64 * half, *h2 = qh + 32 * half;
        const int8_t *s = sc + 8 * half;
        float *o = y + 128 * half;
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q0 = ((l4[l] & 0x0F) | ((h2[l] >> 0 & 3) << 4)) - 32;
            const int q1 = ((l4[l + 32] & 0x0F) | ((h2[l] >> 2 & 3) << 4)) - 32;
            const int q2 = ((l4[l] >> 4) | ((h2[l] >> 4 & 3) << 4)) - 32;
            const int q3 = ((l4[l + 32] >> 4) | ((h2[l] >> 6 & 3) << 4)) - 32;
            o[l] = d * (float)s[is] * (float)q0;
            o[l + 32] = d * (float)s[is + 2] * (float)q1;
            o[l + 64] = d * (float)s[is + 4] * (float)q2;
            o[l + 96] = d * (float)s[is + 6] * (float)q3;
        }
    }
}

/* ---- the table ---- */

typedef struct qtype {
    size_t block, bytes;
    void (*fn)(const uint8_t *b, float *y);
} qtype;

static const qtype *qt(sc_dtype t) {
    static const qtype types[SC_DT_COUNT] = {
        [SC_DT_Q8_0] = {32, 34, q8_0}, [SC_DT_Q4_0] = {32, 18, q4_0}, [SC_DT_Q4_1] = {32, 20, q4_1},
        [SC_DT_Q5_0] = {32, 22, q5_0}, [SC_DT_Q5_1] = {32, 24, q5_1}, [SC_DT_Q4_K] = {256, 144, q4_k},
        [SC_DT_Q5_K] = {256, 176, q5_k}, [SC_DT_Q6_K] = {256, 210, q6_k},
    };
    return (unsigned)t < SC_DT_COUNT && types[t].fn ? &types[t] : NULL;
}

size_t sc_quant_block(sc_dtype t) { return qt(t) ? qt(t)->block : 0; }
size_t sc_quant_block_bytes(sc_dtype t) { return qt(t) ? qt(t)->bytes : 0; }

void sc_dequant(sc_dtype t, const uint8_t *src, size_t n, float *dst) {
    const qtype *q = qt(t);
    if (!q) return;
    for (size_t i = 0; i < n / q->block; i++) q->fn(src + i * q->bytes, dst + i * q->block);
}
