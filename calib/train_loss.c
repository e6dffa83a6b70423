/* train_loss.c - the CLAWS paper's distillation loss, KL(student || teacher)
 * + w CE on the teacher-forced next token, over vocabulary chunks (train.h):
 * no [T x vocab] logits, neither the student's nor the teacher's. The
 * teacher is kept as its final norm output [T, dim], and both sets of logits
 * are recomputed chunk by chunk from the classifier rows.
 *
 * Per scored position, with student logits z, teacher logits y, p = softmax z,
 * q = softmax y:
 *   KL   = KL(p || q) = sum_i p_i ((z_i - lse z) - (y_i - lse y)) = A - lse z + lse y,
 *          A = sum_i p_i (z_i - y_i),
 *   FKL  = KL(q || p) = sum_i q_i ((y_i - lse y) - (z_i - lse z)) = B - lse y + lse z,
 *          B = sum_i q_i (y_i - z_i),
 *   CE   = lse z - z_target,
 *   L    = KL + f FKL + w CE (the CLAWS paper: f = 0, w = 0.2; the CWIC paper's
 *          symmetric KL: f = 1, w = 0),
 *   dL/dz_k = p_k (w + (z_k - lse z) - (y_k - lse y) - KL) + f (p_k - q_k) - w [k = target].
 * Pass 1 accumulates lse z, lse y, A and B online (a running maximum rescales
 * the sums as it grows), pass 2 forms dL/dz per chunk and adds dL/dz W_chunk
 * into dL/d(final norm output); the backward pass continues from there. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "train.h"

struct sc_distill {
    const sc_model *m;
    int64_t T, CH;
    float *zs, *zt; /* [T, CH] a chunk of student and teacher logits */
    float *dxn;     /* [T, D] */
    double *acc;    /* [T, 7]: running max and sum of the student, of the teacher, A's sum, target logit, B's sum */
};

void sc_distill_free(sc_distill *d) {
    if (!d) return;
    free(d->zs);
    free(d->zt);
    free(d->dxn);
    free(d->acc);
    free(d);
}

sc_status sc_distill_create(const sc_model *m, int64_t max_ctx, sc_distill **out, sc_err *err) {
    *out = NULL;
    sc_distill *d = calloc(1, sizeof *d);
    if (!d) return sc_errf(err, SC_ENOMEM, "out of memory");
    d->m = m;
    d->T = max_ctx;
    /* chunks of at most 16M floats (64 MiB) and no more rows than the classifier hands out at once */
    int64_t rows = ((int64_t)16 << 20) / max_ctx, cap = sc_model_classifier_chunk(m);
    rows = rows < 256 ? 256 : rows;
    d->CH = rows < cap ? rows : cap;
    d->zs = malloc((size_t)(max_ctx * d->CH) * sizeof(float));
    d->zt = malloc((size_t)(max_ctx * d->CH) * sizeof(float));
    d->dxn = malloc((size_t)(max_ctx * m->cfg.dim) * sizeof(float));
    d->acc = malloc((size_t)max_ctx * 7 * sizeof(double));
    if (!d->zs || !d->zt || !d->dxn || !d->acc) {
        sc_distill_free(d);
        return sc_errf(err, SC_ENOMEM, "out of memory for the distillation loss of %lld tokens", (long long)max_ctx);
    }
    *out = d;
    return SC_OK;
}

sc_status sc_distill_window(sc_distill *d, sc_forward *f, const int32_t *ids, int64_t n, const float *teacher_xn,
                            double w, double fw, const sc_hooks *hooks, bool backward, double *kl, double *fkl,
                            double *ce, sc_err *err) {
    *kl = *ce = *fkl = NAN;
    const sc_model *m = d->m;
    const float *xn = sc_forward_final_norm(f);
    if (!xn) return sc_errf(err, SC_EARG, "distillation: the student's workspace does not score by chunks");
    if (n < 2 || n > d->T) return sc_errf(err, SC_EARG, "distillation: a window of %lld tokens", (long long)n);
    int64_t D = m->cfg.dim, V = m->cfg.vocab_size, CH = d->CH, S = n - 1;
    double *acc = d->acc;
    for (int64_t t = 0; t < S; t++) {
        double *a = acc + t * 7;
        a[0] = -INFINITY, a[1] = 0.0, a[2] = -INFINITY, a[3] = 0.0, a[4] = 0.0, a[5] = 0.0, a[6] = 0.0;
    }
    for (int pass = 0; pass < (backward ? 2 : 1); pass++) {
        for (int64_t r0 = 0; r0 < V; r0 += CH) {
            int64_t nr = V - r0 < CH ? V - r0 : CH;
            const float *W;
            SC_TRY(sc_model_classifier_rows(m, r0, nr, &W, err));
            sc_linear_forward(d->zs, xn, W, NULL, S, D, nr);
            sc_linear_forward(d->zt, teacher_xn, W, NULL, S, D, nr);
            for (int64_t t = 0; t < S; t++) {
                float *z = d->zs + t * nr;
                const float *y = d->zt + t * nr;
                double *a = acc + t * 7;
                int64_t target = ids[t + 1];
                if (pass == 0) {
                    double cz = z[0], cy = y[0];
                    for (int64_t i = 1; i < nr; i++) {
                        cz = z[i] > cz ? z[i] : cz;
                        cy = y[i] > cy ? y[i] : cy;
                    }
                    if (cz > a[0]) { /* rescale the student's sums to the new maximum */
                        double r = exp(a[0] - cz);
                        a[1] *= r;
                        a[4] *= r;
                        a[0] = cz;
                    }
                    if (cy > a[2]) {
                        double r = exp(a[2] - cy);
                        a[3] *= r;
                        a[6] *= r;
                        a[2] = cy;
                    }
                    double ss = 0.0, st = 0.0, sa = 0.0, sb = 0.0;
                    for (int64_t i = 0; i < nr; i++) {
                        double e = exp((double)z[i] - a[0]), q = exp((double)y[i] - a[2]);
                        ss += e;
                        sa += e * ((double)z[i] - (double)y[i]);
                        st += q;
                        sb += q * ((double)y[i] - (double)z[i]);
                    }
                    a[1] += ss;
                    a[3] += st;
                    a[4] += sa;
                    a[6] += sb;
                    if (target >= r0 && target < r0 + nr) a[5] = z[target - r0];
                } else { /* a[0] = lse z, a[2] = lse y, a[4] = KL (set after pass 1) */
                    for (int64_t i = 0; i < nr; i++) {
                        double lp = (double)z[i] - a[0], p = exp(lp), lq = (double)y[i] - a[2];
                        z[i] = (float)(p * (w + lp - lq - a[4]) + (fw != 0.0 ? fw * (p - exp(lq)) : 0.0));
                    }
                    if (target >= r0 && target < r0 + nr) z[target - r0] -= (float)w;
                }
            }
            if (pass == 1) /* dxn[S, D] (+)= dL/dz[S, nr] W[nr, D] */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)S, (blasint)D, (blasint)nr, 1.0f, d->zs,
                            (blasint)nr, W, (blasint)D, r0 ? 1.0f : 0.0f, d->dxn, (blasint)D);
        }
        if (pass == 0) {
            double skl = 0.0, sce = 0.0, sfkl = 0.0;
            for (int64_t t = 0; t < S; t++) {
                double *a = acc + t * 7;
                double lz = a[0] + log(a[1]), ly = a[2] + log(a[3]), k = a[4] / a[1] - lz + ly;
                sce += lz - a[5];
                skl += k;
                sfkl += a[6] / a[3] - ly + lz;
                a[0] = lz, a[2] = ly, a[4] = k;
            }
            *kl = skl;
            *ce = sce;
            *fkl = sfkl;
            if (!isfinite(skl) || !isfinite(sce) || !isfinite(sfkl))
                return sc_errf(err, SC_ERANGE, "the distillation loss is not finite (KL %g, CE %g): the adapter diverged",
                               skl, sce);
        }
    }
    if (!backward) return SC_OK;
    memset(d->dxn + S * D, 0, (size_t)D * sizeof(float)); /* the last position predicts nothing */
    return sc_backward_from_norm(f, d->dxn, hooks, err);
}
