/* srt_kern.h - internal to libsparsert: the per-ISA kernel table, the job
 * descriptions the kernels work on, and the byte geometry of every layout.
 * Each kernel computes one slice of a job (a range of rows, output tiles or
 * list positions) single-threaded; srt_gemv.c splits jobs over the pool.
 * Kernels never allocate and never fail: the wrappers validate first. */
#ifndef SRT_KERN_H
#define SRT_KERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "srt.h"

#define SRT_QK 32 /* weights per quantisation block */

/* GGML's blocks, byte for byte: fp16 scale d, then the 32 values (q4_0: byte
 * j holds value j in its low nibble and value j + 16 in its high one). The
 * kernels address them through these sizes and offsets. */
typedef struct srt_block_q4_0 {
    uint16_t d;
    uint8_t qs[SRT_QK / 2];
} srt_block_q4_0;
typedef struct srt_block_q8_0 {
    uint16_t d;
    int8_t qs[SRT_QK];
} srt_block_q8_0;
_Static_assert(sizeof(srt_block_q4_0) == 18, "block_q4_0 is 18 bytes (GGML)");
_Static_assert(sizeof(srt_block_q8_0) == 34, "block_q8_0 is 34 bytes (GGML)");
_Static_assert(offsetof(srt_block_q4_0, qs) == 2 && offsetof(srt_block_q8_0, qs) == 2, "values follow the fp16 scale");
#define SRT_Q4_BYTES ((int64_t)sizeof(srt_block_q4_0))
#define SRT_Q8_BYTES ((int64_t)sizeof(srt_block_q8_0))
#define SRT_BLK_QS ((int64_t)offsetof(srt_block_q4_0, qs)) /* both blocks' values start here */
#define SRT_KR_TILE SRT_KMI4R_TILE /* kmi4r: weights per row tile (16 blocks) */
#define SRT_KD_TILE 128    /* kmi4: outputs per neuron tile (64 bytes) */
#define SRT_K8_TILE 64     /* kmi8: outputs per neuron tile (64 bytes) */
#define SRT_ZZ_CHUNK 256   /* zigzag: rows a SIMD kernel keeps in registers */
/* Software prefetch distances (and the width of a kmi4 pass): how far ahead of the one it computes a
 * kernel asks for lines into L1 (l1) and into L2 (l2), in list positions (rows for the row kernels,
 * quads of four neurons for kmi4 and kmi8). The best distances depend on the CPU's prefetchers and
 * miss buffers, so they are chosen per CPU kind when the kernel tables are built (srt_cpu_prefetch)
 * and every job carries its layout's pair; they change no result, only which lines are asked for
 * early (and in what order). */
typedef struct srt_pf {
    int32_t l1, l2;
} srt_pf;
typedef struct srt_pf_set {
    srt_pf kr; /* kmi4r and q4_0 rows (the AVX-512 and AVX2 kernels; NEON's multi-input rows) */
    srt_pf q8; /* q8_0 rows (2.1x as long as kmi4r rows at the same width) */
    srt_pf kd; /* kmi4 and kmi8 (x86) */
    /* x86 kmi4: output tiles (128 outputs) one pass over the live list covers, 1..SRT_KD_PASS_MAX;
     * a neuron vector longer than that is read in pieces, one per pass */
    int32_t kd_pass_tiles;
    /* zigzag: the live fraction above which the column-sparse GEMV reads every channel instead (the
     * dense kernel on the input with the dead channels zeroed: the same bits, srt_zz_reads_all), where
     * this CPU reads the live channels' 128-byte pieces (256-row row-blocks) slower than the whole
     * matrix; twice that for row-blocks of 512 rows and more; above 1: never */
    float zz_dense_above;
} srt_pf_set;
#define SRT_KD_PASS_MAX 32
/* The distances for the CPU this runs on (srt_cpu.c). */
srt_pf_set srt_cpu_prefetch(void);

/* The row kernels spread the prefetch of a row's nl lines over the nstep steps of the row they are
 * computing: the lines step s takes, by a running count instead of s nl / nstep (an integer division
 * per step cost more than the dots in the AVX2 q8_0 rows: 1.64x the floor against 1.25x). */
static inline int64_t srt_pf_share(int64_t *due, int64_t nl, int64_t nstep) {
    int64_t n = 0;
    for (*due += nl; *due >= nstep; *due -= nstep) n++;
    return n;
}

/* One step's share of the lines of the row at pf (NULL: none) into L1, as the multi-input row
 * kernels prefetch the row j->pf.l1 ahead while their first group of inputs reads from memory. */
static inline void srt_pf_l1_step(const uint8_t *pf, int64_t *l, int64_t *due, int64_t nl, int64_t nstep) {
    for (const int64_t le = *l + srt_pf_share(due, nl, nstep); *l < le; (*l)++)
        if (pf) __builtin_prefetch(pf + 64 * *l, 0, 3); /* prefetcht0 */
}

/* The multi-input row kernels take inputs four at a time: a[k] = xq[v0 + k], a short last group
 * repeating its last input (whose copies are dropped). */
static inline void srt_multi_group(const srt_act *const *xq, int64_t nvec, int64_t v0, const srt_act *a[4]) {
    for (int k = 0; k < 4; k++) a[k] = xq[v0 + k < nvec ? v0 + k : nvec - 1];
}

/* e^x in the SIMD gate activation and attention kernels (every ISA the same rule): x clamped to
 * [SRT_EXP_MIN, SRT_EXP_MAX], x = n ln2 + r with n = round(x log2 e) and ln2 in two parts (|r| <=
 * ln2/2), e^r = 1 + r + r^2 (P0 + P1 r + ... + P5 r^5) (Cephes' expf coefficients, about 1 ulp), then
 * scaled by 2^n (overflow to inf, underflow through the subnormals to 0). */
#define SRT_EXP_MIN (-104.0f)
#define SRT_EXP_MAX 89.0f
#define SRT_EXP_LOG2E 1.44269504088896341f
#define SRT_EXP_LN2_HI 0.693359375f
#define SRT_EXP_LN2_LO (-2.12194440e-4f)
#define SRT_EXP_P0 5.0000001201e-1f
#define SRT_EXP_P1 1.6666665459e-1f
#define SRT_EXP_P2 4.1665795894e-2f
#define SRT_EXP_P3 8.3334519073e-3f
#define SRT_EXP_P4 1.3981999507e-3f
#define SRT_EXP_P5 1.9875691500e-4f

static inline int64_t srt_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

static inline uint16_t srt_rd16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* ---- layout geometry (docs/LAYOUTS.md) ---------------------------------- */

/* kmi4r: per row, cols_pad/2 nibble bytes in tile order, then cols_pad/32
 * fp16 scales, padded to 64 bytes. */
static inline int64_t srt_kr_cols_pad(int64_t cols) { return srt_round_up(cols, SRT_KR_TILE); }
static inline int64_t srt_kr_row_bytes(int64_t cols) {
    int64_t cp = srt_kr_cols_pad(cols);
    return srt_round_up(cp / 2 + cp / 16, 64);
}
/* kmi4: per K-block of 32 input channels, rows_pad fp16 scales then 32
 * neuron vectors of rows_pad/2 bytes: per output the bytes of one q4_0 block
 * (srt_kd_block_bytes of rows_pad is the same: the padding is idempotent). */
static inline int64_t srt_kd_rows_pad(int64_t rows) { return srt_round_up(rows, SRT_KD_TILE); }
static inline int64_t srt_kd_block_bytes(int64_t rows) { return srt_kd_rows_pad(rows) * SRT_Q4_BYTES; }
/* kmi8: outputs padded to its 64-output tiles; a K-block is rows_pad fp16 scales then 32 columns of
 * rows_pad int8 values (q8_0's 34 bytes per 32 weights). */
static inline int64_t srt_k8_rows_pad(int64_t rows) { return srt_round_up(rows, SRT_K8_TILE); }
static inline int64_t srt_k8_block_bytes(int64_t rows) { return srt_k8_rows_pad(rows) * SRT_Q8_BYTES; }
/* zigzag/stripe: per row-block of R rows, cols x R/2 nibble bytes (channel
 * major) then cols x R/32 fp16 scales, each region padded to 64 bytes. */
static inline int64_t srt_zz_nib_bytes(int64_t cols, int64_t R) { return srt_round_up(cols * (R / 2), 64); }
static inline int64_t srt_zz_rb_bytes(int64_t cols, int64_t R) {
    return srt_zz_nib_bytes(cols, R) + srt_round_up(cols * (R / 16), 64);
}

/* ---- jobs ---------------------------------------------------------------- */

/* Row dot products (f32, q8_0, q4_0, kmi4r): for list positions i in
 * [i0, i1), r = idx ? idx[i] : i and y[r] = row r . x. */
typedef struct srt_rows_job {
    float *y;
    const uint8_t *w;
    int64_t row_bytes; /* stride between rows */
    int64_t cols;      /* logical columns (kmi4r: the padded count) */
    const float *xf;   /* f32 rows */
    const srt_act *xq; /* quantised rows */
    const uint32_t *idx;
    /* list positions up to which a call for [i0, i1) may prefetch (0: i1): the rows the next calls take,
     * when a GEMV's rows are handed out in pieces, so the software prefetch runs on across them */
    int64_t pf_end;
    srt_pf pf; /* prefetch distances in rows (the kernel table's kr or q8 pair) */
} srt_rows_job;

/* The end of the list positions a row kernel's call for [i0, i1) prefetches up to. */
static inline int64_t srt_rows_pf_end(const srt_rows_job *j, int64_t i1) { return j->pf_end > i1 ? j->pf_end : i1; }

/* kmi4 (down projection): y[o] = sum over the live entries in list positions
 * [p0, p1) (channel idx[p], or p when dense) of W[o, j] h_j, with h quantised
 * in natural order, for the outputs o in [o0, o1). Threads own ranges of
 * outputs and each walks the whole list, so every output is summed in list
 * order by one thread: the result does not depend on the thread count. */
typedef struct srt_kd_job {
    int64_t rows; /* logical outputs (y has this many) */
    const uint8_t *w;
    int64_t rows_pad, nblk; /* K-blocks */
    const srt_act *h;
    const uint32_t *idx; /* NULL: dense */
    int64_t n_idx;
    /* NULL: the outputs start from 0; else from y0[0..rows) (the sums of the earlier K-blocks, when a
     * batch runs the list in K windows: each window's K-block terms are added to them in the same
     * order as one call over the whole list, so the result is the same bits) */
    const float *y0;
    /* the outputs computed, [o0, o1): multiples of SRT_KD_TILE (o1 may pass the last output); o1 = 0:
     * all of them. Only these outputs of y (and of y0) are touched. */
    int64_t o0, o1;
    /* the list positions the software prefetch may run on to (at most n_idx; up to p1 when smaller):
     * past p1 when the same thread's next call goes on from there for the same outputs */
    int64_t pf_end;
    srt_pf pf; /* prefetch distances in quads (the kernel table's kd pair) */
    int32_t pass_tiles; /* x86 kmi4: output tiles a pass covers (the kernel table's kd_pass_tiles) */
} srt_kd_job;

/* The end of the list positions a kmi4 / kmi8 kernel's call for [p0, p1) prefetches up to. */
static inline int64_t srt_kd_pf_end(const srt_kd_job *j, int64_t p1) { return j->pf_end > p1 ? j->pf_end : p1; }

/* The tiles of `tile` outputs (SRT_KD_TILE or SRT_K8_TILE) a kmi4 / kmi8 kernel computes for job j, of
 * the n tiles that cover all of its outputs: [*t0, *t1). */
static inline void srt_kd_tiles_of(const srt_kd_job *j, int64_t tile, int64_t n, int64_t *t0, int64_t *t1) {
    const int64_t e = j->o1 ? (j->o1 + tile - 1) / tile : n;
    *t0 = j->o0 / tile;
    *t1 = e < n ? e : n;
}

/* The float sums of outputs [o0, o0 + n) as a kmi4/kmi8 kernel starts them: y0's values (0 without
 * y0) and 0 past the last output (the padding lanes of the last tile). */
static inline void srt_kd_start(const srt_kd_job *j, float *fa, int64_t o0, int64_t n) {
    const int64_t c = !j->y0 || o0 >= j->rows ? 0 : j->rows - o0 < n ? j->rows - o0 : n;
    if (c > 0) memcpy(fa, j->y0 + o0, (size_t)c * sizeof(float));
    if (n > c) memset(fa + c, 0, (size_t)(n - c) * sizeof(float));
}

/* The end of the K-block run that starts at list position p of a kmi4/kmi8 job: the positions
 * before p1 whose neurons share p's K-block (the list ascends), which the kernels sum as one
 * integer block. */
static inline int64_t srt_kd_run_end(const srt_kd_job *j, int64_t p, int64_t p1) {
    const int64_t kb = (j->idx ? (int64_t)j->idx[p] : p) / SRT_QK;
    int64_t e = p + 1;
    while (e < p1 && (j->idx ? (int64_t)j->idx[e] : e) / SRT_QK == kb) e++;
    return e;
}

/* q4_0t axpy (PowerInfer-style): output blocks [b0, b1) (32 rows each) of
 * y = sum over live channels j of h_j * dequant(row j of W^T). */
typedef struct srt_axpy_job {
    float *y;
    const uint8_t *w; /* q4_0 rows of W^T */
    int64_t row_bytes;
    const float *h;
    const uint32_t *idx; /* NULL: dense */
    int64_t n_idx;
} srt_axpy_job;

/* zigzag / stripe: groups [g0, g1) (32 rows each; g0 a multiple of 8) of
 * one row-block. y_rb[32 g0 .. 32 g1) = sum over the channels
 * c_p = idx ? idx[first + p] : first + p, p < n, of x_c * W[rows, c] with
 * c's values quantised per 32-channel block (ref_zigzag; overwrites). */
typedef struct srt_zz_job {
    const uint8_t *w; /* the row-block's bytes */
    int64_t cols, R;
    const float *x;
    int64_t g0, g1;
} srt_zz_job;

/* The inputs of a q8_0 row batch as AMX B tiles (srt_q8_tiles_pack): per block b, q[512 b ..] holds
 * its 32 values of the 16 inputs as 8 rows of 64 bytes (row k / 4: input v's values k .. k + 3 at
 * bytes 4 v ..), d[16 b + v] input v's scale; inputs past nvec are zeros. */
#define SRT_TILE_INPUTS 16
typedef struct srt_q8_tiles {
    int64_t nvec, nblk;
    int8_t *q; /* nblk x 512 */
    float *d;  /* nblk x 16 */
} srt_q8_tiles;

/* A kmi4 / kmi8 batch's inputs as AMX A tiles (prefill's down projection, up to 16 inputs): per K-block kb,
 * q[512 kb + 32 v ..] input v's 32 values (its dead neurons' 0), d[16 kb + v] its scale and
 * live[16 kb + v] 1 when the block holds a live neuron of input v. */
typedef struct srt_kd_tiles {
    int64_t nvec;
    int8_t *q;
    float *d;
    uint8_t *live;
} srt_kd_tiles;

/* AVX-512 q8_0 rows (SRT_Q8_LANES, every x86 kernel of them: single-input, multi-input, AMX tiles):
 * block b's exact integer dot w_b . x_b goes to float lane b % 16 as
 * lane = fma((float)dot, dw_b * dx_b, lane), blocks in order from +0; the row's value is the lanes
 * added in pairs, lane l + lane l + 8 (l < 8), then l + l + 4, l + l + 2 and lane 0 + lane 1. */

/* ---- the kernel table ---------------------------------------------------- */

typedef struct srt_kernels {
    srt_isa isa;
    srt_pf_set pf; /* the software prefetch distances for this CPU, which setup copies into jobs */
    /* natural-order q8 of n (multiple of 32) values: q, d, sum per block */
    void (*act_q8)(int8_t *q, float *d, int32_t *sum, const float *x, int64_t n);
    /* reads n bytes (multiple of 64, 64-byte aligned); returns a checksum */
    uint64_t (*stream)(const uint8_t *p, size_t n);
    void (*rows_f32)(const srt_rows_job *j, int64_t i0, int64_t i1);
    void (*rows_q8_0)(const srt_rows_job *j, int64_t i0, int64_t i1);
    /* rows [i0, i1) of q8_0 for nvec inputs (prefill: j's y and xq unused): y[v][r] bit for bit as
     * rows_q8_0 with input xq[v]; NULL where the ISA has none (then rows_q8_0 per input) */
    void (*rows_q8_0_multi)(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec, int64_t i0,
                            int64_t i1);
    /* rows [i0, i1) (a multiple of 16 of them) for t's inputs with AMX tiles: y[v][r] bit for bit
     * rows_q8_0 with input v; NULL where the ISA has none */
    void (*rows_q8_0_tiles)(const srt_rows_job *j, const srt_q8_tiles *t, float *const *y, int64_t i0, int64_t i1);
    void (*rows_q4_0)(const srt_rows_job *j, int64_t i0, int64_t i1);
    void (*rows_kmi4r)(const srt_rows_job *j, int64_t i0, int64_t i1);
    /* the same for kmi4r (j->cols the padded count): bit for bit rows_kmi4r per input; NULL where none */
    void (*rows_kmi4r_multi)(const srt_rows_job *j, const srt_act *const *xq, float *const *y, int64_t nvec,
                             int64_t i0, int64_t i1);
    void (*axpy_q4_0t)(const srt_axpy_job *j, int64_t b0, int64_t b1);
    void (*kmi4)(const srt_kd_job *j, int64_t p0, int64_t p1, float *y);
    void (*kmi8)(const srt_kd_job *j, int64_t p0, int64_t p1, float *y); /* the same job, kmi8 bytes */
    /* kmi4 / kmi8 for t's inputs with AMX tiles: input v's K-blocks [kb0[v], kb1[v]) that hold a live neuron of it,
     * added into out[v] (outputs [j->o0, j->o1) only) from +0 as the kmi4 / kmi8 kernel adds them, so out[v] is
     * that kernel's over the list positions of those blocks, bit for bit (untouched when there are none); NULL
     * where none */
    void (*kmi4_tiles)(const srt_kd_job *j, const srt_kd_tiles *t, const int64_t *kb0, const int64_t *kb1,
                       float *const *out);
    void (*kmi8_tiles)(const srt_kd_job *j, const srt_kd_tiles *t, const int64_t *kb0, const int64_t *kb1,
                       float *const *out);
    void (*zigzag)(const srt_zz_job *j, const uint32_t *idx, int64_t first, int64_t n, float *y_rb);
    /* |x[i]| > t (t_vec NULL) or > t_vec[i]; returns the count */
    int64_t (*compact)(uint32_t *idx, const float *x, const float *t_vec, float t, int64_t n);
    /* the top k of score (srt_select_topk: ascending indices, ties to the lower index, NaN lowest; |score|
     * with SRT_SELECT_ABS) for 0 < k < n <= UINT32_MAX, with a workspace of 2n + 1 entries: every ISA's
     * selection is exact, so all return the same list */
    void (*select_topk)(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags, uint32_t *ws);
    /* a[i] = phi(u[i]): SiLU u / (1 + e^-u), or GELU-tanh */
    void (*act)(float *a, const float *u, int64_t n, bool gelu);
    /* one attention head over positions 0..n-1: s[t] = scale q.K_t, p = softmax(s) (s is overwritten by
     * p), out[0..hd) = sum_t p_t V_t; K_t = K + t * stride, V_t likewise */
    void (*attn_head)(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                      int64_t stride, int64_t hd, float scale);
    /* g heads sharing K and V (head h: q + h hd, s + h n, out + h hd), each bit for bit attn_head's;
     * NULL where none (srt_attention_group then runs attn_head per head) */
    void (*attn_group)(float *out, float *s, const float *q, const float *K, const float *V, int64_t n,
                       int64_t stride, int64_t hd, int64_t g, float scale);
    /* attn_group over an f16 cache: each K and V value widened to f32 as it is read, then attn_head's /
     * attn_group's operations in their order, so the result is theirs on the widened cache, bit for bit */
    void (*attn_group_h)(float *out, float *s, const float *q, const uint16_t *K, const uint16_t *V, int64_t n,
                         int64_t stride, int64_t hd, int64_t g, float scale);
    /* dst[i] = srt_fp32_to_fp16_sat(x[i]) for i < n, bit for bit (a NaN becomes the quiet NaN of its
     * sign): the f16 key/value cache's store */
    void (*f16_store)(uint16_t *dst, const float *x, int64_t n);
} srt_kernels;

/* The frozen table of an available ISA (reference entries first, then the
 * ISA's overrides), built once. */
const srt_kernels *srt_kernels_get(srt_isa isa);
const srt_kernels *srt_ctx_kernels(const srt_ctx *ctx);
float *srt_ctx_scratch(const srt_ctx *ctx, int tid, int64_t floats);
/* floats of scratch for the caller and the threads of one run together (at any thread count), grown
 * to that when smaller (so not during a run); NULL without the memory */
float *srt_ctx_shared(srt_ctx *ctx, int64_t floats);

/* The reference selection (kernels/srt_select.c: radix selection on the keys' bits), select_topk's
 * contract; ws NULL recomputes the keys on every pass instead. */
void srt_select_radix(uint32_t *idx, const float *score, int64_t n, int64_t k, unsigned flags, uint32_t *ws);
/* srt_select_topk_ws with kt's selection (decode: its context's ISA). */
srt_status srt_select_topk_kt(const srt_kernels *kt, uint32_t *idx, const float *score, int64_t n, int64_t k,
                              unsigned flags, uint32_t *ws);
/* The order-preserving key of a float for the selection (NaN lowest). */
static inline uint32_t srt_select_key(float v, unsigned flags) {
    uint32_t u;
    memcpy(&u, &v, 4);
    if (flags & SRT_SELECT_ABS) u &= 0x7fffffffu;
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Reference kernels (kernels/ref): the specification. */
void srt_ref_register(srt_kernels *k);
/* Overrides per ISA file. */
void srt_avx2_register(srt_kernels *k);
void srt_avx2_kmi4_register(srt_kernels *k);
void srt_avx512_register(srt_kernels *k);
void srt_avx512_kmi4_register(srt_kernels *k);
void srt_avx512_select_register(srt_kernels *k);
void srt_amx_register(srt_kernels *k); /* the q8_0 row and kmi4 / kmi8 tiles only: on top of avx512's */
void srt_neon_register(srt_kernels *k);
void srt_neon_kmi4_register(srt_kernels *k);
void srt_dotprod_register(srt_kernels *k);
void srt_i8mm_register(srt_kernels *k); /* the multi-input row kernels only: on top of dotprod's */

/* Shared scalar pieces of the reference, also used by SIMD files for tails. */
void srt_q4_0_quantize_block(uint8_t out[SRT_Q4_BYTES], const float *x, int64_t stride);
void srt_q8_0_quantize_block(uint8_t out[SRT_Q8_BYTES], const float *x);
/* One q8 activation block: returns d, writes q[32] and *sum. A block holding
 * a NaN or inf gets q = 0, sum = 0 and d = NaN (SRT_ACT_BAD_D, the same bits
 * on every ISA), so every product with it is NaN as in f32 arithmetic: the
 * non-finite value reaches the output instead of being clamped away, and no
 * integer conversion of a non-finite float ever happens. */
#define SRT_ACT_BAD_D (__builtin_nanf(""))
float srt_act_q8_block(int8_t *q, int32_t *sum, const float *x);
/* Natural block order -> kmi4r tile order (cap multiple of 512). */
void srt_act_tile(int8_t *dst, const int8_t *src, int64_t cap);

#endif
