/* srt_config.c - the one set of rules a model configuration must satisfy,
 * whoever reads it: the runtime opening an artifact (srt_model.c) and the
 * toolchain loading any model format (formats/model.c sc_config_validate),
 * so `run` and `ppl` accept and refuse the same files; and the one reader of
 * an artifact manifest's config (srt_config_read), the runtime's and the
 * toolchain's (formats/artifact.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "srt_json.h"
#include "srt_model.h"
#include "srt_schema.h"

static int64_t cfg_int(const srt_json *o, const char *k, int64_t fb) { return srt_json_int(srt_json_get(o, k), fb); }

bool srt_config_read(const srt_json *j, srt_model_config *c, const char **bad) {
#define NEED_INT(f, k, lo, hi)                                                                             \
    do {                                                                                                  \
        const srt_json *v_ = srt_json_get(j, k);                                                          \
        if (!srt_json_is(v_, SRT_JSON_INT) && !srt_json_is(v_, SRT_JSON_DOUBLE)) return *bad = k, false;  \
        c->f = srt_json_int(v_, INT64_MIN);                                                               \
        if (c->f < (lo) || c->f > (hi)) return *bad = k, false;                                           \
    } while (0)
    if (!srt_json_is(j, SRT_JSON_OBJECT)) return *bad = SRT_MAN_CONFIG, false;
    /* types and presence here; ranges in srt_config_invalid, the one validation the toolchain shares */
    NEED_INT(dim, SRT_CFG_DIM, 1, SRT_MAX_DIM);
    NEED_INT(ffn_dim, SRT_CFG_FFN_DIM, 1, SRT_MAX_FFN);
    NEED_INT(n_layers, SRT_CFG_N_LAYERS, 1, SRT_MAX_LAYERS);
    NEED_INT(n_heads, SRT_CFG_N_HEADS, 1, SRT_MAX_HEADS);
    NEED_INT(n_kv_heads, SRT_CFG_N_KV_HEADS, 1, SRT_MAX_HEADS);
    NEED_INT(head_dim, SRT_CFG_HEAD_DIM, 2, 4096);
    NEED_INT(vocab_size, SRT_CFG_VOCAB_SIZE, 1, SRT_MAX_VOCAB);
    NEED_INT(max_seq_len, SRT_CFG_MAX_SEQ_LEN, 1, SRT_MAX_SEQ);
#undef NEED_INT
    const srt_json *v;
    if (!(v = srt_json_get(j, SRT_CFG_NORM_EPS)) || !(srt_json_is(v, SRT_JSON_DOUBLE) || srt_json_is(v, SRT_JSON_INT)))
        return *bad = SRT_CFG_NORM_EPS, false;
    c->norm_eps = (float)srt_json_num(v, 0);
    if (!(v = srt_json_get(j, SRT_CFG_ROPE_THETA)) ||
        !(srt_json_is(v, SRT_JSON_DOUBLE) || srt_json_is(v, SRT_JSON_INT)))
        return *bad = SRT_CFG_ROPE_THETA, false;
    c->rope_theta = (float)srt_json_num(v, 0);
    const char *rope = srt_json_str(srt_json_get(j, SRT_CFG_ROPE), NULL),
               *act = srt_json_str(srt_json_get(j, SRT_CFG_ACTIVATION), NULL);
    if (!rope || (strcmp(rope, SRT_ROPE_INTERLEAVED) && strcmp(rope, SRT_ROPE_HALF))) return *bad = SRT_CFG_ROPE, false;
    if (!act || (strcmp(act, SRT_ACT_SILU) && strcmp(act, SRT_ACT_GELU_TANH))) return *bad = SRT_CFG_ACTIVATION, false;
    c->rope_half = strcmp(rope, SRT_ROPE_HALF) == 0;
    c->gelu = strcmp(act, SRT_ACT_GELU_TANH) == 0;
    int64_t scaling = cfg_int(j, SRT_CFG_ROPE_SCALING, 0);
    if (scaling < 0 || scaling > 2) return *bad = SRT_CFG_ROPE_SCALING, false;
    c->rope_scaling = (int)scaling;
    c->rope_factor = (float)srt_json_num(srt_json_get(j, SRT_CFG_ROPE_FACTOR), 1.0);
    c->rope_low_freq_factor = (float)srt_json_num(srt_json_get(j, SRT_CFG_ROPE_LOW_FREQ_FACTOR), 1.0);
    c->rope_high_freq_factor = (float)srt_json_num(srt_json_get(j, SRT_CFG_ROPE_HIGH_FREQ_FACTOR), 4.0);
    c->rope_orig_ctx = cfg_int(j, SRT_CFG_ROPE_ORIG_CTX, 0);
    c->embed_scale = srt_json_bool(srt_json_get(j, SRT_CFG_EMBED_SCALE), false);
    c->tied_classifier = srt_json_bool(srt_json_get(j, SRT_CFG_TIED_CLASSIFIER), false);
    c->qkv_bias = srt_json_bool(srt_json_get(j, SRT_CFG_QKV_BIAS), false);
    int64_t bos = cfg_int(j, SRT_CFG_BOS_ID, -1), eos = cfg_int(j, SRT_CFG_EOS_ID, -1);
    if (bos < -1 || bos > INT32_MAX || eos < -1 || eos > INT32_MAX) return *bad = SRT_CFG_BOS_ID, false;
    c->bos_id = (int32_t)bos;
    c->eos_id = (int32_t)eos;
    return true;
}


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
