/* plan.h - the routing plan: per layer, the data a runtime router needs
 * (threshold tables, per-neuron thresholds, CLADA's load thresholds), fitted
 * once from a calibration by the functions below (and each method's own,
 * declared in its header under calib/methods/). pack stores exactly what
 * they return (convert/pack_routing.c) and eval on the source model routes
 * with exactly that (sparse_eval.c, methods/cett.c, methods/teal.c), through the
 * runtime's rules in kernels/srt_route.h, so the live sets eval measures are
 * the ones the artifact executes. */
#ifndef SC_PLAN_H
#define SC_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "cats.h"
#include "cett.h"
#include "claws.h"
#include "engine.h"
#include "srt_route.h"
#include "teal.h"

/* claws (sc_plan_claws_layer) and cats-threshold (sc_plan_cats_table) are
 * declared in claws.h and cats.h, beside their methods. */

/* teal: per tapped input (attn_in, attn_ctx, mlp_in, h) the |x| thresholds at
 * the grid's sparsities, [SC_TEAL_NTAPS, SRT_THR_GRID]; false when the layer is
 * not calibrated. cum: SC_TEAL_NB doubles of scratch. */
bool sc_plan_teal_table(void *teal_state, int64_t layer, double *cum, float out[SC_TEAL_NTAPS * SRT_THR_GRID]);

/* cett / clada: sc_plan_cett_layer and sc_plan_clada are declared in cett.h (calib/methods/cett.c). */

#endif
