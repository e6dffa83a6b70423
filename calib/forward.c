/* forward.c - the reference forward pass (see forward.h). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward_internal.h"
#include "ops.h"

const char *sc_tap_name(sc_tap t) {
    static const char *names[SC_TAP_COUNT] = {"attn_in", "attn_ctx", "mlp_in", "gate", "gate_act",
                                              "up",      "h",        "mlp_out", "resid", "logits"};
    return (unsigned)t < SC_TAP_COUNT ? names[t] : "?";
}

const char *sc_linear_name(sc_linear w) {
    static const char *names[SC_LIN_COUNT] = {"q", "k", "v", "o", "gate", "up", "down"};
    return (unsigned)w < SC_LIN_COUNT ? names[w] : "?";
}

void sc_forward_set_linear_hook(sc_forward *f, sc_linear_fn fn, void *user) {
    f->lin_fn = fn;
    f->lin_user = fn ? user : NULL;
}

void sc_forward_set_linear_grad_hook(sc_forward *f, sc_linear_grad_fn fn, void *user) {
    f->lgrad_fn = fn;
    f->lgrad_user = fn ? user : NULL;
}

void sc_forward_set_weights(sc_forward *f, const float *const *w) { f->w_over = w; }

void sc_forward_free(sc_forward *f) {
    if (!f) return;
    float *bufs[] = {f->lchunk, f->x,  f->xn, f->ctx, f->tmp, f->s, f->logits, f->kc,    f->vc,    f->cos_t, f->sin_t, f->q,
                     f->u,  f->a,  f->v,   f->h,   f->x_in, f->x_mid, f->r1, f->r2, f->x_fin, f->r_fin,
                     f->g_x, f->g_xn, f->g_q, f->g_k, f->g_v, f->g_ctx, f->g_p, f->g_dp, f->g_f1, f->g_f2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) sc_free_aligned(bufs[i]);
    free(f);
}

int64_t sc_forward_max_ctx(const sc_forward *f) { return f->max_ctx; }

static float *alloc3(int64_t a, int64_t b, int64_t c, bool *ok) {
    size_t n;
    if (!*ok || !sc_mul_ok((size_t)a, (size_t)b, &n) || !sc_mul_ok(n, (size_t)c, &n) ||
        !sc_mul_ok(n, sizeof(float), &n)) {
        *ok = false;
        return NULL;
    }
    float *p = sc_alloc_aligned(n);
    if (!p) *ok = false;
    return p;
}

static sc_status create(const sc_model *m, int64_t max_ctx, int64_t max_batch, bool train, unsigned flags,
                        sc_forward **out, sc_err *err) {
    bool keep_all = flags & SC_TRAIN_KEEP_ALL;
    *out = NULL;
    const sc_config *c = &m->cfg;
    if (max_ctx <= 0 || max_ctx > SC_MAX_SEQ || max_batch <= 0 || max_batch > max_ctx)
        return sc_errf(err, SC_EARG, "forward: bad context %lld / batch %lld", (long long)max_ctx, (long long)max_batch);
    sc_forward *f = calloc(1, sizeof *f);
    if (!f) return sc_errf(err, SC_ENOMEM, "forward: out of memory");
    f->m = m;
    f->max_ctx = max_ctx;
    f->max_batch = max_batch;
    f->train = train;
    int64_t B = max_batch, D = c->dim, F = c->ffn_dim, L = c->n_layers;
    int64_t qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    int64_t LS = train && keep_all ? L : 1; /* layers that keep their own copy */
    f->checkpoint = train && !keep_all;
    bool ok = true;
    f->x = alloc3(1, B, D, &ok);
    f->xn = alloc3(1, B, D, &ok);
    f->ctx = alloc3(1, B, qd, &ok);
    f->tmp = alloc3(1, B, D > qd ? D : qd, &ok);
    f->s = alloc3(1, B, max_ctx, &ok);
    f->chunked = (flags & SC_TRAIN_CHUNKED_LOSS) != 0;
    if (f->chunked) { /* one [B, chunk] block of at most 64 MiB, and no more rows than the classifier's chunk */
        int64_t rows = ((int64_t)16 << 20) / B, cap = sc_model_classifier_chunk(m);
        rows = rows < 256 ? 256 : rows;
        f->lchunk_rows = rows < cap ? rows : cap;
        f->lchunk = alloc3(1, B, f->lchunk_rows, &ok);
    } else {
        f->logits = alloc3(1, B, c->vocab_size, &ok);
    }
    f->kv_one = train ? !keep_all : (flags & SC_FWD_WHOLE_WINDOWS) != 0;
    f->kc = alloc3(f->kv_one ? 1 : L, max_ctx, kvd, &ok);
    f->vc = alloc3(f->kv_one ? 1 : L, max_ctx, kvd, &ok);
    f->cos_t = alloc3(1, max_ctx, c->head_dim / 2, &ok);
    f->sin_t = alloc3(1, max_ctx, c->head_dim / 2, &ok);
    f->q = alloc3(LS, B, qd, &ok);
    f->u = alloc3(LS, B, F, &ok);
    f->a = alloc3(LS, B, F, &ok);
    f->v = alloc3(LS, B, F, &ok);
    f->h = alloc3(LS, B, F, &ok);
    f->s_q = LS > 1 ? (size_t)(B * qd) : 0;
    f->s_f = LS > 1 ? (size_t)(B * F) : 0;
    f->s_d = LS > 1 ? (size_t)(B * D) : 0;
    f->s_r = LS > 1 ? (size_t)B : 0;
    if (train) {
        f->x_in = alloc3(L, B, D, &ok);
        f->x_mid = alloc3(LS, B, D, &ok);
        f->r1 = alloc3(LS, B, 1, &ok);
        f->r2 = alloc3(LS, B, 1, &ok);
        f->x_fin = alloc3(1, B, D, &ok);
        f->r_fin = alloc3(1, B, 1, &ok);
        f->g_x = alloc3(1, B, D, &ok);
        f->g_xn = alloc3(1, B, D, &ok);
        f->g_q = alloc3(1, B, qd, &ok);
        f->g_k = alloc3(1, B, kvd, &ok);
        f->g_v = alloc3(1, B, kvd, &ok);
        f->g_ctx = alloc3(1, B, qd, &ok);
        f->g_p = alloc3(1, B, B, &ok);
        f->g_dp = alloc3(1, B, B, &ok);
        f->g_f1 = alloc3(1, B, F, &ok);
        f->g_f2 = alloc3(1, B, F, &ok);
    }
    if (!ok) {
        sc_forward_free(f);
        return sc_errf(err, SC_ENOMEM, "forward: cannot allocate the %s workspace for %lld tokens",
                       train ? "training" : "inference", (long long)max_ctx);
    }
    sc_rope_tables(f->cos_t, f->sin_t, max_ctx, c);
    sc_blas_configure(c);
    *out = f;
    return SC_OK;
}

sc_status sc_forward_create(const sc_model *m, int64_t max_ctx, int64_t max_batch, sc_forward **out, sc_err *err) {
    return create(m, max_ctx, max_batch, false, 0, out, err);
}

sc_status sc_forward_create_ex(const sc_model *m, int64_t max_ctx, int64_t max_batch, unsigned flags,
                               sc_forward **out, sc_err *err) {
    return create(m, max_ctx, max_batch, false, flags & (SC_TRAIN_CHUNKED_LOSS | SC_FWD_WHOLE_WINDOWS), out, err);
}

sc_status sc_forward_create_train(const sc_model *m, int64_t max_ctx, sc_forward **out, sc_err *err) {
    return sc_forward_create_train_ex(m, max_ctx, 0, out, err);
}

float *sc_forward_logits(sc_forward *f) { return f->logits; }

const float *sc_forward_final_norm(const sc_forward *f) { return f->chunked ? f->xn : NULL; }

sc_status sc_forward_create_train_ex(const sc_model *m, int64_t max_ctx, unsigned flags, sc_forward **out,
                                     sc_err *err) {
    for (int64_t l = 0; l < m->cfg.n_layers; l++)
        if (sc_model_present(m, &m->layers[l].attn_rot) || sc_model_present(m, &m->layers[l].mlp_rot))
            return sc_errf(err, SC_EUNSUPPORTED, "%s: gradients through folded LaRoSA rotations are not supported; "
                                                 "calibrate the model it was packed from", m->path);
    return create(m, max_ctx, max_ctx, true, flags, out, err);
}

/* Calls the hook of tap t (if any); f->replaying marks a recomputation. */
static sc_status tap(const sc_forward *f, const sc_hooks *hk, sc_tap t, int64_t layer, int64_t pos0, int64_t n,
                      int64_t width, const int32_t *ids, float *data, sc_err *err) {
    if (!hk || !hk->fn || !(hk->mask & SC_TAP_BIT(t))) return SC_OK;
    sc_tap_event ev = {t, layer, pos0, n, width, ids, data, NULL, false, f->replaying};
    return hk->fn(hk->user, &ev, err);
}

sc_status sc_classifier_forward(const sc_model *m, float *logits, const float *xn, int64_t n, sc_err *err) {
    int64_t D = m->cfg.dim, V = m->cfg.vocab_size, chunk = sc_model_classifier_chunk(m);
    if (chunk >= V) { /* resident: one product, as before chunking existed */
        const float *W;
        SC_TRY(sc_model_classifier_rows(m, 0, V, &W, err));
        sc_linear_forward(logits, xn, W, NULL, n, D, V);
        return SC_OK;
    }
    for (int64_t r0 = 0; r0 < V; r0 += chunk) {
        int64_t nr = V - r0 < chunk ? V - r0 : chunk;
        const float *W;
        SC_TRY(sc_model_classifier_rows(m, r0, nr, &W, err));
        /* logits[:, r0:r0+nr] = xn W_chunk^T (ldc = V) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)nr, (blasint)D, 1.0f, xn, (blasint)D,
                    W, (blasint)D, 0.0f, logits + r0, (blasint)V);
    }
    return SC_OK;
}

double sc_logsumexp(const float *x, int64_t n) {
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += exp((double)x[i] - (double)mx);
    return (double)mx + log(s);
}

/* Causal grouped-query attention for one layer: ctx[T, qd] from q[T, qd]
 * and the cached keys/values of positions [0, pos0 + T). */
static void attention(sc_forward *f, int64_t l, const float *q, int64_t T, int64_t pos0, bool softmax) {
    const sc_config *c = &f->m->cfg;
    int64_t hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd, n_ctx = pos0 + T;
    int64_t group = c->n_heads / c->n_kv_heads;
    const float *K = f->kc + sc_kv_base(f, l, kvd), *V = f->vc + sc_kv_base(f, l, kvd);
    float scale = 1.0f / sqrtf((float)hd);
    for (int64_t h = 0; h < c->n_heads; h++) {
        int64_t kh = h / group;
        /* s[T, n_ctx] = q_h[T, hd] K_h[n_ctx, hd]^T * scale */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)n_ctx, (blasint)hd, scale,
                    q + h * hd, (blasint)qd, K + kh * hd, (blasint)kvd, 0.0f, f->s, (blasint)n_ctx);
        if (softmax) sc_causal_softmax(f->s, T, n_ctx, pos0);
        /* ctx_h[T, hd] = s[T, n_ctx] V_h[n_ctx, hd] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)hd, (blasint)n_ctx, 1.0f, f->s,
                    (blasint)n_ctx, V + kh * hd, (blasint)kvd, 0.0f, f->ctx + h * hd, (blasint)qd);
    }
}

/* xn [n, D] <- xn R^T (z = R x per token) when the layer has a folded
 * rotation; tmp is scratch. Inference only (training refuses such models). */
static void rotate(float *xn, float *tmp, const float *R, int64_t n, int64_t D) {
    if (!R) return;
    sc_linear_forward(tmp, xn, R, NULL, n, D, D);
    memcpy(xn, tmp, (size_t)(n * D) * sizeof(float));
}

/* Calls the linear hook (if any) on the output y of a linear layer. */
static sc_status lin(sc_forward *f, sc_linear w, int64_t l, int64_t pos0, int64_t n, int64_t in, int64_t out,
                     const float *x, const float *W, const float *b, float *y, sc_err *err) {
    if (!f->lin_fn) return SC_OK;
    sc_linear_event ev = {w, l, pos0, n, in, out, x, W, b, y};
    return f->lin_fn(f->lin_user, &ev, err);
}

/* One layer on the residual stream f->x [n, D] at positions pos0 .. pos0+n-1. The norms and biases are
 * resident (model.h); each matrix is read with sc_model_weight just before its product, so a model converted
 * on use holds one matrix as f32 at a time, not the whole layer. */
static sc_status layer_forward(sc_forward *f, int64_t l, const int32_t *ids, int64_t n, int64_t pos0,
                               const sc_hooks *hk, sc_err *err) {
    const sc_config *c = &f->m->cfg;
    int64_t D = c->dim, F = c->ffn_dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    size_t rowD = (size_t)(n * D) * sizeof(float);
    if (l < 0 || l >= c->n_layers) return sc_errf(err, SC_EARG, "%s: no layer %lld", f->m->path, (long long)l);
    const sc_layer *L = &f->m->layers[l];
    const float *W;
    float *K = f->kc + sc_kv_base(f, l, kvd) + pos0 * kvd, *V = f->vc + sc_kv_base(f, l, kvd) + pos0 * kvd;
    float *q = f->q + (size_t)l * f->s_q, *u = f->u + (size_t)l * f->s_f, *a = f->a + (size_t)l * f->s_f,
          *v = f->v + (size_t)l * f->s_f, *h = f->h + (size_t)l * f->s_f;
    float *x_mid = f->train ? f->x_mid + (size_t)l * f->s_d : NULL, *r1 = f->train ? f->r1 + (size_t)l * f->s_r : NULL,
          *r2 = f->train ? f->r2 + (size_t)l * f->s_r : NULL;
    /* attention block */
    if (f->train && !f->replaying) memcpy(f->x_in + l * f->max_batch * D, f->x, rowD);
    sc_rmsnorm_forward(f->xn, r1, f->x, L->attn_norm, n, D, c->norm_eps);
    SC_TRY(sc_model_weight(f->m, &L->attn_rot, &W, err));
    rotate(f->xn, f->tmp, W, n, D);
    SC_TRY(tap(f, hk, SC_TAP_ATTN_IN, l, pos0, n, D, ids, f->xn, err));
    SC_TRY(sc_fwd_weight(f, l, SC_LIN_Q, &L->wq, &W, err));
    sc_linear_forward(q, f->xn, W, L->bq, n, D, qd);
    SC_TRY(lin(f, SC_LIN_Q, l, pos0, n, D, qd, f->xn, W, L->bq, q, err));
    SC_TRY(sc_fwd_weight(f, l, SC_LIN_K, &L->wk, &W, err));
    sc_linear_forward(K, f->xn, W, L->bk, n, D, kvd);
    SC_TRY(lin(f, SC_LIN_K, l, pos0, n, D, kvd, f->xn, W, L->bk, K, err));
    SC_TRY(sc_fwd_weight(f, l, SC_LIN_V, &L->wv, &W, err));
    sc_linear_forward(V, f->xn, W, L->bv, n, D, kvd);
    SC_TRY(lin(f, SC_LIN_V, l, pos0, n, D, kvd, f->xn, W, L->bv, V, err));
    sc_rope_forward(q, n, c->n_heads, hd, pos0, f->cos_t, f->sin_t, c->rope, false);
    sc_rope_forward(K, n, c->n_kv_heads, hd, pos0, f->cos_t, f->sin_t, c->rope, false);
    attention(f, l, q, n, pos0, true);
    SC_TRY(tap(f, hk, SC_TAP_ATTN_CTX, l, pos0, n, qd, ids, f->ctx, err));
    SC_TRY(sc_fwd_weight(f, l, SC_LIN_O, &L->wo, &W, err));
    sc_linear_forward(f->tmp, f->ctx, W, NULL, n, qd, D);
    SC_TRY(lin(f, SC_LIN_O, l, pos0, n, qd, D, f->ctx, W, NULL, f->tmp, err));
    sc_add(f->x, f->tmp, n * D);
    /* MLP block */
    if (f->train) memcpy(x_mid, f->x, rowD);
    sc_rmsnorm_forward(f->xn, r2, f->x, L->ffn_norm, n, D, c->norm_eps);
    SC_TRY(sc_model_weight(f->m, &L->mlp_rot, &W, err));
    rotate(f->xn, f->tmp, W, n, D);
    SC_TRY(tap(f, hk, SC_TAP_MLP_IN, l, pos0, n, D, ids, f->xn, err));
    SC_TRY(sc_fwd_weight(f, l, SC_LIN_GATE, &L->wg, &W, err));
    sc_linear_forward(u, f->xn, W, NULL, n, D, F);
    SC_TRY(lin(f, SC_LIN_GATE, l, pos0, n, D, F, f->xn, W, NULL, u, err));
    SC_TRY(tap(f, hk, SC_TAP_GATE, l, pos0, n, F, ids, u, err));
    sc_act_forward(a, u, n * F, c->act);
    SC_TRY(tap(f, hk, SC_TAP_GATE_ACT, l, pos0, n, F, ids, a, err));
    SC_TRY(sc_fwd_weight(f, l, SC_LIN_UP, &L->wu, &W, err));
    sc_linear_forward(v, f->xn, W, NULL, n, D, F);
    SC_TRY(lin(f, SC_LIN_UP, l, pos0, n, D, F, f->xn, W, NULL, v, err));
    SC_TRY(tap(f, hk, SC_TAP_UP, l, pos0, n, F, ids, v, err));
    sc_mul(h, a, v, n * F);
    SC_TRY(tap(f, hk, SC_TAP_H, l, pos0, n, F, ids, h, err));
    SC_TRY(sc_fwd_weight(f, l, SC_LIN_DOWN, &L->wd, &W, err));
    sc_linear_forward(f->tmp, h, W, NULL, n, F, D);
    SC_TRY(lin(f, SC_LIN_DOWN, l, pos0, n, F, D, h, W, NULL, f->tmp, err));
    SC_TRY(tap(f, hk, SC_TAP_MLP_OUT, l, pos0, n, D, ids, f->tmp, err));
    sc_add(f->x, f->tmp, n * D);
    SC_TRY(tap(f, hk, SC_TAP_RESID, l, pos0, n, D, ids, f->x, err));
    return SC_OK;
}

sc_status sc_forward_run(sc_forward *f, const int32_t *ids, int64_t n, int64_t pos0, const sc_hooks *hk,
                         const float **logits, sc_err *err) {
    const sc_model *m = f->m;
    const sc_config *c = &m->cfg;
    if (n <= 0 || n > f->max_batch || pos0 < 0 || pos0 + n > f->max_ctx)
        return sc_errf(err, SC_EARG, "forward: %lld tokens at position %lld exceed the workspace (batch %lld, context %lld)",
                       (long long)n, (long long)pos0, (long long)f->max_batch, (long long)f->max_ctx);
    if ((f->train || f->kv_one) && pos0 != 0)
        return sc_errf(err, SC_EARG, "forward: this workspace runs whole windows from position 0");
    int64_t D = c->dim;
    for (int64_t t = 0; t < n; t++) {
        if (ids[t] < 0 || ids[t] >= c->vocab_size)
            return sc_errf(err, SC_ERANGE, "forward: token id %d at position %lld is outside the vocabulary (%lld)",
                           ids[t], (long long)(pos0 + t), (long long)c->vocab_size);
    }
    SC_TRY(sc_model_embed(m, ids, n, f->x, err));
    if (c->embed_scale) {
        float sc = sqrtf((float)D);
        for (int64_t i = 0; i < n * D; i++) f->x[i] *= sc;
    }
    f->n_last = n;
    f->ids_last = ids;
    f->has_hk = hk != NULL;
    if (hk) f->hk_last = *hk;
    size_t rowD = (size_t)(n * D) * sizeof(float);
    for (int64_t l = 0; l < c->n_layers; l++) SC_TRY(layer_forward(f, l, ids, n, pos0, hk, err));
    if (f->train) memcpy(f->x_fin, f->x, rowD);
    sc_rmsnorm_forward(f->xn, f->train ? f->r_fin : NULL, f->x, m->final_norm, n, D, c->norm_eps);
    if (logits) *logits = f->logits;
    if (f->chunked) return SC_OK; /* f->xn holds the final norm's output for sc_forward_nll / sc_backward_ce */
    SC_TRY(sc_classifier_forward(m, f->logits, f->xn, n, err));
    SC_TRY(tap(f, hk, SC_TAP_LOGITS, c->n_layers, pos0, n, c->vocab_size, ids, f->logits, err));
    return SC_OK;
}

sc_status sc_forward_replay_layer(sc_forward *f, int64_t l, sc_err *err) {
    int64_t n = f->n_last, D = f->m->cfg.dim;
    memcpy(f->x, f->x_in + l * f->max_batch * D, (size_t)(n * D) * sizeof(float));
    f->replaying = true;
    sc_status st = layer_forward(f, l, f->ids_last, n, 0, f->has_hk ? &f->hk_last : NULL, err);
    f->replaying = false;
    return st;
}

sc_status sc_forward_layer(sc_forward *f, int64_t layer, float *x, int64_t n, sc_err *err) {
    const sc_config *c = &f->m->cfg;
    if (f->train) return sc_errf(err, SC_EARG, "forward: sc_forward_layer needs an inference workspace");
    if (n <= 0 || n > f->max_batch || layer < 0 || layer >= c->n_layers)
        return sc_errf(err, SC_EARG, "forward: layer %lld with %lld tokens does not fit the workspace (batch %lld)",
                       (long long)layer, (long long)n, (long long)f->max_batch);
    size_t rowD = (size_t)(n * c->dim) * sizeof(float);
    memcpy(f->x, x, rowD);
    SC_TRY(layer_forward(f, layer, NULL, n, 0, NULL, err));
    memcpy(x, f->x, rowD);
    return SC_OK;
}

double sc_forward_flops(const sc_config *c, int64_t n, int64_t pos0) {
    double D = (double)c->dim, F = (double)c->ffn_dim, qd = (double)(c->n_heads * c->head_dim),
           kvd = (double)(c->n_kv_heads * c->head_dim);
    double lin = D * qd + 2 * D * kvd + qd * D + 3 * D * F;
    double att = 2.0 * (double)c->n_heads * (double)(pos0 + n) * (double)c->head_dim; /* scores + values per token */
    return 2.0 * (double)n * ((double)c->n_layers * (lin + att) + (double)c->vocab_size * D);
}

sc_status sc_forward_sgemm_only(sc_forward *f, int64_t n, sc_err *err) {
    const sc_model *m = f->m;
    const sc_config *c = &m->cfg;
    if (n <= 0 || n > f->max_batch) return sc_errf(err, SC_EARG, "forward: bad window %lld", (long long)n);
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    for (int64_t l = 0; l < c->n_layers; l++) { /* the same matrices, read the same way, as layer_forward */
        const sc_layer *L = &m->layers[l];
        const float *W;
        float *K = f->kc + sc_kv_base(f, l, kvd), *V = f->vc + sc_kv_base(f, l, kvd);
        SC_TRY(sc_model_weight(m, &L->wq, &W, err));
        sc_linear_forward(f->q, f->xn, W, NULL, n, D, qd);
        SC_TRY(sc_model_weight(m, &L->wk, &W, err));
        sc_linear_forward(K, f->xn, W, NULL, n, D, kvd);
        SC_TRY(sc_model_weight(m, &L->wv, &W, err));
        sc_linear_forward(V, f->xn, W, NULL, n, D, kvd);
        attention(f, l, f->q, n, 0, false);
        SC_TRY(sc_model_weight(m, &L->wo, &W, err));
        sc_linear_forward(f->tmp, f->ctx, W, NULL, n, qd, D);
        SC_TRY(sc_model_weight(m, &L->wg, &W, err));
        sc_linear_forward(f->u, f->xn, W, NULL, n, D, F);
        SC_TRY(sc_model_weight(m, &L->wu, &W, err));
        sc_linear_forward(f->v, f->xn, W, NULL, n, D, F);
        SC_TRY(sc_model_weight(m, &L->wd, &W, err));
        sc_linear_forward(f->tmp, f->h, W, NULL, n, F, D);
    }
    return f->logits ? sc_classifier_forward(m, f->logits, f->xn, n, err) : SC_OK;
}
