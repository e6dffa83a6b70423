/* cmd_pack.c - `sparsecal pack`. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cett.h"
#include "lc_util.h"
#include "lora.h"
#include "params.h"
#include "pack.h"
#include "route_method.h"
#include "scal.h"
#include "score.h"

int cmd_pack(int argc, char **argv) {
    cli_inputs in = {0};
    const char *calib = NULL, *layout = "kmi4", *method = NULL, *out = NULL, *lora = NULL, *params = NULL;
    double density = NAN; /* not given */
    int64_t compress = 0, column_min_rows = 0; /* 0: not given (SC_PACK_COLUMN_MIN_ROWS) */
    bool json = false, quiet = false, permute = false;
    /* the routers an artifact runs (the registry's), and the density they pack with by default */
    char names[512], method_help[768], density_help[512], column_help[320];
    snprintf(column_help, sizeof column_help, "kmi4-in: attention and gate matrices with fewer output rows stay kmi4r "
             "rows, read whole: a live input channel's column is N/2 bytes, and shorter ones cost more read one by one "
             "than the whole matrix streamed (default %d; 1 stores every one column-sparse)", SC_PACK_COLUMN_MIN_ROWS);
    sc_route_method_names(names, sizeof names, true);
    snprintf(method_help, sizeof method_help, "the artifact's default router: %s (larosa folds the calibration's "
             "rotations into the weights)", names);
    snprintf(density_help, sizeof density_help, "the router's default density, in (0, 1]: the fraction of MLP neurons "
             "it keeps (default with --method M: %g, stated on stderr and in the manifest; without: 1). CETT's stored "
             "thresholds are fitted to keep it on the calibration sample unless --params target= is given",
             srt_method_get(SRT_METHOD_CATS)->default_density);
    const sc_opt opts[] = {
        CLI_MODEL_OPTS(in),
        CLI_THREADS_OPT(in.threads),
        {"calib", 0, SC_ARG_STR, &calib, "FILE", "calibration file whose routing parameters are stored (default: "
            "none, a dense artifact)", 0, 0},
        {"layout", 0, SC_ARG_STR, &layout, "L", "f32, q8_0, kmi8 (q8_0 with the row-sparse MLP's down projection "
            "neuron-major), q4_0, kmi4 (row-sparse MLP, default), kmi4-in (kmi4 with column-sparse attention and gate, for "
            "teal-cats), zigzag (column-sparse)", 0, 0},
        {"column-min-rows", 0, SC_ARG_INT, &column_min_rows, "N", column_help, 1, 1 << 30},
        {"method", 0, SC_ARG_STR, &method, "M", method_help, 0, 0},
        {"params", 0, SC_ARG_STR, &params, "K=V,..", "method parameters for the stored routing data: larosa in=,h=; "
            "cett target=; clada lambda=,gamma=,qs=,qh=; cwic apr=,stripe=,dist=,stats= (default: each "
                "method's)", 0, 0},
        {"density", 0, SC_ARG_FLOAT, &density, "D", density_help, 0, 0},
        {"lora", 0, SC_ARG_STR, &lora, "ADAPTER", "fuse a PEFT LoRA adapter (dir or .safetensors) into the weights "
            "first (default: none)", 0, 0},
        {"permute", 0, SC_ARG_FLAG, &permute, NULL, "reorder FFN neurons so that co-live neurons are adjacent (needs --calib with coact, else cats/claws activity)", 0, 0},
        {"compress", 0, SC_ARG_INT, &compress, "LEVEL", "zstd level per section; 0 = raw, mmap-able (default)", 0, 19},
        {"out", 'o', SC_ARG_STR, &out, "FILE", "artifact to write (.spk) (required)", 0, 0},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print a JSON summary", 0, 0},
        {"quiet", 'q', SC_ARG_FLAG, &quiet, NULL, "no progress on stderr", 0, 0},
        SC_OPTS_END("  sparsecal pack -m stories260K.bin --tokenizer tok512.bin --calib c.scal --layout kmi4 "
            "--method claws --density 0.5 -o m.spk\n"
"  sparsecal pack -m model.gguf --layout q8_0 -o dense.spk"),
    };
    int r = sc_parse_args("pack",
                          "Quantise a model into a packed artifact for the runtime: weights in the layout's format,\n"
                          "routing parameters from a calibration file, the vocabulary, and a manifest.",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    if (!out) {
        fprintf(stderr, "sparsecal pack: no output file (-o FILE)\n");
        return 2;
    }
    if (column_min_rows && strcmp(layout, "kmi4-in") != 0) {
        fprintf(stderr, "sparsecal pack: --column-min-rows applies to --layout kmi4-in only, not %s\n", layout);
        return 2;
    }
    /* the default router must be one the runtime has */
    const sc_route_method *rm = method ? sc_route_method_find(method) : NULL;
    const srt_method_info *rt = rm ? srt_method_get(rm->runtime) : NULL;
    if (method && !rt) {
        fprintf(stderr, "sparsecal pack: --method must be one of %s, got '%s'\n", names, method);
        return 2;
    }
    {
        sc_err derr = {{0}};
        if (sc_density_check(density, "--density", &derr)) return cli_fail("pack", SC_EARG, &derr);
    }
    bool density_default = isnan(density);
    if (density_default) {
        density = rt ? rt->default_density : 1.0;
        if (rt && rt->density != SRT_DENSITY_NONE)
            fprintf(stderr, "note: no --density: packing %s with the default density %g (routing.density_source "
                            "\"default\" in the manifest)\n", method, density);
    }
    sc_err err = {{0}};
    if (rm && (rm->flags & SC_RM_TARGET) && !density_default) {
        sc_cett_goal g; /* the default router's density and a CETT target are two answers to one question */
        if (sc_cett_goal_parse(params, density, method, &g, &err)) return cli_fail("pack", SC_EARG, &err);
    }
    if (sc_params_check(params, SC_LAROSA_PACK_KEYS "," SC_CETT_ROUTING_KEYS "," SC_CWIC_EVAL_KEYS, "--params", &err))
        return cli_fail("pack", SC_EARG, &err);
    sc_calib *c = NULL;
    sc_pack_result res;
    const char *more[] = {calib, lora, NULL};
    if (!calib) more[0] = lora, more[1] = NULL;
    sc_status st = cli_check_output(&in, out, more, &err);
    if (!st) st = cli_load(&in, false, &err);
    if (!st && calib) st = sc_calib_open(calib, in.model, &c, &err); /* statistics of the base model, read as used */
    if (!st && lora) {
        sc_lora_result lr;
        st = sc_lora_fuse(in.model, lora, &lr, &err);
        if (!st && !quiet)
            fprintf(stderr, "fused %d LoRA layers (r %d, scale %g) from %s\n", lr.fused, lr.rank, lr.scale, lora);
    }
    /* the default router must find its data in the artifact: the calibration must hold what it reads */
    /* (or, for cwic, a thresholds file holding its statistics: --params thresholds=FILE) */
    if (!st && rm && !sc_route_method_from_file(rm, params) && !sc_route_method_calibrated(rm, c)) {
        char need[128];
        st = sc_errf(&err, SC_EARG, "--method %s needs a calibration file with %s statistics (--calib)", method,
                     sc_route_method_needs(rm, need, sizeof need));
    }
    double lin = SRT_LAROSA_IN, lh = SRT_LAROSA_H;
    const sc_param lspec[] = {{"in", SC_PARAM_NUM, 0, 10, NULL, &lin, 0, NULL},
                              {"h", SC_PARAM_NUM, 0, 10, NULL, &lh, 0, NULL}};
    if (!st) st = sc_params_read(params, lspec, 2, "larosa", &err);
    if (!st) {
        sc_pack_opts o = {layout, c, method, density, (int)compress, permute, quiet ? NULL : stderr, lin, lh, params,
                          density_default, column_min_rows};
        st = sc_pack(in.model, in.tok, &o, out, &res, &err);
    }
    if (!st) {
        double mbps = (double)res.f32_bytes_in / 1e6 / (res.seconds > 0 ? res.seconds : 1e-9);
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "out", out);
            cJSON_AddStringToObject(j, "layout", layout);
            cJSON_AddNumberToObject(j, "f32_bytes_in", (double)res.f32_bytes_in);
            cJSON_AddNumberToObject(j, "bytes_out", (double)res.bytes_out);
            cJSON_AddNumberToObject(j, "seconds", res.seconds);
            cJSON_AddNumberToObject(j, "mb_per_second", mbps);
            cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
            if (!strcmp(layout, "kmi4-in")) cJSON_AddStringToObject(j, "rows_kept", res.rows_kept);
            cli_print_json(j);
        } else if (!quiet) {
            const long long mr = column_min_rows ? column_min_rows : SC_PACK_COLUMN_MIN_ROWS;
            if (res.rows_kept[0])
                fprintf(stderr, "note: %s stay kmi4r rows, read whole: fewer than %lld output rows, so a live input "
                        "channel's column is under %lld bytes (--column-min-rows)\n", res.rows_kept, mr, mr / 2);
            fprintf(stderr, "wrote %s (%s): %.1f MB from %.1f MB of f32 weights in %.2f s (%.0f MB/s)\n", out, layout,
                    (double)res.bytes_out / 1e6, (double)res.f32_bytes_in / 1e6, res.seconds, mbps);
        }
    }
    sc_calib_free(c);
    cli_inputs_free(&in);
    return st ? cli_fail("pack", st, &err) : 0;
}
