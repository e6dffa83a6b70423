/* srt_json.c - strict JSON parser (two passes over the text: the first
 * validates and counts nodes, string bytes and each container's size; the
 * second fills one exactly-sized allocation) and printer. */
#include "srt_json.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HARD_MAX_DEPTH 1024 /* recursion bound whatever the caller asks */

typedef struct parser {
    const char *s;
    size_t len, pos;
    int max_depth;
    bool build;      /* false: counting pass; true: filling pass */
    char *err;
    size_t err_cap;
    bool failed;
    /* counting pass results, read back by the filling pass */
    size_t n_nodes, n_str_bytes, n_containers;
    size_t *child_counts; /* per container, in document order */
    size_t counts_cap;
    /* filling pass cursors */
    srt_json *nodes;
    size_t next_node, next_container;
    char *strbuf;
    size_t str_used;
} parser;

static int fail(parser *p, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static int fail(parser *p, const char *fmt, ...) {
    if (p->failed) return -1;
    p->failed = true;
    if (!p->err || p->err_cap == 0) return -1;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->len; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->err_cap, "JSON error at byte %zu (line %zu, column %zu): %s", p->pos, line, col, what);
    return -1;
}

static void skip_ws(parser *p) {
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int describe_unexpected(parser *p, const char *expected) {
    if (p->pos >= p->len) return fail(p, "unexpected end of input, expected %s", expected);
    unsigned char c = (unsigned char)p->s[p->pos];
    if (c >= 0x21 && c < 0x7f) return fail(p, "unexpected '%c', expected %s", c, expected);
    return fail(p, "unexpected byte 0x%02x, expected %s", c, expected);
}

/* ---- strings ---- */

static int hex4(parser *p, size_t at, uint32_t *out) {
    if (at + 4 > p->len) return -1;
    uint32_t v = 0;
    for (size_t i = 0; i < 4; i++) {
        char c = p->s[at + i];
        uint32_t d;
        if (c >= '0' && c <= '9') d = (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (uint32_t)(c - 'A' + 10);
        else return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

static size_t utf8_encode(uint32_t cp, char *w) {
    unsigned char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | (cp >> 18));
        b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    if (w) memcpy(w, b, n);
    return n;
}

/* Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 if invalid. */
static size_t utf8_valid(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) need = 2;
    else if (c == 0xED) need = 2, hi = 0x9F; /* no UTF-16 surrogates */
    else if (c >= 0xEE && c <= 0xEF) need = 2;
    else if (c == 0xF0) need = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else if (c == 0xF4) need = 3, hi = 0x8F; /* <= U+10FFFF */
    else return 0;
    if (n < need + 1) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i <= need; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return need + 1;
}

/* Parses the string at p->pos (which is '"'). Counting pass: adds its decoded
 * size + NUL to n_str_bytes. Filling pass: decodes into strbuf. */
static int parse_string(parser *p, const char **out, size_t *out_len) {
    p->pos++; /* opening quote */
    char *w = p->build ? p->strbuf + p->str_used : NULL;
    size_t n = 0;
    for (;;) {
        if (p->pos >= p->len) return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) return fail(p, "raw control character 0x%02x in a string (must be escaped)", c);
        if (c == '\\') {
            if (p->pos + 1 >= p->len) return fail(p, "unterminated escape");
            char e = p->s[p->pos + 1];
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *simple = e != '\0' ? strchr(from, e) : NULL;
            if (simple) {
                if (w) w[n] = to[simple - from];
                n++;
                p->pos += 2;
                continue;
            }
            if (e != 'u') return fail(p, "invalid escape '\\%c'", e >= 0x21 && e < 0x7f ? e : '?');
            uint32_t cp;
            if (hex4(p, p->pos + 2, &cp)) return fail(p, "\\u needs four hex digits");
            p->pos += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(p, "lone low surrogate \\u%04X", (unsigned)cp);
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t lo;
                if (p->pos + 1 >= p->len || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
                    hex4(p, p->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                    return fail(p, "high surrogate \\u%04X not followed by a low surrogate", (unsigned)cp);
                p->pos += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            n += utf8_encode(cp, w ? w + n : NULL);
            continue;
        }
        size_t k = utf8_valid((const unsigned char *)p->s + p->pos, p->len - p->pos);
        if (k == 0) return fail(p, "invalid UTF-8 byte 0x%02x in a string", c);
        if (w) memcpy(w + n, p->s + p->pos, k);
        n += k;
        p->pos += k;
    }
    if (w) {
        w[n] = '\0';
        *out = w;
        *out_len = n;
        p->str_used += n + 1;
    } else {
        p->n_str_bytes += n + 1;
    }
    return 0;
}

/* ---- numbers ---- */

static int parse_number(parser *p, srt_json *dst) {
    size_t start = p->pos, i = p->pos;
    bool integral = true;
    if (i < p->len && p->s[i] == '-') i++;
    if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') return fail(p, "invalid number");
    if (p->s[i] == '0') {
        i++;
        if (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') return fail(p, "leading zero in a number");
    } else {
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->len && p->s[i] == '.') {
        integral = false;
        i++;
        if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') return fail(p, "a '.' must be followed by digits");
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        integral = false;
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        if (i >= p->len || p->s[i] < '0' || p->s[i] > '9') return fail(p, "an exponent needs digits");
        while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    }
    size_t n = i - start;
    if (n > SRT_JSON_MAX_NUMBER_CHARS)
        return fail(p, "number literal of %zu characters (limit %d)", n, SRT_JSON_MAX_NUMBER_CHARS);
    if (integral) {
        /* accumulate negatively so INT64_MIN fits */
        bool neg = p->s[start] == '-';
        int64_t v = 0;
        bool fits = true;
        for (size_t k = start + (neg ? 1 : 0); k < i && fits; k++) {
            int d = p->s[k] - '0';
            if (v < (INT64_MIN + d) / 10) fits = false;
            else v = v * 10 - d;
        }
        if (fits && !neg && v == INT64_MIN) fits = false;
        if (fits) {
            if (dst) {
                dst->type = SRT_JSON_INT;
                dst->v.i = neg ? v : -v;
            }
            p->pos = i;
            return 0;
        }
    }
    char buf[SRT_JSON_MAX_NUMBER_CHARS + 1];
    memcpy(buf, p->s + start, n);
    buf[n] = '\0';
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
        char *dot = strchr(buf, '.');
        if (dot) *dot = dp[0];
    }
    errno = 0;
    char *end = NULL;
    double d = strtod(buf, &end);
    if (end != buf + n) return fail(p, "invalid number");
    if (!isfinite(d)) return fail(p, "number %.40s%s is out of range for a double", buf, n > 40 ? "..." : "");
    if (dst) {
        dst->type = SRT_JSON_DOUBLE;
        dst->v.d = d;
    }
    p->pos = i;
    return 0;
}

/* ---- values ---- */

static int parse_value(parser *p, srt_json *dst, int depth);

static int key_cmp(const void *a, const void *b) {
    const srt_json *x = *(const srt_json *const *)a, *y = *(const srt_json *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

static int check_duplicates(parser *p, const srt_json *items, size_t n) {
    const srt_json *dup = NULL;
    if (n <= 8) {
        for (size_t i = 0; i < n && !dup; i++)
            for (size_t j = i + 1; j < n && !dup; j++)
                if (items[i].key_len == items[j].key_len && memcmp(items[i].key, items[j].key, items[i].key_len) == 0)
                    dup = &items[j];
    } else {
        const srt_json **idx = malloc(n * sizeof *idx);
        if (!idx) return fail(p, "out of memory checking %zu object keys", n);
        for (size_t i = 0; i < n; i++) idx[i] = &items[i];
        qsort(idx, n, sizeof *idx, key_cmp);
        for (size_t i = 1; i < n && !dup; i++)
            if (key_cmp(&idx[i - 1], &idx[i]) == 0) dup = idx[i];
        free(idx);
    }
    if (dup) return fail(p, "duplicate object key \"%.60s\"", dup->key);
    return 0;
}

static int parse_container(parser *p, srt_json *dst, int depth, bool object) {
    if (depth >= p->max_depth) return fail(p, "nesting deeper than %d levels", p->max_depth);
    char close = object ? '}' : ']';
    size_t k, count = 0, expect = 0;
    srt_json *items = NULL;
    if (p->build) {
        k = p->next_container++;
        expect = p->child_counts[k];
        items = p->nodes + p->next_node;
        p->next_node += expect;
        dst->type = object ? SRT_JSON_OBJECT : SRT_JSON_ARRAY;
        dst->v.items = items;
        dst->n = expect;
    } else {
        if (p->n_containers == p->counts_cap) {
            size_t cap = p->counts_cap ? p->counts_cap * 2 : 64;
            size_t *c = realloc(p->child_counts, cap * sizeof *c);
            if (!c) return fail(p, "out of memory");
            p->child_counts = c;
            p->counts_cap = cap;
        }
        k = p->n_containers++;
    }
    p->pos++; /* opening bracket */
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
    } else {
        for (;;) {
            skip_ws(p);
            if (p->build && count >= expect) return fail(p, "internal error: container grew between passes");
            srt_json *child = p->build ? &items[count] : NULL;
            if (object) {
                if (p->pos >= p->len || p->s[p->pos] != '"') return describe_unexpected(p, "a string key");
                const char *key = NULL;
                size_t klen = 0;
                if (parse_string(p, &key, &klen)) return -1;
                if (klen > UINT32_MAX) return fail(p, "object key too long");
                if (child) {
                    child->key = key;
                    child->key_len = (uint32_t)klen;
                }
                skip_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') return describe_unexpected(p, "':'");
                p->pos++;
                skip_ws(p);
            }
            if (parse_value(p, child, depth + 1)) return -1;
            count++;
            if (!p->build) p->n_nodes++;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == close) {
                p->pos++;
                break;
            }
            return describe_unexpected(p, object ? "',' or '}'" : "',' or ']'");
        }
    }
    if (!p->build) {
        p->child_counts[k] = count;
        return 0;
    }
    if (count != expect) return fail(p, "internal error: container size changed between passes");
    return object ? check_duplicates(p, items, count) : 0;
}

static int parse_literal(parser *p, srt_json *dst, const char *word, srt_json_type t, bool b) {
    size_t n = strlen(word);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0) return describe_unexpected(p, "a JSON value");
    p->pos += n;
    if (dst) {
        dst->type = (uint8_t)t;
        dst->v.b = b;
    }
    return 0;
}

static int parse_value(parser *p, srt_json *dst, int depth) {
    if (p->pos >= p->len) return describe_unexpected(p, "a JSON value");
    char c = p->s[p->pos];
    switch (c) {
    case '{': return parse_container(p, dst, depth, true);
    case '[': return parse_container(p, dst, depth, false);
    case '"': {
        const char *s = NULL;
        size_t n = 0;
        if (parse_string(p, &s, &n)) return -1;
        if (dst) {
            dst->type = SRT_JSON_STRING;
            dst->v.s = s;
            dst->n = n;
        }
        return 0;
    }
    case 't': return parse_literal(p, dst, "true", SRT_JSON_BOOL, true);
    case 'f': return parse_literal(p, dst, "false", SRT_JSON_BOOL, false);
    case 'n': return parse_literal(p, dst, "null", SRT_JSON_NULL, false);
    default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, dst);
        return describe_unexpected(p, "a JSON value");
    }
}

static int parse_document(parser *p, srt_json *root) {
    p->pos = 0;
    skip_ws(p);
    if (parse_value(p, root, 0)) return -1;
    skip_ws(p);
    if (p->pos != p->len) return describe_unexpected(p, "end of input");
    return 0;
}

int srt_json_parse(const char *text, size_t len, const srt_json_limits *limits, srt_json **out, char *err,
                   size_t err_cap) {
    *out = NULL;
    if (err && err_cap) err[0] = '\0';
    parser p = {.s = text, .len = len, .err = err, .err_cap = err_cap};
    p.max_depth = limits && limits->max_depth > 0 ? limits->max_depth : SRT_JSON_DEFAULT_MAX_DEPTH;
    if (p.max_depth > HARD_MAX_DEPTH) p.max_depth = HARD_MAX_DEPTH;
    if (limits && limits->max_bytes && len > limits->max_bytes)
        return fail(&p, "document of %zu bytes exceeds the %zu-byte limit", len, limits->max_bytes);
    if (!text && len) return fail(&p, "no input");
    p.n_nodes = 1; /* the root */
    if (parse_document(&p, NULL)) {
        free(p.child_counts);
        return -1;
    }
    /* every node stems from at least one input byte and every string byte
     * from one, so neither product can overflow; checked anyway */
    size_t node_bytes, total;
    if (__builtin_mul_overflow(p.n_nodes, sizeof(srt_json), &node_bytes) ||
        __builtin_add_overflow(node_bytes, p.n_str_bytes, &total)) {
        free(p.child_counts);
        return fail(&p, "document too large");
    }
    srt_json *nodes = calloc(1, total ? total : 1);
    if (!nodes) {
        free(p.child_counts);
        return fail(&p, "out of memory (%zu bytes)", total);
    }
    p.build = true;
    p.nodes = nodes;
    p.next_node = 1;
    p.strbuf = (char *)nodes + node_bytes;
    int rc = parse_document(&p, &nodes[0]);
    free(p.child_counts);
    if (rc) {
        free(nodes);
        return -1;
    }
    *out = nodes;
    return 0;
}

void srt_json_free(srt_json *root) { free(root); }

const char *srt_json_type_name(srt_json_type t) {
    static const char *names[] = {"null", "bool", "integer", "number", "string", "array", "object"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* ---- lookup ---- */

const srt_json *srt_json_get(const srt_json *obj, const char *key) {
    if (!obj || obj->type != SRT_JSON_OBJECT || !key) return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->v.items[i].key_len == kl && memcmp(obj->v.items[i].key, key, kl) == 0) return &obj->v.items[i];
    return NULL;
}

const srt_json *srt_json_at(const srt_json *arr, size_t i) {
    if (!arr || (arr->type != SRT_JSON_ARRAY && arr->type != SRT_JSON_OBJECT) || i >= arr->n) return NULL;
    return &arr->v.items[i];
}

size_t srt_json_count(const srt_json *v) {
    return v && (v->type == SRT_JSON_ARRAY || v->type == SRT_JSON_OBJECT) ? v->n : 0;
}

bool srt_json_is(const srt_json *v, srt_json_type t) { return v && v->type == t; }

const char *srt_json_str(const srt_json *v, const char *fallback) {
    return v && v->type == SRT_JSON_STRING ? v->v.s : fallback;
}

int64_t srt_json_int(const srt_json *v, int64_t fallback) {
    if (!v) return fallback;
    if (v->type == SRT_JSON_INT) return v->v.i;
    /* -2^63 <= d < 2^63 converts exactly */
    if (v->type == SRT_JSON_DOUBLE && v->v.d == floor(v->v.d) && v->v.d >= -9223372036854775808.0 &&
        v->v.d < 9223372036854775808.0)
        return (int64_t)v->v.d;
    return fallback;
}

double srt_json_num(const srt_json *v, double fallback) {
    if (v && v->type == SRT_JSON_INT) return (double)v->v.i;
    if (v && v->type == SRT_JSON_DOUBLE) return v->v.d;
    return fallback;
}

bool srt_json_bool(const srt_json *v, bool fallback) { return v && v->type == SRT_JSON_BOOL ? v->v.b : fallback; }

/* ---- printing ---- */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (n + 1 > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 256;
        while (n + 1 > cap - b->n) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_quoted(sbuf *b, const char *s, size_t n) {
    put(b, "\"", 1);
    size_t i = 0;
    while (i < n) {
        size_t run = i; /* copy runs of bytes that need no escaping at once */
        for (;;) {
            if (run >= n) break;
            unsigned char c = (unsigned char)s[run];
            if (c < 0x20 || c == '"' || c == '\\') break;
            size_t k = utf8_valid((const unsigned char *)s + run, n - run);
            if (k == 0) break;
            run += k;
        }
        put(b, s + i, run - i);
        i = run;
        if (i >= n) break;
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        switch (c) {
        case '"': puts_(b, "\\\""); break;
        case '\\': puts_(b, "\\\\"); break;
        case '\b': puts_(b, "\\b"); break;
        case '\f': puts_(b, "\\f"); break;
        case '\n': puts_(b, "\\n"); break;
        case '\r': puts_(b, "\\r"); break;
        case '\t': puts_(b, "\\t"); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", c);
                puts_(b, esc);
            } else {
                puts_(b, "\\ufffd"); /* invalid UTF-8 byte */
            }
        }
        i++;
    }
    put(b, "\"", 1);
}

size_t srt_json_format_double(double d, char buf[SRT_JSON_DOUBLE_CHARS]) {
    if (!isfinite(d)) {
        snprintf(buf, SRT_JSON_DOUBLE_CHARS, "null");
        return 4;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, SRT_JSON_DOUBLE_CHARS, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    const char *dp = localeconv()->decimal_point;
    if (dp && dp[0] && dp[0] != '.' && !dp[1]) {
        char *q = strchr(buf, dp[0]);
        if (q) *q = '.';
    }
    if (!strpbrk(buf, ".eE")) strncat(buf, ".0", SRT_JSON_DOUBLE_CHARS - strlen(buf) - 1);
    return strlen(buf);
}

static void put_double(sbuf *b, double d) {
    char buf[SRT_JSON_DOUBLE_CHARS];
    size_t n = srt_json_format_double(d, buf);
    put(b, buf, n);
}

static void newline(sbuf *b, int indent, int level) {
    if (indent <= 0) return;
    put(b, "\n", 1);
    for (int i = 0; i < indent * level; i++) put(b, " ", 1);
}

static void print_value(sbuf *b, const srt_json *v, int indent, int level) {
    char num[32];
    switch ((srt_json_type)v->type) {
    case SRT_JSON_NULL: puts_(b, "null"); return;
    case SRT_JSON_BOOL: puts_(b, v->v.b ? "true" : "false"); return;
    case SRT_JSON_INT:
        snprintf(num, sizeof num, "%lld", (long long)v->v.i);
        puts_(b, num);
        return;
    case SRT_JSON_DOUBLE: put_double(b, v->v.d); return;
    case SRT_JSON_STRING: put_quoted(b, v->v.s, v->n); return;
    case SRT_JSON_ARRAY:
    case SRT_JSON_OBJECT: {
        bool obj = v->type == SRT_JSON_OBJECT;
        put(b, obj ? "{" : "[", 1);
        for (size_t i = 0; i < v->n; i++) {
            const srt_json *c = &v->v.items[i];
            if (i) put(b, ",", 1);
            newline(b, indent, level + 1);
            if (obj) {
                put_quoted(b, c->key, c->key_len);
                put(b, indent > 0 ? ": " : ":", indent > 0 ? 2 : 1);
            }
            print_value(b, c, indent, level + 1);
        }
        if (v->n) newline(b, indent, level);
        put(b, obj ? "}" : "]", 1);
        return;
    }
    }
}

char *srt_json_print(const srt_json *v, int indent, size_t *len_out) {
    sbuf b = {0};
    if (v) print_value(&b, v, indent, 0);
    else puts_(&b, "null");
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len_out) *len_out = b.n;
    return b.p;
}

char *srt_json_quote(const char *s, size_t n, size_t *len_out) {
    sbuf b = {0};
    put_quoted(&b, s ? s : "", s ? n : 0);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    if (len_out) *len_out = b.n;
    return b.p;
}
