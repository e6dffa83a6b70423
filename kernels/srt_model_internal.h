/* srt_model_internal.h - the artifact decoder's state, shared by
 * srt_model.c (open) and srt_decode.c (the decode step). */
#ifndef SRT_MODEL_INTERNAL_H
#define SRT_MODEL_INTERNAL_H

#include "srt_model.h"

/* Threshold routers of srt_model_set_method (0: none; the top-K routers
 * and LaRoSA use router / larosa). */
enum { SRT_MODE_NONE = 0, SRT_MODE_CATS_THR, SRT_MODE_CETT, SRT_MODE_CLADA, SRT_MODE_TEAL, SRT_MODE_CWIC };

typedef struct srt_weight {
    srt_matrix m;           /* stored (padded) view */
    int64_t rows, cols;     /* logical shape */
    const srt_layout_traits *tr;
} srt_weight;

/* One projection's CWIC stripes (lN.P.cwic_*; theta NULL: the projection runs dense under cwic). */
typedef struct srt_cwic_w {
    const float *theta, *mean, *std; /* [ns, in], [in], [in] as stored */
    int64_t S, ns;                   /* stripes of S rows (the last may be shorter), ns of them */
    float *tau;                      /* [ns, in] srt_cwic_tau(theta, std) (in m->cwic_mem) */
    float *wmean;                    /* [out] W mean with the packed W (srt_decode_cwic_prepare) */
} srt_cwic_w;

typedef struct srt_layer_w {
    const float *attn_norm, *ffn_norm, *bq, *bk, *bv, *claws_c;
    const float *cats_thr; /* [SRT_THR_GRID] |phi(u)| thresholds at sparsity 0.05..0.95 (NULL: none) */
    const float *cett_thr; /* [ffn_dim] per-neuron |h_j| thresholds pack fitted (NULL: dense layer under cett) */
    const float *cett_table, *cett_wnorm; /* [SRT_THR_GRID] CETT's t, [ffn_dim] ||W_d[:, j]|| (NULL: none) */
    const float *cett_use; /* the thresholds cett / clada run now: cett_thr or the row of m->cett_rt (NULL: dense) */
    const float *teal_thr; /* [SRT_TEAL_NTAPS, SRT_THR_GRID] per tapped input (srt_schema.h) */
    const float *teal_curve; /* [teal_rows, SRT_TEAL_CURVE_COLS] the greedy allocation curve (NULL: none) */
    int64_t teal_rows;
    srt_cwic_w cwic[SRT_NPROJ];
    srt_weight wq, wk, wv, wo, wg, wu, wd;
    srt_weight attn_rot, mlp_rot; /* folded LaRoSA rotations R [dim, dim] (tr NULL: none) */
} srt_layer_w;

struct srt_model {
    char *path;
    srt_container *ct;
    srt_ctx *ctx;
    const srt_json *tensors;
    srt_model_config cfg;
    const char *def_method;
    double def_density;
    bool has_claws;
    unsigned have;          /* srt_data bits: the routing data the artifact holds (srt_model_data) */
    int64_t n_rot;          /* block inputs with a folded rotation */
    double lr_in, lr_h;     /* LaRoSA split recorded at pack time */
    int64_t max_ctx, vmax, vcap; /* max_ctx: positions the buffers below hold now (srt_model_reserve) */
    int64_t ctx_limit;           /* positions the cache may grow to (srt_model_max_ctx) */
    void *ctx_arena;             /* s, cos_t, sin_t, kc, vc */
    const float *final_norm;
    srt_weight emb;              /* token embedding: f32 or a row layout, rows gathered on lookup */
    void *wcopy;                 /* srt_model_opts.copy_weights: the matrices' copy (NULL: in place) */
    srt_weight classifier;
    srt_layer_w *layers;
    uint64_t weight_bytes;
    /* routing */
    srt_method_id method;   /* the router (srt_method.h); router, larosa and mode below say how it runs */
    srt_router router;
    int64_t K;
    bool larosa;            /* rotated-input top-K instead of a neuron router */
    int64_t K_in, K_h;
    /* threshold routers (srt_model_set_method) */
    int mode;               /* SRT_MODE_* (srt_decode.c) */
    float *thr_l;           /* [n_layers]: cats-threshold per layer; teal [n_layers, SRT_NPROJ] per projection */
    int n_cats_thr, n_cett_thr, n_teal_thr, n_teal_curve; /* layers holding each */
    /* cwic: the stripe size and the density pack fitted the thresholds to (routing.cwic), the projections
     * holding stripes, one block with every tau and wmean and the step's scratch */
    int64_t cwic_stripe, n_cwic;
    double cwic_density;    /* 1 / routing.cwic.apr (NAN: imported thresholds, no APR) */
    void *cwic_mem;
    bool cwic_ready;        /* wmean computed */
    float *cz, *czs, *ctmp; /* [vcap]: x - mean, its live part for one stripe, a stripe's full output */
    uint32_t *cidx, *crow;  /* [cwic_idx]: the stripes' live columns; [vcap]: a stripe's rows */
    int64_t *coff;          /* [max ns + 1] */
    /* input routers (teal, cwic): the linear parameters each layer read in the last step, and a layer's total */
    double *lin_active;     /* [n_layers] */
    double lin_dense;
    bool has_clada;
    double cett_density;    /* routing.cett.density: the density lN.cett_thresholds keep (NAN: fitted to a target) */
    int n_cett_table;       /* layers holding lN.cett_table and lN.cett_wnorm */
    float *cett_rt;         /* [n_layers, ffn_dim] thresholds from the tables at the density asked for (NULL: none) */
    srt_clada clada;        /* routing.clada: tau_s, tau_H, lambda, gamma */
    float factor;           /* clada: this step's threshold multiplier */
    /* griffin: the prompt's statistic and the live sets srt_model_end_prompt fixes from it */
    double *g_sum;          /* [n_layers, ffn_dim] sum over the prompt's tokens of h_j^2 / ||h||^2 (NULL: unused) */
    uint32_t *g_set;        /* [n_layers, g_k] each layer's live set, ascending */
    int64_t g_k;            /* the K g_set holds */
    bool g_fixed;           /* false: the prompt is running (dense) */
    int64_t logits_pos;     /* position whose logits m->logits holds (-1: none) */
    /* buffers (one arena) */
    void *arena;
    float *x, *xn, *q, *kt, *vt, *att, *tmp, *u, *a, *v, *h, *score, *s, *cos_t, *sin_t, *logits;
    void *kc, *vc;          /* [n_layers, n_kv_heads, max_ctx, head_dim] keys and values: f32, or f16 when kv_half */
    bool kv_half;
    uint32_t *idx;
    uint32_t *live_all; /* [n_layers, ffn_dim]: the last step's live list per layer */
    uint32_t *sel_ws;   /* [2 vcap + 1] srt_select_topk_ws's workspace */
    int64_t *live_n;    /* [n_layers] */
    void *actmem[2];  /* natural, tiled */
    size_t actbytes;
    srt_act act[2];
    const float *act_src[2]; /* what act[i] holds (NULL: stale) */
    int64_t act_n[2];
    srt_model_timing tm;
    char fault[256];        /* srt_model_fault (srt_model_fault.c) */
    /* prefill (srt_decode.c), allocated on first use: 9 x 16 vectors, 16 live lists, row marks, 2 x 16 activations */
    void *pf_arena;
    float *pf_vec[9 * 16];
    uint32_t *pf_idx[16];
    uint8_t *pf_mark;
    void *pf_actmem[2 * 16];
};

/* Called when the residual stream (block 0 attention, 1 MLP of layer l) or
 * the logits (block 2) of a step hold a non-finite value: finds the first
 * intermediate that does, writes m->fault, returns SRT_ENONFINITE. */
srt_status srt_model_nonfinite(srt_model *m, int64_t l, int block);
/* cwic: every stored projection's wmean = W mean with the packed W (once; srt_decode.c). */
srt_status srt_decode_cwic_prepare(srt_model *m);
bool srt_vec_finite(const float *x, int64_t n);

#endif
