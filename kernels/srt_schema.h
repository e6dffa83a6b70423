/* srt_schema.h - the packed artifact's (.spk) schema, declared once: the
 * manifest's keys, the section names, the threshold grid and the TEAL taps.
 * `pack` writes with these names (convert/pack.c, convert/pack_routing.c) and
 * both readers read with them: the runtime (srt_model.c) and the toolchain's
 * loader (formats/artifact.c). The byte layouts are docs/PACK.md and
 * docs/CONTAINER.md. */
#ifndef SRT_SCHEMA_H
#define SRT_SCHEMA_H

/* ---- the manifest ------------------------------------------------------- */

#define SRT_ART_FORMAT "sparsecal-artifact" /* the value of "format" */
#define SRT_ART_FORMAT_VERSION 1            /* the value of "format_version" */

#define SRT_MAN_FORMAT "format"
#define SRT_MAN_FORMAT_VERSION "format_version"
#define SRT_MAN_TOOL "tool"
#define SRT_MAN_LAYOUT "layout"               /* the pack plan's name */
#define SRT_MAN_CONFIG "config"               /* the model's configuration: SRT_CFG_* */
#define SRT_MAN_SOURCE_MODEL_ID "source_model_id" /* the identity of the model packed (16 hex digits) */
#define SRT_MAN_TENSORS "tensors"             /* one SRT_TEN_* object per packed matrix, by section name */
#define SRT_MAN_ROUTING "routing"             /* the default router and the stored routing data: SRT_RT_* */
#define SRT_MAN_TOKENIZER "tokenizer"
#define SRT_MAN_LAROSA_FOLDED "larosa_folded_inputs" /* block inputs whose rotation is folded into the weights */
#define SRT_MAN_PERMUTED "permuted"           /* FFN neurons reordered (lN.perm) */
#define SRT_MAN_PERMUTATION "permutation"     /* how: "coact" or "activity" */

/* config: integers */
#define SRT_CFG_DIM "dim"
#define SRT_CFG_FFN_DIM "ffn_dim"
#define SRT_CFG_N_LAYERS "n_layers"
#define SRT_CFG_N_HEADS "n_heads"
#define SRT_CFG_N_KV_HEADS "n_kv_heads"
#define SRT_CFG_HEAD_DIM "head_dim"
#define SRT_CFG_VOCAB_SIZE "vocab_size"
#define SRT_CFG_MAX_SEQ_LEN "max_seq_len"
#define SRT_CFG_ROPE_SCALING "rope_scaling"   /* 0 none, 1 linear, 2 llama3 */
#define SRT_CFG_ROPE_ORIG_CTX "rope_orig_ctx"
#define SRT_CFG_BOS_ID "bos_id"
#define SRT_CFG_EOS_ID "eos_id"
/* config: numbers */
#define SRT_CFG_NORM_EPS "norm_eps"
#define SRT_CFG_ROPE_THETA "rope_theta"
#define SRT_CFG_ROPE_FACTOR "rope_factor"
#define SRT_CFG_ROPE_LOW_FREQ_FACTOR "rope_low_freq_factor"
#define SRT_CFG_ROPE_HIGH_FREQ_FACTOR "rope_high_freq_factor"
/* config: strings and flags */
#define SRT_CFG_FAMILY "family"
#define SRT_CFG_ROPE "rope"                   /* SRT_ROPE_INTERLEAVED or SRT_ROPE_HALF */
#define SRT_CFG_ACTIVATION "activation"       /* SRT_ACT_SILU or SRT_ACT_GELU_TANH */
#define SRT_CFG_EMBED_SCALE "embed_scale"
#define SRT_CFG_TIED_CLASSIFIER "tied_classifier"
#define SRT_CFG_QKV_BIAS "qkv_bias"
#define SRT_ROPE_INTERLEAVED "interleaved"
#define SRT_ROPE_HALF "half"
#define SRT_ACT_SILU "silu"
#define SRT_ACT_GELU_TANH "gelu_tanh"

/* tensors.<section>: a packed matrix */
#define SRT_TEN_LAYOUT "layout"
#define SRT_TEN_ROWS "rows"
#define SRT_TEN_COLS "cols"
#define SRT_TEN_ROWS_STORED "rows_stored"
#define SRT_TEN_COLS_STORED "cols_stored"
#define SRT_TEN_GROUP "group"

/* routing: the default router, and one object per stored method */
#define SRT_RT_METHOD "method"
#define SRT_RT_DENSITY "density"
#define SRT_RT_DENSITY_SOURCE "density_source" /* "option" or "default" */
#define SRT_RT_CALIB_MODEL_ID "calibration_model_id"
#define SRT_RT_CALIB_DATA_ID "calibration_data_id"
#define SRT_RT_NOT_STORED "not_stored"         /* routing.<method>.not_stored: why its data is absent */
#define SRT_RT_LAROSA "larosa"                 /* in, h (the split), damp */
#define SRT_RT_LAROSA_IN "in"
#define SRT_RT_LAROSA_H "h"
#define SRT_RT_LAROSA_DAMP "damp"
#define SRT_RT_CETT "cett"                     /* density or target; thresholds: t per layer (null: dense) */
#define SRT_RT_CETT_DENSITY "density"
#define SRT_RT_CETT_TARGET "target"
#define SRT_RT_CETT_THRESHOLDS "thresholds"
#define SRT_RT_CLADA "clada"                   /* tau_s, tau_h, lambda, gamma, qs, qh, class_frac */
#define SRT_RT_CLADA_TAU_S "tau_s"
#define SRT_RT_CLADA_TAU_H "tau_h"
#define SRT_RT_CLADA_LAMBDA "lambda"
#define SRT_RT_CLADA_GAMMA "gamma"
#define SRT_RT_CLADA_QS "qs"
#define SRT_RT_CLADA_QH "qh"
#define SRT_RT_CLADA_FRAC "class_frac"         /* [4] calibration tokens per load class (srt_route.h); optional */
#define SRT_RT_TEAL "teal"                     /* layers, taps (SRT_TEAL_TAP_NAMES), sparsities (SRT_THR_GRID_DESC) */
#define SRT_RT_TEAL_LAYERS "layers"
#define SRT_RT_TEAL_TAPS "taps"
#define SRT_RT_TEAL_SPARSITIES "sparsities"
#define SRT_RT_CWIC "cwic"                     /* stripe, apr, matrices */
#define SRT_RT_CWIC_STRIPE "stripe"
#define SRT_RT_CWIC_APR "apr"
#define SRT_RT_CWIC_MATRICES "matrices"

/* ---- sections ------------------------------------------------------------ */

#define SRT_SEC_TOK_EMB "tok_emb"       /* a row layout, or [vocab, dim] f32 */
#define SRT_SEC_FINAL_NORM "final_norm" /* [dim] f32 */
#define SRT_SEC_CLASSIFIER "classifier" /* absent with tied_classifier */

/* Per layer: SRT_LAYER_SECTION with the layer and one of the names below,
 * e.g. snprintf(nm, cap, SRT_LAYER_SECTION, (long long)l, SRT_SEC_WQ) -> "l3.wq". */
#define SRT_LAYER_SECTION "l%lld.%s"
#define SRT_SEC_ATTN_NORM "attn_norm" /* [dim] f32 */
#define SRT_SEC_FFN_NORM "ffn_norm"
#define SRT_SEC_WQ "wq" /* packed matrices (tensors.<section>) */
#define SRT_SEC_WK "wk"
#define SRT_SEC_WV "wv"
#define SRT_SEC_WO "wo"
#define SRT_SEC_WG "wg"
#define SRT_SEC_WU "wu"
#define SRT_SEC_WD "wd"
#define SRT_SEC_BQ "bq" /* qkv_bias: f32 */
#define SRT_SEC_BK "bk"
#define SRT_SEC_BV "bv"
#define SRT_SEC_ATTN_ROT "attn_rot" /* folded LaRoSA rotations [dim, dim] (packed) */
#define SRT_SEC_MLP_ROT "mlp_rot"
#define SRT_SEC_PERM "perm"         /* [ffn_dim] u32: the neuron order (pack --permute) */
/* routing data (f32), with the neurons in the stored (permuted) order */
#define SRT_SEC_CLAWS_C "claws_c"                 /* [ffn_dim] CLAWS multipliers */
#define SRT_SEC_CATS_THRESHOLDS "cats_thresholds" /* [SRT_THR_GRID] |phi(u)| thresholds */
#define SRT_SEC_CETT_THRESHOLDS "cett_thresholds" /* [ffn_dim] per-neuron |h_j| thresholds */
#define SRT_SEC_CETT_TABLE "cett_table"           /* [SRT_THR_GRID] CETT thresholds t of |h_j| ||W_d[:, j]|| */
#define SRT_SEC_CETT_WNORM "cett_wnorm"           /* [ffn_dim] column norms ||W_d[:, j]|| */
#define SRT_SEC_TEAL_THRESHOLDS "teal_thresholds" /* [SRT_TEAL_NTAPS, SRT_THR_GRID] |x| thresholds */
#define SRT_SEC_TEAL_CURVE "teal_curve"           /* [rows, 8] TEAL's greedy allocation curve */
/* Per layer and projection P (q k v o gate up down): SRT_PROJ_SECTION, e.g. "l3.up.cwic_theta". */
#define SRT_PROJ_SECTION "l%lld.%s.%s"
#define SRT_SEC_CWIC_THETA "cwic_theta" /* [n_stripes, in] */
#define SRT_SEC_CWIC_MEAN "cwic_mean"   /* [in] */
#define SRT_SEC_CWIC_STD "cwic_std"     /* [in] */

/* ---- routing tables -------------------------------------------------------- */

/* Threshold tables (CATS |phi(u)|, TEAL |x| per tapped input, CETT's t) hold the
 * threshold at sparsity 0.05, 0.10, ..., 0.95: entry i at srt_thr_grid(i)
 * (srt_route.h). */
#define SRT_THR_GRID 19
#define SRT_THR_GRID_DESC "0.05:0.95:0.05"

/* TEAL's tapped inputs, the rows of a teal_thresholds table: q, k and v read
 * attn_in, o attn_ctx, gate and up mlp_in, down h. */
enum { SRT_TEAL_ATTN_IN = 0, SRT_TEAL_ATTN_CTX, SRT_TEAL_MLP_IN, SRT_TEAL_H, SRT_TEAL_NTAPS };
#define SRT_TEAL_TAP_NAMES "attn_in,attn_ctx,mlp_in,h"

/* The linear projections of a layer, in the order of the per-projection
 * sections (SRT_PROJ_SECTION: "q", ..., "down", the toolchain's
 * sc_linear_name) and of a teal_curve row's first SRT_NPROJ columns. */
enum { SRT_PROJ_Q = 0, SRT_PROJ_K, SRT_PROJ_V, SRT_PROJ_O, SRT_PROJ_GATE, SRT_PROJ_UP, SRT_PROJ_DOWN, SRT_NPROJ };
#define SRT_PROJ_NAMES "q,k,v,o,gate,up,down"
/* The tapped input each projection reads (SRT_TEAL_*). */
#define SRT_PROJ_TAP(p) ((p) <= SRT_PROJ_V ? SRT_TEAL_ATTN_IN : (p) == SRT_PROJ_O ? SRT_TEAL_ATTN_CTX \
                         : (p) == SRT_PROJ_DOWN ? SRT_TEAL_H : SRT_TEAL_MLP_IN)
/* teal_curve: [rows, SRT_TEAL_CURVE_COLS], row r = the sparsities s_q .. s_down of the greedy allocation's r-th
 * step and their parameter-weighted (effective) sparsity, which grows with r; row 0 is dense. */
#define SRT_TEAL_CURVE_COLS (SRT_NPROJ + 1)

#endif
