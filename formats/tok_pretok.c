/* tok_pretok.c - the text pipeline of merge-rank BPE: normalizers (Unicode
 * normal forms through utf8proc, prepend, replace, lowercase, strip) and
 * pre-tokenizers (regex or literal Split with Hugging Face's delimiter
 * behaviours, Metaspace, ByteLevel), regexes through PCRE2. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_bpe.h"

const char *const TOK_RE_GPT2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char *const RE_LLAMA3 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
                                     " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *const RE_QWEN2 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                                    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

void tok_cfg_free(tok_bpe_cfg *c) {
    for (int i = 0; i < c->n_norm; i++) {
        free(c->norm[i].a);
        free(c->norm[i].b);
    }
    for (int i = 0; i < c->n_pre; i++) {
        pcre2_code_free(c->pre[i].re);
        free(c->pre[i].pat);
        free(c->pre[i].str);
    }
    c->n_norm = c->n_pre = 0;
}

void tok_work_free(tok_work *w) {
    free(w->buf.p);
    free(w->tmp.p);
    free(w->sp);
    free(w->sp2);
    pcre2_match_data_free(w->md);
    memset(w, 0, sizeof *w);
}

sc_status tok_regex_compile(const char *what, const char *pattern, size_t len, void **out, sc_err *err) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo,
                                   NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return sc_errf(err, SC_EUNSUPPORTED, "%s: pre-tokenizer regex does not compile at offset %zu: %s", what,
                       (size_t)eo, (const char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* without JIT the interpreter runs it */
    *out = re;
    return SC_OK;
}

sc_status tok_pre_regex(tok_pre *p, const char *what, const char *pattern, size_t len, sc_err *err) {
    if (!(p->pat = malloc(len + 1))) return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    if (len) memcpy(p->pat, pattern, len);
    p->pat[len] = '\0';
    p->npat = len;
    return tok_regex_compile(what, pattern, len, &p->re, err);
}

static sc_status add_split(tok_bpe_cfg *c, const char *what, const char *re, int behavior, sc_err *err) {
    if (c->n_pre >= TOK_MAX_STEPS) return sc_errf(err, SC_EUNSUPPORTED, "%s: too many pre-tokenizer steps", what);
    tok_pre *p = &c->pre[c->n_pre];
    memset(p, 0, sizeof *p);
    p->kind = TOK_PRE_SPLIT;
    p->behavior = behavior;
    c->n_pre++; /* counted first so that tok_cfg_free frees what a failure leaves */
    return tok_pre_regex(p, what, re, strlen(re), err);
}

sc_status tok_cfg_add_known_pre(tok_bpe_cfg *c, const char *what, const char *name, sc_err *err) {
    static const char *const L3[] = {"llama3", "llama-bpe", "llama-v3", "smaug-bpe"};
    static const char *const G2[] = {"gpt2", "gpt-2", "mpt", "olmo"};
    static const char *const SC[] = {"starcoder", "refact", "command-r", "smollm"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(name, L3[i]) == 0) return add_split(c, what, RE_LLAMA3, TOK_SPLIT_ISOLATED, err);
        if (strcmp(name, G2[i]) == 0) return add_split(c, what, TOK_RE_GPT2, TOK_SPLIT_ISOLATED, err);
        if (strcmp(name, SC[i]) == 0) {
            SC_TRY(add_split(c, what, "\\p{N}", TOK_SPLIT_ISOLATED, err));
            return add_split(c, what, TOK_RE_GPT2, TOK_SPLIT_ISOLATED, err);
        }
    }
    if (strcmp(name, "qwen2") == 0) return add_split(c, what, RE_QWEN2, TOK_SPLIT_ISOLATED, err);
    if (strcmp(name, "default") == 0) { /* llama.cpp's fallback for unnamed byte-level vocabularies */
        static const char *const D[] = {"[\\p{P}\\$\\+<=>\\^~\\|]+",
                                        "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
                                        "\\p{N}+", "[0-9][0-9][0-9]"};
        for (size_t i = 0; i < 4; i++) SC_TRY(add_split(c, what, D[i], TOK_SPLIT_ISOLATED, err));
        return SC_OK;
    }
    return sc_errf(err, SC_EUNSUPPORTED,
                   "%s: tokenizer.ggml.pre '%.64s' is not supported (default, gpt2, llama3/llama-bpe, qwen2, "
                   "starcoder, refact, command-r, smollm, mpt, olmo)", what, name);
}

/* ---- normalizers ---- */

static bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((uint8_t)s[i] >= 0x80) return false;
    return true;
}

static void swap_buf(tok_work *w) {
    tok_buf t = w->buf;
    w->buf = w->tmp;
    w->tmp = t;
}

static bool is_ws_cp(int32_t cp) {
    if (cp == ' ' || (cp >= 9 && cp <= 13)) return true;
    return cp >= 0x80 && utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

static sc_status normalize(const tok_norm *nm, tok_work *w, sc_err *err) {
    tok_buf *b = &w->buf, *o = &w->tmp;
    o->n = 0;
    switch (nm->kind) {
    case TOK_NORM_NFC: case TOK_NORM_NFD: case TOK_NORM_NFKC: case TOK_NORM_NFKD: {
        if (all_ascii(b->p, b->n)) return SC_OK;
        utf8proc_option_t opt = UTF8PROC_STABLE;
        opt |= (nm->kind == TOK_NORM_NFC || nm->kind == TOK_NORM_NFKC) ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
        if (nm->kind == TOK_NORM_NFKC || nm->kind == TOK_NORM_NFKD) opt |= UTF8PROC_COMPAT;
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)b->p, (utf8proc_ssize_t)b->n, &dst, opt);
        if (r < 0) return SC_OK; /* invalid UTF-8: leave the bytes as they are */
        bool ok = tok_buf_put(o, dst, (size_t)r);
        free(dst);
        if (!ok) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
        break;
    }
    case TOK_NORM_PREPEND:
        if (b->n == 0) return SC_OK;
        if (!tok_buf_put(o, nm->a, nm->na) || !tok_buf_put(o, b->p, b->n))
            return sc_errf(err, SC_ENOMEM, "encode: out of memory");
        break;
    case TOK_NORM_REPLACE:
        for (size_t i = 0; i < b->n;) {
            if (nm->na > 0 && b->n - i >= nm->na && memcmp(b->p + i, nm->a, nm->na) == 0) {
                if (!tok_buf_put(o, nm->b, nm->nb)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
                i += nm->na;
            } else {
                if (!tok_buf_put(o, b->p + i, 1)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
                i++;
            }
        }
        break;
    case TOK_NORM_LOWERCASE:
    case TOK_NORM_STRIP: {
        size_t i = 0, end = b->n;
        if (nm->kind == TOK_NORM_STRIP) {
            utf8proc_int32_t cp;
            while (i < end) {
                utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)b->p + i, (utf8proc_ssize_t)(end - i), &cp);
                if (!nm->left || l <= 0 || !is_ws_cp(cp)) break;
                i += (size_t)l;
            }
            while (nm->right && end > i) { /* back up over one character at a time */
                size_t s = end - 1;
                while (s > i && ((uint8_t)b->p[s] & 0xC0) == 0x80) s--;
                utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)b->p + s, (utf8proc_ssize_t)(end - s), &cp);
                if (l <= 0 || (size_t)l != end - s || !is_ws_cp(cp)) break;
                end = s;
            }
            if (!tok_buf_put(o, b->p + i, end - i)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
            break;
        }
        while (i < end) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)b->p + i, (utf8proc_ssize_t)(end - i), &cp);
            utf8proc_uint8_t enc[4];
            if (l <= 0) { /* an invalid byte stays as it is */
                if (!tok_buf_put(o, b->p + i, 1)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
                i++;
                continue;
            }
            utf8proc_ssize_t k = utf8proc_encode_char(utf8proc_tolower(cp), enc);
            if (!tok_buf_put(o, enc, (size_t)k)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
            i += (size_t)l;
        }
        break;
    }
    default: return SC_OK;
    }
    swap_buf(w);
    return SC_OK;
}

/* ---- splitting ---- */

typedef struct emitter {
    tok_work *w;
    int behavior;
    bool invert, prev_match, pending;
    tok_span pend;
    size_t first; /* first output of the current word: merging never crosses words */
} emitter;

static bool out_push(tok_work *w, size_t off, size_t len) {
    if (w->n2 == w->cap2) {
        size_t nc = w->cap2 ? w->cap2 * 2 : 256;
        tok_span *p = realloc(w->sp2, nc * sizeof *p);
        if (!p) return false;
        w->sp2 = p;
        w->cap2 = nc;
    }
    w->sp2[w->n2].off = off;
    w->sp2[w->n2].len = len;
    w->n2++;
    return true;
}

static bool emit(emitter *e, size_t off, size_t len, bool is_match) {
    tok_work *w = e->w;
    if (len == 0) return true;
    if (e->invert) is_match = !is_match;
    bool ok = true, have_last = w->n2 > e->first;
    switch (e->behavior) {
    case TOK_SPLIT_REMOVED:
        if (!is_match) ok = out_push(w, off, len);
        break;
    case TOK_SPLIT_PREV:
        if (is_match && !e->prev_match && have_last) w->sp2[w->n2 - 1].len = off + len - w->sp2[w->n2 - 1].off;
        else ok = out_push(w, off, len);
        break;
    case TOK_SPLIT_CONTIGUOUS:
        if (is_match && e->prev_match && have_last) w->sp2[w->n2 - 1].len = off + len - w->sp2[w->n2 - 1].off;
        else ok = out_push(w, off, len);
        break;
    case TOK_SPLIT_NEXT:
        if (e->pending) {
            e->pending = false;
            if (!is_match) return out_push(w, e->pend.off, off + len - e->pend.off);
            ok = out_push(w, e->pend.off, e->pend.len);
        }
        if (is_match) {
            e->pending = true;
            e->pend.off = off;
            e->pend.len = len;
        } else {
            ok = ok && out_push(w, off, len);
        }
        break;
    default: ok = out_push(w, off, len);
    }
    e->prev_match = is_match;
    return ok;
}

static bool emit_end(emitter *e) {
    bool ok = true;
    if (e->pending) ok = out_push(e->w, e->pend.off, e->pend.len);
    e->pending = e->prev_match = false;
    e->first = e->w->n2;
    return ok;
}

/* Splits every word on the regex or literal of p. */
static sc_status split_words(const tok_pre *p, int behavior, bool invert, tok_work *w, sc_err *err) {
    pcre2_code *re = p->re;
    if (re && !w->md && !(w->md = pcre2_match_data_create(4, NULL)))
        return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    w->n2 = 0;
    emitter e = {w, behavior, invert, false, false, {0, 0}, 0};
    for (size_t k = 0; k < w->n; k++) {
        const char *s = w->buf.p + w->sp[k].off;
        size_t base = w->sp[k].off, len = w->sp[k].len, pos = 0, last = 0;
        while (pos < len) {
            size_t ms, me;
            if (re) {
                int rc = pcre2_jit_match(re, (PCRE2_SPTR)s, len, pos, 0, w->md, NULL);
                if (rc == PCRE2_ERROR_JIT_BADOPTION || rc == PCRE2_ERROR_JIT_STACKLIMIT)
                    rc = pcre2_match(re, (PCRE2_SPTR)s, len, pos, PCRE2_NO_JIT, w->md, NULL);
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) return sc_errf(err, SC_EFORMAT, "encode: pre-tokenizer regex failed (PCRE2 error %d)", rc);
                PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
                ms = ov[0];
                me = ov[1];
            } else {
                const char *hit = NULL;
                for (size_t i = pos; p->nstr > 0 && i + p->nstr <= len; i++)
                    if (s[i] == p->str[0] && memcmp(s + i, p->str, p->nstr) == 0) {
                        hit = s + i;
                        break;
                    }
                if (!hit) break;
                ms = (size_t)(hit - s);
                me = ms + p->nstr;
            }
            if (me <= ms) { /* empty match: step over one character */
                pos = ms + tok_utf8_len(s + ms, len - ms);
                continue;
            }
            if (!emit(&e, base + last, ms - last, false) || !emit(&e, base + ms, me - ms, true)) goto oom;
            last = pos = me;
        }
        if (!emit(&e, base + last, len - last, false) || !emit_end(&e)) goto oom;
    }
    tok_span *t = w->sp;
    w->sp = w->sp2;
    w->sp2 = t;
    size_t c = w->cap;
    w->cap = w->cap2;
    w->cap2 = c;
    w->n = w->n2;
    return SC_OK;
oom:
    return sc_errf(err, SC_ENOMEM, "encode: out of memory");
}

/* Rewrites each word into a new buffer: ' ' -> rep (Metaspace) and an
 * optional prefix, then makes the words point there. */
static sc_status rewrite_words(const tok_pre *p, unsigned seg, tok_work *w, sc_err *err) {
    tok_buf *o = &w->tmp;
    o->n = 0;
    bool meta = p->kind == TOK_PRE_METASPACE;
    const char *rep = meta ? p->str : " ";
    size_t nrep = meta ? p->nstr : 1;
    for (size_t k = 0; k < w->n; k++) {
        const char *s = w->buf.p + w->sp[k].off;
        size_t len = w->sp[k].len, start = o->n;
        bool starts_rep = meta ? (len > 0 && s[0] == ' ') || (len >= nrep && memcmp(s, rep, nrep) == 0)
                               : len > 0 && s[0] == ' ';
        bool prefix;
        if (meta)
            prefix = !starts_rep && (p->prepend == TOK_PREPEND_ALWAYS ||
                                     (p->prepend == TOK_PREPEND_FIRST && (seg & TOK_SEG_FIRST) && w->sp[k].off == 0));
        else
            prefix = p->add_prefix_space && !starts_rep;
        if (prefix && !tok_buf_put(o, rep, nrep)) goto oom;
        for (size_t i = 0; i < len; i++) {
            bool ok = meta && s[i] == ' ' ? tok_buf_put(o, rep, nrep) : tok_buf_put(o, s + i, 1);
            if (!ok) goto oom;
        }
        w->sp[k].off = start;
        w->sp[k].len = o->n - start;
    }
    swap_buf(w);
    return SC_OK;
oom:
    return sc_errf(err, SC_ENOMEM, "encode: out of memory");
}

sc_status tok_pipeline_run(const tok_bpe_cfg *c, const char *s, size_t n, unsigned seg, tok_work *w, sc_err *err) {
    w->buf.n = 0;
    if (!tok_buf_put(&w->buf, s, n)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    for (int i = 0; i < c->n_norm; i++) SC_TRY(normalize(&c->norm[i], w, err));
    w->n = 0;
    if (w->buf.n == 0) return SC_OK;
    if (w->cap == 0) {
        w->sp = malloc(64 * sizeof *w->sp);
        if (!w->sp) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
        w->cap = 64;
    }
    w->sp[0].off = 0;
    w->sp[0].len = w->buf.n;
    w->n = 1;
    for (int i = 0; i < c->n_pre; i++) {
        const tok_pre *p = &c->pre[i];
        switch (p->kind) {
        case TOK_PRE_SPLIT: SC_TRY(split_words(p, p->behavior, p->invert, w, err)); break;
        case TOK_PRE_METASPACE: {
            SC_TRY(rewrite_words(p, seg, w, err));
            if (p->split) {
                tok_pre lit = *p;
                lit.re = NULL;
                SC_TRY(split_words(&lit, TOK_SPLIT_NEXT, false, w, err));
            }
            break;
        }
        case TOK_PRE_BYTELEVEL:
            if (p->add_prefix_space) SC_TRY(rewrite_words(p, seg, w, err));
            if (p->re) SC_TRY(split_words(p, TOK_SPLIT_ISOLATED, false, w, err));
            break;
        default: break;
        }
    }
    return SC_OK;
}
