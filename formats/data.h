/* data.h - calibration and evaluation data as sequences of token ids.
 *
 * Text files are split into documents on blank lines (or on a separator such
 * as "<|endoftext|>"); JSONL files contribute the "text" field of each line,
 * or a "messages" conversation ([{"role", "content"}]) rendered in a chat
 * format; token files hold one pre-tokenized sequence per line
 * (whitespace-separated decimal ids, used exactly as given).
 *
 * Then, in this order: documents are shuffled (when asked, with a seed),
 * cut to max_docs, tokenized (BOS/EOS as asked), and either kept one per
 * sequence or packed end to end into sequences of exactly `pack` tokens
 * (the incomplete tail is dropped). */
#ifndef SC_DATA_H
#define SC_DATA_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "tokenizer.h"

typedef struct sc_dataset {
    sc_tokens *seqs;
    size_t n_seqs;
    size_t n_tokens;
} sc_dataset;

typedef enum sc_data_kind { SC_DATA_AUTO = 0, SC_DATA_TEXT, SC_DATA_JSONL } sc_data_kind;

/* Chat formats for "messages" lines (tok_chat.c). AUTO: from the
 * tokenizer's chat template (tokenizer_config.json / GGUF), by markers. */
typedef enum sc_chat_format { SC_CHAT_AUTO = 0, SC_CHAT_LLAMA3, SC_CHAT_GEMMA, SC_CHAT_CHATML, SC_CHAT_MISTRAL } sc_chat_format;

typedef struct sc_data_opts {
    sc_data_kind kind;     /* AUTO: JSONL when the name ends in .jsonl or the first byte is '{' */
    const char *separator; /* NULL: documents are separated by blank lines */
    bool add_bos;          /* prepend BOS to every document (default true) */
    bool add_eos;
    int64_t max_docs;      /* 0: all */
    int64_t skip_docs;     /* leave out the first N documents (after shuffling, before max_docs) */
    bool shuffle;          /* shuffle documents (before max_docs) with seed */
    uint64_t seed;
    int64_t pack;          /* 0: one document per sequence; N: sequences of exactly N tokens */
    bool parse_special;    /* recognise special tokens written in text documents */
    sc_chat_format chat;   /* for "messages" lines */
} sc_data_opts;

typedef struct sc_chat_msg {
    const char *role; /* NUL-terminated */
    const char *content;
    size_t content_len;
} sc_chat_msg;

const char *sc_chat_name(sc_chat_format f);
/* "auto", "llama3", "gemma", "chatml" (or "qwen"), "mistral". */
sc_status sc_chat_parse(const char *s, sc_chat_format *out, sc_err *err);
/* The format whose markers a chat template contains; AUTO when none. */
sc_chat_format sc_chat_detect(const char *tmpl);
/* Renders a conversation (no BOS: the encoder adds it) into a malloc'd
 * string holding the format's special tokens as text. */
sc_status sc_chat_render(sc_chat_format f, const sc_chat_msg *msgs, size_t n, char **out, size_t *len, sc_err *err);

void sc_data_opts_default(sc_data_opts *o);

/* Splits text into documents per opts (no tokenizer needed); calls fn for
 * each non-empty document. Exposed for tests. */
typedef sc_status (*sc_doc_fn)(void *user, const char *doc, size_t len, sc_err *err);
sc_status sc_data_split_text(const char *path, const char *text, size_t len, const sc_data_opts *o, sc_doc_fn fn,
                             void *user, sc_err *err);

/* The normalisation a text document gets: leading lines that are empty or
 * only spaces/tabs, and trailing spaces, tabs and line breaks, are dropped;
 * nothing else changes (leading spaces of the first line stay). `tokenize
 * --lines` applies it to each line, so that a file whose documents are single
 * lines tokenizes line by line to exactly the sequences -f reads. */
void sc_data_trim_doc(const char **s, size_t *n);

sc_status sc_data_load_text(const char *path, const sc_tokenizer *tok, const sc_data_opts *o, sc_dataset *out,
                            sc_err *err);
/* Token ids must lie in [0, vocab_size). */
sc_status sc_data_load_tokens(const char *path, int64_t vocab_size, int64_t max_docs, sc_dataset *out, sc_err *err);
void sc_dataset_free(sc_dataset *d);

/* Deterministic Fisher-Yates shuffle of the sequences (splitmix64 from seed). */
void sc_dataset_shuffle(sc_dataset *d, uint64_t seed);
/* Keeps the first n sequences (n <= 0: all). */
void sc_dataset_truncate(sc_dataset *d, int64_t n);
/* Keeps sequences [skip, skip + max) (max 0: all after skip); SC_EFORMAT
 * naming `what` when nothing is left. */
sc_status sc_dataset_window(sc_dataset *d, int64_t skip, int64_t max, const char *what, sc_err *err);
/* Concatenates all sequences and cuts them into sequences of exactly n
 * tokens, dropping the incomplete tail; fails when not one fits. */
sc_status sc_dataset_pack(sc_dataset *d, int64_t n, const char *what, sc_err *err);

#endif
