/* eval_input.h - evaluation of the input-sparsity methods that route every
 * linear layer's input through the forward pass's linear hook: TEAL
 * (methods/teal.c: "teal" uniform, "teal-greedy" from the stored allocation
 * curve, "teal-cats" with the CATS router on h) and CWIC stripes
 * (methods/cwic.c: "cwic"). sc_eval_sparse dispatches
 * to sc_eval_teal and sc_eval_cwic through the routing registry
 * (route_method.h); results fill the input-sparsity fields of
 * sc_sparse_eval_result. */
#ifndef SC_EVAL_INPUT_H
#define SC_EVAL_INPUT_H

#include "sparse_eval.h"

/* Fills the input-sparsity fields (and density stats) from per-(layer,
 * projection) counts: sparsity of (l, p) = dropped / seen, in any unit. */
void sc_input_result_fill(const sc_config *c, const double *dropped, const double *seen, sc_sparse_eval_result *out);

#endif
