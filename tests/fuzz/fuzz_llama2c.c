/* fuzz_llama2c.c - llama2.c checkpoints: the 28-byte header (a negative
 * vocabulary size means an untied classifier) and every weight table. */
#include "fuzz_common.h"
#include "model.h"

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
    if (sc_load_llama2c(p, &m, &err) == SC_OK) sc_model_free(m);
    return 0;
}
