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
