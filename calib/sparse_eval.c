/* sparse_eval.c - evaluation with a neuron router (see sparse_eval.h). */
#include "sparse_eval.h"

#include <stdlib.h>
#include <string.h>

#include "claws.h"
#include "plan.h"
#include "route_method.h"

typedef struct griffin_ctx {
    sc_router *r;
} griffin_ctx;

/* Before each window: a dense pass over the prompt (the first half) to
 * collect s_j, then freeze the top-K set; score only the second half. */
static sc_status griffin_window(void *user, sc_forward *f, const int32_t *ids, int64_t n, int64_t *score_from,
                                sc_err *err) {
    griffin_ctx *g = user;
    int64_t prompt = n / 2;
    if (prompt < 1) prompt = 1;
    sc_router_griffin_begin(g->r, prompt);
    sc_hooks hk = {sc_router_griffin_observe, g->r, SC_TAP_BIT(SC_TAP_H)};
    SC_TRY(sc_forward_run(f, ids, prompt, 0, &hk, NULL, err));
    sc_router_griffin_fix(g->r);
    *score_from = prompt - 1;
    return SC_OK;
}

sc_status sc_eval_sparse(const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                         sc_sparse_eval_result *out, sc_err *err) {
    return sc_eval_sparse_observe(m, d, o, NULL, out, err);
}

sc_status sc_eval_sparse_observe(const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                                 const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err) {
    const sc_route_method *rm = sc_route_method_find(o->method);
    if (!rm) {
        char names[512];
        return sc_errf(err, SC_EARG, "unknown method '%s' (%s)", o->method ? o->method : "",
                       sc_route_method_names(names, sizeof names, false));
    }
    return rm->eval(rm, m, d, o, obs, out, err);
}

/* The neuron routers of sc_router (dense, cats, cats-threshold, claws, griffin, oracle). */
sc_status sc_eval_router(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                         const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    const sc_config *cfg = &m->cfg;
    const srt_router kind = rm->router;
    sc_router_spec spec = {kind, o->density, NULL, NULL, (rm->flags & SC_RM_PREFILL) != 0, obs ? obs->fn : NULL,
                           obs ? obs->user : NULL};
    const double **c = NULL;
    float *thr = NULL;
    sc_status st = SC_OK;
    if (*rm->calib) { /* claws: the multipliers; cats-threshold: the CATS histograms */
        const char *need = rm->calib;
        if (!o->calib) return sc_errf(err, SC_EARG, "method %s needs a calibration file (--calib)", o->method);
        void *state = sc_calib_state(o->calib, need);
        if (!state)
            return sc_errf(err, SC_EARG, "the calibration file holds no '%s' statistics (compute --method %s)",
                           need, need);
        c = calloc((size_t)cfg->n_layers, sizeof *c);
        thr = calloc((size_t)cfg->n_layers, sizeof *thr);
        if (!c || !thr) {
            st = sc_errf(err, SC_ENOMEM, "out of memory");
            goto done;
        }
        for (int64_t l = 0; kind == SRT_ROUTER_CLAWS && l < cfg->n_layers; l++) c[l] = sc_claws_c(state, l);
        /* cats-threshold: the table pack stores (sc_plan_cats_table), read as the runtime reads it */
        for (int64_t l = 0; kind == SRT_ROUTER_CATS_THRESHOLD && l < cfg->n_layers; l++) {
            float table[SRT_THR_GRID];
            thr[l] = sc_plan_cats_table(state, l, table) ? srt_table_threshold(table, 1.0 - o->density) : -1.0f;
            if (l < SC_MAX_LAYERS) out->lc.layer_threshold[l] = thr[l];
        }
        spec.c = c;
        spec.thresholds = thr;
        if (kind == SRT_ROUTER_CATS_THRESHOLD && o->density >= 1.0)
            spec.kind = SRT_ROUTER_DENSE; /* threshold 0 would still drop exact zeros */
    }
    sc_router *r = NULL;
    if ((st = sc_router_create(m, &spec, &r, err))) goto done;
    sc_hooks hk = {sc_router_hook, r, sc_router_taps()};
    griffin_ctx g = {r};
    bool prompt = rm->flags & SC_RM_PROMPT;
    sc_eval_opts eo = {o->ctx, &hk, prompt ? griffin_window : NULL, &g, o->second_half || prompt, o->progress};
    st = sc_eval_run(m, d, &eo, &out->ppl, err);
    if (!st) {
        sc_router_get_stats(r, &out->stats);
        for (int64_t l = 0; l < cfg->n_layers && l < SC_MAX_LAYERS; l++) out->layer_density[l] = out->stats.layer_mean[l];
        out->stats.layer_mean = out->layer_density;
    }
    sc_router_free(r);
done:
    free(c);
    free(thr);
    return st;
}
