#include "gguf_writer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"

void gw_put(gw_buf *b, const void *data, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n) nc *= 2;
        uint8_t *p = realloc(b->p, nc);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
}

void gw_u8(gw_buf *b, uint8_t v) { gw_put(b, &v, 1); }
void gw_u16(gw_buf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    gw_put(b, x, 2);
}
void gw_u32(gw_buf *b, uint32_t v) {
    uint8_t x[4];
    for (int i = 0; i < 4; i++) x[i] = (uint8_t)(v >> (8 * i));
    gw_put(b, x, 4);
}
void gw_u64(gw_buf *b, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    gw_put(b, x, 8);
}
void gw_f32(gw_buf *b, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    gw_u32(b, u);
}
void gw_f64(gw_buf *b, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    gw_u64(b, u);
}
void gw_str(gw_buf *b, const char *s) {
    size_t n = strlen(s);
    gw_u64(b, n);
    gw_put(b, s, n);
}
void gw_buf_free(gw_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void gw_init(gguf_writer *w) {
    memset(w, 0, sizeof *w);
    w->version = 3;
    w->align = 32;
    memcpy(w->magic, "GGUF", 4);
}

void gw_free(gguf_writer *w) {
    gw_buf_free(&w->kv);
    gw_buf_free(&w->infos);
    gw_buf_free(&w->data);
}

void gw_kv_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v, size_t size) {
    gw_str(&w->kv, key);
    gw_u32(&w->kv, type);
    gw_put(&w->kv, v, size);
    w->n_kv++;
}

void gw_kv_u32(gguf_writer *w, const char *key, uint32_t v) {
    gw_str(&w->kv, key);
    gw_u32(&w->kv, 4);
    gw_u32(&w->kv, v);
    w->n_kv++;
}
void gw_kv_i32(gguf_writer *w, const char *key, int32_t v) {
    gw_str(&w->kv, key);
    gw_u32(&w->kv, 5);
    gw_u32(&w->kv, (uint32_t)v);
    w->n_kv++;
}
void gw_kv_u64(gguf_writer *w, const char *key, uint64_t v) {
    gw_str(&w->kv, key);
    gw_u32(&w->kv, 10);
    gw_u64(&w->kv, v);
    w->n_kv++;
}
void gw_kv_f32(gguf_writer *w, const char *key, float v) {
    gw_str(&w->kv, key);
    gw_u32(&w->kv, 6);
    gw_f32(&w->kv, v);
    w->n_kv++;
}
void gw_kv_str(gguf_writer *w, const char *key, const char *v) {
    gw_str(&w->kv, key);
    gw_u32(&w->kv, 8);
    gw_str(&w->kv, v);
    w->n_kv++;
}

void gw_kv_array(gguf_writer *w, const char *key, uint32_t elem_type, uint64_t count, const void *elems,
                 size_t elem_size) {
    gw_str(&w->kv, key);
    gw_u32(&w->kv, 9);
    gw_u32(&w->kv, elem_type);
    gw_u64(&w->kv, count);
    gw_put(&w->kv, elems, (size_t)count * elem_size);
    w->n_kv++;
}

void gw_kv_str_array(gguf_writer *w, const char *key, const char *const *s, size_t n) {
    gw_str(&w->kv, key);
    gw_u32(&w->kv, 9);
    gw_u32(&w->kv, 8);
    gw_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++) gw_str(&w->kv, s[i]);
    w->n_kv++;
}

void gw_kv_raw(gguf_writer *w, const void *bytes, size_t n) {
    gw_put(&w->kv, bytes, n);
    w->n_kv++;
}

void gw_tensor_info(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t ggml_type,
                    uint64_t offset) {
    gw_str(&w->infos, name);
    gw_u32(&w->infos, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gw_u64(&w->infos, ne[d]);
    gw_u32(&w->infos, ggml_type);
    gw_u64(&w->infos, offset);
    w->n_tensors++;
}

uint64_t gw_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t ggml_type,
                   const void *data, size_t n_bytes) {
    static const uint8_t zeros[64] = {0};
    while (w->data.n % w->align) gw_put(&w->data, zeros, 1);
    uint64_t off = w->data.n;
    gw_put(&w->data, data, n_bytes);
    gw_tensor_info(w, name, n_dims, ne, ggml_type, off);
    return off;
}

bool gw_finish(const gguf_writer *w, uint8_t **out, size_t *len) {
    gw_buf b = {0};
    gw_put(&b, w->magic, 4);
    gw_u32(&b, w->version);
    gw_u64(&b, w->override_counts ? w->n_tensors_hdr : w->n_tensors);
    gw_u64(&b, w->override_counts ? w->n_kv_hdr : w->n_kv);
    gw_put(&b, w->kv.p, w->kv.n);
    gw_put(&b, w->infos.p, w->infos.n);
    if (w->data.n) {
        while (b.n % w->align) gw_u8(&b, 0);
        gw_put(&b, w->data.p, w->data.n);
    }
    if (b.oom || w->kv.oom || w->infos.oom || w->data.oom) {
        gw_buf_free(&b);
        return false;
    }
    *out = b.p;
    *len = b.n;
    return true;
}

bool gw_write_file(const gguf_writer *w, const char *path) {
    uint8_t *p;
    size_t n;
    if (!gw_finish(w, &p, &n)) return false;
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    free(p);
    return ok;
}

void gw_encode_f16(const float *x, size_t n, uint16_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = sc_f32_to_f16(x[i]);
}

void gw_encode_bf16(const float *x, size_t n, uint16_t *out) {
    for (size_t i = 0; i < n; i++) out[i] = sc_f32_to_bf16(x[i]);
}

void gw_encode_q8_0(const float *x, size_t n, uint8_t *out) {
    for (size_t b = 0; b < n / 32; b++) {
        const float *v = x + 32 * b;
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(v[j]));
        float d = amax / 127.0f;
        uint16_t dh = sc_f32_to_f16(d);
        float dq = sc_f16_to_f32(dh);
        uint8_t *blk = out + 34 * b;
        blk[0] = (uint8_t)dh;
        blk[1] = (uint8_t)(dh >> 8);
        for (int j = 0; j < 32; j++) {
            float q = dq > 0 ? roundf(v[j] / dq) : 0.0f;
            if (q > 127) q = 127;
            if (q < -127) q = -127;
            blk[2 + j] = (uint8_t)(int8_t)q;
        }
    }
}
