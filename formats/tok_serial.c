/* tok_serial.c - a tokenizer's state (tok_serial.h) in a container: arrays
 * as sections, everything else as fields of a manifest object.
 *
 * Sections (docs/PACK.md):
 *   tokenizer.offsets  u32 [n + 1]  spans of the key spellings in tokenizer.text
 *   tokenizer.text     bytes        key spellings (what the encoder looks up)
 *   tokenizer.scores   f32 [n]      (when "scores" is true)
 *   tokenizer.types    i32 [n]      SC_TOKTYPE_*
 *   tokenizer.decode_ids/decode_offsets/decode_text   tokens whose decoded
 *                      text differs from the key (when "n_decode" > 0)
 *   tokenizer.merges   i32 [m, 2]   (left, right) ids in rank order (BPE)
 *   tokenizer.chat_template bytes   (when "chat_template" is true)
 * For the SentencePiece kind the first four are exactly what artifacts held
 * before the state existed, so older readers still load such artifacts. */
#include "tok_serial.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const NORM_NAMES[SC_TOK_NORM_COUNT] = {"nfc", "nfd", "nfkc", "nfkd",
                                                          "prepend", "replace", "lowercase", "strip"};
static const char *const PRE_NAMES[SC_TOK_PRE_COUNT] = {"split", "metaspace", "bytelevel", "digits"};
static const char *const SPLIT_NAMES[SC_TOK_SPLIT_COUNT] = {"isolated", "removed", "merged_with_previous",
                                                            "merged_with_next", "contiguous"};
static const char *const PREPEND_NAMES[SC_TOK_PREPEND_COUNT] = {"never", "first", "always"};

/* ---- writing ---- */

/* Whether s[0..n) is UTF-8 that a strict JSON reader takes, without NUL. */
static bool json_safe(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        uint8_t c = u[i];
        if (c == 0) return false;
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t l = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (l == 0 || l > n - i) return false;
        uint32_t cp = c & (0x7F >> l);
        for (size_t k = 1; k < l; k++) {
            if ((u[i + k] & 0xC0) != 0x80) return false;
            cp = (cp << 6) | (u[i + k] & 0x3F);
        }
        if ((l == 2 && cp < 0x80) || (l == 3 && cp < 0x800) || (l == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += l;
    }
    return true;
}

/* key: the string itself when JSON can hold it, else key_hex: its bytes in hex. */
static bool put_str(cJSON *o, const char *key, const char *s, size_t n) {
    bool hex = !json_safe(s, n);
    char *buf = malloc(hex ? 2 * n + 1 : n + 1), k[64];
    if (!buf) return false;
    if (hex) {
        for (size_t i = 0; i < n; i++) snprintf(buf + 2 * i, 3, "%02x", (uint8_t)s[i]);
        buf[2 * n] = '\0';
        snprintf(k, sizeof k, "%s_hex", key);
    } else {
        if (n) memcpy(buf, s, n);
        buf[n] = '\0';
        snprintf(k, sizeof k, "%s", key);
    }
    bool ok = cJSON_AddStringToObject(o, k, buf) != NULL;
    free(buf);
    return ok;
}

static cJSON *pipeline_json(const sc_tok_state *s) {
    cJSON *b = cJSON_CreateObject();
    if (!b) return NULL;
    cJSON_AddBoolToObject(b, "byte_level", s->byte_level);
    cJSON_AddBoolToObject(b, "byte_fallback", s->byte_fallback);
    cJSON_AddBoolToObject(b, "fuse_unk", s->fuse_unk);
    cJSON_AddBoolToObject(b, "ignore_merges", s->ignore_merges);
    cJSON_AddNumberToObject(b, "merges", (double)s->n_merges);
    cJSON *norms = cJSON_AddArrayToObject(b, "normalizers"), *pres = cJSON_AddArrayToObject(b, "pre_tokenizers");
    bool ok = norms && pres;
    for (int i = 0; ok && i < s->n_norm; i++) {
        const sc_tok_norm_state *m = &s->norm[i];
        cJSON *j = cJSON_CreateObject();
        ok = j && cJSON_AddItemToArray(norms, j);
        if (!ok) {
            cJSON_Delete(j);
            break;
        }
        cJSON_AddStringToObject(j, "type", NORM_NAMES[m->kind]);
        if (m->kind == SC_TOK_NORM_PREPEND) ok = put_str(j, "prepend", m->a, m->na);
        if (m->kind == SC_TOK_NORM_REPLACE) ok = put_str(j, "pattern", m->a, m->na) && put_str(j, "content", m->b, m->nb);
        if (m->kind == SC_TOK_NORM_STRIP) {
            cJSON_AddBoolToObject(j, "left", m->left);
            cJSON_AddBoolToObject(j, "right", m->right);
        }
    }
    for (int i = 0; ok && i < s->n_pre; i++) {
        const sc_tok_pre_state *p = &s->pre[i];
        cJSON *j = cJSON_CreateObject();
        ok = j && cJSON_AddItemToArray(pres, j);
        if (!ok) {
            cJSON_Delete(j);
            break;
        }
        cJSON_AddStringToObject(j, "type", PRE_NAMES[p->kind]);
        switch (p->kind) {
        case SC_TOK_PRE_SPLIT:
            ok = p->regex ? put_str(j, "regex", p->regex, p->nregex) : put_str(j, "string", p->str ? p->str : "", p->nstr);
            cJSON_AddStringToObject(j, "behavior", SPLIT_NAMES[p->behavior]);
            cJSON_AddBoolToObject(j, "invert", p->invert);
            break;
        case SC_TOK_PRE_METASPACE:
            ok = put_str(j, "replacement", p->str, p->nstr);
            cJSON_AddStringToObject(j, "prepend_scheme", PREPEND_NAMES[p->prepend]);
            cJSON_AddBoolToObject(j, "split", p->split);
            break;
        case SC_TOK_PRE_BYTELEVEL:
            cJSON_AddBoolToObject(j, "add_prefix_space", p->add_prefix_space);
            if (p->regex) ok = put_str(j, "regex", p->regex, p->nregex);
            break;
        default: cJSON_AddBoolToObject(j, "individual_digits", p->individual); break;
        }
    }
    if (!ok) {
        cJSON_Delete(b);
        return NULL;
    }
    return b;
}

static sc_status add_section(srt_writer *w, const char *name, srt_ct_dtype dt, uint32_t ndim, uint64_t d0, uint64_t d1,
                             const void *data, size_t bytes, int compress, sc_err *err) {
    uint64_t dims[2] = {d0, d1};
    static const char empty[1] = {0};
    if (srt_writer_add(w, name, dt, ndim, dims, data ? data : empty, bytes, compress))
        return sc_errf(err, SC_EIO, "%s", srt_writer_errmsg(w));
    return SC_OK;
}

sc_status sc_tok_serial_write(const sc_tokenizer *t, srt_writer *w, int compress, cJSON *tj, sc_err *err) {
    sc_tok_state s;
    SC_TRY(sc_tokenizer_state(t, &s, err));
    sc_status st = SC_OK;
    /* the JSON pieces first, so that an unsupported state writes nothing */
    bool sp = strcmp(s.kind, "sentencepiece") == 0, scores = sp; /* older readers need the scores of that kind */
    for (int64_t i = 0; !scores && i < s.n; i++) scores = s.scores[i] != 0.0f;
    for (int i = 0; st == SC_OK && i < s.n_pre; i++)
        if (s.pre[i].nregex > SC_TOK_MAX_STRING || s.pre[i].nstr > SC_TOK_MAX_STRING)
            st = sc_errf(err, SC_EUNSUPPORTED, "tokenizer: pre-tokenizer %d holds a string longer than %d bytes", i,
                         SC_TOK_MAX_STRING);
    for (int i = 0; st == SC_OK && i < s.n_norm; i++)
        if (s.norm[i].na > SC_TOK_MAX_STRING || s.norm[i].nb > SC_TOK_MAX_STRING)
            st = sc_errf(err, SC_EUNSUPPORTED, "tokenizer: normalizer %d holds a string longer than %d bytes", i,
                         SC_TOK_MAX_STRING);
    if (st == SC_OK && s.chat_template_len > SC_TOK_MAX_TEMPLATE)
        st = sc_errf(err, SC_EUNSUPPORTED, "tokenizer: the chat template is longer than %zu bytes", SC_TOK_MAX_TEMPLATE);
    cJSON *enc = NULL;
    if (st == SC_OK && s.encoder == SC_TOK_ENC_BPE && !(enc = pipeline_json(&s)))
        st = sc_errf(err, SC_ENOMEM, "tokenizer: out of memory");
    if (st == SC_OK && s.encoder == SC_TOK_ENC_SPM) {
        if (!(enc = cJSON_CreateObject())) st = sc_errf(err, SC_ENOMEM, "tokenizer: out of memory");
        cJSON_AddBoolToObject(enc, "add_prefix", s.spm_add_prefix);
        cJSON_AddBoolToObject(enc, "squash_spaces", s.spm_squash_spaces);
    }
    uint64_t n = (uint64_t)s.n, k = (uint64_t)s.n_text, m = (uint64_t)s.n_merges;
    if (st == SC_OK)
        st = add_section(w, "tokenizer.offsets", SRT_CT_U32, 1, n + 1, 0, s.key_off, (n + 1) * 4, compress, err);
    if (st == SC_OK) st = add_section(w, "tokenizer.text", SRT_CT_BYTES, 1, s.keys_len, 0, s.keys, s.keys_len, compress, err);
    if (st == SC_OK && scores) st = add_section(w, "tokenizer.scores", SRT_CT_F32, 1, n, 0, s.scores, n * 4, compress, err);
    if (st == SC_OK) st = add_section(w, "tokenizer.types", SRT_CT_I32, 1, n, 0, s.types, n * 4, compress, err);
    if (st == SC_OK && k > 0) {
        st = add_section(w, "tokenizer.decode_ids", SRT_CT_I32, 1, k, 0, s.text_ids, k * 4, compress, err);
        if (st == SC_OK)
            st = add_section(w, "tokenizer.decode_offsets", SRT_CT_U32, 1, k + 1, 0, s.text_off, (k + 1) * 4, compress, err);
        if (st == SC_OK)
            st = add_section(w, "tokenizer.decode_text", SRT_CT_BYTES, 1, s.texts_len, 0, s.texts, s.texts_len, compress,
                             err);
    }
    if (st == SC_OK && m > 0) st = add_section(w, "tokenizer.merges", SRT_CT_I32, 2, m, 2, s.merges, m * 8, compress, err);
    if (st == SC_OK && s.chat_template)
        st = add_section(w, "tokenizer.chat_template", SRT_CT_BYTES, 1, s.chat_template_len, 0, s.chat_template,
                         s.chat_template_len, compress, err);
    if (st == SC_OK) {
        cJSON_AddStringToObject(tj, "kind", s.kind);
        cJSON_AddNumberToObject(tj, "state", 1);
        cJSON_AddNumberToObject(tj, "vocab_size", (double)s.n);
        cJSON_AddNumberToObject(tj, "bos", s.bos);
        cJSON_AddNumberToObject(tj, "eos", s.eos);
        cJSON_AddNumberToObject(tj, "unk", s.unk);
        cJSON_AddBoolToObject(tj, "add_bos", s.add_bos_default);
        cJSON_AddBoolToObject(tj, "dummy_prefix", s.dummy_prefix);
        cJSON_AddBoolToObject(tj, "sp_space_in", s.sp_space_in);
        cJSON_AddBoolToObject(tj, "scores", scores);
        cJSON_AddNumberToObject(tj, "n_decode", (double)s.n_text);
        cJSON_AddBoolToObject(tj, "chat_template", s.chat_template != NULL);
        cJSON_AddStringToObject(tj, "encoder", s.encoder == SC_TOK_ENC_SPM ? "spm" : "bpe");
        cJSON_AddItemToObject(tj, s.encoder == SC_TOK_ENC_SPM ? "spm" : "bpe", enc);
        enc = NULL;
    }
    cJSON_Delete(enc);
    sc_tok_state_free(&s);
    return st;
}

/* ---- reading ---- */

typedef struct rd {
    srt_container *ct;
    const char *path;
    sc_err *err;
    char *owned[2 * SC_TOK_MAX_STEPS * 2]; /* decoded _hex strings */
    int n_owned;
} rd;

static sc_status fail(rd *r, const char *field, const char *why) {
    return sc_errf(r->err, SC_EFORMAT, "%s: manifest tokenizer.%s %s", r->path, field, why);
}

static sc_status get_bool(rd *r, const srt_json *o, const char *key, const char *field, bool *out) {
    const srt_json *v = srt_json_get(o, key);
    if (!srt_json_is(v, SRT_JSON_BOOL)) return fail(r, field, "is missing or not true/false");
    *out = v->v.b;
    return SC_OK;
}

static sc_status get_int(rd *r, const srt_json *o, const char *key, const char *field, int64_t lo, int64_t hi,
                         int64_t *out) {
    int64_t x = srt_json_int(srt_json_get(o, key), INT64_MIN); /* an integer, or an integral number in range */
    if (x == INT64_MIN || x < lo || x > hi) {
        char why[96];
        snprintf(why, sizeof why, "is missing or not an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return fail(r, field, why);
    }
    *out = x;
    return SC_OK;
}

static sc_status get_enum(rd *r, const srt_json *o, const char *key, const char *field, const char *const *names,
                          int count, int *out) {
    const char *v = srt_json_str(srt_json_get(o, key), NULL);
    for (int i = 0; v && i < count; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return SC_OK;
        }
    return fail(r, field, "is missing or not a known name");
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* key as a string, or key_hex as hex bytes; *s NULL when neither is there. */
static sc_status get_str(rd *r, const srt_json *o, const char *key, const char *field, const char **s, size_t *n) {
    char hk[64];
    snprintf(hk, sizeof hk, "%s_hex", key);
    const srt_json *v = srt_json_get(o, key), *h = srt_json_get(o, hk);
    *s = NULL;
    *n = 0;
    if (v && h) return fail(r, field, "is given twice (as text and as hex)");
    if (v) {
        if (!srt_json_is(v, SRT_JSON_STRING)) return fail(r, field, "is not a string");
        *s = v->v.s;
        *n = strlen(v->v.s); /* as written: text up to its first NUL (pieces with NULs are written as hex) */
    } else if (h) {
        const char *hs = srt_json_str(h, NULL);
        size_t hl = hs ? strlen(hs) : 1;
        if (hl % 2 || hl / 2 > SC_TOK_MAX_STRING) return fail(r, field, "(hex) is not an even-length string of hex digits");
        if (r->n_owned == (int)(sizeof r->owned / sizeof r->owned[0])) return fail(r, field, "is one hex string too many");
        char *b = malloc(hl / 2 + 1);
        if (!b) return sc_errf(r->err, SC_ENOMEM, "%s: out of memory", r->path);
        r->owned[r->n_owned++] = b;
        for (size_t i = 0; i < hl / 2; i++) {
            int a = hexval(hs[2 * i]), c = hexval(hs[2 * i + 1]);
            if (a < 0 || c < 0) return fail(r, field, "(hex) holds a character that is not a hex digit");
            b[i] = (char)(a * 16 + c);
        }
        *s = b;
        *n = hl / 2;
    }
    if (*n > SC_TOK_MAX_STRING) return fail(r, field, "is too long");
    return SC_OK;
}

static sc_status section(rd *r, const char *name, srt_ct_dtype dt, uint64_t count, const void **data, uint64_t *size) {
    const void *d;
    if (srt_container_get_typed(r->ct, name, dt, count, &d))
        return sc_errf(r->err, SC_EFORMAT, "%s", srt_container_errmsg(r->ct));
    if (size) {
        uint64_t sz;
        if (srt_container_get(r->ct, name, &d, &sz)) return sc_errf(r->err, SC_EFORMAT, "%s", srt_container_errmsg(r->ct));
        *size = sz;
    }
    *data = d;
    return SC_OK;
}

static sc_status read_pipeline(rd *r, const srt_json *b, sc_tok_state *s) {
    char f[96];
    int64_t v = 0;
    if (!srt_json_is(b, SRT_JSON_OBJECT)) return fail(r, "bpe", "is missing or not an object");
    SC_TRY(get_bool(r, b, "byte_level", "bpe.byte_level", &s->byte_level));
    SC_TRY(get_bool(r, b, "byte_fallback", "bpe.byte_fallback", &s->byte_fallback));
    SC_TRY(get_bool(r, b, "fuse_unk", "bpe.fuse_unk", &s->fuse_unk));
    SC_TRY(get_bool(r, b, "ignore_merges", "bpe.ignore_merges", &s->ignore_merges));
    SC_TRY(get_int(r, b, "merges", "bpe.merges", 0, SC_TOK_MAX_MERGES, &v));
    s->n_merges = v;
    const srt_json *norms = srt_json_get(b, "normalizers"), *pres = srt_json_get(b, "pre_tokenizers");
    if (!srt_json_is(norms, SRT_JSON_ARRAY) || srt_json_count(norms) > SC_TOK_MAX_STEPS)
        return fail(r, "bpe.normalizers", "is missing, not an array or longer than 16");
    if (!srt_json_is(pres, SRT_JSON_ARRAY) || srt_json_count(pres) > SC_TOK_MAX_STEPS)
        return fail(r, "bpe.pre_tokenizers", "is missing, not an array or longer than 16");
    int i = 0;
    for (; i < (int)srt_json_count(norms); i++) {
        const srt_json *j = srt_json_at(norms, (size_t)i);
        sc_tok_norm_state *m = &s->norm[i];
        snprintf(f, sizeof f, "bpe.normalizers[%d].type", i);
        SC_TRY(get_enum(r, j, "type", f, NORM_NAMES, SC_TOK_NORM_COUNT, &m->kind));
        if (m->kind == SC_TOK_NORM_PREPEND) {
            snprintf(f, sizeof f, "bpe.normalizers[%d].prepend", i);
            SC_TRY(get_str(r, j, "prepend", f, &m->a, &m->na));
            if (!m->a) return fail(r, f, "is missing");
        } else if (m->kind == SC_TOK_NORM_REPLACE) {
            snprintf(f, sizeof f, "bpe.normalizers[%d].pattern", i);
            SC_TRY(get_str(r, j, "pattern", f, &m->a, &m->na));
            if (!m->a) return fail(r, f, "is missing");
            snprintf(f, sizeof f, "bpe.normalizers[%d].content", i);
            SC_TRY(get_str(r, j, "content", f, &m->b, &m->nb));
            if (!m->b) return fail(r, f, "is missing");
        } else if (m->kind == SC_TOK_NORM_STRIP) {
            snprintf(f, sizeof f, "bpe.normalizers[%d].left", i);
            SC_TRY(get_bool(r, j, "left", f, &m->left));
            snprintf(f, sizeof f, "bpe.normalizers[%d].right", i);
            SC_TRY(get_bool(r, j, "right", f, &m->right));
        }
    }
    s->n_norm = i;
    for (i = 0; i < (int)srt_json_count(pres); i++) {
        const srt_json *j = srt_json_at(pres, (size_t)i);
        sc_tok_pre_state *p = &s->pre[i];
        snprintf(f, sizeof f, "bpe.pre_tokenizers[%d].type", i);
        SC_TRY(get_enum(r, j, "type", f, PRE_NAMES, SC_TOK_PRE_COUNT, &p->kind));
#define FIELD(name) (snprintf(f, sizeof f, "bpe.pre_tokenizers[%d].%s", i, name), f)
        switch (p->kind) {
        case SC_TOK_PRE_SPLIT:
            SC_TRY(get_str(r, j, "regex", FIELD("regex"), &p->regex, &p->nregex));
            SC_TRY(get_str(r, j, "string", FIELD("string"), &p->str, &p->nstr));
            if (!p->regex == !p->str) return fail(r, FIELD("regex"), "or .string: exactly one is needed");
            SC_TRY(get_enum(r, j, "behavior", FIELD("behavior"), SPLIT_NAMES, SC_TOK_SPLIT_COUNT, &p->behavior));
            SC_TRY(get_bool(r, j, "invert", FIELD("invert"), &p->invert));
            break;
        case SC_TOK_PRE_METASPACE:
            SC_TRY(get_str(r, j, "replacement", FIELD("replacement"), &p->str, &p->nstr));
            if (!p->str || p->nstr == 0) return fail(r, f, "is missing or empty");
            SC_TRY(get_enum(r, j, "prepend_scheme", FIELD("prepend_scheme"), PREPEND_NAMES, SC_TOK_PREPEND_COUNT,
                            &p->prepend));
            SC_TRY(get_bool(r, j, "split", FIELD("split"), &p->split));
            break;
        case SC_TOK_PRE_BYTELEVEL:
            SC_TRY(get_bool(r, j, "add_prefix_space", FIELD("add_prefix_space"), &p->add_prefix_space));
            SC_TRY(get_str(r, j, "regex", FIELD("regex"), &p->regex, &p->nregex));
            break;
        default: SC_TRY(get_bool(r, j, "individual_digits", FIELD("individual_digits"), &p->individual)); break;
        }
#undef FIELD
    }
    s->n_pre = i;
    return SC_OK;
}

/* Artifacts written before the state existed: the SentencePiece vocabulary
 * with default options, read exactly as it always was. */
static sc_status read_legacy(rd *r, const srt_json *tj, int64_t n, sc_tokenizer **out) {
    const void *off_p, *sc_p, *ty_p, *tx_p;
    uint64_t tx_size;
    if (srt_container_get_typed(r->ct, "tokenizer.offsets", SRT_CT_U32, (uint64_t)(n + 1), &off_p) ||
        srt_container_get_typed(r->ct, "tokenizer.scores", SRT_CT_F32, (uint64_t)n, &sc_p) ||
        srt_container_get_typed(r->ct, "tokenizer.types", SRT_CT_I32, (uint64_t)n, &ty_p) ||
        srt_container_get(r->ct, "tokenizer.text", &tx_p, &tx_size))
        return sc_errf(r->err, SC_EFORMAT, "%s", srt_container_errmsg(r->ct));
    const uint32_t *off = off_p;
    const char **pieces = malloc((size_t)n * sizeof *pieces);
    size_t *lens = malloc((size_t)n * sizeof *lens);
    sc_status st = SC_OK;
    if (!pieces || !lens) st = sc_errf(r->err, SC_ENOMEM, "%s: out of memory", r->path);
    for (int64_t i = 0; i < n && !st; i++) {
        if (off[i] > off[i + 1] || off[i + 1] > tx_size) {
            st = sc_errf(r->err, SC_EFORMAT, "%s: tokenizer.offsets[%lld] is out of range", r->path, (long long)i);
            break;
        }
        pieces[i] = (const char *)tx_p + off[i];
        lens[i] = off[i + 1] - off[i];
    }
    int64_t bos = -1, eos = -1;
    if (!st && (get_int(r, tj, "bos", "bos", -1, n - 1, &bos) || get_int(r, tj, "eos", "eos", -1, n - 1, &eos)))
        st = SC_EFORMAT;
    if (!st)
        st = sc_tokenizer_from_pieces(r->path, pieces, lens, sc_p, ty_p, n, (int32_t)bos, (int32_t)eos, -1, false, out,
                                      r->err);
    free(pieces);
    free(lens);
    return st;
}

static sc_status read_state(rd *r, const srt_json *tj, int64_t n, sc_tok_state *s) {
    int64_t v = 0;
    const void *d;
    uint64_t size = 0;
    s->n = n;
    SC_TRY(get_int(r, tj, "bos", "bos", -1, n - 1, &v));
    s->bos = (int32_t)v;
    SC_TRY(get_int(r, tj, "eos", "eos", -1, n - 1, &v));
    s->eos = (int32_t)v;
    SC_TRY(get_int(r, tj, "unk", "unk", -1, n - 1, &v));
    s->unk = (int32_t)v;
    SC_TRY(get_bool(r, tj, "add_bos", "add_bos", &s->add_bos_default));
    SC_TRY(get_bool(r, tj, "dummy_prefix", "dummy_prefix", &s->dummy_prefix));
    SC_TRY(get_bool(r, tj, "sp_space_in", "sp_space_in", &s->sp_space_in));
    bool scores = false, chat = false;
    SC_TRY(get_bool(r, tj, "scores", "scores", &scores));
    SC_TRY(get_bool(r, tj, "chat_template", "chat_template", &chat));
    SC_TRY(get_int(r, tj, "n_decode", "n_decode", 0, n, &v));
    s->n_text = v;
    static const char *const ENC[] = {"spm", "bpe"};
    int enc = 0;
    SC_TRY(get_enum(r, tj, "encoder", "encoder", ENC, 2, &enc));
    s->encoder = enc == 0 ? SC_TOK_ENC_SPM : SC_TOK_ENC_BPE;
    if (s->encoder == SC_TOK_ENC_SPM) {
        const srt_json *o = srt_json_get(tj, "spm");
        if (!srt_json_is(o, SRT_JSON_OBJECT)) return fail(r, "spm", "is missing or not an object");
        SC_TRY(get_bool(r, o, "add_prefix", "spm.add_prefix", &s->spm_add_prefix));
        SC_TRY(get_bool(r, o, "squash_spaces", "spm.squash_spaces", &s->spm_squash_spaces));
    } else {
        SC_TRY(read_pipeline(r, srt_json_get(tj, "bpe"), s));
    }
    /* sections: counts from the manifest, checked against each section's shape */
    SC_TRY(section(r, "tokenizer.offsets", SRT_CT_U32, (uint64_t)n + 1, &d, NULL));
    s->key_off = d;
    SC_TRY(section(r, "tokenizer.text", SRT_CT_BYTES, 0, &d, &size));
    s->keys = d ? d : ""; /* an empty section may have no address */
    s->keys_len = (size_t)size;
    if (scores) {
        SC_TRY(section(r, "tokenizer.scores", SRT_CT_F32, (uint64_t)n, &d, NULL));
        s->scores = d;
    }
    SC_TRY(section(r, "tokenizer.types", SRT_CT_I32, (uint64_t)n, &d, NULL));
    s->types = d;
    if (s->n_text > 0) {
        SC_TRY(section(r, "tokenizer.decode_ids", SRT_CT_I32, (uint64_t)s->n_text, &d, NULL));
        s->text_ids = d;
        SC_TRY(section(r, "tokenizer.decode_offsets", SRT_CT_U32, (uint64_t)s->n_text + 1, &d, NULL));
        s->text_off = d;
        SC_TRY(section(r, "tokenizer.decode_text", SRT_CT_BYTES, 0, &d, &size));
        s->texts = d ? d : "";
        s->texts_len = (size_t)size;
    }
    if (s->n_merges > 0) {
        SC_TRY(section(r, "tokenizer.merges", SRT_CT_I32, 2 * (uint64_t)s->n_merges, &d, NULL));
        s->merges = d;
    }
    if (chat) {
        SC_TRY(section(r, "tokenizer.chat_template", SRT_CT_BYTES, 0, &d, &size));
        s->chat_template = d ? d : "";
        s->chat_template_len = (size_t)size;
    }
    return SC_OK;
}

sc_status sc_tok_serial_read(srt_container *ct, const char *path, const srt_json *tj, int64_t max_vocab,
                             sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    const char *kind = srt_json_str(srt_json_get(tj, "kind"), NULL);
    const srt_json *state = srt_json_get(tj, "state");
    if (!kind) return SC_OK; /* none embedded */
    bool sp = strcmp(kind, "sentencepiece") == 0;
    if (!sp && strcmp(kind, "bpe-bytelevel") != 0 && strcmp(kind, "bpe-sentencepiece") != 0)
        return SC_OK; /* "none", or a kind this reader does not know */
    rd r = {.ct = ct, .path = path, .err = err};
    int64_t n = 0, version = 0;
    if (max_vocab < 1) max_vocab = 1;
    if (get_int(&r, tj, "vocab_size", "vocab_size", 1, max_vocab, &n)) return SC_EFORMAT; /* bounded by the model's */
    if (!state && sp) return read_legacy(&r, tj, n, out);
    SC_TRY(get_int(&r, tj, "state", "state", 1, INT32_MAX, &version));
    if (version != 1) return SC_OK; /* a newer state: none this reader can use */
    sc_tok_state s;
    memset(&s, 0, sizeof s);
    snprintf(s.kind, sizeof s.kind, "%s", kind);
    sc_status st = read_state(&r, tj, n, &s);
    if (st == SC_OK) st = sc_tokenizer_from_state(path, &s, out, err);
    for (int i = 0; i < r.n_owned; i++) free(r.owned[i]);
    return st;
}
