#define _XOPEN_SOURCE 700
#include "testing.h"

#include "model.h"

#include <ftw.h>
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

bool sc_write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0) && ok;
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

const sc_layer *sc_test_layer(const sc_model *m, int64_t l) {
    const sc_layer *L;
    sc_err e = {{0}};
    if (sc_model_layer(m, l, &L, &e) != SC_OK) {
        fprintf(stderr, "sc_test_layer: %s\n", e.msg);
        abort();
    }
    return L;
}

float *sc_test_embedding(const sc_model *m) {
    int64_t V = m->cfg.vocab_size, D = m->cfg.dim;
    float *out = malloc((size_t)(V * D) * sizeof(float));
    int32_t *ids = malloc((size_t)V * sizeof(int32_t));
    sc_err e = {{0}};
    if (!out || !ids) abort();
    for (int64_t i = 0; i < V; i++) ids[i] = (int32_t)i;
    if (sc_model_embed(m, ids, V, out, &e) != SC_OK) {
        fprintf(stderr, "sc_test_embedding: %s\n", e.msg);
        abort();
    }
    free(ids);
    return out;
}

float *sc_test_classifier(const sc_model *m) {
    int64_t V = m->cfg.vocab_size, D = m->cfg.dim, chunk = sc_model_classifier_chunk(m);
    float *out = malloc((size_t)(V * D) * sizeof(float));
    sc_err e = {{0}};
    if (!out) abort();
    for (int64_t r0 = 0; r0 < V; r0 += chunk) {
        int64_t n = V - r0 < chunk ? V - r0 : chunk;
        const float *W;
        if (sc_model_classifier_rows(m, r0, n, &W, &e) != SC_OK) {
            fprintf(stderr, "sc_test_classifier: %s\n", e.msg);
            abort();
        }
        memcpy(out + r0 * D, W, (size_t)(n * D) * sizeof(float));
    }
    return out;
}
