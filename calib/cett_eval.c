/* cett_eval.c - evaluation with CETT thresholds and CLADA's load-adjusted
 * thresholds (see lc_eval.h).
 *
 * CLADA's load signal for the token at position t is the surprisal
 * -log p(w_t | w_<t) and the entropy of the distribution that predicted it,
 * i.e. the logits at position t - 1. In teacher-forced eval those come from
 * a dense pre-pass over the window: the logits at t - 1 depend only on tokens
 * <= t - 1 (causal attention), so nothing from the future leaks in. Position
 * 0 of a window has no prediction and uses the base threshold. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cett.h"
#include "lc_eval.h"
#include "lc_util.h"

typedef struct ce_ctx {
    int64_t F, L, V;
    double *thr;      /* [L] base thresholds (< 0: dense layer) */
    double *wnorm;    /* [L, F] */
    float *factor;    /* [ctx] per-position multiplier */
    bool clada;
    double lambda, gamma, tau_s, tau_h;
    int64_t sig_rows, sig_s, sig_h; /* eval tokens with a signal, above tau_s, above tau_H */
    double *live_sum; /* [L] */
    int64_t *rows_l;  /* [L] */
    double dmin, dmax;
} ce_ctx;

static sc_status ce_window(void *user, sc_forward *f, const int32_t *ids, int64_t n, int64_t *score_from, sc_err *err) {
    ce_ctx *x = user;
    const float *logits;
    SC_TRY(sc_forward_run(f, ids, n, 0, NULL, &logits, err)); /* dense pre-pass */
    x->factor[0] = 1.0f;
    for (int64_t t = 1; t < n; t++) {
        double s, h;
        sc_clada_signals(logits + (t - 1) * x->V, x->V, ids[t], &s, &h);
        bool hs = s > x->tau_s, hh = h > x->tau_h;
        x->factor[t] = (float)(1.0 + x->lambda * hs + x->gamma * hh);
        x->sig_rows++;
        x->sig_s += hs;
        x->sig_h += hh;
    }
    return SC_OK;
}

static sc_status ce_hook(void *user, const sc_tap_event *ev, sc_err *err) {
    ce_ctx *x = user;
    if (ev->is_grad || ev->tap != SC_TAP_H) return SC_OK;
    int64_t l = ev->layer, F = x->F;
    if (x->thr[l] < 0) return SC_OK;
    const double *wn = x->wnorm + l * F;
    for (int64_t t = 0; t < ev->n_tokens; t++) {
        float *h = ev->data + t * F;
        double thr = x->thr[l] * (x->clada ? (double)x->factor[ev->pos0 + t] : 1.0);
        int64_t live = 0;
        for (int64_t j = 0; j < F; j++) {
            if (fabs((double)h[j]) * wn[j] > thr)
                live++;
            else
                h[j] = 0.0f;
        }
        double dd = (double)live / (double)F;
        x->live_sum[l] += (double)live;
        x->rows_l[l]++;
        x->dmin = fmin(x->dmin, dd);
        x->dmax = fmax(x->dmax, dd);
    }
    return SC_OK;
}

sc_status sc_eval_cett(const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                       sc_sparse_eval_result *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    const sc_config *c = &m->cfg;
    bool clada = strcmp(o->method, "clada") == 0;
    const char *who = clada ? "clada" : "cett";
    if (!o->calib) return sc_errf(err, SC_EARG, "eval: method %s needs a calibration file (--calib)", who);
    const void *cs = sc_calib_state(o->calib, "cett"), *ls = sc_calib_state(o->calib, "clada");
    if (!cs) return sc_errf(err, SC_EARG, "eval: the calibration file holds no 'cett' sample (compute --method cett%s)",
                            clada ? ",clada" : "");
    if (clada && !ls)
        return sc_errf(err, SC_EARG, "eval: the calibration file holds no 'clada' signals (compute --method cett,clada)");
    double qs, qh;
    sc_cett_goal goal;
    int64_t F = c->ffn_dim, L = c->n_layers, D = c->dim;
    ce_ctx x = {F, L, c->vocab_size, NULL, NULL, NULL, clada, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, INFINITY, -INFINITY};
    SC_TRY(sc_cett_goal_parse(o->params, o->density, who, &goal, err));
    SC_TRY(sc_lc_param(o->params, "lambda", 0.8, -100, 100, &x.lambda, who, err));
    SC_TRY(sc_lc_param(o->params, "gamma", 0.12, -100, 100, &x.gamma, who, err));
    SC_TRY(sc_lc_param(o->params, "qs", 0.5, 0, 1, &qs, who, err));
    SC_TRY(sc_lc_param(o->params, "qh", 0.5, 0, 1, &qh, who, err));
    sc_status st = SC_OK;
    x.thr = malloc((size_t)L * sizeof(double));
    x.wnorm = malloc((size_t)(L * F) * sizeof(double));
    x.factor = malloc((size_t)o->ctx * sizeof(float));
    x.live_sum = calloc((size_t)L, sizeof(double));
    x.rows_l = calloc((size_t)L, sizeof(int64_t));
    double *tmp = NULL;
    if (!x.thr || !x.wnorm || !x.factor || !x.live_sum || !x.rows_l) {
        st = sc_errf(err, SC_ENOMEM, "eval: out of memory");
        goto done;
    }
    out->lc.target = isnan(goal.density) ? goal.target : NAN;
    for (int64_t l = 0; l < L; l++) {
        const float *h;
        int64_t rows;
        x.thr[l] = -1.0;
        out->lc.layer_threshold[l] = out->lc.layer_cett[l] = out->lc.layer_sample_sparsity[l] = NAN;
        if ((st = sc_down_col_norms(m, l, x.wnorm + l * F, err))) goto done;
        if ((isnan(goal.density) && goal.target <= 0) || !sc_cett_sample(cs, l, &h, &rows))
            continue; /* target 0 / uncalibrated layer: dense */
        sc_cett_fit fit;
        const sc_layer *Ly;
        if ((st = sc_model_layer(m, l, &Ly, err)) ||
            (st = sc_cett_fit_layer(h, rows, D, F, Ly->wd, x.wnorm + l * F, &goal, &fit, err)))
            goto done;
        x.thr[l] = fit.threshold;
        out->lc.layer_threshold[l] = fit.threshold;
        out->lc.layer_cett[l] = fit.cett;
        out->lc.layer_sample_sparsity[l] = fit.sparsity;
    }
    if (clada) {
        const double *sig;
        int64_t rows;
        sc_clada_sample(ls, &sig, &rows);
        if (rows == 0) {
            st = sc_errf(err, SC_EARG, "eval: the clada signal sample is empty");
            goto done;
        }
        tmp = malloc((size_t)rows * sizeof(double));
        if (!tmp) {
            st = sc_errf(err, SC_ENOMEM, "eval: out of memory");
            goto done;
        }
        for (int k = 0; k < 2; k++) {
            for (int64_t i = 0; i < rows; i++) tmp[i] = sig[2 * i + k];
            double q = sc_lc_quantile_sorted(tmp, rows, k ? qh : qs);
            if (k) x.tau_h = q; else x.tau_s = q;
        }
        out->lc.tau_s = x.tau_s;
        out->lc.tau_h = x.tau_h;
        out->lc.lambda = x.lambda;
        out->lc.gamma = x.gamma;
    }
    sc_hooks hk = {ce_hook, &x, SC_TAP_BIT(SC_TAP_H)};
    sc_eval_opts eo = {o->ctx, &hk, clada ? ce_window : NULL, &x, o->second_half, o->progress};
    if ((st = sc_eval_run(m, d, &eo, &out->ppl, err))) goto done;
    /* statistics in the router's terms: gate and up run dense (h needs both), down reads live neurons */
    double live = 0, rows = 0, act = 0;
    for (int64_t l = 0; l < L; l++) {
        double ml = x.rows_l[l] ? x.live_sum[l] / (double)x.rows_l[l] : (double)F;
        out->layer_density[l] = ml / (double)F;
        live += x.rows_l[l] ? x.live_sum[l] : (double)F * (double)out->ppl.n_tokens;
        rows += x.rows_l[l] ? (double)x.rows_l[l] : (double)out->ppl.n_tokens;
        act += 2.0 * (double)D * (double)F + ml * (double)D;
    }
    out->stats.density_mean = rows > 0 ? live / rows / (double)F : 1.0;
    out->stats.density_min = x.dmax >= x.dmin ? x.dmin : 1.0;
    out->stats.density_max = x.dmax >= x.dmin ? x.dmax : 1.0;
    out->stats.layer_mean = out->layer_density;
    out->stats.active_mlp_params = act;
    out->stats.rows = out->ppl.n_tokens;
    if (clada && x.sig_rows) {
        out->lc.frac_s = (double)x.sig_s / (double)x.sig_rows;
        out->lc.frac_h = (double)x.sig_h / (double)x.sig_rows;
    }
done:
    free(tmp);
    free(x.thr);
    free(x.wnorm);
    free(x.factor);
    free(x.live_sum);
    free(x.rows_l);
    return st;
}
