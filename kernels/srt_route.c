/* srt_route.c - routing (see srt_route.h). */
#include "srt_route.h"

#include "srt.h"
#include "srt_kern.h"

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

int64_t srt_topk(const float *score, int64_t n, int64_t k, int32_t *idx, void *scratch) {
    (void)scratch;
    if (k <= 0 || n <= 0) return 0;
    if (k > n) k = n;
    /* the runtime's exact O(n) radix selection; int32 and uint32 may alias */
    if (srt_select_topk((uint32_t *)idx, score, n, k, 0) != SRT_OK) return 0;
    return k;
}

int64_t srt_threshold(const float *x, int64_t n, float t, int32_t *idx) {
    if (n <= 0) return 0;
    /* the best kernel for this CPU (the dispatch is frozen once) */
    return srt_kernels_get(srt_isa_best())->compact((uint32_t *)idx, x, NULL, t, n);
}

void srt_score_gate(float *out, const float *a, const float *c, int64_t n) {
    if (c)
        for (int64_t i = 0; i < n; i++) out[i] = fabsf(a[i]) * c[i];
    else
        for (int64_t i = 0; i < n; i++) out[i] = fabsf(a[i]);
}
