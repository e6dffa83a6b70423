/* finite.c - where a model's numbers stop being finite (see finite.h). */
#include "finite.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int64_t sc_first_nonfinite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

typedef struct probe {
    const sc_model *m;
    const char *what;
} probe;

/* The first non-finite entry of a [rows, width] block: one line in err and
 * SC_EFORMAT, or SC_OK when every entry is finite. */
static sc_status report(const probe *p, const float *y, int64_t rows, int64_t width, int64_t layer, int64_t pos0,
                        const char *where, sc_err *err) {
    int64_t i = sc_first_nonfinite(y, rows * width);
    if (i < 0) return SC_OK;
    float v = y[i];
    char at[64] = "";
    if (layer >= 0 && layer < p->m->cfg.n_layers) snprintf(at, sizeof at, "layer %lld, ", (long long)layer);
    return sc_errf(err, SC_EFORMAT,
                   "%s: non-finite values (%s at position %lld) first in %s%s; "
                   "the weights are corrupt or overflow float",
                   p->what, isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf", (long long)(pos0 + i / width), at, where);
}

static sc_status on_linear(void *user, const sc_linear_event *ev, sc_err *err) {
    static const char *const names[SC_LIN_COUNT] = {
        "the query projection (wq)",  "the key projection (wk)", "the value projection (wv)",
        "the attention output projection (wo)", "the gate projection (wg)", "the up projection (wu)",
        "the down projection (wd)"};
    /* its input passed a tap just before, so a non-finite output is this layer's doing */
    return report(user, ev->y, ev->n_tokens, ev->out, ev->layer, ev->pos0, names[ev->which], err);
}

static sc_status on_tap(void *user, const sc_tap_event *ev, sc_err *err) {
    const char *where = "?";
    switch (ev->tap) {
    case SC_TAP_ATTN_IN:
        where = ev->layer == 0 ? "the token embedding (tok_emb) or the attention RMSNorm (attn_norm)"
                               : "the attention RMSNorm (attn_norm)";
        break;
    case SC_TAP_ATTN_CTX: where = "the attention core (softmax over the cached keys)"; break;
    case SC_TAP_MLP_IN: where = "the residual after attention or the MLP RMSNorm (ffn_norm)"; break;
    case SC_TAP_GATE: where = "the gate projection (wg)"; break;
    case SC_TAP_GATE_ACT: where = "the gate activation"; break;
    case SC_TAP_UP: where = "the up projection (wu)"; break;
    case SC_TAP_H: where = "h = phi(u) * v"; break;
    case SC_TAP_MLP_OUT: where = "the down projection (wd)"; break;
    case SC_TAP_RESID: where = "the residual stream after the MLP"; break;
    case SC_TAP_LOGITS: where = "the final RMSNorm (final_norm) or the classifier"; break;
    case SC_TAP_COUNT: break;
    }
    return report(user, ev->data, ev->n_tokens, ev->width, ev->layer, ev->pos0, where, err);
}

sc_status sc_explain_nonfinite(const sc_model *m, const int32_t *ids, int64_t n, const char *what, sc_err *err) {
    sc_forward *f;
    sc_status st = sc_forward_create(m, n, n, &f, err);
    if (st) return st;
    probe p = {m, what};
    sc_forward_set_linear_hook(f, on_linear, &p);
    sc_hooks hk = {on_tap, &p, (1u << SC_TAP_COUNT) - 1};
    const float *logits;
    st = sc_forward_run(f, ids, n, 0, &hk, &logits, err);
    sc_forward_free(f);
    if (st == SC_OK) /* finite on a second look: not a property of the weights (should not happen) */
        st = sc_errf(err, SC_EFORMAT, "%s: the model produced non-finite logits", what);
    return st;
}
