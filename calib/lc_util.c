/* lc_util.c - see lc_util.h. */
#include "lc_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void sc_lc_sort(double *x, int64_t n) {
    if (n > 0) qsort(x, (size_t)n, sizeof *x, cmp_double);
}

double sc_lc_quantile_sorted(double *x, int64_t n, double q) {
    if (n <= 0) return 0.0;
    sc_lc_sort(x, n);
    return sc_lc_quantile_of_sorted(x, n, q);
}

double sc_lc_quantile_of_sorted(const double *x, int64_t n, double q) {
    if (n <= 0) return 0.0;
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)floor(pos);
    if (i < 0) i = 0;
    if (i >= n - 1) return x[n - 1];
    double f = pos - (double)i;
    return x[i] + f * (x[i + 1] - x[i]);
}
