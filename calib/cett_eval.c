/* cett_eval.c - evaluation with CETT thresholds and CLADA's load-adjusted
 * thresholds (see lc_eval.h), on the routing plan pack stores
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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cett.h"
#include "lc_eval.h"
#include "lc_util.h"
#include "plan.h"
#include "route_method.h"

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
