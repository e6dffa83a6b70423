/* test_pack_routing.c - the routing parameters pack stores with their layer
 * (convert/pack_routing.c) on stories260K with claws, cats, teal, cett,
 * clada and cwic statistics: every section has its shape and holds what
 * the evaluator computes from the same calibration (TEAL thresholds from
 * the histograms, CETT per-neuron thresholds t / ||W_d[:, j]|| from the
 * CETT search, CLADA's quantiles, CWIC's fitted theta/mean/std), the
 * per-neuron arrays follow --permute, and what cannot be valid is not
 * stored but named in the manifest (CWIC when permuted, TEAL/CWIC on a
 * folded LaRoSA artifact). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cett.h"
#include "cwic.h"
#include "data.h"
#include "engine.h"
#include "pack.h"
#include "sparse_eval.h"
#include "srt_container.h"
#include "teal.h"
#include "testing.h"

static sc_err err;

static const float *section(srt_container *ct, const char *name, uint64_t d0, uint64_t d1) {
    int64_t i = srt_container_find(ct, name);
    if (i < 0) return NULL;
    const srt_ct_section *s = srt_container_section_at(ct, (size_t)i);
    if (s->dtype != SRT_CT_F32 || s->dims[0] != d0 || s->dims[1] != d1) return NULL;
    const void *p;
    return srt_container_get_typed(ct, name, SRT_CT_F32, d0 * (d1 ? d1 : 1), &p) == SRT_CT_OK ? p : NULL;
}

static const srt_json *routing(srt_container *ct, const char *key) {
    return srt_json_get(srt_json_get(srt_container_manifest(ct), "routing"), key);
}

int main(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(40, &m, &tok, &d)) return sc_test_finish();
    int64_t F = m->cfg.ffn_dim, D = m->cfg.dim, L = m->cfg.n_layers;

    sc_compute_opts co;
    sc_compute_opts_default(&co);
    const char *methods[] = {"claws", "cats", "teal", "cett", "clada", "cwic", "coact", "larosa"};
    for (int i = 0; i < 8; i++) co.methods[i] = methods[i];
    co.n_methods = 8;
    co.params = "teal_greedy=0";
    sc_calib *c;
    CHECK_MSG(sc_calib_compute(m, &d, &co, &c, &err) == SC_OK, "%s", err.msg);
    const char *params = "target=0.3,lambda=0.5,gamma=-0.1,apr=2,stripe=16";

    const char *p0 = sc_tmp_path("routing.spk");
    sc_pack_opts po = {.layout = "f32", .calib = c, .method = "cats", .density = 0.5, .params = params};
    sc_pack_result pr;
    CHECK_MSG(sc_pack(m, tok, &po, p0, &pr, &err) == SC_OK, "%s", err.msg);
    char msg[512];
    srt_container *ct;
    CHECK(srt_container_open(p0, SRT_CT_SPAK, &ct, msg, sizeof msg) == SRT_CT_OK);
    bool shapes = true;
    for (int64_t l = 0; l < L; l++) {
        char n1[64], n2[64], n3[64], n4[64];
        snprintf(n1, sizeof n1, "l%lld.claws_c", (long long)l);
        snprintf(n2, sizeof n2, "l%lld.cats_thresholds", (long long)l);
        snprintf(n3, sizeof n3, "l%lld.teal_thresholds", (long long)l);
        snprintf(n4, sizeof n4, "l%lld.cett_thresholds", (long long)l);
        shapes = shapes && section(ct, n1, F, 0) && section(ct, n2, 19, 0) && section(ct, n3, 4, 19) && section(ct, n4, F, 0);
    }
    CHECK_MSG(shapes, "claws_c, cats_thresholds, teal_thresholds, cett_thresholds in every layer");

    /* TEAL: the thresholds eval derives from the same histograms */
    void *ts = sc_calib_state(c, "teal");
    double *cum = malloc(SC_TEAL_NB * sizeof *cum);
    bool teal_ok = true;
    for (int64_t l = 0; l < L; l++) {
        char nm[64];
        snprintf(nm, sizeof nm, "l%lld.teal_thresholds", (long long)l);
        const float *t = section(ct, nm, 4, 19);
        for (int tap = 0; t && tap < 4; tap++) {
            sc_teal_cumulative(sc_teal_hist(ts, l, tap), cum);
            for (int q = 0; q < 19; q++) teal_ok = teal_ok && t[tap * 19 + q] == (float)sc_teal_threshold(cum, 0.05 * (q + 1));
        }
    }
    free(cum);
    CHECK(teal_ok);

    /* CETT: per-neuron thresholds t / ||W_d[:, j]|| with t from the search at target 0.3 */
    const void *cs = sc_calib_state(c, "cett");
    double *wn = malloc((size_t)F * sizeof *wn);
    bool cett_ok = true;
    const srt_json *tl = srt_json_get(routing(ct, "cett"), "thresholds");
    for (int64_t l = 0; l < L; l++) {
        const float *h;
        int64_t rows;
        CHECK(sc_cett_sample(cs, l, &h, &rows) && rows > 0);
        CHECK(sc_down_col_norms(m, l, wn, &err) == SC_OK);
        sc_cett_fit fit;
        CHECK(sc_cett_search(h, rows, D, F, sc_test_layer(m, l)->wd, wn, 0.3, &fit, &err) == SC_OK);
        char nm[64];
        snprintf(nm, sizeof nm, "l%lld.cett_thresholds", (long long)l);
        const float *t = section(ct, nm, F, 0);
        for (int64_t j = 0; t && j < F; j++) cett_ok = cett_ok && t[j] == (float)(fit.threshold / wn[j]);
        cett_ok = cett_ok && t && srt_json_num(srt_json_at(tl, (size_t)l), NAN) == fit.threshold;
    }
    free(wn);
    CHECK(cett_ok);
    CHECK(srt_json_num(srt_json_get(routing(ct, "cett"), "target"), 0) == 0.3);

    /* CLADA: the quantiles eval uses (compare with eval's own report) */
    {
        sc_dataset one = {d.seqs, 1, 0};
        sc_sparse_eval_opts eo = {"clada", NAN, c, 512, false, params, NULL};
        sc_sparse_eval_result er;
        CHECK(sc_eval_sparse(m, &one, &eo, &er, &err) == SC_OK);
        const srt_json *cl = routing(ct, "clada");
        CHECK(srt_json_num(srt_json_get(cl, "tau_s"), NAN) == er.lc.tau_s &&
              srt_json_num(srt_json_get(cl, "tau_h"), NAN) == er.lc.tau_h &&
              srt_json_num(srt_json_get(cl, "lambda"), NAN) == 0.5 && srt_json_num(srt_json_get(cl, "gamma"), NAN) == -0.1);
    }

    /* CWIC: theta / mean / std of every projection as sc_cwic_prepare fits them (apr 2, stripe 16) */
    {
        sc_cwic_plan *pl;
        CHECK(sc_cwic_prepare(m, c, params, 0.5, &pl, &err) == SC_OK);
        bool ok = true;
        int n = 0;
        for (int64_t l = 0; l < L; l++)
            for (int p = 0; p < SC_TEAL_NPROJ; p++) {
                sc_cwic_matrix mx;
                if (!sc_cwic_plan_matrix(pl, l, p, &mx)) continue;
                char nm[96];
                snprintf(nm, sizeof nm, "l%lld.%s.cwic_theta", (long long)l, sc_linear_name((sc_linear)p));
                const float *th = section(ct, nm, (uint64_t)mx.ns, (uint64_t)mx.in);
                snprintf(nm, sizeof nm, "l%lld.%s.cwic_mean", (long long)l, sc_linear_name((sc_linear)p));
                const float *mu = section(ct, nm, (uint64_t)mx.in, 0);
                snprintf(nm, sizeof nm, "l%lld.%s.cwic_std", (long long)l, sc_linear_name((sc_linear)p));
                const float *sd = section(ct, nm, (uint64_t)mx.in, 0);
                ok = ok && th && mu && sd && !memcmp(th, mx.theta, (size_t)(mx.ns * mx.in) * 4) &&
                     !memcmp(mu, mx.mean, (size_t)mx.in * 4) && !memcmp(sd, mx.std, (size_t)mx.in * 4);
                n++;
            }
        CHECK_MSG(ok && n == L * SC_TEAL_NPROJ, "%d matrices", n);
        CHECK(srt_json_num(srt_json_get(routing(ct, "cwic"), "stripe"), 0) == 16 &&
              srt_json_num(srt_json_get(routing(ct, "cwic"), "apr"), 0) == 2);
        sc_cwic_plan_free(pl);
    }
    srt_container_close(ct);

    /* --permute: per-neuron arrays follow the stored permutation; CWIC is not stored */
    {
        const char *p1 = sc_tmp_path("routing_perm.spk");
        po.permute = true;
        CHECK_MSG(sc_pack(m, tok, &po, p1, &pr, &err) == SC_OK, "%s", err.msg);
        po.permute = false;
        srt_container *c0, *c1;
        CHECK(srt_container_open(p0, SRT_CT_SPAK, &c0, msg, sizeof msg) == SRT_CT_OK);
        CHECK(srt_container_open(p1, SRT_CT_SPAK, &c1, msg, sizeof msg) == SRT_CT_OK);
        const void *pp;
        CHECK(srt_container_get_typed(c1, "l1.perm", SRT_CT_U32, (uint64_t)F, &pp) == SRT_CT_OK);
        const uint32_t *perm = pp;
        const float *a0 = section(c0, "l1.cett_thresholds", F, 0), *a1 = section(c1, "l1.cett_thresholds", F, 0);
        const float *b0 = section(c0, "l1.claws_c", F, 0), *b1 = section(c1, "l1.claws_c", F, 0);
        bool follows = a0 && a1 && b0 && b1;
        for (int64_t j = 0; follows && j < F; j++) follows = a1[j] == a0[perm[j]] && b1[j] == b0[perm[j]];
        CHECK(follows);
        CHECK(srt_container_find(c1, "l0.q.cwic_theta") < 0 &&
              srt_json_str(srt_json_get(routing(c1, "cwic"), "not_stored"), NULL) != NULL);
        srt_container_close(c0);
        srt_container_close(c1);
    }
    /* a folded LaRoSA artifact: TEAL and CWIC statistics describe unrotated inputs, not stored */
    {
        const char *p2 = sc_tmp_path("routing_lr.spk");
        po.method = "larosa";
        CHECK_MSG(sc_pack(m, tok, &po, p2, &pr, &err) == SC_OK, "%s", err.msg);
        srt_container *c2;
        CHECK(srt_container_open(p2, SRT_CT_SPAK, &c2, msg, sizeof msg) == SRT_CT_OK);
        CHECK(srt_container_find(c2, "l0.teal_thresholds") < 0 && srt_container_find(c2, "l0.q.cwic_theta") < 0);
        CHECK(srt_json_str(srt_json_get(routing(c2, "teal"), "not_stored"), NULL) &&
              srt_json_str(srt_json_get(routing(c2, "cwic"), "not_stored"), NULL));
        CHECK(section(c2, "l0.cett_thresholds", F, 0) != NULL); /* h is not rotated */
        srt_container_close(c2);
    }
    /* bad method parameters are refused */
    po.method = "cats";
    po.params = "target=7";
    CHECK(sc_pack(m, tok, &po, sc_tmp_path("bad.spk"), &pr, &err) == SC_EARG && strstr(err.msg, "target"));
    sc_calib_free(c);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
