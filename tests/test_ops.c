/* test_ops.c - forward ops against direct formulas: RoPE frequencies with
 * Llama-3.1 scaling, rotation styles, causal softmax, activations; srt_exp
 * against exp and expf over a dense grid; the threaded ops give the same bits
 * at 1 and 2 threads. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "srt_ops.h"
#include "testing.h"
#include "threads.h"

/* srt_exp over every 64th float whose e^x is a normal float: the worst relative error against exp in double
 * (the exact value to 1e-16) and against glibc's expf (the scalar it replaces, itself within 1 ulp). */
static void check_exp(void) {
    double worst = 0, worst_f = 0;
    float at = 0;
    int64_t n = 0;
    for (uint64_t b = 0; b < 0x100000000ull; b += 64) {
        uint32_t u = (uint32_t)b;
        float x;
        memcpy(&x, &u, 4);
        if (!(x >= -87.33f && x <= 88.72f)) continue;
        double e = exp((double)x);
        if (e < FLT_MIN || e > FLT_MAX) continue;
        float y = srt_exp(x), ef = expf(x);
        double rel = fabs((double)y - e) / e, rel_f = fabs((double)y - ef) / ef;
        if (rel > worst) worst = rel, at = x;
        if (rel_f > worst_f) worst_f = rel_f;
        n++;
    }
    printf("srt_exp: %lld points, worst relative error %.3g (at %.9g), against expf %.3g\n", (long long)n, worst,
           (double)at, worst_f);
    CHECK(n > 30000000);
    /* srt_ops.h documents 2.4e-7 (2 ulp of 1.0); the measured worst is 1.19e-7 */
    CHECK_MSG(worst <= 2.4e-7, "%g", worst);
    CHECK_MSG(worst_f <= 2.4e-7 + FLT_EPSILON, "%g", worst_f);
    /* the edges: overflow, underflow (subnormal, then 0), NaN, infinities */
    CHECK(isinf(srt_exp(89.0f)) && srt_exp(89.0f) > 0 && isinf(srt_exp(INFINITY)));
    CHECK(srt_exp(-104.5f) == 0.0f && srt_exp(-INFINITY) == 0.0f);
    float sub = srt_exp(-100.0f);
    CHECK_MSG(sub > 0 && sub < FLT_MIN && fabs(sub - exp(-100.0)) <= 2e-45, "%g", (double)sub);
    CHECK(isnan(srt_exp(NAN)));
    CHECK(srt_exp(0.0f) == 1.0f);
}

/* The same row with expf and a running sum (the softmax before srt_exp, kept here as the reference). */
static void softmax_ref(float *r, int64_t n) {
    float mx = r[0];
    for (int64_t j = 1; j < n; j++) mx = r[j] > mx ? r[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) sum += (r[j] = expf(r[j] - mx));
    for (int64_t j = 0; j < n; j++) r[j] = (float)(r[j] / sum);
}

static float frand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The causal softmax against the expf reference, and the threaded ops at 1 and 2 threads. */
static void check_softmax_threads(void) {
    enum { T = 300, LD = 310, POS0 = 10, NE = 200000 };
    uint64_t seed = 88172645463325252ull;
    float *s1 = malloc(sizeof(float) * T * LD), *s2 = malloc(sizeof(float) * T * LD), *ref = malloc(sizeof(float) * LD);
    for (int64_t i = 0; i < T * LD; i++) s1[i] = s2[i] = 8.0f * frand(&seed);
    /* reference first (s1 still holds the scores) */
    double worst = 0;
    for (int64_t t = 0; t < T; t += 37) {
        int64_t n = POS0 + t + 1;
        memcpy(ref, s1 + t * LD, (size_t)n * sizeof(float));
        softmax_ref(ref, n);
        float row[LD];
        memcpy(row, s1 + t * LD, sizeof row);
        sc_softmax_row(row, n, LD);
        for (int64_t j = 0; j < n; j++) {
            double d = fabs((double)row[j] - ref[j]) / ref[j];
            worst = d > worst ? d : worst;
        }
        CHECK(row[n] == 0.0f && row[LD - 1] == 0.0f);
    }
    /* each probability: exp within 1.2e-7 relative, its sum rounded n times (n <= 310 terms of at most 1, in 16
     * partial sums: at most ~20 additions each, 2.4e-6), the reference's float exp and division the same again */
    printf("causal softmax vs the expf reference: worst relative difference %.3g\n", worst);
    CHECK_MSG(worst < 1e-5, "%g", worst);
    /* sc_softmax_row is compiled for several ISAs (x86); the dispatched one must give the scalar definition's
     * bits: srt_exp per element, 16 partial sums added in order, times the reciprocal */
    {
        float row[LD], want[LD];
        int64_t n = 257;
        memcpy(row, s1, sizeof row);
        float mx = row[0];
        for (int64_t j = 1; j < n; j++) mx = row[j] > mx ? row[j] : mx;
        float part[16] = {0}, sum = 0.0f;
        for (int64_t j = 0; j < n; j++) want[j] = srt_exp(row[j] - mx);
        int64_t j = 0;
        for (; j + 16 <= n; j += 16)
            for (int k = 0; k < 16; k++) part[k] += want[j + k];
        for (int k = 0; k < 16; k++) sum += part[k];
        for (; j < n; j++) sum += want[j];
        for (j = 0; j < n; j++) want[j] *= 1.0f / sum;
        sc_softmax_row(row, n, LD);
        CHECK(memcmp(row, want, (size_t)n * sizeof(float)) == 0);
    }
    /* 1 vs 2 threads: every threaded op, on inputs large enough to be split (SC_PARALLEL_MIN_WORK) */
    float *u = malloc(sizeof(float) * NE), *v = malloc(sizeof(float) * NE), *a1 = malloc(sizeof(float) * NE * 6),
          *a2 = malloc(sizeof(float) * NE * 6), w[500];
    for (int64_t i = 0; i < NE; i++) u[i] = 6.0f * frand(&seed), v[i] = frand(&seed);
    for (int i = 0; i < 500; i++) w[i] = 1.0f + frand(&seed);
    for (int th = 1; th <= 2; th++) {
        sc_parallel_configure(th);
        CHECK(sc_parallel_threads() == (th == 2 && sc_cpu_count() >= 2 ? 2 : 1));
        float *s = th == 1 ? s1 : s2, *o = th == 1 ? a1 : a2;
        float *act = o, *h = o + NE, *dh = o + 2 * NE, *dv = o + 3 * NE, *rn = o + 4 * NE, *dx = o + 5 * NE;
        float r[NE / 500];
        sc_causal_softmax(s, T, LD, POS0);
        sc_act_forward(act, u, NE, SC_ACT_SILU);
        sc_mul(h, act, v, NE);
        h[7] = 0.5f * h[7]; /* a hook's replacement */
        memcpy(dh, v, sizeof(float) * NE);
        sc_add(dh, u, NE);
        sc_gated_backward(dh, dv, h, act, v, NE);
        sc_act_backward(dh, u, NE, SC_ACT_GELU_TANH);
        sc_rmsnorm_forward(rn, r, u, w, NE / 500, 500, 1e-5f);
        memset(dx, 0, sizeof(float) * NE);
        sc_rmsnorm_backward(dx, v, u, w, r, NE / 500, 500);
        sc_rope_forward(rn, NE / 500, 5, 100, 3, u, v, SC_ROPE_HALF, false);
    }
    sc_parallel_configure(1);
    CHECK(memcmp(s1, s2, sizeof(float) * T * LD) == 0);
    CHECK(memcmp(a1, a2, sizeof(float) * NE * 6) == 0);
    /* the backward of the softmax, rows against a direct formula */
    {
        enum { N = 200 };
        float *P = malloc(sizeof(float) * N * N), *dP = malloc(sizeof(float) * N * N), *d0 = malloc(sizeof(float) * N * N);
        for (int64_t i = 0; i < N * N; i++) P[i] = 4.0f * frand(&seed), dP[i] = d0[i] = frand(&seed);
        sc_causal_softmax(P, N, N, 0);
        sc_causal_softmax_backward(dP, P, N, N);
        double worst_b = 0;
        for (int64_t t = 0; t < N; t += 13)
            for (int64_t k = 0; k < N; k++) {
                double dot = 0;
                for (int64_t m = 0; m <= t; m++) dot += (double)P[t * N + m] * d0[t * N + m];
                double want = k <= t ? P[t * N + k] * (d0[t * N + k] - dot) : 0.0;
                double d = fabs(dP[t * N + k] - want);
                worst_b = d > worst_b ? d : worst_b;
            }
        CHECK_MSG(worst_b < 1e-6, "%g", worst_b); /* float products of numbers below 1 against double */
        free(P);
        free(dP);
        free(d0);
    }
    free(s1);
    free(s2);
    free(ref);
    free(u);
    free(v);
    free(a1);
    free(a2);
}

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

int main(void) {
    /* Llama-3.1-8B: theta 500000, head_dim 128, factor 8, low 1, high 4, original context 8192 */
    sc_config c;
    memset(&c, 0, sizeof c);
    c.head_dim = 128;
    c.rope_theta = 500000.0f;
    c.rope_scaling = SC_ROPE_SCALING_LLAMA3;
    c.rope_factor = 8.0f;
    c.rope_low_freq_factor = 1.0f;
    c.rope_high_freq_factor = 4.0f;
    c.rope_orig_ctx = 8192;
    int n_high = 0, n_low = 0, n_mid = 0;
    for (int i = 0; i < 64; i++) {
        double f = 1.0 / pow(500000.0, 2.0 * i / 128.0), wl = 2 * M_PI / f, expect;
        if (wl < 8192.0 / 4.0) {
            expect = f;
            n_high++;
        } else if (wl > 8192.0) {
            expect = f / 8.0;
            n_low++;
        } else {
            double s = (8192.0 / wl - 1.0) / 3.0;
            expect = (1 - s) * f / 8.0 + s * f;
            n_mid++;
        }
        CHECK_NEAR(sc_rope_inv_freq(&c, i), expect, 1e-5 * expect);
    }
    CHECK(n_high > 0 && n_low > 0 && n_mid > 0);
    c.rope_scaling = SC_ROPE_SCALING_LINEAR;
    CHECK_NEAR(sc_rope_inv_freq(&c, 10), 1.0 / pow(500000.0, 20.0 / 128.0) / 8.0, 1e-7);

    /* rotation styles: interleaved pairs (0,1) vs halves (0, hd/2) */
    c.rope_scaling = SC_ROPE_SCALING_NONE;
    c.head_dim = 4;
    c.rope_theta = 10000.0f;
    float cs[3 * 2], sn[3 * 2];
    sc_rope_tables(cs, sn, 3, &c);
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4};
    sc_rope_forward(a, 1, 1, 4, 2, cs, sn, SC_ROPE_INTERLEAVED, false);
    sc_rope_forward(b, 1, 1, 4, 2, cs, sn, SC_ROPE_HALF, false);
    double th0 = 2.0, th1 = 2.0 / 100.0; /* pos 2, freqs 1 and 1/100 */
    CHECK_NEAR(a[0], 1 * cos(th0) - 2 * sin(th0), 1e-6);
    CHECK_NEAR(a[1], 1 * sin(th0) + 2 * cos(th0), 1e-6);
    CHECK_NEAR(a[2], 3 * cos(th1) - 4 * sin(th1), 1e-6);
    CHECK_NEAR(b[0], 1 * cos(th0) - 3 * sin(th0), 1e-6);
    CHECK_NEAR(b[2], 1 * sin(th0) + 3 * cos(th0), 1e-6);
    CHECK_NEAR(b[1], 2 * cos(th1) - 4 * sin(th1), 1e-6);

    /* causal softmax: row t keeps pos0 + t + 1 columns */
    float s[2 * 4] = {1, 2, 3, 4, 1, 1, 1, 9};
    sc_causal_softmax(s, 2, 4, 1);
    CHECK_NEAR(s[0] + s[1], 1.0, 1e-6);
    CHECK(s[2] == 0 && s[3] == 0);
    CHECK_NEAR(s[4], 1.0 / 3, 1e-6);
    CHECK(s[7] == 0);

    /* activations */
    CHECK_NEAR(sc_act_scalar(1.0f, SC_ACT_SILU), 1.0 / (1.0 + exp(-1.0)), 1e-7);
    double x = -0.7, g = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    CHECK_NEAR(sc_act_scalar((float)x, SC_ACT_GELU_TANH), g, 1e-7);
    check_exp();
    check_softmax_threads();
    return sc_test_finish();
}
