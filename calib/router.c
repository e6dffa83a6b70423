/* router.c - neuron routing inside the reference forward pass. */
#include "router.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

struct sc_router {
    const sc_model *m;
    sc_router_spec spec;
    int64_t F, K;
    const float *a;  /* phi(u) of the current layer, captured at SC_TAP_GATE_ACT */
    float *score;    /* [F] */
    int32_t *idx;    /* [F] */
    void *scratch;   /* top-K workspace (srt_topk), 2F + 1 uint32 */
    float *cf;       /* CLAWS multipliers as the runtime stores them: [L, F] f32 */
    /* GRIFFIN */
    int64_t prompt_len;
    double *gsum;      /* [L, F] sum of squared normalised h over the prompt */
    int32_t *gset;     /* [L, K] frozen live set */
    bool gfixed;
    /* statistics */
    double *live_sum;  /* [L] */
    int64_t *rows_l;   /* [L] */
    double dmin, dmax;
    double *layer_mean;
    double runs_sum, sparse_live_sum; /* over sparse (layer, token) pairs */
    int64_t sparse_rows;
};

uint32_t sc_router_taps(void) { return SC_TAP_BIT(SC_TAP_GATE_ACT) | SC_TAP_BIT(SC_TAP_H); }

void sc_router_free(sc_router *r) {
    if (!r) return;
    free(r->score);
    free(r->idx);
    free(r->scratch);
    free(r->cf);
    free(r->gsum);
    free(r->gset);
    free(r->live_sum);
    free(r->rows_l);
    free(r->layer_mean);
    free(r);
}

sc_status sc_router_create(const sc_model *m, const sc_router_spec *spec, sc_router **out, sc_err *err) {
    *out = NULL;
    if ((unsigned)spec->kind >= SRT_ROUTER_COUNT) return sc_errf(err, SC_EARG, "router: unknown kind");
    if (!(spec->density >= 0.0 && spec->density <= 1.0))
        return sc_errf(err, SC_EARG, "router: density %g is not in [0, 1]", spec->density);
    if (spec->kind == SRT_ROUTER_CATS_THRESHOLD && !spec->thresholds)
        return sc_errf(err, SC_EARG, "router: cats-threshold needs per-layer thresholds");
    if (spec->kind == SRT_ROUTER_CLAWS && !spec->c) return sc_errf(err, SC_EARG, "router: claws needs multipliers");
    sc_router *r = calloc(1, sizeof *r);
    if (!r) return sc_errf(err, SC_ENOMEM, "router: out of memory");
    r->m = m;
    r->spec = *spec;
    int64_t F = m->cfg.ffn_dim, L = m->cfg.n_layers;
    r->F = F;
    r->K = srt_topk_count(spec->density, F);
    r->score = malloc((size_t)F * sizeof(float));
    r->idx = malloc((size_t)F * sizeof(int32_t));
    r->scratch = malloc((size_t)(2 * F + 1) * sizeof(uint32_t));
    r->live_sum = calloc((size_t)L, sizeof(double));
    r->rows_l = calloc((size_t)L, sizeof(int64_t));
    r->layer_mean = calloc((size_t)L, sizeof(double));
    if (spec->kind == SRT_ROUTER_CLAWS) {
        r->cf = malloc((size_t)(L * F) * sizeof(float));
        for (int64_t l = 0; r->cf && l < L; l++) sc_plan_claws_layer(spec->c[l], F, r->cf + l * F);
    }
    if (spec->kind == SRT_ROUTER_GRIFFIN) {
        r->gsum = calloc((size_t)(L * F), sizeof(double));
        r->gset = calloc((size_t)(L * (r->K ? r->K : 1)), sizeof(int32_t));
    }
    if (!r->score || !r->idx || !r->scratch || !r->live_sum || !r->rows_l || !r->layer_mean ||
        (spec->kind == SRT_ROUTER_GRIFFIN && (!r->gsum || !r->gset)) || (spec->kind == SRT_ROUTER_CLAWS && !r->cf)) {
        sc_router_free(r);
        return sc_errf(err, SC_ENOMEM, "router: out of memory");
    }
    r->dmin = INFINITY;
    r->dmax = -INFINITY;
    *out = r;
    return SC_OK;
}

void sc_router_griffin_begin(sc_router *r, int64_t prompt_len) {
    r->prompt_len = prompt_len;
    r->gfixed = false;
    if (r->gsum) memset(r->gsum, 0, (size_t)(r->m->cfg.n_layers * r->F) * sizeof(double));
}

sc_status sc_router_griffin_observe(void *user, const sc_tap_event *ev, sc_err *err) {
    sc_router *r = user;
    if (ev->tap != SC_TAP_H || ev->is_grad || !r->gsum) return SC_OK;
    double *s = r->gsum + ev->layer * r->F;
    int64_t rows = ev->n_tokens < r->prompt_len ? ev->n_tokens : r->prompt_len;
    for (int64_t t = 0; t < rows; t++) {
        const float *h = ev->data + t * ev->width;
        double nn = 0.0;
        for (int64_t j = 0; j < r->F; j++) nn += (double)h[j] * h[j];
        if (nn <= 0.0) continue;
        for (int64_t j = 0; j < r->F; j++) s[j] += (double)h[j] * h[j] / nn;
    }
    return SC_OK;
}

void sc_router_griffin_fix(sc_router *r) {
    int64_t L = r->m->cfg.n_layers;
    for (int64_t l = 0; l < L; l++) {
        for (int64_t j = 0; j < r->F; j++) r->score[j] = (float)sqrt(r->gsum[l * r->F + j]);
        srt_topk(r->score, r->F, r->K, r->gset + l * r->K, r->scratch);
    }
    r->gfixed = true;
}

static void record(sc_router *r, int64_t layer, int64_t live) {
    double d = (double)live / (double)r->F;
    r->live_sum[layer] += (double)live;
    r->rows_l[layer]++;
    if (d < r->dmin) r->dmin = d;
    if (d > r->dmax) r->dmax = d;
}

sc_status sc_router_hook(void *user, const sc_tap_event *ev, sc_err *err) {
    sc_router *r = user;
    if (ev->is_grad) return SC_OK;
    if (ev->tap == SC_TAP_GATE_ACT) {
        r->a = ev->data;
        return SC_OK;
    }
    if (ev->tap != SC_TAP_H) return SC_OK;
    const sc_router_spec *sp = &r->spec;
    int64_t F = r->F, l = ev->layer;
    for (int64_t t = 0; t < ev->n_tokens; t++) {
        float *h = ev->data + t * F;
        const float *a = r->a + t * F;
        int64_t live;
        switch (sp->kind) {
        case SRT_ROUTER_DENSE: live = F; break;
        case SRT_ROUTER_CATS:
        case SRT_ROUTER_CLAWS:
            srt_score_gate(r->score, a, r->cf ? r->cf + l * F : NULL, F);
            live = srt_topk(r->score, F, r->K, r->idx, r->scratch);
            break;
        case SRT_ROUTER_ORACLE:
            srt_score_gate(r->score, h, NULL, F);
            live = srt_topk(r->score, F, r->K, r->idx, r->scratch);
            break;
        case SRT_ROUTER_CATS_THRESHOLD: live = srt_threshold(a, F, sp->thresholds[l], r->idx); break;
        case SRT_ROUTER_GRIFFIN:
            if (!r->gfixed || (ev->pos0 + t < r->prompt_len && !sp->griffin_prefill)) continue; /* dense prompt */
            memcpy(r->idx, r->gset + l * r->K, (size_t)r->K * sizeof(int32_t));
            live = r->K;
            break;
        default: return sc_errf(err, SC_EARG, "router: unknown kind");
        }
        if (!ev->replay) record(r, l, live); /* a backward pass's recomputation is not a new row */
        if (live < F) srt_zero_dead(h, F, (const uint32_t *)r->idx, live);
        if (sp->on_live && !ev->replay) sp->on_live(sp->live_user, l, ev->pos0 + t, h, F);
        if (live == F) continue;
        int64_t runs = live > 0;
        for (int64_t i = 1; i < live; i++) runs += r->idx[i] != r->idx[i - 1] + 1;
        r->runs_sum += (double)runs;
        r->sparse_live_sum += (double)live;
        r->sparse_rows++;
    }
    return SC_OK;
}

void sc_router_get_stats(const sc_router *r, sc_router_stats *out) {
    memset(out, 0, sizeof *out);
    const sc_config *c = &r->m->cfg;
    double live = 0.0, rows = 0.0;
    double params = 0.0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        double ml = r->rows_l[l] ? r->live_sum[l] / (double)r->rows_l[l] : 1.0;
        r->layer_mean[l] = ml / (double)r->F;
        live += r->live_sum[l];
        rows += (double)r->rows_l[l];
        params += (double)c->dim * (double)c->ffn_dim + ml * 2.0 * (double)c->dim;
    }
    out->layer_mean = r->layer_mean;
    out->density_mean = rows > 0 ? live / rows / (double)r->F : 1.0;
    out->density_min = rows > 0 ? r->dmin : 1.0;
    out->density_max = rows > 0 ? r->dmax : 1.0;
    out->active_mlp_params = params;
    out->rows = r->rows_l[0];
    out->live_runs = r->sparse_rows ? r->runs_sum / (double)r->sparse_rows : 0.0;
    out->live_run_length = r->runs_sum > 0 ? r->sparse_live_sum / r->runs_sum : 0.0;
}
