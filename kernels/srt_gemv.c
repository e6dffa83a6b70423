/* srt_gemv.c - the public GEMV entry points: validate, then split the work
 * over the context's threads so that each output is computed by one thread
 * (rows, output tiles, or outputs of one of a live list's two fixed halves,
 * which are added once), and run the context's kernels on the shares. No
 * result depends on the thread count. Also the activation quantiser and the
 * compaction front ends. */
#include <stdatomic.h>
#include <string.h>

#include "srt_gemv.h"
#include "srt_kern.h"

/* ---- activations -------------------------------------------------------------- */

static int64_t act_cap(int64_t n) { return srt_round_up(n < 1 ? 1 : n, SRT_ACT_PAD); }

/* q (cap) + staging (cap), then d, sum (cap/32 each), lane_off (cap/4), lane_d (cap/16): every region 64-aligned */
size_t srt_act_bytes(int64_t n) {
    int64_t cap = act_cap(n);
    return (size_t)(2 * cap + 2 * srt_round_up(cap / SRT_QK * 4, 64) + cap + cap / 4);
}

srt_status srt_act_init(srt_act *a, void *mem, size_t bytes, int64_t n, srt_act_order order) {
    if (!a || !mem || n < 1 || n > (INT64_C(1) << 30) || ((uintptr_t)mem & 63) || bytes < srt_act_bytes(n) ||
        (order != SRT_ACT_NATURAL && order != SRT_ACT_TILED))
        return SRT_EINVAL;
    int64_t cap = act_cap(n), sb = srt_round_up(cap / SRT_QK * 4, 64);
    uint8_t *p = mem;
    a->n = n;
    a->cap = cap;
    a->order = order;
    a->q = (int8_t *)p;                          /* cap values, then cap bytes of staging */
    a->d = (float *)(void *)(p + 2 * cap);
    a->sum = (int32_t *)(void *)(p + 2 * cap + sb);
    a->lane_off = (int32_t *)(void *)(p + 2 * cap + 2 * sb);
    a->lane_d = (float *)(void *)(p + 3 * cap + 2 * sb);
    return SRT_OK;
}

/* The per-lane helpers of srt_act (srt.h), from q and d. */
static void act_lanes(srt_act *a) {
    for (int64_t l = 0; l < a->cap / 4; l++) {
        const int8_t *q = a->q + 4 * l;
        a->lane_off[l] = (q[0] + q[1] + q[2] + q[3]) * ((l & 4) ? 128 : 8);
    }
    for (int64_t l = 0; l < a->cap / 16; l++) {
        const int64_t b = (l / 16) * 8 + l % 8;
        a->lane_d[l] = (l & 8) ? a->d[b] * 0.0625f : a->d[b];
    }
}

srt_status srt_act_quantize(const srt_ctx *ctx, srt_act *a, const float *x) {
    if (!ctx || !a || !a->q || !x) return SRT_EINVAL;
    const srt_kernels *k = srt_ctx_kernels(ctx);
    int8_t *dst = a->order == SRT_ACT_TILED ? a->q + a->cap : a->q;
    const int64_t full = a->n / SRT_QK * SRT_QK, nb = (a->n + SRT_QK - 1) / SRT_QK;
    k->act_q8(dst, a->d, a->sum, x, full);
    if (full < a->n) {
        float tmp[SRT_QK] = {0};
        memcpy(tmp, x + full, (size_t)(a->n - full) * sizeof(float));
        a->d[nb - 1] = srt_act_q8_block(dst + full, a->sum + nb - 1, tmp);
    }
    memset(dst + nb * SRT_QK, 0, (size_t)(a->cap - nb * SRT_QK));
    for (int64_t b = nb; b < a->cap / SRT_QK; b++) {
        a->d[b] = 0.0f;
        a->sum[b] = 0;
    }
    if (a->order == SRT_ACT_TILED)
        srt_act_tile(a->q, dst, a->cap);
    else
        act_lanes(a);
    return SRT_OK;
}

/* ---- checks ----------------------------------------------------------------------- */

static srt_status check_list(const uint32_t *idx, int64_t n, int64_t limit) {
    if (n < 0 || n > limit || (n > 0 && !idx)) return SRT_EINVAL;
    for (int64_t i = 0; i < n; i++)
        if (idx[i] >= limit || (i > 0 && idx[i] <= idx[i - 1])) return SRT_EINVAL;
    return SRT_OK;
}

static srt_status check_input(const srt_matrix *m, const srt_input *x, const float *y) {
    srt_status st = srt_matrix_check(m);
    if (st != SRT_OK) return st;
    if (!x || !y) return SRT_EINVAL;
    const srt_layout_traits *t = srt_layout_get(m->layout);
    if (t->input == SRT_IN_F32) return x->f ? SRT_OK : SRT_EINVAL;
    srt_act_order want = t->input == SRT_IN_Q8_TILED ? SRT_ACT_TILED : SRT_ACT_NATURAL;
    if (!x->q || x->q->n != m->cols || x->q->order != want) return SRT_EINVAL;
    return SRT_OK;
}

static inline void split(int64_t n, int tid, int nth, int64_t *a, int64_t *b) {
    *a = n * tid / nth;
    *b = n * (tid + 1) / nth;
}

/* ---- row dot products: f32, q8_0, q4_0, kmi4r ------------------------------------- */

typedef struct rows_task {
    void (*fn)(const srt_rows_job *, int64_t, int64_t);
    srt_rows_job job;
    int64_t n;
} rows_task;

static srt_status rows_setup(const srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const uint32_t *idx,
                             int64_t n, float *y, rows_task *out) {
    const srt_kernels *k = srt_ctx_kernels(ctx);
    rows_task t = {0};
    t.job.y = y;
    t.job.w = m->data;
    t.job.cols = m->cols;
    t.job.xf = x->f;
    t.job.xq = x->q;
    t.job.idx = idx;
    t.n = n;
    switch (m->layout) {
    case SRT_LAYOUT_F32:
        t.fn = k->rows_f32;
        t.job.row_bytes = m->cols * 4;
        break;
    case SRT_LAYOUT_Q8_0:
        t.fn = k->rows_q8_0;
        t.job.row_bytes = m->cols / SRT_QK * SRT_Q8_BYTES;
        t.job.pf = k->pf.q8;
        break;
    case SRT_LAYOUT_Q4_0:
        t.fn = k->rows_q4_0;
        t.job.row_bytes = m->cols / SRT_QK * SRT_Q4_BYTES;
        t.job.pf = k->pf.kr;
        break;
    case SRT_LAYOUT_KMI4R:
        t.fn = k->rows_kmi4r;
        t.job.row_bytes = srt_kr_row_bytes(m->cols);
        t.job.cols = srt_kr_cols_pad(m->cols);
        t.job.pf = k->pf.kr;
        break;
    default: return SRT_ENOTSUP;
    }
    *out = t;
    return SRT_OK;
}

/* One GEMV's rows: each thread owns an even share and works through it from the front in pieces of
ROWS_PIECE; a thread done with its own takes the back half of what another has left (at least
ROWS_STEAL rows), so one that started late or whose reads were served slower does not leave the others
waiting at the end. The kernels prefetch on past a piece to the end of the owner's share (pf_end), so
the pieces read as one stream. Rows are independent: the split does not change a bit of the result. */
#define ROWS_PIECE 64
#define ROWS_STEAL 32
#define ROWS_MAX_THREADS 64

typedef struct rows_shared {
    rows_task t;
    int nth;
    /* per thread: the front (low 32 bits) and end (high 32) of what is left of its share */
    _Atomic uint64_t left[ROWS_MAX_THREADS];
} rows_shared;

static inline uint64_t rows_pack(int64_t f, int64_t e) { return (uint64_t)f | (uint64_t)e << 32; }

/* Takes a piece of share v: ROWS_PIECE rows from its front (own), or the back half of what is left
 * (steal, at least ROWS_STEAL); [*a, *b), or false when there is none. */
static bool rows_take(rows_shared *d, int v, bool own, int64_t *a, int64_t *b) {
    uint64_t cur = atomic_load_explicit(&d->left[v], memory_order_relaxed);
    for (;;) {
        const int64_t f = (int64_t)(cur & 0xffffffffu), e = (int64_t)(cur >> 32), n = e - f;
        if (n <= 0 || (!own && n < 2 * ROWS_STEAL)) return false;
        const int64_t c = own ? (n < ROWS_PIECE ? n : ROWS_PIECE) : n / 2;
        const uint64_t nxt = own ? rows_pack(f + c, e) : rows_pack(f, e - c);
        if (atomic_compare_exchange_weak_explicit(&d->left[v], &cur, nxt, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *a = own ? f : e - c, *b = own ? f + c : e;
            return true;
        }
    }
}

static void rows_shared_thread(void *arg, int tid, int nth) {
    rows_shared *d = arg;
    srt_rows_job job = d->t.job;
    int64_t a, b, s0, s1;
    split(d->t.n, tid, nth, &s0, &s1);
    if (nth == 1 || d->nth != nth) { /* one thread (or more than the shares hold): the even split */
        if (s1 > s0) d->t.fn(&job, s0, s1);
        return;
    }
    job.pf_end = s1;
    while (rows_take(d, tid, true, &a, &b)) d->t.fn(&job, a, b);
    for (int k = 1; k < nth; k++) { /* then the others' backs, nearest first */
        const int v = (tid + k) % nth;
        job.pf_end = 0;
        while (rows_take(d, v, false, &a, &b)) d->t.fn(&job, a, b);
    }
}

static srt_status rows_run(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const uint32_t *idx, int64_t n,
                           float *y) {
    rows_shared d;
    srt_status st = rows_setup(ctx, m, x, idx, n, y, &d.t);
    if (st != SRT_OK) return st;
    const int nth = srt_ctx_threads(ctx);
    d.nth = nth <= ROWS_MAX_THREADS && n <= INT32_MAX ? nth : 0;
    for (int t = 0; t < d.nth; t++) {
        int64_t s0, s1;
        split(n, t, nth, &s0, &s1);
        atomic_init(&d.left[t], rows_pack(s0, s1));
    }
    srt_ctx_run(ctx, rows_shared_thread, &d);
    return SRT_OK;
}

srt_status srt_gemv_rows(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y) {
    srt_status st = ctx ? check_input(m, x, y) : SRT_EINVAL;
    return st != SRT_OK ? st : rows_run(ctx, m, x, NULL, m->rows, y);
}

srt_status srt_gemv_rows_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                float *y) {
    srt_status st = ctx && live ? check_input(m, x, y) : SRT_EINVAL;
    if (st == SRT_OK) st = check_list(live->idx, live->n, m->rows);
    return st != SRT_OK ? st : rows_run(ctx, m, x, live->idx, live->n, y);
}

/* ---- several inputs (prefill): row layouts take blocks of rows for every input in turn,
 * so a block is read from memory once and from cache for the other inputs; each row's
 * result is the single-input kernel's, bit for bit ---- */

#define BATCH_ROWS 32

#define BATCH_MAX 64 /* inputs one multi-input kernel call takes (more: the single-input kernel per input) */

typedef struct batch_task {
    rows_task t;
    const srt_input *x;
    const srt_live *live; /* per input, or NULL: every row for every input */
    float *const *y;
    int64_t nvec;
    void (*multi)(const srt_rows_job *, const srt_act *const *, float *const *, int64_t, int64_t, int64_t);
    /* q8_0 with AMX: the inputs packed (nvec <= SRT_TILE_INPUTS) and the tile kernel, or NULL */
    const srt_q8_tiles *tiles;
    void (*tiles_fn)(const srt_rows_job *, const srt_q8_tiles *, float *const *, int64_t, int64_t);
} batch_task;

/* Inputs x[0..nv) into t's AMX B tiles (srt_q8_tiles; inputs nv..15 zero). */
static void tiles_pack(srt_q8_tiles *t, const srt_input *x, int64_t nv) {
    for (int64_t b = 0; b < t->nblk; b++) {
        int8_t *q = t->q + 512 * b;
        float *d = t->d + SRT_TILE_INPUTS * b;
        for (int64_t v = 0; v < SRT_TILE_INPUTS; v++) {
            const int8_t *src = v < nv ? x[v].q->q + SRT_QK * b : NULL;
            for (int k = 0; k < SRT_QK / 4; k++) {
                if (src) memcpy(q + 64 * k + 4 * v, src + 4 * k, 4);
                else memset(q + 64 * k + 4 * v, 0, 4);
            }
            d[v] = v < nv ? x[v].q->d[b] : 0.0f;
        }
    }
    t->nvec = nv;
}

/* The first position of the ascending list idx[0..n) whose row is >= r. */
static int64_t list_from(const uint32_t *idx, int64_t n, int64_t r) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((int64_t)idx[mid] < r) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void batch_thread(void *arg, int tid, int nth) {
    batch_task *b = arg;
    int64_t a, e;
    split(b->t.n, tid, nth, &a, &e);
    if (b->multi) { /* q8_0, kmi4r: a block of rows for several inputs per kernel call */
        const srt_act *xq[BATCH_MAX];
        float *ys[BATCH_MAX];
        for (int64_t v = 0; v < b->nvec; v++) xq[v] = b->x[v].q, ys[v] = b->y[v];
        if (b->tiles) { /* whole tiles of 16 rows with AMX, the last rows with the multi-input kernel */
            const int64_t a16 = a + (e - a) / 16 * 16;
            if (a16 > a) b->tiles_fn(&b->t.job, b->tiles, ys, a, a16);
            a = a16;
        }
        for (int64_t r = a; r < e; r += BATCH_ROWS)
            b->multi(&b->t.job, xq, ys, b->nvec, r, r + BATCH_ROWS < e ? r + BATCH_ROWS : e);
        return;
    }
    /* each input's live rows in the block (list positions pos[v] up to the block's end) */
    int64_t pos[BATCH_MAX] = {0}; /* b->live: nvec <= BATCH_MAX */
    for (int64_t v = 0; b->live && v < b->nvec; v++)
        pos[v] = b->live[v].idx ? list_from(b->live[v].idx, b->live[v].n, a) : 0;
    for (int64_t r = a; r < e; r += BATCH_ROWS) {
        const int64_t r1 = r + BATCH_ROWS < e ? r + BATCH_ROWS : e;
        for (int64_t v = 0; v < b->nvec; v++) {
            srt_rows_job j = b->t.job;
            j.y = b->y[v];
            j.xf = b->x[v].f;
            j.xq = b->x[v].q;
            if (b->live && b->live[v].idx) { /* the live rows in [r, r1) */
                const uint32_t *idx = b->live[v].idx;
                int64_t p1 = pos[v];
                while (p1 < b->live[v].n && (int64_t)idx[p1] < r1) p1++;
                j.idx = idx;
                if (p1 > pos[v]) b->t.fn(&j, pos[v], p1);
                pos[v] = p1;
            } else {
                b->t.fn(&j, r, r1);
            }
        }
    }
}

static srt_status kd_batch(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live, int64_t nvec,
                           float *const *y);

/* q8_0 with AMX: every row for every input, 16 inputs per run, the inputs packed once per run into
 * tiles. With live lists the rows go to scratch outputs and only each input's live rows are copied
 * out (a row's value does not depend on which others are computed, so they are its sparse GEMV's);
 * that pays while the lists hold at least a quarter of all (input, row) pairs (the tiles' dense
 * work costs about a third of the single-input kernels' per pair). Returns false, having done
 * nothing, where it does not pay or memory is short. */
static bool tiles_run(srt_ctx *ctx, batch_task *b, const srt_matrix *m, bool sparse) {
    const int64_t nvec = b->nvec, rows = m->rows;
    int64_t pairs = 0;
    for (int64_t v = 0; sparse && v < nvec; v++) pairs += b->live[v].idx ? b->live[v].n : rows;
    if ((sparse && pairs * 4 < nvec * rows) || !srt_ctx_kernels(ctx)->rows_q8_0_multi) return false;
    srt_q8_tiles tiles = {0, m->cols / SRT_QK, NULL, NULL};
    tiles.q = srt_alloc((size_t)tiles.nblk * (512 + SRT_TILE_INPUTS * sizeof(float)));
    float *tmp = sparse ? srt_alloc(sizeof(float) * (size_t)(nvec * rows)) : NULL;
    if (!tiles.q || (sparse && !tmp)) {
        srt_free(tiles.q);
        srt_free(tmp);
        return false;
    }
    tiles.d = (float *)(void *)(tiles.q + 512 * tiles.nblk);
    float *yt[BATCH_MAX];
    for (int64_t v = 0; v < nvec; v++) yt[v] = sparse ? tmp + v * rows : b->y[v];
    batch_task t = *b;
    t.live = NULL, t.multi = srt_ctx_kernels(ctx)->rows_q8_0_multi, t.tiles = &tiles;
    for (int64_t v0 = 0; v0 < nvec; v0 += SRT_TILE_INPUTS) {
        tiles_pack(&tiles, b->x + v0, nvec - v0 < SRT_TILE_INPUTS ? nvec - v0 : SRT_TILE_INPUTS);
        t.x = b->x + v0, t.y = yt + v0, t.nvec = tiles.nvec;
        srt_ctx_run(ctx, batch_thread, &t);
    }
    for (int64_t v = 0; sparse && v < nvec; v++) {
        const srt_live *l = &b->live[v];
        if (!l->idx) memcpy(b->y[v], yt[v], sizeof(float) * (size_t)rows);
        for (int64_t i = 0; l->idx && i < l->n; i++) b->y[v][l->idx[i]] = yt[v][l->idx[i]];
    }
    srt_free(tiles.q);
    srt_free(tmp);
    return true;
}

srt_status srt_gemv_batch_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                 int64_t nvec, float *const *y) {
    if (!ctx || !x || !y || nvec < 0) return SRT_EINVAL;
    if (nvec == 0) return SRT_OK;
    for (int64_t v = 0; v < nvec; v++) {
        srt_status st = check_input(m, &x[v], y[v]);
        if (st != SRT_OK) return st;
    }
    const srt_layout_traits *t = srt_layout_get(m->layout);
    bool sparse = false;
    for (int64_t v = 0; live && v < nvec; v++) {
        if (!live[v].idx) continue;
        srt_status st = check_list(live[v].idx, live[v].n, t->sparse == SRT_SPARSE_ROWS ? m->rows : m->cols);
        if (st != SRT_OK) return st;
        sparse = true;
    }
    if (m->layout == SRT_LAYOUT_KMI4 || m->layout == SRT_LAYOUT_KMI8) return kd_batch(ctx, m, x, sparse ? live : NULL, nvec, y);
    if (t->sparse != SRT_SPARSE_ROWS || (sparse && nvec > BATCH_MAX)) { /* one GEMV per input */
        for (int64_t v = 0; v < nvec; v++) {
            srt_status st = live && live[v].idx ? t->gemv_sparse(ctx, m, &x[v], &live[v], y[v]) : t->gemv(ctx, m, &x[v], y[v]);
            if (st != SRT_OK) return st;
        }
        return SRT_OK;
    }
    batch_task b = {{0}, x, sparse ? live : NULL, y, nvec, NULL, NULL, srt_ctx_kernels(ctx)->rows_q8_0_tiles};
    srt_status st = rows_setup(ctx, m, &x[0], NULL, m->rows, y[0], &b.t);
    if (st != SRT_OK) return st;
    if (!sparse && nvec <= BATCH_MAX) {
        if (m->layout == SRT_LAYOUT_Q8_0) b.multi = srt_ctx_kernels(ctx)->rows_q8_0_multi;
        if (m->layout == SRT_LAYOUT_KMI4R) b.multi = srt_ctx_kernels(ctx)->rows_kmi4r_multi;
    }
    if (m->layout == SRT_LAYOUT_Q8_0 && b.tiles_fn && nvec > 1 && nvec <= BATCH_MAX && tiles_run(ctx, &b, m, sparse))
        return SRT_OK;
    srt_ctx_run(ctx, batch_thread, &b); /* no AMX (or no memory for it): the multi-input kernel, or one per input */
    return SRT_OK;
}

srt_status srt_gemv_batch(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, int64_t nvec, float *const *y) {
    return srt_gemv_batch_sparse(ctx, m, x, NULL, nvec, y);
}

/* ---- q4_0t axpy scatter -------------------------------------------------------------- */

typedef struct axpy_task {
    void (*fn)(const srt_axpy_job *, int64_t, int64_t);
    srt_axpy_job job;
    int64_t nblocks;
} axpy_task;

static void axpy_thread(void *arg, int tid, int nth) {
    axpy_task *t = arg;
    int64_t a, b;
    split(t->nblocks, tid, nth, &a, &b);
    if (b > a) t->fn(&t->job, a, b);
}

static srt_status axpy_run(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const uint32_t *idx, int64_t n,
                           float *y) {
    axpy_task t = {srt_ctx_kernels(ctx)->axpy_q4_0t, {y, m->data, m->rows / SRT_QK * SRT_Q4_BYTES, x->f, idx, n},
                   m->rows / SRT_QK};
    srt_ctx_run(ctx, axpy_thread, &t);
    return SRT_OK;
}

srt_status srt_gemv_axpy(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y) {
    srt_status st = ctx ? check_input(m, x, y) : SRT_EINVAL;
    return st != SRT_OK ? st : axpy_run(ctx, m, x, NULL, m->cols, y);
}

srt_status srt_gemv_axpy_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                float *y) {
    srt_status st = ctx && live ? check_input(m, x, y) : SRT_EINVAL;
    if (st == SRT_OK) st = check_list(live->idx, live->n, m->cols);
    return st != SRT_OK ? st : axpy_run(ctx, m, x, live->idx, live->n, y);
}

/* ---- kmi4 / kmi8: the live list in two fixed halves (split at the K-block boundary at or after its
 * middle), each summed from +0 in list order, then y = first + second. The work is the two halves'
 * 128-output tiles in a row, dealt to the threads in contiguous shares: with two threads each takes a
 * half whole (whole neuron vectors: a split of the outputs instead, every thread reading part of
 * every vector, ran the TinyLlama down projection 3-7% slower at two threads), with one both, with
 * more each a range of one half's outputs or the end of the first and the start of the second. Every
 * output of a half is summed by one thread in list order and the halves are added once, so the
 * result does not depend on the thread count. ---- */

/* Position s of a list of n entries (channel idx[s], or s when idx is NULL) moved forward to the
 * start of a 32-channel block: kmi4 sums a block's live neurons in one integer sum. */
static int64_t block_boundary(const uint32_t *idx, int64_t n, int64_t s) {
#define CH(q) (idx ? (int64_t)idx[q] : (q))
    while (s > 0 && s < n && CH(s) / SRT_QK == CH(s - 1) / SRT_QK) s++;
#undef CH
    return s;
}

/* Where a list of n entries is cut into its halves. */
static int64_t kd_mid(const uint32_t *idx, int64_t n) { return block_boundary(idx, n, n / 2); }

/* Thread tid's outputs [*o0, *o1) of half h of job j (multiples of SRT_KD_TILE; the last may pass
 * the last output); false when it has none. */
static bool kd_share(const srt_kd_job *j, int h, int tid, int nth, int64_t *o0, int64_t *o1) {
    const int64_t nt = (j->rows + SRT_KD_TILE - 1) / SRT_KD_TILE;
    int64_t a, b;
    split(2 * nt, tid, nth, &a, &b);
    a = a - h * nt < 0 ? 0 : a - h * nt > nt ? nt : a - h * nt;
    b = b - h * nt < 0 ? 0 : b - h * nt > nt ? nt : b - h * nt;
    *o0 = a * SRT_KD_TILE, *o1 = b * SRT_KD_TILE;
    return b > a;
}

/* y[v][o] += s[v rows + o]: the second halves added to the first. */
static void kd_add_halves(float *const *y, const float *s, int64_t nv, int64_t rows) {
    for (int64_t v = 0; v < nv; v++)
        for (int64_t o = 0; o < rows; o++) y[v][o] += s[v * rows + o];
}

typedef struct kd_task {
    void (*fn)(const srt_kd_job *, int64_t, int64_t, float *);
    srt_kd_job job;
    int64_t n, mid;
    float *y, *second;
} kd_task;

/* The kernel and the job (no input yet) of a kmi4 / kmi8 matrix. */
static void kd_setup(const srt_ctx *ctx, const srt_matrix *m, void (**fn)(const srt_kd_job *, int64_t, int64_t, float *),
                     srt_kd_job *job) {
    const srt_kernels *k = srt_ctx_kernels(ctx);
    const bool k8 = m->layout == SRT_LAYOUT_KMI8;
    *fn = k8 ? k->kmi8 : k->kmi4;
    *job = (srt_kd_job){m->rows, m->data, k8 ? srt_k8_rows_pad(m->rows) : srt_kd_rows_pad(m->rows), m->cols / SRT_QK,
                        NULL, NULL, 0, NULL, 0, 0, 0, k->pf.kd, k->pf.kd_pass_tiles};
}

static void kd_thread(void *arg, int tid, int nth) {
    const kd_task *t = arg;
    srt_kd_job j[2] = {t->job, t->job};
    const bool on[2] = {kd_share(&j[0], 0, tid, nth, &j[0].o0, &j[0].o1), kd_share(&j[1], 1, tid, nth, &j[1].o0, &j[1].o1)};
    /* the first half's prefetch runs on into the second's when this thread goes on there with the same outputs */
    if (on[1] && j[1].o0 == j[0].o0 && j[1].o1 == j[0].o1) j[0].pf_end = t->n;
    if (on[0]) t->fn(&j[0], 0, t->mid, t->y);
    if (on[1]) t->fn(&j[1], t->mid, t->n, t->second);
}

static srt_status kd_run(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const uint32_t *idx, int64_t n,
                         float *y) {
    kd_task t = {NULL, {0}, n, kd_mid(idx, n), y, srt_ctx_shared(ctx, m->rows)};
    if (!t.second) return SRT_ENOMEM;
    kd_setup(ctx, m, &t.fn, &t.job);
    t.job.h = x->q, t.job.idx = idx, t.job.n_idx = n;
    srt_ctx_run(ctx, kd_thread, &t);
    kd_add_halves(&y, t.second, 1, m->rows);
    return SRT_OK;
}

/* ---- kmi4 / kmi8 for several inputs (prefill's down projection): each thread takes kd_run's shares
 * of the halves for every input, but runs each half K window by K window (KD_WINDOW bytes of
 * K-blocks), every input's part of a window before the next window, so a window comes from memory
 * once and from the core's L2 for the other inputs. Each window's call starts from the sums the
 * earlier windows left (srt_kd_job.y0), in the order of one call over the half, and the halves are
 * added as kd_run adds them: each input's result is kd_run's, bit for bit. */

#define KD_WINDOW (256 * 1024)

typedef struct kdb_task {
    void (*fn)(const srt_kd_job *, int64_t, int64_t, float *);
    srt_kd_job job; /* the matrix; h, idx, n_idx and y0 per call */
    const srt_input *x;
    const srt_live *live; /* per input (idx NULL: dense), or NULL: all dense */
    float *const *y;
    float *second; /* nvec x rows: the second halves */
    int64_t nvec, win; /* win: K-blocks per window */
} kdb_task;

/* Half h of input v's list (live: per input, NULL or an entry with no list: all cols channels):
 * positions [*p, *e), the list's length *n; returns the list (NULL: dense). */
static const uint32_t *kd_half(const srt_live *live, int64_t v, int64_t cols, int h, int64_t *p, int64_t *e,
                               int64_t *n) {
    const uint32_t *idx = live && live[v].idx ? live[v].idx : NULL;
    *n = idx ? live[v].n : cols;
    const int64_t mid = kd_mid(idx, *n);
    *p = h ? mid : 0, *e = h ? *n : mid;
    return idx;
}

static void kdb_thread(void *arg, int tid, int nth) {
    const kdb_task *t = arg;
    const int64_t rows = t->job.rows;
    for (int h = 0; h < 2; h++) {
        srt_kd_job base = t->job;
        if (!kd_share(&base, h, tid, nth, &base.o0, &base.o1)) continue;
        int64_t p[BATCH_MAX], e[BATCH_MAX], n[BATCH_MAX], kb = t->job.nblk;
        const uint32_t *idx[BATCH_MAX];
        float *out[BATCH_MAX];
        bool started[BATCH_MAX];
        for (int64_t v = 0; v < t->nvec; v++) {
            idx[v] = kd_half(t->live, v, t->job.nblk * SRT_QK, h, &p[v], &e[v], &n[v]);
            out[v] = h ? t->second + v * rows : t->y[v];
            started[v] = false;
            if (p[v] < e[v]) {
                const int64_t k0 = (idx[v] ? (int64_t)idx[v][p[v]] : p[v]) / SRT_QK;
                kb = k0 < kb ? k0 : kb;
            }
        }
        for (; kb < t->job.nblk; kb += t->win) {
            const int64_t ch1 = (kb + t->win) * SRT_QK; /* the window's end, a K-block boundary */
            for (int64_t v = 0; v < t->nvec; v++) {
                int64_t q = p[v];
                if (idx[v])
                    while (q < e[v] && (int64_t)idx[v][q] < ch1) q++;
                else
                    q = e[v] < ch1 ? e[v] : ch1 > q ? ch1 : q;
                if (q == p[v]) continue;
                srt_kd_job j = base;
                j.h = t->x[v].q, j.idx = idx[v], j.n_idx = n[v], j.y0 = started[v] ? out[v] : NULL;
                t->fn(&j, p[v], q, out[v]);
                started[v] = true, p[v] = q;
            }
        }
        const int64_t o1 = base.o1 < rows ? base.o1 : rows;
        for (int64_t v = 0; v < t->nvec; v++) /* an empty half: zeros, as the kernel writes for one */
            if (!started[v]) memset(out[v] + base.o0, 0, (size_t)(o1 - base.o0) * sizeof(float));
    }
}

/* ---- kmi4 / kmi8 with AMX (prefill's down projection): 16 inputs per run and every K-block read once for
 * all of them; each thread takes kd_run's shares of the halves for every input, over the K-blocks of
 * each half, and the halves are added as kd_run adds them: each input's result is kd_run's, bit for
 * bit ---- */

typedef struct kdt_task {
    void (*fn)(const srt_kd_job *, const srt_kd_tiles *, const int64_t *, const int64_t *, float *const *);
    srt_kd_job job;
    const srt_kd_tiles *tiles;
    const srt_live *live; /* per input (idx NULL: dense), or NULL: all dense */
    float *const *y;
    float *second; /* nvec x rows: the second halves */
} kdt_task;

static void kdt_thread(void *arg, int tid, int nth) {
    const kdt_task *t = arg;
    const int64_t rows = t->job.rows, cols = t->job.nblk * SRT_QK;
    for (int h = 0; h < 2; h++) {
        srt_kd_job j = t->job;
        if (!kd_share(&j, h, tid, nth, &j.o0, &j.o1)) continue;
        int64_t kb0[SRT_TILE_INPUTS], kb1[SRT_TILE_INPUTS];
        float *out[SRT_TILE_INPUTS];
        for (int64_t v = 0; v < t->tiles->nvec; v++) {
            int64_t p, e, n;
            const uint32_t *idx = kd_half(t->live, v, cols, h, &p, &e, &n);
            kb0[v] = kb1[v] = 0;
            if (p < e) kb0[v] = (idx ? idx[p] : p) / SRT_QK, kb1[v] = (idx ? idx[e - 1] : e - 1) / SRT_QK + 1;
            out[v] = h ? t->second + v * rows : t->y[v];
        }
        t->fn(&j, t->tiles, kb0, kb1, out);
        const int64_t o1 = j.o1 < rows ? j.o1 : rows;
        for (int64_t v = 0; v < t->tiles->nvec; v++) /* an empty half: zeros, as the kernel writes for one */
            if (kb0[v] == kb1[v]) memset(out[v] + j.o0, 0, (size_t)(o1 - j.o0) * sizeof(float));
    }
}

/* Inputs x[0..nv) (live lists or NULL) into t's A tiles (srt_kd_tiles). */
static void kd_tiles_pack(srt_kd_tiles *t, int64_t nblk, const srt_input *x, const srt_live *live, int64_t nv) {
    memset(t->q, 0, (size_t)(512 * nblk));
    memset(t->live, 0, (size_t)(SRT_TILE_INPUTS * nblk));
    for (int64_t v = 0; v < nv; v++) {
        const srt_act *h = x[v].q;
        const uint32_t *idx = live && live[v].idx ? live[v].idx : NULL;
        for (int64_t kb = 0; kb < nblk; kb++) t->d[SRT_TILE_INPUTS * kb + v] = h->d[kb];
        if (!idx) {
            for (int64_t kb = 0; kb < nblk; kb++) {
                memcpy(t->q + 512 * kb + SRT_QK * v, h->q + SRT_QK * kb, SRT_QK);
                t->live[SRT_TILE_INPUTS * kb + v] = 1;
            }
            continue;
        }
        for (int64_t i = 0; i < live[v].n; i++) {
            const int64_t ch = idx[i], kb = ch / SRT_QK;
            t->q[512 * kb + SRT_QK * v + ch % SRT_QK] = h->q[ch];
            t->live[SRT_TILE_INPUTS * kb + v] = 1;
        }
    }
    for (int64_t v = nv; v < SRT_TILE_INPUTS; v++)
        for (int64_t kb = 0; kb < nblk; kb++) t->d[SRT_TILE_INPUTS * kb + v] = 0.0f;
    t->nvec = nv;
}

/* kd_batch's run with AMX tiles for g inputs at a time (second: g x rows floats); false (nothing done)
 * without them or the memory for the packed inputs. */
static bool kd_tiles_run(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live, int64_t nvec,
                         float *const *y, int64_t g, float *second) {
    const srt_kernels *k = srt_ctx_kernels(ctx);
    void (*tiles_fn)(const srt_kd_job *, const srt_kd_tiles *, const int64_t *, const int64_t *, float *const *) =
        m->layout == SRT_LAYOUT_KMI8 ? k->kmi8_tiles : k->kmi4_tiles;
    if (!tiles_fn || nvec < 2) return false;
    /* The tiles cost about the same at any density (the K-blocks any token needs, for every token), the
     * single-token kernels about in proportion to it: the tiles pay from about 60% of the (token, neuron)
     * pairs live for kmi4 and 20% for kmi8 (prefill at the TinyLlama shape: kmi4's down 3.8 ms a token
     * either way at 0.5, kmi8's 3.5 against 3.5 at 0.1 and 4.7 against 7.6 at 0.5) */
    int64_t pairs = 0;
    for (int64_t v = 0; v < nvec; v++) pairs += live && live[v].idx ? live[v].n : m->cols;
    if (pairs * 5 < nvec * m->cols * (m->layout == SRT_LAYOUT_KMI8 ? 1 : 3)) return false; /* fifths */
    const int64_t nblk = m->cols / SRT_QK;
    srt_kd_tiles tiles = {0, srt_alloc((size_t)nblk * (512 + SRT_TILE_INPUTS * (sizeof(float) + 1))), NULL, NULL};
    if (!tiles.q) return false;
    tiles.d = (float *)(void *)(tiles.q + 512 * nblk);
    tiles.live = (uint8_t *)(tiles.d + SRT_TILE_INPUTS * nblk);
    kdt_task t = {tiles_fn, {0}, &tiles, NULL, NULL, second};
    void (*fn)(const srt_kd_job *, int64_t, int64_t, float *);
    kd_setup(ctx, m, &fn, &t.job);
    if (g > SRT_TILE_INPUTS) g = SRT_TILE_INPUTS;
    for (int64_t v0 = 0; v0 < nvec; v0 += g) {
        const int64_t nv = nvec - v0 < g ? nvec - v0 : g;
        kd_tiles_pack(&tiles, nblk, x + v0, live ? live + v0 : NULL, nv);
        t.live = live ? live + v0 : NULL, t.y = y + v0;
        srt_ctx_run(ctx, kdt_thread, &t);
        kd_add_halves(t.y, second, nv, m->rows);
    }
    srt_free(tiles.q);
    return true;
}

static srt_status kd_batch(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live, int64_t nvec,
                           float *const *y) {
    const int64_t nblk = m->cols / SRT_QK, bb = (int64_t)(m->bytes / (size_t)nblk);
    int64_t g = nvec < BATCH_MAX ? nvec : BATCH_MAX; /* inputs per run: their second halves fit the scratch */
    float *second = NULL;
    while (!(second = srt_ctx_shared(ctx, g * m->rows)) && g > 1) g = (g + 1) / 2;
    if (!second) return SRT_ENOMEM;
    if (kd_tiles_run(ctx, m, x, live, nvec, y, g, second)) return SRT_OK;
    kdb_task t = {NULL, {0}, NULL, NULL, NULL, second, 0, KD_WINDOW / bb > 1 ? KD_WINDOW / bb : 1};
    kd_setup(ctx, m, &t.fn, &t.job);
    for (int64_t v0 = 0; v0 < nvec; v0 += g) {
        t.x = x + v0, t.live = live ? live + v0 : NULL, t.y = y + v0, t.nvec = nvec - v0 < g ? nvec - v0 : g;
        srt_ctx_run(ctx, kdb_thread, &t);
        kd_add_halves(t.y, second, t.nvec, m->rows);
    }
    return SRT_OK;
}

srt_status srt_gemv_kd(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y) {
    srt_status st = ctx ? check_input(m, x, y) : SRT_EINVAL;
    return st != SRT_OK ? st : kd_run(ctx, m, x, NULL, m->cols, y);
}

srt_status srt_gemv_kd_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                float *y) {
    srt_status st = ctx && live ? check_input(m, x, y) : SRT_EINVAL;
    if (st == SRT_OK) st = check_list(live->idx, live->n, m->cols);
    return st != SRT_OK ? st : kd_run(ctx, m, x, live->idx, live->n, y);
}


/* ---- zigzag / stripe: each thread owns whole chunks of 8 groups (256 output
 * rows of one row-block; a contiguous range of chunks weighted by their live
 * channels, so stripes' uneven lists balance) and reads every live channel
 * for them. No partial outputs: the result does not depend on the thread
 * count (a column split would add partial sums in another order, and the
 * next layer's quantisation can turn that last bit into a step). ---- */

typedef struct zz_task {
    void (*fn)(const srt_zz_job *, const uint32_t *, int64_t, int64_t, float *);
    const srt_matrix *m;
    const float *x;
    float *y;
    const uint32_t *idx; /* NULL: dense */
    int64_t n;
    const int64_t *offsets; /* stripes */
} zz_task;

static void zz_thread(void *arg, int tid, int nth) {
    const zz_task *t = arg;
    const int64_t R = t->m->group, rows = t->m->rows, rbb = srt_zz_rb_bytes(t->m->cols, R), G = R / SRT_QK;
    const int64_t nrb = (rows + R - 1) / R, nck = (G + 7) / 8;
#define ZZ_LIVE(rb) (t->offsets ? t->offsets[(rb) + 1] - t->offsets[rb] : t->n)
    int64_t total = 0;
    for (int64_t rb = 0; rb < nrb; rb++) total += nck * (ZZ_LIVE(rb) + SRT_QK); /* + a chunk's fixed work */
    const int64_t lo = total * tid / nth, hi = total * (tid + 1) / nth;
    _Alignas(64) float tmp[4096];
    int64_t cum = 0;
    for (int64_t rb = 0; rb < nrb && cum < hi; cum += nck * (ZZ_LIVE(rb) + SRT_QK), rb++) {
        /* this thread's chunks of the row-block, [c0, c1), in one call: the kernels read each live
         * channel's piece for all of them in one pass */
        const int64_t cost = ZZ_LIVE(rb) + SRT_QK;
        int64_t c0 = -1, c1 = -1; /* the chunks whose cost starts in [lo, hi): a contiguous range */
        for (int64_t ck = 0; ck < nck; ck++)
            if (cum + ck * cost >= lo && cum + ck * cost < hi) {
                if (c0 < 0) c0 = ck;
                c1 = ck + 1;
            }
        if (c0 < 0) continue;
        const int64_t g0 = 8 * c0, g1 = 8 * c1 < G ? 8 * c1 : G, s = t->offsets ? t->offsets[rb] : 0;
        const srt_zz_job job = {(const uint8_t *)t->m->data + rb * rbb, t->m->cols, R, t->x, g0, g1};
        const int64_t r0 = rb * R + SRT_QK * g0, r1 = rb * R + SRT_QK * g1;
        if (r1 <= rows) {
            t->fn(&job, t->idx, s, ZZ_LIVE(rb), t->y + rb * R);
        } else { /* the last row-block's padding rows go to tmp */
            t->fn(&job, t->idx, s, ZZ_LIVE(rb), tmp);
            if (r0 < rows) memcpy(t->y + r0, tmp + SRT_QK * g0, (size_t)(rows - r0) * sizeof(float));
        }
    }
#undef ZZ_LIVE
}

static srt_status zz_run(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const uint32_t *idx, int64_t n,
                         const int64_t *offsets, float *y) {
    zz_task t = {srt_ctx_kernels(ctx)->zigzag, m, x->f, y, idx, n, offsets};
    srt_ctx_run(ctx, zz_thread, &t);
    return SRT_OK;
}

srt_status srt_gemv_zigzag(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y) {
    srt_status st = ctx ? check_input(m, x, y) : SRT_EINVAL;
    return st != SRT_OK ? st : zz_run(ctx, m, x, NULL, m->cols, NULL, y);
}

bool srt_zz_reads_all(const srt_ctx *ctx, const srt_matrix *m, int64_t n) {
    /* zz_dense_above is the line for 128-byte pieces (256-row row-blocks); pieces of 256 bytes and
     * more, read in one pass, lose to the whole matrix only at twice that fraction (Zen 4, bench
     * 5632 -> 2048, 1 thread: sparse and dense even at 0.35 live for 256-row blocks, 0.7 for 512, 0.8
     * for 1024) */
    const double f = (double)srt_ctx_kernels(ctx)->pf.zz_dense_above * (m->group >= 512 ? 2.0 : 1.0);
    return (double)n > f * (double)m->cols;
}

srt_status srt_gemv_zigzag_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                  float *y) {
    srt_status st = ctx && live ? check_input(m, x, y) : SRT_EINVAL;
    if (st == SRT_OK && m->layout != SRT_LAYOUT_ZIGZAG) st = SRT_ENOTSUP;
    if (st == SRT_OK) st = check_list(live->idx, live->n, m->cols);
    if (st != SRT_OK) return st;
    /* Many live channels: every channel read, the dead ones as zeros. A run's activations are
     * quantised by its largest |x s| and a zero adds nothing to any sum, so the bits are the sparse
     * kernel's (test_prefetch checks it at every ISA, test_run_routers in decode); only the order of the
     * reads changes. */
    float *xz = srt_zz_reads_all(ctx, m, live->n) ? srt_ctx_shared(ctx, m->cols) : NULL;
    if (!xz) return zz_run(ctx, m, x, live->idx, live->n, NULL, y);
    memset(xz, 0, (size_t)m->cols * sizeof(float));
    for (int64_t i = 0; i < live->n; i++) xz[live->idx[i]] = x->f[live->idx[i]];
    const srt_input in = {xz, NULL};
    return zz_run(ctx, m, &in, NULL, m->cols, NULL, y);
}

srt_status srt_gemv_stripe_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                  float *y) {
    srt_status st = ctx && live && live->offsets ? check_input(m, x, y) : SRT_EINVAL;
    if (st != SRT_OK) return st;
    const int64_t nrb = (m->rows + m->group - 1) / m->group;
    if (live->offsets[0] != 0 || live->offsets[nrb] != live->n || live->n < 0 || (live->n > 0 && !live->idx))
        return SRT_EINVAL;
    for (int64_t s = 0; s < nrb; s++) {
        int64_t a = live->offsets[s], b = live->offsets[s + 1];
        if (b < a || b > live->n) return SRT_EINVAL;
        st = check_list(live->idx + a, b - a, m->cols);
        if (st != SRT_OK) return st;
    }
    return zz_run(ctx, m, x, live->idx, live->n, live->offsets, y);
}

/* ---- streaming read (the benchmark floor) ---------------------------------------------- */

typedef struct stream_task {
    const srt_kernels *k;
    const uint8_t *p;
    size_t n;
    uint64_t sum[64];
} stream_task;

static void stream_thread(void *arg, int tid, int nth) {
    stream_task *t = arg;
    const size_t lines = t->n / 64, a = lines * (size_t)tid / (size_t)nth, b = lines * (size_t)(tid + 1) / (size_t)nth;
    uint64_t s = t->k->stream(t->p + a * 64, (b - a) * 64);
    if (tid < 64) t->sum[tid] = s;
}

uint64_t srt_stream_read(srt_ctx *ctx, const void *p, size_t n) {
    if (!ctx || !p || ((uintptr_t)p & 63)) return 0;
    stream_task t = {srt_ctx_kernels(ctx), p, n, {0}};
    srt_ctx_run(ctx, stream_thread, &t);
    uint64_t s = 0;
    for (int i = 0; i < 64; i++) s ^= t.sum[i];
    return s;
}

/* ---- compaction --------------------------------------------------------------------- */

int64_t srt_compact(const srt_ctx *ctx, uint32_t *idx, const float *x, int64_t n, float t) {
    if (!ctx || !idx || !x || n <= 0) return 0;
    return srt_ctx_kernels(ctx)->compact(idx, x, NULL, t, n);
}

int64_t srt_compact_vec(const srt_ctx *ctx, uint32_t *idx, const float *x, const float *t, int64_t n) {
    if (!ctx || !idx || !x || !t || n <= 0) return 0;
    return srt_ctx_kernels(ctx)->compact(idx, x, t, 0.0f, n);
}

/* ---- activation and attention -------------------------------------------------------- */

void srt_activate(const srt_ctx *ctx, float *a, const float *u, int64_t n, bool gelu) {
    if (ctx && a && u && n > 0) srt_ctx_kernels(ctx)->act(a, u, n, gelu);
}

void srt_attention_head(const srt_ctx *ctx, float *out, float *p, const float *q, const float *K, const float *V,
                        int64_t n, int64_t stride, int64_t hd, float scale) {
    if (ctx && out && p && q && K && V && n > 0 && hd > 0 && stride >= hd)
        srt_ctx_kernels(ctx)->attn_head(out, p, q, K, V, n, stride, hd, scale);
}

void srt_attention_group(const srt_ctx *ctx, float *out, float *p, const float *q, const float *K, const float *V,
                         int64_t n, int64_t stride, int64_t hd, int64_t g, float scale) {
    if (!ctx || !out || !p || !q || !K || !V || n <= 0 || hd <= 0 || stride < hd || g <= 0) return;
    const srt_kernels *k = srt_ctx_kernels(ctx);
    if (k->attn_group) {
        k->attn_group(out, p, q, K, V, n, stride, hd, g, scale);
        return;
    }
    for (int64_t h = 0; h < g; h++) k->attn_head(out + h * hd, p + h * n, q + h * hd, K, V, n, stride, hd, scale);
}

void srt_attention_group_h(const srt_ctx *ctx, float *out, float *p, const float *q, const uint16_t *K,
                           const uint16_t *V, int64_t n, int64_t stride, int64_t hd, int64_t g, float scale) {
    if (!ctx || !out || !p || !q || !K || !V || n <= 0 || hd <= 0 || stride < hd || g <= 0) return;
    srt_ctx_kernels(ctx)->attn_group_h(out, p, q, K, V, n, stride, hd, g, scale); /* every table has one (ref) */
}

void srt_f16_store(const srt_ctx *ctx, uint16_t *dst, const float *x, int64_t n) {
    if (ctx && dst && x && n > 0) srt_ctx_kernels(ctx)->f16_store(dst, x, n);
}
