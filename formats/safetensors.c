#define _POSIX_C_SOURCE 200809L
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dtypes ---- */

static const struct {
    const char *name;
    int bits;
    int dt; /* sc_dtype, or -1 when we do not compute with it */
} st_dtypes[] = {
    {"F32", 32, SC_DT_F32},   {"F16", 16, SC_DT_F16},     {"BF16", 16, SC_DT_BF16},   {"F64", 64, -1},
    {"I64", 64, -1},          {"U64", 64, -1},            {"I32", 32, -1},            {"U32", 32, -1},
    {"I16", 16, -1},          {"U16", 16, -1},            {"I8", 8, -1},              {"U8", 8, -1},
    {"BOOL", 8, -1},          {"F8_E4M3", 8, -1},         {"F8_E5M2", 8, -1},         {"F8_E8M0", 8, -1},
    {"F6_E2M3", 6, -1},       {"F6_E3M2", 6, -1},         {"F4", 4, -1},              {"C64", 64, -1},
};

bool sc_st_dtype_parse(const char *name, int *bits, sc_dtype *dt, bool *supported) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++) {
        if (strcmp(name, st_dtypes[i].name) == 0) {
            *bits = st_dtypes[i].bits;
            *supported = st_dtypes[i].dt >= 0;
            if (*supported) *dt = (sc_dtype)st_dtypes[i].dt;
            return true;
        }
    }
    return false;
}

static const char *dtype_st_name(sc_dtype t) {
    switch (t) {
    case SC_DT_F32: return "F32";
    case SC_DT_F16: return "F16";
    case SC_DT_BF16: return "BF16";
    default: return NULL;
    }
}

/* Bytes of n elements of `bits` bits; false on overflow or a partial byte. */
static bool elems_to_bytes(uint64_t n, int bits, uint64_t *out) {
    uint64_t total_bits;
    if (__builtin_mul_overflow(n, (uint64_t)bits, &total_bits) || total_bits % 8) return false;
    *out = total_bits / 8;
    return *out <= SIZE_MAX;
}

/* A JSON number holding a non-negative integer <= max. */
static bool json_uint(const cJSON *j, uint64_t max, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double d = j->valuedouble;
    if (!isfinite(d) || d < 0.0 || d != floor(d) || d > (double)max) return false;
    *out = (uint64_t)d;
    return true;
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const sc_st_tensor *)a)->name, ((const sc_st_tensor *)b)->name);
}

/* ---- one file ---- */

struct sc_st_file {
    char *path;
    sc_file_map map;
    const uint8_t *data0; /* start of the data section */
    bool detached;
    cJSON *root; /* names and metadata strings point into it */
    sc_st_tensor *tensors;
    size_t n_tensors;
    const char **meta_keys, **meta_values;
    size_t n_meta;
};

void sc_st_free(sc_st_file *f) {
    if (!f) return;
    if (!f->detached) sc_unmap_file(&f->map);
    cJSON_Delete(f->root);
    free(f->tensors);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->path);
    free(f);
}

static sc_status parse_tensor(sc_st_file *f, const cJSON *e, size_t data_size, sc_st_tensor *t, sc_err *err) {
    const char *p = f->path, *nm = t->name;
    if (!cJSON_IsObject(e)) return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': entry is not an object", p, nm);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd)) return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': dtype missing or not a string", p, nm);
    int bits = 0;
    if (!sc_st_dtype_parse(jd->valuestring, &bits, &t->dtype, &t->supported))
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': unknown dtype '%.32s'", p, nm, jd->valuestring);
    t->dtype_name = jd->valuestring;
    if (!cJSON_IsArray(js)) return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': shape missing or not an array", p, nm);
    int nd = cJSON_GetArraySize(js);
    if (nd > SC_ST_MAX_DIMS)
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': shape has %d dimensions (max %d)", p, nm, nd, SC_ST_MAX_DIMS);
    t->n_dims = nd;
    uint64_t n = 1;
    int d = 0;
    for (const cJSON *x = js->child; x; x = x->next, d++) {
        uint64_t v;
        if (!json_uint(x, (uint64_t)SC_ST_MAX_SHAPE, &v))
            return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': shape[%d] is not an integer in [0, 2^40]", p, nm, d);
        t->shape[d] = (int64_t)v;
        if (__builtin_mul_overflow(n, v, &n))
            return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': element count overflows", p, nm);
    }
    t->n_elements = n;
    uint64_t bytes;
    if (!elems_to_bytes(n, bits, &bytes))
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': byte size overflows or is not whole bytes", p, nm);
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2)
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': data_offsets is not a pair", p, nm);
    uint64_t b, en;
    if (!json_uint(jo->child, (uint64_t)1 << 53, &b) || !json_uint(jo->child->next, (uint64_t)1 << 53, &en))
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': data_offsets are not non-negative integers", p, nm);
    if (b > en)
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': data_offsets [%llu, %llu] are reversed", p, nm,
                       (unsigned long long)b, (unsigned long long)en);
    if (en > data_size)
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': data_offsets end %llu is beyond the %zu-byte data section",
                       p, nm, (unsigned long long)en, data_size);
    if (en - b != bytes)
        return sc_errf(err, SC_EFORMAT,
                       "%s: tensor '%s': data_offsets span %llu bytes but %s x %llu elements need %llu", p, nm,
                       (unsigned long long)(en - b), t->dtype_name, (unsigned long long)n,
                       (unsigned long long)bytes);
    t->n_bytes = (size_t)bytes;
    t->data = f->data0 + (size_t)b;
    return SC_OK;
}

static sc_status parse_meta(sc_st_file *f, const cJSON *m, sc_err *err) {
    if (!cJSON_IsObject(m)) return sc_errf(err, SC_EFORMAT, "%s: __metadata__ is not an object", f->path);
    size_t n = (size_t)cJSON_GetArraySize(m);
    f->meta_keys = sc_calloc(n, sizeof *f->meta_keys);
    f->meta_values = sc_calloc(n, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values) return sc_errf(err, SC_ENOMEM, "%s: out of memory", f->path);
    for (const cJSON *x = m->child; x; x = x->next) {
        if (!cJSON_IsString(x))
            return sc_errf(err, SC_EFORMAT, "%s: __metadata__ value of '%.64s' is not a string", f->path,
                           x->string ? x->string : "");
        f->meta_keys[f->n_meta] = x->string ? x->string : "";
        f->meta_values[f->n_meta++] = x->valuestring;
    }
    return SC_OK;
}

static sc_status parse_header(sc_st_file *f, sc_err *err) {
    const char *p = f->path;
    if (f->map.size < 8)
        return sc_errf(err, SC_EFORMAT, "%s: file is %zu bytes, too short for a safetensors header", p, f->map.size);
    uint64_t hn = sc_le64(f->map.data);
    if (hn > (uint64_t)(f->map.size - 8))
        return sc_errf(err, SC_EFORMAT, "%s: header length %llu exceeds the file size %zu (truncated?)", p,
                       (unsigned long long)hn, f->map.size);
    if (hn > SC_ST_MAX_HEADER)
        return sc_errf(err, SC_EFORMAT, "%s: header length %llu exceeds the %llu-byte limit", p,
                       (unsigned long long)hn, (unsigned long long)SC_ST_MAX_HEADER);
    if (hn < 2) return sc_errf(err, SC_EFORMAT, "%s: header length %llu is too short", p, (unsigned long long)hn);
    /* JSON allows no raw control bytes; cJSON would skip them as whitespace. */
    for (size_t i = 0; i < (size_t)hn; i++) {
        uint8_t ch = f->map.data[8 + i];
        if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
            return sc_errf(err, SC_EFORMAT, "%s: header has control byte 0x%02x at offset %zu", p, ch, i);
    }
    /* Parse a NUL-terminated copy so the parser can never run past the header. */
    char *buf = malloc((size_t)hn + 1);
    if (!buf)
        return sc_errf(err, SC_ENOMEM, "%s: cannot allocate %llu bytes for the header", p, (unsigned long long)hn);
    memcpy(buf, f->map.data + 8, (size_t)hn);
    buf[hn] = '\0';
    const char *end = NULL;
    f->root = cJSON_ParseWithLengthOpts(buf, (size_t)hn + 1, &end, 1);
    size_t at = end ? (size_t)(end - buf) : 0;
    free(buf);
    if (!f->root) return sc_errf(err, SC_EFORMAT, "%s: header is not valid JSON (near byte %zu)", p, at);
    if (at != (size_t)hn) return sc_errf(err, SC_EFORMAT, "%s: header has a NUL byte at %zu", p, at);
    if (!cJSON_IsObject(f->root)) return sc_errf(err, SC_EFORMAT, "%s: header JSON is not an object", p);

    size_t data_size = f->map.size - 8 - (size_t)hn;
    f->data0 = f->map.data + 8 + (size_t)hn;
    size_t n = 0;
    for (const cJSON *x = f->root->child; x; x = x->next)
        if (!x->string || strcmp(x->string, "__metadata__") != 0) n++;
    f->tensors = sc_calloc(n, sizeof *f->tensors);
    if (!f->tensors) return sc_errf(err, SC_ENOMEM, "%s: out of memory for %zu tensors", p, n);
    for (const cJSON *x = f->root->child; x; x = x->next) {
        const char *name = x->string ? x->string : "";
        if (strcmp(name, "__metadata__") == 0) {
            if (f->meta_keys) return sc_errf(err, SC_EFORMAT, "%s: duplicate __metadata__", p);
            SC_TRY(parse_meta(f, x, err));
            continue;
        }
        sc_st_tensor *t = &f->tensors[f->n_tensors++];
        t->name = name;
        t->file = f->path;
        SC_TRY(parse_tensor(f, x, data_size, t, err));
    }
    if (f->n_tensors > 1) qsort(f->tensors, f->n_tensors, sizeof *f->tensors, cmp_tensor);
    for (size_t i = 1; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
            return sc_errf(err, SC_EFORMAT, "%s: tensor '%s' is listed twice", p, f->tensors[i].name);
    return SC_OK;
}

sc_status sc_st_open(const char *path, sc_st_file **out, sc_err *err) {
    *out = NULL;
    sc_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    }
    sc_status st = sc_map_file(path, &f->map, err);
    if (st == SC_OK) st = parse_header(f, err);
    if (st != SC_OK) {
        sc_st_free(f);
        return st;
    }
    *out = f;
    return SC_OK;
}

const char *sc_st_path(const sc_st_file *f) { return f->path; }
size_t sc_st_count(const sc_st_file *f) { return f->n_tensors; }
const sc_st_tensor *sc_st_get(const sc_st_file *f, size_t i) { return i < f->n_tensors ? &f->tensors[i] : NULL; }

const sc_st_tensor *sc_st_find(const sc_st_file *f, const char *name) {
    sc_st_tensor key = {.name = name};
    return bsearch(&key, f->tensors, f->n_tensors, sizeof *f->tensors, cmp_tensor);
}

size_t sc_st_meta_count(const sc_st_file *f) { return f->n_meta; }

bool sc_st_meta_get(const sc_st_file *f, size_t i, const char **key, const char **value) {
    if (i >= f->n_meta) return false;
    *key = f->meta_keys[i];
    *value = f->meta_values[i];
    return true;
}

const char *sc_st_meta_find(const sc_st_file *f, const char *key) {
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

bool sc_st_detach_map(sc_st_file *f, sc_file_map *out) {
    if (f->detached) return false;
    *out = f->map;
    f->detached = true;
    return true;
}

/* ---- sets ---- */

typedef struct st_entry {
    const char *name;
    const sc_st_tensor *t;
} st_entry;

struct sc_st_set {
    char *path;
    sc_st_file **files;
    size_t n_files;
    cJSON *index;      /* sharded only; entry names point into it */
    st_entry *entries; /* sharded only, sorted by name */
    size_t n_entries;
};

void sc_st_set_free(sc_st_set *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_files; i++) sc_st_free(s->files[i]);
    free(s->files);
    cJSON_Delete(s->index);
    free(s->entries);
    free(s->path);
    free(s);
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/* A shard file name must stay inside the index's directory. */
static bool plain_name(const char *s) {
    return s[0] != '\0' && strchr(s, '/') == NULL && strchr(s, '\\') == NULL && strstr(s, "..") == NULL;
}

static sc_status open_index(sc_st_set *s, sc_err *err) {
    const char *p = s->path;
    char *text = NULL;
    size_t len = 0;
    SC_TRY(sc_read_file(p, (size_t)SC_ST_MAX_HEADER, &text, &len, err));
    s->index = cJSON_ParseWithLength(text, len + 1);
    free(text);
    if (!s->index) return sc_errf(err, SC_EFORMAT, "%s: not valid JSON", p);
    if (!cJSON_IsObject(s->index)) return sc_errf(err, SC_EFORMAT, "%s: index JSON is not an object", p);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(s->index, "weight_map");
    if (!wm) return sc_errf(err, SC_EFORMAT, "%s: missing weight_map", p);
    if (!cJSON_IsObject(wm)) return sc_errf(err, SC_EFORMAT, "%s: weight_map is not an object", p);
    size_t n = (size_t)cJSON_GetArraySize(wm);
    if (n == 0) return sc_errf(err, SC_EFORMAT, "%s: weight_map is empty", p);
    s->entries = sc_calloc(n, sizeof *s->entries);
    const char **shard_names = sc_calloc(n, sizeof *shard_names);
    s->files = sc_calloc(n, sizeof *s->files);
    if (!s->entries || !shard_names || !s->files) {
        free(shard_names);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", p);
    }
    char dir[4096];
    const char *slash = strrchr(p, '/');
    if (!slash) {
        snprintf(dir, sizeof dir, ".");
    } else if ((size_t)(slash - p) + 1 < sizeof dir) {
        memcpy(dir, p, (size_t)(slash - p) + 1);
        dir[slash - p + 1] = '\0';
    } else {
        free(shard_names);
        return sc_errf(err, SC_EARG, "%s: path too long", p);
    }
    sc_status st = SC_OK;
    for (const cJSON *x = wm->child; x && st == SC_OK; x = x->next) {
        const char *name = x->string ? x->string : "";
        if (!cJSON_IsString(x)) {
            st = sc_errf(err, SC_EFORMAT, "%s: weight_map entry '%s' is not a string", p, name);
            break;
        }
        const char *shard = x->valuestring;
        if (!plain_name(shard)) {
            st = sc_errf(err, SC_EFORMAT, "%s: weight_map entry '%s': shard name '%.128s' is not a plain file name",
                         p, name, shard);
            break;
        }
        size_t k = 0;
        while (k < s->n_files && strcmp(shard_names[k], shard) != 0) k++;
        if (k == s->n_files) {
            char sp[4096];
            if (!sc_path_join(sp, sizeof sp, dir, shard)) {
                st = sc_errf(err, SC_EARG, "%s: shard path too long", p);
                break;
            }
            st = sc_st_open(sp, &s->files[k], err);
            if (st != SC_OK) break;
            shard_names[k] = shard;
            s->n_files++;
        }
        const sc_st_tensor *t = sc_st_find(s->files[k], name);
        if (!t) {
            st = sc_errf(err, SC_EFORMAT, "%s: tensor '%s' is mapped to %s but that shard does not hold it", p, name,
                         shard);
            break;
        }
        s->entries[s->n_entries++] = (st_entry){name, t};
    }
    free(shard_names);
    if (st != SC_OK) return st;
    qsort(s->entries, s->n_entries, sizeof *s->entries, cmp_entry);
    for (size_t i = 1; i < s->n_entries; i++)
        if (strcmp(s->entries[i - 1].name, s->entries[i].name) == 0)
            return sc_errf(err, SC_EFORMAT, "%s: weight_map lists tensor '%s' twice", p, s->entries[i].name);
    return SC_OK;
}

sc_status sc_st_set_open(const char *path, sc_st_set **out, sc_err *err) {
    *out = NULL;
    sc_st_set *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    }
    sc_status st;
    if (sc_has_suffix(path, ".json")) {
        st = open_index(s, err);
    } else {
        s->files = calloc(1, sizeof *s->files);
        st = s->files ? sc_st_open(path, &s->files[0], err) : sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        if (st == SC_OK) s->n_files = 1;
    }
    if (st != SC_OK) {
        sc_st_set_free(s);
        return st;
    }
    *out = s;
    return SC_OK;
}

const char *sc_st_set_path(const sc_st_set *s) { return s->path; }

const sc_st_tensor *sc_st_set_find(const sc_st_set *s, const char *name) {
    if (!s->index) return s->n_files ? sc_st_find(s->files[0], name) : NULL;
    st_entry key = {.name = name};
    const st_entry *e = bsearch(&key, s->entries, s->n_entries, sizeof *s->entries, cmp_entry);
    return e ? e->t : NULL;
}

size_t sc_st_set_count(const sc_st_set *s) {
    if (!s->index) return s->n_files ? sc_st_count(s->files[0]) : 0;
    return s->n_entries;
}

const sc_st_tensor *sc_st_set_get(const sc_st_set *s, size_t i) {
    if (!s->index) return s->n_files ? sc_st_get(s->files[0], i) : NULL;
    return i < s->n_entries ? s->entries[i].t : NULL;
}

size_t sc_st_set_n_files(const sc_st_set *s) { return s->n_files; }
sc_st_file *sc_st_set_file(sc_st_set *s, size_t i) { return i < s->n_files ? s->files[i] : NULL; }

/* ---- writer ---- */

/* sc_f32_to_bf16, inlined for the streaming writer (round to nearest even, quiet NaN). */
static inline uint16_t bf16_round(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

typedef struct st_slot {
    uint64_t begin, end;
    int bits;
    bool supported;
    sc_dtype dt;
} st_slot;

struct sc_st_writer {
    sc_atomic_file af;
    bool opened, failed, done;
    st_slot *slots;
    size_t n_slots, cur;
    uint64_t pos, total;
};

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 1024;
        while (nc < b->n + n + 1) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static void sb_json_string(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        if (*c == '"' || *c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*c;
            sb_put(b, esc, 2);
        } else if (*c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *c);
            sb_put(b, esc, 6);
        } else {
            sb_put(b, (const char *)c, 1);
        }
    }
    sb_put(b, "\"", 1);
}

static void sb_u64(sbuf *b, uint64_t v) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    sb_str(b, tmp);
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static sc_status build_header(const char *path, const sc_st_spec *specs, size_t n, const sc_st_meta *meta,
                              size_t n_meta, st_slot *slots, sbuf *b, uint64_t *total, sc_err *err) {
    sb_put(b, "{", 1);
    bool first = true;
    if (n_meta) {
        sb_str(b, "\"__metadata__\":{");
        for (size_t i = 0; i < n_meta; i++) {
            if (!meta[i].key || !meta[i].value) return sc_errf(err, SC_EARG, "%s: metadata entry %zu is NULL", path, i);
            if (i) sb_put(b, ",", 1);
            sb_json_string(b, meta[i].key);
            sb_put(b, ":", 1);
            sb_json_string(b, meta[i].value);
        }
        sb_put(b, "}", 1);
        first = false;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const sc_st_spec *s = &specs[i];
        if (!s->name || strcmp(s->name, "__metadata__") == 0)
            return sc_errf(err, SC_EARG, "%s: tensor %zu has no usable name", path, i);
        const char *dn = s->dtype_name ? s->dtype_name : dtype_st_name(s->dtype);
        st_slot *sl = &slots[i];
        if (!dn || !sc_st_dtype_parse(dn, &sl->bits, &sl->dt, &sl->supported))
            return sc_errf(err, SC_EARG, "%s: tensor '%s': dtype cannot be stored in safetensors", path, s->name);
        if (s->n_dims < 0 || s->n_dims > SC_ST_MAX_DIMS)
            return sc_errf(err, SC_EARG, "%s: tensor '%s': %d dimensions", path, s->name, s->n_dims);
        uint64_t ne = 1, bytes;
        for (int d = 0; d < s->n_dims; d++) {
            if (s->shape[d] < 0 || s->shape[d] > SC_ST_MAX_SHAPE ||
                __builtin_mul_overflow(ne, (uint64_t)s->shape[d], &ne))
                return sc_errf(err, SC_EARG, "%s: tensor '%s': bad shape", path, s->name);
        }
        if (!elems_to_bytes(ne, sl->bits, &bytes) || __builtin_add_overflow(off, bytes, &sl->end))
            return sc_errf(err, SC_EARG, "%s: tensor '%s': size overflows", path, s->name);
        sl->begin = off;
        off = sl->end;
        if (!first) sb_put(b, ",", 1);
        first = false;
        sb_json_string(b, s->name);
        sb_str(b, ":{\"dtype\":");
        sb_json_string(b, dn);
        sb_str(b, ",\"shape\":[");
        for (int d = 0; d < s->n_dims; d++) {
            if (d) sb_put(b, ",", 1);
            sb_u64(b, (uint64_t)s->shape[d]);
        }
        sb_str(b, "],\"data_offsets\":[");
        sb_u64(b, sl->begin);
        sb_put(b, ",", 1);
        sb_u64(b, sl->end);
        sb_str(b, "]}");
    }
    sb_put(b, "}", 1);
    while (!b->oom && b->n % 8) sb_put(b, " ", 1); /* 8 + header length is then a multiple of 8 */
    if (b->oom) return sc_errf(err, SC_ENOMEM, "%s: out of memory building the header", path);
    if (b->n > SC_ST_MAX_HEADER) return sc_errf(err, SC_EARG, "%s: header would exceed 100 MB", path);
    *total = off;
    /* duplicate names would make an unreadable file */
    const char **names = sc_calloc(n, sizeof *names);
    if (!names) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) names[i] = specs[i].name;
    if (n > 1) qsort(names, n, sizeof *names, cmp_str_ptr);
    sc_status st = SC_OK;
    for (size_t i = 1; i < n && st == SC_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            st = sc_errf(err, SC_EARG, "%s: tensor '%s' given twice", path, names[i]);
    free(names);
    return st;
}

void sc_st_writer_free(sc_st_writer *w) {
    if (!w) return;
    if (w->opened && !w->done) sc_atomic_abort(&w->af);
    free(w->slots);
    free(w);
}

static sc_status writer_fail(sc_st_writer *w, sc_status st) {
    w->failed = true;
    if (w->opened && !w->done) sc_atomic_abort(&w->af);
    return st;
}

sc_status sc_st_writer_create(const char *path, const sc_st_spec *specs, size_t n_specs, const sc_st_meta *meta,
                              size_t n_meta, sc_st_writer **out, sc_err *err) {
    *out = NULL;
    sc_st_writer *w = calloc(1, sizeof *w);
    if (!w) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    w->slots = sc_calloc(n_specs, sizeof *w->slots);
    w->n_slots = n_specs;
    sbuf b = {0};
    sc_status st = w->slots ? build_header(path, specs, n_specs, meta, n_meta, w->slots, &b, &w->total, err)
                            : sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    if (st == SC_OK) st = sc_atomic_open(&w->af, path, err);
    if (st == SC_OK) {
        w->opened = true;
        setvbuf((FILE *)w->af.fp, NULL, _IOFBF, (size_t)1 << 20);
        uint8_t len[8];
        for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)b.n >> (8 * i));
        st = sc_atomic_write(&w->af, len, 8, err);
        if (st == SC_OK) st = sc_atomic_write(&w->af, b.p, b.n, err);
    }
    free(b.p);
    if (st != SC_OK) {
        sc_st_writer_free(w);
        return st;
    }
    *out = w;
    return SC_OK;
}

sc_status sc_st_writer_write(sc_st_writer *w, const void *data, size_t n_bytes, sc_err *err) {
    if (w->failed || w->done) return sc_errf(err, SC_EARG, "%s: writer is finished or failed", w->af.path);
    if (n_bytes > w->total - w->pos)
        return writer_fail(w, sc_errf(err, SC_EARG, "%s: more tensor data than the header declares", w->af.path));
    sc_status st = sc_atomic_write(&w->af, data, n_bytes, err);
    if (st != SC_OK) return writer_fail(w, st);
    w->pos += n_bytes;
    return SC_OK;
}

sc_status sc_st_writer_write_f32(sc_st_writer *w, const float *x, size_t n, sc_err *err) {
    uint16_t buf[8192]; /* little-endian host */
    while (n > 0) {
        if (w->failed || w->done) return sc_errf(err, SC_EARG, "%s: writer is finished or failed", w->af.path);
        while (w->cur < w->n_slots && w->pos >= w->slots[w->cur].end) w->cur++;
        if (w->cur == w->n_slots)
            return writer_fail(w, sc_errf(err, SC_EARG, "%s: more tensor data than the header declares", w->af.path));
        const st_slot *s = &w->slots[w->cur];
        size_t esz = (size_t)s->bits / 8;
        if (!s->supported || (w->pos - s->begin) % esz)
            return writer_fail(w, sc_errf(err, SC_EARG, "%s: tensor %zu: cannot convert f32 to its dtype here",
                                          w->af.path, w->cur));
        size_t k = (size_t)((s->end - w->pos) / esz);
        if (k > n) k = n;
        if (s->dt == SC_DT_F32) { /* little-endian host: the bytes are already right */
            SC_TRY(sc_st_writer_write(w, x, k * 4, err));
            x += k;
            n -= k;
            continue;
        }
        if (k > sizeof buf / esz) k = sizeof buf / esz;
        if (s->dt == SC_DT_F16)
            for (size_t i = 0; i < k; i++) buf[i] = sc_f32_to_f16(x[i]);
        else
            for (size_t i = 0; i < k; i++) buf[i] = bf16_round(x[i]);
        SC_TRY(sc_st_writer_write(w, buf, k * esz, err));
        x += k;
        n -= k;
    }
    return SC_OK;
}

sc_status sc_st_writer_finish(sc_st_writer *w, sc_err *err) {
    if (w->failed || w->done) return sc_errf(err, SC_EARG, "%s: writer is finished or failed", w->af.path);
    if (w->pos != w->total)
        return writer_fail(w, sc_errf(err, SC_EARG, "%s: only %llu of %llu tensor bytes were written", w->af.path,
                                      (unsigned long long)w->pos, (unsigned long long)w->total));
    sc_status st = sc_atomic_commit(&w->af, err); /* removes the temp file on failure */
    w->done = true;
    if (st != SC_OK) w->failed = true;
    return st;
}
