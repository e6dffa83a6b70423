/* srt_model_internal.h - the artifact decoder's state, shared by
 * srt_model.c (open) and srt_decode.c (the decode step). */
#ifndef SRT_MODEL_INTERNAL_H
#define SRT_MODEL_INTERNAL_H

#include "srt_model.h"

typedef struct srt_weight {
    srt_matrix m;           /* stored (padded) view */
    int64_t rows, cols;     /* logical shape */
    const srt_layout_traits *tr;
} srt_weight;

typedef struct srt_layer_w {
    const float *attn_norm, *ffn_norm, *bq, *bk, *bv, *claws_c;
    srt_weight wq, wk, wv, wo, wg, wu, wd;
    srt_weight attn_rot, mlp_rot; /* folded LaRoSA rotations R [dim, dim] (tr NULL: none) */
} srt_layer_w;

struct srt_model {
    char *path;
    srt_container *ct;
    srt_ctx *ctx;
    const srt_json *tensors;
    srt_model_config cfg;
    const char *def_method;
    double def_density;
    bool has_claws;
    int64_t n_rot;          /* block inputs with a folded rotation */
    double lr_in, lr_h;     /* LaRoSA split recorded at pack time */
    int64_t max_ctx, vmax, vcap;
    const float *tok_emb, *final_norm;
    srt_weight classifier;
    srt_layer_w *layers;
    uint64_t weight_bytes;
    /* routing */
    srt_router router;
    int64_t K;
    bool larosa;            /* rotated-input top-K instead of a neuron router */
    int64_t K_in, K_h;
    /* buffers (one arena) */
    void *arena;
    float *x, *xn, *q, *kt, *vt, *att, *tmp, *u, *a, *v, *h, *score, *s, *cos_t, *sin_t, *kc, *vc, *logits;
    uint32_t *idx;
    uint32_t *live_all; /* [n_layers, ffn_dim]: the last step's live list per layer */
    int64_t *live_n;    /* [n_layers] */
    void *actmem[2];  /* natural, tiled */
    size_t actbytes;
    srt_act act[2];
    const float *act_src[2]; /* what act[i] holds (NULL: stale) */
    int64_t act_n[2];
    srt_model_timing tm;
};

#endif
