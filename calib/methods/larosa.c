/* larosa.c - LaRoSA rotations (the LaRoSA paper, Sec. 4.2; METHODS.md): the
 * uncentred second moment of each block input per layer, damped and
 * eigendecomposed (see larosa.h).
 *
 * Memory: per calibrated layer and input, H and Q are D x D doubles
 * (16 D^2 bytes together; 256 MiB at D = 4096), so a calibration holds
 * 32 D^2 bytes per layer with both inputs. The parameters bound it:
 *   inputs=both|attn|mlp   which block inputs to calibrate (default both)
 *   max_mib=N              refuse to start if the arrays would exceed N MiB
 * and --layers A:B calibrates a slice of layers per run; slices of one model
 * are separate files (e.g. 8 passes of 4 layers for a 32-layer d=4096 model
 * need 4 GiB each instead of 32 GiB at once). */
#include "larosa.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc_util.h"

typedef struct larosa {
    int64_t L0, L1, D;
    bool use[2];      /* SC_LAROSA_ATTN, SC_LAROSA_MLP */
    double damp;
    double *H[2], *Q[2], *eig[2]; /* [layers, D, D] / [layers, D] */
    int64_t *count[2];            /* [layers] */
    double *scratch;              /* [CHUNK, D] */
} larosa;

static void larosa_free(void *p) {
    larosa *s = p;
    if (!s) return;
    for (int w = 0; w < 2; w++) {
        free(s->H[w]);
        free(s->Q[w]);
        free(s->eig[w]);
        free(s->count[w]);
    }
    free(s->scratch);
    free(s);
}

void sc_larosa_accumulate(double *H, const float *X, int64_t n, int64_t D, double *scratch) {
    for (int64_t r0 = 0; r0 < n; r0 += SC_LAROSA_CHUNK) {
        int64_t rows = n - r0 < SC_LAROSA_CHUNK ? n - r0 : SC_LAROSA_CHUNK;
        for (int64_t i = 0; i < rows * D; i++) scratch[i] = (double)X[r0 * D + i];
        /* H[D, D] (upper) += scratch^T[D, rows] scratch[rows, D] */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (blasint)D, (blasint)rows, 1.0, scratch, (blasint)D, 1.0,
                    H, (blasint)D);
    }
}

sc_status sc_larosa_eigen(const double *H, int64_t count, int64_t D, double damp, double *eig, double *Q,
                          sc_err *err) {
    double inv = count > 0 ? 1.0 / (double)count : 0.0, tr = 0.0;
    for (int64_t i = 0; i < D; i++) tr += H[i * D + i] * inv;
    double add = damp * tr / (double)D;
    for (int64_t i = 0; i < D; i++)
        for (int64_t j = 0; j < D; j++) Q[i * D + j] = j >= i ? H[i * D + j] * inv : 0.0;
    for (int64_t i = 0; i < D; i++) Q[i * D + i] += add;
    lapack_int info = LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)D, Q, (lapack_int)D, eig);
    if (info != 0)
        return sc_errf(err, info < 0 ? SC_EARG : SC_ERANGE,
                       "larosa: LAPACKE_dsyevd failed (info %d: %s) on a %lld x %lld moment of %lld tokens", (int)info,
                       info < 0 ? "bad argument" : "the eigensolver did not converge", (long long)D, (long long)D,
                       (long long)count);
    /* ascending -> descending, columns reversed with their eigenvalues */
    for (int64_t k = 0; k < D / 2; k++) {
        int64_t o = D - 1 - k;
        double t = eig[k];
        eig[k] = eig[o];
        eig[o] = t;
        for (int64_t i = 0; i < D; i++) {
            t = Q[i * D + k];
            Q[i * D + k] = Q[i * D + o];
            Q[i * D + o] = t;
        }
    }
    for (int64_t k = 0; k < D; k++) { /* sign: the largest-magnitude entry of each column is positive */
        int64_t best = 0;
        for (int64_t i = 1; i < D; i++)
            if (fabs(Q[i * D + k]) > fabs(Q[best * D + k])) best = i;
        if (Q[best * D + k] < 0)
            for (int64_t i = 0; i < D; i++) Q[i * D + k] = -Q[i * D + k];
    }
    return SC_OK;
}

static sc_status larosa_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    *out = NULL;
    const char *which = "both";
    if (o->params && strstr(o->params, "inputs=attn")) which = "attn";
    if (o->params && strstr(o->params, "inputs=mlp")) which = "mlp";
    double damp, max_mib;
    SC_TRY(sc_lc_param(o->params, "damp", 0.01, 0.0, 1e6, &damp, "larosa", err));
    SC_TRY(sc_lc_param(o->params, "max_mib", 0.0, 0.0, 1e12, &max_mib, "larosa", err));
    int64_t D = m->cfg.dim, nl = o->layer_end - o->layer_begin;
    bool use[2] = {strcmp(which, "mlp") != 0, strcmp(which, "attn") != 0};
    double mib = (double)nl * (use[0] + use[1]) * (16.0 * (double)D * (double)D + 8.0 * (double)D) / 1048576.0;
    if (max_mib > 0 && mib > max_mib)
        return sc_errf(err, SC_ENOMEM,
                       "larosa: %lld layers x %d inputs need %.0f MiB of moments and rotations (d_model %lld), over "
                       "max_mib=%.0f; calibrate fewer layers per run (--layers A:B) or one input (inputs=mlp)",
                       (long long)nl, use[0] + use[1], mib, (long long)D, max_mib);
    larosa *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "larosa: out of memory");
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->D = D;
    s->damp = damp;
    bool ok = (s->scratch = malloc((size_t)(SC_LAROSA_CHUNK * D) * sizeof(double))) != NULL;
    for (int w = 0; w < 2 && ok; w++) {
        s->use[w] = use[w];
        if (!use[w]) continue;
        ok = (s->H[w] = calloc((size_t)(nl * D * D), sizeof(double))) && (s->Q[w] = calloc((size_t)(nl * D * D), sizeof(double))) &&
             (s->eig[w] = calloc((size_t)(nl * D), sizeof(double))) && (s->count[w] = calloc((size_t)nl, sizeof(int64_t)));
    }
    if (!ok) {
        larosa_free(s);
        return sc_errf(err, SC_ENOMEM, "larosa: out of memory for %.0f MiB of moments and rotations", mib);
    }
    *out = s;
    return SC_OK;
}

static sc_status larosa_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    larosa *s = p;
    if (ev->is_grad || ev->layer < s->L0 || ev->layer >= s->L1) return SC_OK;
    int w = ev->tap == SC_TAP_ATTN_IN ? SC_LAROSA_ATTN : ev->tap == SC_TAP_MLP_IN ? SC_LAROSA_MLP : -1;
    if (w < 0 || !s->use[w]) return SC_OK;
    int64_t l = ev->layer - s->L0, D = s->D;
    sc_larosa_accumulate(s->H[w] + l * D * D, ev->data, n_scored, D, s->scratch);
    s->count[w][l] += n_scored;
    return SC_OK;
}

static sc_status larosa_finalize(void *p, sc_err *err) {
    larosa *s = p;
    int64_t D = s->D;
    for (int w = 0; w < 2; w++) {
        if (!s->use[w]) continue;
        for (int64_t l = 0; l < s->L1 - s->L0; l++) {
            sc_status st = sc_larosa_eigen(s->H[w] + l * D * D, s->count[w][l], D, s->damp, s->eig[w] + l * D,
                                           s->Q[w] + l * D * D, err);
            if (st) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%s", err->msg);
                return sc_errf(err, st, "%s (layer %lld, %s input)", msg, (long long)(s->L0 + l), w ? "mlp" : "attn");
            }
        }
    }
    return SC_OK;
}

static void set_arr(sc_array *a, int64_t layer, const char *what, sc_arr_kind k, sc_arr_type t, int64_t r, int64_t c,
                    void *data) {
    snprintf(a->name, sizeof a->name, "layer%lld.%s", (long long)layer, what);
    a->kind = k;
    a->type = t;
    a->shape[0] = r;
    a->shape[1] = c;
    a->data = data;
    a->concat_data = NULL;
    a->concat_rows = NULL;
}

static int larosa_arrays(void *p, sc_array *out, int cap) {
    larosa *s = p;
    int n = 0;
    int64_t D = s->D;
    for (int64_t l = 0; l < s->L1 - s->L0; l++)
        for (int w = 0; w < 2; w++) {
            if (!s->use[w] || n + 4 > cap) continue;
            const char *in = w ? "mlp" : "attn";
            char nm[4][32];
            snprintf(nm[0], sizeof nm[0], "%s.H", in);
            snprintf(nm[1], sizeof nm[1], "%s.count", in);
            snprintf(nm[2], sizeof nm[2], "%s.eig", in);
            snprintf(nm[3], sizeof nm[3], "%s.Q", in);
            set_arr(&out[n++], s->L0 + l, nm[0], SC_ARR_SUM, SC_ARR_F64, D, D, s->H[w] + l * D * D);
            set_arr(&out[n++], s->L0 + l, nm[1], SC_ARR_SUM, SC_ARR_I64, 1, 0, &s->count[w][l]);
            set_arr(&out[n++], s->L0 + l, nm[2], SC_ARR_DERIVED, SC_ARR_F64, D, 0, s->eig[w] + l * D);
            set_arr(&out[n++], s->L0 + l, nm[3], SC_ARR_DERIVED, SC_ARR_F64, D, D, s->Q[w] + l * D * D);
        }
    return n;
}

bool sc_larosa_get(const void *state, int64_t layer, int which, sc_larosa_input *out) {
    const larosa *s = state;
    if (!s || layer < s->L0 || layer >= s->L1 || which < 0 || which > 1 || !s->use[which]) return false;
    int64_t l = layer - s->L0, D = s->D;
    out->H = s->H[which] + l * D * D;
    out->eig = s->eig[which] + l * D;
    out->Q = s->Q[which] + l * D * D;
    out->count = s->count[which][l];
    return true;
}

int64_t sc_larosa_dim(const void *state) { return ((const larosa *)state)->D; }
double sc_larosa_damp(const void *state) { return ((const larosa *)state)->damp; }

const sc_method sc_method_larosa = {
    "larosa",
    "LaRoSA: per-layer second moment of the attention and MLP inputs (dsyrk), damped, eigendecomposed (dsyevd)",
    SC_TAP_BIT(SC_TAP_ATTN_IN) | SC_TAP_BIT(SC_TAP_MLP_IN),
    0,
    larosa_create,
    larosa_observe,
    larosa_finalize,
    larosa_arrays,
    larosa_free,
    NULL,
    NULL,
    NULL,
    "inputs,damp,max_mib",
};
