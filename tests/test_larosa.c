/* test_larosa.c - LaRoSA: the packed moment against a naive double loop and
 * against the previous implementation (the full-matrix dsyrk, kept below as
 * the reference), the eigensolve from the packed triangle bit for bit equal
 * to the previous full-matrix LAPACKE call, Q orthonormal and diagonalising
 * the damped moment (synthetic and on the model), eigensolver failures
 * reported, shards merging to one run, eval at sparsity 0 equal to dense,
 * exact top-K densities, and the grid search keeping the parameter-weighted
 * sparsity. test_larosa_file.c covers the file: rotations read back one layer
 * at a time, checkpoints, format 1. */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "larosa.h"
#include "larosa_rot.h"
#include "route_method.h"
#include "scal.h"
#include "sparse_eval.h"
#include "testing.h"

static sc_err err;

/* ---- the previous implementation: H [D, D] row-major upper, dsyrk per 256-row chunk ---- */
static void old_accumulate(double *H, const float *X, int64_t n, int64_t D) {
    double *scratch = malloc((size_t)(256 * D) * sizeof *scratch);
    for (int64_t r0 = 0; r0 < n; r0 += 256) {
        int64_t rows = n - r0 < 256 ? n - r0 : 256;
        for (int64_t i = 0; i < rows * D; i++) scratch[i] = (double)X[r0 * D + i];
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (blasint)D, (blasint)rows, 1.0, scratch, (blasint)D, 1.0, H,
                    (blasint)D);
    }
    free(scratch);
}

static int old_eigen(const double *H, int64_t count, int64_t D, double damp, double *eig, double *Q) {
    double inv = count > 0 ? 1.0 / (double)count : 0.0, tr = 0.0;
    for (int64_t i = 0; i < D; i++) tr += H[i * D + i] * inv;
    double add = damp * tr / (double)D;
    for (int64_t i = 0; i < D; i++)
        for (int64_t j = 0; j < D; j++) Q[i * D + j] = j >= i ? H[i * D + j] * inv : 0.0;
    for (int64_t i = 0; i < D; i++) Q[i * D + i] += add;
    int info = (int)LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)D, Q, (lapack_int)D, eig);
    for (int64_t k = 0; k < D / 2; k++) {
        int64_t o = D - 1 - k;
        double t = eig[k];
        eig[k] = eig[o];
        eig[o] = t;
        for (int64_t i = 0; i < D; i++) {
            t = Q[i * D + k];
            Q[i * D + k] = Q[i * D + o];
            Q[i * D + o] = t;
        }
    }
    for (int64_t k = 0; k < D; k++) {
        int64_t best = 0;
        for (int64_t i = 1; i < D; i++)
            if (fabs(Q[i * D + k]) > fabs(Q[best * D + k])) best = i;
        if (Q[best * D + k] < 0)
            for (int64_t i = 0; i < D; i++) Q[i * D + k] = -Q[i * D + k];
    }
    return info;
}

/* packed upper triangle (larosa.h) <-> full symmetric [D, D] */
static void pack_upper(const double *H, int64_t D, double *Hp) {
    for (int64_t j = 0; j < D; j++)
        for (int64_t i = 0; i <= j; i++) Hp[i + j * (j + 1) / 2] = H[i * D + j];
}
static void unpack(const double *Hp, int64_t D, double *H) {
    for (int64_t j = 0; j < D; j++)
        for (int64_t i = 0; i <= j; i++) H[i * D + j] = H[j * D + i] = Hp[i + j * (j + 1) / 2];
}

/* max |Q^T Q - I| and max off-diagonal |Q^T M Q| / max eig, with M the damped mean moment (H full symmetric) */
static void check_eigen(const double *H, int64_t count, int64_t D, double damp, const double *eig, const double *Q,
                        const char *what) {
    double *M = malloc((size_t)(D * D) * sizeof *M);
    double inv = count ? 1.0 / (double)count : 0, tr = 0;
    for (int64_t i = 0; i < D; i++) tr += H[i * D + i] * inv;
    for (int64_t i = 0; i < D; i++)
        for (int64_t j = 0; j < D; j++) M[i * D + j] = H[i * D + j] * inv + (i == j ? damp * tr / (double)D : 0);
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

/* The packed accumulation against the naive loop and the previous dsyrk, then the eigensolve from the
 * packed triangle against the previous full-matrix call on the same moment: bit for bit. */
static void synthetic(int64_t D, int64_t n) {
    int64_t P = sc_larosa_packed(D);
    float *X = malloc((size_t)(n * D) * sizeof *X);
    double *Hp = calloc((size_t)P, sizeof *Hp), *old = calloc((size_t)(D * D), sizeof *old),
           *ref = calloc((size_t)(D * D), sizeof *ref), *scratch = malloc((size_t)sc_larosa_scratch(D) * sizeof *scratch),
           *eig = malloc((size_t)D * sizeof *eig), *Q = malloc((size_t)(D * D) * sizeof *Q),
           *eig0 = malloc((size_t)D * sizeof *eig0), *Q0 = malloc((size_t)(D * D) * sizeof *Q0),
           *oldp = malloc((size_t)P * sizeof *oldp), *full = malloc((size_t)(D * D) * sizeof *full);
    uint64_t r = 12345;
    for (int64_t i = 0; i < n * D; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        X[i] = (float)((double)(r >> 11) / 9007199254740992.0 - 0.5) * (float)(1 + i % 7);
    }
    int64_t cut = n > 250 ? 250 : n / 2; /* two calls, rows crossing the 256-row chunks */
    sc_larosa_accumulate(Hp, X, cut, D, scratch);
    sc_larosa_accumulate(Hp, X + cut * D, n - cut, D, scratch);
    old_accumulate(old, X, cut, D);
    old_accumulate(old, X + cut * D, n - cut, D);
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < D; i++)
            for (int64_t j = i; j < D; j++) ref[i * D + j] += (double)X[t * D + i] * (double)X[t * D + j];
    /* a covariance entry can cancel: measured against sqrt(H_ii H_jj), which bounds it (Cauchy-Schwarz) */
    double worst_ref = 0, worst_old = 0;
    int64_t same = 0;
    for (int64_t j = 0; j < D; j++)
        for (int64_t i = 0; i <= j; i++) {
            double h = Hp[i + j * (j + 1) / 2], sc = sqrt(ref[i * D + i] * ref[j * D + j]);
            worst_ref = fmax(worst_ref, fabs(h - ref[i * D + j]) / sc);
            worst_old = fmax(worst_old, fabs(h - old[i * D + j]) / sc);
            same += h == old[i * D + j];
        }
    printf("D %lld, %lld rows: packed vs naive %.3g, vs the previous dsyrk %.3g (%lld of %lld entries bit-identical)\n",
           (long long)D, (long long)n, worst_ref, worst_old, (long long)same, (long long)P);
    CHECK_MSG(worst_ref < 1e-13, "packed vs naive: %.3g", worst_ref);
    /* the same chunk sums added in the same order; a BLAS kernel set may sum a chunk's 256 products in
     * another order in dgemm than in dsyrk, which moves an entry by a few roundings of the chunk's
     * magnitude: 1e-14 of sqrt(H_ii H_jj) is ~40 ulps of the largest term sum */
    CHECK_MSG(worst_old < 1e-14, "packed vs previous dsyrk: %.3g", worst_old);
    /* the eigensolve of one moment: from the packed triangle, and as the previous implementation did it */
    pack_upper(old, D, oldp);
    CHECK(sc_larosa_eigen(oldp, n, D, 0.01, eig, Q, &err) == SC_OK);
    CHECK(old_eigen(old, n, D, 0.01, eig0, Q0) == 0);
    CHECK_MSG(memcmp(eig, eig0, (size_t)D * sizeof *eig) == 0 && memcmp(Q, Q0, (size_t)(D * D) * sizeof *Q) == 0,
              "D %lld: eigenvalues or vectors differ from the previous implementation", (long long)D);
    unpack(oldp, D, full);
    char what[64];
    snprintf(what, sizeof what, "synthetic %lldx%lld", (long long)D, (long long)D);
    if (D <= 64) check_eigen(full, n, D, 0.01, eig, Q, what);
    oldp[P / 2] = NAN;
    CHECK(sc_larosa_eigen(oldp, n, D, 0.01, eig, Q, &err) != SC_OK && strstr(err.msg, "dsyevd"));
    free(X);
    free(Hp);
    free(old);
    free(ref);
    free(scratch);
    free(eig);
    free(Q);
    free(eig0);
    free(Q0);
    free(oldp);
    free(full);
}

int main(void) {
    /* 1. accumulation and eigensolve against the naive loop and the previous implementation; 300 columns
     * cross a 256-column panel */
    synthetic(7, 600);
    synthetic(64, 300);
    synthetic(300, 520);
    {
        double Hp[28] = {0}, eig[7], Q[49];
        for (int i = 0; i < 7; i++) Hp[i * (i + 1) / 2 + i] = 1.0;
        Hp[3] = NAN;
        CHECK(sc_larosa_eigen(Hp, 1, 7, 0.01, eig, Q, &err) != SC_OK && strstr(err.msg, "dsyevd"));
        printf("eigensolver failure reported as: %s\n", err.msg);
    }
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(70, &m, &tok, &d)) return sc_test_finish();
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
    sc_larosa_rot rot = {0};
    double *full = malloc((size_t)(D * D) * sizeof *full);
    for (int64_t l = 0; l < m->cfg.n_layers; l++)
        for (int w = 0; w < 2; w++) {
            sc_array h;
            int64_t count;
            CHECK(sc_larosa_has(st, l, w, &count) && sc_larosa_array(st, l, w, SC_LAROSA_ARR_H, &h) && h.data);
            CHECK(count == one->n_tokens);
            CHECK_MSG(sc_larosa_rotation(one, l, w, &rot, &err) == SC_OK, "%s", err.msg);
            unpack(h.data, D, full);
            char what[64];
            snprintf(what, sizeof what, "layer %lld %s", (long long)l, w ? "mlp" : "attn");
            check_eigen(full, count, D, 0.01, rot.eig, rot.Q, what);
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
        sc_larosa_rot ry = {0};
        for (int64_t l = 0; l < m->cfg.n_layers; l++)
            for (int w = 0; w < 2; w++) {
                sc_array x, y;
                int64_t cx, cy;
                CHECK(sc_larosa_has(sc_calib_state(la, "larosa"), l, w, &cx) && sc_larosa_has(st, l, w, &cy) && cx == cy);
                sc_larosa_array(sc_calib_state(la, "larosa"), l, w, SC_LAROSA_ARR_H, &x);
                sc_larosa_array(st, l, w, SC_LAROSA_ARR_H, &y);
                const double *hx = x.data, *hy = y.data;
                for (int64_t j = 0; j < D; j++)
                    for (int64_t i = 0; i <= j; i++) {
                        int64_t k = i + j * (j + 1) / 2;
                        wh = fmax(wh, fabs(hx[k] - hy[k]) / sqrt(hy[i * (i + 1) / 2 + i] * hy[k - i + j]));
                    }
                CHECK(sc_larosa_rotation(la, l, w, &rot, &err) == SC_OK && sc_larosa_rotation(one, l, w, &ry, &err) == SC_OK);
                for (int64_t i = 0; i < D * D; i++) wq = fmax(wq, fabs(fabs(rot.Q[i]) - fabs(ry.Q[i])));
            }
        sc_larosa_rot_free(&ry);
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
        CHECK(!sc_larosa_has(sc_calib_state(c, "larosa"), 0, SC_LAROSA_ATTN, NULL) &&
              sc_larosa_has(sc_calib_state(c, "larosa"), 0, SC_LAROSA_MLP, NULL));
        sc_calib_free(c);
    }
    sc_larosa_rot_free(&rot);
    free(full);
    sc_calib_free(one);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
