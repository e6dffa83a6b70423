/* test_llama2c.c - llama2.c checkpoints: the shipped model's config, an
 * untied classifier, and hostile headers / truncation. */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "testing.h"

static sc_err err;

static void write_header(const char *p, const int32_t h[7], size_t extra_floats) {
    size_t n = 28 + extra_floats * 4;
    unsigned char *b = calloc(1, n);
    memcpy(b, h, 28);
    for (size_t i = 0; i < extra_floats; i++) {
        float v = 0.01f * (float)(i % 97);
        memcpy(b + 28 + 4 * i, &v, 4);
    }
    sc_write_bytes(p, b, n);
    free(b);
}

int main(void) {
    const char *bin = sc_asset("models/stories260K.bin");
    if (!bin) return sc_test_finish();
    sc_model *m;
    CHECK_MSG(sc_model_load(bin, &m, &err) == SC_OK, "%s", err.msg);
    const sc_config *c = &m->cfg;
    CHECK(c->dim == 64 && c->ffn_dim == 172 && c->n_layers == 5 && c->n_heads == 8 && c->n_kv_heads == 4);
    CHECK(c->head_dim == 8 && c->vocab_size == 512 && c->max_seq_len == 512 && c->tied_classifier);
    CHECK(c->rope == SC_ROPE_INTERLEAVED && m->classifier == m->tok_emb);
    CHECK(sc_model_param_count(m) == 260032); /* MANIFEST */
    CHECK(m->owned_bytes == 0);               /* f32 used in place */
    sc_model_free(m);

    /* an untied model: negative vocab size, classifier after the freq tables */
    const char *p = sc_tmp_path("untied.bin");
    int32_t h[7] = {8, 16, 1, 2, 2, -10, 4};
    size_t dim = 8, hid = 16, V = 10, seq = 4, hs = 4;
    size_t body = V * dim + dim + 4 * dim * dim + dim + 3 * dim * hid + dim;
    size_t total = body + seq * hs + V * dim;
    write_header(p, h, total);
    CHECK_MSG(sc_model_load(p, &m, &err) == SC_OK, "%s", err.msg);
    if (m) {
        CHECK(!m->cfg.tied_classifier && m->classifier != m->tok_emb);
        CHECK(m->classifier == m->tok_emb + (body + seq * hs)); /* contiguous in the mapping */
        sc_model_free(m);
    }
    /* one float short */
    write_header(p, h, total - 1);
    CHECK(sc_model_load(p, &m, &err) == SC_EFORMAT);
    CHECK(strstr(err.msg, "truncated") && strstr(err.msg, p));

    /* hostile headers */
    const int32_t bad[][7] = {
        {0, 16, 1, 2, 2, 10, 4},           /* dim 0 */
        {8, 16, 1, 0, 0, 10, 4},           /* no heads */
        {8, 16, 1, 2, 3, 10, 4},           /* kv heads > heads */
        {8, 16, 1000000000, 2, 2, 10, 4},  /* absurd layer count */
        {8, 16, 1, 2, 2, 0x7fffffff, 4},   /* absurd vocab */
        {1 << 30, 16, 1, 2, 2, 10, 4},     /* absurd dim */
        {9, 16, 1, 2, 2, 10, 4},           /* dim not a multiple of heads */
        {8, -16, 1, 2, 2, 10, 4},          /* negative hidden */
        {8, 16, 1, 2, 2, 10, -4},          /* negative seq_len */
        {8, 16, 1, 4, 4, 10, 4},           /* head dim 2 ok, but file too short */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_header(p, bad[i], 64);
        sc_status st = sc_model_load(p, &m, &err);
        CHECK_MSG(st == SC_EFORMAT && strstr(err.msg, p), "case %zu: status %d: %s", i, (int)st, err.msg);
    }
    /* the real file truncated at many lengths */
    char *buf;
    size_t len;
    CHECK(sc_read_file(bin, 1 << 22, &buf, &len, &err) == SC_OK);
    /* (the trailing freq_cis table, 512 x 8 floats, is ignored: a file cut
     * inside it still holds every weight, as llama2.c itself accepts) */
    size_t weights_end = len - 512 * 8 * 4;
    for (size_t cut = 0; cut < weights_end; cut += cut < 64 ? 4 : 4099) {
        sc_write_bytes(p, buf, cut);
        sc_status st = sc_model_load(p, &m, &err);
        CHECK_MSG(st != SC_OK, "cut at %zu accepted", cut);
        if (st == SC_OK) sc_model_free(m);
    }
    free(buf);
    CHECK(sc_model_load(sc_tmp_path("missing.bin"), &m, &err) == SC_EIO);
    return sc_test_finish();
}
