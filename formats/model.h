/* model.h - the model every part of sparsecal works on.
 *
 * Whatever the source format (llama2.c checkpoint, GGUF, Hugging Face
 * safetensors, packed artifact), a loaded model is a config plus f32 weight
 * views in PyTorch orientation: a linear layer W is row-major
 * [out_features, in_features] and computes y = W x.
 *
 * Weights stay where they are. f32 tensors whose layout allows it point
 * straight into the mmapped file. Every other large tensor (f16, bf16, Q8_0,
 * an artifact's quantised layouts) is converted to f32 on use: a layer's
 * matrices when sc_model_layer asks for that layer, into one buffer the next
 * layer reuses (or one matrix, sc_model_weight); embedding rows when sc_model_embed looks them up; the
 * classifier in row chunks (sc_model_classifier_rows). So a model never exists
 * whole as f32: memory is the mapping's page cache (file-backed, reclaimable)
 * plus one layer. Vectors (norms, biases) are converted once at load.
 *
 * Code that reads weights goes through the accessors below. The fields of
 * sc_layer and tok_emb / classifier are set only for tensors that are
 * resident (mapped f32 or converted at load) and NULL otherwise. */
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
    char source_id[17]; /* a packed artifact: its manifest's source_model_id (the identity, sc_model_identity, of
                         * the model it was packed from, which its calibrations carry); "" otherwise */
    uint64_t mapped_bytes; /* weight bytes used straight from mmapped files */
    uint64_t owned_bytes;  /* weight bytes converted into owned buffers */
    uint64_t lazy_bytes;   /* f32 bytes of the weights converted on use (not resident) */
    sc_model_res *res;
} sc_model;

/* Loads a model from a path, detecting the format: a directory (or a
 * config.json / *.safetensors / *.index.json inside one) is Hugging Face, a
 * file starting with "GGUF" is GGUF, one starting with "SPARSPAK" a packed
 * artifact, anything else a llama2.c checkpoint. */
sc_status sc_model_load(const char *path, sc_model **out, sc_err *err);
void sc_model_free(sc_model *m);

int64_t sc_model_param_count(const sc_model *m);

/* ---- reading weights (see the top of this file) ----
 * Not thread-safe: one thread reads a model's weights at a time (BLAS, the
 * runtime's pool and sc_parallel, which converts a matrix's rows on all
 * threads, parallelise inside a call). */

/* The weights of layer l as f32 views. Views of converted tensors live in a
 * buffer the model reuses: they stay valid until the next sc_model_layer call
 * for another layer, or a sc_model_release. */
sc_status sc_model_layer(const sc_model *m, int64_t l, const sc_layer **out, sc_err *err);
/* One matrix of a layer as f32: field is its field in m->layers[l] (e.g.
 * &m->layers[l].wq). Converted on use into a buffer sized by the largest
 * matrix (a quarter of a Llama layer's f32 bytes), which the next call
 * reuses: *out stays valid until the next sc_model_weight call, a
 * sc_model_layer call that converts a layer (it frees this buffer, so the
 * two are never held together) or a sc_model_release. sc_model_layer's
 * views stay valid, and when it holds layer l already its view is
 * returned without a conversion. *out is NULL
 * for an absent optional weight (a folded rotation). The forward and backward
 * passes read their weights this way, one matrix at a time. */
sc_status sc_model_weight(const sc_model *m, const float *const *field, const float **out, sc_err *err);
/* dst[n, dim] <- the embedding rows of ids (checked against the vocabulary). */
sc_status sc_model_embed(const sc_model *m, const int32_t *ids, int64_t n, float *dst, sc_err *err);
/* Rows [r0, r0 + n) of the classifier [vocab, dim] as f32, valid until the
 * next call. n must not exceed sc_model_classifier_chunk. */
sc_status sc_model_classifier_rows(const sc_model *m, int64_t r0, int64_t n, const float **out, sc_err *err);
/* How many classifier rows one sc_model_classifier_rows call may return
 * (the whole vocabulary when the classifier is resident). */
int64_t sc_model_classifier_chunk(const sc_model *m);
/* Process-wide loading policy: resident converts every weight at load
 * (faster when memory allows, and the reference the on-use path is tested
 * against); classifier_chunk_bytes sets the classifier's chunk (0: 64 MiB).
 * Applies to models loaded afterwards. */
void sc_model_policy(bool resident, size_t classifier_chunk_bytes);
/* True when some weights are converted on use. */
bool sc_model_is_lazy(const sc_model *m);
/* Frees the reused conversion buffers (the next access reallocates them). */
void sc_model_release(const sc_model *m);
/* Makes one layer weight resident as an owned, writable f32 copy (for code
 * that rewrites weights, e.g. LoRA fusion) and returns it. field is the
 * address of the field in m->layers[l]. */
/* True when a field (of m itself or of m->layers[l]) holds a weight, resident
 * or converted on use; e.g. &m->layers[l].attn_rot for folded rotations. */
bool sc_model_present(const sc_model *m, const float *const *field);
sc_status sc_model_make_resident(sc_model *m, const float **field, size_t n, float **out, sc_err *err);

/* ---- for format readers ---- */

sc_model *sc_model_new(const char *path, const char *format);
/* Hands a mapping to the model (unmapped by sc_model_free). */
sc_status sc_model_keep_map(sc_model *m, sc_file_map map, sc_err *err);
/* An owned, zeroed, 64-byte aligned float buffer. */
float *sc_model_alloc_f32(sc_model *m, size_t n, sc_err *err);
/* Returns an f32 view of n elements of type t at src: src itself when it is
 * f32 and 4-byte aligned (no copy), otherwise a converted owned copy. */
const float *sc_model_tensor_f32(sc_model *m, const uint8_t *src, sc_dtype t, size_t n, sc_err *err);
/* Converts rows [r0, r0 + n_rows) of a [rows, cols] source into
 * dst[n_rows, cols]; false when the source is damaged. */
typedef bool (*sc_weight_fn)(const void *ctx, int64_t r0, int64_t n_rows, float *dst);
/* Sets a weight: field is &m->tok_emb, &m->classifier or a field of
 * m->layers[l] (the layer array must exist). Mapped f32 and small tensors are
 * resident (*field is set); anything else is registered for conversion on use
 * from src (t, n elements, must stay mapped while the model lives). */
sc_status sc_model_set_weight(sc_model *m, const float **field, const uint8_t *src, sc_dtype t, size_t n, sc_err *err);
/* The same for a source only fn can convert (e.g. an artifact's quantised
 * layouts); ctx is owned by the model from here on (freed with free()). */
sc_status sc_model_set_weight_fn(sc_model *m, const float **field, sc_weight_fn fn, void *ctx, int64_t rows,
                                 int64_t cols, sc_err *err);
/* Keeps an object alive as long as the model (closed with fn(p) at free). */
sc_status sc_model_keep(sc_model *m, void *p, void (*fn)(void *), sc_err *err);
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
