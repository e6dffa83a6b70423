/* lc_util.h - small helpers shared by the LaRoSA, CETT and CLADA code:
 * the --params keys of the routing methods (read with params.h) and
 * quantiles of a sample. */
#ifndef SC_LC_UTIL_H
#define SC_LC_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "params.h"

/* --params keys of the consumers outside the calibration methods (each
 * method lists its own: sc_method.param_keys). */
#define SC_LAROSA_PACK_KEYS "in,h"
#define SC_LAROSA_EVAL_KEYS "in,h,grid,grid_seqs,grid_step"
#define SC_CETT_ROUTING_KEYS "target,lambda,gamma,qs,qh"
#define SC_CWIC_EVAL_KEYS "apr,stripe,dist,stats,thresholds,export"

/* The q-quantile (0..1) of x[0..n) by linear interpolation between order
 * statistics; x is sorted in place. n = 0 gives 0. */
double sc_lc_quantile_sorted(double *x, int64_t n, double q);
/* Sorts x[0..n) ascending. */
void sc_lc_sort(double *x, int64_t n);
/* The same quantile of x[0..n) already in ascending order (several quantiles of one sort). */
double sc_lc_quantile_of_sorted(const double *x, int64_t n, double q);

#endif
