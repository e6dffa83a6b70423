/* torch_pt.c - see torch_pt.h. The whole archive is built in memory (these
 * files hold histograms: tens of thousands of values), then written at once. */
#include "torch_pt.h"

#include <stdlib.h>
#include <string.h>

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const void *data, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void put8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put16(buf *b, uint16_t v) {
    uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(b, x, 2);
}
static void put32(buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, x, 4);
}

/* ---- pickle (protocol 2) ---- */

static void pk_str(buf *b, const char *s) { /* BINUNICODE */
    put8(b, 'X');
    put32(b, (uint32_t)strlen(s));
    put(b, s, strlen(s));
}
static void pk_global(buf *b, const char *module, const char *name) { /* GLOBAL */
    put8(b, 'c');
    put(b, module, strlen(module));
    put8(b, '\n');
    put(b, name, strlen(name));
    put8(b, '\n');
}
static void pk_int(buf *b, int64_t v) { /* BININT (n < 2^31 is checked by the caller) */
    put8(b, 'J');
    put32(b, (uint32_t)v);
}

/* _rebuild_tensor_v2(storage, 0, (n,), (1,), False, OrderedDict()) of storage `key` */
static void pk_tensor(buf *b, const char *key, int64_t n) {
    pk_global(b, "torch._utils", "_rebuild_tensor_v2");
    put8(b, '(');                       /* MARK: the arguments */
    put8(b, '(');                       /* MARK: the persistent id */
    pk_str(b, "storage");
    pk_global(b, "torch", "FloatStorage");
    pk_str(b, key);
    pk_str(b, "cpu");
    pk_int(b, n);
    put8(b, 't');                       /* TUPLE */
    put8(b, 'Q');                       /* BINPERSID */
    pk_int(b, 0);                       /* storage offset */
    pk_int(b, n);
    put8(b, 0x85);                      /* TUPLE1: size */
    pk_int(b, 1);
    put8(b, 0x85);                      /* TUPLE1: stride */
    put8(b, 0x89);                      /* NEWFALSE: requires_grad */
    pk_global(b, "collections", "OrderedDict");
    put8(b, ')');                       /* EMPTY_TUPLE */
    put8(b, 'R');                       /* REDUCE: backward hooks */
    put8(b, 't');                       /* TUPLE */
    put8(b, 'R');                       /* REDUCE */
}

/* ---- ZIP (stored entries) ---- */

static uint32_t crc32_of(const uint8_t *p, size_t n) { /* the ZIP (IEEE 802.3) CRC-32 */
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

typedef struct entry {
    char name[96];
    uint32_t crc, size, offset;
} entry;

/* A local header (with an "FB" extra field padding the data to 64 bytes, as torch writes it) and the data. */
static void zip_add(buf *z, entry *e, const char *name, const uint8_t *data, size_t n) {
    snprintf(e->name, sizeof e->name, "%s", name);
    e->crc = crc32_of(data, n);
    e->size = (uint32_t)n;
    e->offset = (uint32_t)z->n;
    size_t nl = strlen(name), pad = (64 - (z->n + 30 + nl + 4) % 64) % 64;
    put32(z, 0x04034b50);
    put16(z, 20); /* version needed: 2.0 */
    put16(z, 0);  /* flags */
    put16(z, 0);  /* stored */
    put16(z, 0);  /* time */
    put16(z, 0x21); /* date: 1980-01-01 */
    put32(z, e->crc);
    put32(z, e->size);
    put32(z, e->size);
    put16(z, (uint16_t)nl);
    put16(z, (uint16_t)(4 + pad));
    put(z, name, nl);
    put16(z, 0x4246); /* "FB" */
    put16(z, (uint16_t)pad);
    for (size_t i = 0; i < pad; i++) put8(z, 'Z');
    put(z, data, n);
}

static void zip_finish(buf *z, const entry *e, int n) {
    uint32_t cd = (uint32_t)z->n;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(e[i].name);
        put32(z, 0x02014b50);
        put16(z, 20); /* made by */
        put16(z, 20); /* needed */
        put16(z, 0);
        put16(z, 0);
        put16(z, 0);
        put16(z, 0x21);
        put32(z, e[i].crc);
        put32(z, e[i].size);
        put32(z, e[i].size);
        put16(z, (uint16_t)nl);
        put16(z, 0); /* extra */
        put16(z, 0); /* comment */
        put16(z, 0); /* disk */
        put16(z, 0); /* internal attributes */
        put32(z, 0); /* external attributes */
        put32(z, e[i].offset);
        put(z, e[i].name, nl);
    }
    uint32_t cd_size = (uint32_t)z->n - cd;
    put32(z, 0x06054b50);
    put16(z, 0);
    put16(z, 0);
    put16(z, (uint16_t)n);
    put16(z, (uint16_t)n);
    put32(z, cd_size);
    put32(z, cd);
    put16(z, 0);
}

sc_status sc_torch_save_f32(const char *path, const sc_pt_tensor *t, int count, sc_err *err) {
    uint64_t total = 0;
    if (count < 0 || count > 1000) return sc_errf(err, SC_EARG, "%s: %d tensors (at most 1000)", path, count);
    for (int i = 0; i < count; i++) {
        if (t[i].n < 0 || t[i].n > INT32_MAX / 4 || strlen(t[i].name) > 64)
            return sc_errf(err, SC_EARG, "%s: tensor '%.64s' does not fit this writer", path, t[i].name);
        total += (uint64_t)t[i].n * 4;
    }
    if (total > ((uint64_t)1 << 31)) return sc_errf(err, SC_EARG, "%s: %llu bytes of tensors (at most 2 GiB)", path,
                                                    (unsigned long long)total);
    buf pk = {0}, z = {0};
    put8(&pk, 0x80); /* PROTO 2 */
    put8(&pk, 2);
    put8(&pk, '}'); /* EMPTY_DICT */
    if (count) put8(&pk, '('); /* MARK */
    for (int i = 0; i < count; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", i);
        pk_str(&pk, t[i].name);
        pk_tensor(&pk, key, t[i].n);
    }
    if (count) put8(&pk, 'u'); /* SETITEMS */
    put8(&pk, '.');            /* STOP */
    entry *e = calloc((size_t)count + 2, sizeof *e);
    sc_status st = SC_OK;
    if (e && !pk.oom) {
        int ne = 0;
        zip_add(&z, &e[ne++], "archive/data.pkl", pk.p, pk.n);
        for (int i = 0; i < count; i++) {
            char name[32];
            snprintf(name, sizeof name, "archive/data/%d", i);
            /* little-endian host (checked at build): the floats' bytes as they are */
            zip_add(&z, &e[ne++], name, (const uint8_t *)t[i].data, (size_t)t[i].n * 4);
        }
        zip_add(&z, &e[ne++], "archive/version", (const uint8_t *)"3\n", 2);
        zip_finish(&z, e, ne);
    }
    if (!e || pk.oom || z.oom) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    } else {
        sc_atomic_file f;
        st = sc_atomic_open(&f, path, err);
        if (!st) {
            st = sc_atomic_write(&f, z.p, z.n, err);
            if (!st) st = sc_atomic_commit(&f, err);
            else sc_atomic_abort(&f);
        }
    }
    free(e);
    free(pk.p);
    free(z.p);
    return st;
}
