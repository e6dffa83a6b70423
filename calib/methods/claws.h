/* claws.h - reading a CLAWS state (claws.c) by layer. */
#ifndef SC_CLAWS_H
#define SC_CLAWS_H

#include <stdint.h>

/* Layer `layer`'s (absolute) multipliers c_j [ffn_dim] and activity sums
 * den_j = sum |phi(u_j)| [ffn_dim] in a claws state; NULL when the state does
 * not cover the layer. */
const double *sc_claws_c(const void *state, int64_t layer);
const double *sc_claws_den(const void *state, int64_t layer);

#endif
