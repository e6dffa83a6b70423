/* forward_internal.h - the workspace shared by forward.c and backward.c.
 *
 * Per-layer activations: buffer X of layer l is X + l * stride. The stride is
 * 0 in inference mode and in checkpointed training (all layers share one
 * buffer; the backward pass recomputes layer l into it with
 * sc_forward_replay_layer), and one layer's size when training keeps every
 * layer (keep_all). The residual into each layer (x_in) is always kept in
 * training. */
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
    size_t s_q, s_f, s_d, s_r; /* strides of q, the [B, F] buffers, x_mid, r1/r2 */
    /* train mode only: [L, B, D] residual into each layer; residual after the
     * attention and the rms scales (per layer with stride s_d / s_r); the final
     * residual and its rms scale */
    float *x_in, *x_mid, *r1, *r2, *x_fin, *r_fin;
    bool checkpoint;          /* train mode: recompute layers in backward */
    bool kv_one;              /* one layer's key/value cache shared by every layer: only whole windows from
                               * position 0 run (checkpointed training, SC_FWD_WHOLE_WINDOWS), so a layer's
                               * keys and values are used only while that layer runs (or is replayed) */
    bool chunked;             /* no logits buffer; the loss runs over vocabulary chunks */
    float *lchunk;            /* chunked: [B, chunk] logits of one vocabulary chunk */
    int64_t lchunk_rows;      /* vocabulary rows per chunk */
    bool replaying;           /* inside sc_forward_replay_layer */
    const int32_t *ids_last;  /* the last window's ids and forward hooks (replayed) */
    sc_hooks hk_last;
    bool has_hk;
    /* train mode only: backward scratch */
    sc_linear_fn lin_fn; /* the linear hook (NULL: none) */
    void *lin_user;
    sc_linear_grad_fn lgrad_fn; /* the backward's linear hook (NULL: none) */
    void *lgrad_user;
    const float *const *w_over; /* [L, SC_LIN_COUNT] matrices run in place of the model's (NULL entries: the
                                 * model's; sc_forward_set_weights) */
    float *g_x, *g_xn, *g_q, *g_k, *g_v, *g_ctx, *g_p, *g_dp, *g_f1, *g_f2;
};

/* Where layer l's rows start in the key/value caches (kvd = n_kv_heads * head_dim). */
static inline int64_t sc_kv_base(const sc_forward *f, int64_t l, int64_t kvd) {
    return (f->kv_one ? 0 : l) * f->max_ctx * kvd;
}

/* Matrix `which` of layer l as the passes use it: the workspace's override
 * (sc_forward_set_weights) when one is set, else the model's, read through
 * sc_model_weight (field: its field in m->layers[l]). */
static inline sc_status sc_fwd_weight(const sc_forward *f, int64_t l, sc_linear which, const float *const *field,
                                      const float **W, sc_err *err) {
    const float *o = f->w_over ? f->w_over[l * SC_LIN_COUNT + which] : NULL;
    if (o) {
        *W = o;
        return SC_OK;
    }
    return sc_model_weight(f->m, field, W, err);
}

/* Recomputes layer l of the last window from its stored input (checkpointed
 * training), replaying the forward hooks with ev->replay set. */
sc_status sc_forward_replay_layer(sc_forward *f, int64_t l, sc_err *err);

/* The last window's next-token log-sum-exp and target logit on a chunked
 * workspace: for t < n - 1, lse[t] = log sum_i exp(z_t[i]) and
 * zy[t] = z_t[ids[t + 1]], z_t = classifier(xn_t), computed over vocabulary
 * chunks with an online log-sum-exp (forward_loss.c). */
sc_status sc_forward_lse(sc_forward *f, double *lse, double *zy, sc_err *err);

/* One position's chunk of logits z[nr] folded into its running maximum *mx
 * and sum of exponentials *se (*mx = -INFINITY and *se = 0 before the first
 * chunk; at the end the log-sum-exp is *mx + log(*se)). With p != NULL,
 * p[i] = exp(z[i] - *mx) as the sum took them (p may be z). Returns the
 * factor exp(old max - new max) that rescaled the earlier chunks' sum
 * (1 when the maximum did not move). sc_forward_lse and the one-pass
 * cross-entropy of sc_backward_ce share it, so their sums are the same bits. */
double sc_lse_fold(const float *z, int64_t nr, double *mx, double *se, float *p);

#endif
