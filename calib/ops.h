/* ops.h - the elementwise and row-wise operations of the forward pass
 * (backward versions join them side by side). Shapes in comments; all
 * arrays row-major. */
#ifndef SC_OPS_H
#define SC_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* out[T,C] = x[T,C] * r[t] * w[C], r = 1/sqrt(mean(x^2) + eps) (sum in double);
 * r_out[T] (may be NULL) keeps r for the backward. */
void sc_rmsnorm_forward(float *out, float *r_out, const float *x, const float *w, int64_t T, int64_t C, float eps);
/* dx[T,C] += d(out)/dx^T dout, from x, w and the saved r. */
void sc_rmsnorm_backward(float *dx, const float *dout, const float *x, const float *w, const float *r, int64_t T,
                         int64_t C);

/* Rotary tables for positions [0, n_pos): cos/sin [n_pos, head_dim/2], with
 * the config's base and frequency scaling (linear or Llama-3.1 style). */
void sc_rope_tables(float *cos_t, float *sin_t, int64_t n_pos, const sc_config *c);
/* The inverse frequency of pair i after scaling. */
float sc_rope_inv_freq(const sc_config *c, int64_t i);
/* Rotates x[T, n_heads*head_dim] in place; row t has position pos0 + t. */
void sc_rope_forward(float *x, int64_t T, int64_t n_heads, int64_t head_dim, int64_t pos0, const float *cos_t,
                     const float *sin_t, sc_rope_style style, bool inverse);
/* (inverse = true rotates by minus the angle: the backward of the rotation) */

/* The operations over rows or elements below run on sc_parallel's threads (threads.h): each output element is
 * computed by one thread, the same way for any thread count, so the results do not depend on it. */

/* In place: row t of s[T, ld] keeps columns [0, pos0 + t] (causal), softmax over them, zeros after. */
void sc_causal_softmax(float *s, int64_t T, int64_t ld, int64_t pos0);
/* One row: r[0, n) <- softmax(r[0, n)) with srt_exp (srt_ops.h), r[n, ld) <- 0. */
void sc_softmax_row(float *r, int64_t n, int64_t ld);
/* The backward of sc_causal_softmax (pos0 = 0, T rows of ld >= T): dP <- P * (dP - rowsum(P * dP)) on the
 * causal columns, 0 after them, from P = the softmax's output. */
void sc_causal_softmax_backward(float *dP, const float *P, int64_t T, int64_t ld);

/* a[n] = phi(u[n]) */
void sc_act_forward(float *a, const float *u, int64_t n, sc_act act);
/* x[n] += y[n] */
void sc_add(float *x, const float *y, int64_t n);
/* h[n] = a[n] * v[n] */
void sc_mul(float *h, const float *a, const float *v, int64_t n);
/* The backward of h = a * v: on entry dh = dL/dh, on return dL/da, and dv = dL/dv. Where h (as a forward
 * hook left it) differs from a * v, the hook's replacement is differentiated as the scaling h / (a v). */
void sc_gated_backward(float *dh, float *dv, const float *h, const float *a, const float *v, int64_t n);
/* d[n] *= phi'(u[n]) */
void sc_act_backward(float *d, const float *u, int64_t n, sc_act act);
float sc_act_scalar(float u, sc_act act);
/* d phi / du */
float sc_act_deriv(float u, sc_act act);

/* Sets OpenBLAS to the thread count of threads.h for this model (c may be
 * NULL: no model yet) and returns the count it really uses (it caps the
 * request at its build limit). */
int sc_blas_configure(const sc_config *c);

/* Which BLAS computes the matrix products, so a number can be traced to the
 * kernels that produced it: OpenBLAS picks its kernel set from the CPU at
 * start-up (or from OPENBLAS_CORETYPE), and different sets round differently. */
typedef struct sc_blas_desc {
    char library[32];  /* "OpenBLAS" */
    char version[32];  /* "0.3.21" */
    char config[160];  /* the library's build description */
    char core[32];     /* the kernel set it chose, e.g. "Haswell", "SkylakeX", "Cooperlake" */
    char coretype_env[32]; /* OPENBLAS_CORETYPE as set ("" when unset) */
    int threads;       /* threads it will use now */
} sc_blas_desc;
void sc_blas_describe(sc_blas_desc *out);

/* y[T, out] = x[T, in] W^T (+ b), W [out, in] (cblas_sgemm) */
void sc_linear_forward(float *y, const float *x, const float *W, const float *b, int64_t T, int64_t in, int64_t out);

#endif
