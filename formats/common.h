/* common.h - status codes, error messages, checked arithmetic, file mapping
 * and atomic writes shared by every part of the sparsecal toolchain. */
#ifndef SC_COMMON_H
#define SC_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum sc_status {
    SC_OK = 0,
    SC_EIO,          /* cannot open/read/write a file */
    SC_EFORMAT,      /* file content is malformed, truncated or hostile */
    SC_ENOMEM,       /* allocation failed or a size exceeds the allowed bound */
    SC_EARG,         /* bad argument or option from the caller */
    SC_EUNSUPPORTED, /* well-formed input we do not handle (dtype, family, ...) */
    SC_ERANGE        /* value out of range (token id beyond vocab, ...) */
} sc_status;

/* One error message; filled by the function that fails first. */
typedef struct sc_err {
    char msg[768];
} sc_err;

const char *sc_status_name(sc_status s);

/* Formats a message into e (if non-NULL) and returns s. */
sc_status sc_errf(sc_err *e, sc_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#define SC_TRY(expr)                                                          \
    do {                                                                      \
        sc_status sc_try_st_ = (expr);                                        \
        if (sc_try_st_ != SC_OK) return sc_try_st_;                           \
    } while (0)

/* Checked size arithmetic: return false on overflow. */
static inline bool sc_mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool sc_add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

/* 64-byte aligned allocation (zeroed); free with sc_free_aligned. Returns NULL
 * on overflow or failure. */
void *sc_alloc_aligned(size_t n_bytes);
void sc_free_aligned(void *p);
/* calloc(n, size) with an overflow check. */
void *sc_calloc(size_t n, size_t size);

/* A read-only memory mapping of a whole file. */
typedef struct sc_file_map {
    const uint8_t *data;
    size_t size;
} sc_file_map;

/* Maps a file read-only. Empty files are an error (SC_EFORMAT). */
sc_status sc_map_file(const char *path, sc_file_map *out, sc_err *err);
void sc_unmap_file(sc_file_map *m);

/* Reads a whole file into a NUL-terminated malloc'd buffer; files larger
 * than max_size are rejected (SC_ENOMEM) before any allocation. */
sc_status sc_read_file(const char *path, size_t max_size, char **out, size_t *len, sc_err *err);

/* Atomic writes (srt_file.h): open refuses a path that is one of this
 * process's inputs and creates a temp file beside `path` (symlinks followed),
 * commit puts it in place after fsync, abort removes it. Every file the
 * readers below open is noted as an input. */
#include "srt_file.h"
typedef struct sc_atomic_file {
    void *fp; /* FILE* over out.fd */
    srt_out_file out;
    char path[4096];
    bool failed;
} sc_atomic_file;

sc_status sc_atomic_open(sc_atomic_file *f, const char *path, sc_err *err);
sc_status sc_atomic_write(sc_atomic_file *f, const void *data, size_t n, sc_err *err);
sc_status sc_atomic_commit(sc_atomic_file *f, sc_err *err);
void sc_atomic_abort(sc_atomic_file *f);

/* Wall-clock seconds from a monotonic clock. */
double sc_now(void);

/* Memory of this process from /proc/self/status, in bytes; false (and
 * zeros) where it cannot be read (not Linux). RssAnon is what the process
 * allocated itself: mapped weights are file-backed page cache, counted in
 * VmRSS only, and the kernel can drop them under pressure. */
typedef struct sc_mem {
    uint64_t rss;      /* VmRSS: resident now, anonymous + file-backed + shared memory */
    uint64_t rss_anon; /* RssAnon: resident anonymous memory (heap, workspaces, converted weights) */
    uint64_t hwm;      /* VmHWM: the largest VmRSS so far */
} sc_mem;
bool sc_mem_read(sc_mem *m);
/* Memory a new allocation can take, in bytes: SPARSECAL_MEM_AVAILABLE when
 * set (a budget below the machine's, and how tests exercise the refusals),
 * else MemAvailable of /proc/meminfo (free plus reclaimable page cache),
 * else free physical pages (sysconf); 0 when unknown. */
uint64_t sc_mem_available(void);

/* Progress of a long loop on a stream (stderr):
 *   "compute: 12/100 sequences, 3072 tokens, 812 tok/s, ETA 108 s, RSS 1234 MiB (anon 456 MiB)"
 * On a terminal, one line rewritten in place (\r) at most once a second; on
 * anything else (a log file, a pipe, a batch job's output) whole lines, one
 * every SC_PROGRESS_LOG_SECONDS or each tenth of the total, whichever comes
 * first; both always when the last item is done. f NULL: silent (--quiet).
 * amount is what the rate counts ("tokens" per "tok/s" by default; set
 * amount_unit/rate_unit after start for others). */
#define SC_PROGRESS_LOG_SECONDS 10.0
typedef struct sc_progress {
    FILE *f;
    const char *what, *unit, *amount_unit, *rate_unit;
    int64_t total;
    double t0, last;
    bool shown;
    bool tty;           /* f is a terminal: rewrite in place */
    int64_t last_tenth; /* log lines: the tenth of total last printed */
} sc_progress;
void sc_progress_start(sc_progress *p, FILE *f, const char *what, const char *unit, int64_t total);
/* done of total items, amount so far; extra (may be NULL) goes before the ETA ("ppl 4.2130"). */
void sc_progress_update(sc_progress *p, int64_t done, double amount, const char *extra);
/* Ends the line (if one was shown). */
void sc_progress_end(sc_progress *p);

/* Little-endian loads from possibly unaligned bytes. */
static inline uint16_t sc_le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t sc_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t sc_le64(const uint8_t *p) {
    return (uint64_t)sc_le32(p) | ((uint64_t)sc_le32(p + 4) << 32);
}
float sc_lef32(const uint8_t *p);

/* Path helpers: join dir and name into out (returns false if it does not fit). */
bool sc_path_join(char *out, size_t cap, const char *dir, const char *name);
bool sc_is_dir(const char *path);
bool sc_file_exists(const char *path);
/* Whether s ends with suffix. */
bool sc_has_suffix(const char *s, const char *suffix);

#endif
