/* srt_file.c - inputs of this process and atomic outputs (see srt_file.h). */
#define _GNU_SOURCE /* O_TMPFILE, linkat's AT_EMPTY_PATH */
#include "srt_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void fail_msg(char *err, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void fail_msg(char *err, size_t cap, const char *fmt, ...) {
    if (!err || !cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
}

/* ---- inputs ---- */

typedef struct input_rec {
    dev_t dev;
    ino_t ino;
    char *path;
} input_rec;

static pthread_mutex_t inputs_mu = PTHREAD_MUTEX_INITIALIZER;
static input_rec *inputs;
static size_t n_inputs, cap_inputs;

static volatile bool tracking;

void srt_inputs_track(bool on) { tracking = on; }

static void note(const struct stat *st, const char *path) {
    if (!tracking || !S_ISREG(st->st_mode)) return;
    pthread_mutex_lock(&inputs_mu);
    bool known = false;
    for (size_t i = 0; i < n_inputs && !known; i++) known = inputs[i].dev == st->st_dev && inputs[i].ino == st->st_ino;
    if (!known && n_inputs == cap_inputs) {
        size_t nc = cap_inputs ? 2 * cap_inputs : 16;
        input_rec *p = realloc(inputs, nc * sizeof *p);
        if (p) {
            inputs = p;
            cap_inputs = nc;
        }
    }
    if (!known && n_inputs < cap_inputs) {
        /* without the path (out of memory) the record still protects the file */
        char *copy = path ? strdup(path) : NULL;
        inputs[n_inputs++] = (input_rec){st->st_dev, st->st_ino, copy};
    }
    pthread_mutex_unlock(&inputs_mu);
}

void srt_input_note_fd(int fd, const char *path) {
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0) note(&st, path);
}

void srt_input_note_path(const char *path) {
    struct stat st;
    if (path && stat(path, &st) == 0) note(&st, path);
}

void srt_inputs_clear(void) {
    pthread_mutex_lock(&inputs_mu);
    for (size_t i = 0; i < n_inputs; i++) free(inputs[i].path);
    free(inputs);
    inputs = NULL;
    n_inputs = cap_inputs = 0;
    pthread_mutex_unlock(&inputs_mu);
}

void srt_input_forget_path(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0) return;
    pthread_mutex_lock(&inputs_mu);
    for (size_t i = 0; i < n_inputs; i++)
        if (inputs[i].dev == st.st_dev && inputs[i].ino == st.st_ino) {
            free(inputs[i].path);
            inputs[i] = inputs[--n_inputs];
            break;
        }
    pthread_mutex_unlock(&inputs_mu);
}

srt_ct_status srt_output_check(const char *path, char *err, size_t err_cap) {
    if (!path || !*path) {
        fail_msg(err, err_cap, "no output path");
        return SRT_CT_EARG;
    }
    struct stat st;
    if (stat(path, &st) != 0) return SRT_CT_OK; /* nothing there yet (or unreachable: creating it reports why) */
    if (!S_ISREG(st.st_mode)) {
        fail_msg(err, err_cap, "%s: exists and is not a regular file; refusing to replace it", path);
        return SRT_CT_EARG;
    }
    srt_ct_status rc = SRT_CT_OK;
    pthread_mutex_lock(&inputs_mu);
    for (size_t i = 0; i < n_inputs; i++)
        if (inputs[i].dev == st.st_dev && inputs[i].ino == st.st_ino) {
            fail_msg(err, err_cap, "%s: is the same file as the input %s; refusing to overwrite an input", path,
                     inputs[i].path ? inputs[i].path : "(path unknown)");
            rc = SRT_CT_EARG;
            break;
        }
    pthread_mutex_unlock(&inputs_mu);
    return rc;
}

/* ---- atomic outputs ---- */

/* path with every symlink in its last component followed (at most 40). */
static bool resolve_target(const char *path, char *out, size_t cap, char *err, size_t err_cap) {
    if ((size_t)snprintf(out, cap, "%s", path) >= cap) {
        fail_msg(err, err_cap, "%s: path too long", path);
        return false;
    }
    for (int hops = 0;; hops++) {
        struct stat st;
        if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) return true;
        if (hops == 40) {
            fail_msg(err, err_cap, "%s: too many levels of symbolic links", path);
            return false;
        }
        char link[SRT_PATH_CAP];
        ssize_t n = readlink(out, link, sizeof link - 1);
        if (n < 0) {
            fail_msg(err, err_cap, "%s: cannot read the symbolic link: %s", path, strerror(errno));
            return false;
        }
        link[n] = '\0';
        char next[SRT_PATH_CAP];
        const char *slash = strrchr(out, '/');
        int w = link[0] == '/' || !slash ? snprintf(next, sizeof next, "%s", link)
                                         : snprintf(next, sizeof next, "%.*s/%s", (int)(slash - out), out, link);
        if (w < 0 || (size_t)w >= sizeof next || (size_t)w >= cap) {
            fail_msg(err, err_cap, "%s: the symbolic link's target is too long", path);
            return false;
        }
        memcpy(out, next, (size_t)w + 1);
    }
}

/* The directory part of path ("." when there is none). */
static void dir_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

static bool use_tmpfile(void) {
#if defined(O_TMPFILE)
    const char *e = getenv("SPARSECAL_NAMED_TEMP");
    return !(e && *e && strcmp(e, "0") != 0);
#else
    return false;
#endif
}

int srt_out_clean_stale(const char *path) {
    char dir[SRT_PATH_CAP];
    dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int removed = 0;
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, base, bl) != 0 || strncmp(n + bl, ".tmp.", 5) != 0) continue;
        const char *p = n + bl + 5;
        char *end;
        errno = 0;
        long long pid = strtoll(p, &end, 10);
        if (errno || end == p || pid <= 0 || pid > INT32_MAX || (*end && *end != '.')) continue;
        if (*end == '.') { /* ".<attempt>" */
            const char *q = end + 1;
            if (!*q) continue;
            while (*q >= '0' && *q <= '9') q++;
            if (*q) continue;
        }
        if ((pid_t)pid == getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours to judge) */
        char full[SRT_PATH_CAP + 256];
        struct stat st;
        if (snprintf(full, sizeof full, "%s/%s", dir, n) >= (int)sizeof full) continue;
        if (lstat(full, &st) == 0 && S_ISREG(st.st_mode) && unlink(full) == 0) removed++;
    }
    closedir(d);
    return removed;
}

srt_ct_status srt_out_open(srt_out_file *f, const char *path, char *err, size_t err_cap) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    srt_ct_status rc = srt_output_check(path, err, err_cap);
    if (rc) return rc;
    if (!resolve_target(path, f->target, sizeof f->target, err, err_cap)) return SRT_CT_EARG;
    struct stat st;
    if (stat(f->target, &st) == 0) {
        f->keep_mode = true;
        f->mode = (unsigned)(st.st_mode & 07777);
    }
    srt_out_clean_stale(f->target);
    int e = 0;
#if defined(O_TMPFILE)
    if (use_tmpfile()) {
        char dir[SRT_PATH_CAP];
        dir_of(f->target, dir, sizeof dir);
        /* 0666 less the umask, as for any new file */
        f->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
        f->unnamed = f->fd >= 0;
    }
#endif
    for (int attempt = 0; attempt < 1000 && f->fd < 0; attempt++) {
        srt_tmp_unregister(f->tmp);
        snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%ld.%d", f->target, (long)getpid(), attempt);
        /* registered before the file exists, so a signal can never find it unregistered */
        srt_tmp_register(f->tmp);
        f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        e = errno;
        if (f->fd < 0 && e != EEXIST) break;
    }
    if (f->fd < 0) {
        srt_tmp_unregister(f->tmp); /* nothing of ours to remove (EEXIST: someone else's) */
        fail_msg(err, err_cap, "%s: cannot create %s: %s", path, f->tmp, strerror(e ? e : EIO));
        f->tmp[0] = '\0';
        return SRT_CT_EIO;
    }
    if (f->keep_mode && fchmod(f->fd, (mode_t)f->mode) != 0) {
        e = errno;
        srt_out_abort(f);
        fail_msg(err, err_cap, "%s: cannot set the mode of the new file: %s", path, strerror(e));
        return SRT_CT_EIO;
    }
    return SRT_CT_OK;
}

static void sync_dir(const char *path) {
    /* best effort: make the rename itself durable */
    char dir[SRT_PATH_CAP];
    dir_of(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* Gives the unnamed file the name f->tmp (registered for signal cleanup). */
static int link_unnamed(srt_out_file *f) {
#if defined(O_TMPFILE)
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f->fd);
    for (int attempt = 0; attempt < 1000; attempt++) {
        snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%ld.%d", f->target, (long)getpid(), attempt);
        srt_tmp_register(f->tmp);
        int rc = linkat(AT_FDCWD, proc, AT_FDCWD, f->tmp, AT_SYMLINK_FOLLOW);
        if (rc != 0 && errno == ENOENT) rc = linkat(f->fd, "", AT_FDCWD, f->tmp, AT_EMPTY_PATH); /* no /proc */
        int e = errno;
        if (rc == 0) return 0;
        srt_tmp_unregister(f->tmp);
        f->tmp[0] = '\0';
        if (e != EEXIST) return e;
    }
    return EEXIST;
#else
    (void)f;
    return ENOTSUP;
#endif
}

srt_ct_status srt_out_commit(srt_out_file *f, char *err, size_t err_cap) {
    if (f->fd < 0) {
        fail_msg(err, err_cap, "%s: not open", f->target);
        return SRT_CT_EARG;
    }
    srt_ct_status rc = SRT_CT_OK;
    int e = 0;
    const char *what = NULL;
    if (fsync(f->fd) != 0) {
        e = errno;
        what = "fsync";
    } else if ((rc = srt_output_check(f->target, err, err_cap))) {
        srt_out_abort(f);
        return rc;
    } else if (f->unnamed && (e = link_unnamed(f)) != 0) {
        what = "link";
    } else if (rename(f->tmp, f->target) != 0) {
        e = errno;
        what = "rename into place";
    }
    if (what) {
        srt_out_abort(f);
        fail_msg(err, err_cap, "%s: %s failed: %s", f->target, what, strerror(e ? e : EIO));
        return SRT_CT_EIO;
    }
    srt_tmp_unregister(f->tmp);
    f->tmp[0] = '\0';
    if (!f->borrowed) close(f->fd);
    f->fd = -1;
    sync_dir(f->target);
    return SRT_CT_OK;
}

void srt_out_abort(srt_out_file *f) {
    if (f->fd >= 0 && !f->borrowed) close(f->fd);
    f->fd = -1;
    if (f->tmp[0]) unlink(f->tmp);
    srt_tmp_unregister(f->tmp);
    f->tmp[0] = '\0';
}
