/* srt_route.c - routing (see srt_route.h). */
#include "srt_route.h"

#include <math.h>
#include <string.h>

static const char *names[SRT_ROUTER_COUNT] = {"dense", "cats", "cats-threshold", "claws", "oracle", "griffin"};

const char *srt_router_name(srt_router r) { return (unsigned)r < SRT_ROUTER_COUNT ? names[r] : "?"; }

int srt_router_from_name(const char *name) {
    for (int i = 0; i < SRT_ROUTER_COUNT; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

int64_t srt_topk_count(double density, int64_t n) {
    if (!(density > 0)) return 0;
    if (density >= 1) return n;
    int64_t k = (int64_t)llround(density * (double)n);
    return k < 0 ? 0 : (k > n ? n : k);
}

/* Order: larger value first; equal values by lower index first. NaN sorts last. */
static inline int before(float va, int32_t ia, float vb, int32_t ib) {
    if (va != vb) {
        if (va != va) return 0; /* NaN */
        if (vb != vb) return 1;
        return va > vb;
    }
    return ia < ib;
}

int64_t srt_topk(const float *score, int64_t n, int64_t k, int32_t *idx, void *scratch) {
    if (k <= 0 || n <= 0) return 0;
    if (k >= n) {
        for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)i;
        return n;
    }
    float *v = scratch;
    int32_t *ix = (int32_t *)(v + n);
    for (int64_t i = 0; i < n; i++) {
        v[i] = score[i];
        ix[i] = (int32_t)i;
    }
    /* quickselect on (value, index) pairs until the first k hold the top k */
    int64_t lo = 0, hi = n - 1;
    uint64_t state = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (lo < hi) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        int64_t p = lo + (int64_t)(state % (uint64_t)(hi - lo + 1));
        float pv = v[p];
        int32_t pi = ix[p];
        /* three-way partition is unnecessary: (value, index) keys are distinct */
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (before(v[i], ix[i], pv, pi)) i++;
            while (before(pv, pi, v[j], ix[j])) j--;
            if (i <= j) {
                float tv = v[i];
                v[i] = v[j];
                v[j] = tv;
                int32_t ti = ix[i];
                ix[i] = ix[j];
                ix[j] = ti;
                i++;
                j--;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
    /* position k-1 now holds the k-th key: one ascending pass emits every
     * index whose key is not after it (exactly k of them) */
    float kv = v[k - 1];
    int32_t ki = ix[k - 1];
    int64_t m = 0;
    for (int64_t t = 0; t < n && m < k; t++)
        if (t == ki || before(score[t], (int32_t)t, kv, ki)) idx[m++] = (int32_t)t;
    return m;
}

int64_t srt_threshold(const float *x, int64_t n, float t, int32_t *idx) {
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        idx[m] = (int32_t)i;
        m += fabsf(x[i]) > t;
    }
    return m;
}

void srt_score_gate(float *out, const float *a, const float *c, int64_t n) {
    if (c)
        for (int64_t i = 0; i < n; i++) out[i] = fabsf(a[i]) * c[i];
    else
        for (int64_t i = 0; i < n; i++) out[i] = fabsf(a[i]);
}
