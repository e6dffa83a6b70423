/* test_teal.c - TEAL and the forward pass's linear hook: the hook costs
 * nothing and a pass-through hook changes nothing; one layer run on its own
 * equals the full pass; the masking hook by hand; thresholds reproduce the
 * target sparsity on their own calibration data within the bin resolution;
 * sparsity 0 equals dense exactly; the greedy curve is monotone and its
 * lookup hits the parameter-weighted target; shards merge to one run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "engine.h"
#include "ops.h"
#include "scal.h"
#include "sparse_eval.h"
#include "srt_route.h"
#include "teal.h"
#include "testing.h"

static sc_err err;

static sc_status recompute(void *user, const sc_linear_event *ev, sc_err *e) {
    int *calls = user;
    calls[ev->which]++;
    sc_linear_forward(ev->y, ev->x, ev->W, ev->b, ev->n_tokens, ev->in, ev->out);
    return SC_OK;
}

/* captures the residual entering each layer (RESID of the previous layer) */
typedef struct resid_cap {
    float *x; /* [L + 1, T, D] */
    int64_t T, D;
} resid_cap;

static sc_status cap_resid(void *user, const sc_tap_event *ev, sc_err *e) {
    resid_cap *c = user;
    memcpy(c->x + (ev->layer + 1) * c->T * c->D, ev->data, (size_t)(ev->n_tokens * ev->width) * sizeof(float));
    return SC_OK;
}

/* counts |x| <= t at the four taps, rows [0, n-1) (the calibration rows) */
typedef struct count_ctx {
    const double *thr; /* [L, 4] */
    double below[5][4], total[5][4];
} count_ctx;

static sc_status count_tap(void *user, const sc_tap_event *ev, sc_err *e) {
    count_ctx *c = user;
    int tap = ev->tap == SC_TAP_ATTN_IN ? 0 : ev->tap == SC_TAP_ATTN_CTX ? 1 : ev->tap == SC_TAP_MLP_IN ? 2 : 3;
    double t = c->thr[ev->layer * 4 + tap];
    for (int64_t i = 0; i < (ev->n_tokens - 1) * ev->width; i++) c->below[ev->layer][tap] += fabs((double)ev->data[i]) <= t;
    c->total[ev->layer][tap] += (double)((ev->n_tokens - 1) * ev->width);
    return SC_OK;
}

static void compare_sums(const sc_calib *a, const sc_calib *b, const char *what) {
    sc_array *x = malloc(2 * SC_MAX_ARRAYS * sizeof *x), *y = x + SC_MAX_ARRAYS;
    const sc_method *me = sc_method_find("teal");
    int nx = me->arrays(sc_calib_state(a, "teal"), x, SC_MAX_ARRAYS), ny = me->arrays(sc_calib_state(b, "teal"), y, SC_MAX_ARRAYS);
    CHECK(nx == ny && nx > 0);
    int64_t diffs = 0, compared = 0;
    for (int k = 0; k < nx && k < ny; k++) {
        if (x[k].kind == SC_ARR_CONCAT) continue; /* sample rows: shards store them in another order */
        int64_t n = x[k].shape[0] * (x[k].shape[1] ? x[k].shape[1] : 1);
        size_t esz = x[k].type == SC_ARR_F32 ? 4 : 8;
        CHECK(strcmp(x[k].name, y[k].name) == 0 && n == y[k].shape[0] * (y[k].shape[1] ? y[k].shape[1] : 1));
        diffs += memcmp(x[k].data, y[k].data, (size_t)n * esz) != 0;
        compared++;
    }
    printf("%s: %lld of %lld histogram/curve arrays differ\n", what, (long long)diffs, (long long)compared);
    CHECK_MSG(diffs == 0, "%s", what);
    free(x);
}

int main(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(60, &m, &tok, &d)) return sc_test_finish();
    const sc_config *c = &m->cfg;
    int64_t D = c->dim, L = c->n_layers, T = 40;

    /* 1. the linear hook: a pass-through hook changes no bit; every linear is seen;
     *    sc_forward_layer chained from the embedding equals the full pass */
    {
        sc_forward *f;
        CHECK(sc_forward_create(m, T, T, &f, &err) == SC_OK);
        const float *lg;
        float *ref = malloc((size_t)(T * c->vocab_size) * sizeof(float));
        CHECK(sc_forward_run(f, d.seqs[0].ids, T, 0, NULL, &lg, &err) == SC_OK);
        memcpy(ref, lg, (size_t)(T * c->vocab_size) * sizeof(float));
        int calls[SC_LIN_COUNT] = {0};
        sc_forward_set_linear_hook(f, recompute, calls);
        CHECK(sc_forward_run(f, d.seqs[0].ids, T, 0, NULL, &lg, &err) == SC_OK);
        CHECK(memcmp(ref, lg, (size_t)(T * c->vocab_size) * sizeof(float)) == 0);
        for (int k = 0; k < SC_LIN_COUNT; k++) CHECK(calls[k] == L);
        sc_forward_set_linear_hook(f, NULL, NULL);
        resid_cap rc = {calloc((size_t)((L + 1) * T * D), sizeof(float)), T, D};
        for (int64_t t = 0; t < T; t++) memcpy(rc.x + t * D, m->tok_emb + (int64_t)d.seqs[0].ids[t] * D, (size_t)D * sizeof(float));
        sc_hooks hk = {cap_resid, &rc, SC_TAP_BIT(SC_TAP_RESID)};
        CHECK(sc_forward_run(f, d.seqs[0].ids, T, 0, &hk, NULL, &err) == SC_OK);
        float *x = malloc((size_t)(T * D) * sizeof(float));
        memcpy(x, rc.x, (size_t)(T * D) * sizeof(float));
        bool same = true;
        for (int64_t l = 0; l < L; l++) {
            CHECK(sc_forward_layer(f, l, x, T, &err) == SC_OK);
            same &= memcmp(x, rc.x + (l + 1) * T * D, (size_t)(T * D) * sizeof(float)) == 0;
        }
        CHECK_MSG(same, "sc_forward_layer chain differs from the full pass");
        CHECK(sc_forward_layer(f, L, x, T, &err) == SC_EARG);
        free(x);
        free(rc.x);
        free(ref);
        sc_forward_free(f);
    }

    /* 2. the masking hook by hand: W [2, 3], x = (0.1, -2, 0.5), t = 0.4 */
    {
        float W[6] = {1, 2, 3, -1, 0.5f, 4}, xx[3] = {0.1f, -2.0f, 0.5f}, y[2] = {0}, scratch[3];
        double thr[SC_TEAL_NPROJ] = {0.4}, dropped[SC_TEAL_NPROJ] = {0}, seen[SC_TEAL_NPROJ] = {0};
        sc_teal_mask mk = {thr, scratch, 3, dropped, seen, false};
        sc_linear_event ev = {SC_LIN_Q, 0, 0, 1, 3, 2, xx, W, NULL, y};
        CHECK(sc_teal_linear_hook(&mk, &ev, &err) == SC_OK);
        CHECK(y[0] == 2 * -2.0f + 3 * 0.5f && y[1] == 0.5f * -2.0f + 4 * 0.5f && dropped[0] == 1 && seen[0] == 3);
        thr[0] = 0.0; /* t = 0: y untouched */
        y[0] = 42;
        CHECK(sc_teal_linear_hook(&mk, &ev, &err) == SC_OK && y[0] == 42);
    }

    /* 3. compute; thresholds reproduce the target on the calibration data */
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    co.methods[0] = "teal";
    co.n_methods = 1;
    co.seq_len = 64;
    co.max_seqs = 24;
    co.params = "teal_seqs=4,teal_len=20";
    sc_calib *one;
    CHECK_MSG(sc_calib_compute(m, &d, &co, &one, &err) == SC_OK, "%s", err.msg);
    void *st = sc_calib_state(one, "teal");
    double *cum = malloc(SC_TEAL_NB * sizeof(double));
    const double targets[3] = {0.25, 0.5, 0.75};
    for (int ti = 0; ti < 3; ti++) {
        double thr[5 * 4], tol[5 * 4];
        for (int64_t l = 0; l < L; l++)
            for (int k = 0; k < 4; k++) {
                sc_teal_cumulative(sc_teal_hist(st, l, k), cum);
                double t = sc_teal_threshold(cum, targets[ti]);
                int64_t b = sc_teal_bin(t);
                thr[l * 4 + k] = t;
                double mass = 0;
                for (int64_t bb = b - 1; bb <= b + 1; bb++)
                    if (bb >= 0 && bb < SC_TEAL_NB) mass = fmax(mass, cum[bb] - (bb ? cum[bb - 1] : 0));
                tol[l * 4 + k] = mass / cum[SC_TEAL_NB - 1] + 1e-12;
            }
        count_ctx cc;
        memset(&cc, 0, sizeof cc);
        cc.thr = thr;
        sc_forward *f;
        CHECK(sc_forward_create(m, 64, 64, &f, &err) == SC_OK);
        sc_hooks hk = {count_tap, &cc,
                       SC_TAP_BIT(SC_TAP_ATTN_IN) | SC_TAP_BIT(SC_TAP_ATTN_CTX) | SC_TAP_BIT(SC_TAP_MLP_IN) | SC_TAP_BIT(SC_TAP_H)};
        int64_t used = 0;
        for (size_t i = 0; i < d.n_seqs && used < 24; i++) {
            if (d.seqs[i].n < 2) continue;
            used++;
            int64_t n = (int64_t)d.seqs[i].n < 64 ? (int64_t)d.seqs[i].n : 64;
            CHECK(sc_forward_run(f, d.seqs[i].ids, n, 0, &hk, NULL, &err) == SC_OK);
        }
        sc_forward_free(f);
        double worst = 0, worst_tol = 0;
        for (int64_t l = 0; l < L; l++)
            for (int k = 0; k < 4; k++) {
                double a = cc.below[l][k] / cc.total[l][k], e = fabs(a - targets[ti]);
                CHECK_MSG(e <= tol[l * 4 + k], "layer %lld tap %s: sparsity %.6f for target %.2f (tol %.3g)", (long long)l,
                          sc_teal_tap_name(k), a, targets[ti], tol[l * 4 + k]);
                if (e > worst) {
                    worst = e;
                    worst_tol = tol[l * 4 + k];
                }
            }
        printf("teal thresholds at %.2f on their calibration data: worst |achieved - target| %.2e (its bin's mass %.2e)\n",
               targets[ti], worst, worst_tol);
    }

    /* 4. sparsity 0 equals dense exactly; greedy curve monotone; lookup hits the target */
    {
        sc_dataset ev = {d.seqs + 30, 20, 0};
        sc_ppl_result dense;
        CHECK(sc_eval_ppl(m, &ev, 512, NULL, NULL, &dense, &err) == SC_OK);
        const char *ms[2] = {"teal", "teal-greedy"};
        for (int i = 0; i < 2; i++) {
            sc_sparse_eval_opts eo = {ms[i], 1.0, one, 512, false, NULL, NULL};
            sc_sparse_eval_result r;
            CHECK_MSG(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK, "%s", err.msg);
            CHECK_MSG(r.ppl.nll_sum == dense.nll_sum, "%s at density 1: %.17g vs %.17g", ms[i], r.ppl.nll_sum, dense.nll_sum);
            eo.density = 0.5;
            CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK);
            CHECK(r.in.valid && r.ppl.nll_sum > dense.nll_sum && fabs(r.in.effective_sparsity - 0.5) < 0.1);
            printf("%s at sparsity 0.5 on held-out text: achieved %.4f, ppl %.3f (dense %.3f)\n", ms[i],
                   r.in.effective_sparsity, exp(r.ppl.nll_sum / (double)r.ppl.n_scored),
                   exp(dense.nll_sum / (double)dense.n_scored));
        }
        for (int64_t l = 0; l < L; l++) {
            int64_t rows;
            const double *cv = sc_teal_curve(st, l, &rows);
            CHECK(rows > 100);
            bool mono = true;
            for (int p = 0; p <= SC_TEAL_NPROJ; p++) mono &= cv[p] == 0.0;
            for (int64_t r = 1; r < rows; r++) {
                const double *a = cv + (r - 1) * SC_TEAL_CURVE_COLS, *b = cv + r * SC_TEAL_CURVE_COLS;
                mono &= b[SC_TEAL_NPROJ] > a[SC_TEAL_NPROJ];
                int changed = 0;
                for (int p = 0; p < SC_TEAL_NPROJ; p++) {
                    mono &= b[p] >= a[p] && b[p] <= SC_TEAL_SMAX;
                    changed += b[p] != a[p];
                }
                mono &= changed == 1 && fabs(b[SC_TEAL_NPROJ] - sc_teal_effective(c, b)) < 1e-15;
            }
            CHECK_MSG(mono, "layer %lld: the allocation curve is not monotone", (long long)l);
            /* read as pack stores it (f32) and the runtime reads it: between the rows bracketing the target,
             * one projection moves, so the effective sparsity is the target to float rounding */
            float *cf = malloc((size_t)(rows * SC_TEAL_CURVE_COLS) * sizeof *cf);
            for (int64_t i = 0; cf && i < rows * SC_TEAL_CURVE_COLS; i++) cf[i] = (float)cv[i];
            for (double tgt = 0.25; cf && tgt < 0.61; tgt += 0.05) {
                double sp[SC_TEAL_NPROJ];
                srt_teal_curve_at(cf, rows, tgt, sp);
                CHECK_MSG(fabs(sc_teal_effective(c, sp) - tgt) < 1e-6, "layer %lld target %.2f: effective %.8f",
                          (long long)l, tgt, sc_teal_effective(c, sp));
                if (l == 2 && fabs(tgt - 0.5) < 1e-9)
                    printf("greedy layer 2 at 0.5: q %.3f k %.3f v %.3f o %.3f gate %.3f up %.3f down %.3f -> %.6f\n",
                           sp[0], sp[1], sp[2], sp[3], sp[4], sp[5], sp[6], sc_teal_effective(c, sp));
            }
            if (cf) { /* the ends: dense at 0, the last row beyond it */
                double sp[SC_TEAL_NPROJ];
                srt_teal_curve_at(cf, rows, 0.0, sp);
                CHECK(sc_teal_effective(c, sp) == 0.0);
                srt_teal_curve_at(cf, rows, 2.0, sp);
                for (int p = 0; p < SC_TEAL_NPROJ; p++) CHECK(sp[p] == (double)cf[(rows - 1) * SC_TEAL_CURVE_COLS + p]);
            }
            free(cf);
        }
    }

    /* 5. shards: in memory (with the model) and through files merged without the model */
    {
        sc_calib *a, *b;
        co.shard_count = 2;
        CHECK(sc_calib_compute(m, &d, &co, &a, &err) == SC_OK);
        co.shard_index = 1;
        CHECK(sc_calib_compute(m, &d, &co, &b, &err) == SC_OK);
        const char *pa = sc_tmp_path("ta.scal"), *pb = sc_tmp_path("tb.scal"), *pab = sc_tmp_path("tab.scal");
        CHECK(sc_calib_save(a, m, pa, 3, &err) == SC_OK && sc_calib_save(b, m, pb, 0, &err) == SC_OK);
        CHECK(sc_calib_merge(a, b, &err) == SC_OK);
        compare_sums(a, one, "teal shards 0/2 + 1/2 (in memory) vs one run");
        sc_calib *la, *lb, *lab;
        CHECK_MSG(sc_calib_load(pa, NULL, &la, &err) == SC_OK, "%s", err.msg);
        CHECK(sc_calib_load(pb, NULL, &lb, &err) == SC_OK);
        CHECK_MSG(sc_calib_merge(la, lb, &err) == SC_OK, "%s", err.msg);
        int64_t rows;
        sc_teal_curve(sc_calib_state(la, "teal"), 0, &rows);
        CHECK(rows == 0); /* no weights at merge: pending */
        CHECK(sc_calib_save(la, NULL, pab, 3, &err) == SC_OK);
        CHECK_MSG(sc_calib_load(pab, m, &lab, &err) == SC_OK, "%s", err.msg);
        compare_sums(lab, one, "teal shards merged from files, loaded with the model, vs one run");
        sc_calib_free(la);
        sc_calib_free(lb);
        sc_calib_free(lab);
        sc_calib_free(a);
        sc_calib_free(b);
    }

    /* 6. errors: teal-greedy without a curve, no teal statistics, bad parameters */
    {
        sc_calib *ng;
        co.shard_index = 0;
        co.shard_count = 1;
        co.params = "teal_greedy=0";
        CHECK(sc_calib_compute(m, &d, &co, &ng, &err) == SC_OK);
        sc_dataset ev = {d.seqs + 30, 5, 0};
        sc_sparse_eval_opts eo = {"teal-greedy", 0.5, ng, 512, false, NULL, NULL};
        sc_sparse_eval_result r;
        CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_EARG && strstr(err.msg, "curve"));
        eo.calib = NULL;
        CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_EARG);
        sc_calib_free(ng);
        sc_calib *bad;
        co.params = "teal_seqs=0";
        CHECK(sc_calib_compute(m, &d, &co, &bad, &err) == SC_EARG && strstr(err.msg, "teal_seqs"));
    }
    free(cum);
    sc_calib_free(one);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
