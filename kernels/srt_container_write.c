/* srt_container_write.c - the container writer. Sections are written to a
 * temp file beside the target as they are added (only their 256-byte table
 * entries stay in memory); finish appends the table and the manifest, writes
 * the header at offset 0 last, fsyncs and puts the file in place (srt_file.h:
 * an unnamed O_TMPFILE linked in on Linux, a named temp file elsewhere).
 * The output depends only on the inputs (no timestamps, zero padding), so the
 * same calls give a bit-identical file. */
#define _POSIX_C_SOURCE 200809L
#define _FILE_OFFSET_BITS 64
#include "srt_container.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "srt_container_fmt.h"
#include "srt_file.h"

struct srt_writer {
    char *path;
    srt_out_file out; /* out.fd: the file being written */
    srt_ct_kind kind;
    uint64_t pos;          /* next byte to write */
    uint8_t *table;        /* encoded entries */
    size_t n, cap;
    uint32_t *slots;       /* name hash set: section index + 1, 0 = empty */
    size_t n_slots;
    char *manifest;
    size_t manifest_len;
    ZSTD_CCtx *cctx;
    void *zout;
    size_t zout_cap;
    XXH3_state_t *xxh;
    bool failed, finished;
    bool open_section; /* between srt_writer_begin and srt_writer_end */
    ct_entry open;     /* its entry; stored_size counts the bytes appended */
    size_t open_slot;
    char err[768];
};

static const uint8_t zeros[SRT_CT_ALIGN];

static srt_ct_status werr(srt_writer *w, srt_ct_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static srt_ct_status werr(srt_writer *w, srt_ct_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    return st;
}

/* An I/O failure poisons the writer: the temp file is incomplete. */
static srt_ct_status io_fail(srt_writer *w, const char *what, int e) {
    w->failed = true;
    return werr(w, SRT_CT_EIO, "%s: %s failed: %s", w->path, what, strerror(e ? e : EIO));
}

static srt_ct_status write_at(srt_writer *w, const void *data, size_t n, uint64_t off) {
    const uint8_t *p = data;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t r = pwrite(w->out.fd, p, chunk, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return io_fail(w, "write", r < 0 ? errno : EIO);
        p += r;
        off += (uint64_t)r;
        n -= (size_t)r;
    }
    return SRT_CT_OK;
}

static srt_ct_status append(srt_writer *w, const void *data, size_t n) {
    srt_ct_status st = write_at(w, data, n, w->pos);
    if (!st) w->pos += n;
    return st;
}

static srt_ct_status pad(srt_writer *w) { return append(w, zeros, (size_t)(ct_align(w->pos) - w->pos)); }

/* ---- temporary-file registry (see srt_container.h) ---- */

static const char *volatile tmp_slots[SRT_TMP_MAX];

void srt_tmp_register(const char *path) {
    for (int i = 0; i < SRT_TMP_MAX; i++)
        if (!tmp_slots[i]) {
            tmp_slots[i] = path;
            return;
        }
}

void srt_tmp_unregister(const char *path) {
    for (int i = 0; i < SRT_TMP_MAX; i++)
        if (tmp_slots[i] == path) tmp_slots[i] = NULL;
}

void srt_tmp_cleanup(void) {
    for (int i = 0; i < SRT_TMP_MAX; i++) {
        const char *p = tmp_slots[i];
        if (p && p[0]) unlink(p);
    }
}

srt_ct_status srt_writer_create(const char *path, srt_ct_kind kind, srt_writer **out, char *err, size_t err_cap) {
    if (err && err_cap) err[0] = '\0';
    if (!out) return SRT_CT_EARG;
    *out = NULL;
    if (!path || !*path) {
        if (err && err_cap) snprintf(err, err_cap, "srt_writer_create: no path");
        return SRT_CT_EARG;
    }
    if (kind != SRT_CT_SCAL && kind != SRT_CT_SPAK) {
        if (err && err_cap) snprintf(err, err_cap, "%s: the writer needs a kind (calibration or artifact)", path);
        return SRT_CT_EARG;
    }
    srt_writer *w = calloc(1, sizeof *w);
    size_t plen = strlen(path);
    if (w) {
        w->out.fd = -1;
        w->kind = kind;
        w->path = malloc(plen + 1);
        w->cctx = ZSTD_createCCtx();
        w->zout_cap = ZSTD_CStreamOutSize();
        w->zout = malloc(w->zout_cap);
        w->xxh = XXH3_createState();
    }
    if (!w || !w->path || !w->cctx || !w->zout || !w->xxh) {
        srt_writer_free(w);
        if (err && err_cap) snprintf(err, err_cap, "%s: out of memory", path);
        return SRT_CT_ENOMEM;
    }
    memcpy(w->path, path, plen + 1);
    srt_ct_status cst = srt_out_open(&w->out, path, err, err_cap);
    if (cst) {
        srt_writer_free(w);
        return cst;
    }
    /* the header is written last; reserve its bytes */
    srt_ct_status st = append(w, zeros, SRT_CT_HEADER_SIZE / 2);
    if (!st) st = append(w, zeros, SRT_CT_HEADER_SIZE / 2);
    if (st) {
        if (err && err_cap) snprintf(err, err_cap, "%s", w->err);
        srt_writer_free(w);
        return st;
    }
    *out = w;
    return SRT_CT_OK;
}

static srt_ct_status usable(srt_writer *w, const char *op) {
    if (w->finished) return werr(w, SRT_CT_EARG, "%s: %s after finish", w->path, op);
    if (w->failed) return werr(w, SRT_CT_EARG, "%s: %s after an earlier failure", w->path, op);
    return SRT_CT_OK;
}

srt_ct_status srt_writer_set_manifest(srt_writer *w, const char *json, size_t len) {
    if (!w) return SRT_CT_EARG;
    srt_ct_status st = usable(w, "set_manifest");
    if (st) return st;
    srt_json_limits lim = {.max_bytes = SRT_CT_MAX_MANIFEST, .max_depth = SRT_JSON_DEFAULT_MAX_DEPTH};
    srt_json *root = NULL;
    char jerr[300];
    if (!json) return werr(w, SRT_CT_EARG, "%s: manifest: no text", w->path);
    if (srt_json_parse(json, len, &lim, &root, jerr, sizeof jerr))
        return werr(w, SRT_CT_EARG, "%s: manifest: %s", w->path, jerr);
    bool is_obj = root->type == SRT_JSON_OBJECT;
    srt_json_free(root);
    if (!is_obj) return werr(w, SRT_CT_EARG, "%s: manifest: must be a JSON object", w->path);
    char *copy = malloc(len ? len : 1);
    if (!copy) return werr(w, SRT_CT_ENOMEM, "%s: manifest: out of memory", w->path);
    memcpy(copy, json, len);
    free(w->manifest);
    w->manifest = copy;
    w->manifest_len = len;
    return SRT_CT_OK;
}

static const uint8_t *entry_at(const srt_writer *w, size_t i) { return w->table + i * SRT_CT_ENTRY_SIZE; }

/* Looks name up in the hash set; returns the slot where it is or would go. */
static size_t find_slot(const srt_writer *w, const char *name, size_t len, bool *found) {
    size_t mask = w->n_slots - 1, h = (size_t)XXH3_64bits(name, len) & mask;
    for (;; h = (h + 1) & mask) {
        uint32_t v = w->slots[h];
        if (v == 0) {
            *found = false;
            return h;
        }
        const char *other = (const char *)entry_at(w, v - 1);
        if (strncmp(other, name, 128) == 0) {
            *found = true;
            return h;
        }
    }
}

static srt_ct_status grow(srt_writer *w) {
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        uint8_t *t = realloc(w->table, cap * SRT_CT_ENTRY_SIZE);
        if (!t) return werr(w, SRT_CT_ENOMEM, "%s: out of memory for the section table", w->path);
        w->table = t;
        w->cap = cap;
    }
    if ((w->n + 1) * 2 > w->n_slots) { /* keep the load factor <= 1/2 */
        size_t n_slots = w->n_slots ? w->n_slots * 2 : 128;
        uint32_t *old = w->slots;
        size_t old_n = w->n_slots;
        w->slots = calloc(n_slots, sizeof *w->slots);
        if (!w->slots) {
            w->slots = old;
            return werr(w, SRT_CT_ENOMEM, "%s: out of memory for the section names", w->path);
        }
        w->n_slots = n_slots;
        for (size_t i = 0; i < old_n; i++) {
            if (!old[i]) continue;
            const char *nm = (const char *)entry_at(w, old[i] - 1);
            bool found;
            w->slots[find_slot(w, nm, strlen(nm), &found)] = old[i];
        }
        free(old);
    }
    return SRT_CT_OK;
}

/* Streams data through zstd into the file at w->pos. Sets *kept false (and
 * writes nothing that counts) when the frame would not be smaller. */
static srt_ct_status write_zstd(srt_writer *w, const char *name, const void *data, size_t size, int level,
                                bool *kept, uint64_t *stored, uint64_t *sum) {
    ZSTD_CCtx *z = w->cctx;
    size_t r = ZSTD_CCtx_reset(z, ZSTD_reset_session_and_parameters);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, level);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(z, ZSTD_c_contentSizeFlag, 1);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 0);
    if (!ZSTD_isError(r)) r = ZSTD_CCtx_setPledgedSrcSize(z, size);
    if (ZSTD_isError(r)) return werr(w, SRT_CT_ENOMEM, "%s: section '%s': zstd: %s", w->path, name, ZSTD_getErrorName(r));
    XXH3_64bits_reset(w->xxh);
    ZSTD_inBuffer in = {data, size, 0};
    uint64_t start = w->pos, total = 0;
    *kept = true;
    do {
        ZSTD_outBuffer o = {w->zout, w->zout_cap, 0};
        r = ZSTD_compressStream2(z, &o, &in, ZSTD_e_end);
        if (ZSTD_isError(r)) {
            w->pos = start;
            return werr(w, SRT_CT_ENOMEM, "%s: section '%s': zstd: %s", w->path, name, ZSTD_getErrorName(r));
        }
        if (total + o.pos >= size) { /* not smaller than raw: give up */
            *kept = false;
            break;
        }
        srt_ct_status st = append(w, w->zout, o.pos);
        if (st) return st;
        XXH3_64bits_update(w->xxh, w->zout, o.pos);
        total += o.pos;
    } while (r != 0);
    if (!*kept) {
        w->pos = start;
        if (ftruncate(w->out.fd, (off_t)start) != 0) return io_fail(w, "truncate", errno);
        return SRT_CT_OK;
    }
    *stored = total;
    *sum = XXH3_64bits_digest(w->xxh);
    return SRT_CT_OK;
}

/* Checks a new section and fills its entry (offset at the aligned end of the
 * file); *slot is where its name goes in the hash set. */
static srt_ct_status section_start(srt_writer *w, const char *name, srt_ct_dtype dtype, uint32_t ndim,
                                   const uint64_t *dims, ct_entry *e, size_t *slot) {
    srt_ct_status st = usable(w, "add");
    if (st) return st;
    if (w->open_section) return werr(w, SRT_CT_EARG, "%s: section '%s' is still being written", w->path, w->open.name);
    if (!name) return werr(w, SRT_CT_EARG, "%s: section without a name", w->path);
    size_t len = strnlen(name, SRT_CT_MAX_NAME + 1);
    int bad = ct_name_check(name, len);
    if (bad < 0)
        return werr(w, SRT_CT_EARG, "%s: section name '%.40s%s' must be 1 to %d bytes", w->path, name,
                    len > 40 ? "..." : "", SRT_CT_MAX_NAME);
    if (bad)
        return werr(w, SRT_CT_EARG, "%s: section name contains byte 0x%02x (only printable ASCII, no spaces)", w->path,
                    bad - 1);
    if ((unsigned)dtype >= SRT_CT_DTYPE_COUNT)
        return werr(w, SRT_CT_EARG, "%s: section '%s': unknown dtype %d", w->path, name, (int)dtype);
    if (ndim > SRT_CT_MAX_DIMS || (ndim && !dims))
        return werr(w, SRT_CT_EARG, "%s: section '%s': bad shape (ndim %u)", w->path, name, ndim);
    uint64_t n_elem, bytes;
    if (!ct_shape_bytes(dtype, ndim, dims, &n_elem, &bytes))
        return werr(w, SRT_CT_EARG, "%s: section '%s': bad shape", w->path, name);
    if (w->n >= SRT_CT_MAX_SECTIONS)
        return werr(w, SRT_CT_EARG, "%s: more than %u sections", w->path, SRT_CT_MAX_SECTIONS);
    if ((st = grow(w))) return st;
    bool found;
    *slot = find_slot(w, name, len, &found);
    if (found) return werr(w, SRT_CT_EARG, "%s: section '%s' added twice", w->path, name);
    if ((st = pad(w))) return st;
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, len);
    e->dtype = (uint8_t)dtype;
    e->ndim = (uint8_t)ndim;
    for (uint32_t i = 0; i < ndim; i++) e->dims[i] = dims[i];
    e->offset = w->pos;
    e->raw_size = bytes;
    return SRT_CT_OK;
}

static void section_commit(srt_writer *w, const ct_entry *e, size_t slot) {
    ct_entry_encode(e, w->table + w->n * SRT_CT_ENTRY_SIZE);
    w->n++;
    w->slots[slot] = (uint32_t)w->n;
}

srt_ct_status srt_writer_add(srt_writer *w, const char *name, srt_ct_dtype dtype, uint32_t ndim,
                             const uint64_t *dims, const void *data, size_t size, int level) {
    if (!w) return SRT_CT_EARG;
    if (level < 0 || level > SRT_CT_MAX_ZSTD_LEVEL)
        return werr(w, SRT_CT_EARG, "%s: section '%s': compression level %d outside 0..%d", w->path, name ? name : "",
                    level, SRT_CT_MAX_ZSTD_LEVEL);
    ct_entry e;
    size_t slot;
    srt_ct_status st = section_start(w, name, dtype, ndim, dims, &e, &slot);
    if (st) return st;
    if (e.raw_size != size) {
        char shape[256];
        ct_shape_str(ndim, dims, shape, sizeof shape);
        return werr(w, SRT_CT_EARG, "%s: section '%s': %zu bytes given for %s x shape %s", w->path, name, size,
                    srt_ct_dtype_name(dtype), shape);
    }
    if (size && !data) return werr(w, SRT_CT_EARG, "%s: section '%s': no data", w->path, name);
    bool kept = false;
    if (level > 0 && size > 0) {
        if ((st = write_zstd(w, name, data, size, level, &kept, &e.stored_size, &e.checksum))) return st;
    }
    if (kept) {
        e.compression = SRT_CT_ZSTD;
    } else {
        e.compression = SRT_CT_RAW;
        e.stored_size = size;
        e.checksum = XXH3_64bits(size ? data : "", size);
        if ((st = append(w, data, size))) return st;
    }
    section_commit(w, &e, slot);
    return SRT_CT_OK;
}

srt_ct_status srt_writer_begin(srt_writer *w, const char *name, srt_ct_dtype dtype, uint32_t ndim,
                               const uint64_t *dims) {
    if (!w) return SRT_CT_EARG;
    srt_ct_status st = section_start(w, name, dtype, ndim, dims, &w->open, &w->open_slot);
    if (st) return st;
    if (XXH3_64bits_reset(w->xxh) != XXH_OK) return werr(w, SRT_CT_EIO, "%s: checksum state", w->path);
    w->open.compression = SRT_CT_RAW;
    w->open_section = true;
    return SRT_CT_OK;
}

srt_ct_status srt_writer_append(srt_writer *w, const void *data, size_t size) {
    if (!w) return SRT_CT_EARG;
    srt_ct_status st = usable(w, "append");
    if (st) return st;
    if (!w->open_section) return werr(w, SRT_CT_EARG, "%s: append without srt_writer_begin", w->path);
    if (size > w->open.raw_size - w->open.stored_size)
        return werr(w, SRT_CT_EARG, "%s: section '%s': more bytes than its shape holds", w->path, w->open.name);
    if (size == 0) return SRT_CT_OK;
    if (!data) return werr(w, SRT_CT_EARG, "%s: section '%s': no data", w->path, w->open.name);
    XXH3_64bits_update(w->xxh, data, size);
    if ((st = append(w, data, size))) return st;
    w->open.stored_size += size;
    return SRT_CT_OK;
}

srt_ct_status srt_writer_end(srt_writer *w) {
    if (!w) return SRT_CT_EARG;
    srt_ct_status st = usable(w, "end");
    if (st) return st;
    if (!w->open_section) return werr(w, SRT_CT_EARG, "%s: end without srt_writer_begin", w->path);
    if (w->open.stored_size != w->open.raw_size)
        return werr(w, SRT_CT_EARG, "%s: section '%s': %llu of %llu bytes written", w->path, w->open.name,
                    (unsigned long long)w->open.stored_size, (unsigned long long)w->open.raw_size);
    w->open.checksum = XXH3_64bits_digest(w->xxh);
    w->open_section = false;
    section_commit(w, &w->open, w->open_slot);
    return SRT_CT_OK;
}

srt_ct_status srt_writer_finish(srt_writer *w) {
    if (!w) return SRT_CT_EARG;
    srt_ct_status st = usable(w, "finish");
    if (st) return st;
    if (w->open_section) return werr(w, SRT_CT_EARG, "%s: section '%s' was not ended", w->path, w->open.name);
    ct_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, srt_ct_kind_magic(w->kind), 8);
    h.version_major = SRT_CT_VERSION_MAJOR;
    h.version_minor = SRT_CT_VERSION_MINOR;
    h.header_size = SRT_CT_HEADER_SIZE;
    h.entry_size = SRT_CT_ENTRY_SIZE;
    h.section_count = (uint32_t)w->n;
    if ((st = pad(w))) goto fail;
    h.table_offset = w->pos;
    size_t table_bytes = w->n * SRT_CT_ENTRY_SIZE;
    h.table_checksum = XXH3_64bits(w->n ? (const void *)w->table : "", table_bytes);
    if ((st = append(w, w->table, table_bytes))) goto fail;
    if ((st = pad(w))) goto fail;
    const char *m = w->manifest ? w->manifest : "{}";
    size_t mlen = w->manifest ? w->manifest_len : 2;
    h.manifest_offset = w->pos;
    h.manifest_size = mlen;
    h.manifest_checksum = XXH3_64bits(m, mlen);
    if ((st = append(w, m, mlen))) goto fail;
    h.file_size = w->pos;
    uint8_t hb[SRT_CT_HEADER_SIZE];
    ct_header_encode(&h, hb);
    ct_put64(hb + CT_HEADER_CHECKED_BYTES, XXH3_64bits(hb, CT_HEADER_CHECKED_BYTES));
    if ((st = write_at(w, hb, sizeof hb, 0))) goto fail;
    if (ftruncate(w->out.fd, (off_t)w->pos) != 0) {
        st = io_fail(w, "truncate", errno);
        goto fail;
    }
    if ((st = srt_out_commit(&w->out, w->err, sizeof w->err))) {
        w->failed = true;
        return st;
    }
    w->finished = true;
    return SRT_CT_OK;
fail:
    w->failed = true;
    srt_out_abort(&w->out);
    return st;
}

void srt_writer_free(srt_writer *w) {
    if (!w) return;
    srt_out_abort(&w->out); /* nothing to do after a successful finish */
    ZSTD_freeCCtx(w->cctx);
    XXH3_freeState(w->xxh);
    free(w->zout);
    free(w->slots);
    free(w->table);
    free(w->manifest);
    free(w->path);
    free(w);
}

const char *srt_writer_errmsg(const srt_writer *w) { return w ? w->err : "no writer"; }
const char *srt_writer_temp_path(const srt_writer *w) { return w ? w->out.tmp : ""; }
uint64_t srt_writer_bytes_written(const srt_writer *w) { return w ? w->pos : 0; }
