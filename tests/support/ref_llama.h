/* ref_llama.h - a deliberately simple, independent reference for the
 * llama2.c model family, used only by the tests: its own reader of the
 * llama2.c checkpoint (fread, no mmap, no shared code with formats/) and a
 * per-token forward pass in double precision with plain loops, written
 * after llama2.c's run.c. */
#ifndef SC_REF_LLAMA_H
#define SC_REF_LLAMA_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ref_llama {
    int dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len, head_size;
    bool shared;
    double *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
    /* test instrumentation: add pert_delta to one coordinate of one
     * activation (kind 1 = h, 2 = normalised MLP input, 3 = normalised
     * attention input, 4 = residual after the layer) at (layer, pos, index);
     * and an optional 0/1 mask on h, indexed [pos][layer][neuron]. */
    int pert_kind, pert_layer, pert_pos, pert_index;
    double pert_delta;
    const unsigned char *h_mask;
    /* optional: called with h [hidden] of layer l at position pos (after
     * h_mask, before pert kind 1) and the normalised MLP input xn [dim] it
     * came from; may rewrite h (e.g. a soft mask computed from W_g xn) */
    void (*h_hook)(void *user, const struct ref_llama *r, int layer, int pos, const double *xn, double *h);
    void *h_user;
    /* state */
    double *x, *xb, *xb2, *hb, *hb2, *q, *att, *key_cache, *value_cache, *logits;
} ref_llama;

bool ref_llama_load(ref_llama *r, const char *path);
void ref_llama_free(ref_llama *r);
/* Logits for `token` at position pos (positions must be fed in order from 0). */
const double *ref_llama_step(ref_llama *r, int token, int pos);

#endif
