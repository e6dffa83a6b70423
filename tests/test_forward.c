/* test_forward.c - the reference forward pass against an independent
 * per-token double-precision implementation (tests/support/ref_llama.c),
 * across formats (llama2.c .bin, GGUF, Hugging Face f32 and bf16), windows,
 * KV-cache continuation, taps and greedy generation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "eval.h"
#include "forward.h"
#include "model.h"
#include "ref_llama.h"
#include "testing.h"
#include "tokenizer.h"

static sc_err err;

/* max |a - b| / max |b| over a row */
static double row_rel_err(const float *a, const double *b, int64_t n) {
    double md = 0, mb = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        md = d > md ? d : md;
        mb = fabs(b[i]) > mb ? fabs(b[i]) : mb;
    }
    return md / (mb > 0 ? mb : 1);
}

static double ref_logsumexp(const double *x, int n) {
    double mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp(x[i] - mx);
    return mx + log(s);
}

typedef struct tap_rec {
    int calls[SC_TAP_COUNT];
    double mlp_out_abs;
    bool zero_h;
} tap_rec;

static sc_status tap_fn(void *user, const sc_tap_event *ev, sc_err *e) {
    tap_rec *r = user;
    r->calls[ev->tap]++;
    if (ev->tap == SC_TAP_H && r->zero_h) memset(ev->data, 0, (size_t)(ev->n_tokens * ev->width) * sizeof(float));
    if (ev->tap == SC_TAP_MLP_OUT)
        for (int64_t i = 0; i < ev->n_tokens * ev->width; i++) r->mlp_out_abs += fabs(ev->data[i]);
    return SC_OK;
}

static void compare_models(const sc_model *a, const sc_model *b, const sc_tokens *seq, double tol, const char *what) {
    sc_forward *fa, *fb;
    int64_t n = (int64_t)seq->n;
    if (sc_forward_create(a, n, n, &fa, &err) || sc_forward_create(b, n, n, &fb, &err)) {
        CHECK_MSG(0, "%s", err.msg);
        return;
    }
    const float *la, *lb;
    CHECK(sc_forward_run(fa, seq->ids, n, 0, NULL, &la, &err) == SC_OK);
    CHECK(sc_forward_run(fb, seq->ids, n, 0, NULL, &lb, &err) == SC_OK);
    double md = 0, mx = 0;
    for (int64_t i = 0; i < n * a->cfg.vocab_size; i++) {
        md = fmax(md, fabs(la[i] - lb[i]));
        mx = fmax(mx, fabs(la[i]));
    }
    CHECK_MSG(md / mx <= tol, "%s: relative logit difference %.3g > %.3g", what, md / mx, tol);
    sc_forward_free(fa);
    sc_forward_free(fb);
}

/* Writes a random llama2.c checkpoint (untied classifier when vocab < 0). */
static void write_random_llama2c(const char *path, const int32_t h[7], unsigned seed) {
    int64_t dim = h[0], hid = h[1], L = h[2], heads = h[3], kv = h[4], V = h[5] < 0 ? -h[5] : h[5], seq = h[6];
    int64_t hs = dim / heads, kvd = kv * hs;
    int64_t n = V * dim + L * dim + L * dim * dim + 2 * L * dim * kvd + L * dim * dim + L * dim + 3 * L * dim * hid + dim +
                seq * hs + (h[5] < 0 ? V * dim : 0);
    float *w = malloc((size_t)n * sizeof(float));
    uint32_t st = seed;
    for (int64_t i = 0; i < n; i++) {
        st = st * 1664525u + 1013904223u;
        w[i] = ((float)(st >> 8) / 16777216.0f - 0.5f) * 0.6f;
    }
    /* norms near 1 */
    for (int64_t i = V * dim; i < V * dim + L * dim; i++) w[i] += 1.0f;
    FILE *f = fopen(path, "wb");
    fwrite(h, 4, 7, f);
    fwrite(w, 4, (size_t)n, f);
    fclose(f);
    free(w);
}

/* Other llama2.c-format models: random weights, GQA, an untied classifier. */
static void other_llama2c_models(void) {
    const int32_t shapes[][7] = {{48, 100, 2, 6, 2, -40, 64}, {32, 80, 3, 4, 4, 50, 64}, {64, 96, 1, 8, 1, -30, 64}};
    for (int c = 0; c < 3; c++) {
        const char *p = sc_tmp_path("random.bin");
        write_random_llama2c(p, shapes[c], 77u + (unsigned)c);
        sc_model *m;
        ref_llama ref;
        CHECK_MSG(sc_model_load(p, &m, &err) == SC_OK, "%s", err.msg);
        CHECK(ref_llama_load(&ref, p));
        int32_t ids[40];
        int64_t V = m->cfg.vocab_size;
        for (int i = 0; i < 40; i++) ids[i] = (int32_t)((i * 7 + c) % V);
        sc_forward *f;
        CHECK(sc_forward_create(m, 40, 40, &f, &err) == SC_OK);
        const float *logits;
        CHECK(sc_forward_run(f, ids, 40, 0, NULL, &logits, &err) == SC_OK);
        double worst = 0;
        for (int t = 0; t < 40; t++) worst = fmax(worst, row_rel_err(logits + t * V, ref_llama_step(&ref, ids[t], t), V));
        printf("random llama2.c model %d (dim %d, %d kv heads, %s): worst relative logit error %.3g\n", c, shapes[c][0],
               shapes[c][4], shapes[c][5] < 0 ? "untied" : "tied", worst);
        CHECK(worst < 1e-4);
        sc_forward_free(f);
        ref_llama_free(&ref);
        sc_model_free(m);
    }
}

/* 8. per-matrix weight overrides (sc_forward_set_weights): the forward and backward passes with replacement
 * matrices equal, bit for bit, the passes of the model whose own matrices hold those values (the same code on the
 * same numbers), and removing the overrides gives the model's passes back. m's two matrices are rewritten. */
static float *grad_in0; /* dL/d(normalised attention input) of layer 0 */
static sc_status grab_grad(void *user, const sc_tap_event *ev, sc_err *e) {
    (void)user;
    (void)e;
    if (ev->is_grad && ev->tap == SC_TAP_ATTN_IN && ev->layer == 0)
        memcpy(grad_in0, ev->data, (size_t)(ev->n_tokens * ev->width) * sizeof(float));
    return SC_OK;
}

static void passes(sc_forward *f, const int32_t *ids, int64_t n, int64_t V, float *logits, float *grad) {
    const float *lg;
    CHECK(sc_forward_run(f, ids, n, 0, NULL, &lg, &err) == SC_OK);
    memcpy(logits, lg, (size_t)(n * V) * sizeof(float));
    float *dl = malloc((size_t)(n * V) * sizeof(float));
    sc_loss_ce(lg, ids, n, V, dl);
    grad_in0 = grad;
    sc_hooks hk = {grab_grad, NULL, SC_TAP_BIT(SC_TAP_ATTN_IN)};
    CHECK(sc_backward_run(f, dl, &hk, &err) == SC_OK);
    free(dl);
}

static void test_weight_override(sc_model *m, const sc_tokens *seq) {
    int64_t n = seq->n < 48 ? (int64_t)seq->n : 48, V = m->cfg.vocab_size, D = m->cfg.dim, F = m->cfg.ffn_dim;
    int64_t qd = m->cfg.n_heads * m->cfg.head_dim;
    sc_forward *f;
    CHECK(sc_forward_create_train(m, n, &f, &err) == SC_OK);
    float *l0 = malloc((size_t)(n * V) * sizeof(float)), *l1 = malloc((size_t)(n * V) * sizeof(float)),
          *l2 = malloc((size_t)(n * V) * sizeof(float));
    float *g0 = malloc((size_t)(n * D) * sizeof(float)), *g1 = malloc((size_t)(n * D) * sizeof(float)),
          *g2 = malloc((size_t)(n * D) * sizeof(float));
    passes(f, seq->ids, n, V, l0, g0); /* the model's own */
    /* replacements: layer 2's W_d halved, layer 0's W_q shifted */
    const float **w = calloc((size_t)(m->cfg.n_layers * SC_LIN_COUNT), sizeof *w);
    float *wd = malloc((size_t)(D * F) * sizeof(float)), *wq = malloc((size_t)(qd * D) * sizeof(float));
    for (int64_t i = 0; i < D * F; i++) wd[i] = 0.5f * m->layers[2].wd[i];
    for (int64_t i = 0; i < qd * D; i++) wq[i] = m->layers[0].wq[i] + 0.01f * (float)(i % 7 - 3);
    w[2 * SC_LIN_COUNT + SC_LIN_DOWN] = wd;
    w[0 * SC_LIN_COUNT + SC_LIN_Q] = wq;
    sc_forward_set_weights(f, w);
    passes(f, seq->ids, n, V, l1, g1);
    sc_forward_set_weights(f, NULL);
    passes(f, seq->ids, n, V, l2, g2);
    CHECK(!memcmp(l0, l2, (size_t)(n * V) * sizeof(float)) && !memcmp(g0, g2, (size_t)(n * D) * sizeof(float)));
    CHECK(memcmp(l0, l1, (size_t)(n * V) * sizeof(float)) != 0);
    /* the model itself holding the replacement values */
    float *own;
    CHECK(sc_model_make_resident(m, &m->layers[2].wd, (size_t)(D * F), &own, &err) == SC_OK);
    memcpy(own, wd, (size_t)(D * F) * sizeof(float));
    CHECK(sc_model_make_resident(m, &m->layers[0].wq, (size_t)(qd * D), &own, &err) == SC_OK);
    memcpy(own, wq, (size_t)(qd * D) * sizeof(float));
    passes(f, seq->ids, n, V, l2, g2);
    CHECK_MSG(!memcmp(l1, l2, (size_t)(n * V) * sizeof(float)), "overridden logits differ from the model's own");
    CHECK_MSG(!memcmp(g1, g2, (size_t)(n * D) * sizeof(float)), "overridden gradients differ from the model's own");
    sc_forward_free(f);
    free(w);
    free(wd);
    free(wq);
    free(l0);
    free(l1);
    free(l2);
    free(g0);
    free(g1);
    free(g2);
}

int main(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(24, &m, &tok, &d)) return sc_test_finish();
    ref_llama ref;
    CHECK(ref_llama_load(&ref, sc_asset("models/stories260K.bin")));
    CHECK(d.n_seqs == 24);

    /* 1. logits of whole windows vs the per-token reference, and perplexity */
    sc_forward *f;
    CHECK(sc_forward_create(m, 512, 512, &f, &err) == SC_OK);
    double worst = 0, nll_sc = 0, nll_ref = 0;
    int64_t scored = 0;
    for (size_t s = 0; s < d.n_seqs; s++) {
        const sc_tokens *q = &d.seqs[s];
        int64_t n = (int64_t)q->n < 512 ? (int64_t)q->n : 512;
        const float *logits;
        CHECK(sc_forward_run(f, q->ids, n, 0, NULL, &logits, &err) == SC_OK);
        for (int64_t t = 0; t < n; t++) {
            const double *rl = ref_llama_step(&ref, q->ids[t], (int)t);
            double e = row_rel_err(logits + t * 512, rl, 512);
            worst = e > worst ? e : worst;
            if (t + 1 < n) {
                nll_ref += ref_logsumexp(rl, 512) - rl[q->ids[t + 1]];
                nll_sc += sc_logsumexp(logits + t * 512, 512) - logits[t * 512 + q->ids[t + 1]];
                scored++;
            }
        }
    }
    printf("forward vs per-token double reference: worst row relative error %.3g over %lld positions\n", worst,
           (long long)scored);
    CHECK_MSG(worst < 1e-4, "worst relative logit error %.3g", worst);
    double ppl_sc = exp(nll_sc / scored), ppl_ref = exp(nll_ref / scored);
    printf("ppl: sparsecal %.6f, reference %.6f\n", ppl_sc, ppl_ref);
    CHECK(fabs(ppl_sc - ppl_ref) / ppl_ref < 1e-5);

    /* 2. sc_eval_ppl agrees with the loop above (same sequences, full context) */
    sc_ppl_result pr;
    CHECK(sc_eval_ppl(m, &d, 512, NULL, NULL, &pr, &err) == SC_OK);
    CHECK(pr.n_scored == scored);
    CHECK_NEAR(exp(pr.nll_sum / (double)pr.n_scored), ppl_sc, 1e-6 * ppl_sc);

    /* 3. windows: ctx 40 over one long sequence equals the reference run on
     * explicit windows overlapping by one token */
    {
        const sc_tokens *q = &d.seqs[0];
        sc_dataset one = {(sc_tokens *)q, 1, q->n};
        CHECK(sc_eval_ppl(m, &one, 40, NULL, NULL, &pr, &err) == SC_OK);
        double nll = 0;
        int64_t cnt = 0;
        for (int64_t start = 0; start + 1 < (int64_t)q->n; start += 39) {
            int64_t n = (int64_t)q->n - start < 40 ? (int64_t)q->n - start : 40;
            for (int64_t t = 0; t < n; t++) {
                const double *rl = ref_llama_step(&ref, q->ids[start + t], (int)t);
                if (t + 1 < n) {
                    nll += ref_logsumexp(rl, 512) - rl[q->ids[start + t + 1]];
                    cnt++;
                }
            }
        }
        CHECK(cnt == (int64_t)q->n - 1);
        CHECK(pr.n_scored == cnt);
        CHECK_NEAR(pr.nll_sum / (double)pr.n_scored, nll / (double)cnt, 1e-5);
    }

    /* 4. KV-cache continuation: two chunks == one window */
    {
        const sc_tokens *q = &d.seqs[1];
        int64_t n = (int64_t)q->n < 100 ? (int64_t)q->n : 100, k = n / 3;
        const float *l1;
        CHECK(sc_forward_run(f, q->ids, n, 0, NULL, &l1, &err) == SC_OK);
        float *full = malloc((size_t)(n * 512) * sizeof(float));
        memcpy(full, l1, (size_t)(n * 512) * sizeof(float));
        CHECK(sc_forward_run(f, q->ids, k, 0, NULL, &l1, &err) == SC_OK);
        CHECK(sc_forward_run(f, q->ids + k, n - k, k, NULL, &l1, &err) == SC_OK);
        double md = 0;
        for (int64_t i = 0; i < (n - k) * 512; i++) md = fmax(md, fabs(l1[i] - full[k * 512 + i]));
        CHECK_MSG(md < 1e-4, "continuation differs by %g", md);
        /* one layer's cache for whole windows (what ppl, eval and compute use): the same code on the
         * same inputs, so the same logits bit for bit; a continuation is refused */
        sc_forward *fw;
        CHECK(sc_forward_create_ex(m, 512, 512, SC_FWD_WHOLE_WINDOWS, &fw, &err) == SC_OK);
        CHECK(sc_forward_run(fw, q->ids, n, 0, NULL, &l1, &err) == SC_OK);
        CHECK(memcmp(l1, full, (size_t)(n * 512) * sizeof(float)) == 0);
        CHECK(sc_forward_run(fw, q->ids + k, n - k, k, NULL, &l1, &err) == SC_EARG);
        sc_forward_free(fw);
        free(full);
    }

    /* 5. taps: every tap fires once per layer; a replacing hook takes effect */
    {
        const sc_tokens *q = &d.seqs[2];
        tap_rec rec = {0};
        sc_hooks hk = {tap_fn, &rec, 0xffffffffu};
        const float *logits;
        CHECK(sc_forward_run(f, q->ids, 16, 0, &hk, &logits, &err) == SC_OK);
        for (int t = 0; t < SC_TAP_LOGITS; t++) CHECK(rec.calls[t] == 5);
        CHECK(rec.calls[SC_TAP_LOGITS] == 1);
        CHECK(rec.mlp_out_abs > 0);
        tap_rec rz = {0};
        rz.zero_h = true;
        hk.user = &rz;
        CHECK(sc_forward_run(f, q->ids, 16, 0, &hk, &logits, &err) == SC_OK);
        CHECK(rz.mlp_out_abs == 0.0);
        /* out-of-vocabulary ids are rejected */
        int32_t bad[2] = {1, 512};
        CHECK(sc_forward_run(f, bad, 2, 0, NULL, &logits, &err) == SC_ERANGE);
    }

    /* 6. the same weights from other formats give the same logits */
    {
        sc_tokens q = d.seqs[3];
        if (q.n > 200) q.n = 200;
        const char *paths[] = {"models/stories260K.gguf", "models/stories260K-hf",
                               "models/stories260K-hf-bf16-sharded"};
        double tols[] = {1e-6, 1e-5, 5e-2};
        for (int i = 0; i < 3; i++) {
            const char *p = sc_asset(paths[i]);
            sc_model *m2;
            if (!p) continue;
            sc_status st = sc_model_load(p, &m2, &err);
            CHECK_MSG(st == SC_OK, "%s: %s", paths[i], err.msg);
            if (st) continue;
            compare_models(m, m2, &q, tols[i], paths[i]);
            sc_ppl_result r2;
            CHECK(sc_eval_ppl(m2, &d, 512, NULL, NULL, &r2, &err) == SC_OK);
            double p2 = exp(r2.nll_sum / (double)r2.n_scored);
            printf("%s: ppl %.6f (bin %.6f)\n", paths[i], p2, ppl_sc);
            CHECK_NEAR(p2, ppl_sc, i < 2 ? 1e-4 * ppl_sc : 2e-2 * ppl_sc);
            sc_model_free(m2);
        }
    }

    /* 7. greedy generation equals greedy decoding with the reference */
    {
        sc_gen_opts go = {200, 0.0f, 0.9f, 1, 0};
        sc_gen_result gr;
        CHECK(sc_generate(m, tok, NULL, &go, NULL, &gr, &err) == SC_OK);
        int next = 1, agree = 1;
        size_t i;
        for (i = 0; i + 1 < gr.tokens.n; i++) {
            const double *rl = ref_llama_step(&ref, gr.tokens.ids[i], (int)i);
            int best = 0;
            for (int v = 1; v < 512; v++)
                if (rl[v] > rl[best]) best = v;
            next = best;
            if (next != gr.tokens.ids[i + 1]) agree = 0;
        }
        CHECK_MSG(agree, "greedy generation diverges from the reference");
        CHECK(gr.tokens.n >= 50);
        sc_tokens_free(&gr.tokens);
    }

    sc_forward_free(f);
    test_weight_override(m, &d.seqs[0]);
    ref_llama_free(&ref);
    other_llama2c_models();
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
