/* pack_routing.h - the routing parameters `pack` stores with the layers
 * they belong to (convert/pack_routing.c; used by pack.c only). */
#ifndef SC_PACK_ROUTING_H
#define SC_PACK_ROUTING_H

#include <cjson/cJSON.h>

#include "pack.h"
#include "srt_container.h"

/* Writes the routing sections of every method the calibration holds and
 * fills the manifest's "routing" object r. perm_all is the [L, F] neuron
 * permutation (NULL: none); larosa the folded calibration state (NULL:
 * none). */
sc_status sc_pack_routing(const sc_model *m, const sc_pack_opts *o, srt_writer *w, const uint32_t *perm_all,
                          const void *larosa, cJSON *r, sc_err *err);

/* The same arrays handed to put (name as the section's, v [rows, cols], cols 0 for a vector) instead of
 * written: what `sparsecal export` writes as safetensors. */
typedef sc_status (*sc_routing_put)(void *user, const char *name, const float *v, int64_t rows, int64_t cols,
                                    sc_err *err);
sc_status sc_routing_arrays(const sc_model *m, const sc_pack_opts *o, sc_routing_put put, void *user,
                            const uint32_t *perm_all, const void *larosa, cJSON *r, sc_err *err);

#endif
