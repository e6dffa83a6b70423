/* cmd_calib.c - `sparsecal compute`, `merge` and `eval`. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_artifact.h"
#include "lora.h"
#include "lc_util.h"
#include "cli_mpi.h"
#include "sample_store.h"
#include "scal.h"
#include "route_method.h"
#include "score.h"
#include "sparse_eval.h"

/* "a:b" -> [a, b) with b empty meaning the end */
static bool parse_range(const char *s, int64_t *a, int64_t *b) {
    char *end;
    *a = strtoll(s, &end, 10);
    if (end == s || *end != ':' || *a < 0) return false;
    const char *t = end + 1;
    if (!*t) {
        *b = 0;
        return true;
    }
    *b = strtoll(t, &end, 10);
    return end != t && !*end && *b > *a;
}

static bool parse_shard(const char *s, int64_t *i, int64_t *n) {
    char *end;
    *i = strtoll(s, &end, 10);
    if (end == s || *end != '/') return false;
    const char *t = end + 1;
    *n = strtoll(t, &end, 10);
    return end != t && !*end && *n >= 1 && *i >= 0 && *i < *n;
}

int cmd_compute(int argc, char **argv) {
    cli_inputs in = {0};
    const char *methods = NULL, *out = NULL, *layers = NULL, *shard = NULL, *loss = "ce", *student = "cats",
               *params = NULL, *spill = NULL;
    int64_t seq_len = 0, compress = 3, ckpt_every = 0;
    double student_density = 0.5, ce_weight = 0.2;
    bool json = false, quiet = false, resume = false;
    char names[256] = "", method_help[320]; /* the calibration methods' registry (method.h) */
    for (const sc_method *const *me = sc_methods(); *me; me++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "", (*me)->name);
    snprintf(method_help, sizeof method_help, "methods: %s, comma-separated (required)", names);
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        CLI_DATA_OPTS(in),
        CLI_THREADS_OPT(in.threads),
        {"method", 0, SC_ARG_STR, &methods, "M[,M]", method_help, 0, 0},
        {"out", 'o', SC_ARG_STR, &out, "FILE", "calibration file to write (.scal) (required)", 0, 0},
        {"ctx-size|ctx|seq-len", 'c', SC_ARG_INT, &seq_len, "N", "tokens per sequence, longer ones are cut (default: "
            "the model's context)", 2, 1 << 21},
        {"shard", 0, SC_ARG_STR, &shard, "I/N", "process every N-th sequence starting at I (merge shards later); not "
            "under mpirun (default: all)", 0, 0},
        {"layers", 0, SC_ARG_STR, &layers, "A:B", "calibrate layers A..B-1 (default: all)", 0, 0},
        {"loss", 0, SC_ARG_STR, &loss, "ce|distill", "loss for gradients: next-token CE, or KL(student||teacher) + "
            "w*CE (default ce)", 0, 0},
        {"student", 0, SC_ARG_STR, &student, "R", "distill: the student's router (cats, oracle, dense; default "
            "cats)", 0, 0},
        {"student-density", 0, SC_ARG_FLOAT, &student_density, "D", "distill: the student's density, in (0, 1] (default 0.5)", 0, 0},
        {"ce-weight", 0, SC_ARG_FLOAT, &ce_weight, "W", "distill: weight of the CE term (default 0.2)", 0, 1e6},
        {"params", 0, SC_ARG_STR, &params, "K=V,..", "method parameters (default: each method's, "
            "docs/CALIBRATION.md)", 0, 0},
        {"compress", 0, SC_ARG_INT, &compress, "LEVEL", "zstd level for the arrays, 0 = raw (default 3)", 0, 19},
        {"spill-dir", 0, SC_ARG_STR, &spill, "DIR",
         "stored samples (cett, clada, teal, coact) of 32 MiB or more per layer live in an unlinked file here, not in "
         "memory (default: $SPARSECAL_SPILL_DIR, else $TMPDIR, else /tmp; 'off': in memory)", 0, 0},
        {"checkpoint-every", 0, SC_ARG_INT, &ckpt_every, "N",
         "every N sequences save the accumulators to FILE.ckpt (MPI: FILE.ckpt.rankR); removed on success (default: "
             "no checkpoints)", 1, 1e15},
        {"resume", 0, SC_ARG_FLAG, &resume, NULL,
         "continue from FILE.ckpt (same model, data, options, shard; none yet: start from the beginning)", 0, 0},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print a JSON summary", 0, 0},
        {"quiet", 'q', SC_ARG_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
        SC_OPTS_END("  sparsecal compute -m stories260K.bin --tokenizer tok512.bin -f stories.txt --max-docs 1000 "
            "--method claws,cats -o c.scal\n"
"  sparsecal compute -m model/ -f calib.jsonl -c 512 -t 8 --method larosa,teal,cett --checkpoint-every 100 --resume "
    "-o all.scal"),
    };
    double t_start = sc_now();
    cli_mpi mp;
    cli_mpi_start(&mp);
    cli_mpi_mute(&mp, true); /* every rank parses the same options: rank 0 speaks for all */
    int r = sc_parse_args("compute",
                          "Stream calibration sequences through the model and accumulate each method's statistics\n"
                          "into a calibration file. claws runs the backward pass; cats needs only the forward.\n"
                          "Under mpirun/srun every rank takes every N-th sequence (as --shard rank/N) and rank 0\n"
                          "merges the ranks' results in rank order and writes the file (docs/SCALE.md).",
                          opts, argc, argv, NULL, 0, NULL);
    cli_mpi_mute(&mp, false);
    if (r) {
        cli_mpi_end(&mp);
        return r == SC_ARGS_HELP ? 0 : 2;
    }
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    char mbuf[256];
    sc_err err = {{0}};
    sc_dataset d = {0};
    sc_calib *c = NULL;
    sc_status st = sc_density_check(student_density, "--student-density", &err);
    if (!st && (!methods || !out))
        st = sc_errf(&err, SC_EARG, "%s", !methods ? "no method given (--method claws)" : "no output file (-o FILE)");
    snprintf(mbuf, sizeof mbuf, "%s", methods ? methods : "");
    for (char *p = strtok(mbuf, ","); p && !st; p = strtok(NULL, ",")) {
        if (co.n_methods == SC_MAX_METHODS || !sc_method_find(p))
            st = sc_errf(&err, SC_EARG, "unknown method '%s' (%s)", p, names);
        else
            co.methods[co.n_methods++] = p;
    }
    if (!st) {
        char known[1024] = "";
        for (int i = 0; i < co.n_methods; i++) {
            const char *k = sc_method_find(co.methods[i])->param_keys;
            if (k && *k) snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", known[0] ? "," : "", k);
        }
        st = sc_params_check(params, known, "--params", &err);
    }
    if (!st && layers && !parse_range(layers, &co.layer_begin, &co.layer_end))
        st = sc_errf(&err, SC_EARG, "--layers expects A:B with A < B, got '%s'", layers);
    if (!st && shard && !parse_shard(shard, &co.shard_index, &co.shard_count))
        st = sc_errf(&err, SC_EARG, "--shard expects I/N with 0 <= I < N, got '%s'", shard);
    if (!st && mp.unsupported)
        st = sc_errf(&err, SC_EARG, "started as one of %d MPI processes, but this sparsecal was built without MPI "
                                    "(install libopenmpi-dev and rebuild, or run --shard I/N jobs and merge)", mp.unsupported);
    if (!st && shard && mp.size > 1)
        st = sc_errf(&err, SC_EARG, "--shard cannot be combined with an MPI run of %d ranks (each rank is a shard already)",
                     mp.size);
    if (!st && strcmp(loss, "ce") == 0)
        co.loss = SC_LOSS_KIND_CE;
    else if (!st && strcmp(loss, "distill") == 0)
        co.loss = SC_LOSS_KIND_DISTILL;
    else if (!st)
        st = sc_errf(&err, SC_EARG, "--loss must be ce or distill, got '%s'", loss);
    int sr = srt_router_from_name(student);
    if (!st && sr < 0) st = sc_errf(&err, SC_EARG, "unknown --student router '%s'", student);
    if (mp.size > 1) { /* rank r of N is shard r/N */
        co.shard_index = mp.rank;
        co.shard_count = mp.size;
        co.on_seq = cli_mpi_poll;
        co.on_seq_user = &mp;
    }
    co.student = sr < 0 ? co.student : (srt_router)sr;
    co.student_density = student_density;
    co.ce_weight = ce_weight;
    co.seq_len = seq_len;
    co.params = params;
    if (spill) sc_sample_spill(strcmp(spill, "off") ? spill : NULL, SC_SAMPLE_SPILL_MIN);
    co.progress = quiet || mp.rank > 0 ? NULL : stderr; /* progress of rank 0's share */
    /* checkpoints: one per process, beside the output (each rank its own share) */
    char ckpt[4096] = "";
    if (!st && out && (size_t)snprintf(ckpt, sizeof ckpt, mp.size > 1 ? "%s.ckpt.rank%d" : "%s.ckpt", out, mp.rank) >= sizeof ckpt)
        st = sc_errf(&err, SC_EARG, "-o %s: the path is too long", out);
    co.checkpoint_every = ckpt_every;
    co.checkpoint_path = ckpt;
    if (!st && resume) {
        if (sc_file_exists(ckpt))
            co.resume_path = ckpt;
        else /* (also with -q: the run does not do what was asked) */
            fprintf(stderr, "note: no checkpoint %s yet: starting from the first sequence\n", ckpt);
    }
    st = cli_mpi_agree(&mp, "compute", st, &err);
    if (!st) st = cli_check_output(&in, out, NULL, &err);
    if (!st) st = cli_load(&in, false, &err);
    if (!st) st = cli_load_data(&in, &d, &err);
    if (!st) st = cli_check_output(&in, out, NULL, &err); /* every file read, e.g. inside a model directory */
    if (!st && co.layer_end > in.model->cfg.n_layers)
        st = sc_errf(&err, SC_EARG, "--layers %s: the model has %lld layers", layers, (long long)in.model->cfg.n_layers);
    st = cli_mpi_agree(&mp, "compute", st, &err);
    double t0 = sc_now();
    if (!st) st = sc_calib_compute(in.model, &d, &co, &c, &err);
    st = cli_mpi_agree(&mp, "compute", st, &err);
    /* rank 0 adds the other ranks' results in rank order, exactly as `merge` adds shard files */
    if (!st) st = cli_mpi_agree(&mp, "compute", cli_mpi_reduce(&mp, in.model, c, &err), &err);
    double seconds = mp.size > 1 ? sc_now() - t0 : c ? c->seconds : 0; /* MPI: wall clock (c->seconds sums the ranks') */
    if (!st && mp.rank == 0) st = sc_calib_save_progress(c, in.model, out, (int)compress, co.progress, &err);
    st = cli_mpi_agree(&mp, "compute", st, &err);
    if (!st && (ckpt_every > 0 || co.resume_path)) remove(ckpt); /* the result is written: the checkpoint is spent */
    if (!st && mp.rank == 0 && json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "out", out);
        cJSON_AddStringToObject(j, "methods", methods);
        cJSON_AddNumberToObject(j, "sequences", (double)c->n_seqs);
        cJSON_AddNumberToObject(j, "tokens", (double)c->n_tokens);
        cJSON_AddNumberToObject(j, "seconds", sc_now() - t_start); /* the whole run: loading, passes, writing */
        cJSON_AddNumberToObject(j, "pass_seconds", seconds);      /* the forward/backward passes (tokens_per_second) */
        cJSON_AddNumberToObject(j, "tokens_per_second", (double)(c->n_tokens + c->n_seqs) / (seconds > 0 ? seconds : 1e-9));
        cJSON_AddNumberToObject(j, "processes", mp.size);
        cJSON_AddStringToObject(j, "model_id", c->model_id);
        cJSON_AddStringToObject(j, "data_id", c->data_id);
        cJSON_AddStringToObject(j, "shards", c->shards);
        cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
        cJSON_AddNumberToObject(j, "peak_spilled_bytes", (double)sc_sample_spilled_peak());
        cli_print_json(j);
    } else if (!st && mp.rank == 0 && !quiet) {
        fprintf(stderr, "wrote %s: %lld sequences, %lld tokens in %.1f s (%.0f tok/s; %.1f s in all)%s\n", out,
                (long long)c->n_seqs, (long long)c->n_tokens, seconds,
                (double)(c->n_tokens + c->n_seqs) / (seconds > 0 ? seconds : 1e-9), sc_now() - t_start,
                mp.size > 1 ? " over MPI ranks" : "");
    }
    sc_calib_free(c);
    sc_dataset_free(&d);
    cli_inputs_free(&in);
    cli_mpi_end(&mp);
    if (st && mp.reported) return cli_exit_code(st); /* printed once, by the rank that failed */
    return st ? cli_fail("compute", st, &err) : 0;
}

int cmd_merge(int argc, char **argv) {
    const char *out = NULL;
    bool json = false;
    int compress = 3;
    int64_t level = 3;
    const sc_opt opts[] = {
        {"out", 'o', SC_ARG_STR, &out, "FILE", "merged calibration file (required)", 0, 0},
        {"compress", 0, SC_ARG_INT, &level, "LEVEL", "zstd level, 0 = raw (default 3)", 0, 19},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print a JSON summary", 0, 0},
        SC_OPTS_END("  sparsecal merge a.scal b.scal -o ab.scal --json"),
    };
    const char *inputs[257];
    int n_in = 0;
    int r = sc_parse_args("merge", "Sum compatible calibration files (shards of one run) into one:\n"
                                   "  sparsecal merge A.scal B.scal ... -o C.scal",
                          opts, argc, argv, inputs, 256, &n_in);
    inputs[n_in] = NULL;
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    compress = (int)level;
    if (!out || n_in < 1) {
        fprintf(stderr, "sparsecal merge: %s\n", !out ? "no output file (-o FILE)" : "no input files");
        return 2;
    }
    sc_err err = {{0}};
    sc_calib *acc = NULL;
    sc_status st = cli_check_output(NULL, out, inputs, &err);
    if (!st) st = sc_calib_load(inputs[0], NULL, &acc, &err);
    for (int i = 1; i < n_in && !st; i++) {
        sc_calib *c;
        if ((st = sc_calib_load(inputs[i], NULL, &c, &err))) break;
        st = sc_calib_merge(acc, c, &err);
        if (st) {
            char msg[sizeof err.msg];
            snprintf(msg, sizeof msg, "%s", err.msg);
            sc_errf(&err, st, "%s does not merge with %s: %s", inputs[i], inputs[0], msg);
        }
        sc_calib_free(c);
    }
    if (!st) st = sc_calib_save(acc, NULL, out, compress, &err);
    if (!st && json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "out", out);
        cJSON_AddNumberToObject(j, "inputs", n_in);
        cJSON_AddStringToObject(j, "shards", acc->shards);
        cJSON_AddNumberToObject(j, "sequences", (double)acc->n_seqs);
        cJSON_AddNumberToObject(j, "tokens", (double)acc->n_tokens);
        cli_print_json(j);
    }
    sc_calib_free(acc);
    return st ? cli_fail("merge", st, &err) : 0;
}

/* larosa / cett / clada: the split, thresholds and load signals (see docs/LAROSA_CETT.md) */
static void add_lc_json(cJSON *j, const sc_route_method *rm, const sc_sparse_eval_result *r, int64_t n_layers) {
    const struct sc_lc_result *x = &r->lc;
    cJSON *o = cJSON_AddObjectToObject(j, rm->name);
    if (rm->flags & SC_RM_REPORT_LAROSA) {
        cJSON_AddNumberToObject(o, "split_in", x->split_in);
        cJSON_AddNumberToObject(o, "split_h", x->split_h);
        cJSON_AddNumberToObject(o, "in_density", x->in_density);
        cJSON_AddNumberToObject(o, "h_density", x->h_density);
        cJSON_AddNumberToObject(o, "linear_density", x->linear_density);
        cJSON_AddNumberToObject(o, "sparsified_linear_density", x->sparsified_density);
        cJSON *g = cJSON_AddArrayToObject(o, "grid");
        for (int i = 0; i < x->n_grid; i++) {
            cJSON *row = cJSON_CreateObject();
            cJSON_AddNumberToObject(row, "split_in", x->grid[i][0]);
            cJSON_AddNumberToObject(row, "split_h", x->grid[i][1]);
            cJSON_AddNumberToObject(row, "tuning_ppl", x->grid[i][2]);
            cJSON_AddItemToArray(g, row);
        }
        return;
    }
    cJSON_AddNumberToObject(o, "target", x->target);
    cJSON *t = cJSON_AddArrayToObject(o, "threshold_per_layer"), *c = cJSON_AddArrayToObject(o, "sample_cett_per_layer"),
          *s = cJSON_AddArrayToObject(o, "sample_sparsity_per_layer");
    for (int64_t l = 0; l < n_layers && l < SC_MAX_LAYERS; l++) { /* NaN (uncalibrated layer) -> null */
        cJSON_AddItemToArray(t, isnan(x->layer_threshold[l]) ? cJSON_CreateNull() : cJSON_CreateNumber(x->layer_threshold[l]));
        cJSON_AddItemToArray(c, isnan(x->layer_cett[l]) ? cJSON_CreateNull() : cJSON_CreateNumber(x->layer_cett[l]));
        cJSON_AddItemToArray(s, isnan(x->layer_sample_sparsity[l]) ? cJSON_CreateNull()
                                                                   : cJSON_CreateNumber(x->layer_sample_sparsity[l]));
    }
    if (rm->flags & SC_RM_CLADA) {
        cJSON_AddNumberToObject(o, "tau_s", x->tau_s);
        cJSON_AddNumberToObject(o, "tau_h", x->tau_h);
        cJSON_AddNumberToObject(o, "lambda", x->lambda);
        cJSON_AddNumberToObject(o, "gamma", x->gamma);
        cJSON_AddNumberToObject(o, "frac_surprisal_high", x->frac_s);
        cJSON_AddNumberToObject(o, "frac_entropy_high", x->frac_h);
    }
}

/* teal / teal-greedy / cwic: achieved vs target input sparsity, APR (see docs/INPUT_SPARSITY.md) */
static void add_input_json(cJSON *j, const sc_sparse_eval_result *r, int64_t n_layers) {
    const struct sc_input_result *x = &r->in;
    cJSON *o = cJSON_AddObjectToObject(j, "input_sparsity");
    cJSON_AddNumberToObject(o, "target", x->target);
    cJSON_AddNumberToObject(o, "achieved", x->effective_sparsity);
    cJSON_AddNumberToObject(o, "drift", x->effective_sparsity - x->target);
    cJSON *p = cJSON_AddObjectToObject(o, "per_projection");
    for (int k = 0; k < SC_LIN_COUNT; k++) cJSON_AddNumberToObject(p, sc_linear_name((sc_linear)k), x->proj_sparsity[k]);
    cJSON *pl = cJSON_AddArrayToObject(o, "per_layer");
    for (int64_t l = 0; l < n_layers && l < SC_MAX_LAYERS; l++) cJSON_AddItemToArray(pl, cJSON_CreateNumber(x->layer_effective[l]));
    cJSON_AddNumberToObject(o, "active_linear_params_per_token", x->active_linear_params);
    cJSON_AddNumberToObject(o, "dense_linear_params_per_token", x->dense_linear_params);
    cJSON_AddNumberToObject(o, "apr", x->apr);
    if (x->apr_target > 0) cJSON_AddNumberToObject(o, "apr_target", x->apr_target);
    if (x->stripe > 0) cJSON_AddNumberToObject(o, "stripe", (double)x->stripe);
}

int cmd_eval(int argc, char **argv) {
    cli_inputs in = {0};
    const char *calib = NULL, *method = NULL, *lora = NULL, *kv_name = NULL;
    double density = NAN; /* not given */
    int64_t ctx = 0;
    bool json = false, quiet = false, second_half = false;
    const char *params = NULL;
    char names[512], method_help[768], about[2048];
    snprintf(method_help, sizeof method_help, "%s (default: dense; on an artifact its own router)",
             sc_route_method_names(names, sizeof names, false));
    snprintf(about, sizeof about,
             "Perplexity with every token of every sequence sparsified in every layer's MLP by a router\n"
             "(no dense prefix), with the achieved density and active MLP parameters per token.\n"
             "griffin/griffin-prefill take the first half of each window as the prompt and score the\n"
             "second half.\n"
             "On a packed artifact (-m X.spk) the runtime decoder scores it, exactly as `run --score`:\n"
             "the routers it has (%s) read the\n"
             "routing data the artifact stores, a router it lacks data for is refused with the reason,\n"
             "and without --method the artifact's router and density are used (and printed). Other\n"
             "methods run the reference forward pass on the dequantised weights. --calib is checked\n"
             "against the artifact's source model (source_model_id).\n"
             "--density is the fraction of MLP neurons kept, in (0, 1], for every method: cett and clada\n"
             "fit per-layer thresholds keeping it on the calibration sample (clada: its base thresholds,\n"
             "so that the load-scaled rule keeps it on the calibration's load classes); --params\n"
             "target=C fits them to a CETT target instead (default 0.2; not both).",
             srt_method_names());
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        CLI_DATA_OPTS(in),
        CLI_THREADS_OPT(in.threads),
        {"calib", 0, SC_ARG_STR, &calib, "FILE", "calibration file, for the methods that need one (claws, "
            "cats-threshold, ...; default: none)", 0, 0},
        {"params", 0, SC_ARG_STR, &params, "K=V,..", "method-specific parameters (cett/clada "
            "target=,lambda=,gamma=,qs=,qh=; larosa; cwic; default: each method's)", 0, 0},
        {"method", 0, SC_ARG_STR, &method, "M", method_help, 0, 0},
        {"lora", 0, SC_ARG_STR, &lora, "ADAPTER", "fuse a PEFT LoRA adapter (dir or .safetensors) into the weights "
         "first, as pack --lora does (e.g. train --method cwic --train lora's; not on an artifact; default: none)", 0, 0},
        {"density", 0, SC_ARG_FLOAT, &density, "D", "fraction of MLP neurons kept per token, in (0, 1] (default 1; on an "
         "artifact its own density)", 0, 0},
        CLI_CTX_OPT(ctx, "context window (default: the model's); longer sequences are scored in windows overlapping "
            "by one token"),
        {"second-half", 0, SC_ARG_FLAG, &second_half, NULL, "score only the second half of each window (as griffin does)", 0, 0},
        {"cache-type", 0, SC_ARG_STR, &kv_name, "T", "on an artifact: what the key/value cache holds, f16 (default, as run) "
            "or f32 (the keys and values as computed, as the reference pass holds them)", 0, 0},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object", 0, 0},
        {"quiet", 'q', SC_ARG_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
        SC_OPTS_END("  sparsecal eval -m stories260K.bin --tokenizer tok512.bin -f stories.txt --skip-docs 1000 "
            "--max-docs 500 --calib c.scal --method claws --density 0.5\n"
"  sparsecal eval -m m.spk -f stories.txt --skip-docs 1000 --max-docs 500 --json"),
    };
    int r = sc_parse_args("eval", about, opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    {
        sc_err derr = {{0}};
        if (sc_density_check(density, "--density", &derr)) return cli_fail("eval", SC_EARG, &derr);
    }
    srt_kv_type kv = CLI_KV_DEFAULT;
    if (kv_name && !cli_kv_parse(kv_name, &kv)) {
        fprintf(stderr, "sparsecal eval: unknown --cache-type '%s' (f16, f32)\n", kv_name);
        return 2;
    }
    const char *asked = method;
    if (!method) method = srt_method_get(SRT_METHOD_DENSE)->name;
    const sc_route_method *rm = sc_route_method_find(method);
    if (!rm) {
        fprintf(stderr, "sparsecal eval: unknown method '%s'\n", method);
        return 2;
    }
    const bool lc_method = rm->flags & (SC_RM_REPORT_LAROSA | SC_RM_REPORT_CETT),
               in_method = rm->flags & SC_RM_REPORT_INPUT;
    {
        sc_err perr = {{0}};
        if (sc_params_check(params, rm->eval_keys, "--params", &perr)) {
            fprintf(stderr, "sparsecal eval: %s\n", perr.msg);
            return 2;
        }
    }
    sc_err err = {{0}};
    sc_dataset d = {0};
    sc_calib *c = NULL;
    sc_sparse_eval_result res;
    sc_status st = cli_load(&in, false, &err);
    if (!st && lora && !strcmp(in.model->format, "spk"))
        st = sc_errf(&err, SC_EARG, "--lora: %s is an artifact; fuse the adapter when packing it (pack --lora)",
                     in.model_path);
    if (!st && !strcmp(in.model->format, "spk") && (!asked || rm->runtime >= 0)) {
        /* an artifact, with a router the runtime has: what run executes */
        if (params || second_half)
            st = sc_errf(&err, SC_EARG, "%s: the artifact's routing was fitted by pack (pack --params); eval on an "
                                        "artifact takes no %s", in.model_path, params ? "--params" : "--second-half");
        else {
            cli_eval_request rq = {asked, calib, density, ctx, json, quiet, kv};
            st = cli_eval_artifact(&in, &rq, &err);
        }
        cli_inputs_free(&in);
        return st ? cli_fail("eval", st, &err) : 0;
    }
    if (!st && !strcmp(in.model->format, "spk"))
        fprintf(stderr, "note: the runtime has no %s router: evaluating the reference forward pass on the artifact's "
                        "dequantised weights\n", method);
    /* cett and clada reach a --density through their own fit (sc_cett_goal_parse); the rest default to dense */
    if (isnan(density) && !(rm->flags & SC_RM_TARGET)) density = 1.0;
    if (!st && calib) st = sc_calib_open(calib, in.model, &c, &err); /* of the model the adapter adapts (as pack) */
    if (!st && lora) {
        sc_lora_result lr;
        st = sc_lora_fuse(in.model, lora, &lr, &err);
        if (!st && !quiet)
            fprintf(stderr, "fused %d LoRA layers (r %d, scale %g) from %s\n", lr.fused, lr.rank, lr.scale, lora);
    }
    if (!st) st = cli_load_data(&in, &d, &err);
    if (!st) {
        sc_sparse_eval_opts o = {method, density, c, ctx ? ctx : in.model->cfg.max_seq_len, second_half, params,
                                 quiet ? NULL : stderr};
        st = sc_eval_sparse(in.model, &d, &o, &res, &err);
    }
    if (!st) {
        double nll = res.ppl.nll_sum / (double)res.ppl.n_scored, ppl = exp(nll);
        const sc_router_stats *s = &res.stats;
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "method", method);
            if (!isnan(density)) cJSON_AddNumberToObject(j, "density_target", density);
            cJSON_AddNumberToObject(j, "ppl", ppl);
            cJSON_AddNumberToObject(j, "nll_per_token", nll);
            cJSON_AddNumberToObject(j, "tokens", (double)res.ppl.n_scored);
            cJSON_AddNumberToObject(j, "sequences", (double)res.ppl.n_seqs);
            cJSON_AddNumberToObject(j, "density_mean", s->density_mean);
            if (s->live_runs > 0) {
                cJSON_AddNumberToObject(j, "live_runs_mean", s->live_runs);
                cJSON_AddNumberToObject(j, "live_run_length", s->live_run_length);
            }
            cJSON_AddNumberToObject(j, "density_min", s->density_min);
            cJSON_AddNumberToObject(j, "density_max", s->density_max);
            cJSON *pl = cJSON_AddArrayToObject(j, "density_per_layer");
            for (int64_t l = 0; l < in.model->cfg.n_layers; l++) cJSON_AddItemToArray(pl, cJSON_CreateNumber(s->layer_mean[l]));
            cJSON_AddNumberToObject(j, "active_mlp_params_per_token", s->active_mlp_params);
            cJSON_AddNumberToObject(j, "dense_mlp_params_per_token",
                                    3.0 * (double)in.model->cfg.dim * (double)in.model->cfg.ffn_dim * (double)in.model->cfg.n_layers);
            cJSON_AddBoolToObject(j, "second_half_only", second_half || (rm->flags & SC_RM_PROMPT));
            if (lc_method) add_lc_json(j, rm, &res, in.model->cfg.n_layers);
            if (in_method) add_input_json(j, &res, in.model->cfg.n_layers);
            cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
            cli_print_json(j);
        } else {
            printf("%s @ density %.3f: ppl %.6f (nll %.6f, %lld tokens); achieved density %.4f (min %.4f, max %.4f); "
                   "active MLP params/token %.0f\n",
                   method, density, ppl, nll, (long long)res.ppl.n_scored, s->density_mean, s->density_min,
                   s->density_max, s->active_mlp_params);
            if (in_method)
                printf("%s: input sparsity target %.4f, achieved %.4f (parameter-weighted); APR %.4f\n", method,
                       res.in.target, res.in.effective_sparsity, res.in.apr);
        }
    }
    sc_calib_free(c);
    sc_dataset_free(&d);
    cli_inputs_free(&in);
    return st ? cli_fail("eval", st, &err) : 0;
}
