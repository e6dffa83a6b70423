/* fuzz_data.c - data files: text split into documents, JSONL "text" and chat
 * "messages" lines, and pre-tokenized id files. The first byte picks the
 * options (kind, separator, packing, chat format, special tokens); the rest is
 * the file, tokenized with a byte-level vocabulary built here. */
#include <stdio.h>

#include "data.h"
#include "fuzz_common.h"
#include "tokenizer.h"

/* 259 pieces: <unk>, <s>, </s>, then every byte as itself */
static sc_tokenizer *byte_tokenizer(void) {
    static char bytes[256];
    const char *pieces[259] = {"<unk>", "<s>", "</s>"};
    size_t lens[259] = {5, 3, 4};
    for (int b = 0; b < 256; b++) {
        bytes[b] = (char)b;
        pieces[3 + b] = &bytes[b];
        lens[3 + b] = 1;
    }
    sc_tokenizer *t = NULL;
    sc_err err;
    if (sc_tokenizer_from_pieces("fuzz", pieces, lens, NULL, NULL, 259, 1, 2, 0, false, &t, &err) != SC_OK) return NULL;
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static sc_tokenizer *tok;
    if (!tok && !(tok = byte_tokenizer())) return 0;
    if (size < 1) return 0;
    const uint8_t o = data[0];
    const char *p = fz_path(data + 1, size - 1);
    if (!p) return 0;
    sc_err err;
    sc_dataset d = {0};
    if (o & 0x80) { /* pre-tokenized ids */
        if (sc_data_load_tokens(p, 259, o & 0x40 ? 3 : 0, &d, &err) == SC_OK) sc_dataset_free(&d);
        return 0;
    }
    sc_data_opts opt;
    sc_data_opts_default(&opt);
    opt.kind = (sc_data_kind)(o % 3);
    opt.separator = o & 0x04 ? "<|endoftext|>" : NULL;
    opt.add_eos = (o & 0x08) != 0;
    opt.pack = o & 0x10 ? 7 : 0;
    opt.parse_special = (o & 0x20) != 0;
    opt.chat = (sc_chat_format)((o >> 5) % 5);
    opt.max_docs = o & 0x40 ? 5 : 0;
    if (sc_data_load_text(p, tok, &opt, &d, &err) == SC_OK) sc_dataset_free(&d);
    return 0;
}
