/* srt_layout.c - the layout traits table: per layout its geometry, packed
 * size, packer (from row-major f32) and unpacker (to row-major f32). The
 * GEMV entries live in srt_gemv.c. Byte layouts: docs/LAYOUTS.md. */
#include <math.h>
#include <string.h>

#include "srt_kern.h"
#include "srt_gemv.h"

#define MAX_DIM (INT64_C(1) << 30)
#define MAX_ELEMS (INT64_C(1) << 40)

/* Nibble q (0..15) of element k (0..31) of a GGML q4_0 block. */
static inline int q4_get(const uint8_t *blk, int k) {
    return k < 16 ? (blk[SRT_BLK_QS + k] & 15) : (blk[SRT_BLK_QS + k - 16] >> 4);
}

static srt_status dims_ok(int64_t rows, int64_t cols) {
    if (rows < 1 || cols < 1 || rows > MAX_DIM || cols > MAX_DIM || rows * cols > MAX_ELEMS) return SRT_EINVAL;
    return SRT_OK;
}

static bool all_finite(const float *w, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(w[i])) return false;
    return true;
}

int64_t srt_layout_default_group(srt_layout l, int64_t rows) {
    const int64_t r = srt_round_up(rows, SRT_QK);
    if (l == SRT_LAYOUT_STRIPE) return r < 512 ? r : 512;
    if (l != SRT_LAYOUT_ZIGZAG) return 0;
    if (r <= 256) return r;
    /* the longest row-block of 1024, 512 or 256 rows that pads no more rows than 256 would */
    const int64_t pad = srt_round_up(rows, 256) - rows;
    return srt_round_up(rows, 1024) - rows <= pad ? 1024 : srt_round_up(rows, 512) - rows <= pad ? 512 : 256;
}

static int64_t group_of(srt_layout l, int64_t rows, int64_t group) {
    return group != 0 ? group : srt_layout_default_group(l, rows);
}

static srt_status size_any(srt_layout l, size_t *bytes, int64_t rows, int64_t cols, int64_t group) {
    srt_status st = dims_ok(rows, cols);
    if (st != SRT_OK) return st;
    int64_t b = 0;
    switch (l) {
    case SRT_LAYOUT_F32: b = rows * cols * 4; break;
    case SRT_LAYOUT_Q8_0:
        if (cols % SRT_QK) return SRT_EINVAL;
        b = rows * (cols / SRT_QK) * SRT_Q8_BYTES;
        break;
    case SRT_LAYOUT_Q4_0:
        if (cols % SRT_QK) return SRT_EINVAL;
        b = rows * (cols / SRT_QK) * SRT_Q4_BYTES;
        break;
    case SRT_LAYOUT_Q4_0T:
        if (rows % SRT_QK) return SRT_EINVAL;
        b = cols * (rows / SRT_QK) * SRT_Q4_BYTES;
        break;
    case SRT_LAYOUT_KMI4R:
        if (cols % SRT_QK) return SRT_EINVAL;
        b = rows * srt_kr_row_bytes(cols);
        break;
    case SRT_LAYOUT_KMI4:
        if (cols % SRT_QK) return SRT_EINVAL;
        b = (cols / SRT_QK) * srt_kd_block_bytes(rows);
        break;
    case SRT_LAYOUT_KMI8:
        if (cols % SRT_QK) return SRT_EINVAL;
        b = (cols / SRT_QK) * srt_k8_block_bytes(rows);
        break;
    case SRT_LAYOUT_ZIGZAG:
    case SRT_LAYOUT_STRIPE: {
        int64_t R = group_of(l, rows, group);
        if (R < SRT_QK || R % SRT_QK || R > 4096) return SRT_EINVAL;
        b = (rows + R - 1) / R * srt_zz_rb_bytes(cols, R);
        break;
    }
    default: return SRT_EINVAL;
    }
    *bytes = (size_t)b;
    return SRT_OK;
}

srt_status srt_matrix_check(const srt_matrix *m) {
    if (!m || m->layout < 0 || m->layout >= SRT_LAYOUT_COUNT || !m->data) return SRT_EINVAL;
    if (((uintptr_t)m->data & 63) != 0) return SRT_EINVAL;
    bool zz = m->layout == SRT_LAYOUT_ZIGZAG || m->layout == SRT_LAYOUT_STRIPE;
    if (zz ? m->group == 0 : m->group != 0) return SRT_EINVAL;
    size_t need;
    srt_status st = size_any(m->layout, &need, m->rows, m->cols, m->group);
    if (st != SRT_OK) return st;
    return m->bytes >= need ? SRT_OK : SRT_EINVAL;
}

/* ---- packers ---------------------------------------------------------------- */

static void pack_kmi4r_row(uint8_t *row, const float *w, int64_t cols) {
    const int64_t cp = srt_kr_cols_pad(cols);
    uint8_t *sc = row + cp / 2, tmp[SRT_Q4_BYTES];
    memset(row, 0x88, (size_t)(cp / 2)); /* padding blocks: q = 8, d = 0 */
    memset(sc, 0, (size_t)(srt_kr_row_bytes(cols) - cp / 2));
    for (int64_t b = 0; b < cols / SRT_QK; b++) {
        srt_q4_0_quantize_block(tmp, w + b * SRT_QK, 1);
        memcpy(sc + 2 * b, tmp, 2);
        int64_t T = b / 16, i = b % 16;
        for (int p = 0; p < 4; p++)
            for (int r = 0; r < 4; r++)
                row[256 * T + 64 * p + 4 * i + r] = (uint8_t)(q4_get(tmp, 4 * p + r) | q4_get(tmp, 16 + 4 * p + r) << 4);
    }
}

static void kd_set(uint8_t *vec, int64_t o, int q) {
    int64_t t = o / SRT_KD_TILE, oo = o % SRT_KD_TILE, x = oo & 63;
    uint8_t *b = vec + 64 * t + 16 * ((x % 16) / 4) + 4 * (x / 16) + x % 4;
    *b = oo >= 64 ? (uint8_t)((*b & 0x0f) | q << 4) : (uint8_t)((*b & 0xf0) | q);
}

static void pack_kd(uint8_t *dst, const float *w, int64_t rows, int64_t cols) {
    const int64_t rp = srt_kd_rows_pad(rows), bb = srt_kd_block_bytes(rows);
    uint8_t tmp[SRT_Q4_BYTES];
    for (int64_t kb = 0; kb < cols / SRT_QK; kb++) {
        uint8_t *blk = dst + kb * bb;
        memset(blk, 0, (size_t)(2 * rp));
        memset(blk + 2 * rp, 0x88, (size_t)(bb - 2 * rp));
        for (int64_t o = 0; o < rows; o++) {
            srt_q4_0_quantize_block(tmp, w + o * cols + kb * SRT_QK, 1);
            memcpy(blk + 2 * o, tmp, 2);
            for (int i = 0; i < SRT_QK; i++) kd_set(blk + 2 * rp + i * (rp / 2), o, q4_get(tmp, i));
        }
    }
}

/* kmi8: byte 16L + 4m + e of a 64-output tile holds output 16m + 4L + e (kmi4's low-nibble order),
 * so that the x86 unpacks and ARM zips leave the outputs in natural order. */
static inline int64_t k8_pos(int64_t o) {
    const int64_t t = o / SRT_K8_TILE, x = o % SRT_K8_TILE;
    return 64 * t + 16 * ((x % 16) / 4) + 4 * (x / 16) + x % 4;
}

static void pack_k8(uint8_t *dst, const float *w, int64_t rows, int64_t cols) {
    const int64_t rp = srt_k8_rows_pad(rows), bb = srt_k8_block_bytes(rows);
    uint8_t tmp[SRT_Q8_BYTES];
    for (int64_t kb = 0; kb < cols / SRT_QK; kb++) {
        uint8_t *blk = dst + kb * bb;
        memset(blk, 0, (size_t)bb);
        for (int64_t o = 0; o < rows; o++) {
            srt_q8_0_quantize_block(tmp, w + o * cols + kb * SRT_QK);
            memcpy(blk + 2 * o, tmp, 2);
            for (int i = 0; i < SRT_QK; i++) blk[2 * rp + i * rp + k8_pos(o)] = tmp[SRT_BLK_QS + i];
        }
    }
}

static void pack_zz(uint8_t *dst, const float *w, int64_t rows, int64_t cols, int64_t R) {
    const int64_t G = R / SRT_QK, rbb = srt_zz_rb_bytes(cols, R), nb = srt_zz_nib_bytes(cols, R);
    const int64_t nrb = (rows + R - 1) / R;
    uint8_t tmp[SRT_Q4_BYTES];
    float col[SRT_QK];
    for (int64_t rb = 0; rb < nrb; rb++) {
        uint8_t *nib = dst + rb * rbb, *sc = nib + nb;
        memset(nib, 0, (size_t)rbb);
        for (int64_t c = 0; c < cols; c++)
            for (int64_t g = 0; g < G; g++) {
                int64_t r0 = rb * R + g * SRT_QK;
                if (r0 + SRT_QK <= rows) {
                    srt_q4_0_quantize_block(tmp, w + r0 * cols + c, cols);
                } else {
                    for (int k = 0; k < SRT_QK; k++) col[k] = r0 + k < rows ? w[(r0 + k) * cols + c] : 0.0f;
                    srt_q4_0_quantize_block(tmp, col, 1);
                }
                memcpy(nib + c * (R / 2) + 16 * g, tmp + SRT_BLK_QS, 16);
                memcpy(sc + 2 * (c * G + g), tmp, 2);
            }
    }
}

static srt_status pack_any(srt_layout l, srt_matrix *m, void *dst, size_t cap, const float *w, int64_t rows,
                           int64_t cols, int64_t group) {
    size_t need;
    if (!m || !dst || !w || ((uintptr_t)dst & 63)) return SRT_EINVAL;
    srt_status st = size_any(l, &need, rows, cols, group);
    if (st != SRT_OK) return st;
    if (cap < need) return SRT_EINVAL;
    if (l != SRT_LAYOUT_F32 && !all_finite(w, rows * cols)) return SRT_EINVAL;
    uint8_t *d = dst;
    switch (l) {
    case SRT_LAYOUT_F32: memcpy(d, w, (size_t)(rows * cols) * 4); break;
    case SRT_LAYOUT_Q8_0:
        for (int64_t r = 0; r < rows; r++)
            for (int64_t b = 0; b < cols / SRT_QK; b++)
                srt_q8_0_quantize_block(d + (r * (cols / SRT_QK) + b) * SRT_Q8_BYTES, w + r * cols + b * SRT_QK);
        break;
    case SRT_LAYOUT_Q4_0:
        for (int64_t r = 0; r < rows; r++)
            for (int64_t b = 0; b < cols / SRT_QK; b++)
                srt_q4_0_quantize_block(d + (r * (cols / SRT_QK) + b) * SRT_Q4_BYTES, w + r * cols + b * SRT_QK, 1);
        break;
    case SRT_LAYOUT_Q4_0T:
        for (int64_t c = 0; c < cols; c++)
            for (int64_t b = 0; b < rows / SRT_QK; b++)
                srt_q4_0_quantize_block(d + (c * (rows / SRT_QK) + b) * SRT_Q4_BYTES, w + b * SRT_QK * cols + c, cols);
        break;
    case SRT_LAYOUT_KMI4R:
        for (int64_t r = 0; r < rows; r++) pack_kmi4r_row(d + r * srt_kr_row_bytes(cols), w + r * cols, cols);
        break;
    case SRT_LAYOUT_KMI4: pack_kd(d, w, rows, cols); break;
    case SRT_LAYOUT_KMI8: pack_k8(d, w, rows, cols); break;
    case SRT_LAYOUT_ZIGZAG:
    case SRT_LAYOUT_STRIPE: pack_zz(d, w, rows, cols, group_of(l, rows, group)); break;
    default: return SRT_EINVAL;
    }
    m->layout = l;
    m->rows = rows;
    m->cols = cols;
    m->group = (l == SRT_LAYOUT_ZIGZAG || l == SRT_LAYOUT_STRIPE) ? group_of(l, rows, group) : 0;
    m->data = dst;
    m->bytes = need;
    return SRT_OK;
}

/* ---- unpackers ----------------------------------------------------------------- */

static void deq_q4(float *out, const uint8_t *blk, int64_t stride) {
    const float d = srt_fp16_to_fp32(srt_rd16(blk));
    for (int k = 0; k < SRT_QK; k++) out[k * stride] = (float)(q4_get(blk, k) - 8) * d;
}

/* Row r of a row layout (q8_0, q4_0, kmi4r; m checked) into w[0..cols). */
static void unpack_row(float *w, const srt_matrix *m, int64_t r) {
    const int64_t cols = m->cols;
    const uint8_t *s = m->data;
    if (m->layout == SRT_LAYOUT_Q8_0) {
        for (int64_t b = 0; b < cols / SRT_QK; b++) {
            const uint8_t *blk = s + (r * (cols / SRT_QK) + b) * SRT_Q8_BYTES;
            const float d = srt_fp16_to_fp32(srt_rd16(blk));
            for (int k = 0; k < SRT_QK; k++) w[b * SRT_QK + k] = (float)(int8_t)blk[SRT_BLK_QS + k] * d;
        }
    } else if (m->layout == SRT_LAYOUT_Q4_0) {
        for (int64_t b = 0; b < cols / SRT_QK; b++) deq_q4(w + b * SRT_QK, s + (r * (cols / SRT_QK) + b) * SRT_Q4_BYTES, 1);
    } else { /* kmi4r */
        const uint8_t *row = s + r * srt_kr_row_bytes(cols), *sc = row + srt_kr_cols_pad(cols) / 2;
        for (int64_t b = 0; b < cols / SRT_QK; b++) {
            const float d = srt_fp16_to_fp32(srt_rd16(sc + 2 * b));
            int64_t T = b / 16, i = b % 16;
            for (int p = 0; p < 4; p++)
                for (int rr = 0; rr < 4; rr++) {
                    uint8_t byte = row[256 * T + 64 * p + 4 * i + rr];
                    w[b * SRT_QK + 4 * p + rr] = (float)((byte & 15) - 8) * d;
                    w[b * SRT_QK + 16 + 4 * p + rr] = (float)((byte >> 4) - 8) * d;
                }
        }
    }
}

srt_status srt_matrix_row(const srt_matrix *m, int64_t r, float *out) {
    srt_status st = srt_matrix_check(m);
    if (st != SRT_OK) return st;
    if (!out || r < 0 || r >= m->rows) return SRT_EINVAL;
    switch (m->layout) {
    case SRT_LAYOUT_F32: memcpy(out, (const float *)m->data + r * m->cols, (size_t)m->cols * sizeof(float)); break;
    case SRT_LAYOUT_Q8_0:
    case SRT_LAYOUT_Q4_0:
    case SRT_LAYOUT_KMI4R: unpack_row(out, m, r); break;
    default: return SRT_ENOTSUP;
    }
    return SRT_OK;
}

static srt_status unpack_any(float *w, const srt_matrix *m) {
    if (!w) return SRT_EINVAL;
    srt_status st = srt_matrix_check(m);
    if (st != SRT_OK) return st;
    const uint8_t *s = m->data;
    const int64_t rows = m->rows, cols = m->cols;
    switch (m->layout) {
    case SRT_LAYOUT_F32: memcpy(w, s, (size_t)(rows * cols) * 4); break;
    case SRT_LAYOUT_Q4_0T:
        for (int64_t c = 0; c < cols; c++)
            for (int64_t b = 0; b < rows / SRT_QK; b++)
                deq_q4(w + b * SRT_QK * cols + c, s + (c * (rows / SRT_QK) + b) * SRT_Q4_BYTES, cols);
        break;
    case SRT_LAYOUT_Q8_0:
    case SRT_LAYOUT_Q4_0:
    case SRT_LAYOUT_KMI4R:
        for (int64_t r = 0; r < rows; r++) unpack_row(w + r * cols, m, r);
        break;
    case SRT_LAYOUT_KMI4: {
        const int64_t rp = srt_kd_rows_pad(rows), bb = srt_kd_block_bytes(rows);
        for (int64_t kb = 0; kb < cols / SRT_QK; kb++) {
            const uint8_t *blk = s + kb * bb;
            for (int i = 0; i < SRT_QK; i++) {
                const uint8_t *vec = blk + 2 * rp + i * (rp / 2);
                for (int64_t o = 0; o < rows; o++) {
                    int64_t t = o / SRT_KD_TILE, oo = o % SRT_KD_TILE, x = oo & 63;
                    uint8_t byte = vec[64 * t + 16 * ((x % 16) / 4) + 4 * (x / 16) + x % 4];
                    int q = oo >= 64 ? byte >> 4 : byte & 15;
                    w[o * cols + kb * SRT_QK + i] = (float)(q - 8) * srt_fp16_to_fp32(srt_rd16(blk + 2 * o));
                }
            }
        }
        break;
    }
    case SRT_LAYOUT_KMI8: {
        const int64_t rp = srt_k8_rows_pad(rows), bb = srt_k8_block_bytes(rows);
        for (int64_t kb = 0; kb < cols / SRT_QK; kb++) {
            const uint8_t *blk = s + kb * bb;
            for (int i = 0; i < SRT_QK; i++)
                for (int64_t o = 0; o < rows; o++)
                    w[o * cols + kb * SRT_QK + i] =
                        (float)(int8_t)blk[2 * rp + i * rp + k8_pos(o)] * srt_fp16_to_fp32(srt_rd16(blk + 2 * o));
        }
        break;
    }
    case SRT_LAYOUT_ZIGZAG:
    case SRT_LAYOUT_STRIPE: {
        const int64_t R = m->group, G = R / SRT_QK, rbb = srt_zz_rb_bytes(cols, R);
        for (int64_t rb = 0; rb * R < rows; rb++) {
            const uint8_t *nib = s + rb * rbb, *sc = nib + srt_zz_nib_bytes(cols, R);
            for (int64_t c = 0; c < cols; c++)
                for (int64_t g = 0; g < G; g++) {
                    uint8_t blk[SRT_Q4_BYTES];
                    memcpy(blk, sc + 2 * (c * G + g), 2);
                    memcpy(blk + SRT_BLK_QS, nib + c * (R / 2) + 16 * g, 16);
                    const float d = srt_fp16_to_fp32(srt_rd16(blk));
                    for (int k = 0; k < SRT_QK; k++) {
                        int64_t r = rb * R + g * SRT_QK + k;
                        if (r < rows) w[r * cols + c] = (float)(q4_get(blk, k) - 8) * d;
                    }
                }
        }
        break;
    }
    default: return SRT_EINVAL;
    }
    return SRT_OK;
}

/* ---- the traits table ------------------------------------------------------------ */

#define LAYOUT_FNS(tag, L)                                                                                   \
    static srt_status size_##tag(size_t *b, int64_t r, int64_t c, int64_t g) { return size_any(L, b, r, c, g); } \
    static srt_status pack_##tag(srt_matrix *m, void *d, size_t cap, const float *w, int64_t r, int64_t c,   \
                                 int64_t g) {                                                                \
        return pack_any(L, m, d, cap, w, r, c, g);                                                           \
    }
LAYOUT_FNS(f32, SRT_LAYOUT_F32)
LAYOUT_FNS(q8_0, SRT_LAYOUT_Q8_0)
LAYOUT_FNS(q4_0, SRT_LAYOUT_Q4_0)
LAYOUT_FNS(q4_0t, SRT_LAYOUT_Q4_0T)
LAYOUT_FNS(kmi4r, SRT_LAYOUT_KMI4R)
LAYOUT_FNS(kmi4, SRT_LAYOUT_KMI4)
LAYOUT_FNS(zigzag, SRT_LAYOUT_ZIGZAG)
LAYOUT_FNS(stripe, SRT_LAYOUT_STRIPE)
LAYOUT_FNS(kmi8, SRT_LAYOUT_KMI8)

static const srt_layout_traits traits[SRT_LAYOUT_COUNT] = {
    {"f32", "row-major float32", 1, 1, SRT_SPARSE_ROWS, SRT_IN_F32, size_f32, pack_f32, unpack_any,
     srt_gemv_rows, srt_gemv_rows_sparse},
    {"q8_0", "GGML q8_0 rows: 32 int8 + fp16 scale per block", 1, 32, SRT_SPARSE_ROWS, SRT_IN_Q8_NATURAL,
     size_q8_0, pack_q8_0, unpack_any, srt_gemv_rows, srt_gemv_rows_sparse},
    {"q4_0", "GGML q4_0 rows: 32 nibbles + fp16 scale per block", 1, 32, SRT_SPARSE_ROWS, SRT_IN_Q8_NATURAL,
     size_q4_0, pack_q4_0, unpack_any, srt_gemv_rows, srt_gemv_rows_sparse},
    {"q4_0t", "GGML q4_0 rows of W^T (one per input channel): PowerInfer-style axpy scatter", 32, 1,
     SRT_SPARSE_COLS, SRT_IN_F32, size_q4_0t, pack_q4_0t, unpack_any, srt_gemv_axpy, srt_gemv_axpy_sparse},
    {"kmi4r", "int4 rows in 512-weight tiles for VNNI/sdot (W_u, W_g): row-sparse", 1, 32, SRT_SPARSE_ROWS,
     SRT_IN_Q8_TILED, size_kmi4r, pack_kmi4r, unpack_any, srt_gemv_rows, srt_gemv_rows_sparse},
    {"kmi4", "int4 neuron-major (W_d): each input channel's column contiguous, live-neuron sparse", 1, 32,
     SRT_SPARSE_COLS, SRT_IN_Q8_NATURAL, size_kmi4, pack_kmi4, unpack_any, srt_gemv_kd, srt_gemv_kd_sparse},
    {"zigzag", "int4 groups of 32 rows down a column, row-blocks stored row-major: column-sparse", 32, 1,
     SRT_SPARSE_COLS, SRT_IN_F32, size_zigzag, pack_zigzag, unpack_any, srt_gemv_zigzag, srt_gemv_zigzag_sparse},
    {"stripe", "zigzag with row-block = CWIC stripe: per-stripe live channel lists", 32, 1, SRT_SPARSE_STRIPES,
     SRT_IN_F32, size_stripe, pack_stripe, unpack_any, srt_gemv_zigzag, srt_gemv_stripe_sparse},
    {"kmi8", "int8 neuron-major (W_d): kmi4 with q8_0 values, each input channel's column contiguous, live-neuron "
             "sparse",
     1, 32, SRT_SPARSE_COLS, SRT_IN_Q8_NATURAL, size_kmi8, pack_kmi8, unpack_any, srt_gemv_kd, srt_gemv_kd_sparse},
};

const srt_layout_traits *srt_layout_get(srt_layout layout) {
    return (layout >= 0 && layout < SRT_LAYOUT_COUNT) ? &traits[layout] : NULL;
}

srt_status srt_layout_parse(const char *name, srt_layout *out) {
    if (!name) return SRT_EINVAL;
    for (int i = 0; i < SRT_LAYOUT_COUNT; i++)
        if (strcmp(name, traits[i].name) == 0) {
            *out = (srt_layout)i;
            return SRT_OK;
        }
    return SRT_EINVAL;
}
