/* srt_config.c - the one set of rules a model configuration must satisfy,
 * whoever reads it: the runtime opening an artifact (srt_model.c) and the
 * toolchain loading any model format (formats/model.c sc_config_validate),
 * so `run` and `ppl` accept and refuse the same files. */
#include <math.h>
#include <stdio.h>

#include "srt_model.h"

bool srt_config_invalid(const srt_model_config *c, char *why, size_t cap) {
#define RANGE(f, lo, hi)                                                                                       \
    if (c->f < (lo) || c->f > (hi))                                                                            \
        return snprintf(why, cap, #f " = %lld is outside [%lld, %lld]", (long long)c->f, (long long)(lo),       \
                        (long long)(hi)),                                                                      \
               true;
    RANGE(dim, 1, SRT_MAX_DIM)
    RANGE(ffn_dim, 1, SRT_MAX_FFN)
    RANGE(n_layers, 1, SRT_MAX_LAYERS)
    RANGE(n_heads, 1, SRT_MAX_HEADS)
    RANGE(n_kv_heads, 1, c->n_heads)
    RANGE(head_dim, 2, 4096)
    RANGE(vocab_size, 1, SRT_MAX_VOCAB)
    RANGE(max_seq_len, 1, SRT_MAX_SEQ)
#undef RANGE
    if (c->n_heads % c->n_kv_heads != 0)
        return snprintf(why, cap, "n_heads = %lld is not a multiple of n_kv_heads = %lld", (long long)c->n_heads,
                        (long long)c->n_kv_heads),
               true;
    if (c->head_dim % 2 != 0)
        return snprintf(why, cap, "head_dim = %lld is odd (RoPE needs pairs)", (long long)c->head_dim), true;
    if (c->n_heads * c->head_dim > 4 * SRT_MAX_DIM) return snprintf(why, cap, "n_heads * head_dim is too large"), true;
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f))
        return snprintf(why, cap, "norm_eps = %g is not in (0, 1)", (double)c->norm_eps), true;
    if (!(c->rope_theta > 0.0f && c->rope_theta < 1e12f))
        return snprintf(why, cap, "rope_theta = %g is not in (0, 1e12)", (double)c->rope_theta), true;
    if (c->rope_scaling < 0 || c->rope_scaling > 2)
        return snprintf(why, cap, "rope_scaling = %d is unknown", c->rope_scaling), true;
    if (c->rope_scaling && !(c->rope_factor >= 1.0f && c->rope_factor <= 1024.0f))
        return snprintf(why, cap, "rope_factor = %g is not in [1, 1024]", (double)c->rope_factor), true;
    if (c->rope_scaling == 2 && (c->rope_orig_ctx <= 0 || c->rope_orig_ctx > SRT_MAX_SEQ ||
                                 !(c->rope_low_freq_factor > 0) || !(c->rope_high_freq_factor > c->rope_low_freq_factor) ||
                                 !isfinite(c->rope_high_freq_factor)))
        return snprintf(why, cap, "llama3 RoPE scaling needs 0 < low_freq_factor < high_freq_factor and an original "
                                  "context in [1, %lld]", (long long)SRT_MAX_SEQ),
               true;
    if (c->bos_id < -1 || c->bos_id >= c->vocab_size || c->eos_id < -1 || c->eos_id >= c->vocab_size)
        return snprintf(why, cap, "bos/eos id beyond the vocabulary"), true;
    return false;
}
