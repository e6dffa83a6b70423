#define _POSIX_C_SOURCE 200809L
#include "synth.h"
#include "json_out.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model.h"
#include "safetensors.h"

#define SYNTH_CHUNK ((size_t)1 << 18) /* floats generated per write */

void sc_synth_opts_default(sc_synth_opts *o) {
    *o = (sc_synth_opts){.dim = 256,
                         .ffn_dim = 768,
                         .n_layers = 4,
                         .n_heads = 8,
                         .n_kv_heads = 4,
                         .vocab_size = 32000,
                         .max_seq_len = 2048,
                         .seed = 1,
                         .dtype = SC_DT_F32,
                         .family = "llama"};
}

/* ---- deterministic normals: splitmix64 -> Box-Muller ---- */

typedef struct rng {
    uint64_t s;
} rng;

static inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* One stream per tensor, so each tensor's values depend only on (seed, index). */
static rng rng_for(uint64_t seed, uint64_t tensor) {
    uint64_t s = seed ^ (0xd1b54a32d192ed03ULL * (tensor + 1));
    rng r = {splitmix64(&s)};
    return r;
}

/* ln(u) for u in (0, 1]: exponent plus an atanh series on the mantissa
 * (absolute error ~1e-6). Written out rather than calling libm so the values
 * are the same on every platform, and branch-free so the loop vectorises. */
static inline float ln_unit(float u) {
    uint32_t b;
    memcpy(&b, &u, 4);
    int32_t e = (int32_t)(b >> 23) - 127;
    uint32_t mb = (b & 0x7fffffu) | 0x3f800000u;
    float m;
    memcpy(&m, &mb, 4);
    int big = m > 1.41421356f; /* bring m into [sqrt(1/2), sqrt(2)) */
    m = big ? m * 0.5f : m;
    e += big;
    float s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
    float p = 2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9)))));
    return (float)e * 0.693147180559945f + p;
}

/* cos and sin of 2*pi*u for u in [0, 1): quadrant, then Taylor polynomials on
 * [0, pi/2) (error ~2e-7). */
static inline void cos_sin_turn(float u, float *c, float *s) {
    float t = u * 4.0f;
    int q = (int)t;
    float a = (t - (float)q) * 1.57079632679f, a2 = a * a;
    /* Taylor series in nested form: sin to a^11, cos to a^12 */
    float sn = 1.0f - a2 * (1.0f / 110);
    sn = 1.0f - a2 * (1.0f / 72) * sn;
    sn = 1.0f - a2 * (1.0f / 42) * sn;
    sn = 1.0f - a2 * (1.0f / 20) * sn;
    sn = a * (1.0f - a2 * (1.0f / 6) * sn);
    float cs = 1.0f - a2 * (1.0f / 132);
    cs = 1.0f - a2 * (1.0f / 90) * cs;
    cs = 1.0f - a2 * (1.0f / 56) * cs;
    cs = 1.0f - a2 * (1.0f / 30) * cs;
    cs = 1.0f - a2 * (1.0f / 12) * cs;
    cs = 1.0f - a2 * 0.5f * cs;
    float c0 = (q & 1) ? sn : cs, s0 = (q & 1) ? cs : sn; /* rotate by q quarter turns */
    *c = (q == 1 || q == 2) ? -c0 : c0;
    *s = (q >= 2) ? -s0 : s0;
}

#define NORMAL_BLOCK 256 /* pairs */

/* Fills x[0..n) with mean + std * N(0, 1). Pairs come from one splitmix64
 * output each; an odd n uses the cosine half of the last pair. */
static void fill_normal(rng *r, float *x, size_t n, float mean, float std) {
    const float inv24 = 1.0f / 16777216.0f;
    float u1[NORMAL_BLOCK], u2[NORMAL_BLOCK], rad[NORMAL_BLOCK], c[NORMAL_BLOCK], s[NORMAL_BLOCK];
    for (size_t i = 0; i < n; i += 2 * NORMAL_BLOCK) {
        size_t np = (n - i + 1) / 2;
        if (np > NORMAL_BLOCK) np = NORMAL_BLOCK;
        for (size_t k = 0; k < np; k++) {
            uint64_t z = splitmix64(&r->s);
            u1[k] = (float)((z >> 40) + 1) * inv24; /* (0, 1] */
            u2[k] = (float)(z & 0xffffff) * inv24;  /* [0, 1) */
        }
        for (size_t k = 0; k < np; k++) rad[k] = -2.0f * ln_unit(u1[k]);
        for (size_t k = 0; k < np; k++) rad[k] = sqrtf(rad[k]) * std;
        for (size_t k = 0; k < np; k++) cos_sin_turn(u2[k], &c[k], &s[k]);
        float *o = x + i;
        size_t full = (n - i) / 2 < np ? (n - i) / 2 : np;
        for (size_t k = 0; k < full; k++) {
            o[2 * k] = mean + rad[k] * c[k];
            o[2 * k + 1] = mean + rad[k] * s[k];
        }
        if (full < np) o[2 * full] = mean + rad[full] * c[full];
    }
}

/* ---- tensor list ---- */

typedef struct synth_tensor {
    char name[96];
    int64_t d0, d1; /* d1 < 0: 1-D */
    float mean, std;
} synth_tensor;

typedef struct synth_list {
    synth_tensor *t;
    size_t n;
} synth_list;

static void add(synth_list *l, const char *name, int64_t d0, int64_t d1, float mean, float std) {
    synth_tensor *t = &l->t[l->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->d0 = d0;
    t->d1 = d1;
    t->mean = mean;
    t->std = std;
}

static void build_list(const sc_config *c, synth_list *l) {
    int64_t D = c->dim, F = c->ffn_dim, Q = c->n_heads * c->head_dim, KV = c->n_kv_heads * c->head_dim;
    bool gemma = c->family == SC_FAMILY_GEMMA;
    float norm_mean = gemma ? 0.0f : 1.0f, norm_std = 0.1f, bias_std = 0.02f;
    float lin_d = 1.0f / sqrtf((float)D), lin_q = 1.0f / sqrtf((float)Q), lin_f = 1.0f / sqrtf((float)F);
    add(l, "model.embed_tokens.weight", c->vocab_size, D, 0.0f, gemma ? lin_d : 1.0f);
    for (int64_t i = 0; i < c->n_layers; i++) {
        char nm[96];
#define N(s) (snprintf(nm, sizeof nm, "model.layers.%lld.%s", (long long)i, s), nm)
        add(l, N("input_layernorm.weight"), D, -1, norm_mean, norm_std);
        add(l, N("self_attn.q_proj.weight"), Q, D, 0.0f, lin_d);
        add(l, N("self_attn.k_proj.weight"), KV, D, 0.0f, lin_d);
        add(l, N("self_attn.v_proj.weight"), KV, D, 0.0f, lin_d);
        if (c->qkv_bias) {
            add(l, N("self_attn.q_proj.bias"), Q, -1, 0.0f, bias_std);
            add(l, N("self_attn.k_proj.bias"), KV, -1, 0.0f, bias_std);
            add(l, N("self_attn.v_proj.bias"), KV, -1, 0.0f, bias_std);
        }
        add(l, N("self_attn.o_proj.weight"), D, Q, 0.0f, lin_q);
        add(l, N("post_attention_layernorm.weight"), D, -1, norm_mean, norm_std);
        add(l, N("mlp.gate_proj.weight"), F, D, 0.0f, lin_d);
        add(l, N("mlp.up_proj.weight"), F, D, 0.0f, lin_d);
        add(l, N("mlp.down_proj.weight"), D, F, 0.0f, lin_f);
#undef N
    }
    add(l, "model.norm.weight", D, -1, norm_mean, norm_std);
    if (!c->tied_classifier) add(l, "lm_head.weight", c->vocab_size, D, 0.0f, lin_d);
}

/* ---- config ---- */

static sc_status make_config(const sc_synth_opts *o, sc_config *c, sc_err *err) {
    const char *fam = o->family ? o->family : "llama";
    memset(c, 0, sizeof *c);
    if (strcmp(fam, "llama") == 0) c->family = SC_FAMILY_LLAMA;
    else if (strcmp(fam, "mistral") == 0) c->family = SC_FAMILY_MISTRAL;
    else if (strcmp(fam, "qwen2") == 0) c->family = SC_FAMILY_QWEN2;
    else if (strcmp(fam, "gemma") == 0) c->family = SC_FAMILY_GEMMA;
    else return sc_errf(err, SC_EARG, "synth: unknown family '%s' (llama, mistral, qwen2, gemma)", fam);
    if (o->dtype != SC_DT_F32 && o->dtype != SC_DT_BF16 && o->dtype != SC_DT_F16)
        return sc_errf(err, SC_EARG, "synth: dtype %s is not F32, F16 or BF16", sc_dtype_name(o->dtype));
    if (o->n_heads <= 0 || o->dim % o->n_heads != 0)
        return sc_errf(err, SC_EARG, "synth: dim %lld is not a multiple of n_heads %lld", (long long)o->dim,
                       (long long)o->n_heads);
    bool gemma = c->family == SC_FAMILY_GEMMA;
    c->dim = o->dim;
    c->ffn_dim = o->ffn_dim;
    c->n_layers = o->n_layers;
    c->n_heads = o->n_heads;
    c->n_kv_heads = o->n_kv_heads;
    c->head_dim = o->dim / o->n_heads;
    c->vocab_size = o->vocab_size;
    c->max_seq_len = o->max_seq_len;
    c->norm_eps = gemma ? 1e-6f : 1e-5f;
    c->rope_theta = 10000.0f;
    c->rope = SC_ROPE_HALF;
    c->act = gemma ? SC_ACT_GELU_TANH : SC_ACT_SILU;
    c->norm_add_one = c->embed_scale = c->tied_classifier = gemma;
    c->qkv_bias = c->family == SC_FAMILY_QWEN2;
    c->bos_id = o->vocab_size > 2 ? 1 : -1;
    c->eos_id = o->vocab_size > 2 ? 2 : -1;
    return sc_config_validate(c, "synth options", err);
}

static const char *arch_name(sc_family f) {
    switch (f) {
    case SC_FAMILY_MISTRAL: return "MistralForCausalLM";
    case SC_FAMILY_QWEN2: return "Qwen2ForCausalLM";
    case SC_FAMILY_GEMMA: return "GemmaForCausalLM";
    default: return "LlamaForCausalLM";
    }
}

static sc_status write_config(const sc_config *c, sc_dtype dt, const char *path, sc_err *err) {
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
    cJSON_AddNumberToObject(j, "rms_norm_eps", c->family == SC_FAMILY_GEMMA ? 1e-6 : 1e-5);
    cJSON_AddNumberToObject(j, "rope_theta", (double)c->rope_theta);
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

/* ---- weights ---- */

static sc_status write_weights(const sc_synth_opts *o, const sc_config *c, const char *path, sc_err *err) {
    size_t per_layer = c->qkv_bias ? 12 : 9;
    size_t cap = 3 + (size_t)c->n_layers * per_layer;
    synth_list l = {calloc(cap, sizeof(synth_tensor)), 0};
    sc_st_spec *specs = calloc(cap, sizeof *specs);
    float *buf = malloc(SYNTH_CHUNK * sizeof(float));
    sc_st_writer *w = NULL;
    sc_status st = SC_OK;
    if (!l.t || !specs || !buf) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    build_list(c, &l);
    for (size_t i = 0; i < l.n; i++) {
        specs[i].name = l.t[i].name;
        specs[i].dtype = o->dtype;
        specs[i].n_dims = l.t[i].d1 < 0 ? 1 : 2;
        specs[i].shape[0] = l.t[i].d0;
        specs[i].shape[1] = l.t[i].d1;
    }
    char seed_s[32];
    snprintf(seed_s, sizeof seed_s, "%llu", (unsigned long long)o->seed);
    const sc_st_meta meta[] = {{"format", "pt"}, {"generator", "sparsecal synth"}, {"seed", seed_s}};
    st = sc_st_writer_create(path, specs, l.n, meta, sizeof meta / sizeof meta[0], &w, err);
    for (size_t i = 0; i < l.n && st == SC_OK; i++) {
        const synth_tensor *t = &l.t[i];
        size_t n = (size_t)t->d0 * (size_t)(t->d1 < 0 ? 1 : t->d1);
        rng r = rng_for(o->seed, i);
        for (size_t done = 0; done < n && st == SC_OK;) {
            size_t k = n - done < SYNTH_CHUNK ? n - done : SYNTH_CHUNK;
            fill_normal(&r, buf, k, t->mean, t->std);
            st = sc_st_writer_write_f32(w, buf, k, err);
            done += k;
        }
    }
    if (st == SC_OK) st = sc_st_writer_finish(w, err);
done:
    sc_st_writer_free(w);
    free(buf);
    free(specs);
    free(l.t);
    return st;
}

sc_status sc_synth_write(const sc_synth_opts *o, const char *dir, sc_err *err) {
    sc_config c;
    SC_TRY(make_config(o, &c, err));
    if (mkdir(dir, 0777) != 0) {
        int e = errno;
        if (!(e == EEXIST && sc_is_dir(dir)))
            return sc_errf(err, SC_EIO, "%s: cannot create directory: %s", dir, strerror(e));
    }
    char mpath[4096], cpath[4096];
    if (!sc_path_join(mpath, sizeof mpath, dir, "model.safetensors") ||
        !sc_path_join(cpath, sizeof cpath, dir, "config.json"))
        return sc_errf(err, SC_EARG, "%s: path too long", dir);
    SC_TRY(write_weights(o, &c, mpath, err));
    return write_config(&c, o->dtype, cpath, err);
}
