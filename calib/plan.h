/* plan.h - the routing plan: per layer, the data a runtime router needs
 * (threshold tables, per-neuron thresholds, CLADA's load thresholds), fitted
 * once from a calibration by the functions below. pack stores exactly what
 * they return (convert/pack_routing.c) and eval on the source model routes
 * with exactly that (sparse_eval.c, cett_eval.c, methods/teal.c), through the
 * runtime's rules in kernels/srt_route.h, so the live sets eval measures are
 * the ones the artifact executes. */
#ifndef SC_PLAN_H
#define SC_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "cett.h"
#include "engine.h"
#include "srt_route.h"
#include "teal.h"

/* claws: a layer's multipliers c_j [F] as the runtime stores and scores with
 * them (f32): the one conversion of the calibration's doubles, which pack
 * stores (convert/pack_routing.c) and eval's router uses (router.c). c NULL
 * (a layer the calibration does not cover): every multiplier 1. */
void sc_plan_claws_layer(const double *c, int64_t F, float *out);

/* cats-threshold: the layer's |phi(u)| thresholds at the grid's sparsities
 * (srt_thr_grid) from the CATS histogram; false when the calibration does
 * not cover the layer. The threshold at any density is then
 * srt_table_threshold(table, 1 - density). */
bool sc_plan_cats_table(const void *cats_state, int64_t layer, float out[SRT_THR_GRID]);

/* teal: per tapped input (attn_in, attn_ctx, mlp_in, h) the |x| thresholds at
 * the grid's sparsities, [SC_TEAL_NTAPS, SRT_THR_GRID]; false when the layer is
 * not calibrated. cum: SC_TEAL_NB doubles of scratch. */
bool sc_plan_teal_table(void *teal_state, int64_t layer, double *cum, float out[SC_TEAL_NTAPS * SRT_THR_GRID]);

/* cett / clada: layer l's plan from the calibration's h sample. wnorm_f [F]
 * receives the f32 column norms ||W_d[:, j]|| (lN.cett_wnorm) and out->table
 * the layer's CETT table (sc_cett_table, lN.cett_table); out->tabled is false
 * for a layer without a sample. thr [F] receives the per-neuron thresholds
 * at goal: for a density, srt_cett_table_thresholds(table, wnorm_f, density),
 * the computation the runtime repeats at any density from the stored table;
 * for a CETT target, srt_cett_neuron_threshold(t, ||W_d[:, j]||) with t from
 * the search. out->fitted is false (thr untouched) for a layer without a
 * sample or a target of 0: that layer stays dense. wnorm: F doubles of
 * scratch (receives the column norms). */
typedef struct sc_cett_layer_plan {
    float table[SRT_THR_GRID];
    bool tabled, fitted;
    sc_cett_fit fit;
} sc_cett_layer_plan;
sc_status sc_plan_cett_layer(const sc_model *m, const void *cett_state, int64_t layer, const sc_cett_goal *goal,
                             double *wnorm, float *wnorm_f, float *thr, sc_cett_layer_plan *out, sc_err *err);

/* clada: lambda, gamma (defaults SRT_CLADA_LAMBDA, SRT_CLADA_GAMMA) and the
 * qs, qh quantiles of the calibration's (surprisal, entropy) sample that give
 * tau_s, tau_H, from a method's --params. clada_state NULL: only the
 * parameters are parsed (tau_s = tau_h = NAN). who names the caller. */
typedef struct sc_clada_plan {
    srt_clada rule;
    double qs, qh;
} sc_clada_plan;
sc_status sc_plan_clada(const char *params, const void *clada_state, const char *who, sc_clada_plan *out,
                        sc_err *err);

#endif
