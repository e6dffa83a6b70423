/* srt_method.h - the runtime's router registry: every router an artifact can
 * run, under its public name (what `run --method`, `eval -m X.spk --method`
 * and `pack --method` take), with the routing data it needs from the artifact
 * (and the one line that refuses it when they are missing), how it reaches a
 * density and the density it packs with by default. The decoder
 * (srt_model.c), scoring (calib/score.c) and the CLI find routers here; no
 * other code compares router names. */
#ifndef SRT_METHOD_H
#define SRT_METHOD_H

#include <stdbool.h>

typedef enum srt_method_id {
    SRT_METHOD_DENSE = 0,      /* every neuron */
    SRT_METHOD_CATS,           /* top-K of |phi(u_j)| */
    SRT_METHOD_CLAWS,          /* top-K of |phi(u_j)| c_j */
    SRT_METHOD_LAROSA,         /* rotated-input top-K (folded rotations) */
    SRT_METHOD_CATS_THRESHOLD, /* |phi(u_j)| > t_l from a calibrated table */
    SRT_METHOD_CETT,           /* |h_j| > thr_j fitted by pack */
    SRT_METHOD_CLADA,          /* cett's thresholds scaled by the load factor */
    SRT_METHOD_TEAL,           /* every linear input |x_i| > t_tap from a calibrated table */
    SRT_METHOD_GRIFFIN,        /* a top-K set per layer fixed at the end of the prompt from its s_j statistic */
    SRT_METHOD_TEAL_GREEDY,    /* teal with each projection's sparsity from the greedy allocation curve */
    SRT_METHOD_CWIC,           /* CWIC stripes: |x_i - mean_i| >= theta std_i per stripe of rows, de-meaned */
    SRT_METHOD_TEAL_CATS,      /* teal's thresholds on the attention and gate inputs, cats' top-K on up and down */
    SRT_METHOD_COUNT
} srt_method_id;

/* Routing data an artifact holds (srt_model_data), one bit each. "every
 * layer": a router that needs it refuses an artifact missing it in any layer;
 * "some layer": layers without it run dense. */
typedef enum srt_data {
    SRT_DATA_ROTATIONS = 1u << 0, /* lN.attn_rot / lN.mlp_rot, folded LaRoSA rotations (some layer) */
    SRT_DATA_CLAWS = 1u << 1,     /* lN.claws_c, the CLAWS multipliers (every layer) */
    SRT_DATA_CATS_TABLE = 1u << 2,/* lN.cats_thresholds (every layer) */
    SRT_DATA_TEAL_TABLE = 1u << 3,/* lN.teal_thresholds (some layer) */
    SRT_DATA_CETT = 1u << 4,      /* lN.cett_thresholds (some layer) */
    SRT_DATA_CLADA = 1u << 5,     /* routing.clada: tau_s, tau_h, lambda, gamma */
    SRT_DATA_CETT_TABLE = 1u << 6,/* lN.cett_table + lN.cett_wnorm: CETT's t at the grid's densities (some layer) */
    SRT_DATA_TEAL_CURVE = 1u << 7,/* lN.teal_curve in every layer holding lN.teal_thresholds (at least one) */
    SRT_DATA_CWIC = 1u << 8       /* lN.P.cwic_theta, cwic_mean, cwic_std and routing.cwic.stripe (some projection) */
} srt_data;

/* How a router reaches a density (the fraction of MLP neurons kept). */
typedef enum srt_density_use {
    SRT_DENSITY_NONE = 0, /* dense: every neuron, density 1 */
    SRT_DENSITY_TOPK,     /* K = srt_topk_count(density, n) per token: any density, the same live count */
    SRT_DENSITY_TABLE,    /* the threshold of a calibrated table at sparsity 1 - density: any density */
    SRT_DENSITY_FITTED    /* thresholds pack fitted to one density (or a CETT target): only that one runs */
} srt_density_use;

typedef struct srt_method_info {
    srt_method_id id;
    const char *name;
    const char *summary;     /* one line */
    unsigned needs;          /* srt_data bits the artifact must hold */
    const char *missing;     /* the refusal when any of them is missing (names the sections and how to pack them) */
    bool rotated;            /* routes an artifact with folded rotations (every other router was calibrated on the
                              * unrotated model) */
    srt_density_use density;
    unsigned any_density;    /* srt_data bits with which a SRT_DENSITY_FITTED router reaches any density through its
                              * calibrated table (SRT_DENSITY_TABLE); 0: none */
    double default_density;  /* pack --method NAME without --density */
    bool from_prompt;        /* chooses its live sets from the prompt, which runs dense (srt_model_end_prompt): when
                              * scoring, the first half of each window is the prompt and only the rest is scored */
} srt_method_info;

/* The entry of id, NULL outside [0, SRT_METHOD_COUNT). */
const srt_method_info *srt_method_get(int id);
/* The entry named name, NULL for an unknown name (or NULL). */
const srt_method_info *srt_method_find(const char *name);
/* "dense, cats, claws, ...": every name, in id order. */
const char *srt_method_names(void);
/* "unknown router (dense, cats, ...)": the refusal of a name outside the table. */
const char *srt_method_unknown(void);
/* NULL when an artifact holding the srt_data bits `have` can run m, else one
 * line saying why not: folded rotations refuse every router calibrated on the
 * unrotated model, then the first missing need gives m->missing. */
const char *srt_method_refusal(const srt_method_info *m, unsigned have);
/* How m reaches a density on an artifact holding the srt_data bits `have`:
 * m->density, except SRT_DENSITY_TABLE for a fitted router whose table the
 * artifact holds (m->any_density). */
srt_density_use srt_method_density(const srt_method_info *m, unsigned have);

#endif
