/* permute.c - neuron orders for `pack --permute` (see permute.h). */
#include "permute.h"

#include <stdlib.h>
#include <string.h>

#include "cats.h"
#include "claws.h"
#include "coact.h"
#include "method.h"

static const double *g_key;
static int cmp_activity(const void *a, const void *b) {
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    if (g_key[i] != g_key[j]) return g_key[i] > g_key[j] ? -1 : 1;
    return i < j ? -1 : (i > j);
}

static sc_status activity_order(const sc_calib *c, int64_t layer, int64_t F, uint32_t *perm, sc_err *err) {
    const double *key = NULL;
    /* the first of the file's methods that measured the layer's activity sum |phi(u_j)| */
    const sc_method *cats = sc_method_find("cats"), *claws = sc_method_find("claws");
    for (int i = 0; c && i < c->n_entries && !key; i++) {
        const sc_method *me = c->entries[i].method;
        void *state = c->entries[i].state;
        key = me == cats ? sc_cats_activity(state, layer) : me == claws ? sc_claws_den(state, layer) : NULL;
    }
    if (!key)
        return sc_errf(err, SC_EARG, "--permute: the calibration holds no co-activation sample or neuron activity "
                                     "for layer %lld (compute --method coact, cats or claws on all layers)", (long long)layer);
    for (int64_t j = 0; j < F; j++) perm[j] = (uint32_t)j;
    g_key = key;
    qsort(perm, (size_t)F, sizeof *perm, cmp_activity);
    return SC_OK;
}

sc_status sc_coact_order(const uint64_t *bits, int64_t rows, int64_t words, int64_t F, int window, uint32_t *perm,
                         sc_err *err) {
    if (F <= 0 || rows < 0 || words * 64 < F || window < 1)
        return sc_errf(err, SC_EARG, "coact order: bad sample shape (%lld rows of %lld words for %lld neurons)",
                       (long long)rows, (long long)words, (long long)F);
    int64_t T = (rows + 63) / 64; /* words per neuron column */
    uint64_t *col = calloc((size_t)(F * (T ? T : 1)), sizeof *col);
    int64_t *cnt = calloc((size_t)F, sizeof *cnt);
    double *acc = calloc((size_t)F, sizeof *acc), *ring = calloc((size_t)window * (size_t)F, sizeof *ring);
    unsigned char *placed = calloc((size_t)F, 1);
    sc_status st = SC_OK;
    if (!col || !cnt || !acc || !ring || !placed) {
        st = sc_errf(err, SC_ENOMEM, "coact order: out of memory for %lld neurons x %lld tokens", (long long)F,
                     (long long)rows);
        goto done;
    }
    /* transpose: neuron j's column is a bitvector over the sampled tokens */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < F; j++)
            if (bits[r * words + j / 64] >> (j % 64) & 1) col[j * T + r / 64] |= (uint64_t)1 << (r % 64);
    for (int64_t j = 0; j < F; j++)
        for (int64_t w = 0; w < T; w++) cnt[j] += __builtin_popcountll(col[j * T + w]);
    int64_t n = 0;
    for (; n < F; n++) {
        int64_t best = -1;
        for (int64_t j = 0; j < F; j++) {
            if (placed[j] || cnt[j] == 0) continue;
            if (best < 0 || acc[j] > acc[best] || (acc[j] == acc[best] && cnt[j] > cnt[best])) best = j;
        }
        if (best < 0) break; /* only never-live neurons remain */
        perm[n] = (uint32_t)best;
        placed[best] = 1;
        /* the oldest window member leaves, the new one enters */
        double *slot = ring + (size_t)(n % window) * (size_t)F;
        if (n >= window)
            for (int64_t j = 0; j < F; j++) acc[j] -= slot[j];
        const uint64_t *cb = col + best * T;
        for (int64_t j = 0; j < F; j++) {
            slot[j] = 0.0;
            if (placed[j] || cnt[j] == 0) continue;
            const uint64_t *cj = col + j * T;
            int64_t co = 0;
            for (int64_t w = 0; w < T; w++) co += __builtin_popcountll(cb[w] & cj[w]);
            slot[j] = (double)co / (double)(cnt[best] + cnt[j] - co);
            acc[j] += slot[j];
        }
    }
    for (int64_t j = 0; j < F; j++)
        if (!placed[j]) perm[n++] = (uint32_t)j;
done:
    free(col);
    free(cnt);
    free(acc);
    free(ring);
    free(placed);
    return st;
}

sc_status sc_neuron_order(const sc_calib *c, int64_t layer, int64_t F, uint32_t *perm, const char **how, sc_err *err) {
    const void *st8 = c ? sc_calib_state(c, "coact") : NULL;
    const uint64_t *bits;
    int64_t rows, words;
    if (st8 && sc_coact_sample(st8, layer, &bits, &rows, &words) && rows > 0) {
        if (words != (F + 63) / 64)
            return sc_errf(err, SC_EARG, "--permute: the coact sample of layer %lld is for another D_ffn",
                           (long long)layer);
        *how = "coact";
        return sc_coact_order(bits, rows, words, F, 4, perm, err);
    }
    *how = "activity";
    return activity_order(c, layer, F, perm, err);
}
