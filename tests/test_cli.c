/* test_cli.c - the sparsecal command line end to end: exit codes, one-line
 * errors, --json output, and agreement with the PyTorch oracle fixture
 * (tests/fixtures/stories260K_valid_a.json, from scripts/oracle_llama2c.py). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testing.h"

static char out[1 << 20];

static int run(const char *fmt, const char *a, const char *b, const char *c) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, fmt, SC_CLI_PATH, a ? a : "", b ? b : "", c ? c : "");
    return sc_run(cmd, out, sizeof out);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static double json_num(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

int main(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *gguf = sc_asset("models/stories260K.gguf"),
               *tok = sc_asset("models/tok512.bin"), *valid = sc_asset("text/tinystories_valid_a.txt"),
               *hf = sc_asset("models/stories260K-hf");
    if (!bin || !gguf || !tok || !valid || !hf) return sc_test_finish();
    char *fixture_text;
    sc_err err;
    CHECK(sc_read_file(SC_SOURCE_DIR "/tests/fixtures/stories260K_valid_a.json", 1 << 20, &fixture_text, NULL, &err) ==
          SC_OK);
    cJSON *fx = cJSON_Parse(fixture_text);
    free(fixture_text);
    CHECK(fx != NULL);

    /* usage and exit codes */
    CHECK(run("%s --help >/dev/null%s%s%s", 0, 0, 0) == 0);
    CHECK(run("%s 2>&1", 0, 0, 0) == 2);
    CHECK(run("%s frobnicate 2>&1", 0, 0, 0) == 2);
    const char *cmds[] = {"ppl", "generate", "info", "synth", "bench-forward", "bench-attention"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        CHECK(run("%s %s --help%s%s", cmds[i], 0, 0) == 0);
        CHECK(strstr(out, "usage: sparsecal") != NULL);
        CHECK(run("%s %s --no-such-option 2>&1%s%s", cmds[i], 0, 0) == 2);
        CHECK(count_lines(out) == 1);
    }
    /* bench-attention: a small shape in JSON (both cache types timed, the f16 cache half the bytes); bad shapes
     * refused in one line */
    CHECK(run("%s bench-attention --positions 20,33 --layers 2 --heads 4 --kv-heads 2 --head-dim 24 --reps 3 "
              "--flush-mb 1 --json%s%s", 0, 0, 0) == 0);
    {
        cJSON *bj = cJSON_Parse(out), *res = cJSON_GetObjectItemCaseSensitive(bj, "results");
        CHECK(cJSON_GetArraySize(res) == 2);
        for (int i = 0; i < cJSON_GetArraySize(res); i++) {
            const cJSON *o = cJSON_GetArrayItem(res, i);
            double n = cJSON_GetObjectItemCaseSensitive(o, "positions")->valuedouble;
            CHECK(n == (i ? 33 : 20) && cJSON_GetObjectItemCaseSensitive(o, "f32_us")->valuedouble > 0 &&
                  cJSON_GetObjectItemCaseSensitive(o, "f16_us")->valuedouble > 0 &&
                  cJSON_GetObjectItemCaseSensitive(o, "f32_cache_bytes")->valuedouble == 2 * 2 * 2 * 24 * 4 * n &&
                  cJSON_GetObjectItemCaseSensitive(o, "f16_cache_bytes")->valuedouble == 2 * 2 * 2 * 24 * 2 * n);
        }
        cJSON_Delete(bj);
    }
    CHECK(run("%s bench-attention --positions 0 2>&1%s%s", 0, 0, 0) == 2 && count_lines(out) == 1);
    CHECK(run("%s bench-attention --positions '' 2>&1%s%s", 0, 0, 0) == 2 && count_lines(out) == 1 &&
          strstr(out, "none given"));
    /* the Markdown table: a header and one row per position count */
    CHECK(run("%s bench-attention --positions 20,33 --layers 2 --heads 4 --kv-heads 2 --head-dim 24 --reps 3 "
              "--flush-mb 0 2>/dev/null%s%s", 0, 0, 0) == 0);
    CHECK_MSG(strstr(out, "| positions | f32 cache µs |") && strstr(out, "\n| 20 | ") && strstr(out, "\n| 33 | ") &&
                  strstr(out, "2 layers, 4 heads / 2 K/V heads of 24"),
              "%s", out);
    CHECK(run("%s bench-attention --heads 6 --kv-heads 4 2>&1%s%s", 0, 0, 0) == 2 && count_lines(out) == 1);
    /* a cache type neither f16 nor f32: refused in one line by run and by eval on an artifact */
    CHECK(run("%s run -m x.spk --cache-type q8_0 2>&1%s%s", 0, 0, 0) == 2 && count_lines(out) == 1 &&
          strstr(out, "--cache-type"));
    CHECK(run("%s eval -m x.spk --cache-type bf16 2>&1%s%s", 0, 0, 0) == 2 && count_lines(out) == 1 &&
          strstr(out, "--cache-type"));
    /* BLAS kernels: a user's OPENBLAS_CORETYPE is obeyed as given; unset, the
     * kernels are never narrower than the CPU's vector unit (cli_blas_fix_kernels) */
    CHECK(run("env OPENBLAS_CORETYPE=Prescott %s info --json -m %s%s%s", bin, 0, 0) == 0);
    cJSON *ij = cJSON_Parse(out), *bl = cJSON_GetObjectItemCaseSensitive(ij, "blas");
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(bl, "core")) &&
          strcmp(cJSON_GetObjectItemCaseSensitive(bl, "core")->valuestring, "Prescott") == 0 &&
          cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(bl, "openblas_chose")));
    cJSON_Delete(ij);
    CHECK(run("env -u OPENBLAS_CORETYPE %s info --json -m %s%s%s", bin, 0, 0) == 0);
    ij = cJSON_Parse(out);
    bl = cJSON_GetObjectItemCaseSensitive(ij, "blas");
    const cJSON *core = cJSON_GetObjectItemCaseSensitive(bl, "core"), *chose = cJSON_GetObjectItemCaseSensitive(bl, "openblas_chose"),
                *feat = cJSON_GetObjectItemCaseSensitive(ij, "cpu_features");
    CHECK(cJSON_IsString(core) && cJSON_IsString(feat));
    if (cJSON_IsString(core) && cJSON_IsString(feat) && strstr(feat->valuestring, "avx2")) {
        CHECK_MSG(strcmp(core->valuestring, "Prescott") && strcmp(core->valuestring, "Core2") &&
                      strcmp(core->valuestring, "Nehalem"),
                  "an AVX2 CPU got OpenBLAS's %s kernels", core->valuestring);
        if (cJSON_IsString(chose)) /* we overrode: say what OpenBLAS chose, run what we set */
            CHECK(strcmp(core->valuestring, strstr(feat->valuestring, "avx512bw") ? "SkylakeX" : "Haswell") == 0);
    }
    cJSON_Delete(ij);
    CHECK(run("%s ppl -m %s --ctx-size abc 2>&1%s", bin, 0, 0) == 2 && count_lines(out) == 1);
    CHECK(run("%s ppl -m %s --ctx-size 1 2>&1%s", bin, 0, 0) == 2 && count_lines(out) == 1);
    CHECK(run("%s ppl -m /nonexistent/model.bin -f %s 2>&1%s", valid, 0, 0) == 2);
    CHECK(count_lines(out) == 1 && strstr(out, "/nonexistent/model.bin"));
    CHECK(run("%s ppl -m %s --tokenizer %s -f /nonexistent.txt 2>&1", bin, tok, 0) == 2 && count_lines(out) == 1);
    CHECK(run("%s ppl -m %s -f %s 2>&1", bin, valid, 0) == 2); /* a .bin has no tokenizer: say so */
    CHECK(strstr(out, "--tokenizer") != NULL && count_lines(out) == 1);

    /* a corrupt model: one line naming the file, non-zero exit */
    const char *bad = sc_tmp_path("bad.gguf");
    sc_write_bytes(bad, "GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\x7f", 16);
    int rc = run("%s info -m %s 2>&1%s", bad, 0, 0);
    CHECK(rc != 0 && rc != -1 && count_lines(out) == 1 && strstr(out, bad));
    sc_write_bytes(bad, "\x40\x00\x00\x00", 4);
    rc = run("%s ppl -m %s -f %s 2>&1", bad, valid, 0);
    CHECK(rc != 0 && rc != -1 && count_lines(out) == 1 && strstr(out, bad));

    /* perplexity of the held-out stories agrees with the oracle to 4+ significant digits */
    double oracle_ppl = json_num(fx, "ppl"), oracle_tokens = json_num(fx, "tokens");
    const char *models[][2] = {{bin, tok}, {gguf, NULL}};
    for (int i = 0; i < 2; i++) {
        char tokopt[4200] = "";
        if (models[i][1]) snprintf(tokopt, sizeof tokopt, "--tokenizer %s", models[i][1]);
        CHECK(run("%s ppl -m %s %s -f %s --json -q", models[i][0], tokopt, valid) == 0);
        cJSON *j = cJSON_Parse(out);
        CHECK(j != NULL);
        double ppl = json_num(j, "ppl");
        printf("%s: ppl %.6f, oracle %.6f (%g scored tokens)\n", models[i][0], ppl, oracle_ppl, json_num(j, "tokens"));
        CHECK(fabs(ppl - oracle_ppl) / oracle_ppl < 2e-5);
        CHECK(json_num(j, "tokens") == oracle_tokens);
        CHECK(json_num(j, "sequences") == json_num(fx, "sequences"));
        CHECK(fabs(json_num(j, "nll_per_token") - log(ppl)) < 1e-9);
        cJSON_Delete(j);
    }

    /* pre-tokenized input and an HF model without a tokenizer */
    const char *ids = sc_tmp_path("ids.txt");
    sc_write_bytes(ids, "1 403 407 261 378 1 2 3\n1 69 21\n", 32);
    CHECK(run("%s ppl -m %s --tokens %s --json -q", hf, ids, 0) == 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j && json_num(j, "tokens") == 7 + 2 && json_num(j, "sequences") == 2);
    cJSON_Delete(j);
    sc_write_bytes(ids, "1 403 999\n", 10);
    CHECK(run("%s ppl -m %s --tokens %s -q 2>&1", bin, ids, 0) == 1 && count_lines(out) == 1);

    /* greedy generation from BOS reproduces the oracle's text */
    const cJSON *gt = cJSON_GetObjectItemCaseSensitive(fx, "greedy_text");
    CHECK(run("%s generate -m %s --tokenizer %s --temp 0 2>/dev/null", bin, tok, 0) == 0);
    CHECK(cJSON_IsString(gt) && strncmp(out, gt->valuestring, strlen(gt->valuestring)) == 0);
    CHECK(run("%s generate -m %s --temp 0 -n 64 --json%s", gguf, 0, 0) == 0);
    j = cJSON_Parse(out);
    const cJSON *txt = cJSON_GetObjectItemCaseSensitive(j, "text");
    CHECK(cJSON_IsString(txt) && strlen(txt->valuestring) > 20 &&
          strncmp(txt->valuestring, gt->valuestring, strlen(txt->valuestring)) == 0);
    CHECK(json_num(j, "generated_tokens") == 64); /* llama2.c: positions 0..63 fed, 64 sampled */
    cJSON_Delete(j);
    /* sampling is reproducible for a seed */
    CHECK(run("%s generate -m %s --seed 42 -n 80 --temp 0.9 2>/dev/null%s", gguf, 0, 0) == 0);
    char *first = strdup(out);
    CHECK(run("%s generate -m %s --seed 42 -n 80 --temp 0.9 2>/dev/null%s", gguf, 0, 0) == 0);
    CHECK(strcmp(first, out) == 0);
    free(first);

    /* info */
    CHECK(run("%s info -m %s --json%s", gguf, 0, 0) == 0);
    j = cJSON_Parse(out);
    CHECK(j && json_num(j, "parameters") == 260032 && json_num(j, "n_kv_heads") == 4);
    const cJSON *tk = cJSON_GetObjectItemCaseSensitive(j, "tokenizer");
    CHECK(cJSON_IsObject(tk) && json_num(tk, "vocab_size") == 512);
    cJSON_Delete(j);

    cJSON_Delete(fx);
    return sc_test_finish();
}
