/* test_gguf.c - the GGUF reader: stories260K.gguf against the llama2.c
 * checkpoint, crafted tiny models in every supported dtype, the metadata
 * API, and hostile files (each must fail cleanly, naming the file). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "model.h"
#include "testing.h"
#include "tokenizer.h"

/* ---- tiny models ---- */

enum { T_D = 32, T_F = 64, T_L = 2, T_H = 4, T_KV = 2, T_HD = 8, T_V = 64, T_CTX = 128 };

typedef struct tiny_opts {
    const char *arch;       /* default "llama" */
    uint32_t wtype;         /* ggml type of the matrices (norms and biases stay F32) */
    uint32_t version;       /* default 3 */
    int64_t head_count;     /* default T_H; -1 writes 0 */
    int64_t block_count;    /* written value, default T_L (tensors are always T_L layers) */
    int64_t head_dim;       /* written as key_length when nonzero (and used for shapes) */
    bool tied;              /* omit output.weight */
    const char *tok_model;  /* default "llama"; "none": no tokenizer keys */
    const char *skip;       /* tensor to leave out */
    const char *bad_shape;  /* tensor written with ne[0] halved */
    const char *iq4_nl;     /* tensor written as IQ4_NL (a type sparsecal does not read) */
    uint32_t align_kv;      /* general.alignment value to write (0: none) */
    void (*extra)(gguf_writer *w); /* adds or changes anything before writing */
} tiny_opts;

static uint32_t name_seed(const char *s) {
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* Test weights: k/64 with |k| <= 127, and 127/64 at the start of every
 * 32-block so that q8_0 gets the scale 1/64 and every dtype is exact. */
static float wval(uint64_t i, uint32_t seed) {
    if (i % 32 == 0) return 127.0f / 64.0f;
    return (float)((int)((i * 37 + seed) % 201) - 100) / 64.0f;
}

static int64_t tiny_head_dim(const tiny_opts *o) { return o->head_dim ? o->head_dim : T_HD; }

static void add_tensor(gguf_writer *w, const tiny_opts *o, const char *name, uint64_t ne0, uint64_t ne1,
                       uint32_t type) {
    if (o->skip && strcmp(o->skip, name) == 0) return;
    if (o->bad_shape && strcmp(o->bad_shape, name) == 0) ne0 /= 2;
    if (o->iq4_nl && strcmp(o->iq4_nl, name) == 0) type = 20;
    uint64_t ne[2] = {ne0, ne1};
    size_t n = (size_t)(ne0 * (ne1 ? ne1 : 1));
    float *x = malloc(n * sizeof *x);
    uint8_t *buf = malloc(n * 4 + 64);
    for (size_t i = 0; i < n; i++) x[i] = wval(i, name_seed(name));
    size_t nb = 0;
    switch (type) {
    case 0: memcpy(buf, x, n * 4), nb = n * 4; break;
    case 1: gw_encode_f16(x, n, (uint16_t *)(void *)buf), nb = n * 2; break;
    case 30: gw_encode_bf16(x, n, (uint16_t *)(void *)buf), nb = n * 2; break;
    case 8: gw_encode_q8_0(x, n, buf), nb = n / 32 * 34; break;
    case 20: memset(buf, 0, n), nb = n / 32 * 18; break;
    }
    gw_tensor(w, name, ne1 ? 2 : 1, ne, type, buf, nb);
    free(x);
    free(buf);
}

static const char *TINY_LAYER[] = {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                                   "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight",
                                   "ffn_down.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias"};

/* Shape of a layer tensor (ne order) for the tiny config. */
static void layer_shape(const tiny_opts *o, int k, uint64_t *ne0, uint64_t *ne1) {
    uint64_t Q = (uint64_t)T_H * (uint64_t)tiny_head_dim(o), KV = (uint64_t)T_KV * (uint64_t)tiny_head_dim(o);
    static const int kind[] = {0, 1, 2, 2, 3, 0, 4, 4, 5, 6, 7, 7};
    switch (kind[k]) {
    case 0: *ne0 = T_D, *ne1 = 0; break;
    case 1: *ne0 = T_D, *ne1 = Q; break;
    case 2: *ne0 = T_D, *ne1 = KV; break;
    case 3: *ne0 = Q, *ne1 = T_D; break;
    case 4: *ne0 = T_D, *ne1 = T_F; break;
    case 5: *ne0 = T_F, *ne1 = T_D; break;
    case 6: *ne0 = Q, *ne1 = 0; break;
    default: *ne0 = KV, *ne1 = 0; break;
    }
}

static void add_tokenizer(gguf_writer *w, const char *model) {
    gw_kv_str(w, "tokenizer.ggml.model", model);
    const char *pieces[T_V];
    char store[T_V][16];
    float scores[T_V];
    int32_t types[T_V];
    for (int i = 0; i < T_V; i++) {
        if (i < 3) snprintf(store[i], 16, "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < 29) snprintf(store[i], 16, "\xe2\x96\x81%c", 'a' + (i - 3));
        else if (i < 55) snprintf(store[i], 16, "%c", 'a' + (i - 29));
        else snprintf(store[i], 16, "<0x%02X>", 0x20 + (i - 55));
        pieces[i] = store[i];
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i >= 55 ? 6 : 1;
    }
    gw_kv_str_array(w, "tokenizer.ggml.tokens", pieces, T_V);
    gw_kv_array(w, "tokenizer.ggml.scores", 6, T_V, scores, 4);
    gw_kv_array(w, "tokenizer.ggml.token_type", 5, T_V, types, 4);
    gw_kv_u32(w, "tokenizer.ggml.bos_token_id", 1);
    gw_kv_u32(w, "tokenizer.ggml.eos_token_id", 2);
    gw_kv_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    gw_kv_u32(w, "tokenizer.ggml.padding_token_id", 0xffffffffu);
}

static const char *write_tiny(const char *file, const tiny_opts *o) {
    const char *arch = o->arch ? o->arch : "llama";
    gguf_writer w;
    gw_init(&w);
    if (o->version) w.version = o->version;
    if (o->align_kv) {
        gw_kv_u32(&w, "general.alignment", o->align_kv);
        if ((o->align_kv & (o->align_kv - 1)) == 0) w.align = o->align_kv;
    }
    char key[128];
    gw_kv_str(&w, "general.architecture", arch);
    gw_kv_str(&w, "general.name", "tiny");
#define AKEY(s) (snprintf(key, sizeof key, "%s.%s", arch, s), key)
    gw_kv_u32(&w, AKEY("context_length"), T_CTX);
    gw_kv_u64(&w, AKEY("embedding_length"), T_D); /* integer keys in several widths */
    uint32_t bc = (uint32_t)(o->block_count ? o->block_count : T_L);
    gw_kv_scalar(&w, AKEY("block_count"), 4, &bc, 4);
    gw_kv_i32(&w, AKEY("feed_forward_length"), T_F);
    uint16_t hc = (uint16_t)(o->head_count < 0 ? 0 : o->head_count ? o->head_count : T_H);
    gw_kv_scalar(&w, AKEY("attention.head_count"), 2, &hc, 2);
    uint8_t kvh = T_KV;
    gw_kv_scalar(&w, AKEY("attention.head_count_kv"), 0, &kvh, 1);
    gw_kv_f32(&w, AKEY("attention.layer_norm_rms_epsilon"), 1e-5f);
    double base = 500000.0;
    gw_kv_scalar(&w, AKEY("rope.freq_base"), 12, &base, 8);
    if (o->head_dim) gw_kv_u32(&w, AKEY("attention.key_length"), (uint32_t)o->head_dim);
    if (o->head_dim) gw_kv_u32(&w, AKEY("attention.value_length"), (uint32_t)o->head_dim);
#undef AKEY
    const char *tm = o->tok_model ? o->tok_model : "llama";
    if (strcmp(tm, "none") != 0) add_tokenizer(&w, tm);

    add_tensor(&w, o, "token_embd.weight", T_D, T_V, o->wtype);
    add_tensor(&w, o, "output_norm.weight", T_D, 0, 0);
    if (!o->tied) add_tensor(&w, o, "output.weight", T_D, T_V, o->wtype);
    bool bias = strcmp(arch, "qwen2") == 0;
    for (int l = 0; l < T_L; l++) {
        for (int k = 0; k < (bias ? 12 : 9); k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", l, TINY_LAYER[k]);
            uint64_t ne0, ne1;
            layer_shape(o, k, &ne0, &ne1);
            bool vec = ne1 == 0;
            add_tensor(&w, o, name, ne0, ne1, vec ? 0 : o->wtype);
        }
    }
    if (o->extra) o->extra(&w);
    const char *path = sc_tmp_path(file);
    bool ok = gw_write_file(&w, path);
    CHECK(ok);
    gw_free(&w);
    return path;
}

/* One tensor of a tiny model equals its generated values. */
static void check_tiny_tensor(const tiny_opts *o, const char *label, const char *name, const float *p) {
    size_t cnt;
    if (strncmp(name, "blk.", 4) == 0) {
        int k = 0;
        while (strcmp(strchr(name + 4, '.') + 1, TINY_LAYER[k]) != 0) k++;
        uint64_t ne0, ne1;
        layer_shape(o, k, &ne0, &ne1);
        cnt = (size_t)(ne0 * (ne1 ? ne1 : 1));
    } else {
        cnt = strcmp(name, "output_norm.weight") == 0 ? T_D : (size_t)T_D * T_V;
    }
    size_t bad = 0;
    uint32_t seed = name_seed(name);
    for (size_t j = 0; j < cnt && p; j++) bad += p[j] != wval(j, seed);
    CHECK_MSG(p && bad == 0, "%s: %s: %zu of %zu values differ", label, name, bad, cnt);
}

/* Every weight of a tiny model equals the generated values. A layer's view
 * of weights read on use lasts until the next layer is read, so each layer is
 * checked as it is read. */
static void check_tiny_weights(const sc_model *m, const tiny_opts *o, const char *label) {
    float *emb = sc_test_embedding(m);
    check_tiny_tensor(o, label, "token_embd.weight", emb);
    free(emb);
    check_tiny_tensor(o, label, "output_norm.weight", m->final_norm);
    if (!o->tied) {
        float *cls = sc_test_classifier(m);
        check_tiny_tensor(o, label, "output.weight", cls);
        free(cls);
    }
    for (int l = 0; l < T_L; l++) {
        const sc_layer *L = sc_test_layer(m, l);
        const float *ptrs[12] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->ffn_norm, L->wg, L->wu, L->wd,
                                 L->bq,        L->bk, L->bv};
        for (int k = 0; k < (m->cfg.qkv_bias ? 12 : 9); k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", l, TINY_LAYER[k]);
            check_tiny_tensor(o, label, name, ptrs[k]);
        }
    }
}

static void test_tiny_dtypes(void) {
    static const struct {
        uint32_t type;
        const char *name;
    } T[] = {{0, "F32"}, {1, "F16"}, {30, "BF16"}, {8, "Q8_0"}};
    for (size_t t = 0; t < 4; t++) {
        tiny_opts o = {.wtype = T[t].type, .version = t == 1 ? 2 : 3};
        char file[64];
        snprintf(file, sizeof file, "tiny_%s.gguf", T[t].name);
        const char *path = write_tiny(file, &o);
        sc_model *m = NULL;
        sc_err err = {{0}};
        sc_status st = sc_load_gguf(path, &m, &err);
        CHECK_MSG(st == SC_OK, "%s: %s", T[t].name, err.msg);
        if (st != SC_OK) continue;
        sc_gguf *g = NULL;
        CHECK(sc_gguf_open(path, &g, &err) == SC_OK && sc_gguf_version(g) == o.version);
        sc_gguf_free(g);
        const sc_config *c = &m->cfg;
        CHECK(c->dim == T_D && c->ffn_dim == T_F && c->n_layers == T_L && c->n_heads == T_H);
        CHECK(c->n_kv_heads == T_KV && c->head_dim == T_HD && c->vocab_size == T_V && c->max_seq_len == T_CTX);
        CHECK_NEAR(c->rope_theta, 500000.0, 0);
        CHECK_NEAR(c->norm_eps, 1e-5f, 0);
        CHECK(!c->tied_classifier && (m->classifier != m->tok_emb || !m->classifier));
        CHECK(c->rope == SC_ROPE_INTERLEAVED && c->act == SC_ACT_SILU && !c->qkv_bias);
        CHECK(c->bos_id == 1 && c->eos_id == 2);
        CHECK_MSG(strcmp(m->src_dtype, T[t].name) == 0, "src_dtype %s, want %s", m->src_dtype, T[t].name);
        CHECK(strcmp(m->format, "gguf") == 0);
        if (T[t].type == 0) CHECK(m->owned_bytes == 0 && m->lazy_bytes == 0 && m->mapped_bytes > 0); /* f32 used in place */
        else CHECK(m->lazy_bytes > 0 && sc_model_is_lazy(m)); /* matrices converted on use */
        check_tiny_weights(m, &o, T[t].name);
        CHECK(sc_model_check_complete(m, &err) == SC_OK);
        /* tokenizer: spaces, not U+2581 */
        CHECK(m->tokenizer && sc_tokenizer_vocab_size(m->tokenizer) == T_V);
        if (m->tokenizer) {
            size_t len;
            const char *p = sc_tokenizer_piece(m->tokenizer, 3, &len);
            CHECK(len == 2 && memcmp(p, " a", 2) == 0);
        }
        sc_model_free(m);
    }
}

static void test_tiny_families(void) {
    sc_err err = {{0}};
    sc_model *m = NULL;
    /* qwen2: biases, rotate-half RoPE, tied (no output.weight) */
    tiny_opts q = {.arch = "qwen2", .wtype = 1, .tied = true};
    sc_status st = sc_load_gguf(write_tiny("qwen2.gguf", &q), &m, &err);
    CHECK_MSG(st == SC_OK, "%s", err.msg);
    if (st == SC_OK) {
        CHECK(m->cfg.family == SC_FAMILY_QWEN2 && m->cfg.qkv_bias && m->cfg.rope == SC_ROPE_HALF);
        CHECK(m->cfg.tied_classifier && m->classifier == m->tok_emb);
        CHECK(sc_test_layer(m, 1)->bq && sc_test_layer(m, 1)->bk && sc_test_layer(m, 1)->bv);
        check_tiny_weights(m, &q, "qwen2");
        sc_model_free(m);
    }
    /* qwen2 without a bias tensor */
    tiny_opts qb = {.arch = "qwen2", .skip = "blk.1.attn_v.bias"};
    const char *path = write_tiny("qwen2_nobias.gguf", &qb);
    st = sc_load_gguf(path, &m, &err);
    CHECK_MSG(st != SC_OK && strstr(err.msg, "blk.1.attn_v.bias") && strstr(err.msg, path), "%s", err.msg);
    /* gemma: head_dim from key_length (16 != dim / heads), GELU, embed scale */
    tiny_opts g = {.arch = "gemma", .wtype = 30, .head_dim = 16, .tied = true};
    st = sc_load_gguf(write_tiny("gemma.gguf", &g), &m, &err);
    CHECK_MSG(st == SC_OK, "%s", err.msg);
    if (st == SC_OK) {
        const sc_config *c = &m->cfg;
        CHECK(c->family == SC_FAMILY_GEMMA && c->head_dim == 16 && c->rope == SC_ROPE_HALF);
        CHECK(c->act == SC_ACT_GELU_TANH && c->embed_scale && !c->norm_add_one && !c->qkv_bias);
        check_tiny_weights(m, &g, "gemma");
        sc_model_free(m);
    }
    tiny_opts mi = {.arch = "mistral", .wtype = 8};
    st = sc_load_gguf(write_tiny("mistral.gguf", &mi), &m, &err);
    CHECK_MSG(st == SC_OK, "%s", err.msg);
    if (st == SC_OK) {
        CHECK(m->cfg.family == SC_FAMILY_MISTRAL && m->cfg.rope == SC_ROPE_INTERLEAVED);
        sc_model_free(m);
    }
    /* gpt2 vocabulary: the model loads without a tokenizer, with a note */
    tiny_opts gp = {.tok_model = "gpt2"};
    st = sc_load_gguf(write_tiny("gpt2tok.gguf", &gp), &m, &err);
    CHECK_MSG(st == SC_OK, "%s", err.msg);
    if (st == SC_OK) {
        CHECK(m->tokenizer == NULL && strstr(m->note, "'gpt2'") && strstr(m->note, "--tokens"));
        CHECK(m->cfg.bos_id == 1 && m->cfg.eos_id == 2);
        sc_model_free(m);
    }
    sc_tokenizer *tok = NULL;
    st = sc_gguf_load_tokenizer(sc_tmp_path("gpt2tok.gguf"), &tok, &err);
    CHECK(st == SC_EUNSUPPORTED && tok == NULL && strstr(err.msg, "gpt2"));
    /* no tokenizer at all */
    tiny_opts nt = {.tok_model = "none", .align_kv = 64};
    st = sc_load_gguf(write_tiny("notok.gguf", &nt), &m, &err);
    CHECK_MSG(st == SC_OK, "%s", err.msg);
    if (st == SC_OK) {
        CHECK(m->tokenizer == NULL && m->cfg.bos_id == -1 && m->note[0]);
        sc_model_free(m);
    }
}

/* ---- metadata API ---- */

static void put_key_type(gw_buf *b, const char *key, uint32_t type) {
    gw_str(b, key);
    gw_u32(b, type);
}

static void test_metadata_api(void) {
    gguf_writer w;
    gw_init(&w);
    w.align = 64;
    gw_kv_u32(&w, "general.alignment", 64);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    int32_t i32 = -2000000000;
    int64_t i64 = -((int64_t)1 << 40);
    uint8_t bt = 1;
    double f64 = 3.25e100;
    gw_kv_scalar(&w, "t.u8", 0, &u8, 1);
    gw_kv_scalar(&w, "t.i8", 1, &i8, 1);
    gw_kv_scalar(&w, "t.u16", 2, &u16, 2);
    gw_kv_scalar(&w, "t.i16", 3, &i16, 2);
    gw_kv_u32(&w, "t.u32", 4000000000u);
    gw_kv_scalar(&w, "t.i32", 5, &i32, 4);
    gw_kv_f32(&w, "t.f32", 1.5f);
    gw_kv_scalar(&w, "t.bool", 7, &bt, 1);
    gw_kv_str(&w, "t.str", "h\xc3\xa9llo");
    gw_kv_u64(&w, "t.u64", ((uint64_t)1 << 63) + 5);
    gw_kv_scalar(&w, "t.i64", 11, &i64, 8);
    gw_kv_scalar(&w, "t.f64", 12, &f64, 8);
    const char *strs[] = {"a", "", "ccc"};
    gw_kv_str_array(&w, "t.strs", strs, 3);
    int32_t ints[] = {1, -2, 3};
    gw_kv_array(&w, "t.i32s", 5, 3, ints, 4);
    gw_kv_array(&w, "t.empty", 12, 0, NULL, 8);
    uint8_t bools[] = {1, 0};
    gw_kv_array(&w, "t.bools", 7, 2, bools, 1);
    uint64_t u64s[] = {7, (uint64_t)-1};
    gw_kv_array(&w, "t.u64s", 10, 2, u64s, 8);
    /* nested: [[1, 2] (u8), ["x"] (string), [[9] (i16)] (array)] */
    gw_buf b = {0};
    put_key_type(&b, "t.nested", 9);
    gw_u32(&b, 9), gw_u64(&b, 3);
    gw_u32(&b, 0), gw_u64(&b, 2), gw_u8(&b, 1), gw_u8(&b, 2);
    gw_u32(&b, 8), gw_u64(&b, 1), gw_str(&b, "x");
    gw_u32(&b, 9), gw_u64(&b, 1), gw_u32(&b, 3), gw_u64(&b, 1), gw_u16(&b, 9);
    gw_kv_raw(&w, b.p, b.n);
    gw_buf_free(&b);
    float tdata[64];
    for (int i = 0; i < 64; i++) tdata[i] = (float)i;
    uint64_t ne[3] = {4, 8, 2};
    gw_tensor(&w, "a.tensor", 3, ne, 0, tdata, sizeof tdata);
    gw_tensor(&w, "b.tensor", 1, ne, 0, tdata, 16);
    const char *path = sc_tmp_path("meta.gguf");
    CHECK(gw_write_file(&w, path));
    gw_free(&w);

    sc_gguf *g = NULL;
    sc_err err = {{0}};
    sc_status st = sc_gguf_open(path, &g, &err);
    CHECK_MSG(st == SC_OK, "%s", err.msg);
    if (st != SC_OK) return;
    CHECK(sc_gguf_version(g) == 3 && sc_gguf_alignment(g) == 64 && sc_gguf_data_offset(g) % 64 == 0);
    CHECK(sc_gguf_kv_count(g) == 19);
    CHECK(sc_gguf_find_kv(g, "nope") == -1 && sc_gguf_get(g, "nope") == NULL);
    int64_t iv;
    uint64_t uv;
    double dv;
    bool bv;
    const char *s;
    size_t len;
#define GET(k) sc_gguf_get(g, k)
    CHECK(GET("t.u8")->type == SC_GGUF_UINT8 && sc_gguf_value_int(GET("t.u8"), &iv) && iv == 200);
    CHECK(sc_gguf_value_int(GET("t.i8"), &iv) && iv == -100);
    CHECK(sc_gguf_value_int(GET("t.u16"), &iv) && iv == 60000);
    CHECK(sc_gguf_value_int(GET("t.i16"), &iv) && iv == -30000);
    CHECK(sc_gguf_value_int(GET("t.u32"), &iv) && iv == 4000000000LL);
    CHECK(sc_gguf_value_int(GET("t.i32"), &iv) && iv == -2000000000LL);
    CHECK(sc_gguf_value_float(GET("t.f32"), &dv) && dv == 1.5);
    CHECK(!sc_gguf_value_int(GET("t.f32"), &iv));
    CHECK(sc_gguf_value_bool(GET("t.bool"), &bv) && bv);
    CHECK(sc_gguf_value_string(GET("t.str"), &s, &len) && len == 6 && memcmp(s, "h\xc3\xa9llo", 6) == 0);
    CHECK(!sc_gguf_value_int(GET("t.u64"), &iv)); /* does not fit int64 */
    CHECK(sc_gguf_value_u64(GET("t.u64"), &uv) && uv == ((uint64_t)1 << 63) + 5);
    CHECK(sc_gguf_value_int(GET("t.i64"), &iv) && iv == -((int64_t)1 << 40));
    CHECK(!sc_gguf_value_u64(GET("t.i64"), &uv));
    CHECK(sc_gguf_value_float(GET("t.f64"), &dv) && dv == 3.25e100);
    CHECK(sc_gguf_get_int(g, "t.u32", &iv, &err) == SC_OK && iv == 4000000000LL);
    CHECK(sc_gguf_get_int(g, "t.str", &iv, &err) == SC_EFORMAT && strstr(err.msg, "t.str") && strstr(err.msg, path));
    CHECK(sc_gguf_get_int(g, "missing.key", &iv, &err) == SC_EFORMAT && strstr(err.msg, "missing.key"));
    CHECK(sc_gguf_get_string(g, "t.str", &s, &len, &err) == SC_OK && len == 6);
    CHECK(sc_gguf_get_float(g, "t.u16", &dv, &err) == SC_OK && dv == 60000.0);

    const sc_gguf_value *a = GET("t.strs");
    CHECK(a->type == SC_GGUF_ARRAY && a->elem_type == SC_GGUF_STRING && a->count == 3);
    sc_gguf_iter it;
    sc_gguf_value e;
    sc_gguf_iter_init(&it, a);
    const char *want[] = {"a", "", "ccc"};
    for (int i = 0; i < 3; i++)
        CHECK(sc_gguf_iter_next(&it, &e) && sc_gguf_value_string(&e, &s, &len) && len == strlen(want[i]) &&
              memcmp(s, want[i], len) == 0);
    CHECK(!sc_gguf_iter_next(&it, &e));
    CHECK(sc_gguf_array_elem(a, 2, &e) && sc_gguf_value_string(&e, &s, &len) && len == 3);
    CHECK(!sc_gguf_array_elem(a, 3, &e));
    a = GET("t.i32s");
    CHECK(sc_gguf_array_elem(a, 1, &e) && sc_gguf_value_int(&e, &iv) && iv == -2);
    a = GET("t.empty");
    CHECK(a->count == 0 && a->elem_type == SC_GGUF_FLOAT64 && !sc_gguf_array_elem(a, 0, &e));
    a = GET("t.bools");
    CHECK(sc_gguf_array_elem(a, 0, &e) && sc_gguf_value_bool(&e, &bv) && bv);
    CHECK(sc_gguf_array_elem(a, 1, &e) && sc_gguf_value_bool(&e, &bv) && !bv);
    a = GET("t.u64s");
    CHECK(sc_gguf_array_elem(a, 1, &e) && sc_gguf_value_u64(&e, &uv) && uv == UINT64_MAX);
    a = GET("t.nested");
    CHECK(a->count == 3 && a->elem_type == SC_GGUF_ARRAY);
    sc_gguf_value e0, e1, e2, x;
    CHECK(sc_gguf_array_elem(a, 0, &e0) && e0.elem_type == SC_GGUF_UINT8 && e0.count == 2);
    CHECK(sc_gguf_array_elem(&e0, 1, &x) && sc_gguf_value_int(&x, &iv) && iv == 2);
    CHECK(sc_gguf_array_elem(a, 1, &e1) && e1.elem_type == SC_GGUF_STRING && e1.count == 1);
    CHECK(sc_gguf_array_elem(&e1, 0, &x) && sc_gguf_value_string(&x, &s, &len) && len == 1 && *s == 'x');
    CHECK(sc_gguf_array_elem(a, 2, &e2) && e2.elem_type == SC_GGUF_ARRAY && e2.count == 1);
    sc_gguf_value inner;
    CHECK(sc_gguf_array_elem(&e2, 0, &inner) && inner.elem_type == SC_GGUF_INT16);
    CHECK(sc_gguf_array_elem(&inner, 0, &x) && sc_gguf_value_int(&x, &iv) && iv == 9);
#undef GET
    CHECK(sc_gguf_tensor_count(g) == 2);
    const sc_gguf_tensor *t = sc_gguf_find_tensor(g, "a.tensor");
    CHECK(t && t->n_dims == 3 && t->ne[0] == 4 && t->ne[1] == 8 && t->ne[2] == 2 && t->ne[3] == 1);
    CHECK(t && t->n_elems == 64 && t->n_bytes == 256 && t->offset == 0 && t->ggml_type == SC_GGML_F32);
    CHECK(t && memcmp(t->data, tdata, 256) == 0);
    t = sc_gguf_tensor_at(g, 1);
    CHECK(t && strcmp(t->name, "b.tensor") == 0 && t->offset == 256 && t->n_bytes == 16);
    CHECK(sc_gguf_find_tensor(g, "c.tensor") == NULL && sc_gguf_tensor_at(g, 2) == NULL);
    CHECK(strcmp(sc_gguf_ggml_type_name(12), "Q4_K") == 0 && strcmp(sc_gguf_ggml_type_name(4), "?") == 0);
    sc_gguf_free(g);
    sc_gguf_free(NULL);
}

/* ---- stories260K ---- */

static void test_stories(void) {
    const char *gpath = sc_asset("models/stories260K.gguf");
    const char *bpath = sc_asset("models/stories260K.bin");
    const char *tpath = sc_asset("models/tok512.bin");
    if (!gpath) return;
    sc_model *m = NULL;
    sc_err err = {{0}};
    sc_status st = sc_load_gguf(gpath, &m, &err);
    CHECK_MSG(st == SC_OK, "%s", err.msg);
    if (st != SC_OK) return;
    const sc_config *c = &m->cfg;
    CHECK(c->family == SC_FAMILY_LLAMA && c->dim == 64 && c->ffn_dim == 172 && c->n_layers == 5);
    CHECK(c->n_heads == 8 && c->n_kv_heads == 4 && c->head_dim == 8 && c->vocab_size == 512);
    CHECK(c->tied_classifier && m->classifier == m->tok_emb);
    CHECK(c->bos_id == 1 && c->eos_id == 2 && c->rope == SC_ROPE_INTERLEAVED && c->act == SC_ACT_SILU);
    CHECK_NEAR(c->norm_eps, 1e-5, 1e-9);
    CHECK_NEAR(c->rope_theta, 10000.0, 0);
    CHECK(strcmp(m->format, "gguf") == 0 && strcmp(m->src_dtype, "F32") == 0);
    CHECK(m->owned_bytes == 0 && m->mapped_bytes > 0); /* f32 used in place from the mapping */
    CHECK(sc_model_param_count(m) == 260032);

    /* through the format dispatcher as well */
    sc_model *m2 = NULL;
    CHECK(sc_model_load(gpath, &m2, &err) == SC_OK && m2 && strcmp(m2->format, "gguf") == 0);
    sc_model_free(m2);

    /* same weights as the llama2.c checkpoint */
    sc_model *b = NULL;
    if (bpath && (st = sc_model_load(bpath, &b, &err)) == SC_OK) {
        int64_t D = 64, F = 172, V = 512;
        CHECK(memcmp(m->tok_emb, b->tok_emb, (size_t)(V * D) * 4) == 0);
        CHECK(memcmp(sc_test_layer(m, 0)->wq, sc_test_layer(b, 0)->wq, (size_t)(D * D) * 4) == 0);
        CHECK(memcmp(sc_test_layer(m, 4)->wd, sc_test_layer(b, 4)->wd, (size_t)(D * F) * 4) == 0);
        CHECK(memcmp(m->final_norm, b->final_norm, (size_t)D * 4) == 0);
        CHECK(memcmp(sc_test_layer(m, 2)->wk, sc_test_layer(b, 2)->wk, (size_t)(D * 32) * 4) == 0);
        CHECK(memcmp(sc_test_layer(m, 3)->attn_norm, sc_test_layer(b, 3)->attn_norm, (size_t)D * 4) == 0);
        sc_model_free(b);
    } else if (bpath) {
        CHECK_MSG(false, "loading %s: %s", bpath, err.msg);
    }

    /* tokenizer: 512 pieces with spaces; same encoding as tok512.bin */
    CHECK(m->tokenizer && sc_tokenizer_vocab_size(m->tokenizer) == 512);
    sc_tokenizer *ref = NULL;
    if (m->tokenizer && tpath && sc_tokenizer_load_llama2c(tpath, 512, &ref, &err) == SC_OK) {
        bool has_space = false, has_u2581 = false;
        for (int32_t id = 0; id < 512; id++) {
            size_t len;
            const char *p = sc_tokenizer_piece(m->tokenizer, id, &len);
            for (size_t k = 0; k < len; k++) {
                has_space |= p[k] == ' ';
                has_u2581 |= k + 2 < len && memcmp(p + k, "\xe2\x96\x81", 3) == 0;
            }
        }
        CHECK(has_space && !has_u2581);
        const char *text = "Once upon a time";
        sc_tokens a = {0}, r = {0};
        CHECK(sc_tokenizer_encode(m->tokenizer, text, strlen(text), true, false, &a, &err) == SC_OK);
        CHECK(sc_tokenizer_encode(ref, text, strlen(text), true, false, &r, &err) == SC_OK);
        CHECK(a.n == r.n && a.n > 2 && memcmp(a.ids, r.ids, a.n * sizeof *a.ids) == 0 && a.ids[0] == 1);
        sc_tokens_free(&a);
        sc_tokens_free(&r);
        sc_tokenizer_free(ref);
    }
    sc_model_free(m);

    /* vocabulary only */
    sc_tokenizer *tok = NULL;
    st = sc_gguf_load_tokenizer(gpath, &tok, &err);
    CHECK_MSG(st == SC_OK && tok && sc_tokenizer_vocab_size(tok) == 512, "%s", err.msg);
    sc_tokenizer_free(tok);
}

static void test_vocab_only(void) {
    const char *path = sc_asset("tokenizers/llama_cpp_vocab/ggml-vocab-llama-spm.gguf");
    if (!path) return;
    sc_model *m = NULL;
    sc_err err = {{0}};
    sc_status st = sc_load_gguf(path, &m, &err);
    CHECK_MSG(st != SC_OK && m == NULL && strstr(err.msg, "no tensors: vocabulary-only file") && strstr(err.msg, path),
              "%s", err.msg);
    sc_tokenizer *tok = NULL;
    st = sc_gguf_load_tokenizer(path, &tok, &err);
    CHECK_MSG(st == SC_OK, "%s", err.msg);
    if (st != SC_OK) return;
    CHECK(sc_tokenizer_vocab_size(tok) == 32000 && sc_tokenizer_bos(tok) == 1 && sc_tokenizer_eos(tok) == 2);
    sc_tokens ids = {0};
    CHECK(sc_tokenizer_encode(tok, "Hello world", 11, false, false, &ids, &err) == SC_OK);
    CHECK_MSG(ids.n == 2 && ids.ids[0] == 15043 && ids.ids[1] == 3186, "got %zu ids", ids.n);
    sc_tokens_free(&ids);
    sc_tokenizer_free(tok);
}

/* ---- hostile files ---- */

/* The load must fail with a message naming the file (and `what`, if set). */
static void expect_fail(const char *label, const char *path, sc_status want, const char *what) {
    sc_model *m = (sc_model *)(uintptr_t)1;
    sc_err err = {{0}};
    sc_status st = sc_load_gguf(path, &m, &err);
    CHECK_MSG(st != SC_OK && m == NULL, "%s: loaded (status %d)", label, (int)st);
    if (st == SC_OK) sc_model_free(m);
    CHECK_MSG(strstr(err.msg, path) != NULL, "%s: message lacks the file name: %s", label, err.msg);
    if (want != SC_OK) CHECK_MSG(st == want, "%s: status %s, want %s (%s)", label, sc_status_name(st), sc_status_name(want), err.msg);
    if (what) CHECK_MSG(strstr(err.msg, what) != NULL, "%s: message lacks '%s': %s", label, what, err.msg);
    if (getenv("SC_TEST_VERBOSE")) fprintf(stderr, "%s: %s\n", label, err.msg);
}

static void fail_tiny(const char *label, const tiny_opts *o, sc_status want, const char *what) {
    char file[96];
    snprintf(file, sizeof file, "hostile_%s.gguf", label);
    expect_fail(label, write_tiny(file, o), want, what);
}

/* hooks that add hostile pieces to an otherwise valid tiny model */
static void h_counts_tensors(gguf_writer *w) {
    w->override_counts = true, w->n_kv_hdr = w->n_kv, w->n_tensors_hdr = (uint64_t)1 << 62;
}
static void h_counts_kv(gguf_writer *w) {
    w->override_counts = true, w->n_kv_hdr = (uint64_t)1 << 60, w->n_tensors_hdr = w->n_tensors;
}
static void h_counts_kv_plus1(gguf_writer *w) {
    w->override_counts = true, w->n_kv_hdr = w->n_kv + 1, w->n_tensors_hdr = w->n_tensors;
}
static void h_key_len(gguf_writer *w) {
    gw_buf b = {0};
    gw_u64(&b, (uint64_t)1 << 63), gw_put(&b, "abc", 3);
    gw_kv_raw(w, b.p, b.n);
    gw_buf_free(&b);
}
static void h_str_len(gguf_writer *w) {
    gw_buf b = {0};
    put_key_type(&b, "general.evil", 8), gw_u64(&b, (uint64_t)1 << 63), gw_put(&b, "abc", 3);
    gw_kv_raw(w, b.p, b.n);
    gw_buf_free(&b);
}
static void h_arr_u8(gguf_writer *w) {
    gw_buf b = {0};
    put_key_type(&b, "general.evil", 9), gw_u32(&b, 0), gw_u64(&b, (uint64_t)1 << 61);
    gw_kv_raw(w, b.p, b.n);
    gw_buf_free(&b);
}
static void h_arr_str(gguf_writer *w) {
    gw_buf b = {0};
    put_key_type(&b, "general.evil", 9), gw_u32(&b, 8), gw_u64(&b, (uint64_t)1 << 61);
    gw_kv_raw(w, b.p, b.n);
    gw_buf_free(&b);
}
static void h_arr_nested(gguf_writer *w) {
    gw_buf b = {0};
    put_key_type(&b, "general.evil", 9), gw_u32(&b, 9), gw_u64(&b, 2);
    gw_u32(&b, 6), gw_u64(&b, (uint64_t)1 << 61);
    gw_kv_raw(w, b.p, b.n);
    gw_buf_free(&b);
}
static void h_deep(gguf_writer *w) {
    gw_buf b = {0};
    put_key_type(&b, "general.deep", 9);
    for (int i = 0; i < 100000; i++) gw_u32(&b, 9), gw_u64(&b, 1);
    gw_u32(&b, 0), gw_u64(&b, 0);
    gw_kv_raw(w, b.p, b.n);
    gw_buf_free(&b);
}
static void h_bad_vtype(gguf_writer *w) {
    gw_buf b = {0};
    put_key_type(&b, "general.odd", 13), gw_u64(&b, 0);
    gw_kv_raw(w, b.p, b.n);
    gw_buf_free(&b);
}
static void h_dup_key(gguf_writer *w) { gw_kv_str(w, "general.name", "again"); }
static void h_ndims9(gguf_writer *w) {
    uint64_t ne[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    gw_tensor_info(w, "extra.weight", 9, ne, 0, 0);
}
static void h_dim0(gguf_writer *w) {
    uint64_t ne[2] = {0, 32};
    gw_tensor_info(w, "extra.weight", 2, ne, 0, 0);
}
static void h_dim_overflow(gguf_writer *w) {
    uint64_t ne[3] = {(uint64_t)1 << 32, (uint64_t)1 << 32, (uint64_t)1 << 32};
    gw_tensor_info(w, "extra.weight", 3, ne, 0, 0);
}
static void h_bytes_overflow(gguf_writer *w) {
    uint64_t ne[2] = {(uint64_t)1 << 31, (uint64_t)1 << 31}; /* 2^62 elements, 2^64 bytes */
    gw_tensor_info(w, "extra.weight", 2, ne, 0, 0);
}
static void h_past_eof(gguf_writer *w) {
    uint64_t ne[1] = {32};
    gw_tensor_info(w, "extra.weight", 1, ne, 0, (uint64_t)1 << 20);
}
static void h_huge_offset(gguf_writer *w) {
    uint64_t ne[1] = {32};
    gw_tensor_info(w, "extra.weight", 1, ne, 0, UINT64_MAX - 31);
}
static void h_misaligned(gguf_writer *w) {
    uint64_t ne[1] = {8};
    gw_tensor_info(w, "extra.weight", 1, ne, 0, 4);
}
static void h_type99(gguf_writer *w) {
    uint64_t ne[1] = {32};
    gw_tensor_info(w, "extra.weight", 1, ne, 99, 0);
}
static void h_type4(gguf_writer *w) {
    uint64_t ne[1] = {32};
    gw_tensor_info(w, "extra.weight", 1, ne, 4, 0); /* a removed ggml type id */
}
static void h_q4k_block(gguf_writer *w) {
    uint64_t ne[1] = {100};
    gw_tensor_info(w, "extra.weight", 1, ne, 12, 0); /* Q4_K needs multiples of 256 */
}
static void h_dup_tensor(gguf_writer *w) {
    uint64_t ne[1] = {32};
    gw_tensor_info(w, "output_norm.weight", 1, ne, 0, 0);
}
static void h_nul_name(gguf_writer *w) {
    gw_buf b = {0};
    gw_u64(&b, 3), gw_put(&b, "a\0b", 3), gw_u32(&b, 4), gw_u32(&b, 1);
    gw_kv_raw(w, b.p, b.n);
    gw_buf_free(&b);
}
static void h_bad_magic(gguf_writer *w) { memcpy(w->magic, "GGUG", 4); }
static void h_vocab_size(gguf_writer *w) { gw_kv_u32(w, "llama.vocab_size", 100); }
static void h_keylen_string(gguf_writer *w) { gw_kv_str(w, "llama.attention.key_length", "8"); }

static void test_hostile_crafted(void) {
    tiny_opts o = {0};
    o.extra = h_bad_magic, fail_tiny("bad_magic", &o, SC_EFORMAT, "magic");
    o = (tiny_opts){.version = 1}, fail_tiny("version1", &o, SC_EUNSUPPORTED, "version 1");
    o = (tiny_opts){.version = 99}, fail_tiny("version99", &o, SC_EUNSUPPORTED, "version 99");
    o = (tiny_opts){.extra = h_counts_tensors}, fail_tiny("tensor_count", &o, SC_EFORMAT, "tensor_count");
    o = (tiny_opts){.extra = h_counts_kv}, fail_tiny("kv_count", &o, SC_EFORMAT, "metadata_kv_count");
    o = (tiny_opts){.extra = h_counts_kv_plus1}, fail_tiny("kv_count_plus1", &o, SC_EFORMAT, NULL);
    o = (tiny_opts){.extra = h_key_len}, fail_tiny("key_len", &o, SC_EFORMAT, "string length 9223372036854775808");
    o = (tiny_opts){.extra = h_str_len}, fail_tiny("str_len", &o, SC_EFORMAT, "general.evil");
    o = (tiny_opts){.extra = h_arr_u8}, fail_tiny("arr_u8", &o, SC_EFORMAT, "array count 2305843009213693952");
    o = (tiny_opts){.extra = h_arr_str}, fail_tiny("arr_str", &o, SC_EFORMAT, "array count");
    o = (tiny_opts){.extra = h_arr_nested}, fail_tiny("arr_nested", &o, SC_EFORMAT, "array count");
    o = (tiny_opts){.extra = h_deep}, fail_tiny("deep_nesting", &o, SC_EFORMAT, "nested");
    o = (tiny_opts){.extra = h_bad_vtype}, fail_tiny("value_type13", &o, SC_EFORMAT, "unknown value type 13");
    o = (tiny_opts){.extra = h_dup_key}, fail_tiny("dup_key", &o, SC_EFORMAT, "duplicate metadata key 'general.name'");
    o = (tiny_opts){.extra = h_nul_name}, fail_tiny("nul_in_key", &o, SC_EFORMAT, "NUL");
    o = (tiny_opts){.extra = h_ndims9}, fail_tiny("ndims9", &o, SC_EFORMAT, "n_dims = 9");
    o = (tiny_opts){.extra = h_dim0}, fail_tiny("dim0", &o, SC_EFORMAT, "ne[0] is 0");
    o = (tiny_opts){.extra = h_dim_overflow}, fail_tiny("dim_overflow", &o, SC_EFORMAT, "overflows");
    o = (tiny_opts){.extra = h_bytes_overflow}, fail_tiny("bytes_overflow", &o, SC_EFORMAT, "extra.weight");
    o = (tiny_opts){.extra = h_past_eof}, fail_tiny("past_eof", &o, SC_EFORMAT, "extends past end of file");
    o = (tiny_opts){.extra = h_huge_offset}, fail_tiny("huge_offset", &o, SC_EFORMAT, "extends past end of file");
    o = (tiny_opts){.extra = h_misaligned}, fail_tiny("misaligned", &o, SC_EFORMAT, "not a multiple of the alignment");
    o = (tiny_opts){.align_kv = 0xffffffffu}, fail_tiny("align_max", &o, SC_EFORMAT, "general.alignment");
    o = (tiny_opts){.extra = h_type99}, fail_tiny("type99", &o, SC_EFORMAT, "unknown ggml type 99");
    o = (tiny_opts){.extra = h_type4}, fail_tiny("type4", &o, SC_EFORMAT, "unknown ggml type 4");
    o = (tiny_opts){.extra = h_q4k_block}, fail_tiny("q4k_block", &o, SC_EFORMAT, "block size");
    o = (tiny_opts){.extra = h_dup_tensor}, fail_tiny("dup_tensor", &o, SC_EFORMAT, "duplicate tensor");
    o = (tiny_opts){.iq4_nl = "blk.0.attn_q.weight"}, fail_tiny("iq4_nl", &o, SC_EUNSUPPORTED, "'blk.0.attn_q.weight' has ggml type IQ4_NL");
    o = (tiny_opts){.skip = "blk.1.ffn_down.weight"}, fail_tiny("missing", &o, SC_EFORMAT, "blk.1.ffn_down.weight");
    o = (tiny_opts){.skip = "token_embd.weight"}, fail_tiny("missing_embd", &o, SC_EFORMAT, "token_embd.weight");
    o = (tiny_opts){.skip = "output_norm.weight"}, fail_tiny("missing_norm", &o, SC_EFORMAT, "output_norm.weight");
    o = (tiny_opts){.bad_shape = "blk.0.attn_q.weight"}, fail_tiny("shape", &o, SC_EFORMAT, "'blk.0.attn_q.weight' has shape");
    o = (tiny_opts){.bad_shape = "output.weight"}, fail_tiny("shape_out", &o, SC_EFORMAT, "'output.weight' has shape");
    o = (tiny_opts){.arch = "gptj"}, fail_tiny("arch", &o, SC_EUNSUPPORTED, "'gptj'");
    o = (tiny_opts){.head_count = -1}, fail_tiny("heads0", &o, SC_EFORMAT, "n_heads");
    o = (tiny_opts){.block_count = 1000000000}, fail_tiny("blocks1e9", &o, SC_EFORMAT, "n_layers");
    o = (tiny_opts){.block_count = 3}, fail_tiny("blocks3", &o, SC_EFORMAT, "blk.2.");
    o = (tiny_opts){.extra = h_vocab_size}, fail_tiny("vocab_size", &o, SC_EFORMAT, "vocab_size");
    o = (tiny_opts){.extra = h_keylen_string}, fail_tiny("keylen_string", &o, SC_EFORMAT, "'llama.attention.key_length' has type string");
    o = (tiny_opts){.head_dim = 7}, fail_tiny("head_dim7", &o, SC_EFORMAT, "head_dim");

    /* alignment 0 and 3 (written by hand: the writer lays data out at 32) */
    for (uint32_t a = 0; a < 4; a += 3) {
        gguf_writer w;
        gw_init(&w);
        gw_kv_u32(&w, "general.alignment", a);
        float x[8] = {0};
        uint64_t ne[1] = {8};
        gw_tensor(&w, "x", 1, ne, 0, x, sizeof x);
        char file[32];
        snprintf(file, sizeof file, "align%u.gguf", a);
        const char *path = sc_tmp_path(file);
        CHECK(gw_write_file(&w, path));
        gw_free(&w);
        sc_gguf *g = NULL;
        sc_err err = {{0}};
        sc_status st = sc_gguf_open(path, &g, &err);
        CHECK_MSG(st == SC_EFORMAT && g == NULL && strstr(err.msg, "general.alignment") && strstr(err.msg, path), "%s",
                  err.msg);
        expect_fail(file, path, SC_EFORMAT, "general.alignment");
    }
    /* an alignment of type string */
    gguf_writer w;
    gw_init(&w);
    gw_kv_str(&w, "general.alignment", "32");
    const char *path = sc_tmp_path("align_str.gguf");
    CHECK(gw_write_file(&w, path));
    gw_free(&w);
    expect_fail("align_str", path, SC_EFORMAT, "general.alignment");
    /* empty and nonexistent files */
    path = sc_tmp_path("empty.gguf");
    CHECK(sc_write_bytes(path, "", 0));
    expect_fail("empty", path, SC_OK, NULL);
    expect_fail("nonexistent", sc_tmp_path("does_not_exist.gguf"), SC_EIO, NULL);
    /* a vocabulary with scores of the wrong length */
    gw_init(&w);
    gw_kv_str(&w, "tokenizer.ggml.model", "llama");
    const char *toks[] = {"<unk>", "<s>", "</s>", "a"};
    gw_kv_str_array(&w, "tokenizer.ggml.tokens", toks, 4);
    float sc3[3] = {0};
    gw_kv_array(&w, "tokenizer.ggml.scores", 6, 3, sc3, 4);
    path = sc_tmp_path("scores3.gguf");
    CHECK(gw_write_file(&w, path));
    gw_free(&w);
    sc_tokenizer *tok = NULL;
    sc_err err = {{0}};
    CHECK(sc_gguf_load_tokenizer(path, &tok, &err) == SC_EFORMAT && !tok && strstr(err.msg, "tokenizer.ggml.scores"));
    /* bos beyond the vocabulary */
    gw_init(&w);
    gw_kv_str(&w, "tokenizer.ggml.model", "llama");
    gw_kv_str_array(&w, "tokenizer.ggml.tokens", toks, 4);
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 4);
    path = sc_tmp_path("bos4.gguf");
    CHECK(gw_write_file(&w, path));
    gw_free(&w);
    CHECK(sc_gguf_load_tokenizer(path, &tok, &err) == SC_EFORMAT && !tok && strstr(err.msg, "bos_token_id"));
}

/* Every prefix of the real file must fail cleanly. */
static void test_truncated(void) {
    const char *src = sc_asset("models/stories260K.gguf");
    if (!src) return;
    char *data = NULL;
    size_t n = 0;
    sc_err err = {{0}};
    CHECK(sc_read_file(src, (size_t)1 << 24, &data, &n, &err) == SC_OK);
    if (!data) return;
    const char *path = sc_tmp_path("truncated.gguf");
    CHECK(sc_write_bytes(path, data, n));
    int fails = 0, checked = 0;
    /* shrink the one file from the longest prefix down */
    size_t lens[2000];
    size_t k = 0;
    for (size_t len = n - 1; len >= 200 && k < 1800; len = len > 997 ? len - 997 : 0) lens[k++] = len;
    for (size_t len = 200; len-- > 0;) lens[k++] = len;
    for (size_t i = 0; i < k; i++) {
        if (truncate(path, (off_t)lens[i]) != 0) {
            CHECK_MSG(false, "truncate failed");
            break;
        }
        sc_model *m = NULL;
        sc_status st = sc_load_gguf(path, &m, &err);
        checked++;
        if (st == SC_OK || m || !strstr(err.msg, path)) {
            fails++;
            if (fails < 5) fprintf(stderr, "prefix %zu: status %d, %s\n", lens[i], (int)st, err.msg);
            sc_model_free(m);
        }
    }
    CHECK_MSG(fails == 0, "%d of %d truncated prefixes misbehaved", fails, checked);
    CHECK(checked > 1300);
    unlink(path);
    free(data);
}

/* Flipping single header bytes of the real file never crashes. */
static void test_corrupt_bytes(void) {
    const char *src = sc_asset("models/stories260K.gguf");
    if (!src) return;
    char *data = NULL;
    size_t n = 0;
    sc_err err = {{0}};
    if (sc_read_file(src, (size_t)1 << 24, &data, &n, &err) != SC_OK) return;
    const char *path = sc_tmp_path("corrupt.gguf");
    uint32_t rng = 12345;
    int loaded = 0, named = 0, total = 0;
    for (int i = 0; i < 300; i++) {
        rng = rng * 1664525u + 1013904223u;
        size_t pos = (rng >> 8) % 14200; /* header, metadata and tensor infos */
        char saved = data[pos];
        data[pos] = (char)(data[pos] ^ (char)(1 + (rng & 0x7f)));
        if (!sc_write_bytes(path, data, n)) break;
        data[pos] = saved;
        sc_model *m = NULL;
        sc_status st = sc_load_gguf(path, &m, &err);
        total++;
        if (st == SC_OK) loaded++;
        else named += strstr(err.msg, path) != NULL;
        sc_model_free(m);
    }
    CHECK_MSG(named == total - loaded, "%d of %d failures named the file", named, total - loaded);
    unlink(path);
    free(data);
}

int main(void) {
    test_metadata_api();
    test_tiny_dtypes();
    test_tiny_families();
    test_stories();
    test_vocab_only();
    test_hostile_crafted();
    test_truncated();
    test_corrupt_bytes();
    return sc_test_finish();
}
