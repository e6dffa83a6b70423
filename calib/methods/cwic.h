/* cwic.h - CWIC stripes (the CWIC paper): per-channel statistics of every linear
 * input, stripe routing with de-meaning and re-biasing, active-parameter
 * accounting, thresholds fitted without training or imported from a
 * safetensors file. The method, the fitting and eval are cwic.c.
 *
 * Statistics per layer and tapped input (attn_in -> q/k/v, attn_ctx -> o,
 * mlp_in -> gate/up, h -> down), per channel:
 *   exact: sum x, sum x^2 (double) and the token count (SUM, mergeable
 *          exactly): mean = sum/n, std = sqrt(max(0, sum2/n - mean^2));
 *   EMA:   m <- beta m + (1 - beta) x in token order (beta = 0.99, param
 *          cwic_beta), bias-corrected (m / (1 - beta^n)), likewise for x^2.
 *          The EMA depends on the order of the tokens, so shards cannot
 *          reproduce it: each shard stores n_shard * EMA_shard (SUM), and a
 *          merge yields the token-weighted mean of the shard EMAs. One run
 *          (one shard) stores exactly its EMA. */
#ifndef SC_CWIC_H
#define SC_CWIC_H

#include <stdbool.h>
#include <stdint.h>

#include "forward.h"
#include "model.h"

#define SC_CWIC_NTAPS 4

/* Per-channel statistic of (layer, tap 0..3): which = "mean", "std",
 * "ema_mean", "ema_std"; NULL if absent. width receives the channel count. */
const double *sc_cwic_stat(void *state, int64_t layer, int tap, const char *which, int64_t *width);
/* Tokens observed for (layer, tap). */
int64_t sc_cwic_count(void *state, int64_t layer, int tap);

/* One striped linear layer for T tokens: rows split into stripes of S rows
 * (the last may be shorter); stripe-column (s, i) is active iff
 * |x_i - mean_i| >= tau[s * in + i] (tau = srt_cwic_tau(theta, std), precomputed;
 * the runtime's rule, kernels/srt_route.h);
 *   y = W_active (x - mean) + wmean (+ b),  wmean = W mean.
 * z and zs are scratch of [T, in] floats, idx of in. Returns the active
 * parameters of the first `counted` tokens (sum over them and the stripes of
 * rows_in_stripe * active columns). */
double sc_cwic_linear(float *y, const float *x, const float *W, const float *b, const float *mean,
                      const float *wmean, const float *tau, int64_t T, int64_t counted, int64_t in, int64_t out,
                      int64_t S, float *z, float *zs, uint32_t *idx);

/* Thresholds for every linear layer, as `eval --method cwic` uses them:
 * fitted without training for apr (params "apr=", default 1 / density;
 * "stripe=", "dist=", "stats=") from a calibration with cwic statistics, or
 * imported ("thresholds=FILE.safetensors"); "export=FILE" writes them. */
struct sc_calib;
typedef struct sc_cwic_plan sc_cwic_plan;
typedef struct sc_cwic_matrix {
    int64_t in, out, S, ns;      /* stripes of S rows, ns of them */
    const float *theta;          /* [ns, in]: stripe-column (s, i) active iff |x_i - mean_i| >= theta * std_i */
    const float *mean, *std;     /* [in] */
} sc_cwic_matrix;
sc_status sc_cwic_prepare(const sc_model *m, const struct sc_calib *calib, const char *params, double density,
                          sc_cwic_plan **plan, sc_err *err);
/* Projection proj (sc_linear: q k v o gate up down) of layer; false when it stays dense. */
bool sc_cwic_plan_matrix(const sc_cwic_plan *pl, int64_t layer, int proj, sc_cwic_matrix *out);
int64_t sc_cwic_plan_stripe(const sc_cwic_plan *pl);
double sc_cwic_plan_apr(const sc_cwic_plan *pl); /* 0 when imported */
void sc_cwic_plan_free(sc_cwic_plan *pl);

#endif
