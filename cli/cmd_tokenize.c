/* cmd_tokenize.c - `sparsecal tokenize`: text -> ids (and pieces), ids ->
 * text, and a one-core encoding benchmark. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* --tokenizer alone: the tokenizer file (a llama2.c tokenizer.bin holds as many pieces
 * as its records); with -m, the model's vocabulary size checks it */
static sc_status load_tok(cli_inputs *in, sc_err *err) {
    if (in->tok_path && !in->model_path) {
        SC_TRY(sc_tokenizer_load_auto(in->tok_path, 0, &in->tok_owned, err));
        in->tok = in->tok_owned;
        return SC_OK;
    }
    return cli_load(in, true, err);
}

/* Parses "1 2 3" / "1,2,3" into ids. */
static sc_status parse_ids(const char *s, int64_t vocab, sc_tokens *out, sc_err *err) {
    while (*s) {
        if (*s == ' ' || *s == ',' || *s == '\n' || *s == '\t' || *s == '[' || *s == ']') {
            s++;
            continue;
        }
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || v >= vocab)
            return sc_errf(err, SC_EARG, "--decode: '%.20s' is not a token id below %lld", s, (long long)vocab);
        if (sc_tokens_push(out, (int32_t)v)) return sc_errf(err, SC_ENOMEM, "out of memory");
        s = end;
    }
    return SC_OK;
}

static void print_piece(const sc_tokenizer *t, int32_t id) {
    size_t n;
    const char *p = sc_tokenizer_piece(t, id, &n);
    printf("%d\t", id);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\n');
}

/* --lines: each line of text (its '\n' excluded) is one document, normalised as -f
 * normalises documents (sc_data_trim_doc), encoded alone and printed as one line of
 * ids, the format --tokens reads; a line left empty prints an empty line (no BOS),
 * which --tokens skips as -f skips empty documents. With json, one array per line
 * goes into arr instead. */
static sc_status encode_lines(const sc_tokenizer *tok, const char *text, size_t len, unsigned flags, cJSON *arr,
                              size_t *n_lines, size_t *n_tokens, sc_err *err) {
    sc_tokens ids = {0};
    sc_status st = SC_OK;
    for (size_t pos = 0; st == SC_OK && pos < len;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        const char *line = text + pos;
        size_t n = end - pos;
        pos = end + 1;
        sc_data_trim_doc(&line, &n);
        ids.n = 0;
        if (n > 0) st = sc_tokenizer_encode_ex(tok, line, n, flags, &ids, err);
        if (st) break;
        (*n_lines)++;
        *n_tokens += ids.n;
        if (arr) {
            cJSON *a = cJSON_CreateArray();
            cJSON_AddItemToArray(arr, a);
            for (size_t i = 0; i < ids.n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids.ids[i]));
        } else {
            for (size_t i = 0; i < ids.n; i++) printf("%s%d", i ? " " : "", ids.ids[i]);
            putchar('\n');
        }
    }
    sc_tokens_free(&ids);
    return st;
}

int cmd_tokenize(int argc, char **argv) {
    cli_inputs in = {0};
    const char *prompt = NULL, *decode = NULL;
    bool pieces = false, bos = false, eos = false, special = false, json = false, lines = false;
    int64_t bench = 0;
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        {"prompt", 'p', SC_ARG_STR, &prompt, "TEXT", "text to encode (this, -f or --decode is required)", 0, 0},
        {"file|data", 'f', SC_ARG_STR, &in.data_path, "FILE", "encode the whole text file as one text (default: "
            "-p)", 0, 0},
        {"", 't', SC_ARG_GONE, NULL, NULL, "-t is the thread count in every command, as in llama.cpp; give the "
            "tokenizer "
         "with --tokenizer FILE", 0, 0},
        {"decode", 0, SC_ARG_STR, &decode, "IDS", "decode ids ('1 2 3' or '1,2,3') to text (default: encode)", 0, 0},
        {"lines", 0, SC_ARG_FLAG, &lines, NULL, "each input line is one document: print one line of ids per line, "
            "the format --tokens reads (default: the whole input is one text); lines lose trailing whitespace as -f's "
            "documents do, and a blank line prints an empty line", 0, 0},
        {"pieces", 0, SC_ARG_FLAG, &pieces, NULL, "print one 'id<TAB>piece' line per token", 0, 0},
        {"bos", 0, SC_ARG_FLAG, &bos, NULL, "prepend BOS", 0, 0},
        {"eos", 0, SC_ARG_FLAG, &eos, NULL, "append EOS", 0, 0},
        {"parse-special", 0, SC_ARG_FLAG, &special, NULL, "recognise special tokens written in the text", 0, 0},
        {"bench", 0, SC_ARG_INT, &bench, "N", "encode (and decode) the text N times on one core; print MB/s "
            "(default: once, no timing)", 1, 1e6},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object", 0, 0},
        SC_OPTS_END("  sparsecal tokenize -m m.spk -p 'Once upon a time' --bos\n"
"  sparsecal tokenize --tokenizer tokenizer.json --decode '9906,1917'\n"
"  sparsecal tokenize --tokenizer tok512.bin -f stories.txt --bench 3 --json\n"
"  sparsecal tokenize -m m.spk -f stories.txt --lines --bos > ids.txt   # then: ppl -m m.spk --tokens ids.txt"),
    };
    int r = sc_parse_args("tokenize", "Encode text to token ids (or decode ids) with any tokenizer sparsecal reads;\n"
                                      "--bench measures single-core encoding throughput and load time.",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    sc_tokens ids = {0};
    char *text = NULL, *dec = NULL;
    size_t len = 0, dlen = 0;
    double t0 = sc_now(), t_load = 0, t_enc = 0, t_dec = 0;
    sc_status st = SC_OK;
    if (!in.tok_path && !in.model_path) st = sc_errf(&err, SC_EARG, "give a tokenizer (--tokenizer TOK) or a model "
        "(-m MODEL)");
    else if (!prompt && !in.data_path && !decode) st = sc_errf(&err, SC_EARG, "give -p TEXT, -f FILE or --decode IDS");
    else if (lines && (decode || pieces || bench))
        st = sc_errf(&err, SC_EARG, "--lines encodes line by line: not with --decode, --pieces or --bench");
    if (!st) st = load_tok(&in, &err);
    t_load = sc_now() - t0;
    if (!st && decode) {
        st = parse_ids(decode, sc_tokenizer_vocab_size(in.tok), &ids, &err);
    } else if (!st) {
        if (in.data_path) st = sc_read_file(in.data_path, (size_t)1 << 32, &text, &len, &err);
        else {
            len = strlen(prompt);
            text = malloc(len + 1);
            if (text) memcpy(text, prompt, len + 1);
            else st = sc_errf(&err, SC_ENOMEM, "out of memory");
        }
        unsigned flags = (bos ? SC_ENC_BOS : 0u) | (eos ? SC_ENC_EOS : 0u) | (special ? SC_ENC_SPECIAL : 0u);
        if (!st && lines) {
            size_t n_lines = 0, n_tokens = 0;
            cJSON *j = json ? cJSON_CreateObject() : NULL;
            cJSON *arr = j ? cJSON_AddArrayToObject(j, "lines") : NULL;
            st = encode_lines(in.tok, text, len, flags, arr, &n_lines, &n_tokens, &err);
            if (!st && j) {
                cJSON_AddStringToObject(j, "kind", sc_tokenizer_kind(in.tok));
                cJSON_AddNumberToObject(j, "vocab_size", (double)sc_tokenizer_vocab_size(in.tok));
                cJSON_AddNumberToObject(j, "n_lines", (double)n_lines);
                cJSON_AddNumberToObject(j, "tokens", (double)n_tokens);
                cli_print_json(j);
            } else {
                cJSON_Delete(j);
            }
            free(text);
            cli_inputs_free(&in);
            return st ? cli_fail("tokenize", st, &err) : 0;
        }
        for (int64_t k = 0; !st && k < (bench ? bench : 1); k++) {
            ids.n = 0;
            double t1 = sc_now();
            st = sc_tokenizer_encode_ex(in.tok, text, len, flags, &ids, &err);
            t_enc += sc_now() - t1;
        }
    }
    for (int64_t k = 0; !st && k < (bench ? bench : 1); k++) {
        free(dec);
        dec = NULL;
        double t1 = sc_now();
        st = sc_tokenizer_decode_all(in.tok, ids.ids, ids.n, &dec, &dlen, &err);
        t_dec += sc_now() - t1;
    }
    if (st) {
        free(text);
        free(dec);
        sc_tokens_free(&ids);
        cli_inputs_free(&in);
        return cli_fail("tokenize", st, &err);
    }
    double reps = (double)(bench ? bench : 1), mb = (double)len * reps / 1e6;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "kind", sc_tokenizer_kind(in.tok));
        cJSON_AddNumberToObject(j, "vocab_size", (double)sc_tokenizer_vocab_size(in.tok));
        cJSON_AddNumberToObject(j, "load_seconds", t_load);
        cJSON_AddNumberToObject(j, "tokens", (double)ids.n);
        cJSON_AddNumberToObject(j, "bytes", (double)(decode ? dlen : len));
        if (bench) {
            cJSON_AddNumberToObject(j, "encode_mb_per_s", t_enc > 0 ? mb / t_enc : 0);
            cJSON_AddNumberToObject(j, "decode_mb_per_s", t_dec > 0 ? (double)dlen * reps / 1e6 / t_dec : 0);
        }
        if (!bench) {
            cJSON *a = cJSON_AddArrayToObject(j, "ids");
            for (size_t i = 0; i < ids.n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids.ids[i]));
            cJSON_AddStringToObject(j, "text", dec ? dec : "");
        }
        cli_print_json(j);
    } else if (bench) {
        printf("%s (%s, %lld tokens): load %.3f s; encode %.2f MB/s (%zu tokens, %.2f bytes/token); decode %.2f MB/s\n",
               in.tok_path ? in.tok_path : in.model_path, sc_tokenizer_kind(in.tok),
               (long long)sc_tokenizer_vocab_size(in.tok), t_load, t_enc > 0 ? mb / t_enc : 0.0, ids.n,
               ids.n ? (double)len / (double)ids.n : 0.0, t_dec > 0 ? (double)dlen * reps / 1e6 / t_dec : 0.0);
    } else if (decode) {
        fwrite(dec, 1, dlen, stdout);
        putchar('\n');
    } else if (pieces) {
        for (size_t i = 0; i < ids.n; i++) print_piece(in.tok, ids.ids[i]);
    } else {
        for (size_t i = 0; i < ids.n; i++) printf("%s%d", i ? " " : "", ids.ids[i]);
        putchar('\n');
    }
    free(text);
    free(dec);
    sc_tokens_free(&ids);
    cli_inputs_free(&in);
    return 0;
}
