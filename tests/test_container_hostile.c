/* test_container_hostile.c - every corrupt, truncated or hostile container
 * is rejected cleanly (one line naming the file and the field), never a crash
 * or a read outside the buffer (run it under ASan). Files are built here by an
 * encoder written from docs/CONTAINER.md, independent of the library's (it is
 * first checked to match the writer byte for byte), then broken: truncation at
 * every length, a flip of every byte, each header and table field set to
 * absurd values (checksums recomputed so the field check itself is hit),
 * overlaps, gaps, misalignment, duplicate names, bad JSON manifests, zstd
 * bombs and lying frames, the wrong kind, and resealed random mutations. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "srt_container.h"
#include "testing.h"

/* header and entry field offsets, from docs/CONTAINER.md */
enum { H_MAGIC = 0, H_VMAJ = 8, H_VMIN = 10, H_HSIZE = 12, H_FLAGS = 16, H_FSIZE = 24, H_MOFF = 32, H_MSIZE = 40,
       H_MSUM = 48, H_TOFF = 56, H_COUNT = 64, H_ESIZE = 68, H_TSUM = 72, H_RES = 80, H_HSUM = 120 };
enum { E_NAME = 0, E_DTYPE = 128, E_COMP = 129, E_NDIM = 130, E_RES0 = 131, E_RES1 = 132, E_DIMS = 136, E_OFF = 200,
       E_STORED = 208, E_RAW = 216, E_SUM = 224, E_RES2 = 232 };

static void put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t al(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

typedef struct tsec {
    const char *name;
    uint8_t dtype, comp, ndim;
    uint64_t dims[8];
    const void *stored;
    uint64_t stored_size, raw_size;
} tsec;

static const char *NAME = "hostile.spk";

static uint8_t *build(const char *magic, const tsec *s, size_t n, const char *man, size_t mlen, size_t *len) {
    uint64_t off = 128, offs[256];
    for (size_t i = 0; i < n; i++) {
        offs[i] = al(off);
        off = offs[i] + s[i].stored_size;
    }
    uint64_t toff = al(off), moff = al(toff + 256 * n), total = moff + mlen;
    uint8_t *b = calloc(1, (size_t)total);
    memcpy(b, magic, 8);
    put(b + H_VMAJ, 1, 2);
    put(b + H_HSIZE, 128, 4);
    put(b + H_FSIZE, total, 8);
    put(b + H_MOFF, moff, 8);
    put(b + H_MSIZE, mlen, 8);
    put(b + H_MSUM, srt_ct_checksum(man, mlen), 8);
    put(b + H_TOFF, toff, 8);
    put(b + H_COUNT, n, 4);
    put(b + H_ESIZE, 256, 4);
    for (size_t i = 0; i < n; i++) {
        uint8_t *e = b + toff + 256 * i;
        memcpy(e, s[i].name, strlen(s[i].name));
        e[E_DTYPE] = s[i].dtype;
        e[E_COMP] = s[i].comp;
        e[E_NDIM] = s[i].ndim;
        for (int d = 0; d < 8; d++) put(e + E_DIMS + 8 * d, s[i].dims[d], 8);
        put(e + E_OFF, offs[i], 8);
        put(e + E_STORED, s[i].stored_size, 8);
        put(e + E_RAW, s[i].raw_size, 8);
        put(e + E_SUM, srt_ct_checksum(s[i].stored, s[i].stored_size), 8);
        if (s[i].stored_size) memcpy(b + offs[i], s[i].stored, s[i].stored_size);
    }
    put(b + H_TSUM, srt_ct_checksum(b + toff, 256 * n), 8);
    memcpy(b + moff, man, mlen);
    put(b + H_HSUM, srt_ct_checksum(b, 120), 8);
    *len = (size_t)total;
    return b;
}

static void reseal_header(uint8_t *b) { put(b + H_HSUM, srt_ct_checksum(b, 120), 8); }

/* Recomputes the table checksum (table where the header says) and the header's. */
static void reseal_table(uint8_t *b, size_t len) {
    uint64_t toff = get(b + H_TOFF, 8), n = get(b + H_COUNT, 4);
    if (toff <= len && n * 256 <= len - toff) put(b + H_TSUM, srt_ct_checksum(b + toff, (size_t)(256 * n)), 8);
    reseal_header(b);
}

static uint8_t *entry(uint8_t *b, size_t i) { return b + get(b + H_TOFF, 8) + 256 * i; }

static srt_container *try_open(const uint8_t *b, size_t len, char *err, srt_ct_status *st) {
    srt_container *c = NULL;
    *st = srt_container_open_memory(b, len, NAME, SRT_CT_ANY, &c, err, 768);
    return c;
}

static int n_rejected = 0;

static void expect_reject(const uint8_t *b, size_t len, const char *must, const char *what) {
    char err[768] = "";
    srt_ct_status st;
    srt_container *c = try_open(b, len, err, &st);
    CHECK_MSG(st != SRT_CT_OK && c == NULL, "%s: accepted", what);
    CHECK_MSG(strncmp(err, NAME, strlen(NAME)) == 0 && !strchr(err, '\n'), "%s: message '%s'", what, err);
    CHECK_MSG(!must || strstr(err, must), "%s: message '%s' lacks '%s'", what, err, must);
    srt_container_close(c);
    n_rejected++;
}

/* Opens (must succeed) and reads every section; returns how many failed. */
static size_t read_all(const uint8_t *b, size_t len, const char *what) {
    char err[768];
    srt_ct_status st;
    srt_container *c = try_open(b, len, err, &st);
    CHECK_MSG(c != NULL, "%s: rejected: %s", what, err);
    if (!c) return 0;
    size_t bad = 0;
    for (size_t i = 0; i < srt_container_section_count(c); i++) {
        const void *p;
        uint64_t sz;
        if (srt_container_data(c, i, &p, &sz) != SRT_CT_OK) bad++;
        else CHECK(sz == srt_container_section_at(c, i)->raw_size);
    }
    srt_container_close(c);
    return bad;
}

/* ---- the sample file ---- */

static float fvals[40]; /* 160 bytes: section 0 ends off the 64-byte grid, so padding follows */
static uint8_t zframe[4096];
static size_t zframe_len;
static uint8_t zsrc[100000];
static const char *man = "{\"model\":{\"family\":\"llama\",\"hash\":\"ab12\"},\"tokens\":4096,\"opts\":[1,2.5,null]}";

static uint8_t *sample(size_t *len) {
    tsec s[3] = {
        {.name = "layer0.claws.num", .dtype = SRT_CT_F32, .ndim = 2, .dims = {5, 8}, .stored = fvals,
         .stored_size = sizeof fvals, .raw_size = sizeof fvals},
        {.name = "layer0.smooth", .dtype = SRT_CT_U8, .comp = SRT_CT_ZSTD, .ndim = 1, .dims = {sizeof zsrc},
         .stored = zframe, .stored_size = zframe_len, .raw_size = sizeof zsrc},
        {.name = "empty", .dtype = SRT_CT_I64, .ndim = 1, .dims = {0}, .stored = "", .stored_size = 0},
    };
    return build("SPARSPAK", s, 3, man, strlen(man), len);
}

static void setup(void) {
    for (int i = 0; i < 40; i++) fvals[i] = (float)i * 0.5f - 3.0f;
    for (size_t i = 0; i < sizeof zsrc; i++) zsrc[i] = (uint8_t)((i / 13) % 7);
    zframe_len = ZSTD_compress(zframe, sizeof zframe, zsrc, sizeof zsrc, 3);
    CHECK(!ZSTD_isError(zframe_len) && zframe_len < sizeof zframe);
}

/* The writer and this encoder agree byte for byte (raw sections). */
static void test_encoder_matches_writer(void) {
    const char *path = sc_tmp_path("agree.spk");
    srt_writer *w = NULL;
    char err[768];
    CHECK(srt_writer_create(path, SRT_CT_SPAK, &w, err, sizeof err) == SRT_CT_OK);
    if (!w) return;
    uint64_t d1[2] = {5, 8}, d3[1] = {0};
    CHECK(srt_writer_set_manifest(w, man, strlen(man)) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "layer0.claws.num", SRT_CT_F32, 2, d1, fvals, sizeof fvals, 0) == SRT_CT_OK);
    CHECK(srt_writer_add(w, "empty", SRT_CT_I64, 1, d3, NULL, 0, 0) == SRT_CT_OK);
    CHECK(srt_writer_finish(w) == SRT_CT_OK);
    srt_writer_free(w);
    tsec s[2] = {
        {.name = "layer0.claws.num", .dtype = SRT_CT_F32, .ndim = 2, .dims = {5, 8}, .stored = fvals,
         .stored_size = sizeof fvals, .raw_size = sizeof fvals},
        {.name = "empty", .dtype = SRT_CT_I64, .ndim = 1, .dims = {0}, .stored = "", .stored_size = 0},
    };
    size_t len;
    uint8_t *b = build("SPARSPAK", s, 2, man, strlen(man), &len);
    FILE *f = fopen(path, "rb");
    uint8_t *x = malloc(len + 1);
    size_t got = f ? fread(x, 1, len + 1, f) : 0;
    if (f) fclose(f);
    CHECK_MSG(got == len && memcmp(x, b, len) == 0, "writer output (%zu bytes) differs from docs/CONTAINER.md (%zu)",
              got, len);
    free(x);
    free(b);
}

static void test_truncation_and_flips(void) {
    size_t len;
    uint8_t *b = sample(&len);
    CHECK(read_all(b, len, "sample") == 0);
    char err[768];
    srt_ct_status st;
    srt_container *c = try_open(b, len, err, &st);
    CHECK(c && srt_container_verify_all(c) == SRT_CT_OK);
    srt_container_close(c);
    for (size_t n = 0; n < len; n++) { /* every truncation; malloc'd exactly so ASan sees any overread */
        uint8_t *t = malloc(n ? n : 1);
        memcpy(t, b, n);
        expect_reject(t, n, NULL, "truncated");
        free(t);
    }
    /* flip every byte (a different bit each time), and every bit of the header
     * and table: each must be caught by open or by verify; no byte is unchecked */
    size_t toff = (size_t)get(b + H_TOFF, 8), missed = 0, at_open = 0, n_flips = 0;
    for (size_t i = 0; i < len; i++) {
        int bits = (i < 128 || (i >= toff && i < toff + 3 * 256)) ? 8 : 1;
        for (int k = 0; k < bits; k++) {
            uint8_t mask = (uint8_t)(1u << ((bits == 8 ? k : (int)i) % 8));
            b[i] ^= mask;
            n_flips++;
            c = try_open(b, len, err, &st);
            if (!c) {
                at_open++;
                CHECK_MSG(strncmp(err, NAME, strlen(NAME)) == 0 && !strchr(err, '\n'), "flip %zu: '%s'", i, err);
            } else {
                for (size_t s = 0; s < srt_container_section_count(c); s++) {
                    const void *p;
                    (void)srt_container_data(c, s, &p, NULL); /* must not crash */
                }
                if (srt_container_verify_all(c) == SRT_CT_OK) {
                    missed++;
                    fprintf(stderr, "flip of byte %zu (mask %02x) went unnoticed\n", i, mask);
                }
                srt_container_close(c);
            }
            b[i] ^= mask;
        }
    }
    printf("flips: %zu caught at open, %zu by verify, %zu missed (file of %zu bytes)\n", at_open,
           n_flips - at_open - missed, missed, len);
    CHECK(missed == 0);
    free(b);
}

typedef struct field_case {
    int off, width;
    uint64_t value;
    const char *must; /* NULL: must be accepted */
} field_case;

static void test_header_fields(void) {
    size_t len;
    uint8_t *b = sample(&len);
    uint64_t toff = get(b + H_TOFF, 8), moff = get(b + H_MOFF, 8);
    const field_case cases[] = {
        {H_VMAJ, 2, 2, "format version 2.0"}, {H_VMAJ, 2, 0, "format version 0.0"}, {H_VMIN, 2, 7, NULL},
        {H_HSIZE, 4, 0, "header_size"}, {H_HSIZE, 4, 127, "header_size"}, {H_HSIZE, 4, UINT32_MAX, "header_size"},
        {H_FLAGS, 8, 1, "flags"}, {H_FLAGS, 8, 1ull << 31, "flags"}, {H_FLAGS, 8, 1ull << 40, NULL},
        {H_FSIZE, 8, 0, "file_size"}, {H_FSIZE, 8, len - 1, "file_size"}, {H_FSIZE, 8, len + 1, "file_size"},
        {H_FSIZE, 8, UINT64_MAX, "file_size"}, {H_MOFF, 8, 0, "overlaps"}, {H_MOFF, 8, moff - 1, "not 64-byte aligned"},
        {H_MOFF, 8, moff + 64, "outside"}, {H_MOFF, 8, UINT64_MAX - 63, "outside"}, {H_MOFF, 8, moff - 64, "overlaps"},
        {H_MSIZE, 8, 0, "manifest ends at"}, {H_MSIZE, 8, UINT64_MAX, "limit"}, {H_MSIZE, 8, 17u << 20, "limit"},
        {H_MSIZE, 8, 1, "manifest ends at"}, {H_MSUM, 8, 12345, "manifest: checksum mismatch"},
        {H_TOFF, 8, 0, "outside"}, {H_TOFF, 8, 64, "outside"}, {H_TOFF, 8, toff + 8, "not 64-byte aligned"},
        {H_TOFF, 8, toff + 64, "overlaps the section table"}, {H_TOFF, 8, UINT64_MAX - 63, "outside"}, {H_TOFF, 8, toff - 64, "table"},
        {H_COUNT, 4, 0, "leaves a gap after the section table"}, {H_COUNT, 4, 4, "outside"}, {H_COUNT, 4, UINT32_MAX, "limit"},
        {H_COUNT, 4, (1u << 24) + 1, "limit"}, {H_ESIZE, 4, 128, "entry_size"}, {H_ESIZE, 4, 0, "entry_size"},
        {H_TSUM, 8, 0, "section table: checksum mismatch"}, {H_RES, 1, 1, "reserved"}, {H_RES + 39, 1, 0x80, "reserved"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const field_case *f = &cases[i];
        uint8_t *t = malloc(len);
        memcpy(t, b, len);
        put(t + f->off, f->value, f->width);
        reseal_header(t);
        char what[64];
        snprintf(what, sizeof what, "header field @%d = %llu", f->off, (unsigned long long)f->value);
        if (f->must) expect_reject(t, len, f->must, what);
        else CHECK_MSG(read_all(t, len, what) == 0, "%s", what);
        free(t);
    }
    /* unknown versions are EUNSUPPORTED, not format errors */
    put(b + H_VMAJ, 3, 2);
    reseal_header(b);
    char err[768];
    srt_ct_status st;
    CHECK(try_open(b, len, err, &st) == NULL && st == SRT_CT_EUNSUPPORTED);
    put(b + H_VMAJ, 1, 2);
    put(b + H_HSUM, 0, 8);
    expect_reject(b, len, "header: checksum mismatch", "header checksum");
    memcpy(b, "SPARSXYZ", 8);
    reseal_header(b);
    expect_reject(b, len, "not a sparsecal container (magic \"SPARSXYZ\"", "magic");
    memcpy(b, "GGUF\x03\x00\x00\x00", 8);
    expect_reject(b, len, "magic \"GGUF\\x03\\x00", "gguf magic");
    free(b);
}

static void test_entry_fields(void) {
    size_t len;
    uint8_t *b = sample(&len);
    const field_case cases[] = {
        {E_DTYPE, 1, 13, "dtype 13 is unknown"}, {E_DTYPE, 1, 255, "dtype 255"}, {E_DTYPE, 1, SRT_CT_F64, "raw_size"},
        {E_COMP, 1, 2, "compression 2"}, {E_COMP, 1, 1, "not a zstd frame"}, {E_NDIM, 1, 9, "ndim 9"},
        {E_NDIM, 1, 255, "ndim 255"}, {E_NDIM, 1, 1, "beyond ndim"}, {E_NDIM, 1, 3, "raw_size"},
        {E_DIMS + 8 * 5, 8, 1, "dims[5]"}, {E_DIMS, 8, 7, "raw_size 160 but f32 x shape [7, 8] is 224"},
        {E_DIMS, 8, 1ull << 62, "overflows"}, {E_RAW, 8, 196, "raw_size"}, {E_RAW, 8, UINT64_MAX, "raw_size"},
        {E_OFF, 8, 129, "not 64-byte aligned"}, {E_OFF, 8, 64, "overlaps the header"}, {E_OFF, 8, 0, "overlaps the header"},
        {E_OFF, 8, 192, "gap"}, {E_OFF, 8, UINT64_MAX - 63, "extends past"}, {E_STORED, 8, UINT64_MAX, "extends past"},
        {E_STORED, 8, 200, "differs from raw_size"}, {E_RES0, 1, 1, "reserved"}, {E_RES1, 4, 1, "reserved"},
        {E_RES2 + 23, 1, 1, "reserved"}, {E_NAME, 1, 0, "name is empty"}, {E_NAME, 1, ' ', "byte 0x20"},
        {E_NAME + 3, 1, 0x01, "byte 0x01"}, {E_NAME + 3, 1, 0xff, "byte 0xff"}, {E_NAME + 100, 1, 'x', "padding"},
        {E_NAME + 16, 1, 'x', NULL /* 'layer0.claws.numx' is a fine name */}, {E_SUM, 8, 1, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const field_case *f = &cases[i];
        uint8_t *t = malloc(len);
        memcpy(t, b, len);
        put(entry(t, 0) + f->off, f->value, f->width);
        reseal_table(t, len);
        char what[64];
        snprintf(what, sizeof what, "entry field @%d = %llu", f->off, (unsigned long long)f->value);
        if (f->must) expect_reject(t, len, f->must, what);
        else CHECK_MSG(read_all(t, len, what) == (f->off == E_SUM ? 1u : 0u), "%s", what);
        free(t);
    }
    uint8_t *t = malloc(len);
    memcpy(t, b, len);
    memset(entry(t, 0), 'a', 128); /* no NUL */
    reseal_table(t, len);
    expect_reject(t, len, "section #0: name is not NUL-terminated", "unterminated name");
    /* layout: the second section moved onto the first, or past a gap */
    memcpy(t, b, len);
    put(entry(t, 1) + E_OFF, 128, 8);
    reseal_table(t, len);
    expect_reject(t, len, "section 'layer0.smooth': offset 128 overlaps section 'layer0.claws.num'", "overlap");
    memcpy(t, b, len);
    put(entry(t, 2) + E_OFF, get(entry(t, 2) + E_OFF, 8) - 64, 8);
    reseal_table(t, len);
    expect_reject(t, len, "overlaps section 'layer0.smooth'", "overlap 2");
    /* nonzero padding between sections */
    memcpy(t, b, len);
    t[128 + sizeof fvals] = 1;
    expect_reject(t, len, "section 'layer0.smooth': the 32 padding bytes before it are not zero", "padding");
    /* zstd section's checksum wrong: open is fine, access and verify fail */
    memcpy(t, b, len);
    put(entry(t, 1) + E_SUM, 7, 8);
    reseal_table(t, len);
    char err[768];
    srt_ct_status st;
    srt_container *c = try_open(t, len, err, &st);
    const void *p = (const void *)1;
    CHECK(c && srt_container_get(c, "layer0.smooth", &p, NULL) == SRT_CT_EFORMAT && p == NULL);
    CHECK(c && strstr(srt_container_errmsg(c), "hostile.spk: section 'layer0.smooth': checksum mismatch"));
    CHECK(c && srt_container_verify_all(c) == SRT_CT_EFORMAT);
    srt_container_close(c);
    free(t);
    free(b);
}

static void test_names_and_kinds(void) {
    tsec s[100];
    char names[100][32];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof names[i], "n%03d", (i * 37) % 100);
        s[i] = (tsec){.name = names[i], .dtype = SRT_CT_U8, .ndim = 1, .dims = {1}, .stored = "x", .stored_size = 1,
                      .raw_size = 1};
    }
    size_t len;
    uint8_t *b = build("SPARSCAL", s, 100, "{}", 2, &len);
    CHECK(read_all(b, len, "100 names") == 0);
    free(b);
    s[77].name = names[12];
    b = build("SPARSCAL", s, 100, "{}", 2, &len);
    expect_reject(b, len, "name appears twice (sections #12 and #77)", "duplicate");
    free(b);
    /* wrong kind */
    b = build("SPARSCAL", s, 1, "{}", 2, &len);
    srt_container *c = NULL;
    char err[768];
    CHECK(srt_container_open_memory(b, len, NAME, SRT_CT_SPAK, &c, err, sizeof err) == SRT_CT_EFORMAT && !c);
    CHECK(strstr(err, "is a calibration file (SPARSCAL), expected an artifact file (SPARSPAK)") != NULL);
    CHECK(srt_container_open_memory(b, len, NAME, SRT_CT_SCAL, &c, err, sizeof err) == SRT_CT_OK && c);
    srt_container_close(c);
    memcpy(b, "SPARSPAK", 8);
    reseal_header(b);
    CHECK(srt_container_open_memory(b, len, NAME, SRT_CT_SCAL, &c, err, sizeof err) == SRT_CT_EFORMAT &&
          strstr(err, "is an artifact file (SPARSPAK), expected a calibration file"));
    CHECK(srt_container_open_memory(b, len, NAME, (srt_ct_kind)7, &c, err, sizeof err) == SRT_CT_EARG);
    free(b);
    /* files: missing, a directory, empty, short */
    CHECK(srt_container_open("/nonexistent/x.scal", SRT_CT_ANY, &c, err, sizeof err) == SRT_CT_EIO &&
          strstr(err, "/nonexistent/x.scal: cannot open"));
    CHECK(srt_container_open(sc_test_tmpdir(), SRT_CT_ANY, &c, err, sizeof err) == SRT_CT_EIO);
    const char *empty = sc_tmp_path("empty.scal");
    sc_write_bytes(empty, "", 0);
    CHECK(srt_container_open(empty, SRT_CT_ANY, &c, err, sizeof err) == SRT_CT_EFORMAT && strstr(err, "0 bytes"));
    sc_write_bytes(empty, "SPARSCAL", 8);
    CHECK(srt_container_open(empty, SRT_CT_ANY, &c, err, sizeof err) == SRT_CT_EFORMAT && strstr(err, "truncated"));
}

static void test_manifests(void) {
    char deep[512];
    size_t n = 0;
    deep[n++] = '{';
    deep[n++] = '"';
    deep[n++] = 'a';
    deep[n++] = '"';
    deep[n++] = ':';
    for (int i = 0; i < 100; i++) deep[n++] = '[';
    for (int i = 0; i < 100; i++) deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = '\0';
    char longnum[1200] = "{\"n\":";
    memset(longnum + 5, '7', 1000);
    strcpy(longnum + 1005, "}");
    const struct {
        const char *text;
        size_t len;
        const char *must;
    } cases[] = {
        {deep, 0, "nesting deeper than 64"}, {"{\"s\":\"\\ud800\"}", 0, "surrogate"},
        {"{\"s\":\"\\udc00\\ud800\"}", 0, "lone low surrogate"}, {"{\"s\":\"\\u12G4\"}", 0, "hex digits"},
        {"{\"s\":\"\xed\xa0\x80\"}", 0, "invalid UTF-8"}, {"{\"s\":\"\xc0\x80\"}", 0, "invalid UTF-8"},
        {"{\"n\":1e999}", 0, "out of range"}, {"{\"n\":-1e999}", 0, "out of range"}, {longnum, 0, "number literal"},
        {"[1]", 0, "top-level value is an array"}, {"\"x\"", 0, "a string"}, {"", 0, "end of input"},
        {"{} x", 0, "end of input"}, {"{\"a\":1,\"a\":1}", 0, "duplicate"}, {"{\"a\":1}\0", 9, "end of input"},
        {"{\"a\"\0:1}", 8, "':'"}, {"{\"a\":01}", 0, "leading zero"}, {"{\"a\":\"\x01\"}", 0, "control character"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t mlen = cases[i].len ? cases[i].len : strlen(cases[i].text), len;
        uint8_t *b = build("SPARSPAK", NULL, 0, cases[i].text, mlen, &len);
        char what[64];
        snprintf(what, sizeof what, "manifest #%zu", i);
        expect_reject(b, len, cases[i].must, what);
        free(b);
    }
    size_t len;
    uint8_t *b = build("SPARSPAK", NULL, 0, "{\"n\":9223372036854775807,\"big\":1e308}", 37, &len);
    char err[768];
    srt_ct_status st;
    srt_container *c = try_open(b, len, err, &st);
    CHECK_MSG(c && srt_json_int(srt_json_get(srt_container_manifest(c), "n"), 0) == INT64_MAX, "%s", err);
    srt_container_close(c);
    free(b);
}

/* Rewrites the frame content size field of a zstd frame in place (same field width). */
static bool set_fcs(uint8_t *f, uint64_t v) {
    uint8_t fhd = f[4];
    int fcs_flag = fhd >> 6, single = (fhd >> 5) & 1, did_flag = fhd & 3;
    int did_size[4] = {0, 1, 2, 4}, fcs_size[4] = {single ? 1 : 0, 2, 4, 8};
    int at = 5 + !single + did_size[did_flag], w = fcs_size[fcs_flag];
    if (w == 0) return false;
    if (w == 2) v -= 256;
    put(f + at, v, w);
    return true;
}

static void test_zstd(void) {
    const uint64_t raw = sizeof zsrc;
    uint8_t frame[8192], two[8192];
    CHECK(zframe_len + 32 < sizeof frame);
    struct zcase {
        const char *what;
        uint64_t declared;   /* raw_size and frame content size */
        int patch;           /* 0 none, 1 rewrite the content size */
        size_t stored;       /* bytes stored (0: the frame) */
        const char *at_open; /* expected open error, or NULL if open succeeds */
    } cases[] = {
        {"honest", raw, 0, 0, NULL},
        {"frame expands past its declared size", 1000, 1, 0, NULL},
        {"frame lies: content shorter than declared", 2 * raw, 1, 0, NULL},
        {"ratio bomb", 0xFFFFFFF0ull, 1, 0, "decompression bomb"},
        {"truncated frame", raw, 0, zframe_len - 5, "invalid or truncated"},
        {"trailing bytes", raw, 0, zframe_len + 3, "the section stores"},
        {"two frames", raw, 0, 2 * zframe_len, "the section stores"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct zcase *z = &cases[i];
        memcpy(frame, zframe, zframe_len);
        memcpy(two, zframe, zframe_len);
        memcpy(two + zframe_len, zframe, zframe_len);
        memset(frame + zframe_len, 0xAB, 16);
        if (z->patch) CHECK(set_fcs(frame, z->declared));
        tsec s = {.name = "bomb", .dtype = SRT_CT_U8, .comp = SRT_CT_ZSTD, .ndim = 1, .dims = {z->declared},
                  .stored = i == 6 ? two : frame, .stored_size = z->stored ? z->stored : zframe_len,
                  .raw_size = z->declared};
        size_t len;
        uint8_t *b = build("SPARSPAK", &s, 1, "{}", 2, &len);
        char err0[768];
        srt_ct_status st0;
        srt_container *c0 = z->patch && !z->at_open ? try_open(b, len, err0, &st0) : NULL;
        bool rejected_early = z->patch && !z->at_open && !c0;
        srt_container_close(c0);
        if (z->patch) printf("zstd '%s': %s\n", z->what, rejected_early ? err0 : z->at_open ? "rejected at open" : "opened; access and verify must fail");
        if (z->at_open || rejected_early) {
            expect_reject(b, len, z->at_open, z->what);
        } else {
            char err[768];
            srt_ct_status st;
            srt_container *c = try_open(b, len, err, &st);
            CHECK_MSG(c != NULL, "%s: %s", z->what, err);
            const void *p = NULL;
            uint64_t sz = 0;
            srt_ct_status ds = c ? srt_container_get(c, "bomb", &p, &sz) : SRT_CT_EFORMAT;
            srt_ct_status vs = c ? srt_container_verify_all(c) : SRT_CT_EFORMAT;
            if (i == 0) CHECK(ds == SRT_CT_OK && vs == SRT_CT_OK && sz == raw && memcmp(p, zsrc, raw) == 0);
            else CHECK_MSG(ds == SRT_CT_EFORMAT && vs == SRT_CT_EFORMAT && p == NULL, "%s: data %d verify %d", z->what,
                           (int)ds, (int)vs);
            if (c && i) CHECK(strstr(srt_container_errmsg(c), "section 'bomb'") != NULL);
            srt_container_close(c);
        }
        free(b);
    }
    /* no content size in the frame; a skippable frame; an empty frame */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
    uint8_t nocs[8192];
    ZSTD_inBuffer in = {zsrc, sizeof zsrc, 0};
    ZSTD_outBuffer o = {nocs, sizeof nocs, 0};
    CHECK(ZSTD_compressStream2(cc, &o, &in, ZSTD_e_end) == 0); /* streamed: size unknown */
    ZSTD_freeCCtx(cc);
    uint8_t skip[16] = {0x50, 0x2A, 0x4D, 0x18, 8, 0, 0, 0};
    uint8_t empty[32];
    size_t elen = ZSTD_compress(empty, sizeof empty, "", 0, 3);
    const tsec more[] = {
        {.name = "nocs", .dtype = SRT_CT_U8, .comp = 1, .ndim = 1, .dims = {raw}, .stored = nocs, .stored_size = o.pos,
         .raw_size = raw},
        {.name = "skip", .dtype = SRT_CT_U8, .comp = 1, .ndim = 1, .dims = {0}, .stored = skip, .stored_size = 16},
        {.name = "short", .dtype = SRT_CT_U8, .comp = 1, .ndim = 1, .dims = {0}, .stored = skip, .stored_size = 3},
    };
    const char *musts[] = {"does not declare its content size", "not a zstd frame", "not a zstd frame"};
    for (size_t i = 0; i < 3; i++) {
        size_t len;
        uint8_t *b = build("SPARSPAK", &more[i], 1, "{}", 2, &len);
        expect_reject(b, len, musts[i], more[i].name);
        free(b);
    }
    tsec e = {.name = "empty.z", .dtype = SRT_CT_F32, .comp = 1, .ndim = 2, .dims = {0, 5}, .stored = empty,
              .stored_size = elen};
    size_t len;
    uint8_t *b = build("SPARSPAK", &e, 1, "{}", 2, &len);
    CHECK(read_all(b, len, "empty zstd frame") == 0);
    free(b);
    /* a genuine high-ratio section (64 MiB of zeros, ~32000:1) is accepted */
    size_t big = 64u << 20;
    uint8_t *zeros = calloc(1, big), *zb = malloc(ZSTD_compressBound(big));
    size_t zl = ZSTD_compress(zb, ZSTD_compressBound(big), zeros, big, 3);
    tsec g = {.name = "zeros", .dtype = SRT_CT_F32, .comp = 1, .ndim = 1, .dims = {big / 4}, .stored = zb,
              .stored_size = zl, .raw_size = big};
    b = build("SPARSPAK", &g, 1, "{}", 2, &len);
    printf("64 MiB of zeros: %zu bytes stored (%.0f:1)\n", zl, (double)big / (double)zl);
    CHECK(read_all(b, len, "zeros") == 0);
    free(b);
    free(zb);
    free(zeros);
}

/* Random byte changes in the header fields and the table, resealed so they
 * reach the deeper checks: never a crash, every outcome clean. */
static void test_resealed_mutations(void) {
    size_t len;
    uint8_t *b = sample(&len), *t = malloc(len);
    uint64_t toff = get(b + H_TOFF, 8), r = 0x2545f4914f6cdd1dull;
    int accepted = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(t, b, len);
        int k = 1 + iter % 4;
        for (int m = 0; m < k; m++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            size_t at = (r & 1) ? (size_t)((r >> 8) % 120) : (size_t)(toff + (r >> 8) % (3 * 256));
            uint8_t v = (r >> 40) & 1 ? (uint8_t)(r >> 48) : (uint8_t)(t[at] ^ (1u << ((r >> 48) % 8)));
            t[at] = v;
        }
        reseal_table(t, len);
        char err[768];
        srt_ct_status st;
        srt_container *c = try_open(t, len, err, &st);
        if (!c) {
            CHECK_MSG(strncmp(err, NAME, strlen(NAME)) == 0 && !strchr(err, '\n'), "mutation %d: '%s'", iter, err);
            continue;
        }
        accepted++;
        for (size_t s = 0; s < srt_container_section_count(c); s++) {
            const void *p;
            uint64_t sz;
            if (srt_container_data(c, s, &p, &sz) == SRT_CT_OK) CHECK(sz == srt_container_section_at(c, s)->raw_size);
        }
        (void)srt_container_verify_all(c);
        srt_container_close(c);
    }
    printf("resealed mutations: %d of 20000 still valid files\n", accepted);
    free(t);
    free(b);
}

int main(void) {
    setup();
    test_encoder_matches_writer();
    test_truncation_and_flips();
    test_header_fields();
    test_entry_fields();
    test_names_and_kinds();
    test_manifests();
    test_zstd();
    test_resealed_mutations();
    printf("%d hostile files rejected\n", n_rejected);
    return sc_test_finish();
}
