/* tok_internal.h - what the tokenizer implementations share (not a public
 * header): the vocabulary every kind of tokenizer is built on, the table of
 * operations an implementation provides, and the builder they all use.
 *
 * Every token has two spellings in one byte arena:
 *   key  - the form the encoder looks up: raw bytes for byte-level BPE (the
 *          GPT-2 byte-to-unicode mapping is undone at load), the piece with
 *          "\u2581" for SentencePiece-style BPE from tokenizer.json, the piece
 *          with ' ' for the llama2.c/GGUF/tokenizer.model score merger;
 *   text - the bytes the token stands for when decoding (spaces as ' ').
 * Added and special tokens keep their literal content in both. */
#ifndef SC_TOK_INTERNAL_H
#define SC_TOK_INTERNAL_H

#include "tokenizer.h"

#define TOK_MAX_VOCAB ((int64_t)1 << 22)  /* 4M tokens */
#define TOK_MAX_PIECE 65536               /* bytes in one token */
#define TOK_MAX_ARENA ((size_t)1 << 30)   /* bytes of all spellings */

/* Flags for one text segment handed to an implementation's encoder. */
enum {
    TOK_SEG_FIRST = 1,         /* the segment starts the input text */
    TOK_SEG_AFTER_SPECIAL = 2  /* an added/special token precedes it */
};

typedef struct tok_ops {
    /* Appends the encoding of s[0..n) (which holds no added token) to out. */
    sc_status (*encode)(const sc_tokenizer *t, const char *s, size_t n, unsigned seg, sc_tokens *out, sc_err *err);
    void (*free_impl)(void *impl);
} tok_ops;

/* Added/special tokens recognised inside text (longest match first). */
typedef struct tok_matcher {
    int32_t *slots; /* open addressing over the ids below */
    uint64_t mask;
    uint32_t lens[64]; /* distinct lengths, longest first */
    int n_lens;
    uint8_t first_any[32], first_user[32]; /* bitmaps of first bytes */
} tok_matcher;

struct sc_tokenizer {
    const tok_ops *ops;
    void *impl;
    int64_t n;
    char *arena;
    size_t arena_len, arena_cap;
    uint32_t *key_off, *key_len, *text_off, *text_len;
    float *scores;
    int32_t *types;
    int32_t byte_id[256]; /* <0xXX> byte-fallback pieces, -1 if absent */
    int32_t raw_byte[256]; /* tokens whose key is exactly one byte, -1 if absent */
    uint32_t max_key_len;
    int32_t *slots; /* key -> id */
    uint64_t mask;
    int32_t bos, eos, unk;
    char kind[32];
    bool dummy_prefix;  /* decoding drops the leading space of the first piece */
    bool sp_space_in;   /* encoding reads U+2581 in the text as a space */
    bool add_bos_default;
    /* No mergeable token has a space (' ' / U+2581) after another character,
     * so no merge crosses the start of a space run: text may be cut there
     * and each part encoded alone with the same result. */
    bool cut_space, cut_meta;
    char *chat_template; /* from tokenizer_config.json or GGUF; may be NULL */
    tok_matcher match;
};

/* ---- builder (tokenizer.c) ---- */

/* Allocates a tokenizer of n tokens, all UNUSED with empty spellings. */
sc_status tok_create(const char *what, int64_t n, const tok_ops *ops, sc_tokenizer **out, sc_err *err);
/* Sets token id. text may be NULL (same as key). */
sc_status tok_set(sc_tokenizer *t, const char *what, int64_t id, const char *key, size_t klen, const char *text,
                  size_t tlen, float score, int32_t type, sc_err *err);
/* Reserves room for this many bytes of spellings (a hint; false on OOM). */
bool tok_reserve(sc_tokenizer *t, size_t bytes);
/* Builds the lookup tables once every token is set. bos/eos/unk may be -1. */
sc_status tok_finish(sc_tokenizer *t, const char *what, int32_t bos, int32_t eos, int32_t unk, sc_err *err);

int32_t tok_lookup(const sc_tokenizer *t, const char *s, size_t n);
/* Where s[0..n) may be cut before position i (see cut_space / cut_meta):
 * the next cut point after start, or n. */
size_t tok_next_cut(const char *s, size_t n, size_t start, bool meta);
static inline const char *tok_key(const sc_tokenizer *t, int32_t id, size_t *n) {
    *n = t->key_len[id];
    return t->arena + t->key_off[id];
}
/* Byte value of a "<0xXX>" piece, else -1. */
int tok_byte_piece(const char *p, size_t n);
/* Length of the UTF-8 sequence starting at s[0] (1 for invalid bytes),
 * never beyond n. */
size_t tok_utf8_len(const char *s, size_t n);

/* Growable scratch byte buffer used while encoding. */
typedef struct tok_buf {
    char *p;
    size_t n, cap;
} tok_buf;
bool tok_buf_reserve(tok_buf *b, size_t extra);
bool tok_buf_put(tok_buf *b, const void *s, size_t n);

/* ---- implementations ---- */
extern const tok_ops tok_spm_ops; /* tok_spm.c: best-score pair merging */
extern const tok_ops tok_bpe_ops; /* tok_bpe.c: merge-rank BPE */

/* Makes t a score merger (replacing any implementation data): add_prefix
 * puts a dummy-prefix space before each text segment, squash_spaces removes
 * leading/trailing spaces and runs of spaces (SentencePiece options). */
sc_status tok_spm_attach(sc_tokenizer *t, bool add_prefix, bool squash_spaces, sc_err *err);
/* The score merger's options; false when t is not a score merger. */
bool tok_spm_options(const sc_tokenizer *t, bool *add_prefix, bool *squash_spaces);

/* GPT-2 byte-level alphabet: the byte a code point stands for, or -1. */
int tok_bytelevel_byte(uint32_t cp);
/* Converts a byte-level spelling to raw bytes into out (cap >= n);
 * returns false when some character is outside the alphabet. */
bool tok_bytelevel_decode(const char *s, size_t n, char *out, size_t *out_n);

#endif
