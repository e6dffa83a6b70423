/* cwic.c - CWIC stripes (the CWIC paper), the whole method in one file (see cwic.h): the statistics
 * (mean and std of every linear input), the thresholds fitted from them or imported, and eval's routing, which
 * applies the runtime's rule (kernels/srt_route.h: srt_cwic_center, srt_cwic_stripe_live) so that eval on the
 * source model and `run --method cwic` on an artifact route alike. */
#include "cwic.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "eval_input.h"
#include "method.h"
#include "params.h"
#include "route_method.h"
#include "safetensors.h"
#include "srt_route.h"
#include "teal.h"

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

/* ---- routing: thresholds fitted or imported, and eval (see cwic.h, eval_input.h) ----------------------------
 *
 * `eval --method cwic --calib C.scal --params apr=2,stripe=512` fits the
 * thresholds without training; `--params thresholds=T.safetensors` imports
 * them; `export=T.safetensors` writes what was used. With neither apr nor
 * thresholds, apr = 1 / --density (density 1: every stripe-column active).
 *
 * Fit for a target APR R, per matrix W [out, in], stripe s, channel i:
 * dropping stripe-column (s, i) when |z_i| < tau (z = x - mean) costs the
 * expected squared output error E_si(tau) = ||W[s, i]||^2 E[z_i^2; |z_i| < tau]
 * and saves n_s P(|z_i| < tau) parameters. The marginal error per saved
 * parameter, dE/dsaved = ||W[s, i]||^2 tau^2 / n_s, is equalised across the
 * stripe-columns of the matrix: tau_si = c sqrt(n_s) / ||W[s, i]||, i.e.
 * theta_si = tau_si / std_i. c is found by bisection so that the expected
 * active parameters under a model of z_i with the calibrated std (dist=gauss:
 * N(0, std_i^2), P(|z| >= tau) = erfc(tau / (std sqrt 2)); dist=laplace:
 * exp(-sqrt(2) tau / std)) equal out * in / R; every matrix gets the same APR.
 *
 * Safetensors thresholds: tensors "layers.L.P.theta" (F32/F16/BF16, shape
 * [n_stripes, in], P in q k v o gate up down) for every layer, optional
 * "layers.L.P.mean" and "layers.L.P.std" [in] (then the file's statistics
 * replace the calibration's), and __metadata__ "stripe_size". */
double sc_cwic_linear(float *y, const float *x, const float *W, const float *b, const float *mean,
                      const float *wmean, const float *tau, int64_t T, int64_t counted, int64_t in, int64_t out,
                      int64_t S, float *z, float *zs, uint32_t *idx) {
    double active = 0.0;
    for (int64_t t = 0; t < T; t++) srt_cwic_center(z + t * in, x + t * in, mean, in);
    for (int64_t r0 = 0, s = 0; r0 < out; r0 += S, s++) {
        int64_t rows = out - r0 < S ? out - r0 : S, cols = 0;
        const float *ts = tau + s * in;
        memset(zs, 0, (size_t)(T * in) * sizeof(float));
        for (int64_t t = 0; t < T; t++) { /* the runtime's rule, token by token (srt_route.h) */
            int64_t n = srt_cwic_stripe_live(idx, z + t * in, ts, in);
            for (int64_t i = 0; i < n; i++) zs[t * in + idx[i]] = z[t * in + idx[i]];
            cols += t < counted ? n : 0;
        }
        active += (double)rows * (double)cols;
        /* y[:, r0 : r0+rows] = zs[T, in] W[r0 : r0+rows, :]^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)rows, (blasint)in, 1.0f, zs,
                    (blasint)in, W + r0 * in, (blasint)in, 0.0f, y + r0, (blasint)out);
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < out; o++) y[t * out + o] += wmean[o] + (b ? b[o] : 0.0f);
    return active;
}

/* Per (layer, projection) routing data. */
typedef struct cw_mat {
    int64_t in, out, S, ns;
    float *theta, *tau;      /* [ns, in] */
    float *mean, *std, *wmean; /* [in], [in], [out] */
    bool all_zero;           /* every theta 0: the output is left dense (exactly) */
    bool has_stats;          /* mean and std known (calibration or file) */
} cw_mat;

typedef struct cw_eval {
    const sc_model *m;
    cw_mat *mats; /* [L, 7] (NULL theta: dense) */
    float *z, *zs;
    uint32_t *idx; /* [max in] */
    int64_t cap;
    double *dropped, *seen; /* [L, 7] in parameters */
} cw_eval;

static sc_status cw_hook(void *user, const sc_linear_event *ev, sc_err *err) {
    cw_eval *e = user;
    int64_t k = ev->layer * SC_TEAL_NPROJ + ev->which;
    cw_mat *c = &e->mats[k];
    /* the last row of a window is only predicted (run --score never steps it): not counted */
    const int64_t counted = ev->n_tokens > 1 ? ev->n_tokens - 1 : ev->n_tokens;
    double dense = (double)counted * (double)ev->in * (double)ev->out;
    e->seen[k] += dense;
    if (!c->theta || c->all_zero) return SC_OK;
    if (ev->n_tokens * ev->in > e->cap) return sc_errf(err, SC_EARG, "cwic: window exceeds the scratch");
    double act = sc_cwic_linear(ev->y, ev->x, ev->W, ev->b, c->mean, c->wmean, c->tau, ev->n_tokens, counted, ev->in,
                                ev->out, c->S, e->z, e->zs, e->idx);
    e->dropped[k] += dense - act;
    return SC_OK;
}

static sc_status install(void *user, sc_forward *f, const int32_t *ids, int64_t n, int64_t *from, sc_err *err) {
    sc_forward_set_linear_hook(f, cw_hook, user);
    return SC_OK;
}

static sc_status proj_weight(const sc_model *m, int64_t l, int p, const float **out, sc_err *err) {
    const sc_layer *L;
    SC_TRY(sc_model_layer(m, l, &L, err));
    const float *w[SC_TEAL_NPROJ] = {L->wq, L->wk, L->wv, L->wo, L->wg, L->wu, L->wd};
    *out = w[p];
    return SC_OK;
}

static void proj_shape(const sc_config *c, int p, int64_t *in, int64_t *out) {
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    int64_t ins[SC_TEAL_NPROJ] = {D, D, D, qd, D, D, F}, outs[SC_TEAL_NPROJ] = {qd, kvd, kvd, D, F, F, D};
    *in = ins[p];
    *out = outs[p];
}

/* Expected active parameters of a matrix under the Gaussian model for scale c. */
static double expected_active(const cw_mat *c, const double *u, double scale, bool laplace) {
    double a = 0.0;
    for (int64_t s = 0; s < c->ns; s++) {
        int64_t rows = c->out - s * c->S < c->S ? c->out - s * c->S : c->S;
        for (int64_t i = 0; i < c->in; i++) {
            double us = u[s * c->in + i]; /* ||W[s,i]|| std_i / sqrt(n_s) */
            if (us > 0) a += (double)rows * (laplace ? exp(-scale * 1.4142135623730951 / us) : erfc(scale / (us * 1.4142135623730951)));
        }
    }
    return a;
}

static void fit_matrix(cw_mat *c, const float *W, double apr, bool laplace, double *u) {
    for (int64_t s = 0; s < c->ns; s++) {
        int64_t r0 = s * c->S, rows = c->out - r0 < c->S ? c->out - r0 : c->S;
        for (int64_t i = 0; i < c->in; i++) {
            double w2 = 0.0;
            for (int64_t r = r0; r < r0 + rows; r++) w2 += (double)W[r * c->in + i] * W[r * c->in + i];
            u[s * c->in + i] = sqrt(w2) * (double)c->std[i] / sqrt((double)rows);
        }
    }
    double want = (double)c->in * (double)c->out / apr, lo = 0.0, hi = 1.0;
    for (int k = 0; k < 200 && expected_active(c, u, hi, laplace) > want; k++) hi *= 2.0;
    for (int k = 0; k < 100; k++) {
        double mid = 0.5 * (lo + hi);
        if (expected_active(c, u, mid, laplace) > want) lo = mid;
        else hi = mid;
    }
    /* theta = tau / std, tau = c sqrt(n_s) / ||W[s,i]||, so theta = c / u */
    for (int64_t j = 0; j < c->ns * c->in; j++) c->theta[j] = u[j] > 0 ? (float)(hi / u[j]) : INFINITY;
}

static sc_status load_file(const char *path, const sc_model *m, cw_mat *mats, int64_t stripe, sc_err *err) {
    const sc_config *cfg = &m->cfg;
    sc_st_file *f;
    SC_TRY(sc_st_open(path, &f, err));
    sc_status st = SC_OK;
    /* thresholds trained for one model (`train --method cwic` records it) route that model or an artifact of it */
    const char *id = sc_st_meta_find(f, "sparsecal.model_id");
    if (id && (st = sc_model_check_identity(m, id, path, err))) goto done;
    const char *ss = sc_st_meta_find(f, "stripe_size");
    char *end = NULL;
    long long fs = ss ? strtoll(ss, &end, 10) : 0;
    if (!ss || end == ss || *end || fs < 1) {
        st = sc_errf(err, SC_EFORMAT, "%s: __metadata__ stripe_size is missing or not a positive integer", path);
        goto done;
    }
    if (stripe && fs != stripe) {
        st = sc_errf(err, SC_EARG, "%s: thresholds for stripe size %lld, eval asked for %lld", path, fs, (long long)stripe);
        goto done;
    }
    for (int64_t l = 0; l < cfg->n_layers && !st; l++)
        for (int p = 0; p < SC_TEAL_NPROJ && !st; p++) {
            cw_mat *c = &mats[l * SC_TEAL_NPROJ + p];
            int64_t S = fs < c->out ? fs : c->out, ns = (c->out + S - 1) / S;
            const char *what[3] = {"theta", "mean", "std"};
            float *dst[3] = {c->theta, c->mean, c->std};
            for (int k = 0; k < 3 && !st; k++) {
                char name[96];
                snprintf(name, sizeof name, "layers.%lld.%s.%s", (long long)l, sc_linear_name((sc_linear)p), what[k]);
                const sc_st_tensor *t = sc_st_find(f, name);
                if (!t && k == 0) {
                    st = sc_errf(err, SC_EFORMAT, "%s: tensor '%s' is missing", path, name);
                    break;
                }
                if (!t) continue;
                bool ok = t->supported && (k == 0 ? t->n_dims == 2 && t->shape[0] == ns && t->shape[1] == c->in
                                                  : t->n_dims == 1 && t->shape[0] == c->in);
                if (!ok) {
                    if (k == 0)
                        st = sc_errf(err, SC_EFORMAT, "%s: tensor '%s' must be F32/F16/BF16 of shape [%lld, %lld]", path,
                                     name, (long long)ns, (long long)c->in);
                    else
                        st = sc_errf(err, SC_EFORMAT, "%s: tensor '%s' must be F32/F16/BF16 of shape [%lld]", path, name,
                                     (long long)c->in);
                    break;
                }
                sc_convert_to_f32(t->dtype, t->data, (size_t)t->n_elements, dst[k]);
                for (uint64_t i = 0; i < t->n_elements && !st; i++) {
                    float v = dst[k][i];
                    bool bad = isnan(v) || (k == 0 && v < 0.0f) || (k > 0 && isinf(v)) || (k == 2 && v < 0.0f);
                    if (bad)
                        st = sc_errf(err, SC_EFORMAT, "%s: tensor '%s' holds %g at index %llu (%s)", path, name, (double)v,
                                     (unsigned long long)i,
                                     k == 0 ? "thresholds must be >= 0; +inf is allowed" : "statistics must be finite, std >= 0");
                }
                if (k > 0) c->has_stats = true;
            }
        }
done:
    sc_st_free(f);
    return st;
}

static sc_status save_file(const char *path, const sc_config *cfg, const cw_mat *mats, int64_t stripe, sc_err *err) {
    int64_t n = cfg->n_layers * SC_TEAL_NPROJ * 3;
    sc_st_spec *specs = calloc((size_t)n, sizeof *specs);
    char (*names)[96] = calloc((size_t)n, sizeof *names);
    if (!specs || !names) {
        free(specs);
        free(names);
        return sc_errf(err, SC_ENOMEM, "cwic: out of memory");
    }
    for (int64_t k = 0; k < n; k++) {
        int64_t mi = k / 3, l = mi / SC_TEAL_NPROJ;
        int p = (int)(mi % SC_TEAL_NPROJ), w = (int)(k % 3);
        const cw_mat *c = &mats[mi];
        snprintf(names[k], 96, "layers.%lld.%s.%s", (long long)l, sc_linear_name((sc_linear)p),
                 w == 0 ? "theta" : w == 1 ? "mean" : "std");
        specs[k].name = names[k];
        specs[k].dtype = SC_DT_F32;
        specs[k].n_dims = w == 0 ? 2 : 1;
        specs[k].shape[0] = w == 0 ? c->ns : c->in;
        specs[k].shape[1] = w == 0 ? c->in : 0;
    }
    char sbuf[32];
    snprintf(sbuf, sizeof sbuf, "%lld", (long long)stripe);
    sc_st_meta meta[2] = {{"format", "sparsecal-cwic-thresholds"}, {"stripe_size", sbuf}};
    sc_st_writer *w = NULL;
    sc_status st = sc_st_writer_create(path, specs, (size_t)n, meta, 2, &w, err);
    for (int64_t k = 0; k < n && !st; k++) {
        const cw_mat *c = &mats[k / 3];
        int wh = (int)(k % 3);
        st = sc_st_writer_write_f32(w, wh == 0 ? c->theta : wh == 1 ? c->mean : c->std,
                                    (size_t)(wh == 0 ? c->ns * c->in : c->in), err);
    }
    if (!st) st = sc_st_writer_finish(w, err);
    sc_st_writer_free(w);
    free(specs);
    free(names);
    return st;
}

struct sc_cwic_plan {
    cw_mat *mats; /* [L, 7] (NULL theta: dense) */
    int64_t L, stripe;
    double apr;   /* 0 when imported */
};

void sc_cwic_plan_free(sc_cwic_plan *pl) {
    if (!pl) return;
    for (int64_t k = 0; pl->mats && k < pl->L * SC_TEAL_NPROJ; k++) {
        free(pl->mats[k].theta);
        free(pl->mats[k].tau);
        free(pl->mats[k].mean);
        free(pl->mats[k].std);
        free(pl->mats[k].wmean);
    }
    free(pl->mats);
    free(pl);
}

bool sc_cwic_plan_matrix(const sc_cwic_plan *pl, int64_t layer, int proj, sc_cwic_matrix *out) {
    if (!pl || layer < 0 || layer >= pl->L || proj < 0 || proj >= SC_TEAL_NPROJ) return false;
    const cw_mat *c = &pl->mats[layer * SC_TEAL_NPROJ + proj];
    if (!c->theta) return false;
    *out = (sc_cwic_matrix){c->in, c->out, c->S, c->ns, c->theta, c->mean, c->std};
    return true;
}

int64_t sc_cwic_plan_stripe(const sc_cwic_plan *pl) { return pl->stripe; }
double sc_cwic_plan_apr(const sc_cwic_plan *pl) { return pl->apr; }

sc_status sc_cwic_prepare(const sc_model *m, const sc_calib *calib, const char *params, double density,
                          sc_cwic_plan **plan, sc_err *err) {
    *plan = NULL;
    const sc_config *cfg = &m->cfg;
    int64_t L = cfg->n_layers;
    char tpath[1024] = "", xpath[1024] = "", stats[16] = "exact", dist[16] = "gauss";
    bool have_t = false, have_x = false;
    double apr = density > 0 ? 1.0 / density : INFINITY, sd = 512;
    const sc_param spec[] = {
        {SC_RM_FILE_KEY, SC_PARAM_STR, 0, 0, NULL, tpath, sizeof tpath, &have_t},
        {"export", SC_PARAM_STR, 0, 0, NULL, xpath, sizeof xpath, &have_x},
        {"stats", SC_PARAM_STR, 0, 0, "exact,ema", stats, sizeof stats, NULL},
        {"dist", SC_PARAM_STR, 0, 0, "gauss,laplace", dist, sizeof dist, NULL},
        {"apr", SC_PARAM_NUM, 1, DBL_MAX, NULL, &apr, 0, NULL},
        {"stripe", SC_PARAM_NUM, 1, 1e9, NULL, &sd, 0, NULL},
    };
    SC_TRY(sc_params_read(params, spec, (int)(sizeof spec / sizeof spec[0]), "cwic", err));
    bool laplace = !strcmp(dist, "laplace");
    if (!(apr >= 1.0) || isinf(apr) || sd != floor(sd))
        return sc_errf(err, SC_EARG, "cwic parameters: apr must be a number >= 1 (or --density > 0), stripe a "
                                     "positive integer (got '%s')", params ? params : "");
    int64_t stripe = (int64_t)sd;
    void *state = calib ? sc_calib_state(calib, "cwic") : NULL;
    if (!state && !have_t)
        return sc_errf(err, SC_EARG, "cwic needs a calibration file with 'cwic' statistics (compute --method cwic) "
                                     "or --params thresholds=FILE.safetensors");
    sc_cwic_plan *pl = calloc(1, sizeof *pl);
    if (!pl) return sc_errf(err, SC_ENOMEM, "cwic: out of memory");
    pl->L = L;
    pl->stripe = stripe;
    pl->apr = have_t ? 0.0 : apr;
    struct { cw_mat *mats; } e = {calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(cw_mat))};
    pl->mats = e.mats;
    sc_status st = SC_OK;
    double *u = NULL;
    if (!e.mats) {
        st = sc_errf(err, SC_ENOMEM, "cwic: out of memory");
        goto done;
    }
    for (int64_t l = 0; l < L && !st; l++)
        for (int p = 0; p < SC_TEAL_NPROJ && !st; p++) {
            cw_mat *c = &e.mats[l * SC_TEAL_NPROJ + p];
            proj_shape(cfg, p, &c->in, &c->out);
            c->S = stripe < c->out ? stripe : c->out;
            c->ns = (c->out + c->S - 1) / c->S;
            int64_t w = 0;
            const double *mean = NULL, *sdv = NULL;
            int tap = sc_teal_tap_of((sc_linear)p);
            if (state) {
                bool ema = !strcmp(stats, "ema");
                mean = sc_cwic_stat(state, l, tap, ema ? "ema_mean" : "mean", &w);
                sdv = sc_cwic_stat(state, l, tap, ema ? "ema_std" : "std", &w);
            }
            if (!have_t && (!mean || w != c->in)) continue; /* layer not calibrated: dense */
            c->theta = calloc((size_t)(c->ns * c->in), sizeof(float));
            c->tau = calloc((size_t)(c->ns * c->in), sizeof(float));
            c->mean = calloc((size_t)c->in, sizeof(float));
            c->std = calloc((size_t)c->in, sizeof(float));
            c->wmean = calloc((size_t)c->out, sizeof(float));
            if (!c->theta || !c->tau || !c->mean || !c->std || !c->wmean) st = sc_errf(err, SC_ENOMEM, "out of memory");
            for (int64_t i = 0; !st && mean && w == c->in && i < c->in; i++) {
                c->mean[i] = (float)mean[i];
                c->std[i] = (float)sdv[i];
                c->has_stats = true;
            }
        }
    if (!st && have_t) st = load_file(tpath, m, e.mats, stripe, err);
    int64_t umax = 0;
    for (int64_t k = 0; k < L * SC_TEAL_NPROJ; k++) umax = e.mats[k].ns * e.mats[k].in > umax ? e.mats[k].ns * e.mats[k].in : umax;
    if (!st && !have_t && apr > 1.0 && !(u = malloc((size_t)umax * sizeof(double)))) st = sc_errf(err, SC_ENOMEM, "out of memory");
    for (int64_t k = 0; k < L * SC_TEAL_NPROJ && !st; k++) {
        cw_mat *c = &e.mats[k];
        if (!c->theta) continue;
        if (!c->has_stats) {
            st = sc_errf(err, SC_EARG, "cwic: layer %lld %s has thresholds but no mean/std (give a calibration file "
                                       "with cwic statistics, or layers.L.P.mean/std in the thresholds file)",
                         (long long)(k / SC_TEAL_NPROJ), sc_linear_name((sc_linear)(k % SC_TEAL_NPROJ)));
            break;
        }
        const float *W;
        if ((st = proj_weight(m, k / SC_TEAL_NPROJ, (int)(k % SC_TEAL_NPROJ), &W, err))) break;
        if (!have_t && apr > 1.0) fit_matrix(c, W, apr, laplace, u);
        c->all_zero = true;
        for (int64_t j = 0; j < c->ns * c->in; j++) {
            float th = c->theta[j];
            c->tau[j] = srt_cwic_tau(th, c->std[j % c->in]); /* as the runtime computes it */
            c->all_zero &= th == 0.0f;
        }
        for (int64_t r = 0; r < c->out; r++) {
            double acc = 0.0;
            for (int64_t i = 0; i < c->in; i++) acc += (double)W[r * c->in + i] * (double)c->mean[i];
            c->wmean[r] = (float)acc;
        }
    }
    if (!st && have_x) st = save_file(xpath, cfg, e.mats, stripe, err);
done:
    free(u);
    if (st) {
        sc_cwic_plan_free(pl);
        return st;
    }
    *plan = pl;
    return SC_OK;
}

sc_status sc_eval_cwic(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                       const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err) {
    (void)rm;
    (void)obs; /* no neuron router */
    memset(out, 0, sizeof *out);
    const sc_config *cfg = &m->cfg;
    int64_t L = cfg->n_layers;
    sc_cwic_plan *pl;
    SC_TRY(sc_cwic_prepare(m, o->calib, o->params, o->density, &pl, err));
    cw_eval e = {m, pl->mats, NULL, NULL, NULL, 0, NULL, NULL};
    e.dropped = calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(double));
    e.seen = calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(double));
    int64_t longest = 2, wmax = cfg->dim > cfg->ffn_dim ? cfg->dim : cfg->ffn_dim;
    wmax = wmax > cfg->n_heads * cfg->head_dim ? wmax : cfg->n_heads * cfg->head_dim;
    for (size_t i = 0; i < d->n_seqs; i++) longest = (int64_t)d->seqs[i].n > longest ? (int64_t)d->seqs[i].n : longest;
    e.cap = (o->ctx < longest ? o->ctx : longest) * wmax;
    e.z = malloc((size_t)e.cap * sizeof(float));
    e.zs = malloc((size_t)e.cap * sizeof(float));
    e.idx = malloc((size_t)wmax * sizeof(uint32_t));
    sc_status st = SC_OK;
    if (!e.dropped || !e.seen || !e.z || !e.zs || !e.idx) st = sc_errf(err, SC_ENOMEM, "out of memory");
    if (!st) {
        sc_eval_opts eo = {o->ctx, NULL, install, &e, o->second_half, o->progress};
        st = sc_eval_run(m, d, &eo, &out->ppl, err);
    }
    if (!st) {
        sc_input_result_fill(cfg, e.dropped, e.seen, out);
        out->in.apr_target = pl->apr;
        out->in.target = pl->apr > 0 ? 1.0 - 1.0 / pl->apr : 0.0;
        out->in.stripe = pl->stripe;
    }
    sc_cwic_plan_free(pl);
    free(e.dropped);
    free(e.seen);
    free(e.z);
    free(e.zs);
    free(e.idx);
    return st;
}
