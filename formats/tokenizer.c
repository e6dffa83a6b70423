/* tokenizer.c - the tokenizer interface: the shared vocabulary (spellings,
 * hash lookup, byte tables), added/special-token splitting, BOS/EOS,
 * decoding, and the loader that picks an implementation from a file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filekind.h"
#include "gguf.h"
#include "model.h"
#include "tok_internal.h"

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

/* ---- small helpers ---- */

bool tok_buf_reserve(tok_buf *b, size_t extra) {
    size_t need;
    if (!sc_add_ok(b->n, extra, &need)) return false;
    if (need <= b->cap) return true;
    size_t nc = b->cap ? b->cap : 256;
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return false;
        nc *= 2;
    }
    char *p = realloc(b->p, nc);
    if (!p) return false;
    b->p = p;
    b->cap = nc;
    return true;
}

bool tok_buf_put(tok_buf *b, const void *s, size_t n) {
    if (!tok_buf_reserve(b, n)) return false;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    return true;
}

size_t tok_utf8_len(const char *s, size_t n) {
    uint8_t c = (uint8_t)s[0];
    size_t want = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (want > n) return 1;
    for (size_t k = 1; k < want; k++)
        if (((uint8_t)s[k] & 0xC0) != 0x80) return 1;
    return want;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

int tok_byte_piece(const char *p, size_t n) {
    if (n != 6 || p[0] != '<' || p[1] != '0' || p[2] != 'x' || p[5] != '>') return -1;
    int hi = hexval(p[3]), lo = hexval(p[4]);
    return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

/* GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for
 * themselves, the other 68 bytes for U+0100.. in byte order. */
static bool bytelevel_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

int tok_bytelevel_byte(uint32_t cp) {
    if (cp < 256) return bytelevel_printable((int)cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t k = cp - 256; /* the 68 others, in order: 0..32, 127..160, 173 */
    return k < 33 ? (int)k : k < 67 ? (int)(127 + k - 33) : 173;
}

bool tok_bytelevel_decode(const char *s, size_t n, char *out, size_t *out_n) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t l = tok_utf8_len(s + i, n - i);
        const uint8_t *u = (const uint8_t *)s + i;
        uint32_t cp;
        if (l == 1 && u[0] < 0x80) cp = u[0];
        else if (l == 2) cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
        else return false;
        int b = tok_bytelevel_byte(cp);
        if (b < 0) return false;
        out[o++] = (char)b;
        i += l;
    }
    *out_n = o;
    return true;
}

/* ---- vocabulary ---- */

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

int32_t tok_lookup(const sc_tokenizer *t, const char *s, size_t n) {
    uint64_t i = hash_bytes(s, n) & t->mask;
    for (;;) {
        int32_t id = t->slots[i];
        if (id < 0) return -1;
        if (t->key_len[id] == n && memcmp(t->arena + t->key_off[id], s, n) == 0) return id;
        i = (i + 1) & t->mask;
    }
}

void sc_tokenizer_free(sc_tokenizer *t) {
    if (!t) return;
    if (t->ops && t->ops->free_impl) t->ops->free_impl(t->impl);
    free(t->arena);
    free(t->key_off);
    free(t->key_len);
    free(t->text_off);
    free(t->text_len);
    free(t->scores);
    free(t->types);
    free(t->slots);
    free(t->match.slots);
    free(t->chat_template);
    free(t);
}

sc_status tok_create(const char *what, int64_t n, const tok_ops *ops, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    if (n <= 0 || n > TOK_MAX_VOCAB)
        return sc_errf(err, SC_EFORMAT, "%s: vocabulary size %lld is out of range (1 to %lld)", what, (long long)n,
                       (long long)TOK_MAX_VOCAB);
    sc_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    t->ops = ops;
    t->n = n;
    t->bos = t->eos = t->unk = -1;
    size_t un = (size_t)n;
    t->key_off = calloc(un, sizeof *t->key_off);
    t->key_len = calloc(un, sizeof *t->key_len);
    t->text_off = calloc(un, sizeof *t->text_off);
    t->text_len = calloc(un, sizeof *t->text_len);
    t->scores = calloc(un, sizeof *t->scores);
    t->types = malloc(un * sizeof *t->types);
    if (!t->key_off || !t->key_len || !t->text_off || !t->text_len || !t->scores || !t->types) {
        sc_tokenizer_free(t);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory for %lld tokens", what, (long long)n);
    }
    for (size_t i = 0; i < un; i++) t->types[i] = SC_TOKTYPE_UNUSED;
    *out = t;
    return SC_OK;
}

bool tok_reserve(sc_tokenizer *t, size_t bytes) {
    if (bytes <= t->arena_cap || bytes > TOK_MAX_ARENA) return true;
    char *p = realloc(t->arena, bytes);
    if (!p) return false;
    t->arena = p;
    t->arena_cap = bytes;
    return true;
}

static bool arena_put(sc_tokenizer *t, const char *s, size_t n, uint32_t *off) {
    if (n > TOK_MAX_ARENA || t->arena_len + n > TOK_MAX_ARENA) return false;
    if (t->arena_len + n > t->arena_cap || !t->arena) { /* allocated even when every piece is empty: never NULL + 0 */
        size_t nc = t->arena_cap ? t->arena_cap : 1 << 16;
        while (nc < t->arena_len + n) nc *= 2;
        char *p = realloc(t->arena, nc);
        if (!p) return false;
        t->arena = p;
        t->arena_cap = nc;
    }
    if (n) memcpy(t->arena + t->arena_len, s, n);
    *off = (uint32_t)t->arena_len;
    t->arena_len += n;
    return true;
}

sc_status tok_set(sc_tokenizer *t, const char *what, int64_t id, const char *key, size_t klen, const char *text,
                  size_t tlen, float score, int32_t type, sc_err *err) {
    if (id < 0 || id >= t->n)
        return sc_errf(err, SC_EFORMAT, "%s: token id %lld is outside the vocabulary of %lld", what, (long long)id,
                       (long long)t->n);
    if (klen > TOK_MAX_PIECE || (text && tlen > TOK_MAX_PIECE))
        return sc_errf(err, SC_EFORMAT, "%s: token %lld is %zu bytes long (at most %d)", what, (long long)id,
                       klen > tlen ? klen : tlen, TOK_MAX_PIECE);
    if (!arena_put(t, key, klen, &t->key_off[id]))
        return sc_errf(err, SC_ENOMEM, "%s: out of memory for the token spellings", what);
    t->key_len[id] = (uint32_t)klen;
    if (text && (tlen != klen || memcmp(text, key, klen) != 0)) {
        if (!arena_put(t, text, tlen, &t->text_off[id]))
            return sc_errf(err, SC_ENOMEM, "%s: out of memory for the token spellings", what);
        t->text_len[id] = (uint32_t)tlen;
    } else {
        t->text_off[id] = t->key_off[id];
        t->text_len[id] = (uint32_t)klen;
    }
    t->scores[id] = score;
    t->types[id] = type;
    return SC_OK;
}

static bool is_meta(const char *s, size_t n, size_t i) {
    return n - i >= 3 && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 && (uint8_t)s[i + 2] == 0x81;
}

/* Does the key have the marker after some other character? */
static bool marker_inside(const char *k, size_t n, bool meta) {
    size_t i = 0, step = meta ? 3 : 1;
    while (i < n && (meta ? is_meta(k, n, i) : k[i] == ' ')) i += step;
    for (; i < n; i++)
        if (meta ? is_meta(k, n, i) : k[i] == ' ') return true;
    return false;
}

size_t tok_next_cut(const char *s, size_t n, size_t start, bool meta) {
    for (size_t i = start + 1; i < n; i++) {
        if (meta ? !is_meta(s, n, i) : s[i] != ' ') continue;
        bool prev_marker = meta ? (i >= 3 && is_meta(s, n, i - 3)) : s[i - 1] == ' ';
        if (!prev_marker) return i;
    }
    return n;
}

static bool is_added_type(int32_t ty) {
    return ty == SC_TOKTYPE_CONTROL || ty == SC_TOKTYPE_USER || ty == SC_TOKTYPE_UNKNOWN;
}

static sc_status build_matcher(sc_tokenizer *t, const char *what, sc_err *err) {
    tok_matcher *m = &t->match;
    size_t count = 0;
    for (int64_t i = 0; i < t->n; i++)
        if (is_added_type(t->types[i]) && t->key_len[i] > 0) count++;
    if (count == 0) return SC_OK;
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)count) cap <<= 1;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return sc_errf(err, SC_ENOMEM, "%s: out of memory", what);
    memset(m->slots, 0xff, cap * sizeof *m->slots);
    m->mask = cap - 1;
    for (int64_t i = 0; i < t->n; i++) {
        uint32_t kl = t->key_len[i];
        if (!is_added_type(t->types[i]) || kl == 0) continue;
        const char *k = t->arena + t->key_off[i];
        uint64_t h = hash_bytes(k, kl) & m->mask;
        bool dup = false;
        while (m->slots[h] >= 0) {
            int32_t o = m->slots[h];
            if (t->key_len[o] == kl && memcmp(t->arena + t->key_off[o], k, kl) == 0) {
                dup = true;
                break;
            }
            h = (h + 1) & m->mask;
        }
        if (dup) continue;
        m->slots[h] = (int32_t)i;
        uint8_t c = (uint8_t)k[0];
        m->first_any[c >> 3] |= (uint8_t)(1u << (c & 7));
        if (t->types[i] == SC_TOKTYPE_USER) m->first_user[c >> 3] |= (uint8_t)(1u << (c & 7));
        int j = 0;
        while (j < m->n_lens && m->lens[j] > kl) j++;
        if (j < m->n_lens && m->lens[j] == kl) continue;
        if (m->n_lens == (int)(sizeof m->lens / sizeof m->lens[0]))
            return sc_errf(err, SC_EUNSUPPORTED, "%s: added tokens come in more than %d different lengths", what,
                           (int)(sizeof m->lens / sizeof m->lens[0]));
        memmove(&m->lens[j + 1], &m->lens[j], (size_t)(m->n_lens - j) * sizeof m->lens[0]);
        m->lens[j] = kl;
        m->n_lens++;
    }
    return SC_OK;
}

sc_status tok_finish(sc_tokenizer *t, const char *what, int32_t bos, int32_t eos, int32_t unk, sc_err *err) {
    if (bos >= t->n || eos >= t->n || unk >= t->n)
        return sc_errf(err, SC_EFORMAT, "%s: special token id beyond the vocabulary (%lld)", what, (long long)t->n);
    t->bos = bos < 0 ? -1 : bos;
    t->eos = eos < 0 ? -1 : eos;
    t->unk = unk < 0 ? -1 : unk;
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)t->n) cap <<= 1;
    t->slots = malloc(cap * sizeof *t->slots);
    if (!t->slots) return sc_errf(err, SC_ENOMEM, "%s: out of memory for %lld tokens", what, (long long)t->n);
    memset(t->slots, 0xff, cap * sizeof *t->slots);
    t->mask = cap - 1;
    for (int i = 0; i < 256; i++) t->byte_id[i] = t->raw_byte[i] = -1;
    t->cut_space = t->cut_meta = true;
    for (int64_t i = 0; i < t->n; i++) {
        uint32_t kl = t->key_len[i];
        const char *k = t->arena + t->key_off[i];
        if (t->types[i] == SC_TOKTYPE_NORMAL || t->types[i] == SC_TOKTYPE_USER) {
            if (t->cut_space && marker_inside(k, kl, false)) t->cut_space = false;
            if (t->cut_meta && marker_inside(k, kl, true)) t->cut_meta = false;
        }
        if (t->types[i] == SC_TOKTYPE_UNUSED && kl == 0) continue; /* a hole in the ids */
        if (kl > t->max_key_len) t->max_key_len = kl;
        if (t->types[i] == SC_TOKTYPE_BYTE) {
            int b = tok_byte_piece(k, kl);
            if (b >= 0 && t->byte_id[b] < 0) t->byte_id[b] = (int32_t)i;
        }
        if (kl == 1 && t->raw_byte[(uint8_t)k[0]] < 0 && t->types[i] != SC_TOKTYPE_BYTE)
            t->raw_byte[(uint8_t)k[0]] = (int32_t)i;
        uint64_t h = hash_bytes(k, kl) & t->mask; /* first id wins for duplicate keys */
        for (;;) {
            int32_t id = t->slots[h];
            if (id < 0) {
                t->slots[h] = (int32_t)i;
                break;
            }
            if (t->key_len[id] == kl && memcmp(t->arena + t->key_off[id], k, kl) == 0) break;
            h = (h + 1) & t->mask;
        }
    }
    return build_matcher(t, what, err);
}

/* ---- accessors ---- */

int64_t sc_tokenizer_vocab_size(const sc_tokenizer *t) { return t->n; }
int32_t sc_tokenizer_bos(const sc_tokenizer *t) { return t->bos; }
int32_t sc_tokenizer_eos(const sc_tokenizer *t) { return t->eos; }
const char *sc_tokenizer_kind(const sc_tokenizer *t) { return t->kind; }
bool sc_tokenizer_add_bos_default(const sc_tokenizer *t) { return t->add_bos_default; }
const char *sc_tokenizer_chat_template(const sc_tokenizer *t) { return t->chat_template; }

const char *sc_tokenizer_piece(const sc_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->n) {
        if (len) *len = 0;
        return "";
    }
    if (len) *len = t->text_len[id];
    return t->arena + t->text_off[id];
}

float sc_tokenizer_score(const sc_tokenizer *t, int32_t id) { return id >= 0 && id < t->n ? t->scores[id] : 0.0f; }

int32_t sc_tokenizer_token_type(const sc_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n ? t->types[id] : 0;
}

int32_t sc_tokenizer_find(const sc_tokenizer *t, const char *s, size_t len) {
    if (t->match.slots && len > 0) { /* added tokens first: their content is their key */
        uint64_t h = hash_bytes(s, len) & t->match.mask;
        for (int32_t id; (id = t->match.slots[h]) >= 0; h = (h + 1) & t->match.mask)
            if (t->key_len[id] == len && memcmp(t->arena + t->key_off[id], s, len) == 0) return id;
    }
    return tok_lookup(t, s, len);
}

/* ---- encoding ---- */

/* The added token starting at s (longest first), or -1. */
static int32_t match_added(const sc_tokenizer *t, const char *s, size_t n, bool special, size_t *mlen) {
    const tok_matcher *m = &t->match;
    uint8_t c = (uint8_t)s[0];
    const uint8_t *bits = special ? m->first_any : m->first_user;
    if (!(bits[c >> 3] & (1u << (c & 7)))) return -1;
    for (int j = 0; j < m->n_lens; j++) {
        uint32_t l = m->lens[j];
        if (l > n) continue;
        uint64_t h = hash_bytes(s, l) & m->mask;
        for (int32_t id; (id = m->slots[h]) >= 0; h = (h + 1) & m->mask) {
            if (t->key_len[id] != l || memcmp(t->arena + t->key_off[id], s, l) != 0) continue;
            if (!special && t->types[id] != SC_TOKTYPE_USER) break;
            *mlen = l;
            return id;
        }
    }
    return -1;
}

sc_status sc_tokenizer_encode_ex(const sc_tokenizer *t, const char *text, size_t len, unsigned flags, sc_tokens *out,
                                 sc_err *err) {
    if ((flags & SC_ENC_BOS) && t->bos >= 0 && sc_tokens_push(out, t->bos))
        return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    bool special = (flags & SC_ENC_SPECIAL) != 0;
    size_t seg = 0;
    unsigned segflags = TOK_SEG_FIRST;
    if (t->match.slots) {
        for (size_t i = 0; i < len;) {
            size_t ml = 0;
            int32_t id = match_added(t, text + i, len - i, special, &ml);
            if (id < 0) {
                i++;
                continue;
            }
            if (i > seg) {
                SC_TRY(t->ops->encode(t, text + seg, i - seg, segflags, out, err));
                segflags = 0;
            }
            if (sc_tokens_push(out, id)) return sc_errf(err, SC_ENOMEM, "encode: out of memory");
            segflags = TOK_SEG_AFTER_SPECIAL;
            i += ml;
            seg = i;
        }
    }
    if (len > seg) SC_TRY(t->ops->encode(t, text + seg, len - seg, segflags, out, err));
    if ((flags & SC_ENC_EOS) && t->eos >= 0 && sc_tokens_push(out, t->eos))
        return sc_errf(err, SC_ENOMEM, "encode: out of memory");
    return SC_OK;
}

sc_status sc_tokenizer_encode(const sc_tokenizer *t, const char *text, size_t len, bool add_bos, bool add_eos,
                              sc_tokens *out, sc_err *err) {
    return sc_tokenizer_encode_ex(t, text, len, (add_bos ? SC_ENC_BOS : 0u) | (add_eos ? SC_ENC_EOS : 0u), out, err);
}

/* ---- decoding ---- */

size_t sc_tokenizer_decode(const sc_tokenizer *t, int32_t prev, int32_t id, char *buf, size_t cap) {
    if (id < 0 || id >= t->n || cap == 0) return 0;
    int32_t ty = t->types[id];
    if (ty == SC_TOKTYPE_CONTROL || ty == SC_TOKTYPE_UNUSED) return 0;
    const char *p = t->arena + t->text_off[id];
    size_t n = t->text_len[id];
    if (ty == SC_TOKTYPE_BYTE) {
        int b = tok_byte_piece(t->arena + t->key_off[id], t->key_len[id]);
        if (b >= 0) {
            buf[0] = (char)b;
            return 1;
        }
    }
    if (t->dummy_prefix && (prev < 0 || prev == t->bos) && n > 0 && p[0] == ' ') {
        p++;
        n--;
    }
    if (n > cap) n = cap;
    memcpy(buf, p, n);
    return n;
}

sc_status sc_tokenizer_decode_all(const sc_tokenizer *t, const int32_t *ids, size_t n, char **out, size_t *len,
                                  sc_err *err) {
    tok_buf b = {0};
    int32_t prev = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n) {
            free(b.p);
            return sc_errf(err, SC_ERANGE, "decode: token id %d at position %zu is outside the vocabulary (%lld)", id,
                           i, (long long)t->n);
        }
        size_t need = t->text_len[id] + 1;
        if (!tok_buf_reserve(&b, need)) {
            free(b.p);
            return sc_errf(err, SC_ENOMEM, "decode: out of memory");
        }
        b.n += sc_tokenizer_decode(t, prev, id, b.p + b.n, need);
        /* a control token right at the start (BOS) keeps the next piece "first" */
        if (!(prev < 0 && t->types[id] == SC_TOKTYPE_CONTROL)) prev = id;
    }
    if (!tok_buf_reserve(&b, 1)) {
        free(b.p);
        return sc_errf(err, SC_ENOMEM, "decode: out of memory");
    }
    b.p[b.n] = '\0';
    *out = b.p;
    if (len) *len = b.n;
    return SC_OK;
}

/* ---- choosing a loader ---- */

sc_status sc_tokenizer_load_auto(const char *path, int64_t vocab_size, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    if (sc_is_dir(path)) {
        char p[4096];
        if (sc_path_join(p, sizeof p, path, "tokenizer.json") && sc_file_exists(p))
            return sc_tokenizer_load_hf(p, out, err);
        if (sc_path_join(p, sizeof p, path, "tokenizer.model") && sc_file_exists(p))
            return sc_tokenizer_load_sp_model(p, out, err);
        if (sc_path_join(p, sizeof p, path, "tokenizer.bin") && sc_file_exists(p))
            return sc_tokenizer_load_auto(p, vocab_size, out, err);
        return sc_errf(err, SC_EIO, "%s: no tokenizer.json, tokenizer.model or tokenizer.bin in this directory", path);
    }
    sc_filekind k = sc_file_kind(path);
    switch (k) {
    case SC_FILE_GGUF: return sc_gguf_load_tokenizer(path, out, err);
    case SC_FILE_JSON: return sc_tokenizer_load_hf(path, out, err);
    case SC_FILE_SP_MODEL: return sc_tokenizer_load_sp_model(path, out, err);
    case SC_FILE_TOKBIN: return sc_tokenizer_load_llama2c(path, vocab_size, out, err);
    case SC_FILE_SPK: return sc_artifact_load_tokenizer(path, out, err);
    case SC_FILE_UNREADABLE: return sc_errf(err, SC_EIO, "%s: cannot open", path);
    case SC_FILE_UNKNOWN: /* the reader its name suggests says what is wrong */
        if (sc_has_suffix(path, ".json")) return sc_tokenizer_load_hf(path, out, err);
        if (sc_has_suffix(path, ".model")) return sc_tokenizer_load_sp_model(path, out, err);
        return sc_tokenizer_load_llama2c(path, vocab_size, out, err);
    default:
        sc_file_kind_ok(path, k, 0, "a tokenizer", err);
        return SC_EARG;
    }
}
