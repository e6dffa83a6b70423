/* larosa.h - what the LaRoSA calibration keeps, for eval, pack, diag and tests.
 *
 * One rotation per block input (the attention input and the MLP input of
 * every calibrated layer). Per input, over calibration tokens:
 *   H = sum_t x_t x_t^T          (f64, SUM)
 * kept as its packed upper triangle: element (i, j), i <= j, at
 * i + j (j + 1) / 2 (the column-major "U" packing of BLAS/LAPACK), D (D + 1) / 2
 * doubles. The damped mean moment
 *   M = H / n + damp * mean(diag(H / n)) * I     (damp = 0.01)
 * is eigendecomposed with LAPACKE_dsyevd:
 *   eig[k] descending, Q[i * D + k] = component i of eigenvector k (columns
 *   are orthonormal eigenvectors; each column's largest-|.| entry is
 *   positive, so Q is deterministic). Q^T M Q = diag(eig).
 * The rotated input is z = Q^T x (z_k = sum_i Q[i*D+k] x_i).
 *
 * eig and Q are computed one layer at a time when the file is written and
 * read back one layer at a time (larosa_rot.c); no state holds them for every
 * layer. */
#ifndef SC_LAROSA_H
#define SC_LAROSA_H

#include <stdint.h>

#include "method.h"

enum { SC_LAROSA_ATTN = 0, SC_LAROSA_MLP = 1 };
enum { SC_LAROSA_ARR_H = 0, SC_LAROSA_ARR_EIG = 1, SC_LAROSA_ARR_Q = 2 };

/* Elements of the packed upper triangle of a D x D matrix. */
static inline int64_t sc_larosa_packed(int64_t D) { return D * (D + 1) / 2; }

/* Whether layer (absolute index) and input (SC_LAROSA_*) were calibrated;
 * *count (may be NULL) gets its tokens. */
bool sc_larosa_has(const void *state, int64_t layer, int which, int64_t *count);
/* The descriptor of array `what` (SC_LAROSA_ARR_H, _EIG, _Q) of layer/input, as
 * the state's `arrays` (H) or `streamed` (eig, Q) list it; H's data is the
 * resident packed moment, or NULL in a state opened for reading (and eig/Q's
 * always NULL). False if that layer/input was not calibrated. */
bool sc_larosa_array(const void *state, int64_t layer, int which, int what, sc_array *out);
int64_t sc_larosa_dim(const void *state);
/* The damping factor of the calibration. */
double sc_larosa_damp(const void *state);

/* Accumulates Hp += X^T X (packed upper triangle, above) for rows X [n, D]
 * in float: chunks of SC_LAROSA_CHUNK rows are converted to double and
 * multiplied (cblas_dgemm) by column panels of SC_LAROSA_PANEL into a tile
 * that is then added into the packed store, so only the triangle is ever
 * held. scratch holds sc_larosa_scratch(D) doubles. */
#define SC_LAROSA_CHUNK 256
#define SC_LAROSA_PANEL 256
static inline int64_t sc_larosa_scratch(int64_t D) { return (SC_LAROSA_CHUNK + SC_LAROSA_PANEL) * D; }
void sc_larosa_accumulate(double *Hp, const float *X, int64_t n, int64_t D, double *scratch);
/* M = Hp / count + damp * mean(diag) * I, eigendecomposed into eig
 * (descending) and Q [D, D] (see above). Hp (packed) is left unchanged;
 * dsyevd's workspace (about 2 D^2 doubles) is allocated for the call. */
sc_status sc_larosa_eigen(const double *Hp, int64_t count, int64_t D, double damp, double *eig, double *Q, sc_err *err);

/* eval --method larosa (sc_eval_larosa, route_method.h): rotated top-K of the
 * attention and MLP inputs (z = Q^T x, keep the top-K |z_k|, x' = Q z_kept)
 * and magnitude top-K of h. Parameters: in=0.8, h=1.2 (s_in = in * s,
 * s_h = h * s, s = 1 - density), grid=1 to search the split keeping the
 * parameter-weighted sparsity of the sparsified linears at s (tuned on the
 * first grid_seqs=16 sequences, step grid_step=0.05). */

/* Parameter counts of one layer's linears: q+k+v, o, gate+up, down. */
void sc_lc_layer_params(const sc_config *c, double *qkv, double *o, double *gu, double *down);

#endif
