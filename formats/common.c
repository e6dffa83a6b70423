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
