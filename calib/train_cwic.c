/* train_cwic.c - learned CWIC thresholds (train.h; the paper "Compute Where
 * It Counts: Efficient Large Language Models via Learned Granular Sparsity",
 * Sections 3.1-3.4 and Appendix B).
 *
 * The student is the reference forward pass with a linear hook that runs
 * every linear layer (q k v o gate up down) as the CWIC router does
 * (sc_cwic_linear, the function `eval --method cwic` calls):
 *   y = SGMM(x - mean, W, theta * std) + W mean,
 * stripe-column (s, i) active iff |x_i - mean_i| >= theta_si std_i.
 *
 * Gradients (per linear layer, from dy = dL/dy, which the backward pass's
 * linear gradient hook hands over, forward.h):
 *   x      straight through, as if unmasked: dL/dx = W^T dy is what the
 *          backward pass computes anyway (it differentiates the dense layer);
 *          no gradient through |x| (Section 3.1.3); mean and std receive none;
 *   theta  G_tsi = H(|z_ti| - theta_si std_i), z = x - mean, with the
 *          JumpReLU-style pseudo-derivative dH(u)/du = K(u / eps) / eps,
 *          K the rectangle [-1/2, 1/2) and eps_i = alpha_eps std_i (Eq. 7-8):
 *            dG_tsi / dtheta_si = -(1 / alpha_eps) [| |z_ti| / std_i - theta_si | < alpha_eps / 2],
 *          dL/dG_tsi = z_ti sum_{r in s} W_ri dy_tr, so per stripe
 *            g_si = -(1 / alpha_eps) sum_t [band] z_ti (dy_t,s W_s)_i
 *          (one [n, rows] x [rows, in] product per stripe: the cost of W^T dy);
 *   W      a matrix W' that trains runs in the model's place in the forward
 *          and backward passes (sc_forward_set_weights; the teacher keeps the
 *          model's), stripes and all, so dL/dx = W'^T dy; its gradient is
 *          dL/dW' = sum_t dy_t x_used_t^T per stripe, x_used = G_t o z_t + mean,
 *          the input as the striped product used it (one [rows, n] x [n, in]
 *          product per stripe, in the loop above);
 *   LoRA   (--train lora) W_d' = W_d + s B A: dL/dA = s B^T dL/dW_d',
 *          dL/dB = s dL/dW_d' A^T;
 *   all    (--train all) every W_q W_k W_v W_o W_g W_u W_d is an owned f32
 *          copy trained by AdamW on dL/dW' directly; norms and embeddings
 *          stay frozen.
 *
 * Loss (Eq. 11, 15): per scored position KL(student || teacher) +
 * KL(teacher || student) (the symmetric KL) against the dense model's logits
 * computed on the fly, plus lambda (min(APR - APR_target, 0))^2 per step, APR
 * = dense / active parameters of the step's student tokens (Eq. 9-10) and
 * APR_target rising linearly from 1 to the target over the warm-up. The AP
 * loss reaches theta through the same pseudo-derivative:
 *   dL_AP / dtheta_si = 2 lambda min(APR - target, 0) (-dense / APs^2) rows_s (-1 / alpha_eps) n_band_si,
 * n_band_si the step's tokens in the band. (The paper lets it reach x too; we
 * pass it to theta only: the step's APR is known only after its last
 * sequence, when the backward passes have run.)
 *
 * Statistics: mean and std per input channel of each tapped input, tracked by
 * an EMA over steps (beta_dist): after each step, mean <- b mean + (1 - b)
 * batch mean and std <- b std + (1 - b) batch std of the step's student
 * inputs; a step runs with the values of the steps before it (the first with
 * the calibration's), and the router uses the last ones (Section 3.4.1).
 * Update: AdamW, theta's learning rate multiplied by sqrt(in) (Section 3.1.2),
 * no weight decay on theta, then theta <- max(theta, theta_min). */
#define _POSIX_C_SOURCE 200809L
#define XXH_INLINE_ALL
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "cwic.h"
#include "srt_route.h"
#include "teal.h"
#include "train.h"

enum { NP = SC_LIN_COUNT, NT = 4 };

typedef struct cw_m {
    int64_t in, out, S, ns, tap;
    size_t off;      /* into theta / g / band */
    size_t woff;     /* into wown / gwown (--train all) */
    float *tau;      /* [ns, in] theta * std (the router's rule) */
    float *wmean;    /* [out] W mean */
    bool all_zero;   /* every theta 0: left dense, as the router does */
} cw_m;

struct sc_cwic_student {
    const sc_model *m;
    const sc_train_opts *o;
    sc_lora_params *p; /* NULL: thresholds only (or all weights) */
    bool weights;      /* every linear weight trains (--train all, o->cwic_weights) */
    int64_t L, D, F, stripe, max_ctx, max_in;
    int64_t width[NT];
    cw_m *mats;     /* [L, 7] */
    size_t n_theta, n_stat;
    float *theta, *g, *band;   /* [n_theta] */
    float *mean, *std;         /* [n_stat]: per layer the 4 taps' channels */
    size_t *stat_off;          /* [L * 4] */
    double *bsum, *bsum2;      /* [n_stat] the step's batch sums */
    int64_t *bcount;           /* [L * 4] */
    float *wfused;  /* [L, D, F] W_d + s B A (LoRA) */
    float *gW;      /* [D, F] dL/dW' of one layer (LoRA) */
    float *gA, *gB; /* LoRA gradient accumulators */
    float *wown, *gwown; /* [n_w] every linear weight and its gradient accumulator (--train all) */
    size_t n_w;
    const float **wt; /* [L, 7] the matrices the student runs (sc_forward_set_weights): NULL the model's, else
                         wfused's or wown's */
    sc_forward *f;
    sc_distill *loss;
    float *teacher; /* [T, D] */
    float *xin[NT]; /* the current layer's inputs [T, width] */
    float *z, *zs, *P; /* [T, max_in] */
    uint32_t *zi;      /* [max_in]: a stripe's live columns (sc_cwic_linear) */
    double *nll;
    bool backward;  /* inside the backward pass: forward events are recomputations */
    bool relaxed;   /* forward with the ramp G = clamp((|z| / std - theta) / alpha_eps + 1/2, 0, 1), whose exact
                       derivative in theta is the pseudo-derivative (sc_cwic_student_relax) */
    double active, dense; /* parameters of the student's forward passes since the last reset */
};

/* ---- the parameters' layout ---- */

static void proj_dims(const sc_config *c, int p, int64_t *in, int64_t *out) {
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    int64_t ins[NP] = {D, D, D, qd, D, D, F}, outs[NP] = {qd, kvd, kvd, D, F, F, D};
    *in = ins[p];
    *out = outs[p];
}

static const float *proj_weight(const sc_cwic_student *s, int64_t l, int p) {
    if (s->wt[l * NP + p]) return s->wt[l * NP + p];
    const sc_layer *L = NULL;
    sc_err e;
    if (sc_model_layer(s->m, l, &L, &e)) return NULL;
    const float *w[NP] = {L->wq, L->wk, L->wv, L->wo, L->wg, L->wu, L->wd};
    return w[p];
}

/* tau and wmean from theta, mean and std; W_d' for LoRA */
static sc_status refresh(sc_cwic_student *s, sc_err *err) {
    int64_t D = s->D, F = s->F;
    for (int64_t l = 0; s->p && l < s->L; l++) {
        const sc_layer *Ly;
        SC_TRY(sc_model_layer(s->m, l, &Ly, err));
        float *w = s->wfused + l * D * F;
        memcpy(w, Ly->wd, (size_t)(D * F) * sizeof(float));
        int64_t r = s->p->rank;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)D, (blasint)F, (blasint)r, (float)s->p->scale,
                    s->p->B + l * D * r, (blasint)r, s->p->A + l * r * F, (blasint)F, 1.0f, w, (blasint)F);
    }
    for (int64_t l = 0; l < s->L; l++)
        for (int p = 0; p < NP; p++) {
            cw_m *c = &s->mats[l * NP + p];
            const float *th = s->theta + c->off, *mean = s->mean + s->stat_off[l * NT + c->tap],
                        *sd = s->std + s->stat_off[l * NT + c->tap];
            c->all_zero = true;
            for (int64_t j = 0; j < c->ns * c->in; j++) {
                c->tau[j] = srt_cwic_tau(th[j], sd[j % c->in]);
                c->all_zero &= th[j] == 0.0f;
            }
            const float *W = proj_weight(s, l, p);
            if (!W) return sc_errf(err, SC_EFORMAT, "cwic training: layer %lld has no weights", (long long)l);
            for (int64_t r = 0; r < c->out; r++) {
                double acc = 0.0;
                for (int64_t i = 0; i < c->in; i++) acc += (double)W[r * c->in + i] * (double)mean[i];
                c->wmean[r] = (float)acc;
            }
        }
    return SC_OK;
}

void sc_cwic_student_free(sc_cwic_student *s) {
    if (!s) return;
    for (int64_t k = 0; s->mats && k < s->L * NP; k++) {
        free(s->mats[k].tau);
        free(s->mats[k].wmean);
    }
    free(s->mats);
    free(s->theta);
    free(s->g);
    free(s->band);
    free(s->mean);
    free(s->std);
    free(s->stat_off);
    free(s->bsum);
    free(s->bsum2);
    free(s->bcount);
    free(s->wfused);
    free(s->gW);
    free(s->gA);
    free(s->gB);
    free(s->wown);
    free(s->gwown);
    free(s->wt);
    sc_forward_free(s->f);
    sc_distill_free(s->loss);
    free(s->teacher);
    for (int k = 0; k < NT; k++) free(s->xin[k]);
    free(s->z);
    free(s->zs);
    free(s->zi);
    free(s->P);
    free(s->nll);
    free(s);
}

uint64_t sc_cwic_weights_bytes(const sc_config *c) {
    uint64_t n = 0;
    for (int p = 0; p < NP; p++) {
        int64_t in, out;
        proj_dims(c, p, &in, &out);
        n += (uint64_t)in * (uint64_t)out;
    }
    return n * (uint64_t)c->n_layers * 16u; /* the weights, their gradient and AdamW's two moments, f32 */
}

sc_status sc_cwic_weights_check(const sc_config *c, sc_err *err) {
    uint64_t need = sc_cwic_weights_bytes(c), avail = sc_mem_available();
    if (!avail || need <= avail) return SC_OK;
    char nb[32], ab[32];
    snprintf(nb, sizeof nb, need < 1000000000u ? "%.1f MB" : "%.2f GB", (double)need / (need < 1000000000u ? 1e6 : 1e9));
    snprintf(ab, sizeof ab, avail < 1000000000u ? "%.1f MB" : "%.2f GB", (double)avail / (avail < 1000000000u ? 1e6 : 1e9));
    return sc_errf(err, SC_ENOMEM, "cwic training of all weights needs %s (%llu weights x 16 bytes: f32 copy, gradient, "
                                   "two AdamW moments), %s is available (--train thresholds or lora fit)",
                   nb, (unsigned long long)(need / 16), ab);
}

/* --train all: owned f32 copies of every linear weight (the model's, converted once) and their gradient, after
 * checking that they and AdamW's moments fit the memory available */
static sc_status own_weights(sc_cwic_student *s, sc_err *err) {
    SC_TRY(sc_cwic_weights_check(&s->m->cfg, err));
    s->wown = malloc(s->n_w * sizeof(float));
    s->gwown = calloc(s->n_w, sizeof(float));
    if (!s->wown || !s->gwown)
        return sc_errf(err, SC_ENOMEM, "out of memory for the %zu trained weights", s->n_w);
    for (int64_t l = 0; l < s->L; l++) {
        const sc_layer *Ly = &s->m->layers[l];
        const float *const *addr[NP] = {&Ly->wq, &Ly->wk, &Ly->wv, &Ly->wo, &Ly->wg, &Ly->wu, &Ly->wd};
        for (int p = 0; p < NP; p++) {
            const cw_m *c = &s->mats[l * NP + p];
            const float *W;
            SC_TRY(sc_model_weight(s->m, addr[p], &W, err));
            memcpy(s->wown + c->woff, W, (size_t)(c->in * c->out) * sizeof(float));
            s->wt[l * NP + p] = s->wown + c->woff;
        }
    }
    return SC_OK;
}

sc_status sc_cwic_student_create(const sc_model *m, int64_t max_ctx, const sc_cwic_plan *init, bool init_theta,
                                 const sc_train_opts *o, sc_lora_params *lora, sc_cwic_student **out, sc_err *err) {
    *out = NULL;
    const sc_config *c = &m->cfg;
    if (lora && (lora->n_layers != c->n_layers || lora->dim != c->dim || lora->ffn != c->ffn_dim))
        return sc_errf(err, SC_EARG, "cwic training: the adapter does not have the model's shape");
    if (lora && o->cwic_weights)
        return sc_errf(err, SC_EARG, "cwic training: a LoRA adapter and all weights do not train together");
    sc_cwic_student *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "out of memory");
    s->m = m;
    s->o = o;
    s->p = lora;
    s->L = c->n_layers;
    s->D = c->dim;
    s->F = c->ffn_dim;
    s->max_ctx = max_ctx;
    s->stripe = sc_cwic_plan_stripe(init);
    int64_t qd = c->n_heads * c->head_dim, widths[NT] = {c->dim, qd, c->dim, c->ffn_dim};
    memcpy(s->width, widths, sizeof widths);
    s->max_in = c->dim > qd ? c->dim : qd;
    s->max_in = s->max_in > c->ffn_dim ? s->max_in : c->ffn_dim;
    sc_status st = SC_OK;
    s->mats = calloc((size_t)(s->L * NP), sizeof *s->mats);
    s->stat_off = malloc((size_t)(s->L * NT) * sizeof *s->stat_off);
    if (!s->mats || !s->stat_off) st = sc_errf(err, SC_ENOMEM, "out of memory");
    for (int64_t l = 0; l < s->L && !st; l++) {
        for (int t = 0; t < NT; t++) {
            s->stat_off[l * NT + t] = s->n_stat;
            s->n_stat += (size_t)widths[t];
        }
        for (int p = 0; p < NP && !st; p++) {
            cw_m *x = &s->mats[l * NP + p];
            proj_dims(c, p, &x->in, &x->out);
            x->S = s->stripe < x->out ? s->stripe : x->out;
            x->ns = (x->out + x->S - 1) / x->S;
            x->tap = sc_teal_tap_of((sc_linear)p);
            x->off = s->n_theta;
            s->n_theta += (size_t)(x->ns * x->in);
            x->woff = s->n_w;
            s->n_w += (size_t)(x->in * x->out);
            x->tau = malloc((size_t)(x->ns * x->in) * sizeof(float));
            x->wmean = malloc((size_t)x->out * sizeof(float));
            if (!x->tau || !x->wmean) st = sc_errf(err, SC_ENOMEM, "out of memory");
        }
    }
    if (!st) {
        s->theta = malloc(s->n_theta * sizeof(float));
        s->g = calloc(s->n_theta, sizeof(float));
        s->band = calloc(s->n_theta, sizeof(float));
        s->mean = malloc(s->n_stat * sizeof(float));
        s->std = malloc(s->n_stat * sizeof(float));
        s->bsum = calloc(s->n_stat, sizeof(double));
        s->bsum2 = calloc(s->n_stat, sizeof(double));
        s->bcount = calloc((size_t)(s->L * NT), sizeof(int64_t));
        s->teacher = malloc((size_t)(max_ctx * s->D) * sizeof(float));
        s->z = malloc((size_t)(max_ctx * s->max_in) * sizeof(float));
        s->zs = malloc((size_t)(max_ctx * s->max_in) * sizeof(float));
        s->zi = malloc((size_t)s->max_in * sizeof(uint32_t));
        s->P = malloc((size_t)(max_ctx * s->max_in) * sizeof(float));
        s->nll = malloc((size_t)max_ctx * sizeof(double));
        s->wt = calloc((size_t)(s->L * NP), sizeof *s->wt);
        for (int t = 0; t < NT; t++) s->xin[t] = malloc((size_t)(max_ctx * widths[t]) * sizeof(float));
        bool ok = s->theta && s->g && s->band && s->mean && s->std && s->bsum && s->bsum2 && s->bcount && s->teacher &&
                  s->z && s->zs && s->zi && s->P && s->nll && s->wt && s->xin[0] && s->xin[1] && s->xin[2] && s->xin[3];
        if (lora) {
            size_t na = (size_t)(s->L * lora->rank * s->F), nb = (size_t)(s->L * s->D * lora->rank);
            s->wfused = malloc((size_t)(s->L * s->D * s->F) * sizeof(float));
            s->gW = malloc((size_t)(s->D * s->F) * sizeof(float));
            s->gA = calloc(na, sizeof(float));
            s->gB = calloc(nb, sizeof(float));
            ok = ok && s->wfused && s->gW && s->gA && s->gB;
            for (int64_t l = 0; ok && l < s->L; l++) s->wt[l * NP + SC_LIN_DOWN] = s->wfused + l * s->D * s->F;
        }
        if (!ok) st = sc_errf(err, SC_ENOMEM, "out of memory for the CWIC student of %lld tokens", (long long)max_ctx);
    }
    if (!st && o->cwic_weights) st = own_weights(s, err);
    /* the initial thresholds and statistics: the plan's (a calibration's mean and std, its fitted theta) */
    for (int64_t l = 0; l < s->L && !st; l++)
        for (int p = 0; p < NP && !st; p++) {
            cw_m *x = &s->mats[l * NP + p];
            sc_cwic_matrix mx;
            if (!sc_cwic_plan_matrix(init, l, p, &mx) || mx.in != x->in || mx.ns != x->ns) {
                st = sc_errf(err, SC_EARG, "cwic training: the initial thresholds lack layer %lld %s (calibrate every "
                                           "layer with compute --method cwic)", (long long)l, sc_linear_name((sc_linear)p));
                break;
            }
            for (int64_t j = 0; j < x->ns * x->in; j++) {
                float th = init_theta ? mx.theta[j] : (float)o->cwic_theta0;
                s->theta[x->off + j] = th > 1e30f ? 1e30f : th < (float)o->cwic_theta_min ? (float)o->cwic_theta_min : th;
            }
            if (p == SC_LIN_Q || p == SC_LIN_O || p == SC_LIN_GATE || p == SC_LIN_DOWN) {
                size_t so = s->stat_off[l * NT + x->tap];
                memcpy(s->mean + so, mx.mean, (size_t)x->in * sizeof(float));
                memcpy(s->std + so, mx.std, (size_t)x->in * sizeof(float));
            }
        }
    if (!st) st = sc_forward_create_train_ex(m, max_ctx, SC_TRAIN_CHUNKED_LOSS, &s->f, err);
    if (!st) st = sc_distill_create(m, max_ctx, &s->loss, err);
    if (!st) st = refresh(s, err);
    s->weights = !st && o->cwic_weights;
    if (st) {
        sc_cwic_student_free(s);
        return st;
    }
    *out = s;
    return SC_OK;
}

/* ---- forward and backward hooks ---- */

/* G z of one input value x of stripe-column (s, i), z = x - mean: what the striped product multiplies W[s, i]
 * by (plus mean, through W mean). G is the router's step [|z| >= tau] (1 where the matrix is left dense), or
 * relaxed the ramp clamp((|z| / std - theta) / alpha_eps + 1/2, 0, 1); *g receives G. The forward passes and
 * the backward's dL/dW' use this one rule. */
static float gated(const sc_cwic_student *s, const cw_m *c, float x, float mean, float sd, float th, float tau,
                   double *g) {
    if (s->relaxed) {
        double z = (double)x - mean, r = sd > 0.0f ? (fabs(z) / sd - th) / s->o->cwic_alpha_eps + 0.5 : 1.0;
        *g = r < 0.0 ? 0.0 : r > 1.0 ? 1.0 : r;
        return (float)(*g * z);
    }
    float z = x - mean; /* as srt_cwic_center */
    *g = c->all_zero || fabsf(z) >= tau ? 1.0 : 0.0;
    return *g > 0.0 ? z : 0.0f;
}

/* y = sum over stripes of (G_s o z) W_s^T + W mean (+ b) with the ramp G (test mode) */
static double relaxed_linear(sc_cwic_student *s, const cw_m *c, const sc_linear_event *ev, const float *W) {
    int64_t n = ev->n_tokens;
    const float *mean = s->mean + s->stat_off[ev->layer * NT + c->tap], *sd = s->std + s->stat_off[ev->layer * NT + c->tap];
    double act = 0.0;
    for (int64_t si = 0, r0 = 0; si < c->ns; si++, r0 += c->S) {
        int64_t rows = c->out - r0 < c->S ? c->out - r0 : c->S;
        const float *th = s->theta + c->off + si * c->in, *tau = c->tau + si * c->in;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < c->in; i++) {
                double g;
                s->zs[t * c->in + i] = gated(s, c, ev->x[t * c->in + i], mean[i], sd[i], th[i], tau[i], &g);
                act += (double)rows * g;
            }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)rows, (blasint)c->in, 1.0f, s->zs,
                    (blasint)c->in, W + r0 * c->in, (blasint)c->in, 0.0f, ev->y + r0, (blasint)c->out);
    }
    for (int64_t t = 0; t < n; t++)
        for (int64_t o = 0; o < c->out; o++) ev->y[t * c->out + o] += c->wmean[o] + (ev->b ? ev->b[o] : 0.0f);
    return act;
}

static sc_status cw_forward(void *user, const sc_linear_event *ev, sc_err *err) {
    sc_cwic_student *s = user;
    cw_m *c = &s->mats[ev->layer * NP + ev->which];
    int64_t n = ev->n_tokens;
    if (n > s->max_ctx) return sc_errf(err, SC_EARG, "cwic training: window exceeds the workspace");
    bool owner = ev->which == SC_LIN_Q || ev->which == SC_LIN_O || ev->which == SC_LIN_GATE || ev->which == SC_LIN_DOWN;
    if (owner) { /* the tap's input, for the backward pass and the batch statistics */
        memcpy(s->xin[c->tap], ev->x, (size_t)(n * c->in) * sizeof(float));
        if (!s->backward) {
            size_t so = s->stat_off[ev->layer * NT + c->tap];
            for (int64_t t = 0; t < n; t++)
                for (int64_t i = 0; i < c->in; i++) {
                    double v = ev->x[t * c->in + i];
                    s->bsum[so + i] += v;
                    s->bsum2[so + i] += v * v;
                }
            s->bcount[ev->layer * NT + c->tap] += n;
        }
    }
    const float *W = ev->W; /* the trained matrix where one trains (sc_forward_set_weights) */
    double dense = (double)n * (double)c->in * (double)c->out, act = dense;
    if (s->relaxed)
        act = relaxed_linear(s, c, ev, W);
    else if (!c->all_zero) /* (all theta 0: y is the pass's dense product, left alone as the router does) */
        act = sc_cwic_linear(ev->y, ev->x, W, ev->b, s->mean + s->stat_off[ev->layer * NT + c->tap], c->wmean, c->tau,
                             n, n, c->in, c->out, c->S, s->z, s->zs, s->zi);
    if (!s->backward) {
        s->active += act;
        s->dense += dense;
    }
    return SC_OK;
}

static sc_status cw_backward(void *user, const sc_linear_grad_event *ev, sc_err *err) {
    (void)err;
    sc_cwic_student *s = user;
    int64_t l = ev->layer, n = ev->n_tokens;
    cw_m *c = &s->mats[l * NP + ev->which];
    const float *x = s->xin[c->tap], *mean = s->mean + s->stat_off[l * NT + c->tap],
                *sd = s->std + s->stat_off[l * NT + c->tap];
    const float *W = ev->W; /* as the forward ran it: the trained matrix where one trains */
    float ia = (float)(1.0 / s->o->cwic_alpha_eps), half = (float)(0.5 * s->o->cwic_alpha_eps);
    bool lora = ev->which == SC_LIN_DOWN && s->p;
    /* dL/dW' of a matrix that trains: into the accumulator (all), or a layer's scratch (LoRA's W_d') */
    float *gw = s->weights ? s->gwown + c->woff : lora ? s->gW : NULL, beta = s->weights ? 1.0f : 0.0f;
    for (int64_t i = 0; i < n * c->in; i++) s->z[i] = x[i] - mean[i % c->in];
    for (int64_t si = 0, r0 = 0; si < c->ns; si++, r0 += c->S) {
        int64_t rows = c->out - r0 < c->S ? c->out - r0 : c->S;
        /* P[n, in] = dy[:, r0 : r0 + rows] W[r0 : r0 + rows, :] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)c->in, (blasint)rows, 1.0f,
                    ev->dy + r0, (blasint)c->out, W + r0 * c->in, (blasint)c->in, 0.0f, s->P, (blasint)c->in);
        const float *th = s->theta + c->off + si * c->in, *tau = c->tau + si * c->in;
        float *g = s->g + c->off + si * c->in, *band = s->band + c->off + si * c->in;
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < c->in; i++) {
                float zt = s->z[t * c->in + i];
                double gi;
                if (gw) s->zs[t * c->in + i] = gated(s, c, x[t * c->in + i], mean[i], sd[i], th[i], tau[i], &gi) + mean[i];
                if (!(sd[i] > 0.0f) || isinf(th[i]) || !(fabsf(fabsf(zt) / sd[i] - th[i]) < half)) continue;
                g[i] -= ia * zt * s->P[t * c->in + i];
                band[i] += 1.0f;
            }
        if (gw) /* dL/dW'[rows, in] (+)= dy[:, rows]^T x_used, x_used = G o z + mean */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)rows, (blasint)c->in, (blasint)n, 1.0f,
                        ev->dy + r0, (blasint)c->out, s->zs, (blasint)c->in, beta, gw + r0 * c->in, (blasint)c->in);
    }
    if (lora) {
        const sc_lora_params *p = s->p;
        int64_t r = p->rank, D = s->D, F = s->F;
        const float *A = p->A + l * r * F, *B = p->B + l * D * r;
        float sc = (float)p->scale;
        /* dL/dA[r, F] += s B^T gW; dL/dB[D, r] += s gW A^T */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)r, (blasint)F, (blasint)D, sc, B, (blasint)r,
                    s->gW, (blasint)F, 1.0f, s->gA + l * r * F, (blasint)F);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)D, (blasint)r, (blasint)F, sc, s->gW, (blasint)F, A,
                    (blasint)F, 1.0f, s->gB + l * D * r, (blasint)r);
    }
    return SC_OK;
}

static sc_status student_forward(sc_cwic_student *s, const int32_t *ids, int64_t n, sc_err *err) {
    sc_forward_set_weights(s->f, s->wt);
    sc_forward_set_linear_hook(s->f, cw_forward, s);
    s->backward = false;
    return sc_forward_run(s->f, ids, n, 0, NULL, NULL, err);
}

static sc_status check_window(const sc_cwic_student *s, int64_t n, sc_err *err) {
    if (n < 2 || n > s->max_ctx)
        return sc_errf(err, SC_EARG, "a training sequence of %lld tokens (the student takes 2..%lld)", (long long)n,
                       (long long)s->max_ctx);
    return SC_OK;
}

sc_status sc_cwic_student_window(sc_cwic_student *s, const int32_t *ids, int64_t n, bool backward, sc_window_loss *out,
                                 sc_err *err) {
    memset(out, 0, sizeof *out);
    SC_TRY(check_window(s, n, err));
    /* the teacher: the model as loaded, dense */
    sc_forward_set_weights(s->f, NULL);
    sc_forward_set_linear_hook(s->f, NULL, NULL);
    sc_forward_set_linear_grad_hook(s->f, NULL, NULL);
    SC_TRY(sc_forward_run(s->f, ids, n, 0, NULL, NULL, err));
    memcpy(s->teacher, sc_forward_final_norm(s->f), (size_t)(n * s->D) * sizeof(float));
    double a0 = s->active, d0 = s->dense;
    SC_TRY(student_forward(s, ids, n, err));
    sc_forward_set_linear_grad_hook(s->f, cw_backward, s);
    s->backward = true;
    double kl, fkl, ce;
    sc_status st = sc_distill_window(s->loss, s->f, ids, n, s->teacher, 0.0, 1.0, NULL, backward, &kl, &fkl, &ce, err);
    s->backward = false;
    sc_forward_set_linear_grad_hook(s->f, NULL, NULL);
    if (st) return st;
    out->kl = kl;
    out->fkl = fkl;
    out->ce = ce;
    out->loss = kl + fkl;
    out->scored = n - 1;
    out->mask_sum = s->active - a0;
    out->mask_rows = (int64_t)(s->dense - d0);
    return SC_OK;
}

sc_status sc_cwic_student_nll(sc_cwic_student *s, const int32_t *ids, int64_t n, double *nll, sc_err *err) {
    *nll = NAN;
    SC_TRY(check_window(s, n, err));
    SC_TRY(student_forward(s, ids, n, err));
    SC_TRY(sc_forward_nll(s->f, s->nll, err));
    double sum = 0.0;
    for (int64_t t = 0; t + 1 < n; t++) sum += s->nll[t];
    *nll = sum;
    return SC_OK;
}

float *sc_cwic_student_theta(sc_cwic_student *s, int64_t layer, int proj, int64_t *ns, int64_t *in, float **grad) {
    if (layer < 0 || layer >= s->L || proj < 0 || proj >= NP) return NULL;
    cw_m *c = &s->mats[layer * NP + proj];
    *ns = c->ns;
    *in = c->in;
    if (grad) *grad = s->g + c->off;
    return s->theta + c->off;
}

const float *sc_cwic_student_stats(const sc_cwic_student *s, int64_t layer, int proj, const float **std) {
    if (layer < 0 || layer >= s->L || proj < 0 || proj >= NP) return NULL;
    size_t so = s->stat_off[layer * NT + sc_teal_tap_of((sc_linear)proj)];
    *std = s->std + so;
    return s->mean + so;
}

sc_status sc_cwic_student_refresh(sc_cwic_student *s, sc_err *err) { return refresh(s, err); }

void sc_cwic_student_relax(sc_cwic_student *s, bool relaxed) { s->relaxed = relaxed; }

void sc_cwic_student_zero_grad(sc_cwic_student *s) {
    memset(s->g, 0, s->n_theta * sizeof(float));
    memset(s->band, 0, s->n_theta * sizeof(float));
    if (s->p) {
        memset(s->gA, 0, (size_t)(s->L * s->p->rank * s->F) * sizeof(float));
        memset(s->gB, 0, (size_t)(s->L * s->D * s->p->rank) * sizeof(float));
    }
    if (s->weights) memset(s->gwown, 0, s->n_w * sizeof(float));
}

bool sc_cwic_student_lora_grad(sc_cwic_student *s, float **gA, float **gB) {
    if (!s->p) return false;
    *gA = s->gA;
    *gB = s->gB;
    return true;
}

float *sc_cwic_student_weight(sc_cwic_student *s, int64_t layer, int proj, float **grad) {
    if (!s->weights || layer < 0 || layer >= s->L || proj < 0 || proj >= NP) return NULL;
    const cw_m *c = &s->mats[layer * NP + proj];
    if (grad) *grad = s->gwown + c->woff;
    return s->wown + c->woff;
}

const float *const *sc_cwic_student_weights(const sc_cwic_student *s) { return s->weights ? s->wt : NULL; }

/* ---- the router's thresholds file ---- */

sc_status sc_cwic_student_save(const sc_cwic_student *s, const char *path, const sc_st_meta *extra, size_t n_extra,
                               sc_err *err) {
    /* the names and metadata `eval --method cwic --params thresholds=FILE` reads (calib/methods/cwic.c) */
    size_t n = (size_t)(s->L * NP * 3);
    sc_st_spec *specs = calloc(n, sizeof *specs);
    char(*names)[96] = calloc(n, sizeof *names);
    sc_st_meta *meta = calloc(n_extra + 2, sizeof *meta);
    if (!specs || !names || !meta) {
        free(specs);
        free(names);
        free(meta);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    }
    for (size_t k = 0; k < n; k++) {
        int64_t mi = (int64_t)k / 3, l = mi / NP;
        int p = (int)(mi % NP), w = (int)(k % 3);
        const cw_m *c = &s->mats[mi];
        snprintf(names[k], sizeof names[k], "layers.%lld.%s.%s", (long long)l, sc_linear_name((sc_linear)p),
                 w == 0 ? "theta" : w == 1 ? "mean" : "std");
        specs[k] = (sc_st_spec){names[k], SC_DT_F32, NULL, w == 0 ? 2 : 1, {w == 0 ? c->ns : c->in, w == 0 ? c->in : 0}};
    }
    char sbuf[32];
    snprintf(sbuf, sizeof sbuf, "%lld", (long long)s->stripe);
    meta[0] = (sc_st_meta){"format", "sparsecal-cwic-thresholds"};
    meta[1] = (sc_st_meta){"stripe_size", sbuf};
    for (size_t i = 0; i < n_extra; i++) meta[2 + i] = extra[i];
    sc_st_writer *w = NULL;
    sc_status st = sc_st_writer_create(path, specs, n, meta, n_extra + 2, &w, err);
    for (size_t k = 0; k < n && !st; k++) {
        const cw_m *c = &s->mats[k / 3];
        size_t so = s->stat_off[(int64_t)(k / 3) / NP * NT + c->tap];
        int wh = (int)(k % 3);
        st = sc_st_writer_write_f32(w, wh == 0 ? s->theta + c->off : wh == 1 ? s->mean + so : s->std + so,
                                    (size_t)(wh == 0 ? c->ns * c->in : c->in), err);
    }
    if (!st) st = sc_st_writer_finish(w, err);
    sc_st_writer_free(w);
    free(specs);
    free(names);
    free(meta);
    return st;
}

/* ---- the task of the shared loop ---- */

double sc_train_apr_target(const sc_train_opts *o, int64_t k) {
    double a = o->cwic_apr_warmup * (double)o->steps, f = a > 0.0 ? (double)(k + 1) / a : 1.0;
    return 1.0 + (o->cwic_apr - 1.0) * (f < 1.0 ? f : 1.0);
}

typedef struct cwic_task {
    const sc_train_opts *o;
    sc_cwic_student *s;
    float *m, *v;                 /* theta's AdamW moments */
    float *mA, *vA, *mB, *vB;     /* the adapter's */
    float *mW, *vW;               /* the weights' (--train all) */
    size_t na, nb;
    bool fresh; /* tau, wmean and W_d' follow theta, the statistics and the adapter */
} cwic_task;

static sc_status cw_begin(void *user, int64_t k, sc_train_step *h, sc_err *err) {
    cwic_task *t = user;
    sc_cwic_student *s = t->s;
    if (!t->fresh) /* the first step of this process: a resumed run's theta, statistics and adapter */
        SC_TRY(refresh(s, err));
    t->fresh = true;
    h->apr_target = sc_train_apr_target(t->o, k);
    sc_cwic_student_zero_grad(s);
    memset(s->bsum, 0, s->n_stat * sizeof(double));
    memset(s->bsum2, 0, s->n_stat * sizeof(double));
    memset(s->bcount, 0, (size_t)(s->L * NT) * sizeof(int64_t));
    return SC_OK;
}

static sc_status cw_window(void *user, const int32_t *ids, int64_t n, sc_window_loss *out, sc_err *err) {
    cwic_task *t = user;
    return sc_cwic_student_window(t->s, ids, n, true, out, err);
}

static sc_status cw_update(void *user, int64_t k, const sc_window_loss *sum, sc_train_step *h, sc_err *err) {
    cwic_task *t = user;
    const sc_train_opts *o = t->o;
    sc_cwic_student *s = t->s;
    double aps = sum->mask_sum, base = (double)sum->mask_rows, apr = aps > 0 ? base / aps : INFINITY;
    double gap = fmin(apr - h->apr_target, 0.0);
    h->apr = apr;
    h->density = base > 0 ? aps / base : 1.0;
    h->ap_loss = gap * gap;
    h->loss += o->cwic_ap_weight * h->ap_loss;
    /* dL/dtheta = (distillation sum) / scored + lambda dL_AP/dAPs dAPs/dtheta */
    double inv = 1.0 / (double)sum->scored, dap = aps > 0 ? o->cwic_ap_weight * 2.0 * gap * (-base / (aps * aps)) : 0.0;
    double ia = 1.0 / o->cwic_alpha_eps;
    for (int64_t l = 0; l < s->L; l++)
        for (int p = 0; p < NP; p++) {
            cw_m *c = &s->mats[l * NP + p];
            for (int64_t si = 0; si < c->ns; si++) {
                int64_t rows = c->out - si * c->S < c->S ? c->out - si * c->S : c->S;
                float *g = s->g + c->off + si * c->in;
                const float *band = s->band + c->off + si * c->in;
                for (int64_t i = 0; i < c->in; i++)
                    g[i] = (float)((double)g[i] * inv + dap * (double)rows * -ia * (double)band[i]);
            }
            float *th = s->theta + c->off;
            size_t nt = (size_t)(c->ns * c->in);
            sc_adamw_step(th, s->g + c->off, t->m + c->off, t->v + c->off, nt, h->lr * sqrt((double)c->in), o->beta1,
                          o->beta2, o->adam_eps, 0.0, k + 1);
            for (size_t j = 0; j < nt; j++) th[j] = th[j] < (float)o->cwic_theta_min ? (float)o->cwic_theta_min : th[j];
        }
    if (s->p) {
        for (size_t i = 0; i < t->na; i++) s->gA[i] *= (float)inv;
        for (size_t i = 0; i < t->nb; i++) s->gB[i] *= (float)inv;
        sc_adamw_step(s->p->A, s->gA, t->mA, t->vA, t->na, h->lr, o->beta1, o->beta2, o->adam_eps, o->weight_decay, k + 1);
        sc_adamw_step(s->p->B, s->gB, t->mB, t->vB, t->nb, h->lr, o->beta1, o->beta2, o->adam_eps, o->weight_decay, k + 1);
    }
    if (s->weights) { /* the weights: the adapters' learning rate and weight decay */
        for (size_t i = 0; i < s->n_w; i++) s->gwown[i] *= (float)inv;
        sc_adamw_step(s->wown, s->gwown, t->mW, t->vW, s->n_w, h->lr, o->beta1, o->beta2, o->adam_eps, o->weight_decay,
                      k + 1);
        for (size_t j = 0; j < s->n_w; j++)
            if (!isfinite(s->wown[j]))
                return sc_errf(err, SC_ERANGE, "cwic training: a weight became %g at step %lld (lower --lr)",
                               (double)s->wown[j], (long long)(k + 1));
    }
    /* the EMA of the batch statistics */
    double b = o->cwic_beta_dist;
    for (int64_t l = 0; l < s->L; l++)
        for (int tp = 0; tp < NT; tp++) {
            int64_t cnt = s->bcount[l * NT + tp];
            size_t so = s->stat_off[l * NT + tp];
            for (int64_t i = 0; cnt > 0 && i < s->width[tp]; i++) {
                double mb = s->bsum[so + i] / (double)cnt, sb = sqrt(fmax(0.0, s->bsum2[so + i] / (double)cnt - mb * mb));
                s->mean[so + i] = (float)(b * s->mean[so + i] + (1.0 - b) * mb);
                s->std[so + i] = (float)(b * s->std[so + i] + (1.0 - b) * sb);
            }
        }
    for (size_t j = 0; j < s->n_theta; j++)
        if (!isfinite(s->theta[j]))
            return sc_errf(err, SC_ERANGE, "cwic training: a threshold became %g at step %lld (lower --lr)",
                           (double)s->theta[j], (long long)(k + 1));
    return refresh(s, err);
}

static void cw_describe(void *user, const sc_train_step *h, char *buf, size_t cap) {
    (void)user;
    snprintf(buf, cap, "loss %.4f (KL %.4f + %.4f, AP %.3g), APR %.3f (target %.3f), lr %.3g", h->loss, h->kl, h->fkl,
             h->ap_loss, h->apr, h->apr_target, h->lr);
}

sc_status sc_train_cwic(const sc_model *m, const sc_dataset *d, const sc_train_opts *o, sc_cwic_student *s,
                        sc_train_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    if (!(o->cwic_apr >= 1.0 && o->cwic_apr < 1e6) || !(o->cwic_apr_warmup >= 0.0 && o->cwic_apr_warmup <= 1.0) ||
        !(o->cwic_alpha_eps > 0.0 && o->cwic_alpha_eps < 1e3) || !(o->cwic_ap_weight >= 0.0 && o->cwic_ap_weight < 1e9) ||
        !(o->cwic_beta_dist >= 0.0 && o->cwic_beta_dist < 1.0) || !(o->cwic_theta_min >= 0.0 && o->cwic_theta_min < 1e6))
        return sc_errf(err, SC_EARG, "train: cwic needs APR >= 1, warm-up in [0, 1], alpha_eps > 0, AP weight >= 0, "
                                     "beta_dist in [0, 1), theta_min >= 0");
    cwic_task t = {o, s, calloc(s->n_theta, sizeof(float)), calloc(s->n_theta, sizeof(float)), NULL, NULL, NULL, NULL,
                   NULL, NULL, 0, 0, false};
    sc_status st = SC_OK;
    if (s->weights) {
        t.mW = calloc(s->n_w, sizeof(float));
        t.vW = calloc(s->n_w, sizeof(float));
        if (!t.mW || !t.vW) st = sc_errf(err, SC_ENOMEM, "train: out of memory for the optimizer state");
    }
    if (s->p) {
        t.na = (size_t)(s->L * s->p->rank * s->F);
        t.nb = (size_t)(s->L * s->D * s->p->rank);
        t.mA = calloc(t.na, sizeof(float));
        t.vA = calloc(t.na, sizeof(float));
        t.mB = calloc(t.nb, sizeof(float));
        t.vB = calloc(t.nb, sizeof(float));
        if (!t.mA || !t.vA || !t.mB || !t.vB) st = sc_errf(err, SC_ENOMEM, "train: out of memory for the optimizer state");
    }
    if (!t.m || !t.v) st = sc_errf(err, SC_ENOMEM, "train: out of memory for the optimizer state");
    if (!st) {
        /* the initial state is part of the run: a checkpoint resumes only the run that started from it (the
         * trained weights start as the model's, whose identity the run carries) */
        XXH64_state_t *hs = XXH64_createState();
        XXH64_reset(hs, 0);
        XXH64_update(hs, s->theta, s->n_theta * sizeof(float));
        XXH64_update(hs, s->mean, s->n_stat * sizeof(float));
        XXH64_update(hs, s->std, s->n_stat * sizeof(float));
        if (s->p) {
            XXH64_update(hs, s->p->A, t.na * sizeof(float));
            XXH64_update(hs, s->p->B, t.nb * sizeof(float));
        }
        unsigned long long init = XXH64_digest(hs);
        XXH64_freeState(hs);
        char run[512];
        snprintf(run, sizeof run,
                 "\"apr\":%.17g,\"apr_warmup\":%.17g,\"alpha_eps\":%.17g,\"ap_weight\":%.17g,\"beta_dist\":%.17g,"
                 "\"theta_min\":%.17g,\"stripe\":%lld,\"lora_rank\":%lld,\"weights\":%d,\"init\":\"%016llx\"",
                 o->cwic_apr, o->cwic_apr_warmup, o->cwic_alpha_eps, o->cwic_ap_weight, o->cwic_beta_dist,
                 o->cwic_theta_min, (long long)s->stripe, (long long)(s->p ? s->p->rank : 0), s->weights ? 1 : 0, init);
        sc_train_tensor state[14] = {{"theta", s->theta, s->n_theta, false}, {"m_theta", t.m, s->n_theta, false},
                                     {"v_theta", t.v, s->n_theta, true},     {"mean", s->mean, s->n_stat, false},
                                     {"std", s->std, s->n_stat, true}};
        size_t ns = 5;
        if (s->p) {
            state[ns++] = (sc_train_tensor){"A", s->p->A, t.na, false};
            state[ns++] = (sc_train_tensor){"B", s->p->B, t.nb, false};
            state[ns++] = (sc_train_tensor){"mA", t.mA, t.na, false};
            state[ns++] = (sc_train_tensor){"vA", t.vA, t.na, true};
            state[ns++] = (sc_train_tensor){"mB", t.mB, t.nb, false};
            state[ns++] = (sc_train_tensor){"vB", t.vB, t.nb, true};
        }
        if (s->weights) {
            state[ns++] = (sc_train_tensor){"W", s->wown, s->n_w, false};
            state[ns++] = (sc_train_tensor){"mW", t.mW, s->n_w, false};
            state[ns++] = (sc_train_tensor){"vW", t.vW, s->n_w, true};
        }
        sc_train_task tk = {&t, run, state, ns, cw_begin, cw_window, cw_update, cw_describe};
        st = sc_train_run(m, d, o, &tk, res, err);
    }
    free(t.m);
    free(t.v);
    free(t.mA);
    free(t.vA);
    free(t.mB);
    free(t.vB);
    free(t.mW);
    free(t.vW);
    return st;
}
