/* cmd_export.c - `sparsecal export`: routing data as safetensors and TEAL's
 * per-layer files (convert/export.h, docs/EXPORT.md). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cett.h"
#include "cwic.h"
#include "export.h"
#include "filekind.h"
#include "lc_util.h"
#include "scal.h"
#include "score.h"

#define EXPORT_DEFAULT_DENSITY 0.5

int cmd_export(int argc, char **argv) {
    const char *model = NULL, *calib = NULL, *out = NULL, *teal_dir = NULL, *params = NULL;
    double density = NAN;
    bool json = false;
    const sc_opt opts[] = {
        {"model|artifact", 'm', SC_ARG_STR, &model, "MODEL",
         "with --calib: the model it was computed on (CETT and CWIC need its weights); alone: a packed artifact (.spk) "
         "whose stored routing data is exported (one of -m and --calib is required)", 0, 0},
        {"calib", 0, SC_ARG_STR, &calib, "FILE", "calibration file (.scal) whose routing data is exported (default: "
            "none)", 0, 0},
        {"density", 0, SC_ARG_FLOAT, &density, "D",
         "with --calib: the density, in (0, 1], CETT's thresholds are fitted to keep and CWIC's APR (1 / D) is set "
         "for, as pack --density (default 0.5)", 0, 0},
        {"params", 0, SC_ARG_STR, &params, "K=V,..",
         "with --calib: method parameters, as pack: cett target=; clada lambda=,gamma=,qs=,qh=; cwic apr=,stripe=,"
         "dist=,stats= (default: each method's)", 0, 0},
        {"out", 'o', SC_ARG_STR, &out, "FILE", "the safetensors file to write, names in docs/EXPORT.md (default: "
            "none; this or --teal-dir is required)", 0, 0},
        {"teal-dir", 0, SC_ARG_STR, &teal_dir, "DIR",
         "with --calib: also write TEAL's files into DIR (histograms/layer-L/{self_attn,mlp}/histograms.pt, "
         "lookup/layer_L.csv), as the TEAL paper's code reads them (default: none)", 0, 0},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print a JSON summary", 0, 0},
        SC_OPTS_END("  sparsecal export --calib c.scal -m stories260K.bin -o routing.safetensors --teal-dir teal/\n"
"  sparsecal export -m m.spk -o routing.safetensors --json"),
    };
    int r = sc_parse_args(
        "export",
        "Write the routing data of a calibration or an artifact for other tools: CLAWS c_j, CATS and TEAL\n"
        "thresholds, TEAL's allocation curve, CETT thresholds, CWIC theta/mean/std and LaRoSA rotations as one\n"
        "safetensors file (f32, per-neuron arrays in the model's neuron order; docs/EXPORT.md), and TEAL's\n"
        "per-layer histogram and lookup files.\n"
        "  sparsecal export --calib c.scal -m model.bin -o routing.safetensors [--teal-dir teal/]\n"
        "  sparsecal export -m m.spk -o routing.safetensors\n"
        "  sparsecal export --calib c.scal --teal-dir teal/",
        opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    sc_status st = SC_OK;
    if (!out && !teal_dir)
        st = sc_errf(&err, SC_EARG, "nothing to write: give -o FILE.safetensors and/or --teal-dir DIR");
    else if (!calib && !model) st = sc_errf(&err, SC_EARG, "give --calib FILE (with -m its model) or -m ARTIFACT.spk");
    else if (!calib && teal_dir) st = sc_errf(&err, SC_EARG, "--teal-dir needs --calib: an artifact keeps TEAL's "
                                                             "thresholds, not the histograms TEAL's files hold");
    else if (calib && out && !model) st = sc_errf(&err, SC_EARG, "--calib with -o needs -m MODEL: the model the "
                                                                 "calibration was computed on");
    else if (!calib && (!isnan(density) || params))
        st = sc_errf(&err, SC_EARG, "--density and --params are for --calib: an artifact's routing data is exported as "
                                    "packed");
    if (!st) st = sc_density_check(density, "--density", &err);
    if (!st) st = sc_params_check(params, SC_CETT_ROUTING_KEYS "," SC_CWIC_EVAL_KEYS, "--params", &err);
    if (st) return cli_fail("export", st, &err);
    if (!calib) st = sc_file_expect(model, SC_FILE_BIT(SC_FILE_SPK), "a packed artifact (without --calib)", &err);
    const char *more[] = {model, calib, NULL};
    if (!st && out) st = cli_check_output(NULL, out, more, &err);
    sc_export_result res = {0};
    int64_t teal_files = 0;
    sc_model *m = NULL;
    sc_calib *c = NULL;
    if (!st && !calib) {
        st = sc_export_artifact(model, out, &res, &err);
    } else if (!st) {
        if (model) st = sc_model_load(model, &m, &err);
        if (!st) st = sc_calib_open(calib, m, &c, &err);
        if (!st && out) {
            sc_export_opts o = {isnan(density) ? EXPORT_DEFAULT_DENSITY : density, params, isnan(density)};
            st = sc_export_calib(m, c, &o, out, &res, &err);
        }
        if (!st && teal_dir) st = sc_export_teal(c, teal_dir, &teal_files, &err);
    }
    if (!st) {
        if (json) {
            cJSON *j = cJSON_CreateObject();
            cJSON_AddStringToObject(j, "source", calib ? calib : model);
            if (out) cJSON_AddStringToObject(j, "out", out);
            cJSON_AddNumberToObject(j, "tensors", (double)res.tensors);
            cJSON_AddNumberToObject(j, "bytes", (double)res.bytes);
            cJSON_AddNumberToObject(j, "rotations", (double)res.layers_rotated);
            if (calib && out) cJSON_AddNumberToObject(j, "density", isnan(density) ? EXPORT_DEFAULT_DENSITY : density);
            if (teal_dir) {
                cJSON_AddStringToObject(j, "teal_dir", teal_dir);
                cJSON_AddNumberToObject(j, "teal_files", (double)teal_files);
            }
            cli_print_json(j);
        } else {
            if (out)
                fprintf(stderr, "wrote %s: %lld tensors (%.1f KB, %lld rotations) from %s\n", out,
                        (long long)res.tensors, (double)res.bytes / 1e3, (long long)res.layers_rotated,
                        calib ? calib : model);
            if (teal_dir) fprintf(stderr, "wrote %lld TEAL files into %s\n", (long long)teal_files, teal_dir);
        }
    }
    sc_calib_free(c);
    sc_model_free(m);
    return st ? cli_fail("export", st, &err) : 0;
}
