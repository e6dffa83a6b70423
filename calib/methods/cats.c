/* cats.c - CATS: per-layer fine histogram of |phi(u_j)| over calibration
 * tokens; the threshold for sparsity s is the left edge of the bin where
 * the cumulative fraction crosses s. Bins: [0, lo) as bin 0, then
 * SC_CATS_BINS log-spaced bins over [lo, hi), then [hi, inf). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cats.h"
#include "method.h"
#include "srt_route.h" /* the threshold grid */

#define LO 1e-7
#define HI 1e4

double sc_cats_bin_left(int64_t b) {
    if (b <= 0) return 0.0;
    if (b > SC_CATS_BINS) return HI;
    return LO * pow(HI / LO, (double)(b - 1) / (double)SC_CATS_BINS);
}

int64_t sc_cats_bin_of(double v) {
    if (!(v >= LO)) return 0; /* also NaN */
    if (v >= HI) return SC_CATS_BINS + 1;
    int64_t b = 1 + (int64_t)floor(log(v / LO) / log(HI / LO) * (double)SC_CATS_BINS);
    if (b < 1) b = 1;
    if (b > SC_CATS_BINS) b = SC_CATS_BINS;
    return b;
}

float sc_cats_threshold(const int64_t *hist, double sparsity) {
    double total = 0; /* in double: no count can overflow it (loaded files are checked, cats_validate) */
    for (int64_t b = 0; b < SC_CATS_NB; b++) total += (double)hist[b];
    if (total == 0 || sparsity <= 0) return 0.0f;
    double target = sparsity * total, cum = 0;
    for (int64_t b = 0; b < SC_CATS_NB; b++) {
        cum += (double)hist[b];
        if (cum >= target) return (float)sc_cats_bin_left(b);
    }
    return (float)HI;
}

typedef struct cats {
    int64_t L0, L1, F;
    int64_t *hist; /* [layers, NB] */
    double *thr;   /* [layers, SRT_THR_GRID] thresholds at the grid's sparsities (derived, for inspection) */
    double *act;   /* [layers, F] sum of |phi(u_j)| per neuron (activity, for neuron permutation) */
} cats;

static void cats_free(void *p) {
    cats *s = p;
    if (!s) return;
    free(s->hist);
    free(s->thr);
    free(s->act);
    free(s);
}

static sc_status cats_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    cats *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "cats: out of memory");
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->F = m->cfg.ffn_dim;
    s->hist = calloc((size_t)((s->L1 - s->L0) * SC_CATS_NB), sizeof *s->hist);
    s->thr = calloc((size_t)((s->L1 - s->L0) * SRT_THR_GRID), sizeof *s->thr);
    s->act = calloc((size_t)((s->L1 - s->L0) * s->F), sizeof *s->act);
    if (!s->hist || !s->thr || !s->act) {
        cats_free(s);
        return sc_errf(err, SC_ENOMEM, "cats: out of memory");
    }
    *out = s;
    return SC_OK;
}

static sc_status cats_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    cats *s = p;
    if (ev->is_grad || ev->tap != SC_TAP_GATE_ACT || ev->layer < s->L0 || ev->layer >= s->L1) return SC_OK;
    int64_t *h = s->hist + (ev->layer - s->L0) * SC_CATS_NB;
    double *act = s->act + (ev->layer - s->L0) * s->F;
    for (int64_t t = 0; t < n_scored; t++)
        for (int64_t j = 0; j < s->F; j++) {
            double v = fabs((double)ev->data[t * s->F + j]);
            h[sc_cats_bin_of(v)]++;
            act[j] += v;
        }
    return SC_OK;
}

static sc_status cats_finalize(void *p, sc_err *err) {
    cats *s = p;
    for (int64_t l = 0; l < s->L1 - s->L0; l++)
        for (int k = 0; k < SRT_THR_GRID; k++)
            s->thr[l * SRT_THR_GRID + k] = sc_cats_threshold(s->hist + l * SC_CATS_NB, srt_thr_grid(k));
    return SC_OK;
}

/* Every scored position adds one count per neuron to each layer's histogram. */
static sc_status cats_validate(void *p, int64_t n_tokens, sc_err *err) {
    cats *s = p;
    int64_t want;
    if (__builtin_mul_overflow(n_tokens, s->F, &want) || want > SC_COUNT_MAX)
        return sc_errf(err, SC_EFORMAT, "cats: %lld tokens x %lld neurons overflow the histogram counts",
                       (long long)n_tokens, (long long)s->F);
    for (int64_t l = 0; l < s->L1 - s->L0; l++) {
        int64_t total = 0;
        for (int64_t b = 0; b < SC_CATS_NB; b++) {
            int64_t h = s->hist[l * SC_CATS_NB + b];
            if (h < 0 || __builtin_add_overflow(total, h, &total) || total > want) total = -1;
            if (total < 0) break;
        }
        if (total != want)
            return sc_errf(err, SC_EFORMAT,
                           "cats: layer %lld's histogram does not count %lld tokens x %lld neurons = %lld values",
                           (long long)(s->L0 + l), (long long)n_tokens, (long long)s->F, (long long)want);
    }
    return SC_OK;
}

const int64_t *sc_cats_hist(const void *state, int64_t layer) {
    const cats *s = state;
    if (!s || layer < s->L0 || layer >= s->L1) return NULL;
    return s->hist + (layer - s->L0) * SC_CATS_NB;
}

const double *sc_cats_activity(const void *state, int64_t layer) {
    const cats *s = state;
    if (!s || layer < s->L0 || layer >= s->L1) return NULL;
    return s->act + (layer - s->L0) * s->F;
}

static int cats_arrays(void *p, sc_array *out, int cap) {
    cats *s = p;
    int n = 0;
    for (int64_t l = 0; l < s->L1 - s->L0 && n + 2 < cap; l++) {
        sc_array *a = &out[n++];
        snprintf(a->name, sizeof a->name, "layer%lld.hist", (long long)(s->L0 + l));
        a->kind = SC_ARR_SUM;
        a->type = SC_ARR_I64;
        a->shape[0] = SC_CATS_NB;
        a->shape[1] = 0;
        a->data = s->hist + l * SC_CATS_NB;
        a = &out[n++];
        snprintf(a->name, sizeof a->name, "layer%lld.thresholds", (long long)(s->L0 + l));
        a->kind = SC_ARR_DERIVED;
        a->type = SC_ARR_F64;
        a->shape[0] = SRT_THR_GRID;
        a->shape[1] = 0;
        a->data = s->thr + l * SRT_THR_GRID;
        a = &out[n++];
        snprintf(a->name, sizeof a->name, "layer%lld.activity", (long long)(s->L0 + l));
        a->kind = SC_ARR_SUM;
        a->type = SC_ARR_F64;
        a->shape[0] = s->F;
        a->shape[1] = 0;
        a->data = s->act + l * s->F;
    }
    return n;
}

const sc_method sc_method_cats = {
    "cats",
    "CATS: per-layer histogram of |phi(u)| (thresholds for any density; top-K needs no calibration)",
    SC_TAP_BIT(SC_TAP_GATE_ACT),
    0,
    cats_create,
    cats_observe,
    cats_finalize,
    cats_arrays,
    cats_free,
    NULL,
    NULL,
    cats_validate,
    "",
    NULL,
    NULL,
};

/* ---- the routing plan (cats.h) ---- */

bool sc_plan_cats_table(const void *cats_state, int64_t layer, float out[SRT_THR_GRID]) {
    const int64_t *hist = sc_cats_hist(cats_state, layer);
    if (!hist) return false;
    for (int i = 0; i < SRT_THR_GRID; i++) out[i] = sc_cats_threshold(hist, srt_thr_grid(i));
    return true;
}
