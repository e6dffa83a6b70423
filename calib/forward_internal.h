/* forward_internal.h - the workspace shared by forward.c and backward.c.
 *
 * In training mode (sc_forward_create_train) every per-layer activation the
 * backward pass needs is kept: buffer X of layer l is X + l * stride, where
 * the stride is 0 in inference mode (all layers share one buffer). */
#ifndef SC_FORWARD_INTERNAL_H
#define SC_FORWARD_INTERNAL_H

#include "forward.h"

struct sc_forward {
    const sc_model *m;
    int64_t max_ctx, max_batch;
    bool train;
    int64_t n_last; /* tokens of the last window (train mode: what backward differentiates) */
    float *x;      /* [B, D] running residual stream */
    float *xn;     /* [B, D] normalised input (scratch) */
    float *ctx;    /* [B, qd] attention output (scratch) */
    float *tmp;    /* [B, max(D, qd)] (scratch) */
    float *s;      /* [B, max_ctx] attention scores (scratch) */
    float *logits; /* [B, V] */
    float *kc, *vc;       /* [L, max_ctx, kvd] caches */
    float *cos_t, *sin_t; /* [max_ctx, head_dim/2] */
    /* per layer (stride 0 in inference mode) */
    float *q;          /* [B, qd] after RoPE */
    float *u, *a, *v, *h; /* [B, F] gate pre-activation, phi(u), up, h (all as left by hooks) */
    size_t s_q, s_f;
    /* train mode only: [L, B, D] residual into each layer and after its attention,
     * [L, B] rms scales; the final residual and its rms scale */
    float *x_in, *x_mid, *r1, *r2, *x_fin, *r_fin;
    /* train mode only: backward scratch */
    sc_linear_fn lin_fn; /* the linear hook (NULL: none) */
    void *lin_user;
    float *g_x, *g_xn, *g_q, *g_k, *g_v, *g_ctx, *g_p, *g_dp, *g_f1, *g_f2;
};

#endif
