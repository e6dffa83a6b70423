#include "ops.h"
#include "srt_ops.h"
#include "threads.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sc_rmsnorm_forward(float *out, float *r_out, const float *x, const float *w, int64_t T, int64_t C, float eps) {
    for (int64_t t = 0; t < T; t++) {
        float r = srt_rmsnorm(out + t * C, x + t * C, w, C, eps); /* the runtime's definition (srt_ops.h) */
        if (r_out) r_out[t] = r;
    }
}

/* out_c = w_c x_c r, r = (mean x^2 + eps)^-1/2:
 * dx_c = r w_c dout_c - (r^3 / C) x_c sum_k w_k dout_k x_k */
void sc_rmsnorm_backward(float *dx, const float *dout, const float *x, const float *w, const float *r, int64_t T,
                         int64_t C) {
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * C, *g = dout + t * C;
        float *d = dx + t * C;
        double dot = 0.0;
        for (int64_t c = 0; c < C; c++) dot += (double)w[c] * g[c] * xr[c];
        double rt = r[t];
        float k = (float)(rt * rt * rt * dot / (double)C), rf = (float)rt;
        for (int64_t c = 0; c < C; c++) d[c] += rf * w[c] * g[c] - k * xr[c];
    }
}

static srt_rope_freq rope_freq(const sc_config *c) {
    srt_rope_freq r = {c->rope_theta,          c->head_dim,
                       c->rope_scaling == SC_ROPE_SCALING_LINEAR ? 1 : c->rope_scaling == SC_ROPE_SCALING_LLAMA3 ? 2 : 0,
                       c->rope_factor,         c->rope_low_freq_factor,
                       c->rope_high_freq_factor, c->rope_orig_ctx};
    return r;
}

float sc_rope_inv_freq(const sc_config *c, int64_t i) {
    srt_rope_freq r = rope_freq(c);
    return srt_rope_inv_freq(&r, i);
}

void sc_rope_tables(float *cos_t, float *sin_t, int64_t n_pos, const sc_config *c) {
    srt_rope_freq r = rope_freq(c);
    srt_rope_tables(cos_t, sin_t, n_pos, &r);
}

void sc_rope_forward(float *x, int64_t T, int64_t n_heads, int64_t head_dim, int64_t pos0, const float *cos_t,
                     const float *sin_t, sc_rope_style style, bool inverse) {
    int64_t half = head_dim / 2;
    for (int64_t t = 0; t < T; t++)
        srt_rope_rotate(x + t * n_heads * head_dim, n_heads, head_dim, cos_t + (pos0 + t) * half,
                        sin_t + (pos0 + t) * half, style != SC_ROPE_INTERLEAVED, inverse);
}

void sc_causal_softmax(float *s, int64_t T, int64_t ld, int64_t pos0) {
    for (int64_t t = 0; t < T; t++) {
        float *r = s + t * ld;
        int64_t n = pos0 + t + 1;
        float mx = r[0];
        for (int64_t j = 1; j < n; j++) mx = r[j] > mx ? r[j] : mx;
        float sum = 0.0f;
        for (int64_t j = 0; j < n; j++) {
            r[j] = expf(r[j] - mx);
            sum += r[j];
        }
        float inv = 1.0f / sum;
        for (int64_t j = 0; j < n; j++) r[j] *= inv;
        for (int64_t j = n; j < ld; j++) r[j] = 0.0f;
    }
}

float sc_act_scalar(float u, sc_act act) { return srt_act_scalar(u, act == SC_ACT_GELU_TANH); }

float sc_act_deriv(float u, sc_act act) {
    if (act == SC_ACT_GELU_TANH) {
        const float k = 0.7978845608028654f;
        float inner = k * (u + 0.044715f * u * u * u), th = tanhf(inner);
        return 0.5f * (1.0f + th) + 0.5f * u * (1.0f - th * th) * k * (1.0f + 3.0f * 0.044715f * u * u);
    }
    float sg = 1.0f / (1.0f + expf(-u));
    return sg * (1.0f + u * (1.0f - sg));
}

void sc_act_forward(float *a, const float *u, int64_t n, sc_act act) {
    for (int64_t i = 0; i < n; i++) a[i] = sc_act_scalar(u[i], act);
}

void sc_linear_forward(float *y, const float *x, const float *W, const float *b, int64_t T, int64_t in, int64_t out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)out, (blasint)in, 1.0f, x, (blasint)in,
                W, (blasint)in, 0.0f, y, (blasint)out);
    if (b)
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = 0; o < out; o++) y[t * out + o] += b[o];
}

int sc_blas_configure(const sc_config *c) {
    int n = c ? sc_threads_for(c->dim, c->ffn_dim, c->n_heads * c->head_dim, NULL) : sc_threads_for(0, 0, 0, NULL);
    openblas_set_num_threads(n);
    return openblas_get_num_threads();
}

void sc_blas_describe(sc_blas_desc *out) {
    memset(out, 0, sizeof *out);
    const char *cfg = openblas_get_config(), *core = openblas_get_corename();
    snprintf(out->config, sizeof out->config, "%s", cfg ? cfg : "");
    snprintf(out->core, sizeof out->core, "%s", core ? core : "unknown");
    /* the build description starts "OpenBLAS 0.3.21 ..." */
    if (sscanf(out->config, "%31s %31s", out->library, out->version) != 2) {
        snprintf(out->library, sizeof out->library, "OpenBLAS");
        snprintf(out->version, sizeof out->version, "unknown");
    }
    const char *env = getenv("OPENBLAS_CORETYPE");
    snprintf(out->coretype_env, sizeof out->coretype_env, "%s", env ? env : "");
    out->threads = openblas_get_num_threads();
}
