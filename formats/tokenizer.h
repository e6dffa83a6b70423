/* tokenizer.h - token ids <-> text, one interface over several kinds:
 *
 *  - SentencePiece-style BPE by score (tok_spm.c): llama2.c tokenizer.bin,
 *    GGUF vocabularies of type "llama" and SentencePiece tokenizer.model
 *    files of type BPE. Pieces with scores, a dummy-prefix space, greedy
 *    merging of the adjacent pair whose concatenation is the highest-scoring
 *    piece (leftmost on ties), byte fallback to <0xXX> pieces. Pieces that
 *    spell spaces as U+2581 are normalised to ' ' at load.
 *  - BPE by merge rank (tok_bpe.c): Hugging Face tokenizer.json (byte-level
 *    BPE with regex pre-tokenizers, and SentencePiece-style BPE with "\u2581"
 *    and byte fallback) and GGUF vocabularies of type "gpt2".
 *
 * Added tokens (GGUF types CONTROL / USER_DEFINED / UNKNOWN, tokenizer.json
 * added_tokens) are recognised inside text before the model sees it:
 * user-defined ones always, special ones only with SC_ENC_SPECIAL (like
 * llama.cpp's --parse-special). docs/TOKENIZERS.md has the details. */
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

/* Loads a llama2.c tokenizer.bin: its first vocab_size pieces, or when
 * vocab_size <= 0 every piece it holds (the file has no count: its records
 * must then end exactly at its end). */
sc_status sc_tokenizer_load_llama2c(const char *path, int64_t vocab_size, sc_tokenizer **out, sc_err *err);
/* Loads a Hugging Face tokenizer.json (BPE models); tokenizer_config.json
 * beside it, when present, supplies BOS/EOS and the chat template. */
sc_status sc_tokenizer_load_hf(const char *path, sc_tokenizer **out, sc_err *err);
/* Loads a SentencePiece tokenizer.model (ModelProto; BPE model type). */
sc_status sc_tokenizer_load_sp_model(const char *path, sc_tokenizer **out, sc_err *err);
/* Chooses from what path is: a directory (tokenizer.json, else
 * tokenizer.model, else tokenizer.bin inside it), a .gguf file, a .json
 * file, a SentencePiece .model, a packed artifact's embedded tokenizer, else
 * a llama2.c tokenizer.bin of vocab_size pieces (<= 0: all it holds), told
 * apart by their first bytes (sc_file_kind; a file's name decides only when
 * its bytes match no kind). A file of another kind (a model, a calibration,
 * text) is refused by name. */
sc_status sc_tokenizer_load_auto(const char *path, int64_t vocab_size, sc_tokenizer **out, sc_err *err);

/* Builds a tokenizer from pieces (UTF-8 bytes, pieces[i] of length lens[i]),
 * scores (may be NULL: all 0) and types (may be NULL: all normal). When
 * sp_space is true, U+2581 in pieces is replaced by ' ' (and read as a space
 * in text). `what` names the source in error messages. bos/eos/unk may be -1. */
sc_status sc_tokenizer_from_pieces(const char *what, const char *const *pieces, const size_t *lens,
                                   const float *scores, const int32_t *types, int64_t n, int32_t bos,
                                   int32_t eos, int32_t unk, bool sp_space, sc_tokenizer **out, sc_err *err);
void sc_tokenizer_free(sc_tokenizer *t);

int64_t sc_tokenizer_vocab_size(const sc_tokenizer *t);
int32_t sc_tokenizer_bos(const sc_tokenizer *t);
int32_t sc_tokenizer_eos(const sc_tokenizer *t);
/* "sentencepiece", "bpe-bytelevel", "bpe-sentencepiece". */
const char *sc_tokenizer_kind(const sc_tokenizer *t);
/* Piece bytes of id (spaces as ' ', byte-level pieces as raw bytes); *len
 * receives the length. */
const char *sc_tokenizer_piece(const sc_tokenizer *t, int32_t id, size_t *len);
/* SC_TOKTYPE_* of id (0 when out of range). */
int32_t sc_tokenizer_token_type(const sc_tokenizer *t, int32_t id);
/* The piece's score (merge priority of SentencePiece-style vocabularies); 0 out of range. */
float sc_tokenizer_score(const sc_tokenizer *t, int32_t id);
/* The id whose spelling is exactly s[0..len) (added tokens first), or -1. */
int32_t sc_tokenizer_find(const sc_tokenizer *t, const char *s, size_t len);
/* Whether the source asks for BOS by default (tokenizer_config.json
 * add_bos_token, GGUF tokenizer.ggml.add_bos_token); true for llama2.c. */
bool sc_tokenizer_add_bos_default(const sc_tokenizer *t);
/* The chat template text the source carries (tokenizer_config.json
 * chat_template, GGUF tokenizer.chat_template), or NULL. */
const char *sc_tokenizer_chat_template(const sc_tokenizer *t);

/* Appends the encoding of text[0..len) to out, optionally with BOS first and
 * EOS last. Empty text gives no dummy prefix (llama2.c behaviour). Special
 * tokens written in the text are not recognised (user-defined ones are). */
sc_status sc_tokenizer_encode(const sc_tokenizer *t, const char *text, size_t len, bool add_bos, bool add_eos,
                              sc_tokens *out, sc_err *err);

/* Flags for sc_tokenizer_encode_ex. */
enum { SC_ENC_BOS = 1u, SC_ENC_EOS = 2u, SC_ENC_SPECIAL = 4u /* parse special tokens in the text */ };
sc_status sc_tokenizer_encode_ex(const sc_tokenizer *t, const char *text, size_t len, unsigned flags, sc_tokens *out,
                                 sc_err *err);

/* Bytes that token id contributes to text after token prev (prev < 0: the
 * first token). The leading space of a piece right after BOS or at the start
 * is dropped when the tokenizer adds a dummy prefix; <0xXX> pieces are raw
 * bytes; control tokens produce nothing. Writes at most cap bytes to buf and
 * returns the number written. Byte-level pieces may end inside a UTF-8
 * character: concatenate the outputs before printing. */
size_t sc_tokenizer_decode(const sc_tokenizer *t, int32_t prev, int32_t id, char *buf, size_t cap);
/* Decodes a whole sequence into a malloc'd NUL-terminated string. */
sc_status sc_tokenizer_decode_all(const sc_tokenizer *t, const int32_t *ids, size_t n, char **out, size_t *len,
                                  sc_err *err);

#endif
