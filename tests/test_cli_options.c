/* test_cli_options.c - the option spellings shared with llama.cpp mean the
 * same in every command: -n tokens to predict (--steps: llama2.c's positions),
 * -t threads, --temp (alias --temperature), --top-k, -c/--ctx-size (alias
 * --ctx), -f/--file (alias --data), --shuffle-seed; renamed spellings are
 * refused with a line naming the new one; every --help states each option's
 * default (or that it is required) and gives examples. Also sc_logits_top_k
 * against a sort. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "eval.h"
#include "testing.h"

static char out[1 << 20];

#define cli(...) sc_run_cli(SC_CLI_PATH, out, sizeof out, __VA_ARGS__)

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* one number of the JSON object in out (NAN when absent or not JSON) */
static double json_num(const char *key) {
    cJSON *j = cJSON_Parse(out);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    cJSON_Delete(j);
    return x;
}

/* the "tokens" array of the JSON in out, printed compactly into buf */
static void json_tokens(char *buf, size_t cap) {
    cJSON *j = cJSON_Parse(out);
    char *s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "tokens"));
    snprintf(buf, cap, "%s", s ? s : "(none)");
    free(s);
    cJSON_Delete(j);
}

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* sc_logits_top_k keeps exactly the logits >= the k-th largest (a sort's), unchanged, and sets the rest to -FLT_MAX */
static void top_k_against_sort(void) {
    enum { N = 1000 };
    static float x[N], y[N], sorted[N], scratch[N];
    uint64_t s = 12345;
    for (int trial = 0; trial < 40; trial++) {
        for (int i = 0; i < N; i++) { /* values on a coarse grid: many ties */
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)((s >> 40) % (trial % 2 ? 50u : 100000u)) * 0.25f - 10.0f;
        }
        int64_t k = 1 + (int64_t)((s >> 20) % N);
        memcpy(y, x, sizeof x);
        memcpy(sorted, x, sizeof x);
        qsort(sorted, N, sizeof *sorted, cmp_desc);
        sc_logits_top_k(y, N, k, scratch);
        float kth = sorted[k - 1];
        int kept = 0, want = 0;
        for (int i = 0; i < N; i++) {
            want += x[i] >= kth;
            kept += y[i] != -FLT_MAX;
            CHECK(x[i] >= kth ? y[i] == x[i] : y[i] == -FLT_MAX);
        }
        CHECK_MSG(kept == want && kept >= k, "k %lld: kept %d, want %d", (long long)k, kept, want);
    }
    /* k <= 0 and k >= n change nothing */
    memcpy(y, x, sizeof x);
    sc_logits_top_k(y, N, 0, scratch);
    sc_logits_top_k(y, N, N, scratch);
    CHECK(memcmp(x, y, sizeof x) == 0);
}

/* every option that takes a value says its default or that it is required; examples follow */
static void help_states_defaults(void) {
    const char *cmds[] = {"info", "ppl",    "generate", "run",   "tokenize", "compute",       "merge",   "diag",
                          "eval", "pack",   "export",   "synth", "bench",    "bench-forward", "inspect", "verify", "train",
                          "bench-attention"};
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        CHECK(cli("%s --help", cmds[c]) == 0);
        CHECK_MSG(strstr(out, "\nexamples:\n  sparsecal ") != NULL, "%s --help has no examples", cmds[c]);
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
            if (strncmp(line, "  -", 3) && strncmp(line, "      --", 8)) continue; /* option lines only */
            char left[40];
            snprintf(left, sizeof left, "%.28s", line + 2);
            const char *name = strstr(left, "--");
            bool takes_value = name && strchr(name, ' ') && strchr(name, ' ')[1] != ' ';
            if (takes_value)
                CHECK_MSG(strstr(line, "default") || strstr(line, "required"), "%s: no default: %s", cmds[c], line);
            CHECK_MSG(!strstr(line, "--seed") || !strstr(line, "shuffle"), "%s: --seed shuffles: %s", cmds[c], line);
        }
    }
}

int main(void) {
    top_k_against_sort();
    help_states_defaults();
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *gguf = sc_asset("models/stories260K.gguf"), *text = sc_asset("text/tinystories_valid_a.txt");
    if (!bin || !tok || !gguf || !text) return sc_test_finish();
    char spk[4096];
    snprintf(spk, sizeof spk, "%s", sc_tmp_path("opts.spk"));
    CHECK_MSG(cli("pack -m %s --tokenizer %s --layout q8_0 -o %s -q 2>&1", bin, tok, spk) == 0, "%s", out);

    /* -n N generates exactly N tokens, with or without a prompt (--ignore-eos: BOS/EOS do not stop it) */
    const char *prompts[] = {"", "-p 'Once upon a time'"};
    for (int p = 0; p < 2; p++)
        for (int n = 1; n <= 9; n += 4) {
            CHECK(cli("run -m %s %s -n %d --ignore-eos --temp 0 --json 2>/dev/null", spk, prompts[p], n) == 0);
            CHECK_MSG(json_num("generated_tokens") == n, "run %s -n %d: %s", prompts[p], n, out);
        }
    /* --steps N: llama2.c's positions, BOS and prompt included; the token sampled after the last is kept */
    CHECK(cli("run -m %s -p 'Once upon a time' --steps 20 --ignore-eos --temp 0 --json 2>/dev/null", spk) == 0);
    double np = json_num("prompt_tokens");
    CHECK_MSG(np > 1 && json_num("generated_tokens") == 20 - np + 1, "%s", out);
    CHECK_MSG(json_num("kv_cache_positions") >= 20, "%s", out);
    /* the cache bytes read per token: a step at position p reads p + 1 positions of every layer's keys
     * and values (kv_cache_bytes / kv_cache_positions bytes a position); the prompt fills positions
     * 0 .. P - 1 and the decode steps run at P, P + 1, ... */
    {
        const double bpos = json_num("kv_cache_bytes") / json_num("kv_cache_positions"), S = json_num("decode_steps");
        const double dec = bpos * (S * np + S * (S + 1) / 2) / S / 1e6, pro = bpos * (np + 1) / 2 / 1e6;
        CHECK_MSG(S > 0 && fabs(json_num("kv_read_mb_per_token") - dec) <= 1e-9 * dec &&
                      fabs(json_num("prompt_kv_read_mb_per_token") - pro) <= 1e-9 * pro,
                  "expected %.9g and %.9g: %s", dec, pro, out);
    }
    /* -n -1: until the context (512) is full */
    CHECK(cli("run -m %s -n -1 --ignore-eos --temp 0 --json 2>/dev/null", spk) == 0);
    CHECK_MSG(json_num("generated_tokens") == 512, "%s", out);
    /* refusals: both, -n 0, beyond the context */
    CHECK(cli("run -m %s -n 3 --steps 4 2>&1", spk) == 2 && count_lines(out) == 1 && strstr(out, "not both"));
    CHECK(cli("run -m %s -n 0 2>&1", spk) == 2 && count_lines(out) == 1 && strstr(out, "-n 0"));
    CHECK(cli("run -m %s -p 'Once upon a time' -n 510 2>&1", spk) == 2 && count_lines(out) == 1 &&
          strstr(out, "-n 510 exceeds the model's context (512 positions)"));
    /* generate: the same -n (greedy stories260K does not sample EOS within 5 tokens of this prompt) */
    CHECK(cli("generate -m %s -p 'Once upon a time' -n 5 --temp 0 --json 2>/dev/null", gguf) == 0);
    CHECK_MSG(json_num("generated_tokens") == 5, "%s", out);

    /* -t is the thread count (run --json reports it); the tokenizer is --tokenizer */
    for (int t = 1; t <= 2; t++) {
        CHECK(cli("run -m %s -n 4 -t %d --json 2>/dev/null", spk, t) == 0);
        CHECK_MSG(json_num("threads") == t, "-t %d: %s", t, out);
    }
    CHECK(cli("info -m %s -t 1 --json", bin) == 0);
    cJSON *ij = cJSON_Parse(out);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(ij, "threads");
    CHECK(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(th, "count")) &&
          cJSON_GetObjectItemCaseSensitive(th, "count")->valuedouble == 1);
    cJSON_Delete(ij);
    /* the old -t TOKENIZER: one line saying where the tokenizer went */
    CHECK(cli("ppl -m %s -t %s -f %s 2>&1", bin, tok, text) == 2 && count_lines(out) == 1 &&
          strstr(out, "--tokenizer"));
    CHECK(cli("tokenize -t %s -p hello 2>&1", tok) == 2 && count_lines(out) == 1 && strstr(out, "--tokenizer"));
    CHECK(cli("tokenize --tokenizer %s -p hello", tok) == 0);

    /* --temp and --temperature: one option; --top-k 1 at temperature 1 keeps only the argmax: greedy */
    char a[8192], b[8192], c[8192];
    CHECK(cli("run -m %s -p 'The dog' -n 30 --temp 0 --json 2>/dev/null", spk) == 0);
    json_tokens(a, sizeof a);
    CHECK(cli("run -m %s -p 'The dog' -n 30 --temperature 0 --json 2>/dev/null", spk) == 0);
    json_tokens(b, sizeof b);
    CHECK(cli("run -m %s -p 'The dog' -n 30 --temp 1 --top-p 1 --top-k 1 -s 5 --json 2>/dev/null", spk) == 0);
    json_tokens(c, sizeof c);
    CHECK_MSG(strcmp(a, b) == 0 && strcmp(a, c) == 0, "--temp 0 %s, --temperature 0 %s, --top-k 1 %s", a, b, c);
    CHECK(cli("generate -m %s -p 'The dog' -n 30 --temp 1 --top-k 1 -s 9 --json 2>/dev/null", gguf) == 0);
    json_tokens(c, sizeof c);
    CHECK(cli("generate -m %s -p 'The dog' -n 30 --temperature 0 --json 2>/dev/null", gguf) == 0);
    json_tokens(b, sizeof b);
    CHECK_MSG(strcmp(b, c) == 0, "generate --top-k 1 %s, greedy %s", c, b);
    /* sampling with a seed differs from greedy (so the top-k check above can fail) */
    CHECK(cli("run -m %s -p 'The dog' -n 30 --temp 1 --top-p 1 -s 5 --json 2>/dev/null", spk) == 0);
    json_tokens(c, sizeof c);
    CHECK(strcmp(a, c) != 0);

    /* -c, --ctx-size and --ctx; -f, --file and --data: the same numbers */
    double ppl[6];
    const char *ctxs[] = {"-c 64", "--ctx-size 64", "--ctx 64"}, *files[] = {"-f", "--file", "--data"};
    for (int i = 0; i < 3; i++) {
        CHECK(cli("ppl -m %s --tokenizer %s %s %s --max-docs 20 %s --json -q", bin, tok, files[i], text, ctxs[i]) == 0);
        ppl[i] = json_num("ppl");
        CHECK(json_num("ctx") == 64);
    }
    CHECK(ppl[0] == ppl[1] && ppl[0] == ppl[2] && isfinite(ppl[0]));
    /* compute -c is the sequence cut (--seq-len before) and --max-docs the document limit (--seqs before) */
    CHECK(cli("compute -m %s --tokenizer %s -f %s --max-docs 6 -c 64 --method cats -o %s -q --json", bin, tok, text,
              sc_tmp_path("a.scal")) == 0);
    ppl[3] = json_num("tokens");
    CHECK(cli("compute -m %s --tokenizer %s -f %s --seqs 6 --seq-len 64 --method cats -o %s -q --json", bin, tok,
              text, sc_tmp_path("b.scal")) == 0);
    ppl[4] = json_num("tokens");
    CHECK(ppl[3] == ppl[4] && ppl[3] > 0 && ppl[3] <= 6 * 64);

    /* --seed does not shuffle documents: --shuffle-seed does, and the refusal names it */
    CHECK(cli("ppl -m %s --tokenizer %s -f %s --max-docs 20 --seed 3 2>&1", bin, tok, text) == 2 &&
          count_lines(out) == 1 && strstr(out, "--shuffle-seed"));
    CHECK(cli("ppl -m %s --tokenizer %s -f %s --max-docs 20 --shuffle-seed 3 --json -q", bin, tok, text) == 0);
    ppl[5] = json_num("ppl");
    CHECK(isfinite(ppl[5]));
    CHECK(cli("ppl -m %s --tokenizer %s -f %s --max-docs 20 --json -q", bin, tok, text) == 0);
    CHECK(json_num("ppl") != ppl[5]); /* other documents */
    return sc_test_finish();
}
