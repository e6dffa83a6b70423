#include "ops.h"
#include "srt_ops.h"
#include "threads.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each op below splits its rows (or elements) over sc_parallel's threads; every output element is computed by
 * one thread with the same arithmetic whatever the thread count, so results do not depend on it. */

typedef struct rms_job {
    float *out, *r_out, *dx;
    const float *x, *w, *dout, *r;
    int64_t T, C;
    float eps;
} rms_job;

static void rms_fwd_part(void *arg, int tid, int nth) {
    const rms_job *j = arg;
    int64_t t0, t1;
    sc_split(j->T, tid, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        float r = srt_rmsnorm(j->out + t * j->C, j->x + t * j->C, j->w, j->C, j->eps); /* the runtime's (srt_ops.h) */
        if (j->r_out) j->r_out[t] = r;
    }
}

void sc_rmsnorm_forward(float *out, float *r_out, const float *x, const float *w, int64_t T, int64_t C, float eps) {
    rms_job j = {.out = out, .r_out = r_out, .x = x, .w = w, .T = T, .C = C, .eps = eps};
    sc_parallel(T * C, rms_fwd_part, &j);
}

/* out_c = w_c x_c r, r = (mean x^2 + eps)^-1/2:
 * dx_c = r w_c dout_c - (r^3 / C) x_c sum_k w_k dout_k x_k */
static void rms_bwd_part(void *arg, int tid, int nth) {
    const rms_job *j = arg;
    int64_t t0, t1, C = j->C;
    const float *w = j->w;
    sc_split(j->T, tid, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        const float *xr = j->x + t * C, *g = j->dout + t * C;
        float *d = j->dx + t * C;
        double dot = 0.0;
        for (int64_t c = 0; c < C; c++) dot += (double)w[c] * g[c] * xr[c];
        double rt = j->r[t];
        float k = (float)(rt * rt * rt * dot / (double)C), rf = (float)rt;
        for (int64_t c = 0; c < C; c++) d[c] += rf * w[c] * g[c] - k * xr[c];
    }
}

void sc_rmsnorm_backward(float *dx, const float *dout, const float *x, const float *w, const float *r, int64_t T,
                         int64_t C) {
    rms_job j = {.dx = dx, .x = x, .w = w, .dout = dout, .r = r, .T = T, .C = C};
    sc_parallel(T * C, rms_bwd_part, &j);
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

typedef struct rope_job {
    float *x;
    int64_t T, n_heads, head_dim, pos0;
    const float *cos_t, *sin_t;
    bool half, inverse;
} rope_job;

static void rope_part(void *arg, int tid, int nth) {
    const rope_job *j = arg;
    int64_t t0, t1, hd2 = j->head_dim / 2;
    sc_split(j->T, tid, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++)
        srt_rope_rotate(j->x + t * j->n_heads * j->head_dim, j->n_heads, j->head_dim, j->cos_t + (j->pos0 + t) * hd2,
                        j->sin_t + (j->pos0 + t) * hd2, j->half, j->inverse);
}

void sc_rope_forward(float *x, int64_t T, int64_t n_heads, int64_t head_dim, int64_t pos0, const float *cos_t,
                     const float *sin_t, sc_rope_style style, bool inverse) {
    rope_job j = {x, T, n_heads, head_dim, pos0, cos_t, sin_t, style != SC_ROPE_INTERLEAVED, inverse};
    sc_parallel(T * n_heads * head_dim, rope_part, &j);
}

/* One row of the causal softmax: r[0, n) <- softmax, r[n, ld) <- 0. The exponentials are srt_exp (a loop the
 * compiler vectorises); the sum runs in 16 interleaved partial sums added in a fixed order at the end, so it
 * vectorises too and is the same for every row length's split. On x86 the function is compiled for AVX-512F,
 * AVX2 and the baseline and the loader picks one: none of them contracts a multiply and an add (ISO C's
 * default, -ffp-contract=off), so all three give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(SC_NO_CLONES)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void sc_softmax_row(float *r, int64_t n, int64_t ld) {
    enum { LANES = 16 };
    float mx = r[0];
    for (int64_t j = 1; j < n; j++) mx = r[j] > mx ? r[j] : mx;
    for (int64_t j = 0; j < n; j++) r[j] = srt_exp(r[j] - mx);
    float part[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) part[k] += r[j + k];
    float sum = 0.0f;
    for (int k = 0; k < LANES; k++) sum += part[k];
    for (; j < n; j++) sum += r[j];
    float inv = 1.0f / sum;
    for (j = 0; j < n; j++) r[j] *= inv;
    for (j = n; j < ld; j++) r[j] = 0.0f;
}

typedef struct softmax_job {
    float *s;
    int64_t T, ld, pos0;
} softmax_job;

/* Rows are dealt round-robin: row t costs pos0 + t + 1, so contiguous blocks would leave the first thread idle. */
static void softmax_part(void *arg, int tid, int nth) {
    const softmax_job *j = arg;
    for (int64_t t = tid; t < j->T; t += nth) sc_softmax_row(j->s + t * j->ld, j->pos0 + t + 1, j->ld);
}

void sc_causal_softmax(float *s, int64_t T, int64_t ld, int64_t pos0) {
    softmax_job j = {s, T, ld, pos0};
    sc_parallel(T * ld, softmax_part, &j);
}

typedef struct dsoftmax_job {
    const float *P;
    float *dP;
    int64_t T, ld;
} dsoftmax_job;

static void dsoftmax_part(void *arg, int tid, int nth) {
    const dsoftmax_job *j = arg;
    for (int64_t t = tid; t < j->T; t += nth) {
        const float *pr = j->P + t * j->ld;
        float *dr = j->dP + t * j->ld;
        double dot = 0.0;
        for (int64_t k = 0; k <= t; k++) dot += (double)pr[k] * dr[k];
        for (int64_t k = 0; k <= t; k++) dr[k] = pr[k] * (dr[k] - (float)dot);
        for (int64_t k = t + 1; k < j->ld; k++) dr[k] = 0.0f;
    }
}

void sc_causal_softmax_backward(float *dP, const float *P, int64_t T, int64_t ld) {
    dsoftmax_job j = {P, dP, T, ld};
    sc_parallel(T * ld, dsoftmax_part, &j);
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

/* The elementwise ops of the MLP block over n elements, in contiguous slices. */
typedef enum ew_op { EW_ACT, EW_ADD, EW_MUL, EW_GATED_BWD, EW_ACT_BWD } ew_op;
typedef struct ew_job {
    ew_op op;
    sc_act act;
    int64_t n;
    float *o1, *o2;
    const float *i1, *i2, *i3;
} ew_job;

static void ew_part(void *arg, int tid, int nth) {
    const ew_job *j = arg;
    int64_t i0, i1;
    sc_split(j->n, tid, nth, &i0, &i1);
    float *o1 = j->o1, *o2 = j->o2;
    const float *a = j->i1, *b = j->i2, *c = j->i3;
    switch (j->op) {
    case EW_ACT: /* o1 = phi(a) */
        for (int64_t i = i0; i < i1; i++) o1[i] = sc_act_scalar(a[i], j->act);
        break;
    case EW_ADD: /* o1 += a */
        for (int64_t i = i0; i < i1; i++) o1[i] += a[i];
        break;
    case EW_MUL: /* o1 = a * b */
        for (int64_t i = i0; i < i1; i++) o1[i] = a[i] * b[i];
        break;
    case EW_GATED_BWD: /* o1 = dL/dh on entry, dL/da on return; o2 = dL/dv; h = c, a, v = b */
        for (int64_t i = i0; i < i1; i++) {
            float hp = a[i] * b[i], dh = o1[i];
            if (c[i] != hp) dh = hp != 0.0f ? dh * (c[i] / hp) : 0.0f; /* a hook's replacement of h as a scaling */
            o2[i] = dh * a[i];
            o1[i] = dh * b[i];
        }
        break;
    case EW_ACT_BWD: /* o1 *= phi'(a) */
        for (int64_t i = i0; i < i1; i++) o1[i] *= sc_act_deriv(a[i], j->act);
        break;
    }
}

static void ew(ew_job *j, int64_t n) {
    j->n = n;
    sc_parallel(n, ew_part, j);
}

void sc_act_forward(float *a, const float *u, int64_t n, sc_act act) {
    ew_job j = {.op = EW_ACT, .act = act, .o1 = a, .i1 = u};
    ew(&j, n);
}

void sc_add(float *x, const float *y, int64_t n) {
    ew_job j = {.op = EW_ADD, .o1 = x, .i1 = y};
    ew(&j, n);
}

void sc_mul(float *h, const float *a, const float *v, int64_t n) {
    ew_job j = {.op = EW_MUL, .o1 = h, .i1 = a, .i2 = v};
    ew(&j, n);
}

void sc_gated_backward(float *dh, float *dv, const float *h, const float *a, const float *v, int64_t n) {
    ew_job j = {.op = EW_GATED_BWD, .o1 = dh, .o2 = dv, .i1 = a, .i2 = v, .i3 = h};
    ew(&j, n);
}

void sc_act_backward(float *d, const float *u, int64_t n, sc_act act) {
    ew_job j = {.op = EW_ACT_BWD, .act = act, .o1 = d, .i1 = u};
    ew(&j, n);
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
    int got = openblas_get_num_threads();
    sc_parallel_configure(got);
    return got;
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
