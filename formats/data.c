/* data.c - text / JSONL / token-file datasets. */
#include "data.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SC_MAX_DATA_FILE ((size_t)1 << 34) /* 16 GiB */

void sc_data_opts_default(sc_data_opts *o) {
    memset(o, 0, sizeof *o);
    o->add_bos = true;
}

void sc_dataset_free(sc_dataset *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_seqs; i++) sc_tokens_free(&d->seqs[i]);
    free(d->seqs);
    memset(d, 0, sizeof *d);
}

static sc_status dataset_add(sc_dataset *d, sc_tokens *t, const char *path, sc_err *err) {
    if ((d->n_seqs & (d->n_seqs - 1)) == 0) { /* grow at powers of two */
        size_t nc = d->n_seqs ? d->n_seqs * 2 : 16;
        sc_tokens *p = realloc(d->seqs, nc * sizeof *p);
        if (!p) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        d->seqs = p;
    }
    d->seqs[d->n_seqs++] = *t;
    d->n_tokens += t->n;
    memset(t, 0, sizeof *t);
    return SC_OK;
}

static bool is_blank_line(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* Strips leading and trailing whitespace-only lines and trailing newlines. */
static void trim_doc(const char **s, size_t *n) {
    const char *p = *s;
    size_t len = *n;
    while (len > 0 && (*p == '\n' || *p == '\r')) {
        p++;
        len--;
    }
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
    *s = p;
    *n = len;
}

static sc_status split_jsonl(const char *path, const char *text, size_t len, const sc_data_opts *o, sc_doc_fn fn,
                             void *user, sc_err *err) {
    size_t pos = 0, line = 0;
    int64_t docs = 0;
    while (pos < len && (o->max_docs <= 0 || docs < o->max_docs)) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        line++;
        const char *s = text + pos;
        size_t n = end - pos;
        pos = end + 1;
        if (is_blank_line(s, n)) continue;
        cJSON *j = cJSON_ParseWithLength(s, n);
        if (!j) return sc_errf(err, SC_EFORMAT, "%s: line %zu: invalid JSON", path, line);
        const cJSON *t = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "text") : NULL;
        if (!cJSON_IsString(t)) {
            cJSON_Delete(j);
            return sc_errf(err, SC_EFORMAT, "%s: line %zu: no string field \"text\"", path, line);
        }
        sc_status st = SC_OK;
        size_t tl = strlen(t->valuestring);
        if (tl > 0) {
            st = fn(user, t->valuestring, tl, err);
            docs++;
        }
        cJSON_Delete(j);
        if (st) return st;
    }
    return SC_OK;
}

sc_status sc_data_split_text(const char *path, const char *text, size_t len, const sc_data_opts *o, sc_doc_fn fn,
                             void *user, sc_err *err) {
    bool jsonl = o->kind == SC_DATA_JSONL;
    if (o->kind == SC_DATA_AUTO) {
        size_t pl = strlen(path);
        size_t i = 0;
        while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) i++;
        jsonl = (pl >= 6 && strcmp(path + pl - 6, ".jsonl") == 0) || (i < len && text[i] == '{');
    }
    if (jsonl) return split_jsonl(path, text, len, o, fn, user, err);
    int64_t docs = 0;
    size_t pos = 0;
    const char *sep = o->separator && *o->separator ? o->separator : NULL;
    size_t sep_len = sep ? strlen(sep) : 0;
    while (pos < len && (o->max_docs <= 0 || docs < o->max_docs)) {
        size_t start = pos, end;
        if (sep) {
            const char *hit = NULL;
            for (size_t k = pos; k + sep_len <= len; k++) {
                if (text[k] == sep[0] && memcmp(text + k, sep, sep_len) == 0) {
                    hit = text + k;
                    break;
                }
            }
            end = hit ? (size_t)(hit - text) : len;
            pos = hit ? end + sep_len : len;
        } else {
            /* a document ends at a blank line */
            end = len;
            size_t k = pos;
            bool seen_content = false;
            while (k < len) {
                const char *nl = memchr(text + k, '\n', len - k);
                size_t le = nl ? (size_t)(nl - text) : len;
                bool blank = is_blank_line(text + k, le - k);
                if (blank && seen_content) {
                    end = k;
                    break;
                }
                if (!blank) seen_content = true;
                k = le + 1;
            }
            pos = end < len ? end + 1 : len;
            if (end == len) pos = len;
        }
        const char *d = text + start;
        size_t n = end - start;
        trim_doc(&d, &n);
        if (n == 0) continue;
        SC_TRY(fn(user, d, n, err));
        docs++;
    }
    return SC_OK;
}

typedef struct enc_ctx {
    const sc_tokenizer *tok;
    const sc_data_opts *o;
    sc_dataset *out;
    const char *path;
} enc_ctx;

static sc_status encode_doc(void *user, const char *doc, size_t len, sc_err *err) {
    enc_ctx *c = user;
    sc_tokens t = {0};
    sc_status st = sc_tokenizer_encode(c->tok, doc, len, c->o->add_bos, c->o->add_eos, &t, err);
    if (st == SC_OK) st = dataset_add(c->out, &t, c->path, err);
    sc_tokens_free(&t);
    return st;
}

sc_status sc_data_load_text(const char *path, const sc_tokenizer *tok, const sc_data_opts *o, sc_dataset *out,
                            sc_err *err) {
    memset(out, 0, sizeof *out);
    if (!tok) return sc_errf(err, SC_EARG, "%s: text data needs a tokenizer (give -t, or use --tokens)", path);
    char *text;
    size_t len;
    SC_TRY(sc_read_file(path, SC_MAX_DATA_FILE, &text, &len, err));
    enc_ctx c = {tok, o, out, path};
    sc_status st = sc_data_split_text(path, text, len, o, encode_doc, &c, err);
    free(text);
    if (st == SC_OK && out->n_seqs == 0) st = sc_errf(err, SC_EFORMAT, "%s: no documents found (empty data)", path);
    if (st) sc_dataset_free(out);
    return st;
}

sc_status sc_data_load_tokens(const char *path, int64_t vocab_size, int64_t max_docs, sc_dataset *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    char *text;
    size_t len;
    SC_TRY(sc_read_file(path, SC_MAX_DATA_FILE, &text, &len, err));
    sc_status st = SC_OK;
    size_t pos = 0, line = 0;
    sc_tokens cur = {0};
    while (pos < len && (max_docs <= 0 || (int64_t)out->n_seqs < max_docs)) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        line++;
        for (size_t k = pos; k < end;) {
            char ch = text[k];
            if (ch == ' ' || ch == '\t' || ch == '\r' || ch == ',') {
                k++;
                continue;
            }
            if (ch < '0' || ch > '9') {
                st = sc_errf(err, SC_EFORMAT, "%s: line %zu, column %zu: expected a token id, found '%c'", path, line,
                             k - pos + 1, (ch >= 32 && ch < 127) ? ch : '?');
                goto done;
            }
            int64_t v = 0;
            size_t col = k - pos + 1;
            while (k < end && text[k] >= '0' && text[k] <= '9') {
                v = v * 10 + (text[k] - '0');
                if (v >= vocab_size) {
                    while (k < end && text[k] >= '0' && text[k] <= '9') k++;
                    st = sc_errf(err, SC_ERANGE, "%s: line %zu, column %zu: token id is beyond the vocabulary (%lld)",
                                 path, line, col, (long long)vocab_size);
                    goto done;
                }
                k++;
            }
            if (sc_tokens_push(&cur, (int32_t)v)) {
                st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
                goto done;
            }
        }
        if (cur.n > 0 && (st = dataset_add(out, &cur, path, err))) goto done;
        pos = end + 1;
    }
    if (out->n_seqs == 0) st = sc_errf(err, SC_EFORMAT, "%s: no token sequences found (empty data)", path);
done:
    sc_tokens_free(&cur);
    free(text);
    if (st) sc_dataset_free(out);
    return st;
}
