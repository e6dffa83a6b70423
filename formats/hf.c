/* hf.c - loads a Hugging Face checkpoint directory (config.json plus
 * model.safetensors or a sharded model.safetensors.index.json) of the Llama,
 * Mistral, Qwen2 or Gemma families. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "safetensors.h"

#define HF_CONFIG_MAX ((size_t)16 << 20)

typedef struct hf_ctx {
    sc_model *m;
    sc_st_set *set;
    const char *cfg_path;
    uint64_t dtype_bytes[SC_DT_COUNT]; /* weight bytes per source dtype */
} hf_ctx;

/* ---- config.json ---- */

static const cJSON *cfg_item(const cJSON *root, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, key);
    return (j && !cJSON_IsNull(j)) ? j : NULL;
}

static sc_status cfg_int(const hf_ctx *c, const cJSON *root, const char *key, bool required, int64_t def,
                         int64_t *out, sc_err *err) {
    const cJSON *j = cfg_item(root, key);
    if (!j) {
        if (required) return sc_errf(err, SC_EFORMAT, "%s: missing required key '%s'", c->cfg_path, key);
        *out = def;
        return SC_OK;
    }
    double d = j->valuedouble;
    if (!cJSON_IsNumber(j) || !isfinite(d) || d != floor(d) || fabs(d) > 9007199254740992.0)
        return sc_errf(err, SC_EFORMAT, "%s: key '%s' must be an integer", c->cfg_path, key);
    *out = (int64_t)d;
    return SC_OK;
}

static sc_status cfg_float(const hf_ctx *c, const cJSON *root, const char *key, double def, float *out,
                           sc_err *err) {
    const cJSON *j = cfg_item(root, key);
    if (!j) {
        *out = (float)def;
        return SC_OK;
    }
    if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || fabs(j->valuedouble) > 1e30)
        return sc_errf(err, SC_EFORMAT, "%s: key '%s' must be a number", c->cfg_path, key);
    *out = (float)j->valuedouble;
    return SC_OK;
}

static sc_status cfg_bool(const hf_ctx *c, const cJSON *root, const char *key, bool def, bool *out, sc_err *err) {
    const cJSON *j = cfg_item(root, key);
    if (!j) {
        *out = def;
        return SC_OK;
    }
    if (!cJSON_IsBool(j)) return sc_errf(err, SC_EFORMAT, "%s: key '%s' must be true or false", c->cfg_path, key);
    *out = cJSON_IsTrue(j);
    return SC_OK;
}

/* A token id: an integer, or (eos) an array whose first element is used. */
static sc_status cfg_token(const hf_ctx *c, const cJSON *root, const char *key, int32_t *out, sc_err *err) {
    const cJSON *j = cfg_item(root, key);
    *out = -1;
    if (!j) return SC_OK;
    if (cJSON_IsArray(j)) {
        j = j->child;
        if (!j) return SC_OK;
    }
    double d = j->valuedouble;
    if (!cJSON_IsNumber(j) || !isfinite(d) || d != floor(d) || d < 0 || d > 2147483647.0)
        return sc_errf(err, SC_EFORMAT, "%s: key '%s' must be a non-negative integer (or an array of them)",
                       c->cfg_path, key);
    *out = (int32_t)d;
    return SC_OK;
}

static const char *cfg_string(const hf_ctx *c, const cJSON *root, const char *key, sc_status *st, sc_err *err) {
    const cJSON *j = cfg_item(root, key);
    if (!j) return NULL;
    if (!cJSON_IsString(j)) {
        *st = sc_errf(err, SC_EFORMAT, "%s: key '%s' must be a string", c->cfg_path, key);
        return NULL;
    }
    return j->valuestring;
}

static void add_note(sc_model *m, const char *text) {
    size_t n = strlen(m->note);
    snprintf(m->note + n, sizeof m->note - n, "%s%s", n ? "; " : "", text);
}

static sc_status parse_config(hf_ctx *c, const cJSON *root, sc_err *err) {
    sc_config *cfg = &c->m->cfg;
    const char *cp = c->cfg_path;
    if (!cJSON_IsObject(root)) return sc_errf(err, SC_EFORMAT, "%s: not a JSON object", cp);
    sc_status st = SC_OK;
    const char *mt = cfg_string(c, root, "model_type", &st, err);
    if (st != SC_OK) return st;
    if (!mt) return sc_errf(err, SC_EFORMAT, "%s: missing required key 'model_type'", cp);
    if (strcmp(mt, "llama") == 0) cfg->family = SC_FAMILY_LLAMA;
    else if (strcmp(mt, "mistral") == 0) cfg->family = SC_FAMILY_MISTRAL;
    else if (strcmp(mt, "qwen2") == 0) cfg->family = SC_FAMILY_QWEN2;
    else if (strcmp(mt, "gemma") == 0) cfg->family = SC_FAMILY_GEMMA;
    else
        return sc_errf(err, SC_EUNSUPPORTED, "%s: model_type '%.64s' is not supported (llama, mistral, qwen2, gemma)",
                       cp, mt);
    bool gemma = cfg->family == SC_FAMILY_GEMMA;

    SC_TRY(cfg_int(c, root, "hidden_size", true, 0, &cfg->dim, err));
    SC_TRY(cfg_int(c, root, "intermediate_size", true, 0, &cfg->ffn_dim, err));
    SC_TRY(cfg_int(c, root, "num_hidden_layers", true, 0, &cfg->n_layers, err));
    SC_TRY(cfg_int(c, root, "num_attention_heads", true, 0, &cfg->n_heads, err));
    SC_TRY(cfg_int(c, root, "num_key_value_heads", false, cfg->n_heads, &cfg->n_kv_heads, err));
    if (cfg->n_heads <= 0) return sc_errf(err, SC_EFORMAT, "%s: num_attention_heads must be positive", cp);
    SC_TRY(cfg_int(c, root, "head_dim", false, cfg->dim / cfg->n_heads, &cfg->head_dim, err));
    SC_TRY(cfg_int(c, root, "vocab_size", true, 0, &cfg->vocab_size, err));
    SC_TRY(cfg_int(c, root, "max_position_embeddings", false, 2048, &cfg->max_seq_len, err));
    SC_TRY(cfg_float(c, root, "rms_norm_eps", 1e-6, &cfg->norm_eps, err));
    SC_TRY(cfg_float(c, root, "rope_theta", 10000.0, &cfg->rope_theta, err));
    SC_TRY(cfg_bool(c, root, "tie_word_embeddings", gemma, &cfg->tied_classifier, err));
    SC_TRY(cfg_token(c, root, "bos_token_id", &cfg->bos_id, err));
    SC_TRY(cfg_token(c, root, "eos_token_id", &cfg->eos_id, err));

    cfg->rope = SC_ROPE_HALF;
    cfg->qkv_bias = cfg->family == SC_FAMILY_QWEN2;
    cfg->act = SC_ACT_SILU;
    const char *act = cfg_string(c, root, "hidden_activation", &st, err);
    if (st == SC_OK && !act) act = cfg_string(c, root, "hidden_act", &st, err);
    if (st != SC_OK) return st;
    if (gemma) {
        /* HF's Gemma uses the tanh approximation even when config says "gelu". */
        if (act && strcmp(act, "gelu_pytorch_tanh") != 0 && strcmp(act, "gelu") != 0 && strcmp(act, "gelu_new") != 0)
            return sc_errf(err, SC_EUNSUPPORTED, "%s: activation '%.64s' is not supported for gemma", cp, act);
        cfg->act = SC_ACT_GELU_TANH;
        cfg->embed_scale = true;
        cfg->norm_add_one = true;
    } else if (act && strcmp(act, "silu") != 0 && strcmp(act, "swish") != 0) {
        return sc_errf(err, SC_EUNSUPPORTED, "%s: hidden_act '%.64s' is not supported for %s", cp, act, mt);
    }

    bool flag = false;
    SC_TRY(cfg_bool(c, root, "attention_bias", false, &flag, err));
    if (flag && !cfg->qkv_bias)
        return sc_errf(err, SC_EUNSUPPORTED, "%s: attention_bias = true is not supported for %s", cp, mt);
    SC_TRY(cfg_bool(c, root, "mlp_bias", false, &flag, err));
    if (flag) return sc_errf(err, SC_EUNSUPPORTED, "%s: mlp_bias = true is not supported", cp);

    /* Things we load but do not model: say so in the note `info` prints. */
    const cJSON *rs = cfg_item(root, "rope_scaling");
    if (cJSON_IsObject(rs)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!cJSON_IsString(ty)) ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
        const char *tn = cJSON_IsString(ty) ? ty->valuestring : "?";
        if (strcmp(tn, "llama3") == 0 || strcmp(tn, "linear") == 0) {
            SC_TRY(cfg_float(c, rs, "factor", 1.0, &cfg->rope_factor, err));
            if (!(cfg->rope_factor >= 1.0f && cfg->rope_factor <= 1024.0f))
                return sc_errf(err, SC_EFORMAT, "%s: rope_scaling.factor = %g is out of range", cp,
                               (double)cfg->rope_factor);
            cfg->rope_scaling = SC_ROPE_SCALING_LINEAR;
        }
        if (strcmp(tn, "llama3") == 0) {
            cfg->rope_scaling = SC_ROPE_SCALING_LLAMA3;
            SC_TRY(cfg_float(c, rs, "low_freq_factor", 1.0, &cfg->rope_low_freq_factor, err));
            SC_TRY(cfg_float(c, rs, "high_freq_factor", 4.0, &cfg->rope_high_freq_factor, err));
            SC_TRY(cfg_int(c, rs, "original_max_position_embeddings", false, 8192, &cfg->rope_orig_ctx, err));
            if (!(cfg->rope_high_freq_factor > cfg->rope_low_freq_factor && cfg->rope_low_freq_factor > 0.0f) ||
                cfg->rope_orig_ctx <= 0 || cfg->rope_orig_ctx > SC_MAX_SEQ)
                return sc_errf(err, SC_EFORMAT, "%s: rope_scaling (llama3) has inconsistent factors", cp);
        } else if (strcmp(tn, "default") != 0 && strcmp(tn, "linear") != 0) {
            char buf[128];
            snprintf(buf, sizeof buf, "rope_scaling '%.40s' not applied (exact within the original context)", tn);
            add_note(c->m, buf);
        }
    }
    int64_t sw = 0;
    bool use_sw = cfg->family == SC_FAMILY_MISTRAL;
    SC_TRY(cfg_bool(c, root, "use_sliding_window", use_sw, &use_sw, err));
    if (use_sw && cfg_int(c, root, "sliding_window", false, 0, &sw, NULL) == SC_OK && sw > 0 &&
        sw < cfg->max_seq_len) {
        char buf[96];
        snprintf(buf, sizeof buf, "sliding_window %lld ignored (full attention)", (long long)sw);
        add_note(c->m, buf);
    }
    return sc_config_validate(cfg, cp, err);
}

/* ---- tensors ---- */

/* Finds `name` and checks its dtype and shape ([d0] when d1 < 0, else [d0, d1]). */
static sc_status find_tensor(hf_ctx *c, const char *name, int64_t d0, int64_t d1, bool required,
                             const sc_st_tensor **out, sc_err *err) {
    const sc_st_tensor *t = sc_st_set_find(c->set, name);
    *out = NULL;
    if (!t) {
        if (!required) return SC_OK;
        return sc_errf(err, SC_EFORMAT, "%s: missing tensor '%s'", sc_st_set_path(c->set), name);
    }
    if (!t->supported)
        return sc_errf(err, SC_EUNSUPPORTED, "%s: tensor '%s' has dtype %s (need F32, F16 or BF16)", t->file, name,
                       t->dtype_name);
    int nd = d1 < 0 ? 1 : 2;
    if (t->n_dims != nd || t->shape[0] != d0 || (nd == 2 && t->shape[1] != d1)) {
        char got[128] = "[", *p = got + 1;
        for (int i = 0; i < t->n_dims && p < got + sizeof got - 24; i++)
            p += snprintf(p, (size_t)(got + sizeof got - p), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        snprintf(p, (size_t)(got + sizeof got - p), "]");
        if (nd == 1)
            return sc_errf(err, SC_EFORMAT, "%s: tensor '%s' has shape %s, expected [%lld]", t->file, name, got,
                           (long long)d0);
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s' has shape %s, expected [%lld, %lld]", t->file, name, got,
                       (long long)d0, (long long)d1);
    }
    c->dtype_bytes[t->dtype] += t->n_bytes;
    *out = t;
    return SC_OK;
}

static sc_status load_w(hf_ctx *c, const char *name, int64_t d0, int64_t d1, bool required, const float **out,
                        sc_err *err) {
    const sc_st_tensor *t;
    *out = NULL;
    SC_TRY(find_tensor(c, name, d0, d1, required, &t, err));
    if (!t) return SC_OK;
    return sc_model_set_weight(c->m, out, t->data, t->dtype, (size_t)t->n_elements, err);
}

/* An RMSNorm weight [dim]; Gemma's (1 + w) is materialised here. */
static sc_status load_norm(hf_ctx *c, const char *name, const float **out, sc_err *err) {
    if (!c->m->cfg.norm_add_one) return load_w(c, name, c->m->cfg.dim, -1, true, out, err);
    const sc_st_tensor *t;
    SC_TRY(find_tensor(c, name, c->m->cfg.dim, -1, true, &t, err));
    float *w = sc_model_alloc_f32(c->m, (size_t)t->n_elements, err);
    if (!w) return SC_ENOMEM;
    sc_convert_to_f32(t->dtype, t->data, (size_t)t->n_elements, w);
    for (size_t i = 0; i < (size_t)t->n_elements; i++) w[i] += 1.0f;
    *out = w;
    return SC_OK;
}

static sc_status load_weights(hf_ctx *c, sc_err *err) {
    sc_model *m = c->m;
    const sc_config *cfg = &m->cfg;
    int64_t D = cfg->dim, F = cfg->ffn_dim, Q = cfg->n_heads * cfg->head_dim, KV = cfg->n_kv_heads * cfg->head_dim;
    SC_TRY(load_w(c, "model.embed_tokens.weight", cfg->vocab_size, D, true, &m->tok_emb, err));
    SC_TRY(load_norm(c, "model.norm.weight", &m->final_norm, err));
    if (cfg->tied_classifier)
        m->classifier = m->tok_emb;
    else
        SC_TRY(load_w(c, "lm_head.weight", cfg->vocab_size, D, true, &m->classifier, err));
    m->layers = calloc((size_t)cfg->n_layers, sizeof *m->layers);
    if (!m->layers) return sc_errf(err, SC_ENOMEM, "%s: out of memory", m->path);
    for (int64_t l = 0; l < cfg->n_layers; l++) {
        sc_layer *L = &m->layers[l];
        char nm[160];
#define NAME(suffix) (snprintf(nm, sizeof nm, "model.layers.%lld.%s", (long long)l, suffix), nm)
        SC_TRY(load_norm(c, NAME("input_layernorm.weight"), &L->attn_norm, err));
        SC_TRY(load_w(c, NAME("self_attn.q_proj.weight"), Q, D, true, &L->wq, err));
        SC_TRY(load_w(c, NAME("self_attn.k_proj.weight"), KV, D, true, &L->wk, err));
        SC_TRY(load_w(c, NAME("self_attn.v_proj.weight"), KV, D, true, &L->wv, err));
        SC_TRY(load_w(c, NAME("self_attn.o_proj.weight"), D, Q, true, &L->wo, err));
        if (cfg->qkv_bias) {
            SC_TRY(load_w(c, NAME("self_attn.q_proj.bias"), Q, -1, true, &L->bq, err));
            SC_TRY(load_w(c, NAME("self_attn.k_proj.bias"), KV, -1, true, &L->bk, err));
            SC_TRY(load_w(c, NAME("self_attn.v_proj.bias"), KV, -1, true, &L->bv, err));
        }
        SC_TRY(load_norm(c, NAME("post_attention_layernorm.weight"), &L->ffn_norm, err));
        SC_TRY(load_w(c, NAME("mlp.gate_proj.weight"), F, D, true, &L->wg, err));
        SC_TRY(load_w(c, NAME("mlp.up_proj.weight"), F, D, true, &L->wu, err));
        SC_TRY(load_w(c, NAME("mlp.down_proj.weight"), D, F, true, &L->wd, err));
#undef NAME
    }
    int best = 0;
    for (int t = 1; t < SC_DT_COUNT; t++)
        if (c->dtype_bytes[t] > c->dtype_bytes[best]) best = t;
    snprintf(m->src_dtype, sizeof m->src_dtype, "%s", sc_dtype_name((sc_dtype)best));
    return sc_model_check_complete(m, err);
}

/* ---- entry point ---- */

static sc_status hf_load(hf_ctx *c, const char *path, sc_err *err) {
    char dir[4096], cfg_path[4096], wpath[4096];
    if (sc_is_dir(path)) {
        if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
            return sc_errf(err, SC_EARG, "%s: path too long", path);
    } else {
        const char *slash = strrchr(path, '/');
        if (!slash) {
            snprintf(dir, sizeof dir, ".");
        } else {
            size_t n = (size_t)(slash - path);
            if (n + 2 > sizeof dir) return sc_errf(err, SC_EARG, "%s: path too long", path);
            memcpy(dir, path, n ? n : 1); /* "/x" -> "/" */
            dir[n ? n : 1] = '\0';
        }
    }
    if (!sc_path_join(cfg_path, sizeof cfg_path, dir, "config.json"))
        return sc_errf(err, SC_EARG, "%s: path too long", path);
    c->cfg_path = cfg_path;

    if (!sc_is_dir(path) && (sc_has_suffix(path, ".safetensors") || sc_has_suffix(path, ".index.json"))) {
        snprintf(wpath, sizeof wpath, "%s", path);
    } else {
        if (!sc_path_join(wpath, sizeof wpath, dir, "model.safetensors"))
            return sc_errf(err, SC_EARG, "%s: path too long", path);
        if (!sc_file_exists(wpath)) {
            sc_path_join(wpath, sizeof wpath, dir, "model.safetensors.index.json");
            if (!sc_file_exists(wpath))
                return sc_errf(err, SC_EIO, "%s: no model.safetensors or model.safetensors.index.json", dir);
        }
    }

    char *text = NULL;
    size_t len = 0;
    SC_TRY(sc_read_file(cfg_path, HF_CONFIG_MAX, &text, &len, err));
    cJSON *root = cJSON_ParseWithLength(text, len + 1);
    free(text);
    if (!root) return sc_errf(err, SC_EFORMAT, "%s: not valid JSON", cfg_path);
    sc_status st = parse_config(c, root, err);
    cJSON_Delete(root);
    if (st != SC_OK) return st;

    SC_TRY(sc_st_set_open(wpath, &c->set, err));
    /* The model owns the mappings from here on; the set keeps only views. */
    for (size_t i = 0; i < sc_st_set_n_files(c->set); i++) {
        sc_file_map map;
        if (sc_st_detach_map(sc_st_set_file(c->set, i), &map)) SC_TRY(sc_model_keep_map(c->m, map, err));
    }
    return load_weights(c, err);
}

sc_status sc_load_hf(const char *path, sc_model **out, sc_err *err) {
    *out = NULL;
    hf_ctx c = {0};
    c.m = sc_model_new(path, "hf");
    if (!c.m) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    sc_status st = hf_load(&c, path, err);
    sc_st_set_free(c.set);
    if (st != SC_OK) {
        sc_model_free(c.m);
        return st;
    }
    *out = c.m;
    return SC_OK;
}
