/* test_hf_out.c - writing a model as a Hugging Face checkpoint
 * (convert/hf_out.c):
 *  1. stories260K from its llama2.c checkpoint (interleaved RoPE) written as
 *     HF holds exactly the tensors of the asset's own HF copy (converted by
 *     Hugging Face's Llama rules: q/k rows permuted per head), and the
 *     written model runs the same logits as the source;
 *  2. synthetic qwen2 (biases) and gemma ((1 + w) norms, tied) models read
 *     back and written again: the same config and, for qwen2, bit-identical
 *     tensors; gemma's norms go through w + 1 - 1 in f32 (within an ulp of 1);
 *  3. replacement matrices (w) are what is written. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "hf_out.h"
#include "model.h"
#include "safetensors.h"
#include "synth.h"
#include "testing.h"

/* The largest |a - b| over every tensor of file a, found by name in b (-1: a tensor missing or of another shape). */
static double tensors_diff(const char *a, const char *b) {
    sc_err err;
    sc_st_file *fa = NULL, *fb = NULL;
    if (sc_st_open(a, &fa, &err) || sc_st_open(b, &fb, &err)) {
        sc_st_free(fa);
        return -1;
    }
    double worst = 0.0;
    for (size_t i = 0; i < sc_st_count(fa) && worst >= 0; i++) {
        const sc_st_tensor *x = sc_st_get(fa, i), *y = sc_st_find(fb, x->name);
        if (!y || y->n_elements != x->n_elements || y->n_dims != x->n_dims || x->dtype != SC_DT_F32 ||
            y->dtype != SC_DT_F32) {
            fprintf(stderr, "%s: tensor %s missing or unlike\n", b, x->name);
            worst = -1;
            break;
        }
        const float *u = (const float *)x->data, *v = (const float *)y->data;
        for (uint64_t k = 0; k < x->n_elements; k++) worst = fmax(worst, fabs((double)u[k] - (double)v[k]));
    }
    if (worst >= 0 && sc_st_count(fa) != sc_st_count(fb)) worst = -1;
    sc_st_free(fa);
    sc_st_free(fb);
    return worst;
}

static float *logits_of(const sc_model *m, const int32_t *ids, int64_t n) {
    sc_err err;
    sc_forward *f;
    if (sc_forward_create(m, n, n, &f, &err)) return NULL;
    const float *lg;
    float *out = NULL;
    if (!sc_forward_run(f, ids, n, 0, NULL, &lg, &err)) {
        out = malloc((size_t)(n * m->cfg.vocab_size) * sizeof(float));
        if (out) memcpy(out, lg, (size_t)(n * m->cfg.vocab_size) * sizeof(float));
    }
    sc_forward_free(f);
    return out;
}

static void test_stories(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *hf = sc_asset("models/stories260K-hf/model.safetensors");
    if (!bin || !hf) return;
    sc_err err;
    sc_model *m, *back;
    CHECK(sc_model_load(bin, &m, &err) == SC_OK);
    const char *dir = sc_tmp_path("hf_out_stories");
    sc_st_meta meta[1] = {{"note", "test"}};
    CHECK_MSG(sc_model_save_hf(m, NULL, dir, meta, 1, &err) == SC_OK, "%s", err.msg);
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    /* the same values as Hugging Face's conversion of the same weights */
    double d = tensors_diff(path, hf);
    printf("stories260K.bin written as HF vs the asset's HF copy: largest difference %g\n", d);
    CHECK(d == 0.0);
    CHECK(sc_model_load(dir, &back, &err) == SC_OK);
    CHECK(back->cfg.rope == SC_ROPE_HALF && back->cfg.n_kv_heads == 4 && back->cfg.tied_classifier &&
          back->cfg.norm_eps == m->cfg.norm_eps && back->cfg.max_seq_len == m->cfg.max_seq_len);
    /* the same logits: rotate-half RoPE on permuted rows is the interleaved RoPE on the original ones, with the
     * q.k dot products summed in another order (the head's pairs permuted), so equal to f32 rounding: measured
     * 1.2e-5 on logits of up to ~20 (6e-7 relative); 1e-5 of the largest logit. Against the asset's own HF copy
     * (the same tensors checked above, the same code) they are bit-identical. */
    int32_t ids[16];
    for (int i = 0; i < 16; i++) ids[i] = (int32_t)(1 + 31 * i % 500);
    sc_model *ref;
    CHECK(sc_model_load(sc_asset("models/stories260K-hf"), &ref, &err) == SC_OK);
    float *a = logits_of(m, ids, 16), *b = logits_of(back, ids, 16), *r = logits_of(ref, ids, 16);
    CHECK(a && b && r);
    double worst = 0.0, big = 0.0;
    for (int64_t i = 0; a && b && i < 16 * m->cfg.vocab_size; i++) {
        worst = fmax(worst, fabs((double)a[i] - b[i]));
        big = fmax(big, fabs((double)a[i]));
    }
    printf("logits of the written model vs the source: largest difference %g (largest logit %g)\n", worst, big);
    CHECK(worst <= 1e-5 * big);
    CHECK(b && r && !memcmp(b, r, (size_t)(16 * m->cfg.vocab_size) * sizeof(float)));
    free(r);
    sc_model_free(ref);
    free(a);
    free(b);
    /* replacement matrices are written in the model's place (rows permuted like the model's) */
    int64_t L = m->cfg.n_layers, D = m->cfg.dim, F = m->cfg.ffn_dim;
    const float **w = calloc((size_t)(L * SC_LIN_COUNT), sizeof *w);
    float *wd = malloc((size_t)(D * F) * sizeof(float));
    for (int64_t i = 0; i < D * F; i++) wd[i] = sc_test_layer(m, 2)->wd[i] * 0.5f;
    w[2 * SC_LIN_COUNT + SC_LIN_DOWN] = wd;
    const char *dir2 = sc_tmp_path("hf_out_stories_w");
    CHECK(sc_model_save_hf(m, w, dir2, NULL, 0, &err) == SC_OK);
    sc_model *m2;
    CHECK(sc_model_load(dir2, &m2, &err) == SC_OK);
    CHECK(!memcmp(sc_test_layer(m2, 2)->wd, wd, (size_t)(D * F) * sizeof(float)));
    CHECK(!memcmp(sc_test_layer(m2, 1)->wd, sc_test_layer(m, 1)->wd, (size_t)(D * F) * sizeof(float)));
    sc_model_free(m2);
    free(wd);
    free(w);
    sc_model_free(back);
    sc_model_free(m);
}

static void test_synth(const char *family) {
    sc_err err;
    sc_synth_opts o;
    sc_synth_opts_default(&o);
    o.dim = 64;
    o.ffn_dim = 96;
    o.n_layers = 2;
    o.n_heads = 4;
    o.n_kv_heads = 2;
    o.vocab_size = 300;
    o.max_seq_len = 128;
    o.family = family;
    char src[2048], again[2100], a[2200], b[2200];
    snprintf(src, sizeof src, "%s", sc_tmp_path(family));
    snprintf(again, sizeof again, "%s_again", src);
    CHECK(sc_synth_write(&o, src, &err) == SC_OK);
    sc_model *m, *back;
    CHECK(sc_model_load(src, &m, &err) == SC_OK);
    CHECK_MSG(sc_model_save_hf(m, NULL, again, NULL, 0, &err) == SC_OK, "%s", err.msg);
    CHECK(sc_model_load(again, &back, &err) == SC_OK);
    CHECK(!memcmp(&m->cfg, &back->cfg, sizeof m->cfg));
    snprintf(a, sizeof a, "%s/model.safetensors", again);
    snprintf(b, sizeof b, "%s/model.safetensors", src);
    double d = tensors_diff(a, b);
    printf("synth %s written again: largest tensor difference %g\n", family, d);
    /* gemma: (w + 1) - 1 in f32 moves w (|w| ~ 0.1) by at most half an ulp of 1 */
    CHECK(d >= 0.0 && d <= (strcmp(family, "gemma") ? 0.0 : 0x1p-24));
    sc_model_free(back);
    sc_model_free(m);
}

int main(void) {
    test_stories();
    test_synth("qwen2");
    test_synth("gemma");
    return sc_test_finish();
}
