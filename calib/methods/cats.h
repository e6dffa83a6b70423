/* cats.h - the CATS histogram geometry, shared by the method and eval. */
#ifndef SC_CATS_H
#define SC_CATS_H

#include <stdbool.h>
#include <stdint.h>

#include "srt_schema.h"

#define SC_CATS_BINS 16384
#define SC_CATS_NB (SC_CATS_BINS + 2)

double sc_cats_bin_left(int64_t b);
int64_t sc_cats_bin_of(double v);
/* Threshold t with P(|phi(u)| < t) reaching `sparsity` on the histogram. */
float sc_cats_threshold(const int64_t *hist, double sparsity);
/* The histogram of layer `layer` (absolute) in a cats state, NULL if the
 * state does not cover it. */
const int64_t *sc_cats_hist(const void *state, int64_t layer);
/* The layer's activity sums sum |phi(u_j)| [ffn_dim] (neuron permutation), NULL likewise. */
const double *sc_cats_activity(const void *state, int64_t layer);

/* cats-threshold: the layer's |phi(u)| thresholds at the grid's sparsities
 * (srt_thr_grid) from the CATS histogram; false when the calibration does
 * not cover the layer. The threshold at any density is then
 * srt_table_threshold(table, 1 - density). */
bool sc_plan_cats_table(const void *cats_state, int64_t layer, float out[SRT_THR_GRID]);

#endif
