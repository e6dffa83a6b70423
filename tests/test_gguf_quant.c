/* test_gguf_quant.c - GGML's block-quantised types (formats/gguf_quant.c):
 * the dequantised values of golden blocks (tests/fixtures/gguf_quant_golden.txt:
 * blocks quantised and dequantised by GGML itself) bit for bit, for Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K; then a GGUF model whose every matrix is
 * one of these types, read back through the loader (converted a layer at a
 * time on use), equals the golden values tensor for tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "gguf.h"
#include "gguf_quant.h"
#include "gguf_writer.h"
#include "model.h"
#include "testing.h"

#ifndef SC_SOURCE_DIR
#define SC_SOURCE_DIR "."
#endif

enum { N_TYPES = 8 };

typedef struct golden {
    char name[16];
    sc_dtype dt;
    uint32_t ggml;
    size_t n, bytes;
    uint8_t *q;
    float *x;
} golden;

static const struct {
    const char *name;
    sc_dtype dt;
    uint32_t ggml;
} TYPES[N_TYPES] = {{"Q4_0", SC_DT_Q4_0, 2}, {"Q4_1", SC_DT_Q4_1, 3}, {"Q5_0", SC_DT_Q5_0, 6},
                    {"Q5_1", SC_DT_Q5_1, 7}, {"Q8_0", SC_DT_Q8_0, 8}, {"Q4_K", SC_DT_Q4_K, 12},
                    {"Q5_K", SC_DT_Q5_K, 13}, {"Q6_K", SC_DT_Q6_K, 14}};

static int hexval(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

/* Reads the fixture; false (counted) when it is missing or malformed. */
static bool read_golden(golden g[N_TYPES]) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/gguf_quant_golden.txt", SC_SOURCE_DIR);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    if (!f) return false;
    char line[4096];
    int k = -1;
    size_t nq = 0, nx = 0;
    bool ok = true;
    while (ok && fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char name[16];
        size_t n, bytes;
        if (sscanf(line, "type %15s elements %zu bytes %zu", name, &n, &bytes) == 3) {
            ok = ++k < N_TYPES && !strcmp(name, TYPES[k].name) && n % sc_dtype_block(TYPES[k].dt) == 0 &&
                 bytes == sc_dtype_bytes(TYPES[k].dt, n);
            if (!ok) break;
            g[k] = (golden){.dt = TYPES[k].dt, .ggml = TYPES[k].ggml, .n = n, .bytes = bytes};
            snprintf(g[k].name, sizeof g[k].name, "%s", name);
            g[k].q = malloc(bytes);
            g[k].x = malloc(n * sizeof(float));
            nq = nx = 0;
            continue;
        }
        ok = k >= 0;
        if (!ok) break;
        if (nq < g[k].bytes) { /* hex bytes */
            for (char *p = line; ok && hexval(p[0]) >= 0; p += 2) {
                ok = hexval(p[1]) >= 0 && nq < g[k].bytes;
                if (ok) g[k].q[nq++] = (uint8_t)(hexval(p[0]) * 16 + hexval(p[1]));
            }
        } else { /* hex floats */
            char *p = line, *end;
            for (double v = strtod(p, &end); end != p; v = strtod(p, &end)) {
                ok = ok && nx < g[k].n && (double)(float)v == v;
                if (ok) g[k].x[nx++] = (float)v;
                p = end;
            }
        }
    }
    fclose(f);
    ok = ok && k == N_TYPES - 1;
    for (int i = 0; ok && i < N_TYPES; i++) ok = g[i].q && g[i].x;
    CHECK_MSG(ok && nx == g[N_TYPES - 1].n, "%s is malformed (type %d, %zu bytes, %zu values)", path, k, nq, nx);
    return ok;
}

static size_t differ(const float *a, const float *b, size_t n, size_t *first) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0 && !bad++) *first = i;
    return bad;
}

/* ---- a GGUF model of quantised matrices ---- */

enum { M_D = 256, M_F = 512, M_L = 2, M_H = 4, M_V = 64 };

/* Which golden type each matrix uses: every type on some matrix, each layer differently. */
static int type_of(const char *name) {
    static const char *const layer_mats[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                             "ffn_down"};
    if (!strcmp(name, "token_embd.weight")) return 3; /* Q5_1: rows read one at a time */
    if (!strcmp(name, "output.weight")) return 7;     /* Q6_K, as llama.cpp's mixes keep it */
    int l = name[4] - '0';
    for (int k = 0; k < 7; k++)
        if (strstr(name, layer_mats[k])) return (k + 4 * l) % N_TYPES;
    return -1;
}

/* Tensor data: the golden blocks of type g repeated; element i of the tensor is golden value i % g->n. */
static void add_quant(gguf_writer *w, const golden *g, const char *name, uint64_t ne0, uint64_t ne1) {
    size_t n = (size_t)(ne0 * ne1), nb = sc_dtype_bytes(g->dt, n);
    uint8_t *buf = malloc(nb);
    for (size_t o = 0; o < nb; o += g->bytes) memcpy(buf + o, g->q, nb - o < g->bytes ? nb - o : g->bytes);
    uint64_t ne[2] = {ne0, ne1};
    gw_tensor(w, name, 2, ne, g->ggml, buf, nb);
    free(buf);
}

static void add_f32(gguf_writer *w, const char *name, uint64_t n) {
    float *x = malloc(n * sizeof *x);
    for (uint64_t i = 0; i < n; i++) x[i] = 1.0f;
    gw_tensor(w, name, 1, &n, 0, x, n * 4);
    free(x);
}

static void check_tensor(const golden *g, const char *name, const float *p, size_t n) {
    size_t first = 0, bad = 0;
    for (size_t i = 0; p && i < n; i++)
        if (memcmp(&p[i], &g->x[i % g->n], sizeof(float)) != 0 && !bad++) first = i;
    CHECK_MSG(p && bad == 0, "%s (%s): %zu of %zu values differ, first at %zu: %.9g vs %.9g", name, g->name, bad, n,
              first, p ? p[first] : 0.0, g->x[first % g->n]);
}

static void model_test(const golden g[N_TYPES]) {
    gguf_writer w;
    gw_init(&w);
    gw_kv_str(&w, "general.architecture", "llama");
    gw_kv_u32(&w, "llama.context_length", 64);
    gw_kv_u32(&w, "llama.embedding_length", M_D);
    gw_kv_u32(&w, "llama.block_count", M_L);
    gw_kv_u32(&w, "llama.feed_forward_length", M_F);
    gw_kv_u32(&w, "llama.attention.head_count", M_H);
    gw_kv_u32(&w, "llama.attention.head_count_kv", M_H);
    gw_kv_f32(&w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    add_quant(&w, &g[type_of("token_embd.weight")], "token_embd.weight", M_D, M_V);
    add_f32(&w, "output_norm.weight", M_D);
    add_quant(&w, &g[type_of("output.weight")], "output.weight", M_D, M_V);
    static const struct {
        const char *name;
        uint64_t ne0, ne1;
    } mats[] = {{"attn_q", M_D, M_D}, {"attn_k", M_D, M_D},   {"attn_v", M_D, M_D},  {"attn_output", M_D, M_D},
                {"ffn_gate", M_D, M_F}, {"ffn_up", M_D, M_F}, {"ffn_down", M_F, M_D}};
    char name[64];
    for (int l = 0; l < M_L; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_norm.weight", l);
        add_f32(&w, name, M_D);
        snprintf(name, sizeof name, "blk.%d.ffn_norm.weight", l);
        add_f32(&w, name, M_D);
        for (int k = 0; k < 7; k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, mats[k].name);
            add_quant(&w, &g[type_of(name)], name, mats[k].ne0, mats[k].ne1);
        }
    }
    const char *path = sc_tmp_path("quant.gguf");
    CHECK(gw_write_file(&w, path));
    gw_free(&w);

    sc_model *m = NULL;
    sc_err err;
    CHECK_MSG(sc_model_load(path, &m, &err) == SC_OK, "%s", err.msg);
    if (!m) return;
    CHECK(sc_model_is_lazy(m)); /* the quantised matrices stay in the file until a layer is used */
    float *emb = sc_test_embedding(m), *cls = sc_test_classifier(m);
    check_tensor(&g[type_of("token_embd.weight")], "token_embd.weight", emb, (size_t)M_D * M_V);
    check_tensor(&g[type_of("output.weight")], "output.weight", cls, (size_t)M_D * M_V);
    free(emb);
    free(cls);
    for (int l = 0; l < M_L; l++) {
        const sc_layer *L = sc_test_layer(m, l);
        const float *ps[7] = {L->wq, L->wk, L->wv, L->wo, L->wg, L->wu, L->wd};
        for (int k = 0; k < 7; k++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, mats[k].name);
            check_tensor(&g[type_of(name)], name, ps[k], (size_t)(mats[k].ne0 * mats[k].ne1));
        }
    }
    sc_model_free(m);
}

int main(void) {
    golden g[N_TYPES];
    memset(g, 0, sizeof g);
    if (read_golden(g)) {
        for (int k = 0; k < N_TYPES; k++) {
            float *y = malloc(g[k].n * sizeof *y);
            sc_convert_to_f32(g[k].dt, g[k].q, g[k].n, y);
            size_t first = 0, bad = differ(y, g[k].x, g[k].n, &first);
            CHECK_MSG(bad == 0, "%s: %zu of %zu values differ from GGML's, first at %zu: %a vs %a", g[k].name, bad,
                      g[k].n, first, (double)y[first], (double)g[k].x[first]);
            /* the golden blocks are not trivial: non-zero and (for the types with mins) of both signs */
            size_t zeros = 0, neg = 0;
            for (size_t i = 0; i < g[k].n; i++) zeros += g[k].x[i] == 0, neg += g[k].x[i] < 0;
            CHECK_MSG(zeros < g[k].n / 4 + 32 && neg > g[k].n / 8, "%s: %zu zeros, %zu negative", g[k].name, zeros,
                      neg);
            CHECK(sc_dtype_block(g[k].dt) * (g[k].bytes / sc_dtype_bytes(g[k].dt, sc_dtype_block(g[k].dt))) == g[k].n);
            free(y);
        }
        model_test(g);
    }
    for (int k = 0; k < N_TYPES; k++) {
        free(g[k].q);
        free(g[k].x);
    }
    return sc_test_finish();
}
