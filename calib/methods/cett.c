/* cett.c - the CETT method (a stored sample of h per layer, see cett.h) and
 * the CLADA method (a stored sample of per-token surprisal and entropy), with
 * everything else of theirs: the CETT search and table, the routing plan pack
 * stores (sc_plan_cett_layer, sc_plan_clada) and eval's routing (sc_eval_cett,
 * below) through the runtime's rule (kernels/srt_route.h).
 * Both samples are CONCAT arrays: shards append their rows when merged.
 *
 * cett parameters: sample=N tokens per layer and shard (default 4096),
 * stride=K (keep every K-th scored token, default 1), target=C (the CETT
 * target of the thresholds saved for inspection, default 0.2; eval searches
 * again for its own target). clada: signals=N tokens (default 1e6). */
#include "cett.h"
#include "srt_route.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "forward.h"
#include "lc_util.h"
#include "model.h"
#include "params.h"
#include "route_method.h"
#include "sample_store.h"

size_t sc_cett_scratch_bytes(int64_t rows, int64_t D, int64_t F) {
    int64_t w = F > D ? F : D;
    return (size_t)(2 * rows * w) * sizeof(float) + (size_t)rows * sizeof(double);
}

/* The scratch: hd and y [rows, max(F, D)] floats, then ynorm [rows] doubles. */
static void scratch_parts(void *scratch, int64_t rows, int64_t D, int64_t F, float **hd, float **y, double **ynorm) {
    int64_t w = F > D ? F : D;
    *hd = scratch;
    *y = *hd + rows * w;
    *ynorm = (double *)(*y + rows * w);
}

/* ||y_r|| of the full outputs y = h W_d^T [rows, D], which every threshold's CETT divides by. */
static void full_norms(const float *h, int64_t rows, int64_t D, int64_t F, const float *Wd, void *scratch) {
    float *hd, *y;
    double *ynorm;
    scratch_parts(scratch, rows, D, F, &hd, &y, &ynorm);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)D, (blasint)F, 1.0f, h, (blasint)F, Wd,
                (blasint)F, 0.0f, y, (blasint)D);
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t i = 0; i < D; i++) s += (double)y[r * D + i] * y[r * D + i];
        ynorm[r] = sqrt(s);
    }
}

/* CETT(t) given full_norms' ynorm in the scratch: one product per threshold. */
static double truncated(const float *h, int64_t rows, int64_t D, int64_t F, const float *Wd, const double *wnorm,
                        double t, void *scratch) {
    float *hd, *y;
    double *ynorm;
    scratch_parts(scratch, rows, D, F, &hd, &y, &ynorm);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < F; j++) {
            float v = h[r * F + j];
            hd[r * F + j] = fabs((double)v) * wnorm[j] <= t ? v : 0.0f;
        }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)D, (blasint)F, 1.0f, hd, (blasint)F,
                Wd, (blasint)F, 0.0f, y, (blasint)D);
    double sum = 0;
    int64_t used = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (!(ynorm[r] > 0)) continue;
        double s = 0;
        for (int64_t i = 0; i < D; i++) s += (double)y[r * D + i] * y[r * D + i];
        sum += sqrt(s) / ynorm[r];
        used++;
    }
    return used ? sum / (double)used : 0.0;
}

double sc_cett_value(const float *h, int64_t rows, int64_t D, int64_t F, const float *Wd, const double *wnorm, double t,
                     void *scratch) {
    full_norms(h, rows, D, F, Wd, scratch);
    return truncated(h, rows, D, F, Wd, wnorm, t, scratch);
}

sc_status sc_cett_search(const float *h, int64_t rows, int64_t D, int64_t F, const float *Wd, const double *wnorm,
                         double target, sc_cett_fit *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    if (rows <= 0) return sc_errf(err, SC_EARG, "cett: the stored sample is empty (compute --method cett first)");
    /* min n and the 0.99 quantile of n (on at most 2^20 evenly strided values) */
    int64_t total = rows * F, step = total > (1 << 20) ? total / (1 << 20) + 1 : 1, m = (total + step - 1) / step;
    double *v = malloc((size_t)m * sizeof *v);
    void *scratch = malloc(sc_cett_scratch_bytes(rows, D, F));
    if (!v || !scratch) {
        free(v);
        free(scratch);
        return sc_errf(err, SC_ENOMEM, "cett: out of memory for a sample of %lld tokens", (long long)rows);
    }
    double lo = INFINITY;
    for (int64_t i = 0, k = 0; i < total; i++) {
        double n = fabs((double)h[i]) * wnorm[i % F];
        if (n < lo) lo = n;
        if (i % step == 0 && k < m) v[k++] = n;
    }
    double hi = sc_lc_quantile_sorted(v, m, 0.99);
    free(v);
    full_norms(h, rows, D, F, Wd, scratch); /* once: they do not depend on the threshold */
    out->grid_lo = lo;
    out->grid_hi = hi;
    /* binary search for the largest index with CETT(grid[i]) <= target */
    int64_t a = -1, b = SC_CETT_GRID; /* CETT(grid[a]) <= target < CETT(grid[b]) (a = -1: t = 0, b = G: beyond) */
    double ca = 0.0;
    while (b - a > 1) {
        int64_t mid = a + (b - a) / 2;
        double t = lo + (hi - lo) * (double)mid / (double)(SC_CETT_GRID - 1);
        double c = truncated(h, rows, D, F, Wd, wnorm, t, scratch);
        out->evaluations++;
        if (c <= target) {
            a = mid;
            ca = c;
        } else {
            b = mid;
        }
    }
    out->threshold = a < 0 ? 0.0 : lo + (hi - lo) * (double)a / (double)(SC_CETT_GRID - 1);
    out->cett = a < 0 ? truncated(h, rows, D, F, Wd, wnorm, 0.0, scratch) : ca;
    int64_t dead = 0;
    for (int64_t i = 0; i < total; i++) dead += fabs((double)h[i]) * wnorm[i % F] <= out->threshold;
    out->sparsity = (double)dead / (double)total;
    free(scratch);
    return SC_OK;
}

sc_status sc_cett_goal_parse(const char *params, double density, const char *who, sc_cett_goal *out, sc_err *err) {
    out->density = NAN;
    out->target = 0.2;
    out->clada = NULL;
    if (!isnan(density) && sc_params_has(params, "target"))
        return sc_errf(err, SC_EARG, "%s: give --density D (per-layer thresholds keeping that fraction of neurons on the "
                                     "calibration sample) or --params target=C (a CETT target), not both", who);
    if (!isnan(density)) {
        if (!(density > 0 && density <= 1))
            return sc_errf(err, SC_EARG, "%s: --density %g is outside (0, 1]", who, density);
        out->density = density;
        return SC_OK;
    }
    const sc_param spec = {"target", SC_PARAM_NUM, 0, 1, NULL, &out->target, 0, NULL};
    return sc_params_read(params, &spec, 1, who, err);
}

sc_status sc_cett_table(const float *h, int64_t rows, int64_t F, const double *wnorm, float table[SRT_THR_GRID],
                        sc_err *err) {
    if (rows <= 0) return sc_errf(err, SC_EARG, "cett: the stored sample is empty (compute --method cett first)");
    int64_t total = rows * F;
    double *v = malloc((size_t)total * sizeof *v);
    if (!v) return sc_errf(err, SC_ENOMEM, "cett: out of memory for a sample of %lld tokens", (long long)rows);
    for (int64_t i = 0; i < total; i++) v[i] = fabs((double)h[i]) * wnorm[i % F];
    /* live iff n > t: the s quantile leaves the fraction 1 - s above it */
    sc_lc_sort(v, total);
    for (int i = 0; i < SRT_THR_GRID; i++) table[i] = (float)sc_lc_quantile_of_sorted(v, total, srt_thr_grid(i));
    free(v);
    return SC_OK;
}

sc_status sc_cett_fit_layer(const float *h, int64_t rows, int64_t D, int64_t F, const float *Wd, const double *wnorm,
                            const sc_cett_goal *goal, const float table[SRT_THR_GRID], sc_cett_fit *out, sc_err *err) {
    if (isnan(goal->density)) return sc_cett_search(h, rows, D, F, Wd, wnorm, goal->target, out, err);
    memset(out, 0, sizeof *out);
    if (rows <= 0) return sc_errf(err, SC_EARG, "cett: the stored sample is empty (compute --method cett first)");
    if (goal->density >= 1.0) { /* everything live */
        out->threshold = -1.0;
        return SC_OK;
    }
    out->threshold = goal->clada ? srt_clada_table_base(table, goal->clada, goal->density)
                                 : srt_table_threshold(table, 1.0 - goal->density);
    int64_t total = rows * F, dead = 0;
    for (int64_t i = 0; i < total; i++) dead += fabs((double)h[i]) * wnorm[i % F] <= out->threshold;
    out->sparsity = (double)dead / (double)total;
    out->grid_lo = out->grid_hi = out->threshold;
    void *scratch = malloc(sc_cett_scratch_bytes(rows, D, F));
    if (!scratch) return sc_errf(err, SC_ENOMEM, "cett: out of memory for a sample of %lld tokens", (long long)rows);
    out->cett = sc_cett_value(h, rows, D, F, Wd, wnorm, out->threshold, scratch);
    free(scratch);
    return SC_OK;
}

void sc_clada_signals(const float *logits, int64_t V, int32_t next, double *surprisal, double *entropy) {
    srt_clada_signals(logits, V, next, surprisal, entropy); /* the runtime's definition (srt_route.h) */
}

/* ---- the routing plan (plan.h: what pack stores and eval routes with) ---- */

sc_status sc_plan_cett_layer(const sc_model *m, const void *cett_state, int64_t layer, const sc_cett_goal *goal,
                             double *wnorm, float *wnorm_f, float *thr, sc_cett_layer_plan *out, sc_err *err) {
    const sc_config *c = &m->cfg;
    const int64_t F = c->ffn_dim;
    const float *h;
    int64_t rows = 0;
    out->tabled = out->fitted = false;
    SC_TRY(sc_down_col_norms(m, layer, wnorm, err));
    for (int64_t j = 0; j < F; j++) wnorm_f[j] = (float)wnorm[j];
    if (!sc_cett_sample(cett_state, layer, &h, &rows) || rows == 0) return SC_OK; /* no sample: a dense layer */
    SC_TRY(sc_cett_table(h, rows, F, wnorm, out->table, err));
    out->tabled = true;
    if (isnan(goal->density) && goal->target <= 0) return SC_OK; /* target 0: a dense layer */
    const sc_layer *Ly;
    SC_TRY(sc_model_layer(m, layer, &Ly, err));
    SC_TRY(sc_cett_fit_layer(h, rows, c->dim, F, Ly->wd, wnorm, goal, out->table, &out->fit, err));
    if (isnan(goal->density))
        for (int64_t j = 0; j < F; j++) thr[j] = srt_cett_neuron_threshold(out->fit.threshold, wnorm[j]);
    else if (goal->clada)
        srt_clada_table_thresholds(out->table, wnorm_f, goal->clada, goal->density, thr, F);
    else
        srt_cett_table_thresholds(out->table, wnorm_f, goal->density, thr, F);
    out->fitted = true;
    return SC_OK;
}

sc_status sc_plan_clada(const char *params, const void *clada_state, const char *who, sc_clada_plan *out,
                        sc_err *err) {
    out->rule = (srt_clada){NAN, NAN, SRT_CLADA_LAMBDA, SRT_CLADA_GAMMA, {0, 0, 0, 0}};
    out->qs = SRT_CLADA_QS;
    out->qh = SRT_CLADA_QH;
    const sc_param spec[] = {
        {"lambda", SC_PARAM_NUM, -100, 100, NULL, &out->rule.lambda, 0, NULL},
        {"gamma", SC_PARAM_NUM, -100, 100, NULL, &out->rule.gamma, 0, NULL},
        {"qs", SC_PARAM_NUM, 0, 1, NULL, &out->qs, 0, NULL},
        {"qh", SC_PARAM_NUM, 0, 1, NULL, &out->qh, 0, NULL},
    };
    SC_TRY(sc_params_read(params, spec, 4, who, err));
    if (!clada_state) return SC_OK;
    const double *sig;
    int64_t rows = 0;
    sc_clada_sample(clada_state, &sig, &rows);
    if (rows == 0) return sc_errf(err, SC_EARG, "%s: the clada signal sample is empty", who);
    double *tmp = malloc((size_t)rows * sizeof *tmp);
    if (!tmp) return sc_errf(err, SC_ENOMEM, "%s: out of memory", who);
    for (int k = 0; k < 2; k++) {
        for (int64_t i = 0; i < rows; i++) tmp[i] = sig[2 * i + k];
        double q = sc_lc_quantile_sorted(tmp, rows, k ? out->qh : out->qs);
        if (k)
            out->rule.tau_h = q;
        else
            out->rule.tau_s = q;
    }
    free(tmp);
    for (int64_t i = 0; i < rows; i++) /* the load classes of srt_route.h */
        out->rule.frac[(sig[2 * i] > out->rule.tau_s) | (sig[2 * i + 1] > out->rule.tau_h) << 1] += 1.0 / (double)rows;
    return SC_OK;
}

/* ---- eval: CETT thresholds and CLADA's load-adjusted thresholds, on the routing plan pack stores
 * (sc_plan_cett_layer, sc_plan_clada) and through the runtime's rule
 * (srt_route_cett: live iff |h_j / factor| > t / ||W_d[:, j]||, in f32).
 *
 * CLADA has one definition, the runtime's (srt_route.h): the load signals of
 * the token at position t are the surprisal -log p(w_t | w_<t) and the entropy
 * of the distribution that predicted it, from the logits the routed model
 * itself produced at t - 1. A deployed model has only those; a dense pre-pass
 * (what eval took before) is a different method that needs a second, dense
 * model run per token, and measured 6% lower NLL than what the artifact
 * executes. Because the signals at t depend on the routing of every earlier
 * token, eval finds the factors of a window by running it token by token
 * through the reference forward pass with the router on (the decoder's
 * order), then scores the window in one batched pass with those factors.
 * Position 0 of a window has no prediction and uses factor 1. */
typedef struct ce_ctx {
    int64_t F, L, V;
    float *thr;       /* [L, F] per-neuron thresholds of the plan */
    bool *fitted;     /* [L] false: a dense layer */
    float *factor;    /* [ctx] per-position multiplier */
    float *scratch;   /* [F] */
    uint32_t *idx;    /* [F] */
    bool clada, recording;
    sc_live_fn on_live;
    void *live_user;
    srt_clada rule;
    int64_t sig_rows, sig_s, sig_h; /* eval tokens with a signal, above tau_s, above tau_H */
    double *live_sum; /* [L] */
    int64_t *rows_l;  /* [L] */
    double dmin, dmax;
} ce_ctx;

static sc_status ce_hook(void *user, const sc_tap_event *ev, sc_err *err) {
    ce_ctx *x = user;
    if (ev->is_grad || ev->tap != SC_TAP_H) return SC_OK;
    int64_t l = ev->layer, F = x->F;
    if (!x->fitted[l]) return SC_OK;
    for (int64_t t = 0; t < ev->n_tokens; t++) {
        float *h = ev->data + t * F;
        float f = x->clada ? x->factor[ev->pos0 + t] : 1.0f;
        int64_t live = srt_route_cett(NULL, x->idx, x->scratch, h, x->thr + l * F, f, F);
        if (live >= 0)
            srt_zero_dead(h, F, x->idx, live);
        else
            live = F;
        if (!x->recording || ev->replay) continue;
        if (x->on_live) x->on_live(x->live_user, l, ev->pos0 + t, h, F);
        double dd = (double)live / (double)F;
        x->live_sum[l] += (double)live;
        x->rows_l[l]++;
        x->dmin = fmin(x->dmin, dd);
        x->dmax = fmax(x->dmax, dd);
    }
    return SC_OK;
}

/* CLADA: the window token by token with the router on, each token's factor
 * from the previous step's own logits (srt_clada_signals, srt_clada_factor). */
static sc_status ce_window(void *user, sc_forward *f, const int32_t *ids, int64_t n, int64_t *score_from, sc_err *err) {
    ce_ctx *x = user;
    sc_hooks hk = {ce_hook, x, SC_TAP_BIT(SC_TAP_H)};
    x->recording = false;
    x->factor[0] = 1.0f;
    sc_status st = SC_OK;
    for (int64_t t = 0; t + 1 < n && !st; t++) {
        const float *logits;
        if ((st = sc_forward_run(f, ids + t, 1, t, &hk, &logits, err))) break;
        double s, h;
        srt_clada_signals(logits, x->V, ids[t + 1], &s, &h);
        x->factor[t + 1] = srt_clada_factor(&x->rule, s, h);
        x->sig_rows++;
        x->sig_s += s > x->rule.tau_s;
        x->sig_h += h > x->rule.tau_h;
    }
    x->recording = true;
    return st;
}

sc_status sc_eval_cett(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                       const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    const sc_config *c = &m->cfg;
    bool clada = rm->flags & SC_RM_CLADA;
    const char *who = rm->name;
    if (!o->calib) return sc_errf(err, SC_EARG, "method %s needs a calibration file (--calib)", who);
    const void *cs = sc_calib_state(o->calib, "cett"), *ls = sc_calib_state(o->calib, "clada");
    if (!cs) return sc_errf(err, SC_EARG, "the calibration file holds no 'cett' sample (compute --method cett%s)",
                            clada ? ",clada" : "");
    if (clada && !ls)
        return sc_errf(err, SC_EARG, "the calibration file holds no 'clada' signals (compute --method cett,clada)");
    sc_cett_goal goal;
    sc_clada_plan cp;
    int64_t F = c->ffn_dim, L = c->n_layers, D = c->dim;
    ce_ctx x;
    memset(&x, 0, sizeof x);
    x.F = F;
    x.L = L;
    x.V = c->vocab_size;
    x.clada = clada;
    x.recording = true;
    x.on_live = obs ? obs->fn : NULL;
    x.live_user = obs ? obs->user : NULL;
    x.dmin = INFINITY;
    x.dmax = -INFINITY;
    SC_TRY(sc_cett_goal_parse(o->params, o->density, who, &goal, err));
    SC_TRY(sc_plan_clada(o->params, clada ? ls : NULL, who, &cp, err));
    x.rule = cp.rule;
    if (clada) goal.clada = &x.rule; /* a density is kept by the scaled rule */
    sc_status st = SC_OK;
    double *wn = malloc((size_t)F * sizeof(double));
    float *wnf = malloc((size_t)F * sizeof(float));
    x.thr = malloc((size_t)(L * F) * sizeof(float));
    x.fitted = calloc((size_t)L, sizeof(bool));
    x.factor = malloc((size_t)o->ctx * sizeof(float));
    x.scratch = malloc((size_t)F * sizeof(float));
    x.idx = malloc((size_t)F * sizeof(uint32_t));
    x.live_sum = calloc((size_t)L, sizeof(double));
    x.rows_l = calloc((size_t)L, sizeof(int64_t));
    if (!wn || !wnf || !x.thr || !x.fitted || !x.factor || !x.scratch || !x.idx || !x.live_sum || !x.rows_l) {
        st = sc_errf(err, SC_ENOMEM, "out of memory");
        goto done;
    }
    out->lc.target = isnan(goal.density) ? goal.target : NAN;
    for (int64_t l = 0; l < L; l++) {
        out->lc.layer_threshold[l] = out->lc.layer_cett[l] = out->lc.layer_sample_sparsity[l] = NAN;
        sc_cett_layer_plan lp;
        if ((st = sc_plan_cett_layer(m, cs, l, &goal, wn, wnf, x.thr + l * F, &lp, err))) goto done;
        x.fitted[l] = lp.fitted;
        if (!x.fitted[l]) continue;
        out->lc.layer_threshold[l] = lp.fit.threshold;
        out->lc.layer_cett[l] = lp.fit.cett;
        out->lc.layer_sample_sparsity[l] = lp.fit.sparsity;
    }
    if (clada) {
        out->lc.tau_s = x.rule.tau_s;
        out->lc.tau_h = x.rule.tau_h;
        out->lc.lambda = x.rule.lambda;
        out->lc.gamma = x.rule.gamma;
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
    free(wn);
    free(wnf);
    free(x.thr);
    free(x.fitted);
    free(x.scratch);
    free(x.idx);
    free(x.factor);
    free(x.live_sum);
    free(x.rows_l);
    return st;
}

/* ---- cett: the h sample ---- */

typedef struct cett {
    const sc_model *m; /* NULL rows when loaded without weights */
    int64_t L0, L1, F, D, cap, stride;
    double target;
    void **h;        /* [layers] float [rows, F] (void * so the engine can grow it, see sc_array) */
    int64_t *rows;   /* [layers] */
    int64_t *seen;   /* [layers] scored tokens seen (for the stride) */
    double *thr;     /* [layers, 3] derived: threshold, CETT, sample sparsity (NaN without weights) */
} cett;

static void cett_free(void *p) {
    cett *s = p;
    if (!s) return;
    for (int64_t l = 0; s->h && l < s->L1 - s->L0; l++) sc_sample_free(s->h[l]);
    free(s->h);
    free(s->rows);
    free(s->seen);
    free(s->thr);
    free(s);
}

static sc_status cett_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    int64_t cap = 4096, stride = 1;
    double target = 0.2;
    const sc_param spec[] = {
        {"sample", SC_PARAM_INT, 1, 1e9, NULL, &cap, 0, NULL},
        {"stride", SC_PARAM_INT, 1, 1e9, NULL, &stride, 0, NULL},
        {"target", SC_PARAM_NUM, 0, 1, NULL, &target, 0, NULL},
    };
    SC_TRY(sc_params_read(o->params, spec, 3, "cett", err));
    cett *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "cett: out of memory");
    s->m = m->layers ? m : NULL;
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->F = m->cfg.ffn_dim;
    s->D = m->cfg.dim;
    s->cap = cap;
    s->stride = stride;
    s->target = target;
    int64_t n = s->L1 - s->L0;
    s->h = calloc((size_t)n, sizeof *s->h);
    s->rows = calloc((size_t)n, sizeof *s->rows);
    s->seen = calloc((size_t)n, sizeof *s->seen);
    s->thr = calloc((size_t)(3 * n), sizeof *s->thr);
    if (!s->h || !s->rows || !s->seen || !s->thr) {
        cett_free(s);
        return sc_errf(err, SC_ENOMEM, "cett: out of memory");
    }
    *out = s;
    return SC_OK;
}

static sc_status cett_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    cett *s = p;
    if (ev->is_grad || ev->tap != SC_TAP_H || ev->layer < s->L0 || ev->layer >= s->L1) return SC_OK;
    int64_t l = ev->layer - s->L0, F = s->F, take = 0;
    for (int64_t t = 0; t < n_scored; t++) take += (s->seen[l] + t) % s->stride == 0;
    if (take > s->cap - s->rows[l]) take = s->cap - s->rows[l];
    if (take > 0) {
        SC_TRY(sc_sample_resize(&s->h[l], (size_t)((s->rows[l] + take) * F) * sizeof(float), "cett: the h sample", err));
        float *p2 = s->h[l];
        for (int64_t t = 0, k = 0; t < n_scored && k < take; t++)
            if ((s->seen[l] + t) % s->stride == 0)
                memcpy(p2 + (s->rows[l] + k++) * F, ev->data + t * F, (size_t)F * sizeof(float));
        s->rows[l] += take;
    }
    s->seen[l] += n_scored;
    return SC_OK;
}

static sc_status cett_finalize(void *p, sc_err *err) {
    cett *s = p;
    for (int64_t l = 0; l < s->L1 - s->L0; l++) {
        double *o = s->thr + 3 * l;
        o[0] = o[1] = o[2] = NAN;
        if (!s->m || s->rows[l] == 0) continue; /* no weights (merge/inspect): eval searches again */
        double *wn = sc_method_f64(s->F);
        if (!wn) return sc_errf(err, SC_ENOMEM, "cett: out of memory");
        sc_cett_fit fit;
        const sc_layer *Ly;
        sc_status st = sc_down_col_norms(s->m, s->L0 + l, wn, err);
        if (!st) st = sc_model_layer(s->m, s->L0 + l, &Ly, err);
        if (!st) st = sc_cett_search((const float *)s->h[l], s->rows[l], s->D, s->F, Ly->wd, wn, s->target, &fit, err);
        free(wn);
        SC_TRY(st);
        o[0] = fit.threshold;
        o[1] = fit.cett;
        o[2] = fit.sparsity;
    }
    return SC_OK;
}

static int cett_arrays(void *p, sc_array *out, int cap) {
    cett *s = p;
    int n = 0;
    for (int64_t l = 0; l < s->L1 - s->L0 && n + 2 <= cap; l++) {
        sc_array *a = &out[n++];
        snprintf(a->name, sizeof a->name, "layer%lld.h_sample", (long long)(s->L0 + l));
        a->kind = SC_ARR_CONCAT;
        a->type = SC_ARR_F32;
        a->shape[0] = s->rows[l];
        a->shape[1] = s->F;
        a->data = s->h[l];
        a->concat_data = &s->h[l];
        a->concat_rows = &s->rows[l];
        a = &out[n++];
        snprintf(a->name, sizeof a->name, "layer%lld.fit", (long long)(s->L0 + l));
        a->kind = SC_ARR_DERIVED;
        a->type = SC_ARR_F64;
        a->shape[0] = 3;
        a->shape[1] = 0;
        a->data = s->thr + 3 * l;
        a->concat_data = NULL;
        a->concat_rows = NULL;
    }
    return n;
}

bool sc_cett_sample(const void *state, int64_t layer, const float **h, int64_t *rows) {
    const cett *s = state;
    if (!s || layer < s->L0 || layer >= s->L1) return false;
    *h = (const float *)s->h[layer - s->L0];
    *rows = s->rows[layer - s->L0];
    return true;
}

/* the stride counters (checkpoints only) */
static int cett_resume_arrays(void *p, sc_array *out, int cap) {
    cett *s = p;
    return sc_method_counter_array(out, cap, "seen", s->seen, s->L1 - s->L0);
}

const sc_method sc_method_cett = {
    "cett",
    "CETT: a stored sample of h per layer; thresholds with mean CETT <= target (binary search)",
    SC_TAP_BIT(SC_TAP_H),
    0,
    cett_create,
    cett_observe,
    cett_finalize,
    cett_arrays,
    cett_free,
    cett_resume_arrays,
    NULL,
    NULL,
    "sample,stride,target",
    NULL,
    NULL,
};

/* ---- clada: the load-signal sample ---- */

typedef struct clada {
    int64_t cap, rows;
    void *sig; /* double [rows, 2]: surprisal, entropy */
} clada;

static void clada_free(void *p) {
    clada *s = p;
    if (!s) return;
    sc_sample_free(s->sig);
    free(s);
}

static sc_status clada_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    int64_t cap = 1000000;
    const sc_param spec = {"signals", SC_PARAM_INT, 1, 1e10, NULL, &cap, 0, NULL};
    SC_TRY(sc_params_read(o->params, &spec, 1, "clada", err));
    clada *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "clada: out of memory");
    s->cap = cap;
    *out = s;
    return SC_OK;
}

static sc_status clada_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    clada *s = p;
    if (ev->is_grad || ev->tap != SC_TAP_LOGITS || !ev->ids) return SC_OK;
    int64_t take = n_scored < s->cap - s->rows ? n_scored : s->cap - s->rows;
    if (take <= 0) return SC_OK;
    SC_TRY(sc_sample_resize(&s->sig, (size_t)((s->rows + take) * 2) * sizeof(double), "clada: the signal sample", err));
    double *q = s->sig;
    for (int64_t t = 0; t < take; t++) /* logits at t predict token t + 1 */
        sc_clada_signals(ev->data + t * ev->width, ev->width, ev->ids[t + 1], &q[(s->rows + t) * 2],
                         &q[(s->rows + t) * 2 + 1]);
    s->rows += take;
    return SC_OK;
}

static sc_status clada_finalize(void *p, sc_err *err) { return SC_OK; }

static int clada_arrays(void *p, sc_array *out, int cap) {
    clada *s = p;
    if (cap < 1) return 0;
    sc_array *a = &out[0];
    snprintf(a->name, sizeof a->name, "signals");
    a->kind = SC_ARR_CONCAT;
    a->type = SC_ARR_F64;
    a->shape[0] = s->rows;
    a->shape[1] = 2;
    a->data = s->sig;
    a->concat_data = &s->sig;
    a->concat_rows = &s->rows;
    return 1;
}

bool sc_clada_sample(const void *state, const double **sig, int64_t *rows) {
    const clada *s = state;
    if (!s) return false;
    *sig = (const double *)s->sig;
    *rows = s->rows;
    return true;
}

const sc_method sc_method_clada = {
    "clada",
    "CLADA: a stored sample of per-token surprisal and entropy (load-signal quantiles); pairs with cett",
    SC_TAP_BIT(SC_TAP_LOGITS),
    0,
    clada_create,
    clada_observe,
    clada_finalize,
    clada_arrays,
    clada_free,
    NULL,
    NULL,
    NULL,
    "signals",
    NULL,
    NULL,
};
