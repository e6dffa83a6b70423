/* srt_container.c - the container reader: map, validate every field before
 * use, hand out sections (in place or decompressed once), verify checksums.
 * Layout and rules: docs/CONTAINER.md. */
#define _DEFAULT_SOURCE /* madvise */
#define _FILE_OFFSET_BITS 64
#include "srt_container.h"
#include "srt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "srt_container_fmt.h"

struct srt_container {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped; /* base is our mmap */
    srt_ct_kind kind;
    uint32_t version_major, version_minor;
    const char *manifest;
    size_t manifest_len;
    srt_json *manifest_json;
    size_t n;
    srt_ct_section *sec;
    size_t *by_name;  /* section indices sorted by name */
    uint8_t *checked; /* per section: checksum verified */
    void **decoded;   /* per zstd section: decompressed bytes, owned */
    char err[768];
};

/* ---- small shared helpers ---- */

static const struct {
    const char *name;
    size_t size;
} dtypes[SRT_CT_DTYPE_COUNT] = {
    [SRT_CT_U8] = {"u8", 1},     [SRT_CT_I8] = {"i8", 1},   [SRT_CT_U16] = {"u16", 2}, [SRT_CT_I16] = {"i16", 2},
    [SRT_CT_F16] = {"f16", 2},   [SRT_CT_BF16] = {"bf16", 2}, [SRT_CT_I32] = {"i32", 4}, [SRT_CT_U32] = {"u32", 4},
    [SRT_CT_F32] = {"f32", 4},   [SRT_CT_I64] = {"i64", 8}, [SRT_CT_U64] = {"u64", 8}, [SRT_CT_F64] = {"f64", 8},
    [SRT_CT_BYTES] = {"bytes", 1},
};

const char *srt_ct_dtype_name(srt_ct_dtype t) { return (unsigned)t < SRT_CT_DTYPE_COUNT ? dtypes[t].name : "?"; }
size_t srt_ct_dtype_size(srt_ct_dtype t) { return (unsigned)t < SRT_CT_DTYPE_COUNT ? dtypes[t].size : 0; }

srt_ct_dtype srt_ct_dtype_from_name(const char *name) {
    for (int t = 0; t < SRT_CT_DTYPE_COUNT; t++)
        if (name && strcmp(name, dtypes[t].name) == 0) return (srt_ct_dtype)t;
    return SRT_CT_DTYPE_COUNT;
}

const char *srt_ct_status_name(srt_ct_status s) {
    switch (s) {
    case SRT_CT_OK: return "ok";
    case SRT_CT_EIO: return "io error";
    case SRT_CT_EFORMAT: return "format error";
    case SRT_CT_ENOMEM: return "out of memory";
    case SRT_CT_EARG: return "bad argument";
    case SRT_CT_EUNSUPPORTED: return "unsupported";
    }
    return "unknown error";
}

const char *srt_ct_kind_name(srt_ct_kind k) {
    return k == SRT_CT_SCAL ? "calibration" : k == SRT_CT_SPAK ? "artifact" : "any";
}

const char *srt_ct_kind_magic(srt_ct_kind k) {
    return k == SRT_CT_SCAL ? "SPARSCAL" : k == SRT_CT_SPAK ? "SPARSPAK" : "";
}

uint64_t srt_ct_checksum(const void *data, size_t n) { return XXH3_64bits(n ? data : "", n); }

static srt_ct_status errf(char *err, size_t cap, srt_ct_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static srt_ct_status errf(char *err, size_t cap, srt_ct_status st, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return st;
}

#define FAIL(st, ...) errf(err, err_cap, (st), __VA_ARGS__)

/* ---- validation ---- */

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

static int cmp_name(const void *a, const void *b, const srt_ct_section *sec) {
    return strcmp(sec[*(const size_t *)a].name, sec[*(const size_t *)b].name);
}

/* qsort has no context argument: a small merge sort of indices by name. */
static void sort_by_name(size_t *idx, size_t *tmp, size_t n, const srt_ct_section *sec) {
    if (n < 2) return;
    size_t h = n / 2;
    sort_by_name(idx, tmp, h, sec);
    sort_by_name(idx + h, tmp, n - h, sec);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = cmp_name(&idx[j], &idx[i], sec) < 0 ? idx[j++] : idx[i++];
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof *idx);
}

/* Where the previous region ends, for layout messages. */
static const char *prev_name(const srt_container *c, size_t i, char *buf, size_t cap) {
    if (i == 0) return "the header";
    snprintf(buf, cap, "section '%s'", c->sec[i - 1].name);
    return buf;
}

/* Checks a region [off, off+len) starts right after prev_end (aligned), with
 * zero padding in between. what names the region for messages. */
static srt_ct_status check_region(const srt_container *c, uint64_t prev_end, const char *prev, uint64_t off,
                                  const char *what, char *err, size_t err_cap) {
    const char *path = c->path;
    if (off % SRT_CT_ALIGN) return FAIL(SRT_CT_EFORMAT, "%s: %s: offset %llu is not 64-byte aligned", path, what,
                                        (unsigned long long)off);
    if (off < prev_end)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: offset %llu overlaps %s (which ends at %llu)", path, what,
                    (unsigned long long)off, prev, (unsigned long long)prev_end);
    if (off != ct_align(prev_end))
        return FAIL(SRT_CT_EFORMAT, "%s: %s: offset %llu leaves a gap after %s (expected %llu)", path, what,
                    (unsigned long long)off, prev, (unsigned long long)ct_align(prev_end));
    if (!all_zero(c->base + prev_end, (size_t)(off - prev_end)))
        return FAIL(SRT_CT_EFORMAT, "%s: %s: the %llu padding bytes before it are not zero", path, what,
                    (unsigned long long)(off - prev_end));
    return SRT_CT_OK;
}

static srt_ct_status check_zstd(const srt_container *c, const srt_ct_section *s, const char *what, char *err,
                                size_t err_cap) {
    const uint8_t *p = c->base + s->offset;
    const char *path = c->path;
    if (s->raw_size / SRT_CT_MAX_ZSTD_RATIO > s->stored_size)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: raw size %llu is more than %ux the stored %llu bytes (decompression bomb?)",
                    path, what, (unsigned long long)s->raw_size, SRT_CT_MAX_ZSTD_RATIO,
                    (unsigned long long)s->stored_size);
    if (s->stored_size < 4 || ct_get32(p) != ZSTD_MAGICNUMBER)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: stored bytes are not a zstd frame", path, what);
    size_t fsz = ZSTD_findFrameCompressedSize(p, (size_t)s->stored_size);
    if (ZSTD_isError(fsz))
        return FAIL(SRT_CT_EFORMAT, "%s: %s: zstd frame is invalid or truncated (%s)", path, what,
                    ZSTD_getErrorName(fsz));
    if (fsz != s->stored_size)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: zstd frame is %zu bytes but the section stores %llu", path, what, fsz,
                    (unsigned long long)s->stored_size);
    unsigned long long cs = ZSTD_getFrameContentSize(p, (size_t)s->stored_size);
    if (cs == ZSTD_CONTENTSIZE_UNKNOWN)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: zstd frame does not declare its content size", path, what);
    if (cs == ZSTD_CONTENTSIZE_ERROR) return FAIL(SRT_CT_EFORMAT, "%s: %s: zstd frame header is invalid", path, what);
    if (cs != s->raw_size)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: zstd frame declares %llu bytes but raw_size is %llu", path, what, cs,
                    (unsigned long long)s->raw_size);
    return SRT_CT_OK;
}

/* Decodes and checks table entry i (everything but layout and uniqueness). */
static srt_ct_status check_entry(srt_container *c, size_t i, const uint8_t *raw, char *err, size_t err_cap) {
    const char *path = c->path;
    ct_entry e;
    ct_entry_decode(raw, &e);
    const char *nul = memchr(e.name, '\0', sizeof e.name);
    if (!nul) return FAIL(SRT_CT_EFORMAT, "%s: section #%zu: name is not NUL-terminated within 128 bytes", path, i);
    size_t len = (size_t)(nul - e.name);
    int bad = ct_name_check(e.name, len);
    if (bad < 0) return FAIL(SRT_CT_EFORMAT, "%s: section #%zu: name is empty", path, i);
    if (bad) return FAIL(SRT_CT_EFORMAT, "%s: section #%zu: name contains byte 0x%02x (only printable ASCII allowed)",
                         path, i, bad - 1);
    srt_ct_section *s = &c->sec[i];
    s->name = (const char *)raw; /* the NUL-terminated name inside the mapping */
    char what[160];
    snprintf(what, sizeof what, "section '%s'", s->name);
    if (!all_zero((const uint8_t *)e.name + len, sizeof e.name - len))
        return FAIL(SRT_CT_EFORMAT, "%s: %s: name padding is not zero", path, what);
    if (e.dtype >= SRT_CT_DTYPE_COUNT)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: dtype %u is unknown", path, what, (unsigned)e.dtype);
    if (e.compression > SRT_CT_ZSTD)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: compression %u is unknown", path, what, (unsigned)e.compression);
    if (e.ndim > SRT_CT_MAX_DIMS)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: ndim %u exceeds %d", path, what, (unsigned)e.ndim, SRT_CT_MAX_DIMS);
    for (int d = e.ndim; d < SRT_CT_MAX_DIMS; d++)
        if (e.dims[d]) return FAIL(SRT_CT_EFORMAT, "%s: %s: dims[%d] is set beyond ndim %u", path, what, d, e.ndim);
    if (e.reserved0 || e.reserved1 || !all_zero(e.reserved2, sizeof e.reserved2))
        return FAIL(SRT_CT_EFORMAT, "%s: %s: reserved bytes are not zero", path, what);
    s->dtype = (srt_ct_dtype)e.dtype;
    s->compression = (srt_ct_compression)e.compression;
    s->ndim = e.ndim;
    memcpy(s->dims, e.dims, sizeof s->dims);
    s->offset = e.offset;
    s->stored_size = e.stored_size;
    s->raw_size = e.raw_size;
    s->checksum = e.checksum;
    char shape[256];
    ct_shape_str(s->ndim, s->dims, shape, sizeof shape);
    uint64_t bytes;
    if (!ct_shape_bytes(s->dtype, s->ndim, s->dims, &s->n_elements, &bytes))
        return FAIL(SRT_CT_EFORMAT, "%s: %s: %s x shape %s overflows 64 bits", path, what, srt_ct_dtype_name(s->dtype),
                    shape);
    if (bytes != s->raw_size)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: raw_size %llu but %s x shape %s is %llu bytes", path, what,
                    (unsigned long long)s->raw_size, srt_ct_dtype_name(s->dtype), shape, (unsigned long long)bytes);
    if (s->offset % SRT_CT_ALIGN)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: offset %llu is not 64-byte aligned", path, what,
                    (unsigned long long)s->offset);
    uint64_t end;
    if (__builtin_add_overflow(s->offset, s->stored_size, &end) || end > c->size)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: offset %llu + stored_size %llu extends past the end of the file (%zu bytes)",
                    path, what, (unsigned long long)s->offset, (unsigned long long)s->stored_size, c->size);
    if (s->compression == SRT_CT_RAW && s->stored_size != s->raw_size)
        return FAIL(SRT_CT_EFORMAT, "%s: %s: stored_size %llu differs from raw_size %llu in an uncompressed section",
                    path, what, (unsigned long long)s->stored_size, (unsigned long long)s->raw_size);
    return SRT_CT_OK;
}

static srt_ct_status validate(srt_container *c, srt_ct_kind expected, char *err, size_t err_cap) {
    const char *path = c->path;
    if (c->size < SRT_CT_HEADER_SIZE)
        return FAIL(SRT_CT_EFORMAT, "%s: file is %zu bytes, shorter than the %d-byte header (truncated?)", path,
                    c->size, SRT_CT_HEADER_SIZE);
    ct_header h;
    ct_header_decode(c->base, &h);
    if (memcmp(h.magic, "SPARSCAL", 8) == 0) c->kind = SRT_CT_SCAL;
    else if (memcmp(h.magic, "SPARSPAK", 8) == 0) c->kind = SRT_CT_SPAK;
    else {
        char shown[40];
        size_t k = 0;
        for (int i = 0; i < 8; i++) {
            unsigned char ch = (unsigned char)h.magic[i];
            k += (size_t)snprintf(shown + k, sizeof shown - k, ch >= 0x20 && ch < 0x7f && ch != '\\' ? "%c" : "\\x%02x",
                                  ch);
        }
        return FAIL(SRT_CT_EFORMAT, "%s: not a sparsecal container (magic \"%s\", expected \"SPARSCAL\" or \"SPARSPAK\")",
                    path, shown);
    }
    if (expected != SRT_CT_ANY && expected != c->kind)
        return FAIL(SRT_CT_EFORMAT, "%s: is a%s %s file (%s), expected a%s %s file (%s)", path,
                    c->kind == SRT_CT_SPAK ? "n" : "", srt_ct_kind_name(c->kind), srt_ct_kind_magic(c->kind),
                    expected == SRT_CT_SPAK ? "n" : "", srt_ct_kind_name(expected), srt_ct_kind_magic(expected));
    uint64_t hsum = XXH3_64bits(c->base, CT_HEADER_CHECKED_BYTES);
    if (hsum != h.header_checksum)
        return FAIL(SRT_CT_EFORMAT, "%s: header: checksum mismatch (stored %016llx, computed %016llx)", path,
                    (unsigned long long)h.header_checksum, (unsigned long long)hsum);
    if (h.version_major != SRT_CT_VERSION_MAJOR)
        return FAIL(SRT_CT_EUNSUPPORTED, "%s: header: format version %u.%u is not supported (this reader reads %d.x)",
                    path, h.version_major, h.version_minor, SRT_CT_VERSION_MAJOR);
    c->version_major = h.version_major;
    c->version_minor = h.version_minor;
    if (h.header_size != SRT_CT_HEADER_SIZE)
        return FAIL(SRT_CT_EFORMAT, "%s: header: header_size %u, expected %d", path, h.header_size, SRT_CT_HEADER_SIZE);
    if (h.entry_size != SRT_CT_ENTRY_SIZE)
        return FAIL(SRT_CT_EFORMAT, "%s: header: entry_size %u, expected %d", path, h.entry_size, SRT_CT_ENTRY_SIZE);
    if (h.flags & CT_REQUIRED_FLAGS_MASK)
        return FAIL(SRT_CT_EUNSUPPORTED, "%s: header: flags 0x%llx require features this reader lacks", path,
                    (unsigned long long)(h.flags & CT_REQUIRED_FLAGS_MASK));
    if (!all_zero(h.reserved, sizeof h.reserved))
        return FAIL(SRT_CT_EFORMAT, "%s: header: reserved bytes are not zero", path);
    if (h.file_size != c->size)
        return FAIL(SRT_CT_EFORMAT, "%s: header: file_size %llu but the file is %zu bytes (truncated or appended to?)",
                    path, (unsigned long long)h.file_size, c->size);
    if (h.section_count > SRT_CT_MAX_SECTIONS)
        return FAIL(SRT_CT_EFORMAT, "%s: header: section_count %u exceeds the limit of %u", path, h.section_count,
                    SRT_CT_MAX_SECTIONS);
    uint64_t table_bytes = (uint64_t)h.section_count * SRT_CT_ENTRY_SIZE, table_end, manifest_end;
    if (h.table_offset % SRT_CT_ALIGN)
        return FAIL(SRT_CT_EFORMAT, "%s: header: table_offset %llu is not 64-byte aligned", path,
                    (unsigned long long)h.table_offset);
    if (h.table_offset < SRT_CT_HEADER_SIZE || __builtin_add_overflow(h.table_offset, table_bytes, &table_end) ||
        table_end > c->size)
        return FAIL(SRT_CT_EFORMAT, "%s: header: section table (offset %llu, %u entries) lies outside the file (%zu bytes)",
                    path, (unsigned long long)h.table_offset, h.section_count, c->size);
    if (h.manifest_size > SRT_CT_MAX_MANIFEST)
        return FAIL(SRT_CT_EFORMAT, "%s: header: manifest_size %llu exceeds the limit of %u bytes", path,
                    (unsigned long long)h.manifest_size, SRT_CT_MAX_MANIFEST);
    if (__builtin_add_overflow(h.manifest_offset, h.manifest_size, &manifest_end) || manifest_end > c->size)
        return FAIL(SRT_CT_EFORMAT, "%s: header: manifest (offset %llu, %llu bytes) lies outside the file (%zu bytes)",
                    path, (unsigned long long)h.manifest_offset, (unsigned long long)h.manifest_size, c->size);
    char prevbuf[180];
    srt_ct_status st = check_region(c, table_end, "the section table", h.manifest_offset, "header: manifest", err,
                                    err_cap);
    if (st) return st;
    if (manifest_end != c->size)
        return FAIL(SRT_CT_EFORMAT, "%s: header: the manifest ends at %llu but the file at %zu", path,
                    (unsigned long long)manifest_end, c->size);
    const uint8_t *table = c->base + h.table_offset;
    uint64_t tsum = XXH3_64bits(table, (size_t)table_bytes);
    if (tsum != h.table_checksum)
        return FAIL(SRT_CT_EFORMAT, "%s: section table: checksum mismatch (stored %016llx, computed %016llx)", path,
                    (unsigned long long)h.table_checksum, (unsigned long long)tsum);
    c->manifest = (const char *)c->base + h.manifest_offset;
    c->manifest_len = (size_t)h.manifest_size;
    uint64_t msum = XXH3_64bits(c->manifest, c->manifest_len);
    if (msum != h.manifest_checksum)
        return FAIL(SRT_CT_EFORMAT, "%s: manifest: checksum mismatch (stored %016llx, computed %016llx)", path,
                    (unsigned long long)h.manifest_checksum, (unsigned long long)msum);
    srt_json_limits lim = {.max_bytes = SRT_CT_MAX_MANIFEST, .max_depth = SRT_JSON_DEFAULT_MAX_DEPTH};
    char jerr[300];
    if (srt_json_parse(c->manifest, c->manifest_len, &lim, &c->manifest_json, jerr, sizeof jerr))
        return FAIL(SRT_CT_EFORMAT, "%s: manifest: %s", path, jerr);
    if (c->manifest_json->type != SRT_JSON_OBJECT)
        return FAIL(SRT_CT_EFORMAT, "%s: manifest: top-level value is %s %s, expected an object", path,
                    c->manifest_json->type == SRT_JSON_ARRAY || c->manifest_json->type == SRT_JSON_INT ? "an" : "a",
                    srt_json_type_name((srt_json_type)c->manifest_json->type));
    /* sections: the table is inside the file, so n * 256 <= file size bounds
     * these allocations */
    c->n = h.section_count;
    size_t n_alloc = c->n ? c->n : 1;
    c->sec = calloc(n_alloc, sizeof *c->sec);
    c->by_name = calloc(n_alloc, sizeof *c->by_name);
    c->checked = calloc(n_alloc, 1);
    c->decoded = calloc(n_alloc, sizeof *c->decoded);
    if (!c->sec || !c->by_name || !c->checked || !c->decoded)
        return FAIL(SRT_CT_ENOMEM, "%s: cannot allocate the index of %zu sections", path, c->n);
    uint64_t prev_end = SRT_CT_HEADER_SIZE;
    for (size_t i = 0; i < c->n; i++) {
        st = check_entry(c, i, table + i * SRT_CT_ENTRY_SIZE, err, err_cap);
        if (st) return st;
        const srt_ct_section *s = &c->sec[i];
        char what[160];
        snprintf(what, sizeof what, "section '%s'", s->name);
        st = check_region(c, prev_end, prev_name(c, i, prevbuf, sizeof prevbuf), s->offset, what, err, err_cap);
        if (st) return st;
        if (s->compression == SRT_CT_ZSTD && (st = check_zstd(c, s, what, err, err_cap))) return st;
        prev_end = s->offset + s->stored_size;
        c->by_name[i] = i;
    }
    st = check_region(c, prev_end, prev_name(c, c->n, prevbuf, sizeof prevbuf), h.table_offset,
                      "header: section table", err, err_cap);
    if (st) return st;
    size_t *tmp = malloc(n_alloc * sizeof *tmp);
    if (!tmp) return FAIL(SRT_CT_ENOMEM, "%s: cannot allocate the index of %zu sections", path, c->n);
    sort_by_name(c->by_name, tmp, c->n, c->sec);
    free(tmp);
    for (size_t i = 1; i < c->n; i++) {
        size_t a = c->by_name[i - 1], b = c->by_name[i];
        if (strcmp(c->sec[a].name, c->sec[b].name) == 0)
            return FAIL(SRT_CT_EFORMAT, "%s: section '%s': name appears twice (sections #%zu and #%zu)", path,
                        c->sec[b].name, a < b ? a : b, a < b ? b : a);
    }
    return SRT_CT_OK;
}

static srt_ct_status open_common(srt_container *c, srt_ct_kind expected, srt_container **out, char *err,
                                 size_t err_cap) {
    srt_ct_status st = validate(c, expected, err, err_cap);
    if (st) {
        srt_container_close(c);
        return st;
    }
    *out = c;
    return SRT_CT_OK;
}

static srt_container *new_handle(const char *path) {
    srt_container *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->path = malloc(strlen(path) + 1);
    if (!c->path) {
        free(c);
        return NULL;
    }
    strcpy(c->path, path);
    return c;
}

srt_ct_status srt_container_open(const char *path, srt_ct_kind expected, srt_container **out, char *err,
                                 size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!out) return FAIL(SRT_CT_EARG, "srt_container_open: no output handle");
    *out = NULL;
    if (!path) return FAIL(SRT_CT_EARG, "srt_container_open: no path");
    if (expected != SRT_CT_ANY && expected != SRT_CT_SCAL && expected != SRT_CT_SPAK)
        return FAIL(SRT_CT_EARG, "%s: bad expected kind %d", path, (int)expected);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return FAIL(SRT_CT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return FAIL(SRT_CT_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return FAIL(SRT_CT_ENOMEM, "%s: file of %lld bytes cannot be mapped", path, (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    srt_input_note_fd(fd, path);
    if (size < SRT_CT_HEADER_SIZE) {
        close(fd);
        return FAIL(SRT_CT_EFORMAT, "%s: file is %zu bytes, shorter than the %d-byte header (truncated?)", path, size,
                    SRT_CT_HEADER_SIZE);
    }
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return FAIL(SRT_CT_EIO, "%s: cannot mmap: %s", path, strerror(e));
    srt_container *c = new_handle(path);
    if (!c) {
        munmap(p, size);
        return FAIL(SRT_CT_ENOMEM, "%s: out of memory", path);
    }
    c->base = p;
    c->size = size;
    c->mapped = true;
    return open_common(c, expected, out, err, err_cap);
}

srt_ct_status srt_container_open_memory(const void *data, size_t size, const char *name, srt_ct_kind expected,
                                        srt_container **out, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!out) return FAIL(SRT_CT_EARG, "srt_container_open_memory: no output handle");
    *out = NULL;
    if (!name) name = "(memory)";
    if (!data && size) return FAIL(SRT_CT_EARG, "%s: no data", name);
    if (expected != SRT_CT_ANY && expected != SRT_CT_SCAL && expected != SRT_CT_SPAK)
        return FAIL(SRT_CT_EARG, "%s: bad expected kind %d", name, (int)expected);
    srt_container *c = new_handle(name);
    if (!c) return FAIL(SRT_CT_ENOMEM, "%s: out of memory", name);
    c->base = data;
    c->size = size;
    return open_common(c, expected, out, err, err_cap);
}

void srt_container_close(srt_container *c) {
    if (!c) return;
    if (c->decoded)
        for (size_t i = 0; i < c->n; i++) free(c->decoded[i]);
    free(c->decoded);
    free(c->checked);
    free(c->by_name);
    free(c->sec);
    srt_json_free(c->manifest_json);
    if (c->mapped && c->base) munmap((void *)c->base, c->size);
    free(c->path);
    free(c);
}

void srt_container_release(const srt_container *c, const void *p, uint64_t size) {
    if (!c || !c->mapped || !p || size == 0) return;
    const uintptr_t base = (uintptr_t)c->base, a = (uintptr_t)p;
    if (a < base || a - base > c->size || size > c->size - (a - base)) return;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t lo = (a + pg - 1) / pg * pg, hi = (a + (uintptr_t)size) / pg * pg; /* whole pages only */
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* ---- accessors ---- */

srt_ct_kind srt_container_kind(const srt_container *c) { return c->kind; }
void srt_container_version(const srt_container *c, uint32_t *major, uint32_t *minor) {
    if (major) *major = c->version_major;
    if (minor) *minor = c->version_minor;
}
uint64_t srt_container_file_size(const srt_container *c) { return c->size; }
const char *srt_container_path(const srt_container *c) { return c->path; }
const char *srt_container_manifest_text(const srt_container *c, size_t *len) {
    if (len) *len = c->manifest_len;
    return c->manifest;
}
const srt_json *srt_container_manifest(const srt_container *c) { return c->manifest_json; }
size_t srt_container_section_count(const srt_container *c) { return c->n; }
const srt_ct_section *srt_container_section_at(const srt_container *c, size_t i) {
    return i < c->n ? &c->sec[i] : NULL;
}
const char *srt_container_errmsg(const srt_container *c) { return c ? c->err : "no container"; }

int64_t srt_container_find(const srt_container *c, const char *name) {
    if (!c || !name) return -1;
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = strcmp(c->sec[c->by_name[mid]].name, name);
        if (r == 0) return (int64_t)c->by_name[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

#undef FAIL
#define FAIL(st, ...) errf(c->err, sizeof c->err, (st), __VA_ARGS__)

static srt_ct_status check_sum(srt_container *c, size_t i) {
    const srt_ct_section *s = &c->sec[i];
    if (c->checked[i]) return SRT_CT_OK;
    uint64_t sum = XXH3_64bits(c->base + s->offset, (size_t)s->stored_size);
    if (sum != s->checksum)
        return FAIL(SRT_CT_EFORMAT, "%s: section '%s': checksum mismatch (stored %016llx, computed %016llx)", c->path,
                    s->name, (unsigned long long)s->checksum, (unsigned long long)sum);
    c->checked[i] = 1;
    return SRT_CT_OK;
}

srt_ct_status srt_container_data(srt_container *c, size_t i, const void **data, uint64_t *size) {
    if (data) *data = NULL;
    if (size) *size = 0;
    if (!c) return SRT_CT_EARG;
    if (i >= c->n) return FAIL(SRT_CT_EARG, "%s: section index %zu out of range (%zu sections)", c->path, i, c->n);
    const srt_ct_section *s = &c->sec[i];
    srt_ct_status st = check_sum(c, i);
    if (st) return st;
    const void *p = c->base + s->offset;
    if (s->compression == SRT_CT_ZSTD && s->raw_size > 0) {
        if (!c->decoded[i]) {
            size_t cap = (size_t)ct_align(s->raw_size); /* raw <= 65536 * stored <= 65536 * file size */
            void *buf = aligned_alloc(SRT_CT_ALIGN, cap);
            if (!buf)
                return FAIL(SRT_CT_ENOMEM, "%s: section '%s': cannot allocate %llu bytes to decompress it", c->path,
                            s->name, (unsigned long long)s->raw_size);
            size_t r = ZSTD_decompress(buf, (size_t)s->raw_size, p, (size_t)s->stored_size);
            if (ZSTD_isError(r) || r != s->raw_size) {
                free(buf);
                if (ZSTD_isError(r))
                    return FAIL(SRT_CT_EFORMAT, "%s: section '%s': zstd: %s", c->path, s->name, ZSTD_getErrorName(r));
                return FAIL(SRT_CT_EFORMAT, "%s: section '%s': decompressed to %zu bytes, expected %llu", c->path,
                            s->name, r, (unsigned long long)s->raw_size);
            }
            c->decoded[i] = buf;
        }
        p = c->decoded[i];
    }
    if (data) *data = p;
    if (size) *size = s->raw_size;
    return SRT_CT_OK;
}

srt_ct_status srt_container_get(srt_container *c, const char *name, const void **data, uint64_t *size) {
    if (data) *data = NULL;
    if (size) *size = 0;
    if (!c) return SRT_CT_EARG;
    int64_t i = srt_container_find(c, name);
    if (i < 0) return FAIL(SRT_CT_EFORMAT, "%s: no section '%s'", c->path, name ? name : "(null)");
    return srt_container_data(c, (size_t)i, data, size);
}

srt_ct_status srt_container_get_typed(srt_container *c, const char *name, srt_ct_dtype dtype, uint64_t n_elements,
                                      const void **data) {
    if (data) *data = NULL;
    if (!c) return SRT_CT_EARG;
    int64_t i = srt_container_find(c, name);
    if (i < 0) return FAIL(SRT_CT_EFORMAT, "%s: no section '%s'", c->path, name ? name : "(null)");
    const srt_ct_section *s = &c->sec[i];
    if (s->dtype != dtype)
        return FAIL(SRT_CT_EFORMAT, "%s: section '%s': dtype %s, expected %s", c->path, name,
                    srt_ct_dtype_name(s->dtype), srt_ct_dtype_name(dtype));
    if (n_elements && s->n_elements != n_elements)
        return FAIL(SRT_CT_EFORMAT, "%s: section '%s': %llu elements, expected %llu", c->path, name,
                    (unsigned long long)s->n_elements, (unsigned long long)n_elements);
    return srt_container_data(c, (size_t)i, data, NULL);
}

srt_ct_status srt_container_read(srt_container *c, size_t i, void *dst, uint64_t size) {
    if (!c) return SRT_CT_EARG;
    if (i >= c->n) return FAIL(SRT_CT_EARG, "%s: section index %zu out of range (%zu sections)", c->path, i, c->n);
    const srt_ct_section *s = &c->sec[i];
    if (size != s->raw_size)
        return FAIL(SRT_CT_EARG, "%s: section '%s': %llu bytes, the caller expects %llu", c->path, s->name,
                    (unsigned long long)s->raw_size, (unsigned long long)size);
    srt_ct_status st = check_sum(c, i);
    if (st || size == 0) return st;
    const void *p = c->base + s->offset;
    if (s->compression != SRT_CT_ZSTD || c->decoded[i]) {
        memcpy(dst, s->compression == SRT_CT_ZSTD ? c->decoded[i] : p, (size_t)size);
        return SRT_CT_OK;
    }
    size_t r = ZSTD_decompress(dst, (size_t)size, p, (size_t)s->stored_size);
    if (ZSTD_isError(r))
        return FAIL(SRT_CT_EFORMAT, "%s: section '%s': zstd: %s", c->path, s->name, ZSTD_getErrorName(r));
    if (r != size)
        return FAIL(SRT_CT_EFORMAT, "%s: section '%s': decompressed to %zu bytes, expected %llu", c->path, s->name, r,
                    (unsigned long long)size);
    return SRT_CT_OK;
}

srt_ct_status srt_container_verify_section(srt_container *c, size_t i) {
    if (!c) return SRT_CT_EARG;
    if (i >= c->n) return FAIL(SRT_CT_EARG, "%s: section index %zu out of range (%zu sections)", c->path, i, c->n);
    const srt_ct_section *s = &c->sec[i];
    srt_ct_status st = check_sum(c, i);
    if (st || s->compression != SRT_CT_ZSTD || c->decoded[i]) return st;
    /* stream the frame through a fixed buffer, counting what it expands to */
    ZSTD_DStream *ds = ZSTD_createDStream();
    size_t cap = ZSTD_DStreamOutSize();
    void *buf = malloc(cap);
    if (!ds || !buf) {
        ZSTD_freeDStream(ds);
        free(buf);
        return FAIL(SRT_CT_ENOMEM, "%s: section '%s': out of memory for zstd", c->path, s->name);
    }
    ZSTD_inBuffer in = {c->base + s->offset, (size_t)s->stored_size, 0};
    uint64_t total = 0;
    st = SRT_CT_OK;
    for (;;) {
        ZSTD_outBuffer o = {buf, cap, 0};
        size_t r = ZSTD_decompressStream(ds, &o, &in);
        if (ZSTD_isError(r)) {
            st = FAIL(SRT_CT_EFORMAT, "%s: section '%s': zstd: %s", c->path, s->name, ZSTD_getErrorName(r));
            break;
        }
        total += o.pos;
        if (total > s->raw_size) {
            st = FAIL(SRT_CT_EFORMAT, "%s: section '%s': zstd frame expands past its raw_size %llu", c->path, s->name,
                      (unsigned long long)s->raw_size);
            break;
        }
        if (r == 0) break;
        if (in.pos == in.size && o.pos < o.size) {
            st = FAIL(SRT_CT_EFORMAT, "%s: section '%s': zstd frame is truncated", c->path, s->name);
            break;
        }
    }
    if (!st && total != s->raw_size)
        st = FAIL(SRT_CT_EFORMAT, "%s: section '%s': decompressed to %llu bytes, expected %llu", c->path, s->name,
                  (unsigned long long)total, (unsigned long long)s->raw_size);
    ZSTD_freeDStream(ds);
    free(buf);
    return st;
}

srt_ct_status srt_container_verify_all(srt_container *c) {
    if (!c) return SRT_CT_EARG;
    for (size_t i = 0; i < c->n; i++) {
        srt_ct_status st = srt_container_verify_section(c, i);
        if (st) return st;
    }
    return SRT_CT_OK;
}
