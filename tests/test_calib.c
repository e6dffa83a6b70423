/* test_calib.c - the calibration engine: CLAWS multipliers against an
 * independent finite-difference estimate of the saliency (double-precision
 * reference model), shard merging, bit-identical files, routers at density
 * 1 and exact top-K density, CATS thresholds on their own calibration
 * data, and bad calibration files. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cats.h"
#include "common.h"
#include "engine.h"
#include "ref_llama.h"
#include "scal.h"
#include "sparse_eval.h"
#include "srt_container.h"
#include "testing.h"

static sc_err err;

static const double *claws_array(const sc_calib *c, int64_t layer, const char *what) {
    void *st = sc_calib_state(c, "claws");
    sc_array *arr = malloc(SC_MAX_ARRAYS * sizeof *arr);
    int n = sc_method_find("claws")->arrays(st, arr, SC_MAX_ARRAYS);
    char name[96];
    snprintf(name, sizeof name, "layer%lld.%s", (long long)layer, what);
    const double *out = NULL;
    for (int k = 0; k < n; k++)
        if (strcmp(arr[k].name, name) == 0) out = arr[k].data;
    free(arr);
    return out;
}

/* every SUM array of a equals b to rel 1e-12 */
static void compare_calibs(const sc_calib *a, const sc_calib *b, double tol, const char *what) {
    sc_array *x = malloc(2 * SC_MAX_ARRAYS * sizeof *x), *y = x + SC_MAX_ARRAYS;
    double worst = 0;
    for (int i = 0; i < a->n_entries; i++) {
        const sc_method *me = a->entries[i].method;
        int nx = me->arrays(a->entries[i].state, x, SC_MAX_ARRAYS), ny = me->arrays(b->entries[i].state, y, SC_MAX_ARRAYS);
        CHECK(nx == ny);
        for (int k = 0; k < nx && k < ny; k++) {
            int64_t n = x[k].shape[0] * (x[k].shape[1] ? x[k].shape[1] : 1);
            for (int64_t j = 0; j < n; j++) {
                double u = x[k].type == SC_ARR_I64 ? (double)((int64_t *)x[k].data)[j] : ((double *)x[k].data)[j];
                double v = y[k].type == SC_ARR_I64 ? (double)((int64_t *)y[k].data)[j] : ((double *)y[k].data)[j];
                double rel = fabs(u - v) / fmax(fmax(fabs(u), fabs(v)), 1e-300);
                if (u != v) worst = fmax(worst, rel);
            }
        }
    }
    printf("%s: worst relative difference %.3g\n", what, worst);
    CHECK_MSG(worst <= tol, "%s: %.3g > %.3g", what, worst, tol);
    free(x);
}

typedef struct h_capture {
    float h[5][12 * 172];
} h_capture;

static sc_status capture_h(void *user, const sc_tap_event *ev, sc_err *e) {
    h_capture *c = user;
    memcpy(c->h[ev->layer], ev->data, (size_t)(ev->n_tokens * ev->width) * sizeof(float));
    return SC_OK;
}

int main(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(60, &m, &tok, &d)) return sc_test_finish();
    const int64_t F = 172;

    /* 1. CLAWS against finite differences: 2 short sequences, sampled neurons in
     *    every layer; h from the forward pass, dL/dh by central differences of
     *    the double-precision reference's loss */
    {
        sc_tokens two[2] = {d.seqs[0], d.seqs[1]};
        two[0].n = 12;
        two[1].n = 10;
        sc_dataset small = {two, 2, 22};
        sc_compute_opts co;
        sc_compute_opts_default(&co);
        co.methods[0] = "claws";
        co.n_methods = 1;
        sc_calib *c;
        CHECK_MSG(sc_calib_compute(m, &small, &co, &c, &err) == SC_OK, "%s", err.msg);
        ref_llama r;
        CHECK(ref_llama_load(&r, sc_asset("models/stories260K.bin")));
        h_capture hc;
        sc_forward *f;
        CHECK(sc_forward_create(m, 12, 12, &f, &err) == SC_OK);
        double worst = 0;
        int checked = 0;
        for (int64_t l = 0; l < 5; l++) {
            const double *num = claws_array(c, l, "num"), *den = claws_array(c, l, "den"), *cc = claws_array(c, l, "c");
            double wn[172];
            CHECK(sc_down_col_norms(m, l, wn, &err) == SC_OK);
            for (int s = 0; s < 3; s++) {
                int j = (int)((l * 37 + s * 61 + 5) % F);
                double num_fd = 0;
                for (int q = 0; q < 2; q++) {
                    const sc_tokens *seq = &two[q];
                    int n = (int)seq->n;
                    sc_hooks hk = {capture_h, &hc, SC_TAP_BIT(SC_TAP_H)};
                    CHECK(sc_forward_run(f, seq->ids, n, 0, &hk, NULL, &err) == SC_OK);
                    for (int t = 0; t + 1 < n; t++) {
                        double loss[2];
                        for (int sgn = 0; sgn < 2; sgn++) {
                            r.pert_kind = 1;
                            r.pert_layer = (int)l;
                            r.pert_pos = t;
                            r.pert_index = j;
                            r.pert_delta = sgn ? 1e-4 : -1e-4;
                            loss[sgn] = 0;
                            for (int p = 0; p < n; p++) {
                                const double *z = ref_llama_step(&r, seq->ids[p], p);
                                if (p + 1 < n) {
                                    double mx = z[0], sum = 0;
                                    for (int v = 1; v < 512; v++) mx = z[v] > mx ? z[v] : mx;
                                    for (int v = 0; v < 512; v++) sum += exp(z[v] - mx);
                                    loss[sgn] += mx + log(sum) - z[seq->ids[p + 1]];
                                }
                            }
                        }
                        r.pert_kind = 0;
                        double g = (loss[1] - loss[0]) / 2e-4;
                        num_fd += fabs((double)hc.h[l][t * F + j]) * wn[j] * fabs(g);
                    }
                }
                double rel = fabs(num_fd - num[j]) / fmax(fabs(num_fd), 1e-12);
                worst = fmax(worst, rel);
                checked++;
                CHECK_MSG(rel < 1e-3, "layer %lld neuron %d: num %.9g vs finite-difference %.9g", (long long)l, j,
                          num[j], num_fd);
                CHECK(den[j] > 0 && fabs(cc[j] - num[j] / den[j]) <= 1e-15 * fabs(cc[j]));
            }
        }
        printf("claws numerators vs finite differences: %d neurons, worst relative error %.3g\n", checked, worst);
        sc_forward_free(f);
        ref_llama_free(&r);
        sc_calib_free(c);
    }

    /* 2. shards merged equal one run; the file is bit-identical for the same inputs */
    {
        sc_compute_opts co;
        sc_compute_opts_default(&co);
        co.methods[0] = "claws";
        co.methods[1] = "cats";
        co.n_methods = 2;
        co.seq_len = 64;
        co.max_seqs = 30;
        sc_calib *one, *a, *b;
        CHECK(sc_calib_compute(m, &d, &co, &one, &err) == SC_OK);
        co.shard_count = 2;
        CHECK(sc_calib_compute(m, &d, &co, &a, &err) == SC_OK);
        co.shard_index = 1;
        CHECK(sc_calib_compute(m, &d, &co, &b, &err) == SC_OK);
        CHECK(a->n_seqs == 15 && b->n_seqs == 15);
        /* save and reload the shards, then merge from files */
        const char *pa = sc_tmp_path("a.scal"), *pb = sc_tmp_path("b.scal"), *p1 = sc_tmp_path("one.scal"),
                   *p1b = sc_tmp_path("one_again.scal");
        CHECK(sc_calib_save(a, m, pa, 3, &err) == SC_OK);
        CHECK(sc_calib_save(b, m, pb, 0, &err) == SC_OK);
        sc_calib *la, *lb;
        CHECK_MSG(sc_calib_load(pa, NULL, &la, &err) == SC_OK, "%s", err.msg);
        CHECK_MSG(sc_calib_load(pb, m, &lb, &err) == SC_OK, "%s", err.msg);
        CHECK(sc_calib_merge(la, lb, &err) == SC_OK);
        compare_calibs(la, one, 1e-12, "shards 0/2 + 1/2 vs one run");
        CHECK(la->n_seqs == one->n_seqs && la->n_tokens == one->n_tokens);
        /* merging a shard twice, or files with other options, is refused */
        CHECK(sc_calib_merge(la, lb, &err) == SC_EARG && strstr(err.msg, "twice"));
        CHECK(sc_calib_merge(one, a, &err) == SC_EARG && strstr(err.msg, "different splits"));
        /* bit-identical files */
        CHECK(sc_calib_save(one, m, p1, 3, &err) == SC_OK);
        sc_calib *again;
        co.shard_index = 0;
        co.shard_count = 1;
        CHECK(sc_calib_compute(m, &d, &co, &again, &err) == SC_OK);
        CHECK(sc_calib_save(again, m, p1b, 3, &err) == SC_OK);
        CHECK(sc_files_equal(p1, p1b));
        /* other options: refused */
        sc_calib *other;
        co.seq_len = 32;
        CHECK(sc_calib_compute(m, &d, &co, &other, &err) == SC_OK);
        CHECK(sc_calib_merge(again, other, &err) == SC_EARG && strstr(err.msg, "options"));
        sc_calib_free(other);
        sc_calib_free(again);
        sc_calib_free(la);
        sc_calib_free(lb);
        sc_calib_free(one);
        sc_calib_free(a);
        sc_calib_free(b);
    }

    /* 3. routers: density 1 reproduces dense exactly; top-K hits the density exactly;
     *    CATS thresholds reproduce the target density on their own calibration data */
    {
        sc_compute_opts co;
        sc_compute_opts_default(&co);
        co.methods[0] = "claws";
        co.methods[1] = "cats";
        co.n_methods = 2;
        sc_dataset ev = {d.seqs + 40, 20, 0};
        sc_dataset cal = {d.seqs, 40, 0};
        sc_calib *c;
        CHECK(sc_calib_compute(m, &cal, &co, &c, &err) == SC_OK);
        sc_ppl_result dense;
        CHECK(sc_eval_ppl(m, &ev, 512, NULL, NULL, &dense, &err) == SC_OK);
        const char *methods[] = {"dense", "cats", "cats-threshold", "claws", "oracle"};
        for (int i = 0; i < 5; i++) {
            sc_sparse_eval_opts eo = {methods[i], 1.0, c, 512, false, NULL, NULL};
            sc_sparse_eval_result r;
            CHECK_MSG(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK, "%s", err.msg);
            CHECK_MSG(r.ppl.nll_sum == dense.nll_sum, "%s at density 1: %.17g vs %.17g", methods[i], r.ppl.nll_sum,
                      dense.nll_sum);
            eo.density = 0.37;
            CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK);
            if (i != 0 && i != 2) {
                double k = round(0.37 * F) / F;
                CHECK(r.stats.density_min == k && r.stats.density_max == k && fabs(r.stats.density_mean - k) < 1e-12);
            }
            if (i == 2) {
                printf("cats-threshold at 0.37 on held-out text: achieved %.4f\n", r.stats.density_mean);
                CHECK(fabs(r.stats.density_mean - 0.37) < 0.05);
            }
            if (i > 0) CHECK(r.ppl.nll_sum > dense.nll_sum);
        }
        /* griffin at density 1 equals dense on the second halves */
        sc_eval_opts half = {512, NULL, NULL, NULL, true, NULL};
        sc_ppl_result dh;
        CHECK(sc_eval_run(m, &ev, &half, &dh, &err) == SC_OK);
        for (int pre = 0; pre < 2; pre++) {
            sc_sparse_eval_opts eo = {pre ? "griffin-prefill" : "griffin", 1.0, NULL, 512, false, NULL, NULL};
            sc_sparse_eval_result r;
            CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_OK);
            CHECK(r.ppl.nll_sum == dh.nll_sum && r.ppl.n_scored == dh.n_scored);
        }
        /* thresholds on the calibration data itself */
        sc_sparse_eval_opts eo = {"cats-threshold", 0.5, c, 512, false, NULL, NULL};
        sc_sparse_eval_result r;
        CHECK(sc_eval_sparse(m, &cal, &eo, &r, &err) == SC_OK);
        printf("cats-threshold at 0.5 on its calibration data: achieved %.5f\n", r.stats.density_mean);
        CHECK(fabs(r.stats.density_mean - 0.5) < 0.002);
        /* claws needs claws statistics */
        sc_calib *only_cats;
        co.methods[0] = "cats";
        co.n_methods = 1;
        CHECK(sc_calib_compute(m, &cal, &co, &only_cats, &err) == SC_OK);
        eo.method = "claws";
        eo.calib = only_cats;
        CHECK(sc_eval_sparse(m, &ev, &eo, &r, &err) == SC_EARG);
        sc_calib_free(only_cats);
        sc_calib_free(c);
    }

    /* 4. bad calibration files */
    {
        const char *p = sc_tmp_path("bad.scal");
        sc_calib *c;
        sc_write_bytes(p, "SPARSCAL garbage", 16);
        CHECK(sc_calib_load(p, NULL, &c, &err) == SC_EFORMAT && strstr(err.msg, p));
        CHECK(sc_calib_load(sc_tmp_path("none.scal"), NULL, &c, &err) != SC_OK);
        /* a valid container with a foreign manifest */
        char msg[256];
        srt_writer *w;
        CHECK(srt_writer_create(p, SRT_CT_SCAL, &w, msg, sizeof msg) == SRT_CT_OK);
        const char *man = "{\"format\":\"sparsecal-calibration\",\"format_version\":1,\"model\":{\"id\":\"0123456789abcdef\","
                          "\"dim\":64,\"ffn_dim\":172,\"n_layers\":5},\"data\":{\"id\":\"0123456789abcdef\",\"sequences\":1,"
                          "\"tokens\":1,\"shards\":\"0/1\"},\"options\":{\"layers\":[0,5]},\"methods\":[\"claws\"]}";
        srt_writer_set_manifest(w, man, strlen(man));
        CHECK(srt_writer_finish(w) == SRT_CT_OK);
        srt_writer_free(w);
        CHECK(sc_calib_load(p, NULL, &c, &err) == SC_EFORMAT && strstr(err.msg, "missing"));
        /* computed on another model */
        CHECK(sc_calib_load(p, m, &c, &err) == SC_EARG && strstr(err.msg, "another model"));
        /* wrong layer range, unknown method, wrong shape */
        const char *bad[] = {
            "{\"format\":\"sparsecal-calibration\",\"format_version\":1,\"model\":{\"id\":\"0123456789abcdef\",\"dim\":64,"
            "\"ffn_dim\":172,\"n_layers\":5},\"data\":{\"id\":\"0123456789abcdef\",\"sequences\":1,\"tokens\":1,"
            "\"shards\":\"0/1\"},\"options\":{\"layers\":[3,9]},\"methods\":[\"claws\"]}",
            "{\"format\":\"sparsecal-calibration\",\"format_version\":1,\"model\":{\"id\":\"0123456789abcdef\",\"dim\":64,"
            "\"ffn_dim\":172,\"n_layers\":5},\"data\":{\"id\":\"0123456789abcdef\",\"sequences\":1,\"tokens\":1,"
            "\"shards\":\"0/1\"},\"options\":{\"layers\":[0,5]},\"methods\":[\"nope\"]}",
            "{\"format\":\"sparsecal-calibration\",\"format_version\":1,\"model\":{\"id\":\"0123456789abcdef\",\"dim\":64,"
            "\"ffn_dim\":1e300,\"n_layers\":5},\"data\":{\"id\":\"0123456789abcdef\",\"sequences\":1,\"tokens\":1,"
            "\"shards\":\"0/1\"},\"options\":{\"layers\":[0,5]},\"methods\":[\"claws\"]}",
            "[1,2,3]",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            CHECK(srt_writer_create(p, SRT_CT_SCAL, &w, msg, sizeof msg) == SRT_CT_OK);
            srt_writer_set_manifest(w, bad[i], strlen(bad[i]));
            srt_writer_finish(w);
            srt_writer_free(w);
            sc_status st = sc_calib_load(p, NULL, &c, &err);
            CHECK_MSG(st != SC_OK && strstr(err.msg, p), "case %zu: %d %s", i, (int)st, err.msg);
        }
    }
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
