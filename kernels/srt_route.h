/* srt_route.h - neuron routing: the one implementation of "which neurons
 * are live for this token" that both the reference evaluator (sparsecal
 * eval) and the runtime execute. Live lists are ascending neuron indices. */
#ifndef SRT_ROUTE_H
#define SRT_ROUTE_H

#include <stdint.h>

typedef enum srt_router {
    SRT_ROUTER_DENSE = 0,     /* every neuron */
    SRT_ROUTER_CATS,          /* top-K of |phi(u_j)| */
    SRT_ROUTER_CATS_THRESHOLD,/* |phi(u_j)| > t (per layer) */
    SRT_ROUTER_CLAWS,         /* top-K of |phi(u_j)| * c_j */
    SRT_ROUTER_ORACLE,        /* top-K of |h_j| (an upper bound for any neuron router) */
    SRT_ROUTER_GRIFFIN,       /* a fixed top-K set chosen from the prompt (s_j) */
    SRT_ROUTER_COUNT
} srt_router;

const char *srt_router_name(srt_router r);
/* Returns the router with that name, or -1. */
int srt_router_from_name(const char *name);

/* K = round(density * n), clamped to [0, n]. */
int64_t srt_topk_count(double density, int64_t n);

/* Exact top-K by value in O(n) (the runtime's radix selection,
 * srt_select_topk): writes the indices of the k largest score[i] to idx in
 * ascending index order and returns k. Ties at the boundary go to the lower
 * index; NaN ranks lowest. scratch is unused (kept for callers' buffers). */
int64_t srt_topk(const float *score, int64_t n, int64_t k, int32_t *idx, void *scratch);

/* Threshold compaction with the best compaction kernel for this CPU:
 * indices with |x[i]| > t, ascending; returns the count. */
int64_t srt_threshold(const float *x, int64_t n, float t, int32_t *idx);

/* Router scores for one token: out[j] = |a[j]| * (c ? c[j] : 1). */
void srt_score_gate(float *out, const float *a, const float *c, int64_t n);

#endif
