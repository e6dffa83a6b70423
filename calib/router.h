/* router.h - applies a neuron router inside the forward pass (a tap hook at
 * H that zeroes dead neurons, using the runtime's routing code), and keeps
 * the density statistics. Used by `eval` and by the distillation student. */
#ifndef SC_ROUTER_H
#define SC_ROUTER_H

#include <stdint.h>

#include "forward.h"
#include "model.h"
#include "srt_route.h"

/* Observer of the live sets eval chooses: called for every routed (layer,
 * token) of a scoring pass with h after routing (dead neurons are 0), e.g.
 * to compare them with the runtime's (tests/test_plan.c). */
typedef void (*sc_live_fn)(void *user, int64_t layer, int64_t pos, const float *h, int64_t F);

typedef struct sc_router_spec {
    srt_router kind;
    double density;        /* top-K routers: K = round(density * ffn) */
    const double *const *c; /* CLAWS multipliers per layer [ffn] (NULL rows: 1) */
    const float *thresholds;/* CATS-threshold: per-layer t */
    bool griffin_prefill;  /* GRIFFIN: also mask the prompt tokens */
    sc_live_fn on_live;    /* may be NULL */
    void *live_user;
} sc_router_spec;

typedef struct sc_router sc_router;

sc_status sc_router_create(const sc_model *m, const sc_router_spec *spec, sc_router **out, sc_err *err);
void sc_router_free(sc_router *r);
/* The forward hook (taps SC_TAP_GATE_ACT and SC_TAP_H); user = the router. */
sc_status sc_router_hook(void *user, const sc_tap_event *ev, sc_err *err);
uint32_t sc_router_taps(void);

/* GRIFFIN: rows [0, prompt_len) are the prompt. sc_router_griffin_observe
 * accumulates s_j = sqrt(sum_t (h_tj / ||h_t||)^2) from a dense pass over the
 * prompt (a hook at SC_TAP_H); sc_router_griffin_fix then freezes the top-K
 * set per layer for the rows at or after prompt_len (and the prompt rows too
 * for GRIFFIN-prefill). */
sc_status sc_router_griffin_observe(void *user, const sc_tap_event *ev, sc_err *err);
void sc_router_griffin_begin(sc_router *r, int64_t prompt_len);
void sc_router_griffin_fix(sc_router *r);

/* Density statistics over the routed rows since creation. */
typedef struct sc_router_stats {
    double density_mean;      /* live / ffn over routed (layer, token) pairs */
    double density_min, density_max; /* over (layer, token) pairs */
    double *layer_mean;       /* [n_layers], owned by the router */
    double active_mlp_params; /* per token: sum over layers of (D*F gate + live*(2D)) */
    int64_t rows;             /* routed tokens */
    /* contiguity of the sparse live sets (what neuron permutation aims at):
     * mean number of maximal runs of consecutive live neurons per sparse
     * (layer, token), and the mean run length = live / runs */
    double live_runs, live_run_length;
} sc_router_stats;

void sc_router_get_stats(const sc_router *r, sc_router_stats *out);

#endif
