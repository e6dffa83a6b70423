/* cmd_run.c - `sparsecal run`: token-by-token decode straight from a packed
 * artifact with the runtime kernels (kernels/srt_model.h): quantised weights
 * in their layouts, an f32 key/value cache, and the MLP routed per token. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_artifact.h"
#include "eval.h"
#include "score.h"
#include "srt_model.h"

/* Without a tokenizer (e.g. a synthetic model) the ids are printed. */
/* Phase times per token (ms) as "<prefix>per_token_ms", the weight bytes read per token and the rate
 * achieved on them, and the key/value cache bytes read per token, of `steps` tokens that took
 * `seconds`: the decode steps, or the prompt. */
static void add_phase_times(cJSON *j, const char *prefix, const srt_model_timing *tm, double seconds, int64_t steps) {
    char key[64];
    const double ns = steps > 0 ? (double)steps : 1.0;
    snprintf(key, sizeof key, "%sper_token_ms", prefix);
    cJSON *pt = cJSON_AddObjectToObject(j, key);
    cJSON_AddNumberToObject(pt, "attention", 1e3 * tm->attn / ns);
    cJSON_AddNumberToObject(pt, "attention_proj", 1e3 * tm->attn_proj / ns);
    cJSON_AddNumberToObject(pt, "attention_core", 1e3 * tm->attn_core / ns);
    cJSON_AddNumberToObject(pt, "mlp", 1e3 * tm->mlp / ns);
    cJSON_AddNumberToObject(pt, "mlp_gate", 1e3 * tm->mlp_gate / ns);
    cJSON_AddNumberToObject(pt, "mlp_route", 1e3 * tm->mlp_route / ns);
    cJSON_AddNumberToObject(pt, "mlp_up", 1e3 * tm->mlp_up / ns);
    cJSON_AddNumberToObject(pt, "mlp_down", 1e3 * tm->mlp_down / ns);
    cJSON_AddNumberToObject(pt, "rotate", 1e3 * tm->rotate / ns);
    cJSON_AddNumberToObject(pt, "head", 1e3 * tm->head / ns);
    cJSON_AddNumberToObject(pt, "other", 1e3 * (seconds - tm->attn - tm->mlp - tm->head) / ns);
    snprintf(key, sizeof key, "%sweight_mb_per_token", prefix);
    cJSON_AddNumberToObject(j, key, tm->weight_bytes / ns / 1e6);
    snprintf(key, sizeof key, "%sweight_gb_per_s", prefix);
    cJSON_AddNumberToObject(j, key, seconds > 0 ? tm->weight_bytes / seconds / 1e9 : 0.0);
    snprintf(key, sizeof key, "%skv_read_mb_per_token", prefix);
    cJSON_AddNumberToObject(j, key, tm->kv_bytes / ns / 1e6);
}

static void emit(FILE *out, const sc_tokenizer *tok, int32_t prev, int32_t id, char **text, size_t *n, size_t *cap) {
    char buf[512];
    size_t k = tok ? sc_tokenizer_decode(tok, prev, id, buf, sizeof buf) : (size_t)snprintf(buf, sizeof buf, " %d", id);
    if (out) {
        fwrite(buf, 1, k, out);
        fflush(out);
    }
    if (text && *text) {
        if (*n + k + 1 > *cap) {
            size_t c = *cap;
            while (*n + k + 1 > c) c *= 2;
            char *p = realloc(*text, c);
            if (!p) {
                free(*text);
                *text = NULL;
                return;
            }
            *text = p;
            *cap = c;
        }
        memcpy(*text + *n, buf, k);
        *n += k;
        (*text)[*n] = '\0';
    }
}

static sc_status step_failed(const srt_model *m, const char *path, srt_status ks, int64_t pos, sc_err *err) {
    if (ks == SRT_ENONFINITE)
        return sc_errf(err, SC_EFORMAT, "%s: position %lld: %s", path, (long long)pos, srt_model_fault(m));
    return sc_errf(err, SC_EFORMAT, "decode step failed at position %lld (%s)", (long long)pos, srt_status_str(ks));
}

/* --score: the teacher-forced perplexity of --tokens through the decoder (sc_score_artifact, as eval -m X.spk) */
static sc_status run_score(const cli_artifact *a, const char *path, const char *tokens_path, const sc_artifact_router *r,
                           int64_t ctx_cap, bool json, sc_err *err) {
    sc_dataset d = {0};
    sc_score_result res = {0};
    sc_status st = sc_data_load_tokens(tokens_path, srt_model_get_config(a->m)->vocab_size, 0, &d, err);
    if (!st) st = sc_score_artifact(a->m, path, &d, ctx_cap, NULL, &res, err);
    if (!st && json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "artifact", path);
        cJSON_AddStringToObject(j, "tokens", tokens_path);
        sc_score_json(j, a->m, r, &res);
        cJSON_AddStringToObject(j, "isa", srt_isa_name(srt_ctx_isa(a->ctx)));
        cJSON_AddNumberToObject(j, "threads", (double)a->threads);
        cli_print_json(j);
    } else if (!st) {
        sc_score_print(stdout, path, r, &res);
    }
    sc_score_result_free(&res);
    sc_dataset_free(&d);
    return st;
}

int cmd_run(int argc, char **argv) {
    const char *path = NULL, *tok_path = NULL, *prompt = NULL, *method = NULL, *isa_name = NULL, *tokens_path = NULL,
               *kv_name = NULL;
    int64_t n_predict = CLI_UNSET, steps = CLI_UNSET, threads = 0, ctx_cap = 0, top_k = 0;
    double temperature = 1.0, top_p = 0.9, density = NAN; /* NAN: not given */
    uint64_t seed = 0;
    bool json = false, dense = false, ignore_eos = false, fallback = false, no_mmap = false, score = false;
    char method_help[512];
    snprintf(method_help, sizeof method_help,
             "router: %s (default: the artifact's, from pack --method; refused with the reason when the artifact "
             "lacks its data; a LaRoSA-folded artifact runs only larosa and dense)", srt_method_names());
    const sc_opt opts[] = {
        {"model|artifact", 'm', SC_ARG_STR, &path, "FILE", "the packed artifact (.spk) to run (required)", 0, 0},
        {"tokenizer", 0, SC_ARG_STR, &tok_path, "TOK", "tokenizer (default: the one embedded in the artifact)", 0, 0},
        {"prompt", 'p', SC_ARG_STR, &prompt, "TEXT", "prompt (default: none, start from BOS)", 0, 0},
        CLI_PREDICT_OPTS(n_predict, steps),
        CLI_CTX_OPT(ctx_cap, "most positions the key/value cache may hold (default: the model's context); it holds "
            "what -n needs"),
        {"cache-type", 0, SC_ARG_STR, &kv_name, "T", "what the key/value cache holds: f16 (default, as llama.cpp: half "
            "the memory and the bytes attention reads) or f32 (the keys and values as computed)", 0, 0},
        CLI_SAMPLING_OPTS(temperature, top_k, top_p, seed),
        {"method", 0, SC_ARG_STR, &method, "M", method_help, 0, 0},
        {"density", 0, SC_ARG_FLOAT, &density, "D",
         "fraction of MLP neurons kept per token, in (0, 1] (default: the artifact's, from pack --density)", 0, 0},
        {"score", 0, SC_ARG_FLAG, &score, NULL,
         "instead of generating: teacher-forced perplexity of --tokens through this decoder (every token routed; "
         "the id at t+1 scored from the logits at t), the numbers `eval -m FILE` prints", 0, 0},
        {"tokens", 0, SC_ARG_STR, &tokens_path, "IDS", "--score: pre-tokenized file, one sequence of ids per line "
            "(required with --score)", 0, 0},
        {"dense", 0, SC_ARG_FLAG, &dense, NULL, "run every MLP neuron (same as --method dense)", 0, 0},
        {"fallback-dense", 0, SC_ARG_FLAG, &fallback, NULL, "time the router against dense on the first decode steps (4 each, alternating) and keep the faster; reported", 0, 0},
        {"no-mmap", 0, SC_ARG_FLAG, &no_mmap, NULL, "copy the weights into memory (huge pages where possible) instead of reading the file mapping: faster, costs the artifact's size in RAM", 0, 0},
        {"ignore-eos", 0, SC_ARG_FLAG, &ignore_eos, NULL, "keep generating after BOS/EOS (fixed-length benchmarks, as llama-bench)", 0, 0},
        {"isa", 0, SC_ARG_STR, &isa_name, "ISA", "kernels: scalar, avx2, avx512, amx, neon, dotprod, i8mm (default: the best here)", 0, 0},
        CLI_THREADS_OPT(threads),
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object (text, tokens, per-phase timings) instead of streaming", 0, 0},
        SC_OPTS_END("  sparsecal run -m m.spk -p 'Once upon a time' -n 64 --temp 0\n"
"  sparsecal run -m m.spk -n 128 --ignore-eos -t 1 --method cats --density 0.3 --json\n"
"  sparsecal run -m m.spk --score --tokens ids.txt --json"),
    };
    int r = sc_parse_args("run", "Decode token by token straight from a packed artifact with the runtime kernels: the\n"
                                 "weights stay quantised in their layouts, keys and values are cached, and each token's\n"
                                 "MLP runs only the neurons its router keeps (up rows and down columns of the live list).\n"
                                 "With --score --tokens IDS it scores the ids instead (perplexity, achieved density).",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    if (!path) {
        sc_errf(&err, SC_EARG, "no artifact given (-m FILE.spk)");
        return cli_fail("run", SC_EARG, &err);
    }
    if (score != (tokens_path != NULL)) {
        sc_errf(&err, SC_EARG, score ? "--score needs --tokens IDS (one sequence of ids per line)"
                                     : "--tokens is for --score (scoring ids); generation takes -p");
        return cli_fail("run", SC_EARG, &err);
    }
    if (sc_density_check(density, "--density", &err)) return cli_fail("run", SC_EARG, &err);
    srt_isa isa = SRT_ISA_AUTO;
    if (isa_name && srt_isa_parse(isa_name, &isa) != SRT_OK) {
        sc_errf(&err, SC_EARG, "unknown ISA '%s' (scalar, avx2, avx512, amx, neon, dotprod, i8mm)", isa_name);
        return cli_fail("run", SC_EARG, &err);
    }
    srt_kv_type kv = CLI_KV_DEFAULT;
    if (kv_name && !cli_kv_parse(kv_name, &kv)) {
        sc_errf(&err, SC_EARG, "unknown --cache-type '%s' (f16, f32)", kv_name);
        return cli_fail("run", SC_EARG, &err);
    }
    if (cli_threads_setup(threads, &err)) return cli_fail("run", SC_EARG, &err);
    if (seed == 0) seed = (uint64_t)(sc_now() * 1e6);
    cli_artifact art = {0};
    srt_ctx *ctx = NULL;
    srt_model *m = NULL;
    sc_tokenizer *tok = NULL;
    sc_tokens toks = {0}, ptoks = {0};
    float *scratch = NULL;
    char *text = NULL;
    sc_status st = SC_OK;
    /* the KV cache grows to what -n needs (reserved below), never beyond --ctx */
    if ((st = cli_artifact_open(path, isa, ctx_cap, kv, &art, &err))) goto done;
    m = art.m;
    ctx = art.ctx;
    threads = art.threads;
    if (no_mmap && srt_model_copy_weights(m) != SRT_OK)
        fprintf(stderr, "note: no memory to copy the weights into; reading them from the file mapping\n");
    const srt_model_config *c = srt_model_get_config(m);
    if (dense) method = srt_method_get(SRT_METHOD_DENSE)->name;
    sc_artifact_router rt;
    if ((st = sc_artifact_set_router(m, path, method, density, stderr, &rt, &err))) goto done;
    method = rt.method;
    density = rt.density;
    if (score) {
        st = run_score(&art, path, tokens_path, &rt, ctx_cap, json, &err);
        goto done;
    }
    /* the options alone (BOS as the prompt) before the tokenizer loads; again below with the prompt */
    if ((st = cli_steps(n_predict, steps, 1, srt_model_max_ctx(m), ctx_cap ? "--ctx-size" : "the model's context",
                        &(int64_t){0}, &err)))
        goto done;
    if (tok_path) {
        if ((st = sc_tokenizer_load_auto(tok_path, c->vocab_size, &tok, &err))) goto done;
    } else if ((st = sc_artifact_load_tokenizer(path, &tok, &err))) {
        if (prompt && *prompt) goto done;
        /* no vocabulary: generate from BOS and print token ids */
        fprintf(stderr, "note: %s; printing token ids\n", err.msg);
        st = SC_OK;
        err.msg[0] = '\0';
    }
    if (tok && sc_tokenizer_vocab_size(tok) > c->vocab_size) {
        st = sc_errf(&err, SC_EARG, "the tokenizer has %lld tokens but the model only %lld",
                     (long long)sc_tokenizer_vocab_size(tok), (long long)c->vocab_size);
        goto done;
    }
    const char *mname = srt_model_method(m);
    bool larosa = rt.info->needs & SRT_DATA_ROTATIONS; /* live inputs and h rather than live neurons */
    srt_status ks;
    int64_t k_in, k_h;
    srt_model_larosa_counts(m, &k_in, &k_h);
    /* prompt */

    int32_t bos = c->bos_id >= 0 ? c->bos_id : tok ? sc_tokenizer_bos(tok) : -1;
    int32_t eos = c->eos_id >= 0 ? c->eos_id : tok ? sc_tokenizer_eos(tok) : -1;
    if (bos < 0) {
        st = sc_errf(&err, SC_EARG, "the model has no BOS token id");
        goto done;
    }
    if (prompt && *prompt && (st = sc_tokenizer_encode(tok, prompt, strlen(prompt), false, false, &ptoks, &err)))
        goto done;
    if (sc_tokens_push(&toks, bos)) {
        st = sc_errf(&err, SC_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < ptoks.n; i++)
        if (sc_tokens_push(&toks, ptoks.ids[i])) {
            st = sc_errf(&err, SC_ENOMEM, "out of memory");
            goto done;
        }
    int64_t n_prompt = (int64_t)toks.n;
    if ((st = cli_steps(n_predict, steps, n_prompt, srt_model_max_ctx(m),
                        ctx_cap ? "--ctx-size" : "the model's context", &steps, &err)))
        goto done;
    if (srt_model_reserve(m, steps) != SRT_OK) {
        st = sc_errf(&err, SC_ENOMEM, "out of memory for a key/value cache of %lld positions", (long long)steps);
        goto done;
    }
    scratch = malloc((size_t)c->vocab_size * 4 * sizeof(float));
    size_t tn = 0, tcap = 256;
    text = json ? malloc(tcap) : NULL;
    if (!scratch || (json && !text)) {
        st = sc_errf(&err, SC_ENOMEM, "out of memory");
        goto done;
    }
    if (text) text[0] = '\0';
    float *row = scratch + 2 * c->vocab_size;
    sc_sampler smp;
    sc_sampler_init(&smp, (float)temperature, (float)top_p, seed);
    FILE *out = json ? NULL : stdout;
    for (int64_t i = 1; i < n_prompt; i++) emit(out, tok, toks.ids[i - 1], toks.ids[i], &text, &tn, &tcap);
    /* the prompt, its tokens through each layer together */
    const float *logits = NULL;
    double t0 = sc_now();
    ks = srt_model_prefill(m, toks.ids, n_prompt, 0, &logits);
    if (ks == SRT_ENONFINITE) /* which position: token by token (the same values), the step says */
        for (int64_t i = 0; i < n_prompt && !st; i++) {
            ks = srt_model_step(m, toks.ids[i], i, &logits);
            if (ks != SRT_OK) st = step_failed(m, path, ks, i, &err);
        }
    else if (ks != SRT_OK)
        st = ks == SRT_ENOMEM ? sc_errf(&err, SC_ENOMEM, "out of memory for the prompt") : step_failed(m, path, ks, 0, &err);
    if (!st && (ks = srt_model_end_prompt(m)) != SRT_OK) /* griffin fixes its live sets from the prompt */
        st = sc_errf(&err, SC_ENOMEM, "%s: fixing the prompt's live sets failed (%s)", path, srt_status_str(ks));
    double t_prompt = sc_now() - t0;
    srt_model_timing tm_prompt;
    srt_model_get_timing(m, &tm_prompt);
    srt_model_reset_timing(m);
    double t1 = sc_now();
    int64_t pos = n_prompt;
    enum { FB_STEPS = 4 };
    const bool fb_on = fallback && rt.info->id != SRT_METHOD_DENSE;
    double fb_ms[2] = {0, 0};
    bool fb_dense = false;
    double dens_sum = 0; /* srt_model_last_density over (decode step, layer) */
    int64_t dens_n = 0;
    while (st == SC_OK) {
        memcpy(row, logits, (size_t)c->vocab_size * sizeof(float));
        sc_logits_top_k(row, c->vocab_size, top_k, scratch + 3 * c->vocab_size);
        int32_t next = sc_sampler_sample(&smp, row, c->vocab_size, scratch);
        if (next < 0) { /* the step checks its logits; this cannot happen unless that check is gone */
            st = sc_errf(&err, SC_EFORMAT, "%s: non-finite logits at position %lld", path, (long long)(pos - 1));
            break;
        }
        if (!ignore_eos && (next == bos || next == eos)) break;
        if (sc_tokens_push(&toks, next)) {
            st = sc_errf(&err, SC_ENOMEM, "out of memory");
            break;
        }
        emit(out, tok, toks.ids[pos - 1], next, &text, &tn, &tcap);
        if (pos >= steps) break;
        /* --fallback-dense: steps 1..2*FB_STEPS alternate routed / dense, then the faster one stays */
        int64_t k = pos - n_prompt;
        bool trial = fb_on && k < 2 * FB_STEPS;
        if (trial) srt_model_set_method_id(m, k % 2 ? SRT_METHOD_DENSE : rt.info->id, rt.run_density);
        double ts = sc_now();
        ks = srt_model_step(m, next, pos, &logits);
        if (trial) {
            fb_ms[k % 2] += 1e3 * (sc_now() - ts) / FB_STEPS;
            if (k + 1 == 2 * FB_STEPS) {
                fb_dense = fb_ms[1] < fb_ms[0];
                srt_model_set_method_id(m, fb_dense ? SRT_METHOD_DENSE : rt.info->id, rt.run_density);
                fprintf(stderr, "note: %s %.3g: %.3f ms/step, dense %.3f ms/step: decoding %s from here on\n", mname,
                        density, fb_ms[0], fb_ms[1], fb_dense ? "dense" : "routed");
            }
        }
        if (ks != SRT_OK) st = step_failed(m, path, ks, pos, &err);
        for (int64_t l = 0; l < c->n_layers; l++) dens_sum += srt_model_last_density(m, l); /* as --score averages it */
        dens_n += c->n_layers;
        pos++;
    }
    double t_decode = sc_now() - t1;
    if (st) goto done;
    srt_model_timing tm;
    srt_model_get_timing(m, &tm);
    /* the fraction of MLP neurons the decode steps kept */
    double mlp_density = tm.steps ? (double)tm.live_sum / ((double)tm.steps * (double)c->n_layers * (double)c->ffn_dim) : 0.0;
    /* a fitted router's stored thresholds keep what they keep: for one the density shown is the achieved one, the
     * per-layer density srt_model_last_density reports (for CWIC the parameters read), averaged as --score does */
    bool fitted = isnan(rt.run_density) && dens_n;
    double achieved = dens_n ? dens_sum / (double)dens_n : 0.0;
    int64_t gen = (int64_t)toks.n - n_prompt;
    double tps = (double)tm.steps / (t_decode > 0 ? t_decode : 1e-9);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "artifact", path);
        cJSON_AddStringToObject(j, "text", text ? text : "");
        cJSON *ids = cJSON_AddArrayToObject(j, "tokens");
        for (size_t i = 0; i < toks.n; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(toks.ids[i]));
        cJSON_AddNumberToObject(j, "prompt_tokens", (double)n_prompt);
        cJSON_AddNumberToObject(j, "generated_tokens", (double)gen);
        cJSON_AddStringToObject(j, "method", mname);
        if (fitted) {
            cJSON_AddNumberToObject(j, "density", achieved);
            cJSON_AddStringToObject(j, "density_from", "stored thresholds, achieved");
        } else
            cJSON_AddNumberToObject(j, "density", density);
        if (sc_artifact_fixed_live(&rt))
            cJSON_AddNumberToObject(j, "live_neurons", (double)(larosa ? k_h : srt_model_live_count(m)));
        cJSON_AddNumberToObject(j, "rotated_inputs", (double)srt_model_rotated_inputs(m));
        if (fb_on && fb_ms[1] > 0) { /* --fallback-dense: the trial and its outcome */
            cJSON *fb = cJSON_AddObjectToObject(j, "fallback");
            cJSON_AddNumberToObject(fb, "routed_ms_per_step", fb_ms[0]);
            cJSON_AddNumberToObject(fb, "dense_ms_per_step", fb_ms[1]);
            cJSON_AddStringToObject(fb, "kept", fb_dense ? "dense" : "routed");
        }
        if (larosa) {
            cJSON_AddNumberToObject(j, "live_input_channels", (double)k_in);
            cJSON_AddNumberToObject(j, "dim", (double)c->dim);
        }
        cJSON_AddNumberToObject(j, "ffn_dim", (double)c->ffn_dim);
        cJSON_AddStringToObject(j, "isa", srt_isa_name(srt_ctx_isa(ctx)));
        char pf[128];
        cJSON_AddStringToObject(j, "prefetch", srt_ctx_prefetch(ctx, pf, sizeof pf));
        cJSON_AddNumberToObject(j, "threads", (double)threads);
        cJSON_AddNumberToObject(j, "weight_bytes", (double)srt_model_weight_bytes(m));
        cJSON_AddNumberToObject(j, "kv_cache_positions", (double)srt_model_ctx_allocated(m));
        cJSON_AddStringToObject(j, "kv_cache_type", cli_kv_name(srt_model_kv_type(m)));
        cJSON_AddNumberToObject(j, "kv_cache_bytes", (double)srt_model_kv_bytes(m));
        cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
        cJSON_AddNumberToObject(j, "prompt_seconds", t_prompt);
        cJSON_AddNumberToObject(j, "prompt_tokens_per_second", (double)n_prompt / (t_prompt > 0 ? t_prompt : 1e-9));
        cJSON_AddNumberToObject(j, "decode_steps", (double)tm.steps);
        cJSON_AddNumberToObject(j, "decode_seconds", t_decode);
        cJSON_AddNumberToObject(j, "tokens_per_second", tps);
        add_phase_times(j, "", &tm, t_decode, tm.steps);
        /* the prompt's the same way, per prompt token (the weights read once per chunk of tokens) */
        add_phase_times(j, "prompt_", &tm_prompt, t_prompt, n_prompt);
        cJSON_AddNumberToObject(j, "mlp_density", mlp_density);
        cli_print_json(j);
    } else {
        fputc('\n', stdout);
        fflush(stdout);
        double shown = fitted ? achieved : density;
        fprintf(stderr, "run: %s, %s %sdensity %.3g (%lld of %lld neurons), %s x%lld: prompt %lld tok in %.3f s, "
                        "generated %lld tokens in %.3f s (%.1f tok/s)\n",
                path, mname, fitted ? "stored thresholds, achieved " : "", shown,
                (long long)(larosa ? k_h : tm.steps ? tm.live_sum / (tm.steps * c->n_layers) : srt_model_live_count(m)),
                (long long)c->ffn_dim, srt_isa_name(srt_ctx_isa(ctx)), (long long)threads, (long long)n_prompt,
                t_prompt, (long long)gen, t_decode, tps);
    }
done:
    free(text);
    free(scratch);
    sc_tokens_free(&toks);
    sc_tokens_free(&ptoks);
    sc_tokenizer_free(tok);
    cli_artifact_close(&art);
    return st ? cli_fail("run", st, &err) : 0;
}
