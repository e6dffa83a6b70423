/* tok_hf.c - Hugging Face tokenizer.json (model type BPE) and the
 * tokenizer_config.json beside it (BOS/EOS, add_bos_token, chat_template). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_bpe.h"
#include "tok_json.h"

#define HF_MAX_FILE ((size_t)1 << 30)

typedef struct hf {
    const char *path;
    sc_err *err;
    tok_bpe_cfg cfg;
    bool byte_level, sp_text, dummy_prefix;
} hf;

static sc_status bad(hf *h, const char *field, const char *why) {
    return sc_errf(h->err, SC_EFORMAT, "%s: %s %s", h->path, field, why);
}

static char *dup_bytes(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* ---- normalizer / pre_tokenizer / decoder ---- */

static sc_status add_norm(hf *h, int kind, const char *a, size_t na, const char *b, size_t nb) {
    if (h->cfg.n_norm >= TOK_MAX_STEPS) return sc_errf(h->err, SC_EUNSUPPORTED, "%s: too many normalizers", h->path);
    tok_norm *n = &h->cfg.norm[h->cfg.n_norm];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    if (a && !(n->a = dup_bytes(a, na))) return sc_errf(h->err, SC_ENOMEM, "%s: out of memory", h->path);
    n->na = na;
    if (b && !(n->b = dup_bytes(b, nb))) return sc_errf(h->err, SC_ENOMEM, "%s: out of memory", h->path);
    n->nb = nb;
    h->cfg.n_norm++;
    return SC_OK;
}

static const char *pattern_of(const tj_val *v, bool *regex, size_t *len) {
    const tj_val *p = tj_get(v, "pattern");
    const char *s = tj_str(tj_get(p, "String"), len);
    *regex = false;
    if (s) return s;
    *regex = true;
    return tj_str(tj_get(p, "Regex"), len);
}

static sc_status parse_normalizer(hf *h, const tj_val *v, int depth) {
    if (!v || v->type == TJ_NULL) return SC_OK;
    const char *type = tj_str(tj_get(v, "type"), NULL);
    if (!type || depth > 8) return bad(h, "normalizer", "has no \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const tj_val *list = tj_get(v, "normalizers");
        if (!list || list->type != TJ_ARR) return bad(h, "normalizer Sequence", "has no \"normalizers\" array");
        for (size_t i = 0; i < list->u.kids.n; i++) SC_TRY(parse_normalizer(h, &list->u.kids.v[i], depth + 1));
        return SC_OK;
    }
    static const char *const NF[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int k = 0; k < 4; k++)
        if (strcmp(type, NF[k]) == 0) return add_norm(h, TOK_NORM_NFC + k, NULL, 0, NULL, 0);
    if (strcmp(type, "Lowercase") == 0) return add_norm(h, TOK_NORM_LOWERCASE, NULL, 0, NULL, 0);
    if (strcmp(type, "Strip") == 0) {
        SC_TRY(add_norm(h, TOK_NORM_STRIP, NULL, 0, NULL, 0));
        h->cfg.norm[h->cfg.n_norm - 1].left = tj_bool(v, "strip_left", true);
        h->cfg.norm[h->cfg.n_norm - 1].right = tj_bool(v, "strip_right", true);
        return SC_OK;
    }
    if (strcmp(type, "Prepend") == 0) {
        size_t n;
        const char *s = tj_str(tj_get(v, "prepend"), &n);
        if (!s) return bad(h, "normalizer Prepend", "has no string \"prepend\"");
        return add_norm(h, TOK_NORM_PREPEND, s, n, NULL, 0);
    }
    if (strcmp(type, "Replace") == 0) {
        size_t n, m;
        bool regex;
        const char *pat = pattern_of(v, &regex, &n), *content = tj_str(tj_get(v, "content"), &m);
        if (!pat || !content) return bad(h, "normalizer Replace", "needs a pattern and a string \"content\"");
        if (regex) return sc_errf(h->err, SC_EUNSUPPORTED, "%s: normalizer Replace with a Regex pattern is not supported", h->path);
        return add_norm(h, TOK_NORM_REPLACE, pat, n, content, m);
    }
    return sc_errf(h->err, SC_EUNSUPPORTED, "%s: normalizer '%.40s' is not supported", h->path, type);
}

static tok_pre *new_pre(hf *h, int kind) {
    if (h->cfg.n_pre >= TOK_MAX_STEPS) return NULL;
    tok_pre *p = &h->cfg.pre[h->cfg.n_pre++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    return p;
}

static sc_status pre_regex(hf *h, const char *re, size_t n, int behavior, bool invert) {
    tok_pre *p = new_pre(h, TOK_PRE_SPLIT);
    if (!p) return sc_errf(h->err, SC_EUNSUPPORTED, "%s: too many pre-tokenizers", h->path);
    p->behavior = behavior;
    p->invert = invert;
    return tok_pre_regex(p, h->path, re, n, h->err);
}

static sc_status parse_pre(hf *h, const tj_val *v, int depth) {
    if (!v || v->type == TJ_NULL) return SC_OK;
    const char *type = tj_str(tj_get(v, "type"), NULL);
    if (!type || depth > 8) return bad(h, "pre_tokenizer", "has no \"type\"");
    if (h->byte_level)
        return sc_errf(h->err, SC_EUNSUPPORTED, "%s: pre-tokenizer '%.40s' after ByteLevel is not supported", h->path, type);
    if (strcmp(type, "Sequence") == 0) {
        const tj_val *list = tj_get(v, "pretokenizers");
        if (!list || list->type != TJ_ARR) return bad(h, "pre_tokenizer Sequence", "has no \"pretokenizers\" array");
        for (size_t i = 0; i < list->u.kids.n; i++) SC_TRY(parse_pre(h, &list->u.kids.v[i], depth + 1));
        return SC_OK;
    }
    if (strcmp(type, "Split") == 0) {
        static const char *const B[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
        const tj_val *bv = tj_get(v, "behavior");
        int behavior = -1;
        for (int k = 0; k < 5; k++)
            if (tj_str_is(bv, B[k])) behavior = k;
        size_t n;
        bool regex;
        const char *pat = pattern_of(v, &regex, &n);
        if (!pat || behavior < 0) return bad(h, "pre_tokenizer Split", "needs a pattern and a known \"behavior\"");
        if (regex) return pre_regex(h, pat, n, behavior, tj_bool(v, "invert", false));
        tok_pre *p = new_pre(h, TOK_PRE_SPLIT);
        if (!p) return sc_errf(h->err, SC_EUNSUPPORTED, "%s: too many pre-tokenizers", h->path);
        p->behavior = behavior;
        p->invert = tj_bool(v, "invert", false);
        p->nstr = n;
        return (p->str = dup_bytes(pat, n)) ? SC_OK : sc_errf(h->err, SC_ENOMEM, "%s: out of memory", h->path);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        tok_pre *p = new_pre(h, TOK_PRE_BYTELEVEL);
        if (!p) return sc_errf(h->err, SC_EUNSUPPORTED, "%s: too many pre-tokenizers", h->path);
        p->add_prefix_space = tj_bool(v, "add_prefix_space", true);
        h->byte_level = true;
        if (tj_bool(v, "use_regex", true)) return tok_pre_regex(p, h->path, TOK_RE_GPT2, strlen(TOK_RE_GPT2), h->err);
        return SC_OK;
    }
    if (strcmp(type, "Metaspace") == 0) {
        size_t n;
        const char *rep = tj_str(tj_get(v, "replacement"), &n);
        if (!rep || n == 0) return bad(h, "pre_tokenizer Metaspace", "has no \"replacement\"");
        tok_pre *p = new_pre(h, TOK_PRE_METASPACE);
        if (!p) return sc_errf(h->err, SC_EUNSUPPORTED, "%s: too many pre-tokenizers", h->path);
        const tj_val *ps = tj_get(v, "prepend_scheme");
        p->prepend = tj_str_is(ps, "first") ? TOK_PREPEND_FIRST : tj_str_is(ps, "never") ? TOK_PREPEND_NEVER
                     : ps ? TOK_PREPEND_ALWAYS : (tj_bool(v, "add_prefix_space", true) ? TOK_PREPEND_ALWAYS : TOK_PREPEND_NEVER);
        p->split = tj_bool(v, "split", true);
        p->nstr = n;
        return (p->str = dup_bytes(rep, n)) ? SC_OK : sc_errf(h->err, SC_ENOMEM, "%s: out of memory", h->path);
    }
    if (strcmp(type, "Digits") == 0) {
        const char *re = tj_bool(v, "individual_digits", false) ? "\\p{N}" : "\\p{N}+";
        return pre_regex(h, re, strlen(re), TOK_SPLIT_ISOLATED, false);
    }
    if (strcmp(type, "Whitespace") == 0) return pre_regex(h, "\\w+|[^\\w\\s]+", 14, TOK_SPLIT_REMOVED, true);
    if (strcmp(type, "WhitespaceSplit") == 0) return pre_regex(h, "\\s+", 3, TOK_SPLIT_REMOVED, false);
    return sc_errf(h->err, SC_EUNSUPPORTED, "%s: pre_tokenizer '%.40s' is not supported", h->path, type);
}

/* Decoder facts: pieces spell spaces as U+2581 (sp_text) and a leading
 * space of the first piece is dropped (dummy_prefix). */
static void parse_decoder(hf *h, const tj_val *v, int depth) {
    const char *type = tj_str(tj_get(v, "type"), NULL);
    if (!type || depth > 8) return;
    if (strcmp(type, "Sequence") == 0) {
        const tj_val *list = tj_get(v, "decoders");
        for (size_t i = 0; list && list->type == TJ_ARR && i < list->u.kids.n; i++)
            parse_decoder(h, &list->u.kids.v[i], depth + 1);
    } else if (strcmp(type, "Metaspace") == 0) {
        h->sp_text = true;
        const tj_val *ps = tj_get(v, "prepend_scheme");
        h->dummy_prefix = ps ? !tj_str_is(ps, "never") : tj_bool(v, "add_prefix_space", true);
    } else if (strcmp(type, "Replace") == 0) {
        size_t n;
        bool regex;
        const char *pat = pattern_of(v, &regex, &n);
        if (pat && !regex && tj_str_is(tj_get(v, "content"), " ") && strcmp(pat, "\xe2\x96\x81") == 0) h->sp_text = true;
    } else if (strcmp(type, "Strip") == 0) {
        int64_t start = 0;
        if (tj_str_is(tj_get(v, "content"), " ") && tj_int(tj_get(v, "start"), 0, 1 << 20, &start) && start > 0)
            h->dummy_prefix = true;
    }
}

/* ---- vocabulary ---- */

/* Token text as the encoder looks it up (raw bytes for byte-level). */
static void key_form(const hf *h, const char *s, size_t n, char *buf, const char **k, size_t *kn) {
    if (h->byte_level && n <= TOK_MAX_PIECE && tok_bytelevel_decode(s, n, buf, kn)) {
        *k = buf;
        return;
    }
    *k = s;
    *kn = n;
}

/* Piece text for decoding: U+2581 -> ' ' for SentencePiece-style files. */
static size_t text_form(const hf *h, const char *s, size_t n, char *buf) {
    size_t o = 0;
    for (size_t i = 0; i < n && o < TOK_MAX_PIECE; i++) {
        if (h->sp_text && i + 2 < n && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 && (uint8_t)s[i + 2] == 0x81) {
            buf[o++] = ' ';
            i += 2;
        } else {
            buf[o++] = s[i];
        }
    }
    return o;
}

/* Name of a special token in tokenizer_config.json: a string or {"content": ...}. */
static const char *config_token(const tj_val *cfg, const char *key) {
    const tj_val *v = tj_get(cfg, key);
    const char *s = tj_str(v, NULL);
    return s ? s : tj_str(tj_get(v, "content"), NULL);
}

static int32_t find_any(const sc_tokenizer *t, const char *const *names) {
    for (; *names; names++) {
        int32_t id = sc_tokenizer_find(t, *names, strlen(*names));
        if (id >= 0) return id;
    }
    return -1;
}

static sc_status read_config(const char *path, tj_doc *doc, char **text, sc_err *err) {
    char dir[4096], p[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    *text = NULL;
    memset(doc, 0, sizeof *doc);
    if (!sc_path_join(p, sizeof p, dir, "tokenizer_config.json") || !sc_file_exists(p)) return SC_OK;
    size_t len;
    SC_TRY(sc_read_file(p, (size_t)64 << 20, text, &len, err));
    sc_status st = tj_parse(p, *text, len, doc, err);
    if (st != SC_OK) {
        free(*text);
        *text = NULL;
    }
    return st;
}

static sc_status build(hf *h, const tj_val *root, const tj_val *cfg, sc_tokenizer **out) {
    const tj_val *model = tj_get(root, "model");
    if (!model || model->type != TJ_OBJ) return bad(h, "\"model\"", "is missing or not an object");
    const tj_val *mt = tj_get(model, "type");
    if (mt && !tj_str_is(mt, "BPE")) {
        const char *s = tj_str(mt, NULL);
        return sc_errf(h->err, SC_EUNSUPPORTED, "%s: model type '%.40s' is not supported (only BPE)", h->path,
                       s ? s : "?");
    }
    const tj_val *vocab = tj_get(model, "vocab"), *merges = tj_get(model, "merges"), *added = tj_get(root, "added_tokens");
    if (!vocab || vocab->type != TJ_OBJ) return bad(h, "model.vocab", "is missing or not an object");
    if (!merges || merges->type != TJ_ARR) return bad(h, "model.merges", "is missing or not an array");
    if (added && added->type != TJ_ARR && added->type != TJ_NULL) return bad(h, "added_tokens", "is not an array");
    const char *cont = tj_str(tj_get(model, "continuing_subword_prefix"), NULL);
    const char *eow = tj_str(tj_get(model, "end_of_word_suffix"), NULL);
    if ((cont && *cont) || (eow && *eow))
        return sc_errf(h->err, SC_EUNSUPPORTED, "%s: BPE with continuing_subword_prefix/end_of_word_suffix is not supported", h->path);
    SC_TRY(parse_normalizer(h, tj_get(root, "normalizer"), 0));
    SC_TRY(parse_pre(h, tj_get(root, "pre_tokenizer"), 0));
    parse_decoder(h, tj_get(root, "decoder"), 0);
    if (h->byte_level) h->sp_text = false;
    h->cfg.byte_level = h->byte_level;
    h->cfg.byte_fallback = tj_bool(model, "byte_fallback", false);
    h->cfg.fuse_unk = tj_bool(model, "fuse_unk", false);
    h->cfg.ignore_merges = tj_bool(model, "ignore_merges", false);

    int64_t max_id = -1, id;
    for (size_t i = 0; i < vocab->u.kids.n; i++) {
        if (!tj_int(&vocab->u.kids.v[i], 0, TOK_MAX_VOCAB - 1, &id)) return bad(h, "model.vocab", "holds an id that is not an integer in [0, 4194304)");
        if (id > max_id) max_id = id;
    }
    size_t n_added = added && added->type == TJ_ARR ? added->u.kids.n : 0;
    for (size_t i = 0; i < n_added; i++) {
        const tj_val *a = &added->u.kids.v[i];
        if (!tj_int(tj_get(a, "id"), 0, TOK_MAX_VOCAB - 1, &id) || !tj_str(tj_get(a, "content"), NULL))
            return bad(h, "added_tokens", "holds an entry without an integer \"id\" in range and a string \"content\"");
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return bad(h, "model.vocab", "is empty");
    sc_tokenizer *t;
    SC_TRY(tok_create(h->path, max_id + 1, &tok_bpe_ops, &t, h->err));
    *out = t;
    char *kb = malloc(TOK_MAX_PIECE + 1), *tb = malloc(TOK_MAX_PIECE + 1);
    if (!kb || !tb) {
        free(kb);
        free(tb);
        return sc_errf(h->err, SC_ENOMEM, "%s: out of memory", h->path);
    }
    size_t spell = 0;
    for (size_t i = 0; i < vocab->u.kids.n; i++) spell += 2 * (size_t)vocab->u.kids.v[i].klen;
    sc_status st = tok_reserve(t, spell + 4096) ? SC_OK : sc_errf(h->err, SC_ENOMEM, "%s: out of memory", h->path);
    for (size_t i = 0; st == SC_OK && i < vocab->u.kids.n; i++) {
        const tj_val *v = &vocab->u.kids.v[i];
        tj_int(v, 0, TOK_MAX_VOCAB - 1, &id);
        if (t->types[id] != SC_TOKTYPE_UNUSED) {
            st = sc_errf(h->err, SC_EFORMAT, "%s: model.vocab gives id %lld to two tokens", h->path, (long long)id);
            break;
        }
        const char *k;
        size_t kn;
        key_form(h, v->key, v->klen, kb, &k, &kn);
        size_t tn = h->byte_level ? kn : text_form(h, v->key, v->klen, tb);
        int32_t ty = h->cfg.byte_fallback && tok_byte_piece(v->key, v->klen) >= 0 ? SC_TOKTYPE_BYTE : SC_TOKTYPE_NORMAL;
        st = tok_set(t, h->path, id, k, kn, h->byte_level ? k : tb, tn, 0.0f, ty, h->err);
    }
    const char *unk_name = tj_str(tj_get(model, "unk_token"), NULL);
    for (size_t i = 0; st == SC_OK && i < n_added; i++) {
        const tj_val *a = &added->u.kids.v[i];
        size_t cn;
        const char *c = tj_str(tj_get(a, "content"), &cn);
        tj_int(tj_get(a, "id"), 0, TOK_MAX_VOCAB - 1, &id);
        int32_t ty = tj_bool(a, "special", false) ? SC_TOKTYPE_CONTROL : SC_TOKTYPE_USER;
        if (unk_name && strcmp(unk_name, c) == 0) ty = SC_TOKTYPE_UNKNOWN;
        size_t tn = h->sp_text ? text_form(h, c, cn, tb) : cn;
        st = tok_set(t, h->path, id, c, cn, h->sp_text ? tb : NULL, tn, 0.0f, ty, h->err);
    }
    free(kb);
    free(tb);
    if (st != SC_OK) return st;

    SC_TRY(tok_finish(t, h->path, -1, -1, -1, h->err));
    /* BOS / EOS: tokenizer_config.json, else the post-processor, else usual names */
    static const char *const BOS[] = {"<s>", "<|begin_of_text|>", "<bos>", NULL};
    static const char *const EOS[] = {"</s>", "<|end_of_text|>", "<eos>", "<|endoftext|>", NULL};
    int32_t bos = -1, eos = -1, unk = -1;
    const char *bn = config_token(cfg, "bos_token"), *en = config_token(cfg, "eos_token");
    bool cfg_has_bos = tj_get(cfg, "bos_token") != NULL;
    if (bn) bos = sc_tokenizer_find(t, bn, strlen(bn));
    if (en) eos = sc_tokenizer_find(t, en, strlen(en));
    const tj_val *single = tj_get(tj_get(root, "post_processor"), "single");
    const char *pp_bos = single && single->type == TJ_ARR && single->u.kids.n > 0
                             ? tj_str(tj_get(tj_get(&single->u.kids.v[0], "SpecialToken"), "id"), NULL) : NULL;
    if (bos < 0 && !cfg_has_bos && pp_bos) bos = sc_tokenizer_find(t, pp_bos, strlen(pp_bos));
    if (bos < 0 && !cfg_has_bos) bos = find_any(t, BOS);
    if (eos < 0 && !en) eos = find_any(t, EOS);
    if (unk_name) unk = sc_tokenizer_find(t, unk_name, strlen(unk_name));
    const tj_val *ab = tj_get(cfg, "add_bos_token");
    t->add_bos_default = ab && (ab->type == TJ_TRUE || ab->type == TJ_FALSE) ? ab->type == TJ_TRUE : bos >= 0;
    t->bos = bos;
    t->eos = eos;
    t->unk = unk;
    t->dummy_prefix = h->dummy_prefix;
    snprintf(t->kind, sizeof t->kind, "%s", h->byte_level ? "bpe-bytelevel" : "bpe-sentencepiece");

    const tj_val *ct = tj_get(cfg, "chat_template");
    const char *cts = tj_str(ct, NULL);
    for (size_t i = 0; !cts && ct && ct->type == TJ_ARR && i < ct->u.kids.n; i++) /* [{name, template}] */
        if (i == 0 || tj_str_is(tj_get(&ct->u.kids.v[i], "name"), "default"))
            cts = tj_str(tj_get(&ct->u.kids.v[i], "template"), NULL);
    if (cts && !(t->chat_template = dup_bytes(cts, strlen(cts)))) return sc_errf(h->err, SC_ENOMEM, "%s: out of memory", h->path);

    /* merges: "a b" strings or ["a", "b"] pairs, ranked by position */
    SC_TRY(tok_bpe_attach(t, h->path, &h->cfg, merges->u.kids.n, h->err));
    char *ka = malloc(2 * (TOK_MAX_PIECE + 1));
    if (!ka) return sc_errf(h->err, SC_ENOMEM, "%s: out of memory", h->path);
    char *kb2 = ka + TOK_MAX_PIECE + 1;
    for (size_t i = 0; st == SC_OK && i < merges->u.kids.n; i++) {
        const tj_val *m = &merges->u.kids.v[i];
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (m->type == TJ_STR) {
            const char *sp = memchr(m->u.str.s, ' ', m->u.str.n);
            if (sp && !memchr(sp + 1, ' ', m->u.str.n - (size_t)(sp + 1 - m->u.str.s))) {
                a = m->u.str.s;
                na = (size_t)(sp - a);
                b = sp + 1;
                nb = m->u.str.n - na - 1;
            }
        } else if (m->type == TJ_ARR && m->u.kids.n == 2) {
            a = tj_str(&m->u.kids.v[0], &na);
            b = tj_str(&m->u.kids.v[1], &nb);
        }
        if (!a || !b) {
            st = sc_errf(h->err, SC_EFORMAT, "%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", h->path, i);
            break;
        }
        const char *ak, *bk;
        size_t akn, bkn;
        key_form(h, a, na, ka, &ak, &akn);
        key_form(h, b, nb, kb2, &bk, &bkn);
        st = tok_bpe_add_merge(t, h->path, i, ak, akn, bk, bkn, h->err);
    }
    free(ka);
    return st;
}

sc_status sc_tokenizer_load_hf(const char *path, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    char *text = NULL, *ctext = NULL;
    size_t len;
    SC_TRY(sc_read_file(path, HF_MAX_FILE, &text, &len, err));
    tj_doc doc, cdoc;
    sc_status st = tj_parse(path, text, len, &doc, err);
    if (st != SC_OK) {
        free(text);
        return st;
    }
    st = read_config(path, &cdoc, &ctext, err);
    hf h = {.path = path, .err = err};
    sc_tokenizer *t = NULL;
    if (st == SC_OK) st = build(&h, &doc.root, ctext ? &cdoc.root : NULL, &t);
    tok_cfg_free(&h.cfg);
    tj_free(&doc);
    tj_free(&cdoc);
    free(text);
    free(ctext);
    if (st != SC_OK) {
        sc_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SC_OK;
}
