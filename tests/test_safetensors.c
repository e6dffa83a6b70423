/* test_safetensors.c - writer/reader round trip, header alignment, sharded
 * sets, and hostile files (every one must fail cleanly, naming the file). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sys/stat.h>

#include "safetensors.h"
#include "testing.h"

static int n_hostile = 0;

/* Writes u64 header length + header + data. */
static bool write_st(const char *path, const char *header, const void *data, size_t n_data) {
    size_t hn = strlen(header);
    uint8_t *buf = malloc(8 + hn + n_data + 1);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hn >> (8 * i));
    memcpy(buf + 8, header, hn);
    if (n_data) memcpy(buf + 8 + hn, data, n_data);
    bool ok = sc_write_bytes(path, buf, 8 + hn + n_data);
    free(buf);
    return ok;
}

/* Opening must fail with a message naming `must_name`. */
static void expect_bad_file(const char *path, const char *must_name, const char *what) {
    sc_st_file *f = NULL;
    sc_err err = {{0}};
    sc_status st = sc_st_open(path, &f, &err);
    CHECK_MSG(st != SC_OK, "%s: accepted", what);
    CHECK_MSG(f == NULL, "%s: handle returned", what);
    CHECK_MSG(strstr(err.msg, must_name) != NULL, "%s: message '%s' does not name %s", what, err.msg, must_name);
    CHECK_MSG(strchr(err.msg, '\n') == NULL, "%s: multi-line message", what);
    sc_st_free(f);
    n_hostile++;
}

static void expect_bad_header(const char *header, size_t n_data, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "hostile_%d.safetensors", n_hostile);
    const char *p = sc_tmp_path(name);
    uint8_t *data = calloc(1, n_data + 1);
    CHECK(write_st(p, header, data, n_data));
    free(data);
    expect_bad_file(p, p, what);
}

static void expect_bad_set(const char *path, const char *must_name, const char *what) {
    sc_st_set *s = NULL;
    sc_err err = {{0}};
    sc_status st = sc_st_set_open(path, &s, &err);
    CHECK_MSG(st != SC_OK, "%s: accepted", what);
    CHECK_MSG(s == NULL, "%s: handle returned", what);
    CHECK_MSG(strstr(err.msg, must_name) != NULL, "%s: message '%s' does not name %s", what, err.msg, must_name);
    sc_st_set_free(s);
}

static size_t count_dir_entries(const char *dir) {
    DIR *d = opendir(dir);
    size_t n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* ---- round trip ---- */

static const float vals_a[6] = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, -7.0f};
static const float vals_b[4] = {0.5f, -1024.0f, 3.14159265f, 65504.0f};
static const float vals_c[6] = {1.0f, 0.1f, -0.3f, 1e30f, -1e-20f, 2.0f};

static void write_sample(const char *path) {
    sc_st_spec specs[] = {
        {.name = "a", .dtype = SC_DT_F32, .n_dims = 2, .shape = {2, 3}},
        {.name = "b.half", .dtype = SC_DT_F16, .n_dims = 1, .shape = {4}},
        {.name = "c \"quoted\"", .dtype = SC_DT_BF16, .n_dims = 2, .shape = {3, 2}},
        {.name = "ids", .dtype_name = "I64", .n_dims = 1, .shape = {2}},
        {.name = "scalar", .dtype = SC_DT_F32, .n_dims = 0},
        {.name = "empty", .dtype = SC_DT_F16, .n_dims = 2, .shape = {0, 5}},
    };
    sc_st_meta meta[] = {{"format", "pt"}, {"note", "line\nbreak \"q\""}};
    sc_st_writer *w = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_st_writer_create(path, specs, 6, meta, 2, &w, &err) == SC_OK, "%s", err.msg);
    if (!w) return;
    CHECK(sc_st_writer_write_f32(w, vals_a, 6, &err) == SC_OK);
    /* b and c in one call spanning both tensors */
    float bc[10];
    memcpy(bc, vals_b, sizeof vals_b);
    memcpy(bc + 4, vals_c, sizeof vals_c);
    CHECK(sc_st_writer_write_f32(w, bc, 10, &err) == SC_OK);
    uint8_t ids[16] = {7, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK(sc_st_writer_write(w, ids, 16, &err) == SC_OK);
    float s = 42.0f;
    CHECK(sc_st_writer_write_f32(w, &s, 1, &err) == SC_OK);
    CHECK_MSG(sc_st_writer_finish(w, &err) == SC_OK, "%s", err.msg);
    sc_st_writer_free(w);
}

static void test_round_trip(void) {
    const char *path = sc_tmp_path("sample.safetensors");
    write_sample(path);
    sc_st_file *f = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_st_open(path, &f, &err) == SC_OK, "%s", err.msg);
    if (!f) return;
    CHECK(sc_st_count(f) == 6);
    const sc_st_tensor *a = sc_st_find(f, "a"), *b = sc_st_find(f, "b.half"), *c = sc_st_find(f, "c \"quoted\"");
    const sc_st_tensor *ids = sc_st_find(f, "ids"), *sc = sc_st_find(f, "scalar"), *em = sc_st_find(f, "empty");
    CHECK(sc_st_find(f, "nope") == NULL);
    CHECK(a && b && c && ids && sc && em);
    if (!(a && b && c && ids && sc && em)) {
        sc_st_free(f);
        return;
    }
    CHECK(a->supported && a->dtype == SC_DT_F32 && a->n_dims == 2 && a->shape[0] == 2 && a->shape[1] == 3);
    CHECK(a->n_elements == 6 && a->n_bytes == 24 && strcmp(a->file, path) == 0);
    for (int i = 0; i < 6; i++) CHECK(sc_lef32(a->data + 4 * i) == vals_a[i]);
    CHECK(b->supported && b->dtype == SC_DT_F16 && b->n_dims == 1 && b->shape[0] == 4 && b->n_bytes == 8);
    for (int i = 0; i < 4; i++) CHECK(sc_le16(b->data + 2 * i) == sc_f32_to_f16(vals_b[i]));
    CHECK(sc_f16_to_f32(sc_le16(b->data + 2)) == -1024.0f);
    CHECK(c->supported && c->dtype == SC_DT_BF16 && c->shape[0] == 3 && c->shape[1] == 2);
    for (int i = 0; i < 6; i++) CHECK(sc_le16(c->data + 2 * i) == sc_f32_to_bf16(vals_c[i]));
    CHECK(!ids->supported && strcmp(ids->dtype_name, "I64") == 0 && ids->n_bytes == 16);
    CHECK(sc_le64(ids->data) == 7 && sc_le64(ids->data + 8) == UINT64_MAX);
    CHECK(sc->n_dims == 0 && sc->n_elements == 1 && sc_lef32(sc->data) == 42.0f);
    CHECK(em->n_elements == 0 && em->n_bytes == 0);
    CHECK(sc_st_meta_count(f) == 2);
    const char *v = sc_st_meta_find(f, "note");
    CHECK(v && strcmp(v, "line\nbreak \"q\"") == 0);
    CHECK(sc_st_meta_find(f, "format") && strcmp(sc_st_meta_find(f, "format"), "pt") == 0);
    /* tensors are listed sorted by name */
    for (size_t i = 1; i < sc_st_count(f); i++) CHECK(strcmp(sc_st_get(f, i - 1)->name, sc_st_get(f, i)->name) < 0);
    sc_st_free(f);

    /* header alignment: 8 + N is a multiple of 8, padding is spaces, data in the given order */
    char *raw = NULL;
    size_t len = 0;
    CHECK(sc_read_file(path, 1 << 20, &raw, &len, &err) == SC_OK);
    if (raw) {
        uint64_t hn = sc_le64((const uint8_t *)raw);
        CHECK((8 + hn) % 8 == 0);
        CHECK(raw[8] == '{');
        size_t last = 8 + hn - 1;
        while (raw[last] == ' ') last--;
        CHECK(raw[last] == '}');
        CHECK(len == 8 + hn + 24 + 8 + 12 + 16 + 4);
        CHECK(sc_lef32((const uint8_t *)raw + 8 + hn) == vals_a[0]);
        free(raw);
    }
    /* the set abstraction over a single file */
    sc_st_set *s = NULL;
    CHECK_MSG(sc_st_set_open(path, &s, &err) == SC_OK, "%s", err.msg);
    if (s) {
        CHECK(sc_st_set_count(s) == 6 && sc_st_set_n_files(s) == 1);
        CHECK(sc_st_set_find(s, "a") && sc_st_set_find(s, "a")->n_elements == 6);
        sc_st_set_free(s);
    }
}

/* The streaming conversion must round exactly like sc_f32_to_bf16 / sc_f32_to_f16. */
static void test_rounding(void) {
    const uint32_t bits[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x7fc00001u, 0xff800001u, 0x7f800000u,
                             0x80000000u, 0x7f7fffffu, 0x00000001u, 0x477ff000u, 0x38800000u, 0x33000001u,
                             0xc2f6e979u, 0x3eaaaaabu, 0x7f7f8000u, 0x0001ffffu};
    enum { N = sizeof bits / sizeof bits[0] };
    float v[N];
    memcpy(v, bits, sizeof v);
    const char *path = sc_tmp_path("rounding.safetensors");
    sc_st_spec specs[] = {{.name = "bf", .dtype = SC_DT_BF16, .n_dims = 1, .shape = {N}},
                          {.name = "h", .dtype = SC_DT_F16, .n_dims = 1, .shape = {N}}};
    sc_st_writer *w = NULL;
    sc_err err = {{0}};
    CHECK(sc_st_writer_create(path, specs, 2, NULL, 0, &w, &err) == SC_OK);
    if (!w) return;
    for (int rep = 0; rep < 2; rep++)
        for (int i = 0; i < N; i++) CHECK(sc_st_writer_write_f32(w, &v[i], 1, &err) == SC_OK);
    CHECK(sc_st_writer_finish(w, &err) == SC_OK);
    sc_st_writer_free(w);
    sc_st_file *f = NULL;
    CHECK(sc_st_open(path, &f, &err) == SC_OK);
    if (!f) return;
    const sc_st_tensor *bf = sc_st_find(f, "bf"), *h = sc_st_find(f, "h");
    for (int i = 0; bf && h && i < N; i++) {
        CHECK_MSG(sc_le16(bf->data + 2 * i) == sc_f32_to_bf16(v[i]), "bf16 of 0x%08x", bits[i]);
        CHECK_MSG(sc_le16(h->data + 2 * i) == sc_f32_to_f16(v[i]), "f16 of 0x%08x", bits[i]);
    }
    sc_st_free(f);
}

static void test_writer_errors(void) {
    const char *dir = sc_tmp_path("wdir");
    CHECK(mkdir(dir, 0777) == 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    sc_st_spec specs[] = {{.name = "x", .dtype = SC_DT_F32, .n_dims = 1, .shape = {4}},
                          {.name = "y", .dtype = SC_DT_BF16, .n_dims = 1, .shape = {3}}};
    sc_err err = {{0}};
    sc_st_writer *w = NULL;
    float v[8] = {0};

    /* too much data: error, temp file gone, nothing created */
    CHECK(sc_st_writer_create(path, specs, 2, NULL, 0, &w, &err) == SC_OK);
    /* the temp file: unnamed (O_TMPFILE) unless SPARSECAL_NAMED_TEMP asks for a named one (srt_file.h) */
    const char *named = getenv("SPARSECAL_NAMED_TEMP");
    CHECK(count_dir_entries(dir) == (named && *named && strcmp(named, "0") ? 1u : 0u));
    CHECK(sc_st_writer_write_f32(w, v, 8, &err) != SC_OK);
    CHECK(strstr(err.msg, path) != NULL);
    CHECK(sc_st_writer_write_f32(w, v, 1, &err) != SC_OK); /* stays failed */
    CHECK(sc_st_writer_finish(w, &err) != SC_OK);
    sc_st_writer_free(w);
    CHECK(count_dir_entries(dir) == 0);

    /* too little data */
    CHECK(sc_st_writer_create(path, specs, 2, NULL, 0, &w, &err) == SC_OK);
    CHECK(sc_st_writer_write_f32(w, v, 5, &err) == SC_OK);
    CHECK(sc_st_writer_finish(w, &err) != SC_OK);
    CHECK(strstr(err.msg, "only") != NULL);
    sc_st_writer_free(w);
    CHECK(count_dir_entries(dir) == 0);

    /* abandoned writer (freed without finish) leaves nothing */
    CHECK(sc_st_writer_create(path, specs, 2, NULL, 0, &w, &err) == SC_OK);
    CHECK(sc_st_writer_write_f32(w, v, 2, &err) == SC_OK);
    sc_st_writer_free(w);
    CHECK(count_dir_entries(dir) == 0);

    /* raw bytes that split an element make f32 conversion refuse */
    CHECK(sc_st_writer_create(path, specs, 2, NULL, 0, &w, &err) == SC_OK);
    CHECK(sc_st_writer_write(w, v, 2, &err) == SC_OK);
    CHECK(sc_st_writer_write_f32(w, v, 1, &err) != SC_OK);
    sc_st_writer_free(w);
    CHECK(count_dir_entries(dir) == 0);

    /* bad specs */
    sc_st_spec dup[] = {{.name = "x", .dtype = SC_DT_F32, .n_dims = 1, .shape = {1}},
                        {.name = "x", .dtype = SC_DT_F32, .n_dims = 1, .shape = {1}}};
    CHECK(sc_st_writer_create(path, dup, 2, NULL, 0, &w, &err) == SC_EARG && w == NULL);
    sc_st_spec q8[] = {{.name = "q", .dtype = SC_DT_Q8_0, .n_dims = 1, .shape = {32}}};
    CHECK(sc_st_writer_create(path, q8, 1, NULL, 0, &w, &err) == SC_EARG && w == NULL);
    sc_st_spec neg[] = {{.name = "n", .dtype = SC_DT_F32, .n_dims = 1, .shape = {-1}}};
    CHECK(sc_st_writer_create(path, neg, 1, NULL, 0, &w, &err) == SC_EARG && w == NULL);
    sc_st_spec ovf[] = {{.name = "o", .dtype = SC_DT_F32, .n_dims = 3, .shape = {1LL << 40, 1LL << 40, 1LL << 40}}};
    CHECK(sc_st_writer_create(path, ovf, 1, NULL, 0, &w, &err) == SC_EARG && w == NULL);
    sc_st_spec meta_name[] = {{.name = "__metadata__", .dtype = SC_DT_F32, .n_dims = 1, .shape = {1}}};
    CHECK(sc_st_writer_create(path, meta_name, 1, NULL, 0, &w, &err) == SC_EARG && w == NULL);
    CHECK(count_dir_entries(dir) == 0);

    /* a file with no tensors at all is valid */
    CHECK(sc_st_writer_create(path, NULL, 0, NULL, 0, &w, &err) == SC_OK);
    CHECK(sc_st_writer_finish(w, &err) == SC_OK);
    sc_st_writer_free(w);
    sc_st_file *f = NULL;
    CHECK_MSG(sc_st_open(path, &f, &err) == SC_OK, "%s", err.msg);
    if (f) CHECK(sc_st_count(f) == 0);
    sc_st_free(f);
}

/* ---- hostile files ---- */

static void test_truncated(void) {
    const char *src = sc_tmp_path("sample.safetensors");
    char *raw = NULL;
    size_t len = 0;
    sc_err err = {{0}};
    CHECK(sc_read_file(src, 1 << 20, &raw, &len, &err) == SC_OK);
    if (!raw) return;
    const char *p = sc_tmp_path("truncated.safetensors");
    for (size_t n = 0; n < len; n++) {
        CHECK(sc_write_bytes(p, raw, n));
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu bytes", n);
        expect_bad_file(p, p, what);
    }
    free(raw);
}

static void put_le64(uint8_t *b, uint64_t v) {
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static void test_bad_lengths(void) {
    const char *p = sc_tmp_path("badlen.safetensors");
    uint8_t buf[64];
    memset(buf, ' ', sizeof buf);
    memcpy(buf + 8, "{}", 2);
    put_le64(buf, (uint64_t)1 << 63);
    CHECK(sc_write_bytes(p, buf, sizeof buf));
    expect_bad_file(p, p, "header length 2^63");
    put_le64(buf, UINT64_MAX);
    CHECK(sc_write_bytes(p, buf, sizeof buf));
    expect_bad_file(p, p, "header length 2^64-1");
    put_le64(buf, 57); /* one more than the file holds */
    CHECK(sc_write_bytes(p, buf, sizeof buf));
    expect_bad_file(p, p, "header length > file");
    put_le64(buf, 0);
    CHECK(sc_write_bytes(p, buf, sizeof buf));
    expect_bad_file(p, p, "header length 0");
    /* a header over the 100 MB cap (sparse file, no real data) */
    FILE *f = fopen(p, "wb");
    if (f) {
        put_le64(buf, ((uint64_t)100 << 20) + 8);
        fwrite(buf, 1, 16, f);
        fseek(f, (long)((100 << 20) + 64), SEEK_SET);
        fputc(' ', f);
        fclose(f);
        expect_bad_file(p, p, "header over 100 MB");
        unlink(p);
    }
    /* exactly 56 = whole rest of the file: valid (an empty object plus spaces) */
    put_le64(buf, 56);
    CHECK(sc_write_bytes(p, buf, sizeof buf));
    sc_st_file *st = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_st_open(p, &st, &err) == SC_OK, "%s", err.msg);
    sc_st_free(st);
}

static void test_bad_headers(void) {
    expect_bad_header("{\"a\": {\"dtype\": \"F32\"", 0, "invalid JSON (unterminated)");
    expect_bad_header("{\"a\": 1,}", 0, "invalid JSON (trailing comma)");
    expect_bad_header("{} junk", 0, "trailing garbage");
    expect_bad_header("[1, 2]", 0, "not an object");
    expect_bad_header("\"str\"", 0, "string header");
    expect_bad_header("null", 0, "null header");
    expect_bad_header("{\"a\": 5}", 0, "tensor entry not an object");
    expect_bad_header("{\"a\": {\"dtype\": \"Q4\", \"shape\": [1], \"data_offsets\": [0, 1]}}", 1, "unknown dtype");
    expect_bad_header("{\"a\": {\"dtype\": 3, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "dtype not a string");
    expect_bad_header("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 4, "dtype missing");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 4, "shape missing");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": 1, \"data_offsets\": [0, 4]}}", 4, "shape not array");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [-1, 2], \"data_offsets\": [0, 4]}}", 4,
                      "negative shape");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1.5], \"data_offsets\": [0, 4]}}", 4,
                      "fractional shape");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [\"1\"], \"data_offsets\": [0, 4]}}", 4,
                      "string shape");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2199023255553], \"data_offsets\": [0, 4]}}", 4,
                      "shape > 2^40");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1e300], \"data_offsets\": [0, 4]}}", 4,
                      "shape 1e300");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1099511627776, 1099511627776], "
                      "\"data_offsets\": [0, 4]}}",
                      4, "shape product overflow");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [4194304, 4194304, 1048576], "
                      "\"data_offsets\": [0, 4]}}",
                      4, "byte size overflow");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 4]}}", 4,
                      "too many dims");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 1000]}}", 8,
                      "offsets beyond data");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 0]}}", 8,
                      "offsets reversed");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 8,
                      "offsets size mismatch");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0]}}", 8, "one offset");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8, 9]}}", 8,
                      "three offsets");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [-8, 0]}}", 8,
                      "negative offset");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": {\"b\": 0}}}", 8,
                      "offsets object");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [18446744073709551615, 8]}}",
                      8, "offset 2^64");
    expect_bad_header("{\"a\": {\"dtype\": \"F4\", \"shape\": [3], \"data_offsets\": [0, 2]}}", 2,
                      "partial-byte F4");
    expect_bad_header("{\"__metadata__\": [1]}", 0, "metadata not an object");
    expect_bad_header("{\"__metadata__\": {\"k\": 1}}", 0, "metadata value not a string");
    expect_bad_header("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                      "\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
                      4, "duplicate tensor");
    /* deep nesting must not overflow the stack */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 16);
    strcpy(deep, "{\"a\":");
    size_t k = strlen(deep);
    for (size_t i = 0; i < depth; i++) deep[k++] = '[';
    for (size_t i = 0; i < depth; i++) deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = '\0';
    expect_bad_header(deep, 0, "deep nesting");
    free(deep);
    /* embedded NUL inside the header */
    const char *p = sc_tmp_path("nul.safetensors");
    uint8_t buf[8 + 8] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', 0, ' ', ' ', ' ', ' ', ' '};
    CHECK(sc_write_bytes(p, buf, sizeof buf));
    expect_bad_file(p, p, "NUL in header");
    /* a directory and a missing file */
    expect_bad_file(sc_test_tmpdir(), sc_test_tmpdir(), "directory");
    const char *missing = sc_tmp_path("does-not-exist.safetensors");
    expect_bad_file(missing, missing, "missing file");
}

/* Random byte flips in a valid file: open may succeed or fail, but never crash,
 * and on success every tensor must lie inside the file. */
static void test_mutations(void) {
    const char *src = sc_tmp_path("sample.safetensors");
    char *raw = NULL;
    size_t len = 0;
    sc_err err = {{0}};
    CHECK(sc_read_file(src, 1 << 20, &raw, &len, &err) == SC_OK);
    if (!raw) return;
    const char *p = sc_tmp_path("mutated.safetensors");
    uint64_t hn = sc_le64((const uint8_t *)raw);
    uint64_t rs = 12345;
    int ok = 0, bad = 0;
    char *m = malloc(len);
    for (int it = 0; it < 1500; it++) {
        memcpy(m, raw, len);
        int flips = 1 + it % 3;
        for (int j = 0; j < flips; j++) {
            rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t pos = (size_t)((rs >> 33) % (8 + hn));
            const char repl[] = "0123456789-[]{}\",:.eE \\";
            m[pos] = (rs >> 20) & 1 ? repl[(rs >> 24) % (sizeof repl - 1)] : (char)(rs >> 40);
        }
        CHECK(sc_write_bytes(p, m, len));
        sc_st_file *f = NULL;
        if (sc_st_open(p, &f, &err) == SC_OK) {
            ok++;
            for (size_t i = 0; i < sc_st_count(f); i++) {
                const sc_st_tensor *t = sc_st_get(f, i);
                volatile uint8_t sum = 0;
                for (size_t b = 0; b < t->n_bytes; b++) sum ^= t->data[b]; /* ASan checks bounds */
                (void)sum;
            }
        } else {
            bad++;
            CHECK_MSG(strstr(err.msg, p) != NULL, "message '%s'", err.msg);
        }
        sc_st_free(f);
    }
    free(m);
    free(raw);
    CHECK(bad > 0);
    printf("mutations: %d opened, %d rejected\n", ok, bad);
}

/* ---- sharded sets ---- */

static void write_shard(const char *path, const char *name0, const char *name1, float base) {
    sc_st_spec specs[] = {{.name = name0, .dtype = SC_DT_F32, .n_dims = 1, .shape = {2}},
                          {.name = name1, .dtype = SC_DT_BF16, .n_dims = 1, .shape = {3}}};
    sc_st_writer *w = NULL;
    sc_err err = {{0}};
    CHECK(sc_st_writer_create(path, specs, 2, NULL, 0, &w, &err) == SC_OK);
    float v[5] = {base, base + 1, base + 2, base + 3, base + 4};
    CHECK(sc_st_writer_write_f32(w, v, 5, &err) == SC_OK);
    CHECK(sc_st_writer_finish(w, &err) == SC_OK);
    sc_st_writer_free(w);
}

static void write_index(const char *path, const char *json) { CHECK(sc_write_bytes(path, json, strlen(json))); }

static void test_sets(void) {
    const char *dir = sc_tmp_path("shards");
    CHECK(mkdir(dir, 0777) == 0);
    char s1[4096], s2[4096], idx[4096];
    snprintf(s1, sizeof s1, "%s/m-1.safetensors", dir);
    snprintf(s2, sizeof s2, "%s/m-2.safetensors", dir);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    write_shard(s1, "t0", "t1", 10.0f);
    write_shard(s2, "t2", "t3", 20.0f);
    write_index(idx, "{\"metadata\": {\"total_size\": 36}, \"weight_map\": {\"t0\": \"m-1.safetensors\", "
                     "\"t3\": \"m-2.safetensors\", \"t1\": \"m-1.safetensors\", \"t2\": \"m-2.safetensors\"}}");
    sc_st_set *s = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_st_set_open(idx, &s, &err) == SC_OK, "%s", err.msg);
    if (s) {
        CHECK(sc_st_set_n_files(s) == 2);
        CHECK(sc_st_set_count(s) == 4);
        const sc_st_tensor *t0 = sc_st_set_find(s, "t0"), *t3 = sc_st_set_find(s, "t3");
        CHECK(t0 && strcmp(t0->file, s1) == 0 && sc_lef32(t0->data) == 10.0f);
        CHECK(t3 && strcmp(t3->file, s2) == 0 && sc_bf16_to_f32(sc_le16(t3->data)) == 22.0f);
        CHECK(sc_st_set_find(s, "t4") == NULL);
        for (size_t i = 0; i < sc_st_set_count(s); i++) CHECK(sc_st_set_get(s, i) != NULL);
        CHECK(sc_st_set_get(s, 4) == NULL);
        /* detaching keeps data valid after the set is gone */
        sc_file_map maps[2];
        size_t nm = 0;
        for (size_t i = 0; i < sc_st_set_n_files(s); i++)
            if (sc_st_detach_map(sc_st_set_file(s, i), &maps[nm])) nm++;
        CHECK(nm == 2);
        CHECK(!sc_st_detach_map(sc_st_set_file(s, 0), &maps[0]));
        const uint8_t *d = t0->data;
        sc_st_set_free(s);
        CHECK(sc_lef32(d + 4) == 11.0f);
        for (size_t i = 0; i < nm; i++) sc_unmap_file(&maps[i]);
    }

    write_index(idx, "{\"weight_map\": {\"t0\": \"../m-1.safetensors\"}}");
    expect_bad_set(idx, idx, "shard ../");
    write_index(idx, "{\"weight_map\": {\"t0\": \"..\"}}");
    expect_bad_set(idx, idx, "shard ..");
    write_index(idx, "{\"weight_map\": {\"t0\": \"/etc/passwd\"}}");
    expect_bad_set(idx, idx, "absolute shard");
    write_index(idx, "{\"weight_map\": {\"t0\": \"sub/m-1.safetensors\"}}");
    expect_bad_set(idx, idx, "shard in subdir");
    write_index(idx, "{\"weight_map\": {\"t0\": \"\"}}");
    expect_bad_set(idx, idx, "empty shard name");
    write_index(idx, "{\"weight_map\": {\"t0\": \"m-9.safetensors\"}}");
    expect_bad_set(idx, "m-9.safetensors", "missing shard");
    write_index(idx, "{\"weight_map\": {\"t0\": \"m-2.safetensors\"}}");
    expect_bad_set(idx, idx, "tensor not in its shard");
    write_index(idx, "{\"weight_map\": [\"m-1.safetensors\"]}");
    expect_bad_set(idx, idx, "weight_map not an object");
    write_index(idx, "{\"weight_map\": {\"t0\": 3}}");
    expect_bad_set(idx, idx, "weight_map value not a string");
    write_index(idx, "{\"metadata\": {}}");
    expect_bad_set(idx, idx, "weight_map missing");
    write_index(idx, "{\"weight_map\": {}}");
    expect_bad_set(idx, idx, "weight_map empty");
    write_index(idx, "[]");
    expect_bad_set(idx, idx, "index not an object");
    write_index(idx, "{\"weight_map\": {\"t0\": \"m-1.safetensors\"");
    expect_bad_set(idx, idx, "index invalid JSON");
    write_index(idx, "{\"weight_map\": {\"t0\": \"m-1.safetensors\", \"t0\": \"m-1.safetensors\"}}");
    expect_bad_set(idx, idx, "tensor mapped twice");
    /* a hostile shard behind a valid index is reported with the shard's name */
    CHECK(write_st(s2, "[]", NULL, 0));
    write_index(idx, "{\"weight_map\": {\"t0\": \"m-1.safetensors\", \"t2\": \"m-2.safetensors\"}}");
    expect_bad_set(idx, s2, "hostile shard");
}

int main(void) {
    test_round_trip();
    test_rounding();
    test_writer_errors();
    test_truncated();
    test_bad_lengths();
    test_bad_headers();
    test_mutations();
    test_sets();
    printf("hostile cases: %d\n", n_hostile);
    return sc_test_finish();
}
