/* srt_model_fault.c - naming where a decode step went non-finite (see
 * srt_model_fault in srt_model.h). The step checks the residual stream after
 * each block and the logits (a scan of dim or vocab floats, nothing next to
 * the matrix-vector products); only on a fault does this look at the block's
 * intermediates, which are still in the model's buffers, in the order the
 * block computed them. */
#include <math.h>
#include <stdio.h>

#include "srt_model_internal.h"

bool srt_vec_finite(const float *x, int64_t n) {
    /* x - x is 0 for finite x and NaN for inf or NaN: one branch-free pass, in eight sums so the adds
     * do not wait on each other (one chain cost 2 µs per 2,048 values, 44 times a token) */
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += x[i + k] - x[i + k];
    for (; i < n; i++) acc[0] += x[i] - x[i];
    float s = 0.0f;
    for (int k = 0; k < 8; k++) s += acc[k];
    return s == 0.0f;
}

typedef struct stage {
    const float *v;
    int64_t n;
    const char *what; /* what produced v */
    const char *tensor; /* its weight ("" when none) */
} stage;

srt_status srt_model_nonfinite(srt_model *m, int64_t l, int block) {
    const srt_model_config *c = &m->cfg;
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    const srt_layer_w *L = block < 2 ? &m->layers[l] : NULL;
    stage st[8];
    int n = 0;
    if (block == 0) {
        st[n++] = (stage){m->xn, D, l == 0 ? "the attention RMSNorm (or the token's embedding row)" : "the attention RMSNorm",
                          L->attn_rot.tr ? "attn_norm, attn_rot" : "attn_norm"};
        st[n++] = (stage){m->q, qd, "the query projection", "wq"};
        st[n++] = (stage){m->kt, kvd, "the key projection", "wk"};
        st[n++] = (stage){m->vt, kvd, "the value projection", "wv"};
        st[n++] = (stage){m->att, qd, "the attention core (over the cached keys and values)", ""};
        st[n++] = (stage){m->tmp, D, "the attention output projection", "wo"};
    } else if (block == 1) {
        st[n++] = (stage){m->xn, D, "the MLP RMSNorm", L->mlp_rot.tr ? "ffn_norm, mlp_rot" : "ffn_norm"};
        st[n++] = (stage){m->u, F, "the gate projection", "wg"};
        st[n++] = (stage){m->a, F, "the gate activation", ""};
        st[n++] = (stage){m->h, F, "the up projection (h = phi(u) v)", "wu"};
        st[n++] = (stage){m->tmp, D, "the down projection", "wd"};
    } else {
        st[n++] = (stage){m->xn, D, "the final RMSNorm", "final_norm"};
        st[n++] = (stage){m->logits, c->vocab_size, "the classifier", "classifier"};
    }
    const stage *hit = NULL;
    for (int i = 0; i < n && !hit; i++)
        if (!srt_vec_finite(st[i].v, st[i].n)) hit = &st[i];
    char tensor[64] = "";
    if (hit && hit->tensor[0] && block < 2)
        snprintf(tensor, sizeof tensor, " (tensor l%lld.%s)", (long long)l, hit->tensor);
    else if (hit && hit->tensor[0])
        snprintf(tensor, sizeof tensor, " (tensor %s)", hit->tensor);
    char at[48] = "";
    if (block < 2) snprintf(at, sizeof at, "layer %lld %s: ", (long long)l, block == 0 ? "attention" : "MLP");
    snprintf(m->fault, sizeof m->fault, "non-finite values first in %s%s%s; the weights are corrupt or overflow float",
             at, hit ? hit->what : "the residual addition", tensor);
    return SRT_ENONFINITE;
}

const char *srt_model_fault(const srt_model *m) { return m ? m->fault : ""; }
