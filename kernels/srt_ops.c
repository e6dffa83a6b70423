/* srt_ops.c - the shared scalar operations (see srt_ops.h). */
#include "srt_ops.h"

float srt_rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps) {
    /* four sums, so the double adds do not wait on each other (a single chain took 2-3 µs per 2,048
     * values); the float r they round to is the same but for a sum within 2^-53 of a rounding step */
    double s4[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int k = 0; k < 4; k++) s4[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++) s4[0] += (double)x[i] * x[i];
    const double ss = (s4[0] + s4[1]) + (s4[2] + s4[3]);
    float r = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
    for (i = 0; i < n; i++) out[i] = w[i] * (r * x[i]);
    return r;
}

float srt_rope_inv_freq(const srt_rope_freq *r, int64_t i) {
    float f = 1.0f / powf(r->theta, (float)(2 * i) / (float)r->head_dim);
    if (r->scaling == 1) return f / r->factor;
    if (r->scaling == 2) {
        const float pi = 3.14159265358979f;
        float wavelen = 2.0f * pi / f;
        float low_wavelen = (float)r->orig_ctx / r->low_freq_factor;
        float high_wavelen = (float)r->orig_ctx / r->high_freq_factor;
        if (wavelen < high_wavelen) return f;
        if (wavelen > low_wavelen) return f / r->factor;
        float smooth = ((float)r->orig_ctx / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
        return (1.0f - smooth) * f / r->factor + smooth * f;
    }
    return f;
}

void srt_rope_tables(float *cos_t, float *sin_t, int64_t n_pos, const srt_rope_freq *r) {
    const int64_t half = r->head_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        float inv = srt_rope_inv_freq(r, i);
        for (int64_t p = 0; p < n_pos; p++) {
            float ang = (float)p * inv;
            cos_t[p * half + i] = cosf(ang);
            sin_t[p * half + i] = sinf(ang);
        }
    }
}
