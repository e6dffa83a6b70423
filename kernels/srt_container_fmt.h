/* srt_container_fmt.h - private: the on-disk header and section-table entry
 * of the container (docs/CONTAINER.md), their little-endian encoding, and the
 * rules reader and writer share. Not part of the public API. */
#ifndef SRT_CONTAINER_FMT_H
#define SRT_CONTAINER_FMT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "srt_container.h"

/* The header at offset 0. Every field little-endian; the struct documents the
 * layout (it is never copied to or from the file as a whole). */
typedef struct ct_header {
    char magic[8];             /*   0: "SPARSCAL" or "SPARSPAK" */
    uint16_t version_major;    /*   8: 1 */
    uint16_t version_minor;    /*  10: 0 */
    uint32_t header_size;      /*  12: 128 */
    uint64_t flags;            /*  16: bits 0-31 required features, 32-63 optional; none defined in 1.0 */
    uint64_t file_size;        /*  24: total bytes */
    uint64_t manifest_offset;  /*  32 */
    uint64_t manifest_size;    /*  40 */
    uint64_t manifest_checksum;/*  48: XXH3-64 of the manifest bytes */
    uint64_t table_offset;     /*  56 */
    uint32_t section_count;    /*  64 */
    uint32_t entry_size;       /*  68: 256 */
    uint64_t table_checksum;   /*  72: XXH3-64 of the section_count * 256 table bytes */
    uint8_t reserved[40];      /*  80: zero */
    uint64_t header_checksum;  /* 120: XXH3-64 of bytes 0..119 */
} ct_header;

_Static_assert(sizeof(ct_header) == SRT_CT_HEADER_SIZE, "container header must be 128 bytes");
_Static_assert(offsetof(ct_header, flags) == 16, "header layout");
_Static_assert(offsetof(ct_header, section_count) == 64, "header layout");
_Static_assert(offsetof(ct_header, reserved) == 80, "header layout");
_Static_assert(offsetof(ct_header, header_checksum) == 120, "header layout");

/* One section-table entry. */
typedef struct ct_entry {
    char name[128];        /*   0: NUL-terminated, NUL-padded, 1..127 printable ASCII bytes */
    uint8_t dtype;         /* 128: srt_ct_dtype */
    uint8_t compression;   /* 129: srt_ct_compression */
    uint8_t ndim;          /* 130: 0..8 */
    uint8_t reserved0;     /* 131: zero */
    uint32_t reserved1;    /* 132: zero */
    uint64_t dims[8];      /* 136: dims[ndim..7] zero */
    uint64_t offset;       /* 200: multiple of 64 */
    uint64_t stored_size;  /* 208 */
    uint64_t raw_size;     /* 216 */
    uint64_t checksum;     /* 224: XXH3-64 of the stored bytes */
    uint8_t reserved2[24]; /* 232: zero */
} ct_entry;

_Static_assert(sizeof(ct_entry) == SRT_CT_ENTRY_SIZE, "section-table entry must be 256 bytes");
_Static_assert(offsetof(ct_entry, dims) == 136, "entry layout");
_Static_assert(offsetof(ct_entry, offset) == 200, "entry layout");
_Static_assert(offsetof(ct_entry, reserved2) == 232, "entry layout");

#define CT_HEADER_CHECKED_BYTES 120 /* bytes covered by header_checksum */
#define CT_REQUIRED_FLAGS_MASK 0xffffffffull

static inline void ct_put16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void ct_put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ct_put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t ct_get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t ct_get32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t ct_get64(const uint8_t *p) { return (uint64_t)ct_get32(p) | ((uint64_t)ct_get32(p + 4) << 32); }

static inline void ct_header_encode(const ct_header *h, uint8_t out[SRT_CT_HEADER_SIZE]) {
    memset(out, 0, SRT_CT_HEADER_SIZE);
    memcpy(out, h->magic, 8);
    ct_put16(out + 8, h->version_major);
    ct_put16(out + 10, h->version_minor);
    ct_put32(out + 12, h->header_size);
    ct_put64(out + 16, h->flags);
    ct_put64(out + 24, h->file_size);
    ct_put64(out + 32, h->manifest_offset);
    ct_put64(out + 40, h->manifest_size);
    ct_put64(out + 48, h->manifest_checksum);
    ct_put64(out + 56, h->table_offset);
    ct_put32(out + 64, h->section_count);
    ct_put32(out + 68, h->entry_size);
    ct_put64(out + 72, h->table_checksum);
    memcpy(out + 80, h->reserved, sizeof h->reserved);
    ct_put64(out + 120, h->header_checksum);
}

static inline void ct_header_decode(const uint8_t in[SRT_CT_HEADER_SIZE], ct_header *h) {
    memcpy(h->magic, in, 8);
    h->version_major = ct_get16(in + 8);
    h->version_minor = ct_get16(in + 10);
    h->header_size = ct_get32(in + 12);
    h->flags = ct_get64(in + 16);
    h->file_size = ct_get64(in + 24);
    h->manifest_offset = ct_get64(in + 32);
    h->manifest_size = ct_get64(in + 40);
    h->manifest_checksum = ct_get64(in + 48);
    h->table_offset = ct_get64(in + 56);
    h->section_count = ct_get32(in + 64);
    h->entry_size = ct_get32(in + 68);
    h->table_checksum = ct_get64(in + 72);
    memcpy(h->reserved, in + 80, sizeof h->reserved);
    h->header_checksum = ct_get64(in + 120);
}

static inline void ct_entry_encode(const ct_entry *e, uint8_t out[SRT_CT_ENTRY_SIZE]) {
    memset(out, 0, SRT_CT_ENTRY_SIZE);
    memcpy(out, e->name, sizeof e->name);
    out[128] = e->dtype;
    out[129] = e->compression;
    out[130] = e->ndim;
    out[131] = e->reserved0;
    ct_put32(out + 132, e->reserved1);
    for (int i = 0; i < 8; i++) ct_put64(out + 136 + 8 * i, e->dims[i]);
    ct_put64(out + 200, e->offset);
    ct_put64(out + 208, e->stored_size);
    ct_put64(out + 216, e->raw_size);
    ct_put64(out + 224, e->checksum);
    memcpy(out + 232, e->reserved2, sizeof e->reserved2);
}

static inline void ct_entry_decode(const uint8_t in[SRT_CT_ENTRY_SIZE], ct_entry *e) {
    memcpy(e->name, in, sizeof e->name);
    e->dtype = in[128];
    e->compression = in[129];
    e->ndim = in[130];
    e->reserved0 = in[131];
    e->reserved1 = ct_get32(in + 132);
    for (int i = 0; i < 8; i++) e->dims[i] = ct_get64(in + 136 + 8 * i);
    e->offset = ct_get64(in + 200);
    e->stored_size = ct_get64(in + 208);
    e->raw_size = ct_get64(in + 216);
    e->checksum = ct_get64(in + 224);
    memcpy(e->reserved2, in + 232, sizeof e->reserved2);
}

static inline uint64_t ct_align(uint64_t x) { return (x + (SRT_CT_ALIGN - 1)) & ~(uint64_t)(SRT_CT_ALIGN - 1); }

/* Name rule shared by reader and writer: returns 0 if ok, -1 for a bad
 * length (0 or over 127 bytes), else the offending byte + 1 (1..256). */
static inline int ct_name_check(const char *name, size_t len) {
    if (len == 0 || len > SRT_CT_MAX_NAME) return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x21 || c > 0x7e) return c + 1;
    }
    return 0;
}

/* Element count and raw byte size of a shape; false on overflow. */
static inline int ct_shape_bytes(srt_ct_dtype dt, uint32_t ndim, const uint64_t *dims, uint64_t *n_elem,
                                 uint64_t *bytes) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(n, dims[i], &n)) return 0;
    uint64_t b;
    if (__builtin_mul_overflow(n, (uint64_t)srt_ct_dtype_size(dt), &b)) return 0;
    *n_elem = n;
    *bytes = b;
    return 1;
}

/* "[2, 3]" into buf. */
static inline const char *ct_shape_str(uint32_t ndim, const uint64_t *dims, char *buf, size_t cap) {
    size_t n = 0;
    if (cap == 0) return buf;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (uint32_t i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
    return buf;
}

#endif
