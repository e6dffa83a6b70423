/* test_larosa.c - LaRoSA: the dsyrk moment against a naive double loop, Q
 * orthonormal and diagonalising the damped moment (synthetic and on the
 * model), eigensolver failures reported, shards merging to one run, eval at
 * sparsity 0 equal to dense, exact top-K densities, and the grid search
 * keeping the parameter-weighted sparsity. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "larosa.h"
#include "lc_eval.h"
#include "scal.h"
#include "sparse_eval.h"
#include "testing.h"

static sc_err err;

/* max |Q^T Q - I| and max off-diagonal |Q^T M Q| / max eig, with M the damped mean moment */
static void check_eigen(const double *H, int64_t count, int64_t D, double damp, const double *eig, const double *Q,
                        const char *what) {
    double *M = malloc((size_t)(D * D) * sizeof *M);
    double inv = count ? 1.0 / (double)count : 0, tr = 0;
    for (int64_t i = 0; i < D; i++) tr += H[i * D + i] * inv;
    for (int64_t i = 0; i < D; i++)
        for (int64_t j = 0; j < D; j++) M[i * D + j] = (j >= i ? H[i * D + j] : H[j * D + i]) * inv + (i == j ? damp * tr / (double)D : 0);
    double orth = 0, off = 0, diag = 0;
    for (int64_t a = 0; a < D; a++)
        for (int64_t b = 0; b < D; b++) {
            double qq = 0, qmq = 0;
            for (int64_t i = 0; i < D; i++) {
                qq += Q[i * D + a] * Q[i * D + b];
                double mq = 0;
                for (int64_t j = 0; j < D; j++) mq += M[i * D + j] * Q[j * D + b];
                qmq += Q[i * D + a] * mq;
            }
            orth = fmax(orth, fabs(qq - (a == b)));
            if (a == b)
                diag = fmax(diag, fabs(qmq - eig[a]) / fmax(fabs(eig[0]), 1e-300));
            else
                off = fmax(off, fabs(qmq) / fmax(fabs(eig[0]), 1e-300));
        }
    bool desc = true;
    for (int64_t k = 1; k < D; k++) desc = desc && eig[k] <= eig[k - 1];
    CHECK_MSG(orth < 1e-12 && off < 1e-12 && diag < 1e-12 && desc && eig[D - 1] > 0,
              "%s: |Q^TQ-I| %.3g, off-diagonal %.3g, diagonal %.3g, descending %d, smallest %.3g", what, orth, off,
              diag, desc, eig[D - 1]);
    free(M);
}

int main(void) {
    /* 1. dsyrk accumulation equals a naive double loop (rows crossing chunk boundaries) */
    {
        int64_t D = 7, n = 600;
        float *X = malloc((size_t)(n * D) * sizeof *X);
        double H[49] = {0}, ref[49] = {0}, scratch[SC_LAROSA_CHUNK * 7], eig[7], Q[49];
        uint64_t r = 12345;
        for (int64_t i = 0; i < n * D; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            X[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5) * (float)(1 + i % D);
        }
        sc_larosa_accumulate(H, X, 250, D, scratch);
        sc_larosa_accumulate(H, X + 250 * D, n - 250, D, scratch);
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < D; i++)
                for (int64_t j = i; j < D; j++) ref[i * D + j] += (double)X[t * D + i] * (double)X[t * D + j];
        double worst = 0;
        for (int64_t i = 0; i < D; i++)
            for (int64_t j = i; j < D; j++) worst = fmax(worst, fabs(H[i * D + j] - ref[i * D + j]) / fabs(ref[i * D + i]));
        CHECK_MSG(worst < 1e-13, "dsyrk vs naive: %.3g", worst);
        CHECK(H[1 * D + 0] == 0.0); /* the lower triangle is not touched */
        CHECK(sc_larosa_eigen(H, n, D, 0.01, eig, Q, &err) == SC_OK);
        check_eigen(H, n, D, 0.01, eig, Q, "synthetic 7x7");
        H[3] = NAN;
        CHECK(sc_larosa_eigen(H, n, D, 0.01, eig, Q, &err) != SC_OK && strstr(err.msg, "dsyevd"));
        printf("eigensolver failure reported as: %s\n", err.msg);
        free(X);
    }
    const char *bin = sc_asset("models/stories260K.bin"), *tokp = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_valid_a.txt");
    if (!bin || !tokp || !text) return sc_test_finish();
    sc_model *m;
    sc_tokenizer *tok;
    CHECK(sc_model_load(bin, &m, &err) == SC_OK);
    CHECK(sc_tokenizer_load_llama2c(tokp, 512, &tok, &err) == SC_OK);
    sc_data_opts dopt;
    sc_data_opts_default(&dopt);
    dopt.max_docs = 70;
    sc_dataset d;
    CHECK(sc_data_load_text(text, tok, &dopt, &d, &err) == SC_OK);
    sc_dataset cal = {d.seqs, 40, 0}, ev = {d.seqs + 40, 30, 0};
    int64_t D = m->cfg.dim, F = m->cfg.ffn_dim;

    /* 2. on the model: Q orthonormal and diagonalising every layer's damped moment */
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    co.methods[0] = "larosa";
    co.n_methods = 1;
    co.seq_len = 128;
    sc_calib *one;
    CHECK_MSG(sc_calib_compute(m, &cal, &co, &one, &err) == SC_OK, "%s", err.msg);
    void *st = sc_calib_state(one, "larosa");
    for (int64_t l = 0; l < m->cfg.n_layers; l++)
        for (int w = 0; w < 2; w++) {
            sc_larosa_input in;
            CHECK(sc_larosa_get(st, l, w, &in));
            CHECK(in.count == one->n_tokens);
            char what[64];
            snprintf(what, sizeof what, "layer %lld %s", (long long)l, w ? "mlp" : "attn");
            check_eigen(in.H, in.count, D, 0.01, in.eig, in.Q, what);
        }

    /* 3. shards merged (through files) equal one run */
    {
        sc_calib *a, *b, *la;
        co.shard_count = 2;
        CHECK(sc_calib_compute(m, &cal, &co, &a, &err) == SC_OK);
        co.shard_index = 1;
        CHECK(sc_calib_compute(m, &cal, &co, &b, &err) == SC_OK);
        co.shard_index = 0;
        co.shard_count = 1;
        const char *pa = sc_tmp_path("la.scal");
        CHECK(sc_calib_save(a, m, pa, 3, &err) == SC_OK);
        CHECK_MSG(sc_calib_load(pa, NULL, &la, &err) == SC_OK, "%s", err.msg);
        CHECK_MSG(sc_calib_merge(la, b, &err) == SC_OK, "%s", err.msg);
        double wh = 0, wq = 0;
        for (int64_t l = 0; l < m->cfg.n_layers; l++)
            for (int w = 0; w < 2; w++) {
                sc_larosa_input x, y;
                CHECK(sc_larosa_get(sc_calib_state(la, "larosa"), l, w, &x) && sc_larosa_get(st, l, w, &y));
                CHECK(x.count == y.count);
                for (int64_t i = 0; i < D * D; i++) {
                    wh = fmax(wh, fabs(x.H[i] - y.H[i]) / fmax(fabs(y.H[(i / D) * D + i / D]), 1e-300));
                    wq = fmax(wq, fabs(fabs(x.Q[i]) - fabs(y.Q[i])));
                }
            }
        printf("larosa shards vs one run: H %.3g, |Q| %.3g\n", wh, wq);
        CHECK(wh < 1e-12 && wq < 1e-6);
        sc_calib_free(a);
        sc_calib_free(b);
        sc_calib_free(la);
    }

    /* 4. eval: sparsity 0 equals dense bit for bit; exact top-K densities; more sparsity, higher loss */
    {
        sc_ppl_result dense;
        CHECK(sc_eval_ppl(m, &ev, 256, NULL, NULL, &dense, &err) == SC_OK);
        sc_sparse_eval_opts eo = {"larosa", 1.0, one, 256, false, NULL, NULL};
        sc_sparse_eval_result r;
        CHECK_MSG(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK, "%s", err.msg);
        CHECK_MSG(r.ppl.nll_sum == dense.nll_sum, "larosa at density 1: %.17g vs %.17g", r.ppl.nll_sum, dense.nll_sum);
        CHECK(r.stats.density_mean == 1.0);
        double prev = dense.nll_sum;
        for (double dens = 0.7; dens > 0.2; dens -= 0.2) {
            eo.density = dens;
            CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK);
            double s = 1 - dens;
            CHECK(r.lc.in_density == (double)srt_topk_count(1 - 0.8 * s, D) / (double)D);
            CHECK(r.lc.h_density == (double)srt_topk_count(1 - fmin(1, 1.2 * s), F) / (double)F);
            CHECK_MSG(r.ppl.nll_sum > prev, "density %.1f: nll %.6g not above %.6g", dens, r.ppl.nll_sum, prev);
            printf("larosa @ density %.1f: ppl %.4f, linear density %.4f\n", dens,
                   exp(r.ppl.nll_sum / (double)r.ppl.n_scored), r.lc.linear_density);
            prev = r.ppl.nll_sum;
        }
        /* grid search: every candidate keeps the sparsified linears' parameter-weighted sparsity at s */
        eo.density = 0.5;
        eo.params = "grid=1,grid_seqs=6,grid_step=0.1";
        CHECK_MSG(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK, "%s", err.msg);
        CHECK(r.lc.n_grid >= 3);
        double qkv, o, gu, dn;
        sc_lc_layer_params(&m->cfg, &qkv, &o, &gu, &dn);
        for (int i = 0; i < r.lc.n_grid; i++)
            CHECK_NEAR((qkv + gu) * r.lc.grid[i][0] * 0.5 + dn * r.lc.grid[i][1] * 0.5, (qkv + gu + dn) * 0.5, 1e-6 * (qkv + gu + dn));
        CHECK_NEAR(r.lc.sparsified_density, 0.5, 0.02); /* K rounding only */
        int best = 0;
        for (int i = 1; i < r.lc.n_grid; i++)
            if (r.lc.grid[i][2] < r.lc.grid[best][2]) best = i;
        CHECK(r.lc.split_in == r.lc.grid[best][0] && r.lc.split_h == r.lc.grid[best][1]);
        /* bad parameters are refused */
        eo.params = "in=abc";
        CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_EARG && strstr(err.msg, "in"));
    }
    /* 5. memory bound enforced */
    {
        sc_calib *c;
        co.params = "max_mib=0.01";
        CHECK(sc_calib_compute(m, &cal, &co, &c, &err) == SC_ENOMEM && strstr(err.msg, "--layers"));
        co.params = "inputs=mlp";
        CHECK(sc_calib_compute(m, &cal, &co, &c, &err) == SC_OK);
        sc_larosa_input in;
        CHECK(!sc_larosa_get(sc_calib_state(c, "larosa"), 0, SC_LAROSA_ATTN, &in) &&
              sc_larosa_get(sc_calib_state(c, "larosa"), 0, SC_LAROSA_MLP, &in));
        sc_calib_free(c);
    }
    sc_calib_free(one);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
