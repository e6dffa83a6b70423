/* x86_attn_body.h - the grouped attention kernel for x86, one body compiled per ISA: gemv_avx2.c
 * (256-bit vectors, two heads' outputs in registers) and gemv_avx512.c (512-bit, four) define the
 * operations below, then include this file after their softmax and their weighted sum of V rows
 * (the pattern of x86_kmi4_body.h).
 *
 * g heads that share K and V (grouped-query attention): head h's query q + h hd, scores s + h n,
 * output out + h hd. Each K and V row is read once for the group (from L1 for the rest): one head at
 * a time read them from L2 for every head, as a GQA cache's 1 KB row stride leaves few L1 sets for
 * them. Every head's sums are the one-head kernel's (g = 1), in the same order.
 *
 * The including file defines:
 *   ATT_GROUP             the function's name
 *   ATT_VEC, ATT_W        the float vector type and its lanes
 *   ATT_MASK, ATT_TAIL(r) a tail mask type and the mask of the first r (0 < r < ATT_W) lanes
 *   ATT_ZERO(), ATT_LOAD(p), ATT_LOADM(m, p), ATT_FMA(a, b, c), ATT_SUM(v)
 *   ATT_SOFTMAX(s, n)     p = softmax(s[0..n)) in place
 *   ATT_PV(out, s, V, n, stride, hd, i0, NH)
 *                         out[h][i0 .. i0 + ATT_SPAN) = sum_t p[h][t] V_t for NH heads
 *   ATT_SPAN, ATT_NH      outputs and heads (2 or 4) one ATT_PV call keeps in registers
 *   ATT_AHEAD             K and V rows ahead of the one being read that are prefetched: the cache
 *                         comes from DRAM or L3 in decode (the layer's weights went through since),
 *                         and a group's loop per row is too long for the out-of-order window to reach
 *                         the next rows' misses by itself */

static void ATT_GROUP(float *out, float *s, const float *q, const float *K, const float *V, int64_t n, int64_t stride,
                      int64_t hd, int64_t g, float scale) {
    const int64_t hw = hd / ATT_W * ATT_W;
    const ATT_MASK tail = ATT_TAIL(hd - hw);
    for (int64_t t = 0; t < n; t++) {
        const float *kr = K + t * stride;
        if (t + ATT_AHEAD < n)
            for (int64_t b = 0; b < hd * 4; b += 64) _mm_prefetch((const char *)(kr + ATT_AHEAD * stride) + b, _MM_HINT_T0);
        for (int64_t h = 0; h < g; h++) {
            const float *qh = q + h * hd;
            ATT_VEC acc = ATT_ZERO();
            for (int64_t i = 0; i < hw; i += ATT_W) acc = ATT_FMA(ATT_LOAD(qh + i), ATT_LOAD(kr + i), acc);
            if (hw < hd) acc = ATT_FMA(ATT_LOADM(tail, qh + hw), ATT_LOADM(tail, kr + hw), acc);
            s[h * n + t] = scale * ATT_SUM(acc);
        }
    }
    for (int64_t h = 0; h < g; h++) ATT_SOFTMAX(s + h * n, n);
    /* out: ATT_SPAN values of up to ATT_NH heads at a time in registers */
    for (int64_t i0 = 0; i0 < hd; i0 += ATT_SPAN)
        for (int64_t h = 0; h < g; h += ATT_NH) {
            float *oh = out + h * hd;
            const float *sh = s + h * n;
            switch (g - h < ATT_NH ? g - h : ATT_NH) {
            case 1: ATT_PV(oh, sh, V, n, stride, hd, i0, 1); break;
#if ATT_NH > 2
            case 2: ATT_PV(oh, sh, V, n, stride, hd, i0, 2); break;
            case 3: ATT_PV(oh, sh, V, n, stride, hd, i0, 3); break;
#endif
            default: ATT_PV(oh, sh, V, n, stride, hd, i0, ATT_NH); break;
            }
        }
}
