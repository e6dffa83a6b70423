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
    double density;
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
} sc_sparse_eval_result;

sc_status sc_eval_sparse(const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                         sc_sparse_eval_result *out, sc_err *err);

#endif
