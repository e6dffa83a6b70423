/* larosa_eval.c - evaluation with LaRoSA's rotated top-K (see lc_eval.h).
 *
 * At SC_TAP_ATTN_IN and SC_TAP_MLP_IN of every calibrated layer the hook
 * replaces x by Q z_kept, z = Q^T x, keeping the K_in = round((1 - s_in) D)
 * largest |z_k| (the rotation is applied explicitly; folding Q into the
 * weights gives the same products). At SC_TAP_H it keeps the K_h largest
 * |h_j| (h cannot be rotated through the elementwise product). The attention
 * output (o-projection input) stays dense. Layers outside the calibrated
 * range stay dense. Top-K is exact, so the densities are exact.
 *
 * On an artifact packed with --method larosa the rotations are folded into
 * the model (sc_layer.attn_rot / mlp_rot: the forward pass already feeds the
 * rotated input z to W Q), so the hook keeps the top-K |z| in place and no
 * calibration file is needed. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "larosa.h"
#include "larosa_rot.h"
#include "lc_eval.h"
#include "lc_util.h"

/* Rotations are held for every layer up to this many bytes of float (a
 * 2,048-wide model's 16 layers x 2 inputs); above it (Llama-3-8B: 64 x 64 MiB)
 * each layer's is read from the calibration file when the pass reaches it:
 * 0.3-0.5 s per layer and input at d_model 4096 (measured on 2 busy cores),
 * against tens of seconds of forward pass per layer at 2,048 tokens. */
#define LR_RESIDENT_BYTES ((size_t)512 << 20)

typedef struct lr_ctx {
    int64_t D, F, L, K_in, K_h;
    sc_larosa_rots *rots; /* float rotations (NULL: folded) */
    unsigned char *on; /* [2 * L] input sparsified (calibrated, or folded into the model) */
    bool folded;    /* the model holds the rotations: top-K on the tapped input itself */
    float *z, *score, *scratch;
    int32_t *idx;
} lr_ctx;

void sc_lc_layer_params(const sc_config *c, double *qkv, double *o, double *gu, double *down) {
    double D = (double)c->dim, F = (double)c->ffn_dim, qd = (double)(c->n_heads * c->head_dim),
           kvd = (double)(c->n_kv_heads * c->head_dim);
    *qkv = D * (qd + 2 * kvd);
    *o = qd * D;
    *gu = 2 * D * F;
    *down = F * D;
}

/* keeps the k largest |v[i]| of each of n rows of width w (others zeroed) */
static void keep_topk(lr_ctx *x, float *v, int64_t n, int64_t w, int64_t k) {
    for (int64_t t = 0; t < n; t++) {
        float *row = v + t * w;
        srt_score_gate(x->score, row, NULL, w);
        int64_t kept = srt_topk(x->score, w, k, x->idx, x->scratch);
        int64_t next = 0;
        for (int64_t i = 0; i < w; i++) {
            if (next < kept && x->idx[next] == i) {
                next++;
                continue;
            }
            row[i] = 0.0f;
        }
    }
}

static sc_status lr_hook(void *user, const sc_tap_event *ev, sc_err *err) {
    lr_ctx *x = user;
    if (ev->is_grad) return SC_OK;
    if (ev->tap == SC_TAP_H) {
        if (x->K_h < x->F) keep_topk(x, ev->data, ev->n_tokens, x->F, x->K_h);
        return SC_OK;
    }
    int w = ev->tap == SC_TAP_ATTN_IN ? SC_LAROSA_ATTN : ev->tap == SC_TAP_MLP_IN ? SC_LAROSA_MLP : -1;
    if (w < 0 || x->K_in >= x->D || !x->on[w * x->L + ev->layer]) return SC_OK;
    int64_t T = ev->n_tokens, D = x->D;
    if (x->folded) {
        keep_topk(x, ev->data, T, D, x->K_in);
        return SC_OK;
    }
    const void *qv;
    SC_TRY(sc_larosa_rots_get(x->rots, ev->layer, w, &qv, err));
    const float *Q = qv;
    /* z[T, D] = x[T, D] Q[D, D]  (z_k = sum_i x_i Q[i, k] = (Q^T x)_k) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)D, (blasint)D, 1.0f, ev->data,
                (blasint)D, Q, (blasint)D, 0.0f, x->z, (blasint)D);
    keep_topk(x, x->z, T, D, x->K_in);
    /* x'[T, D] = z_kept[T, D] Q^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)D, (blasint)D, 1.0f, x->z, (blasint)D, Q,
                (blasint)D, 0.0f, ev->data, (blasint)D);
    return SC_OK;
}

static void lr_stats(const sc_model *m, const lr_ctx *x, sc_sparse_eval_result *out) {
    const sc_config *c = &m->cfg;
    double qkv, o, gu, dn;
    sc_lc_layer_params(c, &qkv, &o, &gu, &dn);
    double d_in = (double)x->K_in / (double)x->D, d_h = (double)x->K_h / (double)x->F, sum = 0, sum_sp = 0, act = 0;
    double mn = INFINITY, mx = -INFINITY;
    for (int64_t l = 0; l < c->n_layers; l++) {
        double da = x->on[l] ? d_in : 1.0, dm = x->on[x->L + l] ? d_in : 1.0;
        double dl = (qkv * da + o + gu * dm + dn * d_h) / (qkv + o + gu + dn);
        sum_sp += (qkv * da + gu * dm + dn * d_h) / (qkv + gu + dn);
        if (l < SC_MAX_LAYERS) out->layer_density[l] = dl;
        sum += dl;
        mn = fmin(mn, dl);
        mx = fmax(mx, dl);
        act += gu * dm + dn * d_h;
    }
    out->stats.density_mean = sum / (double)c->n_layers;
    out->stats.density_min = mn;
    out->stats.density_max = mx;
    out->stats.layer_mean = out->layer_density;
    out->stats.active_mlp_params = act;
    out->stats.rows = out->ppl.n_tokens;
    out->lc.in_density = d_in;
    out->lc.h_density = d_h;
    out->lc.linear_density = out->stats.density_mean;
    out->lc.sparsified_density = sum_sp / (double)c->n_layers;
}

static void set_split(lr_ctx *x, double s, double cin, double ch) {
    x->K_in = srt_topk_count(1.0 - fmin(1.0, cin * s), x->D);
    x->K_h = srt_topk_count(1.0 - fmin(1.0, ch * s), x->F);
}

sc_status sc_eval_larosa(const sc_route_method *rm, const sc_model *m, const sc_dataset *d,
                         const sc_sparse_eval_opts *o, const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err) {
    (void)rm;
    (void)obs; /* h's top-K is LaRoSA's own, not a neuron router's */
    memset(out, 0, sizeof *out);
    const sc_config *c = &m->cfg;
    bool folded = false;
    for (int64_t l = 0; l < c->n_layers; l++) 
        folded = folded || sc_model_present(m, &m->layers[l].attn_rot) || sc_model_present(m, &m->layers[l].mlp_rot);
    const void *st8 = o->calib ? sc_calib_state(o->calib, "larosa") : NULL;
    if (folded && st8)
        return sc_errf(err, SC_EARG, "%s already holds folded LaRoSA rotations; drop the calibration's", m->path);
    if (!folded && !o->calib)
        return sc_errf(err, SC_EARG, "method larosa needs a calibration file (--calib) or an artifact packed "
                                     "with --method larosa");
    if (!folded) SC_TRY(sc_larosa_state(o->calib, c->dim, &st8, err));
    double cin = SRT_LAROSA_IN, ch = SRT_LAROSA_H, grid = 0, grid_seqs = 16, step = 0.05;
    const sc_param spec[] = {
        {"in", SC_PARAM_NUM, 0, 10, NULL, &cin, 0, NULL},
        {"h", SC_PARAM_NUM, 0, 10, NULL, &ch, 0, NULL},
        {"grid", SC_PARAM_NUM, 0, 1, NULL, &grid, 0, NULL},
        {"grid_seqs", SC_PARAM_NUM, 1, 1e9, NULL, &grid_seqs, 0, NULL},
        {"grid_step", SC_PARAM_NUM, 0.01, 1, NULL, &step, 0, NULL},
    };
    SC_TRY(sc_params_read(o->params, spec, 5, "larosa", err));
    int64_t D = c->dim, F = c->ffn_dim, L = c->n_layers, T = o->ctx;
    lr_ctx x = {D, F, L, D, F, NULL, NULL, folded, NULL, NULL, NULL, NULL};
    x.on = calloc((size_t)(2 * L), 1);
    x.z = malloc((size_t)(T * D) * sizeof(float));
    x.score = malloc((size_t)(D > F ? D : F) * sizeof(float));
    x.scratch = malloc((size_t)(D > F ? D : F) * 8);
    x.idx = malloc((size_t)(D > F ? D : F) * sizeof(int32_t));
    sc_status st = SC_OK;
    if (!x.on || !x.z || !x.score || !x.scratch || !x.idx) {
        st = sc_errf(err, SC_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t l = 0; folded && l < L; l++) {
        x.on[l] = sc_model_present(m, &m->layers[l].attn_rot);
        x.on[L + l] = sc_model_present(m, &m->layers[l].mlp_rot);
    }
    for (int w = 0; st8 && w < 2; w++)
        for (int64_t l = 0; l < L; l++) x.on[w * L + l] = sc_larosa_has(st8, l, w, NULL);
    if (st8 && (st = sc_larosa_rots_create(o->calib, 3u, true, LR_RESIDENT_BYTES, &x.rots, err))) goto done;
    double s = 1.0 - o->density;
    sc_hooks hk = {lr_hook, &x, SC_TAP_BIT(SC_TAP_ATTN_IN) | SC_TAP_BIT(SC_TAP_MLP_IN) | SC_TAP_BIT(SC_TAP_H)};
    if (grid > 0 && s > 0) {
        double qkv, oo, gu, dn;
        sc_lc_layer_params(c, &qkv, &oo, &gu, &dn);
        double P_in = qkv + gu, P_h = dn, best = INFINITY;
        sc_dataset tune = {d->seqs, d->n_seqs < (size_t)grid_seqs ? d->n_seqs : (size_t)grid_seqs, 0};
        for (int64_t gi = 0; gi * step <= 4.0 + 1e-9 && out->lc.n_grid < 32; gi++) {
            double a = (double)gi * step, b = (P_in + P_h - P_in * a) / P_h; /* P_in s_in + P_h s_h = (P_in + P_h) s */
            if (b < 0 || a * s > 1 + 1e-12 || b * s > 1 + 1e-12) continue;
            set_split(&x, s, a, b);
            sc_eval_opts eo = {o->ctx, &hk, NULL, NULL, o->second_half, NULL};
            sc_ppl_result r;
            if ((st = sc_eval_run(m, &tune, &eo, &r, err))) goto done;
            double ppl = exp(r.nll_sum / (double)r.n_scored);
            double *g = out->lc.grid[out->lc.n_grid++];
            g[0] = a;
            g[1] = b;
            g[2] = ppl;
            if (o->progress) fprintf(o->progress, "larosa grid: in %.3f h %.3f -> ppl %.5f\n", a, b, ppl);
            if (ppl < best) {
                best = ppl;
                cin = a;
                ch = b;
            }
        }
        if (out->lc.n_grid == 0) {
            st = sc_errf(err, SC_EARG, "larosa grid: no split keeps sparsity %g within [0, 1] for both inputs", s);
            goto done;
        }
    }
    set_split(&x, s, cin, ch);
    int n_grid = out->lc.n_grid;
    double g[32][3];
    memcpy(g, out->lc.grid, sizeof g);
    sc_eval_opts eo = {o->ctx, &hk, NULL, NULL, o->second_half, o->progress};
    st = sc_eval_run(m, d, &eo, &out->ppl, err);
    if (!st) {
        lr_stats(m, &x, out);
        out->lc.split_in = cin;
        out->lc.split_h = ch;
        out->lc.n_grid = n_grid;
        memcpy(out->lc.grid, g, sizeof g);
    }
done:
    sc_larosa_rots_free(x.rots);
    free(x.on);
    free(x.z);
    free(x.score);
    free(x.scratch);
    free(x.idx);
    return st;
}
