/* fuzz_spk.c - packed artifacts (.spk), resealed so mutations get past the
 * checksums: the runtime's srt_model_open and a few decode steps with the
 * artifact's router, the toolchain's reader (weights dequantised) and the
 * embedded vocabulary. */
#include <stdlib.h>

#include "fuzz_common.h"
#include "model.h"
#include "srt_model.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int policy_set;
    if (!policy_set) { /* convert every weight at load, so the converters are fuzzed too */
        sc_model_policy(true, 0);
        policy_set = 1;
    }
    static srt_ctx *ctx;
    if (!ctx && srt_ctx_create(&ctx, SRT_ISA_AUTO, 1) != SRT_OK) return 0;
    uint8_t *b = fz_resealed(data, size);
    const char *p = b ? fz_path(b, size) : NULL;
    if (!p) {
        free(b);
        return 0;
    }
    char msg[768];
    srt_model *m = NULL;
    srt_model_opts mo = {8, ctx, SRT_KV_F32};
    if (srt_model_open(p, &mo, &m, msg, sizeof msg) == SRT_CT_OK) {
        const srt_model_config *c = srt_model_get_config(m);
        (void)srt_model_set_method(m, srt_model_default_method(m), srt_model_default_density(m));
        const float *logits;
        for (int64_t pos = 0; pos < 3; pos++)
            if (srt_model_step(m, (int32_t)((size > (size_t)pos ? data[pos] : 1) % c->vocab_size), pos, &logits) != SRT_OK)
                break;
    }
    srt_model_close(m);
    sc_err err;
    sc_model *sm = NULL;
    if (sc_load_artifact(p, &sm, &err) == SC_OK) sc_model_free(sm);
    sc_tokenizer *t = NULL;
    if (sc_artifact_load_tokenizer(p, &t, &err) == SC_OK) fz_exercise_tokenizer(t, data, size);
    sc_tokenizer_free(t);
    free(b);
    return 0;
}
