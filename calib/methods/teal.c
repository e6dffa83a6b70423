/* teal.c - TEAL (the TEAL paper) in one file with its greedy allocation's
 * search (teal_greedy.c): histograms of the four linear inputs per layer,
 * thresholds for any sparsity, the masking linear hook, a stored sample of
 * dense block inputs for the greedy allocation, and eval's routing ("teal",
 * "teal-greedy", "teal-cats"), which reads the plan pack stores with the runtime's
 * functions (kernels/srt_route.h) (see teal.h).
 *
 * The sample of dense block inputs is a bottom-K sample: each sequence's key
 * is (FNV-1a hash of its first `len` ids, length); a shard keeps the K
 * sequences with the smallest keys (their first `len` block-input rows per
 * layer) in CONCAT arrays, which merging appends. The greedy allocation uses
 * the K smallest keys of whatever is stored, in key order, which is the same
 * set in the same order for one run and for any sharding (the union of the
 * shards' bottom-K holds the global bottom-K), so the curve is identical.
 *
 * Parameters (compute --params): teal_greedy=0|1 (default 1: keep the
 * sample and compute the curve), teal_seqs=K (64 sequences), teal_len=N (64 tokens). */
#include "teal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval_input.h"
#include "method.h"
#include "ops.h"
#include "params.h"
#include "plan.h"
#include "route_method.h"
#include "router.h"
#include "sample_store.h"
#include "srt_route.h"

static const sc_tap teal_taps[SC_TEAL_NTAPS] = {SC_TAP_ATTN_IN, SC_TAP_ATTN_CTX, SC_TAP_MLP_IN, SC_TAP_H};

int sc_teal_tap_of(sc_linear p) {
    static const int map[SC_TEAL_NPROJ] = {0, 0, 0, 1, 2, 2, 3};
    return (unsigned)p < SC_TEAL_NPROJ ? map[p] : 0;
}

const char *sc_teal_tap_name(int tap) {
    static const char *names[SC_TEAL_NTAPS] = {"attn_in", "attn_ctx", "mlp_in", "h"};
    return tap >= 0 && tap < SC_TEAL_NTAPS ? names[tap] : "?";
}

int64_t sc_teal_bin(double a) {
    if (!(a < SC_TEAL_HI)) return SC_TEAL_NMAG + 1; /* also NaN */
    if (a < SC_TEAL_LO) return 0;
    int64_t b = 1 + (int64_t)floor(log10(a / SC_TEAL_LO) * SC_TEAL_PER_DECADE);
    return b < 1 ? 1 : b > SC_TEAL_NMAG ? SC_TEAL_NMAG : b;
}

double sc_teal_bin_left(int64_t b) {
    if (b <= 0) return 0.0;
    if (b > SC_TEAL_NMAG) return SC_TEAL_HI;
    return SC_TEAL_LO * pow(10.0, (double)(b - 1) / SC_TEAL_PER_DECADE);
}

double sc_teal_bin_right(int64_t b) {
    if (b <= 0) return SC_TEAL_LO;
    if (b > SC_TEAL_NMAG) return SC_TEAL_HI;
    return SC_TEAL_LO * pow(10.0, (double)b / SC_TEAL_PER_DECADE);
}

void sc_teal_cumulative(const int64_t *hist, double *cum) {
    double acc = 0.0;
    for (int64_t b = 0; b < SC_TEAL_NB; b++) {
        acc += (double)hist[b] + (double)hist[SC_TEAL_NB + b];
        cum[b] = acc;
    }
}

double sc_teal_threshold(const double *cum, double s) {
    double total = cum[SC_TEAL_NB - 1];
    if (!(s > 0.0) || total <= 0.0) return 0.0;
    if (s >= 1.0) return SC_TEAL_HI;
    double target = s * total;
    int64_t lo = 0, hi = SC_TEAL_NB - 1; /* first bin with cum >= target */
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] >= target) hi = mid;
        else lo = mid + 1;
    }
    double before = lo > 0 ? cum[lo - 1] : 0.0, mass = cum[lo] - before;
    double frac = mass > 0 ? (target - before) / mass : 1.0;
    double a = sc_teal_bin_left(lo), b = sc_teal_bin_right(lo);
    if (lo == 0) return a + frac * (b - a);
    if (lo > SC_TEAL_NMAG) return SC_TEAL_HI;
    return a * pow(b / a, frac);
}

void sc_teal_proj_params(const sc_config *c, double n[SC_TEAL_NPROJ]) {
    double D = (double)c->dim, F = (double)c->ffn_dim, qd = (double)(c->n_heads * c->head_dim),
           kvd = (double)(c->n_kv_heads * c->head_dim);
    double v[SC_TEAL_NPROJ] = {D * qd, D * kvd, D * kvd, qd * D, D * F, D * F, F * D};
    memcpy(n, v, sizeof v);
}

double sc_teal_effective(const sc_config *c, const double s[SC_TEAL_NPROJ]) {
    double n[SC_TEAL_NPROJ], num = 0.0, den = 0.0;
    sc_teal_proj_params(c, n);
    for (int p = 0; p < SC_TEAL_NPROJ; p++) {
        num += n[p] * s[p];
        den += n[p];
    }
    return den > 0 ? num / den : 0.0;
}

sc_status sc_teal_linear_hook(void *user, const sc_linear_event *ev, sc_err *err) {
    sc_teal_mask *mk = user;
    int64_t k = ev->layer * SC_TEAL_NPROJ + ev->which, n = ev->n_tokens * ev->in;
    /* skip_last: the window's last row is only predicted (run --score never steps it), so not counted */
    int64_t counted = mk->skip_last && ev->n_tokens > 1 ? n - ev->in : n;
    double t = mk->thr[k];
    if (mk->seen) mk->seen[k] += (double)counted;
    if (!(t > 0.0)) return SC_OK;
    if (n > mk->cap) return sc_errf(err, SC_EARG, "teal: %lld inputs exceed the scratch of %lld", (long long)n, (long long)mk->cap);
    int64_t drop = 0;
    for (int64_t i = 0; i < n; i++) {
        float x = ev->x[i];
        bool live = fabs((double)x) > t;
        mk->scratch[i] = live ? x : 0.0f;
        drop += !live && i < counted;
    }
    if (mk->dropped) mk->dropped[k] += (double)drop;
    sc_linear_forward(ev->y, mk->scratch, ev->W, ev->b, ev->n_tokens, ev->in, ev->out);
    return SC_OK;
}

/* ---- the method ---- */

typedef struct teal {
    const sc_model *m;
    int64_t L0, L1, D, K, len;
    bool greedy;
    int64_t *hist;    /* [nl, 4, 2, NB] */
    float **smp;      /* [nl] CONCAT [smp_rows[l], D]: block-input rows of the stored sequences, in keys order */
    int64_t *smp_rows;
    int64_t *keys;    /* CONCAT [n_keys, 2]: (hash, length) of each stored sequence */
    int64_t n_keys;
    bool admit;       /* the current sequence is being stored */
    double *curve;    /* [nl, ROWS, COLS] */
    int64_t *rows, *fp; /* [nl] */
} teal;

static void teal_free(void *p) {
    teal *s = p;
    if (!s) return;
    for (int64_t l = 0; s->smp && l < s->L1 - s->L0; l++) sc_sample_free(s->smp[l]);
    free(s->smp);
    free(s->smp_rows);
    sc_sample_free(s->keys);
    free(s->hist);
    free(s->curve);
    free(s->rows);
    free(s->fp);
    free(s);
}

static sc_status teal_create(const sc_model *m, const sc_method_opts *o, void **out, sc_err *err) {
    int64_t g = 1, K = 64, len = 64;
    const sc_param spec[] = {
        {"teal_greedy", SC_PARAM_INT, 0, 1, NULL, &g, 0, NULL},
        {"teal_seqs", SC_PARAM_INT, 1, 1 << 20, NULL, &K, 0, NULL},
        {"teal_len", SC_PARAM_INT, 2, 1 << 16, NULL, &len, 0, NULL},
    };
    SC_TRY(sc_params_read(o->params, spec, 3, "teal", err));
    teal *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "teal: out of memory");
    s->m = m->layers ? m : NULL; /* a shape-only model (loading a file) does not outlive the load */
    s->L0 = o->layer_begin;
    s->L1 = o->layer_end;
    s->D = m->cfg.dim;
    s->greedy = g != 0;
    s->K = K;
    s->len = len;
    int64_t nl = s->L1 - s->L0;
    s->hist = calloc((size_t)(nl * SC_TEAL_NTAPS * 2 * SC_TEAL_NB), sizeof *s->hist);
    s->curve = calloc((size_t)(nl * SC_TEAL_CURVE_ROWS * SC_TEAL_CURVE_COLS), sizeof *s->curve);
    s->rows = calloc((size_t)nl, sizeof *s->rows);
    s->fp = calloc((size_t)nl, sizeof *s->fp);
    s->smp = calloc((size_t)nl, sizeof *s->smp);
    s->smp_rows = calloc((size_t)nl, sizeof *s->smp_rows);
    /* while computing, room for K sequences of len rows (loading resizes through the engine); none
     * without the greedy allocation, which alone reads the sample */
    double bytes = s->greedy ? (double)nl * (double)K * (double)len * (double)s->D * 4.0 : 0.0;
    bool ok = s->hist && s->curve && s->rows && s->fp && s->smp && s->smp_rows && bytes < 64e9;
    if (!ok) {
        teal_free(s);
        return sc_errf(err, SC_ENOMEM, "teal: out of memory (the greedy sample needs %.0f MB; lower teal_seqs or teal_len)",
                       bytes / 1e6);
    }
    /* the sample's blocks spill to disk when large (sample_store.h) */
    sc_status st = SC_OK;
    if (s->greedy) st = sc_sample_resize((void **)&s->keys, (size_t)K * 2 * sizeof(int64_t), "teal: the sample keys", err);
    for (int64_t l = 0; s->greedy && !st && l < nl; l++)
        st = sc_sample_resize((void **)&s->smp[l], (size_t)(K * len * s->D) * sizeof(float), "teal: the greedy sample",
                              err);
    if (st) {
        teal_free(s);
        return st;
    }
    *out = s;
    return SC_OK;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static bool key_less(const int64_t *a, const int64_t *b) { return a[0] != b[0] ? a[0] < b[0] : a[1] < b[1]; }

/* Row offset of stored sequence k in the layer arrays. */
static int64_t row_of(const teal *s, int64_t k) {
    int64_t r = 0;
    for (int64_t j = 0; j < k; j++) r += s->keys[2 * j + 1];
    return r;
}

/* At the first layer's block input: decides whether the sequence enters the
 * bottom-K sample, evicting the largest key if the sample is full. */
static void admit(teal *s, const sc_tap_event *ev) {
    int64_t n = ev->n_tokens < s->len ? ev->n_tokens : s->len;
    int64_t key[2] = {(int64_t)(fnv(0xcbf29ce484222325ull, ev->ids, (size_t)n * sizeof(int32_t)) >> 1), n};
    s->admit = false;
    if (s->n_keys == s->K) {
        int64_t worst = 0;
        for (int64_t k = 1; k < s->n_keys; k++)
            if (key_less(s->keys + 2 * worst, s->keys + 2 * k)) worst = k;
        if (!key_less(key, s->keys + 2 * worst)) return;
        int64_t r0 = row_of(s, worst), nr = s->keys[2 * worst + 1], total = row_of(s, s->n_keys);
        for (int64_t l = 0; l < s->L1 - s->L0; l++) {
            memmove(s->smp[l] + r0 * s->D, s->smp[l] + (r0 + nr) * s->D, (size_t)((total - r0 - nr) * s->D) * sizeof(float));
            s->smp_rows[l] -= nr;
        }
        memmove(s->keys + 2 * worst, s->keys + 2 * (worst + 1), (size_t)(2 * (s->n_keys - worst - 1)) * sizeof(int64_t));
        s->n_keys--;
    }
    s->keys[2 * s->n_keys] = key[0];
    s->keys[2 * s->n_keys + 1] = key[1];
    s->n_keys++;
    s->admit = true;
}

/* Appends the first rows of layer l's block input for the admitted sequence. */
static void store_sample(teal *s, int64_t l, const sc_tap_event *ev, const float *x) {
    if (l == s->L0) admit(s, ev);
    if (!s->admit) return;
    int64_t n = ev->n_tokens < s->len ? ev->n_tokens : s->len, li = l - s->L0;
    memcpy(s->smp[li] + s->smp_rows[li] * s->D, x, (size_t)(n * s->D) * sizeof(float));
    s->smp_rows[li] += n;
}

static sc_status teal_observe(void *p, const sc_tap_event *ev, int64_t n_scored, sc_err *err) {
    teal *s = p;
    if (ev->is_grad) return SC_OK;
    if (s->greedy && ev->pos0 == 0) {
        if (ev->tap == SC_TAP_RESID && ev->layer + 1 >= s->L0 && ev->layer + 1 < s->L1)
            store_sample(s, ev->layer + 1, ev, ev->data);
        if (ev->tap == SC_TAP_ATTN_IN && ev->layer == 0 && s->L0 == 0 && s->m) { /* layer 0 reads the embedding */
            const sc_config *c = &s->m->cfg;
            int64_t n = ev->n_tokens < s->len ? ev->n_tokens : s->len;
            float *emb = malloc((size_t)(n * s->D) * sizeof(float));
            if (!emb) return sc_errf(err, SC_ENOMEM, "teal: out of memory");
            float sc = sqrtf((float)s->D);
            sc_status st = sc_model_embed(s->m, ev->ids, n, emb, err);
            if (st) {
                free(emb);
                return st;
            }
            if (c->embed_scale)
                for (int64_t i = 0; i < n * s->D; i++) emb[i] *= sc;
            store_sample(s, 0, ev, emb);
            free(emb);
        }
    }
    if (ev->layer < s->L0 || ev->layer >= s->L1) return SC_OK;
    int tap = -1;
    for (int k = 0; k < SC_TEAL_NTAPS; k++)
        if (ev->tap == teal_taps[k]) tap = k;
    if (tap < 0) return SC_OK;
    int64_t *h = s->hist + ((ev->layer - s->L0) * SC_TEAL_NTAPS + tap) * 2 * SC_TEAL_NB;
    for (int64_t i = 0; i < n_scored * ev->width; i++) {
        double x = (double)ev->data[i];
        h[(x < 0 ? 0 : SC_TEAL_NB) + sc_teal_bin(fabs(x))]++;
    }
    return SC_OK;
}

/* Indices of the stored sequences with the K smallest keys, in key order. */
static int64_t bottom_k(const teal *s, int64_t *order) {
    int64_t n = s->n_keys;
    for (int64_t k = 0; k < n; k++) order[k] = k;
    for (int64_t i = 1; i < n; i++) { /* insertion sort: stable, n is small */
        int64_t v = order[i], j = i;
        for (; j > 0 && key_less(s->keys + 2 * v, s->keys + 2 * order[j - 1]); j--) order[j] = order[j - 1];
        order[j] = v;
    }
    return n < s->K ? n : s->K;
}

static int64_t fingerprint(const teal *s, int64_t l, const int64_t *order, int64_t nk) {
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, s->hist + l * SC_TEAL_NTAPS * 2 * SC_TEAL_NB, (size_t)(SC_TEAL_NTAPS * 2 * SC_TEAL_NB) * sizeof(int64_t));
    for (int64_t k = 0; k < nk; k++) h = fnv(h, s->keys + 2 * order[k], 2 * sizeof(int64_t));
    return (int64_t)(h >> 1);
}

sc_status sc_teal_ensure_curves(void *state, const sc_model *m, sc_err *err) {
    teal *s = state;
    int64_t nl = s->L1 - s->L0, D = s->D;
    /* lengths first: bounded lengths keep the row sums below from overflowing */
    for (int64_t k = 0; k < s->n_keys; k++)
        if (s->keys[2 * k + 1] < 1 || s->keys[2 * k + 1] > s->len)
            return sc_errf(err, SC_EFORMAT, "teal: sample sequence %lld has length %lld (1..%lld)", (long long)k,
                           (long long)s->keys[2 * k + 1], (long long)s->len);
    for (int64_t l = 0; l < nl; l++) {
        int64_t total = row_of(s, s->n_keys);
        if (s->smp_rows[l] != total)
            return sc_errf(err, SC_EFORMAT, "teal: layer %lld holds %lld sample rows, the keys account for %lld",
                           (long long)(s->L0 + l), (long long)s->smp_rows[l], (long long)total);
    }
    double *cum = malloc((size_t)(SC_TEAL_NTAPS * SC_TEAL_NB) * sizeof(double));
    int64_t *order = malloc((size_t)(s->n_keys + 1) * sizeof(int64_t)), *len = malloc((size_t)(s->K + 1) * sizeof(int64_t));
    float *x = malloc((size_t)((s->K + 1) * s->len * D) * sizeof(float));
    if (!cum || !order || !len || !x) {
        free(cum);
        free(order);
        free(len);
        free(x);
        return sc_errf(err, SC_ENOMEM, "teal: out of memory");
    }
    int64_t nk = bottom_k(s, order);
    sc_status st = SC_OK;
    for (int64_t l = 0; l < nl && !st; l++) {
        int64_t fp = fingerprint(s, l, order, nk);
        if (s->rows[l] > 0 && s->fp[l] == fp) continue;
        s->rows[l] = 0;
        s->fp[l] = 0;
        memset(s->curve + l * SC_TEAL_CURVE_ROWS * SC_TEAL_CURVE_COLS, 0,
               SC_TEAL_CURVE_ROWS * SC_TEAL_CURVE_COLS * sizeof(double));
        if (!s->greedy || !m || !m->layers) continue; /* no weights: computed when loaded with the model */
        const double *cp[SC_TEAL_NTAPS];
        for (int k = 0; k < SC_TEAL_NTAPS; k++) {
            sc_teal_cumulative(s->hist + (l * SC_TEAL_NTAPS + k) * 2 * SC_TEAL_NB, cum + k * SC_TEAL_NB);
            cp[k] = cum + k * SC_TEAL_NB;
        }
        for (int64_t k = 0; k < nk; k++) { /* the canonical sample: bottom-K in key order */
            len[k] = s->keys[2 * order[k] + 1];
            memcpy(x + k * s->len * D, s->smp[l] + row_of(s, order[k]) * D, (size_t)(len[k] * D) * sizeof(float));
        }
        sc_teal_sample smp = {x, len, nk, s->len};
        st = sc_teal_greedy_layer(m, s->L0 + l, &smp, cp, s->curve + l * SC_TEAL_CURVE_ROWS * SC_TEAL_CURVE_COLS,
                                  &s->rows[l], err);
        if (!st) s->fp[l] = fp;
    }
    free(cum);
    free(order);
    free(len);
    free(x);
    return st;
}

static sc_status teal_finalize(void *p, sc_err *err) {
    teal *s = p;
    return sc_teal_ensure_curves(s, s->m, err);
}

const int64_t *sc_teal_hist(void *state, int64_t layer, int tap) {
    teal *s = state;
    if (!s || layer < s->L0 || layer >= s->L1 || tap < 0 || tap >= SC_TEAL_NTAPS) return NULL;
    return s->hist + ((layer - s->L0) * SC_TEAL_NTAPS + tap) * 2 * SC_TEAL_NB;
}

const double *sc_teal_curve(void *state, int64_t layer, int64_t *rows) {
    teal *s = state;
    *rows = 0;
    if (!s || layer < s->L0 || layer >= s->L1) return NULL;
    *rows = s->rows[layer - s->L0];
    return s->curve + (layer - s->L0) * SC_TEAL_CURVE_ROWS * SC_TEAL_CURVE_COLS;
}

static sc_array *add(sc_array *out, int *n, int cap, sc_arr_kind kind, sc_arr_type type, int64_t r, int64_t c,
                     void *data) {
    if (*n >= cap) return NULL;
    sc_array *a = &out[(*n)++];
    a->kind = kind;
    a->type = type;
    a->shape[0] = r;
    a->shape[1] = c;
    a->data = data;
    a->concat_data = NULL;
    a->concat_rows = NULL;
    return a;
}

static int teal_arrays(void *p, sc_array *out, int cap) {
    teal *s = p;
    int n = 0;
    sc_array *a;
    if (s->greedy && (a = add(out, &n, cap, SC_ARR_CONCAT, SC_ARR_I64, s->n_keys, 2, s->keys))) {
        snprintf(a->name, sizeof a->name, "sample.keys");
        a->concat_data = (void **)&s->keys;
        a->concat_rows = &s->n_keys;
    }
    for (int64_t l = 0; l < s->L1 - s->L0; l++) {
        long long L = (long long)(s->L0 + l);
        for (int k = 0; k < SC_TEAL_NTAPS; k++)
            if ((a = add(out, &n, cap, SC_ARR_SUM, SC_ARR_I64, 2, SC_TEAL_NB,
                         s->hist + (l * SC_TEAL_NTAPS + k) * 2 * SC_TEAL_NB)))
                snprintf(a->name, sizeof a->name, "layer%lld.%s.hist", L, sc_teal_tap_name(k));
        if (!s->greedy) continue;
        if ((a = add(out, &n, cap, SC_ARR_CONCAT, SC_ARR_F32, s->smp_rows[l], s->D, s->smp[l]))) {
            snprintf(a->name, sizeof a->name, "layer%lld.sample", L);
            a->concat_data = (void **)&s->smp[l];
            a->concat_rows = &s->smp_rows[l];
        }
        if ((a = add(out, &n, cap, SC_ARR_DERIVED, SC_ARR_F64, SC_TEAL_CURVE_ROWS, SC_TEAL_CURVE_COLS,
                     s->curve + l * SC_TEAL_CURVE_ROWS * SC_TEAL_CURVE_COLS)))
            snprintf(a->name, sizeof a->name, "layer%lld.curve", L);
        if ((a = add(out, &n, cap, SC_ARR_DERIVED, SC_ARR_I64, 1, 0, &s->rows[l])))
            snprintf(a->name, sizeof a->name, "layer%lld.curve_rows", L);
        if ((a = add(out, &n, cap, SC_ARR_DERIVED, SC_ARR_I64, 1, 0, &s->fp[l])))
            snprintf(a->name, sizeof a->name, "layer%lld.curve_fp", L);
    }
    return n;
}

/* After a checkpoint is loaded (the engine trimmed the sample to the rows it
 * holds): room for K sequences of len rows again, as teal_create makes. */
static sc_status teal_resume(void *p, sc_err *err) {
    teal *s = p;
    if (!s->greedy) return SC_OK;
    if (s->n_keys > s->K)
        return sc_errf(err, SC_EARG, "teal: a merged sample of %lld sequences cannot be resumed (teal_seqs=%lld)",
                       (long long)s->n_keys, (long long)s->K);
    SC_TRY(sc_sample_resize((void **)&s->keys, (size_t)s->K * 2 * sizeof(int64_t), "teal: the sample keys", err));
    for (int64_t l = 0; l < s->L1 - s->L0; l++)
        SC_TRY(sc_sample_resize((void **)&s->smp[l], (size_t)(s->K * s->len * s->D) * sizeof(float),
                                "teal: the greedy sample", err));
    return SC_OK;
}

const sc_method sc_method_teal = {
    "teal",
    "TEAL: signed histograms of the q/k/v, o, gate/up and down inputs; greedy per-projection allocation curve",
    SC_TAP_BIT(SC_TAP_ATTN_IN) | SC_TAP_BIT(SC_TAP_ATTN_CTX) | SC_TAP_BIT(SC_TAP_MLP_IN) | SC_TAP_BIT(SC_TAP_H) |
        SC_TAP_BIT(SC_TAP_RESID),
    0,
    teal_create,
    teal_observe,
    teal_finalize,
    teal_arrays,
    teal_free,
    NULL,
    teal_resume,
    NULL,
    "teal_greedy,teal_seqs,teal_len",
    NULL,
    NULL,
};

/* ---- eval (see eval_input.h) -------------------------------------------------------------------------------
 *
 * "teal": every projection's input is thresholded at the sparsity
 * s = 1 - density of its tap's threshold table, the one pack stores
 * (sc_plan_teal_table) read as the runtime reads it (srt_table_threshold;
 * q, k, v share the attn_in threshold; gate, up share mlp_in). The hook's
 * |x| > t in double on the f32 t is the runtime's f32 |x| > t exactly. "teal-greedy": per layer, the
 * stored allocation curve read at s = 1 - density (srt_teal_curve_at: linear
 * between the rows bracketing s) gives each projection its own sparsity, and
 * its tap's table its threshold, as the runtime reads them. Every linear of
 * every token is routed (no dense prefix); the achieved sparsity of each
 * projection's input is counted as it runs. "teal-cats" (rm->router CATS):
 * teal's thresholds on every input but h, which the CATS router (router.h)
 * sparsifies instead, top-K of |phi(u_j)| at the same density: the down
 * projection's input sparsity is the router's, its MLP density the stats. */
typedef struct teal_eval {
    sc_teal_mask mk;
} teal_eval;

static sc_status install(void *user, sc_forward *f, const int32_t *ids, int64_t n, int64_t *score_from, sc_err *err) {
    teal_eval *t = user;
    sc_forward_set_linear_hook(f, sc_teal_linear_hook, &t->mk);
    return SC_OK;
}

void sc_input_result_fill(const sc_config *c, const double *dropped, const double *seen, sc_sparse_eval_result *out) {
    double np[SC_TEAL_NPROJ], ntot = 0.0, active = 0.0, eff = 0.0;
    sc_teal_proj_params(c, np);
    for (int p = 0; p < SC_TEAL_NPROJ; p++) ntot += np[p];
    double dmin = 1.0, dmax = 0.0, mlp = 0.0;
    for (int64_t l = 0; l < c->n_layers; l++) {
        double le = 0.0;
        for (int p = 0; p < SC_TEAL_NPROJ; p++) {
            int64_t k = l * SC_TEAL_NPROJ + p;
            double s = seen[k] > 0 ? dropped[k] / seen[k] : 0.0;
            out->in.proj_sparsity[p] += s / (double)c->n_layers;
            le += np[p] * s / ntot;
            active += np[p] * (1.0 - s);
            if (p >= SC_LIN_GATE) mlp += np[p] * (1.0 - s);
        }
        if (l < SC_MAX_LAYERS) {
            out->in.layer_effective[l] = le;
            out->layer_density[l] = 1.0 - le;
        }
        eff += le / (double)c->n_layers;
        dmin = fmin(dmin, 1.0 - le);
        dmax = fmax(dmax, 1.0 - le);
    }
    out->in.valid = true;
    out->in.effective_sparsity = eff;
    out->in.active_linear_params = active;
    out->in.dense_linear_params = ntot * (double)c->n_layers;
    out->in.apr = active > 0 ? out->in.dense_linear_params / active : INFINITY;
    out->stats.density_mean = 1.0 - eff;
    out->stats.density_min = dmin;
    out->stats.density_max = dmax;
    out->stats.layer_mean = out->layer_density;
    out->stats.active_mlp_params = mlp;
    out->stats.rows = out->ppl.n_tokens;
}

sc_status sc_eval_teal(const sc_route_method *rm, const sc_model *m, const sc_dataset *d, const sc_sparse_eval_opts *o,
                       const sc_live_obs *obs, sc_sparse_eval_result *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    const sc_config *c = &m->cfg;
    bool greedy = rm->flags & SC_RM_GREEDY;
    if (!o->calib) return sc_errf(err, SC_EARG, "method %s needs a calibration file (--calib)", o->method);
    void *state = sc_calib_state(o->calib, "teal");
    if (!state)
        return sc_errf(err, SC_EARG, "the calibration file holds no 'teal' statistics (compute --method teal)");
    if (!(o->density >= 0.0 && o->density <= 1.0))
        return sc_errf(err, SC_EARG, "density %g is not in [0, 1]", o->density);
    double target = 1.0 - o->density;
    int64_t L = c->n_layers, D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim;
    int64_t wmax = D > F ? D : F;
    wmax = wmax > qd ? wmax : qd;
    int64_t ctx = o->ctx, longest = 2;
    for (size_t i = 0; i < d->n_seqs; i++) longest = (int64_t)d->seqs[i].n > longest ? (int64_t)d->seqs[i].n : longest;
    teal_eval te;
    memset(&te, 0, sizeof te);
    const bool neuron = rm->router != SRT_ROUTER_DENSE; /* teal-cats: the router owns h */
    sc_router *r = NULL;
    double *thr = calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(double)), *cum = malloc(SC_TEAL_NB * sizeof(double));
    te.mk.dropped = calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(double));
    te.mk.seen = calloc((size_t)(L * SC_TEAL_NPROJ), sizeof(double));
    te.mk.cap = (ctx < longest ? ctx : longest) * wmax;
    te.mk.scratch = malloc((size_t)te.mk.cap * sizeof(float));
    te.mk.thr = thr;
    te.mk.skip_last = true;
    float *curve_f = NULL;
    sc_status st = SC_OK;
    if (!thr || !cum || !te.mk.dropped || !te.mk.seen || !te.mk.scratch) {
        st = sc_errf(err, SC_ENOMEM, "out of memory");
        goto done;
    }
    if (greedy && (st = sc_teal_ensure_curves(state, m, err))) goto done;
    for (int64_t l = 0; l < L; l++) {
        if (!sc_teal_hist(state, l, 0)) continue; /* not calibrated: dense */
        /* the plan pack stores (the thresholds table, the curve in f32), read with the runtime's functions */
        float table[SC_TEAL_NTAPS * SRT_THR_GRID];
        sc_plan_teal_table(state, l, cum, table);
        double s[SC_TEAL_NPROJ];
        for (int p = 0; p < SC_TEAL_NPROJ; p++) s[p] = target;
        if (greedy) {
            int64_t rows;
            const double *curve = sc_teal_curve(state, l, &rows);
            if (rows < 2 && target > 0) {
                st = sc_errf(err, SC_EARG,
                             "teal-greedy: layer %lld has no allocation curve (compute with teal_greedy=1 on "
                             "sequences that fill the sample)", (long long)l);
                goto done;
            }
            float *g = realloc(curve_f, (size_t)(rows * SC_TEAL_CURVE_COLS) * sizeof *g);
            if (!g) {
                st = sc_errf(err, SC_ENOMEM, "out of memory");
                goto done;
            }
            curve_f = g;
            for (int64_t i = 0; i < rows * SC_TEAL_CURVE_COLS; i++) curve_f[i] = (float)curve[i];
            srt_teal_curve_at(curve_f, rows, target, s);
        }
        for (int p = 0; p < SC_TEAL_NPROJ; p++) /* teal-cats: down's input is the router's, no threshold (0) */
            thr[l * SC_TEAL_NPROJ + p] =
                neuron && p == SC_LIN_DOWN ? 0.0 : srt_table_threshold(table + SRT_PROJ_TAP(p) * SRT_THR_GRID, s[p]);
    }
    sc_hooks hk = {sc_router_hook, NULL, sc_router_taps()};
    if (neuron) {
        sc_router_spec spec = {rm->router, o->density, NULL, NULL, false, obs ? obs->fn : NULL, obs ? obs->user : NULL};
        if ((st = sc_router_create(m, &spec, &r, err))) goto done;
        hk.user = r;
    }
    sc_eval_opts eo = {ctx, neuron ? &hk : NULL, install, &te, o->second_half, o->progress};
    if ((st = sc_eval_run(m, d, &eo, &out->ppl, err))) goto done;
    sc_router_stats rs = {0};
    if (neuron) { /* the router's drops are the down projection's input sparsity */
        sc_router_get_stats(r, &rs);
        for (int64_t l = 0; l < L; l++) {
            int64_t k = l * SC_TEAL_NPROJ + SC_LIN_DOWN;
            te.mk.dropped[k] = te.mk.seen[k] * (1.0 - rs.layer_mean[l]);
        }
    }
    sc_input_result_fill(c, te.mk.dropped, te.mk.seen, out);
    out->in.target = target;
    if (neuron) { /* density: the MLP neurons' */
        out->stats = rs;
        for (int64_t l = 0; l < L && l < SC_MAX_LAYERS; l++) out->layer_density[l] = rs.layer_mean[l];
        out->stats.layer_mean = out->layer_density;
    }
done:
    sc_router_free(r);
    free(thr);
    free(cum);
    free(te.mk.dropped);
    free(te.mk.seen);
    free(te.mk.scratch);
    free(curve_f);
    return st;
}
