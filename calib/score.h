/* score.h - teacher-forced perplexity of a packed artifact computed by the
 * runtime decoder itself (kernels/srt_model.h): the one scoring loop behind
 * `sparsecal run --score` and `sparsecal eval -m X.spk`, so what eval
 * measures on an artifact is by construction what run executes. */
#ifndef SC_SCORE_H
#define SC_SCORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data.h"
#include "srt_model.h"

/* The one meaning of a density (--density of eval, pack, run, diag; compute --student-density): the fraction
 * of MLP neurons kept, in (0, 1]. NAN (not given) passes; anything else outside is SC_EARG naming opt. */
sc_status sc_density_check(double density, const char *opt, sc_err *err);

/* The router an artifact runs with, as chosen by sc_artifact_set_router. */
typedef struct sc_artifact_router {
    char method[32];      /* the router's name (srt_model_method) */
    const srt_method_info *info; /* its registry entry (srt_method.h) */
    double density;       /* the density it runs at (1 for dense; for thresholds fitted to a CETT target, 1) */
    double run_density;   /* what srt_model_set_method_id was given: density, or NAN for a fitted router's
                           * stored thresholds (srt_model.h) */
    bool method_default;  /* no method was asked for: the artifact's ("routing" in the manifest) */
    bool density_default; /* no density was asked for: the artifact's */
} sc_artifact_router;

/* Sets m's router: method (NULL: the artifact's default router, dense when
 * the runtime does not know it, with a note on note_to) at density (NAN: not
 * given, then the artifact's default density; a given density must lie in
 * (0, 1]). A router the artifact lacks data for is refused with SC_EARG and
 * one line naming path, the router and what is missing
 * (srt_model_method_missing). note_to may be NULL. */
sc_status sc_artifact_set_router(srt_model *m, const char *path, const char *method, double density, FILE *note_to,
                                 sc_artifact_router *out, sc_err *err);

/* Whether r keeps the same number of live neurons on every token (dense and the top-K routers). */
bool sc_artifact_fixed_live(const sc_artifact_router *r);

typedef struct sc_score_result {
    double nll_sum;       /* sum of -log p over the scored positions */
    int64_t n_scored;     /* positions scored */
    int64_t n_seqs;       /* sequences scored (those of at least 2 ids) */
    int64_t n_windows;    /* windows run (a sequence longer than ctx is cut, as sc_eval_run cuts it) */
    int64_t n_tokens;     /* decode steps run */
    double density_mean;  /* srt_model_last_density over every (step, layer): live MLP neurons / ffn_dim, for the
                           * input routers (teal, teal-greedy, cwic) the linear parameters read */
    double density_min, density_max; /* over (step, layer) */
    double *layer_density; /* [n_layers] mean per layer; owned (sc_score_result_free) */
    int64_t n_layers;
    double seconds;
} sc_score_result;

/* Runs every sequence of d through m's decoder token by token
 * (srt_model_step from position 0, every token routed by m's current router)
 * and scores the id at t + 1 from the logits at t, in double
 * (sc_logsumexp). Sequences longer than ctx (<= 0: srt_model_max_ctx) are cut
 * into windows of ctx ids overlapping by one, each restarting at position 0:
 * the protocol of `ppl` (sc_eval_run). A non-finite value is an error naming
 * path, the sequence and where it appeared. progress may be NULL. */
sc_status sc_score_artifact(srt_model *m, const char *path, const sc_dataset *d, int64_t ctx, FILE *progress,
                            sc_score_result *out, sc_err *err);
void sc_score_result_free(sc_score_result *r);

/* Adds the router and the scores to j (a cJSON object) under the keys both
 * commands print: method, density, method_source, ppl, nll_mean, n_tokens,
 * n_sequences, density_mean/min/max, density_per_layer, and per router
 * live_neurons (top-K), live_input_channels + rotated_inputs (larosa). */
struct cJSON;
void sc_score_json(struct cJSON *j, const srt_model *m, const sc_artifact_router *r, const sc_score_result *s);
/* The same as one line of text. */
void sc_score_print(FILE *f, const char *path, const sc_artifact_router *r, const sc_score_result *s);

#endif
