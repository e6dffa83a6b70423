/* synth.h - writes a synthetic Hugging Face checkpoint (config.json +
 * model.safetensors) with deterministic random weights, for tests and
 * benchmarks at sizes no bundled asset has. Tensors are generated and
 * streamed one chunk at a time, so the model never sits in memory. */
#ifndef SC_SYNTH_H
#define SC_SYNTH_H

#include <stdint.h>

#include "common.h"
#include "dtype.h"

typedef struct sc_synth_opts {
    int64_t dim, ffn_dim, n_layers, n_heads, n_kv_heads, vocab_size, max_seq_len;
    uint64_t seed;
    sc_dtype dtype;     /* F32 or BF16 (F16 also accepted) */
    const char *family; /* "llama" (default), "mistral", "qwen2" (q/k/v biases), "gemma" (tied, (1+w) norms, GELU) */
} sc_synth_opts;

/* Small defaults: dim 256, ffn 768, 4 layers, 8 heads, 4 kv heads, vocab
 * 32000, context 2048, seed 1, F32, llama. */
void sc_synth_opts_default(sc_synth_opts *o);

/* Creates dir (one level) if needed and writes config.json and
 * model.safetensors into it, each atomically. Weights: embeddings N(0, 1)
 * (Gemma: N(0, 1/dim), as they are scaled by sqrt(dim) and tied), linear
 * layers N(0, 1/in_features), biases N(0, 0.02^2), RMSNorm scales
 * 1 + 0.1 N(0, 1) (Gemma stores w with effective scale 1 + w). */
sc_status sc_synth_write(const sc_synth_opts *o, const char *dir, sc_err *err);

/* The same model (same options and seed: the same values) as one GGUF v3
 * file in llama.cpp's naming (token_embd, blk.N.attn_q, ...; q and k rows
 * permuted per head for interleaved RoPE, as llama.cpp's converter does),
 * matrices in dtype F32, F16 or BF16 and vectors F32; llama family only. vocab_gguf: a GGUF whose
 * tokenizer.* metadata is copied (its token count must equal vocab_size);
 * NULL writes tokenizer.ggml.model = "no_vocab". Written atomically. */
sc_status sc_synth_write_gguf(const sc_synth_opts *o, const char *path, const char *vocab_gguf, sc_err *err);

#endif
