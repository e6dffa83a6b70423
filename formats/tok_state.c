/* tok_state.c - a tokenizer's state as plain data and back (tok_serial.h):
 * what sc_tokenizer_state() takes out is exactly what the encoder and the
 * decoder use, and sc_tokenizer_from_state() rebuilds the same tables with
 * the same builder the file loaders use, so the result encodes and decodes
 * like the original. Everything is validated on the way in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_bpe.h"
#include "tok_serial.h"

/* The public enums mirror the internal ones value for value. */
#define SAME(a, b) ((int)(a) == (int)(b))
_Static_assert(SAME(SC_TOK_NORM_NFC, TOK_NORM_NFC) && SAME(SC_TOK_NORM_STRIP, TOK_NORM_STRIP), "normalizer kinds");
_Static_assert(SAME(SC_TOK_PRE_SPLIT, TOK_PRE_SPLIT) && SAME(SC_TOK_PRE_DIGITS, TOK_PRE_DIGITS), "pre-tokenizer kinds");
_Static_assert(SAME(SC_TOK_SPLIT_ISOLATED, TOK_SPLIT_ISOLATED) && SAME(SC_TOK_SPLIT_CONTIGUOUS, TOK_SPLIT_CONTIGUOUS) &&
                   SAME(SC_TOK_SPLIT_MERGED_WITH_PREVIOUS, TOK_SPLIT_PREV) &&
                   SAME(SC_TOK_SPLIT_MERGED_WITH_NEXT, TOK_SPLIT_NEXT),
               "split behaviours");
_Static_assert(SAME(SC_TOK_PREPEND_NEVER, TOK_PREPEND_NEVER) && SAME(SC_TOK_PREPEND_ALWAYS, TOK_PREPEND_ALWAYS),
               "prepend schemes");
_Static_assert(SC_TOK_MAX_STEPS == TOK_MAX_STEPS, "pipeline steps");

static const char *const KINDS[] = {"sentencepiece", "bpe-bytelevel", "bpe-sentencepiece"};

void sc_tok_state_free(sc_tok_state *s) {
    if (!s) return;
    for (size_t i = 0; i < sizeof s->owned_ / sizeof s->owned_[0]; i++) free(s->owned_[i]);
    memset(s, 0, sizeof *s);
}

sc_status sc_tokenizer_state(const sc_tokenizer *t, sc_tok_state *s, sc_err *err) {
    memset(s, 0, sizeof *s);
    snprintf(s->kind, sizeof s->kind, "%s", t->kind);
    int64_t n = t->n;
    s->n = n;
    size_t keys = 0, texts = 0, n_text = 0;
    for (int64_t i = 0; i < n; i++) {
        if (t->types[i] < 0 || t->types[i] > SC_TOKTYPE_BYTE)
            return sc_errf(err, SC_EUNSUPPORTED, "tokenizer: token %lld has type %d, which cannot be stored", (long long)i,
                           t->types[i]);
        keys += t->key_len[i];
        if (t->text_len[i] != t->key_len[i] ||
            memcmp(t->arena + t->text_off[i], t->arena + t->key_off[i], t->key_len[i]) != 0) {
            n_text++;
            texts += t->text_len[i];
        }
    }
    if (keys > UINT32_MAX || texts > UINT32_MAX)
        return sc_errf(err, SC_EUNSUPPORTED, "tokenizer: the spellings exceed 4 GB");
    /* one block of 32-bit arrays, one of bytes */
    uint32_t *u = malloc(((size_t)n + 1 + 2 * n_text + 1) * sizeof *u);
    char *c = malloc(keys + texts + 1);
    s->owned_[0] = u;
    s->owned_[1] = c;
    if (!u || !c) {
        sc_tok_state_free(s);
        return sc_errf(err, SC_ENOMEM, "tokenizer: out of memory for its state");
    }
    uint32_t *key_off = u, *text_off = u + n + 1;
    int32_t *text_ids = (int32_t *)(text_off + n_text + 1);
    size_t ko = 0, to = 0, j = 0;
    char *kb = c, *tb = c + keys;
    for (int64_t i = 0; i < n; i++) {
        key_off[i] = (uint32_t)ko;
        memcpy(kb + ko, t->arena + t->key_off[i], t->key_len[i]);
        ko += t->key_len[i];
        if (t->text_len[i] != t->key_len[i] ||
            memcmp(t->arena + t->text_off[i], t->arena + t->key_off[i], t->key_len[i]) != 0) {
            text_ids[j] = (int32_t)i;
            text_off[j++] = (uint32_t)to;
            memcpy(tb + to, t->arena + t->text_off[i], t->text_len[i]);
            to += t->text_len[i];
        }
    }
    key_off[n] = (uint32_t)ko;
    text_off[n_text] = (uint32_t)to;
    s->key_off = key_off;
    s->keys = kb;
    s->keys_len = keys;
    s->scores = t->scores;
    s->types = t->types;
    s->n_text = (int64_t)n_text;
    s->text_ids = n_text ? text_ids : NULL;
    s->text_off = n_text ? text_off : NULL;
    s->texts = tb;
    s->texts_len = texts;
    s->bos = t->bos;
    s->eos = t->eos;
    s->unk = t->unk;
    s->add_bos_default = t->add_bos_default;
    s->dummy_prefix = t->dummy_prefix;
    s->sp_space_in = t->sp_space_in;
    if (t->chat_template) {
        s->chat_template = t->chat_template;
        s->chat_template_len = strlen(t->chat_template);
    }
    const tok_bpe_cfg *cfg = tok_bpe_config(t);
    if (tok_spm_options(t, &s->spm_add_prefix, &s->spm_squash_spaces)) {
        s->encoder = SC_TOK_ENC_SPM;
        return SC_OK;
    }
    if (!cfg) {
        sc_tok_state_free(s);
        return sc_errf(err, SC_EUNSUPPORTED, "tokenizer: its encoder cannot be stored");
    }
    s->encoder = SC_TOK_ENC_BPE;
    s->byte_level = cfg->byte_level;
    s->byte_fallback = cfg->byte_fallback;
    s->fuse_unk = cfg->fuse_unk;
    s->ignore_merges = cfg->ignore_merges;
    s->n_norm = cfg->n_norm;
    for (int i = 0; i < cfg->n_norm; i++) {
        const tok_norm *m = &cfg->norm[i];
        s->norm[i] = (sc_tok_norm_state){m->kind, m->a, m->b, m->na, m->nb, m->left, m->right};
    }
    s->n_pre = cfg->n_pre;
    for (int i = 0; i < cfg->n_pre; i++) {
        const tok_pre *p = &cfg->pre[i];
        if (p->re && !p->pat) {
            sc_tok_state_free(s);
            return sc_errf(err, SC_EUNSUPPORTED, "tokenizer: pre-tokenizer %d has a regex without its source", i);
        }
        s->pre[i] = (sc_tok_pre_state){.kind = p->kind,
                                       .regex = p->re ? p->pat : NULL,
                                       .nregex = p->re ? p->npat : 0,
                                       .str = p->str,
                                       .nstr = p->str ? p->nstr : 0,
                                       .behavior = p->behavior,
                                       .invert = p->invert,
                                       .prepend = p->prepend,
                                       .split = p->split,
                                       .add_prefix_space = p->add_prefix_space,
                                       .individual = p->individual};
    }
    int32_t *pairs;
    size_t nm;
    sc_status st = tok_bpe_merges(t, &pairs, &nm, err);
    if (st != SC_OK) {
        sc_tok_state_free(s);
        return st;
    }
    s->owned_[2] = pairs;
    s->merges = pairs;
    s->n_merges = (int64_t)nm;
    return SC_OK;
}

/* ---- validation ---- */

static sc_status bad(sc_err *err, const char *what, const char *field, long long i, const char *why) {
    if (i >= 0) return sc_errf(err, SC_EFORMAT, "%s: %s[%lld] %s", what, field, i, why);
    return sc_errf(err, SC_EFORMAT, "%s: %s %s", what, field, why);
}

/* offsets[0..count] rise within a buffer of len bytes, each span at most max. */
static sc_status check_offsets(sc_err *err, const char *what, const char *field, const uint32_t *off, int64_t count,
                               size_t len, const char *buf, size_t max) {
    if (count > 0 && (!off || (len > 0 && !buf))) return bad(err, what, field, -1, "is missing");
    for (int64_t i = 0; i < count; i++) {
        if (off[i] > off[i + 1]) return bad(err, what, field, i + 1, "is below the offset before it");
        if (off[i + 1] > len) return bad(err, what, field, i + 1, "is beyond the end of the spellings");
        if (off[i + 1] - off[i] > max) return bad(err, what, field, i, "spans more bytes than a token may have");
    }
    return SC_OK;
}

static sc_status check_str(sc_err *err, const char *what, const char *field, int i, const char *s, size_t n,
                           bool required) {
    if (!s && (required || n > 0)) return bad(err, what, field, i, "lacks its string");
    if (n > SC_TOK_MAX_STRING) return bad(err, what, field, i, "holds a string that is too long");
    return SC_OK;
}

static sc_status validate(const char *what, const sc_tok_state *s, sc_err *err) {
    bool kind_ok = false;
    for (size_t i = 0; i < sizeof KINDS / sizeof KINDS[0]; i++) kind_ok |= strcmp(s->kind, KINDS[i]) == 0;
    if (!kind_ok) return bad(err, what, "tokenizer.kind", -1, "is not sentencepiece, bpe-bytelevel or bpe-sentencepiece");
    if (s->n <= 0 || s->n > TOK_MAX_VOCAB)
        return sc_errf(err, SC_EFORMAT, "%s: tokenizer.vocab_size %lld is out of range (1 to %lld)", what,
                       (long long)s->n, (long long)TOK_MAX_VOCAB);
    if (!s->types) return bad(err, what, "tokenizer.types", -1, "is missing");
    SC_TRY(check_offsets(err, what, "tokenizer.offsets", s->key_off, s->n, s->keys_len, s->keys, TOK_MAX_PIECE));
    for (int64_t i = 0; i < s->n; i++)
        if (s->types[i] < 0 || s->types[i] > SC_TOKTYPE_BYTE)
            return bad(err, what, "tokenizer.types", i, "is not a token type (0 to 6)");
    if (s->n_text < 0 || s->n_text > s->n) return bad(err, what, "tokenizer.n_decode", -1, "is out of range");
    if (s->n_text > 0 && !s->text_ids) return bad(err, what, "tokenizer.decode_ids", -1, "is missing");
    SC_TRY(check_offsets(err, what, "tokenizer.decode_offsets", s->text_off, s->n_text, s->texts_len, s->texts,
                         TOK_MAX_PIECE));
    for (int64_t i = 0; i < s->n_text; i++)
        if (s->text_ids[i] < 0 || s->text_ids[i] >= s->n || (i > 0 && s->text_ids[i] <= s->text_ids[i - 1]))
            return bad(err, what, "tokenizer.decode_ids", i, "is not a rising token id inside the vocabulary");
    const char *const sp[] = {"tokenizer.bos", "tokenizer.eos", "tokenizer.unk"};
    const int32_t ids[] = {s->bos, s->eos, s->unk};
    for (int k = 0; k < 3; k++)
        if (ids[k] < -1 || ids[k] >= s->n) return bad(err, what, sp[k], -1, "is outside the vocabulary");
    if (s->chat_template &&
        (s->chat_template_len > SC_TOK_MAX_TEMPLATE || memchr(s->chat_template, 0, s->chat_template_len)))
        return bad(err, what, "tokenizer.chat_template", -1, "is too long or holds a NUL byte");
    if (s->encoder == SC_TOK_ENC_SPM) return SC_OK;
    if (s->encoder != SC_TOK_ENC_BPE) return bad(err, what, "tokenizer.encoder", -1, "is not spm or bpe");
    if (s->n_norm < 0 || s->n_norm > SC_TOK_MAX_STEPS)
        return bad(err, what, "tokenizer.bpe.normalizers", -1, "has too many steps");
    if (s->n_pre < 0 || s->n_pre > SC_TOK_MAX_STEPS)
        return bad(err, what, "tokenizer.bpe.pre_tokenizers", -1, "has too many steps");
    for (int i = 0; i < s->n_norm; i++) {
        const sc_tok_norm_state *m = &s->norm[i];
        const char *f = "tokenizer.bpe.normalizers";
        if (m->kind < 0 || m->kind >= SC_TOK_NORM_COUNT) return bad(err, what, f, i, "has an unknown type");
        SC_TRY(check_str(err, what, f, i, m->a, m->na, m->kind == SC_TOK_NORM_PREPEND || m->kind == SC_TOK_NORM_REPLACE));
        SC_TRY(check_str(err, what, f, i, m->b, m->nb, m->kind == SC_TOK_NORM_REPLACE));
    }
    for (int i = 0; i < s->n_pre; i++) {
        const sc_tok_pre_state *p = &s->pre[i];
        const char *f = "tokenizer.bpe.pre_tokenizers";
        if (p->kind < 0 || p->kind >= SC_TOK_PRE_COUNT) return bad(err, what, f, i, "has an unknown type");
        if (p->behavior < 0 || p->behavior >= SC_TOK_SPLIT_COUNT) return bad(err, what, f, i, "has an unknown behavior");
        if (p->prepend < 0 || p->prepend >= SC_TOK_PREPEND_COUNT) return bad(err, what, f, i, "has an unknown prepend_scheme");
        SC_TRY(check_str(err, what, f, i, p->regex, p->nregex, false));
        SC_TRY(check_str(err, what, f, i, p->str, p->nstr, p->kind == SC_TOK_PRE_METASPACE));
        if (p->kind == SC_TOK_PRE_METASPACE && (p->nstr == 0 || p->regex))
            return bad(err, what, f, i, "is a Metaspace step without a replacement, or with a regex");
        if (p->kind == SC_TOK_PRE_SPLIT && p->regex && p->str)
            return bad(err, what, f, i, "is a split on both a regex and a string");
    }
    if (s->n_merges < 0 || s->n_merges > SC_TOK_MAX_MERGES)
        return bad(err, what, "tokenizer.bpe.merges", -1, "is out of range (0 to 2^26)");
    if (s->n_merges > 0 && !s->merges) return bad(err, what, "tokenizer.merges", -1, "is missing");
    for (int64_t i = 0; i < 2 * s->n_merges; i++)
        if (s->merges[i] < 0 || s->merges[i] >= s->n)
            return bad(err, what, "tokenizer.merges", i / 2, "names a token outside the vocabulary");
    return SC_OK;
}

/* ---- building ---- */

static char *dup_bytes(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        if (n) memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* The merge-rank pipeline of s (cfg is freed on failure). */
static sc_status build_cfg(const char *what, const sc_tok_state *s, tok_bpe_cfg *cfg, sc_err *err) {
    memset(cfg, 0, sizeof *cfg);
    cfg->byte_level = s->byte_level;
    cfg->byte_fallback = s->byte_fallback;
    cfg->fuse_unk = s->fuse_unk;
    cfg->ignore_merges = s->ignore_merges;
    sc_status st = SC_OK;
    for (int i = 0; st == SC_OK && i < s->n_norm; i++) {
        const sc_tok_norm_state *m = &s->norm[i];
        tok_norm *o = &cfg->norm[cfg->n_norm++];
        memset(o, 0, sizeof *o);
        o->kind = m->kind;
        o->left = m->left;
        o->right = m->right;
        if ((m->a && !(o->a = dup_bytes(m->a, m->na))) || (m->b && !(o->b = dup_bytes(m->b, m->nb))))
            st = sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
        o->na = o->a ? m->na : 0;
        o->nb = o->b ? m->nb : 0;
    }
    for (int i = 0; st == SC_OK && i < s->n_pre; i++) {
        const sc_tok_pre_state *p = &s->pre[i];
        tok_pre *o = &cfg->pre[cfg->n_pre++];
        memset(o, 0, sizeof *o);
        o->kind = p->kind;
        o->behavior = p->behavior;
        o->invert = p->invert;
        o->prepend = p->prepend;
        o->split = p->split;
        o->add_prefix_space = p->add_prefix_space;
        o->individual = p->individual;
        if (p->str) {
            if (!(o->str = dup_bytes(p->str, p->nstr))) st = sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
            o->nstr = p->nstr;
        }
        if (st == SC_OK && p->regex) {
            char w[600];
            snprintf(w, sizeof w, "%s: tokenizer.bpe.pre_tokenizers[%d]", what, i);
            st = tok_pre_regex(o, w, p->regex, p->nregex, err);
        }
    }
    if (st != SC_OK) tok_cfg_free(cfg);
    return st;
}

static sc_status build(const char *what, const sc_tok_state *s, sc_tokenizer *t, sc_err *err) {
    snprintf(t->kind, sizeof t->kind, "%s", s->kind);
    if (!tok_reserve(t, s->keys_len + s->texts_len + 64)) return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    int64_t j = 0;
    for (int64_t i = 0; i < s->n; i++) {
        const char *k = s->keys + s->key_off[i], *tx = NULL;
        size_t kl = s->key_off[i + 1] - s->key_off[i], tl = 0;
        if (j < s->n_text && s->text_ids[j] == i) {
            tx = s->texts + s->text_off[j];
            tl = s->text_off[j + 1] - s->text_off[j];
            j++;
        }
        SC_TRY(tok_set(t, what, i, k, kl, tx, tl, s->scores ? s->scores[i] : 0.0f, s->types[i], err));
    }
    SC_TRY(tok_finish(t, what, s->bos, s->eos, s->unk, err));
    t->add_bos_default = s->add_bos_default;
    t->sp_space_in = s->sp_space_in;
    if (s->chat_template && !(t->chat_template = dup_bytes(s->chat_template, s->chat_template_len)))
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    if (s->encoder == SC_TOK_ENC_SPM) {
        SC_TRY(tok_spm_attach(t, s->spm_add_prefix, s->spm_squash_spaces, err));
    } else {
        tok_bpe_cfg cfg;
        SC_TRY(build_cfg(what, s, &cfg, err));
        SC_TRY(tok_bpe_attach(t, what, &cfg, (size_t)s->n_merges, err)); /* owns cfg from here */
        char w[600];
        snprintf(w, sizeof w, "%s: tokenizer.merges", what);
        for (int64_t i = 0; i < s->n_merges; i++) {
            size_t la, lb;
            const char *a = tok_key(t, s->merges[2 * i], &la), *b = tok_key(t, s->merges[2 * i + 1], &lb);
            SC_TRY(tok_bpe_add_merge(t, w, (size_t)i, a, la, b, lb, err));
        }
    }
    t->dummy_prefix = s->dummy_prefix; /* after tok_spm_attach, which sets it from add_prefix */
    return SC_OK;
}

sc_status sc_tokenizer_from_state(const char *what, const sc_tok_state *s, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    SC_TRY(validate(what, s, err));
    sc_tokenizer *t;
    SC_TRY(tok_create(what, s->n, s->encoder == SC_TOK_ENC_SPM ? &tok_spm_ops : &tok_bpe_ops, &t, err));
    sc_status st = build(what, s, t, err);
    if (st != SC_OK) {
        sc_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SC_OK;
}
