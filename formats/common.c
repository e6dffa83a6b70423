#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "srt_container.h"
#include <unistd.h>

const char *sc_status_name(sc_status s) {
    switch (s) {
    case SC_OK: return "ok";
    case SC_EIO: return "io error";
    case SC_EFORMAT: return "format error";
    case SC_ENOMEM: return "out of memory";
    case SC_EARG: return "bad argument";
    case SC_EUNSUPPORTED: return "unsupported";
    case SC_ERANGE: return "out of range";
    }
    return "unknown error";
}

sc_status sc_errf(sc_err *e, sc_status s, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return s;
}

void *sc_alloc_aligned(size_t n_bytes) {
    size_t rounded;
    if (!sc_add_ok(n_bytes, 63, &rounded)) return NULL;
    rounded &= ~(size_t)63;
    if (rounded == 0) rounded = 64;
    void *p = aligned_alloc(64, rounded);
    if (p) memset(p, 0, rounded);
    return p;
}

void sc_free_aligned(void *p) { free(p); }

void *sc_calloc(size_t n, size_t size) {
    size_t total;
    if (!sc_mul_ok(n, size, &total)) return NULL;
    return calloc(n ? n : 1, size ? size : 1);
}

sc_status sc_map_file(const char *path, sc_file_map *out, sc_err *err) {
    out->data = NULL;
    out->size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return sc_errf(err, SC_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sc_errf(err, SC_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sc_errf(err, SC_EIO, "%s: not a regular file", path);
    }
    if (st.st_size <= 0) {
        close(fd);
        return sc_errf(err, SC_EFORMAT, "%s: file is empty", path);
    }
    srt_input_note_fd(fd, path);
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return sc_errf(err, SC_EIO, "%s: cannot mmap: %s", path, strerror(e));
    out->data = p;
    out->size = (size_t)st.st_size;
    return SC_OK;
}

void sc_unmap_file(sc_file_map *m) {
    if (m && m->data) munmap((void *)m->data, m->size);
    if (m) {
        m->data = NULL;
        m->size = 0;
    }
}

sc_status sc_read_file(const char *path, size_t max_size, char **out, size_t *len, sc_err *err) {
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return sc_errf(err, SC_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return sc_errf(err, SC_EIO, "%s: not a regular file", path);
    }
    srt_input_note_fd(fileno(f), path);
    if ((uint64_t)st.st_size > (uint64_t)max_size) {
        fclose(f);
        return sc_errf(err, SC_ENOMEM, "%s: file is %lld bytes, larger than the %zu-byte limit", path,
                       (long long)st.st_size, max_size);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return sc_errf(err, SC_ENOMEM, "%s: cannot allocate %zu bytes", path, n + 1);
    }
    size_t got = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        free(buf);
        return sc_errf(err, SC_EIO, "%s: short read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = '\0';
    *out = buf;
    if (len) *len = n;
    return SC_OK;
}

sc_status sc_atomic_open(sc_atomic_file *f, const char *path, sc_err *err) {
    memset(f, 0, sizeof *f);
    f->out.fd = -1;
    if (snprintf(f->path, sizeof f->path, "%s", path) >= (int)sizeof f->path)
        return sc_errf(err, SC_EARG, "%s: path too long", path);
    char msg[sizeof err->msg];
    srt_ct_status cs = srt_out_open(&f->out, path, msg, sizeof msg);
    if (cs) return sc_errf(err, cs == SRT_CT_EARG ? SC_EARG : SC_EIO, "%s", msg);
    FILE *fp = fdopen(f->out.fd, "wb");
    if (!fp) {
        int e = errno;
        srt_out_abort(&f->out);
        return sc_errf(err, SC_EIO, "%s: cannot create: %s", path, strerror(e));
    }
    f->out.borrowed = true; /* fclose closes it */
    f->fp = fp;
    return SC_OK;
}

sc_status sc_atomic_write(sc_atomic_file *f, const void *data, size_t n, sc_err *err) {
    if (f->failed || !f->fp) return sc_errf(err, SC_EIO, "%s: write after failure", f->path);
    if (n && fwrite(data, 1, n, (FILE *)f->fp) != n) {
        f->failed = true;
        return sc_errf(err, SC_EIO, "%s: write failed: %s", f->path, strerror(errno));
    }
    return SC_OK;
}

sc_status sc_atomic_commit(sc_atomic_file *f, sc_err *err) {
    FILE *fp = (FILE *)f->fp;
    if (!fp) return sc_errf(err, SC_EIO, "%s: not open", f->path);
    f->fp = NULL;
    if (f->failed || fflush(fp) != 0) {
        int e = errno;
        srt_out_abort(&f->out);
        fclose(fp);
        return sc_errf(err, SC_EIO, "%s: write failed: %s", f->path, strerror(e ? e : EIO));
    }
    char msg[sizeof err->msg];
    srt_ct_status cs = srt_out_commit(&f->out, msg, sizeof msg);
    fclose(fp); /* flushed and synced: nothing left to fail */
    if (cs) return sc_errf(err, cs == SRT_CT_EARG ? SC_EARG : SC_EIO, "%s", msg);
    return SC_OK;
}

void sc_atomic_abort(sc_atomic_file *f) {
    srt_out_abort(&f->out);
    if (f->fp) {
        fclose((FILE *)f->fp);
        f->fp = NULL;
    }
}

double sc_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool sc_mem_read(sc_mem *m) {
    memset(m, 0, sizeof *m);
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return false;
    char line[256];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        uint64_t *dst = !strncmp(line, "VmRSS:", 6) ? &m->rss : !strncmp(line, "RssAnon:", 8) ? &m->rss_anon
                      : !strncmp(line, "VmHWM:", 6) ? &m->hwm : NULL;
        if (!dst) continue;
        *dst = (uint64_t)strtoull(strchr(line, ':') + 1, NULL, 10) * 1024; /* "VmRSS:   1234 kB" */
        found++;
    }
    fclose(f);
    return found > 0;
}

uint64_t sc_mem_available(void) {
    const char *env = getenv("SPARSECAL_MEM_AVAILABLE");
    char *end = NULL;
    unsigned long long v = env ? strtoull(env, &end, 10) : 0;
    if (env && end != env && !*end) return (uint64_t)v;
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "MemAvailable:", 13)) {
            fclose(f);
            return (uint64_t)strtoull(line + 13, NULL, 10) * 1024; /* "MemAvailable:  1234 kB" */
        }
    if (f) fclose(f);
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

void sc_progress_start(sc_progress *p, FILE *f, const char *what, const char *unit, int64_t total) {
    *p = (sc_progress){.f = f, .what = what, .unit = unit, .amount_unit = "tokens", .rate_unit = "tok/s",
                       .total = total, .t0 = sc_now(), .tty = f && isatty(fileno(f))};
    p->last = p->t0;
}

/* "42 s", "12m05s", "3h07m" */
static void fmt_duration(char *buf, size_t cap, double s) {
    if (!(s >= 0) || s > 1e9) {
        snprintf(buf, cap, "?");
    } else if (s < 100) {
        snprintf(buf, cap, "%.0f s", s);
    } else {
        long long t = (long long)(s + 0.5);
        if (t < 3600)
            snprintf(buf, cap, "%lldm%02llds", t / 60, t % 60);
        else
            snprintf(buf, cap, "%lldh%02lldm", t / 3600, t / 60 % 60);
    }
}

/* which tenth of total done is in (0..10) */
static int64_t tenth(int64_t done, int64_t total) {
    return total > 0 && done > 0 ? (int64_t)((double)done / (double)total * 10.0) : 0;
}

void sc_progress_update(sc_progress *p, int64_t done, double amount, const char *extra) {
    if (!p->f) return;
    double now = sc_now();
    if (done < p->total) {
        if (p->tty && now - p->last < 1.0) return;
        if (!p->tty && now - p->last < SC_PROGRESS_LOG_SECONDS && tenth(done, p->total) <= p->last_tenth) return;
    } else if (!p->tty && p->last_tenth > 10) {
        return; /* the final line is printed once */
    }
    p->last = now;
    p->last_tenth = done < p->total ? tenth(done, p->total) : 11;
    double el = now - p->t0;
    char eta[32], mem[96] = "";
    fmt_duration(eta, sizeof eta, done > 0 ? el / (double)done * (double)(p->total - done) : -1);
    sc_mem m;
    if (sc_mem_read(&m) && m.rss)
        snprintf(mem, sizeof mem, ", RSS %.0f MiB (anon %.0f MiB)", (double)m.rss / 1048576.0,
                 (double)m.rss_anon / 1048576.0);
    fprintf(p->f, "%s%s: %lld/%lld %s, %.0f %s, %.0f %s%s%s, ETA %s%s%s", p->tty ? "\r" : "", p->what,
            (long long)done, (long long)p->total, p->unit, amount, p->amount_unit, amount / (el > 0 ? el : 1e-9),
            p->rate_unit, extra ? ", " : "", extra ? extra : "", eta, mem, p->tty ? "   " : "\n");
    fflush(p->f);
    p->shown = p->tty;
}

void sc_progress_end(sc_progress *p) {
    if (p->f && p->shown) fputc('\n', p->f);
    p->shown = false;
}

float sc_lef32(const uint8_t *p) {
    uint32_t u = sc_le32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

bool sc_path_join(char *out, size_t cap, const char *dir, const char *name) {
    size_t dl = strlen(dir);
    const char *sep = (dl > 0 && dir[dl - 1] == '/') ? "" : "/";
    int n = snprintf(out, cap, "%s%s%s", dir, sep, name);
    return n >= 0 && (size_t)n < cap;
}

bool sc_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool sc_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

bool sc_has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}
