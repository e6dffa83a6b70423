/* fuzz_tokbin.c - llama2.c tokenizer.bin: the first two bytes choose the
 * vocabulary size the model would give (1..4096), the rest is the file; the
 * tokenizer it yields encodes and decodes text. */
#include "fuzz_common.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    int64_t vocab = 1 + ((data[0] | (data[1] << 8)) % 4096);
    const char *p = fz_path(data + 2, size - 2);
    if (!p) return 0;
    sc_err err;
    sc_tokenizer *t = NULL;
    if (sc_tokenizer_load_llama2c(p, vocab, &t, &err) == SC_OK) fz_exercise_tokenizer(t, data, size);
    sc_tokenizer_free(t);
    return 0;
}
