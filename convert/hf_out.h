/* hf_out.h - writing a model as a Hugging Face checkpoint (config.json +
 * model.safetensors), the layout formats/hf.c reads: synthetic models
 * (synth.h) and trained ones (`train --method cwic --train all`). */
#ifndef SC_HF_OUT_H
#define SC_HF_OUT_H

#include <stddef.h>

#include "dtype.h"
#include "model.h"
#include "safetensors.h"

/* config.json for c, tensors stored as dt (torch_dtype), written atomically.
 * Floats are written in the shortest decimal that reads back as the same
 * f32 (norm_eps, rope_theta, rope scaling factors). */
sc_status sc_hf_write_config(const sc_config *c, sc_dtype dt, const char *path, sc_err *err);

/* Writes m into dir (created if missing, one level) as config.json and
 * model.safetensors (every tensor f32, with meta as metadata), each
 * atomically, so that formats/hf.c loads a model computing what m computes:
 * q/k rows (and biases) of a model with interleaved RoPE (llama2.c, GGUF)
 * permuted per head to rotate-half order, as Hugging Face's Llama conversion
 * does; Gemma's norms stored as w - 1 (the loader adds 1 back). w: the
 * linear matrices to write in place of the model's, [n_layers * 7] in the
 * order q k v o gate up down (sc_linear; as sc_forward_set_weights takes
 * them), NULL entries or w NULL: the model's. Weights converted on use are
 * read one matrix (or chunk) at a time. Refused: a model with folded LaRoSA
 * rotations (no Hugging Face layout holds them). */
sc_status sc_model_save_hf(const sc_model *m, const float *const *w, const char *dir, const sc_st_meta *meta,
                           size_t n_meta, sc_err *err);

#endif
