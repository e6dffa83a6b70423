/* diag.h - the routing diagnostics of the CLAWS paper (Tables 5 and 7, Appendix
 * G): how much a static modifier c can reorder a magnitude score a.
 *
 * Two score families per layer and token:
 *   rotated (LaRoSA):  a = |z|, z = Q^T x (x: the normalised MLP input, Q the
 *                      larosa rotation), c = c_rot, c_rot_k = E|dL/dz_k|
 *                      with dL/dz = Q^T dL/dx (CE loss, backward pass);
 *   native (CLAWS):    a = |phi(W_g x)|, c = the CLAWS multipliers c_j.
 * c_rot is estimated on the first crot_seqs sequences of the text; the
 * spread and rank statistics use the following sequences (at most
 * max_tokens scored tokens), so the modifier is not fitted on the tokens it
 * is judged on. */
#ifndef SC_DIAG_H
#define SC_DIAG_H

#include <stdint.h>
#include <stdio.h>

#include "data.h"
#include "engine.h"

typedef struct sc_diag_opts {
    const sc_calib *calib; /* needs claws and larosa (MLP input) for every layer */
    int64_t ctx;           /* tokens per sequence (longer ones are cut) */
    int64_t crot_seqs;     /* sequences for c_rot (0: half of them) */
    int64_t max_tokens;    /* tokens for the statistics (0: 2048) */
    double density;        /* selected-set change at this density (0.5) */
    FILE *progress;
    /* when set: CSV rows "family,layer,token,coord,rank_before,rank_after" for the first
     * dump_tokens statistics tokens of every layer (family rotated: |z| and |z| c_rot;
     * native: |phi(u)| and |phi(u)| c_j; ranks normalised to [0, 1], 0 = highest) */
    FILE *dump;
    int64_t dump_tokens;
} sc_diag_opts;

enum {
    SC_DIAG_Z = 0, SC_DIAG_CROT, SC_DIAG_ZC, SC_DIAG_U, SC_DIAG_PHI, SC_DIAG_CJ, SC_DIAG_PHIC, SC_DIAG_NQ
};

typedef struct sc_diag_spread {
    const char *name;
    double std, p50, p95, ratio; /* ratio = p95 / p50 */
    int64_t n;                   /* values */
} sc_diag_spread;

typedef struct sc_diag_rank {
    const char *family, *base, *modifier;
    double leverage;       /* log10(p95(c)/p50(c)) / log10(p95(a)/p50(a)) */
    double rank_std;       /* std of the normalised rank change (after - before) */
    double rank_p95;       /* p95 of |rank change| */
    double set_change;     /* mean fraction of the top-K set (K = round(density n)) that changes */
} sc_diag_rank;

typedef struct sc_diag_result {
    sc_diag_spread spread[SC_DIAG_NQ];
    sc_diag_rank rank[2]; /* 0: rotated, 1: native */
    int64_t crot_tokens, stat_tokens, layers;
    double density;
} sc_diag_result;

sc_status sc_diag_run(const sc_model *m, const sc_dataset *d, const sc_diag_opts *o, sc_diag_result *out, sc_err *err);

#endif
