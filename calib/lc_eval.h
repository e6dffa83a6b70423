/* lc_eval.h - evaluation of the input-rotation and threshold methods
 * (LaRoSA, CETT, CLADA) and the routing diagnostics of the CLAWS paper.
 * sc_eval_sparse dispatches here through the routing registry (route_method.h,
 * which declares sc_eval_larosa and sc_eval_cett). */
#ifndef SC_LC_EVAL_H
#define SC_LC_EVAL_H

#include "route_method.h"

/* sc_eval_larosa, "larosa": rotated top-K of the attention and MLP inputs
 * (z = Q^T x, keep the top-K |z_k|, x' = Q z_kept) and magnitude top-K of h.
 * Parameters: in=0.8, h=1.2 (s_in = in * s, s_h = h * s, s = 1 - density),
 * grid=1 to search the split keeping the parameter-weighted sparsity of the
 * sparsified linears at s (tuned on the first grid_seqs=16 sequences, step
 * grid_step=0.05).
 * sc_eval_cett, "cett" and "clada": per-layer CETT thresholds (target=0.2)
 * on h; clada scales them per token by 1 + lambda [s_t > tau_s] +
 * gamma [H_t > tau_H] (lambda=0.8, gamma=0.12, tau_s / tau_H the qs=0.5 /
 * qh=0.5 quantiles of the calibration signals). */

/* Parameter counts of one layer's linears: q+k+v, o, gate+up, down. */
void sc_lc_layer_params(const sc_config *c, double *qkv, double *o, double *gu, double *down);

#endif
