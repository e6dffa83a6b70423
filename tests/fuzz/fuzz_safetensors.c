/* fuzz_safetensors.c - one safetensors file: the JSON header, every tensor's
 * shape, dtype and offsets, and its bytes converted to f32 when supported. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "model.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = fz_path(data, size);
    if (!p) return 0;
    sc_err err;
    sc_st_file *f = NULL;
    if (sc_st_open(p, &f, &err) == SC_OK) {
        sc_model *m = sc_model_new("fuzz", "hf");
        for (size_t i = 0; m && i < sc_st_count(f); i++) {
            const sc_st_tensor *t = sc_st_get(f, i);
            if (t->supported && t->n_elements <= ((size_t)1 << 20))
                (void)sc_model_tensor_f32(m, t->data, t->dtype, (size_t)t->n_elements, &err);
        }
        for (size_t i = 0; i < sc_st_meta_count(f); i++) {
            const char *k, *v;
            (void)sc_st_meta_get(f, i, &k, &v);
        }
        sc_model_free(m);
    }
    sc_st_free(f);
    return 0;
}
