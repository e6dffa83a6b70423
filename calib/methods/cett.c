/* cett.c - the CETT method (a stored sample of h per layer, see cett.h) and
 * the CLADA method (a stored sample of per-token surprisal and entropy).
 * Both samples are CONCAT arrays: shards append their rows when merged.
 *
 * cett parameters: sample=N tokens per layer and shard (default 4096),
 * stride=K (keep every K-th scored token, default 1), target=C (the CETT
 * target of the thresholds saved for inspection, default 0.2; eval searches
 * again for its own target). clada: sample=N tokens (default 1e6). */
#include "cett.h"
#include "srt_route.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "lc_util.h"
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
    if (!isnan(density) && sc_lc_param_has(params, "target"))
        return sc_errf(err, SC_EARG, "%s: give --density D (per-layer thresholds keeping that fraction of neurons on the "
                                     "calibration sample) or --params target=C (a CETT target), not both", who);
    if (!isnan(density)) {
        if (!(density > 0 && density <= 1))
            return sc_errf(err, SC_EARG, "%s: --density %g is outside (0, 1]", who, density);
        out->density = density;
        return SC_OK;
    }
    return sc_lc_param(params, "target", 0.2, 0, 1, &out->target, who, err);
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
    out->threshold = srt_table_threshold(table, 1.0 - goal->density);
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
    double cap, stride, target;
    SC_TRY(sc_lc_param(o->params, "sample", 4096, 1, 1e9, &cap, "cett", err));
    SC_TRY(sc_lc_param(o->params, "stride", 1, 1, 1e9, &stride, "cett", err));
    SC_TRY(sc_lc_param(o->params, "target", 0.2, 0, 1, &target, "cett", err));
    cett *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "cett: out of memory");
    s->m = m->layers ? m : NULL;
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->F = m->cfg.ffn_dim;
    s->D = m->cfg.dim;
    s->cap = (int64_t)cap;
    s->stride = (int64_t)stride;
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
    double cap;
    SC_TRY(sc_lc_param(o->params, "signals", 1e6, 1, 1e10, &cap, "clada", err));
    clada *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "clada: out of memory");
    s->cap = (int64_t)cap;
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
