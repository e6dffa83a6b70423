/* srt_method.c - the runtime's router registry (see srt_method.h). */
#include "srt_method.h"

#include <stddef.h>
#include <string.h>

/* pack --method M without --density keeps this fraction (stated on stderr and in the manifest) */
#define SRT_PACK_DENSITY 0.5

static const srt_method_info table[SRT_METHOD_COUNT] = {
    {SRT_METHOD_DENSE, "dense", "every MLP neuron", 0, NULL, true, SRT_DENSITY_NONE, 0, 1.0, false},
    {SRT_METHOD_CATS, "cats", "top-K of |phi(u_j)| per token (the CATS paper)", 0, NULL, false, SRT_DENSITY_TOPK, 0,
     SRT_PACK_DENSITY, false},
    {SRT_METHOD_CLAWS, "claws", "top-K of |phi(u_j)| c_j per token (the CLAWS paper)", SRT_DATA_CLAWS,
     "claws needs CLAWS multipliers lN.claws_c in every layer: pack with --calib holding claws", false,
     SRT_DENSITY_TOPK, 0, SRT_PACK_DENSITY, false},
    {SRT_METHOD_LAROSA, "larosa", "top-K of the rotated block inputs and of h (the LaRoSA paper)",
     SRT_DATA_ROTATIONS, "larosa needs folded rotations (lN.attn_rot, lN.mlp_rot): pack with --method larosa", true,
     SRT_DENSITY_TOPK, 0, SRT_PACK_DENSITY, false},
    {SRT_METHOD_CATS_THRESHOLD, "cats-threshold", "|phi(u_j)| above the layer's calibrated threshold",
     SRT_DATA_CATS_TABLE, "cats-threshold needs lN.cats_thresholds in every layer: pack with --calib holding cats",
     false, SRT_DENSITY_TABLE, 0, SRT_PACK_DENSITY, false},
    {SRT_METHOD_CETT, "cett", "|h_j| ||W_d[:, j]|| above the layer's CETT threshold (the CLADA paper)",
     SRT_DATA_CETT, "cett needs lN.cett_thresholds: pack with --calib holding cett", false, SRT_DENSITY_FITTED,
     SRT_DATA_CETT_TABLE, SRT_PACK_DENSITY, false},
    {SRT_METHOD_CLADA, "clada", "cett's thresholds scaled per token by the load signals (the CLADA paper)",
     SRT_DATA_CETT | SRT_DATA_CLADA,
     "clada needs lN.cett_thresholds and routing.clada: pack with --calib holding cett,clada", false,
     SRT_DENSITY_FITTED, SRT_DATA_CETT_TABLE, SRT_PACK_DENSITY, false},
    {SRT_METHOD_TEAL, "teal", "every linear input |x_i| above its tap's calibrated threshold (the TEAL paper)",
     SRT_DATA_TEAL_TABLE, "teal needs lN.teal_thresholds: pack with --calib holding teal", false, SRT_DENSITY_TABLE,
     0, SRT_PACK_DENSITY, false},
    {SRT_METHOD_GRIFFIN, "griffin", "a top-K set per layer fixed from the prompt's activations (the GRIFFIN paper)", 0,
     NULL, false, SRT_DENSITY_TOPK, 0, SRT_PACK_DENSITY, true},
    /* the TEAL paper's own allocation (its uniform one is teal): its own name, as eval on the source model has it,
     * so that `eval -m model --method teal-greedy` and `run --method teal-greedy` name the same router */
    {SRT_METHOD_TEAL_GREEDY, "teal-greedy",
     "teal with each projection's sparsity from the greedy allocation curve (the TEAL paper)",
     SRT_DATA_TEAL_TABLE | SRT_DATA_TEAL_CURVE,
     "teal-greedy needs lN.teal_thresholds and lN.teal_curve: pack with --calib holding teal computed with "
     "--params teal_greedy=1",
     false, SRT_DENSITY_TABLE, 0, SRT_PACK_DENSITY, false},
    {SRT_METHOD_CWIC, "cwic", "stripe-column thresholds on every de-meaned linear input (the CWIC paper)",
     SRT_DATA_CWIC, "cwic needs lN.P.cwic_theta/cwic_mean/cwic_std: pack with --calib holding cwic, without --permute",
     false, SRT_DENSITY_FITTED, 0, SRT_PACK_DENSITY, false},
    /* input sparsity where the live set comes from the input (attention, gate), row sparsity on up and down from
     * the gate's |phi(u_j)|; one density for both */
    {SRT_METHOD_TEAL_CATS, "teal-cats",
     "teal's input thresholds on attention and the gate, then top-K of |phi(u_j)| on up and down (TEAL, CATS papers)",
     SRT_DATA_TEAL_TABLE, "teal-cats needs lN.teal_thresholds: pack with --calib holding teal", false, SRT_DENSITY_TOPK,
     0, SRT_PACK_DENSITY, false},
};

const srt_method_info *srt_method_get(int id) {
    return id >= 0 && id < SRT_METHOD_COUNT ? &table[id] : NULL;
}

const srt_method_info *srt_method_find(const char *name) {
    for (int i = 0; name && i < SRT_METHOD_COUNT; i++)
        if (strcmp(name, table[i].name) == 0) return &table[i];
    return NULL;
}

#define NAMES "dense, cats, claws, larosa, cats-threshold, cett, clada, teal, griffin, teal-greedy, cwic, teal-cats"

const char *srt_method_names(void) { return NAMES; }

const char *srt_method_unknown(void) { return "unknown router (" NAMES ")"; }

const char *srt_method_refusal(const srt_method_info *m, unsigned have) {
    if (!m) return "unknown router";
    if (!m->rotated && (have & SRT_DATA_ROTATIONS))
        return "the artifact's rotations are folded (packed with --method larosa): only larosa and dense route it";
    return (m->needs & ~have) ? m->missing : NULL;
}

srt_density_use srt_method_density(const srt_method_info *m, unsigned have) {
    if (m->density == SRT_DENSITY_FITTED && m->any_density && (have & m->any_density) == m->any_density)
        return SRT_DENSITY_TABLE;
    return m->density;
}
