/* fuzz_common.c - see fuzz_common.h. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "srt_container.h"
#include "tokenizer.h"

const char *fz_path(const uint8_t *data, size_t n) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("sparsecal-fuzz", MFD_CLOEXEC);
        if (fd < 0) return NULL;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) return NULL;
    for (size_t off = 0; off < n;) {
        ssize_t w = pwrite(fd, data + off, n - off, (off_t)off);
        if (w <= 0) return NULL;
        off += (size_t)w;
    }
    return path;
}

/* header and entry field offsets (docs/CONTAINER.md) */
enum { H_MOFF = 32, H_MSIZE = 40, H_MSUM = 48, H_TOFF = 56, H_COUNT = 64, H_TSUM = 72, H_HSUM = 120 };
enum { E_OFF = 200, E_STORED = 208, E_SUM = 224, ENTRY = 256, HEADER = 128 };

static uint64_t get(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static void put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}
/* [off, off + len) inside [0, n) */
static int inside(uint64_t off, uint64_t len, size_t n) { return off <= n && len <= n - off; }

uint8_t *fz_resealed(const uint8_t *data, size_t n) {
    uint8_t *b = malloc(n ? n : 1);
    if (!b) return NULL;
    memcpy(b, data, n);
    if (n < HEADER) return b;
    uint64_t toff = get(b + H_TOFF, 8), count = get(b + H_COUNT, 4);
    if (count <= n / ENTRY && inside(toff, count * ENTRY, n)) {
        for (uint64_t i = 0; i < count; i++) {
            uint8_t *e = b + toff + ENTRY * i;
            uint64_t off = get(e + E_OFF, 8), stored = get(e + E_STORED, 8);
            if (inside(off, stored, n)) put(e + E_SUM, srt_ct_checksum(b + off, (size_t)stored), 8);
        }
        put(b + H_TSUM, srt_ct_checksum(b + toff, (size_t)(count * ENTRY)), 8);
    }
    uint64_t moff = get(b + H_MOFF, 8), msize = get(b + H_MSIZE, 8);
    if (inside(moff, msize, n)) put(b + H_MSUM, srt_ct_checksum(b + moff, (size_t)msize), 8);
    put(b + H_HSUM, srt_ct_checksum(b, 120), 8);
    return b;
}

void fz_exercise_tokenizer(const sc_tokenizer *t, const uint8_t *extra, size_t n) {
    static const char text[] = "Once upon a time, Lily saw a big dog.\n  Tabs\tand \xc3\xa9 \xe2\x96\x81 <s> </s> 123";
    sc_err err;
    for (int k = 0; k < 2; k++) {
        const char *s = k ? (const char *)extra : text;
        size_t len = k ? (n > 256 ? 256 : n) : sizeof text - 1;
        sc_tokens ids = {0};
        if (sc_tokenizer_encode(t, s, len, true, true, &ids, &err) == SC_OK) {
            char buf[512];
            int32_t prev = -1;
            for (size_t i = 0; i < ids.n; i++) {
                sc_tokenizer_decode(t, prev, ids.ids[i], buf, sizeof buf);
                prev = ids.ids[i];
            }
        }
        sc_tokens_free(&ids);
    }
    /* every id decodes (the whole vocabulary, bounded) */
    char buf[512];
    int64_t V = sc_tokenizer_vocab_size(t);
    for (int64_t i = 0; i < V && i < 4096; i++) sc_tokenizer_decode(t, -1, (int32_t)i, buf, sizeof buf);
}
