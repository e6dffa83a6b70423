/* forward_loss.c - next-token scores of a window without a [T x vocab]
 * buffer: the classifier is applied one vocabulary chunk at a time and each
 * position keeps a running maximum and sum of exponentials (an online
 * log-sum-exp). ppl and eval score with it (sc_forward_nll); the chunked
 * cross-entropy of the backward pass (sc_backward_ce) starts from it. */
#include <math.h>
#include <stdlib.h>

#include "forward_internal.h"
#include "ops.h"
#include "threads.h"

/* One vocabulary chunk's logits z[n, nr] (rows r0 .. r0 + nr) folded into each position's running maximum
 * (in lse until the end), sum of exponentials se and target logit zy; positions are split over the threads. */
typedef struct lse_job {
    const float *z;
    int64_t n, nr, r0;
    const int32_t *ids;
    double *lse, *se, *zy;
} lse_job;

double sc_lse_fold(const float *z, int64_t nr, double *mx, double *se, float *p) {
    double cm = z[0], r = 1.0;
    for (int64_t i = 1; i < nr; i++) cm = z[i] > cm ? z[i] : cm;
    if (cm > *mx) {
        r = exp(*mx - cm); /* 0 before the first chunk (*mx = -inf) */
        *se *= r;
        *mx = cm;
    }
    double s = 0.0;
    if (p)
        for (int64_t i = 0; i < nr; i++) {
            double e = exp((double)z[i] - *mx);
            s += e;
            p[i] = (float)e;
        }
    else
        for (int64_t i = 0; i < nr; i++) s += exp((double)z[i] - *mx);
    *se += s;
    return r;
}

static void lse_part(void *arg, int tid, int nth) {
    const lse_job *j = arg;
    int64_t t0, t1, nr = j->nr;
    sc_split(j->n - 1, tid, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const float *z = j->z + t * nr;
        int64_t y = j->ids[t + 1];
        if (y >= j->r0 && y < j->r0 + nr) j->zy[t] = z[y - j->r0];
        sc_lse_fold(z, nr, &j->lse[t], &j->se[t], NULL); /* lse[t] holds the running maximum until the end */
    }
}

sc_status sc_forward_lse(sc_forward *f, double *lse, double *zy, sc_err *err) {
    if (!f->chunked) return sc_errf(err, SC_EARG, "forward: scoring by vocabulary chunks needs a chunked workspace");
    if (f->n_last <= 0) return sc_errf(err, SC_EARG, "forward: no window to score");
    const sc_model *m = f->m;
    int64_t n = f->n_last, D = m->cfg.dim, V = m->cfg.vocab_size, CH = f->lchunk_rows;
    const int32_t *ids = f->ids_last;
    const float *xn = f->xn; /* the final norm's output, left by sc_forward_run */
    double *se = malloc((size_t)(n > 1 ? n : 1) * sizeof(double));
    if (!se) return sc_errf(err, SC_ENOMEM, "forward: out of memory");
    for (int64_t t = 0; t < n; t++) lse[t] = -INFINITY, se[t] = 0.0, zy[t] = 0.0;
    sc_status st = SC_OK;
    for (int64_t r0 = 0; r0 < V && !st; r0 += CH) {
        int64_t nr = V - r0 < CH ? V - r0 : CH;
        const float *W;
        if ((st = sc_model_classifier_rows(m, r0, nr, &W, err))) break;
        sc_linear_forward(f->lchunk, xn, W, NULL, n, D, nr);
        lse_job j = {f->lchunk, n, nr, r0, ids, lse, se, zy};
        sc_parallel((n - 1) * nr * 8, lse_part, &j); /* an exp in double costs several elementwise operations */
    }
    for (int64_t t = 0; t + 1 < n; t++) lse[t] += log(se[t]);
    free(se);
    return st;
}

sc_status sc_forward_nll(sc_forward *f, double *nll, sc_err *err) {
    int64_t n = f->n_last;
    if (n < 2) return sc_errf(err, SC_EARG, "forward: a window of %lld tokens has nothing to score", (long long)n);
    double *zy = malloc((size_t)n * sizeof(double));
    if (!zy) return sc_errf(err, SC_ENOMEM, "forward: out of memory");
    sc_status st = sc_forward_lse(f, nll, zy, err);
    if (!st)
        for (int64_t t = 0; t + 1 < n; t++) nll[t] -= zy[t];
    free(zy);
    return st;
}
