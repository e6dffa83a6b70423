/* tok_spm.c - SentencePiece-style BPE by score (llama2.c, llama.cpp "llama"
 * vocabularies, SentencePiece tokenizer.model of type BPE): a dummy-prefix
 * space, then the adjacent pair whose concatenation is the highest-scoring
 * piece is merged (leftmost on ties) until none is left; characters that are
 * no piece fall back to <0xXX> byte pieces (else <unk>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct tok_spm {
    bool add_prefix;    /* the dummy-prefix space before each text segment */
    bool squash_spaces; /* SentencePiece remove_extra_whitespaces */
} tok_spm;

static void spm_free(void *p) { free(p); }

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
    size_t la, lb;
    const char *ka = tok_key(t, s[a].id, &la), *kb = tok_key(t, s[b].id, &lb);
    if (la + lb > t->max_key_len) return true;
    memcpy(buf, ka, la);
    memcpy(buf + la, kb, lb);
    int32_t id = tok_lookup(t, buf, la + lb);
    if (id < 0 || !(t->scores[id] > -1e10f)) return true;
    cand c = {t->scores[id], a, b, s[a].version, s[b].version, id};
    return heap_push(h, c);
}

/* The text as the merger sees it: U+2581 read as a space (vocabularies
 * spelled with it), runs of spaces squashed when the model asks. */
static bool prepare(const sc_tokenizer *t, const tok_spm *p, const char *s, size_t n, tok_buf *b) {
    if (!tok_buf_reserve(b, n + 1)) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (t->sp_space_in && i + 2 < n && (uint8_t)c == 0xE2 && (uint8_t)s[i + 1] == 0x96 && (uint8_t)s[i + 2] == 0x81) {
            c = ' ';
            i += 2;
        }
        if (p->squash_spaces && c == ' ' && (b->n == 0 || b->p[b->n - 1] == ' ')) continue;
        b->p[b->n++] = c;
    }
    if (p->squash_spaces)
        while (b->n > 0 && b->p[b->n - 1] == ' ') b->n--;
    return true;
}

/* Encodes one piece of text (merges never cross pieces); s, h and buf are
 * scratch sized for the whole segment. */
static sc_status spm_piece(const sc_tokenizer *t, const char *text, size_t len, int32_t prefix, sym *s, heap *h,
                           char *buf, sc_tokens *out, sc_err *err) {
    int32_t ns = 0;
    if (prefix >= 0) s[ns++].id = prefix;
    /* split into UTF-8 code points (at most 4 bytes), as llama2.c does */
    size_t i = 0;
    while (i < len) {
        size_t start = i, n = 1;
        i++;
        while (i < len && ((uint8_t)text[i] & 0xC0) == 0x80 && n < 4) {
            i++;
            n++;
        }
        int32_t id = tok_lookup(t, text + start, n);
        if (id >= 0) {
            s[ns++].id = id;
            continue;
        }
        for (size_t k = 0; k < n; k++) {
            int32_t b = t->byte_id[(uint8_t)text[start + k]];
            if (b < 0) b = t->unk;
            if (b < 0)
                return sc_errf(err, SC_EFORMAT, "encode: byte 0x%02x has no token and there is no <unk>",
                               (uint8_t)text[start + k]);
            s[ns++].id = b; /* at most one symbol per byte plus the prefix */
        }
    }
    for (int32_t k = 0; k < ns; k++) {
        s[k].prev = k - 1;
        s[k].next = k + 1 < ns ? k + 1 : -1;
        s[k].alive = true;
        s[k].version = 0;
    }
    h->n = 0;
    for (int32_t k = 0; k + 1 < ns; k++)
        if (!try_pair(t, s, k, k + 1, h, buf)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    while (h->n > 0) {
        cand c = heap_pop(h);
        sym *a = &s[c.left], *b = &s[c.right];
        if (!a->alive || !b->alive || a->version != c.vl || b->version != c.vr || a->next != c.right) continue;
        a->id = c.merged;
        a->version++;
        b->alive = false;
        a->next = b->next;
        if (b->next >= 0) s[b->next].prev = c.left;
        if (!try_pair(t, s, a->prev, c.left, h, buf) || !try_pair(t, s, c.left, a->next, h, buf))
            return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    }
    for (int32_t k = 0; k >= 0 && ns > 0; k = s[k].next)
        if (sc_tokens_push(out, s[k].id)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    return SC_OK;
}

static sc_status spm_encode(const sc_tokenizer *t, const char *text, size_t len, unsigned seg, sc_tokens *out,
                            sc_err *err) {
    const tok_spm *p = t->impl;
    sc_status st = SC_OK;
    sym *s = NULL;
    heap h = {0};
    char *buf = NULL;
    tok_buf norm = {0};
    if (t->sp_space_in || p->squash_spaces) {
        if (!prepare(t, p, text, len, &norm)) goto oom;
        text = norm.p;
        len = norm.n;
    }
    if (len == 0) goto done;
    size_t cap_syms;
    if (!sc_add_ok(len, 1, &cap_syms) || !(s = sc_calloc(cap_syms, sizeof *s)) || !(buf = malloc(t->max_key_len + 8)))
        goto oom;
    int32_t space = tok_lookup(t, " ", 1);
    int32_t prefix = p->add_prefix && (seg & (TOK_SEG_FIRST | TOK_SEG_AFTER_SPECIAL)) ? space : -1;
    if (!t->cut_space) {
        st = spm_piece(t, text, len, prefix, s, &h, buf, out, err);
        goto done;
    }
    for (size_t a = 0, e; st == SC_OK && a < len; a = e, prefix = -1) {
        e = tok_next_cut(text, len, a, false);
        st = spm_piece(t, text + a, e - a, prefix, s, &h, buf, out, err);
    }
    goto done;
oom:
    st = sc_errf(err, SC_ENOMEM, "encode: out of memory for %zu bytes of text", len);
done:
    free(s);
    free(h.v);
    free(buf);
    free(norm.p);
    return st;
}

const tok_ops tok_spm_ops = {spm_encode, spm_free};

sc_status tok_spm_attach(sc_tokenizer *t, bool add_prefix, bool squash_spaces, sc_err *err) {
    tok_spm *p = calloc(1, sizeof *p);
    if (!p) return sc_errf(err, SC_ENOMEM, "tokenizer: out of memory");
    p->add_prefix = add_prefix;
    p->squash_spaces = squash_spaces;
    if (t->ops->free_impl) t->ops->free_impl(t->impl);
    t->impl = p;
    t->dummy_prefix = add_prefix;
    return SC_OK;
}

bool tok_spm_options(const sc_tokenizer *t, bool *add_prefix, bool *squash_spaces) {
    if (t->ops != &tok_spm_ops || !t->impl) return false;
    const tok_spm *p = t->impl;
    *add_prefix = p->add_prefix;
    *squash_spaces = p->squash_spaces;
    return true;
}

/* Copies piece with U+2581 replaced by ' ' when sp_space. */
static size_t unescape_space(const char *piece, size_t len, bool sp_space, char *out) {
    size_t o = 0;
    for (size_t k = 0; k < len; k++) {
        const uint8_t *s = (const uint8_t *)piece;
        if (sp_space && k + 2 < len && s[k] == 0xE2 && s[k + 1] == 0x96 && s[k + 2] == 0x81) {
            out[o++] = ' ';
            k += 2;
        } else {
            out[o++] = (char)s[k];
        }
    }
    return o;
}

sc_status sc_tokenizer_from_pieces(const char *what, const char *const *pieces, const size_t *lens,
                                   const float *scores, const int32_t *types, int64_t n, int32_t bos, int32_t eos,
                                   int32_t unk, bool sp_space, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    if (n <= 0 || n > TOK_MAX_VOCAB)
        return sc_errf(err, SC_EFORMAT, "%s: vocabulary size %lld is out of range", what, (long long)n);
    if (bos >= n || eos >= n || unk >= n)
        return sc_errf(err, SC_EFORMAT, "%s: special token id beyond the vocabulary (%lld)", what, (long long)n);
    sc_tokenizer *t;
    SC_TRY(tok_create(what, n, &tok_spm_ops, &t, err));
    snprintf(t->kind, sizeof t->kind, "%s", "sentencepiece");
    t->sp_space_in = sp_space;
    t->add_bos_default = true;
    char *tmp = malloc(TOK_MAX_PIECE + 1);
    sc_status st = tmp ? tok_spm_attach(t, true, false, err) : sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    for (int64_t i = 0; st == SC_OK && i < n; i++) {
        if (lens[i] > TOK_MAX_PIECE) {
            st = sc_errf(err, SC_EFORMAT, "%s: token %lld is %zu bytes long", what, (long long)i, lens[i]);
            break;
        }
        size_t o = unescape_space(pieces[i], lens[i], sp_space, tmp);
        int32_t ty = types ? types[i] : SC_TOKTYPE_NORMAL;
        if (!types && tok_byte_piece(tmp, o) >= 0) ty = SC_TOKTYPE_BYTE;
        if (!types && (i == bos || i == eos)) ty = SC_TOKTYPE_CONTROL;
        if (!types && i == unk) ty = SC_TOKTYPE_UNKNOWN;
        st = tok_set(t, what, i, tmp, o, NULL, 0, scores ? scores[i] : 0.0f, ty, err);
    }
    free(tmp);
    if (st == SC_OK) st = tok_finish(t, what, bos, eos, unk, err);
    if (st != SC_OK) {
        sc_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SC_OK;
}

/* The records {score, length, bytes} after the header when they end exactly
 * at the end of the file (the file holds no count), else 0. */
static int64_t llama2c_records(const sc_file_map *map) {
    int64_t n = 0;
    size_t off = 4;
    while (map->size - off >= 8 && n < TOK_MAX_VOCAB) {
        uint32_t len = sc_le32(map->data + off + 4);
        off += 8;
        if (len > map->size - off) return 0;
        off += len;
        n++;
    }
    return off == map->size ? n : 0;
}

sc_status sc_tokenizer_load_llama2c(const char *path, int64_t vocab_size, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    if (vocab_size > TOK_MAX_VOCAB)
        return sc_errf(err, SC_EARG, "%s: vocabulary size %lld is out of range", path, (long long)vocab_size);
    sc_file_map map;
    SC_TRY(sc_map_file(path, &map, err));
    sc_status st = SC_OK;
    if (vocab_size <= 0 && (vocab_size = map.size >= 4 ? llama2c_records(&map) : 0) == 0) {
        sc_unmap_file(&map);
        return sc_errf(err, SC_EFORMAT, "%s: its token records do not end at the end of the file: not a llama2.c "
                       "tokenizer.bin (or one with trailing bytes: give -m MODEL for its vocabulary size)", path);
    }
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
