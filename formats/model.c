#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

struct sc_model_res {
    sc_file_map *maps;
    size_t n_maps, cap_maps;
    void **bufs;
    size_t n_bufs, cap_bufs;
};

const char *sc_family_name(sc_family f) {
    switch (f) {
    case SC_FAMILY_LLAMA: return "llama";
    case SC_FAMILY_MISTRAL: return "mistral";
    case SC_FAMILY_QWEN2: return "qwen2";
    case SC_FAMILY_GEMMA: return "gemma";
    }
    return "?";
}

sc_model *sc_model_new(const char *path, const char *format) {
    sc_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->res = calloc(1, sizeof *m->res);
    if (!m->res) {
        free(m);
        return NULL;
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(m->format, sizeof m->format, "%s", format);
    m->cfg.bos_id = -1;
    m->cfg.eos_id = -1;
    return m;
}

void sc_model_free(sc_model *m) {
    if (!m) return;
    if (m->res) {
        for (size_t i = 0; i < m->res->n_maps; i++) sc_unmap_file(&m->res->maps[i]);
        for (size_t i = 0; i < m->res->n_bufs; i++) sc_free_aligned(m->res->bufs[i]);
        free(m->res->maps);
        free(m->res->bufs);
        free(m->res);
    }
    sc_tokenizer_free(m->tokenizer);
    free(m->layers);
    free(m);
}

static bool grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap * 2 : 8;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

sc_status sc_model_keep_map(sc_model *m, sc_file_map map, sc_err *err) {
    sc_model_res *r = m->res;
    if (!grow((void **)&r->maps, &r->cap_maps, r->n_maps + 1, sizeof *r->maps)) {
        sc_unmap_file(&map);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", m->path);
    }
    r->maps[r->n_maps++] = map;
    return SC_OK;
}

float *sc_model_alloc_f32(sc_model *m, size_t n, sc_err *err) {
    sc_model_res *r = m->res;
    size_t bytes;
    if (!sc_mul_ok(n, sizeof(float), &bytes)) {
        sc_errf(err, SC_ENOMEM, "%s: tensor size overflows", m->path);
        return NULL;
    }
    if (!grow((void **)&r->bufs, &r->cap_bufs, r->n_bufs + 1, sizeof *r->bufs)) {
        sc_errf(err, SC_ENOMEM, "%s: out of memory", m->path);
        return NULL;
    }
    float *p = sc_alloc_aligned(bytes);
    if (!p) {
        sc_errf(err, SC_ENOMEM, "%s: cannot allocate %zu bytes", m->path, bytes);
        return NULL;
    }
    r->bufs[r->n_bufs++] = p;
    m->owned_bytes += bytes;
    return p;
}

const float *sc_model_tensor_f32(sc_model *m, const uint8_t *src, sc_dtype t, size_t n, sc_err *err) {
    if (t == SC_DT_F32 && ((uintptr_t)src % _Alignof(float)) == 0) {
        m->mapped_bytes += (uint64_t)n * 4;
        return (const float *)(const void *)src;
    }
    float *dst = sc_model_alloc_f32(m, n, err);
    if (!dst) return NULL;
    sc_convert_to_f32(t, src, n, dst);
    return dst;
}

sc_status sc_config_validate(const sc_config *c, const char *what, sc_err *err) {
    srt_model_config r = {
        .dim = c->dim, .ffn_dim = c->ffn_dim, .n_layers = c->n_layers, .n_heads = c->n_heads,
        .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim, .vocab_size = c->vocab_size,
        .max_seq_len = c->max_seq_len, .norm_eps = c->norm_eps, .rope_theta = c->rope_theta,
        .rope_half = c->rope == SC_ROPE_HALF, .rope_scaling = (int)c->rope_scaling, .rope_factor = c->rope_factor,
        .rope_low_freq_factor = c->rope_low_freq_factor, .rope_high_freq_factor = c->rope_high_freq_factor,
        .rope_orig_ctx = c->rope_orig_ctx, .gelu = c->act == SC_ACT_GELU_TANH, .embed_scale = c->embed_scale,
        .tied_classifier = c->tied_classifier, .qkv_bias = c->qkv_bias, .bos_id = c->bos_id, .eos_id = c->eos_id};
    char why[256];
    if (srt_config_invalid(&r, why, sizeof why)) return sc_errf(err, SC_EFORMAT, "%s: %s", what, why);
    return SC_OK;
}

sc_status sc_model_check_complete(const sc_model *m, sc_err *err) {
    if (!m->tok_emb) return sc_errf(err, SC_EFORMAT, "%s: missing token embedding", m->path);
    if (!m->final_norm) return sc_errf(err, SC_EFORMAT, "%s: missing final norm weight", m->path);
    if (!m->classifier) return sc_errf(err, SC_EFORMAT, "%s: missing classifier (lm_head) weight", m->path);
    if (!m->layers) return sc_errf(err, SC_EFORMAT, "%s: no layers", m->path);
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        const sc_layer *L = &m->layers[l];
        const char *miss = !L->attn_norm ? "attention norm"
                         : !L->wq        ? "q projection"
                         : !L->wk        ? "k projection"
                         : !L->wv        ? "v projection"
                         : !L->wo        ? "o projection"
                         : !L->ffn_norm  ? "ffn norm"
                         : !L->wg        ? "gate projection"
                         : !L->wu        ? "up projection"
                         : !L->wd        ? "down projection"
                         : (m->cfg.qkv_bias && (!L->bq || !L->bk || !L->bv)) ? "q/k/v bias"
                                                                              : NULL;
        if (miss) return sc_errf(err, SC_EFORMAT, "%s: layer %lld: missing %s weight", m->path, (long long)l, miss);
    }
    return SC_OK;
}

int64_t sc_model_param_count(const sc_model *m) {
    const sc_config *c = &m->cfg;
    int64_t q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    int64_t per_layer = 2 * c->dim + c->dim * q + 2 * c->dim * kv + q * c->dim + 3 * c->dim * c->ffn_dim;
    if (c->qkv_bias) per_layer += q + 2 * kv;
    int64_t n = c->vocab_size * c->dim + c->n_layers * per_layer + c->dim;
    if (!c->tied_classifier) n += c->vocab_size * c->dim;
    return n;
}

static bool has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

sc_status sc_model_load(const char *path, sc_model **out, sc_err *err) {
    *out = NULL;
    if (sc_is_dir(path) || has_suffix(path, ".safetensors") || has_suffix(path, ".json"))
        return sc_load_hf(path, out, err);
    FILE *f = fopen(path, "rb");
    if (!f) return sc_errf(err, SC_EIO, "%s: cannot open model file", path);
    char magic[8] = {0};
    size_t got = fread(magic, 1, 8, f);
    fclose(f);
    if (got >= 4 && memcmp(magic, "GGUF", 4) == 0) return sc_load_gguf(path, out, err);
    if (got == 8 && memcmp(magic, "SPARSPAK", 8) == 0) return sc_load_artifact(path, out, err);
    return sc_load_llama2c(path, out, err);
}
