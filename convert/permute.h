/* permute.h - FFN neuron orders for `pack --permute`: neurons that are live
 * together are stored next to each other, so a token's live set reads a few
 * long runs of the neuron-major weights instead of scattered vectors. */
#ifndef SC_PERMUTE_H
#define SC_PERMUTE_H

#include <stdint.h>

#include "engine.h"

/* perm[i] = the original neuron stored at position i of layer `layer`: the
 * co-activation chain (sc_coact_order) when the calibration holds a coact
 * sample of the layer, else activity order (cats "activity" or claws "den",
 * most active first). *how receives "coact" or "activity". */
sc_status sc_neuron_order(const sc_calib *c, int64_t layer, int64_t F, uint32_t *perm, const char **how, sc_err *err);

/* Co-activation chain from `rows` live-set bitmasks of `words` uint64 each:
 * with J(a, b) = |a and b| / |a or b| (Jaccard over the sampled tokens),
 * start at the most often live neuron and repeatedly append the unplaced
 * neuron with the largest sum of J to the last `window` placed ones (ties:
 * more often live, then lower index); neurons never live in the sample go
 * last in index order. O(F^2 rows / 64) popcounts. */
sc_status sc_coact_order(const uint64_t *bits, int64_t rows, int64_t words, int64_t F, int window, uint32_t *perm,
                         sc_err *err);

#endif
