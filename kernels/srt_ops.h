/* srt_ops.h - the scalar definitions of the transformer's f32 operations
 * that the runtime decoder (srt_decode.c, srt_model.c) and the toolchain's
 * reference forward pass (calib/ops.c) share: RMSNorm, RoPE frequencies,
 * tables and rotation, SiLU / GELU-tanh. One definition, so the two passes
 * differ only where their matrix products do (GEMV kernels vs sgemm). */
#ifndef SRT_OPS_H
#define SRT_OPS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* out[n] = w * (x * r), r = 1/sqrt(mean(x^2) + eps) with the sum in double;
 * returns r (the backward keeps it). */
float srt_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);

/* RoPE frequency parameters: base theta over head_dim, and scaling 0 (none),
 * 1 (linear: every frequency / factor) or 2 (Llama-3.1: low frequencies /
 * factor, high ones kept, smooth between, over orig_ctx positions). */
typedef struct srt_rope_freq {
    float theta;
    int64_t head_dim;
    int scaling;
    float factor, low_freq_factor, high_freq_factor;
    int64_t orig_ctx;
} srt_rope_freq;
/* The inverse frequency of pair i after scaling, in f32 as llama2.c and
 * Hugging Face compute it. */
float srt_rope_inv_freq(const srt_rope_freq *r, int64_t i);
/* cos_t, sin_t [n_pos, head_dim / 2] for positions [0, n_pos). */
void srt_rope_tables(float *cos_t, float *sin_t, int64_t n_pos, const srt_rope_freq *r);
/* Rotates n_heads heads of x (one position, head_dim hd) by the angles of
 * cos c[hd/2], sin s[hd/2]: pairs (2i, 2i+1), or (i, i + hd/2) when half;
 * inverse rotates by minus the angle (the backward). */
static inline void srt_rope_rotate(float *x, int64_t n_heads, int64_t hd, const float *c, const float *s, bool half,
                                   bool inverse) {
    const int64_t h2 = hd / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *v = x + h * hd;
        for (int64_t i = 0; i < h2; i++) {
            const int64_t a = half ? i : 2 * i, b = half ? i + h2 : 2 * i + 1;
            const float x0 = v[a], x1 = v[b], si = inverse ? -s[i] : s[i];
            v[a] = x0 * c[i] - x1 * si;
            v[b] = x0 * si + x1 * c[i];
        }
    }
}

/* a when c, else b; branch-free (see srt_exp) */
static inline float srt_select_(bool c, float a, float b) {
    uint32_t ab, bb, m = 0u - (uint32_t)c;
    memcpy(&ab, &a, 4);
    memcpy(&bb, &b, 4);
    ab = (ab & m) | (bb & ~m);
    memcpy(&a, &ab, 4);
    return a;
}

/* e^x in f32 without a library call, so a loop over it vectorises (the
 * toolchain's causal softmax runs it over every attention score). Cephes'
 * expf: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two constants, so r is
 * exact to about 2^-32), e^r by a degree-6 polynomial, then times 2^n in two
 * exact power-of-two factors (so results below FLT_MIN round once, as
 * subnormals). Relative error against e^x where e^x is a normal float, x in
 * [-87.33, 88.72]: at most 1.2e-7 (1 ulp of 1.0) over every float of that
 * range; tests/test_ops.c checks every 64th against exp in double and expf
 * with a bound of 2.4e-7 (measured as compiled here, without fused
 * multiply-adds: ISO C mode does not contract). Overflow gives
 * +inf, x below -103.97 gives 0, NaN stays NaN. The runtime's AVX-512
 * kernels use the same reduction and coefficients with fused multiply-adds
 * (exp512, kernels/x86/gemv_avx512.c). */
static inline float srt_exp(float x) {
    /* Every choice is an integer mask, never a branch: a conditional would let the compiler specialise the
     * arithmetic per case, and the loops over srt_exp would no longer vectorise. */
    float xc = srt_select_(x > -104.0f, x, -104.0f); /* NaN becomes -104 here and is restored at the end */
    xc = srt_select_(xc < 89.0f, xc, 89.0f);
    /* n = round(x / ln2): adding 1.5 * 2^23 rounds to an integer and leaves it in the low mantissa bits */
    float big = xc * 1.44269504088896341f + 12582912.0f, n = big - 12582912.0f;
    uint32_t nb;
    memcpy(&nb, &big, 4);
    int32_t i = (int32_t)(nb & 0x7fffffu) - 0x400000, i1 = i / 2, i2 = i - i1; /* n in [-150, 129]: both */
    float r = xc - n * 0.693359375f;                                              /* halves are normal exponents */
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = (p * r) * r + (r + 1.0f);
    uint32_t b1 = (uint32_t)(i1 + 127) << 23, b2 = (uint32_t)(i2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    return srt_select_(x == x, (p * s1) * s2, x);
}

/* phi(u): SiLU u / (1 + e^-u), or GELU-tanh (the scalar reference; inline so
 * the reference kernel's loop stays a loop). */
static inline float srt_act_scalar(float u, bool gelu) {
    if (gelu) {
        const float k = 0.7978845608028654f; /* sqrt(2/pi) */
        return 0.5f * u * (1.0f + tanhf(k * (u + 0.044715f * u * u * u)));
    }
    return u / (1.0f + expf(-u));
}

#endif
