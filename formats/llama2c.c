/* llama2c.c - llama2.c checkpoints: a 7-int header (dim, hidden_dim,
 * n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size
 * means an untied classifier stored after the freq_cis tables) followed by
 * f32 weights, used in place from the mmap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define HEADER_BYTES 28

typedef struct cursor {
    const uint8_t *base;
    size_t size, off;
    const char *path;
} cursor;

/* Takes n floats from the cursor; fails when the file is too short. */
static sc_status take(cursor *c, sc_model *m, size_t n, const char *what, const float **out, sc_err *err) {
    size_t bytes;
    if (!sc_mul_ok(n, 4, &bytes) || bytes > c->size - c->off)
        return sc_errf(err, SC_EFORMAT, "%s: truncated: %s needs %zu floats at offset %zu but the file has %zu bytes",
                       c->path, what, n, c->off, c->size);
    *out = sc_model_tensor_f32(m, c->base + c->off, SC_DT_F32, n, err);
    if (!*out) return SC_ENOMEM;
    c->off += bytes;
    return SC_OK;
}

sc_status sc_load_llama2c(const char *path, sc_model **out, sc_err *err) {
    *out = NULL;
    sc_file_map map;
    SC_TRY(sc_map_file(path, &map, err));
    if (map.size < HEADER_BYTES) {
        size_t size = map.size;
        sc_unmap_file(&map);
        return sc_errf(err, SC_EFORMAT, "%s: truncated llama2.c header (%zu bytes, need 28)", path, size);
    }
    int32_t h[7];
    for (int i = 0; i < 7; i++) h[i] = (int32_t)sc_le32(map.data + 4 * i);
    sc_model *m = sc_model_new(path, "llama2c");
    if (!m) {
        sc_unmap_file(&map);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    }
    const uint8_t *base = map.data;
    size_t size = map.size;
    sc_status st = sc_model_keep_map(m, map, err);
    if (st) goto fail;
    snprintf(m->src_dtype, sizeof m->src_dtype, "F32");

    sc_config *c = &m->cfg;
    c->family = SC_FAMILY_LLAMA;
    c->dim = h[0];
    c->ffn_dim = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->tied_classifier = h[5] > 0;
    c->vocab_size = h[5] < 0 ? -(int64_t)h[5] : h[5];
    c->max_seq_len = h[6];
    c->head_dim = c->n_heads > 0 ? c->dim / c->n_heads : 0;
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    c->rope = SC_ROPE_INTERLEAVED;
    c->act = SC_ACT_SILU;
    c->bos_id = c->vocab_size > 1 ? 1 : -1;
    c->eos_id = c->vocab_size > 2 ? 2 : -1;
    if ((st = sc_config_validate(c, path, err))) goto fail;
    if (c->dim % c->n_heads != 0) {
        st = sc_errf(err, SC_EFORMAT, "%s: dim = %lld is not a multiple of n_heads = %lld", path, (long long)c->dim,
                     (long long)c->n_heads);
        goto fail;
    }
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    if (!m->layers) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        goto fail;
    }
    /* The header bounds every product below by far less than 2^62. */
    size_t dim = (size_t)c->dim, hid = (size_t)c->ffn_dim, L = (size_t)c->n_layers;
    size_t qd = (size_t)(c->n_heads * c->head_dim), kvd = (size_t)(c->n_kv_heads * c->head_dim);
    cursor cur = {base, size, HEADER_BYTES, path};
    const float *emb = NULL, *att_norm = NULL, *wq = NULL, *wk = NULL, *wv = NULL, *wo = NULL, *ffn_norm = NULL,
                *w1 = NULL, *w2 = NULL, *w3 = NULL, *fin = NULL, *freq = NULL;
    if ((st = take(&cur, m, (size_t)c->vocab_size * dim, "token_embedding_table", &emb, err)) ||
        (st = take(&cur, m, L * dim, "rms_att_weight", &att_norm, err)) ||
        (st = take(&cur, m, L * qd * dim, "wq", &wq, err)) ||
        (st = take(&cur, m, L * kvd * dim, "wk", &wk, err)) ||
        (st = take(&cur, m, L * kvd * dim, "wv", &wv, err)) ||
        (st = take(&cur, m, L * dim * qd, "wo", &wo, err)) ||
        (st = take(&cur, m, L * dim, "rms_ffn_weight", &ffn_norm, err)) ||
        (st = take(&cur, m, L * hid * dim, "w1", &w1, err)) ||
        (st = take(&cur, m, L * dim * hid, "w2", &w2, err)) ||
        (st = take(&cur, m, L * hid * dim, "w3", &w3, err)) ||
        (st = take(&cur, m, dim, "rms_final_weight", &fin, err)))
        goto fail;
    m->tok_emb = emb;
    m->final_norm = fin;
    if (c->tied_classifier) {
        m->classifier = emb;
    } else {
        /* skip freq_cis_real and freq_cis_imag: seq_len * head_dim / 2 floats each */
        if ((st = take(&cur, m, (size_t)c->max_seq_len * (size_t)c->head_dim, "freq_cis tables", &freq, err)) ||
            (st = take(&cur, m, (size_t)c->vocab_size * dim, "wcls (untied classifier)", &m->classifier, err)))
            goto fail;
        m->mapped_bytes -= (uint64_t)c->max_seq_len * (uint64_t)c->head_dim * 4;
    }
    for (size_t l = 0; l < L; l++) {
        sc_layer *ly = &m->layers[l];
        ly->attn_norm = att_norm + l * dim;
        ly->wq = wq + l * qd * dim;
        ly->wk = wk + l * kvd * dim;
        ly->wv = wv + l * kvd * dim;
        ly->wo = wo + l * dim * qd;
        ly->ffn_norm = ffn_norm + l * dim;
        ly->wg = w1 + l * hid * dim;
        ly->wd = w2 + l * dim * hid;
        ly->wu = w3 + l * hid * dim;
    }
    if ((st = sc_model_check_complete(m, err))) goto fail;
    *out = m;
    return SC_OK;
fail:
    sc_model_free(m);
    return st;
}
