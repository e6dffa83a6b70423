/* pack.h - `sparsecal pack`: a model (plus, optionally, its calibration)
 * into a packed artifact (.spk): weights quantised into the layout's
 * runtime format (padded to its block geometry), norms and embeddings in
 * f32, the routing parameters of the chosen method stored with their layer,
 * LaRoSA rotations folded into the weights (method larosa), the
 * tokenizer's vocabulary, and a manifest with everything the runtime
 * must know. The file is a sparsecal container of kind "artifact"
 * (docs/CONTAINER.md), written atomically. */
#ifndef SC_PACK_H
#define SC_PACK_H

#include <stdio.h>

#include "engine.h"
#include "model.h"
#include "tokenizer.h"

typedef struct sc_pack_opts {
    const char *layout;   /* f32, q8_0, q4_0, kmi4 (row-sparse MLP), zigzag (column-sparse) */
    const sc_calib *calib; /* may be NULL */
    const char *method;   /* router recorded as the artifact's default: dense, cats, cats-threshold, claws */
    double density;       /* its default density, in (0, 1]; CETT's thresholds are fitted at it when < 1 and no
                           * params target= is given (pack_routing.c) */
    int compress;         /* zstd level for the sections (0: raw, mmap-able) */
    bool permute;         /* reorder FFN neurons by calibrated activity (needs cats or claws statistics) */
    FILE *progress;
    /* method "larosa": the calibration's rotations are folded into the
     * weights (W Q, and R = Q^T diag(g) stored per block input with the
     * RMSNorm weight set to one); the sparsity split s_in = in s, s_h = h s
     * is recorded for the runtime (0: the defaults 0.8 and 1.2). */
    double larosa_in, larosa_h;
    /* method parameters "k=v,..." for the stored routing data (cett target,
     * clada lambda/gamma/qs/qh, cwic apr/stripe/dist/stats, larosa in/h) */
    const char *params;
    bool density_default; /* density was not asked for: the manifest says "density_source": "default" */
    /* kmi4-in: attention and gate matrices with fewer output rows than this (0: SC_PACK_COLUMN_MIN_ROWS) stay
     * kmi4r rows, their columns too short to read live (pack.c, in_sparse) */
    int64_t column_min_rows;
} sc_pack_opts;

#define SC_PACK_COLUMN_MIN_ROWS 1024

typedef struct sc_pack_result {
    double seconds;
    uint64_t f32_bytes_in; /* f32 weight bytes quantised */
    uint64_t bytes_out;    /* file size */
    char rows_kept[32];    /* kmi4-in: the input-sparse matrices kept as rows ("wk wv", ...; "" for none) */
} sc_pack_result;

sc_status sc_pack(const sc_model *m, const sc_tokenizer *tok, const sc_pack_opts *o, const char *path,
                  sc_pack_result *res, sc_err *err);

#endif
