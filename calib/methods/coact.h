/* coact.h - the co-activation sample behind `pack --permute` (see coact.c). */
#ifndef SC_COACT_H
#define SC_COACT_H

#include <stdbool.h>
#include <stdint.h>

/* The live-set sample of a layer of a coact state: rows masks of `words`
 * uint64 words each (neuron j is bit j % 64 of word j / 64). False when the
 * layer was not calibrated. */
bool sc_coact_sample(const void *state, int64_t layer, const uint64_t **bits, int64_t *rows, int64_t *words);

#endif
