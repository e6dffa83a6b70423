/* test_cett.c - CETT and CLADA: CETT(t) against an independent per-token
 * double computation, the search monotone and within tolerance of the
 * target, the run-time rule reproducing the sample sparsity on the
 * calibration data, target 0 and CLADA with lambda = gamma = 0 equal to dense
 * and CETT, shards (CONCAT samples) merging through files, hostile CONCAT
 * shapes rejected, and the CLI (compute, eval, diag). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cett.h"
#include "engine.h"
#include "lc_util.h"
#include "route_method.h"
#include "scal.h"
#include "sparse_eval.h"
#include "srt_container.h"
#include "testing.h"

static sc_err err;
static char out[1 << 20];

/* CETT(t) token by token in double, straight from the definition */
static double cett_naive(const sc_model *m, int64_t l, const float *h, int64_t rows, const double *wn, double t) {
    int64_t D = m->cfg.dim, F = m->cfg.ffn_dim;
    const float *Wd = sc_test_layer(m, l)->wd;
    double sum = 0;
    int64_t used = 0;
    for (int64_t r = 0; r < rows; r++) {
        double yy = 0, dd = 0;
        for (int64_t i = 0; i < D; i++) {
            double y = 0, dead = 0;
            for (int64_t j = 0; j < F; j++) {
                double c = (double)h[r * F + j] * (double)Wd[i * F + j];
                y += c;
                if (fabs((double)h[r * F + j]) * wn[j] <= t) dead += c;
            }
            yy += y * y;
            dd += dead * dead;
        }
        if (yy > 0) {
            sum += sqrt(dd) / sqrt(yy);
            used++;
        }
    }
    return used ? sum / (double)used : 0;
}

static int cmp_num(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* sc_lc_sort (the radix sort CETT's threshold table uses) against qsort: the same values in the same
 * order, for small arrays (qsort's path), large ones with negatives, duplicates, both zeros and the
 * infinities, and large ones whose high digits are all the same (the skipped passes); -0 and +0 compare
 * equal, so a number-wise comparison, plus the sign bits of the zeros: on the radix path (1024 values
 * and more) every -0 before every +0. */
static void test_sort(void) {
    const int64_t sizes[4] = {7, 1023, 5000, 300000};
    int bad = 0;
    uint64_t r = 12345;
    for (int c = 0; c < 8; c++) {
        const int64_t n = sizes[c % 4];
        double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
        for (int64_t i = 0; i < n; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const double u = (double)(r >> 11) / 9007199254740992.0;
            if (c < 4) /* signed, wide exponents, ties, the special values */
                a[i] = (i % 97 == 0) ? (i % 2 ? -0.0 : 0.0)
                       : (i % 101 == 0) ? (i % 2 ? INFINITY : -INFINITY)
                       : (i % 7 == 0) ? 3.5 : (u - 0.5) * pow(10.0, (double)(r % 40) - 20.0);
            else /* non-negative in [1, 2): CETT's case narrowed so most high digits agree */
                a[i] = 1.0 + u;
        }
        memcpy(b, a, (size_t)n * sizeof *a);
        sc_lc_sort(a, n);
        qsort(b, (size_t)n, sizeof *b, cmp_num);
        bool seen_pos_zero = false;
        for (int64_t i = 0; i < n; i++) {
            bad += a[i] != b[i];
            if (a[i] == 0.0 && !signbit(a[i])) seen_pos_zero = true;
            if (a[i] == 0.0 && signbit(a[i]) && seen_pos_zero && n >= 1024) bad++; /* qsort keeps ties' order */
        }
        free(a);
        free(b);
    }
    CHECK_MSG(bad == 0, "%d sorted values differ from qsort's", bad);
}

int main(void) {
    test_sort();
    const char *bin = sc_asset("models/stories260K.bin"), *tokp = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_valid_a.txt"), *sample = sc_asset("text/tinystories_sample.txt");
    if (!bin || !tokp || !text || !sample) return sc_test_finish();
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
    int64_t D = m->cfg.dim, F = m->cfg.ffn_dim, L = m->cfg.n_layers;
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    co.methods[0] = "cett";
    co.methods[1] = "clada";
    co.n_methods = 2;
    co.seq_len = 128;
    co.params = "sample=100000";
    sc_calib *one;
    CHECK_MSG(sc_calib_compute(m, &cal, &co, &one, &err) == SC_OK, "%s", err.msg);
    const void *cs = sc_calib_state(one, "cett");
    double *wn = malloc((size_t)F * sizeof *wn);

    /* 1. CETT value vs the definition; the search: monotone, within tolerance, largest feasible grid point */
    double mean_sparsity = 0;
    for (int64_t l = 0; l < L; l++) {
        const float *h;
        int64_t rows;
        CHECK(sc_cett_sample(cs, l, &h, &rows) && rows == one->n_tokens);
        CHECK(sc_down_col_norms(m, l, wn, &err) == SC_OK);
        void *scr = malloc(sc_cett_scratch_bytes(rows, D, F));
        double tt = 0.1 * (double)(l + 1);
        double v1 = sc_cett_value(h, 12, D, F, sc_test_layer(m, l)->wd, wn, tt, scr), v2 = cett_naive(m, l, h, 12, wn, tt);
        CHECK_MSG(fabs(v1 - v2) < 1e-5, "layer %lld: CETT %.9g vs naive %.9g", (long long)l, v1, v2);
        sc_cett_fit fit;
        CHECK(sc_cett_search(h, rows, D, F, sc_test_layer(m, l)->wd, wn, 0.2, &fit, &err) == SC_OK);
        double step = (fit.grid_hi - fit.grid_lo) / (SC_CETT_GRID - 1);
        double above = sc_cett_value(h, rows, D, F, sc_test_layer(m, l)->wd, wn, fit.threshold + step, scr);
        CHECK_MSG(fit.cett <= 0.2 && 0.2 - fit.cett < 0.005 && above > 0.2,
                  "layer %lld: CETT(t) %.6f, CETT(t + step) %.6f", (long long)l, fit.cett, above);
        /* CETT(t) is the mean norm of a growing partial sum, which need not be monotone: it is
         * strictly monotone where the search works (CETT < 0.4) and drops by < 1e-3 far above it */
        double prev = -1, worst_drop = 0;
        int violations = 0;
        for (int k = 0; k <= 40; k++) {
            double c = sc_cett_value(h, rows, D, F, sc_test_layer(m, l)->wd, wn, fit.grid_lo + (fit.grid_hi - fit.grid_lo) * k / 40.0, scr);
            violations += c < prev && c < 0.4;
            worst_drop = fmax(worst_drop, prev - c);
            prev = c;
        }
        CHECK_MSG(violations == 0 && worst_drop < 1e-3, "layer %lld: CETT not monotone on the grid (%d drops below 0.4, worst drop %.3g)",
                  (long long)l, violations, worst_drop);
        printf("layer %lld: t %.5f, CETT %.5f (next grid point %.5f), sample sparsity %.4f, %d evaluations\n",
               (long long)l, fit.threshold, fit.cett, above, fit.sparsity, fit.evaluations);
        mean_sparsity += fit.sparsity / (double)L;
        free(scr);
    }

    /* 2. eval: the rule reproduces the sample sparsity on the calibration data; target 0 is dense;
     *    clada with lambda = gamma = 0 is cett; clada moves the density with the sign of lambda */
    {
        sc_sparse_eval_opts eo = {"cett", NAN, one, 128, false, NULL, NULL}; /* no density: the CETT target */
        sc_sparse_eval_result r, r2;
        CHECK_MSG(sc_eval_sparse(m, &cal, &eo, &r, &err) == SC_OK, "%s", err.msg);
        printf("cett on its calibration data: density %.4f vs sample %.4f\n", r.stats.density_mean, 1 - mean_sparsity);
        CHECK(fabs(r.stats.density_mean - (1 - mean_sparsity)) < 0.01);
        sc_ppl_result dense;
        CHECK(sc_eval_ppl(m, &ev, 128, NULL, NULL, &dense, &err) == SC_OK);
        const char *names[2] = {"cett", "clada"};
        for (int i = 0; i < 2; i++) {
            eo.method = names[i];
            eo.params = "target=0";
            CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK);
            CHECK_MSG(r.ppl.nll_sum == dense.nll_sum, "%s at target 0: %.17g vs %.17g", names[i], r.ppl.nll_sum, dense.nll_sum);
        }
        eo.method = "cett";
        eo.params = NULL;
        CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK);
        CHECK(r.ppl.nll_sum > dense.nll_sum && r.stats.density_mean < 0.7);
        eo.method = "clada";
        eo.params = "lambda=0,gamma=0";
        CHECK(sc_eval_sparse(m, &ev, &eo, &r2, &err) == SC_OK);
        CHECK(r2.ppl.nll_sum == r.ppl.nll_sum && r2.stats.density_mean == r.stats.density_mean);
        eo.params = "lambda=0.8,gamma=0.12";
        CHECK(sc_eval_sparse(m, &ev, &eo, &r2, &err) == SC_OK);
        CHECK(r2.stats.density_mean < r.stats.density_mean && r2.lc.frac_s > 0.2 && r2.lc.frac_s < 0.8);
        eo.params = "lambda=-0.8,gamma=-0.12";
        CHECK(sc_eval_sparse(m, &ev, &eo, &r2, &err) == SC_OK);
        CHECK(r2.stats.density_mean > r.stats.density_mean);
        /* --density reaches its density through per-layer thresholds fitted on the sample (held-out text
         * here, so within 0.01, not exactly), differs from another density, and excludes target= */
        double got[2], ppl2[2];
        const double want[2] = {0.3, 0.7};
        for (int i = 0; i < 2; i++) {
            sc_sparse_eval_opts ed = {"cett", want[i], one, 128, false, NULL, NULL};
            CHECK_MSG(sc_eval_sparse(m, &ev, &ed, &r2, &err) == SC_OK, "%s", err.msg);
            got[i] = r2.stats.density_mean;
            ppl2[i] = r2.ppl.nll_sum;
            CHECK_MSG(fabs(got[i] - want[i]) < 0.01, "cett --density %.2f: achieved %.4f", want[i], got[i]);
        }
        CHECK(ppl2[0] > ppl2[1]);
        sc_sparse_eval_opts eb = {"cett", 0.5, one, 128, false, "target=0.2", NULL};
        CHECK(sc_eval_sparse(m, &ev, &eb, &r2, &err) == SC_EARG && strstr(err.msg, "not both"));
        /* clada without its signals is refused */
        sc_calib *only;
        co.methods[0] = "cett";
        co.n_methods = 1;
        CHECK(sc_calib_compute(m, &cal, &co, &only, &err) == SC_OK);
        eo.calib = only;
        CHECK(sc_eval_sparse(m, &ev, &eo, &r2, &err) == SC_EARG && strstr(err.msg, "clada"));
        sc_calib_free(only);
        co.methods[0] = "cett";
        co.n_methods = 2;
    }

    /* 3. shards: CONCAT samples append through save/load/merge; thresholds agree with one run */
    {
        sc_calib *a, *b, *la, *lb;
        co.shard_count = 2;
        CHECK(sc_calib_compute(m, &cal, &co, &a, &err) == SC_OK);
        co.shard_index = 1;
        CHECK(sc_calib_compute(m, &cal, &co, &b, &err) == SC_OK);
        const char *pa = sc_tmp_path("ca.scal"), *pb = sc_tmp_path("cb.scal"), *pab = sc_tmp_path("cab.scal");
        CHECK(sc_calib_save(a, m, pa, 3, &err) == SC_OK && sc_calib_save(b, m, pb, 0, &err) == SC_OK);
        CHECK_MSG(sc_calib_load(pa, NULL, &la, &err) == SC_OK, "%s", err.msg);
        CHECK_MSG(sc_calib_load(pb, NULL, &lb, &err) == SC_OK, "%s", err.msg);
        CHECK_MSG(sc_calib_merge(la, lb, &err) == SC_OK, "%s", err.msg);
        CHECK(sc_calib_save(la, NULL, pab, 3, &err) == SC_OK);
        sc_calib *back;
        CHECK_MSG(sc_calib_load(pab, m, &back, &err) == SC_OK, "%s", err.msg);
        for (int64_t l = 0; l < L; l++) {
            const float *h1, *h2;
            int64_t r1, r2;
            CHECK(sc_cett_sample(cs, l, &h1, &r1) && sc_cett_sample(sc_calib_state(back, "cett"), l, &h2, &r2));
            CHECK(r1 == r2);
            double s1 = 0, s2 = 0;
            for (int64_t i = 0; i < r1 * F; i++) {
                s1 += fabs((double)h1[i]);
                s2 += fabs((double)h2[i]);
            }
            CHECK_MSG(fabs(s1 - s2) <= 1e-9 * s1, "layer %lld: sample sums %.17g vs %.17g", (long long)l, s1, s2);
        }
        const double *g1, *g2;
        int64_t n1, n2;
        CHECK(sc_clada_sample(sc_calib_state(one, "clada"), &g1, &n1) &&
              sc_clada_sample(sc_calib_state(back, "clada"), &g2, &n2) && n1 == n2 && n1 == one->n_tokens);
        sc_sparse_eval_opts eo = {"cett", NAN, one, 128, false, NULL, NULL};
        sc_sparse_eval_result r1, r2;
        CHECK(sc_eval_sparse(m, &ev, &eo, &r1, &err) == SC_OK);
        eo.calib = back;
        CHECK(sc_eval_sparse(m, &ev, &eo, &r2, &err) == SC_OK);
        for (int64_t l = 0; l < L; l++)
            CHECK_NEAR(r1.lc.layer_threshold[l], r2.lc.layer_threshold[l], 1e-3 * r1.lc.layer_threshold[l]);
        /* hostile: a sample with the wrong row width */
        srt_writer *w;
        char msg[256];
        const char *bad = sc_tmp_path("badcat.scal");
        CHECK(srt_writer_create(bad, SRT_CT_SCAL, &w, msg, sizeof msg) == SRT_CT_OK);
        const char *man = "{\"format\":\"sparsecal-calibration\",\"format_version\":1,\"model\":{\"id\":\"0123456789abcdef\","
                          "\"dim\":64,\"ffn_dim\":172,\"n_layers\":5},\"data\":{\"id\":\"0123456789abcdef\",\"sequences\":1,"
                          "\"tokens\":1,\"shards\":\"0/1\"},\"options\":{\"layers\":[0,5]},\"methods\":[\"clada\"]}";
        srt_writer_set_manifest(w, man, strlen(man));
        double junk[3] = {1, 2, 3};
        uint64_t dims[2] = {1, 3};
        CHECK(srt_writer_add(w, "clada/signals", SRT_CT_F64, 2, dims, junk, sizeof junk, 0) == SRT_CT_OK);
        CHECK(srt_writer_finish(w) == SRT_CT_OK);
        srt_writer_free(w);
        sc_calib *c;
        CHECK(sc_calib_load(bad, NULL, &c, &err) == SC_EFORMAT && strstr(err.msg, "shape"));
        sc_calib_free(a);
        sc_calib_free(b);
        sc_calib_free(la);
        sc_calib_free(lb);
        sc_calib_free(back);
    }

    /* 4. the CLI: compute, eval (every method at sparsity 0 equals dense), diag */
    {
        char M[4200];
        snprintf(M, sizeof M, "%s compute -m %s --tokenizer %s", SC_CLI_PATH, bin, tokp);
        const char *pc = sc_tmp_path("all.scal");
        CHECK(sc_run(M, NULL, 0) == 2);
        char cmd[16384];
        snprintf(cmd, sizeof cmd, "%s compute -m %s --tokenizer %s -f %s --max-docs 40 --method "
            "claws,larosa,cett,clada -o %s -q",
                 SC_CLI_PATH, bin, tokp, text, pc);
        CHECK(sc_run(cmd, out, sizeof out) == 0);
        snprintf(cmd, sizeof cmd, "%s eval -m %s --tokenizer %s -f %s --json -q", SC_CLI_PATH, bin, tokp, sample);
        CHECK(sc_run(cmd, out, sizeof out) == 0);
        cJSON *j = cJSON_Parse(out);
        double dense = cJSON_GetObjectItem(j, "ppl")->valuedouble;
        cJSON_Delete(j);
        /* dense three ways: density 1, CETT target 0 (a density and a target together are refused) */
        const char *runs[5][2] = {{"larosa", "--density 1"}, {"cett", "--params target=0"}, {"clada", "--params target=0"},
                                  {"cett", "--density 1"}, {"clada", "--density 1"}};
        for (int i = 0; i < 5; i++) {
            snprintf(cmd, sizeof cmd, "%s eval -m %s --tokenizer %s -f %s --calib %s --method %s %s --json -q",
                     SC_CLI_PATH, bin, tokp, sample, pc, runs[i][0], runs[i][1]);
            CHECK(sc_run(cmd, out, sizeof out) == 0);
            j = cJSON_Parse(out);
            CHECK_MSG(j && cJSON_GetObjectItem(j, "ppl")->valuedouble == dense && cJSON_GetObjectItem(j, runs[i][0]),
                      "%s: %s", runs[i][0], out);
            cJSON_Delete(j);
        }
        snprintf(cmd, sizeof cmd, "%s diag -m %s --tokenizer %s -f %s --calib %s --crot-seqs 10 --max-tokens 300 "
            "--json -q",
                 SC_CLI_PATH, bin, tokp, text, pc);
        CHECK(sc_run(cmd, out, sizeof out) == 0);
        j = cJSON_Parse(out);
        cJSON *rk = cJSON_GetObjectItem(j, "rank_movement");
        CHECK(j && cJSON_GetArraySize(rk) == 2 && cJSON_GetArraySize(cJSON_GetObjectItem(j, "spread")) == 7);
        for (int k = 0; k < 2 && rk; k++) {
            cJSON *o = cJSON_GetArrayItem(rk, k);
            double sc = cJSON_GetObjectItem(o, "selected_set_change")->valuedouble;
            CHECK(sc > 0 && sc < 1 && cJSON_GetObjectItem(o, "leverage")->valuedouble > 0);
        }
        cJSON_Delete(j);
        /* --dump-ranks: per (family, layer, token) both rank columns are permutations of k / (n - 1) */
        const char *dp = sc_tmp_path("ranks.csv");
        snprintf(cmd, sizeof cmd, "%s diag -m %s --tokenizer %s -f %s --calib %s --crot-seqs 10 --max-tokens 300 -q "
                                  "--dump-ranks %s --dump-tokens 3 > /dev/null",
                 SC_CLI_PATH, bin, tokp, text, pc, dp);
        CHECK(sc_run(cmd, out, sizeof out) == 0);
        {
            FILE *f = fopen(dp, "r");
            char line[256], fam[16], last[64] = "";
            long long ly, tk, coord, rows = 0, groups = 0, n = 0;
            double rb, ra, sb = 0, sa = 0, moved = 0;
            bool ok = f && fgets(line, sizeof line, f) && !strncmp(line, "family,layer,token,coord,rank_before,rank_after", 47);
            /* a group's ranks k/(n-1) sum to n/2; checked on every group when the key changes */
            while (ok && fgets(line, sizeof line, f)) {
                ok = sscanf(line, "%15[a-z],%lld,%lld,%lld,%lf,%lf", fam, &ly, &tk, &coord, &rb, &ra) == 6;
                char key[64];
                snprintf(key, sizeof key, "%s/%lld/%lld", fam, ly, tk);
                if (strcmp(key, last)) {
                    if (n) ok = ok && fabs(sb - n / 2.0) < 1e-3 * n && fabs(sa - n / 2.0) < 1e-3 * n;
                    snprintf(last, sizeof last, "%s", key);
                    sb = sa = 0;
                    n = 0;
                    groups++;
                }
                ok = ok && coord == n && rb >= 0 && rb <= 1 && ra >= 0 && ra <= 1;
                sb += rb;
                sa += ra;
                moved += fabs(ra - rb);
                n++;
                rows++;
            }
            if (f) fclose(f);
            ok = ok && n && fabs(sb - n / 2.0) < 1e-3 * n;
            CHECK_MSG(ok && groups == 2 * 3 * m->cfg.n_layers && rows == 3 * m->cfg.n_layers * (m->cfg.dim + m->cfg.ffn_dim) &&
                      moved > 0, "%lld groups, %lld rows", groups, rows);
        }
        snprintf(cmd, sizeof cmd, "%s diag -m %s --tokenizer %s -f %s --calib %s 2>&1", SC_CLI_PATH, bin, tokp, text,
                 sc_tmp_path("ca.scal"));
        CHECK(sc_run(cmd, out, sizeof out) == 2 && strstr(out, "claws"));
    }
    free(wn);
    sc_calib_free(one);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
