/* lc_util.c - see lc_util.h. */
#include "lc_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The bits of x as an unsigned key in x's order: a negative's bits all flipped, a positive's sign bit
 * set (-0 sorts just below +0, NaNs past the infinities). */
static inline uint64_t sort_key(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u >> 63 ? ~u : u | (1ull << 63);
}

#define RADIX_BITS 11
#define RADIX (1 << RADIX_BITS)
#define RADIX_PASSES 6 /* 6 x 11 >= 64 bits */

/* A least-significant-digit radix sort on sort_key: 6 passes of 11 bits (a pass whose digit is the
 * same for every value is skipped), against n log n comparisons through a function pointer; CETT's
 * threshold table sorts tokens x FFN values (millions at real sizes), where qsort took half of the
 * time of the CETT tests. Small arrays, or no memory for the second buffer: qsort. */
void sc_lc_sort(double *x, int64_t n) {
    if (n < 1024) {
        if (n > 1) qsort(x, (size_t)n, sizeof *x, cmp_double);
        return;
    }
    double *tmp = malloc((size_t)n * sizeof *tmp);
    int64_t *cnt = calloc((size_t)RADIX_PASSES * RADIX, sizeof *cnt);
    if (!tmp || !cnt) {
        free(tmp);
        free(cnt);
        qsort(x, (size_t)n, sizeof *x, cmp_double);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const uint64_t k = sort_key(x[i]);
        for (int p = 0; p < RADIX_PASSES; p++) cnt[p * RADIX + (int64_t)((k >> (p * RADIX_BITS)) & (RADIX - 1))]++;
    }
    double *src = x, *dst = tmp;
    for (int p = 0; p < RADIX_PASSES; p++) {
        int64_t *c = cnt + p * RADIX, sum = 0;
        bool one = false;
        for (int d = 0; d < RADIX && !one; d++) one = c[d] == n;
        if (one) continue;
        for (int d = 0; d < RADIX; d++) {
            const int64_t k = c[d];
            c[d] = sum;
            sum += k;
        }
        for (int64_t i = 0; i < n; i++) dst[c[(sort_key(src[i]) >> (p * RADIX_BITS)) & (RADIX - 1)]++] = src[i];
        double *t = src;
        src = dst;
        dst = t;
    }
    if (src != x) memcpy(x, src, (size_t)n * sizeof *x);
    free(tmp);
    free(cnt);
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
