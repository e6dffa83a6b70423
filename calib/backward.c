/* backward.c - activation gradients through the whole model (attention
 * included) for the last window of a training workspace, and the losses.
 * Shapes: n tokens, D = dim, F = ffn_dim, qd = n_heads*head_dim,
 * kvd = n_kv_heads*head_dim, V = vocab. Weights are W [out, in], so the
 * gradient of an input is dX[n, in] = dY[n, out] W[out, in]. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward_internal.h"
#include "ops.h"
#include "threads.h"

static sc_status gtap(const sc_hooks *hk, sc_tap t, int64_t layer, int64_t n, int64_t width, float *g,
                      const float *act, sc_err *err) {
    if (!hk || !hk->fn || !(hk->mask & SC_TAP_BIT(t))) return SC_OK;
    sc_tap_event ev = {t, layer, 0, n, width, NULL, g, act, true, false};
    return hk->fn(hk->user, &ev, err);
}

/* dX[n, in] (+)= dY[n, out] W[out, in] */
static void linear_backward(float *dx, const float *dy, const float *W, int64_t n, int64_t in, int64_t out,
                            bool accumulate) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)in, (blasint)out, 1.0f, dy,
                (blasint)out, W, (blasint)in, accumulate ? 1.0f : 0.0f, dx, (blasint)in);
}

/* dX (+)= dY W with the layer's matrix `field` as the forward pass ran it
 * (sc_fwd_weight: an override, or the model's read through sc_model_weight,
 * one matrix converted at a time), then the backward linear hook (forward.h) */
static sc_status lin_back(sc_forward *f, sc_linear w, int64_t l, float *dx, const float *dy,
                          const float *const *field, int64_t n, int64_t in, int64_t out, bool accumulate, sc_err *err) {
    const float *W;
    SC_TRY(sc_fwd_weight(f, l, w, field, &W, err));
    linear_backward(dx, dy, W, n, in, out, accumulate);
    if (!f->lgrad_fn) return SC_OK;
    sc_linear_grad_event ev = {w, l, n, in, out, W, dy, dx};
    return f->lgrad_fn(f->lgrad_user, &ev, err);
}

/* Attention backward for layer l: from dctx [n, qd] to dq [n, qd], dK, dV [n, kvd]
 * (before undoing RoPE). P is recomputed per head from q and K. */
static void attention_backward(sc_forward *f, int64_t l, int64_t n) {
    const sc_config *c = &f->m->cfg;
    int64_t hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd, group = c->n_heads / c->n_kv_heads;
    const float *q = f->q + (size_t)l * f->s_q;
    const float *K = f->kc + sc_kv_base(f, l, kvd), *V = f->vc + sc_kv_base(f, l, kvd);
    float scale = 1.0f / sqrtf((float)hd);
    float *P = f->g_p, *dP = f->g_dp;
    memset(f->g_k, 0, (size_t)(n * kvd) * sizeof(float));
    memset(f->g_v, 0, (size_t)(n * kvd) * sizeof(float));
    for (int64_t h = 0; h < c->n_heads; h++) {
        int64_t kh = h / group;
        const float *qh = q + h * hd, *Kh = K + kh * hd, *Vh = V + kh * hd, *dctx = f->g_ctx + h * hd;
        /* P[n, n] = softmax(scale q_h K_h^T) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)n, (blasint)hd, scale, qh,
                    (blasint)qd, Kh, (blasint)kvd, 0.0f, P, (blasint)n);
        sc_causal_softmax(P, n, n, 0);
        /* dP[n, n] = dctx_h V_h^T ; dV_h += P^T dctx_h */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)n, (blasint)hd, 1.0f, dctx,
                    (blasint)qd, Vh, (blasint)kvd, 0.0f, dP, (blasint)n);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)n, (blasint)hd, (blasint)n, 1.0f, P, (blasint)n,
                    dctx, (blasint)qd, 1.0f, f->g_v + kh * hd, (blasint)kvd);
        sc_causal_softmax_backward(dP, P, n, n); /* dS = P * (dP - rowsum(P * dP)), in place in dP */
        /* dq_h = scale dS K_h ; dK_h += scale dS^T q_h */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)hd, (blasint)n, scale, dP,
                    (blasint)n, Kh, (blasint)kvd, 0.0f, f->g_q + h * hd, (blasint)qd);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)n, (blasint)hd, (blasint)n, scale, dP,
                    (blasint)n, qh, (blasint)qd, 1.0f, f->g_k + kh * hd, (blasint)kvd);
    }
}

/* From dL/d(final norm output) in f->g_xn through every layer. */
static sc_status layers_backward(sc_forward *f, const sc_hooks *hk, sc_err *err) {
    const sc_model *m = f->m;
    const sc_config *c = &m->cfg;
    int64_t n = f->n_last;
    int64_t D = c->dim, F = c->ffn_dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    int64_t B = f->max_batch;
    float *dx = f->g_x, *dxn = f->g_xn;
    memset(dx, 0, (size_t)(n * D) * sizeof(float));
    sc_rmsnorm_backward(dx, dxn, f->x_fin, m->final_norm, f->r_fin, n, D);
    for (int64_t l = c->n_layers - 1; l >= 0; l--) {
        /* checkpointed: the shared buffers hold the last layer's activations
         * from the forward pass; every other layer is recomputed first */
        if (f->checkpoint && l + 1 < c->n_layers) SC_TRY(sc_forward_replay_layer(f, l, err));
        const sc_layer *L = &m->layers[l]; /* norms resident; matrices one at a time (sc_model_weight) */
        const float *u = f->u + (size_t)l * f->s_f, *a = f->a + (size_t)l * f->s_f, *v = f->v + (size_t)l * f->s_f,
                    *h = f->h + (size_t)l * f->s_f;
        const float *resid_after = l + 1 < c->n_layers ? f->x_in + (l + 1) * B * D : f->x_fin;
        SC_TRY(gtap(hk, SC_TAP_RESID, l, n, D, dx, resid_after, err));
        /* MLP: y = W_d h, h = phi(u) * v, u = W_g xn, v = W_u xn, xn = rmsnorm(x_mid) */
        float *dh = f->g_f1, *dv = f->g_f2;
        SC_TRY(lin_back(f, SC_LIN_DOWN, l, dh, dx, &L->wd, n, F, D, false, err));
        SC_TRY(gtap(hk, SC_TAP_H, l, n, F, dh, h, err));
        sc_gated_backward(dh, dv, h, a, v, n * F); /* dh is now dL/da */
        SC_TRY(gtap(hk, SC_TAP_GATE_ACT, l, n, F, dh, a, err));
        SC_TRY(gtap(hk, SC_TAP_UP, l, n, F, dv, v, err));
        sc_act_backward(dh, u, n * F, c->act); /* now dL/du */
        SC_TRY(gtap(hk, SC_TAP_GATE, l, n, F, dh, u, err));
        SC_TRY(lin_back(f, SC_LIN_GATE, l, dxn, dh, &L->wg, n, D, F, false, err));
        SC_TRY(lin_back(f, SC_LIN_UP, l, dxn, dv, &L->wu, n, D, F, true, err));
        SC_TRY(gtap(hk, SC_TAP_MLP_IN, l, n, D, dxn, NULL, err));
        sc_rmsnorm_backward(dx, dxn, f->x_mid + (size_t)l * f->s_d, L->ffn_norm, f->r2 + (size_t)l * f->s_r, n, D);
        /* attention: x_mid = x_in + W_o ctx */
        SC_TRY(lin_back(f, SC_LIN_O, l, f->g_ctx, dx, &L->wo, n, qd, D, false, err));
        SC_TRY(gtap(hk, SC_TAP_ATTN_CTX, l, n, qd, f->g_ctx, NULL, err));
        attention_backward(f, l, n);
        sc_rope_forward(f->g_q, n, c->n_heads, hd, 0, f->cos_t, f->sin_t, c->rope, true);
        sc_rope_forward(f->g_k, n, c->n_kv_heads, hd, 0, f->cos_t, f->sin_t, c->rope, true);
        SC_TRY(lin_back(f, SC_LIN_Q, l, dxn, f->g_q, &L->wq, n, D, qd, false, err));
        SC_TRY(lin_back(f, SC_LIN_K, l, dxn, f->g_k, &L->wk, n, D, kvd, true, err));
        SC_TRY(lin_back(f, SC_LIN_V, l, dxn, f->g_v, &L->wv, n, D, kvd, true, err));
        SC_TRY(gtap(hk, SC_TAP_ATTN_IN, l, n, D, dxn, NULL, err));
        sc_rmsnorm_backward(dx, dxn, f->x_in + l * B * D, L->attn_norm, f->r1 + (size_t)l * f->s_r, n, D);
    }
    return SC_OK;
}

static sc_status check_window(const sc_forward *f, sc_err *err) {
    if (!f->train) return sc_errf(err, SC_EARG, "backward: the workspace was not created for training");
    if (f->n_last <= 0) return sc_errf(err, SC_EARG, "backward: no forward window to differentiate");
    return SC_OK;
}

sc_status sc_backward_run(sc_forward *f, const float *dlogits, const sc_hooks *hk, sc_err *err) {
    SC_TRY(check_window(f, err));
    if (f->chunked) return sc_errf(err, SC_EARG, "backward: a chunked-loss workspace has no logits (use sc_backward_ce)");
    const sc_model *m = f->m;
    int64_t n = f->n_last, D = m->cfg.dim, V = m->cfg.vocab_size;
    SC_TRY(gtap(hk, SC_TAP_LOGITS, m->cfg.n_layers, n, V, (float *)dlogits, f->logits, err));
    /* the classifier: dxn[n, D] = dlogits[n, V] W[V, D], by chunks when it is read on use */
    for (int64_t r0 = 0, chunk = sc_model_classifier_chunk(m); r0 < V; r0 += chunk) {
        int64_t nr = V - r0 < chunk ? V - r0 : chunk;
        const float *W;
        SC_TRY(sc_model_classifier_rows(m, r0, nr, &W, err));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)D, (blasint)nr, 1.0f, dlogits + r0,
                    (blasint)V, W, (blasint)D, r0 ? 1.0f : 0.0f, f->g_xn, (blasint)D);
    }
    return layers_backward(f, hk, err);
}

/* The cross-entropy's gradient in one pass over the vocabulary (the classifier applied once per chunk, not
 * twice): with m_t the running maximum of position t's logits and s_t its running sum of exp(z - m_t) (the
 * online log-sum-exp of sc_forward_lse, the same code), the pass also keeps
 *     a_t = sum over the chunks so far of exp(z_t[i] - m_t) W[i, :]      [D],
 * rescaled by exp(m_old - m_new) whenever the maximum moves, as s_t is. At the end
 *     dL/dxn_t = sum_i (softmax(z_t)[i] - [i = y]) W[i, :] = a_t / s_t - W[y, :].
 * One chunk z[n, nr] (rows r0 .. r0 + nr): each position's logits become their exponentials in place (the
 * sgemm then adds them times W into a), a's row is rescaled first, and the target's logit and row of W are
 * kept; the last position is not scored (zeros). Positions are split over the threads, each owning its rows. */
typedef struct ce_job {
    float *z, *acc, *wy;
    const float *W;
    int64_t n, nr, r0, D;
    const int32_t *ids;
    double *mx, *se, *zy;
} ce_job;

static void ce_fold_part(void *arg, int tid, int nth) {
    const ce_job *j = arg;
    int64_t t0, t1, nr = j->nr, D = j->D;
    sc_split(j->n, tid, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        float *z = j->z + t * nr;
        if (t + 1 == j->n) {
            memset(z, 0, (size_t)nr * sizeof(float));
            continue;
        }
        int64_t y = j->ids[t + 1];
        if (y >= j->r0 && y < j->r0 + nr) {
            j->zy[t] = z[y - j->r0];
            memcpy(j->wy + t * D, j->W + (y - j->r0) * D, (size_t)D * sizeof(float));
        }
        float r = (float)sc_lse_fold(z, nr, &j->mx[t], &j->se[t], z);
        if (r != 1.0f)
            for (int64_t d = 0; d < D; d++) j->acc[t * D + d] *= r;
    }
}

sc_status sc_backward_ce(sc_forward *f, const sc_hooks *hk, double *loss, sc_err *err) {
    *loss = NAN;
    SC_TRY(check_window(f, err));
    if (!f->chunked) return sc_errf(err, SC_EARG, "backward: sc_backward_ce needs a chunked-loss workspace");
    const sc_model *m = f->m;
    int64_t n = f->n_last, D = m->cfg.dim, V = m->cfg.vocab_size, CH = f->lchunk_rows;
    const int32_t *ids = f->ids_last;
    const float *xn = f->xn; /* the final norm's output, left by sc_forward_run */
    double *mx = malloc((size_t)n * 3 * sizeof(double)), *se = mx + n, *zy = se + n;
    if (!mx) return sc_errf(err, SC_ENOMEM, "backward: out of memory");
    for (int64_t t = 0; t < n; t++) mx[t] = -INFINITY, se[t] = 0.0, zy[t] = 0.0;
    float *acc = f->g_xn, *wy = f->tmp; /* [n, D] each; tmp is free until the layers' backward */
    memset(acc, 0, (size_t)(n * D) * sizeof(float));
    sc_status st = SC_OK;
    for (int64_t r0 = 0; r0 < V && !st; r0 += CH) {
        int64_t nr = V - r0 < CH ? V - r0 : CH;
        const float *W;
        if ((st = sc_model_classifier_rows(m, r0, nr, &W, err))) break;
        sc_linear_forward(f->lchunk, xn, W, NULL, n, D, nr);
        ce_job j = {f->lchunk, acc, wy, W, n, nr, r0, D, ids, mx, se, zy};
        sc_parallel(n * nr * 8, ce_fold_part, &j); /* an exp in double costs several elementwise operations */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)D, (blasint)nr, 1.0f, f->lchunk,
                    (blasint)nr, W, (blasint)D, 1.0f, acc, (blasint)D);
    }
    double total = 0.0;
    for (int64_t t = 0; t + 1 < n && !st; t++) {
        double lse = mx[t];
        lse += log(se[t]); /* as sc_forward_lse leaves it, so the loss equals the summed NLL bit for bit */
        total += lse - zy[t];
        float inv = (float)(1.0 / se[t]);
        for (int64_t d = 0; d < D; d++) acc[t * D + d] = acc[t * D + d] * inv - wy[t * D + d];
    }
    free(mx);
    if (st) return st;
    *loss = total;
    return layers_backward(f, hk, err);
}

sc_status sc_backward_from_norm(sc_forward *f, const float *dxn, const sc_hooks *hk, sc_err *err) {
    SC_TRY(check_window(f, err));
    if (!f->chunked) return sc_errf(err, SC_EARG, "backward: sc_backward_from_norm needs a chunked-loss workspace");
    memcpy(f->g_xn, dxn, (size_t)(f->n_last * f->m->cfg.dim) * sizeof(float));
    return layers_backward(f, hk, err);
}

/* softmax of a row in double, written to p */
static double softmax_row(const float *z, int64_t V, double *p) {
    double mx = z[0];
    for (int64_t i = 1; i < V; i++) mx = z[i] > mx ? z[i] : mx;
    double s = 0.0;
    for (int64_t i = 0; i < V; i++) s += (p[i] = exp((double)z[i] - mx));
    for (int64_t i = 0; i < V; i++) p[i] /= s;
    return mx + log(s); /* log-sum-exp */
}

double sc_loss_ce(const float *logits, const int32_t *ids, int64_t n, int64_t V, float *dlogits) {
    return sc_loss_distill(logits, NULL, ids, n, V, 1.0, dlogits);
}

double sc_loss_distill(const float *student, const float *teacher, const int32_t *ids, int64_t n, int64_t V,
                       double ce_weight, float *dlogits) {
    double loss = 0.0;
    double *ps = malloc((size_t)V * 2 * sizeof(double));
    if (!ps) return NAN;
    double *pt = ps + V;
    memset(dlogits + (n - 1) * V, 0, (size_t)V * sizeof(float));
    for (int64_t t = 0; t + 1 < n; t++) {
        const float *z = student + t * V;
        float *g = dlogits + t * V;
        double lse = softmax_row(z, V, ps);
        int32_t y = ids[t + 1];
        loss += ce_weight * (lse - (double)z[y]);
        double kl = 0.0;
        if (teacher) {
            double lse_t = softmax_row(teacher + t * V, V, pt);
            /* KL(s || t) = sum_i p_i (log p_i - log q_i); dKL/dz_k = p_k (log p_k - log q_k - KL) */
            for (int64_t i = 0; i < V; i++) {
                double lps = (double)z[i] - lse, lpt = (double)teacher[t * V + i] - lse_t;
                pt[i] = lps - lpt;
                kl += ps[i] * pt[i];
            }
            loss += kl;
        }
        for (int64_t i = 0; i < V; i++) {
            double gi = ce_weight * ps[i];
            if (teacher) gi += ps[i] * (pt[i] - kl);
            g[i] = (float)gi;
        }
        g[y] -= (float)ce_weight;
    }
    free(ps);
    return loss;
}
