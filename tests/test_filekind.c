/* test_filekind.c - files recognised by their first bytes (formats/filekind.h)
 * before any reader parses them:
 *  - sc_file_kind on every kind the assets hold, on files made here (.scal,
 *    .spk, text, a text starting with a blank line, empty, junk, missing) and
 *    on a llama2.c tokenizer.bin whose max_token_length is 10 (first byte 0x0A,
 *    as a protobuf's): a tokenizer.bin, loaded as one, with or without the
 *    model's vocabulary size;
 *  - the CLI names a file given in the wrong place for what it is, on one
 *    line, exit status 2: a .scal as a model, a .spk as a calibration, a
 *    model, a calibration or text as a tokenizer, a model as data, ...;
 *  - `tokenize -m MODEL --tokenizer tokenizer.bin` and `tokenize --tokenizer tokenizer.bin`. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "filekind.h"
#include "model.h"
#include "testing.h"
#include "tokenizer.h"

static char out[1 << 16];

/* runs the CLI with args (stderr to stdout), returns the exit status */
static int cli(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", SC_CLI_PATH, args);
    return sc_run(cmd, out, sizeof out);
}

static size_t lines(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* the CLI refuses with exactly one line holding want, exit status 2 */
static void refused(const char *args, const char *want) {
    int rc = cli(args);
    CHECK_MSG(rc == 2 && lines(out) == 1 && strstr(out, want), "%s: exit %d: [%s], want [%s]", args, rc, out, want);
    CHECK_MSG(!strstr(out, "outside [") && !strstr(out, "out of range"), "%s: [%s]", args, out);
}

static void kind_is(const char *path, sc_filekind want) {
    if (!path) return;
    sc_filekind k = sc_file_kind(path);
    CHECK_MSG(k == want, "%s: %s, want %s", path, sc_file_kind_desc(k), sc_file_kind_desc(want));
}

int main(void) {
    const char *model = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin");
    const char *gguf = sc_asset("models/stories260K.gguf"), *text = sc_asset("text/tinystories_valid_a.txt");
    if (!model || !tok || !gguf || !text) return sc_test_finish();
    sc_err err = {{0}};

    /* files made here */
    const char *scal = sc_tmp_path("c.scal"), *spk = sc_tmp_path("m.spk"), *tok10 = sc_tmp_path("tok10.bin");
    const char *txt = sc_tmp_path("notes.txt"), *blank = sc_tmp_path("blank.txt"), *empty = sc_tmp_path("empty.bin");
    const char *junk = sc_tmp_path("junk.bin");
    char args[4096];
    snprintf(args, sizeof args, "compute -m %s --tokenizer %s -f %s --max-docs 5 --method claws -q -o "
        "%s", model, tok, text, scal);
    CHECK(cli(args) == 0);
    snprintf(args, sizeof args, "pack -m %s --tokenizer %s --layout q8_0 -q -o %s", model, tok, spk);
    CHECK(cli(args) == 0);
    CHECK(sc_write_bytes(txt, "Once upon a time\nthere was a cat.\n", 34));
    const char *bl = "\n#\n\nOnce upon a time there was a cat who sat on a mat.\n"; /* 0x0A, 35, 0x0A, 10 */
    CHECK(sc_write_bytes(blank, bl, strlen(bl)));
    CHECK(sc_write_bytes(empty, "", 0));
    CHECK(sc_write_bytes(junk, "\x01\x02\x03\x04\xff\xfe\x00\x00\x00", 9));
    char *tb;
    size_t tlen;
    CHECK(sc_read_file(tok, 1 << 20, &tb, &tlen, &err) == SC_OK);
    tb[0] = 10, tb[1] = tb[2] = tb[3] = 0; /* max_token_length 10: the file starts with 0x0A */
    CHECK(sc_write_bytes(tok10, tb, tlen));
    free(tb);

    kind_is(gguf, SC_FILE_GGUF);
    kind_is(sc_asset("tokenizers/llama_cpp_vocab/ggml-vocab-llama-spm.gguf"), SC_FILE_GGUF);
    kind_is(model, SC_FILE_LLAMA2C);
    kind_is(tok, SC_FILE_TOKBIN);
    kind_is(tok10, SC_FILE_TOKBIN);
    kind_is(sc_asset("tokenizers/llama2_sentencepiece/tokenizer.bin"), SC_FILE_TOKBIN);
    kind_is(sc_asset("tokenizers/llama2_sentencepiece/tokenizer.model"), SC_FILE_SP_MODEL);
    kind_is(sc_asset("tokenizers/hf/llama3/tokenizer.json"), SC_FILE_JSON);
    kind_is(sc_asset("models/stories260K-hf/config.json"), SC_FILE_JSON);
    kind_is(sc_asset("models/stories260K-hf/model.safetensors"), SC_FILE_SAFETENSORS);
    kind_is(sc_asset("models/stories260K-hf"), SC_FILE_DIR);
    kind_is(text, SC_FILE_TEXT);
    kind_is(scal, SC_FILE_SCAL);
    kind_is(spk, SC_FILE_SPK);
    kind_is(txt, SC_FILE_TEXT);
    kind_is(blank, SC_FILE_TEXT);
    kind_is(empty, SC_FILE_EMPTY);
    kind_is(junk, SC_FILE_UNKNOWN);
    kind_is(sc_tmp_path("missing.bin"), SC_FILE_UNREADABLE);

    /* the 0x0A tokenizer.bin loads as one (not as a protobuf), with or without the vocabulary size, and
       encodes as the original */
    sc_tokenizer *a = NULL, *b = NULL, *c = NULL;
    CHECK_MSG(sc_tokenizer_load_auto(tok, 512, &a, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_tokenizer_load_auto(tok10, 512, &b, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_tokenizer_load_auto(tok10, 0, &c, &err) == SC_OK, "%s", err.msg);
    if (a && b && c) {
        CHECK(sc_tokenizer_vocab_size(c) == 512);
        sc_tokens ta = {0}, tb2 = {0}, tc = {0};
        const char *s = "Once upon a time, there was a little girl.";
        CHECK(sc_tokenizer_encode(a, s, strlen(s), true, false, &ta, &err) == SC_OK);
        CHECK(sc_tokenizer_encode(b, s, strlen(s), true, false, &tb2, &err) == SC_OK);
        CHECK(sc_tokenizer_encode(c, s, strlen(s), true, false, &tc, &err) == SC_OK);
        CHECK(ta.n > 5 && ta.n == tb2.n && ta.n == tc.n && !memcmp(ta.ids, tb2.ids, ta.n * sizeof *ta.ids) &&
              !memcmp(ta.ids, tc.ids, ta.n * sizeof *ta.ids));
        sc_tokens_free(&ta);
        sc_tokens_free(&tb2);
        sc_tokens_free(&tc);
    }
    sc_tokenizer_free(a);
    sc_tokenizer_free(b);
    sc_tokenizer_free(c);
    /* refusals through the API: status SC_EARG and the kind named */
    sc_model *m = NULL;
    CHECK(sc_model_load(scal, &m, &err) == SC_EARG && strstr(err.msg, "is a sparsecal calibration file") && !m);
    CHECK(sc_tokenizer_load_auto(model, 512, &a, &err) == SC_EARG && strstr(err.msg, "is a llama2.c checkpoint") && !a);

    /* the CLI: one line naming the file and what it is, exit 2 */
    char want[1024];
    snprintf(args, sizeof args, "ppl -m %s -f %s", scal, text);
    snprintf(want, sizeof want, "sparsecal ppl: %s is a sparsecal calibration file (--calib), not a model\n", scal);
    refused(args, want);
    snprintf(args, sizeof args, "info -m %s", txt);
    snprintf(want, sizeof want, "%s is a text file (-f), not a model", txt);
    refused(args, want);
    snprintf(args, sizeof args, "generate -m %s", empty);
    refused(args, "is an empty file, not a model");
    snprintf(args, sizeof args, "ppl -m %s -f %s", sc_asset("tokenizers/llama2_sentencepiece/tokenizer.model"), text);
    refused(args, "is a SentencePiece tokenizer.model (--tokenizer), not a model");
    snprintf(args, sizeof args, "eval -m %s --tokenizer %s -f %s --calib %s --method claws --density "
        "0.5", model, tok, text, spk);
    snprintf(want, sizeof want, "%s is a sparsecal packed artifact (-m, run --artifact), not a calibration file", spk);
    refused(args, want);
    snprintf(args, sizeof args, "merge %s %s -o %s", scal, gguf, sc_tmp_path("x.scal"));
    refused(args, "stories260K.gguf is a GGUF model (-m), not a calibration file");
    snprintf(args, sizeof args, "inspect %s", model);
    refused(args, "stories260K.bin is a llama2.c checkpoint (-m), not a sparsecal file (.scal or .spk)");
    snprintf(args, sizeof args, "run --artifact %s", scal);
    refused(args, "is a sparsecal calibration file (--calib), not a packed artifact");
    snprintf(args, sizeof args, "ppl -m %s --tokenizer %s -f %s", model, txt, text);
    refused(args, "notes.txt is a text file (-f), not a tokenizer");
    snprintf(args, sizeof args, "tokenize --tokenizer %s -p hello", scal);
    refused(args, "is a sparsecal calibration file (--calib), not a tokenizer");
    snprintf(args, sizeof args, "tokenize --tokenizer %s -p hello", gguf);
    CHECK_MSG(cli(args) == 0, "a GGUF carries its vocabulary: [%s]", out);
    snprintf(args, sizeof args, "ppl -m %s --tokenizer %s -f %s", model, tok, model);
    refused(args, "stories260K.bin is a llama2.c checkpoint (-m), not text data");
    snprintf(args, sizeof args, "ppl -m %s --tokens %s", model, spk);
    refused(args, "is a sparsecal packed artifact (-m, run --artifact), not a file of token ids");

    /* tokenize: --tokenizer with -m (the model's vocabulary size) and --tokenizer alone, the 0x0A file too */
    char ref[256] = "";
    snprintf(args, sizeof args, "tokenize --tokenizer %s -p 'Once upon a time'", tok);
    CHECK(cli(args) == 0 && strlen(out) > 5);
    snprintf(ref, sizeof ref, "%s", out);
    snprintf(args, sizeof args, "tokenize -m %s --tokenizer %s -p 'Once upon a time'", model, tok);
    CHECK_MSG(cli(args) == 0 && !strcmp(out, ref), "[%s] vs [%s]", out, ref);
    snprintf(args, sizeof args, "tokenize -m %s --tokenizer %s -p 'Once upon a time'", model, tok10);
    CHECK_MSG(cli(args) == 0 && !strcmp(out, ref), "[%s] vs [%s]", out, ref);
    snprintf(args, sizeof args, "tokenize --tokenizer %s -p 'Once upon a time'", spk);
    CHECK_MSG(cli(args) == 0 && !strcmp(out, ref), "the artifact's tokenizer: [%s] vs [%s]", out, ref);
    return sc_test_finish();
}
