/* data.c - text / JSONL / token-file datasets. */
#include "data.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filekind.h"

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

/* Drops leading whitespace-only lines and trailing whitespace (data.h). */
void sc_data_trim_doc(const char **s, size_t *n) {
    const char *p = *s;
    size_t len = *n;
    for (const char *nl; len > 0 && (nl = memchr(p, '\n', len)) && is_blank_line(p, (size_t)(nl - p));) {
        len -= (size_t)(nl - p) + 1;
        p = nl + 1;
    }
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
    *s = p;
    *n = len;
}

/* Called for each document; chat tells that doc is a rendered conversation. */
typedef sc_status (*doc_fn_ex)(void *user, const char *doc, size_t len, bool chat, sc_err *err);

/* Renders the "messages" array of one JSONL line. */
static sc_status render_messages(const char *path, size_t line, const cJSON *msgs, const sc_data_opts *o, char **out,
                                 size_t *len, sc_err *err) {
    int n = cJSON_GetArraySize(msgs);
    if (!cJSON_IsArray(msgs) || n <= 0)
        return sc_errf(err, SC_EFORMAT, "%s: line %zu: \"messages\" is not a non-empty array", path, line);
    if (o->chat == SC_CHAT_AUTO)
        return sc_errf(err, SC_EARG, "%s: line %zu: chat data needs a chat format: give --chat-format "
                       "(llama3, gemma, chatml, mistral); the tokenizer has no recognisable chat template", path, line);
    sc_chat_msg *m = sc_calloc((size_t)n, sizeof *m);
    if (!m) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    int k = 0;
    for (const cJSON *it = msgs->child; it; it = it->next, k++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(it, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsString(role) || !cJSON_IsString(content)) {
            free(m);
            return sc_errf(err, SC_EFORMAT, "%s: line %zu: message %d needs string \"role\" and \"content\"", path,
                           line, k);
        }
        m[k].role = role->valuestring;
        m[k].content = content->valuestring;
        m[k].content_len = strlen(content->valuestring);
    }
    sc_err e = {{0}};
    sc_status st = sc_chat_render(o->chat, m, (size_t)n, out, len, &e);
    free(m);
    if (st != SC_OK) return sc_errf(err, st, "%s: line %zu: %s", path, line, e.msg);
    return SC_OK;
}

static sc_status split_jsonl(const char *path, const char *text, size_t len, const sc_data_opts *o, int64_t max_docs,
                             doc_fn_ex fn, void *user, sc_err *err) {
    size_t pos = 0, line = 0;
    int64_t docs = 0;
    while (pos < len && (max_docs <= 0 || docs < max_docs)) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        line++;
        const char *s = text + pos;
        size_t n = end - pos;
        pos = end + 1;
        if (is_blank_line(s, n)) continue;
        cJSON *j = cJSON_ParseWithLength(s, n);
        if (!j) return sc_errf(err, SC_EFORMAT, "%s: line %zu: invalid JSON", path, line);
        const cJSON *msgs = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "messages") : NULL;
        const cJSON *t = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "text") : NULL;
        sc_status st = SC_OK;
        if (msgs) {
            char *doc = NULL;
            size_t dl = 0;
            st = render_messages(path, line, msgs, o, &doc, &dl, err);
            if (st == SC_OK && dl > 0) {
                st = fn(user, doc, dl, true, err);
                docs++;
            }
            free(doc);
        } else if (!cJSON_IsString(t)) {
            st = sc_errf(err, SC_EFORMAT, "%s: line %zu: no string field \"text\" (or \"messages\")", path, line);
        } else {
            size_t tl = strlen(t->valuestring);
            if (tl > 0) {
                st = fn(user, t->valuestring, tl, false, err);
                docs++;
            }
        }
        cJSON_Delete(j);
        if (st) return st;
    }
    return SC_OK;
}

static sc_status split_docs(const char *path, const char *text, size_t len, const sc_data_opts *o, int64_t max_docs,
                            doc_fn_ex fn, void *user, sc_err *err) {
    bool jsonl = o->kind == SC_DATA_JSONL;
    if (o->kind == SC_DATA_AUTO) {
        size_t pl = strlen(path);
        size_t i = 0;
        while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t')) i++;
        jsonl = (pl >= 6 && strcmp(path + pl - 6, ".jsonl") == 0) || (i < len && text[i] == '{');
    }
    if (jsonl) return split_jsonl(path, text, len, o, max_docs, fn, user, err);
    int64_t docs = 0;
    size_t pos = 0;
    const char *sep = o->separator && *o->separator ? o->separator : NULL;
    size_t sep_len = sep ? strlen(sep) : 0;
    while (pos < len && (max_docs <= 0 || docs < max_docs)) {
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
        sc_data_trim_doc(&d, &n);
        if (n == 0) continue;
        SC_TRY(fn(user, d, n, false, err));
        docs++;
    }
    return SC_OK;
}

typedef struct plain_ctx {
    sc_doc_fn fn;
    void *user;
} plain_ctx;

static sc_status plain_doc(void *user, const char *doc, size_t len, bool chat, sc_err *err) {
    (void)chat;
    plain_ctx *c = user;
    return c->fn(c->user, doc, len, err);
}

sc_status sc_data_split_text(const char *path, const char *text, size_t len, const sc_data_opts *o, sc_doc_fn fn,
                             void *user, sc_err *err) {
    plain_ctx c = {fn, user};
    return split_docs(path, text, len, o, o->max_docs, plain_doc, &c, err);
}

/* ---- shuffling, truncation, packing ---- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The permutation both shuffles use: perm[i] = the element placed at i. */
static void permutation(size_t *perm, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) perm[i] = i;
    uint64_t s = seed;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(splitmix64(&s) % i);
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

void sc_dataset_shuffle(sc_dataset *d, uint64_t seed) {
    size_t *perm = sc_calloc(d->n_seqs ? d->n_seqs : 1, sizeof *perm);
    sc_tokens *tmp = sc_calloc(d->n_seqs ? d->n_seqs : 1, sizeof *tmp);
    if (perm && tmp) {
        permutation(perm, d->n_seqs, seed);
        for (size_t i = 0; i < d->n_seqs; i++) tmp[i] = d->seqs[perm[i]];
        memcpy(d->seqs, tmp, d->n_seqs * sizeof *tmp);
    }
    free(perm);
    free(tmp);
}

void sc_dataset_truncate(sc_dataset *d, int64_t n) {
    if (n <= 0 || (uint64_t)n >= d->n_seqs) return;
    for (size_t i = (size_t)n; i < d->n_seqs; i++) {
        d->n_tokens -= d->seqs[i].n;
        sc_tokens_free(&d->seqs[i]);
    }
    d->n_seqs = (size_t)n;
}

sc_status sc_dataset_window(sc_dataset *d, int64_t skip, int64_t max, const char *what, sc_err *err) {
    if (skip < 0 || max < 0) return sc_errf(err, SC_EARG, "%s: negative document counts", what);
    if ((uint64_t)skip >= d->n_seqs && skip > 0)
        return sc_errf(err, SC_EFORMAT, "%s: --skip-docs %lld leaves none of its %zu documents", what, (long long)skip,
                       d->n_seqs);
    size_t k = (size_t)skip;
    for (size_t i = 0; i < k; i++) {
        d->n_tokens -= d->seqs[i].n;
        sc_tokens_free(&d->seqs[i]);
    }
    memmove(d->seqs, d->seqs + k, (d->n_seqs - k) * sizeof *d->seqs);
    d->n_seqs -= k;
    sc_dataset_truncate(d, max);
    return SC_OK;
}

sc_status sc_dataset_pack(sc_dataset *d, int64_t n, const char *what, sc_err *err) {
    if (n < 2) return sc_errf(err, SC_EARG, "--pack %lld: sequences need at least 2 tokens", (long long)n);
    size_t un = (size_t)n, k = d->n_tokens / un;
    if (k == 0)
        return sc_errf(err, SC_EFORMAT, "%s: %zu tokens in all do not fill one packed sequence of %lld", what,
                       d->n_tokens, (long long)n);
    sc_dataset p = {0};
    p.seqs = sc_calloc(k, sizeof *p.seqs);
    if (!p.seqs) return sc_errf(err, SC_ENOMEM, "%s: out of memory packing %zu sequences", what, k);
    size_t si = 0, ti = 0; /* read position: sequence, token */
    for (size_t q = 0; q < k; q++) {
        sc_tokens *t = &p.seqs[q];
        if (!(t->ids = malloc(un * sizeof *t->ids))) {
            p.n_seqs = q;
            sc_dataset_free(&p);
            return sc_errf(err, SC_ENOMEM, "%s: out of memory packing %zu sequences", what, k);
        }
        t->cap = un;
        while (t->n < un) {
            while (ti == d->seqs[si].n) {
                si++;
                ti = 0;
            }
            size_t take = d->seqs[si].n - ti < un - t->n ? d->seqs[si].n - ti : un - t->n;
            memcpy(t->ids + t->n, d->seqs[si].ids + ti, take * sizeof *t->ids);
            t->n += take;
            ti += take;
        }
    }
    p.n_seqs = k;
    p.n_tokens = k * un;
    sc_dataset_free(d);
    *d = p;
    return SC_OK;
}

/* Documents kept for shuffling: copies (chat renderings are temporary). */
typedef struct doc_item {
    char *s;
    size_t n;
    bool chat;
} doc_item;

typedef struct enc_ctx {
    const sc_tokenizer *tok;
    const sc_data_opts *o;
    sc_dataset *out;
    const char *path;
    doc_item *items; /* shuffling: documents collected first */
    size_t n_items, cap_items;
} enc_ctx;

static sc_status encode_one(enc_ctx *c, const char *doc, size_t len, bool chat, sc_err *err) {
    sc_tokens t = {0};
    unsigned flags = (c->o->add_bos ? SC_ENC_BOS : 0u) | (c->o->add_eos ? SC_ENC_EOS : 0u) |
                     (chat || c->o->parse_special ? SC_ENC_SPECIAL : 0u);
    sc_status st = sc_tokenizer_encode_ex(c->tok, doc, len, flags, &t, err);
    if (st == SC_OK) st = dataset_add(c->out, &t, c->path, err);
    sc_tokens_free(&t);
    return st;
}

static sc_status encode_doc(void *user, const char *doc, size_t len, bool chat, sc_err *err) {
    enc_ctx *c = user;
    if (!c->o->shuffle) return encode_one(c, doc, len, chat, err);
    if (c->n_items == c->cap_items) {
        size_t nc = c->cap_items ? c->cap_items * 2 : 256;
        doc_item *p = realloc(c->items, nc * sizeof *p);
        if (!p) return sc_errf(err, SC_ENOMEM, "%s: out of memory", c->path);
        c->items = p;
        c->cap_items = nc;
    }
    char *copy = malloc(len);
    if (!copy) return sc_errf(err, SC_ENOMEM, "%s: out of memory", c->path);
    memcpy(copy, doc, len);
    c->items[c->n_items++] = (doc_item){copy, len, chat};
    return SC_OK;
}

/* Shuffled: the same permutation as sc_dataset_shuffle, then max_docs. */
static sc_status encode_shuffled(enc_ctx *c, sc_err *err) {
    size_t n = c->n_items;
    size_t *perm = sc_calloc(n ? n : 1, sizeof *perm);
    if (!perm) return sc_errf(err, SC_ENOMEM, "%s: out of memory", c->path);
    permutation(perm, n, c->o->seed);
    if (c->o->max_docs > 0 && (uint64_t)c->o->max_docs < n) n = (size_t)c->o->max_docs;
    sc_status st = SC_OK;
    for (size_t i = 0; st == SC_OK && i < n; i++) {
        const doc_item *d = &c->items[perm[i]];
        st = encode_one(c, d->s, d->n, d->chat, err);
    }
    free(perm);
    return st;
}

/* What text and id files may be; a model, a tokenizer or a container given
 * as data is refused by name (its bytes would read as one odd document). */
#define DATA_KINDS (SC_FILE_BIT(SC_FILE_TEXT) | SC_FILE_BIT(SC_FILE_JSON) | SC_FILE_BIT(SC_FILE_EMPTY))

sc_status sc_data_load_text(const char *path, const sc_tokenizer *tok, const sc_data_opts *o, sc_dataset *out,
                            sc_err *err) {
    memset(out, 0, sizeof *out);
    if (!tok) return sc_errf(err, SC_EARG, "%s: text data needs a tokenizer (give --tokenizer, or use --tokens)", path);
    SC_TRY(sc_file_expect(path, DATA_KINDS, "text data", err));
    char *text;
    size_t len;
    SC_TRY(sc_read_file(path, SC_MAX_DATA_FILE, &text, &len, err));
    sc_data_opts oo = *o;
    if (oo.chat == SC_CHAT_AUTO) oo.chat = sc_chat_detect(sc_tokenizer_chat_template(tok));
    if (oo.skip_docs < 0 || oo.max_docs < 0 || oo.skip_docs > INT64_MAX / 2 || oo.max_docs > INT64_MAX / 2) {
        free(text);
        return sc_errf(err, SC_EARG, "%s: bad document counts", path);
    }
    if (oo.max_docs > 0) oo.max_docs += oo.skip_docs; /* read through the skipped ones; the window cuts them */
    enc_ctx c = {tok, &oo, out, path, NULL, 0, 0};
    sc_status st = split_docs(path, text, len, &oo, oo.shuffle ? 0 : oo.max_docs, encode_doc, &c, err);
    if (st == SC_OK && oo.shuffle) st = encode_shuffled(&c, err);
    for (size_t i = 0; i < c.n_items; i++) free(c.items[i].s);
    free(c.items);
    free(text);
    if (st == SC_OK && out->n_seqs == 0) st = sc_errf(err, SC_EFORMAT, "%s: no documents found (empty data)", path);
    if (st == SC_OK) st = sc_dataset_window(out, o->skip_docs, o->max_docs, path, err);
    if (st == SC_OK && oo.pack > 0) st = sc_dataset_pack(out, oo.pack, path, err);
    if (st) sc_dataset_free(out);
    return st;
}

sc_status sc_data_load_tokens(const char *path, int64_t vocab_size, int64_t max_docs, sc_dataset *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    SC_TRY(sc_file_expect(path, DATA_KINDS, "a file of token ids", err));
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
