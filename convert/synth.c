#define _POSIX_C_SOURCE 200809L
#include "synth.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "hf_out.h"
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
    else return sc_errf(err, SC_EARG, "unknown family '%s' (llama, mistral, qwen2, gemma)", fam);
    if (o->dtype != SC_DT_F32 && o->dtype != SC_DT_BF16 && o->dtype != SC_DT_F16)
        return sc_errf(err, SC_EARG, "dtype %s is not F32, F16 or BF16", sc_dtype_name(o->dtype));
    if (o->n_heads <= 0 || o->dim % o->n_heads != 0)
        return sc_errf(err, SC_EARG, "dim %lld is not a multiple of n_heads %lld", (long long)o->dim,
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
    return sc_hf_write_config(&c, o->dtype, cpath, err);
}

/* ---- GGUF (llama.cpp's format): the same tensors, same values ---- */

typedef struct gbuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} gbuf;

static void g_put(gbuf *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void g_u32(gbuf *b, uint32_t v) { g_put(b, &v, 4); } /* little-endian host (as the safetensors writer) */
static void g_u64(gbuf *b, uint64_t v) { g_put(b, &v, 8); }
static void g_str(gbuf *b, const char *s, size_t n) {
    g_u64(b, n);
    g_put(b, s, n);
}
static void kv_head(gbuf *b, const char *key, uint32_t type) {
    g_str(b, key, strlen(key));
    g_u32(b, type);
}
static void kv_u32(gbuf *b, const char *key, uint32_t v) {
    kv_head(b, key, SC_GGUF_UINT32);
    g_u32(b, v);
}
static void kv_f32(gbuf *b, const char *key, float v) {
    kv_head(b, key, SC_GGUF_FLOAT32);
    g_put(b, &v, 4);
}
static void kv_str(gbuf *b, const char *key, const char *v) {
    kv_head(b, key, SC_GGUF_STRING);
    g_str(b, v, strlen(v));
}

/* Copies every tokenizer.* entry of a GGUF file (a vocabulary-only file such
 * as llama.cpp's ggml-vocab-llama-spm.gguf); returns how many. */
static sc_status copy_tokenizer_kvs(gbuf *b, const char *path, int64_t vocab, uint64_t *n_kv, sc_err *err) {
    sc_gguf *g = NULL;
    SC_TRY(sc_gguf_open(path, &g, err));
    sc_status st = SC_OK;
    const sc_gguf_value *tv = sc_gguf_get(g, "tokenizer.ggml.tokens");
    if (!tv || tv->type != SC_GGUF_ARRAY || (int64_t)tv->count != vocab)
        st = sc_errf(err, SC_EARG, "%s: tokenizer.ggml.tokens has %lld entries, the model's vocabulary %lld", path,
                     tv ? (long long)tv->count : 0LL, (long long)vocab);
    for (int64_t i = 0; !st && i < sc_gguf_kv_count(g); i++) {
        const char *key = sc_gguf_kv_key(g, i);
        const sc_gguf_value *v = sc_gguf_kv_value(g, i);
        if (strncmp(key, "tokenizer.", 10) != 0) continue;
        if (v->type == SC_GGUF_ARRAY && v->elem_type == SC_GGUF_ARRAY) {
            st = sc_errf(err, SC_EUNSUPPORTED, "%s: %s is an array of arrays", path, key);
            break;
        }
        kv_head(b, key, v->type);
        if (v->type == SC_GGUF_ARRAY) {
            g_u32(b, v->elem_type);
            g_u64(b, v->count);
        } else if (v->type == SC_GGUF_STRING) {
            g_u64(b, v->count);
        }
        g_put(b, v->p, v->size); /* the value's encoded bytes (strings inside arrays keep their lengths) */
        (*n_kv)++;
    }
    sc_gguf_free(g);
    return st;
}

/* llama.cpp's name for synth tensor `hf` (NULL: none). */
static bool gguf_name(const char *hf, char *out, size_t cap) {
    static const char *const map[][2] = {
        {"input_layernorm.weight", "attn_norm.weight"}, {"self_attn.q_proj.weight", "attn_q.weight"},
        {"self_attn.k_proj.weight", "attn_k.weight"},   {"self_attn.v_proj.weight", "attn_v.weight"},
        {"self_attn.o_proj.weight", "attn_output.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
        {"mlp.gate_proj.weight", "ffn_gate.weight"},    {"mlp.up_proj.weight", "ffn_up.weight"},
        {"mlp.down_proj.weight", "ffn_down.weight"}};
    if (!strcmp(hf, "model.embed_tokens.weight")) return snprintf(out, cap, "token_embd.weight") > 0;
    if (!strcmp(hf, "model.norm.weight")) return snprintf(out, cap, "output_norm.weight") > 0;
    if (!strcmp(hf, "lm_head.weight")) return snprintf(out, cap, "output.weight") > 0;
    int layer, off = 0;
    if (sscanf(hf, "model.layers.%d.%n", &layer, &off) != 1 || off == 0) return false;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(hf + off, map[i][0])) return snprintf(out, cap, "blk.%d.%s", layer, map[i][1]) > 0;
    return false;
}

/* HF rotate-half q/k rows -> llama.cpp's interleaved order, per head (what
 * llama.cpp's converter does): GGUF row h*hd + 2i + j = HF row h*hd + j*hd/2 + i. */
static void permute_rows(float *dst, const float *src, int64_t heads, int64_t hd, int64_t cols) {
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int j = 0; j < 2; j++)
                memcpy(dst + (h * hd + 2 * i + j) * cols, src + (h * hd + j * (hd / 2) + i) * cols,
                       (size_t)cols * sizeof(float));
}

sc_status sc_synth_write_gguf(const sc_synth_opts *o, const char *path, const char *vocab_gguf, sc_err *err) {
    sc_config c;
    SC_TRY(make_config(o, &c, err));
    if (c.family != SC_FAMILY_LLAMA) return sc_errf(err, SC_EARG, "GGUF output is for the llama family only");
    /* matrices in the chosen dtype; vectors (norms) stay F32, as llama.cpp's converter keeps them */
    const uint32_t gt = o->dtype == SC_DT_F32 ? SC_GGML_F32 : o->dtype == SC_DT_F16 ? SC_GGML_F16 : SC_GGML_BF16;
    const size_t mat_esz = o->dtype == SC_DT_F32 ? 4 : 2, align = SC_GGUF_DEFAULT_ALIGNMENT;
    synth_list l = {calloc(3 + (size_t)c.n_layers * 9, sizeof(synth_tensor)), 0};
    gbuf kv = {0}, inf = {0};
    float *buf = NULL, *perm = NULL;
    uint16_t *half = NULL;
    sc_atomic_file f;
    bool open = false;
    sc_status st = SC_OK;
    if (!l.t) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    build_list(&c, &l);
    uint64_t n_kv = 0;
    kv_str(&kv, "general.architecture", "llama");
    kv_str(&kv, "general.name", "sparsecal synth");
    kv_u32(&kv, "general.file_type", o->dtype == SC_DT_F32 ? 0 : o->dtype == SC_DT_F16 ? 1 : 32);
    kv_u32(&kv, "llama.context_length", (uint32_t)c.max_seq_len);
    kv_u32(&kv, "llama.embedding_length", (uint32_t)c.dim);
    kv_u32(&kv, "llama.block_count", (uint32_t)c.n_layers);
    kv_u32(&kv, "llama.feed_forward_length", (uint32_t)c.ffn_dim);
    kv_u32(&kv, "llama.rope.dimension_count", (uint32_t)c.head_dim);
    kv_u32(&kv, "llama.attention.head_count", (uint32_t)c.n_heads);
    kv_u32(&kv, "llama.attention.head_count_kv", (uint32_t)c.n_kv_heads);
    kv_f32(&kv, "llama.attention.layer_norm_rms_epsilon", c.norm_eps);
    kv_f32(&kv, "llama.rope.freq_base", c.rope_theta);
    kv_u32(&kv, "llama.vocab_size", (uint32_t)c.vocab_size);
    n_kv = 13;
    if (vocab_gguf) {
        st = copy_tokenizer_kvs(&kv, vocab_gguf, c.vocab_size, &n_kv, err);
    } else {
        kv_str(&kv, "tokenizer.ggml.model", "no_vocab"); /* llama.cpp runs it; sparsecal then needs --tokenizer */
        n_kv++;
    }
    /* tensor infos: ne[0] is the contiguous dimension; offsets aligned */
    uint64_t off = 0, max_elems = 0;
    for (size_t i = 0; i < l.n && !st; i++) {
        const synth_tensor *t = &l.t[i];
        char nm[96];
        if (!gguf_name(t->name, nm, sizeof nm)) {
            st = sc_errf(err, SC_EARG, "no GGUF name for %s", t->name);
            break;
        }
        g_str(&inf, nm, strlen(nm));
        uint64_t n = (uint64_t)t->d0 * (uint64_t)(t->d1 < 0 ? 1 : t->d1);
        g_u32(&inf, t->d1 < 0 ? 1 : 2);
        if (t->d1 >= 0) g_u64(&inf, (uint64_t)t->d1);
        g_u64(&inf, (uint64_t)t->d0);
        g_u32(&inf, t->d1 < 0 ? SC_GGML_F32 : gt);
        g_u64(&inf, off);
        off += (n * (t->d1 < 0 ? 4 : mat_esz) + align - 1) / align * align;
        if (n > max_elems) max_elems = n;
    }
    if (!st && (kv.oom || inf.oom)) st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    /* q and k are permuted whole; everything else streams in chunks */
    int64_t qk = c.n_heads * c.head_dim * c.dim;
    if (!st && (!(buf = malloc((size_t)(qk > (int64_t)SYNTH_CHUNK ? qk : (int64_t)SYNTH_CHUNK) * sizeof(float))) ||
                !(perm = malloc((size_t)qk * sizeof(float))) || !(half = malloc(SYNTH_CHUNK * sizeof(uint16_t)))))
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    if (!st) st = sc_atomic_open(&f, path, err);
    open = !st;
    if (!st) {
        gbuf h = {0};
        g_put(&h, "GGUF", 4);
        g_u32(&h, 3);
        g_u64(&h, (uint64_t)l.n);
        g_u64(&h, n_kv);
        g_put(&h, kv.p, kv.n);
        g_put(&h, inf.p, inf.n);
        static const uint8_t zeros[64] = {0};
        g_put(&h, zeros, (align - h.n % align) % align);
        st = h.oom ? sc_errf(err, SC_ENOMEM, "%s: out of memory", path) : sc_atomic_write(&f, h.p, h.n, err);
        free(h.p);
    }
    for (size_t i = 0; i < l.n && !st; i++) {
        const synth_tensor *t = &l.t[i];
        size_t n = (size_t)t->d0 * (size_t)(t->d1 < 0 ? 1 : t->d1), esz = t->d1 < 0 ? 4 : mat_esz;
        rng r = rng_for(o->seed, i); /* the safetensors writer's stream for this tensor */
        bool q = strstr(t->name, "q_proj.weight") != NULL, k = strstr(t->name, "k_proj.weight") != NULL;
        for (size_t done = 0; done < n && !st;) {
            size_t cnt = q || k ? n : (n - done < SYNTH_CHUNK ? n - done : SYNTH_CHUNK);
            fill_normal(&r, buf, cnt, t->mean, t->std);
            const float *src = buf;
            if (q || k) {
                permute_rows(perm, buf, q ? c.n_heads : c.n_kv_heads, c.head_dim, t->d1);
                src = perm;
            }
            for (size_t s = 0; s < cnt && !st; s += SYNTH_CHUNK) {
                size_t m = cnt - s < SYNTH_CHUNK ? cnt - s : SYNTH_CHUNK;
                if (esz == 4) {
                    st = sc_atomic_write(&f, src + s, m * 4, err);
                    continue;
                }
                for (size_t e = 0; e < m; e++)
                    half[e] = o->dtype == SC_DT_F16 ? sc_f32_to_f16(src[s + e]) : sc_f32_to_bf16(src[s + e]);
                st = sc_atomic_write(&f, half, m * 2, err);
            }
            done += cnt;
        }
        static const uint8_t zeros[64] = {0};
        if (!st) st = sc_atomic_write(&f, zeros, (align - n * esz % align) % align, err);
    }
    if (open) {
        if (st)
            sc_atomic_abort(&f);
        else
            st = sc_atomic_commit(&f, err);
    }
    free(kv.p);
    free(inf.p);
    free(buf);
    free(perm);
    free(half);
    free(l.t);
    return st;
}
