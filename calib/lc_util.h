/* lc_util.h - small helpers shared by the LaRoSA, CETT and CLADA code:
 * "key=value,..." method parameters, and quantiles of a sample. */
#ifndef SC_LC_UTIL_H
#define SC_LC_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"

/* Looks up key in params ("k=v,k2=v2"; NULL or "" = none). Absent: *out =
 * def and SC_OK. Present: parsed as a finite number in [lo, hi], else
 * SC_EARG with a message naming `who` and the key. */
sc_status sc_lc_param(const char *params, const char *key, double def, double lo, double hi, double *out,
                      const char *who, sc_err *err);
/* true if the key is present (any value). */
bool sc_lc_param_has(const char *params, const char *key);

/* The q-quantile (0..1) of x[0..n) by linear interpolation between order
 * statistics; x is sorted in place. n = 0 gives 0. */
double sc_lc_quantile_sorted(double *x, int64_t n, double q);

#endif
