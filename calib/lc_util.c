/* lc_util.c - see lc_util.h. */
#include "lc_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Finds "key=" at the start of an item; returns the value's start or NULL. */
static const char *find_value(const char *params, const char *key, size_t *len) {
    if (!params) return NULL;
    size_t kl = strlen(key);
    const char *p = params;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > kl && strncmp(p, key, kl) == 0 && p[kl] == '=') {
            *len = n - kl - 1;
            return p + kl + 1;
        }
        if (!end) break;
        p = end + 1;
    }
    return NULL;
}

bool sc_lc_param_has(const char *params, const char *key) {
    size_t n;
    return find_value(params, key, &n) != NULL;
}

sc_status sc_lc_param(const char *params, const char *key, double def, double lo, double hi, double *out,
                      const char *who, sc_err *err) {
    size_t n;
    const char *v = find_value(params, key, &n);
    *out = def;
    if (!v) return SC_OK;
    char buf[64];
    if (n == 0 || n >= sizeof buf) return sc_errf(err, SC_EARG, "%s: parameter %s has no usable value", who, key);
    memcpy(buf, v, n);
    buf[n] = '\0';
    char *end;
    double x = strtod(buf, &end);
    if (end == buf || *end || !isfinite(x) || x < lo || x > hi)
        return sc_errf(err, SC_EARG, "%s: parameter %s=%s is not a number in [%g, %g]", who, key, buf, lo, hi);
    *out = x;
    return SC_OK;
}

/* Whether the n-byte key is an item of the comma-separated list. */
static bool in_list(const char *list, const char *key, size_t n) {
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        if (l == n && strncmp(p, key, n) == 0) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

sc_status sc_params_check(const char *params, const char *known, const char *who, sc_err *err) {
    for (const char *p = params; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        size_t kl = eq ? (size_t)(eq - p) : n;
        if (!eq || kl == 0)
            return sc_errf(err, SC_EARG, "%s: --params item '%.*s' is not key=value", who, (int)(n < 64 ? n : 64), p);
        if (!in_list(known, p, kl))
            return sc_errf(err, SC_EARG, "%s: unknown key '%.*s' (known: %s)", who, (int)(kl < 64 ? kl : 64), p,
                           known && *known ? known : "none");
        for (const char *q = end ? end + 1 : NULL; q && *q;) { /* the same key again */
            const char *qe = strchr(q, ',');
            size_t qn = qe ? (size_t)(qe - q) : strlen(q);
            if (qn > kl && strncmp(q, p, kl) == 0 && q[kl] == '=')
                return sc_errf(err, SC_EARG, "%s: parameter '%.*s' is given twice", who, (int)(kl < 64 ? kl : 64), p);
            q = qe ? qe + 1 : NULL;
        }
        if (!end) break;
        p = end + 1;
    }
    return SC_OK;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double sc_lc_quantile_sorted(double *x, int64_t n, double q) {
    if (n <= 0) return 0.0;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)floor(pos);
    if (i < 0) i = 0;
    if (i >= n - 1) return x[n - 1];
    double f = pos - (double)i;
    return x[i] + f * (x[i + 1] - x[i]);
}
