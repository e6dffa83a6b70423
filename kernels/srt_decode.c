/* srt_decode.c - one decode step of an artifact (see srt_model.h): the
 * reference forward pass of calib/forward.c for a single token, with every
 * linear layer through its layout's kernels and the MLP routed per token. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>
#include <time.h>

#include "srt_kern.h"
#include "srt_model_internal.h"
#include "srt_ops.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* RMSNorm and RoPE: the definitions the reference forward pass uses too (srt_ops.h). */
static void rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) { (void)srt_rmsnorm(out, x, w, n, eps); }

static void rope(float *x, int64_t n_heads, int64_t hd, const float *c, const float *s, bool half_style) {
    srt_rope_rotate(x, n_heads, hd, c, s, half_style, false);
}

static void stale(srt_model *m) { m->act_src[0] = m->act_src[1] = NULL; }

/* The layout's input for x (quantised once per input vector and order). */
static srt_status input_for(srt_model *m, const srt_weight *w, const float *x, srt_input *in) {
    in->f = NULL;
    in->q = NULL;
    if (w->tr->input == SRT_IN_F32) {
        in->f = x;
        return SRT_OK;
    }
    int s = w->tr->input == SRT_IN_Q8_TILED ? 1 : 0;
    int64_t n = w->m.cols;
    if (m->act_src[s] != x || m->act_n[s] != n) {
        srt_status st = srt_act_init(&m->act[s], m->actmem[s], m->actbytes, n, s ? SRT_ACT_TILED : SRT_ACT_NATURAL);
        if (st == SRT_OK) st = srt_act_quantize(m->ctx, &m->act[s], x);
        if (st != SRT_OK) return st;
        m->act_src[s] = x;
        m->act_n[s] = n;
    }
    in->q = &m->act[s];
    return SRT_OK;
}

/* The bytes of n live rows / columns in `blocks` K-blocks of 32 (kmi4 / kmi8: each touched K-block's
 * scales too). */
static double live_bytes(const srt_weight *w, int64_t n, int64_t blocks) {
    const srt_matrix *mm = &w->m;
    if (w->tr->sparse == SRT_SPARSE_ROWS) return (double)n * (double)(mm->bytes / (size_t)mm->rows);
    if (mm->layout == SRT_LAYOUT_KMI4 || mm->layout == SRT_LAYOUT_KMI8) { /* vectors of rp / 2 or rp bytes */
        const bool k8 = mm->layout == SRT_LAYOUT_KMI8;
        const int64_t rp = k8 ? srt_k8_rows_pad(mm->rows) : srt_kd_rows_pad(mm->rows);
        return (double)n * (double)(k8 ? rp : rp / 2) + (double)blocks * (double)(2 * rp);
    }
    return (double)n * ((double)mm->bytes / (double)mm->cols);
}

/* Packed bytes a GEMV over w reads: all of them, or for the live list idx[0..n)
 * the live rows (row layouts), the live neurons' vectors and the scales of
 * every K-block they touch (kmi4), the live channels' share (zigzag; all of it when srt_zz_reads_all). */
static double bytes_read(const srt_model *m, const srt_weight *w, const uint32_t *idx, int64_t n) {
    if (!idx || (w->m.layout == SRT_LAYOUT_ZIGZAG && srt_zz_reads_all(m->ctx, &w->m, n))) return (double)w->m.bytes;
    int64_t blocks = 0; /* only kmi4 and kmi8 count them (a pass over the list per GEMV otherwise) */
    if (w->tr->sparse != SRT_SPARSE_ROWS && (w->m.layout == SRT_LAYOUT_KMI4 || w->m.layout == SRT_LAYOUT_KMI8))
        for (int64_t i = 0; i < n; i++) blocks += i == 0 || idx[i] / 32 != idx[i - 1] / 32;
    return live_bytes(w, n, blocks);
}

static srt_status mv(srt_model *m, const srt_weight *w, const float *x, float *y) {
    srt_input in;
    srt_status st = input_for(m, w, x, &in);
    m->tm.weight_bytes += bytes_read(m, w, NULL, 0);
    return st != SRT_OK ? st : w->tr->gemv(m->ctx, &w->m, &in, y);
}

static srt_status mv_sparse(srt_model *m, const srt_weight *w, const float *x, const uint32_t *idx, int64_t n,
                            float *y) {
    srt_input in;
    srt_live lv = {idx, n, NULL};
    srt_status st = input_for(m, w, x, &in);
    m->tm.weight_bytes += bytes_read(m, w, idx, n);
    return st != SRT_OK ? st : w->tr->gemv_sparse(m->ctx, &w->m, &in, &lv, y);
}

#define TRY(e)                                                                                                         \
    do {                                                                                                               \
        srt_status st_ = (e);                                                                                          \
        if (st_ != SRT_OK) return st_;                                                                                 \
    } while (0)

/* A linear layer on an input whose live coordinates are m->idx[0..n_live)
 * (the others are zero): column-sparse layouts read only those columns;
 * n_live < 0 means a dense input. */
static srt_status mv_in(srt_model *m, const srt_weight *w, const float *x, int64_t n_live, float *y) {
    if (n_live >= 0 && w->tr->sparse == SRT_SPARSE_COLS) return mv_sparse(m, w, x, m->idx, n_live, y);
    return mv(m, w, x, y);
}

/* Keeps the k largest |v[i]| of v[0..n) (others zeroed); their indices,
 * ascending, go to idx. */
static srt_status keep_topk(srt_model *m, float *v, int64_t n, int64_t k, uint32_t *idx) {
    srt_score_gate(m->score, v, NULL, n);
    TRY(srt_select_topk_kt(srt_ctx_kernels(m->ctx), idx, m->score, n, k, 0, m->sel_ws));
    srt_zero_dead(v, n, idx, k);
    return SRT_OK;
}

/* LaRoSA routing of a rotated block input z (dim values): only its K_in largest |z_k| stay, their
 * list in idx; *n_live gets K_in, or -1 (dense) when LaRoSA is off or keeps every input. Steps and
 * prefill (rotate_batch) both route through here. */
static srt_status larosa_inputs(srt_model *m, float *z, uint32_t *idx, int64_t *n_live) {
    *n_live = -1;
    if (!m->larosa || m->K_in >= m->cfg.dim) return SRT_OK;
    TRY(keep_topk(m, z, m->cfg.dim, m->K_in, idx));
    *n_live = m->K_in;
    return SRT_OK;
}

/* LaRoSA: m->xn <- z = R n(x) when the block input has a folded rotation,
 * then larosa_inputs; *n_live gets K_in, or -1 for a dense input. */
static srt_status rotate_input(srt_model *m, const srt_weight *R, int64_t *n_live) {
    *n_live = -1;
    if (!R->tr) return SRT_OK;
    int64_t D = m->cfg.dim;
    double t0 = now();
    stale(m);
    TRY(mv(m, R, m->xn, m->tmp));
    memcpy(m->xn, m->tmp, (size_t)D * sizeof(float));
    stale(m);
    TRY(larosa_inputs(m, m->xn, m->idx, n_live));
    m->tm.rotate += now() - t0;
    return SRT_OK;
}

/* dst[0..n) <- x with the entries |x_i| <= t zeroed (TEAL's rule, NaN dead; dst may be x) */
static void teal_copy(float *dst, const float *x, int64_t n, float t) {
    for (int64_t i = 0; i < n; i++) dst[i] = fabsf(x[i]) > t ? x[i] : 0.0f;
}

/* TEAL: keeps the entries of x[0..n) with |x_i| > t (others zeroed), their
 * indices in idx; returns the count, or -1 (dense) when t < 0. */
static int64_t teal_mask(srt_model *m, uint32_t *idx, float *x, int64_t n, float t) {
    if (!(t >= 0.0f)) return -1;
    int64_t k = srt_compact(m->ctx, idx, x, n, t);
    /* the dead entries zeroed by the list's own rule, |x_i| > t (NaN dead in both), in a loop the compiler
     * vectorises: walking the list (srt_zero_dead) mispredicted a branch on every other entry of a random
     * mask, 2.8% of a teal-cats token */
    teal_copy(x, x, n, t);
    return k;
}

/* TEAL's mask of x[0..n) into m->score, with no live list (m->idx may hold the neurons): the input of a
 * projection that reads every column (row-sparse or dense); x itself when t < 0 (dense). */
static const float *teal_masked(srt_model *m, const float *x, int64_t n, float t) {
    if (!(t >= 0.0f)) return x;
    teal_copy(m->score, x, n, t);
    stale(m);
    return m->score;
}

static const srt_weight *proj_w(const srt_layer_w *L, int p) {
    const srt_weight *w[SRT_NPROJ] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd};
    return w[p];
}

/* CWIC (srt_route_cwic): y = W_live (x - mean) + W mean, stripe by stripe. Row layouts compute each stripe's
 * rows on its live columns (the others zero), column-sparse layouts its live columns for every row (then keep
 * the stripe's rows), the rest the whole product. */
static srt_status cwic_mv(srt_model *m, int64_t l, const srt_weight *w, const srt_cwic_w *c, const float *x, float *y) {
    const int64_t in = w->cols, out = w->rows;
    m->lin_active[l] += (double)srt_route_cwic(m->cz, m->cidx, m->coff, x, c->mean, c->tau, in, out, c->S);
    for (int64_t s = 0; s < c->ns; s++) {
        const int64_t r0 = s * c->S, nr = out - r0 < c->S ? out - r0 : c->S, n = m->coff[s + 1] - m->coff[s];
        const uint32_t *live = m->cidx + m->coff[s];
        memset(m->czs, 0, (size_t)w->m.cols * sizeof(float));
        for (int64_t i = 0; i < n; i++) m->czs[live[i]] = m->cz[live[i]];
        stale(m); /* czs holds another stripe's input */
        if (w->tr->sparse == SRT_SPARSE_ROWS) {
            for (int64_t r = 0; r < nr; r++) m->crow[r] = (uint32_t)(r0 + r);
            TRY(mv_sparse(m, w, m->czs, m->crow, nr, y));
            continue;
        }
        if (n == 0)
            memset(m->ctmp + r0, 0, (size_t)nr * sizeof(float));
        else if (w->tr->sparse == SRT_SPARSE_COLS)
            TRY(mv_sparse(m, w, m->czs, live, n, m->ctmp));
        else
            TRY(mv(m, w, m->czs, m->ctmp));
        memcpy(y + r0, m->ctmp + r0, (size_t)nr * sizeof(float));
    }
    stale(m);
    for (int64_t r = 0; r < out; r++) y[r] += c->wmean[r];
    return SRT_OK;
}

srt_status srt_decode_cwic_prepare(srt_model *m) {
    const double bytes = m->tm.weight_bytes;
    for (int64_t l = 0; l < m->cfg.n_layers; l++)
        for (int p = 0; p < SRT_NPROJ; p++) {
            const srt_weight *w = proj_w(&m->layers[l], p);
            srt_cwic_w *c = &m->layers[l].cwic[p];
            if (!c->theta) continue;
            memset(m->czs, 0, (size_t)w->m.cols * sizeof(float));
            memcpy(m->czs, c->mean, (size_t)w->cols * sizeof(float));
            stale(m);
            TRY(mv(m, w, m->czs, m->ctmp));
            memcpy(c->wmean, m->ctmp, (size_t)w->rows * sizeof(float));
        }
    stale(m);
    m->tm.weight_bytes = bytes;
    return SRT_OK;
}

/* Projection p of layer l on x (n_live >= 0: x's live coordinates are m->idx[0..n_live), for column-sparse
 * layouts). The input routers route here: teal keeps the entries above the projection's threshold (in
 * m->score), cwic runs the projection's stripes; both count the parameters read in m->lin_active[l]. */
static srt_status lin(srt_model *m, int64_t l, int p, const float *x, int64_t n_live, float *y) {
    const srt_layer_w *L = &m->layers[l];
    const srt_weight *w = proj_w(L, p);
    const double all = (double)(w->rows * w->cols);
    if (m->mode == SRT_MODE_TEAL) {
        const float t = m->thr_l[l * SRT_NPROJ + p];
        if (!(t >= 0.0f)) {
            m->lin_active[l] += all;
            return mv(m, w, x, y);
        }
        memcpy(m->score, x, (size_t)w->m.cols * sizeof(float));
        int64_t k = teal_mask(m, m->idx, m->score, w->cols, t);
        stale(m);
        m->lin_active[l] += (double)(w->rows * k);
        return mv_in(m, w, m->score, k, y);
    }
    if (m->mode == SRT_MODE_CWIC) {
        if (L->cwic[p].theta) return cwic_mv(m, l, w, &L->cwic[p], x, y);
        m->lin_active[l] += all;
    }
    return mv_in(m, w, x, n_live, y);
}

typedef struct heads_task {
    srt_model *m;
    const void *K, *V; /* the layer's cache (f32, or f16 when m->kv_half), K/V head-major */
    int64_t n;          /* positions */
    float scale;
} heads_task;

static void heads_thread(void *arg, int tid, int nth) {
    const heads_task *t = arg;
    const srt_model *m = t->m;
    const int64_t H = m->cfg.n_heads, hd = m->cfg.head_dim, group = H / m->cfg.n_kv_heads;
    const int64_t hs = m->max_ctx * hd; /* a K/V head's values in one layer's cache */
    float *s = tid ? srt_ctx_scratch(m->ctx, tid, group * t->n) : m->s;
    /* the thread's heads, those of one K/V head at a time (they read its rows once) */
    for (int64_t h = H * tid / nth, h1 = H * (tid + 1) / nth; h < h1;) {
        const int64_t e = (h / group + 1) * group < h1 ? (h / group + 1) * group : h1;
        if (m->kv_half)
            srt_attention_group_h(m->ctx, m->att + h * hd, s, m->q + h * hd, (const uint16_t *)t->K + (h / group) * hs,
                                  (const uint16_t *)t->V + (h / group) * hs, t->n, hd, hd, e - h, t->scale);
        else
            srt_attention_group(m->ctx, m->att + h * hd, s, m->q + h * hd, (const float *)t->K + (h / group) * hs,
                                (const float *)t->V + (h / group) * hs, t->n, hd, hd, e - h, t->scale);
        h = e;
    }
}

/* q, kt, vt (biases added) -> RoPE at pos, the key and value into the cache,
 * the heads' outputs into m->att. */
static void attention_core(srt_model *m, int64_t l, int64_t pos) {
    const srt_model_config *c = &m->cfg;
    int64_t hd = c->head_dim, half = hd / 2;
    const float *cs = m->cos_t + pos * half, *sn = m->sin_t + pos * half;
    rope(m->q, c->n_heads, hd, cs, sn, c->rope_half);
    rope(m->kt, c->n_kv_heads, hd, cs, sn, c->rope_half);
    /* the cache is head-major (srt_model_internal.h): each K/V head's rows of a layer one run, which
     * its heads read as one stream (a position's rows of every head together made each head's pass a
     * strided read, 1.3-2x slower once a layer's cache outgrew L2) */
    const size_t esz = m->kv_half ? 2 : 4, rb = (size_t)hd * esz, hb = (size_t)m->max_ctx * rb;
    char *K = (char *)m->kc + (size_t)l * (size_t)c->n_kv_heads * hb, *V = (char *)m->vc + (size_t)l * (size_t)c->n_kv_heads * hb;
    for (int64_t g = 0; g < c->n_kv_heads; g++) {
        const size_t o = (size_t)g * hb + (size_t)pos * rb;
        if (m->kv_half) {
            srt_f16_store(m->ctx, (uint16_t *)(K + o), m->kt + g * hd, hd); /* nearest even, saturated */
            srt_f16_store(m->ctx, (uint16_t *)(V + o), m->vt + g * hd, hd);
        } else {
            memcpy(K + o, m->kt + g * hd, rb);
            memcpy(V + o, m->vt + g * hd, rb);
        }
    }
    m->tm.kv_bytes += 2.0 * (double)c->n_kv_heads * (double)(pos + 1) * (double)rb;
    heads_task t = {m, K, V, pos + 1, 1.0f / sqrtf((float)hd)};
    /* the heads over the pool when every thread has room for a K/V head's scores (room for the
     * context's every position, asked for once) */
    const int64_t group = c->n_heads / c->n_kv_heads;
    if (srt_ctx_threads(m->ctx) > 1 && !srt_ctx_scratch(m->ctx, 1, group * t.n))
        (void)srt_ctx_reserve(m->ctx, group * m->max_ctx);
    if (srt_ctx_threads(m->ctx) > 1 && srt_ctx_scratch(m->ctx, 1, group * t.n))
        srt_ctx_run(m->ctx, heads_thread, &t);
    else
        heads_thread(&t, 0, 1);
}

static void add_biases(srt_model *m, const srt_layer_w *L) {
    int64_t qd = m->cfg.n_heads * m->cfg.head_dim, kvd = m->cfg.n_kv_heads * m->cfg.head_dim;
    if (L->bq)
        for (int64_t i = 0; i < qd; i++) m->q[i] += L->bq[i];
    if (L->bk)
        for (int64_t i = 0; i < kvd; i++) m->kt[i] += L->bk[i];
    if (L->bv)
        for (int64_t i = 0; i < kvd; i++) m->vt[i] += L->bv[i];
}

static srt_status attention_block(srt_model *m, int64_t l, int64_t pos) {
    const srt_model_config *c = &m->cfg;
    const srt_layer_w *L = &m->layers[l];
    int64_t D = c->dim;
    double t0 = now();
    rmsnorm(m->xn, m->x, L->attn_norm, D, c->norm_eps);
    stale(m);
    int64_t n_in;
    TRY(rotate_input(m, &L->attn_rot, &n_in));
    m->lin_active[l] = 0.0;
    TRY(lin(m, l, SRT_PROJ_Q, m->xn, n_in, m->q));
    TRY(lin(m, l, SRT_PROJ_K, m->xn, n_in, m->kt));
    TRY(lin(m, l, SRT_PROJ_V, m->xn, n_in, m->vt));
    add_biases(m, L);
    double t1 = now();
    attention_core(m, l, pos);
    double t2 = now();
    stale(m);
    TRY(lin(m, l, SRT_PROJ_O, m->att, -1, m->tmp));
    for (int64_t i = 0; i < D; i++) m->x[i] += m->tmp[i];
    double t3 = now();
    m->tm.attn_proj += (t1 - t0) + (t3 - t2);
    m->tm.attn_core += t2 - t1;
    m->tm.attn += t3 - t0;
    return SRT_OK;
}

/* The h-side routers (their live set needs h = phi(u) v, so up runs on
 * every neuron): LaRoSA's K_h largest |h_j|, TEAL's |h_j| > t, CETT's
 * |h_j| > thr_j (times CLADA's factor). Dead h_j are zeroed and the live
 * list is left in idx; returns its length (F: dense). Steps pass m->h and
 * m->idx, prefill each token's (m->score is scratch). */
static srt_status select_h(srt_model *m, const srt_layer_w *L, int64_t l, float *h, uint32_t *idx, int64_t *live) {
    int64_t F = m->cfg.ffn_dim;
    *live = F;
    if (m->larosa) {
        if (m->K_h < F) {
            TRY(keep_topk(m, h, F, m->K_h, idx));
            *live = m->K_h;
        }
    } else if (m->mode == SRT_MODE_TEAL) {
        int64_t k = teal_mask(m, idx, h, F, m->thr_l[l * SRT_NPROJ + SRT_PROJ_DOWN]);
        *live = k < 0 ? F : k;
    } else if ((m->mode == SRT_MODE_CETT || m->mode == SRT_MODE_CLADA) && L->cett_use) {
        int64_t k = srt_route_cett(srt_ctx_kernels(m->ctx), idx, m->score, h, L->cett_use, m->factor, F);
        if (k >= 0) {
            srt_zero_dead(h, F, idx, k);
            *live = k;
        }
    }
    return SRT_OK;
}

static srt_status mlp_tail(srt_model *m, int64_t l, int64_t n_in, double t0);

/* GRIFFIN's prompt statistic: s_j^2 += h_j^2 / ||h||^2 for a token's h of layer l (sums in double; steps
 * and prefill add the tokens in order). */
static void griffin_observe(srt_model *m, int64_t l, const float *h) {
    const int64_t F = m->cfg.ffn_dim;
    double nn = 0.0, *s = m->g_sum + l * F;
    for (int64_t j = 0; j < F; j++) nn += (double)h[j] * h[j];
    if (!(nn > 0.0)) return;
    for (int64_t j = 0; j < F; j++) s[j] += (double)h[j] * h[j] / nn;
}

/* GRIFFIN: a prompt from position 0 starts a new statistic and chooses new sets. */
static void griffin_new_prompt(srt_model *m, int64_t pos) {
    if (pos != 0 || m->router != SRT_ROUTER_GRIFFIN) return;
    memset(m->g_sum, 0, (size_t)(m->cfg.n_layers * m->cfg.ffn_dim) * sizeof *m->g_sum);
    m->g_fixed = false;
}

static srt_status mlp_block(srt_model *m, int64_t l) {
    const srt_model_config *c = &m->cfg;
    const srt_layer_w *L = &m->layers[l];
    int64_t D = c->dim;
    double t0 = now();
    rmsnorm(m->xn, m->x, L->ffn_norm, D, c->norm_eps);
    stale(m);
    int64_t n_in;
    TRY(rotate_input(m, &L->mlp_rot, &n_in));
    TRY(lin(m, l, SRT_PROJ_GATE, m->xn, n_in, m->u));
    return mlp_tail(m, l, n_in, t0);
}

/* An MLP block's phases into the step timing (seconds): the gate (with the norm and phi), the
 * router, up, down. */
static void mlp_times(srt_model *m, double gate, double route, double up, double down) {
    m->tm.mlp_gate += gate;
    m->tm.mlp_route += route;
    m->tm.mlp_up += up;
    m->tm.mlp_down += down;
    m->tm.mlp += gate + route + up + down;
}

/* Layer l's live list for srt_model_last_live: idx[0..K) (NULL: every neuron, K the width). */
static void record_live(srt_model *m, int64_t l, const uint32_t *idx, int64_t K) {
    if (idx) memcpy(m->live_all + l * m->cfg.ffn_dim, idx, (size_t)K * sizeof(uint32_t));
    m->live_n[l] = K;
}

/* The neuron routers (dense, CATS, CLAWS, CATS thresholds, GRIFFIN) pick layer l's live set from
 * the gate activation a: *dense, or idx[0..*K) ascending (recorded in m->live_all and m->live_n).
 * Steps and prefill both route through here. */
static srt_status route_neurons(srt_model *m, int64_t l, const float *a, uint32_t *idx, bool *dense, int64_t *K) {
    const srt_layer_w *L = &m->layers[l];
    const int64_t F = m->cfg.ffn_dim;
    if (m->mode == SRT_MODE_CATS_THR) {
        float t = m->thr_l[l];
        *dense = !(t >= 0.0f);
        *K = *dense ? F : srt_compact(m->ctx, idx, a, F, t);
    } else if (m->router == SRT_ROUTER_GRIFFIN) { /* the prompt dense, then the fixed set */
        *dense = !m->g_fixed;
        *K = *dense ? F : m->g_k;
        if (!*dense) memcpy(idx, m->g_set + l * *K, (size_t)*K * sizeof(uint32_t));
    } else {
        *dense = m->router == SRT_ROUTER_DENSE || m->K >= F;
        *K = *dense ? F : m->K;
        if (!*dense) {
            srt_score_gate(m->score, a, m->router == SRT_ROUTER_CLAWS ? L->claws_c : NULL, F);
            TRY(srt_select_topk_kt(srt_ctx_kernels(m->ctx), idx, m->score, F, *K, 0, m->sel_ws));
        }
    }
    record_live(m, l, *dense ? NULL : idx, *K);
    return SRT_OK;
}

/* h = a * v on the live neurons idx[0..K) (zero elsewhere), or on all F when idx is NULL. */
static void gate_times_up(float *h, const float *a, const float *v, const uint32_t *idx, int64_t K, int64_t F) {
    if (!idx) {
        for (int64_t j = 0; j < F; j++) h[j] = a[j] * v[j];
        return;
    }
    memset(h, 0, (size_t)F * sizeof(float));
    for (int64_t i = 0; i < K; i++) {
        uint32_t j = idx[i];
        h[j] = a[j] * v[j];
    }
}

/* The routers that choose from h = a * up (LaRoSA's output top-K, TEAL alone, CETT, CLADA, CWIC): up runs
 * dense before them. teal-cats runs TEAL's masks under a neuron router instead. */
static bool h_side_router(const srt_model *m) {
    return m->larosa || (m->mode == SRT_MODE_TEAL && m->router == SRT_ROUTER_DENSE) || m->mode == SRT_MODE_CETT ||
           m->mode == SRT_MODE_CLADA || m->mode == SRT_MODE_CWIC;
}

/* The MLP after the gate GEMV (m->u; m->xn holds the block input, n_in its
 * live count or -1): phi, the router, up, down, the residual into m->x.
 * t0: when the block started (timing). */
static srt_status mlp_tail(srt_model *m, int64_t l, int64_t n_in, double t0) {
    const srt_model_config *c = &m->cfg;
    const srt_layer_w *L = &m->layers[l];
    int64_t D = c->dim, F = c->ffn_dim;
    srt_activate(m->ctx, m->a, m->u, F, c->gelu);
    double t1 = now();
    if (h_side_router(m)) {
        TRY(lin(m, l, SRT_PROJ_UP, m->xn, n_in, m->v));
        gate_times_up(m->h, m->a, m->v, NULL, F, F);
        double t2 = now();
        int64_t K;
        TRY(select_h(m, L, l, m->h, m->idx, &K));
        record_live(m, l, K < F ? m->idx : NULL, K);
        double t3 = now();
        stale(m);
        if (m->mode == SRT_MODE_CWIC)
            TRY(lin(m, l, SRT_PROJ_DOWN, m->h, -1, m->tmp));
        else
            TRY(mv_in(m, &L->wd, m->h, K < F ? K : -1, m->tmp));
        if (m->mode == SRT_MODE_TEAL) m->lin_active[l] += (double)(L->wd.rows * K); /* h masked by select_h */
        for (int64_t i = 0; i < D; i++) m->x[i] += m->tmp[i];
        double t4 = now();
        mlp_times(m, t1 - t0, t3 - t2, t2 - t1, t4 - t3);
        m->tm.live_sum += K;
        return SRT_OK;
    }
    /* neuron routers: the live set comes from the gate, so up reads only live rows */
    bool dense;
    int64_t K;
    TRY(route_neurons(m, l, m->a, m->idx, &dense, &K));
    double t2 = now();
    /* teal-cats: up reads the MLP input under its own threshold (m->score is free once the top-K is chosen) */
    const float *xu = m->xn;
    if (m->mode == SRT_MODE_TEAL) xu = teal_masked(m, m->xn, L->wu.m.cols, m->thr_l[l * SRT_NPROJ + SRT_PROJ_UP]);
    if (dense) {
        TRY(mv_in(m, &L->wu, xu, n_in, m->v));
    } else if (L->wu.tr->sparse == SRT_SPARSE_ROWS) {
        TRY(mv_sparse(m, &L->wu, xu, m->idx, K, m->v));
    } else { /* m->idx holds the neurons now, not the input's live list */
        TRY(mv(m, &L->wu, xu, m->v));
    }
    gate_times_up(m->h, m->a, m->v, dense ? NULL : m->idx, K, F);
    if (dense && m->router == SRT_ROUTER_GRIFFIN) griffin_observe(m, l, m->h);
    double t3 = now();
    stale(m);
    if (!dense && L->wd.tr->sparse == SRT_SPARSE_COLS)
        TRY(mv_sparse(m, &L->wd, m->h, m->idx, K, m->tmp));
    else
        TRY(mv(m, &L->wd, m->h, m->tmp));
    for (int64_t i = 0; i < D; i++) m->x[i] += m->tmp[i];
    double t4 = now();
    mlp_times(m, t1 - t0, t2 - t1, t3 - t2, t4 - t3);
    m->tm.live_sum += K;
    return SRT_OK;
}

/* CLADA's threshold multiplier for the token about to run: the surprisal of
 * `token` under the previous step's logits and that distribution's entropy
 * (the model's own logits; position 0 and a first step use 1). */
static void clada_factor(srt_model *m, int32_t token, int64_t pos) {
    m->factor = 1.0f;
    if (m->mode != SRT_MODE_CLADA || pos == 0 || m->logits_pos != pos - 1) return;
    double surprisal, entropy;
    srt_clada_signals(m->logits, m->cfg.vocab_size, token, &surprisal, &entropy);
    m->factor = srt_clada_factor(&m->clada, surprisal, entropy);
}

/* x <- the embedding row of token (x sqrt(dim) when the family scales it). */
static srt_status embed(srt_model *m, int32_t token, float *x) {
    const int64_t D = m->cfg.dim;
    TRY(srt_matrix_row(&m->emb.m, token, x)); /* stored columns: D, or padded with zeros */
    m->tm.weight_bytes += (double)(m->emb.m.bytes / (size_t)m->emb.m.rows);
    if (m->cfg.embed_scale) {
        float sc = sqrtf((float)D);
        for (int64_t i = 0; i < D; i++) x[i] *= sc;
    }
    return SRT_OK;
}

/* Final norm and classifier on m->x (the token at pos). */
static srt_status finish(srt_model *m, int64_t pos, const float **logits) {
    double t1 = now();
    rmsnorm(m->xn, m->x, m->final_norm, m->cfg.dim, m->cfg.norm_eps);
    stale(m);
    TRY(mv(m, &m->classifier, m->xn, m->logits));
    if (!srt_vec_finite(m->logits, m->cfg.vocab_size)) return srt_model_nonfinite(m, m->cfg.n_layers, 2);
    m->tm.head += now() - t1;
    m->logits_pos = pos;
    *logits = m->logits;
    return SRT_OK;
}

srt_status srt_model_step(srt_model *m, int32_t token, int64_t pos, const float **logits) {
    if (!m || !logits || token < 0 || token >= m->cfg.vocab_size || pos < 0 || pos >= m->ctx_limit) return SRT_EINVAL;
    if (pos >= m->max_ctx) { /* grow the cache: doubling, at most to the limit */
        int64_t n = 2 * m->max_ctx > pos + 1 ? 2 * m->max_ctx : pos + 1;
        TRY(srt_model_reserve(m, n < m->ctx_limit ? n : m->ctx_limit));
    }
    const srt_model_config *c = &m->cfg;
    const int64_t D = c->dim;
    double t0 = now();
    clada_factor(m, token, pos); /* reads the previous step's logits before anything overwrites them */
    griffin_new_prompt(m, pos);
    m->logits_pos = -1;
    TRY(embed(m, token, m->x));
    m->tm.embed += now() - t0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        TRY(attention_block(m, l, pos));
        if (!srt_vec_finite(m->x, D)) return srt_model_nonfinite(m, l, 0);
        TRY(mlp_block(m, l));
        if (!srt_vec_finite(m->x, D)) return srt_model_nonfinite(m, l, 1);
    }
    m->tm.steps++;
    return finish(m, pos, logits);
}

/* ---- prefill: the prompt's tokens through each layer together ---------------------------- */

#define PF_CHUNK 16 /* tokens per pass */

/* Lazily allocated buffers: per token x, xn, q, kt, vt, att, u, a, v (vmax floats each), a live
 * list (vmax indices) and two quantised activations (natural, tiled); vmax bytes of row marks. */
static srt_status prefill_buffers(srt_model *m) {
    if (m->pf_arena) return SRT_OK;
    const size_t vf = (size_t)(m->vmax + 63) / 64 * 64, nvec = 9 * PF_CHUNK, ab = m->actbytes;
    m->pf_arena = srt_alloc(nvec * vf * sizeof(float) + PF_CHUNK * vf * sizeof(uint32_t) + vf + 2 * PF_CHUNK * ab);
    if (!m->pf_arena) return SRT_ENOMEM;
    float *f = m->pf_arena;
    for (size_t i = 0; i < nvec; i++) m->pf_vec[i] = f + i * vf;
    uint32_t *ix = (uint32_t *)(f + nvec * vf);
    for (size_t i = 0; i < PF_CHUNK; i++) m->pf_idx[i] = ix + i * vf;
    m->pf_mark = (uint8_t *)(ix + PF_CHUNK * vf);
    uint8_t *a = m->pf_mark + vf;
    for (int i = 0; i < 2 * PF_CHUNK; i++) m->pf_actmem[i] = a + (size_t)i * ab;
    return SRT_OK;
}

/* X[t] += Y[t] (D values) for the chunk's n tokens; SRT_ENONFINITE on a NaN or inf (the caller re-runs
 * the chunk as steps, which name where it arose). */
static srt_status add_residuals(float *const *X, float *const *Y, int64_t n, int64_t D) {
    for (int64_t t = 0; t < n; t++) {
        for (int64_t i = 0; i < D; i++) X[t][i] += Y[t][i];
        if (!srt_vec_finite(X[t], D)) return SRT_ENONFINITE;
    }
    return SRT_OK;
}

/* y[t] = W x[t] for the chunk's n tokens, the inputs quantised as the layout wants; with live
 * lists (live[t].idx NULL: dense) each token's GEMV is srt_gemv_sparse's on its list. Counted: the
 * row layouts and kmi4 / kmi8 once for the chunk (srt_gemv_batch_sparse reads their blocks / K windows
 * once for all inputs: the rows / neurons any token reads), the other column layouts per token. */
static srt_status mv_batch(srt_model *m, const srt_weight *w, float *const *x, int64_t n, const srt_live *live,
                           float *const *y) {
    srt_input in[PF_CHUNK];
    srt_act act[PF_CHUNK];
    const int s = w->tr->input == SRT_IN_Q8_TILED ? 1 : 0;
    const bool rows = w->tr->sparse == SRT_SPARSE_ROWS;
    const bool once = rows || w->m.layout == SRT_LAYOUT_KMI4 || w->m.layout == SRT_LAYOUT_KMI8;
    bool any_dense = !live;
    for (int64_t t = 0; t < n; t++) {
        const bool sp = live && live[t].idx;
        any_dense = any_dense || !sp;
        if (!once) m->tm.weight_bytes += bytes_read(m, w, sp ? live[t].idx : NULL, sp ? live[t].n : 0);
        in[t].f = x[t];
        in[t].q = NULL;
        if (w->tr->input == SRT_IN_F32) continue;
        srt_status st = srt_act_init(&act[t], m->pf_actmem[s * PF_CHUNK + t], m->actbytes, w->m.cols,
                                     s ? SRT_ACT_TILED : SRT_ACT_NATURAL);
        if (st == SRT_OK) st = srt_act_quantize(m->ctx, &act[t], x[t]);
        if (st != SRT_OK) return st;
        in[t].q = &act[t];
    }
    if (once && any_dense) m->tm.weight_bytes += bytes_read(m, w, NULL, 0);
    if (once && !any_dense) { /* the union of the live rows / neurons */
        const int64_t lim = rows ? w->m.rows : w->m.cols;
        uint8_t *mark = m->pf_mark;
        memset(mark, 0, (size_t)lim);
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < live[t].n; i++) mark[live[t].idx[i]] = 1;
        int64_t nu = 0, blocks = 0; /* blocks: the K-blocks of 32 with a live entry (kmi4 / kmi8 read their scales) */
        for (int64_t b0 = 0; b0 < lim; b0 += 32) {
            int64_t k = 0;
            for (int64_t i = b0; i < lim && i < b0 + 32; i++) k += mark[i];
            nu += k, blocks += k > 0;
        }
        m->tm.weight_bytes += live_bytes(w, nu, blocks);
    }
    return srt_gemv_batch_sparse(m->ctx, &w->m, in, live, n, y);
}

/* Projection p of layer l for the chunk's n inputs x, as lin() runs it for each token: under TEAL each
 * x[t] masked by the projection's threshold into buf[t] (its live list in m->pf_idx[t], read by
 * column-sparse layouts); otherwise x as it is, column-sparse layouts reading in[t]'s live inputs
 * (LaRoSA's, rotate_batch; in NULL or in[t].idx NULL: every input). Under TEAL act[t] gains the
 * parameters token t reads (m->lin_active). CWIC's stripes do not batch (srt_model_prefill). */
static srt_status lin_batch(srt_model *m, int64_t l, int p, float *const *x, int64_t n, float *const *buf,
                            double *act, const srt_live *in, float *const *y) {
    const srt_weight *w = proj_w(&m->layers[l], p);
    const float t = m->mode == SRT_MODE_TEAL ? m->thr_l[l * SRT_NPROJ + p] : -1.0f;
    if (!(t >= 0.0f)) {
        if (m->mode == SRT_MODE_TEAL)
            for (int64_t i = 0; i < n; i++) act[i] += (double)(w->rows * w->cols);
        return mv_batch(m, w, x, n, m->mode != SRT_MODE_TEAL && w->tr->sparse == SRT_SPARSE_COLS ? in : NULL, y);
    }
    srt_live lv[PF_CHUNK];
    for (int64_t i = 0; i < n; i++) {
        memcpy(buf[i], x[i], (size_t)w->m.cols * sizeof(float));
        const int64_t k = teal_mask(m, m->pf_idx[i], buf[i], w->cols, t);
        act[i] += (double)(w->rows * k);
        lv[i] = (srt_live){m->pf_idx[i], k, NULL};
    }
    return mv_batch(m, w, buf, n, w->tr->sparse == SRT_SPARSE_COLS ? lv : NULL, y);
}

/* LaRoSA's input rotation for the chunk, as rotate_input steps it: each XN[t] <- z = R XN[t] (through
 * buf), then larosa_inputs, the list in m->pf_idx[t] and lv[t] (lv[t].idx NULL: every input live). */
static srt_status rotate_batch(srt_model *m, const srt_weight *R, float *const *XN, int64_t n, float *const *buf,
                               srt_live *lv) {
    const int64_t D = m->cfg.dim;
    for (int64_t t = 0; t < n; t++) lv[t] = (srt_live){NULL, D, NULL};
    if (!R->tr) return SRT_OK;
    double t0 = now();
    TRY(mv_batch(m, R, XN, n, NULL, buf));
    for (int64_t t = 0; t < n; t++) {
        memcpy(XN[t], buf[t], (size_t)D * sizeof(float));
        int64_t k;
        TRY(larosa_inputs(m, XN[t], m->pf_idx[t], &k));
        if (k >= 0) lv[t] = (srt_live){m->pf_idx[t], k, NULL};
    }
    m->tm.rotate += now() - t0;
    return SRT_OK;
}

/* The MLP of layer l for a chunk's n tokens under a neuron router, after the gate (U holds its
 * outputs, XN the block inputs, t0 when the block began): each token's live set as a step picks it,
 * then up and down for all the tokens together (srt_gemv_batch_sparse: a block of rows or a K window
 * of neurons read once for the chunk), each token on its live rows (up in a row layout) or live
 * neurons (down in kmi4 / kmi8), and on every row where the layout cannot skip (h is zero off the
 * live set; up's other rows are dropped). The result is the steps', bit for bit. */
static srt_status prefill_mlp(srt_model *m, int64_t l, int64_t n, double t0) {
    const srt_layer_w *L = &m->layers[l];
    const int64_t D = m->cfg.dim, F = m->cfg.ffn_dim;
    float *const *X = m->pf_vec, *const *XN = m->pf_vec + PF_CHUNK, *const *Y = m->pf_vec + 2 * PF_CHUNK,
                 *const *H = m->pf_vec + 6 * PF_CHUNK, *const *A = m->pf_vec + 7 * PF_CHUNK,
                 *const *V = m->pf_vec + 8 * PF_CHUNK;
    bool dense[PF_CHUNK];
    int64_t K[PF_CHUNK];
    double t1 = now();
    for (int64_t t = 0; t < n; t++) {
        srt_activate(m->ctx, A[t], H[t], F, m->cfg.gelu); /* H holds the gate's outputs until h replaces them */
        TRY(route_neurons(m, l, A[t], m->pf_idx[t], &dense[t], &K[t]));
        m->tm.live_sum += K[t];
    }
    /* each token's live list where its step would read only the live rows (up) or live neurons (down) */
    srt_live lv[PF_CHUNK];
    for (int64_t t = 0; t < n; t++) lv[t] = (srt_live){dense[t] ? NULL : m->pf_idx[t], K[t], NULL};
    double t2 = now();
    /* teal-cats: up reads the MLP input under its own threshold, as mlp_tail's step does (into Y, free
     * until down's outputs) */
    float *const *XU = XN;
    const float tu = m->mode == SRT_MODE_TEAL ? m->thr_l[l * SRT_NPROJ + SRT_PROJ_UP] : -1.0f;
    if (tu >= 0.0f) {
        for (int64_t t = 0; t < n; t++) teal_copy(Y[t], XN[t], L->wu.m.cols, tu);
        XU = Y;
    }
    TRY(mv_batch(m, &L->wu, XU, n, L->wu.tr->sparse == SRT_SPARSE_ROWS ? lv : NULL, V));
    for (int64_t t = 0; t < n; t++) {
        gate_times_up(H[t], A[t], V[t], lv[t].idx, K[t], F);
        if (dense[t] && m->router == SRT_ROUTER_GRIFFIN) griffin_observe(m, l, H[t]);
    }
    double t3 = now();
    TRY(mv_batch(m, &L->wd, H, n, L->wd.tr->sparse == SRT_SPARSE_COLS ? lv : NULL, Y));
    TRY(add_residuals(X, Y, n, D));
    double t4 = now();
    mlp_times(m, t1 - t0, t2 - t1, t3 - t2, t4 - t3);
    return SRT_OK;
}

/* The MLP of layer l under an h-side router (TEAL alone, CETT, LaRoSA) for a chunk's n tokens after the
 * gate (U holds its outputs, XN the block inputs, in their live lists (rotate_batch), act each token's
 * parameters read so far under TEAL, t0 when the block began), as mlp_tail's h-side path steps it: up
 * (on each token's masked or live input), h = phi(g) up, h's live set (select_h: down's threshold,
 * CETT's per-neuron ones or LaRoSA's top K_h), down on each token's live neurons (column-sparse
 * layouts) or on the masked h; every mask is the token's own, so the chunk goes together and each
 * token computes exactly its step. */
static srt_status prefill_h_mlp(srt_model *m, int64_t l, int64_t n, double *act, const srt_live *in, double t0) {
    const srt_layer_w *L = &m->layers[l];
    const int64_t D = m->cfg.dim, F = m->cfg.ffn_dim;
    float *const *X = m->pf_vec, *const *XN = m->pf_vec + PF_CHUNK, *const *Y = m->pf_vec + 2 * PF_CHUNK,
                 *const *H = m->pf_vec + 6 * PF_CHUNK, *const *A = m->pf_vec + 7 * PF_CHUNK,
                 *const *V = m->pf_vec + 8 * PF_CHUNK;
    for (int64_t t = 0; t < n; t++) srt_activate(m->ctx, A[t], H[t], F, m->cfg.gelu); /* H: the gate's outputs */
    double t1 = now();
    TRY(lin_batch(m, l, SRT_PROJ_UP, XN, n, Y, act, in, V)); /* Y: the masked inputs, free until down's outputs */
    for (int64_t t = 0; t < n; t++) gate_times_up(H[t], A[t], V[t], NULL, F, F);
    double t2 = now();
    srt_live lv[PF_CHUNK];
    for (int64_t t = 0; t < n; t++) {
        int64_t K;
        TRY(select_h(m, L, l, H[t], m->pf_idx[t], &K));
        lv[t] = (srt_live){K < F ? m->pf_idx[t] : NULL, K, NULL};
        record_live(m, l, K < F ? m->pf_idx[t] : NULL, K);
        if (m->mode == SRT_MODE_TEAL) act[t] += (double)(L->wd.rows * K);
        m->tm.live_sum += K;
    }
    double t3 = now();
    TRY(mv_batch(m, &L->wd, H, n, L->wd.tr->sparse == SRT_SPARSE_COLS ? lv : NULL, Y));
    TRY(add_residuals(X, Y, n, D));
    m->lin_active[l] = act[n - 1];
    mlp_times(m, t1 - t0, t3 - t2, t2 - t1, now() - t3);
    return SRT_OK;
}

/* Tokens tok[0..n) at positions pos..pos+n-1 through every layer (n <= PF_CHUNK). */
static srt_status prefill_chunk(srt_model *m, const int32_t *tok, int64_t n, int64_t pos) {
    const srt_model_config *c = &m->cfg;
    const int64_t D = c->dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    float *const *X = m->pf_vec, *const *XN = m->pf_vec + PF_CHUNK, *const *Q = m->pf_vec + 2 * PF_CHUNK,
                 *const *KT = m->pf_vec + 3 * PF_CHUNK, *const *VT = m->pf_vec + 4 * PF_CHUNK,
                 *const *ATT = m->pf_vec + 5 * PF_CHUNK, *const *U = m->pf_vec + 6 * PF_CHUNK,
                 *const *TM = m->pf_vec + 7 * PF_CHUNK; /* rotations' outputs, TEAL's masked inputs (prefill_mlp's A
                                                         * after the gate) */
    double t0 = now();
    for (int64_t t = 0; t < n; t++) TRY(embed(m, tok[t], X[t]));
    m->tm.embed += now() - t0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        const srt_layer_w *L = &m->layers[l];
        t0 = now();
        double act[PF_CHUNK] = {0}; /* each token's parameters read (TEAL: m->lin_active) */
        srt_live in[PF_CHUNK];      /* each token's live block inputs (LaRoSA) */
        for (int64_t t = 0; t < n; t++) rmsnorm(XN[t], X[t], L->attn_norm, D, c->norm_eps);
        TRY(rotate_batch(m, &L->attn_rot, XN, n, TM, in));
        TRY(lin_batch(m, l, SRT_PROJ_Q, XN, n, TM, act, in, Q));
        TRY(lin_batch(m, l, SRT_PROJ_K, XN, n, TM, act, in, KT));
        TRY(lin_batch(m, l, SRT_PROJ_V, XN, n, TM, act, in, VT));
        double t1 = now();
        for (int64_t t = 0; t < n; t++) {
            memcpy(m->q, Q[t], (size_t)qd * sizeof(float));
            memcpy(m->kt, KT[t], (size_t)kvd * sizeof(float));
            memcpy(m->vt, VT[t], (size_t)kvd * sizeof(float));
            add_biases(m, L);
            attention_core(m, l, pos + t);
            memcpy(ATT[t], m->att, (size_t)qd * sizeof(float));
        }
        double t2 = now();
        TRY(lin_batch(m, l, SRT_PROJ_O, ATT, n, TM, act, NULL, Q)); /* Q: the o-projection's outputs */
        TRY(add_residuals(X, Q, n, D));
        double t3 = now();
        m->tm.attn_proj += (t1 - t0) + (t3 - t2);
        m->tm.attn_core += t2 - t1;
        m->tm.attn += t3 - t0;
        /* MLP: the gate together, then each token's router, up and down */
        t0 = now();
        for (int64_t t = 0; t < n; t++) rmsnorm(XN[t], X[t], L->ffn_norm, D, c->norm_eps);
        TRY(rotate_batch(m, &L->mlp_rot, XN, n, TM, in));
        TRY(lin_batch(m, l, SRT_PROJ_GATE, XN, n, TM, act, in, U));
        m->lin_active[l] = act[n - 1]; /* as the chunk's last step leaves it */
        /* (a neuron router never has live inputs: LaRoSA's routing is an h-side router; CLADA and CWIC step) */
        if (h_side_router(m)) TRY(prefill_h_mlp(m, l, n, act, in, t0));
        else TRY(prefill_mlp(m, l, n, t0));
    }
    m->tm.steps += n;
    memcpy(m->x, X[n - 1], (size_t)D * sizeof(float));
    return SRT_OK;
}

srt_status srt_model_prefill(srt_model *m, const int32_t *tokens, int64_t n, int64_t pos, const float **logits) {
    if (!m || !tokens || !logits || n < 1 || pos < 0 || pos + n > m->ctx_limit) return SRT_EINVAL;
    for (int64_t t = 0; t < n; t++)
        if (tokens[t] < 0 || tokens[t] >= m->cfg.vocab_size) return SRT_EINVAL;
    if (pos + n > m->max_ctx) TRY(srt_model_reserve(m, pos + n));
    /* CLADA scales each token's thresholds by the previous token's logits, and CWIC's stripe layout runs
     * one GEMV per token in a batch anyway: those run token by token. TEAL's, CETT's and LaRoSA's masks
     * are each token's own (lin_batch, rotate_batch, prefill_h_mlp), GRIFFIN's prompt is dense. */
    if (n == 1 || m->mode == SRT_MODE_CWIC || m->mode == SRT_MODE_CLADA) {
        for (int64_t t = 0; t < n; t++) TRY(srt_model_step(m, tokens[t], pos + t, logits));
        return SRT_OK;
    }
    griffin_new_prompt(m, pos); /* (prefill_mlp gathers its statistic) */
    TRY(prefill_buffers(m));
    /* room for the second halves of a whole chunk's kmi4 / kmi8 down projection (srt_gemv.c); without
     * it the batch runs fewer tokens at a time (the same bits), so a failure here costs only speed */
    (void)srt_ctx_shared(m->ctx, PF_CHUNK * m->cfg.dim);
    m->logits_pos = -1;
    m->factor = 1.0f;
    for (int64_t t = 0; t < n; t += PF_CHUNK) {
        const int64_t k = n - t < PF_CHUNK ? n - t : PF_CHUNK;
        srt_status st = prefill_chunk(m, tokens + t, k, pos + t);
        if (st == SRT_ENONFINITE) { /* a NaN or inf: the chunk again as steps, which name where it arose */
            st = SRT_OK;
            for (int64_t i = 0; i < k && st == SRT_OK; i++) st = srt_model_step(m, tokens[t + i], pos + t + i, logits);
        }
        if (st != SRT_OK) return st;
    }
    return finish(m, pos + n - 1, logits);
}
