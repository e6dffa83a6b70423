/* pack.c - packing a model into an artifact (see pack.h). */
#include "pack.h"
#include "json_out.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larosa.h"
#include "larosa_rot.h"
#include "pack_routing.h"
#include "permute.h"
#include "route_method.h"
#include "srt.h"
#include "srt_container.h"
#include "srt_schema.h"
#include "tok_serial.h"

/* Which runtime layout each linear layer gets under an artifact layout. The
 * 4-bit plans hold GGML q4_0 values everywhere (same groups, same bytes per
 * weight), stored in the row tiles the int8-dot kernels read (kmi4r) -
 * llama.cpp repacks q4_0 the same way at load time; here it happens once, at
 * pack time - rows whose length is not a multiple of kmi4r's 512-wide tiles
 * included when the padding adds at most an eighth to their bytes (e.g. 2304
 * or 8960 inputs: the padded tiles read at ~1.1x the streaming floor, where
 * GGML q4_0 rows take 1.7x on AVX-512 and 2x on AVX2); rows that would grow
 * more (896, or a toy model's 64) stay GGML q4_0 rows. The token
 * embedding is a matrix of the classifier's layout (rows gathered on lookup);
 * a tied embedding (one matrix for both, the model's most sensitive) is q8_0
 * in the 4-bit plans. LaRoSA rotations stay q8_0. */
typedef struct layout_plan {
    const char *name;
    srt_layout attn, gate, up, down, classifier, emb, rot;
} layout_plan;

static const layout_plan plans[] = {
    {"f32", SRT_LAYOUT_F32, SRT_LAYOUT_F32, SRT_LAYOUT_F32, SRT_LAYOUT_F32, SRT_LAYOUT_F32, SRT_LAYOUT_F32,
     SRT_LAYOUT_F32},
    {"q8_0", SRT_LAYOUT_Q8_0, SRT_LAYOUT_Q8_0, SRT_LAYOUT_Q8_0, SRT_LAYOUT_Q8_0, SRT_LAYOUT_Q8_0, SRT_LAYOUT_Q8_0,
     SRT_LAYOUT_Q8_0},
    /* dense rows everywhere (the MLP's up rows are still read per live neuron) */
    {"q4_0", SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R,
     SRT_LAYOUT_Q8_0},
    /* row-sparse MLP: up rows read per live neuron, down neuron-major */
    {"kmi4", SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R,
     SRT_LAYOUT_Q8_0},
    /* the 8-bit plan with the row-sparse MLP's down projection neuron-major (kmi8: the q8_0 values) */
    {"kmi8", SRT_LAYOUT_Q8_0, SRT_LAYOUT_Q8_0, SRT_LAYOUT_Q8_0, SRT_LAYOUT_KMI8, SRT_LAYOUT_Q8_0, SRT_LAYOUT_Q8_0,
     SRT_LAYOUT_Q8_0},
    /* input sparsity on attention and the gate (kmi4 reads only the live input channels' vectors), row-sparse up,
     * neuron-major down: what teal-cats reads */
    {"kmi4-in", SRT_LAYOUT_KMI4, SRT_LAYOUT_KMI4, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4, SRT_LAYOUT_KMI4R, SRT_LAYOUT_KMI4R,
     SRT_LAYOUT_Q8_0},
    /* column-sparse (input channels): every layer's linear maps; the embedding and the classifier are the 4-bit
     * plans' rows */
    {"zigzag", SRT_LAYOUT_ZIGZAG, SRT_LAYOUT_ZIGZAG, SRT_LAYOUT_ZIGZAG, SRT_LAYOUT_ZIGZAG, SRT_LAYOUT_KMI4R,
     SRT_LAYOUT_KMI4R, SRT_LAYOUT_Q8_0},
};

/* kmi4r where its padding to whole 512-wide tiles adds at most an eighth (else GGML q4_0 rows: the same
 * values) */
static srt_layout fit(srt_layout l, int64_t cols) {
    const int64_t pad = (cols + SRT_KMI4R_TILE - 1) / SRT_KMI4R_TILE * SRT_KMI4R_TILE;
    return l == SRT_LAYOUT_KMI4R && 8 * pad > 9 * cols ? SRT_LAYOUT_Q4_0 : l;
}

/* kmi4-in's input-sparse matrices (attention, the gate) read a live input channel's column: rows / 2
 * bytes of nibbles. Columns shorter than SC_PACK_COLUMN_MIN_ROWS / 2 bytes cost more one by one than the
 * whole matrix costs streamed as kmi4r rows (TinyLlama-1.1B's 256-row key and value projections under
 * teal-cats at density 0.5: 22.8 us a projection read live against 11.9 us whole at two threads on a
 * Zen 4; 512 rows were 5-7% slower live, 1024 even), so they stay rows: the same q4_0 values, and TEAL
 * still masks their inputs. min_rows 0 takes the default. */
static srt_layout in_sparse(srt_layout l, int64_t rows, int64_t cols, int64_t min_rows, bool *kept) {
    if (l != SRT_LAYOUT_KMI4) return fit(l, cols);
    if (rows >= (min_rows > 0 ? min_rows : SC_PACK_COLUMN_MIN_ROWS)) return l;
    *kept = true;
    return fit(SRT_LAYOUT_KMI4R, cols);
}

static const layout_plan *find_plan(const char *name) {
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++)
        if (strcmp(plans[i].name, name) == 0) return &plans[i];
    return NULL;
}

typedef struct packer {
    srt_writer *w;
    cJSON *tensors;
    const sc_pack_opts *o;
    sc_pack_result *res;
    const char *path;
    int64_t group; /* zigzag row-block */
    float *pad;    /* scratch for padded copies */
    size_t pad_cap;
    void *buf;     /* packed bytes */
    size_t buf_cap;
    uint32_t *perm_all; /* [L, F] neuron permutation (NULL: none) */
    const void *larosa; /* calibration state whose rotations are folded (NULL: none) */
} packer;

static sc_status wr_fail(packer *p, sc_err *err) {
    return sc_errf(err, SC_EIO, "%s", srt_writer_errmsg(p->w));
}

static sc_status add_f32(packer *p, const char *name, const float *x, int64_t n, sc_err *err) {
    uint64_t dims[1] = {(uint64_t)n};
    if (srt_writer_add(p->w, name, SRT_CT_F32, 1, dims, x, (size_t)n * sizeof(float), p->o->compress))
        return wr_fail(p, err);
    return SC_OK;
}

static int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

static bool grow(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    void *q = srt_alloc(need);
    if (!q) return false;
    srt_free(*buf);
    *buf = q;
    *cap = need;
    return true;
}

/* The manifest entry of a packed matrix. */
static void matrix_entry(packer *p, const char *name, const srt_layout_traits *tr, int64_t rows, int64_t cols,
                         int64_t rs, int64_t cs, int64_t g) {
    cJSON *t = cJSON_AddObjectToObject(p->tensors, name);
    cJSON_AddStringToObject(t, SRT_TEN_LAYOUT, tr->name);
    cJSON_AddNumberToObject(t, SRT_TEN_ROWS, (double)rows);
    cJSON_AddNumberToObject(t, SRT_TEN_COLS, (double)cols);
    cJSON_AddNumberToObject(t, SRT_TEN_ROWS_STORED, (double)rs);
    cJSON_AddNumberToObject(t, SRT_TEN_COLS_STORED, (double)cs);
    cJSON_AddNumberToObject(t, SRT_TEN_GROUP, (double)g);
    p->res->f32_bytes_in += (uint64_t)(rows * cols) * 4;
}

/* Quantises W [rows, cols] into layout l (padding rows and columns with
 * zeros up to the layout's block geometry) and adds it as a section. */
static sc_status add_matrix(packer *p, const char *name, srt_layout l, const float *W, int64_t rows, int64_t cols,
                            sc_err *err) {
    const srt_layout_traits *tr = srt_layout_get(l);
    /* zigzag row-blocks by the layout's rule (srt_layout_default_group) */
    int64_t g = l == SRT_LAYOUT_STRIPE ? p->group : l == SRT_LAYOUT_ZIGZAG ? srt_layout_default_group(l, rows) : 0;
    int64_t rq = l == SRT_LAYOUT_F32 ? 1 : 32, cq = l == SRT_LAYOUT_F32 ? 1 : 32;
    if (g) rq = g;
    int64_t rs = round_up(rows, rq), cs = round_up(cols, cq);
    const float *src = W;
    if (rs != rows || cs != cols) {
        if (!grow((void **)&p->pad, &p->pad_cap, (size_t)(rs * cs) * sizeof(float)))
            return sc_errf(err, SC_ENOMEM, "out of memory for %s", name);
        memset(p->pad, 0, (size_t)(rs * cs) * sizeof(float));
        for (int64_t r = 0; r < rows; r++) memcpy(p->pad + r * cs, W + r * cols, (size_t)cols * sizeof(float));
        src = p->pad;
    }
    size_t bytes;
    if (tr->size(&bytes, rs, cs, g) != SRT_OK)
        return sc_errf(err, SC_EUNSUPPORTED, "layout %s cannot hold %s [%lld x %lld]", tr->name, name,
                       (long long)rows, (long long)cols);
    if (!grow(&p->buf, &p->buf_cap, bytes)) return sc_errf(err, SC_ENOMEM, "out of memory for %s", name);
    srt_matrix mat;
    srt_status ks = tr->pack(&mat, p->buf, bytes, src, rs, cs, g);
    if (ks != SRT_OK)
        return sc_errf(err, SC_EFORMAT, "%s: %s (non-finite weights?)", name, srt_status_str(ks));
    uint64_t dims[1] = {(uint64_t)bytes};
    if (srt_writer_add(p->w, name, SRT_CT_BYTES, 1, dims, p->buf, bytes, p->o->compress)) return wr_fail(p, err);
    matrix_entry(p, name, tr, rows, cols, rs, cs, g);
    return SC_OK;
}

static cJSON *config_json(const sc_config *c) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, SRT_CFG_FAMILY, sc_family_name(c->family));
    cJSON_AddNumberToObject(j, SRT_CFG_DIM, (double)c->dim);
    cJSON_AddNumberToObject(j, SRT_CFG_FFN_DIM, (double)c->ffn_dim);
    cJSON_AddNumberToObject(j, SRT_CFG_N_LAYERS, (double)c->n_layers);
    cJSON_AddNumberToObject(j, SRT_CFG_N_HEADS, (double)c->n_heads);
    cJSON_AddNumberToObject(j, SRT_CFG_N_KV_HEADS, (double)c->n_kv_heads);
    cJSON_AddNumberToObject(j, SRT_CFG_HEAD_DIM, (double)c->head_dim);
    cJSON_AddNumberToObject(j, SRT_CFG_VOCAB_SIZE, (double)c->vocab_size);
    cJSON_AddNumberToObject(j, SRT_CFG_MAX_SEQ_LEN, (double)c->max_seq_len);
    cJSON_AddNumberToObject(j, SRT_CFG_NORM_EPS, (double)c->norm_eps);
    cJSON_AddNumberToObject(j, SRT_CFG_ROPE_THETA, (double)c->rope_theta);
    cJSON_AddStringToObject(j, SRT_CFG_ROPE, c->rope == SC_ROPE_INTERLEAVED ? SRT_ROPE_INTERLEAVED : SRT_ROPE_HALF);
    cJSON_AddNumberToObject(j, SRT_CFG_ROPE_SCALING, (double)c->rope_scaling);
    cJSON_AddNumberToObject(j, SRT_CFG_ROPE_FACTOR, (double)c->rope_factor);
    cJSON_AddNumberToObject(j, SRT_CFG_ROPE_LOW_FREQ_FACTOR, (double)c->rope_low_freq_factor);
    cJSON_AddNumberToObject(j, SRT_CFG_ROPE_HIGH_FREQ_FACTOR, (double)c->rope_high_freq_factor);
    cJSON_AddNumberToObject(j, SRT_CFG_ROPE_ORIG_CTX, (double)c->rope_orig_ctx);
    cJSON_AddStringToObject(j, SRT_CFG_ACTIVATION, c->act == SC_ACT_SILU ? SRT_ACT_SILU : SRT_ACT_GELU_TANH);
    cJSON_AddBoolToObject(j, SRT_CFG_EMBED_SCALE, c->embed_scale);
    cJSON_AddBoolToObject(j, SRT_CFG_TIED_CLASSIFIER, c->tied_classifier);
    cJSON_AddBoolToObject(j, SRT_CFG_QKV_BIAS, c->qkv_bias);
    cJSON_AddNumberToObject(j, SRT_CFG_BOS_ID, c->bos_id);
    cJSON_AddNumberToObject(j, SRT_CFG_EOS_ID, c->eos_id);
    return j;
}

/* The tokenizer's whole state as sections and the manifest's "tokenizer"
 * object (formats/tok_serial.c); every kind is embedded. */
static sc_status add_tokenizer(packer *p, const sc_tokenizer *tok, cJSON *man, sc_err *err) {
    cJSON *tj = cJSON_AddObjectToObject(man, SRT_MAN_TOKENIZER);
    sc_status st = tok ? sc_tok_serial_write(tok, p->w, p->o->compress, tj, err) : SC_EUNSUPPORTED;
    if (st != SC_EUNSUPPORTED) return st;
    cJSON_AddStringToObject(tj, "kind", "none"); /* nothing was written: say why */
    cJSON_AddStringToObject(tj, "note", tok ? err->msg : "the model had no tokenizer");
    return SC_OK;
}

/* ---- LaRoSA folding ---- */

/* Scratch for folding one layer: Q as float, R, and the rotated copies of
 * the matrices that read a rotated input. */
typedef struct fold_buf {
    float *Qf, *R, *wq, *wk, *wv, *wg, *wu, *ones;
} fold_buf;

static void fold_free(fold_buf *b) {
    free(b->Qf);
    free(b->R);
    free(b->wq);
    free(b->wk);
    free(b->wv);
    free(b->wg);
    free(b->wu);
    free(b->ones);
}

/* dst[rows, D] = W[rows, D] Q: column k of W Q is the weight of rotated coordinate k. */
static void rotate_weights(float *dst, const float *W, const float *Qf, int64_t rows, int64_t D) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)rows, (blasint)D, (blasint)D, 1.0f, W, (blasint)D,
                Qf, (blasint)D, 0.0f, dst, (blasint)D);
}

/* Q (column k = eigenvector k, Q[i*D+k]) of block input `which` of layer l,
 * as float in b->Qf, and R = Q^T diag(g) in b->R: z = R n(x) = Q^T (g . n(x))
 * is the rotated input the calibration measured, so the RMSNorm weight is
 * absorbed and the stored norm becomes one. False when the layer has none. */
static sc_status fold_prepare(const sc_calib *c, const void *state, int64_t l, int which, const float *g, int64_t D,
                              fold_buf *b, bool *folded, sc_err *err) {
    *folded = false;
    if (!state || !sc_larosa_has(state, l, which, NULL)) return SC_OK;
    /* one layer's rotation at a time, read from the calibration file (larosa_rot.h); the double
     * copy is released before the layer's matrices are packed */
    sc_larosa_rot rot = {0};
    sc_status st = sc_larosa_rotation(c, l, which, &rot, err);
    for (int64_t i = 0; i < D && !st; i++)
        for (int64_t k = 0; k < D; k++) {
            double q = rot.Q[i * D + k];
            b->Qf[i * D + k] = (float)q;
            b->R[k * D + i] = (float)(q * (double)g[i]);
        }
    sc_larosa_rot_free(&rot);
    *folded = !st;
    return st;
}

/* Rows of a vocabulary matrix read on use: the embedding (ids) or the classifier. */
static sc_status vocab_rows(const sc_model *m, bool classifier, int64_t r0, int64_t n, float *dst, int32_t *ids,
                            sc_err *err) {
    if (!classifier) {
        for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(r0 + i);
        return sc_model_embed(m, ids, n, dst, err);
    }
    const float *W;
    SC_TRY(sc_model_classifier_rows(m, r0, n, &W, err));
    memcpy(dst, W, (size_t)(n * m->cfg.dim) * sizeof(float));
    return SC_OK;
}

/* The token embedding (f32, or packed in emb_l) and an untied classifier (cls_l).
 * When they are read on use (model.h) they are streamed into their sections in
 * row chunks, so a 128K x 4096 vocabulary never exists whole as f32: an f32
 * embedding as raw f32 pieces, a packed one and the classifier quantised chunk
 * by chunk (their layouts - f32, q8_0, q4_0, kmi4r - store rows one after
 * another, so the pieces concatenate to exactly what packing the whole matrix
 * gives). Streamed sections are not compressed. */
static sc_status add_vocab_matrices(packer *p, const sc_model *m, srt_layout emb_l, srt_layout cls_l, sc_err *err) {
    const sc_config *c = &m->cfg;
    int64_t V = c->vocab_size, D = c->dim;
    bool emb_lazy = !m->tok_emb, cls_lazy = !c->tied_classifier && !m->classifier;
    sc_status st = SC_OK;
    if (!emb_lazy)
        st = emb_l == SRT_LAYOUT_F32 ? add_f32(p, SRT_SEC_TOK_EMB, m->tok_emb, V * D, err)
                                     : add_matrix(p, SRT_SEC_TOK_EMB, emb_l, m->tok_emb, V, D, err);
    if (!st && !c->tied_classifier && !cls_lazy)
        st = add_matrix(p, SRT_SEC_CLASSIFIER, cls_l, m->classifier, V, D, err);
    if (st || (!emb_lazy && !cls_lazy)) return st;
    int64_t chunk = sc_model_classifier_chunk(m) / 32 * 32;
    if (chunk < 32) chunk = 32;
    const int64_t cs_max = round_up(D, 32);
    float *rows = malloc((size_t)(chunk * cs_max) * sizeof(float)), *tmp = NULL;
    int32_t *ids = malloc((size_t)chunk * sizeof(int32_t));
    if (!rows || !ids) st = sc_errf(err, SC_ENOMEM, "out of memory for the vocabulary chunks");
    for (int which = 0; which < 2 && !st; which++) {
        const bool cls = which == 1;
        if (!(cls ? cls_lazy : emb_lazy)) continue;
        const char *name = cls ? SRT_SEC_CLASSIFIER : SRT_SEC_TOK_EMB;
        const srt_layout l = cls ? cls_l : emb_l;
        const bool raw = !cls && l == SRT_LAYOUT_F32; /* the legacy f32 embedding section */
        const srt_layout_traits *tr = srt_layout_get(l);
        int64_t q = l == SRT_LAYOUT_F32 ? 1 : 32, cs = round_up(D, q), rs = round_up(V, q);
        size_t chunk_bytes = 0, total = 0;
        if (!raw && (tr->size(&chunk_bytes, chunk, cs, 0) != SRT_OK || tr->size(&total, rs, cs, 0) != SRT_OK)) {
            st = sc_errf(err, SC_EUNSUPPORTED, "layout %s cannot hold %s", tr->name, name);
            break;
        }
        if (!raw && !grow(&p->buf, &p->buf_cap, chunk_bytes)) {
            st = sc_errf(err, SC_ENOMEM, "out of memory for %s", name);
            break;
        }
        uint64_t dims[1] = {raw ? (uint64_t)(V * D) : (uint64_t)total};
        if (srt_writer_begin(p->w, name, raw ? SRT_CT_F32 : SRT_CT_BYTES, 1, dims)) {
            st = wr_fail(p, err);
            break;
        }
        for (int64_t r0 = 0; !st && r0 < rs; r0 += chunk) {
            int64_t n = rs - r0 < chunk ? rs - r0 : chunk, real = V - r0 < n ? (V - r0 > 0 ? V - r0 : 0) : n;
            if (raw) { /* f32 rows as they are */
                if (!(st = vocab_rows(m, false, r0, n, rows, ids, err)) &&
                    srt_writer_append(p->w, rows, (size_t)(n * D) * sizeof(float)))
                    st = wr_fail(p, err);
                continue;
            }
            if (real > 0 && cs == D) {
                st = vocab_rows(m, cls, r0, real, rows, ids, err);
            } else if (real > 0) { /* columns padded with zeros */
                if (!tmp && !(tmp = malloc((size_t)(chunk * D) * sizeof(float)))) {
                    st = sc_errf(err, SC_ENOMEM, "out of memory for %s", name);
                    break;
                }
                if (!(st = vocab_rows(m, cls, r0, real, tmp, ids, err)))
                    for (int64_t r = 0; r < real; r++) {
                        memcpy(rows + r * cs, tmp + r * D, (size_t)D * sizeof(float));
                        memset(rows + r * cs + D, 0, (size_t)(cs - D) * sizeof(float));
                    }
            }
            if (st) break;
            memset(rows + real * cs, 0, (size_t)((n - real) * cs) * sizeof(float)); /* rows padded with zeros */
            size_t bytes;
            srt_matrix mat;
            srt_status ks = tr->size(&bytes, n, cs, 0);
            if (ks == SRT_OK) ks = tr->pack(&mat, p->buf, bytes, rows, n, cs, 0);
            if (ks != SRT_OK)
                st = sc_errf(err, SC_EFORMAT, "%s: %s (non-finite weights?)", name, srt_status_str(ks));
            else if (srt_writer_append(p->w, p->buf, bytes))
                st = wr_fail(p, err);
        }
        if (!st && srt_writer_end(p->w)) st = wr_fail(p, err);
        if (!st && !raw) matrix_entry(p, name, tr, V, D, rs, cs, 0);
    }
    free(rows);
    free(tmp);
    free(ids);
    return st;
}

sc_status sc_pack(const sc_model *m, const sc_tokenizer *tok, const sc_pack_opts *o, const char *path,
                  sc_pack_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    const layout_plan *plan = find_plan(o->layout);
    if (!plan) return sc_errf(err, SC_EARG, "unknown layout '%s' (f32, q8_0, kmi8, q4_0, kmi4, kmi4-in, zigzag)", o->layout);
    const sc_config *c = &m->cfg;
    double t0 = sc_now();
    char msg[512] = "";
    packer p = {0};
    p.o = o;
    p.res = res;
    p.path = path;
    p.group = 64;
    if (srt_writer_create(path, SRT_CT_SPAK, &p.w, msg, sizeof msg)) return sc_errf(err, SC_EIO, "%s", msg);
    cJSON *man = cJSON_CreateObject();
    cJSON_AddStringToObject(man, SRT_MAN_FORMAT, SRT_ART_FORMAT);
    cJSON_AddNumberToObject(man, SRT_MAN_FORMAT_VERSION, SRT_ART_FORMAT_VERSION);
    cJSON_AddStringToObject(man, SRT_MAN_TOOL, "sparsecal " SC_VERSION);
    cJSON_AddStringToObject(man, SRT_MAN_LAYOUT, plan->name);
    cJSON_AddItemToObject(man, SRT_MAN_CONFIG, config_json(c));
    char id[17];
    sc_status st = sc_model_identity(m, id, err);
    cJSON_AddStringToObject(man, SRT_MAN_SOURCE_MODEL_ID, id);
    p.tensors = cJSON_AddObjectToObject(man, SRT_MAN_TENSORS);
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const bool four_bit = plan->emb == SRT_LAYOUT_KMI4R;
    const srt_layout emb_l = c->tied_classifier && four_bit ? SRT_LAYOUT_Q8_0 : fit(plan->emb, D);
    if (!st) st = add_vocab_matrices(&p, m, emb_l, fit(plan->classifier, D), err);
    if (!st) st = add_f32(&p, SRT_SEC_FINAL_NORM, m->final_norm, D, err);
    uint32_t *perm = NULL;
    float *pg = NULL, *pu = NULL, *pd = NULL;
    if (!st && o->permute) {
        perm = malloc((size_t)F * sizeof *perm);
        pg = malloc((size_t)(F * D) * sizeof *pg);
        pu = malloc((size_t)(F * D) * sizeof *pu);
        pd = malloc((size_t)(F * D) * sizeof *pd);
        if (!perm || !pg || !pu || !pd) st = sc_errf(err, SC_ENOMEM, "out of memory for the permutation");
        p.perm_all = calloc((size_t)(c->n_layers * F), sizeof *p.perm_all);
        if (!p.perm_all && !st) st = sc_errf(err, SC_ENOMEM, "out of memory for the permutation");
    }
    fold_buf fb = {0};
    const sc_route_method *rm = o->method ? sc_route_method_find(o->method) : NULL;
    if (!st && rm && (rm->flags & SC_RM_FOLD)) { /* larosa: the rotations go into the weights */
        if (!o->calib || !sc_calib_state(o->calib, "larosa"))
            st = sc_errf(err, SC_EARG, "--method larosa needs a calibration file with larosa statistics (--calib)");
        else
            st = sc_larosa_state(o->calib, D, &p.larosa, err);
        int64_t big = qd > F ? qd : F;
        if (!st && (!(fb.Qf = malloc((size_t)(D * D) * sizeof(float))) || !(fb.R = malloc((size_t)(D * D) * sizeof(float))) ||
                    !(fb.wq = malloc((size_t)(big * D) * sizeof(float))) || !(fb.wk = malloc((size_t)(kvd * D) * sizeof(float))) ||
                    !(fb.wv = malloc((size_t)(kvd * D) * sizeof(float))) || !(fb.wg = malloc((size_t)(F * D) * sizeof(float))) ||
                    !(fb.wu = malloc((size_t)(F * D) * sizeof(float))) || !(fb.ones = malloc((size_t)D * sizeof(float)))))
            st = sc_errf(err, SC_ENOMEM, "out of memory for the LaRoSA folding");
        for (int64_t i = 0; !st && i < D; i++) fb.ones[i] = 1.0f;
    }
    /* the input-sparse plan's matrices whose columns are too short to read one by one stay rows */
    bool kq = false, kkv = false, ko = false, kg = false;
    const int64_t mr = o->column_min_rows;
    const srt_layout lq = in_sparse(plan->attn, qd, D, mr, &kq), lkv = in_sparse(plan->attn, kvd, D, mr, &kkv),
                     lo = in_sparse(plan->attn, D, qd, mr, &ko), lg = in_sparse(plan->gate, F, D, mr, &kg);
    snprintf(res->rows_kept, sizeof res->rows_kept, "%s%s%s%s", kq ? "wq " : "", kkv ? "wk wv " : "", ko ? "wo " : "",
             kg ? "wg " : "");
    if (res->rows_kept[0]) res->rows_kept[strlen(res->rows_kept) - 1] = '\0';
    int64_t n_folded = 0;
    const char *perm_how = NULL;
    sc_progress pr;
    sc_progress_start(&pr, o->progress, "pack", "layers", c->n_layers);
    pr.amount_unit = "MB of f32";
    pr.rate_unit = "MB/s";
    for (int64_t l = 0; l < c->n_layers && !st; l++) {
        const sc_layer *L;
        if ((st = sc_model_layer(m, l, &L, err))) break;
        const float *wg = L->wg, *wu = L->wu, *wd = L->wd;
        const float *an = L->attn_norm, *fn = L->ffn_norm, *wq = L->wq, *wk = L->wk, *wv = L->wv;
        char nm[64];
        if (o->permute) { /* rows of W_g and W_u, columns of W_d */
            if ((st = sc_neuron_order(o->calib, l, F, perm, &perm_how, err))) break;
            for (int64_t i = 0; i < F; i++) {
                memcpy(pg + i * D, L->wg + (int64_t)perm[i] * D, (size_t)D * sizeof(float));
                memcpy(pu + i * D, L->wu + (int64_t)perm[i] * D, (size_t)D * sizeof(float));
            }
            for (int64_t r = 0; r < D; r++)
                for (int64_t i = 0; i < F; i++) pd[r * F + i] = L->wd[r * F + perm[i]];
            memcpy(p.perm_all + l * F, perm, (size_t)F * sizeof *perm);
            uint64_t dims[1] = {(uint64_t)F};
            snprintf(nm, sizeof nm, SRT_LAYER_SECTION, (long long)l, SRT_SEC_PERM);
            if (srt_writer_add(p.w, nm, SRT_CT_U32, 1, dims, perm, (size_t)F * sizeof *perm, o->compress)) {
                st = wr_fail(&p, err);
                break;
            }
            wg = pg;
            wu = pu;
            wd = pd;
        }
#define NAME(s) (snprintf(nm, sizeof nm, SRT_LAYER_SECTION, (long long)l, s), nm)
        bool folded;
        if ((st = fold_prepare(o->calib, p.larosa, l, SC_LAROSA_ATTN, L->attn_norm, D, &fb, &folded, err))) break;
        if (folded) { /* q, k, v read z = R n(x) */
            rotate_weights(fb.wq, wq, fb.Qf, qd, D);
            rotate_weights(fb.wk, wk, fb.Qf, kvd, D);
            rotate_weights(fb.wv, wv, fb.Qf, kvd, D);
            wq = fb.wq;
            wk = fb.wk;
            wv = fb.wv;
            an = fb.ones;
            n_folded++;
            if ((st = add_matrix(&p, NAME(SRT_SEC_ATTN_ROT), plan->rot, fb.R, D, D, err))) break;
        }
        if ((st = fold_prepare(o->calib, p.larosa, l, SC_LAROSA_MLP, L->ffn_norm, D, &fb, &folded, err))) break;
        if (folded) { /* gate and up */
            rotate_weights(fb.wg, wg, fb.Qf, F, D);
            rotate_weights(fb.wu, wu, fb.Qf, F, D);
            wg = fb.wg;
            wu = fb.wu;
            fn = fb.ones;
            n_folded++;
            if ((st = add_matrix(&p, NAME(SRT_SEC_MLP_ROT), plan->rot, fb.R, D, D, err))) break;
        }
        if ((st = add_f32(&p, NAME(SRT_SEC_ATTN_NORM), an, D, err)) ||
            (st = add_f32(&p, NAME(SRT_SEC_FFN_NORM), fn, D, err)) ||
            (st = add_matrix(&p, NAME(SRT_SEC_WQ), lq, wq, qd, D, err)) ||
            (st = add_matrix(&p, NAME(SRT_SEC_WK), lkv, wk, kvd, D, err)) ||
            (st = add_matrix(&p, NAME(SRT_SEC_WV), lkv, wv, kvd, D, err)) ||
            (st = add_matrix(&p, NAME(SRT_SEC_WO), lo, L->wo, D, qd, err)) ||
            (st = add_matrix(&p, NAME(SRT_SEC_WG), lg, wg, F, D, err)) ||
            (st = add_matrix(&p, NAME(SRT_SEC_WU), fit(plan->up, D), wu, F, D, err)) ||
            (st = add_matrix(&p, NAME(SRT_SEC_WD), fit(plan->down, F), wd, D, F, err)))
            break;
        if (c->qkv_bias && ((st = add_f32(&p, NAME(SRT_SEC_BQ), L->bq, qd, err)) ||
                            (st = add_f32(&p, NAME(SRT_SEC_BK), L->bk, kvd, err)) ||
                            (st = add_f32(&p, NAME(SRT_SEC_BV), L->bv, kvd, err))))
            break;
#undef NAME
        sc_progress_update(&pr, l + 1, (double)res->f32_bytes_in / 1e6, NULL);
    }
    sc_progress_end(&pr);
    fold_free(&fb);
    if (!st && p.larosa && n_folded == 0)
        st = sc_errf(err, SC_EARG, "--method larosa: the calibration holds no rotation for any layer of this model");
    cJSON_AddNumberToObject(man, SRT_MAN_LAROSA_FOLDED, (double)n_folded);
    free(perm);
    free(pg);
    free(pu);
    free(pd);
    cJSON_AddBoolToObject(man, SRT_MAN_PERMUTED, o->permute);
    if (perm_how) /* "coact" or "activity" (last layer's) */
        cJSON_AddStringToObject(man, SRT_MAN_PERMUTATION, perm_how);
    if (!st) st = sc_pack_routing(m, o, p.w, p.perm_all, p.larosa, cJSON_AddObjectToObject(man, SRT_MAN_ROUTING), err);
    if (!st) st = add_tokenizer(&p, tok, man, err);
    char *text = st ? NULL : sc_json_print(man, false);
    if (!st && (!text || srt_writer_set_manifest(p.w, text, strlen(text)) || srt_writer_finish(p.w)))
        st = text ? wr_fail(&p, err) : sc_errf(err, SC_ENOMEM, "out of memory");
    if (!st) res->bytes_out = srt_writer_bytes_written(p.w);
    free(text);
    cJSON_Delete(man);
    srt_writer_free(p.w); /* before a successful finish this removes the temp file */
    srt_free(p.pad);
    srt_free(p.buf);
    free(p.perm_all);
    res->seconds = sc_now() - t0;
    return st;
}
