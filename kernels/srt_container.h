/* srt_container.h - the one container format behind both sparsecal files:
 * calibration files (.scal, magic "SPARSCAL") and packed artifacts (.spk,
 * magic "SPARSPAK"). A fixed 128-byte header, 64-byte aligned sections (raw or
 * one zstd frame each), a section table and a JSON manifest, every part
 * covered by an XXH3-64 checksum. docs/CONTAINER.md gives the layout byte by
 * byte.
 *
 * Reader: maps the file, validates everything before use, and hands out
 * sections by name (in place for raw sections, decompressed once into a
 * buffer the handle owns for zstd ones). Writer: streams sections to a temp
 * file beside the target and renames it into place only in finish, so a
 * crash never leaves a file under the final name.
 *
 * Status codes are numbered like the toolchain's sc_status (0 ok, 1 io,
 * 2 format, 3 memory, 4 argument, 5 unsupported). A handle is for one thread
 * at a time (the first access to a zstd section fills a cache). */
#ifndef SRT_CONTAINER_H
#define SRT_CONTAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srt_json.h"

typedef enum srt_ct_status {
    SRT_CT_OK = 0,
    SRT_CT_EIO,          /* cannot open/read/write/rename a file */
    SRT_CT_EFORMAT,      /* the file is malformed, truncated, corrupt or hostile */
    SRT_CT_ENOMEM,       /* allocation failed */
    SRT_CT_EARG,         /* bad argument from the caller */
    SRT_CT_EUNSUPPORTED  /* a well-formed file of a version or feature this reader lacks */
} srt_ct_status;

typedef enum srt_ct_kind {
    SRT_CT_ANY = 0,  /* reader: accept either kind */
    SRT_CT_SCAL = 1, /* calibration file, magic "SPARSCAL" */
    SRT_CT_SPAK = 2  /* packed artifact, magic "SPARSPAK" */
} srt_ct_kind;

typedef enum srt_ct_dtype {
    SRT_CT_U8 = 0,
    SRT_CT_I8,
    SRT_CT_U16,
    SRT_CT_I16,
    SRT_CT_F16,
    SRT_CT_BF16,
    SRT_CT_I32,
    SRT_CT_U32,
    SRT_CT_F32,
    SRT_CT_I64,
    SRT_CT_U64,
    SRT_CT_F64,
    SRT_CT_BYTES, /* opaque bytes (element size 1), e.g. a packed layout's blocks */
    SRT_CT_DTYPE_COUNT
} srt_ct_dtype;

typedef enum srt_ct_compression { SRT_CT_RAW = 0, SRT_CT_ZSTD = 1 } srt_ct_compression;

#define SRT_CT_VERSION_MAJOR 1
#define SRT_CT_VERSION_MINOR 0
#define SRT_CT_HEADER_SIZE 128
#define SRT_CT_ENTRY_SIZE 256
#define SRT_CT_ALIGN 64
#define SRT_CT_MAX_NAME 127              /* bytes, printable ASCII, no NUL */
#define SRT_CT_MAX_DIMS 8
#define SRT_CT_MAX_MANIFEST (16u << 20)  /* bytes */
#define SRT_CT_MAX_SECTIONS (1u << 24)
#define SRT_CT_MAX_ZSTD_RATIO 65536u    /* raw <= stored * this (zstd itself tops out near 32768) */
#define SRT_CT_MAX_ZSTD_LEVEL 19

const char *srt_ct_status_name(srt_ct_status s);
const char *srt_ct_kind_name(srt_ct_kind k);   /* "calibration", "artifact", "any" */
const char *srt_ct_kind_magic(srt_ct_kind k);  /* "SPARSCAL", "SPARSPAK" */
const char *srt_ct_dtype_name(srt_ct_dtype t); /* "f32", ...; "?" if out of range */
size_t srt_ct_dtype_size(srt_ct_dtype t);      /* bytes per element; 0 if out of range */
/* Parses a dtype name; returns SRT_CT_DTYPE_COUNT if unknown. */
srt_ct_dtype srt_ct_dtype_from_name(const char *name);
/* The checksum used everywhere in the container: XXH3_64bits (seed 0). */
uint64_t srt_ct_checksum(const void *data, size_t n);

/* ---- reader ---- */

typedef struct srt_container srt_container;

typedef struct srt_ct_section {
    const char *name; /* NUL-terminated, inside the handle's mapping */
    srt_ct_dtype dtype;
    srt_ct_compression compression;
    uint32_t ndim;
    uint64_t dims[SRT_CT_MAX_DIMS]; /* dims[ndim..] are 0 */
    uint64_t n_elements;            /* product of dims (1 for ndim 0) */
    uint64_t offset;                /* in the file, multiple of 64 */
    uint64_t stored_size;           /* bytes in the file */
    uint64_t raw_size;              /* bytes once decompressed = n_elements * dtype size */
    uint64_t checksum;              /* XXH3-64 of the stored bytes */
} srt_ct_section;

/* Maps and validates path. expected is SRT_CT_SCAL, SRT_CT_SPAK or
 * SRT_CT_ANY. On failure *out is NULL and err holds one line naming the file
 * and the field. Section checksums are verified on first access to each
 * section, or all at once by srt_container_verify_all. */
srt_ct_status srt_container_open(const char *path, srt_ct_kind expected, srt_container **out, char *err,
                                 size_t err_cap);
/* The same over a caller's buffer, which must outlive the handle (in-place
 * sections are 64-byte aligned when the buffer is). name is used in messages. */
srt_ct_status srt_container_open_memory(const void *data, size_t size, const char *name, srt_ct_kind expected,
                                        srt_container **out, char *err, size_t err_cap);
void srt_container_close(srt_container *c); /* accepts NULL */

srt_ct_kind srt_container_kind(const srt_container *c);
void srt_container_version(const srt_container *c, uint32_t *major, uint32_t *minor);
uint64_t srt_container_file_size(const srt_container *c);
const char *srt_container_path(const srt_container *c);
/* The manifest: its exact bytes (not NUL-terminated) and the parsed object. */
const char *srt_container_manifest_text(const srt_container *c, size_t *len);
const srt_json *srt_container_manifest(const srt_container *c);

size_t srt_container_section_count(const srt_container *c);
/* Section i in file order (NULL if out of range). */
const srt_ct_section *srt_container_section_at(const srt_container *c, size_t i);
/* Index of the section called name, or -1. O(log n). */
int64_t srt_container_find(const srt_container *c, const char *name);

/* The raw bytes of a section: verifies its checksum on first access, then a
 * pointer into the mapping (raw sections) or into a buffer the handle owns
 * (zstd sections, decompressed once). Valid until close. On failure the
 * message is in srt_container_errmsg. */
srt_ct_status srt_container_data(srt_container *c, size_t index, const void **data, uint64_t *size);
srt_ct_status srt_container_get(srt_container *c, const char *name, const void **data, uint64_t *size);
/* As srt_container_get, but also checks the dtype and element count
 * (n_elements 0: any count). */
srt_ct_status srt_container_get_typed(srt_container *c, const char *name, srt_ct_dtype dtype, uint64_t n_elements,
                                      const void **data);

/* Drops the file's pages under [p, p + size) from the process's memory, once the caller has copied
 * the bytes elsewhere and will not read them through this handle again (they stay in the page
 * cache; a later read faults them back in). A no-op for bytes outside the handle's file mapping
 * (srt_container_open_memory, zstd sections). */
void srt_container_release(const srt_container *c, const void *p, uint64_t size);

/* Copies section i's raw bytes into dst (size must be its raw_size),
 * verifying the checksum on first access and decompressing a zstd section
 * straight into dst: nothing is kept, so a caller can read a file far larger
 * than memory one section at a time. */
srt_ct_status srt_container_read(srt_container *c, size_t index, void *dst, uint64_t size);

/* Checks section i's checksum and, for zstd, that its frame decompresses to
 * exactly raw_size bytes (streamed through a fixed buffer; nothing kept). */
srt_ct_status srt_container_verify_section(srt_container *c, size_t index);
/* Every section; stops at the first failure. */
srt_ct_status srt_container_verify_all(srt_container *c);
/* The last failure's one-line message ("" if none). */
const char *srt_container_errmsg(const srt_container *c);

/* ---- writer ---- */

typedef struct srt_writer srt_writer;

/* Starts writing a file of the given kind (SRT_CT_SCAL or SRT_CT_SPAK) to a
 * temp file beside path. */
srt_ct_status srt_writer_create(const char *path, srt_ct_kind kind, srt_writer **out, char *err, size_t err_cap);
/* Sets (or replaces) the manifest: len bytes of JSON text that must parse as
 * an object (it is stored as given). May be called any time before finish;
 * without it the manifest is {}. */
srt_ct_status srt_writer_set_manifest(srt_writer *w, const char *json, size_t len);
/* Appends a section and writes its data at once; only the table entry is
 * kept. size must equal the dtype size times the product of dims. level 0
 * stores the bytes raw; 1..19 compresses them with zstd at that level, and
 * keeps them raw when the frame would not be smaller. */
srt_ct_status srt_writer_add(srt_writer *w, const char *name, srt_ct_dtype dtype, uint32_t ndim,
                             const uint64_t *dims, const void *data, size_t size, int level);
/* A raw section written in pieces, for data too large to hold at once:
 * begin (the same checks as add), append pieces in order, end (checks that
 * the pieces add up to the shape's bytes). No other section may be added in
 * between. */
srt_ct_status srt_writer_begin(srt_writer *w, const char *name, srt_ct_dtype dtype, uint32_t ndim,
                               const uint64_t *dims);
srt_ct_status srt_writer_append(srt_writer *w, const void *data, size_t size);
srt_ct_status srt_writer_end(srt_writer *w);
/* Writes table, manifest and header, fsyncs and renames the temp file over
 * path (then fsyncs the directory). Any failure leaves no file under path. */
srt_ct_status srt_writer_finish(srt_writer *w);
/* Frees the writer; before a successful finish this abandons the file (the
 * temp file is removed and path is untouched). Accepts NULL. */
void srt_writer_free(srt_writer *w);
const char *srt_writer_errmsg(const srt_writer *w);
/* The temp file being written (for a signal handler that wants to unlink it). */
const char *srt_writer_temp_path(const srt_writer *w);

/* Temporary files being written (by srt_writer and by other atomic writers
 * that register theirs), so a program can remove them when it is killed:
 * srt_tmp_cleanup() only calls unlink(2) and is safe in a signal handler
 * (the CLI calls it on SIGINT, SIGTERM and SIGHUP, then dies of the
 * signal). At most SRT_TMP_MAX paths at once; beyond that a path is simply
 * not tracked. The path must stay valid until unregistered. */
#define SRT_TMP_MAX 16
void srt_tmp_register(const char *path);
void srt_tmp_unregister(const char *path);
void srt_tmp_cleanup(void);
uint64_t srt_writer_bytes_written(const srt_writer *w);

#endif
