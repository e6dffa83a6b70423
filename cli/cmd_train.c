/* cmd_train.c - `sparsecal train`: recovery training of a LoRA adapter on
 * W_d under a soft top-K mask (calib/train.h), written as a PEFT adapter
 * that `pack --lora` fuses. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <errno.h>
#include <sys/stat.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claws.h"
#include "cwic.h"
#include "cli.h"
#include "engine.h"
#include "hf_out.h"
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
    size_t cap = 128 + (size_t)o->steps * 260, n = 0;
    char *buf = malloc(cap);
    if (!buf) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    n += (size_t)snprintf(buf, cap, "step,lr,tau,loss,kl,ce,density,tokens,fkl,apr,apr_target,ap_loss\n");
    for (int64_t s = 0; s < o->steps && n < cap; s++) {
        const sc_train_step *h = &r->history[s];
        n += (size_t)snprintf(buf + n, cap - n, "%lld,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%lld,%.9g,%.9g,%.9g,%.9g\n",
                              (long long)(s + 1), h->lr, h->tau, h->loss, h->kl, h->ce, h->density, (long long)h->tokens,
                              h->fkl, h->apr, h->apr_target, h->ap_loss);
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

static bool cli_plot_available(void) { return system("command -v gnuplot >/dev/null 2>&1") == 0; }

/* The loss per step (and KL; for cwic the achieved APR and its target on a
 * second axis) drawn by gnuplot into path, written to path.tmp and renamed
 * when gnuplot succeeded. */
static sc_status cli_plot_history(const char *path, const sc_train_result *r, int64_t steps, bool cwic, sc_err *err) {
    char tmp[4200];
    if (strchr(path, '\'') || (size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return sc_errf(err, SC_EARG, "--plot %s: the path is too long or holds a quote", path);
    FILE *g = popen("gnuplot", "w");
    if (!g) return sc_errf(err, SC_EIO, "--plot %s: cannot run gnuplot", path);
    fprintf(g, "set terminal pngcairo size 900,520 font ',10' noenhanced\nset output '%s'\nset grid\n", tmp);
    fprintf(g, "set key outside right top\nset xlabel 'optimizer step'\nset ylabel 'per token'\n$D << EOD\n");
    for (int64_t k = 0; k < steps; k++) {
        const sc_train_step *h = &r->history[k];
        fprintf(g, "%lld %.9g %.9g %.9g %.9g %.9g %.9g\n", (long long)(k + 1), h->loss, h->kl, h->fkl,
                cwic ? h->apr : h->tau, cwic ? h->apr_target : h->density, h->ce);
    }
    fprintf(g, "EOD\nset y2tics\nset ytics nomirror\nset y2label '%s'\n", cwic ? "APR" : "mask temperature tau");
    if (cwic)
        fprintf(g, "plot $D using 1:2 with lines lw 2 title 'loss (SKL + AP loss)', $D using 1:3 with lines title "
                   "'KL(student || teacher)', $D using 1:4 with lines title 'KL(teacher || student)', $D using 1:5 axes "
                   "x1y2 with lines dt 2 title 'APR', $D using 1:6 axes x1y2 with lines dt 3 lc 'gray' title 'APR target'\n");
    else
        fprintf(g, "plot $D using 1:2 with lines lw 2 title 'loss (KL + w CE)', $D using 1:3 with lines title "
                   "'KL(student || teacher)', $D using 1:5 axes x1y2 with lines dt 2 lc 'gray' title 'tau'\n");
    fprintf(g, "unset output\n");
    int rc = pclose(g);
    if (rc != 0) {
        remove(tmp);
        return sc_errf(err, SC_EIO, "--plot %s: gnuplot failed (exit status %d)", path, rc);
    }
    if (rename(tmp, path) != 0) {
        remove(tmp);
        return sc_errf(err, SC_EIO, "--plot %s: cannot rename the drawn file: %s", path, strerror(errno));
    }
    return SC_OK;
}

static sc_status cli_mkdir(const char *dir, sc_err *err) {
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && sc_is_dir(dir))) return SC_OK;
    return sc_errf(err, SC_EIO, "%s: cannot create the output directory: %s", dir, strerror(errno));
}

/* Mean of a history column over steps [a, b). */
static double mean_of(const sc_train_result *r, int64_t a, int64_t b, int col) {
    double s = 0.0;
    for (int64_t k = a; k < b; k++) {
        const sc_train_step *h = &r->history[k];
        s += col == 0 ? h->loss : col == 1 ? h->kl : col == 2 ? h->ce : col == 3 ? h->density : h->fkl;
    }
    return b > a ? s / (double)(b - a) : NAN;
}

int cmd_train(int argc, char **argv) {
    cli_inputs in = {0};
    sc_train_opts o;
    sc_train_opts_default(&o);
    const char *method = NULL, *calib = NULL, *out = NULL, *log = NULL, *plot = NULL, *init = "small",
               *train_what = "thresholds";
    int64_t stripe = 512;
    o.lr = o.beta2 = o.weight_decay = NAN; /* defaults per method, below */
    int64_t ckpt_every = 0;
    bool json = false, quiet = false, resume = false;
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        CLI_DATA_OPTS(in),
        CLI_THREADS_OPT(in.threads),
        {"seed", 's', SC_ARG_U64, &o.seed, "S", "training seed: the adapter's initialisation and the order of sequences "
         "(default 1)", 0, 0},
        {"method", 0, SC_ARG_STR, &method, "M", "claws-lora (scores |phi(u)| c_j, needs --calib), cats-lora (|phi(u)|) "
         "or cwic (learned CWIC thresholds, needs --calib) (required)", 0, 0},
        {"calib", 0, SC_ARG_STR, &calib, "FILE", "claws-lora: the calibration with CLAWS multipliers, compute --method "
         "claws; cwic: one with cwic statistics, compute --method cwic (default: none)", 0, 0},
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
        {"lr", 0, SC_ARG_FLOAT, &o.lr, "LR", "AdamW peak learning rate of adapters and (--train all) weights (default "
         "1e-5, the CLAWS paper's; cwic 5e-5, the CWIC paper's; theta's is LR x sqrt(in))", 0, 0},
        {"beta1", 0, SC_ARG_FLOAT, &o.beta1, "B1", "AdamW beta1 (default 0.9)", 0, 0},
        {"beta2", 0, SC_ARG_FLOAT, &o.beta2, "B2", "AdamW beta2 (default 0.999; cwic 0.95)", 0, 0},
        {"adam-eps", 0, SC_ARG_FLOAT, &o.adam_eps, "E", "AdamW epsilon (default 1e-8)", 0, 0},
        {"weight-decay", 0, SC_ARG_FLOAT, &o.weight_decay, "W", "AdamW weight decay of adapters and (--train all) weights "
         "(default 0; cwic 0.01; never on theta)", 0, 0},
        {"warmup", 0, SC_ARG_FLOAT, &o.warmup, "F", "fraction of steps with a linear warm-up, then cosine decay (default 0.025)", 0, 1},
        {"tau0", 0, SC_ARG_FLOAT, &o.tau0, "T", "mask temperature at the start (default 1.0)", 0, 1e6},
        {"tau1", 0, SC_ARG_FLOAT, &o.tau1, "T", "mask temperature after the anneal, held (default 0.01)", 0, 1e6},
        {"anneal", 0, SC_ARG_FLOAT, &o.anneal, "F", "fraction of steps over which tau falls linearly (default 0.6)", 0, 1},
        {"ce-weight", 0, SC_ARG_FLOAT, &o.ce_weight, "W", "weight of the cross-entropy beside KL(student || teacher) (default 0.2)", 0, 1e6},
        {"checkpoint-every", 0, SC_ARG_INT, &ckpt_every, "N", "every N steps save the trainer state to DIR.ckpt; removed on success "
         "(default: no checkpoints)", 1, 1e15},
        {"resume", 0, SC_ARG_FLAG, &resume, NULL, "continue from DIR.ckpt (same model, data and options; none yet: start at step 1)", 0, 0},
        {"apr", 0, SC_ARG_FLOAT, &o.cwic_apr, "R", "cwic: target active-parameter reduction, >= 1 (default 2)", 1, 1e6},
        {"apr-warmup", 0, SC_ARG_FLOAT, &o.cwic_apr_warmup, "F", "cwic: fraction of steps over which the APR target "
         "rises linearly from 1 (default 0.5)", 0, 1},
        {"alpha-eps", 0, SC_ARG_FLOAT, &o.cwic_alpha_eps, "A", "cwic: pseudo-derivative bandwidth eps = A std (default "
         "0.1, the paper's)", 1e-6, 1e3},
        {"ap-weight", 0, SC_ARG_FLOAT, &o.cwic_ap_weight, "L", "cwic: weight lambda of the active-parameter loss (default "
         "10, the paper's)", 0, 1e9},
        {"beta-dist", 0, SC_ARG_FLOAT, &o.cwic_beta_dist, "B", "cwic: EMA factor of the mean and std (default 0.99)", 0, 0.999999},
        {"theta-min", 0, SC_ARG_FLOAT, &o.cwic_theta_min, "T", "cwic: thresholds clamped at T after each update (default 0)", 0, 1e6},
        {"theta0", 0, SC_ARG_FLOAT, &o.cwic_theta0, "T", "cwic: initial thresholds with --init small (default 0.1)", 0, 1e6},
        {"init", 0, SC_ARG_STR, &init, "I", "cwic: small (every theta --theta0, the paper's) or fit (the training-free "
         "fit for --apr from --calib) (default small)", 0, 0},
        {"stripe", 0, SC_ARG_INT, &stripe, "S", "cwic: stripe size in rows (default 512, capped at each matrix's rows)", 1, 1 << 30},
        {"train", 0, SC_ARG_STR, &train_what, "W", "cwic: what trains: thresholds; lora (thresholds and a LoRA adapter "
         "on W_d, --rank/--alpha); or all (thresholds and every linear weight W_q W_k W_v W_o W_g W_u W_d as f32 copies, "
         "AdamW at --lr with --weight-decay; norms and embeddings frozen; 16 bytes of memory per weight, refused when "
         "that exceeds what is available; the trained model is written to DIR/model) (default thresholds, which fits "
         "any model)", 0, 0},
        {"plot", 0, SC_ARG_STR, &plot, "FILE.png", "draw the loss per step with gnuplot (default: none)", 0, 0},
        {"log", 0, SC_ARG_STR, &log, "FILE", "write the loss history as CSV: step, lr, tau, loss, kl, ce, density, tokens "
         "(default: none)", 0, 0},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print a JSON summary", 0, 0},
        {"quiet", 'q', SC_ARG_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
        SC_OPTS_END("  sparsecal train -m stories260K.bin --tokenizer tok512.bin -f stories.txt --max-docs 1000 "
                    "--method claws-lora --calib c.scal --density 0.5 -n 200 --batch 8 --lr 3e-3 -o ad\n"
                    "  sparsecal train -m model/ --tokens ids.txt -c 512 --method cats-lora -n 2 --batch 1 -t 2 -o ad\n"
                    "  sparsecal train -m stories260K.bin --tokenizer tok512.bin -f stories.txt --method cwic --calib cw.scal "
                    "--apr 2 -n 200 --batch 8 --lr 1e-3 -o cw   # -> cw/cwic_thresholds.safetensors"),
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
        "Writes a PEFT adapter: `sparsecal pack --lora DIR --calib X.scal --method claws` fuses it.\n"
        "--method cwic learns CWIC thresholds (Compute Where It Counts, Sections 3.1-3.4, Appendix B): every linear\n"
        "layer runs striped as the CWIC router does, theta trains through the JumpReLU-style pseudo-derivative\n"
        "(bandwidth --alpha-eps x std), x straight through; loss KL(student || teacher) + KL(teacher || student)\n"
        "+ lambda (min(APR - target, 0))^2, the target rising from 1 to --apr; mean and std tracked by an EMA.\n"
        "Writes DIR/cwic_thresholds.safetensors (and with --train lora the adapter): `eval`/`pack --method cwic\n"
        "--params thresholds=DIR/cwic_thresholds.safetensors` route with it. --train all also writes the trained\n"
        "model as DIR/model (Hugging Face config.json + model.safetensors, f32), which the thresholds belong to:\n"
        "`eval`/`pack -m DIR/model --method cwic --params thresholds=DIR/cwic_thresholds.safetensors`.",
        opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    sc_status st = SC_OK;
    const sc_train_method *tm = sc_train_method_find(method);
    bool cwic = tm && tm->thresholds, lora = !cwic || !strcmp(train_what, "lora");
    bool all = cwic && !strcmp(train_what, "all");
    o.cwic_weights = all;
    if (!method || !out)
        st = sc_errf(&err, SC_EARG, "no %s", !method ? "method given (--method claws-lora, cats-lora or cwic)" : "output directory (-o DIR)");
    else if (!tm)
        st = sc_errf(&err, SC_EARG, "--method must be %s, got '%s'", sc_train_method_names(), method);
    else if ((tm->multipliers || cwic) && !calib)
        st = sc_errf(&err, SC_EARG, "%s needs --calib FILE (sparsecal compute --method %s)", tm->name, tm->router);
    else if (!tm->multipliers && !cwic && calib)
        st = sc_errf(&err, SC_EARG, "%s scores |phi(u)| alone and reads no --calib", tm->name);
    else if (cwic && strcmp(init, "small") && strcmp(init, "fit"))
        st = sc_errf(&err, SC_EARG, "--init must be small or fit, got '%s'", init);
    else if (cwic && strcmp(train_what, "thresholds") && strcmp(train_what, "lora") && strcmp(train_what, "all"))
        st = sc_errf(&err, SC_EARG, "--train must be thresholds, lora or all, got '%s'", train_what);
    else if (!(o.density > 0.0 && o.density <= 1.0))
        st = sc_errf(&err, SC_EARG, "--density %g is not in (0, 1]", o.density);
    else if (o.alpha < 0.0 || !isfinite(o.alpha))
        st = sc_errf(&err, SC_EARG, "--alpha must be positive");
    else if (sc_file_exists(out) && !sc_is_dir(out)) /* refused now, not after the training */
        st = sc_errf(&err, SC_EARG, "-o %s: exists and is not a directory (the output is a directory)", out);
    else if (plot && !cli_plot_available())
        st = sc_errf(&err, SC_EARG, "--plot needs gnuplot (Debian package gnuplot-nox), which is not on PATH");
    if (st) return cli_fail("train", st, &err);
    if (isnan(o.lr)) o.lr = cwic ? 5e-5 : 1e-5;
    if (isnan(o.beta2)) o.beta2 = cwic ? 0.95 : 0.999;
    if (isnan(o.weight_decay)) o.weight_decay = cwic ? 0.01 : 0.0;
    o.method = method;
    o.progress = quiet ? NULL : stderr;
    char wpath[4096], cpath[4096], tpath[4096], ckpt[4096], mdir[4096], mcfg[4200], mst[4200];
    if (!sc_path_join(wpath, sizeof wpath, out, "adapter_model.safetensors") ||
        !sc_path_join(cpath, sizeof cpath, out, "adapter_config.json") ||
        !sc_path_join(tpath, sizeof tpath, out, "cwic_thresholds.safetensors") ||
        !sc_path_join(mdir, sizeof mdir, out, "model") || !sc_path_join(mcfg, sizeof mcfg, mdir, "config.json") ||
        !sc_path_join(mst, sizeof mst, mdir, "model.safetensors") ||
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
    const char *outs[] = {wpath, cpath, ckpt, log, plot, tpath, mcfg, mst};
    enum { NOUT = 8 };
    sc_dataset d = {0};
    sc_lora_params p = {0};
    sc_train_result res = {0};
    sc_cwic_plan *plan = NULL;
    sc_cwic_student *cs = NULL;
    float *c = NULL;
    const char *more[] = {calib, NULL};
    for (size_t i = 0; i < NOUT && !st; i++) st = cli_check_output(&in, outs[i], more, &err);
    if (!st) st = cli_load(&in, false, &err);
    if (!st && all) st = sc_cwic_weights_check(&in.model->cfg, &err); /* before the data and calibration are read */
    if (!st) st = cli_load_data(&in, &d, &err);
    if (!st && calib && !cwic) st = claws_multipliers(in.model, calib, &c, &err);
    for (size_t i = 0; i < NOUT && !st; i++) st = cli_check_output(&in, outs[i], more, &err);
    if (!st && lora) {
        o.c = c;
        if (o.rank == 0) o.rank = sc_lora_default_rank(&in.model->cfg);
        if (o.alpha == 0.0) o.alpha = (double)o.rank;
        st = sc_lora_params_init(&p, &in.model->cfg, o.rank, o.alpha, o.seed, &err);
    }
    /* DIR/model holds q/k rows permuted within each head for rotate-half RoPE (hf_out.h): a stripe must hold whole
     * heads, or the thresholds trained for its rows would route others */
    const sc_config *mc = st ? NULL : &in.model->cfg;
    if (!st && all && mc->rope == SC_ROPE_INTERLEAVED && stripe % mc->head_dim != 0 &&
        stripe < mc->n_heads * mc->head_dim)
        st = sc_errf(&err, SC_EARG, "--train all on a model with interleaved RoPE (%s) writes q/k rows permuted within "
                                    "heads: --stripe must be a multiple of head_dim %lld", in.model->format,
                     (long long)mc->head_dim);
    if (!st && cwic) { /* the calibration's statistics, and the training-free fit for --init fit */
        sc_calib *cf = NULL;
        char params[96];
        snprintf(params, sizeof params, "apr=%.17g,stripe=%lld", strcmp(init, "fit") ? 1.0 : o.cwic_apr, (long long)stripe);
        st = sc_calib_open(calib, in.model, &cf, &err);
        if (!st) st = sc_cwic_prepare(in.model, cf, params, 1.0, &plan, &err);
        sc_calib_free(cf);
        if (!st)
            st = sc_cwic_student_create(in.model, sc_train_window_cap(in.model, &d, &o), plan, !strcmp(init, "fit"), &o,
                                        lora ? &p : NULL, &cs, &err);
    }
    if (!st) st = cwic ? sc_train_cwic(in.model, &d, &o, cs, &res, &err) : sc_train_lora(in.model, &d, &o, &p, &res, &err);
    char model_id[17] = "";
    if (!st) {
        char dens[32], steps[32], lr[32], seed[32], apr[32];
        snprintf(dens, sizeof dens, "%.17g", o.density);
        snprintf(steps, sizeof steps, "%lld", (long long)o.steps);
        snprintf(lr, sizeof lr, "%.17g", o.lr);
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)o.seed);
        snprintf(apr, sizeof apr, "%.17g", o.cwic_apr);
        sc_st_meta meta[7] = {{"sparsecal.method", method}, {"sparsecal.density", dens}, {"sparsecal.steps", steps},
                              {"sparsecal.lr", lr},         {"sparsecal.seed", seed},   {"sparsecal.calib", calib ? calib : ""},
                              {"sparsecal.apr", apr}};
        if (cwic) {
            meta[1] = (sc_st_meta){"sparsecal.init", init};
            st = cli_mkdir(out, &err);
            if (!st && all) st = sc_model_save_hf(in.model, sc_cwic_student_weights(cs), mdir, meta, 7, &err);
            /* the thresholds name the model they were trained in (eval and pack check it): the trained model as
             * read back from DIR/model, or the model itself (with an adapter: the fused model, none recorded) */
            if (!st && all) {
                sc_model *trained = NULL;
                st = sc_model_load(mdir, &trained, &err);
                if (!st) st = sc_model_identity(trained, model_id, &err);
                sc_model_free(trained);
            } else if (!st && !lora) {
                st = sc_model_identity(in.model, model_id, &err);
            }
            sc_st_meta tmeta[8];
            memcpy(tmeta, meta, sizeof meta);
            tmeta[7] = (sc_st_meta){"sparsecal.model_id", model_id};
            if (!st) st = sc_cwic_student_save(cs, tpath, tmeta, model_id[0] ? 8 : 7, &err);
        }
        if (!st && lora) st = sc_lora_params_save(&p, out, in.model_path, meta, cwic ? 7 : 6, &err);
    }
    if (!st && log) st = write_log(log, &o, &res, &err);
    if (!st && plot) st = cli_plot_history(plot, &res, o.steps, cwic, &err);
    if (!st && (ckpt_every > 0 || o.resume_path)) remove(ckpt); /* the outputs are written: the checkpoint is spent */
    if (!st) {
        int64_t S = o.steps, tail = S / 10 > 0 ? S / 10 : 1;
        double tps = (double)res.tokens / (res.seconds > 0 ? res.seconds : 1e-9);
        const sc_train_step *last = &res.history[S - 1];
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "out", out);
            cJSON_AddStringToObject(j, "method", method);
            if (cwic) {
                cJSON_AddStringToObject(j, "thresholds", tpath);
                cJSON_AddStringToObject(j, "train", train_what);
                if (all) cJSON_AddStringToObject(j, "model", mdir);
                if (model_id[0]) cJSON_AddStringToObject(j, "model_id", model_id);
                cJSON_AddStringToObject(j, "init", init);
                cJSON_AddNumberToObject(j, "apr_target", o.cwic_apr);
                cJSON_AddNumberToObject(j, "stripe", (double)stripe);
                cJSON_AddNumberToObject(j, "apr_last", last->apr);
                cJSON_AddNumberToObject(j, "fkl_first", res.history[0].fkl);
                cJSON_AddNumberToObject(j, "fkl_last10pct", mean_of(&res, S - tail, S, 4));
            } else {
                cJSON_AddNumberToObject(j, "density", o.density);
                cJSON_AddNumberToObject(j, "tau_last", last->tau);
            }
            if (lora) {
                cJSON_AddNumberToObject(j, "rank", (double)p.rank);
                cJSON_AddNumberToObject(j, "alpha", p.alpha);
            }
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
            cJSON_AddNumberToObject(j, "density_last", last->density);
            cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
            cli_print_json(j);
        } else if (!quiet && cwic) {
            fprintf(stderr,
                    "wrote %s%s%s: cwic thresholds (%s), APR %.3f (target %g), %lld steps, %lld tokens in %.1f s (%.0f tok/s); "
                    "loss %.4f -> %.4f (KL %.4f -> %.4f, mean of the last 10%% of steps)\n",
                    tpath, all ? " and the trained model " : "", all ? mdir : "", train_what, last->apr, o.cwic_apr, (long long)S, (long long)res.tokens, res.seconds, tps,
                    res.history[0].loss, mean_of(&res, S - tail, S, 0), res.history[0].kl, mean_of(&res, S - tail, S, 1));
        } else if (!quiet) {
            fprintf(stderr,
                    "wrote %s: %s at density %g, rank %lld, %lld steps, %lld tokens in %.1f s (%.0f tok/s); "
                    "loss %.4f -> %.4f (KL %.4f -> %.4f, mean of the last 10%% of steps)\n",
                    out, method, o.density, (long long)p.rank, (long long)S, (long long)res.tokens, res.seconds, tps,
                    res.history[0].loss, mean_of(&res, S - tail, S, 0), res.history[0].kl, mean_of(&res, S - tail, S, 1));
        }
    }
    sc_train_result_free(&res);
    sc_cwic_student_free(cs);
    sc_cwic_plan_free(plan);
    sc_lora_params_free(&p);
    free(c);
    sc_dataset_free(&d);
    cli_inputs_free(&in);
    return st ? cli_fail("train", st, &err) : 0;
}
