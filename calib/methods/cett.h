/* cett.h - CETT thresholds (CLADA Eq. 10; METHODS.md) and the CLADA load
 * signals, shared by the methods, eval and tests.
 *
 * For neuron j of a layer with activation h_j and down-projection column
 * W_d[:, j]: n_j = |h_j| * ||W_d[:, j]||_2. For a threshold t,
 *   CETT(t) = mean over sample tokens of || sum_{j: n_j <= t} h_j W_d[:, j] ||_2 / ||y||_2
 * (tokens with y = 0 are skipped). Run-time rule: neuron j is live iff
 * n_j > t, i.e. |h_j| > t / ||W_d[:, j]||_2. */
#ifndef SC_CETT_H
#define SC_CETT_H

#include <stdint.h>

#include "method.h"
#include "srt_route.h"
#include "srt_schema.h"

#define SC_CETT_GRID 2048 /* candidate thresholds between min n and the 0.99 quantile */

/* The stored sample of layer `layer` (absolute): rows of h [rows, F]. */
bool sc_cett_sample(const void *state, int64_t layer, const float **h, int64_t *rows);
/* The CLADA sample: rows of (surprisal, entropy) in nats [rows, 2]. */
bool sc_clada_sample(const void *state, const double **sig, int64_t *rows);

/* CETT(t) on a sample (wnorm: column norms of W_d, Wd: [D, F] row-major).
 * scratch: 2 * rows * max(F, D) floats + rows doubles (sc_cett_scratch_bytes). */
size_t sc_cett_scratch_bytes(int64_t rows, int64_t D, int64_t F);
double sc_cett_value(const float *h, int64_t rows, int64_t D, int64_t F, const float *Wd, const double *wnorm, double t,
                     void *scratch);

typedef struct sc_cett_fit {
    double threshold;    /* t */
    double cett;         /* CETT(t) on the sample */
    double sparsity;     /* fraction of (token, neuron) pairs with n_j <= t on the sample */
    double grid_lo, grid_hi; /* min n and the 0.99 quantile of n */
    int evaluations;     /* CETT evaluations of the binary search */
} sc_cett_fit;

/* The largest grid threshold t with CETT(t) <= target (binary search; CETT
 * is non-decreasing in t in practice, and the search relies on it). If even
 * the smallest candidate exceeds the target, t = 0 (nothing pruned but exact
 * zeros). */
sc_status sc_cett_search(const float *h, int64_t rows, int64_t D, int64_t F, const float *Wd, const double *wnorm,
                         double target, sc_cett_fit *out, sc_err *err);

/* The layer's CETT table: table[i] = the srt_thr_grid(i) quantile of
 * n_j = |h_j| ||W_d[:, j]|| over the stored sample (rows x F values, one
 * sort), so t = table[i] keeps the fraction 1 - srt_thr_grid(i) of the
 * sample's (token, neuron) pairs live. pack stores it (lN.cett_table) and the
 * threshold at any density is srt_table_threshold(table, 1 - density). */
sc_status sc_cett_table(const float *h, int64_t rows, int64_t F, const double *wnorm, float table[SRT_THR_GRID],
                        sc_err *err);

/* What a CETT router is fitted to, per layer: a density (t =
 * srt_table_threshold(sc_cett_table, 1 - density): on the grid's densities
 * the quantile that keeps that fraction of the sample live, geometric
 * interpolation between them, as the runtime reads the table; density 1: no
 * threshold), or a CETT target (sc_cett_search). */
typedef struct sc_cett_goal {
    double density; /* in (0, 1]; NAN: fit by target */
    double target;  /* used when density is NAN */
    /* CLADA's rule (srt_route.h) when the thresholds are its base: a density
     * is then kept by the scaled rule (srt_clada_table_base); NULL: cett */
    const srt_clada *clada;
} sc_cett_goal;
/* The goal from a method's --params (target=) and --density (NAN: not
 * given): one of them, not both (SC_EARG naming the two options); neither:
 * target 0.2 (the CLADA paper's). who names the method in messages.
 * out->clada is NULL (the caller points it at a CLADA rule). */
sc_status sc_cett_goal_parse(const char *params, double density, const char *who, sc_cett_goal *out, sc_err *err);
/* Fits layer l's threshold t to goal (fit->threshold < 0: dense layer);
 * table: the layer's sc_cett_table (read for a density goal). The one fit
 * eval (sc_eval_cett) and pack (pack_routing.c) use, through sc_plan_cett_layer. */
sc_status sc_cett_fit_layer(const float *h, int64_t rows, int64_t D, int64_t F, const float *Wd, const double *wnorm,
                            const sc_cett_goal *goal, const float table[SRT_THR_GRID], sc_cett_fit *out, sc_err *err);

/* Surprisal -log p(next) and entropy of softmax(logits[V]) in nats. */
void sc_clada_signals(const float *logits, int64_t V, int32_t next, double *surprisal, double *entropy);

/* ---- the routing plan (see plan.h) ---- */

/* cett / clada: layer l's plan from the calibration's h sample. wnorm_f [F]
 * receives the f32 column norms ||W_d[:, j]|| (lN.cett_wnorm) and out->table
 * the layer's CETT table (sc_cett_table, lN.cett_table); out->tabled is false
 * for a layer without a sample. thr [F] receives the per-neuron thresholds
 * at goal: for a density, srt_cett_table_thresholds(table, wnorm_f, density)
 * (srt_clada_table_thresholds with goal->clada), the computation the runtime
 * repeats at any density from the stored table;
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
 * tau_s, tau_H, from a method's --params, and the fraction of the sample in
 * each load class (rule.frac, srt_route.h). clada_state NULL: only the
 * parameters are parsed (tau_s = tau_h = NAN, frac 0). who names the caller. */
typedef struct sc_clada_plan {
    srt_clada rule;
    double qs, qh;
} sc_clada_plan;
sc_status sc_plan_clada(const char *params, const void *clada_state, const char *who, sc_clada_plan *out,
                        sc_err *err);

#endif
