/* teal_greedy.c - TEAL's greedy block-wise allocation for one layer.
 *
 * Per-projection sparsities s_p (q, k, v, o, gate, up, down) start at 0.
 * Each round tries one step on every projection that is below SC_TEAL_SMAX:
 * s_p + SC_TEAL_STEP * N_max / N_p (N_p = parameters of the projection,
 * N_max = the layer's largest projection, so every step removes about the
 * same number of parameters), re-runs the layer on the stored dense block
 * inputs with every projection's input thresholded at t_p = icdf(s_p), and
 * commits the step whose layer output is closest to the dense output
 * (squared error summed over the sample, in double; ties go to the earlier
 * projection). Each committed state is a row of the curve: s_q .. s_down
 * and the parameter-weighted (effective) sparsity, which grows with every
 * row. Row 0 is dense. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "teal.h"

typedef struct greedy {
    const sc_model *m;
    int64_t layer;
    const sc_teal_sample *smp;
    sc_forward *f;
    float *work, *dense; /* [max_len, D], [slots, max_len, D] */
    double *thr;         /* [n_layers, NPROJ] */
} greedy;

/* Squared distance of the layer output under thresholds g->thr from the dense output. */
static sc_status output_error(greedy *g, bool store_dense, double *out, sc_err *err) {
    int64_t D = g->m->cfg.dim, stride = g->smp->max_len * D;
    double e = 0.0;
    for (int64_t k = 0; k < g->smp->n_slots; k++) {
        int64_t n = g->smp->len[k];
        if (n <= 0) continue;
        memcpy(g->work, g->smp->x + k * stride, (size_t)(n * D) * sizeof(float));
        SC_TRY(sc_forward_layer(g->f, g->layer, g->work, n, err));
        float *yd = g->dense + k * stride;
        if (store_dense) {
            memcpy(yd, g->work, (size_t)(n * D) * sizeof(float));
            continue;
        }
        for (int64_t i = 0; i < n * D; i++) {
            double d = (double)g->work[i] - (double)yd[i];
            e += d * d;
        }
    }
    *out = e;
    return SC_OK;
}

static void set_thresholds(greedy *g, const double *const cum[SC_TEAL_NTAPS], const double s[SC_TEAL_NPROJ]) {
    for (int p = 0; p < SC_TEAL_NPROJ; p++)
        g->thr[g->layer * SC_TEAL_NPROJ + p] = sc_teal_threshold(cum[sc_teal_tap_of((sc_linear)p)], s[p]);
}

sc_status sc_teal_greedy_layer(const sc_model *m, int64_t layer, const sc_teal_sample *smp,
                               const double *const cum[SC_TEAL_NTAPS], double *curve, int64_t *rows, sc_err *err) {
    const sc_config *c = &m->cfg;
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, T = smp->max_len;
    int64_t wmax = D > F ? D : F;
    wmax = wmax > qd ? wmax : qd;
    *rows = 0;
    memset(curve, 0, SC_TEAL_CURVE_ROWS * SC_TEAL_CURVE_COLS * sizeof(double));
    *rows = 1; /* row 0: dense */
    int64_t used = 0;
    for (int64_t k = 0; k < smp->n_slots; k++) used += smp->len[k] > 0;
    if (used == 0) return SC_OK;
    greedy g = {m, layer, smp, NULL, NULL, NULL, NULL};
    sc_teal_mask mk = {NULL, NULL, T * wmax, NULL, NULL, false};
    g.work = malloc((size_t)(T * D) * sizeof(float));
    g.dense = malloc((size_t)(smp->n_slots * T * D) * sizeof(float));
    g.thr = calloc((size_t)(c->n_layers * SC_TEAL_NPROJ), sizeof(double));
    mk.scratch = malloc((size_t)(T * wmax) * sizeof(float));
    sc_status st = SC_OK;
    if (!g.work || !g.dense || !g.thr || !mk.scratch) {
        st = sc_errf(err, SC_ENOMEM, "teal: out of memory for the greedy allocation");
        goto done;
    }
    mk.thr = g.thr;
    if ((st = sc_forward_create(m, T, T, &g.f, err))) goto done;
    sc_forward_set_linear_hook(g.f, sc_teal_linear_hook, &mk);
    double e;
    if ((st = output_error(&g, true, &e, err))) goto done;
    double np[SC_TEAL_NPROJ], nmax = 0.0, step[SC_TEAL_NPROJ], s[SC_TEAL_NPROJ] = {0};
    sc_teal_proj_params(c, np);
    for (int p = 0; p < SC_TEAL_NPROJ; p++) nmax = np[p] > nmax ? np[p] : nmax;
    for (int p = 0; p < SC_TEAL_NPROJ; p++) step[p] = np[p] > 0 ? SC_TEAL_STEP * nmax / np[p] : 1.0;
    while (*rows < SC_TEAL_CURVE_ROWS) {
        int best = -1;
        double best_e = INFINITY, best_s = 0.0;
        for (int p = 0; p < SC_TEAL_NPROJ; p++) {
            if (s[p] >= SC_TEAL_SMAX) continue;
            double keep = s[p], cand = fmin(s[p] + step[p], SC_TEAL_SMAX);
            s[p] = cand;
            set_thresholds(&g, cum, s);
            s[p] = keep;
            if ((st = output_error(&g, false, &e, err))) goto done;
            if (e < best_e) {
                best_e = e;
                best = p;
                best_s = cand;
            }
        }
        if (best < 0) break;
        s[best] = best_s;
        double *row = curve + *rows * SC_TEAL_CURVE_COLS;
        memcpy(row, s, sizeof s);
        row[SC_TEAL_NPROJ] = sc_teal_effective(c, s);
        (*rows)++;
    }
done:
    sc_forward_free(g.f);
    free(g.work);
    free(g.dense);
    free(g.thr);
    free(mk.scratch);
    return st;
}
