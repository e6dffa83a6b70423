/* x86_select_body.h - exact top-K selection (srt_select_topk's contract) for x86, one body compiled per
 * ISA: select_avx512.c (16 lanes, mask registers, vpcompressd) and select_avx2.c (8 lanes, a permutation
 * table for the compression) define the vector operations below and include this file (the pattern of
 * x86_kmi4_body.h). Vector counts and compression instead of the reference's scalar histograms: 3x
 * faster at a model's 5,632 neurons, which decode ranks in every layer under CATS and CLAWS.
 *
 * The keys (srt_select_key: order-preserving uint32, NaN lowest) are written once with their minimum and
 * maximum. Then the range [lo, hi] that holds the k-th largest key is halved until it is one key or at
 * most 16 keys remain: a pass counts the keys at or above the midpoint, a second compresses the half that
 * holds the rank into the workspace (in place after the first time), and the range shrinks to that half's
 * own minimum or maximum. The winners are the indices whose key is above the k-th, plus the first keys
 * equal to it in index order, as the reference takes them.
 *
 * The includer defines (masks are unsigned lane bits):
 *   SEL_SFX(name)      symbol suffix
 *   SV, SN             the integer vector type and its 32-bit lanes
 *   SV_LOAD(p, ld)     the lanes ld of p, 0 elsewhere, reading no other lane
 *   SV_GE(v, t, ld)    the lanes of ld where v >= t as unsigned
 *   SV_MINM(a, s, v), SV_MAXM(a, s, v)   a with its lanes s replaced by their unsigned min / max with v
 *   SV_RMIN(a), SV_RMAX(a)               the unsigned min / max of a's lanes
 *   SV_PUT(dst, m, s, v)                 v's lanes s in order to dst[m..), writing nothing else; the new m
 *   SV_STORE(p, ld, v)                   v's lanes ld to p
 *   SV_SET1(x), SV_IOTA (0..SN-1), SV_ADD(a, b), SV_OR, SV_XOR, SV_AND, SV_ANDNOT(a, b) (~a & b),
 *   SV_SRAI31(v) (each lane's sign bit everywhere), SV_GT_SIGNED(a, b) (all-ones lanes) */
#include "../srt_kern.h"

static inline unsigned SEL_SFX(sel_lanes)(int64_t i, int64_t n) {
    return n - i >= SN ? (unsigned)((1ull << SN) - 1) : (unsigned)((1u << (n - i)) - 1);
}

/* srt_select_key on the lanes' float bits */
static inline SV SEL_SFX(sel_keys)(SV u, unsigned flags) {
    const SV sign = SV_SET1(INT32_MIN), absm = SV_SET1(INT32_MAX);
    if (flags & SRT_SELECT_ABS) u = SV_AND(u, absm);
    const SV nan = SV_GT_SIGNED(SV_AND(u, absm), SV_SET1(0x7f800000));
    /* negative: ~u (u has the sign bit); else u with the sign bit set */
    return SV_ANDNOT(nan, SV_XOR(SV_OR(u, sign), SV_SRAI31(u)));
}

static void SEL_SFX(select_topk)(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags,
                                 uint32_t *ws) {
    uint32_t *keys = ws, *buf = ws + n;
    SV vmin = SV_SET1(-1), vmax = SV_SET1(0);
    for (int64_t i = 0; i < n; i += SN) {
        const unsigned ld = SEL_SFX(sel_lanes)(i, n);
        const SV key = SEL_SFX(sel_keys)(SV_LOAD(score + i, ld), flags);
        SV_STORE(keys + i, ld, key);
        vmin = SV_MINM(vmin, ld, key);
        vmax = SV_MAXM(vmax, ld, key);
    }
    /* c[0..nc) are exactly the keys in [lo, hi]; the k-th largest key is the r-th largest of them */
    uint32_t lo = SV_RMIN(vmin), hi = SV_RMAX(vmax);
    const uint32_t *c = keys;
    int64_t nc = n, r = k;
    while (lo < hi && nc > 16) {
        const uint32_t mid = lo + ((hi - lo) >> 1) + 1; /* lo < mid <= hi */
        const SV vm = SV_SET1((int)mid);
        int64_t nu = 0;
        for (int64_t j = 0; j < nc; j += SN) {
            const unsigned ld = SEL_SFX(sel_lanes)(j, nc);
            nu += __builtin_popcount(SV_GE(SV_LOAD(c + j, ld), vm, ld));
        }
        const bool upper = nu >= r;
        SV ext = upper ? SV_SET1(-1) : SV_SET1(0);
        int64_t m = 0;
        for (int64_t j = 0; j < nc; j += SN) { /* into buf; in place once c is buf (m <= j: no entry is
                                                  overwritten before it is read) */
            const unsigned ld = SEL_SFX(sel_lanes)(j, nc);
            const SV v = SV_LOAD(c + j, ld);
            const unsigned ge = SV_GE(v, vm, ld), s = upper ? ge : ld & ~ge;
            ext = upper ? SV_MINM(ext, s, v) : SV_MAXM(ext, s, v);
            m = SV_PUT(buf, m, s, v);
        }
        if (upper) {
            lo = SV_RMIN(ext);
        } else {
            hi = SV_RMAX(ext);
            r -= nu;
        }
        c = buf, nc = m;
    }
    /* the k-th largest key t; need: how many keys equal to t win; eq: how many there are */
    uint32_t t = lo;
    int64_t need = r, eq = nc;
    if (lo < hi) { /* at most 16 keys left: rank them by counting */
        for (int64_t a = 0; a < nc; a++) {
            int64_t gt = 0, ge = 0;
            for (int64_t b = 0; b < nc; b++) gt += c[b] > c[a], ge += c[b] >= c[a];
            if (gt < r && ge >= r) {
                t = c[a], need = r - gt, eq = ge - gt;
                break;
            }
        }
    }
    if (need == eq) { /* every key >= t wins: k of them */
        const SV vt = SV_SET1((int)t);
        SV iota = SV_IOTA;
        int64_t m = 0;
        for (int64_t i = 0; i < n; i += SN) {
            const unsigned ld = SEL_SFX(sel_lanes)(i, n);
            m = SV_PUT(idx, m, SV_GE(SV_LOAD(keys + i, ld), vt, ld), iota);
            iota = SV_ADD(iota, SV_SET1(SN));
        }
        return;
    }
    /* a tie split at t: the keys above it and the first `need` equal to it, in index order (the
     * reference's branch-free loop) */
    uint32_t sink;
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        const uint32_t key = keys[i];
        const int64_t e = key == t, take = (key > t) | (e & (need > 0));
        *(m < k ? &idx[m] : &sink) = (uint32_t)i;
        m += take;
        need -= e & take;
    }
}
