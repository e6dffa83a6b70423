/* tok_serial.h - a tokenizer's complete state as plain data, and that state
 * as container sections plus a manifest object (the "tokenizer" of a packed
 * artifact, docs/PACK.md and docs/TOKENIZERS.md).
 *
 * sc_tokenizer_state() takes the state out of any tokenizer (every kind
 * sc_tokenizer_kind() names); sc_tokenizer_from_state() builds a tokenizer
 * that encodes and decodes exactly like it. The state is what the encoder
 * and decoder use, not the source file: token spellings (as the encoder
 * looks them up, plus the decoded text of tokens whose text differs),
 * scores, token types, BOS/EOS/UNK, add_bos, decoding and U+2581
 * conventions, the chat template, and the encoder: the score merger's
 * options, or merge-rank BPE's normalizers, pre-tokenizers (regex sources
 * included), byte-level / byte-fallback flags and merges in rank order.
 *
 * sc_tok_serial_write() / sc_tok_serial_read() store it in a container
 * (formats/tok_serial.c). The reader trusts nothing: every count, offset,
 * id, enum and string is checked, errors are one line naming the file and
 * the field. */
#ifndef SC_TOK_SERIAL_H
#define SC_TOK_SERIAL_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srt_container.h"
#include "srt_json.h"
#include "tokenizer.h"

enum { SC_TOK_ENC_SPM = 1 /* best-score pair merging */, SC_TOK_ENC_BPE = 2 /* merge-rank BPE */ };
enum { SC_TOK_NORM_NFC, SC_TOK_NORM_NFD, SC_TOK_NORM_NFKC, SC_TOK_NORM_NFKD, SC_TOK_NORM_PREPEND, SC_TOK_NORM_REPLACE,
       SC_TOK_NORM_LOWERCASE, SC_TOK_NORM_STRIP, SC_TOK_NORM_COUNT };
enum { SC_TOK_PRE_SPLIT, SC_TOK_PRE_METASPACE, SC_TOK_PRE_BYTELEVEL, SC_TOK_PRE_DIGITS, SC_TOK_PRE_COUNT };
enum { SC_TOK_SPLIT_ISOLATED, SC_TOK_SPLIT_REMOVED, SC_TOK_SPLIT_MERGED_WITH_PREVIOUS, SC_TOK_SPLIT_MERGED_WITH_NEXT,
       SC_TOK_SPLIT_CONTIGUOUS, SC_TOK_SPLIT_COUNT };
enum { SC_TOK_PREPEND_NEVER, SC_TOK_PREPEND_FIRST, SC_TOK_PREPEND_ALWAYS, SC_TOK_PREPEND_COUNT };

#define SC_TOK_MAX_STEPS 16        /* normalizers, and pre-tokenizers */
#define SC_TOK_MAX_MERGES ((int64_t)1 << 26)
#define SC_TOK_MAX_STRING 65536    /* bytes of one pipeline string or regex */
#define SC_TOK_MAX_TEMPLATE ((size_t)1 << 24)

typedef struct sc_tok_norm_state {
    int kind;            /* SC_TOK_NORM_* */
    const char *a, *b;   /* PREPEND: a; REPLACE: a -> b */
    size_t na, nb;
    bool left, right;    /* STRIP */
} sc_tok_norm_state;

typedef struct sc_tok_pre_state {
    int kind;            /* SC_TOK_PRE_* */
    const char *regex;   /* SPLIT by regex, BYTELEVEL with its regex (NULL: none) */
    size_t nregex;
    const char *str;     /* SPLIT by a literal; METASPACE replacement (NULL: none) */
    size_t nstr;
    int behavior;        /* SPLIT: SC_TOK_SPLIT_* */
    bool invert;         /* SPLIT */
    int prepend;         /* METASPACE: SC_TOK_PREPEND_* */
    bool split;          /* METASPACE */
    bool add_prefix_space; /* BYTELEVEL */
    bool individual;     /* DIGITS */
} sc_tok_pre_state;

typedef struct sc_tok_state {
    char kind[32];          /* "sentencepiece", "bpe-bytelevel", "bpe-sentencepiece" */
    int64_t n;              /* tokens */
    const uint32_t *key_off; /* [n + 1]: token i is keys[key_off[i] .. key_off[i + 1]) */
    const char *keys;       /* spellings as the encoder looks them up (raw bytes for byte-level) */
    size_t keys_len;
    const float *scores;    /* [n], or NULL: all 0 */
    const int32_t *types;   /* [n] SC_TOKTYPE_* (0 to 6) */
    int64_t n_text;         /* tokens whose decoded text differs from their key */
    const int32_t *text_ids; /* [n_text], strictly increasing */
    const uint32_t *text_off; /* [n_text + 1] into texts */
    const char *texts;
    size_t texts_len;
    int32_t bos, eos, unk;  /* -1: none */
    bool add_bos_default;   /* the source asks for BOS */
    bool dummy_prefix;      /* decoding drops the leading space of the first piece */
    bool sp_space_in;       /* encoding reads U+2581 in text as a space */
    const char *chat_template; /* NULL: none */
    size_t chat_template_len;
    int encoder;            /* SC_TOK_ENC_* */
    bool spm_add_prefix, spm_squash_spaces; /* SPM: dummy prefix, remove_extra_whitespaces */
    bool byte_level, byte_fallback, fuse_unk, ignore_merges; /* BPE */
    int n_norm, n_pre;
    sc_tok_norm_state norm[SC_TOK_MAX_STEPS];
    sc_tok_pre_state pre[SC_TOK_MAX_STEPS];
    int64_t n_merges;
    const int32_t *merges;  /* [n_merges][2]: (left id, right id) in rank order */
    void *owned_[4];        /* buffers sc_tokenizer_state allocated */
} sc_tok_state;

/* Fills s from t. The state points into t and into buffers it allocates:
 * use it while t lives, then sc_tok_state_free. SC_EUNSUPPORTED when t holds
 * something the state cannot describe. */
sc_status sc_tokenizer_state(const sc_tokenizer *t, sc_tok_state *s, sc_err *err);
void sc_tok_state_free(sc_tok_state *s);
/* Builds a tokenizer from a state, validating every field (messages name
 * `what` and the field by its artifact name, e.g. "tokenizer.merges[7]"). */
sc_status sc_tokenizer_from_state(const char *what, const sc_tok_state *s, sc_tokenizer **out, sc_err *err);

/* Writes t's state as sections "tokenizer.*" (zstd level `compress`, 0 raw)
 * and fills the manifest object tj. SC_EUNSUPPORTED (nothing written) when
 * the state cannot be stored; the caller may then record that none is
 * embedded. */
sc_status sc_tok_serial_write(const sc_tokenizer *t, srt_writer *w, int compress, cJSON *tj, sc_err *err);
/* Reads the tokenizer described by the manifest object tj (the artifact's
 * "tokenizer", as the container parsed it: srt_container_manifest), at most
 * max_vocab tokens. *out stays NULL when none is embedded (kind "none",
 * missing, or a kind this reader does not know).
 * Artifacts written before the state existed ("sentencepiece" without
 * "state") load as they always did. path names the file in messages. */
sc_status sc_tok_serial_read(srt_container *ct, const char *path, const srt_json *tj, int64_t max_vocab,
                             sc_tokenizer **out, sc_err *err);

#endif
