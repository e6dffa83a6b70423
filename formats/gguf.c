/* gguf.c - GGUF container parsing: header, metadata, tensor infos.
 *
 * The whole file is validated once in sc_gguf_open; afterwards the value
 * and tensor views point into the mapping and are known to lie inside it. */
#include "gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ggml type traits (ids are ggml's enum ggml_type) ---- */

typedef struct ggml_traits {
    const char *name;
    uint32_t block; /* elements per block; 0: unknown / removed id */
    uint32_t size;  /* bytes per block */
    int dtype;      /* sc_dtype we convert, or -1 */
} ggml_traits;

static const ggml_traits GGML_TYPES[] = {
    [0] = {"F32", 1, 4, SC_DT_F32},            [1] = {"F16", 1, 2, SC_DT_F16},
    [2] = {"Q4_0", 32, 18, SC_DT_Q4_0},        [3] = {"Q4_1", 32, 20, SC_DT_Q4_1},
    [6] = {"Q5_0", 32, 22, SC_DT_Q5_0},        [7] = {"Q5_1", 32, 24, SC_DT_Q5_1},
    [8] = {"Q8_0", 32, 34, SC_DT_Q8_0},        [9] = {"Q8_1", 32, 36, -1},
    [10] = {"Q2_K", 256, 84, -1},              [11] = {"Q3_K", 256, 110, -1},
    [12] = {"Q4_K", 256, 144, SC_DT_Q4_K},     [13] = {"Q5_K", 256, 176, SC_DT_Q5_K},
    [14] = {"Q6_K", 256, 210, SC_DT_Q6_K},     [15] = {"Q8_K", 256, 292, -1},
    [16] = {"IQ2_XXS", 256, 66, -1},           [17] = {"IQ2_XS", 256, 74, -1},
    [18] = {"IQ3_XXS", 256, 98, -1},           [19] = {"IQ1_S", 256, 50, -1},
    [20] = {"IQ4_NL", 32, 18, -1},             [21] = {"IQ3_S", 256, 110, -1},
    [22] = {"IQ2_S", 256, 82, -1},             [23] = {"IQ4_XS", 256, 136, -1},
    [24] = {"I8", 1, 1, -1},                   [25] = {"I16", 1, 2, -1},
    [26] = {"I32", 1, 4, -1},                  [27] = {"I64", 1, 8, -1},
    [28] = {"F64", 1, 8, -1},                  [29] = {"IQ1_M", 256, 56, -1},
    [30] = {"BF16", 1, 2, SC_DT_BF16},         [34] = {"TQ1_0", 256, 54, -1},
    [35] = {"TQ2_0", 256, 66, -1},             [39] = {"MXFP4", 32, 17, -1},
};
#define N_GGML_TYPES (sizeof GGML_TYPES / sizeof GGML_TYPES[0])

static const ggml_traits *ggml_type(uint32_t t) {
    return t < N_GGML_TYPES && GGML_TYPES[t].block ? &GGML_TYPES[t] : NULL;
}

const char *sc_gguf_ggml_type_name(uint32_t t) {
    const ggml_traits *tr = ggml_type(t);
    return tr ? tr->name : "?";
}

bool sc_gguf_ggml_dtype(uint32_t t, sc_dtype *out) {
    const ggml_traits *tr = ggml_type(t);
    if (!tr || tr->dtype < 0) return false;
    *out = (sc_dtype)tr->dtype;
    return true;
}

/* ---- metadata value types ---- */

static const char *const TYPE_NAMES[SC_GGUF_TYPE_COUNT] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
    "bool",  "string", "array", "uint64", "int64", "float64"};
/* Fixed sizes; 0 for string and array. */
static const uint8_t TYPE_SIZE[SC_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
/* Smallest encoding of a value of each type (string: its length; array:
 * element type + count). */
static const uint8_t TYPE_MIN[SC_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 8, 12, 8, 8, 8};

const char *sc_gguf_type_name(sc_gguf_type t) {
    return (unsigned)t < SC_GGUF_TYPE_COUNT ? TYPE_NAMES[t] : "?";
}

/* Measures the value of `type` at p (avail bytes readable) and fills out
 * (when non-NULL). Returns NULL, or a reason (written into why) on failure.
 * Used both to validate the file and, defensively, by the iterators. */
static const char *measure(const uint8_t *p, size_t avail, uint32_t type, int depth, sc_gguf_value *out,
                           char *why, size_t why_cap) {
    sc_gguf_value v = {.type = (sc_gguf_type)type, .p = p};
    if (type >= SC_GGUF_TYPE_COUNT) {
        snprintf(why, why_cap, "unknown value type %u", type);
        return why;
    }
    if (TYPE_SIZE[type]) {
        if (avail < TYPE_SIZE[type]) {
            snprintf(why, why_cap, "%s value needs %u bytes, %zu left in the file", TYPE_NAMES[type],
                     TYPE_SIZE[type], avail);
            return why;
        }
        v.size = TYPE_SIZE[type];
    } else if (type == SC_GGUF_STRING) {
        if (avail < 8) {
            snprintf(why, why_cap, "string length needs 8 bytes, %zu left in the file", avail);
            return why;
        }
        uint64_t len = sc_le64(p);
        if (len > avail - 8) {
            snprintf(why, why_cap, "string length %llu exceeds the %zu bytes left in the file",
                     (unsigned long long)len, avail - 8);
            return why;
        }
        v.count = len;
        v.p = p + 8;
        v.size = (size_t)len;
    } else { /* array */
        if (depth >= SC_GGUF_MAX_NESTING) {
            snprintf(why, why_cap, "arrays nested more than %d deep", SC_GGUF_MAX_NESTING);
            return why;
        }
        if (avail < 12) {
            snprintf(why, why_cap, "array header needs 12 bytes, %zu left in the file", avail);
            return why;
        }
        uint32_t et = sc_le32(p);
        uint64_t n = sc_le64(p + 4);
        size_t left = avail - 12;
        if (et >= SC_GGUF_TYPE_COUNT) {
            snprintf(why, why_cap, "array of unknown element type %u", et);
            return why;
        }
        if (n > left / TYPE_MIN[et]) {
            snprintf(why, why_cap, "array count %llu of %s exceeds what the %zu bytes left in the file can hold",
                     (unsigned long long)n, TYPE_NAMES[et], left);
            return why;
        }
        v.elem_type = (sc_gguf_type)et;
        v.count = n;
        v.p = p + 12;
        if (TYPE_SIZE[et]) {
            v.size = (size_t)n * TYPE_SIZE[et]; /* <= left, checked above */
        } else {
            size_t pos = 0;
            for (uint64_t i = 0; i < n; i++) {
                sc_gguf_value e;
                if (measure(v.p + pos, left - pos, et, depth + 1, &e, why, why_cap)) return why;
                pos += (size_t)(e.p - (v.p + pos)) + e.size;
            }
            v.size = pos;
        }
    }
    if (out) *out = v;
    return NULL;
}

/* Bytes from the start of an encoded value to its end. */
static size_t encoded_size(const uint8_t *start, const sc_gguf_value *v) { return (size_t)(v->p - start) + v->size; }

/* ---- the handle ---- */

typedef struct name_ix {
    const char *name;
    int64_t i;
} name_ix;

typedef struct gguf_kv {
    size_t key_off; /* into pool until the end of parsing */
    const char *key;
    sc_gguf_value val;
} gguf_kv;

struct sc_gguf {
    char path[1024];
    sc_file_map map;
    uint32_t version;
    uint64_t alignment, data_offset;
    gguf_kv *kv;
    int64_t n_kv, cap_kv;
    sc_gguf_tensor *tensors;
    size_t *tensor_name_off; /* into pool until the end of parsing */
    int64_t cap_names;
    int64_t n_tensors, cap_tensors;
    name_ix *kv_sorted, *tensor_sorted; /* sorted by name, for bsearch */
    char *pool;
    size_t pool_n, pool_cap;
};

void sc_gguf_free(sc_gguf *g) {
    if (!g) return;
    sc_unmap_file(&g->map);
    free(g->kv);
    free(g->tensors);
    free(g->tensor_name_off);
    free(g->kv_sorted);
    free(g->tensor_sorted);
    free(g->pool);
    free(g);
}

sc_file_map sc_gguf_take_map(sc_gguf *g) {
    sc_file_map m = g->map;
    g->map.data = NULL;
    g->map.size = 0;
    return m;
}

const char *sc_gguf_path(const sc_gguf *g) { return g->path; }
uint32_t sc_gguf_version(const sc_gguf *g) { return g->version; }
uint64_t sc_gguf_alignment(const sc_gguf *g) { return g->alignment; }
uint64_t sc_gguf_data_offset(const sc_gguf *g) { return g->data_offset; }
uint64_t sc_gguf_file_size(const sc_gguf *g) { return g->map.size; }

/* Grows *arr (of *cap elements of size elem) to hold need elements. */
static bool grow(void **arr, int64_t *cap, int64_t need, size_t elem) {
    if (need <= *cap) return true;
    int64_t nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    size_t bytes;
    if (!sc_mul_ok((size_t)nc, elem, &bytes)) return false;
    void *p = realloc(*arr, bytes);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

/* Copies a name into the pool (NUL-terminated); returns its offset. */
static bool pool_add(sc_gguf *g, const uint8_t *s, size_t len, size_t *off) {
    size_t need;
    if (!sc_add_ok(g->pool_n, len + 1, &need)) return false;
    if (need > g->pool_cap) {
        size_t nc = g->pool_cap ? g->pool_cap : 1024;
        while (nc < need) nc *= 2;
        char *p = realloc(g->pool, nc);
        if (!p) return false;
        g->pool = p;
        g->pool_cap = nc;
    }
    memcpy(g->pool + g->pool_n, s, len);
    g->pool[g->pool_n + len] = '\0';
    *off = g->pool_n;
    g->pool_n = need;
    return true;
}

/* ---- parsing ---- */

typedef struct reader {
    sc_gguf *g;
    const uint8_t *base;
    size_t size, pos;
    sc_err *err;
} reader;

static size_t left(const reader *r) { return r->size - r->pos; }

static sc_status truncated(reader *r, const char *field, size_t need) {
    return sc_errf(r->err, SC_EFORMAT, "%s: %s at offset %zu needs %zu bytes but the file ends at %zu (truncated?)",
                   r->g->path, field, r->pos, need, r->size);
}

static sc_status read_u32(reader *r, const char *field, uint32_t *out) {
    if (left(r) < 4) return truncated(r, field, 4);
    *out = sc_le32(r->base + r->pos);
    r->pos += 4;
    return SC_OK;
}

static sc_status read_u64(reader *r, const char *field, uint64_t *out) {
    if (left(r) < 8) return truncated(r, field, 8);
    *out = sc_le64(r->base + r->pos);
    r->pos += 8;
    return SC_OK;
}

/* Reads a name (key or tensor name) into the pool. */
static sc_status read_name(reader *r, const char *field, size_t *off, size_t *len_out) {
    uint64_t len = 0;
    SC_TRY(read_u64(r, field, &len));
    if (len > left(r))
        return sc_errf(r->err, SC_EFORMAT, "%s: %s at offset %zu: string length %llu exceeds the %zu bytes left in the file",
                       r->g->path, field, r->pos - 8, (unsigned long long)len, left(r));
    const uint8_t *s = r->base + r->pos;
    if (memchr(s, 0, (size_t)len))
        return sc_errf(r->err, SC_EFORMAT, "%s: %s at offset %zu contains a NUL byte", r->g->path, field, r->pos);
    if (!pool_add(r->g, s, (size_t)len, off)) return sc_errf(r->err, SC_ENOMEM, "%s: out of memory", r->g->path);
    r->pos += (size_t)len;
    if (len_out) *len_out = (size_t)len;
    return SC_OK;
}

/* Short printable form of a name from the file, for messages. */
#define NAME_FMT "'%.128s'"

static sc_status parse_kvs(reader *r, uint64_t n_kv) {
    sc_gguf *g = r->g;
    char field[200], why[160];
    for (uint64_t i = 0; i < n_kv; i++) {
        if (!grow((void **)&g->kv, &g->cap_kv, g->n_kv + 1, sizeof *g->kv))
            return sc_errf(r->err, SC_ENOMEM, "%s: out of memory", g->path);
        gguf_kv *kv = &g->kv[g->n_kv];
        snprintf(field, sizeof field, "key of metadata entry %llu", (unsigned long long)i);
        SC_TRY(read_name(r, field, &kv->key_off, NULL));
        const char *key = g->pool + kv->key_off;
        uint32_t type = 0;
        snprintf(field, sizeof field, "type of metadata " NAME_FMT, key);
        SC_TRY(read_u32(r, field, &type));
        const uint8_t *start = r->base + r->pos;
        if (measure(start, left(r), type, 0, &kv->val, why, sizeof why))
            return sc_errf(r->err, SC_EFORMAT, "%s: metadata " NAME_FMT " at offset %zu: %s", g->path, key, r->pos, why);
        r->pos += encoded_size(start, &kv->val);
        g->n_kv++;
    }
    return SC_OK;
}

static sc_status parse_tensor_infos(reader *r, uint64_t n_tensors) {
    sc_gguf *g = r->g;
    char field[200];
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (!grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof *g->tensors))
            return sc_errf(r->err, SC_ENOMEM, "%s: out of memory", g->path);
        if (!grow((void **)&g->tensor_name_off, &g->cap_names, g->n_tensors + 1, sizeof *g->tensor_name_off))
            return sc_errf(r->err, SC_ENOMEM, "%s: out of memory", g->path);
        sc_gguf_tensor *t = &g->tensors[g->n_tensors];
        memset(t, 0, sizeof *t);
        snprintf(field, sizeof field, "name of tensor %llu", (unsigned long long)i);
        SC_TRY(read_name(r, field, &g->tensor_name_off[g->n_tensors], NULL));
        const char *name = g->pool + g->tensor_name_off[g->n_tensors];
        snprintf(field, sizeof field, "tensor " NAME_FMT " n_dims", name);
        SC_TRY(read_u32(r, field, &t->n_dims));
        if (t->n_dims > SC_GGUF_MAX_DIMS)
            return sc_errf(r->err, SC_EFORMAT, "%s: tensor " NAME_FMT ": n_dims = %u exceeds %d", g->path, name,
                           t->n_dims, SC_GGUF_MAX_DIMS);
        uint64_t n = 1;
        for (int d = 0; d < SC_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            snprintf(field, sizeof field, "tensor " NAME_FMT " ne[%u]", name, d);
            SC_TRY(read_u64(r, field, &t->ne[d]));
            if (t->ne[d] == 0)
                return sc_errf(r->err, SC_EFORMAT, "%s: tensor " NAME_FMT ": ne[%u] is 0", g->path, name, d);
            if (__builtin_mul_overflow(n, t->ne[d], &n) || n > (uint64_t)INT64_MAX)
                return sc_errf(r->err, SC_EFORMAT, "%s: tensor " NAME_FMT ": element count overflows (ne[%u] = %llu)",
                               g->path, name, d, (unsigned long long)t->ne[d]);
        }
        t->n_elems = n;
        snprintf(field, sizeof field, "tensor " NAME_FMT " type", name);
        SC_TRY(read_u32(r, field, &t->ggml_type));
        const ggml_traits *tr = ggml_type(t->ggml_type);
        if (!tr)
            return sc_errf(r->err, SC_EFORMAT, "%s: tensor " NAME_FMT ": unknown ggml type %u", g->path, name,
                           t->ggml_type);
        if (t->ne[0] % tr->block)
            return sc_errf(r->err, SC_EFORMAT, "%s: tensor " NAME_FMT ": ne[0] = %llu is not a multiple of the %s block size %u",
                           g->path, name, (unsigned long long)t->ne[0], tr->name, tr->block);
        if (__builtin_mul_overflow(n / tr->block, (uint64_t)tr->size, &t->n_bytes))
            return sc_errf(r->err, SC_EFORMAT, "%s: tensor " NAME_FMT ": byte size overflows", g->path, name);
        snprintf(field, sizeof field, "tensor " NAME_FMT " offset", name);
        SC_TRY(read_u64(r, field, &t->offset));
        g->n_tensors++;
    }
    return SC_OK;
}

/* general.alignment: any integer type, a nonzero power of two. */
static sc_status read_alignment(sc_gguf *g, sc_err *err) {
    g->alignment = SC_GGUF_DEFAULT_ALIGNMENT;
    const sc_gguf_value *v = sc_gguf_get(g, "general.alignment");
    if (!v) return SC_OK;
    uint64_t a;
    if (!sc_gguf_value_u64(v, &a))
        return sc_errf(err, SC_EFORMAT, "%s: general.alignment has type %s, expected an unsigned integer", g->path,
                       sc_gguf_type_name(v->type));
    if (a == 0 || (a & (a - 1)) != 0 || a > ((uint64_t)1 << 30))
        return sc_errf(err, SC_EFORMAT, "%s: general.alignment = %llu is not a power of two in [1, 2^30]", g->path,
                       (unsigned long long)a);
    g->alignment = a;
    return SC_OK;
}

static sc_status place_tensors(sc_gguf *g, size_t infos_end, sc_err *err) {
    uint64_t a = g->alignment;
    g->data_offset = ((uint64_t)infos_end + a - 1) & ~(a - 1); /* no overflow: infos_end < 2^63, a <= 2^30 */
    uint64_t size = g->map.size;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        sc_gguf_tensor *t = &g->tensors[i];
        if (t->offset % a)
            return sc_errf(err, SC_EFORMAT, "%s: tensor " NAME_FMT ": offset %llu is not a multiple of the alignment %llu",
                           g->path, t->name, (unsigned long long)t->offset, (unsigned long long)a);
        uint64_t avail = g->data_offset <= size ? size - g->data_offset : 0;
        if (t->offset > avail || t->n_bytes > avail - t->offset)
            return sc_errf(err, SC_EFORMAT,
                           "%s: tensor " NAME_FMT ": data [offset %llu, %llu bytes] extends past end of file "
                           "(%llu bytes, data section at %llu)",
                           g->path, t->name, (unsigned long long)t->offset, (unsigned long long)t->n_bytes,
                           (unsigned long long)size, (unsigned long long)g->data_offset);
        t->data = g->map.data + g->data_offset + t->offset;
    }
    return SC_OK;
}

/* ---- name lookup: (name, index) pairs sorted by name ---- */

static int cmp_name_ix(const void *a, const void *b) {
    return strcmp(((const name_ix *)a)->name, ((const name_ix *)b)->name);
}

/* Builds the sorted index; rejects duplicate names (what: "metadata key"). */
static sc_status sort_names(sc_gguf *g, name_ix **out, int64_t n, bool tensors, sc_err *err) {
    name_ix *v = sc_calloc((size_t)n, sizeof *v);
    if (!v) return sc_errf(err, SC_ENOMEM, "%s: out of memory", g->path);
    *out = v;
    for (int64_t i = 0; i < n; i++) v[i] = (name_ix){tensors ? g->tensors[i].name : g->kv[i].key, i};
    qsort(v, (size_t)n, sizeof *v, cmp_name_ix);
    for (int64_t i = 1; i < n; i++)
        if (strcmp(v[i - 1].name, v[i].name) == 0)
            return sc_errf(err, SC_EFORMAT, "%s: duplicate %s " NAME_FMT, g->path,
                           tensors ? "tensor" : "metadata key", v[i].name);
    return SC_OK;
}

static int64_t find_name(const name_ix *v, int64_t n, const char *name) {
    if (!v || !name) return -1;
    name_ix key = {name, 0};
    const name_ix *hit = bsearch(&key, v, (size_t)n, sizeof *v, cmp_name_ix);
    return hit ? hit->i : -1;
}

/* ---- open ---- */

static sc_status parse(sc_gguf *g, sc_err *err) {
    reader r = {.g = g, .base = g->map.data, .size = g->map.size, .err = err};
    if (r.size < 4) return truncated(&r, "magic", 4);
    if (memcmp(r.base, "GGUF", 4) != 0) return sc_errf(err, SC_EFORMAT, "%s: not a GGUF file (bad magic)", g->path);
    r.pos = 4;
    SC_TRY(read_u32(&r, "version", &g->version));
    if (g->version != 2 && g->version != 3) {
        if (g->version == 1)
            return sc_errf(err, SC_EUNSUPPORTED, "%s: GGUF version 1 is not supported (only versions 2 and 3)", g->path);
        if ((g->version & 0xffff) == 0 && g->version != 0)
            return sc_errf(err, SC_EUNSUPPORTED, "%s: GGUF version %u is not supported (a big-endian file?)", g->path,
                           g->version);
        return sc_errf(err, SC_EUNSUPPORTED, "%s: GGUF version %u is not supported (only versions 2 and 3)", g->path,
                       g->version);
    }
    uint64_t n_tensors, n_kv;
    SC_TRY(read_u64(&r, "tensor_count", &n_tensors));
    SC_TRY(read_u64(&r, "metadata_kv_count", &n_kv));
    /* Every metadata entry takes at least 13 bytes (key length, type, a
     * one-byte value) and every tensor info at least 24 (name length,
     * n_dims, type, offset): counts beyond that are hostile. */
    if (n_kv > left(&r) / 13)
        return sc_errf(err, SC_EFORMAT, "%s: metadata_kv_count = %llu is impossible with %zu bytes after the header",
                       g->path, (unsigned long long)n_kv, left(&r));
    if (n_tensors > left(&r) / 24)
        return sc_errf(err, SC_EFORMAT, "%s: tensor_count = %llu is impossible with %zu bytes after the header",
                       g->path, (unsigned long long)n_tensors, left(&r));
    SC_TRY(parse_kvs(&r, n_kv));
    SC_TRY(parse_tensor_infos(&r, n_tensors));
    /* The pool no longer moves: turn offsets into pointers. */
    for (int64_t i = 0; i < g->n_kv; i++) g->kv[i].key = g->pool + g->kv[i].key_off;
    for (int64_t i = 0; i < g->n_tensors; i++) g->tensors[i].name = g->pool + g->tensor_name_off[i];
    SC_TRY(sort_names(g, &g->kv_sorted, g->n_kv, false, err));
    SC_TRY(sort_names(g, &g->tensor_sorted, g->n_tensors, true, err));
    SC_TRY(read_alignment(g, err));
    return place_tensors(g, r.pos, err);
}

sc_status sc_gguf_open(const char *path, sc_gguf **out, sc_err *err) {
    *out = NULL;
    sc_gguf *g = calloc(1, sizeof *g);
    if (!g) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    snprintf(g->path, sizeof g->path, "%s", path);
    sc_status st = sc_map_file(path, &g->map, err);
    if (st == SC_OK) st = parse(g, err);
    if (st != SC_OK) {
        sc_gguf_free(g);
        return st;
    }
    *out = g;
    return SC_OK;
}

/* ---- metadata access ---- */

int64_t sc_gguf_kv_count(const sc_gguf *g) { return g->n_kv; }
const char *sc_gguf_kv_key(const sc_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL; }
const sc_gguf_value *sc_gguf_kv_value(const sc_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_kv ? &g->kv[i].val : NULL;
}
int64_t sc_gguf_find_kv(const sc_gguf *g, const char *key) { return find_name(g->kv_sorted, g->n_kv, key); }
const sc_gguf_value *sc_gguf_get(const sc_gguf *g, const char *key) {
    return sc_gguf_kv_value(g, sc_gguf_find_kv(g, key));
}

bool sc_gguf_value_int(const sc_gguf_value *v, int64_t *out) {
    uint64_t u;
    switch (v->type) {
    case SC_GGUF_UINT8: *out = v->p[0]; return true;
    case SC_GGUF_INT8: *out = (int8_t)v->p[0]; return true;
    case SC_GGUF_UINT16: *out = sc_le16(v->p); return true;
    case SC_GGUF_INT16: *out = (int16_t)sc_le16(v->p); return true;
    case SC_GGUF_UINT32: *out = sc_le32(v->p); return true;
    case SC_GGUF_INT32: *out = (int32_t)sc_le32(v->p); return true;
    case SC_GGUF_INT64: *out = (int64_t)sc_le64(v->p); return true;
    case SC_GGUF_UINT64:
        u = sc_le64(v->p);
        if (u > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)u;
        return true;
    default: return false;
    }
}

bool sc_gguf_value_u64(const sc_gguf_value *v, uint64_t *out) {
    int64_t i;
    if (v->type == SC_GGUF_UINT64) {
        *out = sc_le64(v->p);
        return true;
    }
    if (!sc_gguf_value_int(v, &i) || i < 0) return false;
    *out = (uint64_t)i;
    return true;
}

bool sc_gguf_value_float(const sc_gguf_value *v, double *out) {
    int64_t i;
    uint64_t u;
    if (v->type == SC_GGUF_FLOAT32) {
        *out = sc_lef32(v->p);
    } else if (v->type == SC_GGUF_FLOAT64) {
        u = sc_le64(v->p);
        memcpy(out, &u, sizeof *out);
    } else if (sc_gguf_value_int(v, &i)) {
        *out = (double)i;
    } else if (sc_gguf_value_u64(v, &u)) {
        *out = (double)u;
    } else {
        return false;
    }
    return true;
}

bool sc_gguf_value_bool(const sc_gguf_value *v, bool *out) {
    if (v->type != SC_GGUF_BOOL) return false;
    *out = v->p[0] != 0;
    return true;
}

bool sc_gguf_value_string(const sc_gguf_value *v, const char **s, size_t *len) {
    if (v->type != SC_GGUF_STRING) return false;
    *s = (const char *)v->p;
    *len = v->size;
    return true;
}

void sc_gguf_iter_init(sc_gguf_iter *it, const sc_gguf_value *arr) {
    it->arr = arr;
    it->i = 0;
    it->pos = 0;
}

bool sc_gguf_iter_next(sc_gguf_iter *it, sc_gguf_value *out) {
    const sc_gguf_value *a = it->arr;
    if (a->type != SC_GGUF_ARRAY || it->i >= a->count || it->pos > a->size) return false;
    const uint8_t *start = a->p + it->pos;
    char why[160];
    /* Already validated at open; measuring again keeps the view in bounds. */
    if (measure(start, a->size - it->pos, a->elem_type, 1, out, why, sizeof why)) return false;
    it->pos += encoded_size(start, out);
    it->i++;
    return true;
}

bool sc_gguf_array_elem(const sc_gguf_value *arr, uint64_t idx, sc_gguf_value *out) {
    if (arr->type != SC_GGUF_ARRAY || idx >= arr->count) return false;
    size_t es = TYPE_SIZE[arr->elem_type];
    if (es) {
        *out = (sc_gguf_value){.type = arr->elem_type, .p = arr->p + idx * es, .size = es};
        return true;
    }
    sc_gguf_iter it;
    sc_gguf_iter_init(&it, arr);
    for (uint64_t i = 0; i <= idx; i++)
        if (!sc_gguf_iter_next(&it, out)) return false;
    return true;
}

static sc_status get_key(const sc_gguf *g, const char *key, const sc_gguf_value **v, sc_err *err) {
    *v = sc_gguf_get(g, key);
    if (!*v) return sc_errf(err, SC_EFORMAT, "%s: missing metadata key '%s'", g->path, key);
    return SC_OK;
}

static sc_status wrong_type(const sc_gguf *g, const char *key, const sc_gguf_value *v, const char *want, sc_err *err) {
    return sc_errf(err, SC_EFORMAT, "%s: metadata key '%s' has type %s%s%s, expected %s", g->path, key,
                   sc_gguf_type_name(v->type), v->type == SC_GGUF_ARRAY ? " of " : "",
                   v->type == SC_GGUF_ARRAY ? sc_gguf_type_name(v->elem_type) : "", want);
}

sc_status sc_gguf_get_int(const sc_gguf *g, const char *key, int64_t *out, sc_err *err) {
    const sc_gguf_value *v;
    SC_TRY(get_key(g, key, &v, err));
    if (!sc_gguf_value_int(v, out)) return wrong_type(g, key, v, "an integer (fitting int64)", err);
    return SC_OK;
}

sc_status sc_gguf_get_float(const sc_gguf *g, const char *key, double *out, sc_err *err) {
    const sc_gguf_value *v;
    SC_TRY(get_key(g, key, &v, err));
    if (!sc_gguf_value_float(v, out)) return wrong_type(g, key, v, "a number", err);
    return SC_OK;
}

sc_status sc_gguf_get_string(const sc_gguf *g, const char *key, const char **s, size_t *len, sc_err *err) {
    const sc_gguf_value *v;
    SC_TRY(get_key(g, key, &v, err));
    if (!sc_gguf_value_string(v, s, len)) return wrong_type(g, key, v, "a string", err);
    return SC_OK;
}

/* ---- tensors ---- */

int64_t sc_gguf_tensor_count(const sc_gguf *g) { return g->n_tensors; }
const sc_gguf_tensor *sc_gguf_tensor_at(const sc_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
const sc_gguf_tensor *sc_gguf_find_tensor(const sc_gguf *g, const char *name) {
    return sc_gguf_tensor_at(g, find_name(g->tensor_sorted, g->n_tensors, name));
}
