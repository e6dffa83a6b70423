/* forward.h - the reference f32 forward pass with named taps.
 *
 * A whole window of tokens at a time, every linear layer through
 * cblas_sgemm, keys and values cached so a window can continue a previous
 * one (pos0 > 0), which is also how `generate` decodes one token at a time.
 *
 * Taps: at each named point the hook (if its bit is set in the mask) sees the
 * activation as a row-major [n_tokens, width] array and may overwrite it in
 * place; the pass continues from the (possibly replaced) values. This is how
 * later stages observe statistics, zero neurons or rotate inputs without
 * copying the loop. */
#ifndef SC_FORWARD_H
#define SC_FORWARD_H

#include <stdint.h>

#include "common.h"
#include "model.h"

typedef enum sc_tap {
    SC_TAP_ATTN_IN = 0, /* RMSNorm'd block input feeding q/k/v       [T, dim] */
    SC_TAP_ATTN_CTX,    /* attention output before the o-projection  [T, n_heads*head_dim] */
    SC_TAP_MLP_IN,      /* RMSNorm'd input feeding gate/up           [T, dim] */
    SC_TAP_GATE,        /* gate pre-activation u = W_g x             [T, ffn] */
    SC_TAP_GATE_ACT,    /* phi(u)                                    [T, ffn] */
    SC_TAP_UP,          /* v = W_u x                                 [T, ffn] */
    SC_TAP_H,           /* h = phi(u) * v, input of the down proj    [T, ffn] */
    SC_TAP_MLP_OUT,     /* y = W_d h                                 [T, dim] */
    SC_TAP_RESID,       /* residual stream after the layer           [T, dim] */
    SC_TAP_LOGITS,      /* final logits (layer = n_layers)           [T, vocab] */
    SC_TAP_COUNT
} sc_tap;

#define SC_TAP_BIT(t) (1u << (t))

const char *sc_tap_name(sc_tap t);

typedef struct sc_tap_event {
    sc_tap tap;
    int64_t layer;
    int64_t pos0;     /* position of the first row */
    int64_t n_tokens; /* rows */
    int64_t width;    /* columns */
    const int32_t *ids; /* the window's token ids */
    float *data;      /* forward: the activation, writable (a hook may replace it);
                         backward: the gradient dL/d(activation), read-only by convention except
                         at SC_TAP_H, where a hook may add what the pass cannot see (an adapter
                         a linear hook applies to W_d); the pass continues from what it leaves */
    const float *act; /* backward only: the forward activation at this tap (as hooks left it) */
    bool is_grad;     /* true for backward events */
    bool replay;      /* forward events only: the backward pass is recomputing this layer (activation
                         checkpointing) from the same input. Hooks that replace values must do it again,
                         identically; hooks that only observe must ignore the event. */
} sc_tap_event;

typedef sc_status (*sc_tap_fn)(void *user, const sc_tap_event *ev, sc_err *err);

typedef struct sc_hooks {
    sc_tap_fn fn;
    void *user;
    uint32_t mask; /* SC_TAP_BIT(...) of the taps to call */
} sc_hooks;

typedef struct sc_forward sc_forward;

/* Linear layers, for the linear hook. */
typedef enum sc_linear {
    SC_LIN_Q = 0, /* W_q, input attn_in  */
    SC_LIN_K,     /* W_k, input attn_in  */
    SC_LIN_V,     /* W_v, input attn_in  */
    SC_LIN_O,     /* W_o, input attn_ctx */
    SC_LIN_GATE,  /* W_g, input mlp_in   */
    SC_LIN_UP,    /* W_u, input mlp_in   */
    SC_LIN_DOWN,  /* W_d, input h        */
    SC_LIN_COUNT
} sc_linear;

const char *sc_linear_name(sc_linear w);

/* One linear layer as the pass just computed it: y[T, out] = x[T, in] W^T (+ b),
 * W [out, in]. The hook may overwrite y (e.g. recompute it from a masked
 * copy of x); the pass continues from y. x is the input exactly as the taps
 * left it. K and V outputs are the cache rows (before RoPE on K). */
typedef struct sc_linear_event {
    sc_linear which;
    int64_t layer, pos0, n_tokens, in, out;
    const float *x, *W, *b; /* b may be NULL */
    float *y;
} sc_linear_event;

typedef sc_status (*sc_linear_fn)(void *user, const sc_linear_event *ev, sc_err *err);

/* Workspace for windows of up to max_batch tokens and a cache of max_ctx
 * positions (max_ctx <= model context is not required; RoPE extrapolates). */
sc_status sc_forward_create(const sc_model *m, int64_t max_ctx, int64_t max_batch, sc_forward **out, sc_err *err);
/* A training workspace: windows of up to max_ctx tokens from position 0,
 * keeping what sc_backward_run needs. With activation checkpointing (the
 * default) only each layer's input (and the key/value cache) is kept; the
 * backward pass recomputes a layer's internals when it reaches that layer,
 * replaying the forward hooks with ev->replay set. Memory is then
 * O(layers x T x dim) + one layer's O(T x ffn) instead of O(layers x T x ffn),
 * for about one more forward pass of compute. keep_all keeps every layer's
 * activations instead (the reference the checkpointed pass is tested against). */
sc_status sc_forward_create_train(const sc_model *m, int64_t max_ctx, sc_forward **out, sc_err *err);
/* Options of sc_forward_create_train_ex. CHUNKED_LOSS: no [T x vocab] logits
 * buffer at all; sc_forward_run stops at the final norm (no logits, no
 * SC_TAP_LOGITS event) and sc_backward_ce computes the cross-entropy and its
 * gradient in vocabulary chunks. */
enum { SC_TRAIN_KEEP_ALL = 1, SC_TRAIN_CHUNKED_LOSS = 2, SC_FWD_WHOLE_WINDOWS = 4 };
sc_status sc_forward_create_train_ex(const sc_model *m, int64_t max_ctx, unsigned flags, sc_forward **out, sc_err *err);
/* An inference workspace; flags SC_TRAIN_CHUNKED_LOSS: no [T x vocab] logits
 * buffer, sc_forward_run stops at the final norm (no logits, no
 * SC_TAP_LOGITS event) and sc_forward_nll scores the window over
 * vocabulary chunks (what ppl and eval need, at 1/V of the memory);
 * SC_FWD_WHOLE_WINDOWS: every window runs from position 0 (pos0 > 0 is
 * refused), so one layer's key/value cache serves every layer (1/layers of
 * the cache; checkpointed training workspaces always do this). */
sc_status sc_forward_create_ex(const sc_model *m, int64_t max_ctx, int64_t max_batch, unsigned flags,
                               sc_forward **out, sc_err *err);
/* Next-token negative log-likelihoods of the last window run on a chunked
 * workspace (any mode): nll[t] = logsumexp(z_t) - z_t[ids[t + 1]] for
 * t < n - 1, in double, with the classifier applied one vocabulary chunk at
 * a time and an online log-sum-exp (the same pass sc_backward_ce runs). A
 * non-finite logit makes its position's value non-finite. */
sc_status sc_forward_nll(sc_forward *f, double *nll, sc_err *err);
/* The logits buffer of the last window [n, vocab], writable: a loss may
 * overwrite it with dL/dlogits and hand it to sc_backward_run, so training
 * needs no second [T x vocab] buffer. */
float *sc_forward_logits(sc_forward *f);
void sc_forward_free(sc_forward *f);
int64_t sc_forward_max_ctx(const sc_forward *f);

/* Installs (fn != NULL) or removes the linear hook of a workspace: called
 * after every linear layer of every later sc_forward_run / sc_forward_layer
 * (not the classifier). Costs nothing when unset. The backward pass does
 * not see what a linear hook did (it differentiates the dense layers). */
void sc_forward_set_linear_hook(sc_forward *f, sc_linear_fn fn, void *user);

/* The backward counterpart of the linear hook (training workspaces): for
 * every linear layer the backward pass reaches, dy = dL/dy [n, out] of its
 * output (for q and k before RoPE, as the linear hook saw y) and dx = dL/dx
 * [n, in] of its input, called right after the pass added dy W to dx (for
 * q/k/v and gate/up, which share an input, dx holds the shares added so
 * far). dx is the dense layer's gradient whatever the linear hook did (a
 * straight-through estimate for a hook that masked x); the hook may add to
 * dx what the pass cannot see (e.g. (W' - W)^T dy for an adapted weight W'),
 * and the pass continues from what it leaves. The layer's input x is not
 * passed: a linear hook that needs it keeps it (the recomputation of a
 * checkpointed layer calls the linear hook again before its backward). */
typedef struct sc_linear_grad_event {
    sc_linear which;
    int64_t layer, n_tokens, in, out;
    const float *W, *dy;
    float *dx;
} sc_linear_grad_event;
typedef sc_status (*sc_linear_grad_fn)(void *user, const sc_linear_grad_event *ev, sc_err *err);
void sc_forward_set_linear_grad_hook(sc_forward *f, sc_linear_grad_fn fn, void *user);

/* Installs (w != NULL) or removes per-matrix weight overrides: every later
 * forward and backward pass of f (and the linear hooks, as ev->W) uses
 * w[l * SC_LIN_COUNT + which], an f32 [out, in] matrix laid out as the
 * model's, in place of the model's matrix; a NULL entry keeps the model's.
 * The array and the matrices are borrowed and may change between passes (a
 * trainer's own copies of the weights it trains, while the model, mmapped
 * read-only, stays its teacher). */
void sc_forward_set_weights(sc_forward *f, const float *const *w);

/* Runs one layer on its own: x[n, dim] is the residual stream entering
 * layer `layer` at positions 0 .. n-1; on return it holds the residual
 * after the layer. Uses the layer's key/value cache rows [0, n) and the
 * linear hook; no taps. Inference workspaces only. */
sc_status sc_forward_layer(sc_forward *f, int64_t layer, float *x, int64_t n, sc_err *err);

/* Runs ids[0..n) at positions pos0 .. pos0+n-1, attending to the cached keys
 * and values of positions < pos0 written by earlier calls. *logits receives
 * [n, vocab] (owned by f, valid until the next call). Ids are checked
 * against the vocabulary. */
sc_status sc_forward_run(sc_forward *f, const int32_t *ids, int64_t n, int64_t pos0, const sc_hooks *hooks,
                         const float **logits, sc_err *err);

/* Activation gradients of the last window run on a training workspace,
 * given dL/dlogits [n, vocab] (may be the workspace's own logits buffer, see
 * sc_forward_logits). The window's ids and forward hooks given to
 * sc_forward_run must still be valid (they are replayed). Gradient events go to hooks (is_grad set):
 * SC_TAP_LOGITS (dL/dlogits), SC_TAP_RESID (dL/d residual after layer l),
 * SC_TAP_H (dL/dh), SC_TAP_GATE_ACT, SC_TAP_UP, SC_TAP_GATE (dL/du),
 * SC_TAP_MLP_IN (dL/d normalised MLP input), SC_TAP_ATTN_CTX, SC_TAP_ATTN_IN
 * (dL/d normalised attention input). A forward hook that replaced h (e.g.
 * zeroing dead neurons) is differentiated as the elementwise scaling it
 * applied; replacements at other taps are treated as constants of the
 * backward (identity). No weight gradients are computed. */
sc_status sc_backward_run(sc_forward *f, const float *dlogits, const sc_hooks *hooks, sc_err *err);

/* The next-token cross-entropy of the last window on a CHUNKED_LOSS training
 * workspace, and the backward pass from it: the classifier runs over
 * vocabulary chunks twice (an online log-sum-exp per position, then the
 * gradient chunk by chunk, accumulated into dL/d(final norm output)), so the
 * only vocabulary-sized buffer is one [T x chunk] block. *loss is the summed
 * CE as sc_loss_ce returns it. */
sc_status sc_backward_ce(sc_forward *f, const sc_hooks *hooks, double *loss, sc_err *err);

/* For losses computed outside (the chunked distillation of train_loss.c): the
 * final norm's output [n, dim] of the last window run on a chunked workspace
 * (valid until the next run), and the backward pass from a given
 * dL/d(final norm output) dxn [n, dim] of that window (as sc_backward_ce
 * continues from its own). */
const float *sc_forward_final_norm(const sc_forward *f);
sc_status sc_backward_from_norm(sc_forward *f, const float *dxn, const sc_hooks *hooks, sc_err *err);

/* Next-token cross-entropy of a window: loss = sum over t < n-1 of
 * -log softmax(logits[t])[ids[t+1]]; writes dL/dlogits [n, V] (row n-1 zero)
 * and returns the loss. dlogits may be logits itself (computed row by row,
 * each row read before it is written); the same holds for sc_loss_distill's
 * student logits. */
double sc_loss_ce(const float *logits, const int32_t *ids, int64_t n, int64_t V, float *dlogits);
/* The CLAWS paper's distillation loss: sum over t < n-1 of
 * KL(student || teacher) + ce_weight * CE, with dL/d(student logits). */
double sc_loss_distill(const float *student, const float *teacher, const int32_t *ids, int64_t n, int64_t V,
                       double ce_weight, float *dlogits);

/* logits[n, vocab] = xn[n, dim] classifier^T, the classifier read in chunks
 * when it is converted on use (model.h). */
sc_status sc_classifier_forward(const sc_model *m, float *logits, const float *xn, int64_t n, sc_err *err);

/* log-sum-exp of a row, in double. */
double sc_logsumexp(const float *x, int64_t n);

/* FLOPs of one window of n tokens at pos0 as the pass executes it (matrix
 * products only: linear layers plus full score and value products). */
double sc_forward_flops(const sc_config *c, int64_t n, int64_t pos0);
/* Runs only the cblas_sgemm calls of a window of n tokens at position 0, on
 * the same shapes and weights (the rate the forward pass is measured against). */
sc_status sc_forward_sgemm_only(sc_forward *f, int64_t n, sc_err *err);

#endif
