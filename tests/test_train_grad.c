/* test_train_grad.c - the recovery trainer's derivatives (calib/train.h):
 *  1. the soft top-K mask against its definition computed independently
 *     (ranks by counting, O(F^2)), its hard limit against the runtime's
 *     srt_topk, and its derivatives by central finite differences: d/dh of
 *     sum_j w_j m_j h_j is w_j m_j, d/dscore is 0 away from ties;
 *  2. the gradient of the distillation loss KL(student || teacher) + 0.2 CE
 *     with respect to every layer's LoRA A and B (sampled coordinates),
 *     with a soft mask (tau 0.3, CLAWS-style multipliers) and with the hard
 *     mask (CATS scores), against central finite differences of the
 *     independent double-precision reference (tests/support/ref_llama.c)
 *     running the same student (W_d + s B A in double). The masks it applies
 *     are the student's (recorded by its observer): the gradient is that of
 *     the loss with the masks held, as ranks are piecewise constant; the
 *     masks the reference computes itself from its own W_g x must agree
 *     with them up to near-ties that float and double order differently;
 *  3. the loss over vocabulary chunks against the same loss in one chunk. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "model.h"
#include "ref_llama.h"
#include "srt_route.h"
#include "testing.h"
#include "tokenizer.h"
#include "train.h"

enum { N = 24, L = 5, D = 64, F = 172, V = 512, R = 8 };

static unsigned rng = 2024u;
static double urand(void) { /* uniform in [0, 1) */
    rng = rng * 1664525u + 1013904223u;
    return (double)(rng >> 8) / 16777216.0;
}

/* ---- 1. the mask on its own ---- */

/* rank of j: scores above it, or equal with a lower index; NaN below every number */
static int64_t rank_of(const float *s, int64_t n, int64_t j) {
    int64_t r = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == j) continue;
        bool inan = isnan(s[i]), jnan = isnan(s[j]);
        if (inan && jnan) r += i < j;
        else if (!inan && (jnan || s[i] > s[j] || (s[i] == s[j] && i < j))) r++;
    }
    return r;
}

static void test_mask(void) {
    float s[F], m[F], m2[F], w[F];
    uint64_t scratch[2 * F];
    for (int j = 0; j < F; j++) {
        s[j] = (float)(urand() * 3.0);
        w[j] = (float)(urand() - 0.5);
    }
    s[5] = s[17] = s[90]; /* ties */
    s[33] = NAN;
    s[34] = s[35] = 0.0f; /* equal values */
    for (int K = 0; K <= F; K += 43) {
        /* hard: the runtime's top-K set */
        double sum = sc_soft_topk(s, F, K, 0.0, m, scratch);
        int32_t idx[F];
        int64_t k = srt_topk(s, F, K, idx, NULL);
        bool same = k == K && sum == (double)K;
        int64_t next = 0;
        for (int j = 0; j < F; j++) {
            bool live = next < k && idx[next] == j;
            next += live;
            same = same && m[j] == (live ? 1.0f : 0.0f);
        }
        CHECK_MSG(same, "hard mask K=%d: not srt_topk's set", K);
        /* soft: sigmoid((K - 1/2 - rank) / (F tau)) with ranks counted independently */
        for (double tau = 1.0; tau > 0.005; tau /= 10) {
            sum = sc_soft_topk(s, F, K, tau, m, scratch);
            double worst = 0.0, total = 0.0;
            for (int j = 0; j < F; j++) {
                double want = 1.0 / (1.0 + exp(-((double)K - 0.5 - (double)rank_of(s, F, j)) / (F * tau)));
                worst = fmax(worst, fabs(m[j] - want));
                total += m[j];
            }
            /* the same double formula rounded to float once: within half a float ulp of values <= 1 */
            CHECK_MSG(worst <= 6e-8, "K=%d tau=%g: mask off its definition by %.3g", K, tau, worst);
            CHECK_NEAR(sum, total, 1e-9 * F);
        }
    }
    /* derivatives of f(h, s) = sum_j w_j m_j(s) h_j at tau 0.2, K = 86, by central differences:
     * d f / d h_j = w_j m_j (f is linear in h: the difference is exact up to rounding);
     * d f / d s_j = 0: a step of a quarter of the gap to the nearest other score keeps every rank */
    const int K = 86;
    const double tau = 0.2;
    float h[F];
    for (int j = 0; j < F; j++) h[j] = (float)(urand() - 0.5);
    s[33] = 1.5f; /* no NaN below: a finite gap everywhere */
    s[17] = 0.7f, s[90] = 0.71f;
    sc_soft_topk(s, F, K, tau, m, scratch);
    double worst_h = 0.0, worst_s = 0.0;
    for (int j = 0; j < F; j += 7) {
        double eps = 1e-3, fp = 0.0, fm = 0.0;
        for (int i = 0; i < F; i++) {
            double hi = h[i] + (i == j ? eps : 0.0), hm = h[i] - (i == j ? eps : 0.0);
            fp += (double)w[i] * m[i] * hi;
            fm += (double)w[i] * m[i] * hm;
        }
        worst_h = fmax(worst_h, fabs((fp - fm) / (2 * eps) - (double)w[j] * m[j]));
        double gap = INFINITY;
        for (int i = 0; i < F; i++)
            if (i != j) gap = fmin(gap, fabs((double)s[i] - s[j]));
        if (gap == 0.0) continue; /* a tie (34, 35): any step reorders it; the mask is not differentiable there */
        float sp[F];
        memcpy(sp, s, sizeof sp);
        sp[j] = (float)(s[j] + gap / 4);
        sc_soft_topk(sp, F, K, tau, m2, scratch);
        fp = 0.0;
        for (int i = 0; i < F; i++) fp += (double)w[i] * m2[i] * h[i];
        sp[j] = (float)(s[j] - gap / 4);
        sc_soft_topk(sp, F, K, tau, m2, scratch);
        fm = 0.0;
        for (int i = 0; i < F; i++) fm += (double)w[i] * m2[i] * h[i];
        worst_s = fmax(worst_s, fabs(fp - fm) / (gap / 2));
    }
    printf("soft top-K: d/dh within %.3g of w*m; d/dscore %.3g (0 expected)\n", worst_h, worst_s);
    CHECK(worst_h < 1e-9);
    CHECK(worst_s == 0.0);
}

/* ---- 2. LoRA gradients against the double-precision reference ---- */

typedef struct ref_student {
    const float *c; /* [L, F] or NULL */
    int K;
    double tau;
    float *fixed;   /* [N, L, F] the masks applied: the student's, recorded by its observer */
    float *own;     /* [N, L, F] the masks the reference computes from its own scores */
    double *score;  /* [N, L, F] its scores */
} ref_student;

static void record_mask(void *user, int64_t layer, int64_t pos, const float *mask, int64_t n) {
    memcpy((float *)user + ((size_t)pos * L + layer) * F, mask, (size_t)n * sizeof(float));
}

/* The mask in the reference: its own scores |phi(u)| c from u = W_g xn in
 * double, ranked by counting, give its own masks (kept for comparison); h is
 * multiplied by the student's recorded ones. */
static void ref_mask(void *user, const ref_llama *r, int l, int pos, const double *xn, double *h) {
    const ref_student *rs = user;
    size_t row = ((size_t)pos * L + l) * F;
    double *sc = rs->score + row;
    for (int j = 0; j < F; j++) {
        const double *wg = r->w1 + ((size_t)l * F + j) * D;
        double u = 0.0;
        for (int i = 0; i < D; i++) u += wg[i] * xn[i];
        sc[j] = fabs(u / (1.0 + exp(-u))) * (rs->c ? (double)rs->c[l * F + j] : 1.0);
    }
    for (int j = 0; j < F; j++) {
        int rho = 0;
        for (int i = 0; i < F; i++) rho += sc[i] > sc[j] || (sc[i] == sc[j] && i < j);
        double m = rs->tau > 0 ? 1.0 / (1.0 + exp(-((double)rs->K - 0.5 - rho) / (F * rs->tau))) : (rho < rs->K ? 1.0 : 0.0);
        rs->own[row + j] = (float)m;
        h[j] *= rs->fixed[row + j];
    }
}

/* sum over t < N-1 of KL(student || teacher) + 0.2 CE in the reference */
static double ref_loss(ref_llama *r, const int32_t *ids, const double *teacher) {
    double loss = 0;
    for (int t = 0; t < N; t++) {
        const double *z = ref_llama_step(r, ids[t], t);
        if (t + 1 >= N) break;
        double lz = ref_lse(z, V), lt = ref_lse(teacher + t * V, V), kl = 0;
        for (int i = 0; i < V; i++) {
            double lps = z[i] - lz, lpt = teacher[t * V + i] - lt;
            kl += exp(lps) * (lps - lpt);
        }
        loss += kl + 0.2 * (lz - z[ids[t + 1]]);
    }
    return loss;
}

/* r->w2 of layer l = W_d + s B A in double, with delta added to entry idx of
 * A (ab 0) or B (ab 1) of that layer in double (a step no float could take) */
static void ref_set_adapter(ref_llama *r, const double *w2, const sc_lora_params *p, int l, int ab, size_t idx,
                            double delta) {
    const float *A = p->A + (size_t)l * R * F, *B = p->B + (size_t)l * D * R;
    for (int i = 0; i < D; i++)
        for (int j = 0; j < F; j++) {
            double d = 0;
            for (int k = 0; k < R; k++) {
                double b = B[i * R + k] + (ab == 1 && idx == (size_t)(i * R + k) ? delta : 0.0);
                double a = A[k * F + j] + (ab == 0 && idx == (size_t)(k * F + j) ? delta : 0.0);
                d += b * a;
            }
            r->w2[((size_t)l * D + i) * F + j] = w2[((size_t)l * D + i) * F + j] + p->scale * d;
        }
}

static void check_grads(const sc_model *m, ref_llama *r, const double *w2, const int32_t *ids, const float *c,
                        double tau, const char *what) {
    sc_err err;
    sc_lora_params p;
    CHECK(sc_lora_params_init(&p, &m->cfg, R, 2.0 * R, 99, &err) == SC_OK); /* scale 2 */
    for (size_t i = 0; i < (size_t)L * R * F; i++) p.A[i] = (float)(0.2 * urand() - 0.1);
    for (size_t i = 0; i < (size_t)L * D * R; i++) p.B[i] = (float)(0.1 * urand() - 0.05);
    sc_lora_student *st;
    CHECK(sc_lora_student_create(m, N, &p, c, 0.5, &st, &err) == SC_OK);
    sc_lora_student_set_tau(st, tau);
    size_t nm = (size_t)N * L * F;
    ref_student rs = {c, (int)srt_topk_count(0.5, F), tau, malloc(nm * sizeof(float)), malloc(nm * sizeof(float)),
                      malloc(nm * sizeof(double))};
    sc_lora_student_observe(st, record_mask, rs.fixed);
    float *gA = calloc((size_t)L * R * F, sizeof(float)), *gB = calloc((size_t)L * D * R, sizeof(float));
    sc_window_loss wl;
    CHECK_MSG(sc_lora_student_window(st, ids, N, 0.2, gA, gB, &wl, &err) == SC_OK, "%s", err.msg);
    /* the reference: dense teacher, then the student */
    double *teacher = malloc((size_t)N * V * sizeof(double));
    memcpy(r->w2, w2, (size_t)L * D * F * sizeof(double));
    r->h_hook = NULL;
    for (int t = 0; t < N; t++) memcpy(teacher + (size_t)t * V, ref_llama_step(r, ids[t], t), V * sizeof(double));
    r->h_hook = ref_mask;
    r->h_user = &rs;
    for (int l = 0; l < L; l++) ref_set_adapter(r, w2, &p, l, 0, 0, 0.0);
    double rl = ref_loss(r, ids, teacher);
    /* the reference's own masks are the student's, except where two scores are so close that float and
     * double order them differently: such rows may only swap the values of neurons whose double scores
     * agree to 1e-5 of the row's largest score (the float pass's scores differ from double ones by at
     * most 2e-6 of it here) */
    int swapped = 0;
    double spread = 0.0;
    for (size_t row = 0; row < (size_t)N * L; row++) {
        double lo = INFINITY, hi = -INFINITY, top = 0.0;
        for (int j = 0; j < F; j++) {
            top = fmax(top, rs.score[row * F + j]);
            if (rs.fixed[row * F + j] != rs.own[row * F + j]) {
                lo = fmin(lo, rs.score[row * F + j]);
                hi = fmax(hi, rs.score[row * F + j]);
            }
        }
        if (hi < lo) continue;
        swapped++;
        spread = fmax(spread, (hi - lo) / top);
    }
    CHECK_MSG(spread <= 1e-5, "%s: masks differ beyond near-ties (scores %.3g of the largest apart)", what, spread);
    printf("%s: loss %.9f (KL %.6f, CE %.6f), reference %.9f, %d of %d rows reordered by near-ties, mean mask "
           "%.4f\n", what, wl.loss, wl.kl, wl.ce, rl, swapped, N * L, wl.mask_sum / (double)(wl.mask_rows * F));
    /* float forward against double: logits agree to about 1e-6 relative (test_forward), the loss sums 23 of them */
    CHECK_NEAR(wl.loss, rl, 1e-5 * fabs(rl));
    CHECK(wl.mask_rows == (int64_t)N * L && wl.scored == N - 1);
    double worst = 0;
    int checked = 0;
    for (int ab = 0; ab < 2; ab++) {
        for (int l = 0; l < L; l++) {
            size_t size = ab ? (size_t)D * R : (size_t)R * F;
            const float *g = (ab ? gB : gA) + l * size;
            double gmax = 0;
            size_t amax = 0;
            for (size_t i = 0; i < size; i++)
                if (fabs(g[i]) > gmax) gmax = fabs(g[i]), amax = i;
            for (int smp = 0; smp < 4; smp++) {
                size_t idx = amax;
                for (int tries = 0; smp > 0 && tries < 1000; tries++) { /* a coordinate whose gradient is not negligible */
                    idx = (size_t)(urand() * (double)size);
                    if (fabs(g[idx]) > 1e-2 * gmax) break;
                }
                /* the double reference's loss is exact to ~1e-13, so a small step gives a clean
                 * quotient (the masks are held, so nothing jumps) */
                double eps = 1e-6;
                ref_set_adapter(r, w2, &p, l, ab, idx, eps);
                double lp = ref_loss(r, ids, teacher);
                ref_set_adapter(r, w2, &p, l, ab, idx, -eps);
                double lm = ref_loss(r, ids, teacher);
                ref_set_adapter(r, w2, &p, l, 0, 0, 0.0);
                double fd = (lp - lm) / (2 * eps), an = g[idx];
                double rel = fabs(fd - an) / fmax(fabs(fd), 1e-3 * gmax);
                worst = fmax(worst, rel);
                checked++;
                CHECK_MSG(rel < 1e-3, "%s: lora_%c layer %d index %zu: analytic %.8g, finite difference %.8g", what,
                          ab ? 'B' : 'A', l, idx, an, fd);
            }
        }
    }
    printf("%s: %d coordinates of A and B, worst relative error %.3g\n", what, checked, worst);
    CHECK(checked == 2 * L * 4);
    /* without gradient buffers: the same loss, no backward pass */
    sc_window_loss wl2;
    CHECK(sc_lora_student_window(st, ids, N, 0.2, NULL, NULL, &wl2, &err) == SC_OK);
    CHECK(wl2.loss == wl.loss);
    free(rs.fixed);
    free(rs.own);
    free(rs.score);
    r->h_hook = NULL;
    free(teacher);
    free(gA);
    free(gB);
    sc_lora_student_free(st);
    sc_lora_params_free(&p);
}

int main(void) {
    test_mask();
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(4, &m, &tok, &d)) return sc_test_finish();
    const int32_t *ids = d.seqs[3].ids;
    CHECK(d.seqs[3].n >= N);
    ref_llama r;
    CHECK(ref_llama_load(&r, sc_asset("models/stories260K.bin")));
    double *w2 = malloc((size_t)L * D * F * sizeof(double));
    memcpy(w2, r.w2, (size_t)L * D * F * sizeof(double));
    /* CLAWS-style multipliers: positive, spread over a factor of about 7 */
    float *c = malloc((size_t)L * F * sizeof(float));
    for (int i = 0; i < L * F; i++) c[i] = (float)exp(2.0 * urand() - 1.0);
    check_grads(m, &r, w2, ids, c, 0.3, "soft mask (tau 0.3, multipliers)");
    check_grads(m, &r, w2, ids, NULL, 0.0, "hard mask (CATS scores)");
    /* 3. the loss over vocabulary chunks: the bf16 copy of the model read on use in 100-row classifier
     * chunks (6 chunks for 512 words) against the same copy converted once (one chunk). The logits come from
     * sgemm calls of other shapes (100 rows against 512; OpenBLAS may choose other kernels for them), so one
     * may differ in its last float bit: the sums move by about 1e-9 relative, bounded here by 1e-7; the
     * gradients sum dL/dz W over chunks in float (accumulated with beta = 1) instead of in one product:
     * float rounding of 512-term sums, bounded by 1e-4 of the largest entry (as test_backward's chunked CE). */
    const char *bf = sc_asset("models/stories260K-hf-bf16-sharded");
    if (bf) {
        sc_err e2;
        sc_model *mc, *mr;
        sc_model_policy(false, 100 * D * sizeof(float));
        CHECK(sc_model_load(bf, &mc, &e2) == SC_OK);
        sc_model_policy(false, 0);
        CHECK(sc_model_load(bf, &mr, &e2) == SC_OK);
        CHECK(sc_model_classifier_chunk(mc) == 100 && sc_model_classifier_chunk(mr) >= V);
        sc_lora_params q;
        CHECK(sc_lora_params_init(&q, &m->cfg, R, R, 5, &e2) == SC_OK);
        for (size_t i = 0; i < (size_t)L * D * R; i++) q.B[i] = (float)(0.1 * urand() - 0.05);
        float *g[2][2];
        sc_window_loss w[2];
        for (int k = 0; k < 2; k++) {
            g[k][0] = calloc((size_t)L * R * F, sizeof(float));
            g[k][1] = calloc((size_t)L * D * R, sizeof(float));
            sc_lora_student *sk;
            CHECK(sc_lora_student_create(k ? mc : mr, N, &q, NULL, 0.3, &sk, &e2) == SC_OK);
            sc_lora_student_set_tau(sk, 0.2);
            CHECK(sc_lora_student_window(sk, ids, N, 0.2, g[k][0], g[k][1], &w[k], &e2) == SC_OK);
            sc_lora_student_free(sk);
        }
        double worst = 0;
        for (int ab = 0; ab < 2; ab++) {
            size_t size = ab ? (size_t)L * D * R : (size_t)L * R * F;
            double mx = 0, dd = 0;
            for (size_t i = 0; i < size; i++) {
                mx = fmax(mx, fabs(g[0][ab][i]));
                dd = fmax(dd, fabs((double)g[0][ab][i] - g[1][ab][i]));
            }
            worst = fmax(worst, dd / mx);
            free(g[0][ab]);
            free(g[1][ab]);
        }
        printf("loss over 6 vocabulary chunks: %.12f (KL %.9f, CE %.9f) vs one chunk %.12f; gradients within %.2e of "
               "the largest entry\n", w[1].loss, w[1].kl, w[1].ce, w[0].loss, worst);
        /* the two compute the logits with sgemm calls of different widths (6 chunks vs 1), which OpenBLAS
         * blocks differently, so each f32 logit may round differently (|z| ~ 10: ~1e-6 absolute); summed
         * over the window the KL and CE then move by ~1e-7 relative (1.6e-7 measured with the Haswell
         * kernels, below 1e-9 with SkylakeX's). 1e-6 bounds that; a chunking error (a missed or doubled
         * chunk) moves them by percent. */
        CHECK_NEAR(w[1].kl, w[0].kl, 1e-6 * fabs(w[0].kl));
        CHECK_NEAR(w[1].ce, w[0].ce, 1e-6 * fabs(w[0].ce));
        CHECK(worst < 1e-4);
        sc_lora_params_free(&q);
        sc_model_free(mc);
        sc_model_free(mr);
    }
    /* bad shapes and arguments */
    sc_err err;
    sc_lora_params p;
    CHECK(sc_lora_params_init(&p, &m->cfg, 65, 65, 1, &err) == SC_EARG); /* rank above min(dim, ffn) */
    CHECK(sc_lora_params_init(&p, &m->cfg, 4, 0, 1, &err) == SC_EARG);
    CHECK(sc_lora_default_rank(&m->cfg) == 64);
    CHECK(sc_lora_params_init(&p, &m->cfg, 4, 4, 1, &err) == SC_OK);
    sc_lora_student *st;
    CHECK(sc_lora_student_create(m, N, &p, NULL, 1.5, &st, &err) == SC_EARG);
    CHECK(sc_lora_student_create(m, N, &p, NULL, 0.5, &st, &err) == SC_OK);
    sc_window_loss wl;
    CHECK(sc_lora_student_window(st, ids, N + 1, 0.2, NULL, NULL, &wl, &err) == SC_EARG);
    CHECK(sc_lora_student_window(st, ids, 1, 0.2, NULL, NULL, &wl, &err) == SC_EARG);
    sc_lora_student_free(st);
    sc_lora_params_free(&p);
    free(c);
    free(w2);
    ref_llama_free(&r);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
