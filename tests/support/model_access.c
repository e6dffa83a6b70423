/* model_access.c - the weight helpers of testing.h (whole f32 copies through
 * the model's accessors). Apart from testing.c, which the ARM kernel tests
 * build with the runtime alone (scripts/test_arm.sh): these need formats/. */
#include "testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "model.h"
#include "tokenizer.h"

const sc_layer *sc_test_layer(const sc_model *m, int64_t l) {
    const sc_layer *L;
    sc_err e = {{0}};
    if (sc_model_layer(m, l, &L, &e) != SC_OK) {
        fprintf(stderr, "sc_test_layer: %s\n", e.msg);
        abort();
    }
    return L;
}

float *sc_test_embedding(const sc_model *m) {
    int64_t V = m->cfg.vocab_size, D = m->cfg.dim;
    float *out = malloc((size_t)(V * D) * sizeof(float));
    int32_t *ids = malloc((size_t)V * sizeof(int32_t));
    sc_err e = {{0}};
    if (!out || !ids) abort();
    for (int64_t i = 0; i < V; i++) ids[i] = (int32_t)i;
    if (sc_model_embed(m, ids, V, out, &e) != SC_OK) {
        fprintf(stderr, "sc_test_embedding: %s\n", e.msg);
        abort();
    }
    free(ids);
    return out;
}

float *sc_test_classifier(const sc_model *m) {
    int64_t V = m->cfg.vocab_size, D = m->cfg.dim, chunk = sc_model_classifier_chunk(m);
    float *out = malloc((size_t)(V * D) * sizeof(float));
    sc_err e = {{0}};
    if (!out) abort();
    for (int64_t r0 = 0; r0 < V; r0 += chunk) {
        int64_t n = V - r0 < chunk ? V - r0 : chunk;
        const float *W;
        if (sc_model_classifier_rows(m, r0, n, &W, &e) != SC_OK) {
            fprintf(stderr, "sc_test_classifier: %s\n", e.msg);
            abort();
        }
        memcpy(out + r0 * D, W, (size_t)(n * D) * sizeof(float));
    }
    return out;
}

bool sc_test_stories(int64_t max_docs, sc_model **m, sc_tokenizer **tok, sc_dataset *d) {
    const char *bin = sc_asset("models/stories260K.bin"), *tokp = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_valid_a.txt");
    if (!bin || !tokp || !text) return false;
    sc_err e = {{0}};
    bool ok = sc_model_load(bin, m, &e) == SC_OK;
    CHECK_MSG(ok, "%s", e.msg);
    if (ok) {
        ok = sc_tokenizer_load_llama2c(tokp, 512, tok, &e) == SC_OK;
        CHECK_MSG(ok, "%s", e.msg);
    }
    sc_data_opts dopt;
    sc_data_opts_default(&dopt);
    dopt.max_docs = max_docs;
    if (ok) {
        ok = sc_data_load_text(text, *tok, &dopt, d, &e) == SC_OK;
        CHECK_MSG(ok, "%s", e.msg);
    }
    return ok;
}
