/* tok_bpe.c - BPE by merge rank: the merge table, and encoding of one word
 * (lowest rank first, leftmost on ties). Short words use a cached-rank scan;
 * long ones (SentencePiece-style files give whole segments as one word) a
 * heap with stale-entry checks, so the cost stays O(n log n). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tok_bpe.h"

typedef struct tok_bpe {
    tok_bpe_cfg cfg;
    uint64_t *mkey; /* (left << 32 | right) + 1; 0 = empty slot */
    uint32_t *mrank;
    int32_t *mid;
    uint64_t mmask;
} tok_bpe;

static void bpe_free(void *p) {
    tok_bpe *b = p;
    if (!b) return;
    tok_cfg_free(&b->cfg);
    free(b->mkey);
    free(b->mrank);
    free(b->mid);
    free(b);
}

static inline uint64_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* Rank and result of merging (l, r); false when they do not merge. */
static inline bool merge_find(const tok_bpe *b, int32_t l, int32_t r, uint32_t *rank, int32_t *id) {
    uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    for (uint64_t h = pair_hash(key) & b->mmask;; h = (h + 1) & b->mmask) {
        uint64_t k = b->mkey[h];
        if (k == 0) return false;
        if (k == key) {
            *rank = b->mrank[h];
            *id = b->mid[h];
            return true;
        }
    }
}

sc_status tok_bpe_attach(sc_tokenizer *t, const char *what, tok_bpe_cfg *cfg, size_t n_merges, sc_err *err) {
    tok_bpe *b = calloc(1, sizeof *b);
    if (!b) {
        tok_cfg_free(cfg);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    }
    b->cfg = *cfg;
    cfg->n_norm = cfg->n_pre = 0;
    if (t->ops->free_impl) t->ops->free_impl(t->impl);
    t->ops = &tok_bpe_ops;
    t->impl = b;
    if (n_merges > (size_t)1 << 26) return sc_errf(err, SC_EFORMAT, "%s: %zu merges is too many", what, n_merges);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n_merges) cap <<= 1;
    b->mkey = calloc(cap, sizeof *b->mkey);
    b->mrank = malloc(cap * sizeof *b->mrank);
    b->mid = malloc(cap * sizeof *b->mid);
    if (!b->mkey || !b->mrank || !b->mid) return sc_errf(err, SC_ENOMEM, "%s: out of memory for %zu merges", what, n_merges);
    b->mmask = cap - 1;
    return SC_OK;
}

sc_status tok_bpe_add_merge(sc_tokenizer *t, const char *what, size_t rank, const char *a, size_t na, const char *bs,
                            size_t nb, sc_err *err) {
    tok_bpe *b = t->impl;
    int32_t l = tok_lookup(t, a, na), r = tok_lookup(t, bs, nb);
    if (l < 0 || r < 0)
        return sc_errf(err, SC_EFORMAT, "%s: merge %zu names a token that is not in the vocabulary ('%.*s')", what, rank,
                       (int)(l < 0 ? (na > 40 ? 40 : na) : (nb > 40 ? 40 : nb)), l < 0 ? a : bs);
    if (na + nb > TOK_MAX_PIECE) return sc_errf(err, SC_EFORMAT, "%s: merge %zu is too long", what, rank);
    char stackbuf[256];
    char *cat = na + nb <= sizeof stackbuf ? stackbuf : malloc(na + nb);
    if (!cat) return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    memcpy(cat, a, na);
    memcpy(cat + na, bs, nb);
    int32_t id = tok_lookup(t, cat, na + nb);
    if (cat != stackbuf) free(cat);
    if (id < 0)
        return sc_errf(err, SC_EFORMAT, "%s: merge %zu ('%.*s' + '%.*s') makes a token that is not in the vocabulary",
                       what, rank, (int)(na > 40 ? 40 : na), a, (int)(nb > 40 ? 40 : nb), bs);
    uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1;
    for (uint64_t h = pair_hash(key) & b->mmask;; h = (h + 1) & b->mmask) {
        if (b->mkey[h] == key) return SC_OK; /* a repeated pair keeps its first rank */
        if (b->mkey[h] == 0) {
            if (rank > UINT32_MAX) return sc_errf(err, SC_EFORMAT, "%s: too many merges", what);
            b->mkey[h] = key;
            b->mrank[h] = (uint32_t)rank;
            b->mid[h] = id;
            return SC_OK;
        }
    }
}

const tok_bpe_cfg *tok_bpe_config(const sc_tokenizer *t) {
    return t->ops == &tok_bpe_ops && t->impl ? &((const tok_bpe *)t->impl)->cfg : NULL;
}

typedef struct ranked_pair {
    uint32_t rank;
    int32_t l, r;
} ranked_pair;

static int cmp_rank(const void *a, const void *b) {
    uint32_t x = ((const ranked_pair *)a)->rank, y = ((const ranked_pair *)b)->rank;
    return x < y ? -1 : x > y;
}

sc_status tok_bpe_merges(const sc_tokenizer *t, int32_t **pairs, size_t *n, sc_err *err) {
    *pairs = NULL;
    *n = 0;
    const tok_bpe *b = t->ops == &tok_bpe_ops ? t->impl : NULL;
    if (!b || !b->mkey) return SC_OK;
    size_t count = 0;
    for (uint64_t h = 0; h <= b->mmask; h++) count += b->mkey[h] != 0;
    if (count == 0) return SC_OK;
    ranked_pair *v = malloc(count * sizeof *v);
    int32_t *out = malloc(2 * count * sizeof *out);
    if (!v || !out) {
        free(v);
        free(out);
        return sc_errf(err, SC_ENOMEM, "tokenizer: out of memory for %zu merges", count);
    }
    size_t k = 0;
    for (uint64_t h = 0; h <= b->mmask; h++) {
        uint64_t key = b->mkey[h];
        if (key == 0) continue;
        key -= 1;
        v[k++] = (ranked_pair){b->mrank[h], (int32_t)(uint32_t)(key >> 32), (int32_t)(uint32_t)key};
    }
    qsort(v, count, sizeof *v, cmp_rank); /* ranks are distinct: one pair each */
    for (size_t i = 0; i < count; i++) {
        out[2 * i] = v[i].l;
        out[2 * i + 1] = v[i].r;
    }
    free(v);
    *pairs = out;
    *n = count;
    return SC_OK;
}

/* ---- one word ---- */

typedef struct wsym {
    int32_t id, prev, next;
    uint32_t version;
} wsym;

typedef struct wcand {
    uint32_t rank;
    int32_t left;
    uint32_t vl, vr;
} wcand;

typedef struct bpe_scratch {
    int32_t *ids;
    uint32_t *ranks;
    wsym *syms;
    wcand *heap;
    size_t cap, hcap, hn;
} bpe_scratch;

static bool scratch_reserve(bpe_scratch *s, size_t n) {
    if (n <= s->cap) return true;
    size_t nc = s->cap ? s->cap : 64;
    while (nc < n) nc *= 2;
    int32_t *ids = realloc(s->ids, nc * sizeof *ids);
    if (ids) s->ids = ids;
    uint32_t *ranks = realloc(s->ranks, nc * sizeof *ranks);
    if (ranks) s->ranks = ranks;
    wsym *syms = realloc(s->syms, nc * sizeof *syms);
    if (syms) s->syms = syms;
    if (!ids || !ranks || !syms) return false;
    s->cap = nc;
    return true;
}

static bool wc_before(const wcand *a, const wcand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static bool heap_push(bpe_scratch *s, wcand c) {
    if (s->hn == s->hcap) {
        size_t nc = s->hcap ? s->hcap * 2 : 64;
        wcand *p = realloc(s->heap, nc * sizeof *p);
        if (!p) return false;
        s->heap = p;
        s->hcap = nc;
    }
    size_t i = s->hn++;
    s->heap[i] = c;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!wc_before(&s->heap[i], &s->heap[up])) break;
        wcand t = s->heap[i];
        s->heap[i] = s->heap[up];
        s->heap[up] = t;
        i = up;
    }
    return true;
}

static wcand heap_pop(bpe_scratch *s) {
    wcand top = s->heap[0];
    s->heap[0] = s->heap[--s->hn];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < s->hn && wc_before(&s->heap[l], &s->heap[best])) best = l;
        if (r < s->hn && wc_before(&s->heap[r], &s->heap[best])) best = r;
        if (best == i) break;
        wcand t = s->heap[i];
        s->heap[i] = s->heap[best];
        s->heap[best] = t;
        i = best;
    }
    return top;
}

static bool push_pair(const tok_bpe *b, bpe_scratch *s, int32_t a) {
    int32_t c = s->syms[a].next;
    uint32_t rank;
    int32_t id;
    if (a < 0 || c < 0 || !merge_find(b, s->syms[a].id, s->syms[c].id, &rank, &id)) return true;
    wcand w = {rank, a, s->syms[a].version, s->syms[c].version};
    return heap_push(s, w);
}

/* Merges ids[0..n) in place; returns the new count (SIZE_MAX when out of memory). */
static size_t merge_long(const tok_bpe *b, bpe_scratch *s, size_t n) {
    for (size_t k = 0; k < n; k++) s->syms[k] = (wsym){s->ids[k], (int32_t)k - 1, k + 1 < n ? (int32_t)k + 1 : -1, 0};
    s->hn = 0;
    for (size_t k = 0; k + 1 < n; k++)
        if (!push_pair(b, s, (int32_t)k)) return SIZE_MAX;
    while (s->hn > 0) {
        wcand c = heap_pop(s);
        wsym *a = &s->syms[c.left];
        if (a->version != c.vl || a->next < 0) continue;
        wsym *r = &s->syms[a->next];
        if (r->version != c.vr) continue;
        uint32_t rank;
        int32_t id;
        if (!merge_find(b, a->id, r->id, &rank, &id) || rank != c.rank) continue;
        a->id = id;
        a->version++;
        r->version++;
        r->id = -1;
        a->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = c.left;
        if ((a->prev >= 0 && !push_pair(b, s, a->prev)) || !push_pair(b, s, c.left)) return SIZE_MAX;
    }
    size_t o = 0;
    for (int32_t k = 0; k >= 0; k = s->syms[k].next) s->ids[o++] = s->syms[k].id;
    return o;
}

/* The same for short words: ranks of adjacent pairs cached, scan for the best. */
static size_t merge_short(const tok_bpe *b, bpe_scratch *s, size_t n) {
    int32_t *ids = s->ids;
    uint32_t *rk = s->ranks; /* rk[k]: rank of (ids[k], ids[k + 1]) */
    int32_t dummy;
    for (size_t k = 0; k + 1 < n; k++)
        if (!merge_find(b, ids[k], ids[k + 1], &rk[k], &dummy)) rk[k] = UINT32_MAX;
    while (n > 1) {
        size_t best = 0;
        for (size_t k = 1; k + 1 < n; k++)
            if (rk[k] < rk[best]) best = k;
        if (rk[best] == UINT32_MAX) break;
        uint32_t r;
        int32_t id = -1;
        merge_find(b, ids[best], ids[best + 1], &r, &id);
        ids[best] = id;
        size_t tail = n - best - 2; /* symbols after the pair */
        memmove(ids + best + 1, ids + best + 2, tail * sizeof *ids);
        if (tail > 0) memmove(rk + best + 1, rk + best + 2, (tail - 1) * sizeof *rk);
        n--;
        if (best + 1 < n && !merge_find(b, ids[best], ids[best + 1], &rk[best], &dummy)) rk[best] = UINT32_MAX;
        if (best > 0 && !merge_find(b, ids[best - 1], ids[best], &rk[best - 1], &dummy)) rk[best - 1] = UINT32_MAX;
    }
    return n;
}

static sc_status encode_word(const sc_tokenizer *t, const tok_bpe *b, bpe_scratch *s, const char *w, size_t n,
                             sc_tokens *out, sc_err *err) {
    if (b->cfg.ignore_merges) {
        int32_t id = tok_lookup(t, w, n);
        if (id >= 0) return sc_tokens_push(out, id) ? sc_errf(err, SC_ENOMEM, "encode: out of memory") : SC_OK;
    }
    if (!scratch_reserve(s, n + 1)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    size_t m = 0;
    bool last_unk = false;
    for (size_t i = 0; i < n;) {
        size_t l = b->cfg.byte_level ? 1 : tok_utf8_len(w + i, n - i);
        int32_t id = b->cfg.byte_level ? t->raw_byte[(uint8_t)w[i]] : tok_lookup(t, w + i, l);
        if (id >= 0) {
            s->ids[m++] = id;
            last_unk = false;
        } else {
            bool bytes = b->cfg.byte_fallback;
            for (size_t k = 0; bytes && k < l; k++) bytes = t->byte_id[(uint8_t)w[i + k]] >= 0;
            if (bytes) {
                for (size_t k = 0; k < l; k++) s->ids[m++] = t->byte_id[(uint8_t)w[i + k]];
                last_unk = false;
            } else if (t->unk >= 0) {
                if (!(b->cfg.fuse_unk && last_unk)) s->ids[m++] = t->unk;
                last_unk = true;
            } /* no token and no <unk>: the character is dropped, as Hugging Face does */
        }
        i += l;
    }
    if (m > 1) m = m <= 48 ? merge_short(b, s, m) : merge_long(b, s, m);
    if (m == SIZE_MAX) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    for (size_t k = 0; k < m; k++)
        if (sc_tokens_push(out, s->ids[k])) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    return SC_OK;
}

static sc_status bpe_encode(const sc_tokenizer *t, const char *text, size_t len, unsigned seg, sc_tokens *out,
                            sc_err *err) {
    const tok_bpe *b = t->impl;
    tok_work w = {0};
    bpe_scratch s = {0};
    sc_status st = tok_pipeline_run(&b->cfg, text, len, seg, &w, err);
    /* SentencePiece-style files give whole segments as words: cut them where
     * no merge can reach across (not with ignore_merges, which looks at
     * whole words) */
    bool cut = !b->cfg.byte_level && !b->cfg.ignore_merges && t->cut_meta;
    for (size_t k = 0; st == SC_OK && k < w.n; k++) {
        const char *word = w.buf.p + w.sp[k].off;
        size_t n = w.sp[k].len;
        if (!cut) {
            st = encode_word(t, b, &s, word, n, out, err);
            continue;
        }
        for (size_t a = 0, e; st == SC_OK && a < n; a = e) {
            e = tok_next_cut(word, n, a, true);
            st = encode_word(t, b, &s, word + a, e - a, out, err);
        }
    }
    tok_work_free(&w);
    free(s.ids);
    free(s.ranks);
    free(s.syms);
    free(s.heap);
    return st;
}

const tok_ops tok_bpe_ops = {bpe_encode, bpe_free};
