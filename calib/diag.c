/* diag.c - rank-leverage diagnostics (see diag.h). */
#include "diag.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "claws.h"
#include "larosa.h"
#include "larosa_rot.h"

/* The MLP-input rotations (double) are held for every layer up to this many
 * bytes; above it each layer's is read from the calibration when a hook
 * reaches it (larosa_rot.h). */
#define DG_RESIDENT_BYTES ((size_t)512 << 20)
#include "lc_util.h"

typedef struct vbuf {
    float *v;
    int64_t n, cap;
} vbuf;

typedef struct rank_acc {
    double sum, sumsq, set_change;
    int64_t n, tokens;
    vbuf absd; /* |rank change| */
} rank_acc;

typedef struct scored {
    float v;
    int32_t i;
} scored;

typedef struct dg {
    const sc_model *m;
    int64_t L, D, F, K_rot, K_nat, n_use, budget, taken;
    sc_larosa_rots *rots; /* larosa MLP-input rotations */
    const double **cj; /* [L] CLAWS multipliers */
    double *crot_sum;  /* [L, D] */
    int64_t *crot_n;   /* [L] */
    double *crot;      /* [L, D] */
    vbuf val[SC_DIAG_NQ];
    rank_acc acc[2];
    double *a, *c;     /* [max(D, F)] per-token scratch */
    scored *s0, *s1;
    float *rb;         /* ranks before */
    unsigned char *mark;
    FILE *dump;        /* rank dump (may be NULL) */
    int64_t dump_tokens;
    int64_t *dumped;   /* [2, L] tokens dumped per family and layer */
    bool dump_failed;
} dg;

static void push(vbuf *b, double x) {
    if (b->n < b->cap) b->v[b->n++] = (float)x;
}

static int cmp_scored(const void *p, const void *q) {
    const scored *x = p, *y = q;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* ranks of a (0 = highest, normalised by n - 1) before and after multiplying by c */
static void rank_token(dg *g, const double *a, const double *c, int64_t n, int64_t K, rank_acc *acc, int family,
                       int64_t layer) {
    for (int64_t i = 0; i < n; i++) {
        g->s0[i] = (scored){(float)a[i], (int32_t)i};
        g->s1[i] = (scored){(float)(a[i] * c[i]), (int32_t)i};
    }
    qsort(g->s0, (size_t)n, sizeof *g->s0, cmp_scored);
    qsort(g->s1, (size_t)n, sizeof *g->s1, cmp_scored);
    double norm = n > 1 ? (double)(n - 1) : 1.0;
    for (int64_t p = 0; p < n; p++) g->rb[g->s0[p].i] = (float)((double)p / norm);
    int64_t *nd = g->dumped ? &g->dumped[family * g->L + layer] : NULL;
    if (g->dump && nd && *nd < g->dump_tokens) {
        for (int64_t p = 0; p < n; p++) /* by coordinate: rank before, rank after */
            g->c[g->s1[p].i] = (double)p / norm;
        for (int64_t i = 0; i < n; i++)
            if (fprintf(g->dump, "%s,%lld,%lld,%lld,%.6f,%.6f\n", family ? "native" : "rotated", (long long)layer,
                        (long long)*nd, (long long)i, (double)g->rb[i], g->c[i]) < 0)
                g->dump_failed = true;
        (*nd)++;
    }
    for (int64_t p = 0; p < n; p++) {
        double dlt = (double)p / norm - (double)g->rb[g->s1[p].i];
        acc->sum += dlt;
        acc->sumsq += dlt * dlt;
        acc->n++;
        push(&acc->absd, fabs(dlt));
    }
    memset(g->mark, 0, (size_t)n);
    for (int64_t p = 0; p < K; p++) g->mark[g->s0[p].i] = 1;
    int64_t changed = 0;
    for (int64_t p = 0; p < K; p++) changed += !g->mark[g->s1[p].i];
    acc->set_change += K ? (double)changed / (double)K : 0.0;
    acc->tokens++;
}

static sc_status grad_hook(void *user, const sc_tap_event *ev, sc_err *err) {
    dg *g = user;
    if (!ev->is_grad || ev->tap != SC_TAP_MLP_IN) return SC_OK;
    int64_t l = ev->layer, D = g->D;
    const void *qv;
    SC_TRY(sc_larosa_rots_get(g->rots, l, SC_LAROSA_MLP, &qv, err));
    const double *Q = qv;
    double *sum = g->crot_sum + l * D;
    for (int64_t t = 0; t < g->n_use; t++) {
        const float *gr = ev->data + t * D;
        for (int64_t k = 0; k < D; k++) {
            double z = 0;
            for (int64_t i = 0; i < D; i++) z += Q[i * D + k] * (double)gr[i];
            sum[k] += fabs(z);
        }
    }
    g->crot_n[l] += g->n_use;
    return SC_OK;
}

static sc_status stat_hook(void *user, const sc_tap_event *ev, sc_err *err) {
    dg *g = user;
    if (ev->is_grad) return SC_OK;
    int64_t l = ev->layer, D = g->D, F = g->F;
    const void *qv = NULL;
    if (ev->tap == SC_TAP_MLP_IN) SC_TRY(sc_larosa_rots_get(g->rots, l, SC_LAROSA_MLP, &qv, err));
    for (int64_t t = 0; t < g->n_use; t++) {
        const float *row = ev->data + t * ev->width;
        if (ev->tap == SC_TAP_MLP_IN) {
            const double *Q = qv, *cr = g->crot + l * D;
            for (int64_t k = 0; k < D; k++) {
                double z = 0;
                for (int64_t i = 0; i < D; i++) z += Q[i * D + k] * (double)row[i];
                g->a[k] = fabs(z);
                push(&g->val[SC_DIAG_Z], g->a[k]);
                push(&g->val[SC_DIAG_ZC], g->a[k] * cr[k]);
            }
            rank_token(g, g->a, cr, D, g->K_rot, &g->acc[0], 0, l);
        } else if (ev->tap == SC_TAP_GATE) {
            for (int64_t j = 0; j < F; j++) push(&g->val[SC_DIAG_U], fabs((double)row[j]));
        } else if (ev->tap == SC_TAP_GATE_ACT) {
            for (int64_t j = 0; j < F; j++) {
                g->a[j] = fabs((double)row[j]);
                push(&g->val[SC_DIAG_PHI], g->a[j]);
                push(&g->val[SC_DIAG_PHIC], g->a[j] * g->cj[l][j]);
            }
            rank_token(g, g->a, g->cj[l], F, g->K_nat, &g->acc[1], 1, l);
        }
    }
    return SC_OK;
}

static void spread(vbuf *b, const char *name, sc_diag_spread *out) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < b->n; i++) {
        s += b->v[i];
        ss += (double)b->v[i] * b->v[i];
    }
    double mean = b->n ? s / (double)b->n : 0;
    double *x = malloc((size_t)(b->n ? b->n : 1) * sizeof *x);
    out->name = name;
    out->n = b->n;
    out->std = b->n > 1 ? sqrt(fmax(0.0, (ss - (double)b->n * mean * mean) / (double)(b->n - 1))) : 0.0;
    if (!x) return;
    for (int64_t i = 0; i < b->n; i++) x[i] = b->v[i];
    out->p50 = sc_lc_quantile_sorted(x, b->n, 0.50);
    out->p95 = sc_lc_quantile_sorted(x, b->n, 0.95); /* already sorted: qsort is cheap */
    out->ratio = out->p50 > 0 ? out->p95 / out->p50 : INFINITY;
    free(x);
}

static const char *const qnames[SC_DIAG_NQ] = {"|z| = |Q^T x|", "c_rot", "|z| * c_rot", "|W_g x|",
                                               "|phi(W_g x)|",  "c_j",   "|phi(W_g x)| * c_j"};

static void dg_free(dg *g) {
    sc_larosa_rots_free(g->rots);
    free(g->cj);
    free(g->crot_sum);
    free(g->crot_n);
    free(g->crot);
    for (int k = 0; k < SC_DIAG_NQ; k++) free(g->val[k].v);
    for (int k = 0; k < 2; k++) free(g->acc[k].absd.v);
    free(g->a);
    free(g->c);
    free(g->s0);
    free(g->s1);
    free(g->rb);
    free(g->mark);
    free(g->dumped);
}

static bool vb_alloc(vbuf *b, int64_t cap) {
    b->cap = cap;
    b->n = 0;
    b->v = malloc((size_t)(cap > 0 ? cap : 1) * sizeof(float));
    return b->v != NULL;
}

sc_status sc_diag_run(const sc_model *m, const sc_dataset *d, const sc_diag_opts *o, sc_diag_result *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    const sc_config *c = &m->cfg;
    int64_t L = c->n_layers, D = c->dim, F = c->ffn_dim, W = D > F ? D : F, T = o->ctx;
    const void *ls = sc_calib_state(o->calib, "larosa"), *cs = sc_calib_state(o->calib, "claws");
    if (!ls || !cs)
        return sc_errf(err, SC_EARG, "the calibration file needs claws and larosa statistics (compute --method claws,larosa)");
    double dens = o->density > 0 ? o->density : 0.5;
    dg g;
    memset(&g, 0, sizeof g);
    g.m = m;
    g.L = L;
    g.D = D;
    g.F = F;
    g.K_rot = srt_topk_count(dens, D);
    g.K_nat = srt_topk_count(dens, F);
    g.budget = o->max_tokens > 0 ? o->max_tokens : 2048;
    sc_status st = SC_OK;
    g.cj = calloc((size_t)L, sizeof *g.cj);
    g.crot_sum = calloc((size_t)(L * D), sizeof(double));
    g.crot_n = calloc((size_t)L, sizeof(int64_t));
    g.crot = calloc((size_t)(L * D), sizeof(double));
    g.a = malloc((size_t)W * sizeof(double));
    g.c = malloc((size_t)W * sizeof(double));
    g.s0 = malloc((size_t)W * sizeof(scored));
    g.s1 = malloc((size_t)W * sizeof(scored));
    g.rb = malloc((size_t)W * sizeof(float));
    g.mark = malloc((size_t)W);
    g.dump = o->dump;
    g.dump_tokens = o->dump_tokens > 0 ? o->dump_tokens : 64;
    g.dumped = o->dump ? calloc((size_t)(2 * L), sizeof *g.dumped) : NULL;
    if (o->dump && (!g.dumped || fprintf(o->dump, "family,layer,token,coord,rank_before,rank_after\n") < 0)) g.dump_failed = true;
    int64_t caps[SC_DIAG_NQ] = {g.budget * L * D, L * D, g.budget * L * D, g.budget * L * F,
                                g.budget * L * F, L * F, g.budget * L * F};
    bool ok = g.cj && g.crot_sum && g.crot_n && g.crot && g.a && g.c && g.s0 && g.s1 && g.rb && g.mark &&
              vb_alloc(&g.acc[0].absd, g.budget * L * D) && vb_alloc(&g.acc[1].absd, g.budget * L * F);
    for (int k = 0; k < SC_DIAG_NQ && ok; k++) ok = vb_alloc(&g.val[k], caps[k]);
    if (!ok) {
        dg_free(&g);
        return sc_errf(err, SC_ENOMEM, "out of memory for %lld tokens of statistics (lower --max-tokens)",
                       (long long)g.budget);
    }
    for (int64_t l = 0; l < L; l++) g.cj[l] = sc_claws_c(cs, l);
    for (int64_t l = 0; l < L; l++) {
        if (!sc_larosa_has(ls, l, SC_LAROSA_MLP, NULL) || !g.cj[l]) {
            dg_free(&g);
            return sc_errf(err, SC_EARG, "layer %lld has no %s in the calibration file (calibrate every layer)",
                           (long long)l, g.cj[l] ? "larosa MLP-input rotation" : "CLAWS multipliers");
        }
    }
    if ((st = sc_larosa_state(o->calib, D, &ls, err)) ||
        (st = sc_larosa_rots_create(o->calib, 1u << SC_LAROSA_MLP, false, DG_RESIDENT_BYTES, &g.rots, err))) {
        dg_free(&g);
        return st;
    }
    /* usable sequences and the split: c_rot on the first part, statistics on the rest */
    size_t n_ok = 0;
    for (size_t i = 0; i < d->n_seqs; i++) n_ok += d->seqs[i].n >= 2;
    int64_t n_crot = o->crot_seqs > 0 ? o->crot_seqs : (int64_t)n_ok / 2;
    if (n_ok < 2 || n_crot >= (int64_t)n_ok) {
        dg_free(&g);
        return sc_errf(err, SC_EARG, "need sequences for both c_rot (%lld) and the statistics (have %zu)",
                       (long long)n_crot, n_ok);
    }
    sc_forward *f = NULL;
    float *dl = NULL;
    if ((st = sc_forward_create_train(m, T, &f, err))) goto done;
    if (!(dl = malloc((size_t)(T * c->vocab_size) * sizeof(float)))) {
        st = sc_errf(err, SC_ENOMEM, "out of memory");
        goto done;
    }
    sc_hooks gh = {grad_hook, &g, SC_TAP_BIT(SC_TAP_MLP_IN)};
    sc_hooks sh = {stat_hook, &g, SC_TAP_BIT(SC_TAP_MLP_IN) | SC_TAP_BIT(SC_TAP_GATE) | SC_TAP_BIT(SC_TAP_GATE_ACT)};
    int64_t k = 0;
    for (size_t i = 0; i < d->n_seqs && !st; i++) {
        if (d->seqs[i].n < 2) continue;
        int64_t n = (int64_t)d->seqs[i].n < T ? (int64_t)d->seqs[i].n : T;
        const int32_t *ids = d->seqs[i].ids;
        const float *logits;
        if (k++ < n_crot) { /* c_rot = E|Q^T dL/dx| over scored positions */
            g.n_use = n - 1;
            if ((st = sc_forward_run(f, ids, n, 0, NULL, &logits, err))) break;
            sc_loss_ce(logits, ids, n, c->vocab_size, dl);
            if ((st = sc_backward_run(f, dl, &gh, err))) break;
            out->crot_tokens += n - 1;
            if (k == n_crot)
                for (int64_t j = 0; j < L * D; j++)
                    g.crot[j] = g.crot_n[j / D] ? g.crot_sum[j] / (double)g.crot_n[j / D] : 0.0;
            continue;
        }
        if (g.taken >= g.budget) break;
        g.n_use = n - 1 < g.budget - g.taken ? n - 1 : g.budget - g.taken;
        if ((st = sc_forward_run(f, ids, n, 0, &sh, &logits, err))) break;
        g.taken += g.n_use;
    }
    if (st) goto done;
    for (int64_t l = 0; l < L; l++)
        for (int64_t j = 0; j < D; j++) push(&g.val[SC_DIAG_CROT], g.crot[l * D + j]);
    for (int64_t l = 0; l < L; l++)
        for (int64_t j = 0; j < F; j++) push(&g.val[SC_DIAG_CJ], g.cj[l][j]);
    for (int q = 0; q < SC_DIAG_NQ; q++) spread(&g.val[q], qnames[q], &out->spread[q]);
    const int base[2] = {SC_DIAG_Z, SC_DIAG_PHI}, mod[2] = {SC_DIAG_CROT, SC_DIAG_CJ};
    const char *fam[2] = {"LaRoSA rotated-input", "CLAWS gate-space"};
    for (int r = 0; r < 2; r++) {
        sc_diag_rank *rk = &out->rank[r];
        rank_acc *a = &g.acc[r];
        rk->family = fam[r];
        rk->base = qnames[base[r]];
        rk->modifier = qnames[mod[r]];
        rk->leverage = log10(out->spread[mod[r]].ratio) / log10(out->spread[base[r]].ratio);
        double mean = a->n ? a->sum / (double)a->n : 0;
        rk->rank_std = a->n > 1 ? sqrt(fmax(0.0, (a->sumsq - (double)a->n * mean * mean) / (double)(a->n - 1))) : 0;
        double *x = malloc((size_t)(a->absd.n ? a->absd.n : 1) * sizeof *x);
        if (!x) {
            st = sc_errf(err, SC_ENOMEM, "out of memory");
            goto done;
        }
        for (int64_t i = 0; i < a->absd.n; i++) x[i] = a->absd.v[i];
        rk->rank_p95 = sc_lc_quantile_sorted(x, a->absd.n, 0.95);
        free(x);
        rk->set_change = a->tokens ? a->set_change / (double)a->tokens : 0;
    }
    out->stat_tokens = g.taken;
    out->layers = L;
    out->density = dens;
    if (g.dump_failed) st = sc_errf(err, SC_EIO, "writing the rank dump failed");
done:
    free(dl);
    sc_forward_free(f);
    dg_free(&g);
    return st;
}
