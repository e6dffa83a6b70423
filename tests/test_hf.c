/* test_hf.c - the Hugging Face loader on the stories260K copies (F32 single
 * file, BF16 sharded), config and tensor errors, and synthetic Qwen2 / Gemma
 * checkpoints written by sc_synth_write. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forward.h"
#include "gguf.h"
#include "tokenizer.h"
#include "model.h"
#include "safetensors.h"
#include "synth.h"
#include "testing.h"

/* The stories260K config without its closing brace. */
#define CFG_BASE                                                                                           \
    "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 172, \"num_hidden_layers\": 5, " \
    "\"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"vocab_size\": 512, "                          \
    "\"max_position_embeddings\": 512, \"rms_norm_eps\": 1e-05, \"tie_word_embeddings\": true, "             \
    "\"bos_token_id\": 1"

/* Compares n floats bit-exactly: y must equal bf16 rounding of x. */
static bool bf16_matches(const float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (sc_bf16_to_f32(sc_f32_to_bf16(x[i])) != y[i]) return false;
    return true;
}

static void check_stories_config(const sc_model *m) {
    const sc_config *c = &m->cfg;
    CHECK(c->family == SC_FAMILY_LLAMA);
    CHECK(c->dim == 64 && c->ffn_dim == 172 && c->n_layers == 5);
    CHECK(c->n_heads == 8 && c->n_kv_heads == 4 && c->head_dim == 8);
    CHECK(c->vocab_size == 512 && c->max_seq_len == 512);
    CHECK(c->tied_classifier && m->classifier == m->tok_emb);
    CHECK(c->rope == SC_ROPE_HALF && c->act == SC_ACT_SILU);
    CHECK(!c->qkv_bias && !c->norm_add_one && !c->embed_scale);
    CHECK(c->bos_id == 1 && c->eos_id == 2);
    CHECK_NEAR(c->norm_eps, 1e-5, 1e-12);
    CHECK_NEAR(c->rope_theta, 10000.0, 0);
    CHECK(strcmp(m->format, "hf") == 0);
    CHECK(m->tokenizer == NULL);
    CHECK(sc_model_param_count(m) == 260032);
}

static void test_stories(void) {
    const char *f32_dir = sc_asset("models/stories260K-hf");
    const char *bf16_dir = sc_asset("models/stories260K-hf-bf16-sharded");
    if (!f32_dir || !bf16_dir) return;
    sc_model *a = NULL, *b = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_load_hf(f32_dir, &a, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_model_load(bf16_dir, &b, &err) == SC_OK, "%s", err.msg);
    if (!a || !b) {
        sc_model_free(a);
        sc_model_free(b);
        return;
    }
    check_stories_config(a);
    check_stories_config(b);
    CHECK(strcmp(a->src_dtype, "F32") == 0 && strcmp(b->src_dtype, "BF16") == 0);
    CHECK(a->owned_bytes == 0 && a->mapped_bytes == 260032 * 4); /* all f32 used in place */
    /* bf16: the matrices are converted on use, only the vectors at load */
    CHECK(b->mapped_bytes == 0 && b->lazy_bytes == (260032 - 11 * 64) * 4 && b->owned_bytes == 11 * 64 * 4);

    const sc_config *c = &a->cfg;
    size_t D = 64, F = 172, Q = 64, KV = 32, V = 512;
    float *b_emb = sc_test_embedding(b);
    CHECK(bf16_matches(a->tok_emb, b_emb, V * D));
    CHECK(bf16_matches(a->final_norm, b->final_norm, D));
    for (int64_t l = 0; l < c->n_layers; l++) {
        const sc_layer *x = sc_test_layer(a, l), *y = sc_test_layer(b, l);
        CHECK(bf16_matches(x->attn_norm, y->attn_norm, D));
        CHECK(bf16_matches(x->wq, y->wq, Q * D));
        CHECK(bf16_matches(x->wk, y->wk, KV * D));
        CHECK(bf16_matches(x->wv, y->wv, KV * D));
        CHECK(bf16_matches(x->wo, y->wo, D * Q));
        CHECK(bf16_matches(x->ffn_norm, y->ffn_norm, D));
        CHECK(bf16_matches(x->wg, y->wg, F * D));
        CHECK(bf16_matches(x->wu, y->wu, F * D));
        CHECK(bf16_matches(x->wd, y->wd, D * F));
        CHECK(x->bq == NULL && y->bq == NULL);
    }
    /* the weights are not trivially equal (bf16 rounding changes some) */
    size_t diff = 0;
    for (size_t i = 0; i < V * D; i++) diff += a->tok_emb[i] != b_emb[i];
    CHECK(diff > 0);
    free(b_emb);
    sc_model_free(a);
    sc_model_free(b);

    /* other ways to name the same model */
    char p[4096];
    const char *names[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", f32_dir, names[i]);
        sc_model *m = NULL;
        CHECK_MSG(sc_model_load(p, &m, &err) == SC_OK, "%s: %s", p, err.msg);
        if (m) CHECK(m->cfg.dim == 64 && strcmp(m->src_dtype, "F32") == 0);
        sc_model_free(m);
    }
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", bf16_dir);
    sc_model *m = NULL;
    CHECK_MSG(sc_load_hf(p, &m, &err) == SC_OK, "%s", err.msg);
    if (m) CHECK(strcmp(m->src_dtype, "BF16") == 0);
    sc_model_free(m);
}

/* ---- error cases on copies ---- */

static const char *make_dir(const char *name) {
    const char *d = sc_tmp_path(name);
    mkdir(d, 0777);
    return d;
}

static void write_text(const char *dir, const char *file, const char *text) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    CHECK(sc_write_bytes(p, text, strlen(text)));
}

/* A directory with config text and a link to the F32 weights. */
static const char *config_case(const char *name, const char *config) {
    const char *src = sc_asset("models/stories260K-hf/model.safetensors");
    const char *d = make_dir(name);
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    unlink(p);
    if (src) CHECK(symlink(src, p) == 0);
    write_text(d, "config.json", config);
    return d;
}

static void expect_load_error(const char *dir, sc_status want, const char *n1, const char *n2, const char *what) {
    sc_model *m = NULL;
    sc_err err = {{0}};
    sc_status st = sc_load_hf(dir, &m, &err);
    CHECK_MSG(st == want, "%s: status %s (%s)", what, sc_status_name(st), err.msg);
    CHECK_MSG(m == NULL, "%s: model returned", what);
    CHECK_MSG(!n1 || strstr(err.msg, n1), "%s: message '%s' lacks '%s'", what, err.msg, n1);
    CHECK_MSG(!n2 || strstr(err.msg, n2), "%s: message '%s' lacks '%s'", what, err.msg, n2);
    sc_model_free(m);
}

static void test_config_errors(void) {
    if (!sc_asset("models/stories260K-hf")) return;
    /* sanity: the hand-written config loads; eos given as an array */
    const char *d = config_case("cfg_ok", CFG_BASE ", \"eos_token_id\": [2, 5]}");
    sc_model *m = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_load_hf(d, &m, &err) == SC_OK, "%s", err.msg);
    if (m) CHECK(m->cfg.eos_id == 2 && m->cfg.bos_id == 1);
    sc_model_free(m);

    /* llama3 rope scaling is applied (parsed into the config) */
    d = config_case("cfg_rope", CFG_BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                                "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                                "\"original_max_position_embeddings\": 8192}}");
    m = NULL;
    CHECK_MSG(sc_load_hf(d, &m, &err) == SC_OK, "%s", err.msg);
    if (m)
        CHECK(m->cfg.rope_scaling == SC_ROPE_SCALING_LLAMA3 && m->cfg.rope_factor == 8.0f &&
              m->cfg.rope_high_freq_factor == 4.0f && m->cfg.rope_orig_ctx == 8192);
    sc_model_free(m);
    /* other scaling types are loaded and reported in the note */
    d = config_case("cfg_rope2", CFG_BASE ", \"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}");
    m = NULL;
    CHECK_MSG(sc_load_hf(d, &m, &err) == SC_OK, "%s", err.msg);
    if (m) CHECK_MSG(strstr(m->note, "yarn") != NULL, "note '%s'", m->note);
    sc_model_free(m);
    d = config_case("cfg_rope3", CFG_BASE ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                                "\"low_freq_factor\": 4.0, \"high_freq_factor\": 1.0}}");
    expect_load_error(d, SC_EFORMAT, "rope_scaling", "config.json", "inconsistent llama3 factors");

    d = config_case("cfg_neox", "{\"model_type\": \"gpt_neox\", \"hidden_size\": 64}");
    expect_load_error(d, SC_EUNSUPPORTED, "gpt_neox", "config.json", "model_type gpt_neox");
    d = config_case("cfg_notype", "{\"hidden_size\": 64}");
    expect_load_error(d, SC_EFORMAT, "model_type", "config.json", "no model_type");
    d = config_case("cfg_nohidden", "{\"model_type\": \"llama\", \"intermediate_size\": 172, "
                                    "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, \"vocab_size\": 512}");
    expect_load_error(d, SC_EFORMAT, "hidden_size", "config.json", "missing hidden_size");
    d = config_case("cfg_string",
                    "{\"model_type\": \"llama\", \"hidden_size\": \"64\", \"intermediate_size\": 172, "
                    "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, \"vocab_size\": 512}");
    expect_load_error(d, SC_EFORMAT, "hidden_size", "config.json", "string hidden_size");
    d = config_case("cfg_frac", "{\"model_type\": \"llama\", \"hidden_size\": 64.5, \"intermediate_size\": 172, "
                                "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, \"vocab_size\": 512}");
    expect_load_error(d, SC_EFORMAT, "hidden_size", NULL, "fractional hidden_size");
    d = config_case("cfg_theta", CFG_BASE ", \"rope_theta\": \"big\"}");
    expect_load_error(d, SC_EFORMAT, "rope_theta", NULL, "string rope_theta");
    d = config_case("cfg_tie", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                               "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, \"vocab_size\": 512, "
                               "\"tie_word_embeddings\": 1}");
    expect_load_error(d, SC_EFORMAT, "tie_word_embeddings", NULL, "numeric tie_word_embeddings");
    d = config_case("cfg_eos", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                               "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, \"vocab_size\": 512, "
                               "\"eos_token_id\": \"2\"}");
    expect_load_error(d, SC_EFORMAT, "eos_token_id", NULL, "string eos");
    d = config_case("cfg_heads", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                                 "\"num_hidden_layers\": 5, \"num_attention_heads\": 0, \"vocab_size\": 512}");
    expect_load_error(d, SC_EFORMAT, "config.json", NULL, "zero heads");
    d = config_case("cfg_huge", "{\"model_type\": \"llama\", \"hidden_size\": 1e300, \"intermediate_size\": 172, "
                                "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, \"vocab_size\": 512}");
    expect_load_error(d, SC_EFORMAT, "hidden_size", NULL, "huge hidden_size");
    d = config_case("cfg_act", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                               "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, \"vocab_size\": 512, "
                               "\"hidden_act\": \"relu\"}");
    expect_load_error(d, SC_EUNSUPPORTED, "relu", NULL, "relu activation");
    d = config_case("cfg_json", "{\"model_type\": \"llama\",");
    expect_load_error(d, SC_EFORMAT, "config.json", NULL, "invalid JSON");
    d = config_case("cfg_array", "[1]");
    expect_load_error(d, SC_EFORMAT, "config.json", NULL, "config not an object");
    /* a config that disagrees with the weights: wrong vocab -> shape error naming the tensor */
    d = config_case("cfg_vocab", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                                 "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, "
                                 "\"num_key_value_heads\": 4, \"vocab_size\": 500}");
    expect_load_error(d, SC_EFORMAT, "model.embed_tokens.weight", "[512, 64]", "vocab mismatch");
    /* more layers than the file has */
    d = config_case("cfg_layers", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                                  "\"num_hidden_layers\": 6, \"num_attention_heads\": 8, "
                                  "\"num_key_value_heads\": 4, \"vocab_size\": 512, \"tie_word_embeddings\": true}");
    expect_load_error(d, SC_EFORMAT, "model.layers.5.input_layernorm.weight", NULL, "missing layer");
    /* untied but no lm_head */
    d = config_case("cfg_untied", "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 172, "
                                  "\"num_hidden_layers\": 5, \"num_attention_heads\": 8, "
                                  "\"num_key_value_heads\": 4, \"vocab_size\": 512}");
    expect_load_error(d, SC_EFORMAT, "lm_head.weight", NULL, "missing lm_head");
    /* no config / no weights */
    d = make_dir("no_config");
    expect_load_error(d, SC_EIO, NULL, NULL, "empty directory");
    write_text(d, "config.json", "{}");
    expect_load_error(d, SC_EIO, "model.safetensors", NULL, "no weights");
    expect_load_error(sc_tmp_path("nonexistent-dir/config.json"), SC_EIO, NULL, NULL, "missing path");
}

/* Copies the F32 stories model with the writer, dropping `drop` (if not NULL)
 * and reshaping `reshape` (a [64] tensor) to [8, 8]. */
static void copy_model(const char *dir, const char *drop, const char *reshape) {
    const char *src = sc_asset("models/stories260K-hf/model.safetensors");
    sc_st_file *f = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_st_open(src, &f, &err) == SC_OK, "%s", err.msg);
    if (!f) return;
    size_t n = sc_st_count(f), k = 0;
    sc_st_spec *specs = calloc(n, sizeof *specs);
    const sc_st_tensor **ts = calloc(n, sizeof *ts);
    for (size_t i = 0; i < n; i++) {
        const sc_st_tensor *t = sc_st_get(f, i);
        if (drop && strcmp(t->name, drop) == 0) continue;
        ts[k] = t;
        specs[k].name = t->name;
        specs[k].dtype = t->dtype;
        specs[k].n_dims = t->n_dims;
        memcpy(specs[k].shape, t->shape, sizeof t->shape);
        if (reshape && strcmp(t->name, reshape) == 0) {
            specs[k].n_dims = 2;
            specs[k].shape[0] = specs[k].shape[1] = 8;
        }
        k++;
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    sc_st_writer *w = NULL;
    sc_st_meta meta = {"format", "pt"};
    CHECK_MSG(sc_st_writer_create(p, specs, k, &meta, 1, &w, &err) == SC_OK, "%s", err.msg);
    for (size_t i = 0; w && i < k; i++) CHECK(sc_st_writer_write(w, ts[i]->data, ts[i]->n_bytes, &err) == SC_OK);
    if (w) CHECK_MSG(sc_st_writer_finish(w, &err) == SC_OK, "%s", err.msg);
    sc_st_writer_free(w);
    free(specs);
    free(ts);
    sc_st_free(f);
    write_text(dir, "config.json", CFG_BASE ", \"eos_token_id\": 2}");
}

static void test_tensor_errors(void) {
    const char *orig = sc_asset("models/stories260K-hf");
    if (!orig) return;
    const char *d = make_dir("copy_full");
    copy_model(d, NULL, NULL);
    sc_model *a = NULL, *b = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_load_hf(d, &a, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_load_hf(orig, &b, &err) == SC_OK, "%s", err.msg);
    if (a && b) {
        CHECK(memcmp(a->tok_emb, b->tok_emb, 512 * 64 * 4) == 0);
        CHECK(memcmp(sc_test_layer(a, 4)->wd, sc_test_layer(b, 4)->wd, 64 * 172 * 4) == 0);
        CHECK(a->owned_bytes == 0); /* the writer keeps f32 data 4-byte aligned */
    }
    sc_model_free(a);
    sc_model_free(b);

    d = make_dir("copy_drop");
    copy_model(d, "model.layers.3.mlp.up_proj.weight", NULL);
    expect_load_error(d, SC_EFORMAT, "model.layers.3.mlp.up_proj.weight", "model.safetensors", "missing tensor");
    d = make_dir("copy_shape");
    copy_model(d, NULL, "model.norm.weight");
    expect_load_error(d, SC_EFORMAT, "model.norm.weight", "[8, 8]", "reshaped tensor");

    /* an unsupported dtype for a weight */
    d = make_dir("copy_i32");
    copy_model(d, NULL, NULL);
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    sc_st_spec specs[] = {{.name = "model.embed_tokens.weight", .dtype_name = "I32", .n_dims = 2, .shape = {512, 64}}};
    sc_st_writer *w = NULL;
    CHECK(sc_st_writer_create(p, specs, 1, NULL, 0, &w, &err) == SC_OK);
    void *zeros = calloc(512 * 64, 4);
    if (w) CHECK(sc_st_writer_write(w, zeros, 512 * 64 * 4, &err) == SC_OK);
    if (w) CHECK(sc_st_writer_finish(w, &err) == SC_OK);
    sc_st_writer_free(w);
    free(zeros);
    expect_load_error(d, SC_EUNSUPPORTED, "model.embed_tokens.weight", "I32", "I32 embedding");
}

/* ---- synthetic models ---- */

static sc_synth_opts tiny(const char *family, sc_dtype dt, uint64_t seed) {
    sc_synth_opts o;
    sc_synth_opts_default(&o);
    o.dim = 32;
    o.ffn_dim = 48;
    o.n_layers = 2;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.vocab_size = 100;
    o.max_seq_len = 64;
    o.family = family;
    o.dtype = dt;
    o.seed = seed;
    return o;
}

static double mean_of(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s / (double)n;
}

static double std_of(const float *x, size_t n) {
    double m = mean_of(x, n), s = 0;
    for (size_t i = 0; i < n; i++) s += (x[i] - m) * (x[i] - m);
    return sqrt(s / (double)n);
}

/* Runs a few tokens through the forward pass: logits must be finite with a
 * spread that is neither collapsed nor saturated. */
static void check_activations(const sc_model *m, const char *what) {
    sc_forward *f = NULL;
    sc_err err = {{0}};
    CHECK_MSG(sc_forward_create(m, 16, 16, &f, &err) == SC_OK, "%s: %s", what, err.msg);
    if (!f) return;
    int32_t ids[12];
    for (int i = 0; i < 12; i++) ids[i] = (int32_t)((i * 37 + 5) % m->cfg.vocab_size);
    const float *logits = NULL;
    CHECK_MSG(sc_forward_run(f, ids, 12, 0, NULL, &logits, &err) == SC_OK, "%s: %s", what, err.msg);
    if (logits) {
        size_t n = (size_t)(12 * m->cfg.vocab_size);
        bool finite = true;
        for (size_t i = 0; i < n; i++) finite &= isfinite(logits[i]) != 0;
        double sd = std_of(logits, n);
        CHECK_MSG(finite, "%s: non-finite logits", what);
        CHECK_MSG(sd > 0.2 && sd < 20.0, "%s: logit std %g", what, sd);
        printf("%s: logit std %.3f\n", what, sd);
    }
    sc_forward_free(f);
}

static void test_synth_qwen2(void) {
    const char *d = sc_tmp_path("synth_qwen2");
    sc_synth_opts o = tiny("qwen2", SC_DT_F32, 3);
    sc_err err = {{0}};
    CHECK_MSG(sc_synth_write(&o, d, &err) == SC_OK, "%s", err.msg);
    sc_model *m = NULL;
    CHECK_MSG(sc_model_load(d, &m, &err) == SC_OK, "%s", err.msg);
    if (!m) return;
    const sc_config *c = &m->cfg;
    CHECK(c->family == SC_FAMILY_QWEN2 && c->qkv_bias && !c->tied_classifier);
    CHECK(c->dim == 32 && c->ffn_dim == 48 && c->n_layers == 2 && c->n_heads == 4 && c->n_kv_heads == 2);
    CHECK(c->head_dim == 8 && c->vocab_size == 100 && c->max_seq_len == 64);
    CHECK(c->rope == SC_ROPE_HALF && c->act == SC_ACT_SILU && !c->norm_add_one);
    CHECK(m->classifier != m->tok_emb);
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    sc_st_file *f = NULL;
    CHECK(sc_st_open(p, &f, &err) == SC_OK);
    for (int l = 0; f && l < 2; l++) {
        const sc_layer *L = sc_test_layer(m, l);
        CHECK(L->bq && L->bk && L->bv);
        char nm[96];
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.k_proj.bias", l);
        const sc_st_tensor *t = sc_st_find(f, nm);
        CHECK(t && t->n_elements == 16);
        if (t && L->bk) CHECK(memcmp(t->data, L->bk, 16 * 4) == 0);
        CHECK(std_of(L->bq, 32) > 0.005 && std_of(L->bq, 32) < 0.05);
    }
    CHECK(f && sc_st_meta_find(f, "seed") && strcmp(sc_st_meta_find(f, "seed"), "3") == 0);
    sc_st_free(f);
    /* realistic scales */
    CHECK_NEAR(std_of(m->tok_emb, 100 * 32), 1.0, 0.1);
    CHECK_NEAR(std_of(sc_test_layer(m, 0)->wg, 48 * 32), 1.0 / sqrt(32.0), 0.02);
    CHECK_NEAR(std_of(sc_test_layer(m, 0)->wd, 32 * 48), 1.0 / sqrt(48.0), 0.02);
    CHECK_NEAR(mean_of(sc_test_layer(m, 0)->attn_norm, 32), 1.0, 0.1);
    CHECK_NEAR(mean_of(sc_test_layer(m, 1)->wq, 32 * 32), 0.0, 0.02);
    check_activations(m, "synth qwen2");
    sc_model_free(m);
}

static void test_synth_gemma(void) {
    const char *d = sc_tmp_path("synth_gemma");
    sc_synth_opts o = tiny("gemma", SC_DT_BF16, 4);
    sc_err err = {{0}};
    CHECK_MSG(sc_synth_write(&o, d, &err) == SC_OK, "%s", err.msg);
    sc_model *m = NULL;
    CHECK_MSG(sc_load_hf(d, &m, &err) == SC_OK, "%s", err.msg);
    if (!m) return;
    const sc_config *c = &m->cfg;
    CHECK(c->family == SC_FAMILY_GEMMA && c->act == SC_ACT_GELU_TANH);
    CHECK(c->embed_scale && c->norm_add_one && c->tied_classifier && !c->qkv_bias);
    CHECK(m->classifier == m->tok_emb && !m->tok_emb); /* tied, both read on use */
    CHECK(strcmp(m->src_dtype, "BF16") == 0);
    CHECK_NEAR(c->norm_eps, 1e-6, 1e-12);
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    sc_st_file *f = NULL;
    CHECK(sc_st_open(p, &f, &err) == SC_OK);
    if (f) {
        /* every norm is the effective (1 + w) */
        for (int l = 0; l < 2; l++) {
            const char *which[2] = {"input_layernorm", "post_attention_layernorm"};
            const float *got[2] = {sc_test_layer(m, l)->attn_norm, sc_test_layer(m, l)->ffn_norm};
            for (int k = 0; k < 2; k++) {
                char nm[96];
                snprintf(nm, sizeof nm, "model.layers.%d.%s.weight", l, which[k]);
                const sc_st_tensor *t = sc_st_find(f, nm);
                CHECK(t && t->dtype == SC_DT_BF16 && t->n_elements == 32);
                for (int i = 0; t && i < 32; i++)
                    CHECK(got[k][i] == 1.0f + sc_bf16_to_f32(sc_le16(t->data + 2 * i)));
            }
        }
        const sc_st_tensor *t = sc_st_find(f, "model.norm.weight");
        for (int i = 0; t && i < 32; i++) CHECK(m->final_norm[i] == 1.0f + sc_bf16_to_f32(sc_le16(t->data + 2 * i)));
        CHECK(sc_st_find(f, "lm_head.weight") == NULL);
        CHECK_NEAR(mean_of(m->final_norm, 32), 1.0, 0.1);
        float *emb = sc_test_embedding(m);
        CHECK_NEAR(std_of(emb, 100 * 32), 1.0 / sqrt(32.0), 0.02);
        free(emb);
    }
    sc_st_free(f);
    check_activations(m, "synth gemma");
    sc_model_free(m);
}

static char *slurp(const char *dir, const char *file, size_t *len) {
    char p[4096], *buf = NULL;
    sc_err err = {{0}};
    snprintf(p, sizeof p, "%s/%s", dir, file);
    if (sc_read_file(p, (size_t)1 << 30, &buf, len, &err) != SC_OK) return NULL;
    return buf;
}

static void test_synth_determinism(void) {
    sc_err err = {{0}};
    const char *d1 = sc_tmp_path("det1"), *d2 = sc_tmp_path("det2"), *d3 = sc_tmp_path("det3");
    sc_synth_opts o = tiny("llama", SC_DT_F32, 77);
    o.n_layers = 3;
    CHECK(sc_synth_write(&o, d1, &err) == SC_OK);
    CHECK(sc_synth_write(&o, d2, &err) == SC_OK);
    o.seed = 78;
    CHECK(sc_synth_write(&o, d3, &err) == SC_OK);
    size_t n1 = 0, n2 = 0, n3 = 0;
    char *a = slurp(d1, "model.safetensors", &n1), *b = slurp(d2, "model.safetensors", &n2),
         *c = slurp(d3, "model.safetensors", &n3);
    CHECK(a && b && c);
    if (a && b && c) {
        CHECK(n1 == n2 && memcmp(a, b, n1) == 0);
        CHECK(n1 == n3);
        uint64_t hn = sc_le64((const uint8_t *)a);
        size_t same = 0, total = (n1 - 8 - hn) / 4;
        for (size_t i = 0; i < total; i++) same += memcmp(a + 8 + hn + 4 * i, c + 8 + hn + 4 * i, 4) == 0;
        CHECK_MSG(same < total / 100, "%zu of %zu values equal across seeds", same, total);
    }
    free(a);
    free(b);
    free(c);
    size_t l1 = 0, l2 = 0;
    a = slurp(d1, "config.json", &l1);
    b = slurp(d2, "config.json", &l2);
    CHECK(a && b && l1 == l2 && memcmp(a, b, l1) == 0);
    free(a);
    free(b);

    /* bad options */
    sc_synth_opts bad = tiny("gpt2", SC_DT_F32, 1);
    CHECK(sc_synth_write(&bad, sc_tmp_path("bad1"), &err) == SC_EARG);
    bad = tiny("llama", SC_DT_Q8_0, 1);
    CHECK(sc_synth_write(&bad, sc_tmp_path("bad2"), &err) == SC_EARG);
    bad = tiny("llama", SC_DT_F32, 1);
    bad.n_heads = 5;
    CHECK(sc_synth_write(&bad, sc_tmp_path("bad3"), &err) != SC_OK);
    bad = tiny("llama", SC_DT_F32, 1);
    bad.n_kv_heads = 3;
    CHECK(sc_synth_write(&bad, sc_tmp_path("bad4"), &err) != SC_OK);
    CHECK(!sc_is_dir(sc_tmp_path("bad1")) && !sc_is_dir(sc_tmp_path("bad4")));
    CHECK(sc_synth_write(&o, sc_tmp_path("no/such/parent"), &err) == SC_EIO);
}

/* Logits of ids[0..n) through the reference forward pass (caller frees). */
static float *logits_of(const sc_model *m, const int32_t *ids, int n) {
    sc_forward *f = NULL;
    sc_err err = {{0}};
    const float *lg = NULL;
    float *out = NULL;
    if (sc_forward_create(m, n, n, &f, &err) == SC_OK && sc_forward_run(f, ids, n, 0, NULL, &lg, &err) == SC_OK &&
        (out = malloc((size_t)n * (size_t)m->cfg.vocab_size * sizeof(float))))
        memcpy(out, lg, (size_t)n * (size_t)m->cfg.vocab_size * sizeof(float));
    CHECK_MSG(out, "forward: %s", err.msg);
    sc_forward_free(f);
    return out;
}

/* synth --gguf writes the safetensors model's values in llama.cpp's naming:
 * every tensor equal (q/k rows in the interleaved order), the same logits
 * (interleaved RoPE on permuted rows vs rotate-half: same math, float order
 * differs), F16 the rounded values, and the tokenizer copied from a GGUF. */
static void test_synth_gguf(void) {
    sc_err err = {{0}};
    const char *d = sc_tmp_path("synth_gguf_hf"), *g32 = sc_tmp_path("synth32.gguf"), *g16 = sc_tmp_path("synth16.gguf");
    const char *vocab = sc_asset("tokenizers/llama_cpp_vocab/ggml-vocab-llama-spm.gguf");
    if (!vocab) return;
    sc_synth_opts o = tiny("llama", SC_DT_F32, 11);
    CHECK(sc_synth_write_gguf(&o, sc_tmp_path("synth_badvocab.gguf"), vocab, &err) == SC_EARG); /* 32000 != 100 */
    o.vocab_size = 32000; /* the vocabulary file's */
    CHECK_MSG(sc_synth_write(&o, d, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_synth_write_gguf(&o, g32, vocab, &err) == SC_OK, "%s", err.msg);
    o.dtype = SC_DT_F16;
    CHECK_MSG(sc_synth_write_gguf(&o, g16, vocab, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_synth_write_gguf(&o, sc_tmp_path("synth_novocab.gguf"), NULL, &err) == SC_OK, "%s", err.msg);
    sc_model *h = NULL, *a = NULL, *b = NULL;
    CHECK_MSG(sc_load_hf(d, &h, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_load_gguf(g32, &a, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_load_gguf(g16, &b, &err) == SC_OK, "%s", err.msg);
    const int64_t V = 32000;
    if (h && a && b) {
        const sc_config *c = &a->cfg;
        CHECK(c->family == SC_FAMILY_LLAMA && c->rope == SC_ROPE_INTERLEAVED && c->dim == 32 && c->ffn_dim == 48);
        CHECK(c->n_layers == 2 && c->n_heads == 4 && c->n_kv_heads == 2 && c->vocab_size == V);
        CHECK(!c->tied_classifier && c->norm_eps == h->cfg.norm_eps && c->rope_theta == h->cfg.rope_theta);
        float *ea = sc_test_embedding(a), *eh = sc_test_embedding(h), *ca = sc_test_classifier(a),
              *ch = sc_test_classifier(h);
        CHECK(memcmp(ea, eh, (size_t)V * 32 * 4) == 0 && memcmp(ca, ch, (size_t)V * 32 * 4) == 0);
        free(ea);
        free(eh);
        free(ca);
        free(ch);
        CHECK(memcmp(a->final_norm, h->final_norm, 32 * 4) == 0);
        int64_t hd = c->head_dim;
        for (int l = 0; l < 2; l++) {
            const sc_layer *A = sc_test_layer(a, l), *H = sc_test_layer(h, l), *B = sc_test_layer(b, l);
            CHECK(memcmp(A->wg, H->wg, 48 * 32 * 4) == 0 && memcmp(A->wu, H->wu, 48 * 32 * 4) == 0);
            CHECK(memcmp(A->wd, H->wd, 48 * 32 * 4) == 0 && memcmp(A->wo, H->wo, 32 * 32 * 4) == 0);
            CHECK(memcmp(A->wv, H->wv, 16 * 32 * 4) == 0 && memcmp(A->attn_norm, H->attn_norm, 32 * 4) == 0);
            for (int64_t r = 0; r < 32; r++) { /* head r / hd, pair i, member j */
                int64_t hh = r / hd, i = (r % hd) / 2, j = r % 2, src = hh * hd + j * (hd / 2) + i;
                CHECK(memcmp(A->wq + r * 32, H->wq + src * 32, 32 * 4) == 0);
                if (r < 16) CHECK(memcmp(A->wk + r * 32, H->wk + src * 32, 32 * 4) == 0);
            }
            for (int64_t k = 0; k < 48 * 32; k++) CHECK(B->wg[k] == sc_f16_to_f32(sc_f32_to_f16(H->wg[k])));
            CHECK(memcmp(B->ffn_norm, H->ffn_norm, 32 * 4) == 0); /* vectors stay f32 */
        }
        /* one matrix at a time (sc_model_weight, what the forward and backward passes read) against the whole
         * layer's conversion (sc_model_layer): the same converted values; a matrix converted once is reused;
         * a layer held by sc_model_layer is returned without converting; an absent rotation is NULL */
        CHECK(sc_model_is_lazy(b));
        for (int l = 0; l < 2; l++) {
            const sc_layer *B = sc_test_layer(b, l), *F = &b->layers[l];
            const float *const *fields[] = {&F->wq, &F->wk, &F->wv, &F->wo, &F->wg, &F->wu, &F->wd};
            const float *views[] = {B->wq, B->wk, B->wv, B->wo, B->wg, B->wu, B->wd};
            const size_t sizes[] = {32 * 32, 16 * 32, 16 * 32, 32 * 32, 48 * 32, 48 * 32, 32 * 48};
            float *copy[7];
            for (int k = 0; k < 7; k++) {
                const float *W = NULL;
                CHECK(sc_model_weight(b, fields[k], &W, &err) == SC_OK && W == views[k]); /* the held layer's view */
                copy[k] = malloc(sizes[k] * sizeof(float));
                memcpy(copy[k], views[k], sizes[k] * sizeof(float));
            }
            sc_model_release(b);
            const float *prev = NULL;
            for (int k = 0; k < 7; k++) {
                const float *W = NULL, *W2 = NULL;
                CHECK_MSG(sc_model_weight(b, fields[k], &W, &err) == SC_OK && W, "%s", err.msg);
                CHECK(W && *fields[k] == NULL && memcmp(W, copy[k], sizes[k] * sizeof(float)) == 0);
                CHECK(sc_model_weight(b, fields[k], &W2, &err) == SC_OK && W2 == W); /* no second conversion */
                CHECK(!prev || W == prev); /* one buffer, reused by every matrix */
                prev = W;
                free(copy[k]);
            }
            const float *R = (const float *)&err;
            CHECK(sc_model_weight(b, &F->attn_rot, &R, &err) == SC_OK && R == NULL);
            R = (const float *)&err; /* norms are resident: returned as they are */
            CHECK(sc_model_weight(b, &F->attn_norm, &R, &err) == SC_OK && R == F->attn_norm && R);
        }
        const float *bad;
        CHECK(sc_model_weight(b, &b->tok_emb, &bad, &err) == SC_EARG && bad == NULL);
        int32_t ids[8];
        for (int i = 0; i < 8; i++) ids[i] = (int32_t)((i * 3001 + 7) % V);
        float *la = logits_of(a, ids, 8), *lh = logits_of(h, ids, 8);
        double worst = 0, mx = 0;
        for (int64_t k = 0; la && lh && k < 8 * V; k++) {
            worst = fmax(worst, fabs((double)la[k] - lh[k]));
            mx = fmax(mx, fabs((double)lh[k]));
        }
        /* f32 rounding of the two RoPE formulations through 2 layers: ~1e-6 relative */
        CHECK_MSG(la && lh && worst <= 1e-5 * mx, "gguf vs hf logits: %g of %g", worst, mx);
        free(la);
        free(lh);
    }
    sc_model_free(h);
    sc_model_free(a);
    sc_model_free(b);
    /* the tokenizer of the vocabulary-only GGUF, copied */
    sc_tokenizer *t1 = NULL, *t2 = NULL;
    CHECK_MSG(sc_gguf_load_tokenizer(g32, &t2, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_gguf_load_tokenizer(vocab, &t1, &err) == SC_OK, "%s", err.msg);
    if (t1 && t2) {
        sc_tokens x = {0}, y = {0};
        const char *text = "Hello world, synthetic llamas!";
        CHECK(sc_tokenizer_encode(t1, text, strlen(text), true, false, &x, &err) == SC_OK);
        CHECK(sc_tokenizer_encode(t2, text, strlen(text), true, false, &y, &err) == SC_OK);
        CHECK(x.n > 3 && x.n == y.n && memcmp(x.ids, y.ids, x.n * sizeof *x.ids) == 0);
        sc_tokens_free(&x);
        sc_tokens_free(&y);
    }
    sc_tokenizer_free(t1);
    sc_tokenizer_free(t2);
    o = tiny("qwen2", SC_DT_F32, 1);
    CHECK(sc_synth_write_gguf(&o, sc_tmp_path("synth_qwen.gguf"), NULL, &err) == SC_EARG);
}

/* Also loads the default-sized synthetic model and reports throughput. */
static void test_synth_default(void) {
    sc_synth_opts o;
    sc_synth_opts_default(&o);
    CHECK(o.family && strcmp(o.family, "llama") == 0 && o.dtype == SC_DT_F32);
    const char *d = sc_tmp_path("synth_default");
    sc_err err = {{0}};
    double t0 = sc_now();
    CHECK_MSG(sc_synth_write(&o, d, &err) == SC_OK, "%s", err.msg);
    double dt = sc_now() - t0;
    sc_model *m = NULL;
    CHECK_MSG(sc_model_load(d, &m, &err) == SC_OK, "%s", err.msg);
    if (m) {
        printf("synth default: %lld params, %.1f MB in %.2f s (%.0f MB/s)\n", (long long)sc_model_param_count(m),
               (double)m->mapped_bytes / 1e6, dt, (double)m->mapped_bytes / 1e6 / dt);
        CHECK(m->owned_bytes == 0);
        CHECK(m->cfg.vocab_size == 32000 && m->cfg.dim == 256);
        check_activations(m, "synth llama default");
    }
    sc_model_free(m);
    /* the test directory is left behind for inspection; drop the big file */
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    CHECK(unlink(p) == 0);
}

int main(void) {
    test_stories();
    test_config_errors();
    test_tensor_errors();
    test_synth_qwen2();
    test_synth_gemma();
    test_synth_determinism();
    test_synth_gguf();
    test_synth_default();
    return sc_test_finish();
}
