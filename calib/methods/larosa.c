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
 * and --layers A:B still calibrates a slice of layers per run.
 * The file ends with eval's routing (sc_eval_larosa); pack folds the
 * rotations (convert/pack_routing.c) and the runtime routes them (srt_route.h). */
#include "larosa.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "larosa_rot.h"
#include "lc_util.h"
#include "params.h"
#include "route_method.h"

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

/* ---- eval: LaRoSA's rotated top-K (sc_eval_larosa, larosa.h) ----
 *
 * At SC_TAP_ATTN_IN and SC_TAP_MLP_IN of every calibrated layer the hook
 * replaces x by Q z_kept, z = Q^T x, keeping the K_in = round((1 - s_in) D)
 * largest |z_k| (the rotation is applied explicitly; folding Q into the
 * weights gives the same products). At SC_TAP_H it keeps the K_h largest
 * |h_j| (h cannot be rotated through the elementwise product). The attention
 * output (o-projection input) stays dense. Layers outside the calibrated
 * range stay dense. Top-K is exact, so the densities are exact.
 *
 * On an artifact packed with --method larosa the rotations are folded into
 * the model (sc_layer.attn_rot / mlp_rot: the forward pass already feeds the
 * rotated input z to W Q), so the hook keeps the top-K |z| in place and no
 * calibration file is needed. */
/* Rotations are held for every layer up to this many bytes of float (a
 * 2,048-wide model's 16 layers x 2 inputs); above it (Llama-3-8B: 64 x 64 MiB)
 * each layer's is read from the calibration file when the pass reaches it:
 * 0.3-0.5 s per layer and input at d_model 4096 (measured on 2 busy cores),
 * against tens of seconds of forward pass per layer at 2,048 tokens. */
#define LR_RESIDENT_BYTES ((size_t)512 << 20)

typedef struct lr_ctx {
    int64_t D, F, L, K_in, K_h;
    sc_larosa_rots *rots; /* float rotations (NULL: folded) */
    unsigned char *on; /* [2 * L] input sparsified (calibrated, or folded into the model) */
    bool folded;    /* the model holds the rotations: top-K on the tapped input itself */
    float *z, *score, *scratch;
    int32_t *idx;
} lr_ctx;

void sc_lc_layer_params(const sc_config *c, double *qkv, double *o, double *gu, double *down) {
    double D = (double)c->dim, F = (double)c->ffn_dim, qd = (double)(c->n_heads * c->head_dim),
           kvd = (double)(c->n_kv_heads * c->head_dim);
    *qkv = D * (qd + 2 * kvd);
    *o = qd * D;
    *gu = 2 * D * F;
    *down = F * D;
}

/* keeps the k largest |v[i]| of each of n rows of width w (others zeroed) */
static void keep_topk(lr_ctx *x, float *v, int64_t n, int64_t w, int64_t k) {
    for (int64_t t = 0; t < n; t++) {
        float *row = v + t * w;
        srt_score_gate(x->score, row, NULL, w);
        int64_t kept = srt_topk(x->score, w, k, x->idx, x->scratch);
        int64_t next = 0;
        for (int64_t i = 0; i < w; i++) {
            if (next < kept && x->idx[next] == i) {
                next++;
                continue;
            }
            row[i] = 0.0f;
        }
    }
}

static sc_status lr_hook(void *user, const sc_tap_event *ev, sc_err *err) {
    lr_ctx *x = user;
    if (ev->is_grad) return SC_OK;
    if (ev->tap == SC_TAP_H) {
        if (x->K_h < x->F) keep_topk(x, ev->data, ev->n_tokens, x->F, x->K_h);
        return SC_OK;
    }
    int w = ev->tap == SC_TAP_ATTN_IN ? SC_LAROSA_ATTN : ev->tap == SC_TAP_MLP_IN ? SC_LAROSA_MLP : -1;
    if (w < 0 || x->K_in >= x->D || !x->on[w * x->L + ev->layer]) return SC_OK;
    int64_t T = ev->n_tokens, D = x->D;
    if (x->folded) {
        keep_topk(x, ev->data, T, D, x->K_in);
        return SC_OK;
    }
    const void *qv;
    SC_TRY(sc_larosa_rots_get(x->rots, ev->layer, w, &qv, err));
    const float *Q = qv;
    /* z[T, D] = x[T, D] Q[D, D]  (z_k = sum_i x_i Q[i, k] = (Q^T x)_k) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)D, (blasint)D, 1.0f, ev->data,
                (blasint)D, Q, (blasint)D, 0.0f, x->z, (blasint)D);
    keep_topk(x, x->z, T, D, x->K_in);
    /* x'[T, D] = z_kept[T, D] Q^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)D, (blasint)D, 1.0f, x->z, (blasint)D, Q,
                (blasint)D, 0.0f, ev->data, (blasint)D);
    return SC_OK;
}

static void lr_stats(const sc_model *m, const lr_ctx *x, sc_sparse_eval_result *out) {
    const sc_config *c = &m->cfg;
    double qkv, o, gu, dn;
    sc_lc_layer_params(c, &qkv, &o, &gu, &dn);
    double d_in = (double)x->K_in / (double)x->D, d_h = (double)x->K_h / (double)x->F, sum = 0, sum_sp = 0, act = 0;
    double mn = INFINITY, mx = -INFINITY;
    for (int64_t l = 0; l < c->n_layers; l++) {
        double da = x->on[l] ? d_in : 1.0, dm = x->on[x->L + l] ? d_in : 1.0;
        double dl = (qkv * da + o + gu * dm + dn * d_h) / (qkv + o + gu + dn);
        sum_sp += (qkv * da + gu * dm + dn * d_h) / (qkv + gu + dn);
        if (l < SC_MAX_LAYERS) out->layer_density[l] = dl;
        sum += dl;
        mn = fmin(mn, dl);
        mx = fmax(mx, dl);
        act += gu * dm + dn * d_h;
    }
    out->stats.density_mean = sum / (double)c->n_layers;
    out->stats.density_min = mn;
    out->stats.density_max = mx;
    out->stats.layer_mean = out->layer_density;
    out->stats.active_mlp_params = act;
    out->stats.rows = out->ppl.n_tokens;
    out->lc.in_density = d_in;
    out->lc.h_density = d_h;
    out->lc.linear_density = out->stats.density_mean;
    out->lc.sparsified_density = sum_sp / (double)c->n_layers;
}

static void set_split(lr_ctx *x, double s, double cin, double ch) {
    x->K_in = srt_topk_count(1.0 - fmin(1.0, cin * s), x->D);
    x->K_h = srt_topk_count(1.0 - fmin(1.0, ch * s), x->F);
}

sc_status sc_eval_larosa(const sc_route_method *rm, const sc_model *m, const sc_dataset *d,
                         const sc_sparse_eval_opts *o, const sc_live_obs *obs, sc_sparse_eval_result *out,
                         sc_err *err) {
    (void)rm;
    (void)obs; /* h's top-K is LaRoSA's own, not a neuron router's */
    memset(out, 0, sizeof *out);
    const sc_config *c = &m->cfg;
    bool folded = false;
    for (int64_t l = 0; l < c->n_layers; l++) 
        folded = folded || sc_model_present(m, &m->layers[l].attn_rot) || sc_model_present(m, &m->layers[l].mlp_rot);
    const void *st8 = o->calib ? sc_calib_state(o->calib, "larosa") : NULL;
    if (folded && st8)
        return sc_errf(err, SC_EARG, "%s already holds folded LaRoSA rotations; drop the calibration's", m->path);
    if (!folded && !o->calib)
        return sc_errf(err, SC_EARG, "method larosa needs a calibration file (--calib) or an artifact packed "
                                     "with --method larosa");
    if (!folded) SC_TRY(sc_larosa_state(o->calib, c->dim, &st8, err));
    double cin = SRT_LAROSA_IN, ch = SRT_LAROSA_H, grid = 0, grid_seqs = 16, step = 0.05;
    const sc_param spec[] = {
        {"in", SC_PARAM_NUM, 0, 10, NULL, &cin, 0, NULL},
        {"h", SC_PARAM_NUM, 0, 10, NULL, &ch, 0, NULL},
        {"grid", SC_PARAM_NUM, 0, 1, NULL, &grid, 0, NULL},
        {"grid_seqs", SC_PARAM_NUM, 1, 1e9, NULL, &grid_seqs, 0, NULL},
        {"grid_step", SC_PARAM_NUM, 0.01, 1, NULL, &step, 0, NULL},
    };
    SC_TRY(sc_params_read(o->params, spec, 5, "larosa", err));
    int64_t D = c->dim, F = c->ffn_dim, L = c->n_layers, T = o->ctx;
    lr_ctx x = {D, F, L, D, F, NULL, NULL, folded, NULL, NULL, NULL, NULL};
    x.on = calloc((size_t)(2 * L), 1);
    x.z = malloc((size_t)(T * D) * sizeof(float));
    x.score = malloc((size_t)(D > F ? D : F) * sizeof(float));
    x.scratch = malloc((size_t)(2 * (D > F ? D : F) + 1) * sizeof(uint32_t)); /* srt_topk's workspace */
    x.idx = malloc((size_t)(D > F ? D : F) * sizeof(int32_t));
    sc_status st = SC_OK;
    if (!x.on || !x.z || !x.score || !x.scratch || !x.idx) {
        st = sc_errf(err, SC_ENOMEM, "out of memory");
        goto done;
    }
    for (int64_t l = 0; folded && l < L; l++) {
        x.on[l] = sc_model_present(m, &m->layers[l].attn_rot);
        x.on[L + l] = sc_model_present(m, &m->layers[l].mlp_rot);
    }
    for (int w = 0; st8 && w < 2; w++)
        for (int64_t l = 0; l < L; l++) x.on[w * L + l] = sc_larosa_has(st8, l, w, NULL);
    if (st8 && (st = sc_larosa_rots_create(o->calib, 3u, true, LR_RESIDENT_BYTES, &x.rots, err))) goto done;
    double s = 1.0 - o->density;
    sc_hooks hk = {lr_hook, &x, SC_TAP_BIT(SC_TAP_ATTN_IN) | SC_TAP_BIT(SC_TAP_MLP_IN) | SC_TAP_BIT(SC_TAP_H)};
    if (grid > 0 && s > 0) {
        double qkv, oo, gu, dn;
        sc_lc_layer_params(c, &qkv, &oo, &gu, &dn);
        double P_in = qkv + gu, P_h = dn, best = INFINITY;
        sc_dataset tune = {d->seqs, d->n_seqs < (size_t)grid_seqs ? d->n_seqs : (size_t)grid_seqs, 0};
        for (int64_t gi = 0; gi * step <= 4.0 + 1e-9 && out->lc.n_grid < 32; gi++) {
            double a = (double)gi * step, b = (P_in + P_h - P_in * a) / P_h; /* P_in s_in + P_h s_h = (P_in + P_h) s */
            if (b < 0 || a * s > 1 + 1e-12 || b * s > 1 + 1e-12) continue;
            set_split(&x, s, a, b);
            sc_eval_opts eo = {o->ctx, &hk, NULL, NULL, o->second_half, NULL};
            sc_ppl_result r;
            if ((st = sc_eval_run(m, &tune, &eo, &r, err))) goto done;
            double ppl = exp(r.nll_sum / (double)r.n_scored);
            double *g = out->lc.grid[out->lc.n_grid++];
            g[0] = a;
            g[1] = b;
            g[2] = ppl;
            if (o->progress) fprintf(o->progress, "larosa grid: in %.3f h %.3f -> ppl %.5f\n", a, b, ppl);
            if (ppl < best) {
                best = ppl;
                cin = a;
                ch = b;
            }
        }
        if (out->lc.n_grid == 0) {
            st = sc_errf(err, SC_EARG, "larosa grid: no split keeps sparsity %g within [0, 1] for both inputs", s);
            goto done;
        }
    }
    set_split(&x, s, cin, ch);
    int n_grid = out->lc.n_grid;
    double g[32][3];
    memcpy(g, out->lc.grid, sizeof g);
    sc_eval_opts eo = {o->ctx, &hk, NULL, NULL, o->second_half, o->progress};
    st = sc_eval_run(m, d, &eo, &out->ppl, err);
    if (!st) {
        lr_stats(m, &x, out);
        out->lc.split_in = cin;
        out->lc.split_h = ch;
        out->lc.n_grid = n_grid;
        memcpy(out->lc.grid, g, sizeof g);
    }
done:
    sc_larosa_rots_free(x.rots);
    free(x.on);
    free(x.z);
    free(x.score);
    free(x.scratch);
    free(x.idx);
    return st;
}
