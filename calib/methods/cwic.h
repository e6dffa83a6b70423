/* cwic.h - CWIC stripes (seed 001): per-channel statistics of every linear
 * input, stripe routing with de-meaning and re-biasing, active-parameter
 * accounting, thresholds fitted without training or imported from a
 * safetensors file. The method is cwic.c; eval and fitting are eval_cwic.c.
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
 * |x_i - mean_i| >= tau[s * in + i] (tau = theta * std, precomputed);
 *   y = W_active (x - mean) + wmean (+ b),  wmean = W mean.
 * z and zs are scratch of [T, in] floats. Returns the active parameters
 * (sum over tokens and stripes of rows_in_stripe * active columns). */
double sc_cwic_linear(float *y, const float *x, const float *W, const float *b, const float *mean,
                      const float *wmean, const float *tau, int64_t T, int64_t in, int64_t out, int64_t S,
                      float *z, float *zs);

#endif
