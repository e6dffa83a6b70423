/* cmd_train.c - `sparsecal train`: recovery training of a LoRA adapter on
 * W_d under a soft top-K mask (calib/train.h), written as a PEFT adapter
 * that `pack --lora` fuses. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claws.h"
#include "cli.h"
#include "plan.h"
#include "scal.h"
#include "train.h"

/* The CLAWS multipliers c_j of every layer from a calibration file, as the
 * runtime stores them (sc_plan_claws_layer) [L, F]. */
static sc_status claws_multipliers(const sc_model *m, const char *path, float **out, sc_err *err) {
    *out = NULL;
    sc_calib *c;
    SC_TRY(sc_calib_open(path, m, &c, err));
    int64_t L = m->cfg.n_layers, F = m->cfg.ffn_dim;
    const void *state = sc_calib_state(c, "claws");
    float *cf = malloc((size_t)(L * F) * sizeof *cf);
    sc_status st = SC_OK;
    if (!state)
        st = sc_errf(err, SC_EARG, "%s holds no claws statistics (sparsecal compute --method claws)", path);
    else if (!cf)
        st = sc_errf(err, SC_ENOMEM, "out of memory");
    for (int64_t l = 0; l < L && !st; l++) {
        const double *cj = sc_claws_c(state, l);
        if (!cj)
            st = sc_errf(err, SC_EARG, "%s has no CLAWS multipliers for layer %lld (calibrate every layer)", path,
                         (long long)l);
        else
            sc_plan_claws_layer(cj, F, cf + l * F);
    }
    sc_calib_free(c);
    if (st) {
        free(cf);
        return st;
    }
    *out = cf;
    return SC_OK;
}

/* The loss history as CSV, one row per step. */
static sc_status write_log(const char *path, const sc_train_opts *o, const sc_train_result *r, sc_err *err) {
    size_t cap = 128 + (size_t)o->steps * 160, n = 0;
    char *buf = malloc(cap);
    if (!buf) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    n += (size_t)snprintf(buf, cap, "step,lr,tau,loss,kl,ce,density,tokens\n");
    for (int64_t s = 0; s < o->steps && n < cap; s++) {
        const sc_train_step *h = &r->history[s];
        n += (size_t)snprintf(buf + n, cap - n, "%lld,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%lld\n", (long long)(s + 1), h->lr,
                              h->tau, h->loss, h->kl, h->ce, h->density, (long long)h->tokens);
    }
    sc_atomic_file f;
    sc_status st = sc_atomic_open(&f, path, err);
    if (st) {
        free(buf);
        return st;
    }
    st = sc_atomic_write(&f, buf, n < cap ? n : cap, err);
    free(buf);
    if (st) {
        sc_atomic_abort(&f);
        return st;
    }
    return sc_atomic_commit(&f, err);
}

/* Mean of a history column over steps [a, b). */
static double mean_of(const sc_train_result *r, int64_t a, int64_t b, int col) {
    double s = 0.0;
    for (int64_t k = a; k < b; k++) {
        const sc_train_step *h = &r->history[k];
        s += col == 0 ? h->loss : col == 1 ? h->kl : col == 2 ? h->ce : h->density;
    }
    return b > a ? s / (double)(b - a) : NAN;
}

int cmd_train(int argc, char **argv) {
    cli_inputs in = {0};
    sc_train_opts o;
    sc_train_opts_default(&o);
    const char *method = NULL, *calib = NULL, *out = NULL, *log = NULL;
    int64_t ckpt_every = 0;
    bool json = false, quiet = false, resume = false;
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        CLI_DATA_OPTS(in),
        CLI_THREADS_OPT(in.threads),
        {"seed", 's', SC_ARG_U64, &o.seed, "S", "training seed: the adapter's initialisation and the order of sequences "
         "(default 1)", 0, 0},
        {"method", 0, SC_ARG_STR, &method, "M", "claws-lora (scores |phi(u)| c_j, needs --calib) or cats-lora (|phi(u)|) "
         "(required)", 0, 0},
        {"calib", 0, SC_ARG_STR, &calib, "FILE", "claws-lora: the calibration with CLAWS multipliers, compute --method "
         "claws (default: none)", 0, 0},
        {"density", 0, SC_ARG_FLOAT, &o.density, "D", "fraction of MLP neurons the top-K keeps, in (0, 1] (default 0.5)", 0, 0},
        {"out", 'o', SC_ARG_STR, &out, "DIR", "the adapter directory to write (adapter_model.safetensors, adapter_config.json) "
         "(required)", 0, 0},
        {"rank", 0, SC_ARG_INT, &o.rank, "R", "LoRA rank (default min(128, dim, ffn))", 1, 1 << 20},
        {"alpha", 0, SC_ARG_FLOAT, &o.alpha, "A", "LoRA alpha (default: the rank, scale 1)", 0, 0},
        {"steps", 'n', SC_ARG_INT, &o.steps, "N", "optimizer steps (default 2500, the paper's: far too many for a CPU, set it)", 1, 1 << 30},
        {"batch", 0, SC_ARG_INT, &o.batch, "B", "sequences per micro-batch (default 8)", 1, 1 << 20},
        {"grad-accum", 0, SC_ARG_INT, &o.grad_accum, "G", "micro-batches per optimizer step (default 1)", 1, 1 << 20},
        {"ctx-size|seq-len", 'c', SC_ARG_INT, &o.seq_len, "N", "tokens per sequence, longer ones are cut (default: the "
         "model's context)", 2, 1 << 21},
        {"lr", 0, SC_ARG_FLOAT, &o.lr, "LR", "AdamW peak learning rate (default 1e-5, the paper's)", 0, 0},
        {"beta1", 0, SC_ARG_FLOAT, &o.beta1, "B1", "AdamW beta1 (default 0.9)", 0, 0},
        {"beta2", 0, SC_ARG_FLOAT, &o.beta2, "B2", "AdamW beta2 (default 0.999)", 0, 0},
        {"adam-eps", 0, SC_ARG_FLOAT, &o.adam_eps, "E", "AdamW epsilon (default 1e-8)", 0, 0},
        {"weight-decay", 0, SC_ARG_FLOAT, &o.weight_decay, "W", "AdamW weight decay (default 0)", 0, 0},
        {"warmup", 0, SC_ARG_FLOAT, &o.warmup, "F", "fraction of steps with a linear warm-up, then cosine decay (default 0.025)", 0, 1},
        {"tau0", 0, SC_ARG_FLOAT, &o.tau0, "T", "mask temperature at the start (default 1.0)", 0, 1e6},
        {"tau1", 0, SC_ARG_FLOAT, &o.tau1, "T", "mask temperature after the anneal, held (default 0.01)", 0, 1e6},
        {"anneal", 0, SC_ARG_FLOAT, &o.anneal, "F", "fraction of steps over which tau falls linearly (default 0.6)", 0, 1},
        {"ce-weight", 0, SC_ARG_FLOAT, &o.ce_weight, "W", "weight of the cross-entropy beside KL(student || teacher) (default 0.2)", 0, 1e6},
        {"checkpoint-every", 0, SC_ARG_INT, &ckpt_every, "N", "every N steps save the trainer state to DIR.ckpt; removed on success "
         "(default: no checkpoints)", 1, 1e15},
        {"resume", 0, SC_ARG_FLAG, &resume, NULL, "continue from DIR.ckpt (same model, data and options; none yet: start at step 1)", 0, 0},
        {"log", 0, SC_ARG_STR, &log, "FILE", "write the loss history as CSV: step, lr, tau, loss, kl, ce, density, tokens "
         "(default: none)", 0, 0},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print a JSON summary", 0, 0},
        {"quiet", 'q', SC_ARG_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
        SC_OPTS_END("  sparsecal train -m stories260K.bin --tokenizer tok512.bin -f stories.txt --max-docs 1000 "
                    "--method claws-lora --calib c.scal --density 0.5 -n 200 --batch 8 --lr 3e-3 -o ad\n"
                    "  sparsecal train -m model/ --tokens ids.txt -c 512 --method cats-lora -n 2 --batch 1 -t 2 -o ad"),
    };
    int r = sc_parse_args(
        "train",
        "Recovery training for activation sparsity (the CLAWS paper, Section 3.3 and Appendix F): a rank-r\n"
        "LoRA adapter on every layer's down projection W_d, distilled from the dense model (its logits\n"
        "computed on the fly for every sequence) with KL(student || teacher) + 0.2 CE, while the student's\n"
        "MLP neurons are masked by a soft top-K of the method's score whose temperature anneals from 1.0 to\n"
        "0.01 over 60% of the steps (hard top-K at inference). AdamW with linear warm-up and cosine decay;\n"
        "-n steps of --batch x --grad-accum sequences (sequences run one at a time; the step's gradient is\n"
        "the mean over its tokens). --seed S also seeds the adapter and the order of sequences (default 1).\n"
        "Writes a PEFT adapter: `sparsecal pack --lora DIR --calib X.scal --method claws` fuses it.",
        opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    sc_status st = SC_OK;
    const sc_train_method *tm = sc_train_method_find(method);
    if (!method || !out)
        st = sc_errf(&err, SC_EARG, "no %s", !method ? "method given (--method claws-lora or cats-lora)" : "output directory (-o DIR)");
    else if (!tm)
        st = sc_errf(&err, SC_EARG, "--method must be %s, got '%s'", sc_train_method_names(), method);
    else if (tm->multipliers && !calib)
        st = sc_errf(&err, SC_EARG, "%s needs the CLAWS multipliers: --calib FILE (sparsecal compute --method claws)", tm->name);
    else if (!tm->multipliers && calib)
        st = sc_errf(&err, SC_EARG, "%s scores |phi(u)| alone and reads no --calib", tm->name);
    else if (!(o.density > 0.0 && o.density <= 1.0))
        st = sc_errf(&err, SC_EARG, "--density %g is not in (0, 1]", o.density);
    else if (o.alpha < 0.0 || !isfinite(o.alpha))
        st = sc_errf(&err, SC_EARG, "--alpha must be positive");
    else if (sc_file_exists(out) && !sc_is_dir(out)) /* refused now, not after the training */
        st = sc_errf(&err, SC_EARG, "-o %s: exists and is not a directory (the adapter is a directory)", out);
    if (st) return cli_fail("train", st, &err);
    o.method = method;
    o.progress = quiet ? NULL : stderr;
    char wpath[4096], cpath[4096], ckpt[4096];
    if (!sc_path_join(wpath, sizeof wpath, out, "adapter_model.safetensors") ||
        !sc_path_join(cpath, sizeof cpath, out, "adapter_config.json") ||
        (size_t)snprintf(ckpt, sizeof ckpt, "%s.ckpt", out) >= sizeof ckpt)
        return cli_fail("train", sc_errf(&err, SC_EARG, "-o %s: the path is too long", out), &err);
    o.checkpoint_every = ckpt_every;
    o.checkpoint_path = ckpt_every > 0 ? ckpt : NULL;
    if (resume) {
        if (sc_file_exists(ckpt))
            o.resume_path = ckpt;
        else
            fprintf(stderr, "note: no checkpoint %s yet: starting from the first step\n", ckpt);
    }
    const char *outs[] = {wpath, cpath, ckpt, log};
    sc_dataset d = {0};
    sc_lora_params p = {0};
    sc_train_result res = {0};
    float *c = NULL;
    const char *more[] = {calib, NULL};
    for (size_t i = 0; i < 4 && !st; i++) st = cli_check_output(&in, outs[i], more, &err);
    if (!st) st = cli_load(&in, false, &err);
    if (!st) st = cli_load_data(&in, &d, &err);
    if (!st && calib) st = claws_multipliers(in.model, calib, &c, &err);
    for (size_t i = 0; i < 4 && !st; i++) st = cli_check_output(&in, outs[i], more, &err);
    if (!st) {
        o.c = c;
        if (o.rank == 0) o.rank = sc_lora_default_rank(&in.model->cfg);
        if (o.alpha == 0.0) o.alpha = (double)o.rank;
        st = sc_lora_params_init(&p, &in.model->cfg, o.rank, o.alpha, o.seed, &err);
    }
    if (!st) st = sc_train_lora(in.model, &d, &o, &p, &res, &err);
    if (!st) {
        char dens[32], steps[32], lr[32], seed[32];
        snprintf(dens, sizeof dens, "%.17g", o.density);
        snprintf(steps, sizeof steps, "%lld", (long long)o.steps);
        snprintf(lr, sizeof lr, "%.17g", o.lr);
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)o.seed);
        sc_st_meta meta[6] = {{"sparsecal.method", method}, {"sparsecal.density", dens}, {"sparsecal.steps", steps},
                              {"sparsecal.lr", lr},         {"sparsecal.seed", seed},   {"sparsecal.calib", calib ? calib : ""}};
        st = sc_lora_params_save(&p, out, in.model_path, meta, 6, &err);
    }
    if (!st && log) st = write_log(log, &o, &res, &err);
    if (!st && (ckpt_every > 0 || o.resume_path)) remove(ckpt); /* the adapter is written: the checkpoint is spent */
    if (!st) {
        int64_t S = o.steps, tail = S / 10 > 0 ? S / 10 : 1;
        double tps = (double)res.tokens / (res.seconds > 0 ? res.seconds : 1e-9);
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "out", out);
            cJSON_AddStringToObject(j, "method", method);
            cJSON_AddNumberToObject(j, "density", o.density);
            cJSON_AddNumberToObject(j, "rank", (double)p.rank);
            cJSON_AddNumberToObject(j, "alpha", p.alpha);
            cJSON_AddNumberToObject(j, "steps", (double)S);
            cJSON_AddNumberToObject(j, "first_step", (double)res.first_step + 1);
            cJSON_AddNumberToObject(j, "batch", (double)o.batch);
            cJSON_AddNumberToObject(j, "grad_accum", (double)o.grad_accum);
            cJSON_AddNumberToObject(j, "lr", o.lr);
            cJSON_AddNumberToObject(j, "seed", (double)o.seed);
            cJSON_AddStringToObject(j, "teacher", "the dense model, logits computed on the fly for every sequence");
            cJSON_AddNumberToObject(j, "train_sequences", (double)res.train_seqs);
            cJSON_AddNumberToObject(j, "tokens", (double)res.tokens);
            cJSON_AddNumberToObject(j, "seconds", res.seconds);
            cJSON_AddNumberToObject(j, "tokens_per_second", tps);
            cJSON_AddNumberToObject(j, "loss_first", res.history[0].loss);
            cJSON_AddNumberToObject(j, "kl_first", res.history[0].kl);
            cJSON_AddNumberToObject(j, "ce_first", res.history[0].ce);
            cJSON_AddNumberToObject(j, "loss_last10pct", mean_of(&res, S - tail, S, 0));
            cJSON_AddNumberToObject(j, "kl_last10pct", mean_of(&res, S - tail, S, 1));
            cJSON_AddNumberToObject(j, "ce_last10pct", mean_of(&res, S - tail, S, 2));
            cJSON_AddNumberToObject(j, "density_last", res.history[S - 1].density);
            cJSON_AddNumberToObject(j, "tau_last", res.history[S - 1].tau);
            cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
            cli_print_json(j);
        } else if (!quiet) {
            fprintf(stderr,
                    "wrote %s: %s at density %g, rank %lld, %lld steps, %lld tokens in %.1f s (%.0f tok/s); "
                    "loss %.4f -> %.4f (KL %.4f -> %.4f, mean of the last 10%% of steps)\n",
                    out, method, o.density, (long long)p.rank, (long long)S, (long long)res.tokens, res.seconds, tps,
                    res.history[0].loss, mean_of(&res, S - tail, S, 0), res.history[0].kl, mean_of(&res, S - tail, S, 1));
        }
    }
    sc_train_result_free(&res);
    sc_lora_params_free(&p);
    free(c);
    sc_dataset_free(&d);
    cli_inputs_free(&in);
    return st ? cli_fail("train", st, &err) : 0;
}
