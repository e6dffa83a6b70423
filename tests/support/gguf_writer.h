/* gguf_writer.h - a tiny GGUF writer for tests: builds valid files and,
 * through the raw entry points and header overrides, hostile ones. */
#ifndef SC_GGUF_WRITER_H
#define SC_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer with little-endian appends. */
typedef struct gw_buf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} gw_buf;

void gw_put(gw_buf *b, const void *data, size_t n);
void gw_u8(gw_buf *b, uint8_t v);
void gw_u16(gw_buf *b, uint16_t v);
void gw_u32(gw_buf *b, uint32_t v);
void gw_u64(gw_buf *b, uint64_t v);
void gw_f32(gw_buf *b, float v);
void gw_f64(gw_buf *b, double v);
void gw_str(gw_buf *b, const char *s); /* u64 length + bytes */
void gw_buf_free(gw_buf *b);

typedef struct gguf_writer {
    uint32_t version;      /* default 3 */
    uint64_t n_kv, n_tensors;
    gw_buf kv, infos, data;
    uint64_t align;        /* layout alignment of the data section (default 32) */
    bool override_counts;  /* write n_kv_hdr / n_tensors_hdr instead of the real counts */
    uint64_t n_kv_hdr, n_tensors_hdr;
    char magic[4];         /* default "GGUF" */
} gguf_writer;

void gw_init(gguf_writer *w);
void gw_free(gguf_writer *w);

/* Metadata entries (types are GGUF value type numbers, see gguf.h). */
void gw_kv_u32(gguf_writer *w, const char *key, uint32_t v);
void gw_kv_i32(gguf_writer *w, const char *key, int32_t v);
void gw_kv_u64(gguf_writer *w, const char *key, uint64_t v);
void gw_kv_f32(gguf_writer *w, const char *key, float v);
void gw_kv_str(gguf_writer *w, const char *key, const char *v);
/* A scalar of any fixed-size type; v holds the little-endian bytes. */
void gw_kv_scalar(gguf_writer *w, const char *key, uint32_t type, const void *v, size_t size);
/* An array of fixed-size elements (elems: count * elem_size raw bytes). */
void gw_kv_array(gguf_writer *w, const char *key, uint32_t elem_type, uint64_t count, const void *elems,
                 size_t elem_size);
void gw_kv_str_array(gguf_writer *w, const char *key, const char *const *s, size_t n);
/* An entry the caller encoded completely (key, type, value). */
void gw_kv_raw(gguf_writer *w, const void *bytes, size_t n);

/* A tensor: info plus data appended to the data section at the next
 * aligned offset. Returns the offset. */
uint64_t gw_tensor(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t ggml_type,
                   const void *data, size_t n_bytes);
/* Only a tensor info, with any field values (for hostile files). */
void gw_tensor_info(gguf_writer *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t ggml_type,
                    uint64_t offset);

/* Assembles the file (malloc'd; caller frees). Returns false on OOM. */
bool gw_finish(const gguf_writer *w, uint8_t **out, size_t *len);
bool gw_write_file(const gguf_writer *w, const char *path);

/* Encoders for tensor data. */
void gw_encode_f16(const float *x, size_t n, uint16_t *out);
void gw_encode_bf16(const float *x, size_t n, uint16_t *out);
/* q8_0: out needs n / 32 * 34 bytes; scale = max|x| / 127 per block. */
void gw_encode_q8_0(const float *x, size_t n, uint8_t *out);

#endif
