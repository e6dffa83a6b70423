/* srt_select.c - exact top-K selection. srt_select_topk dispatches to the kernel table's selection
 * (kernels/x86/select_avx512.c: bisection of the key range with vector counts and compression); the
 * reference here is a radix selection on the float bits, no sort. Its keys are computed once (up to
 * 8192 of them on the stack, more in the caller's workspace); pass 1 histograms their top 11 bits (over
 * two interleaved histograms, so runs of equal buckets do not serialise on one counter); pass 2 keeps the
 * keys of the threshold bucket as candidates (a bounded stack buffer, or n entries of the workspace; if the
 * bounded one overflows, the refinement scans all keys instead); two more histogram passes over the
 * candidates (11 and 10 bits) find the exact k-th key; a last pass collects the winners in ascending index
 * order. */
#include <string.h>

#include "srt_kern.h"

#define CAND_MAX 2048
#define KEYS_MAX 8192 /* up to this n the keys are computed once, on the stack */

/* Key i: from the precomputed array when there is one. */
static inline uint32_t key_at(const uint32_t *keys, const float *score, int64_t i, unsigned flags) {
    return keys ? keys[i] : srt_select_key(score[i], flags);
}

/* Picks the digit whose bucket holds the need-th largest key; updates need
 * to the rank within that bucket. */
static uint32_t pick(const uint32_t *hist, int nb, int64_t *need) {
    int64_t cum = 0;
    int d = nb - 1;
    for (; d > 0; d--) {
        if (cum + hist[d] >= *need) break;
        cum += hist[d];
    }
    *need -= cum;
    return (uint32_t)d;
}

/* The selection proper: kbuf (n entries, or NULL: keys recomputed on every
 * pass) receives the keys; cand holds cand_max + 1 entries. */
static void select_keys(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags, uint32_t *kbuf,
                        uint32_t *cand, int64_t cand_max) {
    uint32_t h2[2][2048], hist[2048], sink;
    const uint32_t *keys = NULL;
    if (kbuf) {
        for (int64_t i = 0; i < n; i++) kbuf[i] = srt_select_key(score[i], flags);
        keys = kbuf;
    }
    memset(h2, 0, sizeof h2);
    int64_t i = 0;
    for (; i + 2 <= n; i += 2) {
        h2[0][key_at(keys, score, i, flags) >> 21]++;
        h2[1][key_at(keys, score, i + 1, flags) >> 21]++;
    }
    for (; i < n; i++) h2[0][key_at(keys, score, i, flags) >> 21]++;
    for (int d = 0; d < 2048; d++) hist[d] = h2[0][d] + h2[1][d];
    int64_t need = k; /* rank of the threshold among keys sharing the prefix */
    uint32_t prefix = pick(hist, 2048, &need) << 21, mask = 0xffe00000u;
    /* candidates: the keys in the threshold bucket. Branch-free (store always, advance on a hit; past
     * cand_max every store lands in the spare last slot): which keys hit changes from call to call, and
     * a mispredicted branch per hit cost more than the pass. */
    int64_t nc = 0;
    for (i = 0; i < n; i++) {
        uint32_t key = key_at(keys, score, i, flags);
        cand[nc < cand_max ? nc : cand_max] = key;
        nc += (key & mask) == prefix;
    }
    static const int shifts[2] = {10, 0}, widths[2] = {11, 10};
    for (int pass = 0; pass < 2; pass++) {
        const int s = shifts[pass], nb = 1 << widths[pass];
        const uint32_t dm = (uint32_t)(nb - 1);
        memset(hist, 0, sizeof(uint32_t) * (size_t)nb);
        if (nc <= cand_max) {
            for (int64_t c = 0; c < nc; c++) hist[(cand[c] >> s) & dm] += (cand[c] & mask) == prefix;
        } else {
            for (i = 0; i < n; i++) {
                uint32_t key = key_at(keys, score, i, flags);
                hist[(key >> s) & dm] += (key & mask) == prefix;
            }
        }
        prefix |= pick(hist, nb, &need) << s;
        mask |= dm << s;
    }
    /* prefix is the k-th largest key: take every larger key and the first
     * `need` keys equal to it. Branch-free as above: about half the keys win,
     * in no pattern a predictor could learn (a mispredicted branch per winner
     * was most of the selection's time in decode). Stores go to idx[m] while
     * m < k and to a sink after, so idx needs only k entries. */
    int64_t m = 0;
    if (need == (int64_t)hist[prefix & 0x3ffu]) { /* no tie split (the last pass's bucket: the keys equal to it) */
        for (i = 0; i < n; i++) {
            *(m < k ? &idx[m] : &sink) = (uint32_t)i;
            m += key_at(keys, score, i, flags) >= prefix;
        }
        return;
    }
    for (i = 0; i < n; i++) {
        uint32_t key = key_at(keys, score, i, flags);
        int64_t eq = key == prefix, take = (key > prefix) | (eq & (need > 0));
        *(m < k ? &idx[m] : &sink) = (uint32_t)i;
        m += take;
        need -= eq & take;
    }
}

void srt_select_radix(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags, uint32_t *ws) {
    if (ws) { /* keys once, and candidates that cannot overflow (3x faster at n = 14336) */
        select_keys(idx, score, n, k, flags, ws, ws + n, n);
        return;
    }
    uint32_t cand[CAND_MAX + 1];
    if (n <= KEYS_MAX) { /* keys and candidates on the stack */
        uint32_t kbuf[KEYS_MAX];
        select_keys(idx, score, n, k, flags, kbuf, cand, CAND_MAX);
    } else { /* keys recomputed on each pass; an overflowing bucket rescans all of them */
        select_keys(idx, score, n, k, flags, NULL, cand, CAND_MAX);
    }
}

srt_status srt_select_topk_kt(const srt_kernels *kt, uint32_t *idx, const float *score, int64_t n, int64_t k,
                              unsigned flags, uint32_t *ws) {
    if (n < 0 || k < 0 || n > UINT32_MAX || (n > 0 && !score) || (k > 0 && !idx)) return SRT_EINVAL;
    if (k == 0) return SRT_OK;
    if (k >= n) {
        for (int64_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
        return SRT_OK;
    }
    if (ws) {
        kt->select_topk(idx, score, n, k, flags, ws);
    } else if (n <= KEYS_MAX) {
        uint32_t w[2 * KEYS_MAX + 1];
        kt->select_topk(idx, score, n, k, flags, w);
    } else {
        srt_select_radix(idx, score, n, k, flags, NULL);
    }
    return SRT_OK;
}

srt_status srt_select_topk_ws(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags, uint32_t *ws) {
    /* the best kernel for this CPU (the dispatch is frozen once; every ISA's selection is exact) */
    return srt_select_topk_kt(srt_kernels_get(srt_isa_best()), idx, score, n, k, flags, ws);
}

srt_status srt_select_topk(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags) {
    return srt_select_topk_ws(idx, score, n, k, flags, NULL);
}
