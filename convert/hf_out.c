/* hf_out.c - see hf_out.h. */
#define _POSIX_C_SOURCE 200809L
#include "hf_out.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "forward.h"
#include "json_out.h"

/* ---- config.json ---- */

/* The shortest decimal that reads back as the same f32. */
static double short_float(float f) {
    char buf[48];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    return strtod(buf, NULL);
}

static const char *arch_name(sc_family f) {
    switch (f) {
    case SC_FAMILY_MISTRAL: return "MistralForCausalLM";
    case SC_FAMILY_QWEN2: return "Qwen2ForCausalLM";
    case SC_FAMILY_GEMMA: return "GemmaForCausalLM";
    default: return "LlamaForCausalLM";
    }
}

sc_status sc_hf_write_config(const sc_config *c, sc_dtype dt, const char *path, sc_err *err) {
    cJSON *j = cJSON_CreateObject(), *arch = cJSON_AddArrayToObject(j, "architectures");
    cJSON_AddItemToArray(arch, cJSON_CreateString(arch_name(c->family)));
    cJSON_AddStringToObject(j, "model_type", sc_family_name(c->family));
    cJSON_AddNumberToObject(j, "hidden_size", (double)c->dim);
    cJSON_AddNumberToObject(j, "intermediate_size", (double)c->ffn_dim);
    cJSON_AddNumberToObject(j, "num_hidden_layers", (double)c->n_layers);
    cJSON_AddNumberToObject(j, "num_attention_heads", (double)c->n_heads);
    cJSON_AddNumberToObject(j, "num_key_value_heads", (double)c->n_kv_heads);
    cJSON_AddNumberToObject(j, "head_dim", (double)c->head_dim);
    cJSON_AddNumberToObject(j, "vocab_size", (double)c->vocab_size);
    cJSON_AddNumberToObject(j, "max_position_embeddings", (double)c->max_seq_len);
    cJSON_AddNumberToObject(j, "rms_norm_eps", short_float(c->norm_eps));
    cJSON_AddNumberToObject(j, "rope_theta", short_float(c->rope_theta));
    if (c->rope_scaling != SC_ROPE_SCALING_NONE) {
        cJSON *rs = cJSON_AddObjectToObject(j, "rope_scaling");
        bool l3 = c->rope_scaling == SC_ROPE_SCALING_LLAMA3;
        cJSON_AddStringToObject(rs, "rope_type", l3 ? "llama3" : "linear");
        cJSON_AddNumberToObject(rs, "factor", short_float(c->rope_factor));
        if (l3) {
            cJSON_AddNumberToObject(rs, "low_freq_factor", short_float(c->rope_low_freq_factor));
            cJSON_AddNumberToObject(rs, "high_freq_factor", short_float(c->rope_high_freq_factor));
            cJSON_AddNumberToObject(rs, "original_max_position_embeddings", (double)c->rope_orig_ctx);
        }
    }
    if (c->family == SC_FAMILY_GEMMA)
        cJSON_AddStringToObject(j, "hidden_activation", "gelu_pytorch_tanh");
    else
        cJSON_AddStringToObject(j, "hidden_act", "silu");
    cJSON_AddBoolToObject(j, "tie_word_embeddings", c->tied_classifier);
    if (c->bos_id >= 0) cJSON_AddNumberToObject(j, "bos_token_id", c->bos_id);
    if (c->eos_id >= 0) cJSON_AddNumberToObject(j, "eos_token_id", c->eos_id);
    cJSON_AddStringToObject(j, "torch_dtype", dt == SC_DT_BF16 ? "bfloat16" : dt == SC_DT_F16 ? "float16" : "float32");
    char *text = sc_json_print(j, true);
    cJSON_Delete(j);
    if (!text) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    sc_atomic_file f;
    sc_status st = sc_atomic_open(&f, path, err);
    if (st == SC_OK) st = sc_atomic_write(&f, text, strlen(text), err);
    if (st == SC_OK) st = sc_atomic_write(&f, "\n", 1, err);
    if (st == SC_OK)
        st = sc_atomic_commit(&f, err);
    else
        sc_atomic_abort(&f);
    free(text);
    return st;
}

/* ---- model.safetensors ---- */

typedef enum { T_EMBED, T_CLASSIFIER, T_NORM, T_VEC, T_MATRIX } t_kind;

typedef struct out_tensor {
    char name[96];
    t_kind kind;
    int64_t rows, cols;          /* cols 0: a vector */
    int64_t layer;
    int lin;                     /* T_MATRIX: sc_linear */
    const float *vec;            /* T_NORM, T_VEC: resident */
    const float *const *field;   /* T_MATRIX: the model's field */
    bool rope_rows;              /* rows (per head of rows / heads) from interleaved to rotate-half order */
    int64_t heads;
} out_tensor;

/* HF rotate-half row h*hd + j*hd/2 + i = interleaved row h*hd + 2i + j (the inverse of synth.c's permutation for
 * GGUF; what Hugging Face's Llama conversion applies to q and k) */
static void to_half(float *dst, const float *src, int64_t heads, int64_t rows, int64_t cols) {
    int64_t hd = rows / heads;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++)
                memcpy(dst + (h * hd + j * (hd / 2) + i) * cols, src + (h * hd + 2 * i + j) * cols,
                       (size_t)cols * sizeof(float));
}

static sc_status write_tensor(const sc_model *m, const float *const *w, const out_tensor *t, sc_st_writer *wr,
                              float *buf, size_t cap, sc_err *err) {
    int64_t D = m->cfg.dim, n = t->rows * (t->cols ? t->cols : 1);
    if (t->kind == T_EMBED) { /* rows through sc_model_embed, converted on use or not */
        int64_t chunk = (int64_t)(cap / (size_t)D) / 2;
        int32_t *ids = (int32_t *)(buf + chunk * D);
        for (int64_t r0 = 0; r0 < t->rows; r0 += chunk) {
            int64_t k = t->rows - r0 < chunk ? t->rows - r0 : chunk;
            for (int64_t i = 0; i < k; i++) ids[i] = (int32_t)(r0 + i);
            SC_TRY(sc_model_embed(m, ids, k, buf, err));
            SC_TRY(sc_st_writer_write_f32(wr, buf, (size_t)(k * D), err));
        }
        return SC_OK;
    }
    if (t->kind == T_CLASSIFIER) {
        for (int64_t r0 = 0, chunk = sc_model_classifier_chunk(m); r0 < t->rows; r0 += chunk) {
            int64_t k = t->rows - r0 < chunk ? t->rows - r0 : chunk;
            const float *rows;
            SC_TRY(sc_model_classifier_rows(m, r0, k, &rows, err));
            SC_TRY(sc_st_writer_write_f32(wr, rows, (size_t)(k * D), err));
        }
        return SC_OK;
    }
    const float *src = t->vec;
    if (t->kind == T_MATRIX) {
        src = w ? w[t->layer * SC_LIN_COUNT + t->lin] : NULL;
        if (!src) SC_TRY(sc_model_weight(m, t->field, &src, err));
    }
    if (t->kind == T_NORM && m->cfg.norm_add_one) { /* Gemma stores w, the loader materialises 1 + w */
        for (int64_t i = 0; i < n; i++) buf[i] = src[i] - 1.0f;
        src = buf;
    }
    if (t->rope_rows) {
        to_half(buf, src, t->heads, t->rows, t->cols ? t->cols : 1);
        src = buf;
    }
    return sc_st_writer_write_f32(wr, src, (size_t)n, err);
}

static void add(out_tensor *list, size_t *n, const char *name, t_kind kind, int64_t rows, int64_t cols, int64_t layer,
                int lin, const float *vec, const float *const *field) {
    out_tensor *t = &list[(*n)++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->kind = kind;
    t->rows = rows;
    t->cols = cols;
    t->layer = layer;
    t->lin = lin;
    t->vec = vec;
    t->field = field;
}

sc_status sc_model_save_hf(const sc_model *m, const float *const *w, const char *dir, const sc_st_meta *meta,
                           size_t n_meta, sc_err *err) {
    const sc_config *c = &m->cfg;
    int64_t L = c->n_layers, D = c->dim, F = c->ffn_dim, Q = c->n_heads * c->head_dim, KV = c->n_kv_heads * c->head_dim;
    for (int64_t l = 0; l < L; l++)
        if (sc_model_present(m, &m->layers[l].attn_rot) || sc_model_present(m, &m->layers[l].mlp_rot))
            return sc_errf(err, SC_EUNSUPPORTED, "%s: the model holds folded LaRoSA rotations, which no Hugging Face "
                                                 "layout holds", m->path);
    char mpath[4096], cpath[4096];
    if (!sc_path_join(mpath, sizeof mpath, dir, "model.safetensors") || !sc_path_join(cpath, sizeof cpath, dir, "config.json"))
        return sc_errf(err, SC_EARG, "%s: path too long", dir);
    if (mkdir(dir, 0777) != 0 && !(errno == EEXIST && sc_is_dir(dir)))
        return sc_errf(err, SC_EIO, "%s: cannot create the model directory: %s", dir, strerror(errno));
    size_t cap = 3 + (size_t)L * 12, n = 0;
    out_tensor *list = calloc(cap, sizeof *list);
    sc_st_spec *specs = calloc(cap, sizeof *specs);
    /* scratch: the largest matrix (permuted q/k rows, Gemma norms), or embedding rows and their ids */
    size_t big = (size_t)(Q > F ? Q : F) * (size_t)(D > F ? D : F) + (size_t)(4096 * (D + 1));
    float *buf = malloc(big * sizeof(float));
    if (!list || !specs || !buf) {
        free(list);
        free(specs);
        free(buf);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", mpath);
    }
    bool inter = c->rope == SC_ROPE_INTERLEAVED;
    add(list, &n, "model.embed_tokens.weight", T_EMBED, c->vocab_size, D, 0, 0, NULL, NULL);
    for (int64_t l = 0; l < L; l++) {
        const sc_layer *Ly = &m->layers[l];
        char nm[96];
#define N(s) (snprintf(nm, sizeof nm, "model.layers.%lld.%s", (long long)l, s), nm)
        add(list, &n, N("input_layernorm.weight"), T_NORM, D, 0, l, 0, Ly->attn_norm, NULL);
        add(list, &n, N("self_attn.q_proj.weight"), T_MATRIX, Q, D, l, SC_LIN_Q, NULL, &Ly->wq);
        list[n - 1].rope_rows = inter, list[n - 1].heads = c->n_heads;
        add(list, &n, N("self_attn.k_proj.weight"), T_MATRIX, KV, D, l, SC_LIN_K, NULL, &Ly->wk);
        list[n - 1].rope_rows = inter, list[n - 1].heads = c->n_kv_heads;
        add(list, &n, N("self_attn.v_proj.weight"), T_MATRIX, KV, D, l, SC_LIN_V, NULL, &Ly->wv);
        if (c->qkv_bias) {
            add(list, &n, N("self_attn.q_proj.bias"), T_VEC, Q, 0, l, 0, Ly->bq, NULL);
            list[n - 1].rope_rows = inter, list[n - 1].heads = c->n_heads;
            add(list, &n, N("self_attn.k_proj.bias"), T_VEC, KV, 0, l, 0, Ly->bk, NULL);
            list[n - 1].rope_rows = inter, list[n - 1].heads = c->n_kv_heads;
            add(list, &n, N("self_attn.v_proj.bias"), T_VEC, KV, 0, l, 0, Ly->bv, NULL);
        }
        add(list, &n, N("self_attn.o_proj.weight"), T_MATRIX, D, Q, l, SC_LIN_O, NULL, &Ly->wo);
        add(list, &n, N("post_attention_layernorm.weight"), T_NORM, D, 0, l, 0, Ly->ffn_norm, NULL);
        add(list, &n, N("mlp.gate_proj.weight"), T_MATRIX, F, D, l, SC_LIN_GATE, NULL, &Ly->wg);
        add(list, &n, N("mlp.up_proj.weight"), T_MATRIX, F, D, l, SC_LIN_UP, NULL, &Ly->wu);
        add(list, &n, N("mlp.down_proj.weight"), T_MATRIX, D, F, l, SC_LIN_DOWN, NULL, &Ly->wd);
#undef N
    }
    add(list, &n, "model.norm.weight", T_NORM, D, 0, 0, 0, m->final_norm, NULL);
    if (!c->tied_classifier) add(list, &n, "lm_head.weight", T_CLASSIFIER, c->vocab_size, D, 0, 0, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        specs[i] = (sc_st_spec){list[i].name, SC_DT_F32, NULL, list[i].cols ? 2 : 1, {list[i].rows, list[i].cols}};
    sc_st_writer *wr = NULL;
    sc_status st = sc_st_writer_create(mpath, specs, n, meta, n_meta, &wr, err);
    for (size_t i = 0; i < n && !st; i++) st = write_tensor(m, w, &list[i], wr, buf, big, err);
    if (!st) st = sc_st_writer_finish(wr, err);
    sc_st_writer_free(wr);
    free(list);
    free(specs);
    free(buf);
    return st ? st : sc_hf_write_config(c, SC_DT_F32, cpath, err);
}
