/* claws.h - reading a CLAWS state (claws.c) by layer. */
#ifndef SC_CLAWS_H
#define SC_CLAWS_H

#include <stdint.h>

/* Layer `layer`'s (absolute) multipliers c_j [ffn_dim] and activity sums
 * den_j = sum |phi(u_j)| [ffn_dim] in a claws state; NULL when the state does
 * not cover the layer. */
const double *sc_claws_c(const void *state, int64_t layer);
const double *sc_claws_den(const void *state, int64_t layer);

/* claws: a layer's multipliers c_j [F] as the runtime stores and scores with
 * them (f32): the one conversion of the calibration's doubles, which pack
 * stores (convert/pack_routing.c) and eval's router uses (router.c). c NULL
 * (a layer the calibration does not cover): every multiplier 1. */
void sc_plan_claws_layer(const double *c, int64_t F, float *out);

#endif
