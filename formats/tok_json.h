/* tok_json.h - a small, fast JSON reader for tokenizer files (internal).
 *
 * tokenizer.json files reach 33 MB with millions of values; this reader
 * parses in place (strings are unescaped inside the caller's buffer and
 * NUL-terminated there) into compact nodes whose children are contiguous,
 * about 5x faster than a general-purpose DOM. Nesting is bounded. */
#ifndef SC_TOK_JSON_H
#define SC_TOK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

enum { TJ_NULL, TJ_FALSE, TJ_TRUE, TJ_NUM, TJ_STR, TJ_ARR, TJ_OBJ };

typedef struct tj_val {
    uint8_t type;
    uint32_t klen;   /* members of an object: key length */
    const char *key; /* members of an object: the key (NUL-terminated) */
    union {
        double num;
        struct {
            const char *s; /* NUL-terminated; may hold \u0000 inside */
            size_t n;
        } str;
        struct {
            struct tj_val *v;
            size_t n;
        } kids; /* arrays and objects */
    } u;
} tj_val;

typedef struct tj_doc {
    tj_val root;
    void *blocks; /* node storage */
} tj_doc;

#define TJ_MAX_DEPTH 128

/* Parses text[0..len) (text[len] must be writable and is set to NUL).
 * Errors name `what`, the line and the column. */
sc_status tj_parse(const char *what, char *text, size_t len, tj_doc *doc, sc_err *err);
void tj_free(tj_doc *doc);

/* Member of an object by key (NULL when absent or v is no object). */
const tj_val *tj_get(const tj_val *v, const char *key);
/* String value or NULL. */
const char *tj_str(const tj_val *v, size_t *len);
/* true when v is a string equal to s. */
bool tj_str_is(const tj_val *v, const char *s);
/* Integer value when v is a number holding an integer in [lo, hi]. */
bool tj_int(const tj_val *v, int64_t lo, int64_t hi, int64_t *out);
/* Boolean member with a default (absent or null: def). */
bool tj_bool(const tj_val *obj, const char *key, bool def);

#endif
