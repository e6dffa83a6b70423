/* coact.c - method "coact": which neurons are live together, for neuron
 * permutation at pack time (`pack --permute`, convert/permute.c).
 *
 * Per layer, for up to coact_sample scored tokens (default 2048; every
 * coact_stride-th, default 1) the live set of the CATS router at
 * coact_density (default 0.5: the K = round(d F) largest |phi(u_j)|, the
 * same selection as `eval --method cats`) is stored as a bitmask: the
 * CONCAT int64 array layerL.live_bits [rows, ceil(F / 64)]. Shards append
 * their rows when merged. Cost: F / 8 bytes per token and layer (2048
 * tokens of a 14336-neuron layer: 3.5 MiB). The parameter names carry the
 * method's prefix because --params is shared by the methods of one run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coact.h"
#include "params.h"
#include "method.h"
#include "sample_store.h"
#include "srt_route.h"

typedef struct coact {
    int64_t L0, L1, F, W, cap, stride, K;
    void **bits;   /* [layers] uint64 [rows, W] (void * so the engine can grow it) */
    int64_t *rows; /* [layers] */
    int64_t *seen; /* [layers] scored tokens seen (for the stride) */
    float *score;
    int32_t *idx;
} coact;

static void coact_free(void *p) {
    coact *s = p;
    if (!s) return;
    for (int64_t l = 0; s->bits && l < s->L1 - s->L0; l++) sc_sample_free(s->bits[l]);
    free(s->bits);
    free(s->rows);
    free(s->seen);
    free(s->score);
    free(s->idx);
    free(s);
}

static sc_status coact_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    int64_t cap = 2048, stride = 1;
    double density = 0.5;
    const sc_param spec[] = {
        {"coact_sample", SC_PARAM_INT, 1, 1e7, NULL, &cap, 0, NULL},
        {"coact_stride", SC_PARAM_INT, 1, 1e9, NULL, &stride, 0, NULL},
        {"coact_density", SC_PARAM_NUM, 0, 1, NULL, &density, 0, NULL},
    };
    SC_TRY(sc_params_read(o->params, spec, 3, "coact", err));
    coact *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "coact: out of memory");
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->F = m->cfg.ffn_dim;
    s->W = (s->F + 63) / 64;
    s->cap = cap;
    s->stride = stride;
    s->K = srt_topk_count(density, s->F);
    int64_t n = s->L1 - s->L0;
    s->bits = calloc((size_t)n, sizeof *s->bits);
    s->rows = calloc((size_t)n, sizeof *s->rows);
    s->seen = calloc((size_t)n, sizeof *s->seen);
    s->score = malloc((size_t)s->F * sizeof *s->score);
    s->idx = malloc((size_t)s->F * sizeof *s->idx);
    if (!s->bits || !s->rows || !s->seen || !s->score || !s->idx) {
        coact_free(s);
        return sc_errf(err, SC_ENOMEM, "coact: out of memory");
    }
    *out = s;
    return SC_OK;
}

static sc_status coact_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    coact *s = p;
    if (ev->is_grad || ev->tap != SC_TAP_GATE_ACT || ev->layer < s->L0 || ev->layer >= s->L1) return SC_OK;
    int64_t l = ev->layer - s->L0, F = s->F, W = s->W, take = 0;
    for (int64_t t = 0; t < n_scored; t++) take += (s->seen[l] + t) % s->stride == 0;
    if (take > s->cap - s->rows[l]) take = s->cap - s->rows[l];
    if (take > 0) {
        SC_TRY(sc_sample_resize(&s->bits[l], (size_t)((s->rows[l] + take) * W) * sizeof(uint64_t), "coact: the sample",
                                err));
        uint64_t *b = s->bits[l];
        for (int64_t t = 0, k = 0; t < n_scored && k < take; t++) {
            if ((s->seen[l] + t) % s->stride != 0) continue;
            uint64_t *row = b + (s->rows[l] + k++) * W;
            memset(row, 0, (size_t)W * sizeof *row);
            srt_score_gate(s->score, ev->data + t * F, NULL, F);
            int64_t n = srt_topk(s->score, F, s->K, s->idx, NULL);
            for (int64_t i = 0; i < n; i++) row[s->idx[i] / 64] |= (uint64_t)1 << (s->idx[i] % 64);
        }
        s->rows[l] += take;
    }
    s->seen[l] += n_scored;
    return SC_OK;
}

static sc_status coact_finalize(void *p, sc_err *err) {
    (void)p;
    (void)err;
    return SC_OK;
}

static int coact_arrays(void *p, sc_array *out, int cap) {
    coact *s = p;
    int n = 0;
    for (int64_t l = 0; l < s->L1 - s->L0 && n < cap; l++) {
        sc_array *a = &out[n++];
        snprintf(a->name, sizeof a->name, "layer%lld.live_bits", (long long)(s->L0 + l));
        a->kind = SC_ARR_CONCAT;
        a->type = SC_ARR_I64;
        a->shape[0] = s->rows[l];
        a->shape[1] = s->W;
        a->data = s->bits[l];
        a->concat_data = &s->bits[l];
        a->concat_rows = &s->rows[l];
    }
    return n;
}

bool sc_coact_sample(const void *state, int64_t layer, const uint64_t **bits, int64_t *rows, int64_t *words) {
    const coact *s = state;
    if (!s || layer < s->L0 || layer >= s->L1) return false;
    *bits = (const uint64_t *)s->bits[layer - s->L0];
    *rows = s->rows[layer - s->L0];
    *words = s->W;
    return true;
}

/* the stride counters (checkpoints only) */
static int coact_resume_arrays(void *p, sc_array *out, int cap) {
    coact *s = p;
    return sc_method_counter_array(out, cap, "seen", s->seen, s->L1 - s->L0);
}

const sc_method sc_method_coact = {
    "coact",
    "co-activation: a sample of CATS live sets per layer (bitmasks), for neuron permutation at pack time",
    SC_TAP_BIT(SC_TAP_GATE_ACT),
    0,
    coact_create,
    coact_observe,
    coact_finalize,
    coact_arrays,
    coact_free,
    coact_resume_arrays,
    NULL,
    NULL,
    "coact_sample,coact_stride,coact_density",
    NULL,
    NULL,
};
