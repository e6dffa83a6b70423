/* model.h - the in-memory model every part of sparsecal works on.
 *
 * Whatever the source format (llama2.c checkpoint, GGUF, Hugging Face
 * safetensors), a loaded model is a config plus f32 weight views in PyTorch
 * orientation: a linear layer W is row-major [out_features, in_features] and
 * computes y = W x. f32 tensors whose layout allows it point straight into the
 * mmapped file; other dtypes are converted once into buffers the model owns. */
#ifndef SC_MODEL_H
#define SC_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "dtype.h"

struct sc_tokenizer;

typedef enum sc_family { SC_FAMILY_LLAMA = 0, SC_FAMILY_MISTRAL, SC_FAMILY_QWEN2, SC_FAMILY_GEMMA } sc_family;
typedef enum sc_rope_style {
    SC_ROPE_INTERLEAVED = 0, /* llama2.c / GGUF llama: rotate pairs (2i, 2i+1) */
    SC_ROPE_HALF             /* Hugging Face / NEOX: rotate (i, i + head_dim/2) */
} sc_rope_style;
typedef enum sc_act { SC_ACT_SILU = 0, SC_ACT_GELU_TANH } sc_act;
typedef enum sc_rope_scaling {
    SC_ROPE_SCALING_NONE = 0,
    SC_ROPE_SCALING_LINEAR, /* every frequency divided by factor */
    SC_ROPE_SCALING_LLAMA3  /* Llama-3.1: low frequencies / factor, high kept, smooth between */
} sc_rope_scaling;

const char *sc_family_name(sc_family f);

typedef struct sc_config {
    sc_family family;
    int64_t dim;         /* d_model */
    int64_t ffn_dim;     /* D_ffn */
    int64_t n_layers;
    int64_t n_heads;     /* query heads */
    int64_t n_kv_heads;  /* key/value heads (GQA when < n_heads) */
    int64_t head_dim;    /* usually dim / n_heads (Gemma may differ) */
    int64_t vocab_size;
    int64_t max_seq_len; /* context the model was trained with */
    float norm_eps;
    float rope_theta;
    sc_rope_style rope;
    sc_rope_scaling rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_orig_ctx; /* original_max_position_embeddings (llama3 scaling) */
    sc_act act;
    bool norm_add_one;   /* Gemma: RMSNorm scales by (1 + w); folded into the stored norm weights at load */
    bool embed_scale;    /* Gemma: embeddings multiplied by sqrt(dim) */
    bool tied_classifier;
    bool qkv_bias;       /* Qwen2 */
    int32_t bos_id, eos_id; /* -1 when unknown */
} sc_config;

typedef struct sc_layer {
    const float *attn_norm;  /* [dim] effective RMSNorm scale */
    const float *wq;         /* [n_heads*head_dim, dim] */
    const float *wk;         /* [n_kv_heads*head_dim, dim] */
    const float *wv;         /* [n_kv_heads*head_dim, dim] */
    const float *bq, *bk, *bv; /* biases (Qwen2) or NULL */
    const float *wo;         /* [dim, n_heads*head_dim] */
    const float *ffn_norm;   /* [dim] */
    const float *wg;         /* [ffn_dim, dim] gate */
    const float *wu;         /* [ffn_dim, dim] up */
    const float *wd;         /* [dim, ffn_dim] down */
    /* LaRoSA rotations folded at pack time (artifacts packed with --method
     * larosa), else NULL: [dim, dim] R with the block input z = R n(x), n the
     * RMSNorm whose weight (then all ones) was folded into R; the projections
     * that read the input hold W Q. */
    const float *attn_rot, *mlp_rot;
} sc_layer;

typedef struct sc_model_res sc_model_res; /* owned mappings and buffers */

typedef struct sc_model {
    sc_config cfg;
    const float *tok_emb;    /* [vocab, dim] */
    sc_layer *layers;        /* [n_layers] */
    const float *final_norm; /* [dim] */
    const float *classifier; /* [vocab, dim]; == tok_emb when tied */
    struct sc_tokenizer *tokenizer; /* owned; NULL when the file carries none */
    char path[1024];
    char format[16];   /* "llama2c", "gguf", "hf" */
    char src_dtype[16]; /* dtype of the bulk of the weights in the file */
    char note[256];    /* format-specific remark shown by `info` (e.g. unsupported tokenizer kind) */
    uint64_t mapped_bytes; /* weight bytes used straight from mmapped files */
    uint64_t owned_bytes;  /* weight bytes converted into owned buffers */
    sc_model_res *res;
} sc_model;

/* Loads a model from a path, detecting the format: a directory (or a
 * config.json / *.safetensors / *.index.json inside one) is Hugging Face, a
 * file starting with "GGUF" is GGUF, one starting with "SPARSPAK" a packed
 * artifact, anything else a llama2.c checkpoint. */
sc_status sc_model_load(const char *path, sc_model **out, sc_err *err);
void sc_model_free(sc_model *m);

int64_t sc_model_param_count(const sc_model *m);

/* ---- for format readers ---- */

sc_model *sc_model_new(const char *path, const char *format);
/* Hands a mapping to the model (unmapped by sc_model_free). */
sc_status sc_model_keep_map(sc_model *m, sc_file_map map, sc_err *err);
/* An owned, zeroed, 64-byte aligned float buffer. */
float *sc_model_alloc_f32(sc_model *m, size_t n, sc_err *err);
/* Returns an f32 view of n elements of type t at src: src itself when it is
 * f32 and 4-byte aligned (no copy), otherwise a converted owned copy. */
const float *sc_model_tensor_f32(sc_model *m, const uint8_t *src, sc_dtype t, size_t n, sc_err *err);
/* Checks the config for sane, bounded values (dims positive and below hard
 * caps, heads dividing evenly); the message names `what` (e.g. the file). */
sc_status sc_config_validate(const sc_config *c, const char *what, sc_err *err);
/* Checks that every required weight is present; names the missing one. */
sc_status sc_model_check_complete(const sc_model *m, sc_err *err);

/* Hard caps applied to any size read from a file, so a hostile header cannot
 * drive a giant allocation. */
#include "srt_model.h" /* the runtime's bounds and config rules are the same (srt_config.c) */
#define SC_MAX_DIM SRT_MAX_DIM
#define SC_MAX_FFN SRT_MAX_FFN
#define SC_MAX_LAYERS SRT_MAX_LAYERS
#define SC_MAX_HEADS SRT_MAX_HEADS
#define SC_MAX_VOCAB SRT_MAX_VOCAB
#define SC_MAX_SEQ SRT_MAX_SEQ

/* Individual readers (model.c dispatches to them). */
sc_status sc_load_llama2c(const char *path, sc_model **out, sc_err *err);
sc_status sc_load_gguf(const char *path, sc_model **out, sc_err *err);
sc_status sc_load_hf(const char *path, sc_model **out, sc_err *err);
/* A packed artifact (.spk), weights dequantised to f32 (formats/artifact.c). */
sc_status sc_load_artifact(const char *path, sc_model **out, sc_err *err);
/* Only the vocabulary embedded in an artifact (SC_EFORMAT when there is none). */
sc_status sc_artifact_load_tokenizer(const char *path, struct sc_tokenizer **out, sc_err *err);

#endif
