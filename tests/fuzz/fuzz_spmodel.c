/* fuzz_spmodel.c - SentencePiece tokenizer.model (protobuf): pieces, scores,
 * types and normaliser options; the tokenizer it yields encodes and decodes. */
#include "fuzz_common.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = fz_path(data, size);
    if (!p) return 0;
    sc_err err;
    sc_tokenizer *t = NULL;
    if (sc_tokenizer_load_sp_model(p, &t, &err) == SC_OK) fz_exercise_tokenizer(t, data, size);
    sc_tokenizer_free(t);
    return 0;
}
