/* gguf_model.c - builds an sc_model and its tokenizer from a GGUF file
 * (llama.cpp naming: token_embd, blk.N.attn_q, ...; {arch}.* config keys). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model.h"
#include "tok_bpe.h"
#include "tokenizer.h"

typedef struct builder {
    const sc_gguf *g;
    sc_model *m;
    const char *path;
    char arch[32];
    sc_err *err;
} builder;

/* ---- config keys ---- */

/* Reads {arch}.suffix as an integer (any integer type); absent: def, or an
 * error when required. */
static sc_status arch_int(builder *b, const char *suffix, bool required, int64_t def, int64_t *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", b->arch, suffix);
    if (!sc_gguf_get(b->g, key) && !required) {
        *out = def;
        return SC_OK;
    }
    return sc_gguf_get_int(b->g, key, out, b->err);
}

static sc_status arch_float(builder *b, const char *suffix, bool required, double def, float *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", b->arch, suffix);
    double d = def;
    if (sc_gguf_get(b->g, key) || required) SC_TRY(sc_gguf_get_float(b->g, key, &d, b->err));
    if (!isfinite(d) || fabs(d) > FLT_MAX)
        return sc_errf(b->err, SC_EFORMAT, "%s: metadata key '%s' = %g is not a finite float", b->path, key, d);
    *out = (float)d;
    return SC_OK;
}

static sc_status read_arch(builder *b) {
    const char *s;
    size_t len;
    SC_TRY(sc_gguf_get_string(b->g, "general.architecture", &s, &len, b->err));
    sc_config *c = &b->m->cfg;
    static const struct {
        const char *name;
        sc_family family;
    } ARCHS[] = {{"llama", SC_FAMILY_LLAMA}, {"mistral", SC_FAMILY_MISTRAL}, {"qwen2", SC_FAMILY_QWEN2},
                 {"gemma", SC_FAMILY_GEMMA}};
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++) {
        if (len == strlen(ARCHS[i].name) && memcmp(s, ARCHS[i].name, len) == 0) {
            snprintf(b->arch, sizeof b->arch, "%s", ARCHS[i].name);
            c->family = ARCHS[i].family;
            return SC_OK;
        }
    }
    return sc_errf(b->err, SC_EUNSUPPORTED,
                   "%s: general.architecture '%.*s' is not supported (llama, mistral, qwen2, gemma)", b->path,
                   (int)(len > 64 ? 64 : len), s);
}

static sc_status read_config(builder *b) {
    sc_config *c = &b->m->cfg;
    SC_TRY(read_arch(b));
    SC_TRY(arch_int(b, "context_length", true, 0, &c->max_seq_len));
    SC_TRY(arch_int(b, "embedding_length", true, 0, &c->dim));
    SC_TRY(arch_int(b, "block_count", true, 0, &c->n_layers));
    SC_TRY(arch_int(b, "feed_forward_length", true, 0, &c->ffn_dim));
    SC_TRY(arch_int(b, "attention.head_count", true, 0, &c->n_heads));
    SC_TRY(arch_int(b, "attention.head_count_kv", false, c->n_heads, &c->n_kv_heads));
    SC_TRY(arch_float(b, "attention.layer_norm_rms_epsilon", true, 0.0, &c->norm_eps));
    SC_TRY(arch_float(b, "rope.freq_base", false, 10000.0, &c->rope_theta));
    int64_t def_head_dim = c->n_heads > 0 ? c->dim / c->n_heads : 0; /* head_count 0: rejected by validation */
    SC_TRY(arch_int(b, "attention.key_length", false, def_head_dim, &c->head_dim));
    int64_t vlen, rope_dims;
    SC_TRY(arch_int(b, "attention.value_length", false, c->head_dim, &vlen));
    SC_TRY(arch_int(b, "rope.dimension_count", false, c->head_dim, &rope_dims));
    if (vlen != c->head_dim)
        return sc_errf(b->err, SC_EUNSUPPORTED, "%s: %s.attention.value_length = %lld differs from key_length %lld",
                       b->path, b->arch, (long long)vlen, (long long)c->head_dim);
    if (rope_dims != c->head_dim)
        return sc_errf(b->err, SC_EUNSUPPORTED, "%s: %s.rope.dimension_count = %lld differs from head_dim %lld (partial RoPE)",
                       b->path, b->arch, (long long)rope_dims, (long long)c->head_dim);

    /* llama.cpp's converter permutes llama/mistral q and k for interleaved
     * pairs (the original Meta layout); qwen2 and gemma use rotate-half. */
    c->rope = (c->family == SC_FAMILY_QWEN2 || c->family == SC_FAMILY_GEMMA) ? SC_ROPE_HALF : SC_ROPE_INTERLEAVED;
    c->act = c->family == SC_FAMILY_GEMMA ? SC_ACT_GELU_TANH : SC_ACT_SILU;
    c->qkv_bias = c->family == SC_FAMILY_QWEN2;
    c->embed_scale = c->family == SC_FAMILY_GEMMA;
    /* Gemma's RMSNorm scales by (1 + w), but llama.cpp's converter already
     * stores the norm weights as (1 + w): use them as they are. */
    c->norm_add_one = false;

    /* Vocabulary: token_embd rows, cross-checked with {arch}.vocab_size. */
    const sc_gguf_tensor *te = sc_gguf_find_tensor(b->g, "token_embd.weight");
    if (!te) return sc_errf(b->err, SC_EFORMAT, "%s: missing tensor 'token_embd.weight'", b->path);
    c->vocab_size = (int64_t)te->ne[1];
    int64_t vs;
    SC_TRY(arch_int(b, "vocab_size", false, c->vocab_size, &vs));
    if (vs != c->vocab_size)
        return sc_errf(b->err, SC_EFORMAT, "%s: %s.vocab_size = %lld but tensor 'token_embd.weight' has %lld rows",
                       b->path, b->arch, (long long)vs, (long long)c->vocab_size);
    return SC_OK;
}

/* ---- tokenizer ---- */

/* tokenizer.ggml.{bos,eos,unknown}_token_id: -1 when absent or set to the
 * "none" sentinel (negative or 0xFFFFFFFF); otherwise below n_tokens. */
static sc_status special_id(const sc_gguf *g, const char *key, int64_t n_tokens, int32_t *out, sc_err *err) {
    *out = -1;
    const sc_gguf_value *v = sc_gguf_get(g, key);
    if (!v) return SC_OK;
    uint64_t u;
    int64_t i;
    if (sc_gguf_value_u64(v, &u) && (u == UINT32_MAX || u == UINT64_MAX)) return SC_OK;
    if (!sc_gguf_value_int(v, &i))
        return sc_errf(err, SC_EFORMAT, "%s: metadata key '%s' has type %s, expected an integer", sc_gguf_path(g), key,
                       sc_gguf_type_name(v->type));
    if (i < 0) return SC_OK;
    if (i >= n_tokens)
        return sc_errf(err, SC_EFORMAT, "%s: %s = %lld is beyond the %lld tokens", sc_gguf_path(g), key, (long long)i,
                       (long long)n_tokens);
    *out = (int32_t)i;
    return SC_OK;
}

/* The token list: an array of strings of at most SC_MAX_VOCAB entries. */
static sc_status token_array(const sc_gguf *g, const sc_gguf_value **out, sc_err *err) {
    const sc_gguf_value *v = sc_gguf_get(g, "tokenizer.ggml.tokens");
    if (!v) return sc_errf(err, SC_EFORMAT, "%s: missing metadata key 'tokenizer.ggml.tokens'", sc_gguf_path(g));
    if (v->type != SC_GGUF_ARRAY || v->elem_type != SC_GGUF_STRING)
        return sc_errf(err, SC_EFORMAT, "%s: tokenizer.ggml.tokens is not an array of strings", sc_gguf_path(g));
    if (v->count == 0 || v->count > (uint64_t)SC_MAX_VOCAB)
        return sc_errf(err, SC_EFORMAT, "%s: tokenizer.ggml.tokens has %llu entries (allowed 1 to %lld)",
                       sc_gguf_path(g), (unsigned long long)v->count, (long long)SC_MAX_VOCAB);
    *out = v;
    return SC_OK;
}

/* Optional per-token array (scores or token_type) that must have n entries
 * of a numeric element type. */
static sc_status per_token_array(const sc_gguf *g, const char *key, int64_t n, bool want_float,
                                 const sc_gguf_value **out, sc_err *err) {
    *out = sc_gguf_get(g, key);
    const sc_gguf_value *v = *out;
    if (!v) return SC_OK;
    bool ok_type = v->type == SC_GGUF_ARRAY && v->elem_type != SC_GGUF_STRING && v->elem_type != SC_GGUF_ARRAY &&
                   v->elem_type != SC_GGUF_BOOL &&
                   (want_float || (v->elem_type != SC_GGUF_FLOAT32 && v->elem_type != SC_GGUF_FLOAT64));
    if (!ok_type)
        return sc_errf(err, SC_EFORMAT, "%s: %s is not an array of %s", sc_gguf_path(g), key,
                       want_float ? "numbers" : "integers");
    if (v->count != (uint64_t)n)
        return sc_errf(err, SC_EFORMAT, "%s: %s has %llu entries but tokenizer.ggml.tokens has %lld", sc_gguf_path(g),
                       key, (unsigned long long)v->count, (long long)n);
    return SC_OK;
}

/* Builds the SentencePiece-style ("llama") tokenizer from tokenizer.ggml.*. */
static sc_status build_llama_tokenizer(const sc_gguf *g, sc_tokenizer **out, sc_err *err) {
    const char *path = sc_gguf_path(g);
    const sc_gguf_value *toks = NULL, *sv = NULL, *tv = NULL;
    SC_TRY(token_array(g, &toks, err));
    int64_t n = (int64_t)toks->count;
    SC_TRY(per_token_array(g, "tokenizer.ggml.scores", n, true, &sv, err));
    SC_TRY(per_token_array(g, "tokenizer.ggml.token_type", n, false, &tv, err));
    int32_t bos, eos, unk;
    SC_TRY(special_id(g, "tokenizer.ggml.bos_token_id", n, &bos, err));
    SC_TRY(special_id(g, "tokenizer.ggml.eos_token_id", n, &eos, err));
    SC_TRY(special_id(g, "tokenizer.ggml.unknown_token_id", n, &unk, err));

    const char **pieces = sc_calloc((size_t)n, sizeof *pieces);
    size_t *lens = sc_calloc((size_t)n, sizeof *lens);
    float *scores = sv ? sc_calloc((size_t)n, sizeof *scores) : NULL;
    int32_t *types = tv ? sc_calloc((size_t)n, sizeof *types) : NULL;
    sc_status st = SC_OK;
    if (!pieces || !lens || (sv && !scores) || (tv && !types)) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory for %lld tokens", path, (long long)n);
        goto done;
    }
    sc_gguf_iter it;
    sc_gguf_value e;
    sc_gguf_iter_init(&it, toks);
    for (int64_t i = 0; i < n; i++) {
        if (!sc_gguf_iter_next(&it, &e) || !sc_gguf_value_string(&e, &pieces[i], &lens[i])) {
            st = sc_errf(err, SC_EFORMAT, "%s: tokenizer.ggml.tokens[%lld] is unreadable", path, (long long)i);
            goto done;
        }
    }
    for (int64_t i = 0; i < n && (sv || tv); i++) {
        double d;
        int64_t ty;
        if (sv && sc_gguf_array_elem(sv, (uint64_t)i, &e) && sc_gguf_value_float(&e, &d)) scores[i] = (float)d;
        if (tv && (!sc_gguf_array_elem(tv, (uint64_t)i, &e) || !sc_gguf_value_int(&e, &ty) || ty < INT32_MIN ||
                   ty > INT32_MAX)) {
            st = sc_errf(err, SC_EFORMAT, "%s: tokenizer.ggml.token_type[%lld] is not an int32", path, (long long)i);
            goto done;
        }
        if (tv) types[i] = (int32_t)ty;
        if (sv && !isfinite(scores[i])) {
            st = sc_errf(err, SC_EFORMAT, "%s: tokenizer.ggml.scores[%lld] is not finite", path, (long long)i);
            goto done;
        }
    }
    st = sc_tokenizer_from_pieces(path, pieces, lens, scores, types, n, bos, eos, unk, /*sp_space=*/true, out, err);
done:
    free(pieces);
    free(lens);
    free(scores);
    free(types);
    return st;
}

/* Options every vocabulary kind shares: add_bos_token, chat_template. */
static sc_status common_options(const sc_gguf *g, sc_tokenizer *t, sc_err *err) {
    const sc_gguf_value *v = sc_gguf_get(g, "tokenizer.ggml.add_bos_token");
    bool b;
    if (v && sc_gguf_value_bool(v, &b)) t->add_bos_default = b;
    const char *s;
    size_t n;
    v = sc_gguf_get(g, "tokenizer.chat_template");
    if (v && sc_gguf_value_string(v, &s, &n) && n > 0 && n < ((size_t)1 << 24)) {
        free(t->chat_template);
        if (!(t->chat_template = malloc(n + 1))) return sc_errf(err, SC_ENOMEM, "%s: out of memory", sc_gguf_path(g));
        memcpy(t->chat_template, s, n);
        t->chat_template[n] = '\0';
    }
    return SC_OK;
}

/* The byte-level BPE ("gpt2") tokenizer: tokens in GPT-2's byte-to-unicode
 * spelling, ranked merges "a b", and the pre-tokenizer named by
 * tokenizer.ggml.pre. */
static sc_status build_gpt2_tokenizer(const sc_gguf *g, sc_tokenizer **out, sc_err *err) {
    const char *path = sc_gguf_path(g);
    const sc_gguf_value *toks = NULL, *tv = NULL, *mv = sc_gguf_get(g, "tokenizer.ggml.merges");
    *out = NULL;
    if (!mv)
        return sc_errf(err, SC_EUNSUPPORTED, "%s: tokenizer.ggml.model 'gpt2' without tokenizer.ggml.merges is not supported",
                       path);
    if (mv->type != SC_GGUF_ARRAY || mv->elem_type != SC_GGUF_STRING || mv->count > ((uint64_t)1 << 26))
        return sc_errf(err, SC_EFORMAT, "%s: tokenizer.ggml.merges is not an array of at most 2^26 strings", path);
    SC_TRY(token_array(g, &toks, err));
    int64_t n = (int64_t)toks->count;
    SC_TRY(per_token_array(g, "tokenizer.ggml.token_type", n, false, &tv, err));
    int32_t bos, eos, unk;
    SC_TRY(special_id(g, "tokenizer.ggml.bos_token_id", n, &bos, err));
    SC_TRY(special_id(g, "tokenizer.ggml.eos_token_id", n, &eos, err));
    SC_TRY(special_id(g, "tokenizer.ggml.unknown_token_id", n, &unk, err));
    char pre[64] = "default";
    const sc_gguf_value *pv = sc_gguf_get(g, "tokenizer.ggml.pre");
    const char *s;
    size_t len;
    if (pv && sc_gguf_value_string(pv, &s, &len)) snprintf(pre, sizeof pre, "%.*s", (int)(len > 63 ? 63 : len), s);
    tok_bpe_cfg cfg = {.byte_level = true};
    cfg.ignore_merges = strcmp(pre, "llama3") == 0 || strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama-v3") == 0;
    sc_status st = tok_cfg_add_known_pre(&cfg, path, pre, err);
    sc_tokenizer *t = NULL;
    char *kb = malloc(2 * ((size_t)TOK_MAX_PIECE + 1));
    if (st == SC_OK && !kb) st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    if (st == SC_OK) st = tok_create(path, n, &tok_bpe_ops, &t, err);
    sc_gguf_iter it;
    sc_gguf_value e;
    sc_gguf_iter_init(&it, toks);
    for (int64_t i = 0; st == SC_OK && i < n; i++) {
        int64_t ty = SC_TOKTYPE_NORMAL;
        if (!sc_gguf_iter_next(&it, &e) || !sc_gguf_value_string(&e, &s, &len) ||
            (tv && (!sc_gguf_array_elem(tv, (uint64_t)i, &e) || !sc_gguf_value_int(&e, &ty) || ty < 1 || ty > 6))) {
            st = sc_errf(err, SC_EFORMAT, "%s: tokenizer.ggml.tokens[%lld] or its token_type is unreadable", path,
                         (long long)i);
            break;
        }
        size_t kn = len;
        const char *k = s;
        if (ty == SC_TOKTYPE_NORMAL && len <= TOK_MAX_PIECE && tok_bytelevel_decode(s, len, kb, &kn)) k = kb;
        else kn = len;
        st = tok_set(t, path, i, k, kn, NULL, 0, 0.0f, (int32_t)ty, err);
    }
    if (st == SC_OK) st = tok_finish(t, path, bos, eos, unk, err);
    if (st == SC_OK) {
        snprintf(t->kind, sizeof t->kind, "bpe-bytelevel");
        t->add_bos_default = false;
        st = common_options(g, t, err);
    }
    if (st == SC_OK) st = tok_bpe_attach(t, path, &cfg, (size_t)mv->count, err);
    tok_cfg_free(&cfg);
    sc_gguf_iter_init(&it, mv);
    for (uint64_t i = 0; st == SC_OK && i < mv->count; i++) {
        const char *sp;
        if (!sc_gguf_iter_next(&it, &e) || !sc_gguf_value_string(&e, &s, &len) || !(sp = memchr(s, ' ', len))) {
            st = sc_errf(err, SC_EFORMAT, "%s: tokenizer.ggml.merges[%llu] is not \"a b\"", path, (unsigned long long)i);
            break;
        }
        size_t na = (size_t)(sp - s), nb = len - na - 1, ka, kbn;
        char *ba = kb, *bb = kb + TOK_MAX_PIECE + 1;
        const char *a = s, *b = sp + 1;
        if (na <= TOK_MAX_PIECE && tok_bytelevel_decode(a, na, ba, &ka)) a = ba;
        else ka = na;
        if (nb <= TOK_MAX_PIECE && tok_bytelevel_decode(b, nb, bb, &kbn)) b = bb;
        else kbn = nb;
        st = tok_bpe_add_merge(t, path, (size_t)i, a, ka, b, kbn, err);
    }
    free(kb);
    if (st != SC_OK) {
        sc_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SC_OK;
}

/* tokenizer.ggml.model: false when absent. */
static bool tokenizer_kind(const sc_gguf *g, const char **s, int *len) {
    const sc_gguf_value *v = sc_gguf_get(g, "tokenizer.ggml.model");
    size_t n;
    if (!v || !sc_gguf_value_string(v, s, &n)) return false;
    *len = (int)(n > 64 ? 64 : n);
    return true;
}

static bool is_kind(const char *s, int len, const char *k) { return len == (int)strlen(k) && memcmp(s, k, (size_t)len) == 0; }

/* Builds the tokenizer of a supported kind ("llama", "gpt2"). */
static sc_status build_tokenizer(const sc_gguf *g, const char *kind, int len, sc_tokenizer **out, sc_err *err) {
    if (is_kind(kind, len, "gpt2")) return build_gpt2_tokenizer(g, out, err);
    if (!is_kind(kind, len, "llama"))
        return sc_errf(err, SC_EUNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' is not supported (llama, gpt2)",
                       sc_gguf_path(g), len, kind);
    SC_TRY(build_llama_tokenizer(g, out, err));
    const sc_gguf_value *v = sc_gguf_get(g, "tokenizer.ggml.add_space_prefix");
    bool prefix = true;
    sc_status st = SC_OK;
    if (v && sc_gguf_value_bool(v, &prefix) && !prefix) st = tok_spm_attach(*out, false, false, err);
    if (st == SC_OK) st = common_options(g, *out, err);
    if (st != SC_OK) {
        sc_tokenizer_free(*out);
        *out = NULL;
    }
    return st;
}

sc_status sc_gguf_load_tokenizer(const char *path, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    sc_gguf *g;
    SC_TRY(sc_gguf_open(path, &g, err));
    const char *kind;
    int len;
    sc_status st;
    if (!tokenizer_kind(g, &kind, &len))
        st = sc_errf(err, SC_EFORMAT, "%s: no tokenizer (tokenizer.ggml.model is missing)", path);
    else
        st = build_tokenizer(g, kind, len, out, err);
    sc_gguf_free(g);
    return st;
}

/* Sets cfg.bos_id / eos_id from the keys and builds the tokenizer; a kind
 * or variant we do not handle leaves a note instead. */
static sc_status read_vocab(builder *b, bool build) {
    sc_model *m = b->m;
    const char *kind;
    int len;
    if (!tokenizer_kind(b->g, &kind, &len)) {
        if (build) snprintf(m->note, sizeof m->note, "the file carries no tokenizer; use --tokenizer or --tokens");
        return SC_OK;
    }
    const sc_gguf_value *toks = NULL;
    SC_TRY(token_array(b->g, &toks, b->err));
    int64_t n = (int64_t)toks->count;
    if (n > m->cfg.vocab_size)
        return sc_errf(b->err, SC_EFORMAT, "%s: tokenizer.ggml.tokens has %lld tokens, more than the %lld embedding rows",
                       b->path, (long long)n, (long long)m->cfg.vocab_size);
    SC_TRY(special_id(b->g, "tokenizer.ggml.bos_token_id", n, &m->cfg.bos_id, b->err));
    SC_TRY(special_id(b->g, "tokenizer.ggml.eos_token_id", n, &m->cfg.eos_id, b->err));
    if (!build) return SC_OK;
    sc_err e = {{0}};
    sc_status st = build_tokenizer(b->g, kind, len, &m->tokenizer, &e);
    if (st == SC_EUNSUPPORTED) {
        const char *why = strstr(e.msg, ": ") ? strstr(e.msg, ": ") + 2 : e.msg;
        snprintf(m->note, sizeof m->note, "tokenizer.ggml.model '%.*s': %.160s; use --tokenizer or "
            "--tokens", len, kind, why);
        return SC_OK;
    }
    if (st != SC_OK) *b->err = e;
    return st;
}

/* ---- weights ---- */

/* Finds a tensor, checks its shape against ne = [ne0, ne1] (ne1 = 0 for a
 * vector) and converts it to f32. Absent and optional: *out = NULL. */
static sc_status load_tensor(builder *b, const char *name, int64_t ne0, int64_t ne1, bool required,
                             const float **out) {
    *out = NULL;
    const sc_gguf_tensor *t = sc_gguf_find_tensor(b->g, name);
    if (!t) return required ? sc_errf(b->err, SC_EFORMAT, "%s: missing tensor '%s'", b->path, name) : SC_OK;
    uint64_t want[SC_GGUF_MAX_DIMS] = {(uint64_t)ne0, ne1 ? (uint64_t)ne1 : 1, 1, 1};
    if (memcmp(want, t->ne, sizeof want) != 0) {
        char got[128], exp[64];
        int k = snprintf(got, sizeof got, "[");
        for (uint32_t d = 0; d < t->n_dims; d++)
            k += snprintf(got + k, sizeof got - (size_t)k, "%s%llu", d ? ", " : "", (unsigned long long)t->ne[d]);
        snprintf(got + k, sizeof got - (size_t)k, "]");
        if (ne1)
            snprintf(exp, sizeof exp, "[%lld, %lld]", (long long)ne0, (long long)ne1);
        else
            snprintf(exp, sizeof exp, "[%lld]", (long long)ne0);
        return sc_errf(b->err, SC_EFORMAT, "%s: tensor '%s' has shape ne=%s, expected ne=%s for this config",
                       b->path, name, got, exp);
    }
    sc_dtype dt;
    if (!sc_gguf_ggml_dtype(t->ggml_type, &dt))
        return sc_errf(b->err, SC_EUNSUPPORTED,
                       "%s: tensor '%s' has ggml type %s (%u), which is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                       "Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)", b->path,
                       name, sc_gguf_ggml_type_name(t->ggml_type), t->ggml_type);
    return sc_model_set_weight(b->m, out, t->data, dt, (size_t)t->n_elems, b->err);
}

/* True when output.weight is a byte-identical copy of token_embd.weight
 * (llama.cpp's stories260K stores the tied classifier twice). */
static bool output_is_copy(const sc_gguf *g) {
    const sc_gguf_tensor *o = sc_gguf_find_tensor(g, "output.weight");
    const sc_gguf_tensor *e = sc_gguf_find_tensor(g, "token_embd.weight");
    return o && e && o->ggml_type == e->ggml_type && memcmp(o->ne, e->ne, sizeof o->ne) == 0 &&
           o->n_bytes == e->n_bytes && memcmp(o->data, e->data, (size_t)o->n_bytes) == 0;
}

static sc_status load_weights(builder *b) {
    sc_model *m = b->m;
    sc_config *c = &m->cfg;
    const int64_t D = c->dim, F = c->ffn_dim, Q = c->n_heads * c->head_dim, KV = c->n_kv_heads * c->head_dim;
    SC_TRY(load_tensor(b, "token_embd.weight", D, c->vocab_size, true, &m->tok_emb));
    SC_TRY(load_tensor(b, "output_norm.weight", D, 0, true, &m->final_norm));
    if (sc_gguf_find_tensor(b->g, "output.weight") && !output_is_copy(b->g)) {
        SC_TRY(load_tensor(b, "output.weight", D, c->vocab_size, true, &m->classifier));
    } else {
        m->classifier = m->tok_emb;
        c->tied_classifier = true;
    }
    m->layers = sc_calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) return sc_errf(b->err, SC_ENOMEM, "%s: out of memory", b->path);
    for (int64_t l = 0; l < c->n_layers; l++) {
        sc_layer *L = &m->layers[l];
        const struct {
            const char *suffix;
            int64_t ne0, ne1;
            bool required;
            const float **dst;
        } T[] = {
            {"attn_norm.weight", D, 0, true, &L->attn_norm},   {"attn_q.weight", D, Q, true, &L->wq},
            {"attn_k.weight", D, KV, true, &L->wk},            {"attn_v.weight", D, KV, true, &L->wv},
            {"attn_q.bias", Q, 0, c->qkv_bias, &L->bq},        {"attn_k.bias", KV, 0, c->qkv_bias, &L->bk},
            {"attn_v.bias", KV, 0, c->qkv_bias, &L->bv},       {"attn_output.weight", Q, D, true, &L->wo},
            {"ffn_norm.weight", D, 0, true, &L->ffn_norm},     {"ffn_gate.weight", D, F, true, &L->wg},
            {"ffn_up.weight", D, F, true, &L->wu},             {"ffn_down.weight", F, D, true, &L->wd},
        };
        for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
            if (!T[i].required) continue; /* q/k/v biases outside qwen2 are ignored */
            char name[96];
            snprintf(name, sizeof name, "blk.%lld.%s", (long long)l, T[i].suffix);
            SC_TRY(load_tensor(b, name, T[i].ne0, T[i].ne1, true, T[i].dst));
        }
    }
    return SC_OK;
}

/* Name of the ggml type holding the most elements (ids are < 64: unknown
 * types were rejected when the file was opened). */
static void dominant_dtype(const sc_gguf *g, char *out, size_t cap) {
    uint64_t total[64] = {0};
    uint32_t best = 0;
    for (int64_t i = 0; i < sc_gguf_tensor_count(g); i++) {
        const sc_gguf_tensor *t = sc_gguf_tensor_at(g, i);
        if (t->ggml_type < 64) total[t->ggml_type] += t->n_elems;
    }
    for (uint32_t k = 1; k < 64; k++)
        if (total[k] > total[best]) best = k;
    snprintf(out, cap, "%s", sc_gguf_ggml_type_name(best));
}

sc_status sc_load_gguf(const char *path, sc_model **out, sc_err *err) {
    *out = NULL;
    sc_gguf *g;
    SC_TRY(sc_gguf_open(path, &g, err));
    sc_model *m = NULL;
    sc_status st;
    if (sc_gguf_tensor_count(g) == 0) {
        st = sc_errf(err, SC_EFORMAT, "%s: no tensors: vocabulary-only file (use it as a tokenizer with "
            "--tokenizer)", path);
        goto done;
    }
    m = sc_model_new(path, "gguf");
    if (!m) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    /* The model owns the mapping from here on; g's views stay valid. */
    st = sc_model_keep_map(m, sc_gguf_take_map(g), err);
    if (st != SC_OK) goto done;
    builder b = {.g = g, .m = m, .path = path, .err = err};
    if ((st = read_config(&b)) != SC_OK || (st = read_vocab(&b, false)) != SC_OK ||
        (st = sc_config_validate(&m->cfg, path, err)) != SC_OK || (st = load_weights(&b)) != SC_OK ||
        (st = sc_model_check_complete(m, err)) != SC_OK || (st = read_vocab(&b, true)) != SC_OK)
        goto done;
    dominant_dtype(g, m->src_dtype, sizeof m->src_dtype);
done:
    sc_gguf_free(g);
    if (st != SC_OK) {
        sc_model_free(m);
        return st;
    }
    *out = m;
    return SC_OK;
}
