/* larosa.h - what the LaRoSA calibration keeps, for eval, diag and tests.
 *
 * One rotation per block input (the attention input and the MLP input of
 * every calibrated layer). Per input, over calibration tokens:
 *   H = sum_t x_t x_t^T          (f64, upper triangle, row-major; SUM)
 * finalize forms the damped mean moment
 *   M = H / n + damp * mean(diag(H / n)) * I     (damp = 0.01)
 * and eigendecomposes it with LAPACKE_dsyevd:
 *   eig[k] descending, Q[i * D + k] = component i of eigenvector k (columns
 *   are orthonormal eigenvectors; each column's largest-|.| entry is
 *   positive, so Q is deterministic). Q^T M Q = diag(eig).
 * The rotated input is z = Q^T x (z_k = sum_i Q[i*D+k] x_i). */
#ifndef SC_LAROSA_H
#define SC_LAROSA_H

#include <stdint.h>

#include "method.h"

enum { SC_LAROSA_ATTN = 0, SC_LAROSA_MLP = 1 };

typedef struct sc_larosa_input {
    const double *H;   /* [D, D] upper triangle of sum x x^T */
    const double *eig; /* [D] descending */
    const double *Q;   /* [D, D] */
    int64_t count;     /* tokens */
} sc_larosa_input;

/* The arrays of layer `layer` (absolute index) and input (SC_LAROSA_*) of a
 * larosa state; false if that layer/input was not calibrated. */
bool sc_larosa_get(const void *state, int64_t layer, int which, sc_larosa_input *out);
int64_t sc_larosa_dim(const void *state);
/* The damping factor finalize used. */
double sc_larosa_damp(const void *state);

/* Accumulates H += X^T X (upper triangle) for rows X [n, D] in float,
 * converting chunks of rows to double and calling cblas_dsyrk; scratch
 * holds SC_LAROSA_CHUNK * D doubles. */
#define SC_LAROSA_CHUNK 256
void sc_larosa_accumulate(double *H, const float *X, int64_t n, int64_t D, double *scratch);
/* M = H / count + damp * mean(diag) * I, eigendecomposed into eig (descending)
 * and Q (see above). H is read (upper triangle) and left unchanged. */
sc_status sc_larosa_eigen(const double *H, int64_t count, int64_t D, double damp, double *eig, double *Q, sc_err *err);

#endif
