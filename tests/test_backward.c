/* test_backward.c - activation gradients of the reference forward pass
 * against central finite differences computed with the independent
 * double-precision reference (tests/support/ref_llama.c), on sampled
 * coordinates of h, the normalised MLP input, the normalised attention
 * input and the residual stream in every layer; for the cross-entropy loss
 * and for the distillation loss with a sparsified student. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "forward.h"
#include "model.h"
#include "ref_llama.h"
#include "testing.h"
#include "tokenizer.h"

enum { N = 24, L = 5, D = 64, F = 172, V = 512 };
static const sc_tap kinds[4] = {SC_TAP_H, SC_TAP_MLP_IN, SC_TAP_ATTN_IN, SC_TAP_RESID};
static const int ref_kind[4] = {1, 2, 3, 4};
static const int width[4] = {F, D, D, D};

typedef struct grads {
    float *g[4][L]; /* [kind][layer] -> [N, width] */
    const unsigned char *mask; /* [pos][layer][F] or NULL */
    int64_t seen[SC_TAP_COUNT][L], replayed[SC_TAP_COUNT][L]; /* forward events, first and recomputed */
} grads;

static sc_status grad_hook(void *user, const sc_tap_event *ev, sc_err *e) {
    grads *g = user;
    if (!ev->is_grad && ev->layer < L) (ev->replay ? g->replayed : g->seen)[ev->tap][ev->layer]++;
    if (!ev->is_grad) { /* forward: apply the student's mask to h (again when recomputed) */
        if (ev->tap == SC_TAP_H && g->mask)
            for (int64_t t = 0; t < ev->n_tokens; t++)
                for (int64_t j = 0; j < F; j++)
                    if (!g->mask[((size_t)t * L + ev->layer) * F + j]) ev->data[t * F + j] = 0.0f;
        return SC_OK;
    }
    for (int k = 0; k < 4; k++)
        if (ev->tap == kinds[k]) memcpy(g->g[k][ev->layer], ev->data, (size_t)(ev->n_tokens * ev->width) * sizeof(float));
    return SC_OK;
}

/* the loss of the reference on ids[0..N), CE or distillation against teacher [N, V] */
static double ref_loss(ref_llama *r, const int32_t *ids, const double *teacher) {
    double loss = 0;
    for (int t = 0; t < N; t++) {
        const double *z = ref_llama_step(r, ids[t], t);
        if (t + 1 >= N) break;
        double lz = ref_lse(z, V), ce = lz - z[ids[t + 1]];
        if (!teacher) {
            loss += ce;
            continue;
        }
        double kl = 0, lt = ref_lse(teacher + t * V, V);
        for (int i = 0; i < V; i++) {
            double lps = z[i] - lz, lpt = teacher[t * V + i] - lt;
            kl += exp(lps) * (lps - lpt);
        }
        loss += kl + 0.2 * ce;
    }
    return loss;
}

static unsigned rng = 12345u;
static unsigned next_rand(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

/* Checks sampled coordinates of every tap kind in every layer. */
static void check(ref_llama *r, const int32_t *ids, grads *g, const double *teacher, const char *what) {
    double worst = 0;
    int checked = 0;
    for (int k = 0; k < 4; k++) {
        for (int l = 0; l < L; l++) {
            const float *gr = g->g[k][l];
            int w = width[k];
            double gmax = 0;
            int amax = 0;
            for (int i = 0; i < (N - 1) * w; i++)
                if (fabs(gr[i]) > gmax) {
                    gmax = fabs(gr[i]);
                    amax = i;
                }
            for (int s = 0; s < 4; s++) {
                int idx = amax;
                if (s > 0) { /* a random coordinate with a gradient that is not negligible */
                    for (int tries = 0; tries < 1000; tries++) {
                        idx = (int)(next_rand() % (unsigned)((N - 1) * w));
                        if (fabs(gr[idx]) > 1e-2 * gmax) break;
                    }
                }
                int t = idx / w, j = idx % w;
                if (g->mask && k == 0 && !g->mask[((size_t)t * L + l) * F + j]) continue;
                double eps = 1e-4;
                r->pert_kind = ref_kind[k];
                r->pert_layer = l;
                r->pert_pos = t;
                r->pert_index = j;
                r->pert_delta = eps;
                double lp = ref_loss(r, ids, teacher);
                r->pert_delta = -eps;
                double lm = ref_loss(r, ids, teacher);
                r->pert_kind = 0;
                double fd = (lp - lm) / (2 * eps), an = gr[idx];
                double rel = fabs(fd - an) / fmax(fabs(fd), 1e-3 * gmax);
                worst = fmax(worst, rel);
                checked++;
                CHECK_MSG(rel < 1e-3, "%s: %s layer %d pos %d index %d: analytic %.8g, finite difference %.8g", what,
                          sc_tap_name(kinds[k]), l, t, j, an, fd);
            }
        }
    }
    printf("%s: %d coordinates, worst relative error %.3g\n", what, checked, worst);
    CHECK(checked >= 60);
}

int main(void) {
    sc_err err;
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(4, &m, &tok, &d)) return sc_test_finish();
    const int32_t *ids = d.seqs[3].ids;
    CHECK(d.seqs[3].n >= N);
    ref_llama r;
    CHECK(ref_llama_load(&r, sc_asset("models/stories260K.bin")));

    grads g = {0};
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < L; l++) g.g[k][l] = calloc((size_t)N * F, sizeof(float));
    sc_hooks hk = {grad_hook, &g, 0xffffffffu};
    sc_forward *f;
    CHECK(sc_forward_create_train(m, N, &f, &err) == SC_OK);
    float *dl = malloc((size_t)N * V * sizeof(float));

    /* 1. cross-entropy */
    const float *logits;
    CHECK(sc_forward_run(f, ids, N, 0, &hk, &logits, &err) == SC_OK);
    double loss = sc_loss_ce(logits, ids, N, V, dl);
    double rl = ref_loss(&r, ids, NULL);
    CHECK_NEAR(loss, rl, 1e-4 * rl);
    CHECK(sc_backward_run(f, dl, &hk, &err) == SC_OK);
    check(&r, ids, &g, NULL, "cross-entropy");

    /* 2. distillation: student = the model with ~half of the neurons masked, teacher = dense */
    double *teacher = malloc((size_t)N * V * sizeof(double));
    float *teacher_f = malloc((size_t)N * V * sizeof(float));
    CHECK(sc_forward_run(f, ids, N, 0, NULL, &logits, &err) == SC_OK);
    memcpy(teacher_f, logits, (size_t)N * V * sizeof(float));
    for (int t = 0; t < N; t++) {
        const double *z = ref_llama_step(&r, ids[t], t);
        memcpy(teacher + (size_t)t * V, z, V * sizeof(double));
    }
    unsigned char *mask = malloc((size_t)N * L * F);
    for (size_t i = 0; i < (size_t)N * L * F; i++) mask[i] = (next_rand() % 100) < 55;
    g.mask = mask;
    r.h_mask = mask;
    CHECK(sc_forward_run(f, ids, N, 0, &hk, &logits, &err) == SC_OK);
    loss = sc_loss_distill(logits, teacher_f, ids, N, V, 0.2, dl);
    rl = ref_loss(&r, ids, teacher);
    CHECK_NEAR(loss, rl, 1e-4 * fabs(rl) + 1e-5);
    CHECK(sc_backward_run(f, dl, &hk, &err) == SC_OK);
    check(&r, ids, &g, teacher, "distillation (masked student)");
    /* 3. activation checkpointing: the checkpointed pass (recomputing each
     * layer from its input, replaying the masking hook) gives bit for bit the
     * gradients of the pass that keeps every layer's activations (the same
     * code on the same inputs), with the loss written over the logits in
     * place; observers see each forward event once, plus marked replays of
     * every layer but the last */
    sc_forward *fk;
    CHECK(sc_forward_create_train_ex(m, N, SC_TRAIN_KEEP_ALL, &fk, &err) == SC_OK);
    for (int masked = 0; masked < 2; masked++) {
        g.mask = masked ? mask : NULL;
        float *keep[4][L];
        CHECK(sc_forward_run(fk, ids, N, 0, &hk, &logits, &err) == SC_OK);
        sc_loss_ce(logits, ids, N, V, dl);
        CHECK(sc_backward_run(fk, dl, &hk, &err) == SC_OK);
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < L; l++) {
                keep[k][l] = malloc((size_t)N * width[k] * sizeof(float));
                memcpy(keep[k][l], g.g[k][l], (size_t)N * width[k] * sizeof(float));
            }
        memset(g.seen, 0, sizeof g.seen);
        memset(g.replayed, 0, sizeof g.replayed);
        CHECK(sc_forward_run(f, ids, N, 0, &hk, &logits, &err) == SC_OK);
        float *inplace = sc_forward_logits(f);
        CHECK(inplace == logits);
        sc_loss_ce(logits, ids, N, V, inplace);
        CHECK(sc_backward_run(f, inplace, &hk, &err) == SC_OK);
        size_t differ = 0;
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < L; l++) differ += memcmp(keep[k][l], g.g[k][l], (size_t)N * width[k] * sizeof(float)) != 0;
        CHECK_MSG(differ == 0, "%s: %zu of %d gradient arrays differ between checkpointed and stored backward",
                  masked ? "masked" : "dense", differ, 4 * L);
        bool once = true;
        for (int l = 0; l < L; l++)
            once = once && g.seen[SC_TAP_H][l] == 1 && g.seen[SC_TAP_GATE][l] == 1 &&
                   g.replayed[SC_TAP_H][l] == (l + 1 < L) && g.replayed[SC_TAP_GATE][l] == (l + 1 < L);
        CHECK_MSG(once, "forward events: each once, replays for layers 0..%d", L - 2);
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < L; l++) free(keep[k][l]);
    }
    sc_forward_free(fk);

    /* 4. the chunked cross-entropy (no [T x vocab] buffer): the bf16 copy of
     * the model read on use with a 100-row classifier chunk (6 chunks for 512
     * words, the last of 12 rows) against the same model's full-logits loss.
     * The loss is the same double arithmetic in another order (1e-12
     * relative); dL/dxn is computed in one pass (sc_backward_ce): unnormalised
     * exponentials exp(z - running max) in float, summed times W chunk by
     * chunk (beta = 1), rescaled when the maximum moves, divided by the sum
     * and minus W's target row at the end, where the full-logits backward
     * multiplies the normalised softmax - onehot by W in one sum: float
     * rounding of sums of 512 terms plus a few rescalings (7e-7 measured),
     * bounded here by 1e-4 of the largest gradient entry. */
    const char *bf = sc_asset("models/stories260K-hf-bf16-sharded");
    if (bf) {
        sc_model_policy(false, 100 * D * sizeof(float));
        sc_model *mb;
        CHECK(sc_model_load(bf, &mb, &err) == SC_OK);
        sc_model_policy(false, 0);
        CHECK(sc_model_classifier_chunk(mb) == 100);
        sc_forward *fa, *fc;
        CHECK(sc_forward_create_train(mb, N, &fa, &err) == SC_OK);
        CHECK(sc_forward_create_train_ex(mb, N, SC_TRAIN_CHUNKED_LOSS, &fc, &err) == SC_OK);
        g.mask = NULL;
        float *full[4][L];
        CHECK(sc_forward_run(fa, ids, N, 0, &hk, &logits, &err) == SC_OK);
        double lfull = sc_loss_ce(logits, ids, N, V, sc_forward_logits(fa));
        CHECK(sc_backward_run(fa, sc_forward_logits(fa), &hk, &err) == SC_OK);
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < L; l++) {
                full[k][l] = malloc((size_t)N * width[k] * sizeof(float));
                memcpy(full[k][l], g.g[k][l], (size_t)N * width[k] * sizeof(float));
            }
        const float *none = (const float *)&err;
        CHECK(sc_forward_run(fc, ids, N, 0, &hk, &none, &err) == SC_OK && none == NULL); /* no logits */
        double lchunk;
        CHECK(sc_backward_ce(fc, &hk, &lchunk, &err) == SC_OK);
        CHECK_NEAR(lchunk, lfull, 1e-12 * fabs(lfull));
        double worst = 0.0;
        for (int k = 0; k < 4; k++)
            for (int l = 0; l < L; l++) {
                double mx = 0.0, dd = 0.0;
                for (int64_t i = 0; i < (int64_t)N * width[k]; i++) {
                    mx = fmax(mx, fabs(full[k][l][i]));
                    dd = fmax(dd, fabs((double)full[k][l][i] - g.g[k][l][i]));
                }
                worst = fmax(worst, mx > 0 ? dd / mx : dd);
                free(full[k][l]);
            }
        printf("chunked cross-entropy: loss %.9f vs %.9f, gradients within %.2e of the largest entry\n", lchunk, lfull,
               worst);
        CHECK(worst < 1e-4);
        /* the same scores without gradients (what ppl and eval run): an inference workspace without
         * logits, per-position NLL against the full logits' log-sum-exp, and summed, the chunked loss
         * above (the same code on the same final norm output: bit-equal). The full logits come from
         * another sgemm call (ldc = V) than the chunk's, so a logit may differ in its last float bit;
         * the NLL moves by at most |dz_y| + max_i |dz_i| <= 2 ulp of the row's largest |z| (taken as
         * 4 FLT_EPSILON max|z|), plus the double arithmetic's 1e-12 relative. */
        sc_forward *fn;
        CHECK(sc_forward_create_ex(mb, N, N, SC_TRAIN_CHUNKED_LOSS, &fn, &err) == SC_OK);
        none = (const float *)&err;
        CHECK(sc_forward_run(fn, ids, N, 0, NULL, &none, &err) == SC_OK && none == NULL);
        double nll[N], nsum = 0.0, nworst = 0.0;
        CHECK(sc_forward_nll(fn, nll, &err) == SC_OK);
        CHECK(sc_forward_run(fa, ids, N, 0, NULL, &logits, &err) == SC_OK);
        for (int t = 0; t + 1 < N; t++) {
            const float *z = logits + (size_t)t * V;
            double ref = sc_logsumexp(z, V) - (double)z[ids[t + 1]], zmax = 0.0;
            for (int i = 0; i < V; i++) zmax = fmax(zmax, fabs(z[i]));
            nworst = fmax(nworst, fabs(nll[t] - ref) / (4.0 * FLT_EPSILON * zmax + 1e-12 * fabs(ref)));
            nsum += nll[t];
        }
        printf("chunked NLL: %d positions, worst difference %.2f of its bound, sum %.12f\n", N - 1, nworst, nsum);
        CHECK(nworst <= 1.0);
        CHECK(nsum == lchunk);
        CHECK(sc_forward_nll(fa, nll, &err) == SC_EARG); /* a workspace with logits scores them itself */
        sc_forward_free(fn);
        CHECK(sc_backward_run(fc, dl, &hk, &err) == SC_EARG); /* no logits to start from */
        CHECK(sc_backward_ce(fa, &hk, &lchunk, &err) == SC_EARG);
        sc_forward_free(fa);
        sc_forward_free(fc);
        sc_model_free(mb);
    }

    /* 5. backward refuses an inference workspace */
    sc_forward *fi;
    CHECK(sc_forward_create(m, N, N, &fi, &err) == SC_OK);
    CHECK(sc_backward_run(fi, dl, NULL, &err) == SC_EARG);
    sc_forward_free(fi);

    free(mask);
    free(teacher);
    free(teacher_f);
    free(dl);
    for (int k = 0; k < 4; k++)
        for (int l = 0; l < L; l++) free(g.g[k][l]);
    sc_forward_free(f);
    ref_llama_free(&r);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
