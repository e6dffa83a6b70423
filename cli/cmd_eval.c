/* cmd_eval.c - `sparsecal ppl` and `sparsecal generate`. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "eval.h"

int cmd_ppl(int argc, char **argv) {
    cli_inputs in = {0};
    int64_t ctx = 0;
    bool json = false, quiet = false;
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        CLI_DATA_OPTS(in),
        CLI_THREADS_OPT(in.threads),
        CLI_CTX_OPT(ctx, "context window (default: the model's); longer sequences are scored in windows overlapping "
            "by one token"),
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object", 0, 0},
        {"quiet", 'q', SC_ARG_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
        SC_OPTS_END("  sparsecal ppl -m stories260K.bin --tokenizer tok512.bin -f stories.txt --max-docs 200\n"
"  sparsecal ppl -m model.gguf -f wiki.txt -c 512 -t 4 --json"),
    };
    int r = sc_parse_args("ppl", "Teacher-forced perplexity: every position of every sequence is scored from the\n"
                                 "sequence start; sequences longer than --ctx are cut into windows overlapping by one\n"
                                 "token, so every token after the first is predicted exactly once.",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    sc_dataset d = {0};
    sc_ppl_result res;
    sc_status st = cli_load(&in, false, &err);
    if (!st) st = cli_load_data(&in, &d, &err);
    if (!st) {
        if (ctx == 0) ctx = in.model->cfg.max_seq_len;
        st = sc_eval_ppl(in.model, &d, ctx, NULL, quiet ? NULL : stderr, &res, &err);
    }
    if (st) {
        sc_dataset_free(&d);
        cli_inputs_free(&in);
        return cli_fail("ppl", st, &err);
    }
    double nll = res.nll_sum / (double)res.n_scored, ppl = exp(nll);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", in.model_path);
        cJSON_AddNumberToObject(j, "ppl", ppl);
        cJSON_AddNumberToObject(j, "nll_per_token", nll);
        cJSON_AddNumberToObject(j, "tokens", (double)res.n_scored);
        cJSON_AddNumberToObject(j, "sequences", (double)res.n_seqs);
        cJSON_AddNumberToObject(j, "windows", (double)res.n_windows);
        cJSON_AddNumberToObject(j, "ctx", (double)ctx);
        cJSON_AddNumberToObject(j, "tokens_run", (double)res.n_tokens);
        cJSON_AddNumberToObject(j, "seconds", res.seconds);
        cJSON_AddNumberToObject(j, "tokens_per_second", (double)res.n_tokens / (res.seconds > 0 ? res.seconds : 1e-9));
        cli_print_json(j);
    } else {
        printf("ppl %.6f  nll/token %.6f  scored %lld tokens in %lld sequences (%lld windows, ctx %lld)  %.0f tok/s\n",
               ppl, nll, (long long)res.n_scored, (long long)res.n_seqs, (long long)res.n_windows, (long long)ctx,
               (double)res.n_tokens / (res.seconds > 0 ? res.seconds : 1e-9));
    }
    sc_dataset_free(&d);
    cli_inputs_free(&in);
    return 0;
}

int cmd_generate(int argc, char **argv) {
    cli_inputs in = {0};
    const char *prompt = NULL;
    int64_t n_predict = CLI_UNSET, steps = CLI_UNSET, top_k = 0;
    double temperature = 1.0, top_p = 0.9;
    uint64_t seed = 0;
    bool json = false;
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        {"prompt", 'p', SC_ARG_STR, &prompt, "TEXT", "prompt (default: none, start from BOS)", 0, 0},
        CLI_THREADS_OPT(in.threads),
        CLI_PREDICT_OPTS(n_predict, steps),
        CLI_SAMPLING_OPTS(temperature, top_k, top_p, seed),
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object instead of streaming text", 0, 0},
        SC_OPTS_END("  sparsecal generate -m stories260K.gguf -p 'Once upon a time' -n 64 --temp 0\n"
"  sparsecal generate -m model.gguf -p 'The dog' -n 128 --temp 0.8 --top-k 40 -s 7"),
    };
    int r = sc_parse_args("generate", "Generate text from BOS (plus the prompt) with the reference forward pass.", opts,
                          argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    if (seed == 0) seed = (uint64_t)(sc_now() * 1e6);
    sc_err err = {{0}};
    sc_tokens ptoks = {0};
    sc_gen_result res = {0};
    sc_status st = cli_load(&in, true, &err);
    if (!st && prompt && *prompt) st = sc_tokenizer_encode(in.tok, prompt, strlen(prompt), false, false, &ptoks, &err);
    /* BOS and the prompt come first */
    if (!st) st = cli_steps(n_predict, steps, 1 + (int64_t)ptoks.n, in.model->cfg.max_seq_len, "the model's "
        "context", &steps, &err);
    if (!st) {
        sc_gen_opts o = {steps, (float)temperature, (float)top_p, seed, top_k};
        st = sc_generate(in.model, in.tok, &ptoks, &o, json ? NULL : stdout, &res, &err);
    }
    if (!st && json) {
        cJSON *j = cJSON_CreateObject();
        size_t cap = 64, n = 0;
        char *text = malloc(cap);
        for (size_t i = 1; text && i < res.tokens.n; i++) {
            char buf[512];
            size_t k = sc_tokenizer_decode(in.tok, res.tokens.ids[i - 1], res.tokens.ids[i], buf, sizeof buf);
            if (n + k + 1 > cap) {
                while (n + k + 1 > cap) cap *= 2;
                char *p = realloc(text, cap);
                if (!p) break;
                text = p;
            }
            memcpy(text + n, buf, k);
            n += k;
        }
        if (text) text[n] = '\0';
        cJSON_AddStringToObject(j, "text", text ? text : "");
        free(text);
        cJSON *ids = cJSON_AddArrayToObject(j, "tokens");
        for (size_t i = 0; i < res.tokens.n; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(res.tokens.ids[i]));
        cJSON_AddNumberToObject(j, "prompt_tokens", (double)res.n_prompt);
        cJSON_AddNumberToObject(j, "generated_tokens", (double)((int64_t)res.tokens.n - res.n_prompt));
        cJSON_AddNumberToObject(j, "seconds", res.seconds);
        cli_print_json(j);
    } else if (!st) {
        int64_t gen = (int64_t)res.tokens.n - res.n_prompt;
        fflush(stdout); /* the text first, then the statistics */
        fprintf(stderr, "generated %lld tokens in %.3f s (%.1f tok/s)\n", (long long)gen, res.seconds,
                (double)gen / (res.seconds > 0 ? res.seconds : 1e-9));
    }
    sc_tokens_free(&ptoks);
    sc_tokens_free(&res.tokens);
    int rc = st ? cli_fail("generate", st, &err) : 0;
    cli_inputs_free(&in);
    return rc;
}
