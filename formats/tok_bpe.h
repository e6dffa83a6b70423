/* tok_bpe.h - merge-rank BPE and its text pipeline (internal).
 *
 * A text segment (no added tokens inside) goes through the normalizers, then
 * the pre-tokenizers split it into words, then each word is BPE-encoded:
 * symbols (bytes for byte-level BPE, UTF-8 characters otherwise, with
 * <0xXX> byte fallback) are merged pairwise, lowest merge rank first,
 * leftmost on ties, as Hugging Face tokenizers and llama.cpp do. */
#ifndef SC_TOK_BPE_H
#define SC_TOK_BPE_H

#include "tok_internal.h"

enum { TOK_NORM_NFC, TOK_NORM_NFD, TOK_NORM_NFKC, TOK_NORM_NFKD, TOK_NORM_PREPEND, TOK_NORM_REPLACE,
       TOK_NORM_LOWERCASE, TOK_NORM_STRIP };
typedef struct tok_norm {
    int kind;
    char *a, *b; /* PREPEND: a; REPLACE: a -> b */
    size_t na, nb;
    bool left, right; /* STRIP */
} tok_norm;

enum { TOK_PRE_SPLIT, TOK_PRE_METASPACE, TOK_PRE_BYTELEVEL, TOK_PRE_DIGITS };
enum { TOK_SPLIT_ISOLATED, TOK_SPLIT_REMOVED, TOK_SPLIT_PREV, TOK_SPLIT_NEXT, TOK_SPLIT_CONTIGUOUS };
enum { TOK_PREPEND_NEVER, TOK_PREPEND_FIRST, TOK_PREPEND_ALWAYS };
typedef struct tok_pre {
    int kind;
    void *re;         /* pcre2_code*: regex Split, ByteLevel with use_regex */
    char *pat;        /* the source of re (kept so the pipeline can be serialised) */
    size_t npat;
    char *str;        /* literal Split pattern; Metaspace replacement */
    size_t nstr;
    int behavior;     /* TOK_SPLIT_* */
    bool invert;
    int prepend;      /* Metaspace: TOK_PREPEND_* */
    bool split;       /* Metaspace: split on the replacement */
    bool add_prefix_space; /* ByteLevel */
    bool individual;  /* Digits */
} tok_pre;

#define TOK_MAX_STEPS 16
typedef struct tok_bpe_cfg {
    tok_norm norm[TOK_MAX_STEPS];
    int n_norm;
    tok_pre pre[TOK_MAX_STEPS];
    int n_pre;
    bool byte_level;    /* symbols are bytes; keys are raw bytes */
    bool byte_fallback; /* unknown characters become <0xXX> pieces */
    bool fuse_unk;
    bool ignore_merges; /* a word that is a token is taken whole */
} tok_bpe_cfg;

void tok_cfg_free(tok_bpe_cfg *c);

/* Compiles a regex (PCRE2, UTF + Unicode properties, JIT when available). */
sc_status tok_regex_compile(const char *what, const char *pattern, size_t len, void **out, sc_err *err);
/* Compiles pattern into p->re and keeps a copy of its source in p->pat. */
sc_status tok_pre_regex(tok_pre *p, const char *what, const char *pattern, size_t len, sc_err *err);
/* Appends the pre-tokenizer steps llama.cpp uses for GGUF tokenizer.ggml.pre
 * `name` (default, gpt2, llama3/llama-bpe, qwen2, ...). */
sc_status tok_cfg_add_known_pre(tok_bpe_cfg *c, const char *what, const char *name, sc_err *err);
/* The GPT-2 split pattern (ByteLevel with use_regex). */
extern const char *const TOK_RE_GPT2;

/* Scratch for one encode call. */
typedef struct tok_span {
    size_t off, len;
} tok_span;
typedef struct tok_work {
    tok_buf buf, tmp;       /* current text and a spare */
    tok_span *sp, *sp2;     /* current words and a spare list */
    size_t n, cap, n2, cap2;
    void *md;               /* pcre2_match_data* */
} tok_work;
void tok_work_free(tok_work *w);

/* Runs the normalizers and pre-tokenizers over s[0..n); the words are
 * w->sp[0..w->n) into w->buf. */
sc_status tok_pipeline_run(const tok_bpe_cfg *c, const char *s, size_t n, unsigned seg, tok_work *w, sc_err *err);

/* Makes t a merge-rank BPE with this pipeline (cfg is moved in: t owns its
 * strings and regexes from here on, even on failure) and room for n_merges. */
sc_status tok_bpe_attach(sc_tokenizer *t, const char *what, tok_bpe_cfg *cfg, size_t n_merges, sc_err *err);
/* Adds merge number `rank` of the pair (a, b) given in key form; a, b and
 * a+b must be tokens. */
sc_status tok_bpe_add_merge(sc_tokenizer *t, const char *what, size_t rank, const char *a, size_t na, const char *b,
                            size_t nb, sc_err *err);
/* The pipeline of a merge-rank BPE tokenizer (NULL for other kinds). */
const tok_bpe_cfg *tok_bpe_config(const sc_tokenizer *t);
/* Its merges as (left id, right id) pairs in rank order: a malloc'd array of
 * 2 * *n ids in *pairs (NULL when there are none). */
sc_status tok_bpe_merges(const sc_tokenizer *t, int32_t **pairs, size_t *n, sc_err *err);

#endif
