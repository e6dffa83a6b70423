/* tokenizer.c - SentencePiece-style BPE-by-score tokenizer (llama2.c rules). */
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sc_tokenizer {
    int64_t n;
    char **pieces;  /* NUL-terminated copies (spaces as ' ') */
    uint32_t *lens;
    float *scores;
    int32_t *types;
    int32_t bos, eos, unk;
    int32_t byte_id[256]; /* id of the <0xXX> piece, -1 if absent */
    uint32_t max_len;
    /* open-addressing hash: piece -> id */
    int32_t *slots;
    uint64_t mask;
    char kind[16];
};

sc_status sc_tokens_push(sc_tokens *t, int32_t id) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 64;
        int32_t *p = realloc(t->ids, nc * sizeof *p);
        if (!p) return SC_ENOMEM;
        t->ids = p;
        t->cap = nc;
    }
    t->ids[t->n++] = id;
    return SC_OK;
}

void sc_tokens_free(sc_tokens *t) {
    if (!t) return;
    free(t->ids);
    t->ids = NULL;
    t->n = t->cap = 0;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

static int32_t lookup(const sc_tokenizer *t, const char *s, size_t n) {
    uint64_t i = hash_bytes(s, n) & t->mask;
    for (;;) {
        int32_t id = t->slots[i];
        if (id < 0) return -1;
        if (t->lens[id] == n && memcmp(t->pieces[id], s, n) == 0) return id;
        i = (i + 1) & t->mask;
    }
}

void sc_tokenizer_free(sc_tokenizer *t) {
    if (!t) return;
    if (t->pieces)
        for (int64_t i = 0; i < t->n; i++) free(t->pieces[i]);
    free(t->pieces);
    free(t->lens);
    free(t->scores);
    free(t->types);
    free(t->slots);
    free(t);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Returns the byte value if piece is exactly "<0xXX>", else -1. */
static int byte_piece(const char *p, size_t n) {
    if (n != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
    int hi = hexval(p[3]), lo = hexval(p[4]);
    return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

sc_status sc_tokenizer_from_pieces(const char *what, const char *const *pieces, const size_t *lens,
                                   const float *scores, const int32_t *types, int64_t n, int32_t bos,
                                   int32_t eos, int32_t unk, bool sp_space, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    if (n <= 0 || n > ((int64_t)1 << 22))
        return sc_errf(err, SC_EFORMAT, "%s: vocabulary size %lld is out of range", what, (long long)n);
    if (bos >= n || eos >= n || unk >= n)
        return sc_errf(err, SC_EFORMAT, "%s: special token id beyond the vocabulary (%lld)", what, (long long)n);
    sc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    t->n = n;
    t->bos = bos;
    t->eos = eos;
    t->unk = unk;
    snprintf(t->kind, sizeof t->kind, "%s", "sentencepiece");
    t->pieces = calloc((size_t)n, sizeof *t->pieces);
    t->lens = calloc((size_t)n, sizeof *t->lens);
    t->scores = calloc((size_t)n, sizeof *t->scores);
    t->types = calloc((size_t)n, sizeof *t->types);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n) cap <<= 1;
    t->slots = malloc(cap * sizeof *t->slots);
    t->mask = cap - 1;
    if (!t->pieces || !t->lens || !t->scores || !t->types || !t->slots) {
        sc_tokenizer_free(t);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory for %lld tokens", what, (long long)n);
    }
    memset(t->slots, 0xff, cap * sizeof *t->slots);
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    for (int64_t i = 0; i < n; i++) {
        size_t len = lens[i];
        if (len > 65536) {
            sc_tokenizer_free(t);
            return sc_errf(err, SC_EFORMAT, "%s: token %lld is %zu bytes long", what, (long long)i, len);
        }
        char *p = malloc(len + 1);
        if (!p) {
            sc_tokenizer_free(t);
            return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
        }
        size_t o = 0;
        for (size_t k = 0; k < len; k++) {
            const uint8_t *s = (const uint8_t *)pieces[i];
            if (sp_space && k + 2 < len && s[k] == 0xE2 && s[k + 1] == 0x96 && s[k + 2] == 0x81) {
                p[o++] = ' ';
                k += 2;
            } else {
                p[o++] = (char)s[k];
            }
        }
        p[o] = '\0';
        t->pieces[i] = p;
        t->lens[i] = (uint32_t)o;
        if (o > t->max_len) t->max_len = (uint32_t)o;
        t->scores[i] = scores ? scores[i] : 0.0f;
        int32_t ty = types ? types[i] : SC_TOKTYPE_NORMAL;
        int b = byte_piece(p, o);
        if (!types && b >= 0) ty = SC_TOKTYPE_BYTE;
        if (!types && (i == bos || i == eos)) ty = SC_TOKTYPE_CONTROL;
        if (!types && i == unk) ty = SC_TOKTYPE_UNKNOWN;
        t->types[i] = ty;
        if (b >= 0 && t->byte_id[b] < 0) t->byte_id[b] = (int32_t)i;
        /* insert (first id wins for duplicate pieces) */
        uint64_t h = hash_bytes(p, o) & t->mask;
        for (;;) {
            int32_t id = t->slots[h];
            if (id < 0) {
                t->slots[h] = (int32_t)i;
                break;
            }
            if (t->lens[id] == o && memcmp(t->pieces[id], p, o) == 0) break;
            h = (h + 1) & t->mask;
        }
    }
    *out = t;
    return SC_OK;
}

sc_status sc_tokenizer_load_llama2c(const char *path, int64_t vocab_size, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    if (vocab_size <= 0 || vocab_size > ((int64_t)1 << 22))
        return sc_errf(err, SC_EARG, "%s: vocabulary size %lld is out of range", path, (long long)vocab_size);
    sc_file_map map;
    SC_TRY(sc_map_file(path, &map, err));
    sc_status st = SC_OK;
    const char **pieces = calloc((size_t)vocab_size, sizeof *pieces);
    size_t *lens = calloc((size_t)vocab_size, sizeof *lens);
    float *scores = calloc((size_t)vocab_size, sizeof *scores);
    if (!pieces || !lens || !scores) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t off = 4; /* int max_token_length, unused beyond a sanity check */
    if (map.size < 4) {
        st = sc_errf(err, SC_EFORMAT, "%s: truncated header", path);
        goto done;
    }
    int32_t max_len = (int32_t)sc_le32(map.data);
    if (max_len <= 0 || max_len > 65536) {
        st = sc_errf(err, SC_EFORMAT, "%s: max_token_length = %d is out of range", path, max_len);
        goto done;
    }
    for (int64_t i = 0; i < vocab_size; i++) {
        if (map.size - off < 8) {
            st = sc_errf(err, SC_EFORMAT, "%s: truncated at token %lld of %lld (offset %zu)", path, (long long)i,
                         (long long)vocab_size, off);
            goto done;
        }
        scores[i] = sc_lef32(map.data + off);
        int32_t len = (int32_t)sc_le32(map.data + off + 4);
        off += 8;
        if (len < 0 || len > max_len || (size_t)len > map.size - off) {
            st = sc_errf(err, SC_EFORMAT, "%s: token %lld: length %d is invalid (max %d, %zu bytes left)", path,
                         (long long)i, len, max_len, map.size - off);
            goto done;
        }
        pieces[i] = (const char *)(map.data + off);
        lens[i] = (size_t)len;
        off += (size_t)len;
    }
    st = sc_tokenizer_from_pieces(path, pieces, lens, scores, NULL, vocab_size, vocab_size > 1 ? 1 : -1,
                                  vocab_size > 2 ? 2 : -1, 0, false, out, err);
done:
    free(pieces);
    free(lens);
    free(scores);
    sc_unmap_file(&map);
    return st;
}

int64_t sc_tokenizer_vocab_size(const sc_tokenizer *t) { return t->n; }
int32_t sc_tokenizer_bos(const sc_tokenizer *t) { return t->bos; }
int32_t sc_tokenizer_eos(const sc_tokenizer *t) { return t->eos; }
const char *sc_tokenizer_kind(const sc_tokenizer *t) { return t->kind; }

const char *sc_tokenizer_piece(const sc_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n) {
        if (len) *len = 0;
        return "";
    }
    if (len) *len = t->lens[id];
    return t->pieces[id];
}

/* ---- encoding ---- */

typedef struct sym {
    int32_t id;
    int32_t prev, next; /* indices, -1 at the ends */
    uint32_t version;
    bool alive;
} sym;

typedef struct cand {
    float score;
    int32_t left, right;
    uint32_t vl, vr;
    int32_t merged;
} cand;

/* max-heap on score, ties broken by the leftmost position (llama2.c scans
 * left to right and keeps the first strictly better pair). */
static bool cand_before(const cand *a, const cand *b) {
    if (a->score != b->score) return a->score > b->score;
    return a->left < b->left;
}

typedef struct heap {
    cand *v;
    size_t n, cap;
} heap;

static bool heap_push(heap *h, cand c) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        cand *p = realloc(h->v, nc * sizeof *p);
        if (!p) return false;
        h->v = p;
        h->cap = nc;
    }
    size_t i = h->n++;
    h->v[i] = c;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!cand_before(&h->v[i], &h->v[parent])) break;
        cand tmp = h->v[i];
        h->v[i] = h->v[parent];
        h->v[parent] = tmp;
        i = parent;
    }
    return true;
}

static cand heap_pop(heap *h) {
    cand top = h->v[0];
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < h->n && cand_before(&h->v[l], &h->v[best])) best = l;
        if (r < h->n && cand_before(&h->v[r], &h->v[best])) best = r;
        if (best == i) break;
        cand tmp = h->v[i];
        h->v[i] = h->v[best];
        h->v[best] = tmp;
        i = best;
    }
    return top;
}

/* Pushes the candidate merge of symbols a and b if their concatenation is a piece. */
static bool try_pair(const sc_tokenizer *t, const sym *s, int32_t a, int32_t b, heap *h, char *buf) {
    if (a < 0 || b < 0) return true;
    uint32_t la = t->lens[s[a].id], lb = t->lens[s[b].id];
    if (la + lb > t->max_len) return true;
    memcpy(buf, t->pieces[s[a].id], la);
    memcpy(buf + la, t->pieces[s[b].id], lb);
    int32_t id = lookup(t, buf, la + lb);
    if (id < 0 || !(t->scores[id] > -1e10f)) return true;
    cand c = {t->scores[id], a, b, s[a].version, s[b].version, id};
    return heap_push(h, c);
}

sc_status sc_tokenizer_encode(const sc_tokenizer *t, const char *text, size_t len, bool add_bos, bool add_eos,
                              sc_tokens *out, sc_err *err) {
    if (add_bos && t->bos >= 0 && sc_tokens_push(out, t->bos)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    sc_status st = SC_OK;
    sym *s = NULL;
    heap h = {0};
    char *buf = NULL;
    if (len > 0) {
        size_t cap_syms;
        if (!sc_add_ok(len, 1, &cap_syms) || !(s = sc_calloc(cap_syms, sizeof *s)) || !(buf = malloc(t->max_len + 8))) {
            st = sc_errf(err, SC_ENOMEM, "encode: out of memory for %zu bytes of text", len);
            goto done;
        }
        int32_t ns = 0;
        int32_t space = lookup(t, " ", 1);
        if (space >= 0) s[ns++].id = space; /* the dummy prefix */
        /* split into UTF-8 code points (at most 4 bytes), as llama2.c does */
        size_t i = 0;
        while (i < len) {
            size_t start = i, n = 1;
            i++;
            while (i < len && ((uint8_t)text[i] & 0xC0) == 0x80 && n < 4) {
                i++;
                n++;
            }
            int32_t id = lookup(t, text + start, n);
            if (id >= 0) {
                s[ns++].id = id;
            } else {
                for (size_t k = 0; k < n; k++) {
                    int32_t b = t->byte_id[(uint8_t)text[start + k]];
                    if (b < 0) b = t->unk;
                    if (b < 0) {
                        st = sc_errf(err, SC_EFORMAT, "encode: byte 0x%02x has no token and there is no <unk>",
                                     (uint8_t)text[start + k]);
                        goto done;
                    }
                    if ((size_t)ns >= cap_syms) { /* more bytes than symbols reserved: cannot happen (1 per byte + prefix) */
                        st = sc_errf(err, SC_EFORMAT, "encode: internal overflow");
                        goto done;
                    }
                    s[ns++].id = b;
                }
            }
        }
        for (int32_t k = 0; k < ns; k++) {
            s[k].prev = k - 1;
            s[k].next = k + 1 < ns ? k + 1 : -1;
            s[k].alive = true;
        }
        for (int32_t k = 0; k + 1 < ns; k++)
            if (!try_pair(t, s, k, k + 1, &h, buf)) goto oom;
        while (h.n > 0) {
            cand c = heap_pop(&h);
            sym *a = &s[c.left], *b = &s[c.right];
            if (!a->alive || !b->alive || a->version != c.vl || b->version != c.vr || a->next != c.right) continue;
            a->id = c.merged;
            a->version++;
            b->alive = false;
            a->next = b->next;
            if (b->next >= 0) s[b->next].prev = c.left;
            if (!try_pair(t, s, a->prev, c.left, &h, buf) || !try_pair(t, s, c.left, a->next, &h, buf)) goto oom;
        }
        for (int32_t k = 0; k >= 0; k = s[k].next)
            if (sc_tokens_push(out, s[k].id)) goto oom;
    }
    if (add_eos && t->eos >= 0 && sc_tokens_push(out, t->eos)) goto oom;
    goto done;
oom:
    st = sc_errf(err, SC_ENOMEM, "encode: out of memory");
done:
    free(s);
    free(h.v);
    free(buf);
    return st;
}

size_t sc_tokenizer_decode(const sc_tokenizer *t, int32_t prev, int32_t id, char *buf, size_t cap) {
    if (id < 0 || id >= t->n || cap == 0) return 0;
    int32_t ty = t->types[id];
    if (ty == SC_TOKTYPE_CONTROL || ty == SC_TOKTYPE_UNUSED) return 0;
    const char *p = t->pieces[id];
    size_t n = t->lens[id];
    if (ty == SC_TOKTYPE_BYTE) {
        int b = byte_piece(p, n);
        if (b >= 0) {
            buf[0] = (char)b;
            return 1;
        }
    }
    if (prev == t->bos && n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    if (n > cap) n = cap;
    memcpy(buf, p, n);
    return n;
}
