#include "cli.h"

#include "json_out.h"
#include "ops.h"
#include "srt.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int cli_exit_code(sc_status st) { return (st == SC_EARG || st == SC_EIO) ? 2 : 1; }

int cli_fail(const char *cmd, sc_status st, const sc_err *err) {
    fprintf(stderr, "sparsecal %s: %s\n", cmd, err->msg[0] ? err->msg : sc_status_name(st));
    return cli_exit_code(st);
}

/* tokenizer.json (else tokenizer.model) beside a Hugging Face model, or NULL. */
static const char *hf_tokenizer_file(const char *model_path, char *buf, size_t cap) {
    if (!sc_is_dir(model_path)) return NULL;
    if (sc_path_join(buf, cap, model_path, "tokenizer.json") && sc_file_exists(buf)) return buf;
    if (sc_path_join(buf, cap, model_path, "tokenizer.model") && sc_file_exists(buf)) return buf;
    return NULL;
}

sc_status cli_load(cli_inputs *in, bool need_tok, sc_err *err) {
    if (!in->model_path) return sc_errf(err, SC_EARG, "no model given (-m MODEL)");
    SC_TRY(sc_model_load(in->model_path, &in->model, err));
    char buf[4096];
    const char *tok_path = in->tok_path ? in->tok_path : hf_tokenizer_file(in->model_path, buf, sizeof buf);
    if (tok_path) {
        SC_TRY(sc_tokenizer_load_auto(tok_path, in->model->cfg.vocab_size, &in->tok_owned, err));
        if (sc_tokenizer_vocab_size(in->tok_owned) > in->model->cfg.vocab_size)
            return sc_errf(err, SC_EARG, "%s: tokenizer has %lld tokens but the model only %lld", tok_path,
                           (long long)sc_tokenizer_vocab_size(in->tok_owned), (long long)in->model->cfg.vocab_size);
        in->tok = in->tok_owned;
    } else {
        in->tok = in->model->tokenizer;
    }
    if (need_tok && !in->tok)
        return sc_errf(err, SC_EARG, "%s: the model file carries no tokenizer; give one with -t%s%s", in->model_path,
                       in->model->note[0] ? " (" : "", in->model->note[0] ? in->model->note : "");
    if (need_tok && in->model->note[0] && !tok_path) fprintf(stderr, "note: %s\n", in->model->note);
    return SC_OK;
}

sc_status cli_load_data(cli_inputs *in, sc_dataset *d, sc_err *err) {
    if (in->data_path && in->tokens_path) return sc_errf(err, SC_EARG, "give either -f or --tokens, not both");
    if (in->tokens_path) {
        int64_t limit = in->seed > 0 || in->max_docs == 0 ? 0 : in->max_docs + in->skip_docs;
        SC_TRY(sc_data_load_tokens(in->tokens_path, in->model->cfg.vocab_size, limit, d, err));
        if (in->seed > 0) sc_dataset_shuffle(d, (uint64_t)in->seed);
        sc_status st = sc_dataset_window(d, in->skip_docs, in->max_docs, in->tokens_path, err);
        if (!st && in->pack > 0) st = sc_dataset_pack(d, in->pack, in->tokens_path, err);
        if (st) sc_dataset_free(d);
        return st;
    }
    if (!in->data_path) return sc_errf(err, SC_EARG, "no data given (-f TEXT or --tokens IDS)");
    if (!in->tok)
        return sc_errf(err, SC_EARG, "%s: text data needs a tokenizer; give -t, or pre-tokenized ids with --tokens",
                       in->data_path);
    sc_data_opts o;
    sc_data_opts_default(&o);
    o.separator = in->separator;
    o.max_docs = in->max_docs;
    o.skip_docs = in->skip_docs;
    o.add_bos = !in->no_bos;
    o.add_eos = in->add_eos;
    o.parse_special = in->parse_special;
    o.shuffle = in->seed > 0;
    o.seed = (uint64_t)(in->seed > 0 ? in->seed : 0);
    o.pack = in->pack;
    if (in->chat_format) SC_TRY(sc_chat_parse(in->chat_format, &o.chat, err));
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

/* the available runtime ISAs as "scalar avx2 avx512", and the selected one
 * (or the reason SPARSECAL_ISA cannot be honoured) */
static void isa_lists(char *avail, size_t cap, char *chosen, size_t ccap) {
    avail[0] = '\0';
    for (int i = 0; i < SRT_ISA_COUNT; i++) {
        if (!srt_isa_available((srt_isa)i)) continue;
        size_t n = strlen(avail);
        snprintf(avail + n, cap - n, "%s%s", n ? " " : "", srt_isa_name((srt_isa)i));
    }
    srt_isa isa;
    if (srt_isa_resolve(SRT_ISA_AUTO, &isa) == SRT_OK)
        snprintf(chosen, ccap, "%s", srt_isa_name(isa));
    else
        snprintf(chosen, ccap, "none (SPARSECAL_ISA=%s is not available here)", getenv("SPARSECAL_ISA"));
}

void cli_print_provenance(FILE *f) {
    char avail[128], chosen[128];
    isa_lists(avail, sizeof avail, chosen, sizeof chosen);
    const char *env = getenv("SPARSECAL_ISA");
    fprintf(f, "kernels     %s available; using %s (SPARSECAL_ISA%s%s)\n", avail, chosen, env && *env ? "=" : " unset",
            env && *env ? env : "");
    sc_blas_desc b;
    sc_blas_describe(&b);
    fprintf(f, "blas        %s %s, %s kernels (OPENBLAS_CORETYPE%s%s), %d threads\n", b.library, b.version, b.core,
            b.coretype_env[0] ? "=" : " unset", b.coretype_env, b.threads);
}

void cli_provenance_json(cJSON *j) {
    char avail[128], chosen[128];
    isa_lists(avail, sizeof avail, chosen, sizeof chosen);
    cJSON *k = cJSON_AddObjectToObject(j, "kernels");
    cJSON *arr = cJSON_AddArrayToObject(k, "available");
    for (int i = 0; i < SRT_ISA_COUNT; i++)
        if (srt_isa_available((srt_isa)i)) cJSON_AddItemToArray(arr, cJSON_CreateString(srt_isa_name((srt_isa)i)));
    cJSON_AddStringToObject(k, "selected", chosen);
    sc_blas_desc b;
    sc_blas_describe(&b);
    cJSON *o = cJSON_AddObjectToObject(j, "blas");
    cJSON_AddStringToObject(o, "library", b.library);
    cJSON_AddStringToObject(o, "version", b.version);
    cJSON_AddStringToObject(o, "core", b.core);
    if (b.coretype_env[0])
        cJSON_AddStringToObject(o, "openblas_coretype", b.coretype_env);
    else
        cJSON_AddNullToObject(o, "openblas_coretype");
    cJSON_AddNumberToObject(o, "threads", b.threads);
    cJSON_AddStringToObject(o, "config", b.config);
}

uint64_t cli_rss_bytes(void) { return status_kb("VmRSS:"); }
uint64_t cli_peak_rss_bytes(void) { return status_kb("VmHWM:"); }

void cli_print_json(cJSON *j) {
    char *s = sc_json_print(j, false);
    if (s) puts(s);
    free(s);
    cJSON_Delete(j);
}
