#include "model.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filekind.h"
#include "threads.h"
#include "tokenizer.h"

/* A weight converted on use. */
typedef struct lazy_w {
    int64_t layer;           /* LZ_EMB, LZ_CLS or the layer index */
    size_t off;              /* offset of the field in sc_layer */
    const uint8_t *src;      /* a dtype source ... */
    sc_dtype dt;
    sc_weight_fn fn;         /* ... or a converter (ctx owned by the model) */
    void *ctx;
    int64_t rows, cols;
} lazy_w;

#define LZ_EMB (-1)
#define LZ_CLS (-2)
/* Bytes of one classifier chunk when the classifier is converted on use. */
static size_t g_cls_chunk_bytes = (size_t)64 << 20;
/* Convert everything at load (the path before weights were read on use). */
static bool g_resident = false;

void sc_model_policy(bool resident, size_t classifier_chunk_bytes) {
    g_resident = resident;
    g_cls_chunk_bytes = classifier_chunk_bytes ? classifier_chunk_bytes : (size_t)64 << 20;
}

typedef struct kept {
    void *p;
    void (*fn)(void *);
} kept;

struct sc_model_res {
    sc_file_map *maps;
    size_t n_maps, cap_maps;
    void **bufs;
    size_t n_bufs, cap_bufs;
    kept *keeps;
    size_t n_keeps, cap_keeps;
    lazy_w *lz;
    size_t n_lz, cap_lz;
    /* the layer whose converted weights are in layer_buf */
    int64_t cur_layer;
    sc_layer view;
    float *layer_buf;
    size_t layer_buf_n;
    /* the one matrix in mat_buf (sc_model_weight): its lazy entry, or -1 */
    int64_t mat_lz;
    float *mat_buf;
    size_t mat_buf_n;
    /* the classifier rows in cls_buf */
    float *cls_buf;
    int64_t cls_r0, cls_n;
    size_t cls_chunk_bytes; /* the policy when the model was loaded */
    bool resident;
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
    m->res->cur_layer = -1;
    m->res->mat_lz = -1;
    m->res->cls_r0 = -1;
    m->res->cls_chunk_bytes = g_cls_chunk_bytes;
    m->res->resident = g_resident;
    snprintf(m->path, sizeof m->path, "%s", path);
    snprintf(m->format, sizeof m->format, "%s", format);
    m->cfg.bos_id = -1;
    m->cfg.eos_id = -1;
    return m;
}

void sc_model_free(sc_model *m) {
    if (!m) return;
    if (m->res) {
        sc_model_res *r = m->res;
        sc_model_release(m);
        for (size_t i = 0; i < r->n_lz; i++) free(r->lz[i].ctx);
        for (size_t i = r->n_keeps; i-- > 0;) r->keeps[i].fn(r->keeps[i].p);
        for (size_t i = 0; i < r->n_maps; i++) sc_unmap_file(&r->maps[i]);
        for (size_t i = 0; i < r->n_bufs; i++) sc_free_aligned(r->bufs[i]);
        free(r->lz);
        free(r->keeps);
        free(r->maps);
        free(r->bufs);
        free(r);
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

sc_status sc_model_keep(sc_model *m, void *p, void (*fn)(void *), sc_err *err) {
    sc_model_res *r = m->res;
    if (!grow((void **)&r->keeps, &r->cap_keeps, r->n_keeps + 1, sizeof *r->keeps)) {
        fn(p);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", m->path);
    }
    r->keeps[r->n_keeps++] = (kept){p, fn};
    return SC_OK;
}

/* Where a field lives: LZ_EMB, LZ_CLS or a layer (with the field's offset);
 * -3 when it is none of these. */
static int64_t field_place(const sc_model *m, const float **field, size_t *off) {
    *off = 0;
    if (field == &m->tok_emb) return LZ_EMB;
    if (field == &m->classifier) return LZ_CLS;
    uintptr_t a = (uintptr_t)field, b = (uintptr_t)m->layers;
    if (m->layers && a >= b && a < b + (uintptr_t)m->cfg.n_layers * sizeof(sc_layer)) {
        *off = (size_t)((a - b) % sizeof(sc_layer));
        return (int64_t)((a - b) / sizeof(sc_layer));
    }
    return -3;
}

static sc_status add_lazy(sc_model *m, const float **field, lazy_w w, sc_err *err) {
    sc_model_res *r = m->res;
    w.layer = field_place(m, field, &w.off);
    if (w.layer == -3) {
        free(w.ctx);
        return sc_errf(err, SC_EARG, "%s: internal: a weight converted on use must be a model field", m->path);
    }
    if (!grow((void **)&r->lz, &r->cap_lz, r->n_lz + 1, sizeof *r->lz)) {
        free(w.ctx);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", m->path);
    }
    r->lz[r->n_lz++] = w;
    *field = NULL;
    m->lazy_bytes += (uint64_t)w.rows * (uint64_t)w.cols * 4;
    r->cur_layer = -1;
    r->mat_lz = -1;
    r->cls_r0 = -1;
    return SC_OK;
}

/* Rows and columns of a weight for row access: embeddings and the classifier
 * are [vocab, dim]; layer matrices are converted whole (one row of n). */
static void field_shape(const sc_model *m, const float **field, size_t n, int64_t *rows, int64_t *cols) {
    bool vocab_rows = field == &m->tok_emb || field == &m->classifier;
    *cols = vocab_rows ? m->cfg.dim : (int64_t)n;
    *rows = (int64_t)n / *cols;
}

sc_status sc_model_set_weight(sc_model *m, const float **field, const uint8_t *src, sc_dtype t, size_t n,
                              sc_err *err) {
    int64_t rows, cols;
    field_shape(m, field, n, &rows, &cols);
    size_t blk = sc_dtype_block(t), off;
    bool aligned_f32 = t == SC_DT_F32 && ((uintptr_t)src % _Alignof(float)) == 0;
    int64_t place = field_place(m, field, &off);
    bool vector = place >= 0 && (off == offsetof(sc_layer, attn_norm) || off == offsetof(sc_layer, ffn_norm) ||
                                 off == offsetof(sc_layer, bq) || off == offsetof(sc_layer, bk) ||
                                 off == offsetof(sc_layer, bv));
    if (m->res->resident || aligned_f32 || vector || place == -3 || (blk > 1 && cols % (int64_t)blk != 0)) {
        *field = sc_model_tensor_f32(m, src, t, n, err);
        return *field ? SC_OK : SC_ENOMEM;
    }
    return add_lazy(m, field, (lazy_w){0, 0, src, t, NULL, NULL, rows, cols}, err);
}

sc_status sc_model_set_weight_fn(sc_model *m, const float **field, sc_weight_fn fn, void *ctx, int64_t rows,
                                 int64_t cols, sc_err *err) {
    if (m->res->resident) { /* convert now */
        float *dst = sc_model_alloc_f32(m, (size_t)(rows * cols), err);
        bool ok = dst && fn(ctx, 0, rows, dst);
        free(ctx);
        if (!dst) return SC_ENOMEM;
        if (!ok) return sc_errf(err, SC_EFORMAT, "%s: a weight cannot be decoded", m->path);
        *field = dst;
        return SC_OK;
    }
    return add_lazy(m, field, (lazy_w){0, 0, NULL, SC_DT_F32, fn, ctx, rows, cols}, err);
}

static bool lz_convert(const lazy_w *w, int64_t r0, int64_t n, float *dst) {
    if (w->fn) return w->fn(w->ctx, r0, n, dst);
    size_t row_bytes = sc_dtype_bytes(w->dt, (size_t)w->cols);
    sc_convert_to_f32(w->dt, w->src + (size_t)r0 * row_bytes, (size_t)(n * w->cols), dst);
    return true;
}

/* A whole matrix into dst: sources of a dtype are converted in row blocks on sc_parallel's threads (each row by
 * one thread, so the same values whatever the count); a converter function (an artifact's layouts, some of
 * which unpack the whole matrix per call) runs once. */
typedef struct conv_job {
    const lazy_w *w;
    float *dst;
} conv_job;

static void conv_part(void *arg, int tid, int nth) {
    const conv_job *j = arg;
    int64_t r0, r1;
    sc_split(j->w->rows, tid, nth, &r0, &r1);
    if (r1 > r0) lz_convert(j->w, r0, r1 - r0, j->dst + r0 * j->w->cols);
}

static bool lz_convert_all(const lazy_w *w, float *dst) {
    if (w->fn) return w->fn(w->ctx, 0, w->rows, dst);
    conv_job j = {w, dst};
    sc_parallel(w->rows * w->cols, conv_part, &j);
    return true;
}

static const lazy_w *find_lazy(const sc_model *m, int64_t place) {
    const sc_model_res *r = m->res;
    for (size_t i = 0; i < r->n_lz; i++)
        if (r->lz[i].layer == place) return &r->lz[i];
    if (place == LZ_CLS && m->cfg.tied_classifier && !m->classifier) return find_lazy(m, LZ_EMB);
    return NULL;
}

bool sc_model_is_lazy(const sc_model *m) { return m->res->n_lz > 0; }

void sc_model_release(const sc_model *m) {
    sc_model_res *r = m->res;
    sc_free_aligned(r->layer_buf);
    sc_free_aligned(r->mat_buf);
    sc_free_aligned(r->cls_buf);
    r->layer_buf = NULL;
    r->mat_buf = NULL;
    r->cls_buf = NULL;
    r->layer_buf_n = 0;
    r->mat_buf_n = 0;
    r->cur_layer = -1;
    r->mat_lz = -1;
    r->cls_r0 = -1;
}

/* Floats a converted tensor takes in the layer buffer (64-byte aligned). */
static size_t padded(const lazy_w *w) { return ((size_t)(w->rows * w->cols) + 15) & ~(size_t)15; }

sc_status sc_model_layer(const sc_model *m, int64_t l, const sc_layer **out, sc_err *err) {
    *out = NULL;
    if (l < 0 || l >= m->cfg.n_layers || !m->layers)
        return sc_errf(err, SC_EARG, "%s: no layer %lld", m->path, (long long)l);
    sc_model_res *r = m->res;
    if (r->cur_layer == l) {
        *out = &r->view;
        return SC_OK;
    }
    size_t need = 0;
    for (size_t i = 0; i < r->n_lz; i++)
        if (r->lz[i].layer == l) need += padded(&r->lz[i]);
    if (need == 0) {
        *out = &m->layers[l];
        return SC_OK;
    }
    /* the whole layer is about to be held: the one-matrix buffer goes, so the two are not held together */
    sc_free_aligned(r->mat_buf);
    r->mat_buf = NULL;
    r->mat_buf_n = 0;
    r->mat_lz = -1;
    if (need > r->layer_buf_n) {
        sc_free_aligned(r->layer_buf);
        r->layer_buf_n = 0;
        r->layer_buf = sc_alloc_aligned(need * sizeof(float));
        if (!r->layer_buf) return sc_errf(err, SC_ENOMEM, "%s: cannot allocate %zu MiB for layer %lld's weights",
                                          m->path, need * sizeof(float) >> 20, (long long)l);
        r->layer_buf_n = need;
    }
    r->cur_layer = -1;
    r->view = m->layers[l];
    float *p = r->layer_buf;
    for (size_t i = 0; i < r->n_lz; i++) {
        const lazy_w *w = &r->lz[i];
        if (w->layer != l) continue;
        if (!lz_convert_all(w, p))
            return sc_errf(err, SC_EFORMAT, "%s: layer %lld: a weight cannot be decoded", m->path, (long long)l);
        const float *v = p;
        memcpy((char *)&r->view + w->off, &v, sizeof v);
        p += padded(w);
    }
    r->cur_layer = l;
    *out = &r->view;
    return SC_OK;
}

sc_status sc_model_weight(const sc_model *m, const float *const *field, const float **out, sc_err *err) {
    *out = NULL;
    sc_model_res *r = m->res;
    size_t off;
    int64_t l = field_place(m, (const float **)field, &off);
    if (l < 0) return sc_errf(err, SC_EARG, "%s: internal: sc_model_weight takes a layer's field", m->path);
    if (*field) {
        *out = *field;
        return SC_OK;
    }
    if (r->cur_layer == l) { /* converted already, with the whole layer */
        memcpy(out, (const char *)&r->view + off, sizeof *out);
        return SC_OK;
    }
    size_t k = 0, big = 0;
    while (k < r->n_lz && !(r->lz[k].layer == l && r->lz[k].off == off)) k++;
    if (k == r->n_lz) { /* an absent optional weight (a folded rotation) */
        *out = NULL;
        return SC_OK;
    }
    if (r->mat_lz == (int64_t)k) {
        *out = r->mat_buf;
        return SC_OK;
    }
    if (!r->mat_buf) { /* sized once for the largest matrix of any layer */
        for (size_t i = 0; i < r->n_lz; i++)
            if (r->lz[i].layer >= 0 && padded(&r->lz[i]) > big) big = padded(&r->lz[i]);
        r->mat_buf = sc_alloc_aligned(big * sizeof(float));
        if (!r->mat_buf) return sc_errf(err, SC_ENOMEM, "%s: cannot allocate %zu MiB for a weight matrix", m->path,
                                        big * sizeof(float) >> 20);
        r->mat_buf_n = big;
    }
    r->mat_lz = -1;
    if (!lz_convert_all(&r->lz[k], r->mat_buf))
        return sc_errf(err, SC_EFORMAT, "%s: layer %lld: a weight cannot be decoded", m->path, (long long)l);
    r->mat_lz = (int64_t)k;
    *out = r->mat_buf;
    return SC_OK;
}

sc_status sc_model_embed(const sc_model *m, const int32_t *ids, int64_t n, float *dst, sc_err *err) {
    int64_t D = m->cfg.dim;
    const lazy_w *w = m->tok_emb ? NULL : find_lazy(m, LZ_EMB);
    if (!m->tok_emb && !w) return sc_errf(err, SC_EFORMAT, "%s: no token embedding", m->path);
    for (int64_t t = 0; t < n; t++) {
        if (ids[t] < 0 || ids[t] >= m->cfg.vocab_size)
            return sc_errf(err, SC_ERANGE, "token id %d at position %lld is outside the vocabulary (%lld)", ids[t],
                           (long long)t, (long long)m->cfg.vocab_size);
        if (!w)
            memcpy(dst + t * D, m->tok_emb + (int64_t)ids[t] * D, (size_t)D * sizeof(float));
        else if (!lz_convert(w, ids[t], 1, dst + t * D))
            return sc_errf(err, SC_EFORMAT, "%s: the token embedding cannot be decoded", m->path);
    }
    return SC_OK;
}

int64_t sc_model_classifier_chunk(const sc_model *m) {
    int64_t V = m->cfg.vocab_size;
    if (m->classifier) return V;
    int64_t rows = (int64_t)(m->res->cls_chunk_bytes / ((size_t)m->cfg.dim * sizeof(float)));
    return rows < 1 ? 1 : rows < V ? rows : V;
}

sc_status sc_model_classifier_rows(const sc_model *m, int64_t r0, int64_t n, const float **out, sc_err *err) {
    *out = NULL;
    int64_t V = m->cfg.vocab_size, D = m->cfg.dim;
    if (r0 < 0 || n <= 0 || r0 + n > V || n > sc_model_classifier_chunk(m))
        return sc_errf(err, SC_EARG, "%s: classifier rows %lld + %lld out of range", m->path, (long long)r0,
                       (long long)n);
    if (m->classifier) {
        *out = m->classifier + r0 * D;
        return SC_OK;
    }
    sc_model_res *r = m->res;
    const lazy_w *w = find_lazy(m, LZ_CLS);
    if (!w) return sc_errf(err, SC_EFORMAT, "%s: no classifier", m->path);
    if (r->cls_r0 == r0 && r->cls_n == n) {
        *out = r->cls_buf;
        return SC_OK;
    }
    if (!r->cls_buf) {
        r->cls_buf = sc_alloc_aligned((size_t)(sc_model_classifier_chunk(m) * D) * sizeof(float));
        if (!r->cls_buf) return sc_errf(err, SC_ENOMEM, "%s: out of memory for the classifier", m->path);
    }
    r->cls_r0 = -1;
    if (!lz_convert(w, r0, n, r->cls_buf)) return sc_errf(err, SC_EFORMAT, "%s: the classifier cannot be decoded", m->path);
    r->cls_r0 = r0;
    r->cls_n = n;
    *out = r->cls_buf;
    return SC_OK;
}

sc_status sc_model_make_resident(sc_model *m, const float **field, size_t n, float **out, sc_err *err) {
    *out = NULL;
    size_t off;
    int64_t place = field_place(m, field, &off);
    sc_model_res *r = m->res;
    float *buf = sc_model_alloc_f32(m, n, err);
    if (!buf) return SC_ENOMEM;
    for (size_t i = 0; i < r->n_lz; i++) {
        lazy_w *w = &r->lz[i];
        if (w->layer != place || w->off != off) continue;
        if ((size_t)(w->rows * w->cols) != n) return sc_errf(err, SC_EARG, "%s: internal: weight size mismatch", m->path);
        if (!lz_convert_all(w, buf)) return sc_errf(err, SC_EFORMAT, "%s: a weight cannot be decoded", m->path);
        m->lazy_bytes -= (uint64_t)n * 4;
        free(w->ctx);
        r->lz[i] = r->lz[--r->n_lz];
        r->cur_layer = -1;
        r->mat_lz = -1;
        r->cls_r0 = -1;
        *field = *out = buf;
        return SC_OK;
    }
    if (!*field) return sc_errf(err, SC_EARG, "%s: internal: no such weight", m->path);
    memcpy(buf, *field, n * sizeof(float));
    *field = *out = buf;
    r->cur_layer = -1;
    r->mat_lz = -1;
    return SC_OK;
}

/* A field is present when it is resident or converted on use. */
bool sc_model_present(const sc_model *m, const float *const *field) {
    if (*field) return true;
    size_t off;
    int64_t place = field_place(m, (const float **)field, &off);
    for (size_t i = 0; i < m->res->n_lz; i++)
        if (m->res->lz[i].layer == place && m->res->lz[i].off == off) return true;
    return place == LZ_CLS && m->cfg.tied_classifier && find_lazy(m, LZ_EMB);
}

#define present sc_model_present

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
    if (!present(m, &m->tok_emb)) return sc_errf(err, SC_EFORMAT, "%s: missing token embedding", m->path);
    if (!m->final_norm) return sc_errf(err, SC_EFORMAT, "%s: missing final norm weight", m->path);
    if (!present(m, &m->classifier)) return sc_errf(err, SC_EFORMAT, "%s: missing classifier (lm_head) weight", m->path);
    if (!m->layers) return sc_errf(err, SC_EFORMAT, "%s: no layers", m->path);
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        const sc_layer *L = &m->layers[l];
        const char *miss = !L->attn_norm ? "attention norm"
                         : !present(m, &L->wq) ? "q projection"
                         : !present(m, &L->wk) ? "k projection"
                         : !present(m, &L->wv) ? "v projection"
                         : !present(m, &L->wo) ? "o projection"
                         : !L->ffn_norm  ? "ffn norm"
                         : !present(m, &L->wg) ? "gate projection"
                         : !present(m, &L->wu) ? "up projection"
                         : !present(m, &L->wd) ? "down projection"
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

sc_status sc_model_load(const char *path, sc_model **out, sc_err *err) {
    *out = NULL;
    sc_filekind k = sc_file_kind(path);
    switch (k) {
    case SC_FILE_DIR:
    case SC_FILE_SAFETENSORS:
    case SC_FILE_JSON: return sc_load_hf(path, out, err);
    case SC_FILE_GGUF: return sc_load_gguf(path, out, err);
    case SC_FILE_SPK: return sc_load_artifact(path, out, err);
    case SC_FILE_LLAMA2C: return sc_load_llama2c(path, out, err);
    case SC_FILE_UNREADABLE: return sc_errf(err, SC_EIO, "%s: cannot open model file", path);
    case SC_FILE_UNKNOWN: /* the reader its name suggests says what is wrong */
        if (sc_has_suffix(path, ".safetensors") || sc_has_suffix(path, ".json")) return sc_load_hf(path, out, err);
        return sc_load_llama2c(path, out, err);
    default:
        sc_file_kind_ok(path, k, 0, "a model", err);
        return SC_EARG;
    }
}
