/* sample_store.c - heap or file-backed blocks for stored samples (see
 * sample_store.h). Every block starts with a 64-byte header saying where it
 * lives, so one resize/free serves both kinds and a heap block moves to a
 * file when it outgrows the bound. */
#define _GNU_SOURCE /* mremap, O_TMPFILE */
#include "sample_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HDR 64
#define MAGIC_HEAP 0x73632d6865617030ull /* "sc-heap0" */
#define MAGIC_FILE 0x73632d66696c6530ull /* "sc-file0" */

typedef struct hdr {
    uint64_t magic;
    size_t bytes; /* the caller's size */
    size_t map;   /* file blocks: mapped length (header included, whole pages) */
    int fd;
} hdr;
_Static_assert(sizeof(hdr) <= HDR, "the header must fit before the data");

static struct {
    bool init;
    char dir[4096];
    size_t min;
} cfg;
static _Atomic size_t spilled, spilled_peak;

static void cfg_default(void) {
    if (cfg.init) return;
    cfg.init = true;
    const char *d = getenv("SPARSECAL_SPILL_DIR");
    if (!d || !*d) d = getenv("TMPDIR");
    if (!d || !*d) d = "/tmp";
    if (strcmp(d, "off") == 0) d = "";
    snprintf(cfg.dir, sizeof cfg.dir, "%s", d);
    cfg.min = SC_SAMPLE_SPILL_MIN;
    const char *m = getenv("SPARSECAL_SPILL_MIN");
    if (m && *m) {
        char *end;
        unsigned long long v = strtoull(m, &end, 10);
        if (*end == 0) cfg.min = (size_t)v;
    }
}

void sc_sample_spill(const char *dir, size_t min_bytes) {
    cfg.init = true;
    snprintf(cfg.dir, sizeof cfg.dir, "%s", dir ? dir : "");
    cfg.min = min_bytes;
}

const char *sc_sample_spill_dir(void) {
    cfg_default();
    return cfg.dir;
}

size_t sc_sample_spilled_bytes(void) { return atomic_load(&spilled); }
size_t sc_sample_spilled_peak(void) { return atomic_load(&spilled_peak); }

static void count(size_t add, size_t sub) {
    size_t now = atomic_fetch_add(&spilled, add) + add;
    atomic_fetch_sub(&spilled, sub);
    now -= sub;
    size_t peak = atomic_load(&spilled_peak);
    while (now > peak && !atomic_compare_exchange_weak(&spilled_peak, &peak, now)) {
    }
}

static size_t map_len(size_t bytes) {
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = HDR + bytes;
    return (n + pg - 1) / pg * pg;
}

static int spill_file(const char *what, sc_err *err, sc_status *st) {
    int fd = open(cfg.dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        /* no O_TMPFILE on this filesystem: a named file, unlinked at once */
        char path[4200];
        snprintf(path, sizeof path, "%s/sparsecal-sample.XXXXXX", cfg.dir);
        fd = mkstemp(path);
        if (fd >= 0) unlink(path);
    }
    if (fd < 0)
        *st = sc_errf(err, SC_EIO, "%s: cannot create a file in the spill directory %s: %s (set SPARSECAL_SPILL_DIR)",
                      what, cfg.dir, strerror(errno));
    return fd;
}

/* Reserves [0, len) of fd on disk; a full disk fails here, not later. */
static sc_status reserve(int fd, size_t len, const char *what, sc_err *err) {
    int e = posix_fallocate(fd, 0, (off_t)len);
    if (e == EOPNOTSUPP || e == EINVAL) e = ftruncate(fd, (off_t)len) ? errno : 0;
    if (e)
        return sc_errf(err, e == ENOSPC ? SC_EIO : SC_ENOMEM, "%s: cannot reserve %.0f MiB in the spill directory %s: %s",
                       what, (double)len / 1048576.0, cfg.dir, strerror(e));
    return SC_OK;
}

static sc_status new_file_block(size_t bytes, const void *old, size_t keep, void **out, const char *what,
                                sc_err *err) {
    sc_status st = SC_OK;
    int fd = spill_file(what, err, &st);
    if (fd < 0) return st;
    size_t len = map_len(bytes);
    if ((st = reserve(fd, len, what, err))) {
        close(fd);
        return st;
    }
    unsigned char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        int e = errno;
        close(fd);
        return sc_errf(err, SC_ENOMEM, "%s: cannot map %.0f MiB of the spill file: %s", what, (double)len / 1048576.0,
                       strerror(e));
    }
    hdr *h = (hdr *)base;
    *h = (hdr){.magic = MAGIC_FILE, .bytes = bytes, .map = len, .fd = fd};
    if (keep) memcpy(base + HDR, old, keep);
    count(len, 0);
    *out = base + HDR;
    return SC_OK;
}

sc_status sc_sample_resize(void **p, size_t bytes, const char *what, sc_err *err) {
    cfg_default();
    if (bytes > SIZE_MAX / 2) return sc_errf(err, SC_ENOMEM, "%s: %zu bytes are too many", what, bytes);
    hdr *h = *p ? (hdr *)((unsigned char *)*p - HDR) : NULL;
    bool spill = cfg.dir[0] && bytes >= cfg.min;
    if (h && h->magic == MAGIC_FILE) {
        size_t len = map_len(bytes);
        if (len > h->map) SC_TRY(reserve(h->fd, len, what, err));
        if (len != h->map) {
            void *nb = mremap(h, h->map, len, MREMAP_MAYMOVE);
            if (nb == MAP_FAILED)
                return sc_errf(err, SC_ENOMEM, "%s: cannot grow the spill mapping to %.0f MiB: %s", what,
                               (double)len / 1048576.0, strerror(errno));
            h = nb;
            if (len < h->map && ftruncate(h->fd, (off_t)len) != 0) {
                /* the file keeps its tail: harmless, it goes with the process */
            }
            count(len, h->map);
            h->map = len;
        }
        h->bytes = bytes;
        *p = (unsigned char *)h + HDR;
        return SC_OK;
    }
    if (spill) {
        void *nb = NULL;
        SC_TRY(new_file_block(bytes, *p, h ? (h->bytes < bytes ? h->bytes : bytes) : 0, &nb, what, err));
        free(h);
        *p = nb;
        return SC_OK;
    }
    hdr *nh = realloc(h, HDR + bytes);
    if (!nh)
        return sc_errf(err, SC_ENOMEM, "%s: out of memory for %.0f MiB", what, (double)bytes / 1048576.0);
    if (!h) memset(nh, 0, sizeof *nh);
    nh->magic = MAGIC_HEAP;
    nh->bytes = bytes;
    *p = (unsigned char *)nh + HDR;
    return SC_OK;
}

void sc_sample_free(void *p) {
    if (!p) return;
    hdr *h = (hdr *)((unsigned char *)p - HDR);
    if (h->magic == MAGIC_FILE) {
        int fd = h->fd;
        size_t len = h->map;
        munmap(h, len);
        close(fd);
        count(0, len);
        return;
    }
    free(h);
}
