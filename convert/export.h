/* export.h - `sparsecal export`: the routing data of a calibration (.scal) or
 * an artifact (.spk) as one safetensors file whose names and meanings
 * docs/EXPORT.md gives (the artifact's routing section names, f32, every
 * per-neuron array in the model's own neuron order), and TEAL's per-layer
 * files (the TEAL paper's reference code: histograms/layer-L/{self_attn,mlp}/
 * histograms.pt and lookup/layer_L.csv), so the calibration can be taken into
 * PyTorch code. */
#ifndef SC_EXPORT_H
#define SC_EXPORT_H

#include "engine.h"
#include "model.h"

typedef struct sc_export_opts {
    double density;       /* a calibration's CETT thresholds keep it, CWIC's APR is 1 / it (as pack --density) */
    const char *params;   /* method parameters, as pack --params (cett target=, clada, cwic) */
    bool density_default; /* density was not asked for (recorded in the metadata) */
} sc_export_opts;

typedef struct sc_export_result {
    int64_t tensors; /* written to the safetensors file */
    uint64_t bytes;  /* of tensor data */
    int64_t layers_rotated; /* block inputs with a LaRoSA rotation */
} sc_export_result;

/* The routing data of calibration c, computed on m (its source model) as
 * `pack --calib` computes and stores it, plus the LaRoSA rotations Q as
 * calibrated, into out (.safetensors). */
sc_status sc_export_calib(const sc_model *m, const sc_calib *c, const sc_export_opts *o, const char *out,
                          sc_export_result *res, sc_err *err);
/* The routing data an artifact stores (permuted arrays put back in the model's
 * neuron order) and its folded LaRoSA rotations, dequantised, into out. */
sc_status sc_export_artifact(const char *path, const char *out, sc_export_result *res, sc_err *err);

/* TEAL's files from calibration c into dir (created): for every layer with
 * TEAL statistics, histograms/layer-L/self_attn/histograms.pt (h1: the q/k/v
 * input, h2: the o input) and histograms/layer-L/mlp/histograms.pt (h1: the
 * gate/up input, h2: the down input), each {"h1": counts, "h1_centers":
 * centres, "h2": ..., "h2_centers": ...} as float32 over signed values in
 * ascending order; and, where the greedy allocation curve was computed,
 * lookup/layer_L.csv ("Effective Sparsity", q, k, v, o, gate, up, down).
 * *files counts what was written. */
sc_status sc_export_teal(const sc_calib *c, const char *dir, int64_t *files, sc_err *err);

#endif
