/* test_container.c - the .scal/.spk container: round trip of every dtype
 * (raw and zstd), empty, scalar and 8-d sections, many sections, a big
 * manifest, bit-identical output for identical input, writer argument errors,
 * atomic writes (an abandoned writer, and a child killed while writing a big
 * file, never leave a file under the final name; with O_TMPFILE nothing at
 * all, with SPARSECAL_NAMED_TEMP=1 a named temp file that the next writer of
 * the same target removes once its process is dead), and `sparsecal inspect` /
 * `verify` exit codes and output; srt_container_release dropping a section's pages. Hostile files: test_container_hostile.c. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "srt_container.h"
#include "srt_file.h"
#include "testing.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static void fill_random(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)next_rand();
}
static void fill_compressible(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)((i / 7) % 5);
}

static srt_writer *create(const char *path, srt_ct_kind kind) {
    srt_writer *w = NULL;
    char err[768];
    srt_ct_status st = srt_writer_create(path, kind, &w, err, sizeof err);
    CHECK_MSG(st == SRT_CT_OK, "create %s: %s", path, err);
    return w;
}

static srt_container *open_ok(const char *path, srt_ct_kind kind) {
    srt_container *c = NULL;
    char err[768];
    srt_ct_status st = srt_container_open(path, kind, &c, err, sizeof err);
    CHECK_MSG(st == SRT_CT_OK, "open %s: %s", path, err);
    return c;
}

static size_t count_temp_files(void) {
    DIR *d = opendir(sc_test_tmpdir());
    size_t n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

/* SPARSECAL_NAMED_TEMP=1: temp files have names (srt_file.h) */
static bool named_temp(void) {
    const char *e = getenv("SPARSECAL_NAMED_TEMP");
    return e && *e && strcmp(e, "0") != 0;
}

/* Unnamed (O_TMPFILE) files process pid holds open in the test directory,
 * and the size of the largest in *max_size (may be NULL). */
static size_t count_unnamed(pid_t pid, off_t *max_size) {
    char dir[64], prefix[4200];
    snprintf(dir, sizeof dir, "/proc/%ld/fd", (long)pid);
    snprintf(prefix, sizeof prefix, "%s/#", sc_test_tmpdir());
    if (max_size) *max_size = 0;
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char link[4200], target[4200];
        snprintf(link, sizeof link, "%s/%s", dir, e->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k <= 0) continue;
        target[k] = '\0';
        if (strncmp(target, prefix, strlen(prefix)) || !strstr(target, "(deleted)")) continue;
        n++;
        struct stat st;
        if (max_size && stat(link, &st) == 0 && st.st_size > *max_size) *max_size = st.st_size;
    }
    if (d) closedir(d);
    return n;
}

static void remove_temp_files(void) {
    DIR *d = opendir(sc_test_tmpdir());
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp.")) remove(sc_tmp_path(e->d_name));
    closedir(d);
}

/* ---- round trip ---- */

typedef struct expect {
    char name[64];
    srt_ct_dtype dtype;
    uint32_t ndim;
    uint64_t dims[8];
    uint8_t *data;
    size_t size;
    srt_ct_compression comp;
} expect;

static const char *manifest_text =
    "{\"model\":{\"family\":\"llama\",\"hash\":\"9f2c\",\"dim\":64},\"tool\":\"sparsecal 0.1.0\","
    "\"tokens\":123456789012345,\"method\":{\"name\":\"claws\",\"density\":0.5},\"note\":\"caf\\u00e9\"}";

static void test_round_trip(void) {
    const char *path = sc_tmp_path("rt.scal");
    remove(path); /* fresh on each run (this test runs with and without named temp files) */
    srt_writer *w = create(path, SRT_CT_SCAL);
    if (!w) return;
    CHECK(srt_writer_set_manifest(w, manifest_text, strlen(manifest_text)) == SRT_CT_OK);
    expect ex[128];
    memset(ex, 0, sizeof ex);
    size_t n = 0;
    for (int dt = 0; dt < SRT_CT_DTYPE_COUNT; dt++)
        for (int level = 0; level <= 3; level += 3)
            for (int pattern = 0; pattern < 2; pattern++) {
                expect *e = &ex[n++];
                snprintf(e->name, sizeof e->name, "dt.%s.l%d.%s", srt_ct_dtype_name((srt_ct_dtype)dt), level,
                         pattern ? "smooth" : "random");
                e->dtype = (srt_ct_dtype)dt;
                e->ndim = 2;
                e->dims[0] = 33;
                e->dims[1] = 17 + (uint64_t)dt;
                e->size = (size_t)(e->dims[0] * e->dims[1]) * srt_ct_dtype_size(e->dtype);
                e->data = malloc(e->size);
                if (pattern) fill_compressible(e->data, e->size);
                else fill_random(e->data, e->size);
                /* random bytes do not compress: the writer keeps them raw */
                e->comp = level && pattern ? SRT_CT_ZSTD : SRT_CT_RAW;
            }
    const struct {
        const char *name;
        srt_ct_dtype dt;
        uint32_t ndim;
        uint64_t dims[8];
        int level;
    } odd[] = {
        {"empty.1d", SRT_CT_F32, 1, {0}, 0},        {"empty.1d.z", SRT_CT_F32, 1, {0}, 5},
        {"empty.3d", SRT_CT_I16, 3, {4, 0, 3}, 0},  {"scalar", SRT_CT_F64, 0, {0}, 0},
        {"eight.dims", SRT_CT_U8, 8, {1, 2, 1, 2, 1, 2, 1, 3}, 0}, {"opaque.blocks", SRT_CT_BYTES, 1, {4096}, 19},
    };
    for (size_t k = 0; k < sizeof odd / sizeof odd[0]; k++) {
        expect *e = &ex[n++];
        snprintf(e->name, sizeof e->name, "%s", odd[k].name);
        e->dtype = odd[k].dt;
        e->ndim = odd[k].ndim;
        memcpy(e->dims, odd[k].dims, sizeof e->dims);
        uint64_t cnt = 1;
        for (uint32_t d = 0; d < e->ndim; d++) cnt *= e->dims[d];
        e->size = (size_t)cnt * srt_ct_dtype_size(e->dtype);
        e->data = malloc(e->size + 1);
        fill_compressible(e->data, e->size);
        e->comp = odd[k].level && e->size ? SRT_CT_ZSTD : SRT_CT_RAW;
    }
    for (size_t i = 0; i < n; i++) {
        expect *e = &ex[i];
        int level = strstr(e->name, ".l3.") ? 3 : strcmp(e->name, "empty.1d.z") == 0 ? 5 : strcmp(e->name, "opaque.blocks") == 0 ? 19 : 0;
        srt_ct_status st = srt_writer_add(w, e->name, e->dtype, e->ndim, e->dims, e->data, e->size, level);
        CHECK_MSG(st == SRT_CT_OK, "add %s: %s", e->name, srt_writer_errmsg(w));
    }
    CHECK(count_temp_files() == (named_temp() ? 1 : 0) && count_unnamed(getpid(), NULL) == (named_temp() ? 0 : 1));
    CHECK(!sc_file_exists(path));
    CHECK_MSG(srt_writer_finish(w) == SRT_CT_OK, "finish: %s", srt_writer_errmsg(w));
    srt_writer_free(w);
    CHECK(count_temp_files() == 0 && sc_file_exists(path));

    srt_container *c = open_ok(path, SRT_CT_SCAL);
    if (!c) return;
    uint32_t vmaj = 0, vmin = 9;
    srt_container_version(c, &vmaj, &vmin);
    CHECK(srt_container_kind(c) == SRT_CT_SCAL && vmaj == 1 && vmin == 0);
    size_t mlen;
    const char *mt = srt_container_manifest_text(c, &mlen);
    CHECK(mlen == strlen(manifest_text) && memcmp(mt, manifest_text, mlen) == 0);
    const srt_json *m = srt_container_manifest(c);
    CHECK(srt_json_int(srt_json_get(m, "tokens"), 0) == 123456789012345);
    CHECK(strcmp(srt_json_str(srt_json_get(srt_json_get(m, "method"), "name"), ""), "claws") == 0);
    CHECK(strcmp(srt_json_str(srt_json_get(m, "note"), ""), "caf\xc3\xa9") == 0);
    CHECK(srt_container_section_count(c) == n);
    for (size_t i = 0; i < n; i++) {
        expect *e = &ex[i];
        int64_t k = srt_container_find(c, e->name);
        CHECK_MSG(k == (int64_t)i, "find %s: %lld", e->name, (long long)k);
        const srt_ct_section *s = srt_container_section_at(c, i);
        CHECK(s && strcmp(s->name, e->name) == 0 && s->dtype == e->dtype && s->ndim == e->ndim);
        CHECK(s && memcmp(s->dims, e->dims, sizeof s->dims) == 0 && s->raw_size == e->size);
        CHECK_MSG(s && s->compression == e->comp, "%s: compression %d, expected %d", e->name, s ? (int)s->compression : -1,
                  (int)e->comp);
        CHECK(s && s->offset % 64 == 0);
        if (s && s->compression == SRT_CT_ZSTD) CHECK(s->stored_size < s->raw_size);
        const void *p = NULL;
        uint64_t sz = 99;
        CHECK_MSG(srt_container_get(c, e->name, &p, &sz) == SRT_CT_OK, "%s", srt_container_errmsg(c));
        CHECK(p != NULL && sz == e->size && (e->size == 0 || memcmp(p, e->data, e->size) == 0));
        if (e->size) CHECK_MSG(((uintptr_t)p & 63) == 0, "%s: data not 64-byte aligned", e->name);
        const void *p2 = NULL;
        CHECK(srt_container_data(c, i, &p2, NULL) == SRT_CT_OK && p2 == p); /* decompressed once */
    }
    CHECK(srt_container_verify_all(c) == SRT_CT_OK);
    const void *p;
    CHECK(srt_container_get_typed(c, "dt.f32.l0.random", SRT_CT_F32, 33 * 25, &p) == SRT_CT_OK && p);
    CHECK(srt_container_get_typed(c, "dt.f32.l0.random", SRT_CT_F64, 0, &p) == SRT_CT_EFORMAT && !p);
    CHECK(strstr(srt_container_errmsg(c), "dtype f32, expected f64") && strstr(srt_container_errmsg(c), path));
    CHECK(srt_container_get_typed(c, "dt.f32.l0.random", SRT_CT_F32, 7, &p) == SRT_CT_EFORMAT);
    CHECK(srt_container_find(c, "no.such") == -1 && srt_container_find(c, "") == -1 && srt_container_find(c, NULL) == -1);
    CHECK(srt_container_get(c, "no.such", &p, NULL) != SRT_CT_OK && strstr(srt_container_errmsg(c), "'no.such'"));
    CHECK(srt_container_data(c, n, &p, NULL) == SRT_CT_EARG && srt_container_section_at(c, n) == NULL);
    srt_container_close(c);

    /* the expected kind is enforced, or reported */
    char err[768];
    CHECK(srt_container_open(path, SRT_CT_SPAK, &c, err, sizeof err) == SRT_CT_EFORMAT && c == NULL);
    CHECK(strstr(err, path) && strstr(err, "calibration") && strstr(err, "expected an artifact"));
    c = open_ok(path, SRT_CT_ANY);
    CHECK(c && srt_container_kind(c) == SRT_CT_SCAL);
    srt_container_close(c);
    for (size_t i = 0; i < n; i++) free(ex[i].data);
}

static void test_many_sections(void) {
    const char *path = sc_tmp_path("many.spk");
    srt_writer *w = create(path, SRT_CT_SPAK);
    if (!w) return;
    const size_t n = 5000;
    int32_t v[16];
    uint64_t dims[1] = {16};
    char name[64];
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 16; k++) v[k] = (int32_t)(i * 16 + (size_t)k);
        snprintf(name, sizeof name, "blk.%zu.ffn_down.weight", i);
        CHECK(srt_writer_add(w, name, SRT_CT_I32, 1, dims, v, sizeof v, (int)(i % 2)) == SRT_CT_OK);
    }
    CHECK(srt_writer_add(w, "blk.17.ffn_down.weight", SRT_CT_I32, 1, dims, v, sizeof v, 0) == SRT_CT_EARG);
    CHECK(strstr(srt_writer_errmsg(w), "added twice") != NULL);
    CHECK(srt_writer_finish(w) == SRT_CT_OK);
    srt_writer_free(w);
    srt_container *c = open_ok(path, SRT_CT_SPAK);
    if (!c) return;
    CHECK(srt_container_section_count(c) == n);
    int bad = 0;
    for (size_t i = 0; i < n; i += 7) {
        snprintf(name, sizeof name, "blk.%zu.ffn_down.weight", i);
        const int32_t *p = NULL;
        if (srt_container_get_typed(c, name, SRT_CT_I32, 16, (const void **)&p) != SRT_CT_OK || p[15] != (int32_t)(i * 16 + 15))
            bad++;
    }
    CHECK(bad == 0);
    CHECK(srt_container_find(c, "blk.5000.ffn_down.weight") == -1 && srt_container_find(c, "blk.") == -1);
    CHECK(srt_container_verify_all(c) == SRT_CT_OK);
    srt_container_close(c);
}

/* This process's resident file-backed pages (RssFile), in kB; -1 when /proc does not say. */
static long rss_file_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "RssFile:", 8) == 0) kb = strtol(line + 8, NULL, 10);
    if (f) fclose(f);
    return kb;
}

/* srt_container_release drops a raw section's pages from the mapping (RssFile falls by about its
 * size) and the bytes still read back; outside the mapping (a zstd section's buffer, a caller's
 * memory) it does nothing. */
static void test_release(void) {
    const char *path = sc_tmp_path("release.spk");
    const size_t big = (size_t)8 << 20, small = 100000;
    uint8_t *a = malloc(big), *b = malloc(small);
    srt_writer *w = a && b ? create(path, SRT_CT_SPAK) : NULL;
    if (!w) {
        free(a), free(b);
        return;
    }
    fill_random(a, big);
    fill_compressible(b, small);
    uint64_t da[1] = {big}, db[1] = {small};
    CHECK(srt_writer_add(w, "raw", SRT_CT_U8, 1, da, a, big, 0) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "packed", SRT_CT_U8, 1, db, b, small, 1) == SRT_CT_OK);
    CHECK(srt_writer_finish(w) == SRT_CT_OK);
    srt_writer_free(w);
    srt_container *c = open_ok(path, SRT_CT_SPAK);
    const void *pa = NULL, *pb = NULL;
    uint64_t na = 0, nb = 0;
    if (c && srt_container_get(c, "raw", &pa, &na) == SRT_CT_OK && srt_container_get(c, "packed", &pb, &nb) == SRT_CT_OK) {
        CHECK(na == big && nb == small);
        const long before = rss_file_kb(); /* the checksum read every page of "raw" */
        srt_container_release(c, pa, na);
        const long after = rss_file_kb();
        if (before >= 0) /* all but the partial pages at the two ends: 8 MB less 8 kB, less slack */
            CHECK_MSG(before - after >= 8000, "RssFile %ld kB -> %ld kB after releasing 8 MB", before, after);
        CHECK(memcmp(pa, a, big) == 0);
        srt_container_release(c, pb, nb);
        srt_container_release(c, b, small);
        srt_container_release(c, (const uint8_t *)pa + na - 10, 100); /* runs past the file: ignored */
        CHECK(memcmp(pb, b, small) == 0 && memcmp(pa, a, big) == 0);
    } else {
        CHECK_MSG(0, "release.spk: sections not found");
    }
    srt_container_close(c);
    free(a), free(b);
}

static void test_big_manifest(void) {
    size_t cap = 3u << 20, n = 0;
    char *m = malloc(cap);
    n += (size_t)snprintf(m + n, cap - n, "{\"tensors\":[");
    for (int i = 0; i < 20000; i++)
        n += (size_t)snprintf(m + n, cap - n, "%s{\"name\":\"blk.%d.w\",\"shape\":[%d,4096],\"scale\":%.17g,\"note\":\"\\u00e9\\ud83d\\ude00\"}",
                              i ? "," : "", i, i + 1, 1.0 / (i + 3));
    n += (size_t)snprintf(m + n, cap - n, "],\"count\":20000}");
    const char *path = sc_tmp_path("bigmanifest.scal");
    srt_writer *w = create(path, SRT_CT_SCAL);
    if (!w) return;
    CHECK(srt_writer_set_manifest(w, "{\"replaced\":true}", 17) == SRT_CT_OK);
    CHECK_MSG(srt_writer_set_manifest(w, m, n) == SRT_CT_OK, "%s", srt_writer_errmsg(w));
    CHECK(srt_writer_finish(w) == SRT_CT_OK);
    srt_writer_free(w);
    srt_container *c = open_ok(path, SRT_CT_SCAL);
    if (c) {
        size_t len;
        const char *t = srt_container_manifest_text(c, &len);
        CHECK(len == n && memcmp(t, m, n) == 0);
        const srt_json *tens = srt_json_get(srt_container_manifest(c), "tensors");
        CHECK(srt_json_count(tens) == 20000);
        CHECK(srt_json_num(srt_json_get(srt_json_at(tens, 19999), "scale"), 0) == 1.0 / 20002);
        CHECK(srt_container_section_count(c) == 0 && srt_container_verify_all(c) == SRT_CT_OK);
    }
    srt_container_close(c);
    free(m);
    /* a manifest over the limit is refused by the writer */
    size_t big = SRT_CT_MAX_MANIFEST + 16;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    memcpy(huge, "{}", 2);
    w = create(sc_tmp_path("toobig.scal"), SRT_CT_SCAL);
    CHECK(srt_writer_set_manifest(w, huge, big) == SRT_CT_EARG && strstr(srt_writer_errmsg(w), "limit"));
    srt_writer_free(w);
    free(huge);
}

/* ---- determinism ---- */

static void write_sample(const char *path, srt_ct_kind kind) {
    srt_writer *w = create(path, kind);
    if (!w) return;
    uint64_t save = rng;
    rng = 42;
    static uint8_t buf[1 << 18];
    fill_random(buf, sizeof buf / 2);
    fill_compressible(buf + sizeof buf / 2, sizeof buf / 2);
    uint64_t d1[1] = {sizeof buf / 4}, d2[2] = {256, 256};
    CHECK(srt_writer_set_manifest(w, manifest_text, strlen(manifest_text)) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "a.f32", SRT_CT_F32, 1, d1, buf, sizeof buf, 0) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "b.f32.zstd1", SRT_CT_F32, 1, d1, buf, sizeof buf, 1) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "c.u16.zstd19", SRT_CT_U16, 2, d2, buf + 1000, 2 * 256 * 256, 19) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "d.empty", SRT_CT_F64, 1, (uint64_t[1]){0}, NULL, 0, 3) == SRT_CT_OK);
    CHECK(srt_writer_finish(w) == SRT_CT_OK);
    srt_writer_free(w);
    rng = save;
}

static void test_determinism(void) {
    const char *a = sc_tmp_path("det_a.spk"), *b = sc_tmp_path("det_b.spk");
    write_sample(a, SRT_CT_SPAK);
    write_sample(b, SRT_CT_SPAK);
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    sc_err err;
    CHECK(sc_read_file(a, 1 << 24, &x, &nx, &err) == SC_OK && sc_read_file(b, 1 << 24, &y, &ny, &err) == SC_OK);
    CHECK(nx > 0 && nx == ny && memcmp(x, y, nx) == 0);
    free(y);
    /* rewriting over an existing file replaces it atomically with the same bytes */
    write_sample(a, SRT_CT_SPAK);
    CHECK(sc_read_file(a, 1 << 24, &y, &ny, &err) == SC_OK && nx == ny && memcmp(x, y, nx) == 0);
    free(x);
    free(y);
    CHECK(count_temp_files() == 0);
}

/* ---- writer errors ---- */

static void test_writer_errors(void) {
    srt_writer *w = NULL;
    char err[768];
    CHECK(srt_writer_create("/nonexistent_dir_sc/x.scal", SRT_CT_SCAL, &w, err, sizeof err) == SRT_CT_EIO && !w);
    CHECK(strstr(err, "/nonexistent_dir_sc/x.scal") && !strchr(err, '\n'));
    CHECK(srt_writer_create(sc_tmp_path("k.scal"), SRT_CT_ANY, &w, err, sizeof err) == SRT_CT_EARG && !w);
    const char *path = sc_tmp_path("errors.scal");
    w = create(path, SRT_CT_SCAL);
    if (!w) return;
    float f[6] = {1, 2, 3, 4, 5, 6};
    uint64_t d[9] = {2, 3, 1, 1, 1, 1, 1, 1, 1};
    char long_name[200];
    memset(long_name, 'a', sizeof long_name);
    long_name[128] = '\0';
    const char *bad_names[] = {"", long_name, "has space", "tab\there", "caf\xc3\xa9", "new\nline"};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
        CHECK_MSG(srt_writer_add(w, bad_names[i], SRT_CT_F32, 2, d, f, sizeof f, 0) == SRT_CT_EARG, "name #%zu", i);
    long_name[127] = '\0'; /* 127 bytes is allowed */
    CHECK(srt_writer_add(w, long_name, SRT_CT_F32, 2, d, f, sizeof f, 0) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "x", SRT_CT_F32, 2, d, f, sizeof f - 4, 0) == SRT_CT_EARG);
    CHECK(strstr(srt_writer_errmsg(w), "20 bytes given for f32 x shape [2, 3]") != NULL);
    CHECK(srt_writer_add(w, "x", SRT_CT_DTYPE_COUNT, 2, d, f, sizeof f, 0) == SRT_CT_EARG);
    CHECK(srt_writer_add(w, "x", SRT_CT_F32, 9, d, f, sizeof f, 0) == SRT_CT_EARG);
    CHECK(srt_writer_add(w, "x", SRT_CT_F32, 2, NULL, f, sizeof f, 0) == SRT_CT_EARG);
    CHECK(srt_writer_add(w, "x", SRT_CT_F32, 2, d, f, sizeof f, 20) == SRT_CT_EARG);
    CHECK(srt_writer_add(w, "x", SRT_CT_F32, 2, d, f, sizeof f, -1) == SRT_CT_EARG);
    CHECK(srt_writer_add(w, "x", SRT_CT_F32, 2, d, NULL, sizeof f, 0) == SRT_CT_EARG);
    uint64_t huge[3] = {1ull << 40, 1ull << 40, 1ull << 40};
    CHECK(srt_writer_add(w, "x", SRT_CT_F32, 3, huge, f, sizeof f, 0) == SRT_CT_EARG);
    CHECK(srt_writer_set_manifest(w, "[1]", 3) == SRT_CT_EARG && strstr(srt_writer_errmsg(w), "object"));
    CHECK(srt_writer_set_manifest(w, "{\"a\":", 5) == SRT_CT_EARG && strstr(srt_writer_errmsg(w), "JSON error"));
    CHECK(srt_writer_set_manifest(w, "{\"a\":1,\"a\":2}", 13) == SRT_CT_EARG);
    CHECK(srt_writer_set_manifest(w, NULL, 0) == SRT_CT_EARG);
    /* argument errors do not poison the writer */
    CHECK(srt_writer_add(w, "x", SRT_CT_F32, 2, d, f, sizeof f, 0) == SRT_CT_OK);
    CHECK(srt_writer_finish(w) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "y", SRT_CT_F32, 2, d, f, sizeof f, 0) == SRT_CT_EARG);
    CHECK(srt_writer_finish(w) == SRT_CT_EARG && strstr(srt_writer_errmsg(w), "after finish"));
    srt_writer_free(w);
    srt_writer_free(NULL);
    srt_container *c = open_ok(path, SRT_CT_SCAL);
    CHECK(c && srt_container_section_count(c) == 2 && srt_container_find(c, "x") == 1);
    CHECK(c && srt_container_manifest_text(c, NULL)[0] == '{' && srt_json_count(srt_container_manifest(c)) == 0);
    srt_container_close(c);
    srt_container_close(NULL);
}

/* ---- atomicity ---- */

static void test_abandon(void) {
    const char *path = sc_tmp_path("abandon.spk");
    write_sample(path, SRT_CT_SPAK);
    srt_writer *w = create(path, SRT_CT_SPAK);
    if (!w) return;
    uint8_t buf[4096] = {0};
    uint64_t d[1] = {sizeof buf};
    CHECK(srt_writer_add(w, "new.section", SRT_CT_U8, 1, d, buf, sizeof buf, 0) == SRT_CT_OK);
    CHECK(count_temp_files() == (named_temp() ? 1 : 0) && srt_writer_bytes_written(w) > sizeof buf);
    CHECK(named_temp() ? strstr(srt_writer_temp_path(w), "abandon.spk.tmp.") != NULL : !srt_writer_temp_path(w)[0]);
    CHECK(count_unnamed(getpid(), NULL) == (named_temp() ? 0 : 1));
    srt_writer_free(w); /* abandoned midway */
    CHECK(count_temp_files() == 0 && count_unnamed(getpid(), NULL) == 0);
    srt_container *c = open_ok(path, SRT_CT_SPAK); /* the old file is untouched */
    CHECK(c && srt_container_find(c, "new.section") == -1 && srt_container_find(c, "a.f32") == 0);
    srt_container_close(c);
    /* a fresh path abandoned: nothing at all */
    const char *fresh = sc_tmp_path("abandon_fresh.spk");
    w = create(fresh, SRT_CT_SPAK);
    CHECK(srt_writer_add(w, "s", SRT_CT_U8, 1, d, buf, sizeof buf, 3) == SRT_CT_OK);
    srt_writer_free(w);
    CHECK(!sc_file_exists(fresh) && count_temp_files() == 0);
}

/* A child writes a big file (64 MiB+) and is killed midway: nothing appears
 * under the final name, and a file already there survives intact. */
static void test_killed_writer(void) {
    const int sigs[] = {SIGKILL, SIGINT, SIGTERM};
    for (size_t t = 0; t < sizeof sigs / sizeof sigs[0]; t++) {
        char name[64];
        snprintf(name, sizeof name, "killed_%zu.spk", t);
        const char *p = sc_tmp_path(name);
        char path[4096];
        snprintf(path, sizeof path, "%s", p);
        bool preexisting = t == 1;
        if (preexisting) write_sample(path, SRT_CT_SPAK);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            srt_writer *w = NULL;
            char err[768];
            if (srt_writer_create(path, SRT_CT_SPAK, &w, err, sizeof err)) _exit(3);
            size_t chunk = 1u << 20;
            uint8_t *buf = malloc(chunk);
            if (!buf) _exit(4);
            memset(buf, 0x5a, chunk);
            uint64_t d[1] = {chunk};
            for (int i = 0; i < 4096; i++) { /* up to 4 GiB: far more than the parent waits for */
                char sn[32];
                snprintf(sn, sizeof sn, "chunk.%d", i);
                buf[0] = (uint8_t)i;
                if (srt_writer_add(w, sn, SRT_CT_U8, 1, d, buf, chunk, i % 4 == 3 ? 1 : 0)) _exit(5);
            }
            for (;;) pause(); /* never finish */
        }
        CHECK(pid > 0);
        if (pid <= 0) continue;
        /* wait until the temp file holds 64 MiB */
        bool big = false;
        for (int i = 0; i < 3000 && !big; i++) {
            DIR *d = opendir(sc_test_tmpdir());
            for (struct dirent *e; d && (e = readdir(d));) {
                if (strncmp(e->d_name, name, strlen(name)) || !strstr(e->d_name, ".tmp.")) continue;
                struct stat st;
                if (stat(sc_tmp_path(e->d_name), &st) == 0 && st.st_size >= (64 << 20)) big = true;
            }
            if (d) closedir(d);
            off_t sz = 0;
            if (!named_temp() && count_unnamed(pid, &sz) == 1 && sz >= (64 << 20)) big = true;
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        CHECK_MSG(big, "the child never wrote 64 MiB");
        kill(pid, sigs[t]);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == sigs[t]);
        if (preexisting) {
            srt_container *c = open_ok(path, SRT_CT_SPAK);
            CHECK(c && srt_container_find(c, "chunk.0") == -1 && srt_container_verify_all(c) == SRT_CT_OK);
            srt_container_close(c);
        } else {
            CHECK_MSG(!sc_file_exists(path), "%s exists after the writer was killed", path);
        }
        if (named_temp()) {
            /* a killed process cannot clean up; the temp name says whose it was, and the next writer of the
               same target removes it (its process is dead) */
            CHECK(count_temp_files() == 1);
            CHECK(srt_out_clean_stale(path) == 1 && count_temp_files() == 0);
        } else {
            CHECK(count_temp_files() == 0); /* the unnamed file died with its process */
        }
        remove_temp_files();
    }
}

/* ---- CLI ---- */

static char out[1 << 20];

static int run(const char *fmt, const char *a, const char *b) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, fmt, SC_CLI_PATH, a ? a : "", b ? b : "");
    return sc_run(cmd, out, sizeof out);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static bool copy_with_flip(const char *from, const char *to, size_t at, uint8_t mask) {
    char *x = NULL;
    size_t n = 0;
    sc_err err;
    if (sc_read_file(from, 1 << 24, &x, &n, &err) != SC_OK) return false;
    if (at < n) x[at] = (char)(x[at] ^ mask);
    bool ok = sc_write_bytes(to, x, at == SIZE_MAX ? n / 2 : n);
    free(x);
    return ok;
}

static void test_cli(void) {
    const char *good = sc_tmp_path("cli.scal");
    write_sample(good, SRT_CT_SCAL);
    CHECK(run("%s inspect %s%s", good, 0) == 0);
    CHECK(strstr(out, "calibration file (SPARSCAL), format 1.0") && strstr(out, "c.u16.zstd19") &&
          strstr(out, "\"tokens\": 123456789012345") && strstr(out, "zstd"));
    CHECK(run("%s inspect %s --stats%s", good, 0) == 0 && strstr(out, "mean"));
    CHECK(run("%s inspect --json %s%s", good, 0) == 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    const cJSON *secs = cJSON_GetObjectItemCaseSensitive(j, "sections");
    CHECK(cJSON_GetArraySize(secs) == 4);
    const cJSON *s0 = cJSON_GetArrayItem(secs, 0);
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(s0, "name")) &&
          strcmp(cJSON_GetObjectItemCaseSensitive(s0, "name")->valuestring, "a.f32") == 0);
    CHECK(cJSON_GetObjectItemCaseSensitive(s0, "offset")->valuedouble == 128);
    const cJSON *man = cJSON_GetObjectItemCaseSensitive(j, "manifest");
    CHECK(cJSON_GetObjectItemCaseSensitive(man, "tokens")->valuedouble == 123456789012345.0);
    CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(j, "kind")->valuestring, "calibration") == 0);
    cJSON_Delete(j);
    CHECK(run("%s verify %s%s", good, 0) == 0 && strstr(out, "ok"));
    CHECK(run("%s verify %s --json%s", good, 0) == 0);
    j = cJSON_Parse(out);
    CHECK(j && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")));
    cJSON_Delete(j);

    /* a flipped data byte: the structure is fine (inspect works), verify fails */
    const char *bad = sc_tmp_path("cli_bad.scal");
    CHECK(copy_with_flip(good, bad, 128 + 1000, 0x10));
    CHECK(run("%s inspect %s%s >/dev/null", bad, 0) == 0);
    CHECK(run("%s verify %s 2>&1%s", bad, 0) == 1);
    CHECK(count_lines(out) == 1 && strstr(out, bad) && strstr(out, "section 'a.f32'") && strstr(out, "checksum"));
    CHECK(run("%s verify %s --json%s", bad, 0) == 1);
    j = cJSON_Parse(out);
    CHECK(j && cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "ok")) &&
          cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "errors")) == 1);
    cJSON_Delete(j);
    /* a flipped header byte: both fail, one line naming the file */
    CHECK(copy_with_flip(good, bad, 30, 0x01));
    CHECK(run("%s inspect %s 2>&1%s", bad, 0) == 1 && count_lines(out) == 1 && strstr(out, bad) && strstr(out, "header"));
    CHECK(run("%s verify %s 2>&1%s", bad, 0) == 1 && count_lines(out) == 1);
    CHECK(run("%s verify --json %s%s", bad, 0) == 1 && strstr(out, "\"ok\":false"));
    /* truncated */
    CHECK(copy_with_flip(good, bad, SIZE_MAX, 0));
    CHECK(run("%s verify %s 2>&1%s", bad, 0) == 1 && count_lines(out) == 1 && strstr(out, "file_size"));
    /* not a container at all */
    char notours[160];
    memset(notours, 'x', sizeof notours);
    memcpy(notours, "GGUF\x03\x00\x00\x00", 8);
    sc_write_bytes(bad, notours, sizeof notours);
    /* another format is named for what it is (filekind.h), given in the wrong place: exit 2 */
    CHECK(run("%s inspect %s 2>&1%s", bad, 0) == 2 && count_lines(out) == 1 &&
          strstr(out, "is a GGUF model (-m), not a sparsecal file (.scal or .spk)"));
    /* usage and unreadable input: exit 2 */
    CHECK(run("%s inspect /nonexistent/f.spk 2>&1%s%s", 0, 0) == 2 && count_lines(out) == 1);
    CHECK(run("%s verify /nonexistent/f.spk 2>&1%s%s", 0, 0) == 2);
    CHECK(run("%s inspect 2>&1%s%s", 0, 0) == 2 && count_lines(out) == 1);
    CHECK(run("%s verify %s %s 2>&1", good, good) == 2);
    CHECK(run("%s inspect --bogus %s 2>&1%s", good, 0) == 2 && count_lines(out) == 1);
    CHECK(run("%s inspect --help%s%s", 0, 0) == 0 && strstr(out, "usage: sparsecal inspect"));
    CHECK(run("%s verify --help%s%s", 0, 0) == 0 && strstr(out, "usage: sparsecal verify"));
    CHECK(run("%s --help%s%s", 0, 0) == 0 && strstr(out, "inspect") && strstr(out, "verify"));
    /* an artifact is reported as one */
    const char *spk = sc_tmp_path("cli.spk");
    write_sample(spk, SRT_CT_SPAK);
    CHECK(run("%s inspect %s%s", spk, 0) == 0 && strstr(out, "artifact file (SPARSPAK)"));
    CHECK(run("%s verify -q %s%s", spk, 0) == 0 && out[0] == '\0');
}

int main(void) {
    test_round_trip();
    test_many_sections();
    test_release();
    test_big_manifest();
    test_determinism();
    test_writer_errors();
    test_abandon();
    test_killed_writer();
    setenv("SPARSECAL_NAMED_TEMP", "1", 1); /* the same without O_TMPFILE */
    test_round_trip();
    test_abandon();
    test_killed_writer();
    unsetenv("SPARSECAL_NAMED_TEMP");
    test_cli();
    return sc_test_finish();
}
