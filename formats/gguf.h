/* gguf.h - the GGUF container (llama.cpp's model format, versions 2 and 3).
 *
 * Layout: "GGUF", u32 version, u64 tensor_count, u64 kv_count; kv_count
 * metadata entries (string key, u32 value type, value); tensor_count tensor
 * infos (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset);
 * then the data section, which starts at the end of the infos rounded up to
 * general.alignment (default 32). Strings are a u64 length and bytes without
 * a NUL. Everything is little-endian.
 *
 * sc_gguf_open maps the file and validates all of it before returning: every
 * string, array, metadata value and tensor extent is bounds-checked against
 * the file size, so the accessors below never read outside the mapping.
 * Model building (sc_load_gguf, declared in model.h) lives in gguf_model.c. */
#ifndef SC_GGUF_H
#define SC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "dtype.h"

struct sc_tokenizer;

typedef struct sc_gguf sc_gguf;

/* Metadata value types (the numbers are the file's). */
typedef enum sc_gguf_type {
    SC_GGUF_UINT8 = 0,
    SC_GGUF_INT8 = 1,
    SC_GGUF_UINT16 = 2,
    SC_GGUF_INT16 = 3,
    SC_GGUF_UINT32 = 4,
    SC_GGUF_INT32 = 5,
    SC_GGUF_FLOAT32 = 6,
    SC_GGUF_BOOL = 7,
    SC_GGUF_STRING = 8,
    SC_GGUF_ARRAY = 9,
    SC_GGUF_UINT64 = 10,
    SC_GGUF_INT64 = 11,
    SC_GGUF_FLOAT64 = 12,
    SC_GGUF_TYPE_COUNT
} sc_gguf_type;

/* The ggml tensor types sparsecal converts (others are listed, not loaded). */
enum { SC_GGML_F32 = 0, SC_GGML_F16 = 1, SC_GGML_Q8_0 = 8, SC_GGML_BF16 = 30 };

#define SC_GGUF_MAX_DIMS 4
#define SC_GGUF_DEFAULT_ALIGNMENT 32
#define SC_GGUF_MAX_NESTING 16 /* arrays of arrays deeper than this are rejected */

/* A view of one metadata value inside the mapped file. */
typedef struct sc_gguf_value {
    sc_gguf_type type;
    sc_gguf_type elem_type; /* arrays: element type */
    uint64_t count;         /* arrays: elements; strings: bytes */
    const uint8_t *p;       /* scalars: the value; strings: the bytes; arrays: the first element */
    size_t size;            /* bytes at p (array elements in total) */
} sc_gguf_value;

/* One tensor info. ne[0] is the innermost (contiguous) dimension, so a
 * matrix with ne = [in, out] is row-major [out][in]; unused ne are 1. */
typedef struct sc_gguf_tensor {
    const char *name;
    uint32_t ggml_type;
    uint32_t n_dims;
    uint64_t ne[SC_GGUF_MAX_DIMS];
    uint64_t n_elems;
    uint64_t offset;     /* relative to the data section (a multiple of the alignment) */
    uint64_t n_bytes;
    const uint8_t *data; /* in the mapping; checked to lie inside the file */
} sc_gguf_tensor;

/* Maps and validates a GGUF file. Errors name the file and the field. */
sc_status sc_gguf_open(const char *path, sc_gguf **out, sc_err *err);
void sc_gguf_free(sc_gguf *g); /* accepts NULL */
/* Transfers the mapping to the caller (e.g. to sc_model_keep_map); every
 * pointer obtained from g stays valid while the caller keeps the map. */
sc_file_map sc_gguf_take_map(sc_gguf *g);

const char *sc_gguf_path(const sc_gguf *g);
uint32_t sc_gguf_version(const sc_gguf *g);
uint64_t sc_gguf_alignment(const sc_gguf *g);
uint64_t sc_gguf_data_offset(const sc_gguf *g); /* file offset of the data section */
uint64_t sc_gguf_file_size(const sc_gguf *g);

/* ---- metadata ---- */
int64_t sc_gguf_kv_count(const sc_gguf *g);
const char *sc_gguf_kv_key(const sc_gguf *g, int64_t i);             /* NUL-terminated copy */
const sc_gguf_value *sc_gguf_kv_value(const sc_gguf *g, int64_t i);
int64_t sc_gguf_find_kv(const sc_gguf *g, const char *key);          /* -1 when absent */
const sc_gguf_value *sc_gguf_get(const sc_gguf *g, const char *key); /* NULL when absent */
const char *sc_gguf_type_name(sc_gguf_type t);

/* Scalar reads; false when the type does not fit. int: any integer type
 * whose value fits int64; float: float32/64 or any integer; bool: bool;
 * string: the bytes (not NUL-terminated) and their length. */
bool sc_gguf_value_int(const sc_gguf_value *v, int64_t *out);
bool sc_gguf_value_u64(const sc_gguf_value *v, uint64_t *out); /* non-negative integers */
bool sc_gguf_value_float(const sc_gguf_value *v, double *out);
bool sc_gguf_value_bool(const sc_gguf_value *v, bool *out);
bool sc_gguf_value_string(const sc_gguf_value *v, const char **s, size_t *len);

/* Arrays: element idx (O(1) for fixed-size elements, O(idx) for strings
 * and nested arrays), or all elements in order through an iterator. */
bool sc_gguf_array_elem(const sc_gguf_value *arr, uint64_t idx, sc_gguf_value *out);
typedef struct sc_gguf_iter {
    const sc_gguf_value *arr;
    uint64_t i;
    size_t pos;
} sc_gguf_iter;
void sc_gguf_iter_init(sc_gguf_iter *it, const sc_gguf_value *arr);
bool sc_gguf_iter_next(sc_gguf_iter *it, sc_gguf_value *out);

/* Typed lookups by key with an error naming the file and key when the key
 * is absent or holds another type. */
sc_status sc_gguf_get_int(const sc_gguf *g, const char *key, int64_t *out, sc_err *err);
sc_status sc_gguf_get_float(const sc_gguf *g, const char *key, double *out, sc_err *err);
sc_status sc_gguf_get_string(const sc_gguf *g, const char *key, const char **s, size_t *len, sc_err *err);

/* ---- tensors ---- */
int64_t sc_gguf_tensor_count(const sc_gguf *g);
const sc_gguf_tensor *sc_gguf_tensor_at(const sc_gguf *g, int64_t i);
const sc_gguf_tensor *sc_gguf_find_tensor(const sc_gguf *g, const char *name); /* NULL when absent */
/* ggml type name ("F32", "Q4_K", ...) or "?" for an unknown id. */
const char *sc_gguf_ggml_type_name(uint32_t ggml_type);
/* The sparsecal dtype of a ggml type; false when it cannot be converted. */
bool sc_gguf_ggml_dtype(uint32_t ggml_type, sc_dtype *out);

/* ---- vocabulary ---- */
/* Reads only the tokenizer (tokenizer.ggml.*) of a GGUF file, e.g. a
 * vocabulary-only file given with `--tokenizer file.gguf`: tokenizer models "llama"
 * (SentencePiece-style) and "gpt2" (byte-level BPE with merges); others give
 * SC_EUNSUPPORTED. */
sc_status sc_gguf_load_tokenizer(const char *path, struct sc_tokenizer **out, sc_err *err);

#endif
