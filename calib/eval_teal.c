/* eval_teal.c - TEAL threshold routing in eval (see eval_input.h).
 *
 * "teal": every projection's input is thresholded at the sparsity
 * s = 1 - density of its tap's threshold table, the one pack stores
 * (sc_plan_teal_table) read as the runtime reads it (srt_table_threshold;
 * q, k, v share the attn_in threshold; gate, up share mlp_in). The hook's
 * |x| > t in double on the f32 t is the runtime's f32 |x| > t exactly. "teal-greedy": per layer, the
 * row of the stored allocation curve whose effective sparsity is nearest
 * s = 1 - density gives each projection its own sparsity. Every linear of
 * every token is routed (no dense prefix); the achieved sparsity of each
 * projection's input is counted as it runs. "teal-cats" (rm->router CATS):
 * teal's thresholds on every input but h, which the CATS router (router.h)
 * sparsifies instead, top-K of |phi(u_j)| at the same density: the down
 * projection's input sparsity is the router's, its MLP density the stats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval_input.h"
#include "plan.h"
#include "route_method.h"
#include "teal.h"

typedef struct teal_eval {
    sc_teal_mask mk;
} teal_eval;

static sc_status install(void *user, sc_forward *f, const int32_t *ids, int64_t n, int64_t *score_from, sc_err *err) {
    teal_eval *t = user;
    sc_forward_set_linear_hook(f, sc_teal_linear_hook, &t->mk);
    return SC_OK;
}

void sc_input_result_fill(const sc_config *c, const double *dropped, const double *seen, sc_sparse_eval_result *out) {
    double np[SC_TEAL_NPROJ], ntot = 0.0, active = 0.0, eff = 0.0;
    sc_teal_proj_params(c, np);
    for (int p = 0; p < SC_TEAL_NPROJ; p++) ntot += np[p];
    double dmin = 1.0, dmax = 0.0, mlp = 0.0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        double le = 0.0;
        for (int p = 0; p < SC_TEAL_NPROJ; p++) {
            int64_t k = l * SC_TEAL_NPROJ + p;
            double s = seen[k] > 0 ? dropped[k] / seen[k] : 0.0;
            out->in.proj_sparsity[p] += s / (double)c->n_layers;
            le += np[p] * s / ntot;
            active += np[p] * (1.0 - s);
            if (p >= SC_LIN_GATE) mlp += np[p] * (1.0 - s);
        }
        if (l < SC_MAX_LAYERS) {
            out->in.layer_effective[l] = le;
            out->layer_density[l] = 1.0 - le;
        }
        eff += le / (double)c->n_layers;
        dmin = fmin(dmin, 1.0 - le);
        dmax = fmax(dmax, 1.0 - le);
    }
    out->in.valid = true;
    out->in.effective_sparsity = eff;
    out->in.active_linear_params = active;
    out->in.dense_linear_params = ntot * (double)c->n_layers;
    out->in.apr = active > 0 ? out->in.dense_linear_params / active : INFINITY;
    out->stats.density_mean = 1.0 - eff;
    out->stats.density_min = dmin;
    out->stats.density_max = dmax;
    out->stats.layer_mean = out->layer_density;
    out->stats.active_mlp_params = mlp;
    out->stats.rows = out->ppl.n_tokens;
}

sc_status sc_eval_teal(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                       const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    const sc_config *c = &m->cfg;
    bool greedy = rm->flags & SC_RM_GREEDY;
    if (!o->calib) return sc_errf(err, SC_EARG, "method %s needs a calibration file (--calib)", o->method);
    void *state = sc_calib_state(o->calib, "teal");
    if (!state)
        return sc_errf(err, SC_EARG, "the calibration file holds no 'teal' statistics (compute --method teal)");
    if (!(o->density >= 0.0 && o->density <= 1.0))
        return sc_errf(err, SC_EARG, "density %g is not in [0, 1]", o->density);
    double target = 1.0 - o->density;
    int64_t L = c->n_layers, D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim;
    int64_t wmax = D > F ? D : F;
    wmax = wmax > qd ? wmax : qd;
    int64_t ctx = o->ctx, longest = 2;
    for (size_t i = 0; i < d->n_seqs; i++) longest = (int64_t)d->seqs[i].n > longest ? (int64_t)d->seqs[i].n : longest;
    teal_eval te;
    memset(&te, 0, sizeof te);
    const bool neuron = rm->router != SRT_ROUTER_DENSE; /* teal-cats: the router owns h */
    sc_router *r = NULL;
    double *thr = calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(double)), *cum = malloc(SC_TEAL_NB * sizeof(double));
    te.mk.dropped = calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(double));
    te.mk.seen = calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(double));
    te.mk.cap = (ctx < longest ? ctx : longest) * wmax;
    te.mk.scratch = malloc((size_t)te.mk.cap * sizeof(float));
    te.mk.thr = thr;
    sc_status st = SC_OK;
    if (!thr || !cum || !te.mk.dropped || !te.mk.seen || !te.mk.scratch) {
        st = sc_errf(err, SC_ENOMEM, "out of memory");
        goto done;
    }
    if (greedy && (st = sc_teal_ensure_curves(state, m, err))) goto done;
    for (int64_t l = 0; l < L; l++) {
        if (!sc_teal_hist(state, l, 0)) continue; /* not calibrated: dense */
        double s[SC_TEAL_NPROJ];
        for (int p = 0; p < SC_TEAL_NPROJ; p++) s[p] = target;
        if (greedy) {
            int64_t rows;
            const double *curve = sc_teal_curve(state, l, &rows);
            if (rows < 2 && target > 0) {
                st = sc_errf(err, SC_EARG,
                             "teal-greedy: layer %lld has no allocation curve (compute with teal_greedy=1 on "
                             "sequences that fill the sample)", (long long)l);
                goto done;
            }
            const double *row = curve + sc_teal_lookup(curve, rows, target) * SC_TEAL_CURVE_COLS;
            for (int p = 0; p < SC_TEAL_NPROJ; p++) s[p] = row[p];
        }
        if (!greedy) { /* the table pack stores, read as the runtime reads it (srt_table_threshold) */
            float table[SC_TEAL_NTAPS * SRT_THR_GRID];
            sc_plan_teal_table(state, l, cum, table);
            for (int p = 0; p < SC_TEAL_NPROJ; p++) {
                const float *row = table + sc_teal_tap_of((sc_linear)p) * SRT_THR_GRID;
                thr[l * SC_TEAL_NPROJ + p] = neuron && p == SC_LIN_DOWN ? 0.0 : srt_table_threshold(row, target);
            }
            continue;
        }
        for (int p = 0; p < SC_TEAL_NPROJ; p++) {
            sc_teal_cumulative(sc_teal_hist(state, l, sc_teal_tap_of((sc_linear)p)), cum);
            thr[l * SC_TEAL_NPROJ + p] = sc_teal_threshold(cum, s[p]);
        }
    }
    sc_hooks hk = {sc_router_hook, NULL, sc_router_taps()};
    if (neuron) {
        sc_router_spec spec = {rm->router, o->density, NULL, NULL, false, obs ? obs->fn : NULL, obs ? obs->user : NULL};
        if ((st = sc_router_create(m, &spec, &r, err))) goto done;
        hk.user = r;
    }
    sc_eval_opts eo = {ctx, neuron ? &hk : NULL, install, &te, o->second_half, o->progress};
    if ((st = sc_eval_run(m, d, &eo, &out->ppl, err))) goto done;
    sc_router_stats rs = {0};
    if (neuron) { /* the router's drops are the down projection's input sparsity */
        sc_router_get_stats(r, &rs);
        for (int64_t l = 0; l < L; l++) {
            int64_t k = l * SC_TEAL_NPROJ + SC_LIN_DOWN;
            te.mk.dropped[k] = te.mk.seen[k] * (1.0 - rs.layer_mean[l]);
        }
    }
    sc_input_result_fill(c, te.mk.dropped, te.mk.seen, out);
    out->in.target = target;
    if (neuron) { /* density: the MLP neurons' */
        out->stats = rs;
        for (int64_t l = 0; l < L && l < SC_MAX_LAYERS; l++) out->layer_density[l] = rs.layer_mean[l];
        out->stats.layer_mean = out->layer_density;
    }
done:
    sc_router_free(r);
    free(thr);
    free(cum);
    free(te.mk.dropped);
    free(te.mk.seen);
    free(te.mk.scratch);
    return st;
}
