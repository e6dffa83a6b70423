/* cwic.c - the CWIC statistics method (see cwic.h). */
#include "cwic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "method.h"
#include "params.h"

static const sc_tap cwic_taps[SC_CWIC_NTAPS] = {SC_TAP_ATTN_IN, SC_TAP_ATTN_CTX, SC_TAP_MLP_IN, SC_TAP_H};
static const char *cwic_tap_names[SC_CWIC_NTAPS] = {"attn_in", "attn_ctx", "mlp_in", "h"};

/* One (layer, tap): SUM arrays, DERIVED arrays, and the running EMA (not saved). */
typedef struct cw_stat {
    int64_t w;
    int64_t count;
    double *sum, *sum2, *ema_w, *ema_w2;        /* SUM; ema_w* = count * bias-corrected EMA */
    double *mean, *std, *ema_mean, *ema_std;    /* DERIVED */
    double *run, *run2;                         /* running EMA of this process */
} cw_stat;

typedef struct cwic {
    int64_t L0, L1;
    double beta;
    cw_stat *st; /* [nl, 4] */
} cwic;

static void cwic_free(void *p) {
    cwic *s = p;
    if (!s) return;
    for (int64_t k = 0; s->st && k < (s->L1 - s->L0) * SC_CWIC_NTAPS; k++) free(s->st[k].sum);
    free(s->st);
    free(s);
}

static sc_status cwic_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    double beta = 0.99;
    const sc_param spec = {"cwic_beta", SC_PARAM_NUM, 0, 1, NULL, &beta, 0, NULL};
    SC_TRY(sc_params_read(o->params, &spec, 1, "cwic", err));
    if (!(beta < 1.0)) return sc_errf(err, SC_EARG, "cwic: parameter cwic_beta=%g is not in [0, 1)", beta);
    cwic *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "cwic: out of memory");
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->beta = beta;
    int64_t nl = s->L1 - s->L0;
    /* a shape-only model (loading a file) knows dim and ffn_dim only: the
     * attention output width is n_heads * head_dim, which equals dim for every
     * supported family except when head_dim is given explicitly */
    int64_t qd = m->cfg.n_heads * m->cfg.head_dim;
    if (qd <= 0) qd = m->cfg.dim;
    int64_t widths[SC_CWIC_NTAPS] = {m->cfg.dim, qd, m->cfg.dim, m->cfg.ffn_dim};
    s->st = calloc((size_t)(nl * SC_CWIC_NTAPS), sizeof *s->st);
    bool ok = s->st != NULL;
    for (int64_t k = 0; ok && k < nl * SC_CWIC_NTAPS; k++) {
        cw_stat *c = &s->st[k];
        c->w = widths[k % SC_CWIC_NTAPS];
        c->sum = calloc((size_t)(10 * c->w), sizeof(double)); /* one block, carved */
        if (!(ok = c->sum != NULL)) break;
        double *p = c->sum;
        c->sum2 = p + c->w;
        c->ema_w = p + 2 * c->w;
        c->ema_w2 = p + 3 * c->w;
        c->mean = p + 4 * c->w;
        c->std = p + 5 * c->w;
        c->ema_mean = p + 6 * c->w;
        c->ema_std = p + 7 * c->w;
        c->run = p + 8 * c->w;
        c->run2 = p + 9 * c->w;
    }
    if (!ok) {
        cwic_free(s);
        return sc_errf(err, SC_ENOMEM, "cwic: out of memory");
    }
    *out = s;
    return SC_OK;
}

static sc_status cwic_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    cwic *s = p;
    if (ev->is_grad || ev->layer < s->L0 || ev->layer >= s->L1) return SC_OK;
    int tap = -1;
    for (int k = 0; k < SC_CWIC_NTAPS; k++)
        if (ev->tap == cwic_taps[k]) tap = k;
    if (tap < 0) return SC_OK;
    cw_stat *c = &s->st[(ev->layer - s->L0) * SC_CWIC_NTAPS + tap];
    if (ev->width != c->w)
        return sc_errf(err, SC_EARG, "cwic: %s has %lld channels, expected %lld", cwic_tap_names[tap],
                       (long long)ev->width, (long long)c->w);
    double b = s->beta;
    for (int64_t t = 0; t < n_scored; t++) {
        const float *x = ev->data + t * c->w;
        for (int64_t i = 0; i < c->w; i++) {
            double v = (double)x[i];
            c->sum[i] += v;
            c->sum2[i] += v * v;
            c->run[i] = b * c->run[i] + (1.0 - b) * v;
            c->run2[i] = b * c->run2[i] + (1.0 - b) * v * v;
        }
    }
    c->count += n_scored;
    double corr = 1.0 - pow(b, (double)c->count);
    for (int64_t i = 0; i < c->w && corr > 0; i++) {
        c->ema_w[i] = (double)c->count * c->run[i] / corr;
        c->ema_w2[i] = (double)c->count * c->run2[i] / corr;
    }
    return SC_OK;
}

static sc_status cwic_finalize(void *p, sc_err *err) {
    cwic *s = p;
    for (int64_t k = 0; k < (s->L1 - s->L0) * SC_CWIC_NTAPS; k++) {
        cw_stat *c = &s->st[k];
        double n = (double)c->count;
        for (int64_t i = 0; i < c->w; i++) {
            double m = n > 0 ? c->sum[i] / n : 0.0, q = n > 0 ? c->sum2[i] / n : 0.0;
            double em = n > 0 ? c->ema_w[i] / n : 0.0, eq = n > 0 ? c->ema_w2[i] / n : 0.0;
            c->mean[i] = m;
            c->std[i] = sqrt(fmax(0.0, q - m * m));
            c->ema_mean[i] = em;
            c->ema_std[i] = sqrt(fmax(0.0, eq - em * em));
        }
    }
    return SC_OK;
}

const double *sc_cwic_stat(void *state, int64_t layer, int tap, const char *which, int64_t *width) {
    cwic *s = state;
    if (!s || layer < s->L0 || layer >= s->L1 || tap < 0 || tap >= SC_CWIC_NTAPS) return NULL;
    cw_stat *c = &s->st[(layer - s->L0) * SC_CWIC_NTAPS + tap];
    *width = c->w;
    if (!strcmp(which, "mean")) return c->mean;
    if (!strcmp(which, "std")) return c->std;
    if (!strcmp(which, "ema_mean")) return c->ema_mean;
    if (!strcmp(which, "ema_std")) return c->ema_std;
    return NULL;
}

int64_t sc_cwic_count(void *state, int64_t layer, int tap) {
    cwic *s = state;
    if (!s || layer < s->L0 || layer >= s->L1 || tap < 0 || tap >= SC_CWIC_NTAPS) return 0;
    return s->st[(layer - s->L0) * SC_CWIC_NTAPS + tap].count;
}

static int cwic_arrays(void *p, sc_array *out, int cap) {
    cwic *s = p;
    int n = 0;
    static const char *names[8] = {"sum", "sum2", "ema_wsum", "ema_wsum2", "mean", "std", "ema_mean", "ema_std"};
    for (int64_t k = 0; k < (s->L1 - s->L0) * SC_CWIC_NTAPS; k++) {
        cw_stat *c = &s->st[k];
        long long L = (long long)(s->L0 + k / SC_CWIC_NTAPS);
        const char *tn = cwic_tap_names[k % SC_CWIC_NTAPS];
        for (int j = 0; j < 8 && n < cap; j++) {
            sc_array *a = &out[n++];
            snprintf(a->name, sizeof a->name, "layer%lld.%s.%s", L, tn, names[j]);
            a->kind = j < 4 ? SC_ARR_SUM : SC_ARR_DERIVED;
            a->type = SC_ARR_F64;
            a->shape[0] = c->w;
            a->shape[1] = 0;
            a->data = c->sum + j * c->w;
            a->concat_data = NULL;
            a->concat_rows = NULL;
        }
        if (n < cap) {
            sc_array *a = &out[n++];
            snprintf(a->name, sizeof a->name, "layer%lld.%s.count", L, tn);
            a->kind = SC_ARR_SUM;
            a->type = SC_ARR_I64;
            a->shape[0] = 1;
            a->shape[1] = 0;
            a->data = &c->count;
            a->concat_data = NULL;
            a->concat_rows = NULL;
        }
    }
    return n;
}

/* this process's running EMAs (run, run2: [2, w] per layer and tap; checkpoints only) */
static int cwic_resume_arrays(void *p, sc_array *out, int cap) {
    cwic *s = p;
    int n = 0;
    for (int64_t k = 0; k < (s->L1 - s->L0) * SC_CWIC_NTAPS && n < cap; k++) {
        cw_stat *c = &s->st[k];
        sc_array *a = &out[n++];
        memset(a, 0, sizeof *a);
        snprintf(a->name, sizeof a->name, "layer%lld.%s.run", (long long)(s->L0 + k / SC_CWIC_NTAPS),
                 cwic_tap_names[k % SC_CWIC_NTAPS]);
        a->kind = SC_ARR_SUM;
        a->type = SC_ARR_F64;
        a->shape[0] = 2;
        a->shape[1] = c->w;
        a->data = c->run; /* run2 follows run in the block */
    }
    return n;
}

const sc_method sc_method_cwic = {
    "cwic",
    "CWIC stripes: per-channel mean and std (exact and EMA, beta 0.99) of every linear input",
    SC_TAP_BIT(SC_TAP_ATTN_IN) | SC_TAP_BIT(SC_TAP_ATTN_CTX) | SC_TAP_BIT(SC_TAP_MLP_IN) | SC_TAP_BIT(SC_TAP_H),
    0,
    cwic_create,
    cwic_observe,
    cwic_finalize,
    cwic_arrays,
    cwic_free,
    cwic_resume_arrays,
    NULL,
    NULL,
    "cwic_beta",
    NULL,
    NULL,
};
