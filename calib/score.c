/* score.c - scoring an artifact with the runtime decoder (see score.h). */
#include "score.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"    /* the windows */
#include "forward.h" /* sc_logsumexp */

sc_status sc_density_check(double density, const char *opt, sc_err *err) {
    if (isnan(density) || (density > 0 && density <= 1)) return SC_OK;
    return sc_errf(err, SC_EARG, "%s %g: a density is the fraction of MLP neurons kept, in (0, 1]", opt, density);
}

sc_status sc_artifact_set_router(srt_model *m, const char *path, const char *method, double density, FILE *note_to,
                                 sc_artifact_router *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    out->method_default = !method;
    out->density_default = isnan(density);
    if (!method) {
        method = srt_model_default_method(m);
        if (srt_model_method_missing(m, method)) {
            if (note_to)
                fprintf(note_to, "note: %s: the artifact's router '%s' does not run here (%s); running dense\n", path,
                        method, srt_model_method_missing(m, method));
            method = "dense";
        }
    }
    SC_TRY(sc_density_check(density, "--density", err));
    if (isnan(density)) {
        double d = srt_model_default_density(m);
        density = d > 0 && d <= 1 ? d : 1.0; /* the manifest's; an artifact without one is dense */
    }
    const srt_method_info *mi = srt_method_find(method);
    if (mi && mi->density == SRT_DENSITY_NONE) density = 1.0;
    const char *missing = srt_model_method_missing(m, method);
    if (missing) return sc_errf(err, SC_EARG, "%s: cannot route with %s: %s", path, method, missing);
    double run = density; /* what the runtime is set with */
    srt_density_use use = srt_method_density(mi, srt_model_data(m));
    if (mi->density == SRT_DENSITY_FITTED) {
        /* the stored thresholds keep one density (or meet a CETT target, or were imported): without a calibrated
         * table (older CETT artifacts, CWIC) that one runs, or none; with it, any density. CWIC's density is
         * 1 / routing.cwic.apr, which need not read back as the --density it was packed with to the last bit. */
        double fitted = srt_model_fitted_density(m, mi->id);
        bool cwic = mi->id == SRT_METHOD_CWIC;
        bool same = cwic ? fabs(fitted - density) <= 1e-12 * density : fitted == density;
        if (use != SRT_DENSITY_TABLE && !out->density_default && !same)
            return isnan(fitted)
                       ? (cwic ? sc_errf(err, SC_EARG, "%s: cwic runs the stripe thresholds pack imported "
                                                       "(--params thresholds=), fitted to no density: drop --density",
                                         path)
                               : sc_errf(err, SC_EARG, "%s: %s runs the CETT thresholds pack fitted to a CETT target "
                                                       "(routing.cett.target), not a density: drop --density, or "
                                                       "repack with --density %g and no --params target=",
                                         path, method, density))
                       : sc_errf(err, SC_EARG, "%s: %s runs the %s thresholds pack fitted to keep density %g; "
                                               "--density %g needs a repack with --density %g", path, method,
                                 cwic ? "CWIC stripe" : "CETT", fitted, density, density);
        if (out->density_default) {
            density = isnan(fitted) ? 1.0 : fitted;
            run = NAN; /* the stored thresholds */
        }
    }
    srt_status ks = srt_model_set_method_id(m, mi->id, run);
    if (ks != SRT_OK)
        return sc_errf(err, SC_EARG, "%s: cannot route with %s at density %g (%s)", path, method, density,
                       srt_status_str(ks));
    out->info = mi;
    snprintf(out->method, sizeof out->method, "%s", srt_model_method(m));
    out->density = density;
    out->run_density = run;
    return SC_OK;
}

bool sc_artifact_fixed_live(const sc_artifact_router *r) {
    return r->info->density == SRT_DENSITY_NONE || r->info->density == SRT_DENSITY_TOPK; /* TABLE/FITTED vary */
}

void sc_score_result_free(sc_score_result *r) {
    free(r->layer_density);
    r->layer_density = NULL;
}

sc_status sc_score_artifact(srt_model *m, const char *path, const sc_dataset *d, int64_t ctx, FILE *progress,
                            sc_score_result *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    const srt_model_config *c = srt_model_get_config(m);
    const int64_t L = c->n_layers, V = c->vocab_size;
    if (ctx <= 0 || ctx > srt_model_max_ctx(m)) ctx = srt_model_max_ctx(m);
    if (ctx < 2) return sc_errf(err, SC_EARG, "%s: a context of %lld positions scores nothing", path, (long long)ctx);
    int64_t win;
    SC_TRY(sc_eval_window(d, ctx, "score", &win, err));
    for (size_t i = 0; i < d->n_seqs; i++)
        for (size_t t = 0; t < d->seqs[i].n; t++)
            if (d->seqs[i].ids[t] < 0 || d->seqs[i].ids[t] >= V)
                return sc_errf(err, SC_EARG, "score: sequence %zu: id %d is outside the vocabulary of %lld", i,
                               d->seqs[i].ids[t], (long long)V);
    if (srt_model_reserve(m, win) != SRT_OK)
        return sc_errf(err, SC_ENOMEM, "%s: out of memory for a key/value cache of %lld positions", path, (long long)win);
    double *live = calloc((size_t)L, sizeof *live);
    if (!live) return sc_errf(err, SC_ENOMEM, "score: out of memory");
    out->layer_density = live;
    out->n_layers = L;
    out->density_min = INFINITY;
    out->density_max = -INFINITY;
    /* a router choosing from the prompt (griffin): the first half of each window is the prompt, run dense, and
     * only the predictions from its last position on are scored (eval's protocol for it, calib/sparse_eval.c) */
    const bool from_prompt = srt_model_from_prompt(m);
    int64_t n_routed = 0; /* steps the densities average over: all, or those after a prompt */
    double t0 = sc_now();
    sc_status st = SC_OK;
    sc_progress pr;
    sc_progress_start(&pr, progress, "score", "sequences", (int64_t)d->n_seqs);
    for (size_t i = 0; i < d->n_seqs && !st; i++) {
        const sc_tokens *s = &d->seqs[i];
        if (s->n < 2) continue;
        out->n_seqs++;
        for (int64_t start = -1, n; !st && sc_window_next((int64_t)s->n, win, &start, &n);) {
            /* the last id of a window is only predicted: it runs as the next window's first */
            int64_t prompt = from_prompt ? (n / 2 > 1 ? n / 2 : 1) : 0;
            for (int64_t t = 0; t + 1 < n; t++) {
                const float *logits;
                srt_status ks = srt_model_step(m, s->ids[start + t], t, &logits);
                if (ks != SRT_OK) {
                    st = ks == SRT_ENONFINITE
                             ? sc_errf(err, SC_EFORMAT, "%s: sequence %zu, position %lld: %s", path, i,
                                       (long long)(start + t), srt_model_fault(m))
                             : sc_errf(err, ks == SRT_ENOMEM ? SC_ENOMEM : SC_EFORMAT,
                                       "%s: sequence %zu: decode step failed at position %lld (%s)", path, i,
                                       (long long)(start + t), srt_status_str(ks));
                    break;
                }
                out->n_tokens++;
                if (t + 1 == prompt && (ks = srt_model_end_prompt(m)) != SRT_OK) {
                    st = sc_errf(err, SC_ENOMEM, "%s: sequence %zu: fixing the prompt's live sets failed (%s)", path, i,
                                 srt_status_str(ks));
                    break;
                }
                if (t + 1 < prompt) continue;
                out->nll_sum += sc_logsumexp(logits, V) - (double)logits[s->ids[start + t + 1]];
                out->n_scored++;
                if (t < prompt) continue; /* the prompt's last position ran dense */
                n_routed++;
                for (int64_t l = 0; l < L; l++) {
                    double dl = srt_model_last_density(m, l);
                    live[l] += dl;
                    out->density_min = fmin(out->density_min, dl);
                    out->density_max = fmax(out->density_max, dl);
                }
            }
            out->n_windows++;
        }
        sc_eval_progress(&pr, (int64_t)i + 1, (double)out->n_tokens, out->nll_sum, out->n_scored);
    }
    sc_progress_end(&pr);
    out->seconds = sc_now() - t0;
    if (!st && out->n_scored == 0) st = sc_errf(err, SC_EARG, "score: no position to score");
    if (st) {
        sc_score_result_free(out);
        return st;
    }
    double sum = 0;
    for (int64_t l = 0; l < L; l++) {
        sum += live[l];
        live[l] /= (double)n_routed;
    }
    out->density_mean = sum / ((double)n_routed * (double)L);
    return SC_OK;
}

void sc_score_json(cJSON *j, const srt_model *m, const sc_artifact_router *r, const sc_score_result *s) {
    const srt_model_config *c = srt_model_get_config(m);
    double nll = s->nll_sum / (double)s->n_scored;
    cJSON_AddStringToObject(j, "method", r->method);
    cJSON_AddStringToObject(j, "method_source", r->method_default ? "artifact" : "option");
    cJSON_AddNumberToObject(j, "density", r->density);
    cJSON_AddStringToObject(j, "density_source", r->density_default ? "artifact" : "option");
    cJSON_AddNumberToObject(j, "ppl", exp(nll));
    cJSON_AddNumberToObject(j, "nll_mean", nll);
    cJSON_AddNumberToObject(j, "n_tokens", (double)s->n_scored);
    cJSON_AddNumberToObject(j, "n_sequences", (double)s->n_seqs);
    cJSON_AddNumberToObject(j, "n_windows", (double)s->n_windows);
    cJSON_AddNumberToObject(j, "density_mean", s->density_mean);
    cJSON_AddNumberToObject(j, "density_min", s->density_min);
    cJSON_AddNumberToObject(j, "density_max", s->density_max);
    cJSON *pl = cJSON_AddArrayToObject(j, "density_per_layer");
    for (int64_t l = 0; l < s->n_layers; l++) cJSON_AddItemToArray(pl, cJSON_CreateNumber(s->layer_density[l]));
    cJSON_AddNumberToObject(j, "ffn_dim", (double)c->ffn_dim);
    bool rotated = r->info->needs & SRT_DATA_ROTATIONS; /* larosa: live inputs and h */
    if (sc_artifact_fixed_live(r) && !rotated)
        cJSON_AddNumberToObject(j, "live_neurons", (double)srt_model_live_count(m));
    int64_t k_in, k_h;
    srt_model_larosa_counts(m, &k_in, &k_h);
    if (rotated) {
        cJSON_AddNumberToObject(j, "live_neurons", (double)k_h);
        cJSON_AddNumberToObject(j, "live_input_channels", (double)k_in);
        cJSON_AddNumberToObject(j, "dim", (double)c->dim);
    }
    cJSON_AddNumberToObject(j, "rotated_inputs", (double)srt_model_rotated_inputs(m));
    cJSON_AddNumberToObject(j, "seconds", s->seconds);
}

void sc_score_print(FILE *f, const char *path, const sc_artifact_router *r, const sc_score_result *s) {
    double nll = s->nll_sum / (double)s->n_scored;
    fprintf(f, "%s: %s @ density %.3f%s: ppl %.6f (nll %.6f, %lld tokens in %lld sequences); achieved density %.4f "
               "(min %.4f, max %.4f)\n",
            path, r->method, r->density, r->method_default ? " (the artifact's router)" : "", exp(nll), nll,
            (long long)s->n_scored, (long long)s->n_seqs, s->density_mean, s->density_min, s->density_max);
}
