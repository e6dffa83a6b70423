/* cmd_synth.c - `sparsecal synth` (a synthetic model of realistic size) and
 * `sparsecal bench-forward` (forward-pass rate against sgemm alone). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "forward.h"
#include "synth.h"

/* Writes n_seqs lines of len random token ids (a fixed generator) to path. */
static sc_status write_random_tokens(const char *path, int64_t n_seqs, int64_t len, int64_t vocab, uint64_t seed,
                                     sc_err *err) {
    sc_atomic_file f;
    SC_TRY(sc_atomic_open(&f, path, err));
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    char buf[32];
    sc_status st = SC_OK;
    for (int64_t i = 0; i < n_seqs && !st; i++) {
        for (int64_t t = 0; t < len && !st; t++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            int k = snprintf(buf, sizeof buf, "%s%llu", t ? " " : "", (unsigned long long)(s % (uint64_t)vocab));
            st = sc_atomic_write(&f, buf, (size_t)k, err);
        }
        if (!st) st = sc_atomic_write(&f, "\n", 1, err);
    }
    if (st) {
        sc_atomic_abort(&f);
        return st;
    }
    return sc_atomic_commit(&f, err);
}

int cmd_synth(int argc, char **argv) {
    sc_synth_opts o;
    sc_synth_opts_default(&o);
    const char *out = NULL, *dtype = "f32", *vocab_gguf = NULL;
    int64_t tok_seqs = 4, tok_len = 1024;
    bool gguf = false;
    const sc_opt opts[] = {
        {"out", 'o', SC_ARG_STR, &out, "DIR", "output directory (config.json, model.safetensors, tokens.txt), or the "
            "file with --gguf (required)", 0, 0},
        {"gguf", 0, SC_ARG_FLAG, &gguf, NULL, "write one GGUF file for llama.cpp instead (llama family; same weights)", 0, 0},
        {"gguf-vocab", 0, SC_ARG_STR, &vocab_gguf, "FILE", "with --gguf: copy the tokenizer.* metadata of this GGUF, "
            "e.g. a vocab-only file (default: no vocabulary)", 0, 0},
        {"dim", 0, SC_ARG_INT, &o.dim, "N", "d_model (default 256)", 8, 65536},
        {"ffn", 0, SC_ARG_INT, &o.ffn_dim, "N", "D_ffn (default 768)", 1, 262144},
        {"layers", 0, SC_ARG_INT, &o.n_layers, "N", "number of layers (default 4)", 1, 1024},
        {"heads", 0, SC_ARG_INT, &o.n_heads, "N", "query heads (default 8)", 1, 1024},
        {"kv-heads", 0, SC_ARG_INT, &o.n_kv_heads, "N", "key/value heads (default 4)", 1, 1024},
        {"vocab", 0, SC_ARG_INT, &o.vocab_size, "N", "vocabulary size (default 32000)", 2, 1 << 22},
        {"seq-len", 0, SC_ARG_INT, &o.max_seq_len, "N", "the model's context, max_position_embeddings (default "
            "2048)", 2, 1 << 21},
        {"seed", 0, SC_ARG_U64, &o.seed, "S", "seed of the random weights and tokens (default 1)", 0, 0},
        {"dtype", 0, SC_ARG_STR, &dtype, "T", "f32 or bf16; --gguf: also f16 (default f32)", 0, 0},
        {"family", 0, SC_ARG_STR, &o.family, "F", "llama, mistral, qwen2 or gemma (default llama)", 0, 0},
        {"token-seqs", 0, SC_ARG_INT, &tok_seqs, "N", "random token sequences written to tokens.txt (default 4)", 0, 1 << 20},
        {"token-len", 0, SC_ARG_INT, &tok_len, "N", "length of each (default 1024)", 1, 1 << 21},
        SC_OPTS_END("  sparsecal synth --dim 2048 --ffn 8192 --layers 4 -o /tmp/synth\n"
"  sparsecal synth --dim 2048 --ffn 5632 --layers 22 --heads 32 --kv-heads 4 --dtype f16 --gguf -o /tmp/tl.gguf"),
    };
    int r = sc_parse_args("synth", "Write a synthetic model with seeded random weights as config.json +\n"
                                   "model.safetensors, plus tokens.txt with random token sequences; or, with --gguf,\n"
                                   "the same weights as one GGUF file llama.cpp loads.",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    if (!out) {
        fprintf(stderr, "sparsecal synth: no output directory (-o DIR)\n");
        return 2;
    }
    if (strcmp(dtype, "f32") == 0 || strcmp(dtype, "F32") == 0)
        o.dtype = SC_DT_F32;
    else if (strcmp(dtype, "bf16") == 0 || strcmp(dtype, "BF16") == 0)
        o.dtype = SC_DT_BF16;
    else if (gguf && (strcmp(dtype, "f16") == 0 || strcmp(dtype, "F16") == 0))
        o.dtype = SC_DT_F16;
    else {
        fprintf(stderr, "sparsecal synth: --dtype must be f32 or bf16%s, got '%s'\n", gguf ? " or f16" : "", dtype);
        return 2;
    }
    if (vocab_gguf && !gguf) {
        fprintf(stderr, "sparsecal synth: --gguf-vocab needs --gguf\n");
        return 2;
    }
    sc_err err = {{0}};
    double t0 = sc_now();
    if (gguf) {
        sc_status st = sc_synth_write_gguf(&o, out, vocab_gguf, &err);
        if (st) return cli_fail("synth", st, &err);
        fprintf(stderr, "wrote %s in %.1f s\n", out, sc_now() - t0);
        return 0;
    }
    sc_status st = sc_synth_write(&o, out, &err);
    char tok_path[4096];
    if (!st && tok_seqs > 0) {
        if (!sc_path_join(tok_path, sizeof tok_path, out, "tokens.txt"))
            st = sc_errf(&err, SC_EARG, "%s: path too long", out);
        else
            st = write_random_tokens(tok_path, tok_seqs, tok_len, o.vocab_size, o.seed, &err);
    }
    if (st) return cli_fail("synth", st, &err);
    fprintf(stderr, "wrote %s in %.1f s\n", out, sc_now() - t0);
    return 0;
}

int cmd_bench_forward(int argc, char **argv) {
    cli_inputs in = {0};
    int64_t ctx = 1024, reps = 3;
    uint64_t seed = 1;
    bool json = false, backward = false;
    const sc_opt opts[] = {
        {"model", 'm', SC_ARG_STR, &in.model_path, "MODEL", "model, e.g. a `sparsecal synth` directory "
            "(required)", 0, 0},
        {"ctx-size|ctx", 'c', SC_ARG_INT, &ctx, "N", "tokens per window (default 1024)", 2, 1 << 20},
        {"backward", 0, SC_ARG_FLAG, &backward, NULL,
         "also time what compute runs for a gradient method (CLAWS): the checkpointed training forward, the\n"
         "chunked cross-entropy and the backward pass with its layer recomputation, per window", 0, 0},
        {"reps", 'r', SC_ARG_INT, &reps, "N", "timed windows (default 3, after one warm-up)", 1, 1000},
        {"seed", 0, SC_ARG_U64, &seed, "S", "seed of the random token ids (default 1)", 0, 0},
        CLI_THREADS_OPT(in.threads),
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object", 0, 0},
        SC_OPTS_END("  sparsecal bench-forward -m /tmp/synth -c 1024 -t 2\n"
"  sparsecal bench-forward -m /tmp/synth -c 512 --backward --json"),
    };
    int r = sc_parse_args("bench-forward",
                          "Time the reference forward pass on windows of --ctx random tokens and the same\n"
                          "cblas_sgemm calls alone; report tokens/s and GFLOP/s for both. The three are\n"
                          "interleaved window by window, so a busy machine slows them alike.",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    sc_forward *f = NULL, *ft = NULL;
    int32_t *ids = NULL;
    sc_status st = cli_load(&in, false, &err);
    if (!st) st = sc_forward_create(in.model, ctx, ctx, &f, &err);
    if (!st && backward) st = sc_forward_create_train_ex(in.model, ctx, SC_TRAIN_CHUNKED_LOSS, &ft, &err);
    if (!st && !(ids = malloc((size_t)ctx * sizeof *ids))) st = sc_errf(&err, SC_ENOMEM, "out of memory");
    double t_fwd = 0, t_gemm = 0, t_train = 0;
    if (!st) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
        for (int64_t i = 0; i < ctx; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ids[i] = (int32_t)(s % (uint64_t)in.model->cfg.vocab_size);
        }
        const float *logits;
        st = sc_forward_run(f, ids, ctx, 0, NULL, &logits, &err); /* warm-up: page in the weights */
        for (int64_t i = 0; i < reps && !st; i++) {
            double t0 = sc_now();
            st = sc_forward_run(f, ids, ctx, 0, NULL, &logits, &err);
            t_fwd += sc_now() - t0;
            t0 = sc_now();
            if (!st) st = sc_forward_sgemm_only(f, ctx, &err);
            t_gemm += sc_now() - t0;
            if (st || !ft) continue;
            t0 = sc_now();
            double loss;
            st = sc_forward_run(ft, ids, ctx, 0, NULL, &logits, &err);
            if (!st) st = sc_backward_ce(ft, NULL, &loss, &err);
            t_train += sc_now() - t0;
        }
    }
    sc_forward_free(ft);
    if (st) {
        free(ids);
        sc_forward_free(f);
        cli_inputs_free(&in);
        return cli_fail("bench-forward", st, &err);
    }
    double flops = sc_forward_flops(&in.model->cfg, ctx, 0) * (double)reps;
    double tps_f = (double)(ctx * reps) / t_fwd, tps_g = (double)(ctx * reps) / t_gemm;
    double gf_f = flops / t_fwd / 1e9, gf_g = flops / t_gemm / 1e9;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", in.model_path);
        cJSON_AddNumberToObject(j, "ctx", (double)ctx);
        cJSON_AddNumberToObject(j, "reps", (double)reps);
        cJSON_AddNumberToObject(j, "forward_tokens_per_second", tps_f);
        cJSON_AddNumberToObject(j, "forward_gflops", gf_f);
        cJSON_AddNumberToObject(j, "sgemm_tokens_per_second", tps_g);
        cJSON_AddNumberToObject(j, "sgemm_gflops", gf_g);
        cJSON_AddNumberToObject(j, "forward_share_of_sgemm", gf_f / gf_g);
        if (backward) {
            cJSON_AddNumberToObject(j, "train_tokens_per_second", (double)(ctx * reps) / t_train);
            cJSON_AddNumberToObject(j, "train_over_forward", t_train / t_fwd);
        }
        cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
        cli_print_json(j);
    } else {
        printf("forward      %8.1f tok/s  %7.1f GFLOP/s\n", tps_f, gf_f);
        printf("sgemm only   %8.1f tok/s  %7.1f GFLOP/s\n", tps_g, gf_g);
        printf("forward / sgemm-only = %.1f%%  (ctx %lld, %lld reps, peak RSS %.0f MiB)\n", 100.0 * gf_f / gf_g,
               (long long)ctx, (long long)reps, (double)cli_peak_rss_bytes() / 1048576.0);
        if (backward)
            printf("forward + backward (checkpointed, chunked loss) %8.1f tok/s = %.2fx the forward's time\n",
                   (double)(ctx * reps) / t_train, t_train / t_fwd);
    }
    free(ids);
    sc_forward_free(f);
    cli_inputs_free(&in);
    return 0;
}
