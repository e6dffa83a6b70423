/* fuzz_gguf.c - GGUF files: the model loader (config from the metadata,
 * every tensor converted) and the embedded vocabulary. */
#include "fuzz_common.h"
#include "gguf.h"
#include "model.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int policy_set;
    if (!policy_set) { /* convert every weight at load, so the converters are fuzzed too */
        sc_model_policy(true, 0);
        policy_set = 1;
    }
    const char *p = fz_path(data, size);
    if (!p) return 0;
    sc_err err;
    sc_model *m = NULL;
    if (sc_load_gguf(p, &m, &err) == SC_OK) sc_model_free(m);
    sc_tokenizer *t = NULL;
    if (sc_gguf_load_tokenizer(p, &t, &err) == SC_OK) fz_exercise_tokenizer(t, data, size);
    sc_tokenizer_free(t);
    return 0;
}
