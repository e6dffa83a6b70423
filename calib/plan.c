/* plan.c - fitting the routing plan from a calibration (see plan.h). */
#include "plan.h"

#include <math.h>
#include <stdlib.h>

#include "cats.h"
#include "lc_util.h"
#include "params.h"
#include "model.h"

/* TEAL's calibration taps are the rows of the artifact's teal_thresholds table */
_Static_assert(SC_TEAL_NTAPS == SRT_TEAL_NTAPS, "TEAL taps: calib/methods/teal.h and srt_schema.h disagree");

void sc_plan_claws_layer(const double *c, int64_t F, float *out) {
    for (int64_t j = 0; j < F; j++) out[j] = c ? (float)c[j] : 1.0f;
}

bool sc_plan_cats_table(const void *cats_state, int64_t layer, float out[SRT_THR_GRID]) {
    const int64_t *hist = sc_cats_hist(cats_state, layer);
    if (!hist) return false;
    for (int i = 0; i < SRT_THR_GRID; i++) out[i] = sc_cats_threshold(hist, srt_thr_grid(i));
    return true;
}

bool sc_plan_teal_table(void *teal_state, int64_t layer, double *cum, float out[SC_TEAL_NTAPS * SRT_THR_GRID]) {
    if (!sc_teal_hist(teal_state, layer, 0)) return false;
    for (int tap = 0; tap < SC_TEAL_NTAPS; tap++) {
        sc_teal_cumulative(sc_teal_hist(teal_state, layer, tap), cum);
        for (int i = 0; i < SRT_THR_GRID; i++) out[tap * SRT_THR_GRID + i] = (float)sc_teal_threshold(cum, srt_thr_grid(i));
    }
    return true;
}

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
    else
        srt_cett_table_thresholds(out->table, wnorm_f, goal->density, thr, F);
    out->fitted = true;
    return SC_OK;
}

sc_status sc_plan_clada(const char *params, const void *clada_state, const char *who, sc_clada_plan *out,
                        sc_err *err) {
    out->rule = (srt_clada){NAN, NAN, SRT_CLADA_LAMBDA, SRT_CLADA_GAMMA};
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
    return SC_OK;
}
