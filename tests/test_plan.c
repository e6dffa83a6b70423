/* test_plan.c - one routing plan, one rule: `eval` on the SOURCE model (the
 * reference forward pass with eval's router hooks) and the runtime decoder on
 * an f32 artifact packed from the same model and calibration choose the same
 * live neurons, token by token, for every neuron router the runtime has (cats,
 * claws, cats-threshold, cett, clada, and teal-cats, teal's input masks
 * before the CATS top-K), and the same teacher-forced NLL for those and
 * teal. cats-threshold's per-layer thresholds are equal off the 0.05 grid (density 0.33), and cett and clada off the density pack fitted
 * their stored thresholds to (the runtime's from the stored CETT table). The rules themselves (kernels/srt_route.h) are
 * checked against their definitions on random vectors. stories260K. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "engine.h"
#include "pack.h"
#include "plan.h"
#include "rt_support.h"
#include "sparse_eval.h"
#include "srt_model.h"
#include "testing.h"

static sc_err err;

static double rel(double a, double b) { return fabs(a - b) / fabs(b); }

/* Live sets as bitmaps [n_pos, L, F] (1: live). */
typedef struct live_rec {
    int64_t L, F, n_pos;
    unsigned char *bits;
} live_rec;

static void on_live(void *user, int64_t layer, int64_t pos, const float *h, int64_t F) {
    live_rec *r = user;
    if (pos >= r->n_pos) return;
    unsigned char *b = r->bits + (pos * r->L + layer) * F;
    for (int64_t j = 0; j < F; j++) b[j] = h[j] != 0.0f;
}

/* The rules against their definitions, on the same vectors. */
static void rules(void) {
    uint64_t s = 12345;
    enum { N = 4099 };
    static float h[N], thr[N], sc[N];
    static double wn[N];
    static uint32_t idx[N];
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        h[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        wn[i] = 0.1 + (double)((s >> 20) & 1023) / 512.0;
        thr[i] = srt_cett_neuron_threshold(0.3, wn[i]);
    }
    wn[7] = 0.0;
    thr[7] = srt_cett_neuron_threshold(0.3, 0.0);
    CHECK(isinf(thr[7]) && srt_cett_neuron_threshold(-1.0, 2.0) < 0);
    const float factors[] = {1.0f, 1.8f, 0.7f};
    for (int fi = 0; fi < 3; fi++) {
        int64_t k = srt_route_cett(NULL, idx, sc, h, thr, factors[fi], N), next = 0, bad = 0, near = 0;
        for (int64_t j = 0; j < N; j++) {
            bool live = next < k && idx[next] == (uint32_t)j;
            next += live;
            /* the f32 rule is the CETT paper's |h| ||W_d|| > f t up to the rounding of t / ||W_d|| and h / f */
            double lhs = fabs((double)h[j]) * wn[j], rhs = 0.3 * factors[fi];
            bool want = lhs > rhs;
            if (live != want) *(fabs(lhs - rhs) < 1e-6 * rhs ? &near : &bad) += 1;
            if (live != (fabsf(h[j] * (1.0f / factors[fi])) > thr[j])) bad++;
        }
        CHECK_MSG(bad == 0 && near <= 2, "cett rule f=%g: %lld wrong, %lld at the rounding edge", factors[fi],
                  (long long)bad, (long long)near);
    }
    CHECK(srt_route_cett(NULL, idx, sc, h, thr, 0.0f, N) == -1);
    float table[SRT_THR_GRID];
    for (int i = 0; i < SRT_THR_GRID; i++) table[i] = 0.01f * (float)(i + 1) * (float)(i + 1);
    for (int i = 0; i < SRT_THR_GRID; i++) CHECK(srt_table_threshold(table, srt_thr_grid(i)) == table[i]);
    float t33 = srt_table_threshold(table, 0.33); /* between 0.30 (i = 5) and 0.35 (i = 6): geometric */
    CHECK_MSG(fabs(t33 - exp(0.4 * log(table[5]) + 0.6 * log(table[6]))) < 1e-6, "%g", t33);
    CHECK(srt_table_threshold(table, 0.0) < 0 && srt_table_threshold(table, 0.99) == table[18]);
    /* the table read backwards: the density at the threshold of sparsity s is 1 - s, on and off the grid
     * (to 1e-6: the threshold is a float, 6e-8 relative, which moves s by about as much) */
    const double ss[] = {0.01, 0.05, 0.33, 0.5, 0.777, 0.95};
    for (int i = 0; i < 6; i++) {
        double dd = srt_table_density(table, srt_table_threshold(table, ss[i]));
        CHECK_MSG(fabs(dd - (1.0 - ss[i])) < 1e-6, "s %g: density %.12g", ss[i], dd);
    }
    CHECK(srt_table_density(table, 2.0 * table[18]) == 0.0 && srt_table_density(table, -0.5) > 1.0 - 1e-9);
    srt_clada c = {2.0, 1.5, 0.8, 0.12, {0.3, 0.2, 0.4, 0.1}};
    /* clada at a density: tau_base keeps it under the scaled rule, each load class at its own
     * factor (1, 1.8, 1.12, 1.92) and calibration share, so below cett's threshold */
    for (double dn = 0.3; dn < 0.75; dn += 0.2) {
        float tb = srt_clada_table_base(table, &c, dn);
        double got = 0.0;
        for (int k = 0; k < SRT_CLADA_CLASSES; k++)
            got += c.frac[k] * srt_table_density(table, (double)tb * srt_clada_class_factor(&c, k));
        CHECK_MSG(fabs(got - dn) < 1e-5, "clada base at %g keeps %.8f", dn, got);
        CHECK(tb < srt_table_threshold(table, 1.0 - dn));
        srt_clada c0 = c, cu = c;
        c0.lambda = c0.gamma = 0.0; /* every factor 1: cett's threshold, bit for bit */
        memset(cu.frac, 0, sizeof cu.frac); /* no class fractions (older artifacts): likewise */
        CHECK(srt_clada_table_base(table, &c0, dn) == srt_table_threshold(table, 1.0 - dn));
        CHECK(srt_clada_table_base(table, &cu, dn) == srt_table_threshold(table, 1.0 - dn));
    }
    CHECK(srt_clada_table_base(table, &c, 1.0) < 0.0f);
    CHECK(srt_clada_class_factor(&c, 0) == 1.0f && srt_clada_class_factor(&c, 3) == (float)(1.0 + 0.8 + 0.12));
    float lg[5] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
    double sp, en, lse = 0;
    srt_clada_signals(lg, 5, 1, &sp, &en);
    for (int i = 0; i < 5; i++) lse += exp(lg[i]);
    lse = log(lse);
    double ent = 0;
    for (int i = 0; i < 5; i++) ent -= exp(lg[i] - lse) * (lg[i] - lse);
    CHECK(fabs(sp - (lse - 2.0)) < 1e-12 && fabs(en - ent) < 1e-12);
    CHECK(srt_clada_factor(&c, 2.5, 1.0) == 1.8f && srt_clada_factor(&c, 1.0, 2.0) == (float)1.12);
    CHECK(srt_larosa_keep(SRT_LAROSA_IN, 0.5, 100) == 60 && srt_larosa_keep(SRT_LAROSA_H, 0.5, 100) == 40);
}

int main(void) {
    rules();
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(48, &m, &tok, &d)) return sc_test_finish();
    sc_dataset cal = {d.seqs, 40, 0};
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    const char *methods[] = {"cats", "claws", "teal", "cett", "clada"};
    for (int i = 0; i < 5; i++) co.methods[i] = methods[i];
    co.n_methods = 5;
    co.params = "teal_greedy=0";
    sc_calib *c;
    CHECK_MSG(sc_calib_compute(m, &cal, &co, &c, &err) == SC_OK, "%s", err.msg);

    /* a short teacher-forced sequence, held out */
    sc_tokens seq = d.seqs[44];
    if (seq.n > 64) seq.n = 64;
    sc_dataset ev = {&seq, 1, 0};
    const int64_t L = m->cfg.n_layers, F = m->cfg.ffn_dim, T = (int64_t)seq.n;

    /* one artifact holds every router's plan; cett's thresholds fitted at density 0.5 */
    const char *p = sc_tmp_path("plan_f32.spk");
    sc_pack_opts po = {.layout = "f32", .calib = c, .method = "cats", .density = 0.5};
    sc_pack_result pr;
    CHECK_MSG(sc_pack(m, tok, &po, p, &pr, &err) == SC_OK, "%s", err.msg);
    srt_ctx *ctx;
    CHECK(srt_ctx_create(&ctx, SRT_ISA_AUTO, 1) == SRT_OK);
    srt_model_opts mo = {0, ctx, SRT_KV_F32};
    srt_model *rt;
    char emsg[512];
    CHECK_MSG(srt_model_open(p, &mo, &rt, emsg, sizeof emsg) == SRT_CT_OK, "%s", emsg);

    live_rec ev_live = {L, F, T, calloc((size_t)(T * L * F), 1)}, rt_live = {L, F, T, calloc((size_t)(T * L * F), 1)};
    CHECK(ev_live.bits && rt_live.bits);
    /* cett and clada at 0.5: the stored thresholds; at 0.33 and 0.71 the runtime's from the stored CETT table */
    const char *names[] = {"cats", "claws", "cats-threshold", "cats-threshold", "cett", "cett", "cett", "clada", "clada",
                           "teal", "griffin", "teal-cats"};
    const double dens[] = {0.5, 0.5, 0.33, 0.71, 0.5, 0.33, 0.71, 0.5, 0.33, 0.33, 0.4, 0.5};
    const int n_routers = (int)(sizeof names / sizeof names[0]);
    for (int k = 0; k < n_routers; k++) {
        bool neuron = strcmp(names[k], "teal") != 0; /* teal routes every linear input: compared by NLL and thresholds */
        sc_sparse_eval_opts eo = {names[k], dens[k], c, 512, false, NULL, NULL};
        sc_sparse_eval_result er;
        sc_live_obs obs = {on_live, &ev_live};
        memset(ev_live.bits, 0, (size_t)(T * L * F));
        CHECK_MSG(sc_eval_sparse_observe(m, &ev, &eo, neuron ? &obs : NULL, &er, &err) == SC_OK, "%s: %s", names[k],
                  err.msg);
        CHECK_MSG(srt_model_set_method(rt, names[k], dens[k]) == SRT_OK, "%s", names[k]);
        /* the runtime, token by token: its live sets */
        memset(rt_live.bits, 0, (size_t)(T * L * F));
        /* griffin: eval's protocol, the first half of the window a dense prompt choosing the sets of the rest */
        const int64_t prompt = srt_method_find(names[k])->from_prompt ? T / 2 : 0;
        for (int64_t t = 0; t < T; t++) {
            const float *logits;
            CHECK(srt_model_step(rt, seq.ids[t], t, &logits) == SRT_OK);
            if (t + 1 == prompt) CHECK(srt_model_end_prompt(rt) == SRT_OK);
            for (int64_t l = 0; l < L; l++) {
                const uint32_t *idx;
                int64_t n = srt_model_last_live(rt, l, &idx);
                unsigned char *b = rt_live.bits + (t * L + l) * F;
                if (!idx)
                    memset(b, 1, (size_t)F);
                else
                    for (int64_t i = 0; i < n; i++) b[idx[i]] = 1;
            }
        }
        int64_t diff_sets = 0, diff_neurons = 0;
        for (int64_t r = prompt * L; neuron && r < T * L; r++) { /* eval reports no live set for a prompt */
            int64_t dn = 0;
            for (int64_t j = 0; j < F; j++) dn += ev_live.bits[r * F + j] != rt_live.bits[r * F + j];
            diff_sets += dn > 0;
            diff_neurons += dn;
        }
        if (prompt) { /* scored from the prompt's last position: NLL compared by test_score (eval -m == run --score) */
            printf("%-15s d=%.2f  live sets differing: %lld of %lld (%lld neurons) after a prompt of %lld\n", names[k],
                   dens[k], (long long)diff_sets, (long long)((T - prompt) * L), (long long)diff_neurons,
                   (long long)prompt);
            CHECK_MSG(diff_sets == 0, "%s: %lld live sets differ", names[k], (long long)diff_sets);
            continue;
        }
        double dr, nr = sc_test_rt_nll(rt, &ev, NULL, &dr);
        if (neuron)
            printf("%-15s d=%.2f  live sets differing: %lld of %lld (%lld neurons)  ", names[k], dens[k],
                   (long long)diff_sets, (long long)(T * L), (long long)diff_neurons);
        else
            printf("%-15s d=%.2f  (every linear input; thresholds compared)            ", names[k], dens[k]);
        printf("nll eval(source) %.6f run(f32) %.6f rel %.1e\n", er.ppl.nll_sum, nr, rel(nr, er.ppl.nll_sum));
        CHECK_MSG(diff_sets == 0, "%s: %lld live sets differ", names[k], (long long)diff_sets);
        /* f32 GEMVs vs the reference pass's sgemm: the dense level of test_run (1e-6) */
        CHECK_MSG(rel(nr, er.ppl.nll_sum) < 1e-5, "%s: nll %.9g vs %.9g", names[k], nr, er.ppl.nll_sum);
        if (!strcmp(names[k], "cats-threshold"))
            for (int64_t l = 0; l < L; l++)
                CHECK_MSG((float)er.lc.layer_threshold[l] == srt_model_threshold(rt, l, 0),
                          "cats-threshold %.2f layer %lld: eval %.9g run %.9g", dens[k], (long long)l,
                          er.lc.layer_threshold[l], srt_model_threshold(rt, l, 0));
        if (!strncmp(names[k], "teal", 4)) { /* eval's thresholds are the plan's table read by srt_table_threshold */
            bool cats = !strcmp(names[k], "teal-cats"); /* h: no threshold, the top-K instead */
            double cum_buf[SC_TEAL_NB];
            float table[SC_TEAL_NTAPS * SRT_THR_GRID];
            for (int64_t l = 0; l < L; l++) {
                CHECK(sc_plan_teal_table(sc_calib_state(c, "teal"), l, cum_buf, table));
                for (int tap = 0; tap < SC_TEAL_NTAPS; tap++) {
                    float want = srt_table_threshold(table + tap * SRT_THR_GRID, 1.0 - dens[k]);
                    CHECK((cats && tap == SRT_TEAL_H ? -1.0f : want) == srt_model_threshold(rt, l, tap));
                }
            }
        }
    }
    free(ev_live.bits);
    free(rt_live.bits);
    srt_model_close(rt);
    srt_ctx_free(ctx);
    sc_calib_free(c);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
