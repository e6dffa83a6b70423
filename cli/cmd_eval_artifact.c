/* cmd_eval_artifact.c - `sparsecal eval -m X.spk`: perplexity of a packed
 * artifact as the runtime executes it. The scoring is sc_score_artifact, the
 * loop `run --score` runs, on the router the artifact stores, so both print
 * the same numbers for the same ids by construction. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_artifact.h"
#include "scal.h"
#include "score.h"

sc_status cli_eval_artifact(cli_inputs *in, const cli_eval_request *rq, sc_err *err) {
    sc_calib *c = NULL;
    sc_dataset d = {0};
    cli_artifact art = {0};
    sc_score_result res = {0};
    sc_artifact_router rt;
    sc_status st = SC_OK;
    /* a calibration given with the artifact must be of the model it was packed from; the routing data
     * the artifact stores is what runs (pack fitted it from that calibration) */
    if (rq->calib && !(st = sc_calib_open(rq->calib, in->model, &c, err)) && !rq->quiet)
        fprintf(stderr, "note: %s matches %s's source model; the routing is the artifact's own (fitted by pack)\n",
                rq->calib, in->model_path);
    if (!st) st = cli_load_data(in, &d, err);
    if (!st) st = cli_artifact_open(in->model_path, SRT_ISA_AUTO, 0, rq->kv, &art, err);
    if (!st) st = sc_artifact_set_router(art.m, in->model_path, rq->method, rq->density, stderr, &rt, err);
    if (!st && rt.method_default)
        fprintf(stderr, "eval: %s: the artifact's router: %s at density %g\n", in->model_path, rt.method, rt.density);
    if (!st) st = sc_score_artifact(art.m, in->model_path, &d, rq->ctx, rq->quiet ? NULL : stderr, &res, err);
    if (!st && rq->json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", in->model_path);
        cJSON_AddStringToObject(j, "evaluated_by", "runtime");
        cJSON_AddStringToObject(j, "kv_cache_type", cli_kv_name(srt_model_kv_type(art.m)));
        sc_score_json(j, art.m, &rt, &res);
        cJSON_AddNumberToObject(j, "peak_rss_bytes", (double)cli_peak_rss_bytes());
        cli_print_json(j);
    } else if (!st) {
        sc_score_print(stdout, in->model_path, &rt, &res);
    }
    sc_score_result_free(&res);
    cli_artifact_close(&art);
    sc_dataset_free(&d);
    sc_calib_free(c);
    return st;
}
