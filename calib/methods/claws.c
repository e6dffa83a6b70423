/* claws.c - CLAWS saliency multipliers (the CLAWS paper, Eq. 2-3). Per layer and
 * neuron, over calibration tokens:
 *   num_j += |h_j| * ||W_d[:, j]||_2 * |g_j|,  g_j = dL/dh_j (backward pass)
 *   den_j += |phi(u_j)|
 * c_j = num_j / den_j (0 when den_j = 0); score r_j = |phi(u_j)| * c_j. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "claws.h"
#include "method.h"

typedef struct claws {
    int64_t L0, L1, F;
    double **num, **den, **c, **wnorm;
    int64_t *count; /* [layers] tokens observed */
} claws;

static void claws_free(void *p) {
    claws *s = p;
    if (!s) return;
    for (int64_t l = 0; l < s->L1 - s->L0; l++) {
        if (s->num) free(s->num[l]);
        if (s->den) free(s->den[l]);
        if (s->c) free(s->c[l]);
        if (s->wnorm) free(s->wnorm[l]);
    }
    free(s->num);
    free(s->den);
    free(s->c);
    free(s->wnorm);
    free(s->count);
    free(s);
}

static sc_status claws_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    claws *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "claws: out of memory");
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->F = m->cfg.ffn_dim;
    int64_t n = s->L1 - s->L0;
    s->num = calloc((size_t)n, sizeof *s->num);
    s->den = calloc((size_t)n, sizeof *s->den);
    s->c = calloc((size_t)n, sizeof *s->c);
    s->wnorm = calloc((size_t)n, sizeof *s->wnorm);
    s->count = calloc((size_t)n, sizeof *s->count);
    bool ok = s->num && s->den && s->c && s->wnorm && s->count;
    for (int64_t l = 0; ok && l < n; l++) {
        ok = (s->num[l] = sc_method_f64(s->F)) && (s->den[l] = sc_method_f64(s->F)) &&
             (s->c[l] = sc_method_f64(s->F)) && (s->wnorm[l] = sc_method_f64(s->F));
    }
    if (!ok) {
        claws_free(s);
        return sc_errf(err, SC_ENOMEM, "claws: out of memory");
    }
    for (int64_t l = 0; m->layers && l < n; l++) { /* (no weights: loading a file) */
        sc_status st = sc_down_col_norms(m, s->L0 + l, s->wnorm[l], err);
        if (st) {
            claws_free(s);
            return st;
        }
    }
    *out = s;
    return SC_OK;
}

static sc_status claws_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    claws *s = p;
    if (ev->layer < s->L0 || ev->layer >= s->L1) return SC_OK;
    int64_t l = ev->layer - s->L0, F = s->F;
    if (!ev->is_grad && ev->tap == SC_TAP_GATE_ACT) {
        double *den = s->den[l];
        for (int64_t t = 0; t < n_scored; t++) {
            const float *a = ev->data + t * F;
            for (int64_t j = 0; j < F; j++) den[j] += fabs((double)a[j]);
        }
        s->count[l] += n_scored;
    } else if (ev->is_grad && ev->tap == SC_TAP_H) {
        double *num = s->num[l];
        const double *w = s->wnorm[l];
        for (int64_t t = 0; t < n_scored; t++) {
            const float *h = ev->act + t * F, *g = ev->data + t * F;
            for (int64_t j = 0; j < F; j++) num[j] += fabs((double)h[j]) * w[j] * fabs((double)g[j]);
        }
    }
    return SC_OK;
}

static sc_status claws_finalize(void *p, sc_err *err) {
    claws *s = p;
    for (int64_t l = 0; l < s->L1 - s->L0; l++)
        for (int64_t j = 0; j < s->F; j++) s->c[l][j] = s->den[l][j] > 0 ? s->num[l][j] / s->den[l][j] : 0.0;
    return SC_OK;
}

const double *sc_claws_c(const void *state, int64_t layer) {
    const claws *s = state;
    return s && layer >= s->L0 && layer < s->L1 ? s->c[layer - s->L0] : NULL;
}

const double *sc_claws_den(const void *state, int64_t layer) {
    const claws *s = state;
    return s && layer >= s->L0 && layer < s->L1 ? s->den[layer - s->L0] : NULL;
}

static int claws_arrays(void *p, sc_array *out, int cap) {
    claws *s = p;
    int n = 0;
    for (int64_t l = 0; l < s->L1 - s->L0; l++) {
        const char *names[3] = {"num", "den", "c"};
        double *data[3] = {s->num[l], s->den[l], s->c[l]};
        for (int k = 0; k < 3 && n < cap; k++) {
            sc_array *a = &out[n++];
            snprintf(a->name, sizeof a->name, "layer%lld.%s", (long long)(s->L0 + l), names[k]);
            a->kind = k < 2 ? SC_ARR_SUM : SC_ARR_DERIVED;
            a->type = SC_ARR_F64;
            a->shape[0] = s->F;
            a->shape[1] = 0;
            a->data = data[k];
        }
        if (n < cap) {
            sc_array *a = &out[n++];
            snprintf(a->name, sizeof a->name, "layer%lld.count", (long long)(s->L0 + l));
            a->kind = SC_ARR_SUM;
            a->type = SC_ARR_I64;
            a->shape[0] = 1;
            a->shape[1] = 0;
            a->data = &s->count[l];
        }
    }
    return n;
}

const sc_method sc_method_claws = {
    "claws",
    "CLAWS saliency multipliers c_j = E|h_j| ||W_d[:,j]|| |dL/dh_j| / E|phi(u_j)| (needs the backward pass)",
    SC_TAP_BIT(SC_TAP_GATE_ACT),
    SC_TAP_BIT(SC_TAP_H),
    claws_create,
    claws_observe,
    claws_finalize,
    claws_arrays,
    claws_free,
    NULL,
    NULL,
    NULL,
    "",
    NULL,
    NULL,
};

/* ---- the routing plan (claws.h) ---- */

void sc_plan_claws_layer(const double *c, int64_t F, float *out) {
    for (int64_t j = 0; j < F; j++) out[j] = c ? (float)c[j] : 1.0f;
}
