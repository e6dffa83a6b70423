/* data.h - calibration and evaluation data as sequences of token ids.
 *
 * Text files are split into documents on blank lines (or on a separator such
 * as "<|endoftext|>"); JSONL files contribute the "text" field of each line;
 * token files hold one pre-tokenized sequence per line (whitespace-separated
 * decimal ids, used exactly as given). */
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

typedef struct sc_data_opts {
    sc_data_kind kind;     /* AUTO: JSONL when the name ends in .jsonl or the first byte is '{' */
    const char *separator; /* NULL: documents are separated by blank lines */
    bool add_bos;          /* prepend BOS to every document (default true) */
    bool add_eos;
    int64_t max_docs;      /* 0: all */
} sc_data_opts;

void sc_data_opts_default(sc_data_opts *o);

/* Splits text into documents per opts (no tokenizer needed); calls fn for
 * each non-empty document. Exposed for tests. */
typedef sc_status (*sc_doc_fn)(void *user, const char *doc, size_t len, sc_err *err);
sc_status sc_data_split_text(const char *path, const char *text, size_t len, const sc_data_opts *o, sc_doc_fn fn,
                             void *user, sc_err *err);

sc_status sc_data_load_text(const char *path, const sc_tokenizer *tok, const sc_data_opts *o, sc_dataset *out,
                            sc_err *err);
/* Token ids must lie in [0, vocab_size). */
sc_status sc_data_load_tokens(const char *path, int64_t vocab_size, int64_t max_docs, sc_dataset *out, sc_err *err);
void sc_dataset_free(sc_dataset *d);

#endif
