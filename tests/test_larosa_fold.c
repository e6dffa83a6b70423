/* test_larosa_fold.c - LaRoSA rotations folded at pack time (pack --method
 * larosa) on stories260K:
 *  - the folded f32 artifact computes the original model's function (dense
 *    perplexity equal to float tolerance) with unit RMSNorm weights, and
 *    `eval --method larosa` on it (no calibration: the rotations are in the
 *    model) equals `eval --method larosa --calib` on the original;
 *  - the runtime (srt_model_set_larosa: z = R n(x), top-K |z|, column-sparse
 *    projections, top-K |h| into the down projection) gives the same
 *    teacher-forced NLL as the reference on the same artifact, for f32
 *    (summation order only), q8_0 and zigzag (int8 activations);
 *  - refusals: no larosa statistics, an unrotated artifact in the runtime,
 *    a calibration on top of folded rotations, gradients through them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "engine.h"
#include "eval.h"
#include "forward.h"
#include "pack.h"
#include "sparse_eval.h"
#include "srt_model.h"
#include "rt_support.h"
#include "testing.h"

static sc_err err;

static double eval_nll(const sc_model *m, const sc_dataset *d, const char *method, double density, const sc_calib *c,
                       sc_sparse_eval_result *res) {
    sc_sparse_eval_opts o = {method, density, c, m->cfg.max_seq_len, false, NULL, NULL};
    if (sc_eval_sparse(m, d, &o, res, &err) != SC_OK) {
        fprintf(stderr, "eval: %s\n", err.msg);
        return NAN;
    }
    return res->ppl.nll_sum;
}

static double rel(double a, double b) { return fabs(a - b) / fabs(b); }

/* Per-token NLL difference runtime - reference, sequence by sequence: its
 * mean over the sequences and the standard error of that mean. */
static void seq_deltas(srt_model *rt, const sc_model *a, const sc_dataset *ev, double density, double *mean, double *se) {
    double s1 = 0.0, s2 = 0.0;
    size_t S = ev->n_seqs;
    for (size_t s = 0; s < S; s++) {
        sc_dataset one = {ev->seqs + s, 1, 0};
        sc_sparse_eval_result r;
        int64_t n;
        double ref = eval_nll(a, &one, "larosa", density, NULL, &r);
        double run = sc_test_rt_nll(rt, &one, &n, NULL);
        double dl = (run - ref) / (double)n;
        s1 += dl;
        s2 += dl * dl;
    }
    *mean = s1 / (double)S;
    double var = (s2 - s1 * s1 / (double)S) / (double)(S - 1);
    *se = sqrt(var > 0 ? var : 0) / sqrt((double)S);
}

int main(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(60, &m, &tok, &d)) return sc_test_finish();
    /* calibrate on 40 stories; evaluate 12 others that fit one window */
    sc_dataset cal = {d.seqs, 40, 0};
    sc_tokens evs[12];
    size_t ne = 0;
    for (size_t i = 40; i < d.n_seqs && ne < 12; i++)
        if ((int64_t)d.seqs[i].n <= m->cfg.max_seq_len) evs[ne++] = d.seqs[i];
    sc_dataset ev = {evs, ne, 0};
    CHECK(ne == 12);
    int64_t D = m->cfg.dim, F = m->cfg.ffn_dim, L = m->cfg.n_layers;

    sc_compute_opts co;
    sc_compute_opts_default(&co);
    co.methods[0] = "larosa";
    co.methods[1] = "cats";
    co.n_methods = 2;
    sc_calib *c;
    CHECK_MSG(sc_calib_compute(m, &cal, &co, &c, &err) == SC_OK, "%s", err.msg);

    /* refusals at pack time */
    {
        sc_compute_opts c2;
        sc_compute_opts_default(&c2);
        c2.methods[0] = "cats";
        c2.n_methods = 1;
        sc_calib *nolr;
        CHECK(sc_calib_compute(m, &cal, &c2, &nolr, &err) == SC_OK);
        sc_pack_opts po = {.layout = "f32", .calib = nolr, .method = "larosa", .density = 0.5};
        sc_pack_result pr;
        const char *p = sc_tmp_path("nolr.spk");
        CHECK(sc_pack(m, tok, &po, p, &pr, &err) == SC_EARG && strstr(err.msg, "larosa"));
        FILE *f = fopen(p, "rb");
        CHECK(f == NULL); /* nothing under the final name */
        if (f) fclose(f);
        sc_calib_free(nolr);
    }

    const double d_eval = 0.5;
    sc_sparse_eval_result r0, r1;
    double dense0 = eval_nll(m, &ev, "dense", 1.0, NULL, &r0);
    double lr0 = eval_nll(m, &ev, "larosa", d_eval, c, &r1);
    CHECK(isfinite(dense0) && isfinite(lr0) && lr0 > dense0);

    const char *layouts[] = {"f32", "q8_0", "zigzag"};
    /* runtime vs reference on the same artifact, dense: f32 differs by
     * summation order only (measured 2e-8..5e-8); the quantised kernels also
     * quantise activations to int8 blocks of 32 (relative step 1/254 of the
     * block's largest value), which the dequantised reference does not:
     * measured 7e-4..1.4e-3 over OpenBLAS core types and SPARSECAL_ISA
     * values; the bound is that step (~0.4%) times the 2-3x that five layers
     * and the classifier amplify it, not a tuned number. */
    const double tol_rt_dense[] = {1e-5, 0.01, 0.01};
    for (int li = 0; li < 3; li++) {
        char name[64];
        snprintf(name, sizeof name, "lr_%s.spk", layouts[li]);
        const char *p = sc_tmp_path(name);
        sc_pack_opts po = {.layout = layouts[li], .calib = c, .method = "larosa", .density = d_eval, .larosa_in = 0.8,
                           .larosa_h = 1.2};
        sc_pack_result pr;
        CHECK_MSG(sc_pack(m, tok, &po, p, &pr, &err) == SC_OK, "%s", err.msg);
        sc_model *a;
        CHECK_MSG(sc_model_load(p, &a, &err) == SC_OK, "%s", err.msg);
        bool all = true, ones = true;
        for (int64_t l = 0; l < L; l++) {
            all = all && sc_test_layer(a, l)->attn_rot && sc_test_layer(a, l)->mlp_rot;
            for (int64_t i = 0; i < D; i++) ones = ones && sc_test_layer(a, l)->attn_norm[i] == 1.0f && sc_test_layer(a, l)->ffn_norm[i] == 1.0f;
        }
        CHECK_MSG(all && ones, "%s: rotations on every block input, RMSNorm weights folded to one", layouts[li]);

        sc_sparse_eval_result ra, rb;
        double dense_a = eval_nll(a, &ev, "dense", 1.0, NULL, &ra);
        double lr_a = eval_nll(a, &ev, "larosa", d_eval, NULL, &rb);
        printf("%-6s folded: dense nll %.6f (original %.6f), larosa d=%.1f nll %.6f (original + calib %.6f)\n", layouts[li],
               dense_a, dense0, d_eval, lr_a, lr0);
        CHECK(fabs(rb.lc.in_density - r1.lc.in_density) < 1e-12 && fabs(rb.lc.h_density - r1.lc.h_density) < 1e-12);
        if (li == 0) {
            CHECK_MSG(rel(dense_a, dense0) < 1e-5, "folding changed the dense function: %.3g", rel(dense_a, dense0));
            CHECK_MSG(rel(lr_a, lr0) < 1e-3, "folded larosa differs from the calibrated rotation: %.3g", rel(lr_a, lr0));
        } else { /* quantisation cost, reported (q8_0 ~0.2%; int4 zigzag of the rotated weights ~40% NLL) */
            CHECK_MSG(rel(dense_a, dense0) < (li == 1 ? 0.005 : 0.5), "%s dense cost %.3g", layouts[li], rel(dense_a, dense0));
        }
        /* a calibration on top of folded rotations is refused */
        sc_sparse_eval_opts o2 = {"larosa", d_eval, c, 512, false, NULL, NULL};
        sc_sparse_eval_result rr;
        CHECK(sc_eval_sparse(a, &ev, &o2, &rr, &err) == SC_EARG && strstr(err.msg, "folded"));

        /* the runtime */
        srt_ctx *ctx;
        CHECK(srt_ctx_create(&ctx, SRT_ISA_AUTO, 1) == SRT_OK);
        srt_model_opts mo = {0, ctx, SRT_KV_F32};
        srt_model *rt;
        char emsg[512];
        CHECK_MSG(srt_model_open(p, &mo, &rt, emsg, sizeof emsg) == SRT_CT_OK, "%s", emsg);
        CHECK(srt_model_rotated_inputs(rt) == 2 * L);
        CHECK(strcmp(srt_model_default_method(rt), "larosa") == 0);
        int64_t n1, n2, kin, kh;
        CHECK(srt_model_set_larosa(rt, 1.0) == SRT_OK);
        double rd = sc_test_rt_nll(rt, &ev, &n1, NULL);
        CHECK(srt_model_set_larosa(rt, d_eval) == SRT_OK);
        srt_model_larosa_counts(rt, &kin, &kh);
        CHECK(kin == (int64_t)llround(rb.lc.in_density * (double)D) && kh == (int64_t)llround(rb.lc.h_density * (double)F));
        double rl = sc_test_rt_nll(rt, &ev, &n2, NULL);
        printf("%-6s runtime: dense nll %.6f (reference %.6f, rel %.2e), larosa nll %.6f (reference %.6f, rel %.2e), "
               "K_in %lld/%lld K_h %lld/%lld\n",
               layouts[li], rd, dense_a, rel(rd, dense_a), rl, lr_a, rel(rl, lr_a), (long long)kin, (long long)D,
               (long long)kh, (long long)F);
        CHECK(n1 == ra.ppl.n_scored && n2 == rb.ppl.n_scored);
        CHECK_MSG(rel(rd, dense_a) < tol_rt_dense[li], "%s runtime dense: %.3g", layouts[li], rel(rd, dense_a));
        if (li == 0) { /* f32: summation order only; a top-K near-tie may flip a coordinate now and then */
            CHECK_MSG(rel(rl, lr_a) < 2e-3, "%s runtime larosa: %.3g", layouts[li], rel(rl, lr_a));
        } else {
            double mean, se;
            seq_deltas(rt, a, &ev, d_eval, &mean, &se);
            printf("%-6s runtime - reference larosa NLL per token over %zu sequences: mean %+.4f, standard error %.4f\n",
                   layouts[li], ev.n_seqs, mean, se);
            /* With int8 activations the rotated coordinates move by up to a
             * quantisation step, so top-K decisions near the K-th value flip
             * and the runtime's NLL leaves the reference's by several percent
             * on one sequence, up or down (measured -0.11..+0.25 nats per
             * token) and by 1-3% in total depending on which OpenBLAS kernels
             * computed the rotation. No fixed relative bound is honest here,
             * so compare per sequence: the mean difference must lie within 4
             * standard errors of the per-sequence differences plus the dense
             * int8 cost per token (what activation rounding costs without any
             * routing). A wrong rotation, split or K moves every sequence the
             * same way by tenths of a nat per token and fails this. */
            double dense_cost = fabs(rd - dense_a) / (double)n1;
            CHECK_MSG(fabs(mean) <= 4.0 * se + dense_cost, "%s runtime larosa: mean %+.4f vs 4 SE %.4f + %.4f",
                      layouts[li], mean, 4.0 * se, dense_cost);
            CHECK_MSG(rel(rl, lr_a) < 0.1, "%s runtime larosa: %.3g", layouts[li], rel(rl, lr_a)); /* a gross sanity bound */
        }
        /* the prompt through srt_model_prefill (rotations, LaRoSA's input and h top-K batched; 40 tokens:
         * three chunks) on 2 threads equals steps on 1: LaRoSA, then the dense router on the rotated inputs
         * (the only other router of a rotated artifact) */
        {
            const sc_tokens *lg = &ev.seqs[0];
            for (size_t q = 1; q < ev.n_seqs; q++)
                if (ev.seqs[q].n > lg->n) lg = &ev.seqs[q];
            const int64_t np = lg->n > 41 ? 40 : (int64_t)lg->n - 1;
            CHECK(np >= 33);
            srt_ctx *ctx2;
            srt_model *rt2;
            CHECK(srt_ctx_create(&ctx2, SRT_ISA_AUTO, 2) == SRT_OK);
            srt_model_opts mo2 = {0, ctx2, SRT_KV_F32};
            CHECK(srt_model_open(p, &mo2, &rt2, emsg, sizeof emsg) == SRT_CT_OK);
            CHECK(srt_model_set_larosa(rt2, d_eval) == SRT_OK);
            CHECK_MSG(sc_test_prefill_matches(rt2, rt, lg->ids, np, srt_model_get_config(rt)->vocab_size),
                      "%s larosa: prefill differs from steps", layouts[li]);
            CHECK(srt_model_set_router(rt2, SRT_ROUTER_DENSE, 1.0) == SRT_OK && srt_model_set_router(rt, SRT_ROUTER_DENSE, 1.0) == SRT_OK);
            CHECK_MSG(sc_test_prefill_matches(rt2, rt, lg->ids, np, srt_model_get_config(rt)->vocab_size),
                      "%s dense on rotated inputs: prefill differs from steps", layouts[li]);
            CHECK(srt_model_set_larosa(rt, d_eval) == SRT_OK); /* LaRoSA again: the check below leaves it */
            srt_model_close(rt2);
            srt_ctx_free(ctx2);
        }
        /* back to a neuron router: LaRoSA off, the rotations still applied */
        CHECK(srt_model_set_router(rt, SRT_ROUTER_DENSE, 1.0) == SRT_OK);
        srt_model_larosa_counts(rt, &kin, &kh);
        CHECK(kin == D && kh == F);
        CHECK(srt_model_set_larosa(rt, 1.5) == SRT_EINVAL);
        srt_model_close(rt);
        srt_ctx_free(ctx);

        if (li == 0) { /* no gradients through folded rotations */
            sc_forward *f = NULL;
            CHECK(sc_forward_create_train(a, 64, &f, &err) == SC_EUNSUPPORTED && strstr(err.msg, "rotations"));
            sc_forward_free(f);
        }
        sc_model_free(a);
    }

    /* an unrotated artifact: the runtime refuses LaRoSA, eval asks for a calibration */
    {
        const char *p = sc_tmp_path("plain.spk");
        sc_pack_opts po = {.layout = "f32", .calib = c, .method = "cats", .density = 0.5};
        sc_pack_result pr;
        CHECK(sc_pack(m, tok, &po, p, &pr, &err) == SC_OK);
        srt_ctx *ctx;
        CHECK(srt_ctx_create(&ctx, SRT_ISA_AUTO, 1) == SRT_OK);
        srt_model_opts mo = {0, ctx, SRT_KV_F32};
        srt_model *rt;
        char emsg[512];
        CHECK(srt_model_open(p, &mo, &rt, emsg, sizeof emsg) == SRT_CT_OK);
        CHECK(srt_model_rotated_inputs(rt) == 0 && srt_model_set_larosa(rt, 0.5) == SRT_ENOTSUP);
        srt_model_close(rt);
        srt_ctx_free(ctx);
        sc_model *a;
        CHECK(sc_model_load(p, &a, &err) == SC_OK);
        sc_sparse_eval_result rr;
        sc_sparse_eval_opts o2 = {"larosa", 0.5, NULL, 512, false, NULL, NULL};
        CHECK(sc_eval_sparse(a, &ev, &o2, &rr, &err) == SC_EARG && strstr(err.msg, "--calib"));
        sc_model_free(a);
    }
    sc_calib_free(c);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
