/* test_train_cwic.c - learned CWIC thresholds (calib/train_cwic.c):
 *  1. the pseudo-gradient of theta against central finite differences: in
 *     the relaxed forward (the ramp G, whose exact derivative in theta is the
 *     pseudo-derivative) with every other matrix dense (theta = -1 <=
 *     -alpha_eps / 2), the pseudo-gradient of the symmetric KL is the exact
 *     gradient of the loss; sampled coordinates of q (layer 0), gate (layer 2)
 *     and down (layer 4) on stories260K;
 *  1b. the weight gradients against central finite differences of the same
 *     loss: the LoRA adapter's A and B (--train lora) and every linear weight
 *     (--train all: q k v o gate up down of layers 1 and 3), the tested
 *     matrix striped by the router's hard rule, every other one dense;
 *  2. the hard student with the initial thresholds at APR 1 (theta 0) equals
 *     the dense model: KL 0 and the active parameters equal the dense ones;
 *  3. the loop: the step's AP gradient raises theta towards the target APR,
 *     the same seed gives bit-identical thresholds and statistics, a run
 *     resumed from a checkpoint ends bit-identical, and the saved file read
 *     back by the CWIC router (sc_cwic_prepare thresholds=) holds exactly the
 *     trained theta, mean and std. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cwic.h"
#include "engine.h"
#include "scal.h"
#include "testing.h"
#include "tokenizer.h"
#include "train.h"

enum { N = 24 };

static sc_calib *calibrate(const sc_model *m, const sc_dataset *d) {
    sc_err err;
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    co.methods[0] = "cwic";
    co.n_methods = 1;
    co.seq_len = 64;
    sc_calib *c = NULL;
    CHECK_MSG(sc_calib_compute(m, d, &co, &c, &err) == SC_OK, "%s", err.msg);
    return c;
}

static sc_cwic_student *student_ex(const sc_model *m, const sc_calib *c, const char *params, const sc_train_opts *o,
                                   int64_t T, sc_lora_params *lora) {
    sc_err err;
    sc_cwic_plan *pl = NULL;
    sc_cwic_student *s = NULL;
    CHECK_MSG(sc_cwic_prepare(m, c, params, 1.0, &pl, &err) == SC_OK, "%s", err.msg);
    if (pl) CHECK_MSG(sc_cwic_student_create(m, T, pl, true, o, lora, &s, &err) == SC_OK, "%s", err.msg);
    sc_cwic_plan_free(pl);
    return s;
}

static sc_cwic_student *student(const sc_model *m, const sc_calib *c, const char *params, const sc_train_opts *o,
                                int64_t T) {
    return student_ex(m, c, params, o, T, NULL);
}

static double loss_of(sc_cwic_student *s, const int32_t *ids) {
    sc_err err;
    sc_window_loss wl;
    if (sc_cwic_student_window(s, ids, N, false, &wl, &err)) return NAN;
    return wl.loss;
}

/* ---- 1. the pseudo-gradient against finite differences ---- */

static void test_fd(const sc_model *m, const sc_calib *c, const sc_dataset *d) {
    sc_err err;
    sc_train_opts o;
    sc_train_opts_default(&o);
    o.cwic_alpha_eps = 1.0; /* a wide band: many tokens take part, kinks are 1/2 away in theta */
    sc_cwic_student *s = student(m, c, "apr=1,stripe=16", &o, N);
    if (!s) return;
    sc_cwic_student_relax(s, true);
    const int32_t *ids = d->seqs[0].ids;
    CHECK(d->seqs[0].n >= N);
    int64_t L = m->cfg.n_layers;
    /* every matrix dense: theta = -1 */
    for (int64_t l = 0; l < L; l++)
        for (int p = 0; p < SC_LIN_COUNT; p++) {
            int64_t ns, in;
            float *th = sc_cwic_student_theta(s, l, p, &ns, &in, NULL);
            for (int64_t j = 0; j < ns * in; j++) th[j] = -1.0f;
        }
    const struct { int64_t layer; int proj; } cases[3] = {{0, SC_LIN_Q}, {2, SC_LIN_GATE}, {4, SC_LIN_DOWN}};
    for (int k = 0; k < 3; k++) {
        int64_t ns, in;
        float *g, *th = sc_cwic_student_theta(s, cases[k].layer, cases[k].proj, &ns, &in, &g);
        /* the tested matrix: theta 0.6, inside the band of most tokens (|z| / std around 0.1 .. 1.1) */
        for (int64_t j = 0; j < ns * in; j++) th[j] = 0.6f;
        CHECK(sc_cwic_student_refresh(s, &err) == SC_OK);
        sc_cwic_student_zero_grad(s);
        sc_window_loss wl;
        CHECK_MSG(sc_cwic_student_window(s, ids, N, true, &wl, &err) == SC_OK, "%s", err.msg);
        CHECK(fabs(wl.loss - loss_of(s, ids)) <= 1e-12 * fabs(wl.loss)); /* the backward pass left theta's loss alone */
        double gmax = 0.0, worst = 0.0;
        for (int64_t j = 0; j < ns * in; j++) gmax = fmax(gmax, fabs(g[j]));
        int tested = 0;
        for (int64_t j = 0; j < ns * in; j += (ns * in) / 12 + 1) {
            /* a step of 1/256 (exact in float): the loss is piecewise quadratic in theta between kinks, which lie
             * where a token leaves the band; a central difference over them is off by a kink's share at most */
            float t0 = th[j];
            double h = 1.0 / 256;
            th[j] = (float)(t0 + h);
            CHECK(sc_cwic_student_refresh(s, &err) == SC_OK);
            double lp = loss_of(s, ids);
            th[j] = (float)(t0 - h);
            CHECK(sc_cwic_student_refresh(s, &err) == SC_OK);
            double lm = loss_of(s, ids);
            th[j] = t0;
            double fd = (lp - lm) / (2 * h);
            worst = fmax(worst, fabs(fd - g[j]));
            tested++;
        }
        CHECK(sc_cwic_student_refresh(s, &err) == SC_OK);
        printf("theta of layer %lld %s: %d coordinates, worst |fd - pseudo-gradient| %.3g of max |g| %.3g (loss %.5f)\n",
               (long long)cases[k].layer, sc_linear_name((sc_linear)cases[k].proj), tested, worst, gmax, wl.loss);
        /* float forward passes: the loss (about 0.5) is good to about 1e-6, so the difference quotient to 1e-4;
         * the kinks add at most one token's term in a coordinate; 2% of the largest entry covers both */
        CHECK(gmax > 1e-3);
        CHECK_MSG(worst <= 0.02 * gmax, "layer %lld: finite differences disagree", (long long)cases[k].layer);
        for (int64_t j = 0; j < ns * in; j++) th[j] = -1.0f;
    }
    sc_cwic_student_free(s);
}

/* ---- 1b. the weight gradients against finite differences ----
 * Every matrix but the tested one is dense (theta = -1: tau < 0, every
 * stripe-column live); the tested one is striped by the router's hard rule
 * at theta 0.6 (|z| / std >= 0.6: about half its inputs dropped). Its input
 * does not depend on its own weights, so its masks stay put when they move,
 * and the matrices the gradient flows back through are dense, so the
 * straight-through dL/dx is exact: the trainer's dL/dW' = sum_t dy_t x_used_t^T
 * (x_used = G o z + mean, the input as the striped product used it) is then
 * the exact gradient of the loss, and a mistake in x_used (the mask or the
 * mean left out) shows. The loss is the trainer's symmetric KL summed over
 * the window; its AP term depends on the masks alone, constant here, and the
 * trainer passes it to theta only. */

static void set_theta(sc_cwic_student *s, int64_t L, int64_t layer, int proj, float sparse) {
    sc_err err;
    for (int64_t l = 0; l < L; l++)
        for (int p = 0; p < SC_LIN_COUNT; p++) {
            int64_t ns, in;
            float *th = sc_cwic_student_theta(s, l, p, &ns, &in, NULL);
            for (int64_t j = 0; j < ns * in; j++) th[j] = l == layer && p == proj ? sparse : -1.0f;
        }
    CHECK(sc_cwic_student_refresh(s, &err) == SC_OK);
}

/* The largest |central difference - g| over n sampled coordinates x[idx[k]] (the student refreshed after each
 * change), and the largest |g| of the whole array. h: the step; the loss is smooth in a weight here, so the
 * difference quotient is off by O(h^2) curvature plus the f32 forward's rounding of the loss over 2h. */
static double fd_worst(sc_cwic_student *s, const int32_t *ids, float *x, const float *g, size_t len, int n, float h,
                       double *gmax) {
    sc_err err;
    *gmax = 0.0;
    size_t arg = 0;
    for (size_t j = 0; j < len; j++)
        if (fabs(g[j]) > *gmax) *gmax = fabs(g[j]), arg = j;
    double worst = 0.0;
    for (int k = 0; k < n; k++) {
        size_t j = k == 0 ? arg : (size_t)k * (len / (size_t)n) + (size_t)k % 7; /* the largest entry, then spread */
        float x0 = x[j];
        x[j] = x0 + h;
        CHECK(sc_cwic_student_refresh(s, &err) == SC_OK);
        double lp = loss_of(s, ids);
        x[j] = x0 - h;
        CHECK(sc_cwic_student_refresh(s, &err) == SC_OK);
        double lm = loss_of(s, ids);
        x[j] = x0;
        double fd = (lp - lm) / ((double)(x0 + h) - (double)(x0 - h));
        worst = fmax(worst, fabs(fd - g[j]));
    }
    CHECK(sc_cwic_student_refresh(s, &err) == SC_OK);
    return worst;
}

static void test_fd_lora(const sc_model *m, const sc_calib *c, const sc_dataset *d) {
    sc_err err;
    sc_train_opts o;
    sc_train_opts_default(&o);
    sc_lora_params p;
    CHECK(sc_lora_params_init(&p, &m->cfg, 8, 16.0, 7, &err) == SC_OK);
    /* B = 0 (PEFT's start) would make dL/dA zero: give B values of A's size so both gradients are exercised */
    for (size_t i = 0; i < (size_t)(p.n_layers * p.dim * p.rank); i++) p.B[i] = p.A[(i * 7) % (size_t)(p.rank * p.ffn)];
    sc_cwic_student *s = student_ex(m, c, "apr=1,stripe=16", &o, N, &p);
    if (!s) {
        sc_lora_params_free(&p);
        return;
    }
    const int32_t *ids = d->seqs[0].ids;
    int64_t L = m->cfg.n_layers, r = p.rank, D = p.dim, F = p.ffn;
    const int64_t layers[2] = {1, 3};
    for (int k = 0; k < 2; k++) {
        int64_t l = layers[k];
        set_theta(s, L, l, SC_LIN_DOWN, 0.6f);
        sc_cwic_student_zero_grad(s);
        sc_window_loss wl;
        CHECK_MSG(sc_cwic_student_window(s, ids, N, true, &wl, &err) == SC_OK, "%s", err.msg);
        float *gA, *gB;
        CHECK(sc_cwic_student_lora_grad(s, &gA, &gB));
        for (int ab = 0; ab < 2; ab++) {
            size_t len = ab ? (size_t)(D * r) : (size_t)(r * F);
            float *x = ab ? p.B + l * D * r : p.A + l * r * F;
            const float *g = ab ? gB + l * D * r : gA + l * r * F;
            double gmax, worst = fd_worst(s, ids, x, g, len, 10, 1.0f / 256, &gmax);
            printf("LoRA %c of layer %lld (down striped): 10 coordinates, worst |fd - g| %.3g of max |g| %.3g "
                   "(loss %.5f)\n", ab ? 'B' : 'A', (long long)l, worst, gmax, wl.loss);
            /* The error is the f32 forward's rounding of the summed loss (about 2.3 over 23 positions, good to
             * ~1e-6) over 2h: it grew 4x from h = 1/512 to 1/2048 and shrank at 1/128, so curvature is not what
             * limits it. Measured at h = 1/256: at most 1.5e-3 of the largest entry (7e-4 for the weights below);
             * 1% leaves room for BLAS kernels that round differently. Leaving the mask out of x_used (the
             * unmasked input) puts it at 2-17% (all 18 cases fail), leaving the mean out fails 17 of them. */
            CHECK(gmax > 1e-3);
            CHECK_MSG(worst <= 0.01 * gmax, "LoRA %c of layer %lld: finite differences disagree", ab ? 'B' : 'A',
                      (long long)l);
        }
    }
    sc_cwic_student_free(s);
    sc_lora_params_free(&p);
}

static void test_fd_weights(const sc_model *m, const sc_calib *c, const sc_dataset *d) {
    sc_err err;
    sc_train_opts o;
    sc_train_opts_default(&o);
    o.cwic_weights = true;
    sc_cwic_student *s = student(m, c, "apr=1,stripe=16", &o, N);
    if (!s) return;
    const int32_t *ids = d->seqs[0].ids;
    int64_t L = m->cfg.n_layers;
    CHECK(sc_cwic_student_weights(s) != NULL);
    const int64_t layers[2] = {1, 3};
    for (int k = 0; k < 2; k++)
        for (int p = 0; p < SC_LIN_COUNT; p++) {
            int64_t l = layers[k];
            set_theta(s, L, l, p, 0.6f);
            sc_cwic_student_zero_grad(s);
            sc_window_loss wl;
            CHECK_MSG(sc_cwic_student_window(s, ids, N, true, &wl, &err) == SC_OK, "%s", err.msg);
            float *g, *W = sc_cwic_student_weight(s, l, p, &g);
            CHECK(W != NULL);
            if (!W) break;
            const sc_config *cf = &m->cfg;
            int64_t qd = cf->n_heads * cf->head_dim, kvd = cf->n_kv_heads * cf->head_dim;
            int64_t outs[SC_LIN_COUNT] = {qd, kvd, kvd, cf->dim, cf->ffn_dim, cf->ffn_dim, cf->dim};
            int64_t ins[SC_LIN_COUNT] = {cf->dim, cf->dim, cf->dim, qd, cf->dim, cf->dim, cf->ffn_dim};
            double size = (double)(outs[p] * ins[p]);
            /* the striped matrix's share of live parameters (every other matrix is dense) */
            double live = 1.0 - ((double)wl.mask_rows - wl.mask_sum) / (N * size);
            double gmax, worst = fd_worst(s, ids, W, g, (size_t)size, 8, 1.0f / 256, &gmax);
            printf("W_%s of layer %lld (striped, %.0f%% live): 8 coordinates, worst |fd - g| %.3g of max |g| %.3g\n",
                   sc_linear_name((sc_linear)p), (long long)l, 100.0 * live, worst, gmax);
            CHECK(live < 0.8); /* the mask matters */
            /* as for the adapter above */
            CHECK(gmax > 1e-3);
            CHECK_MSG(worst <= 0.01 * gmax, "W_%s of layer %lld: finite differences disagree",
                      sc_linear_name((sc_linear)p), (long long)l);
        }
    sc_cwic_student_free(s);
}

/* ---- 2. theta 0 is the dense model ---- */

static void test_dense(const sc_model *m, const sc_calib *c, const sc_dataset *d) {
    sc_err err;
    sc_train_opts o;
    sc_train_opts_default(&o);
    sc_cwic_student *s = student(m, c, "apr=1,stripe=16", &o, N);
    if (!s) return;
    sc_window_loss wl;
    CHECK(sc_cwic_student_window(s, d->seqs[0].ids, N, false, &wl, &err) == SC_OK);
    printf("theta 0: KL %.3g + %.3g, active %.0f of %lld\n", wl.kl, wl.fkl, wl.mask_sum, (long long)wl.mask_rows);
    /* every theta 0 leaves each layer dense bit for bit (the router's rule), so student = teacher */
    CHECK(wl.kl == 0.0 && wl.fkl == 0.0 && wl.mask_sum == (double)wl.mask_rows);
    sc_cwic_student_free(s);
}

/* ---- 3. the loop ---- */

static bool run(const sc_model *m, const sc_calib *c, const sc_dataset *d, const sc_train_opts *o, float **theta,
                size_t *n, sc_train_result *r, const char *save) {
    sc_err err;
    sc_cwic_student *s = student(m, c, "apr=1,stripe=16", o, 48);
    if (!s) return false;
    /* --init small: every theta theta0 */
    int64_t L = m->cfg.n_layers;
    size_t tot = 0;
    for (int64_t l = 0; l < L; l++)
        for (int p = 0; p < SC_LIN_COUNT; p++) {
            int64_t ns, in;
            float *th = sc_cwic_student_theta(s, l, p, &ns, &in, NULL);
            for (int64_t j = 0; j < ns * in; j++) th[j] = (float)o->cwic_theta0;
            tot += (size_t)(ns * in + 2 * in);
        }
    bool ok = sc_cwic_student_refresh(s, &err) == SC_OK;
    sc_status st = ok ? sc_train_cwic(m, d, o, s, r, &err) : SC_EARG;
    if (st) fprintf(stderr, "train: %s\n", err.msg);
    const float *const *w = sc_cwic_student_weights(s);
    size_t nw = w ? (size_t)(sc_cwic_weights_bytes(&m->cfg) / 16) : 0;
    *theta = malloc((tot + nw) * sizeof(float));
    *n = 0;
    for (int64_t l = 0; l < L && *theta; l++)
        for (int p = 0; p < SC_LIN_COUNT; p++) {
            int64_t ns, in;
            float *th = sc_cwic_student_theta(s, l, p, &ns, &in, NULL);
            const float *sd, *mean = sc_cwic_student_stats(s, l, p, &sd);
            memcpy(*theta + *n, th, (size_t)(ns * in) * sizeof(float));
            memcpy(*theta + *n + ns * in, mean, (size_t)in * sizeof(float));
            memcpy(*theta + *n + ns * in + in, sd, (size_t)in * sizeof(float));
            *n += (size_t)(ns * in + 2 * in);
        }
    if (w && *theta) { /* --train all: then the trained weights, in the order they are stored */
        memcpy(*theta + *n, sc_cwic_student_weight(s, 0, 0, NULL), nw * sizeof(float));
        *n += nw;
    }
    if (!st && save) {
        CHECK_MSG(sc_cwic_student_save(s, save, NULL, 0, &err) == SC_OK, "%s", err.msg);
        /* the router reads back exactly what trained */
        sc_cwic_plan *pl;
        char params[600];
        snprintf(params, sizeof params, "thresholds=%s,stripe=16", save);
        CHECK_MSG(sc_cwic_prepare(m, NULL, params, 1.0, &pl, &err) == SC_OK, "%s", err.msg);
        size_t k = 0;
        bool same = true;
        for (int64_t l = 0; l < L; l++)
            for (int p = 0; p < SC_LIN_COUNT; p++) {
                sc_cwic_matrix mx;
                CHECK(sc_cwic_plan_matrix(pl, l, p, &mx));
                same = same && !memcmp(mx.theta, *theta + k, (size_t)(mx.ns * mx.in) * sizeof(float)) &&
                       !memcmp(mx.mean, *theta + k + mx.ns * mx.in, (size_t)mx.in * sizeof(float)) &&
                       !memcmp(mx.std, *theta + k + mx.ns * mx.in + mx.in, (size_t)mx.in * sizeof(float));
                k += (size_t)(mx.ns * mx.in + 2 * mx.in);
            }
        CHECK_MSG(same, "the router's thresholds are not the trained ones");
        sc_cwic_plan_free(pl);
    }
    sc_cwic_student_free(s);
    return st == SC_OK && ok;
}

/* the loop tests' options: a short CWIC run of `steps` steps towards APR 1.6 on 48-token windows */
static sc_train_opts loop_opts(int64_t steps, double lr, uint64_t seed) {
    sc_train_opts o;
    sc_train_opts_default(&o);
    o.method = "cwic";
    o.steps = steps;
    o.batch = 2;
    o.seq_len = 48;
    o.lr = lr;
    o.beta2 = 0.95;
    o.seed = seed;
    o.cwic_apr = 1.6;
    o.cwic_apr_warmup = 0.25;
    return o;
}

static void test_loop(const sc_model *m, const sc_calib *c, const sc_dataset *d) {
    sc_train_opts o = loop_opts(16, 1e-2, 3);
    float *t1 = NULL, *t2 = NULL, *t3 = NULL;
    size_t n1, n2, n3;
    sc_train_result r1 = {0}, r2 = {0}, r3 = {0};
    char path[512], ckpt[512];
    snprintf(path, sizeof path, "%s/test_train_cwic.safetensors", sc_test_tmpdir());
    snprintf(ckpt, sizeof ckpt, "%s/test_train_cwic.ckpt", sc_test_tmpdir());
    CHECK(run(m, c, d, &o, &t1, &n1, &r1, path));
    if (!r1.history) return;
    printf("16 steps: APR %.3f -> %.3f (target %.2f), KL %.4f -> %.4f, AP loss %.4f -> %.4f\n", r1.history[0].apr,
           r1.history[15].apr, r1.history[15].apr_target, r1.history[0].kl, r1.history[15].kl, r1.history[0].ap_loss,
           r1.history[15].ap_loss);
    /* the AP loss pushes the APR up from theta0 = 0.1 (about 1.1) towards the target */
    CHECK(r1.history[15].apr > r1.history[0].apr + 0.1 && r1.history[15].ap_loss < r1.history[4].ap_loss);
    CHECK(r1.history[15].apr_target == 1.6 && fabs(r1.history[0].apr_target - 1.15) < 1e-12);
    /* the same seed: bit-identical thresholds, statistics and history */
    CHECK(run(m, c, d, &o, &t2, &n2, &r2, NULL));
    CHECK(n1 == n2 && t2 && !memcmp(t1, t2, n1 * sizeof(float)));
    CHECK(r2.history && !memcmp(r1.history, r2.history, 16 * sizeof *r1.history));
    /* a checkpoint at step 8, resumed: bit-identical to the uninterrupted run */
    sc_train_opts oc = o;
    oc.checkpoint_every = 8;
    oc.checkpoint_path = ckpt;
    /* run 8 steps with checkpoints, as if stopped: a run of 16 steps saving at 8 writes the file */
    CHECK(run(m, c, d, &oc, &t3, &n3, &r3, NULL));
    free(t3);
    sc_train_result_free(&r3);
    sc_train_opts orr = o;
    orr.resume_path = ckpt;
    CHECK(run(m, c, d, &orr, &t3, &n3, &r3, NULL));
    CHECK(r3.first_step == 8 && r3.steps_run == 8);
    CHECK_MSG(n3 == n1 && t3 && !memcmp(t1, t3, n1 * sizeof(float)), "the resumed run differs");
    CHECK(r3.history && !memcmp(r1.history, r3.history, 16 * sizeof *r1.history));
    remove(ckpt);
    remove(path);
    free(t1);
    free(t2);
    free(t3);
    sc_train_result_free(&r1);
    sc_train_result_free(&r2);
    sc_train_result_free(&r3);
}

/* --train all: the weights move, and a run resumed from a checkpoint ends bit-identical (weights, their
 * moments, theta, statistics, history) */
static void test_loop_all(const sc_model *m, const sc_calib *c, const sc_dataset *d) {
    sc_train_opts o = loop_opts(6, 1e-3, 5);
    o.weight_decay = 0.01;
    o.cwic_weights = true;
    float *t1 = NULL, *t3 = NULL;
    size_t n1, n3;
    sc_train_result r1 = {0}, r3 = {0};
    char ckpt[512];
    snprintf(ckpt, sizeof ckpt, "%s/test_train_cwic_all.ckpt", sc_test_tmpdir());
    CHECK(run(m, c, d, &o, &t1, &n1, &r1, NULL));
    if (!t1 || !r1.history) return;
    /* the weights trained: the last nw values against the model's */
    size_t nw = (size_t)(sc_cwic_weights_bytes(&m->cfg) / 16), off = n1 - nw, moved = 0;
    for (int64_t l = 0, k = 0; l < m->cfg.n_layers; l++) {
        const sc_layer *Ly = sc_test_layer(m, l);
        const float *W[SC_LIN_COUNT] = {Ly->wq, Ly->wk, Ly->wv, Ly->wo, Ly->wg, Ly->wu, Ly->wd};
        const sc_config *cf = &m->cfg;
        int64_t qd = cf->n_heads * cf->head_dim, kvd = cf->n_kv_heads * cf->head_dim;
        int64_t sz[SC_LIN_COUNT] = {qd * cf->dim, kvd * cf->dim, kvd * cf->dim, cf->dim * qd,
                                    cf->ffn_dim * cf->dim, cf->ffn_dim * cf->dim, cf->dim * cf->ffn_dim};
        for (int p = 0; p < SC_LIN_COUNT; p++)
            for (int64_t j = 0; j < sz[p]; j++, k++) moved += t1[off + (size_t)k] != W[p][j];
    }
    printf("--train all, 6 steps: %zu of %zu weights moved, KL %.4f -> %.4f\n", moved, nw, r1.history[0].kl,
           r1.history[5].kl);
    CHECK(moved > nw / 2);
    sc_train_opts oc = o;
    oc.checkpoint_every = 3;
    oc.checkpoint_path = ckpt;
    CHECK(run(m, c, d, &oc, &t3, &n3, &r3, NULL));
    free(t3);
    sc_train_result_free(&r3);
    sc_train_opts orr = o;
    orr.resume_path = ckpt;
    CHECK(run(m, c, d, &orr, &t3, &n3, &r3, NULL));
    CHECK(r3.first_step == 3 && r3.steps_run == 3);
    CHECK_MSG(n3 == n1 && t3 && !memcmp(t1, t3, n1 * sizeof(float)), "the resumed --train all run differs");
    CHECK(r3.history && !memcmp(r1.history, r3.history, 6 * sizeof *r1.history));
    /* a checkpoint of a thresholds-only run does not resume an all-weights one */
    sc_train_opts ot = o;
    ot.cwic_weights = false;
    ot.checkpoint_every = 3;
    ot.checkpoint_path = ckpt;
    free(t3);
    sc_train_result_free(&r3);
    CHECK(run(m, c, d, &ot, &t3, &n3, &r3, NULL));
    free(t3);
    sc_train_result_free(&r3);
    t3 = NULL;
    CHECK(!run(m, c, d, &orr, &t3, &n3, &r3, NULL));
    remove(ckpt);
    free(t1);
    free(t3);
    sc_train_result_free(&r1);
    sc_train_result_free(&r3);
}

int main(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(8, &m, &tok, &d)) return sc_test_finish();
    sc_calib *c = calibrate(m, &d);
    if (c) {
        test_dense(m, c, &d);
        test_fd(m, c, &d);
        test_fd_lora(m, c, &d);
        test_fd_weights(m, c, &d);
        test_loop(m, c, &d);
        test_loop_all(m, c, &d);
    }
    sc_calib_free(c);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
