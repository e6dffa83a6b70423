/* srt.h - the sparsecal runtime library (libsparsert): CPU features, the
 * kernel dispatch, quantised weight layouts (a traits table), dense and sparse
 * GEMV kernels, activation quantisation, top-K selection and threshold
 * compaction, and a small persistent thread pool. It depends on libc, libm and
 * pthreads only (zstd joins for artifacts), so it cross-compiles anywhere.
 *
 * Conventions: y = W x with W of logical shape rows x cols (row-major f32 is
 * what pack() takes and unpack() returns). Buffers are 64-byte aligned
 * (srt_alloc); kernels never allocate. Index lists are uint32, sorted
 * ascending, without duplicates. Byte layouts: docs/LAYOUTS.md. */
#ifndef SRT_H
#define SRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- CPU features ---------------------------------------------------- */

typedef enum srt_cpu_feature {
    SRT_CPU_AVX2 = 1u << 0,
    SRT_CPU_FMA = 1u << 1,
    SRT_CPU_AVX512F = 1u << 2,
    SRT_CPU_AVX512BW = 1u << 3,
    SRT_CPU_AVX512VL = 1u << 4,
    SRT_CPU_AVX512VNNI = 1u << 5,
    SRT_CPU_AVX512BF16 = 1u << 6,
    SRT_CPU_AVXVNNI = 1u << 7,
    SRT_CPU_NEON = 1u << 8,
    SRT_CPU_DOTPROD = 1u << 9,
    SRT_CPU_F16C = 1u << 10,
    SRT_CPU_I8MM = 1u << 11, /* AArch64 int8 matrix multiply (smmla) */
    SRT_CPU_AMX = 1u << 12   /* x86 AMX tiles with int8 (AMX-TILE + AMX-INT8; the OS's permission granted) */
} srt_cpu_feature;

/* Features of this CPU that the OS also enables (XSAVE state checked), read
 * once. */
uint32_t srt_cpu_features(void);
/* Space-separated names of the features in mask, into buf. */
const char *srt_cpu_feature_names(uint32_t mask, char *buf, int cap);

/* ---- status codes ---------------------------------------------------- */

typedef enum srt_status {
    SRT_OK = 0,
    SRT_EINVAL,   /* bad argument: shape, alignment, size, index list */
    SRT_ENOMEM,   /* allocation failed (only create functions allocate) */
    SRT_EISA,     /* the requested ISA is unknown or not available here */
    SRT_ETHREAD,  /* a worker thread could not be started */
    SRT_ESCRATCH, /* the context's scratch is too small: srt_ctx_reserve (no longer returned; kept for
                   * the numbering) */
    SRT_ENOTSUP,  /* the layout has no kernel for this operation */
    SRT_ENONFINITE, /* the model produced NaN or inf (srt_model_fault says where) */
    SRT_EPREFETCH   /* a prefetch spec (SPARSECAL_PREFETCH, srt_ctx_set_prefetch) is malformed */
} srt_status;

const char *srt_status_str(srt_status st);

/* ---- ISAs and dispatch ------------------------------------------------ */

typedef enum srt_isa {
    SRT_ISA_AUTO = -1, /* SPARSECAL_ISA if set, else the best available */
    SRT_ISA_SCALAR = 0,
    SRT_ISA_AVX2,    /* AVX2 + FMA + F16C */
    SRT_ISA_AVX512,  /* AVX-512 F/BW/VL + VNNI */
    SRT_ISA_NEON,    /* AArch64 Advanced SIMD */
    SRT_ISA_DOTPROD, /* NEON + the sdot/udot instructions */
    SRT_ISA_I8MM,    /* dotprod + the smmla instruction (Armv8.6 I8MM) */
    SRT_ISA_AMX,     /* avx512 + AMX int8 tiles (tdpbssd) for prefill's q8_0 rows */
    SRT_ISA_COUNT
} srt_isa;

const char *srt_isa_name(srt_isa isa);
/* Parses "scalar", "avx2", "avx512", "neon", "dotprod", "i8mm", "amx". */
srt_status srt_isa_parse(const char *name, srt_isa *out);
bool srt_isa_available(srt_isa isa);
/* The best ISA this CPU runs. */
srt_isa srt_isa_best(void);
/* SRT_ISA_AUTO resolved: SPARSECAL_ISA when set (SRT_EISA if it names an
 * unknown or unavailable ISA), else the best available. */
srt_status srt_isa_resolve(srt_isa want, srt_isa *out);

/* ---- memory and fp16 -------------------------------------------------- */

/* 64-byte aligned, zero-filled; NULL on failure or bytes == 0. */
void *srt_alloc(size_t bytes);
void srt_free(void *p);

/* IEEE binary16, round to nearest even (what GGML's F16C path stores). */
uint16_t srt_fp32_to_fp16(float f);
float srt_fp16_to_fp32(uint16_t h);
/* srt_fp32_to_fp16 saturated at +-65504 (the largest finite half; NaN stays NaN): what the f16
 * key/value cache stores, so that an outlier stays an outlier instead of becoming inf and the
 * softmax NaN. */
uint16_t srt_fp32_to_fp16_sat(float f);

/* ---- context: ISA choice, thread pool, scratch ------------------------- */

typedef struct srt_ctx srt_ctx;

/* 1 <= nthreads <= SRT_MAX_THREADS (the caller's thread is one of them). */
#define SRT_MAX_THREADS 1024
srt_status srt_ctx_create(srt_ctx **out, srt_isa isa, int nthreads);
void srt_ctx_free(srt_ctx *ctx);
srt_isa srt_ctx_isa(const srt_ctx *ctx);
int srt_ctx_threads(const srt_ctx *ctx);
/* Software prefetch distances. The GEMV kernels ask for the weights' lines ahead of where they
 * read: rows (kmi4r, q4_0, q8_0) or quads of four neurons (kmi4, kmi8) ahead into L1 and, further,
 * into L2; the x86 kmi4 kernel also covers a number of 128-output tiles per pass over its list.
 * Each context starts from its CPU kind's distances (measured on Intel Xeons and AMD Zen 4), then
 * SPARSECAL_PREFETCH when set (srt_ctx_create returns SRT_EPREFETCH if it is malformed). A spec is
 * a comma- or space-separated list of kr=L1/L2 (kmi4r and q4_0 rows), q8=L1/L2 (q8_0 rows),
 * kd=L1/L2 (kmi4, kmi8), pass=N and zz=F, each optional; "default" alone (or "") changes nothing.
 * L1 0..64, L2 0..1024, N 1..32; 0 prefetches the lines being read (no look-ahead). zz: the live
 * fraction (0..2) above which a zigzag column-sparse GEMV reads every channel (above 1: never). None
 * of them changes a result, only speed. */
#define SRT_PREFETCH_SYNTAX "kr=L1/L2,q8=L1/L2,kd=L1/L2,pass=N,zz=F (any of them; L1 0-64, L2 0-1024, N 1-32, F 0-2)"
/* Applies spec on top of ctx's distances; on SRT_EPREFETCH nothing changes. */
srt_status srt_ctx_set_prefetch(srt_ctx *ctx, const char *spec);
/* ctx's distances as a spec ("kr=1/16,q8=3/16,kd=1/8,pass=32") into buf. */
const char *srt_ctx_prefetch(const srt_ctx *ctx, char *buf, int cap);

/* Per-thread scratch (decode's attention heads keep their scores there when
 * run over the pool): floats per extra thread. The default covers 65536
 * positions. (The kmi4 / kmi8 GEMVs grow a buffer of their own as needed.) */
srt_status srt_ctx_reserve(srt_ctx *ctx, int64_t floats_per_thread);

/* Runs fn(arg, tid, nthreads) on every thread of the pool (tid 0 is the
 * caller) and returns when all have finished. */
void srt_ctx_run(srt_ctx *ctx, void (*fn)(void *arg, int tid, int nthreads), void *arg);

/* Reads the n bytes at p (64-byte aligned; a multiple of 64 is read) with
 * every thread of the context: the streaming floor benchmarks compare with.
 * Returns a checksum so the reads cannot be optimised away. */
uint64_t srt_stream_read(srt_ctx *ctx, const void *p, size_t n);

/* ---- activations ------------------------------------------------------ */

/* int8 activations in blocks of 32: d = amax / 127, q = round-to-nearest-even
 * (x / d) (d < 1e-30 counts as 0), plus each block's sum of q. The buffer is
 * padded with zero blocks to a multiple of SRT_ACT_PAD values. "tiled" is the
 * order the kmi4r row kernels read (docs/LAYOUTS.md). */
#define SRT_ACT_PAD 512
typedef enum srt_act_order { SRT_ACT_NATURAL = 0, SRT_ACT_TILED = 1 } srt_act_order;

typedef struct srt_act {
    int64_t n, cap;      /* logical length; padded length */
    srt_act_order order;
    int8_t *q;           /* cap values */
    float *d;            /* cap / 32 block scales */
    int32_t *sum;        /* cap / 32 block sums of q */
    /* Natural order only, for kernels that read 64 values (two blocks) as one
     * vector of 16 four-value lanes: lane_off[16 p + l] = 8 x (sum of values
     * 4l .. 4l+3 of pair p), times 16 on the upper half of each block (lanes
     * 4-7 and 12-15), and lane_d[16 g + l] = d[8 g + l] for l < 8 and
     * d[8 g + l - 8] / 16 for l >= 8 (groups of eight blocks). */
    int32_t *lane_off;   /* cap / 4 */
    float *lane_d;       /* cap / 16 */
} srt_act;

/* Bytes srt_act_init needs for n values. */
size_t srt_act_bytes(int64_t n);
/* Carves the arrays out of mem (64-byte aligned, at least srt_act_bytes(n)). */
srt_status srt_act_init(srt_act *a, void *mem, size_t bytes, int64_t n, srt_act_order order);
/* Quantises x (a->n floats, finite) into a. */
srt_status srt_act_quantize(const srt_ctx *ctx, srt_act *a, const float *x);

/* ---- layouts ------------------------------------------------------------ */

typedef enum srt_layout {
    SRT_LAYOUT_F32 = 0, /* row-major float32 */
    SRT_LAYOUT_Q8_0,    /* GGML q8_0 rows (34-byte blocks) */
    SRT_LAYOUT_Q4_0,    /* GGML q4_0 rows (18-byte blocks) */
    SRT_LAYOUT_Q4_0T,   /* GGML q4_0 rows of W^T: one row per input channel */
    SRT_LAYOUT_KMI4R,   /* int4 rows in 512-weight tiles for VNNI/sdot (W_u, W_g) */
    SRT_LAYOUT_KMI4,    /* int4 neuron-major: each input channel's column contiguous (W_d) */
    SRT_LAYOUT_ZIGZAG,  /* int4 groups down a column, row-blocks stored row-major */
    SRT_LAYOUT_STRIPE,  /* zigzag with row-block = CWIC stripe, per-stripe live lists */
    SRT_LAYOUT_KMI8,    /* int8 neuron-major: kmi4 with q8_0 values (W_d of the 8-bit plan) */
    SRT_LAYOUT_COUNT
} srt_layout;

/* Which entries a sparse GEMV skips. */
typedef enum srt_sparsity {
    SRT_SPARSE_ROWS = 0, /* only the listed output rows are computed (y elsewhere untouched) */
    SRT_SPARSE_COLS,     /* only the listed input channels contribute */
    SRT_SPARSE_STRIPES   /* per row-block (stripe) lists of input channels */
} srt_sparsity;

/* What a layout's kernels take as x. */
typedef enum srt_input_kind {
    SRT_IN_F32 = 0,
    SRT_IN_Q8_NATURAL,
    SRT_IN_Q8_TILED
} srt_input_kind;

#define SRT_KMI4R_TILE 512 /* kmi4r rows are padded to a multiple of this many columns */

typedef struct srt_matrix {
    srt_layout layout;
    int64_t rows, cols;
    int64_t group; /* zigzag row-block / stripe size in rows (multiple of 32); 0 elsewhere */
    const void *data;
    size_t bytes;
} srt_matrix;

typedef struct srt_input {
    const float *f;     /* for SRT_IN_F32 */
    const srt_act *q;   /* for the quantised kinds */
} srt_input;

typedef struct srt_live {
    const uint32_t *idx; /* ascending, unique */
    int64_t n;
    /* SRT_SPARSE_STRIPES only: the list of row-block s is
     * idx[offsets[s] .. offsets[s+1]), ascending within each block. */
    const int64_t *offsets;
} srt_live;

typedef struct srt_layout_traits {
    const char *name;
    const char *desc;
    int64_t blck_rows, blck_cols; /* geometry of one quantisation group (1 x 1 for f32) */
    srt_sparsity sparse;          /* the pattern gemv_sparse accepts */
    srt_input_kind input;
    /* Packed size of a rows x cols matrix (group: zigzag/stripe row-block). */
    srt_status (*size)(size_t *bytes, int64_t rows, int64_t cols, int64_t group);
    /* Packs row-major finite f32 w into dst (cap bytes, 64-byte aligned) and
     * fills m (m->data = dst). */
    srt_status (*pack)(srt_matrix *m, void *dst, size_t cap, const float *w, int64_t rows, int64_t cols,
                       int64_t group);
    /* Dequantises m into row-major f32 w (rows x cols). */
    srt_status (*unpack)(float *w, const srt_matrix *m);
    /* y[rows] = W x. */
    srt_status (*gemv)(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y);
    /* The sparse GEMV of the layout's pattern. */
    srt_status (*gemv_sparse)(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                              float *y);
} srt_layout_traits;

const srt_layout_traits *srt_layout_get(srt_layout layout);
/* The row-block (zigzag) or stripe (stripe) a pack of rows rows takes when its group is 0; 0 for the
 * other layouts. stripe: CWIC's 512 rows, or the whole (32-padded) column for small models. zigzag:
 * the whole (32-padded) column up to 256 rows, else the longest of 1024, 512 and 256 rows that pads
 * no more than 256 would (a live channel's piece of a row-block is read in one pass: 128-byte
 * pieces read at a third of a stream's speed on some cores, 512-byte ones near the kmi4 vectors'). */
int64_t srt_layout_default_group(srt_layout l, int64_t rows);
srt_status srt_layout_parse(const char *name, srt_layout *out);
/* Checks shape, group, size and alignment of m against its layout. */
srt_status srt_matrix_check(const srt_matrix *m);
/* Row r of a row layout (f32, q8_0, q4_0, kmi4r) dequantised into out[cols]
 * (an embedding lookup); SRT_ENOTSUP for the other layouts. */
srt_status srt_matrix_row(const srt_matrix *m, int64_t r, float *out);

/* Whether ctx's zigzag column-sparse GEMV over n live channels of m reads every channel (the dead
 * ones as zeros, the same bits) rather than the live ones: above the CPU kind's fraction, or zz=F of
 * the context's prefetch spec, for row-blocks under 512 rows; above twice that for longer ones. What
 * it reads, for the byte counts. */
bool srt_zz_reads_all(const srt_ctx *ctx, const srt_matrix *m, int64_t n);

/* y[v] = W x[v] for v < nvec (a prompt's tokens): row layouts read each block of rows once for all
 * inputs, and every y[v] equals the single-input GEMV's bit for bit; the other layouts run one GEMV
 * per input. */
srt_status srt_gemv_batch(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, int64_t nvec, float *const *y);
/* The same with a live list per input (live[v].idx NULL: dense; live NULL: all dense), as
 * srt_gemv_sparse for each: row layouts take each block of rows once for all inputs and run each
 * input's live rows in it, y[v] bit for bit the single-input sparse GEMV's (the dead rows untouched). */
srt_status srt_gemv_batch_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                 int64_t nvec, float *const *y);

/* ---- selection ------------------------------------------------------------- */

/* Exact top-k of score (|score| with SRT_SELECT_ABS) in O(n) by radix
 * selection: writes k indices, ascending. Ties at the threshold go to the
 * lower index; NaN ranks lowest. */
#define SRT_SELECT_ABS 1u
srt_status srt_select_topk(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags);
/* The same selection with a workspace ws of 2n + 1 entries (or NULL): above
 * n = 8192 it holds the keys and the candidates, which is about 3x faster
 * (an 8B model's 14336 neurons). */
srt_status srt_select_topk_ws(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags, uint32_t *ws);
/* Indices i with |x[i]| > t, ascending; returns their count. */
int64_t srt_compact(const srt_ctx *ctx, uint32_t *idx, const float *x, int64_t n, float t);
/* Indices i with |x[i]| > t[i] (per-channel thresholds), ascending. */
int64_t srt_compact_vec(const srt_ctx *ctx, uint32_t *idx, const float *x, const float *t, int64_t n);

/* ---- the decode's f32 parts ---------------------------------------------------- */

/* a[i] = phi(u[i]) for i < n: SiLU u / (1 + e^-u), or GELU-tanh when gelu (a may be u). */
void srt_activate(const srt_ctx *ctx, float *a, const float *u, int64_t n, bool gelu);
/* One attention head over positions 0..n-1 (n >= 1): scores scale q.K_t, softmax into p[0..n), and
 * out[0..hd) = sum_t p_t V_t, with K_t = K + t * stride and V_t = V + t * stride (stride >= hd). */
void srt_attention_head(const srt_ctx *ctx, float *out, float *p, const float *q, const float *K, const float *V,
                        int64_t n, int64_t stride, int64_t hd, float scale);
/* g heads that share K and V (grouped-query attention): srt_attention_head for head h = 0..g-1 with
 * q + h hd, p + h n and out + h hd, bit for bit; the kernels read each K and V row once for the group. */
void srt_attention_group(const srt_ctx *ctx, float *out, float *p, const float *q, const float *K, const float *V,
                         int64_t n, int64_t stride, int64_t hd, int64_t g, float scale);
/* srt_attention_group over an f16 cache (K, V and stride in f16 values): the f32 call's result on the
 * cache widened to f32, bit for bit (each value is widened as it is read). */
void srt_attention_group_h(const srt_ctx *ctx, float *out, float *p, const float *q, const uint16_t *K,
                           const uint16_t *V, int64_t n, int64_t stride, int64_t hd, int64_t g, float scale);
/* dst[i] = srt_fp32_to_fp16_sat(x[i]) for i < n with the context's kernels, bit for bit on every ISA
 * (a NaN becomes the quiet NaN of its sign): how the f16 key/value cache stores a row. */
void srt_f16_store(const srt_ctx *ctx, uint16_t *dst, const float *x, int64_t n);

/* ---- sampling ------------------------------------------------------------ */

/* The token sampler of llama2.c's run.c: temperature 0 is greedy argmax (ties to the lower id); otherwise
 * softmax of logits / temperature, then top-p (nucleus) sampling when 0 < top_p < 1, drawing from the
 * xorshift64* generator seeded by seed (0 takes a fixed non-zero seed). `sparsecal run` and `generate`
 * sample with it, so a program passing the same seed picks the same tokens. */
typedef struct srt_sampler {
    float temperature, top_p;
    uint64_t state;
} srt_sampler;

void srt_sampler_init(srt_sampler *s, float temperature, float top_p, uint64_t seed);
/* Samples from logits[n] (overwritten); scratch holds 2n floats (8-byte aligned). Returns -1 when a logit is
 * NaN or inf, or n is not in [1, 2^31). */
int32_t srt_sampler_sample(srt_sampler *s, float *logits, int64_t n, float *scratch);

#endif
