/* cmd_diag.c - `sparsecal diag`: the rank-leverage diagnostics of the CLAWS paper
 * (Tables 5 and 7, Appendix G) as Markdown tables or one JSON object. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "score.h"
#include "cli.h"
#include "diag.h"
#include "scal.h"

/* a table cell: '|' escaped */
static const char *cell(const char *s, char *buf, size_t cap) {
    size_t n = 0;
    for (; *s && n + 3 < cap; s++) {
        if (*s == '|') buf[n++] = '\\';
        buf[n++] = *s;
    }
    buf[n] = '\0';
    return buf;
}

static void print_markdown(const sc_diag_result *r) {
    char b1[96], b2[96];
    printf("Spread of base scores and static modifiers (%lld tokens x %lld layers; c_rot from %lld tokens)\n\n",
           (long long)r->stat_tokens, (long long)r->layers, (long long)r->crot_tokens);
    printf("| quantity | std | p50 | p95 | p95/p50 |\n|---|---|---|---|---|\n");
    for (int q = 0; q < SC_DIAG_NQ; q++) {
        const sc_diag_spread *s = &r->spread[q];
        printf("| %s | %.4g | %.4g | %.4g | %.4f |\n", cell(s->name, b1, sizeof b1), s->std, s->p50, s->p95, s->ratio);
    }
    printf("\nRank movement from the static modifier (ranks normalised to [0, 1] per layer and token; density %.2f)\n\n",
           r->density);
    printf("| score family | base | modifier | leverage lambda | rank std(delta) | rank p95(\\|delta\\|) | selected-set change |\n"
           "|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < 2; k++) {
        const sc_diag_rank *x = &r->rank[k];
        printf("| %s | %s | %s | %.3f | %.4f | %.4f | %.2f%% |\n", x->family, cell(x->base, b1, sizeof b1), cell(x->modifier, b2, sizeof b2), x->leverage,
               x->rank_std, x->rank_p95, 100.0 * x->set_change);
    }
}

static void print_json(const sc_diag_result *r) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "stat_tokens", (double)r->stat_tokens);
    cJSON_AddNumberToObject(j, "crot_tokens", (double)r->crot_tokens);
    cJSON_AddNumberToObject(j, "layers", (double)r->layers);
    cJSON_AddNumberToObject(j, "density", r->density);
    cJSON *sp = cJSON_AddArrayToObject(j, "spread");
    for (int q = 0; q < SC_DIAG_NQ; q++) {
        const sc_diag_spread *s = &r->spread[q];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "quantity", s->name);
        cJSON_AddNumberToObject(o, "std", s->std);
        cJSON_AddNumberToObject(o, "p50", s->p50);
        cJSON_AddNumberToObject(o, "p95", s->p95);
        cJSON_AddNumberToObject(o, "p95_over_p50", isfinite(s->ratio) ? s->ratio : -1);
        cJSON_AddNumberToObject(o, "values", (double)s->n);
        cJSON_AddItemToArray(sp, o);
    }
    cJSON *rk = cJSON_AddArrayToObject(j, "rank_movement");
    for (int k = 0; k < 2; k++) {
        const sc_diag_rank *x = &r->rank[k];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "family", x->family);
        cJSON_AddStringToObject(o, "base", x->base);
        cJSON_AddStringToObject(o, "modifier", x->modifier);
        cJSON_AddNumberToObject(o, "leverage", isfinite(x->leverage) ? x->leverage : -1);
        cJSON_AddNumberToObject(o, "rank_std", x->rank_std);
        cJSON_AddNumberToObject(o, "rank_p95", x->rank_p95);
        cJSON_AddNumberToObject(o, "selected_set_change", x->set_change);
        cJSON_AddItemToArray(rk, o);
    }
    cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
    cli_print_json(j);
}

int cmd_diag(int argc, char **argv) {
    cli_inputs in = {0};
    const char *calib = NULL;
    int64_t ctx = 0, crot = 0, max_tokens = 2048, dump_tokens = 64;
    const char *dump = NULL;
    double density = 0.5;
    bool json = false, quiet = false;
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        CLI_DATA_OPTS(in),
        CLI_THREADS_OPT(in.threads),
        {"calib", 0, SC_ARG_STR, &calib, "FILE", "calibration file with claws and larosa statistics (required)", 0, 0},
        CLI_CTX_OPT(ctx, "tokens per sequence, longer ones are cut (default: the model's context)"),
        {"crot-seqs", 0, SC_ARG_INT, &crot, "N", "sequences used for c_rot = E|Q^T dL/dx| (default: half)", 0, 1e15},
        {"max-tokens", 0, SC_ARG_INT, &max_tokens, "N", "tokens of the later sequences for the statistics (default 2048)", 1, 1e9},
        {"density", 0, SC_ARG_FLOAT, &density, "D", "density of the selected-set change, in (0, 1] (default 0.5)", 0, 0},
        {"dump-ranks", 0, SC_ARG_STR, &dump, "FILE", "write per-coordinate ranks before/after the modifier as CSV, "
            "Figure 3 (default: no dump)", 0, 0},
        {"dump-tokens", 0, SC_ARG_INT, &dump_tokens, "N", "tokens per layer and family in the dump (default 64)", 1, 1e9},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object instead of Markdown", 0, 0},
        {"quiet", 'q', SC_ARG_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
        SC_OPTS_END("  sparsecal diag -m stories260K.bin --tokenizer tok512.bin -f stories.txt --max-docs 200 "
            "--calib c.scal\n"
"  sparsecal diag -m stories260K.bin --tokenizer tok512.bin -f stories.txt --calib c.scal --crot-seqs 50 "
    "--dump-ranks ranks.csv --json"),
    };
    int r = sc_parse_args("diag",
                          "Rank-leverage diagnostics (the CLAWS paper, Tables 5 and 7): spread of the base scores |Q^T x| and\n"
                          "|phi(W_g x)| and of their static modifiers c_rot and c_j, the leverage lambda, and how far the\n"
                          "modifier moves ranks and the top-K set. c_rot is estimated on the first sequences of the text\n"
                          "and the statistics on the following ones.",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    {
        sc_err derr = {{0}};
        if (sc_density_check(density, "--density", &derr)) return cli_fail("diag", SC_EARG, &derr);
    }
    if (!calib) {
        fprintf(stderr, "sparsecal diag: no calibration file (--calib FILE with claws and larosa)\n");
        return 2;
    }
    sc_err err = {{0}};
    sc_dataset d = {0};
    sc_calib *c = NULL;
    sc_diag_result res;
    const char *more[] = {calib, NULL};
    sc_status st = cli_check_output(&in, dump, more, &err);
    if (!st) st = cli_load(&in, false, &err);
    if (!st) st = sc_calib_open(calib, in.model, &c, &err);
    if (!st) st = cli_load_data(&in, &d, &err);
    sc_atomic_file af;
    bool dumping = false;
    if (!st && dump) {
        st = sc_atomic_open(&af, dump, &err);
        dumping = !st;
    }
    if (!st) {
        sc_diag_opts o = {c, ctx ? ctx : in.model->cfg.max_seq_len, crot, max_tokens, density, quiet ? NULL : stderr,
                          dumping ? (FILE *)af.fp : NULL, dump_tokens};
        st = sc_diag_run(in.model, &d, &o, &res, &err);
    }
    if (dumping) {
        if (!st)
            st = sc_atomic_commit(&af, &err);
        else
            sc_atomic_abort(&af);
    }
    if (!st) {
        if (json)
            print_json(&res);
        else
            print_markdown(&res);
    }
    sc_calib_free(c);
    sc_dataset_free(&d);
    cli_inputs_free(&in);
    return st ? cli_fail("diag", st, &err) : 0;
}
