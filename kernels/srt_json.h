/* srt_json.h - a small strict JSON (RFC 8259) parser and printer for the
 * runtime library, which may depend on libc and zstd only.
 *
 * Strict: one value with optional whitespace around it, no comments, no
 * trailing commas, no leading zeros, no raw control characters in strings,
 * strings must be valid UTF-8 (no overlong forms, no encoded surrogates) and
 * \u escapes must pair surrogates correctly, duplicate object keys are an
 * error, a number that overflows a double is an error. Nesting depth and input
 * size are limited.
 *
 * Numbers: an integer literal (no fraction, no exponent) that fits int64 is
 * SRT_JSON_INT and exact; every other number is SRT_JSON_DOUBLE.
 *
 * The tree lives in one arena owned by the root: free it with srt_json_free
 * on the root only. Strings are decoded, NUL-terminated, and carry their
 * length (they may contain \u0000). Objects keep their members in document
 * order. */
#ifndef SRT_JSON_H
#define SRT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum srt_json_type {
    SRT_JSON_NULL = 0,
    SRT_JSON_BOOL,
    SRT_JSON_INT,
    SRT_JSON_DOUBLE,
    SRT_JSON_STRING,
    SRT_JSON_ARRAY,
    SRT_JSON_OBJECT
} srt_json_type;

typedef struct srt_json srt_json;
struct srt_json {
    const char *key; /* member name when inside an object, else NULL */
    union {
        bool b;
        int64_t i;
        double d;
        const char *s;         /* SRT_JSON_STRING */
        const srt_json *items; /* SRT_JSON_ARRAY / SRT_JSON_OBJECT: n contiguous nodes */
    } v;
    size_t n;         /* string length in bytes, or number of items/members */
    uint32_t key_len; /* length of key in bytes */
    uint8_t type;     /* srt_json_type */
};

typedef struct srt_json_limits {
    size_t max_bytes; /* input longer than this is rejected (0: no limit) */
    int max_depth;    /* arrays/objects nested deeper than this are rejected */
} srt_json_limits;

#define SRT_JSON_DEFAULT_MAX_DEPTH 64
#define SRT_JSON_MAX_NUMBER_CHARS 512 /* longer number literals are rejected */

/* Parses len bytes of text (no NUL needed). limits may be NULL (default
 * depth, no size limit). On success stores the root in *out and returns 0; on
 * failure returns -1 with a one-line message (byte offset, line and column)
 * in err, and *out = NULL. Memory is bounded by a small multiple of len. */
int srt_json_parse(const char *text, size_t len, const srt_json_limits *limits, srt_json **out, char *err,
                   size_t err_cap);
void srt_json_free(srt_json *root); /* accepts NULL */

const char *srt_json_type_name(srt_json_type t);

/* Lookup helpers; all accept NULL and return NULL (or the fallback) when the
 * value is missing or of another type. */
const srt_json *srt_json_get(const srt_json *obj, const char *key); /* object member by name */
const srt_json *srt_json_at(const srt_json *arr, size_t i);         /* array item or object member */
size_t srt_json_count(const srt_json *v);                           /* items/members, else 0 */
const char *srt_json_str(const srt_json *v, const char *fallback);
int64_t srt_json_int(const srt_json *v, int64_t fallback);    /* INT, or an integral DOUBLE in range */
double srt_json_num(const srt_json *v, double fallback);      /* INT or DOUBLE */
bool srt_json_bool(const srt_json *v, bool fallback);
bool srt_json_is(const srt_json *v, srt_json_type t);

/* Prints v as JSON into a malloc'd NUL-terminated string (free with free()).
 * indent 0 prints compactly; indent > 0 pretty-prints with that many spaces
 * per level. Doubles use the shortest form that reads back exactly and always
 * keep a '.' or an exponent, so types survive a round trip. Returns NULL on
 * allocation failure. */
char *srt_json_print(const srt_json *v, int indent, size_t *len_out);
/* n bytes of s as a quoted JSON string literal (malloc'd): control
 * characters escaped, invalid UTF-8 bytes replaced by \ufffd. */
char *srt_json_quote(const char *s, size_t n, size_t *len_out);
/* d as JSON into buf: the shortest "%.Ng" that reads back as exactly d (a
 * '.0' appended to integral values so the type survives), "null" when d is
 * not finite. Returns the length. */
#define SRT_JSON_DOUBLE_CHARS 40
size_t srt_json_format_double(double d, char buf[SRT_JSON_DOUBLE_CHARS]);

#endif
