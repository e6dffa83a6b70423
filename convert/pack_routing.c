/* pack_routing.c - routing parameters stored with their layer (see
 * pack_routing.h and docs/PACK.md). Per method found in the calibration:
 *
 *   claws  lN.claws_c [F]             the multipliers c_j
 *   cats   lN.cats_thresholds [19]    |phi(u)| thresholds at sparsity 0.05 .. 0.95
 *   teal   lN.teal_thresholds [4, 19] |x| thresholds per tapped input (attn_in,
 *                                     attn_ctx, mlp_in, h) at sparsity 0.05 .. 0.95;
 *          lN.teal_curve [rows, 8]    the greedy allocation curve, when computed
 *   cett   lN.cett_thresholds [F]     live iff |h_j| > thr_j = t / ||W_d[:, j]||
 *                                     (t from the CETT search at params target=,
 *                                     else at the artifact's density when < 1:
 *                                     sc_cett_fit_layer; routing.cett says which)
 *          lN.cett_table [19]         t at sparsity 0.05 .. 0.95 (sc_cett_table)
 *          lN.cett_wnorm [F]          ||W_d[:, j]|| (f32): with the table, the
 *                                     thresholds at any density
 *                                     (srt_cett_table_thresholds)
 *   clada  routing.clada              tau_s, tau_H, lambda, gamma, class_frac (with cett's table)
 *   cwic   lN.P.cwic_theta [ns, in], lN.P.cwic_mean [in], lN.P.cwic_std [in]
 *                                     per projection P, fitted as eval does
 *   larosa routing.larosa             the split (the rotations are folded, pack.c)
 *
 * Everything per neuron follows the permutation. GRIFFIN has nothing to
 * store: its live set is chosen from each prompt at run time. TEAL and CWIC
 * statistics describe the unrotated inputs, so they are not stored for a
 * folded LaRoSA artifact; CWIC's stripes are row groups of the original
 * neuron order, so they are not stored for a permuted one either (both say
 * so in the manifest). */
#include "pack_routing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cett.h"
#include "claws.h"
#include "cwic.h"
#include "larosa.h"
#include "lc_util.h"
#include "params.h"
#include "method.h"
#include "plan.h"
#include "route_method.h"
#include "srt_method.h"
#include "srt_schema.h"
#include "teal.h"

typedef struct rt {
    const sc_model *m;
    const sc_pack_opts *o;
    sc_routing_put sink;
    void *user;
    const uint32_t *perm_all;
    cJSON *r;
    float *f; /* [ffn_dim] scratch */
} rt;

static sc_status put(rt *x, const char *name, const float *v, int64_t rows, int64_t cols, sc_err *err) {
    return x->sink(x->user, name, v, rows, cols, err);
}

/* pack's sink: a section of the artifact being written */
typedef struct section_sink {
    srt_writer *w;
    int compress;
} section_sink;

static sc_status put_section(void *user, const char *name, const float *v, int64_t rows, int64_t cols, sc_err *err) {
    const section_sink *s = user;
    uint64_t dims[2] = {(uint64_t)rows, (uint64_t)cols};
    if (srt_writer_add(s->w, name, SRT_CT_F32, cols ? 2 : 1, dims, v, (size_t)(rows * (cols ? cols : 1)) * sizeof(float),
                       s->compress))
        return sc_errf(err, SC_EIO, "%s", srt_writer_errmsg(s->w));
    return SC_OK;
}

/* out[i] = v[perm[i]] for the layer's permutation (identity without one). */
static void permuted(const rt *x, int64_t layer, const float *v, float *out) {
    int64_t F = x->m->cfg.ffn_dim;
    const uint32_t *pm = x->perm_all ? x->perm_all + layer * F : NULL;
    for (int64_t j = 0; j < F; j++) out[j] = v[pm ? pm[j] : (uint32_t)j];
}

static sc_status claws(rt *x, void *state, sc_err *err) {
    int64_t F = x->m->cfg.ffn_dim;
    float *c = malloc((size_t)F * sizeof *c);
    sc_status st = c ? SC_OK : sc_errf(err, SC_ENOMEM, "out of memory");
    for (int64_t l = 0; l < x->m->cfg.n_layers && !st; l++) {
        const double *cj = sc_claws_c(state, l);
        if (!cj) continue;
        sc_plan_claws_layer(cj, F, c); /* the multipliers eval's router scores with */
        permuted(x, l, c, x->f);
        char name[64];
        snprintf(name, sizeof name, SRT_LAYER_SECTION, (long long)l, SRT_SEC_CLAWS_C);
        st = put(x, name, x->f, F, 0, err);
    }
    free(c);
    return st;
}

static sc_status cats(rt *x, void *state, sc_err *err) {
    sc_status st = SC_OK;
    for (int64_t l = 0; l < x->m->cfg.n_layers && !st; l++) {
        float t[SRT_THR_GRID];
        if (!sc_plan_cats_table(state, l, t)) continue;
        char name[64];
        snprintf(name, sizeof name, SRT_LAYER_SECTION, (long long)l, SRT_SEC_CATS_THRESHOLDS);
        st = put(x, name, t, SRT_THR_GRID, 0, err);
    }
    return st;
}

static sc_status teal(rt *x, void *state, sc_err *err) {
    /* a curve pending (shards merged without the model) is computed now, as eval computes it */
    SC_TRY(sc_teal_ensure_curves(state, x->m, err));
    double *cum = malloc(SC_TEAL_NB * sizeof *cum);
    float *curve = NULL;
    sc_status st = cum ? SC_OK : sc_errf(err, SC_ENOMEM, "out of memory");
    int64_t stored = 0;
    for (int64_t l = 0; l < x->m->cfg.n_layers && !st; l++) {
        float t[SC_TEAL_NTAPS * SRT_THR_GRID];
        if (!sc_plan_teal_table(state, l, cum, t)) continue;
        char name[64];
        snprintf(name, sizeof name, SRT_LAYER_SECTION, (long long)l, SRT_SEC_TEAL_THRESHOLDS);
        if ((st = put(x, name, t, SC_TEAL_NTAPS, SRT_THR_GRID, err))) break;
        stored++;
        int64_t rows = 0;
        const double *cv = sc_teal_curve(state, l, &rows);
        if (!cv || rows < 2) continue; /* greedy curves only when computed (teal_greedy=1) */
        float *g = realloc(curve, (size_t)(rows * SC_TEAL_CURVE_COLS) * sizeof *g);
        if (!g) {
            st = sc_errf(err, SC_ENOMEM, "out of memory");
            break;
        }
        curve = g;
        for (int64_t i = 0; i < rows * SC_TEAL_CURVE_COLS; i++) curve[i] = (float)cv[i];
        snprintf(name, sizeof name, SRT_LAYER_SECTION, (long long)l, SRT_SEC_TEAL_CURVE);
        st = put(x, name, curve, rows, SC_TEAL_CURVE_COLS, err);
    }
    if (!st) {
        cJSON *tj = cJSON_AddObjectToObject(x->r, SRT_RT_TEAL);
        cJSON_AddNumberToObject(tj, SRT_RT_TEAL_LAYERS, (double)stored);
        cJSON_AddStringToObject(tj, SRT_RT_TEAL_TAPS, SRT_TEAL_TAP_NAMES);
        cJSON_AddStringToObject(tj, SRT_RT_TEAL_SPARSITIES, SRT_THR_GRID_DESC);
    }
    free(cum);
    free(curve);
    return st;
}

static sc_status cett(rt *x, void *cs, sc_err *err) {
    const void *ls = sc_calib_state(x->o->calib, "clada"); /* CLADA's signals, stored with cett's thresholds */
    float *f = x->f;
    const sc_config *c = &x->m->cfg;
    int64_t F = c->ffn_dim, L = c->n_layers;
    sc_cett_goal goal;
    sc_clada_plan cp;
    bool by_density = !sc_params_has(x->o->params, "target") && x->o->density < 1.0;
    SC_TRY(sc_cett_goal_parse(x->o->params, by_density ? x->o->density : NAN, "cett", &goal, err));
    const double *sig;
    int64_t sig_rows = 0;
    if (ls) sc_clada_sample(ls, &sig, &sig_rows);
    SC_TRY(sc_plan_clada(x->o->params, sig_rows > 0 ? ls : NULL, "clada", &cp, err));
    double *wn = malloc((size_t)F * sizeof *wn);
    float *thr = malloc((size_t)F * sizeof *thr), *wnf = malloc((size_t)F * sizeof *wnf);
    sc_status st = wn && thr && wnf ? SC_OK : sc_errf(err, SC_ENOMEM, "out of memory");
    cJSON *cj = cJSON_AddObjectToObject(x->r, SRT_RT_CETT), *tl = cJSON_AddArrayToObject(cj, SRT_RT_CETT_THRESHOLDS);
    if (by_density)
        cJSON_AddNumberToObject(cj, SRT_RT_CETT_DENSITY, goal.density);
    else
        cJSON_AddNumberToObject(cj, SRT_RT_CETT_TARGET, goal.target);
    for (int64_t l = 0; l < L && !st; l++) {
        sc_cett_layer_plan lp;
        char name[64];
        if ((st = sc_plan_cett_layer(x->m, cs, l, &goal, wn, wnf, thr, &lp, err))) break;
        if (lp.tabled) { /* the table and the norms: the thresholds at any density (srt_cett_table_thresholds) */
            snprintf(name, sizeof name, SRT_LAYER_SECTION, (long long)l, SRT_SEC_CETT_TABLE);
            if ((st = put(x, name, lp.table, SRT_THR_GRID, 0, err))) break;
            permuted(x, l, wnf, f);
            snprintf(name, sizeof name, SRT_LAYER_SECTION, (long long)l, SRT_SEC_CETT_WNORM);
            if ((st = put(x, name, f, F, 0, err))) break;
        }
        if (!lp.fitted) {
            cJSON_AddItemToArray(tl, cJSON_CreateNull()); /* dense layer */
            continue;
        }
        permuted(x, l, thr, f);
        snprintf(name, sizeof name, SRT_LAYER_SECTION, (long long)l, SRT_SEC_CETT_THRESHOLDS);
        st = put(x, name, f, F, 0, err);
        cJSON_AddItemToArray(tl, cJSON_CreateNumber(lp.fit.threshold));
    }
    if (!st && sig_rows > 0) {
        cJSON *lj = cJSON_AddObjectToObject(x->r, SRT_RT_CLADA);
        cJSON_AddNumberToObject(lj, SRT_RT_CLADA_TAU_S, cp.rule.tau_s);
        cJSON_AddNumberToObject(lj, SRT_RT_CLADA_TAU_H, cp.rule.tau_h);
        cJSON_AddNumberToObject(lj, SRT_RT_CLADA_LAMBDA, cp.rule.lambda);
        cJSON_AddNumberToObject(lj, SRT_RT_CLADA_GAMMA, cp.rule.gamma);
        cJSON_AddNumberToObject(lj, SRT_RT_CLADA_QS, cp.qs);
        cJSON_AddNumberToObject(lj, SRT_RT_CLADA_QH, cp.qh);
        cJSON *fj = cJSON_AddArrayToObject(lj, SRT_RT_CLADA_FRAC); /* how clada keeps a density (srt_route.h) */
        for (int k = 0; k < SRT_CLADA_CLASSES; k++) cJSON_AddItemToArray(fj, cJSON_CreateNumber(cp.rule.frac[k]));
    }
    free(wn);
    free(thr);
    free(wnf);
    return st;
}

static sc_status cwic(rt *x, void *state, sc_err *err) {
    (void)state; /* sc_cwic_prepare finds it in the calibration */
    const sc_calib *c = x->o->calib;
    sc_cwic_plan *pl;
    /* the artifact's density sets the APR (1 / density) unless params give apr= or thresholds= */
    SC_TRY(sc_cwic_prepare(x->m, c, x->o->params, x->o->density, &pl, err));
    sc_status st = SC_OK;
    int64_t stored = 0;
    for (int64_t l = 0; l < x->m->cfg.n_layers && !st; l++)
        for (int p = 0; p < SC_TEAL_NPROJ && !st; p++) {
            sc_cwic_matrix mx;
            if (!sc_cwic_plan_matrix(pl, l, p, &mx)) continue;
            char name[96];
            const char *pn = sc_linear_name((sc_linear)p);
            snprintf(name, sizeof name, SRT_PROJ_SECTION, (long long)l, pn, SRT_SEC_CWIC_THETA);
            if ((st = put(x, name, mx.theta, mx.ns, mx.in, err))) break;
            snprintf(name, sizeof name, SRT_PROJ_SECTION, (long long)l, pn, SRT_SEC_CWIC_MEAN);
            if ((st = put(x, name, mx.mean, mx.in, 0, err))) break;
            snprintf(name, sizeof name, SRT_PROJ_SECTION, (long long)l, pn, SRT_SEC_CWIC_STD);
            st = put(x, name, mx.std, mx.in, 0, err);
            stored++;
        }
    if (!st) {
        cJSON *cj = cJSON_AddObjectToObject(x->r, SRT_RT_CWIC);
        cJSON_AddNumberToObject(cj, SRT_RT_CWIC_STRIPE, (double)sc_cwic_plan_stripe(pl));
        cJSON_AddNumberToObject(cj, SRT_RT_CWIC_APR, sc_cwic_plan_apr(pl));
        cJSON_AddNumberToObject(cj, SRT_RT_CWIC_MATRICES, (double)stored);
    }
    sc_cwic_plan_free(pl);
    return st;
}

static void skipped(cJSON *r, const char *method, const char *why) {
    cJSON *j = cJSON_AddObjectToObject(r, method);
    cJSON_AddStringToObject(j, SRT_RT_NOT_STORED, why);
}

#define UNROTATED "the calibrated inputs are unrotated; this artifact's are rotated (larosa)"
#define CWIC_PERMUTED "stripes are row groups of the original neuron order; pack without --permute"

/* What pack stores for each calibration method the file holds, in this order. */
static const struct storer {
    const char *calib; /* the calibration method (method.h), also its routing.<name> object */
    sc_status (*store)(rt *x, void *state, sc_err *err);
    const char *rotated;  /* why it is not stored on a folded LaRoSA artifact (NULL: it is) */
    const char *permuted; /* why it is not stored on a permuted one (NULL: it is) */
} storers[] = {
    {"claws", claws, NULL, NULL},
    {"cats", cats, NULL, NULL},
    {"teal", teal, UNROTATED, NULL},
    {"cett", cett, NULL, NULL},
    {"cwic", cwic, UNROTATED, CWIC_PERMUTED},
};

sc_status sc_pack_routing(const sc_model *m, const sc_pack_opts *o, srt_writer *w, const uint32_t *perm_all,
                          const void *larosa, cJSON *r, sc_err *err) {
    section_sink s = {w, o->compress};
    return sc_routing_arrays(m, o, put_section, &s, perm_all, larosa, r, err);
}

sc_status sc_routing_arrays(const sc_model *m, const sc_pack_opts *o, sc_routing_put sink, void *user,
                            const uint32_t *perm_all, const void *larosa, cJSON *r, sc_err *err) {
    cJSON_AddStringToObject(r, SRT_RT_METHOD, o->method ? o->method : srt_method_get(SRT_METHOD_DENSE)->name);
    cJSON_AddNumberToObject(r, SRT_RT_DENSITY, o->density);
    cJSON_AddStringToObject(r, SRT_RT_DENSITY_SOURCE, o->density_default ? "default" : "option");
    if (larosa) {
        cJSON *lj = cJSON_AddObjectToObject(r, SRT_RT_LAROSA);
        cJSON_AddNumberToObject(lj, SRT_RT_LAROSA_IN, o->larosa_in > 0 ? o->larosa_in : SRT_LAROSA_IN);
        cJSON_AddNumberToObject(lj, SRT_RT_LAROSA_H, o->larosa_h > 0 ? o->larosa_h : SRT_LAROSA_H);
        cJSON_AddNumberToObject(lj, SRT_RT_LAROSA_DAMP, sc_larosa_damp(larosa));
    }
    const sc_calib *c = o->calib;
    /* cwic routes from a thresholds file alone (--params thresholds=, holding its mean and std): e.g. a model
     * trained with `train --method cwic --train all`, whose inputs no calibration of the base model describes */
    bool cwic_file = !c && sc_route_method_from_file(sc_route_method_find(o->method), o->params);
    if (!c && !cwic_file) return SC_OK;
    if (cwic_file && (larosa || perm_all))
        return sc_errf(err, SC_EARG, "cwic: %s", larosa ? UNROTATED : CWIC_PERMUTED);
    if (c) {
        cJSON_AddStringToObject(r, SRT_RT_CALIB_MODEL_ID, c->model_id);
        cJSON_AddStringToObject(r, SRT_RT_CALIB_DATA_ID, c->data_id);
    }
    rt x = {m, o, sink, user, perm_all, r, malloc((size_t)m->cfg.ffn_dim * sizeof(float))};
    if (!x.f) return sc_errf(err, SC_ENOMEM, "out of memory");
    sc_status st = cwic_file ? cwic(&x, NULL, err) : SC_OK;
    for (size_t i = 0; c && i < sizeof storers / sizeof storers[0] && !st; i++) {
        const struct storer *s = &storers[i];
        void *state = sc_calib_state(c, s->calib);
        if (!state) continue;
        if (larosa && s->rotated)
            skipped(r, s->calib, s->rotated);
        else if (perm_all && s->permuted)
            skipped(r, s->calib, s->permuted);
        else
            st = s->store(&x, state, err);
    }
    free(x.f);
    return st;
}
