/* larosa.c - LaRoSA rotations (the LaRoSA paper, "Training-Free Activation
 * Sparsity in Large Language Models via Layerwise Rotations", Sec. 4.2;
 * METHODS.md): the uncentred second moment of each block input per layer,
 * damped and eigendecomposed (see larosa.h).
 *
 * Memory. The moment is the only thing held for every calibrated layer and
 * input: its packed upper triangle, D (D + 1) / 2 doubles (64 MiB at
 * D = 4096), so a Llama-3-8B-shaped model (32 layers, both inputs) holds
 * 4 GiB, where the full D x D moment and its D x D eigenvectors held before
 * took 16 GiB. Measured there (docs/SCALE.md): `compute --method larosa`
 * peaks at 5.6 GiB of anonymous memory at 2,048 tokens (the moments, one
 * layer's weights as f32, the forward pass), and the file (12.3 GB) takes
 * 27 min to write on 2 cores, nearly all of it 64 dsyevd at D = 4096
 * (25-38 s each). The triangle is enough: H is symmetric, merges and MPI add it
 * element by element, and the eigensolver reads one triangle. Accumulation
 * multiplies 256-row chunks by 256-column panels into an 8 MiB tile
 * (cblas_dgemm) and adds the tile into the triangle, so no square matrix
 * exists; each element gets the same chunk sums in the same order on every
 * run, shard and rank (test_larosa checks it against the full-matrix dsyrk).
 * The eigenvalues and eigenvectors are DERIVED and streamed (method.h): the
 * file writer asks for one layer and input at a time, which is solved then
 * (dsyevd, about 2 D^2 doubles of workspace plus the D x D result: 384 MiB at
 * D = 4096, freed or reused for the next) and written; consumers read them
 * back one layer at a time (larosa_rot.c). A state opened for reading holds
 * only the token counts.
 *   inputs=both|attn|mlp   which block inputs to calibrate (default both)
 *   max_mib=N              refuse to start if the moments would exceed N MiB
 * and --layers A:B still calibrates a slice of layers per run. */
#include "larosa.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc_util.h"

typedef struct larosa {
    int64_t L0, L1, D, P;
    bool use[2]; /* SC_LAROSA_ATTN, SC_LAROSA_MLP */
    bool reader; /* opened for reading: no moments in memory */
    double damp;
    double *H[2];      /* [layers, P] packed moments (NULL when reading) */
    int64_t *count[2]; /* [layers] */
    double *scratch;   /* [sc_larosa_scratch(D)] */
    /* the last layer/input solved for the writer (derive): eig then Q are asked in turn */
    int64_t solved;    /* layer * 2 + input, -1: none */
    double *eig, *Q;   /* [D], [D, D] */
} larosa;

static void larosa_free(void *p) {
    larosa *s = p;
    if (!s) return;
    for (int w = 0; w < 2; w++) {
        free(s->H[w]);
        free(s->count[w]);
    }
    free(s->scratch);
    free(s->eig);
    free(s->Q);
    free(s);
}

void sc_larosa_accumulate(double *Hp, const float *X, int64_t n, int64_t D, double *scratch) {
    double *Xd = scratch, *T = scratch + SC_LAROSA_CHUNK * D;
    for (int64_t r0 = 0; r0 < n; r0 += SC_LAROSA_CHUNK) {
        int64_t rows = n - r0 < SC_LAROSA_CHUNK ? n - r0 : SC_LAROSA_CHUNK;
        for (int64_t i = 0; i < rows * D; i++) Xd[i] = (double)X[r0 * D + i];
        for (int64_t j0 = 0; j0 < D; j0 += SC_LAROSA_PANEL) {
            int64_t nb = D - j0 < SC_LAROSA_PANEL ? D - j0 : SC_LAROSA_PANEL, j1 = j0 + nb;
            /* T[nb, j1] = Xd[:, j0:j1]^T Xd[:, 0:j1]: row jj holds column j0 + jj of H above the diagonal
             * (and a few entries below it, ignored) */
            cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)nb, (blasint)j1, (blasint)rows, 1.0, Xd + j0,
                        (blasint)D, Xd, (blasint)D, 0.0, T, (blasint)j1);
            for (int64_t jj = 0; jj < nb; jj++) {
                int64_t j = j0 + jj;
                double *col = Hp + j * (j + 1) / 2;
                const double *t = T + jj * j1;
                for (int64_t i = 0; i <= j; i++) col[i] += t[i];
            }
        }
    }
}

sc_status sc_larosa_eigen(const double *Hp, int64_t count, int64_t D, double damp, double *eig, double *Q,
                          sc_err *err) {
    double inv = count > 0 ? 1.0 / (double)count : 0.0, tr = 0.0;
    for (int64_t i = 0; i < D; i++) tr += Hp[i * (i + 1) / 2 + i] * inv;
    bool finite = isfinite(tr);
    for (int64_t i = 0; i < sc_larosa_packed(D) && finite; i++) finite = isfinite(Hp[i]);
    if (!finite)
        return sc_errf(err, SC_ERANGE, "larosa: the %lld x %lld moment of %lld tokens is not finite (not given to "
                       "LAPACKE_dsyevd)", (long long)D, (long long)D, (long long)count);
    double add = damp * tr / (double)D;
    /* A = Q, column-major, upper triangle: A[i + j D] = M(i, j), i <= j. This is the matrix LAPACKE's
     * row-major dsyevd('U') hands LAPACK after transposing a row-major upper triangle, and the workspace
     * is its query's, so the eigensolver does the same arithmetic as the full-matrix version did. */
    for (int64_t j = 0; j < D; j++) {
        const double *col = Hp + j * (j + 1) / 2;
        double *a = Q + j * D;
        for (int64_t i = 0; i <= j; i++) a[i] = col[i] * inv;
        for (int64_t i = j + 1; i < D; i++) a[i] = 0.0;
        a[j] += add;
    }
    lapack_int info, liwork = -1, lwork = -1, iq;
    double wq;
    info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)D, Q, (lapack_int)D, eig, &wq, lwork, &iq,
                               liwork);
    double *work = NULL;
    lapack_int *iwork = NULL;
    if (info == 0) {
        lwork = (lapack_int)wq;
        liwork = iq;
        work = malloc((size_t)lwork * sizeof *work);
        iwork = malloc((size_t)liwork * sizeof *iwork);
        if (!work || !iwork) {
            free(work);
            free(iwork);
            return sc_errf(err, SC_ENOMEM, "larosa: out of memory for the eigensolver's workspace (%lld doubles)",
                           (long long)lwork);
        }
        info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)D, Q, (lapack_int)D, eig, work, lwork,
                                   iwork, liwork);
    }
    free(work);
    free(iwork);
    if (info != 0)
        return sc_errf(err, info < 0 ? SC_EARG : SC_ERANGE,
                       "larosa: LAPACKE_dsyevd failed (info %d: %s) on a %lld x %lld moment of %lld tokens", (int)info,
                       info < 0 ? "bad argument" : "the eigensolver did not converge", (long long)D, (long long)D,
                       (long long)count);
    /* ascending -> descending: columns (contiguous here) reversed with their eigenvalues */
    for (int64_t k = 0; k < D / 2; k++) {
        int64_t o = D - 1 - k;
        double t = eig[k];
        eig[k] = eig[o];
        eig[o] = t;
        double *a = Q + k * D, *b = Q + o * D;
        for (int64_t i = 0; i < D; i++) {
            t = a[i];
            a[i] = b[i];
            b[i] = t;
        }
    }
    for (int64_t k = 0; k < D; k++) { /* sign: the largest-magnitude entry of each column is positive */
        double *a = Q + k * D;
        int64_t best = 0;
        for (int64_t i = 1; i < D; i++)
            if (fabs(a[i]) > fabs(a[best])) best = i;
        if (a[best] < 0)
            for (int64_t i = 0; i < D; i++) a[i] = -a[i];
    }
    for (int64_t i = 0; i < D; i++) /* column-major -> Q[i * D + k] */
        for (int64_t k = i + 1; k < D; k++) {
            double t = Q[i * D + k];
            Q[i * D + k] = Q[k * D + i];
            Q[k * D + i] = t;
        }
    return SC_OK;
}

static sc_status larosa_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    *out = NULL;
    char which[8] = "both";
    double damp = 0.01, max_mib = 0.0;
    const sc_param spec[] = {
        {"inputs", SC_PARAM_STR, 0, 0, "both,attn,mlp", which, sizeof which, NULL},
        {"damp", SC_PARAM_NUM, 0.0, 1e6, NULL, &damp, 0, NULL},
        {"max_mib", SC_PARAM_NUM, 0.0, 1e12, NULL, &max_mib, 0, NULL},
    };
    SC_TRY(sc_params_read(o->params, spec, 3, "larosa", err));
    int64_t D = m->cfg.dim, nl = o->layer_end - o->layer_begin, P = sc_larosa_packed(D);
    bool use[2] = {strcmp(which, "mlp") != 0, strcmp(which, "attn") != 0};
    double mib = (double)nl * (use[0] + use[1]) * 8.0 * (double)P / 1048576.0;
    if (max_mib > 0 && mib > max_mib && !o->reader)
        return sc_errf(err, SC_ENOMEM,
                       "larosa: %lld layers x %d inputs need %.0f MiB of moments (d_model %lld), over max_mib=%.0f; "
                       "calibrate fewer layers per run (--layers A:B) or one input (inputs=mlp)",
                       (long long)nl, use[0] + use[1], mib, (long long)D, max_mib);
    larosa *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "larosa: out of memory");
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->D = D;
    s->P = P;
    s->damp = damp;
    s->reader = o->reader;
    s->solved = -1;
    bool ok = o->reader || (s->scratch = malloc((size_t)sc_larosa_scratch(D) * sizeof(double))) != NULL;
    for (int w = 0; w < 2 && ok; w++) {
        s->use[w] = use[w];
        if (!use[w]) continue;
        ok = (s->count[w] = calloc((size_t)nl, sizeof(int64_t))) != NULL &&
             (o->reader || (s->H[w] = calloc((size_t)(nl * P), sizeof(double))) != NULL);
    }
    if (!ok) {
        larosa_free(s);
        return sc_errf(err, SC_ENOMEM, "larosa: out of memory for %.0f MiB of moments", mib);
    }
    *out = s;
    return SC_OK;
}

static sc_status larosa_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    larosa *s = p;
    if (ev->is_grad || ev->layer < s->L0 || ev->layer >= s->L1) return SC_OK;
    int w = ev->tap == SC_TAP_ATTN_IN ? SC_LAROSA_ATTN : ev->tap == SC_TAP_MLP_IN ? SC_LAROSA_MLP : -1;
    if (w < 0 || !s->use[w]) return SC_OK;
    if (!s->H[w]) return sc_errf(err, SC_EARG, "larosa: a calibration opened for reading cannot accumulate");
    int64_t l = ev->layer - s->L0;
    sc_larosa_accumulate(s->H[w] + l * s->P, ev->data, n_scored, s->D, s->scratch);
    s->count[w][l] += n_scored;
    s->solved = -1;
    return SC_OK;
}

/* The sums changed (merge, load, transfer): the writer's last solve is stale. */
static sc_status larosa_finalize(void *p, sc_err *err) {
    ((larosa *)p)->solved = -1;
    return SC_OK;
}

static void set_arr(sc_array *a, int64_t layer, const char *in, const char *what, sc_arr_kind k, sc_arr_type t,
                    int64_t r, int64_t c, void *data) {
    snprintf(a->name, sizeof a->name, "layer%lld.%s.%s", (long long)layer, in, what);
    a->kind = k;
    a->type = t;
    a->shape[0] = r;
    a->shape[1] = c;
    a->data = data;
    a->concat_data = NULL;
    a->concat_rows = NULL;
}

bool sc_larosa_array(const void *state, int64_t layer, int which, int what, sc_array *out) {
    const larosa *s = state;
    if (!s || layer < s->L0 || layer >= s->L1 || which < 0 || which > 1 || !s->use[which]) return false;
    int64_t l = layer - s->L0, D = s->D;
    const char *in = which ? "mlp" : "attn";
    if (what == SC_LAROSA_ARR_H)
        set_arr(out, layer, in, "H", SC_ARR_SUM, SC_ARR_F64, s->P, 0, s->H[which] ? s->H[which] + l * s->P : NULL);
    else if (what == SC_LAROSA_ARR_EIG)
        set_arr(out, layer, in, "eig", SC_ARR_DERIVED, SC_ARR_F64, D, 0, NULL);
    else
        set_arr(out, layer, in, "Q", SC_ARR_DERIVED, SC_ARR_F64, D, D, NULL);
    return true;
}

static int larosa_arrays(void *p, sc_array *out, int cap) {
    larosa *s = p;
    int n = 0;
    for (int64_t l = 0; l < s->L1 - s->L0; l++)
        for (int w = 0; w < 2; w++) {
            if (!s->use[w] || n + 2 > cap) continue;
            sc_larosa_array(s, s->L0 + l, w, SC_LAROSA_ARR_H, &out[n++]);
            set_arr(&out[n++], s->L0 + l, w ? "mlp" : "attn", "count", SC_ARR_SUM, SC_ARR_I64, 1, 0, &s->count[w][l]);
        }
    return n;
}

/* eig and Q of every layer and input, in that order */
static int larosa_streamed(void *p, sc_array *out, int cap) {
    larosa *s = p;
    int n = 0;
    for (int64_t l = s->L0; l < s->L1; l++)
        for (int w = 0; w < 2; w++) {
            if (!s->use[w] || n + 2 > cap) continue;
            sc_larosa_array(s, l, w, SC_LAROSA_ARR_EIG, &out[n++]);
            sc_larosa_array(s, l, w, SC_LAROSA_ARR_Q, &out[n++]);
        }
    return n;
}

static sc_status larosa_derive(void *p, int index, const void **data, sc_err *err) {
    larosa *s = p;
    int n_in = s->use[0] + s->use[1];
    int64_t l = index / (2 * n_in), D = s->D;
    int rem = index % (2 * n_in), w = s->use[0] ? rem / 2 : 1;
    if (index < 0 || l >= s->L1 - s->L0 || !s->H[w])
        return sc_errf(err, SC_EARG, "larosa: no moment to derive array %d from", index);
    if (s->solved != l * 2 + w) {
        if ((!s->Q && !(s->Q = malloc((size_t)(D * D) * sizeof(double)))) ||
            (!s->eig && !(s->eig = malloc((size_t)D * sizeof(double)))))
            return sc_errf(err, SC_ENOMEM, "larosa: out of memory for a %lld x %lld rotation", (long long)D, (long long)D);
        s->solved = -1;
        sc_status st = sc_larosa_eigen(s->H[w] + l * s->P, s->count[w][l], D, s->damp, s->eig, s->Q, err);
        if (st) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            return sc_errf(err, st, "%s (layer %lld, %s input)", msg, (long long)(s->L0 + l), w ? "mlp" : "attn");
        }
        s->solved = l * 2 + w;
    }
    *data = rem % 2 ? (const void *)s->Q : (const void *)s->eig;
    return SC_OK;
}

bool sc_larosa_has(const void *state, int64_t layer, int which, int64_t *count) {
    const larosa *s = state;
    if (!s || layer < s->L0 || layer >= s->L1 || which < 0 || which > 1 || !s->use[which]) return false;
    if (count) *count = s->count[which][layer - s->L0];
    return true;
}

int64_t sc_larosa_dim(const void *state) { return ((const larosa *)state)->D; }
double sc_larosa_damp(const void *state) { return ((const larosa *)state)->damp; }

const sc_method sc_method_larosa = {
    "larosa",
    "LaRoSA: per-layer second moment of the attention and MLP inputs (packed triangle), damped, eigendecomposed (dsyevd) as the file is written",
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
    larosa_streamed,
    larosa_derive,
};
