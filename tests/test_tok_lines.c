/* test_tok_lines.c - `tokenize --lines` writes one line of ids per input line in
 * the format --tokens reads, and the round trip text -> tokenize --lines ->
 * ppl/eval --tokens gives what ppl/eval -f give on the same documents (a file
 * whose documents are single lines, so the two splits agree): the same
 * sequences, id for id, against the library's own text reader, and then the
 * same perplexity bit for bit (the same code on the same ids), also with
 * --skip-docs/--max-docs windows. Also the document normalisation both share
 * (sc_data_trim_doc) and the option's refusals. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "testing.h"
#include "tokenizer.h"

static sc_err err;
static char out[1 << 22];

#define cli(...) sc_run_cli(SC_CLI_PATH, out, sizeof out, __VA_ARGS__)

/* one field of the JSON object in out, printed compactly ("(none)" when absent) */
static void json_field(const char *key, char *buf, size_t cap) {
    cJSON *j = cJSON_Parse(out);
    char *s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, key));
    snprintf(buf, cap, "%s", s ? s : "(none)");
    free(s);
    cJSON_Delete(j);
}

static void trim_cases(void) {
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"hello  \t\r\n\n", "hello"},           /* trailing whitespace and line breaks */
        {"  hello", "  hello"},                 /* leading spaces of the first line stay */
        {"\n \t\n\r\n  hi there \n", "  hi there"}, /* leading blank lines go, spaces-only ones too */
        {"a \n b", "a \n b"},                   /* nothing within the document changes */
        {" \t ", ""},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *s = cases[i].in;
        size_t n = strlen(s);
        sc_data_trim_doc(&s, &n);
        CHECK_MSG(n == strlen(cases[i].want) && memcmp(s, cases[i].want, n) == 0, "case %zu: [%.*s]", i, (int)n, s);
    }
}

int main(void) {
    trim_cases();
    const char *model = sc_asset("models/stories260K.bin"), *tokp = sc_asset("models/tok512.bin");
    const char *stories = sc_asset("text/tinystories_valid_a.txt");
    if (!model || !tokp || !stories) return sc_test_finish();

    /* The first 300 lines of the shipped text (stories of one line each, some ending in a space), then lines the
     * normalisation acts on: trailing tabs, CRLF, a spaces-only line and extra blank lines between documents, a
     * leading-space document, and a last line without a newline. */
    char *text = NULL;
    size_t len = 0, cut = 0;
    CHECK(sc_read_file(stories, (size_t)1 << 26, &text, &len, &err) == SC_OK);
    if (!text) return sc_test_finish();
    for (int lines = 0; cut < len && lines < 300; cut++) lines += text[cut] == '\n';
    const char *extra = "Tom ran home. \t\r\n\r\n   \n\n  Sue saw a big red ball.\n\nThe end  ";
    size_t xl = strlen(extra);
    char *doc = malloc(cut + xl);
    memcpy(doc, text, cut);
    memcpy(doc + cut, extra, xl);
    const char *txt = sc_tmp_path("docs.txt"), *ids = sc_tmp_path("ids.txt");
    CHECK(sc_write_bytes(txt, doc, cut + xl));
    size_t in_lines = 1, n_docs = 0; /* the last line has no newline; every line with a letter is one document */
    for (size_t i = 0, letter = 0; i < cut + xl; i++) {
        bool alpha = (doc[i] | 32) >= 'a' && (doc[i] | 32) <= 'z';
        n_docs += alpha && !letter;
        letter = doc[i] == '\n' ? 0 : letter || alpha;
        in_lines += doc[i] == '\n';
    }

    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s --tokenizer %s -f %s --lines --bos > %s", SC_CLI_PATH, model, tokp, txt,
             ids);
    CHECK(sc_run(cmd, NULL, 0) == 0);

    /* one output line per input line; the sequences --tokens reads are exactly -f's documents */
    char *idtext = NULL;
    size_t idlen = 0, out_lines = 0;
    CHECK(sc_read_file(ids, (size_t)1 << 26, &idtext, &idlen, &err) == SC_OK);
    for (size_t i = 0; i < idlen; i++) out_lines += idtext[i] == '\n';
    CHECK_MSG(out_lines == in_lines, "%zu id lines for %zu input lines", out_lines, in_lines);
    sc_tokenizer *tok = NULL;
    CHECK_MSG(sc_tokenizer_load_llama2c(tokp, 512, &tok, &err) == SC_OK, "%s", err.msg);
    sc_data_opts o;
    sc_data_opts_default(&o);
    sc_dataset a = {0}, b = {0};
    CHECK_MSG(tok && sc_data_load_text(txt, tok, &o, &a, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_data_load_tokens(ids, 512, 0, &b, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(a.n_seqs == n_docs && b.n_seqs == n_docs, "%zu documents from -f, %zu from --tokens, %zu lines with text",
              a.n_seqs, b.n_seqs, n_docs);
    size_t same = 0;
    for (size_t i = 0; i < a.n_seqs && i < b.n_seqs; i++)
        same += a.seqs[i].n == b.seqs[i].n && memcmp(a.seqs[i].ids, b.seqs[i].ids, a.seqs[i].n * sizeof(int32_t)) == 0;
    CHECK_MSG(same == a.n_seqs, "%zu of %zu sequences equal", same, a.n_seqs);

    /* the round trip: ppl and eval, whole and windowed, equal bit for bit (same code, same ids) */
    const char *cmds[] = {"ppl", "eval"};
    const char *windows[] = {"", "--skip-docs 100 --max-docs 40", "--skip-docs 150"};
    for (size_t c = 0; c < 2; c++) {
        for (size_t w = 0; w < 3; w++) {
            char f_ppl[64], f_tok[64], t_ppl[64], t_tok[64];
            CHECK(cli("%s -m %s --tokenizer %s -f %s %s --json -q -t 1", cmds[c], model, tokp, txt, windows[w]) == 0);
            json_field("ppl", f_ppl, sizeof f_ppl);
            json_field("tokens", f_tok, sizeof f_tok);
            CHECK(cli("%s -m %s --tokens %s %s --json -q -t 1", cmds[c], model, ids, windows[w]) == 0);
            json_field("ppl", t_ppl, sizeof t_ppl);
            json_field("tokens", t_tok, sizeof t_tok);
            CHECK_MSG(strcmp(f_ppl, "(none)") != 0 && strcmp(f_ppl, t_ppl) == 0 && strcmp(f_tok, t_tok) == 0,
                      "%s %s: -f ppl %s (%s tokens), --tokens ppl %s (%s tokens)", cmds[c], windows[w], f_ppl, f_tok,
                      t_ppl, t_tok);
        }
    }

    /* --json: one array per line, the same ids; without --bos no BOS, and decoding gives the trimmed line back */
    CHECK(cli("tokenize -m %s --tokenizer %s -f %s --lines --json", model, tokp, txt) == 0);
    cJSON *j = cJSON_Parse(out);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "lines");
    CHECK(cJSON_GetArraySize(arr) == (int)in_lines);
    const cJSON *last = cJSON_GetArrayItem(arr, (int)in_lines - 1);
    size_t nl = (size_t)cJSON_GetArraySize(last);
    int32_t *lid = calloc(nl ? nl : 1, sizeof *lid);
    for (size_t i = 0; i < nl; i++) lid[i] = (int32_t)cJSON_GetArrayItem(last, (int)i)->valuedouble;
    CHECK(b.n_seqs > 0 && nl + 1 == b.seqs[b.n_seqs - 1].n && memcmp(lid, b.seqs[b.n_seqs - 1].ids + 1, nl * 4) == 0);
    char *dec = NULL;
    size_t dl = 0;
    CHECK(tok && sc_tokenizer_decode_all(tok, lid, nl, &dec, &dl, &err) == SC_OK);
    CHECK_MSG(dec && dl == 7 && memcmp(dec, "The end", 7) == 0, "decoded [%s]", dec ? dec : "");
    free(dec);
    free(lid);
    cJSON_Delete(j);

    /* refusals: one line, exit status 2 */
    CHECK(cli("tokenize --tokenizer %s -p 'a b' --lines --decode '1 2' 2>&1", tokp) == 2 && strstr(out, "--lines"));
    CHECK(cli("tokenize --tokenizer %s -p 'a b' --lines --pieces 2>&1", tokp) == 2 && strstr(out, "--lines"));

    sc_dataset_free(&a);
    sc_dataset_free(&b);
    sc_tokenizer_free(tok);
    free(idtext);
    free(doc);
    free(text);
    return sc_test_finish();
}
