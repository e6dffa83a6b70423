/* tokenizer.h - token ids <-> text.
 *
 * This file implements the SentencePiece-style vocabulary that llama2.c uses:
 * pieces with scores, a dummy-prefix space, greedy merging of the adjacent
 * pair whose concatenation is the highest-scoring piece (leftmost on ties),
 * and byte fallback to <0xXX> pieces. It serves llama2.c tokenizer.bin files
 * and GGUF vocabularies of type "llama" (whose pieces spell spaces as U+2581,
 * normalised to ' ' at load). */
#ifndef SC_TOKENIZER_H
#define SC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct sc_tokenizer sc_tokenizer;

/* A growable list of token ids. */
typedef struct sc_tokens {
    int32_t *ids;
    size_t n, cap;
} sc_tokens;

sc_status sc_tokens_push(sc_tokens *t, int32_t id);
void sc_tokens_free(sc_tokens *t);

/* GGUF / SentencePiece token types. */
enum { SC_TOKTYPE_NORMAL = 1, SC_TOKTYPE_UNKNOWN = 2, SC_TOKTYPE_CONTROL = 3,
       SC_TOKTYPE_USER = 4, SC_TOKTYPE_UNUSED = 5, SC_TOKTYPE_BYTE = 6 };

/* Loads a llama2.c tokenizer.bin holding exactly vocab_size pieces. */
sc_status sc_tokenizer_load_llama2c(const char *path, int64_t vocab_size, sc_tokenizer **out, sc_err *err);

/* Builds a tokenizer from pieces (UTF-8 bytes, pieces[i] of length lens[i]),
 * scores (may be NULL: all 0) and types (may be NULL: all normal). When
 * sp_space is true, U+2581 in pieces is replaced by ' '. `what` names the
 * source in error messages. bos/eos/unk may be -1. */
sc_status sc_tokenizer_from_pieces(const char *what, const char *const *pieces, const size_t *lens,
                                   const float *scores, const int32_t *types, int64_t n, int32_t bos,
                                   int32_t eos, int32_t unk, bool sp_space, sc_tokenizer **out, sc_err *err);
void sc_tokenizer_free(sc_tokenizer *t);

int64_t sc_tokenizer_vocab_size(const sc_tokenizer *t);
int32_t sc_tokenizer_bos(const sc_tokenizer *t);
int32_t sc_tokenizer_eos(const sc_tokenizer *t);
const char *sc_tokenizer_kind(const sc_tokenizer *t);
/* Piece bytes of id (spaces as ' '); *len receives the length. */
const char *sc_tokenizer_piece(const sc_tokenizer *t, int32_t id, size_t *len);

/* Appends the encoding of text[0..len) to out, optionally with BOS first and
 * EOS last. Empty text gives no dummy prefix (llama2.c behaviour). */
sc_status sc_tokenizer_encode(const sc_tokenizer *t, const char *text, size_t len, bool add_bos, bool add_eos,
                              sc_tokens *out, sc_err *err);

/* Bytes that token id contributes to text after token prev (llama2.c rules:
 * the leading space of a piece after BOS is dropped, <0xXX> pieces are raw
 * bytes, control tokens produce nothing). Writes at most cap bytes to buf and
 * returns the number written. */
size_t sc_tokenizer_decode(const sc_tokenizer *t, int32_t prev, int32_t id, char *buf, size_t cap);

#endif
