/* test_pack.c - packing stories260K into artifacts and reading them back:
 * f32 reproduces the model exactly, q8_0 loses under 0.5% perplexity,
 * int4 layouts lose a reported amount, the routing parameters and the
 * vocabulary travel with the artifact, and damaged artifacts are rejected. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "engine.h"
#include "eval.h"
#include "pack.h"
#include "srt_container.h"
#include "synth.h"
#include "testing.h"

static sc_err err;

/* Packing a model whose weights are read on use streams the embedding and
 * the classifier in row chunks (convert/pack.c); the sections must be byte
 * for byte those of packing the same model with every weight resident. A
 * bf16 llama with an untied classifier, 100-word vocabulary (not a multiple
 * of the 32-row q8_0 blocks) and dim 48 (columns padded to 64), and a
 * 40-row chunk: four chunks, the last one padded. */
static void test_streamed_vocabulary(void) {
    sc_synth_opts so;
    sc_synth_opts_default(&so);
    so.dim = 48, so.ffn_dim = 64, so.n_layers = 2, so.n_heads = 4, so.n_kv_heads = 2, so.vocab_size = 100;
    so.max_seq_len = 64, so.family = "llama", so.dtype = SC_DT_BF16, so.seed = 7;
    const char *dir = sc_tmp_path("stream_synth");
    CHECK_MSG(sc_synth_write(&so, dir, &err) == SC_OK, "%s", err.msg);
    const char *layouts[] = {"q8_0", "f32"};
    for (int i = 0; i < 2; i++) {
        char path[2][4096];
        for (int lazy = 0; lazy < 2; lazy++) {
            sc_model_policy(!lazy, lazy ? 40 * 48 * sizeof(float) : 0);
            sc_model *m;
            CHECK_MSG(sc_model_load(dir, &m, &err) == SC_OK, "%s", err.msg);
            if (!m) continue;
            CHECK(sc_model_is_lazy(m) == (lazy == 1) && m->cfg.vocab_size == 100 && !m->cfg.tied_classifier);
            CHECK(!lazy || sc_model_classifier_chunk(m) == 40);
            snprintf(path[lazy], sizeof path[lazy], "%s", sc_tmp_path(lazy ? "stream_b.spk" : "stream_a.spk"));
            sc_pack_opts po = {.layout = layouts[i], .compress = 0};
            sc_pack_result pr;
            CHECK_MSG(sc_pack(m, NULL, &po, path[lazy], &pr, &err) == SC_OK, "%s: %s", layouts[i], err.msg);
            sc_model_free(m);
        }
        sc_model_policy(false, 0);
        srt_container *ca = NULL, *cb = NULL;
        char msg[256];
        CHECK(srt_container_open(path[0], SRT_CT_SPAK, &ca, msg, sizeof msg) == SRT_CT_OK);
        CHECK(srt_container_open(path[1], SRT_CT_SPAK, &cb, msg, sizeof msg) == SRT_CT_OK);
        const char *sections[] = {"tok_emb", "classifier", "l1.wd"};
        for (int k = 0; ca && cb && k < 3; k++) {
            const void *da, *db;
            uint64_t na, nb;
            CHECK(srt_container_get(ca, sections[k], &da, &na) == SRT_CT_OK);
            CHECK(srt_container_get(cb, sections[k], &db, &nb) == SRT_CT_OK);
            CHECK_MSG(na == nb && na > 0 && memcmp(da, db, (size_t)na) == 0, "%s: streamed %s differs", layouts[i],
                      sections[k]);
        }
        srt_container_close(ca);
        srt_container_close(cb);
    }
}

int main(void) {
    test_streamed_vocabulary();
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(120, &m, &tok, &d)) return sc_test_finish();
    sc_ppl_result base;
    CHECK(sc_eval_ppl(m, &d, 512, NULL, NULL, &base, &err) == SC_OK);
    double ppl0 = exp(base.nll_sum / (double)base.n_scored);
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    co.methods[0] = "claws";
    co.methods[1] = "cats";
    co.n_methods = 2;
    co.max_seqs = 20;
    sc_calib *c;
    CHECK(sc_calib_compute(m, &d, &co, &c, &err) == SC_OK);

    const char *layouts[] = {"f32", "q8_0", "q4_0", "kmi4", "zigzag", "kmi8"};
    double bound[] = {0.0, 0.005, 0.15, 0.15, 0.6, 0.005}; /* relative perplexity increase allowed */
    for (int i = 0; i < 6; i++) {
        const char *p = sc_tmp_path("m.spk");
        sc_pack_opts po = {.layout = layouts[i], .calib = c, .method = "claws", .density = 0.5, .compress = i == 1 ? 3 : 0};
        sc_pack_result pr;
        CHECK_MSG(sc_pack(m, tok, &po, p, &pr, &err) == SC_OK, "%s: %s", layouts[i], err.msg);
        sc_model *a;
        CHECK_MSG(sc_model_load(p, &a, &err) == SC_OK, "%s: %s", layouts[i], err.msg);
        if (!a) continue;
        CHECK(a->cfg.dim == 64 && a->cfg.ffn_dim == 172 && a->cfg.n_kv_heads == 4 && a->cfg.tied_classifier);
        CHECK(a->tokenizer && sc_tokenizer_vocab_size(a->tokenizer) == 512);
        /* the embedded vocabulary encodes like the original */
        sc_tokens t1 = {0}, t2 = {0};
        CHECK(sc_tokenizer_encode(tok, "Once upon a time, Lily", 22, true, false, &t1, &err) == SC_OK);
        CHECK(sc_tokenizer_encode(a->tokenizer, "Once upon a time, Lily", 22, true, false, &t2, &err) == SC_OK);
        CHECK(t1.n == t2.n && memcmp(t1.ids, t2.ids, t1.n * sizeof(int32_t)) == 0);
        sc_tokens_free(&t1);
        sc_tokens_free(&t2);
        sc_ppl_result r;
        CHECK(sc_eval_ppl(a, &d, 512, NULL, NULL, &r, &err) == SC_OK);
        double ppl = exp(r.nll_sum / (double)r.n_scored), rel = ppl / ppl0 - 1.0;
        printf("%-7s %7.1f KB  ppl %.4f (dense %.4f, %+.3f%%)\n", layouts[i], (double)pr.bytes_out / 1024, ppl, ppl0,
               100 * rel);
        if (i == 0)
            CHECK(r.nll_sum == base.nll_sum);
        else
            CHECK_MSG(rel >= 0 && rel < bound[i], "%s: +%.3f%%", layouts[i], 100 * rel);
        /* the routing parameters are stored with their layers */
        char msg[256];
        srt_container *ct;
        CHECK(srt_container_open(p, SRT_CT_SPAK, &ct, msg, sizeof msg) == SRT_CT_OK);
        CHECK(srt_container_find(ct, "l3.claws_c") >= 0 && srt_container_find(ct, "l0.cats_thresholds") >= 0);
        CHECK(srt_container_verify_all(ct) == SRT_CT_OK);
        srt_container_close(ct);
        sc_model_free(a);
        if (i == 2) { /* damaged copies are rejected cleanly */
            char *buf;
            size_t len;
            CHECK(sc_read_file(p, 1 << 24, &buf, &len, &err) == SC_OK);
            const char *q = sc_tmp_path("bad.spk");
            for (size_t cut = 0; cut < len; cut += len / 17 + 1) {
                sc_write_bytes(q, buf, cut);
                CHECK(sc_model_load(q, &a, &err) != SC_OK);
            }
            buf[len / 2] ^= 0x40;
            sc_write_bytes(q, buf, len);
            sc_status st = sc_model_load(q, &a, &err);
            CHECK_MSG(st != SC_OK && strstr(err.msg, q), "%d %s", (int)st, err.msg);
            free(buf);
        }
    }
    /* --permute: the model's function is unchanged (f32 artifact); rows of W_g, columns of W_d and
     * the CLAWS multipliers move together; the most active neurons come first */
    {
        const char *p0 = sc_tmp_path("plain.spk"), *p1 = sc_tmp_path("perm.spk");
        sc_pack_opts po = {.layout = "f32", .calib = c, .method = "claws", .density = 0.5};
        sc_pack_result pr;
        CHECK(sc_pack(m, tok, &po, p0, &pr, &err) == SC_OK);
        po.permute = true;
        CHECK_MSG(sc_pack(m, tok, &po, p1, &pr, &err) == SC_OK, "%s", err.msg);
        sc_model *a, *b;
        CHECK(sc_model_load(p0, &a, &err) == SC_OK);
        CHECK(sc_model_load(p1, &b, &err) == SC_OK);
        sc_ppl_result ra, rb;
        CHECK(sc_eval_ppl(a, &d, 512, NULL, NULL, &ra, &err) == SC_OK);
        CHECK(sc_eval_ppl(b, &d, 512, NULL, NULL, &rb, &err) == SC_OK);
        printf("permuted f32 artifact: nll %.9f vs %.9f\n", rb.nll_sum / rb.n_scored, ra.nll_sum / ra.n_scored);
        CHECK(fabs(rb.nll_sum - ra.nll_sum) <= 1e-6 * fabs(ra.nll_sum));
        char msg[256];
        srt_container *ct;
        CHECK(srt_container_open(p1, SRT_CT_SPAK, &ct, msg, sizeof msg) == SRT_CT_OK);
        const void *pp, *cp;
        CHECK(srt_container_get_typed(ct, "l2.perm", SRT_CT_U32, 172, &pp) == SRT_CT_OK);
        CHECK(srt_container_get_typed(ct, "l2.claws_c", SRT_CT_F32, 172, &cp) == SRT_CT_OK);
        const uint32_t *perm = pp;
        const float *cc = cp;
        const double *c_orig = NULL, *act = NULL;
        sc_array *arr = malloc(SC_MAX_ARRAYS * sizeof *arr);
        for (int e = 0; e < c->n_entries; e++) {
            int n = c->entries[e].method->arrays(c->entries[e].state, arr, SC_MAX_ARRAYS);
            for (int k = 0; k < n; k++) {
                if (!strcmp(arr[k].name, "layer2.c")) c_orig = arr[k].data;
                if (!strcmp(arr[k].name, "layer2.activity")) act = arr[k].data;
            }
        }
        free(arr);
        bool same_rows = true, same_c = true, sorted = true, is_perm = true;
        unsigned char seen[172] = {0};
        for (int i = 0; i < 172; i++) {
            if (perm[i] >= 172 || seen[perm[i]]++) is_perm = false;
            if (perm[i] >= 172) continue;
            if (memcmp(sc_test_layer(b, 2)->wg + i * 64, sc_test_layer(m, 2)->wg + perm[i] * 64, 64 * sizeof(float))) same_rows = false;
            if (sc_test_layer(b, 2)->wd[5 * 172 + i] != sc_test_layer(m, 2)->wd[5 * 172 + perm[i]]) same_rows = false;
            if (c_orig && cc[i] != (float)c_orig[perm[i]]) same_c = false;
            if (act && i > 0 && act[perm[i]] > act[perm[i - 1]]) sorted = false;
        }
        CHECK(is_perm && same_rows && same_c && sorted && c_orig && act);
        srt_container_close(ct);
        sc_model_free(a);
        sc_model_free(b);
        /* without neuron statistics --permute is refused */
        po.calib = NULL;
        CHECK(sc_pack(m, tok, &po, sc_tmp_path("np.spk"), &pr, &err) == SC_EARG);
    }

    /* unknown layout, and a pack that fails leaves no file */
    sc_pack_opts po = {.layout = "q5_k", .density = 1.0};
    sc_pack_result pr;
    CHECK(sc_pack(m, tok, &po, sc_tmp_path("x.spk"), &pr, &err) == SC_EARG);
    CHECK(!sc_file_exists(sc_tmp_path("x.spk")));
    sc_calib_free(c);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
