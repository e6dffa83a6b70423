/* safetensors.h - reading and writing Hugging Face safetensors files.
 *
 * Layout: u64 little-endian header length N, N bytes of JSON
 *   {"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * then the data section; offsets are relative to its start.
 *
 * Reader: sc_st_open maps the file and validates the whole header before any
 * tensor is handed out (sizes, offsets, dtypes, shapes, overflow). Tensors of
 * dtypes sparsecal does not compute with (I64, F8_*, ...) are listed with
 * supported = false. A set (sc_st_set) is a single file or a sharded model
 * described by model.safetensors.index.json; lookups go through the set.
 *
 * Writer: the tensor list is given up front so the header can be written
 * first; tensor data is then streamed in order, so files far larger than
 * memory can be produced. The file appears atomically on finish. */
#ifndef SC_SAFETENSORS_H
#define SC_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "dtype.h"

#define SC_ST_MAX_DIMS 8
#define SC_ST_MAX_HEADER ((uint64_t)100 << 20) /* 100 MB, as the reference implementation */
#define SC_ST_MAX_SHAPE ((int64_t)1 << 40)

typedef struct sc_st_tensor {
    const char *name;
    const char *file;       /* path of the file holding it */
    const char *dtype_name; /* as spelled in the file ("F32", "I64", ...) */
    sc_dtype dtype;         /* meaningful only when supported */
    bool supported;         /* F32, F16 or BF16 */
    int n_dims;
    int64_t shape[SC_ST_MAX_DIMS];
    uint64_t n_elements;
    const uint8_t *data; /* into the mapping; n_bytes long */
    size_t n_bytes;
} sc_st_tensor;

/* ---- one file ---- */

typedef struct sc_st_file sc_st_file;

sc_status sc_st_open(const char *path, sc_st_file **out, sc_err *err);
void sc_st_free(sc_st_file *f); /* accepts NULL */

const char *sc_st_path(const sc_st_file *f);
size_t sc_st_count(const sc_st_file *f);
const sc_st_tensor *sc_st_get(const sc_st_file *f, size_t i); /* sorted by name */
const sc_st_tensor *sc_st_find(const sc_st_file *f, const char *name); /* NULL if absent */
/* __metadata__ entries (string -> string). */
size_t sc_st_meta_count(const sc_st_file *f);
bool sc_st_meta_get(const sc_st_file *f, size_t i, const char **key, const char **value);
const char *sc_st_meta_find(const sc_st_file *f, const char *key); /* NULL if absent */
/* Hands the mapping to the caller (who must sc_unmap_file it); tensor data
 * pointers stay valid while the caller keeps it. The handle itself must still
 * be freed. Returns false if already detached. */
bool sc_st_detach_map(sc_st_file *f, sc_file_map *out);

/* ---- a single file or an index of shards ---- */

typedef struct sc_st_set sc_st_set;

/* path is a *.safetensors file or a model.safetensors.index.json; shards
 * named by the index live in the index's directory, each is opened once. */
sc_status sc_st_set_open(const char *path, sc_st_set **out, sc_err *err);
void sc_st_set_free(sc_st_set *s); /* accepts NULL */

const char *sc_st_set_path(const sc_st_set *s);
const sc_st_tensor *sc_st_set_find(const sc_st_set *s, const char *name);
size_t sc_st_set_count(const sc_st_set *s);
const sc_st_tensor *sc_st_set_get(const sc_st_set *s, size_t i);
size_t sc_st_set_n_files(const sc_st_set *s);
sc_st_file *sc_st_set_file(sc_st_set *s, size_t i);

/* Parses a safetensors dtype name; *bits receives the element size in bits
 * (4 for F4, 6 for F6_*, ...). Returns false for an unknown name. *dt is
 * set (and *supported true) only for F32/F16/BF16. */
bool sc_st_dtype_parse(const char *name, int *bits, sc_dtype *dt, bool *supported);

/* ---- writer ---- */

typedef struct sc_st_spec {
    const char *name;
    sc_dtype dtype;         /* F32, F16 or BF16 */
    const char *dtype_name; /* optional: a raw safetensors dtype ("I64"...), overrides dtype */
    int n_dims;
    int64_t shape[SC_ST_MAX_DIMS];
} sc_st_spec;

typedef struct sc_st_meta {
    const char *key, *value;
} sc_st_meta;

typedef struct sc_st_writer sc_st_writer;

/* Opens path (through a temp file) and writes the header: tensors laid out
 * back to back in the given order, data section aligned to 8 bytes by
 * padding the header with spaces. meta may be NULL. An f32 tensor stays
 * 4-byte aligned (usable in place from the mmap) when the bytes before it
 * are a multiple of 4, e.g. f32 tensors first or 16-bit ones of even size. */
sc_status sc_st_writer_create(const char *path, const sc_st_spec *specs, size_t n_specs, const sc_st_meta *meta,
                              size_t n_meta, sc_st_writer **out, sc_err *err);
/* Appends raw little-endian tensor bytes; writes may span tensors. */
sc_status sc_st_writer_write(sc_st_writer *w, const void *data, size_t n_bytes, sc_err *err);
/* Appends n values converted to the dtype of the tensor(s) being written
 * (F32, F16 or BF16, rounding to nearest even). */
sc_status sc_st_writer_write_f32(sc_st_writer *w, const float *x, size_t n, sc_err *err);
/* Checks every byte was written, then renames the file into place. */
sc_status sc_st_writer_finish(sc_st_writer *w, sc_err *err);
/* Frees the writer; an unfinished file is removed. Accepts NULL. */
void sc_st_writer_free(sc_st_writer *w);

#endif
