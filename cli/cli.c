#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

int cli_fail(const char *cmd, sc_status st, const sc_err *err) {
    fprintf(stderr, "sparsecal %s: %s\n", cmd, err->msg[0] ? err->msg : sc_status_name(st));
    return (st == SC_EARG || st == SC_EIO) ? 2 : 1;
}

static bool starts_with_gguf(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char m[4] = {0};
    bool ok = fread(m, 1, 4, f) == 4 && memcmp(m, "GGUF", 4) == 0;
    fclose(f);
    return ok;
}

sc_status cli_load(cli_inputs *in, bool need_tok, sc_err *err) {
    if (!in->model_path) return sc_errf(err, SC_EARG, "no model given (-m MODEL)");
    SC_TRY(sc_model_load(in->model_path, &in->model, err));
    if (in->tok_path) {
        if (starts_with_gguf(in->tok_path))
            SC_TRY(sc_gguf_load_tokenizer(in->tok_path, &in->tok_owned, err));
        else
            SC_TRY(sc_tokenizer_load_llama2c(in->tok_path, in->model->cfg.vocab_size, &in->tok_owned, err));
        if (sc_tokenizer_vocab_size(in->tok_owned) > in->model->cfg.vocab_size)
            return sc_errf(err, SC_EARG, "%s: tokenizer has %lld tokens but the model only %lld", in->tok_path,
                           (long long)sc_tokenizer_vocab_size(in->tok_owned), (long long)in->model->cfg.vocab_size);
        in->tok = in->tok_owned;
    } else {
        in->tok = in->model->tokenizer;
    }
    if (need_tok && !in->tok)
        return sc_errf(err, SC_EARG, "%s: the model file carries no tokenizer; give one with -t%s%s", in->model_path,
                       in->model->note[0] ? " (" : "", in->model->note[0] ? in->model->note : "");
    if (need_tok && in->model->note[0] && !in->tok_path) fprintf(stderr, "note: %s\n", in->model->note);
    return SC_OK;
}

sc_status cli_load_data(cli_inputs *in, sc_dataset *d, sc_err *err) {
    if (in->data_path && in->tokens_path) return sc_errf(err, SC_EARG, "give either -f or --tokens, not both");
    if (in->tokens_path) return sc_data_load_tokens(in->tokens_path, in->model->cfg.vocab_size, in->max_docs, d, err);
    if (!in->data_path) return sc_errf(err, SC_EARG, "no data given (-f TEXT or --tokens IDS)");
    if (!in->tok)
        return sc_errf(err, SC_EARG, "%s: text data needs a tokenizer; give -t, or pre-tokenized ids with --tokens",
                       in->data_path);
    sc_data_opts o;
    sc_data_opts_default(&o);
    o.separator = in->separator;
    o.max_docs = in->max_docs;
    o.add_bos = !in->no_bos;
    return sc_data_load_text(in->data_path, in->tok, &o, d, err);
}

void cli_inputs_free(cli_inputs *in) {
    sc_tokenizer_free(in->tok_owned);
    sc_model_free(in->model);
    in->tok_owned = NULL;
    in->model = NULL;
}

static uint64_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t kb = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0) kb = strtoull(line + kl, NULL, 10);
    fclose(f);
    return kb * 1024;
}

uint64_t cli_rss_bytes(void) { return status_kb("VmRSS:"); }
uint64_t cli_peak_rss_bytes(void) { return status_kb("VmHWM:"); }
