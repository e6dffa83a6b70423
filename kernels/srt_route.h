/* srt_route.h - neuron routing: the one implementation of "which neurons
 * are live for this token" that both the reference evaluator (sparsecal
 * eval) and the runtime execute. Live lists are ascending neuron indices. */
#ifndef SRT_ROUTE_H
#define SRT_ROUTE_H

#include <stdint.h>

#include "srt_schema.h"

typedef struct srt_kernels srt_kernels;

typedef enum srt_router {
    SRT_ROUTER_DENSE = 0,     /* every neuron */
    SRT_ROUTER_CATS,          /* top-K of |phi(u_j)| */
    SRT_ROUTER_CATS_THRESHOLD,/* |phi(u_j)| > t (per layer) */
    SRT_ROUTER_CLAWS,         /* top-K of |phi(u_j)| * c_j */
    SRT_ROUTER_ORACLE,        /* top-K of |h_j| (an upper bound for any neuron router) */
    SRT_ROUTER_GRIFFIN,       /* a fixed top-K set chosen from the prompt (s_j) */
    SRT_ROUTER_COUNT
} srt_router;

const char *srt_router_name(srt_router r);
/* Returns the router with that name, or -1. */
int srt_router_from_name(const char *name);

/* K = round(density * n), clamped to [0, n]. */
int64_t srt_topk_count(double density, int64_t n);

/* Exact top-K by value in O(n) (the runtime's radix selection,
 * srt_select_topk): writes the indices of the k largest score[i] to idx in
 * ascending index order and returns k. Ties at the boundary go to the lower
 * index; NaN ranks lowest. scratch: NULL, or 2n + 1 uint32 entries the
 * selection may use (srt_select_topk_ws: faster above n = 8192). */
int64_t srt_topk(const float *score, int64_t n, int64_t k, int32_t *idx, void *scratch);

/* Threshold compaction with the best compaction kernel for this CPU:
 * indices with |x[i]| > t, ascending; returns the count. */
int64_t srt_threshold(const float *x, int64_t n, float t, int32_t *idx);

/* Router scores for one token: out[j] = |a[j]| * (c ? c[j] : 1). */
void srt_score_gate(float *out, const float *a, const float *c, int64_t n);

/* ---- the routing plan's rules ------------------------------------------------
 * What a router needs per layer is fitted once from a calibration (calib/plan.c)
 * and stored by pack; the rules below turn that data into this token's live set.
 * The runtime decoder (srt_decode.c) and the reference forward's router hooks
 * (calib/router.c, methods/cett.c, methods/teal.c) call these same functions, so eval
 * on the source model and run on an artifact decide alike. */

/* Threshold tables (CATS |phi(u)|, TEAL |x| per tapped input) hold the
 * threshold at sparsity 0.05, 0.10, ..., 0.95: entry i (of SRT_THR_GRID,
 * srt_schema.h) at srt_thr_grid(i). */
double srt_thr_grid(int i);
/* The threshold at sparsity s from a table: the entry itself on the grid,
 * geometric interpolation between entries (linear when one is 0), linear from
 * 0 below 0.05, the last entry above 0.95; -1 (every neuron live) at s <= 0. */
float srt_table_threshold(const float t[SRT_THR_GRID], double s);

/* CETT (the CLADA paper, Eq. 10): neuron j is live iff |h_j| ||W_d[:, j]|| > t.
 * The runtime form divides once per neuron at fit time: live iff
 * |h_j| > thr_j = t / ||W_d[:, j]|| (f32); t < 0 (dense layer) gives -1, a
 * zero column +inf (never live). */
float srt_cett_neuron_threshold(double t, double wnorm);
/* A layer's per-neuron thresholds at any density from its CETT table (t at
 * the grid's sparsities, SRT_SEC_CETT_TABLE) and the f32 column norms
 * (SRT_SEC_CETT_WNORM): thr[j] = srt_cett_neuron_threshold(t, wnorm[j]) with
 * t = srt_table_threshold(table, 1 - density), the interpolation
 * cats-threshold reads its table with. density >= 1: every thr[j] < 0. The one
 * computation pack, eval on the source model and the runtime share. */
void srt_cett_table_thresholds(const float table[SRT_THR_GRID], const float *wnorm, double density, float *thr,
                               int64_t n);
/* The CETT rule for one token: live iff |h_j / factor| > thr[j] (CLADA's
 * factor scales every threshold; 1 for plain CETT), ascending indices into
 * idx; scratch holds F floats. Returns the count, or -1 when factor <= 0
 * (no threshold: every neuron). k: the kernel table (NULL: this CPU's best). */
int64_t srt_route_cett(const srt_kernels *k, uint32_t *idx, float *scratch, const float *h, const float *thr,
                       float factor, int64_t n);

/* CLADA (the CLADA paper, Eq. 6, 7, 11). One definition, the deployable one:
 * the signals of the token about to run are its surprisal -log p(w_t | w_<t)
 * and the entropy of that distribution, both from the logits the model itself
 * produced at the previous step, routed as it runs (a deployed model has no
 * dense pass to consult); position 0 has no prediction and uses factor 1.
 * tau_s, tau_h are quantiles (qs, qh) of the calibration signals.
 *
 * --density for clada (the CLADA paper, Eq. 11: tau(t) = tau_base (1 +
 * lambda [s_t > tau_s] + gamma [H_t > tau_H])): the base threshold is the one
 * calibrated constant, lambda and gamma set how far a token's load moves it
 * from there. So a requested density fixes tau_base for the scaled rule, not
 * for the unscaled one (which would keep the density only for tokens whose
 * factor is 1, and less on average: 0.19 for 0.3 on stories260K), and not by
 * rescaling the factors (which would change the paper's Eq. 11). A token's
 * load class k is bit 0 [s > tau_s], bit 1 [H > tau_H], with factor f_k and
 * frac[k] the fraction of calibration tokens in it; tau_base at density d
 * solves sum_k frac[k] density(tau_base f_k) = d, density() read from the
 * layer's CETT table (srt_table_density). frac all 0 (an artifact packed
 * before class fractions were stored) or lambda = gamma = 0: the unscaled
 * table, cett's thresholds. */
#define SRT_CLADA_LAMBDA 0.80
#define SRT_CLADA_GAMMA 0.12
#define SRT_CLADA_QS 0.5
#define SRT_CLADA_QH 0.5
#define SRT_CLADA_CLASSES 4
typedef struct srt_clada {
    double tau_s, tau_h, lambda, gamma;
    double frac[SRT_CLADA_CLASSES]; /* calibration tokens per load class (above); all 0: unknown */
} srt_clada;
/* Surprisal of `next` and entropy of softmax(logits[0..V)), nats (sums in double). */
void srt_clada_signals(const float *logits, int64_t V, int32_t next, double *surprisal, double *entropy);
/* tau(t) / tau_base = 1 + lambda [s > tau_s] + gamma [H > tau_H]. */
float srt_clada_factor(const srt_clada *c, double surprisal, double entropy);
/* The factor of load class k (0..3, above): srt_clada_factor of its signals. */
float srt_clada_class_factor(const srt_clada *c, int k);
/* The fraction of (token, neuron) pairs a threshold table keeps live at
 * threshold t: 1 - the least s with srt_table_threshold(table, s) >= t (the
 * table read backwards, by bisection; 0 above the last entry, which the table
 * does not resolve). */
double srt_table_density(const float table[SRT_THR_GRID], double t);
/* tau_base of a layer keeping `density` under CLADA's scaled rule (above),
 * from its CETT table; -1 at density >= 1 (dense). */
float srt_clada_table_base(const float table[SRT_THR_GRID], const srt_clada *c, double density);
/* The layer's per-neuron CLADA base thresholds at density:
 * srt_cett_neuron_threshold(srt_clada_table_base(...), wnorm[j]); what pack,
 * eval on the source model and the runtime compute for clada at a density. */
void srt_clada_table_thresholds(const float table[SRT_THR_GRID], const float *wnorm, const srt_clada *c,
                                double density, float *thr, int64_t n);

/* LaRoSA (the LaRoSA paper): sparsity s = 1 - density split between the
 * block input (s_in = in * s) and h (s_h = h * s); the reference code's
 * defaults. Kept coordinates of n: srt_topk_count(1 - min(1, split s), n). */
#define SRT_LAROSA_IN 0.8
#define SRT_LAROSA_H 1.2
int64_t srt_larosa_keep(double split, double density, int64_t n);

/* TEAL's greedy allocation (the TEAL paper, block-wise greedy optimisation) read at sparsity s from a layer's
 * curve (SRT_SEC_TEAL_CURVE, [rows, SRT_TEAL_CURVE_COLS], effective sparsity increasing): each projection's
 * sparsity, linear between the two rows whose effective sparsities bracket s (consecutive rows differ in one
 * projection, so the result's effective sparsity is s up to rounding); s at or below row 0's: row 0 (dense);
 * beyond the last row's: the last row. The one reading eval (on the source model) and the runtime share;
 * each projection's threshold is then srt_table_threshold of its tap's TEAL table at that sparsity. */
void srt_teal_curve_at(const float *curve, int64_t rows, double s, double out[SRT_NPROJ]);

/* CWIC (the CWIC paper): a projection W [out, in] is cut into stripes of S rows (ns = ceil(out / S), the
 * last may be shorter); stripe-column (s, i) is live iff |x_i - mean_i| >= tau[s * in + i], and
 *   y = W_live (x - mean) + W mean
 * (de-meaning and re-biasing: every stripe-column live gives W x). tau = theta * std per stripe-column
 * (srt_cwic_tau; theta = +inf: never live). */
float srt_cwic_tau(float theta, float std);
int64_t srt_cwic_stripes(int64_t out, int64_t S); /* ns */
/* z = x - mean (f32), the de-meaned input. */
void srt_cwic_center(float *z, const float *x, const float *mean, int64_t in);
/* One stripe's live columns of z (|z_i| >= tau_s[i]), ascending, into idx; returns their count. */
int64_t srt_cwic_stripe_live(uint32_t *idx, const float *z, const float *tau_s, int64_t in);
/* One token: z = x - mean (srt_cwic_center); stripe s's live columns (srt_cwic_stripe_live), ascending, into idx[off[s] .. off[s + 1]) with
 * off[0] = 0 (the SRT_SPARSE_STRIPES list format; idx holds ns * in). Returns the active parameters,
 * sum over stripes of rows * live columns. The one rule eval (on the source model) and the runtime share. */
int64_t srt_route_cwic(float *z, uint32_t *idx, int64_t *off, const float *x, const float *mean, const float *tau,
                       int64_t in, int64_t out, int64_t S);
/* The name of projection p (SRT_PROJ_*): "q", ..., "down" ("?" outside). */
const char *srt_proj_name(int p);

/* Zeroes v[i] for every i not in the ascending live list idx[0..k). */
void srt_zero_dead(float *v, int64_t n, const uint32_t *idx, int64_t k);

#endif
