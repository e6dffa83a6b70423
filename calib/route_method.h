/* route_method.h - the toolchain's routing registry: every method `eval`
 * and `pack` take, with the calibration statistics it reads, the --params
 * keys eval takes, how eval installs it in the reference forward pass and the
 * runtime router (kernels/srt_method.h) that executes it on an artifact.
 * Beside the calibration methods' registry (method.h): a calibration method
 * accumulates statistics, a routing method turns them into a plan
 * (calib/plan.c) and routes with it. `eval`, `pack` and the CLI loop over
 * this table; nothing else compares method names.
 *
 * What pack stores is decided per calibration method the file holds
 * (convert/pack_routing.c): every router the artifact may run later finds its
 * data whatever --method named as the default. */
#ifndef SC_ROUTE_METHOD_H
#define SC_ROUTE_METHOD_H

#include "sparse_eval.h"
#include "srt_method.h"

typedef struct sc_route_method sc_route_method;

/* eval: scores d with rm routing every token of every sequence in the
 * reference forward pass (obs, when not NULL, sees the live sets of the
 * neuron routers). */
typedef sc_status (*sc_route_eval_fn)(const sc_route_method *rm, const sc_model *m, const sc_dataset *d,
                                      const sc_sparse_eval_opts *o, const sc_live_obs *obs,
                                      sc_sparse_eval_result *out, sc_err *err);

enum {
    SC_RM_TARGET = 1u << 0,    /* without --density its thresholds meet a CETT target (--params target=) */
    SC_RM_CLADA = 1u << 1,     /* cett's thresholds scaled per token by CLADA's load factor */
    SC_RM_GREEDY = 1u << 2,    /* per-projection sparsities from TEAL's greedy allocation curve */
    SC_RM_PROMPT = 1u << 3,    /* GRIFFIN: the first half of each window is the prompt; the second half is scored */
    SC_RM_PREFILL = 1u << 4,   /* GRIFFIN-prefill: the prompt is routed too */
    SC_RM_FOLD = 1u << 5,      /* pack folds the calibration's rotations into the weights (larosa) */
    SC_RM_REPORT_LAROSA = 1u << 6, /* eval --json reports the split, densities and grid (sc_lc_result) */
    SC_RM_REPORT_CETT = 1u << 7,   /* ... the per-layer thresholds and sample CETT (sc_lc_result) */
    SC_RM_REPORT_INPUT = 1u << 8,  /* ... the input sparsity per projection and the APR (sc_input_result) */
    SC_RM_FILE = 1u << 9           /* also routes from a file of its statistics alone (--params SC_RM_FILE_KEY=FILE) */
};
/* The --params key naming that file (cwic: `train --method cwic` writes it for a model no calibration of
 * the base model describes). */
#define SC_RM_FILE_KEY "thresholds"

struct sc_route_method {
    const char *name;       /* what eval --method and pack --method take */
    int runtime;            /* srt_method_id the runtime runs it with (eval -m X.spk, pack), -1: eval only */
    srt_router router;      /* eval's neuron router (sc_router) for the router methods; SRT_ROUTER_DENSE else */
    const char *calib;      /* the calibration methods whose statistics it reads, comma-separated ("" none) */
    const char *eval_keys;  /* the --params keys eval takes ("" none) */
    sc_route_eval_fn eval;  /* how eval installs it */
    unsigned flags;         /* SC_RM_* */
    const char *summary;
};

/* The entry named name, NULL for an unknown one. */
const sc_route_method *sc_route_method_find(const char *name);
/* The registry, NULL-terminated. */
const sc_route_method *const *sc_route_methods(void);
/* The names, comma-separated ("dense, cats, ..."), of every entry or (runtime_only)
 * of those an artifact runs; into buf (cap bytes), which is returned. */
const char *sc_route_method_names(char *buf, size_t cap, bool runtime_only);

/* Whether c (may be NULL) holds the statistics of every calibration method rm
 * reads (true when it reads none). */
bool sc_route_method_calibrated(const sc_route_method *rm, const sc_calib *c);
/* Whether rm routes here from its statistics file alone: SC_RM_FILE and params
 * name the file (rm and params may be NULL: false). */
bool sc_route_method_from_file(const sc_route_method *rm, const char *params);
/* Those calibration methods as words ("cett and clada") into buf, returned. */
const char *sc_route_method_needs(const sc_route_method *rm, char *buf, size_t cap);

/* The eval installers, one per family, each beside its method: sc_eval_router
 * (the neuron routers, sparse_eval.c), sc_eval_larosa (methods/larosa.c),
 * sc_eval_cett (cett and clada, methods/cett.c), sc_eval_teal, sc_eval_cwic. */
sc_status sc_eval_router(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                         const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err);
sc_status sc_eval_larosa(const sc_route_method *rm, const sc_model *m, const sc_dataset *d,
                         const sc_sparse_eval_opts *o, const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err);
sc_status sc_eval_cett(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                       const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err);
sc_status sc_eval_teal(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                       const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err);
sc_status sc_eval_cwic(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                       const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err);

#endif
