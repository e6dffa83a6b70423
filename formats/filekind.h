/* filekind.h - what a file is, from its first bytes, before any reader parses
 * it: every loader's entry point asks, so that a file given in the wrong place
 * is named for what it is ("c.scal is a sparsecal calibration file (--calib),
 * not a model") instead of failing deep in the wrong reader ("dim =
 * 1380012115 is outside [1, 65536]").
 *
 * Magics decide first (GGUF, the .scal and .spk containers), then structure:
 * a safetensors header length that fits the file and opens a JSON object, a
 * llama2.c checkpoint header whose seven sizes are all in range and agree, a
 * llama2.c tokenizer.bin whose records (score, length, bytes) chain through
 * the bytes read, a SentencePiece ModelProto (field 1 holding a piece message
 * that starts with its field 1), then JSON and UTF-8 text. Detection never
 * fails: what matches nothing is SC_FILE_UNKNOWN and goes to the reader the
 * caller would have used, whose message names the field that is wrong. */
#ifndef SC_FILEKIND_H
#define SC_FILEKIND_H

#include <stdbool.h>

#include "common.h"
#include "srt_container.h"

typedef enum sc_filekind {
    SC_FILE_UNREADABLE = 0, /* cannot be opened or read */
    SC_FILE_DIR,
    SC_FILE_EMPTY,
    SC_FILE_GGUF,
    SC_FILE_SCAL,        /* sparsecal calibration container, "SPARSCAL" */
    SC_FILE_SPK,         /* sparsecal packed artifact, "SPARSPAK" */
    SC_FILE_SAFETENSORS,
    SC_FILE_LLAMA2C,     /* llama2.c checkpoint (model.bin) */
    SC_FILE_TOKBIN,      /* llama2.c tokenizer.bin */
    SC_FILE_SP_MODEL,    /* SentencePiece tokenizer.model (protobuf) */
    SC_FILE_JSON,        /* starts with '{' or '[' (tokenizer.json, config.json, JSONL) */
    SC_FILE_TEXT,        /* UTF-8 text without control characters but tab, CR, LF, FF */
    SC_FILE_UNKNOWN,
    SC_FILE_KIND_COUNT
} sc_filekind;

#define SC_FILE_BIT(k) (1u << (unsigned)(k))

/* What path is (reads at most its first 4 KiB; a pipe or device is not read:
 * SC_FILE_UNKNOWN). */
sc_filekind sc_file_kind(const char *path);
/* "a sparsecal calibration file (--calib)": the kind with an article and,
 * where one option takes it, that option. */
const char *sc_file_kind_desc(sc_filekind k);
/* Whether kind k is one of those in the mask of SC_FILE_BIT()s, or one
 * detection cannot name (UNKNOWN, UNREADABLE): then the caller's reader
 * speaks. Otherwise a one-line refusal "P is D, not WHAT" in err (status
 * SC_EARG: the file is fine, the place it was given is not). */
bool sc_file_kind_ok(const char *path, sc_filekind k, unsigned accept, const char *what, sc_err *err);
/* The same on path's detected kind: SC_OK, or SC_EARG and the refusal. */
sc_status sc_file_expect(const char *path, unsigned accept, const char *what, sc_err *err);

/* A failure (cs, msg) of srt_container_open or srt_model_open on path, which
 * should have been of container kind `kind`, for the toolchain: the status
 * mapped to sc_status (unreadable: SC_EIO, malformed: SC_EFORMAT) with msg,
 * or a file of another kind (the other container, a model, text) refused by
 * name (SC_EARG) instead of by its magic bytes. */
sc_status sc_container_error(const char *path, srt_ct_kind kind, srt_ct_status cs, const char *msg, sc_err *err);
/* srt_container_open for the toolchain, its failures through sc_container_error. */
sc_status sc_container_open(const char *path, srt_ct_kind kind, srt_container **out, sc_err *err);

#endif
