/* cats.h - the CATS histogram geometry, shared by the method and eval. */
#ifndef SC_CATS_H
#define SC_CATS_H

#include <stdint.h>

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

#endif
