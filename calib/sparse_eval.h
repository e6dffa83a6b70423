/* sparse_eval.h - `sparsecal eval`: perplexity with every token of every
 * sequence sparsified in every layer's MLP by a router, plus the achieved
 * density and active MLP parameters per token. */
#ifndef SC_SPARSE_EVAL_H
#define SC_SPARSE_EVAL_H

#include "engine.h"
#include "eval.h"
#include "router.h"

typedef struct sc_sparse_eval_opts {
    const char *method; /* dense, cats, cats-threshold, claws, griffin, griffin-prefill, oracle */
    double density;     /* in (0, 1]; cett and clada: NAN fits their thresholds to params target= instead
                         * (sc_cett_goal_parse; a density and a target together are refused) */
    const sc_calib *calib; /* claws: multipliers; cats-threshold: histograms */
    int64_t ctx;
    bool second_half;   /* score the second half of each window only (forced for griffin) */
    const char *params; /* method-specific "key=value,..." (may be NULL) */
    FILE *progress;
} sc_sparse_eval_opts;

typedef struct sc_sparse_eval_result {
    sc_ppl_result ppl;
    sc_router_stats stats;
    double layer_density[SC_MAX_LAYERS];
    /* larosa, cett, clada (zero for other methods); see docs/LAROSA_CETT.md */
    struct sc_lc_result {
        double in_density, h_density;   /* larosa: kept fraction of the rotated block inputs, of h */
        double split_in, split_h;       /* larosa: sparsity coefficients (s_in = split_in * s, s_h = split_h * s) */
        double linear_density;          /* larosa: parameter-weighted density over every linear of the blocks */
        double sparsified_density;      /* larosa: the same over the sparsified linears (q, k, v, gate, up, down) */
        int n_grid;                     /* larosa grid search: rows of grid (split_in, split_h, tuning ppl) */
        double grid[32][3];
        double layer_threshold[SC_MAX_LAYERS];       /* cett/clada: t per layer */
        double layer_cett[SC_MAX_LAYERS];            /* cett/clada: CETT(t) on the stored sample */
        double layer_sample_sparsity[SC_MAX_LAYERS]; /* cett/clada: sparsity of t on the stored sample */
        double target;                               /* cett/clada: CETT target */
        double tau_s, tau_h, lambda, gamma;          /* clada */
        double frac_s, frac_h;                       /* clada: fraction of eval tokens with s > tau_s, H > tau_H */
    } lc;
    /* teal, teal-greedy, cwic (zero for other methods); see docs/INPUT_SPARSITY.md */
    struct sc_input_result {
        bool valid;
        double target;                 /* parameter-weighted target sparsity (teal: 1 - density; cwic: 1 - 1/APR) */
        double proj_sparsity[7];       /* achieved, per projection q k v o gate up down, mean over layers:
                                          teal: skipped input channels; cwic: skipped stripe-columns (parameter share) */
        double effective_sparsity;     /* achieved, parameter-weighted over the 7 linears of every layer */
        double layer_effective[SC_MAX_LAYERS];
        double active_linear_params;   /* per token, over the 7 linears of every layer */
        double dense_linear_params;
        double apr;                    /* dense / active linear parameters */
        double apr_target;             /* cwic */
        int64_t stripe;                /* cwic: stripe size asked for (clamped per matrix to its rows) */
    } in;
} sc_sparse_eval_result;

sc_status sc_eval_sparse(const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                         sc_sparse_eval_result *out, sc_err *err);

#endif
