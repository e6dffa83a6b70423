/* test_permute.c - co-activation neuron permutation (compute --method coact,
 * pack --permute):
 *  - sc_coact_order on planted clusters: 8 groups of 32 neurons scattered
 *    over 256 positions, each token lighting 2 groups (with dropout and
 *    noise); the order is a bijection and puts every group in one stretch;
 *  - the coact method on stories260K: every stored mask holds exactly K bits
 *    (the CATS top-K at coact_density), equal to the router's live set;
 *    .scal save/load keeps the bits; shards concatenate;
 *  - pack --permute with a coact sample: the model's function is unchanged
 *    and the held-out CATS live sets form longer runs than unpermuted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coact.h"
#include "data.h"
#include "engine.h"
#include "eval.h"
#include "pack.h"
#include "permute.h"
#include "scal.h"
#include "sparse_eval.h"
#include "srt_container.h"
#include "srt_route.h"
#include "testing.h"

static sc_err err;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void planted(void) {
    enum { F = 256, G = 8, GS = 32, ROWS = 600, WORDS = F / 64 };
    uint32_t pos[F], group[F];
    for (int i = 0; i < F; i++) pos[i] = (uint32_t)i;
    for (int i = F - 1; i > 0; i--) { /* scatter the groups */
        int j = (int)(next() % (uint64_t)(i + 1));
        uint32_t t = pos[i];
        pos[i] = pos[j];
        pos[j] = t;
    }
    for (int i = 0; i < F; i++) group[pos[i]] = (uint32_t)(i / GS); /* neuron pos[i] belongs to group i / GS */
    uint64_t *bits = calloc((size_t)ROWS * WORDS, sizeof *bits);
    for (int r = 0; r < ROWS; r++) {
        uint32_t g1 = (uint32_t)(next() % G), g2 = (uint32_t)(next() % G);
        for (int j = 0; j < F; j++) {
            bool on = (group[j] == g1 || group[j] == g2) ? next() % 100 < 85 : next() % 100 < 3;
            if (on) bits[r * WORDS + j / 64] |= (uint64_t)1 << (j % 64);
        }
    }
    uint32_t perm[F];
    CHECK(sc_coact_order(bits, ROWS, WORDS, F, 4, perm, &err) == SC_OK);
    unsigned char seen[F] = {0};
    bool bij = true;
    for (int i = 0; i < F; i++) bij = bij && perm[i] < F && !seen[perm[i]]++;
    CHECK(bij);
    int worst = 0;
    for (uint32_t g = 0; g < G; g++) {
        int lo = F, hi = -1;
        for (int i = 0; i < F; i++)
            if (group[perm[i]] == g) {
                lo = i < lo ? i : lo;
                hi = i > hi ? i : hi;
            }
        worst = hi - lo + 1 > worst ? hi - lo + 1 : worst;
    }
    printf("planted clusters: widest stretch holding one group of %d: %d positions\n", GS, worst);
    CHECK_MSG(worst == GS, "a group is spread over %d positions", worst);
    /* degenerate inputs: no rows (identity), bad shapes */
    CHECK(sc_coact_order(bits, 0, WORDS, F, 4, perm, &err) == SC_OK);
    bool ident = true;
    for (int i = 0; i < F; i++) ident = ident && perm[i] == (uint32_t)i;
    CHECK(ident);
    CHECK(sc_coact_order(bits, ROWS, 1, F, 4, perm, &err) == SC_EARG);
    free(bits);
}

/* mean run length of the CATS live sets at density d on ev (eval's statistic) */
static double run_length(const sc_model *m, const sc_dataset *ev, double d, double *nll) {
    sc_sparse_eval_opts o = {"cats", d, NULL, m->cfg.max_seq_len, false, NULL, NULL};
    sc_sparse_eval_result r;
    if (sc_eval_sparse(m, ev, &o, &r, &err) != SC_OK) return NAN;
    *nll = r.ppl.nll_sum;
    return r.stats.live_run_length;
}

int main(void) {
    planted();
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(160, &m, &tok, &d)) return sc_test_finish();
    sc_dataset cal = {d.seqs, 120, 0}, ev = {d.seqs + 120, d.n_seqs - 120, 0};
    int64_t F = m->cfg.ffn_dim, W = (F + 63) / 64;

    sc_compute_opts co;
    sc_compute_opts_default(&co);
    co.methods[0] = "coact";
    co.methods[1] = "cats";
    co.n_methods = 2;
    co.params = "coact_sample=3000,coact_density=0.5";
    sc_calib *c;
    CHECK_MSG(sc_calib_compute(m, &cal, &co, &c, &err) == SC_OK, "%s", err.msg);
    const void *st8 = sc_calib_state(c, "coact");
    const uint64_t *bits;
    int64_t rows, words;
    CHECK(st8 && sc_coact_sample(st8, 3, &bits, &rows, &words) && words == W);
    int64_t K = srt_topk_count(0.5, F);
    bool exact = rows == 3000;
    for (int64_t r = 0; r < rows; r++) {
        int64_t n = 0;
        for (int64_t w = 0; w < W; w++) n += __builtin_popcountll(bits[r * W + w]);
        exact = exact && n == K;
    }
    CHECK_MSG(exact, "%lld rows, each with K = %lld live neurons", (long long)rows, (long long)K);

    /* save / load keeps the bits; a second shard appends its rows */
    {
        const char *p = sc_tmp_path("coact.scal");
        CHECK(sc_calib_save(c, m, p, 3, &err) == SC_OK);
        sc_calib *c2;
        CHECK_MSG(sc_calib_load(p, m, &c2, &err) == SC_OK, "%s", err.msg);
        const uint64_t *b2;
        int64_t r2, w2;
        CHECK(sc_coact_sample(sc_calib_state(c2, "coact"), 3, &b2, &r2, &w2) && r2 == rows && w2 == W &&
              memcmp(b2, bits, (size_t)(rows * W) * 8) == 0);
        sc_calib_free(c2);
        co.params = "coact_sample=100";
        sc_dataset a = {d.seqs, 10, 0};
        sc_calib *ca, *cb;
        co.shard_index = 0;
        co.shard_count = 2;
        CHECK(sc_calib_compute(m, &a, &co, &ca, &err) == SC_OK);
        co.shard_index = 1;
        CHECK(sc_calib_compute(m, &a, &co, &cb, &err) == SC_OK);
        co.shard_index = 0;
        co.shard_count = 1;
        const uint64_t *ba, *bb;
        int64_t ra, rb, wa;
        CHECK(sc_coact_sample(sc_calib_state(ca, "coact"), 0, &ba, &ra, &wa));
        CHECK(sc_coact_sample(sc_calib_state(cb, "coact"), 0, &bb, &rb, &wa));
        uint64_t *keep = malloc((size_t)((ra + rb) * W) * 8);
        memcpy(keep, ba, (size_t)(ra * W) * 8);
        memcpy(keep + ra * W, bb, (size_t)(rb * W) * 8);
        sc_status ms = sc_calib_merge(ca, cb, &err);
        CHECK_MSG(ms == SC_OK, "%s", err.msg);
        const uint64_t *bm;
        int64_t rm;
        CHECK(sc_coact_sample(sc_calib_state(ca, "coact"), 0, &bm, &rm, &wa) && rm == ra + rb && rm == 200 &&
              memcmp(bm, keep, (size_t)(rm * W) * 8) == 0);
        free(keep);
        sc_calib_free(ca);
        sc_calib_free(cb);
    }

    /* pack --permute from the coact sample */
    const char *p0 = sc_tmp_path("plain.spk"), *p1 = sc_tmp_path("coact.spk");
    sc_pack_opts po = {.layout = "f32", .calib = c, .method = "cats", .density = 0.5};
    sc_pack_result pr;
    CHECK(sc_pack(m, tok, &po, p0, &pr, &err) == SC_OK);
    po.permute = true;
    CHECK_MSG(sc_pack(m, tok, &po, p1, &pr, &err) == SC_OK, "%s", err.msg);
    char msg[256];
    srt_container *ct;
    CHECK(srt_container_open(p1, SRT_CT_SPAK, &ct, msg, sizeof msg) == SRT_CT_OK);
    const srt_json *how = srt_json_get(srt_container_manifest(ct), "permutation");
    CHECK(how && strcmp(srt_json_str(how, ""), "coact") == 0);
    srt_container_close(ct);
    sc_model *a, *b;
    CHECK(sc_model_load(p0, &a, &err) == SC_OK);
    CHECK(sc_model_load(p1, &b, &err) == SC_OK);
    sc_ppl_result ra, rb;
    CHECK(sc_eval_ppl(a, &ev, 512, NULL, NULL, &ra, &err) == SC_OK);
    CHECK(sc_eval_ppl(b, &ev, 512, NULL, NULL, &rb, &err) == SC_OK);
    CHECK_MSG(fabs(rb.nll_sum - ra.nll_sum) <= 1e-6 * fabs(ra.nll_sum), "nll %.9g vs %.9g", rb.nll_sum, ra.nll_sum);
    double n0, n1, l0 = run_length(a, &ev, 0.5, &n0), l1 = run_length(b, &ev, 0.5, &n1);
    printf("CATS d=0.5 on %zu held-out stories: mean live run length %.3f unpermuted, %.3f coact-permuted "
           "(nll %.6f vs %.6f)\n", ev.n_seqs, l0, l1, n0 / (double)ra.n_scored, n1 / (double)rb.n_scored);
    CHECK(l1 > l0);
    CHECK(fabs(n1 - n0) <= 1e-4 * fabs(n0)); /* same live sets up to near-ties */
    sc_model_free(a);
    sc_model_free(b);
    sc_calib_free(c);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
