/* tok_json.c - in-place JSON parsing into contiguous nodes (see tok_json.h). */
#include "tok_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct block {
    struct block *next;
    size_t cap, used;
    tj_val v[];
} block;

typedef struct parser {
    char *s;
    size_t n, pos;
    const char *what;
    sc_err *err;
    tj_val *stack; /* values of the open containers, children last */
    size_t sn, scap;
    block *blocks;
} parser;

static sc_status fail(parser *p, const char *msg) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p->pos && i < p->n; i++) {
        if (p->s[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    return sc_errf(p->err, SC_EFORMAT, "%s: invalid JSON at line %zu, column %zu: %s", p->what, line, col, msg);
}

static void skip_ws(parser *p) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        p->pos++;
    }
}

static tj_val *alloc_nodes(parser *p, size_t k) {
    block *b = p->blocks;
    if (!b || b->cap - b->used < k) {
        size_t cap = k > 65536 ? k : 65536;
        b = malloc(sizeof *b + cap * sizeof(tj_val));
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = p->blocks;
        p->blocks = b;
    }
    tj_val *v = b->v + b->used;
    b->used += k;
    return v;
}

static tj_val *stack_push(parser *p) {
    if (p->sn == p->scap) {
        size_t nc = p->scap ? p->scap * 2 : 1024;
        tj_val *s = realloc(p->stack, nc * sizeof *s);
        if (!s) return NULL;
        p->stack = s;
        p->scap = nc;
    }
    tj_val *v = &p->stack[p->sn++];
    memset(v, 0, sizeof *v);
    return v;
}

static int hex4(const char *s) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

static size_t put_utf8(char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Parses the string at p->pos (on the opening quote), unescaping in place. */
static sc_status parse_string(parser *p, const char **out, size_t *len) {
    size_t r = ++p->pos, w = r;
    char *s = p->s;
    for (;;) {
        if (r >= p->n) {
            p->pos = r;
            return fail(p, "unterminated string");
        }
        char c = s[r];
        if (c == '"') break;
        if (c != '\\') {
            s[w++] = c;
            r++;
            continue;
        }
        if (r + 1 >= p->n) {
            p->pos = r;
            return fail(p, "unterminated escape");
        }
        char e = s[r + 1];
        r += 2;
        switch (e) {
        case '"': s[w++] = '"'; break;
        case '\\': s[w++] = '\\'; break;
        case '/': s[w++] = '/'; break;
        case 'b': s[w++] = '\b'; break;
        case 'f': s[w++] = '\f'; break;
        case 'n': s[w++] = '\n'; break;
        case 'r': s[w++] = '\r'; break;
        case 't': s[w++] = '\t'; break;
        case 'u': {
            int hi = p->n - r >= 4 ? hex4(s + r) : -1;
            if (hi < 0) {
                p->pos = r;
                return fail(p, "bad \\u escape");
            }
            r += 4;
            uint32_t cp = (uint32_t)hi;
            if (hi >= 0xD800 && hi <= 0xDBFF) {
                int lo = p->n - r >= 6 && s[r] == '\\' && s[r + 1] == 'u' ? hex4(s + r + 2) : -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    p->pos = r;
                    return fail(p, "unpaired surrogate in \\u escape");
                }
                r += 6;
                cp = 0x10000 + (((uint32_t)hi - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
            } else if (hi >= 0xDC00 && hi <= 0xDFFF) {
                p->pos = r;
                return fail(p, "unpaired surrogate in \\u escape");
            }
            w += put_utf8(s + w, cp); /* at most as long as the escape it replaces */
            break;
        }
        default:
            p->pos = r - 1;
            return fail(p, "unknown escape");
        }
    }
    s[w] = '\0'; /* w <= r: the closing quote or earlier */
    *out = s + (p->pos);
    *len = w - p->pos;
    p->pos = r + 1;
    return SC_OK;
}

static sc_status parse_value(parser *p, tj_val *v, int depth);

static sc_status parse_container(parser *p, tj_val *v, int depth, bool obj) {
    if (depth >= TJ_MAX_DEPTH) return fail(p, "nesting too deep");
    char close = obj ? '}' : ']';
    p->pos++;
    size_t base = p->sn;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == close) {
        p->pos++;
    } else {
        for (;;) {
            skip_ws(p);
            const char *key = NULL;
            size_t klen = 0;
            if (obj) {
                if (p->pos >= p->n || p->s[p->pos] != '"') return fail(p, "expected a key");
                SC_TRY(parse_string(p, &key, &klen));
                skip_ws(p);
                if (p->pos >= p->n || p->s[p->pos] != ':') return fail(p, "expected ':'");
                p->pos++;
                if (klen > UINT32_MAX) return fail(p, "key too long");
            }
            tj_val kid;
            memset(&kid, 0, sizeof kid);
            SC_TRY(parse_value(p, &kid, depth + 1));
            kid.key = key;
            kid.klen = (uint32_t)klen;
            tj_val *slot = stack_push(p);
            if (!slot) return sc_errf(p->err, SC_ENOMEM, "%s: out of memory parsing JSON", p->what);
            *slot = kid;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->n && p->s[p->pos] == close) {
                p->pos++;
                break;
            }
            return fail(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    size_t k = p->sn - base;
    v->type = obj ? TJ_OBJ : TJ_ARR;
    v->u.kids.n = k;
    v->u.kids.v = NULL;
    if (k > 0) {
        tj_val *dst = alloc_nodes(p, k);
        if (!dst) return sc_errf(p->err, SC_ENOMEM, "%s: out of memory parsing JSON", p->what);
        memcpy(dst, p->stack + base, k * sizeof *dst);
        v->u.kids.v = dst;
    }
    p->sn = base;
    return SC_OK;
}

static bool word(parser *p, const char *w) {
    size_t l = strlen(w);
    if (p->n - p->pos < l || memcmp(p->s + p->pos, w, l) != 0) return false;
    p->pos += l;
    return true;
}

static sc_status parse_value(parser *p, tj_val *v, int depth) {
    skip_ws(p);
    if (p->pos >= p->n) return fail(p, "unexpected end of input");
    char c = p->s[p->pos];
    switch (c) {
    case '{': return parse_container(p, v, depth, true);
    case '[': return parse_container(p, v, depth, false);
    case '"':
        v->type = TJ_STR;
        return parse_string(p, &v->u.str.s, &v->u.str.n);
    case 't': v->type = TJ_TRUE; return word(p, "true") ? SC_OK : fail(p, "bad literal");
    case 'f': v->type = TJ_FALSE; return word(p, "false") ? SC_OK : fail(p, "bad literal");
    case 'n': v->type = TJ_NULL; return word(p, "null") ? SC_OK : fail(p, "bad literal");
    default: break;
    }
    if (c != '-' && (c < '0' || c > '9')) return fail(p, "unexpected character");
    /* integers (the common case) by hand, others with strtod */
    size_t i = p->pos + (c == '-');
    int64_t iv = 0;
    bool small = true;
    size_t digits = 0;
    while (i < p->n && p->s[i] >= '0' && p->s[i] <= '9') {
        if (iv > (INT64_MAX - 9) / 10) small = false;
        else iv = iv * 10 + (p->s[i] - '0');
        i++;
        digits++;
    }
    if (digits == 0) return fail(p, "bad number");
    v->type = TJ_NUM;
    if (small && (i >= p->n || (p->s[i] != '.' && p->s[i] != 'e' && p->s[i] != 'E'))) {
        v->u.num = (double)(c == '-' ? -iv : iv);
        p->pos = i;
        return SC_OK;
    }
    char *end = NULL;
    v->u.num = strtod(p->s + p->pos, &end); /* the buffer is NUL-terminated */
    if (!end || end == p->s + p->pos || (size_t)(end - p->s) > p->n) return fail(p, "bad number");
    p->pos = (size_t)(end - p->s);
    return SC_OK;
}

sc_status tj_parse(const char *what, char *text, size_t len, tj_doc *doc, sc_err *err) {
    memset(doc, 0, sizeof *doc);
    text[len] = '\0';
    parser p = {.s = text, .n = len, .what = what, .err = err};
    sc_status st = parse_value(&p, &doc->root, 0);
    if (st == SC_OK) {
        skip_ws(&p);
        if (p.pos != p.n) st = fail(&p, "trailing characters after the value");
    }
    free(p.stack);
    doc->blocks = p.blocks;
    if (st != SC_OK) tj_free(doc);
    return st;
}

void tj_free(tj_doc *doc) {
    block *b = doc->blocks;
    while (b) {
        block *n = b->next;
        free(b);
        b = n;
    }
    memset(doc, 0, sizeof *doc);
}

const tj_val *tj_get(const tj_val *v, const char *key) {
    if (!v || v->type != TJ_OBJ) return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i < v->u.kids.n; i++) {
        const tj_val *k = &v->u.kids.v[i];
        if (k->klen == kl && memcmp(k->key, key, kl) == 0) return k;
    }
    return NULL;
}

const char *tj_str(const tj_val *v, size_t *len) {
    if (!v || v->type != TJ_STR) return NULL;
    if (len) *len = v->u.str.n;
    return v->u.str.s;
}

bool tj_str_is(const tj_val *v, const char *s) {
    size_t n;
    const char *x = tj_str(v, &n);
    return x && n == strlen(s) && memcmp(x, s, n) == 0;
}

bool tj_int(const tj_val *v, int64_t lo, int64_t hi, int64_t *out) {
    if (!v || v->type != TJ_NUM || !(v->u.num >= (double)lo && v->u.num <= (double)hi)) return false;
    double f = floor(v->u.num);
    if (f != v->u.num) return false;
    *out = (int64_t)f;
    return true;
}

bool tj_bool(const tj_val *obj, const char *key, bool def) {
    const tj_val *v = tj_get(obj, key);
    if (!v) return def;
    return v->type == TJ_TRUE ? true : v->type == TJ_FALSE ? false : def;
}
