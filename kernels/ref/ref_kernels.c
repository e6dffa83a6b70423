/* ref_kernels.c - the scalar reference kernels: the specification every SIMD
 * kernel is tested against. Plain loops, no ISA flags, fixed summation
 * order. The arithmetic of each layout is stated once here:
 *   q8_0 / q4_0 / kmi4r rows: y[r] = sum_b (d_w[r,b] * d_x[b]) * isum_b, with
 *     isum_b the exact int32 dot of the block's weights (q, or q - 8 for
 *     int4) and the activation's int8 values;
 *   kmi4: y[o] = sum_kb (s[o,kb] * d_h[kb]) * sum_{j live in kb} (q[o,j] - 8) a_j;
 *   q4_0t axpy: y[o] = sum_{j live} (h_j * d[j, o/32]) * (q[j,o] - 8);
 *   zigzag: y[o] = sum over 32-channel blocks b of d_b * sum_{i live in b} c_i (q[o,i] - 8),
 *     with c_i = x_i * s[o/32, i] quantised per (block, group) to int8 (d_b its scale). */
#include <math.h>

#include "srt_ops.h"
#include "../srt_kern.h"

/* ---- block quantisers (GGML's reference arithmetic) -------------------------- */

void srt_q4_0_quantize_block(uint8_t out[SRT_Q4_BYTES], const float *x, int64_t stride) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < SRT_QK; j++) {
        const float v = x[j * stride];
        if (amax < fabsf(v)) {
            amax = fabsf(v);
            max = v;
        }
    }
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    uint16_t h = srt_fp32_to_fp16(d);
    memcpy(out, &h, 2);
    for (int j = 0; j < SRT_QK / 2; j++) {
        const float x0 = x[j * stride] * id, x1 = x[(j + 16) * stride] * id;
        const int8_t t0 = (int8_t)(x0 + 8.5f), t1 = (int8_t)(x1 + 8.5f);
        const uint8_t q0 = (uint8_t)(t0 < 15 ? t0 : 15), q1 = (uint8_t)(t1 < 15 ? t1 : 15);
        out[SRT_BLK_QS + j] = (uint8_t)(q0 | (q1 << 4));
    }
}

void srt_q8_0_quantize_block(uint8_t out[SRT_Q8_BYTES], const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < SRT_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / ((1 << 7) - 1);
    const float id = d ? 1.0f / d : 0.0f;
    uint16_t h = srt_fp32_to_fp16(d);
    memcpy(out, &h, 2);
    for (int j = 0; j < SRT_QK; j++) out[SRT_BLK_QS + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

float srt_act_q8_block(int8_t *q, int32_t *sum, const float *x) {
    float amax = 0.0f, fin = 0.0f;
    for (int j = 0; j < SRT_QK; j++) {
        float a = fabsf(x[j]);
        amax = a > amax ? a : amax;
        fin += x[j] - x[j]; /* 0 for finite x, NaN for NaN or inf */
    }
    if (fin != 0.0f) {
        memset(q, 0, SRT_QK);
        *sum = 0;
        return SRT_ACT_BAD_D;
    }
    float d = amax / 127.0f;
    const float id = d >= 1e-30f ? 1.0f / d : 0.0f;
    if (id == 0.0f) d = 0.0f;
    int32_t s = 0;
    for (int j = 0; j < SRT_QK; j++) {
        long v = lrintf(x[j] * id);
        v = v > 127 ? 127 : (v < -127 ? -127 : v);
        q[j] = (int8_t)v;
        s += (int32_t)v;
    }
    *sum = s;
    return d;
}

void srt_act_tile(int8_t *dst, const int8_t *src, int64_t cap) {
    for (int64_t t = 0; t < cap; t += SRT_KR_TILE)
        for (int i = 0; i < 16; i++)
            for (int m = 0; m < 8; m++) memcpy(dst + t + 64 * m + 4 * i, src + t + 32 * i + 4 * m, 4);
}

static void ref_act_q8(int8_t *q, float *d, int32_t *sum, const float *x, int64_t n) {
    for (int64_t b = 0; b < n / SRT_QK; b++) d[b] = srt_act_q8_block(q + b * SRT_QK, sum + b, x + b * SRT_QK);
}

/* ---- row dot products ------------------------------------------------------ */

static void ref_rows_f32(const srt_rows_job *j, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
        int64_t r = j->idx ? j->idx[i] : i;
        const float *w = (const float *)(const void *)(j->w + r * j->row_bytes);
        float acc = 0.0f;
        for (int64_t c = 0; c < j->cols; c++) acc += w[c] * j->xf[c];
        j->y[r] = acc;
    }
}

static void ref_rows_q8_0(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const srt_act *a = j->xq;
    for (int64_t i = i0; i < i1; i++) {
        int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *row = j->w + r * j->row_bytes;
        float acc = 0.0f;
        for (int64_t b = 0; b < j->cols / SRT_QK; b++) {
            const uint8_t *blk = row + b * SRT_Q8_BYTES;
            const int8_t *aq = a->q + b * SRT_QK;
            int32_t isum = 0;
            for (int k = 0; k < SRT_QK; k++) isum += (int8_t)blk[SRT_BLK_QS + k] * aq[k];
            acc += (srt_fp16_to_fp32(srt_rd16(blk)) * a->d[b]) * (float)isum;
        }
        j->y[r] = acc;
    }
}

static void ref_rows_q4_0(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const srt_act *a = j->xq;
    for (int64_t i = i0; i < i1; i++) {
        int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *row = j->w + r * j->row_bytes;
        float acc = 0.0f;
        for (int64_t b = 0; b < j->cols / SRT_QK; b++) {
            const uint8_t *blk = row + b * SRT_Q4_BYTES;
            const int8_t *aq = a->q + b * SRT_QK;
            int32_t isum = 0;
            for (int k = 0; k < 16; k++) {
                isum += ((blk[SRT_BLK_QS + k] & 15) - 8) * aq[k];
                isum += ((blk[SRT_BLK_QS + k] >> 4) - 8) * aq[k + 16];
            }
            acc += (srt_fp16_to_fp32(srt_rd16(blk)) * a->d[b]) * (float)isum;
        }
        j->y[r] = acc;
    }
}

/* kmi4r: block b = 16T + i; weight k = 4p + r (low nibble) or 16 + 4p + r
 * (high nibble) of byte 256T + 64p + 4i + r; the tiled activation holds
 * element k = 4m + r of block 16T + i at 512T + 64m + 4i + r. */
static void ref_rows_kmi4r(const srt_rows_job *j, int64_t i0, int64_t i1) {
    const srt_act *a = j->xq;
    const int64_t cp = j->cols, nb = cp / SRT_QK;
    for (int64_t i = i0; i < i1; i++) {
        int64_t r = j->idx ? j->idx[i] : i;
        const uint8_t *row = j->w + r * j->row_bytes, *sc = row + cp / 2;
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            int64_t T = b / 16, bi = b % 16;
            int32_t isum = 0;
            for (int p = 0; p < 4; p++)
                for (int rr = 0; rr < 4; rr++) {
                    uint8_t byte = row[256 * T + 64 * p + 4 * bi + rr];
                    int8_t alo = a->q[512 * T + 64 * p + 4 * bi + rr];
                    int8_t ahi = a->q[512 * T + 64 * (p + 4) + 4 * bi + rr];
                    isum += ((byte & 15) - 8) * alo + ((byte >> 4) - 8) * ahi;
                }
            acc += (srt_fp16_to_fp32(srt_rd16(sc + 2 * b)) * a->d[b]) * (float)isum;
        }
        j->y[r] = acc;
    }
}

/* ---- q4_0t axpy ------------------------------------------------------------ */

static void ref_axpy_q4_0t(const srt_axpy_job *j, int64_t b0, int64_t b1) {
    int64_t n = j->n_idx;
    for (int64_t b = b0; b < b1; b++) {
        float *y = j->y + b * SRT_QK;
        for (int k = 0; k < SRT_QK; k++) y[k] = 0.0f;
        for (int64_t p = 0; p < n; p++) {
            int64_t ch = j->idx ? j->idx[p] : p;
            const uint8_t *blk = j->w + ch * j->row_bytes + b * SRT_Q4_BYTES;
            const float c = j->h[ch] * srt_fp16_to_fp32(srt_rd16(blk));
            for (int k = 0; k < 16; k++) {
                y[k] += c * (float)((blk[SRT_BLK_QS + k] & 15) - 8);
                y[k + 16] += c * (float)((blk[SRT_BLK_QS + k] >> 4) - 8);
            }
        }
    }
}

/* ---- kmi4 (neuron-major down projection) ------------------------------------ */

/* Nibble of output o (within the padded rows) in a neuron vector. */
static inline int kd_nibble(const uint8_t *vec, int64_t o) {
    int64_t t = o / SRT_KD_TILE, oo = o % SRT_KD_TILE;
    int hi = oo >= 64;
    int64_t x = oo & 63, m = x / 16, L = (x % 16) / 4, e = x % 4;
    uint8_t byte = vec[64 * t + 16 * L + 4 * m + e];
    return hi ? byte >> 4 : byte & 15;
}

/* Signed byte of output o in a kmi8 column (docs/LAYOUTS.md: byte 16L + 4m + e of a 64-output tile
 * is output 16m + 4L + e). */
static inline int k8_byte(const uint8_t *vec, int64_t o) {
    int64_t t = o / SRT_K8_TILE, x = o % SRT_K8_TILE;
    return (int8_t)vec[64 * t + 16 * ((x % 16) / 4) + 4 * (x / 16) + x % 4];
}

/* kmi4 (K8 false: nibbles - 8) and kmi8 (K8: signed bytes): per output, each K-block run's exact
 * integer sum times s[o] d_h[kb], added K-block after K-block. */
static void ref_kd_any(const srt_kd_job *j, int64_t p0, int64_t p1, float *y, bool K8) {
    const int64_t rp = j->rows_pad, bb = K8 ? srt_k8_block_bytes(j->rows) : srt_kd_block_bytes(j->rows);
    const int64_t vb = K8 ? rp : rp / 2; /* a neuron's column */
    const int64_t o1 = j->o1 && j->o1 < j->rows ? j->o1 : j->rows;
    for (int64_t o = j->o0; o < o1; o++) {
        float acc = j->y0 ? j->y0[o] : 0.0f;
        int64_t p = p0;
        while (p < p1) {
            int64_t kb = (j->idx ? j->idx[p] : p) / SRT_QK;
            const uint8_t *blk = j->w + kb * bb;
            int32_t isum = 0;
            for (; p < p1; p++) {
                int64_t ch = j->idx ? j->idx[p] : p;
                if (ch / SRT_QK != kb) break;
                const uint8_t *vec = blk + 2 * rp + (ch % SRT_QK) * vb;
                isum += (K8 ? k8_byte(vec, o) : kd_nibble(vec, o) - 8) * j->h->q[ch];
            }
            acc += (srt_fp16_to_fp32(srt_rd16(blk + 2 * o)) * j->h->d[kb]) * (float)isum;
        }
        y[o] = acc;
    }
}

static void ref_kmi4(const srt_kd_job *j, int64_t p0, int64_t p1, float *y) { ref_kd_any(j, p0, p1, y, false); }
static void ref_kmi8(const srt_kd_job *j, int64_t p0, int64_t p1, float *y) { ref_kd_any(j, p0, p1, y, true); }

/* ---- zigzag / stripe -------------------------------------------------------- */

/* The live channels are taken one 32-channel block at a time (a run of list
 * positions with equal idx / 32): per group g, c_i = x_i * s[g, i] over the
 * run is quantised as one activation block (srt_act_q8_block: d = amax/127,
 * q = rint(c / d)), and y[32g + r] += d * (exact int32 sum of q_i (q[r,i] - 8)). */
static void ref_zigzag(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, float *y) {
    const int64_t R = j->R, G = R / SRT_QK;
    const uint8_t *sc = j->w + srt_zz_nib_bytes(j->cols, R);
    for (int64_t o = SRT_QK * j->g0; o < SRT_QK * j->g1; o++) y[o] = 0.0f;
    int64_t p = 0;
    while (p < n) {
        const int64_t kb = (idx ? idx[first + p] : first + p) / SRT_QK;
        int64_t e = p;
        while (e < n && (idx ? idx[first + e] : first + e) / SRT_QK == kb) e++;
        for (int64_t g = j->g0; g < j->g1; g++) {
            float c[SRT_QK] = {0};
            int8_t q[SRT_QK];
            int32_t qsum;
            for (int64_t k = 0; k < e - p; k++) {
                const int64_t ch = idx ? idx[first + p + k] : first + p + k;
                c[k] = j->x[ch] * srt_fp16_to_fp32(srt_rd16(sc + 2 * (ch * G + g)));
            }
            const float d = srt_act_q8_block(q, &qsum, c);
            for (int r = 0; r < SRT_QK; r++) {
                int32_t isum = 0;
                for (int64_t k = 0; k < e - p; k++) {
                    const int64_t ch = idx ? idx[first + p + k] : first + p + k;
                    const uint8_t byte = j->w[ch * (R / 2) + 16 * g + r % 16];
                    isum += q[k] * ((r < 16 ? byte & 15 : byte >> 4) - 8);
                }
                y[32 * g + r] += d * (float)isum;
            }
        }
        p = e;
    }
}

/* ---- compaction ------------------------------------------------------------ */

static uint64_t ref_stream(const uint8_t *p, size_t n) {
    uint64_t s0 = 0, s1 = 0;
    for (size_t i = 0; i + 16 <= n; i += 16) {
        uint64_t a, b;
        memcpy(&a, p + i, 8);
        memcpy(&b, p + i + 8, 8);
        s0 ^= a;
        s1 += b;
    }
    return s0 ^ s1;
}

static int64_t ref_compact(uint32_t *idx, const float *x, const float *tv, float t, int64_t n) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabsf(x[i]) > (tv ? tv[i] : t)) idx[m++] = (uint32_t)i;
    return m;
}

/* ---- activation and attention (the decode's f32 parts) -------------------- */

static void ref_act(float *a, const float *u, int64_t n, bool gelu) {
    for (int64_t i = 0; i < n; i++) a[i] = srt_act_scalar(u[i], gelu); /* the one definition (srt_ops.h) */
}

/* Cache value i of a row: f32, or f16 widened. */
static inline float kv_at(const void *row, int64_t i, bool half) {
    return half ? srt_fp16_to_fp32(((const uint16_t *)row)[i]) : ((const float *)row)[i];
}

static inline void attn_head_t(float *out, float *s, const float *q, const void *K, const void *V, int64_t n,
                               int64_t stride, int64_t hd, float scale, bool half) {
    const int64_t esz = half ? 2 : 4;
    float mx = -INFINITY;
    for (int64_t t = 0; t < n; t++) {
        const void *kr = (const char *)K + t * stride * esz;
        float dot = 0.0f;
        for (int64_t i = 0; i < hd; i++) dot += q[i] * kv_at(kr, i, half);
        s[t] = scale * dot;
        mx = s[t] > mx ? s[t] : mx;
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < n; t++) {
        s[t] = expf(s[t] - mx);
        sum += s[t];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < hd; i++) out[i] = 0.0f;
    for (int64_t t = 0; t < n; t++) {
        const void *vr = (const char *)V + t * stride * esz;
        const float p = s[t] * inv;
        s[t] = p;
        for (int64_t i = 0; i < hd; i++) out[i] += p * kv_at(vr, i, half);
    }
}

static void ref_attn_head(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                          int64_t stride, int64_t hd, float scale) {
    attn_head_t(out, s, q, K, V, n, stride, hd, scale, false);
}

static void ref_attn_group_h(float *out, float *s, const float *q, const uint16_t *K, const uint16_t *V, int64_t n,
                             int64_t stride, int64_t hd, int64_t g, float scale) {
    for (int64_t h = 0; h < g; h++) attn_head_t(out + h * hd, s + h * n, q + h * hd, K, V, n, stride, hd, scale, true);
}

static void ref_f16_store(uint16_t *dst, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = srt_fp32_to_fp16_sat(x[i]);
}

void srt_ref_register(srt_kernels *k) {
    k->act_q8 = ref_act_q8;
    k->stream = ref_stream;
    k->rows_f32 = ref_rows_f32;
    k->rows_q8_0 = ref_rows_q8_0;
    k->rows_q4_0 = ref_rows_q4_0;
    k->rows_kmi4r = ref_rows_kmi4r;
    k->axpy_q4_0t = ref_axpy_q4_0t;
    k->kmi4 = ref_kmi4;
    k->kmi8 = ref_kmi8;
    k->zigzag = ref_zigzag;
    k->compact = ref_compact;
    k->select_topk = srt_select_radix;
    k->act = ref_act;
    k->attn_head = ref_attn_head;
    k->attn_group_h = ref_attn_group_h;
    k->f16_store = ref_f16_store;
}
