/* srt_model.h - decoding straight from a packed artifact (.spk) with the
 * runtime kernels: the weights stay in their packed layouts (used in place
 * from the mapping when the sections are raw), one token at a time with an
 * key/value cache, and the MLP routed per token (dense, CATS or CLAWS:
 * the same top-K selection as the toolchain's `eval`), so the up and down
 * projections read only the live neurons. The cache holds f32 or f16
 * (srt_model_opts.kv).
 *
 * Depends on libc, libm, pthreads and zstd only (the manifest is read with
 * srt_json). Everything is allocated in srt_model_open except the key/value
 * cache, which holds the positions asked for (srt_model_reserve) and grows
 * when a step goes beyond them. A model is for one thread at a time (the
 * kernels use the context's own thread pool). */
#ifndef SRT_MODEL_H
#define SRT_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srt.h"
#include "srt_container.h"
#include "srt_method.h"
#include "srt_route.h"

typedef struct srt_model_config {
    int64_t dim, ffn_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size, max_seq_len;
    float norm_eps, rope_theta;
    bool rope_half;     /* "half" (NeoX/HF) pairs (i, i + hd/2); else interleaved (2i, 2i+1) */
    int rope_scaling;   /* 0 none, 1 linear, 2 llama3 (the toolchain's sc_rope_scaling) */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int64_t rope_orig_ctx;
    bool gelu;          /* gelu_tanh (GeGLU); else silu (SwiGLU) */
    bool embed_scale, tied_classifier, qkv_bias;
    int32_t bos_id, eos_id;
} srt_model_config;

/* The key/value cache holds SRT_MODEL_INIT_CTX positions (at most max_ctx)
 * after open and grows as steps need (srt_model_reserve). */
#define SRT_MODEL_INIT_CTX 16
/* Bounds on every size a configuration may declare (the toolchain's
 * SC_MAX_* are these), so a hostile header cannot drive a giant allocation. */
#define SRT_MAX_DIM ((int64_t)1 << 16)
#define SRT_MAX_FFN ((int64_t)1 << 18)
#define SRT_MAX_LAYERS 1024
#define SRT_MAX_HEADS 1024
#define SRT_MAX_VOCAB ((int64_t)1 << 22)
#define SRT_MAX_SEQ ((int64_t)1 << 21)

/* The one validation of a configuration (srt_config.c), shared by the
 * runtime and the toolchain's loaders: true and a reason in why when c is
 * not acceptable. */
bool srt_config_invalid(const srt_model_config *c, char *why, size_t cap);
/* The manifest's config object j (SRT_MAN_CONFIG) into c: presence, types and
 * the declared bounds (ranges: srt_config_invalid); false with *bad = the key
 * that is missing or invalid. Absent optional keys take their defaults (rope
 * factors 1, 1, 4; no scaling; bos/eos -1). The runtime and the toolchain's
 * artifact reader (formats/artifact.c) read a config with this alone. */
bool srt_config_read(const srt_json *j, srt_model_config *c, const char **bad);

/* What the key/value cache holds. */
typedef enum srt_kv_type {
    SRT_KV_F16 = 0, /* the default (as llama.cpp's): rounded to f16 (nearest even; beyond +-65504
                     * saturated), half the memory and the bytes attention reads per token; attention
                     * runs on the values widened back to f32 */
    SRT_KV_F32 = 1, /* the keys and values as computed */
} srt_kv_type;

typedef struct srt_model_opts {
    int64_t max_ctx; /* positions the key/value cache may grow to (0: the model's max_seq_len) */
    srt_ctx *ctx;    /* kernels' ISA and threads (borrowed; must outlive the model) */
    srt_kv_type kv;  /* the cache's type (zero: f16) */
} srt_model_opts;

/* Time spent per phase since open (or the last reset), seconds. */
typedef struct srt_model_timing {
    double embed, attn, mlp, head; /* head: final norm + classifier */
    double attn_proj, attn_core;   /* attn = norm + q/k/v + rope + attention core + o-proj */
    double mlp_gate, mlp_route, mlp_up, mlp_down;
    double rotate;                 /* LaRoSA input rotations (inside attn and mlp) */
    double weight_bytes;           /* packed weight bytes the kernels had to read: whole matrices, or for a
                                    * sparse GEMV the live rows / live neurons' vectors plus the scales of
                                    * the K-blocks they touch; the embedding row */
    int64_t steps;
    int64_t live_sum;              /* live neurons summed over (layer, step) */
    double kv_bytes;               /* key/value cache bytes the attention cores read (each layer's keys and
                                    * values of every position a token attended to) */
} srt_model_timing;

typedef struct srt_model srt_model;

/* Opens and validates an artifact: the manifest's config and tensor table,
 * every section's type, size and layout (a bad file gives a one-line message
 * in err and SRT_CT_EFORMAT; an unreadable one SRT_CT_EIO). */
srt_ct_status srt_model_open(const char *path, const srt_model_opts *opts, srt_model **out, char *err,
                             size_t err_cap);
void srt_model_close(srt_model *m); /* accepts NULL */

const srt_model_config *srt_model_get_config(const srt_model *m);
/* Copies the packed matrices out of the file mapping into one anonymous allocation (advised for
 * transparent huge pages where the OS has them) and reads them there from now on: fewer TLB misses
 * than page-cache pages scattered in physical memory, ~10% faster decode where measured
 * (docs/PERFORMANCE.md), for the artifact's size in resident memory (llama.cpp's --no-mmap).
 * SRT_ENOMEM leaves the mapping in use. Not during a step; once. */
srt_status srt_model_copy_weights(srt_model *m);
/* Runs the model's kernels with another context of the same ISA (e.g. one
 * whose thread count suits the model's shape, known only after open);
 * borrowed like opts->ctx. Not during a step. SRT_EINVAL for another ISA. */
srt_status srt_model_set_ctx(srt_model *m, srt_ctx *ctx);
const srt_json *srt_model_manifest(const srt_model *m);
/* The artifact's default router ("routing" in the manifest): method name
 * (may be "dense") and density. */
const char *srt_model_default_method(const srt_model *m);
double srt_model_default_density(const srt_model *m);
/* The density the stored CETT thresholds were fitted to keep on the
 * calibration sample (routing.cett.density), NAN when pack fitted them to a
 * CETT target instead. */
double srt_model_cett_density(const srt_model *m);
/* The density a fitted router's stored thresholds were fitted to (srt_method.h SRT_DENSITY_FITTED): cett and
 * clada srt_model_cett_density, cwic 1 / routing.cwic.apr; NAN when they were fitted to something else (a CETT
 * target, imported CWIC thresholds) and for every other router. */
double srt_model_fitted_density(const srt_model *m, srt_method_id id);
/* Whether the artifact carries CLAWS multipliers for every layer. */
bool srt_model_has_claws(const srt_model *m);
/* Layout of a tensor as stored ("kmi4r", ...), or NULL. */
const char *srt_model_tensor_layout(const srt_model *m, const char *name);

/* Chooses the MLP router: SRT_ROUTER_DENSE, SRT_ROUTER_CATS (top-K of
 * |phi(u)|) or SRT_ROUTER_CLAWS (top-K of |phi(u)| c_j, needs lN.claws_c);
 * K = srt_topk_count(density, ffn_dim); density in (0, 1]. SRT_ENOTSUP for
 * other kinds and where srt_model_method_missing refuses. */
srt_status srt_model_set_router(srt_model *m, srt_router kind, double density);
int64_t srt_model_live_count(const srt_model *m); /* K (ffn_dim when dense) */

/* LaRoSA (the LaRoSA paper) on an artifact packed with --method larosa: every block
 * input with a folded rotation becomes z = R n(x) and only its
 * K_in = round((1 - in s) dim) largest |z_k| feed the projections (which
 * read only those columns in column-sparse layouts); the down projection
 * reads the K_h = round((1 - h s) ffn_dim) largest |h_j|; s = 1 - density,
 * (in, h) the split stored in the artifact. Replaces the neuron router
 * (srt_model_set_router switches LaRoSA off). SRT_ENOTSUP without rotations.
 * The rotations are applied at density 1 too: they are part of the weights. */
srt_status srt_model_set_larosa(srt_model *m, double density);
int64_t srt_model_rotated_inputs(const srt_model *m); /* block inputs with a folded rotation */

/* Chooses the router by name: dense, cats, claws, larosa (as above) and the
 * threshold routers that read the routing data stored in the artifact
 * (convert/pack_routing.c), with the same rules as `sparsecal eval`:
 *   cats-threshold  live iff |phi(u_j)| > t_l, t_l at sparsity 1 - density
 *                   from lN.cats_thresholds (table at 0.05 steps; between
 *                   steps, geometric interpolation);
 *   cett            live iff |h_j| > thr_j: density NAN or the density the
 *                   stored lN.cett_thresholds keep (srt_model_cett_density):
 *                   those; any other density: thr_j from lN.cett_table and
 *                   lN.cett_wnorm (srt_cett_table_thresholds; layers without
 *                   a table run dense). Artifacts packed without the tables
 *                   run the stored thresholds at any density
 *                   (sc_artifact_set_router refuses one they do not keep);
 *   clada           cett's thresholds times 1 + lambda [s > tau_s] +
 *                   gamma [H > tau_H], s and H the surprisal of the token and
 *                   the entropy of the previous step's own logits;
 *   teal            every linear input keeps |x_i| > t_tap (tap thresholds at
 *                   sparsity 1 - density from lN.teal_thresholds), column-
 *                   sparse layouts read only those columns;
 *   teal-greedy     the same with each projection's own sparsity, read from
 *                   lN.teal_curve at sparsity 1 - density (srt_teal_curve_at),
 *                   its threshold from its tap's table;
 *   cwic            every projection holding lN.P.cwic_theta runs CWIC's
 *                   stripes (srt_route_cwic): per stripe of rows the columns
 *                   with |x_i - mean_i| >= theta std_i, y = W_live (x - mean)
 *                   + W mean (row layouts compute each stripe's rows, column-
 *                   sparse ones its live columns). The stored thresholds run
 *                   whatever the density (srt_model_fitted_density says what
 *                   they were fitted to; sc_artifact_set_router refuses others);
 *   teal-cats       teal's thresholds on the attention and gate inputs
 *                   (q, k, v, o, gate; up reads the masked MLP input too),
 *                   then cats' top-K of |phi(u_j)| chooses up's rows and
 *                   down's inputs (down keeps no threshold: -1), one density
 *                   for both.
 * The live neuron count then varies per token (teal-cats: K). SRT_ENOTSUP when the
 * artifact lacks the data (srt_model_method_missing says what), SRT_EINVAL
 * for an unknown name or a density outside (0, 1] (NAN passes for cett and
 * clada: their stored thresholds). */
srt_status srt_model_set_method(srt_model *m, const char *name, double density);
/*   griffin         (the GRIFFIN paper) a step at position 0 starts a
 *                   prompt: its tokens run dense and add h_j^2 / ||h||^2 to
 *                   s_j^2 per layer; srt_model_end_prompt then fixes each
 *                   layer's live set to the K = srt_topk_count(density,
 *                   ffn_dim) largest s_j, which every later step reads
 *                   (up only its rows, down only its columns). */
/* The prompt is over: a router that chooses from the prompt (griffin) fixes
 * its live sets now; a no-op for every other router and once fixed. */
srt_status srt_model_end_prompt(srt_model *m);
/* Whether the current router chooses its live sets from a prompt (srt_method.h: from_prompt). */
bool srt_model_from_prompt(const srt_model *m);
/* The same by registry id (srt_method.h); SRT_EINVAL for an id outside it. */
srt_status srt_model_set_method_id(srt_model *m, srt_method_id id, double density);
/* The routing data the artifact holds: srt_data bits (srt_method.h). */
unsigned srt_model_data(const srt_model *m);
/* NULL when the artifact holds what router `name` needs, else one line naming
 * what is missing (and how to pack it). On an artifact with folded LaRoSA
 * rotations only dense and larosa route: every other router was calibrated on
 * the unrotated model. The rule srt_model_set_method and set_router apply. */
const char *srt_model_method_missing(const srt_model *m, const char *name);
/* Whether the runtime has a router of that name (those srt_model_set_method takes: the registry's). */
bool srt_model_method_known(const char *name);
const char *srt_model_method(const srt_model *m); /* the current router's name */
/* K_in and K_h of the LaRoSA setting (dim and ffn_dim when off). */
void srt_model_larosa_counts(const srt_model *m, int64_t *k_in, int64_t *k_h);
/* The threshold the current threshold router applies in layer `layer`
 * (cats-threshold: tap 0, on |phi(u)|; teal, teal-greedy and teal-cats: tap
 * 0..3 = attn_in, attn_ctx, mlp_in, h, the threshold of the tap's first
 * projection q, o, gate, down (srt_model_proj_threshold gives each); < 0:
 * dense), NAN for the other routers or bad arguments. */
float srt_model_threshold(const srt_model *m, int64_t layer, int tap);
/* Projection proj's (SRT_PROJ_*) input threshold under teal, teal-greedy or teal-cats, NAN otherwise. */
float srt_model_proj_threshold(const srt_model *m, int64_t layer, int proj);
/* The density layer ran in the last step: for the input routers (teal, teal-greedy, cwic) the fraction of the
 * layer's linear-layer parameters read (a projection with L live inputs reads rows x L, a CWIC stripe rows x its
 * live columns), what eval reports for them; for every other router (teal-cats too) the live MLP neurons / ffn_dim. */
double srt_model_last_density(const srt_model *m, int64_t layer);
/* The live neurons layer used in the last step (ascending; *idx = NULL and
 * the return value is ffn_dim when the layer ran dense). */
int64_t srt_model_last_live(const srt_model *m, int64_t layer, const uint32_t **idx);

/* Runs token at position pos (0 <= pos < srt_model_max_ctx; positions < pos
 * must have been run before: their keys and values are in the cache) and
 * points *logits at vocab_size floats owned by the model (valid until the
 * next step). A step allocates only when pos is beyond the positions the
 * cache holds (it then doubles them, at most to the limit; SRT_ENOMEM if
 * that fails): srt_model_reserve sizes it once beforehand. */
srt_status srt_model_step(srt_model *m, int32_t token, int64_t pos, const float **logits);
/* The prompt: tokens[0..n) at positions pos..pos+n-1, each linear layer applied to up to 16 tokens
 * together (row layouts read a block of rows once for all of them); attention, the MLP router and
 * everything per token is srt_model_step's code, so the logits (the last token's) and the cache equal
 * n steps' bit for bit. Input rotations, TEAL and CLADA run token by token. Allocates its buffers on
 * first use and grows the cache to pos + n; a non-finite value re-runs its chunk as steps, so
 * SRT_ENONFINITE and srt_model_fault are a step's. */
srt_status srt_model_prefill(srt_model *m, const int32_t *tokens, int64_t n, int64_t pos, const float **logits);
/* After a step returned SRT_ENONFINITE (a NaN or inf in the residual stream
 * or the logits: corrupt weights, or an overflow): one line naming the
 * layer, the block and the tensor whose output first held it; else "". */
const char *srt_model_fault(const srt_model *m);
/* The positions the cache may grow to (opts.max_ctx, else the model's context). */
int64_t srt_model_max_ctx(const srt_model *m);
/* Grows the key/value cache (and RoPE tables) to hold n positions
 * (n <= srt_model_max_ctx), keeping what it holds; SRT_EINVAL beyond the
 * limit, SRT_ENOMEM when the memory is not there. */
srt_status srt_model_reserve(srt_model *m, int64_t n);
/* The positions the cache holds now. */
int64_t srt_model_ctx_allocated(const srt_model *m);
srt_kv_type srt_model_kv_type(const srt_model *m);
/* Bytes the key/value cache takes now (srt_model_ctx_allocated positions, every layer, K and V). */
uint64_t srt_model_kv_bytes(const srt_model *m);

void srt_model_get_timing(const srt_model *m, srt_model_timing *out);
void srt_model_reset_timing(srt_model *m);
/* Bytes of weights the artifact holds (sections used by the decoder). */
uint64_t srt_model_weight_bytes(const srt_model *m);

#endif
