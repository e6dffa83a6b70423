/* lora.h - fusing PEFT LoRA adapters into the model's weights before
 * quantisation (the CLAWS paper deploys its adapters fused):
 * W <- W + (alpha / r) * B A for every adapted linear layer, with A =
 * lora_A [r, in] and B = lora_B [out, r] from adapter_model.safetensors and
 * r, lora_alpha (and use_rslora: alpha / sqrt(r)) from adapter_config.json
 * beside it. Tensor names follow PEFT:
 *   ...layers.L.(self_attn.{q,k,v,o}_proj | mlp.{gate,up,down}_proj).lora_{A,B}.weight
 * with any prefix (base_model.model.model. ...). */
#ifndef SC_LORA_H
#define SC_LORA_H

#include "model.h"

typedef struct sc_lora_result {
    int fused;   /* linear layers changed */
    int rank;    /* r */
    double scale;
} sc_lora_result;

/* path: the adapter directory or its .safetensors file. The fused weights
 * become buffers owned by m. An adapter naming a layer or projection the
 * model lacks, or with shapes that do not match, is an error. */
sc_status sc_lora_fuse(sc_model *m, const char *path, sc_lora_result *res, sc_err *err);

#endif
