#define _XOPEN_SOURCE 700
#include "testing.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int sc_test_passed = 0, sc_test_failed = 0;

int sc_test_finish(void) {
    printf("%d passed, %d failed\n", sc_test_passed, sc_test_failed);
    return sc_test_failed ? 1 : 0;
}

static char ring[64][4096]; /* returned paths stay valid for the next 63 calls */
static int ring_i = 0;

static char *next_slot(void) {
    char *s = ring[ring_i];
    ring_i = (ring_i + 1) % 64;
    return s;
}

const char *sc_asset(const char *rel) {
    const char *root = getenv("SPARSECAL_ASSETS");
#ifdef SC_ASSETS_DEFAULT
    if (!root || !*root) root = SC_ASSETS_DEFAULT;
#endif
    if (!root || !*root) root = "../shared/assets";
    char *s = next_slot();
    snprintf(s, 4096, "%s/%s", root, rel);
    struct stat st;
    if (stat(s, &st) != 0) {
        fprintf(stderr, "asset not found: %s (set SPARSECAL_ASSETS)\n", s);
        sc_test_failed++; /* a missing asset is a failure, never a silent pass */
        return NULL;
    }
    return s;
}

static char tmp_dir[512];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_tmpdir(void) {
    if (tmp_dir[0] && !getenv("SC_KEEP_TMP")) nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *sc_test_tmpdir(void) {
    char *dir = tmp_dir;
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof tmp_dir, "%s/sctest.XXXXXX", base && *base ? base : "/tmp");
        if (!mkdtemp(dir)) {
            perror("mkdtemp");
            exit(1);
        }
        atexit(remove_tmpdir); /* SC_KEEP_TMP=1 keeps it for debugging */
    }
    return dir;
}

const char *sc_tmp_path(const char *name) {
    char *s = next_slot();
    snprintf(s, 4096, "%s/%s", sc_test_tmpdir(), name);
    return s;
}

/* Streams both files through stdio: testing.c builds with the runtime alone
 * (scripts/test_arm.sh), so it cannot lean on the tool's file readers. */
bool sc_files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool ok = fa && fb;
    while (ok) {
        char x[8192], y[8192];
        size_t nx = fread(x, 1, sizeof x, fa), ny = fread(y, 1, sizeof y, fb);
        if (nx != ny || memcmp(x, y, nx) != 0) ok = false;
        if (nx < sizeof x) {
            ok = ok && !ferror(fa) && !ferror(fb);
            break;
        }
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return ok;
}

bool sc_write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0) && ok;
}

int sc_run_cli(const char *cli, char *out, size_t cap, const char *fmt, ...) {
    static char cmd[16384];
    int n = snprintf(cmd, sizeof cmd, "%s ", cli);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    return sc_run(cmd, out, cap);
}

int sc_run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) {
        if (out && cap > 1) {
            size_t take = got;
            if (n + take > cap - 1) take = cap - 1 - n;
            memcpy(out + n, buf, take);
            n += take;
        }
    }
    if (out && cap) out[n] = '\0';
    int st = pclose(p);
    if (st == -1 || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}
