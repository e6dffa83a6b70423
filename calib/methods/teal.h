/* teal.h - TEAL (training-free activation sparsity on every linear input):
 * histogram geometry, thresholds, the masking linear hook, the greedy
 * block-wise allocation curve and its lookup. Shared by the method
 * (teal.c, teal_greedy.c), eval (teal.c) and the tests.
 *
 * Histograms: per layer and tapped input (attn_in -> q/k/v, attn_ctx -> o,
 * mlp_in -> gate/up, h -> down), signed values on fixed, data-independent
 * bins: for each sign, bin 0 holds |x| < SC_TEAL_LO (exact zeros too),
 * bins 1..SC_TEAL_NMAG are log-spaced over [SC_TEAL_LO, SC_TEAL_HI) with
 * SC_TEAL_PER_DECADE bins per decade (relative width 0.225%), and bin
 * SC_TEAL_NMAG+1 is the outlier bin (|x| >= SC_TEAL_HI, NaN). Stored as
 * [2, SC_TEAL_NB] int64 (row 0: x < 0, row 1: x >= 0), so shards add. */
#ifndef SC_TEAL_H
#define SC_TEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "forward.h"
#include "srt_schema.h"

#define SC_TEAL_LO 1e-8
#define SC_TEAL_HI 1e8
#define SC_TEAL_PER_DECADE 1024
#define SC_TEAL_NMAG (16 * SC_TEAL_PER_DECADE)
#define SC_TEAL_NB (SC_TEAL_NMAG + 2)
#define SC_TEAL_NTAPS 4
#define SC_TEAL_NPROJ SC_LIN_COUNT /* q k v o gate up down */
#define SC_TEAL_SMAX 0.99          /* greedy: largest per-projection sparsity */
#define SC_TEAL_STEP 0.025         /* greedy: step of the largest projection */
#define SC_TEAL_CURVE_ROWS 320     /* >= 7 * ceil(SMAX / STEP) + 8 */
#define SC_TEAL_CURVE_COLS SRT_TEAL_CURVE_COLS /* s_q .. s_down, effective */

/* Tapped input (0..3) feeding a projection. */
int sc_teal_tap_of(sc_linear p);
const char *sc_teal_tap_name(int tap);
/* Magnitude bin of |x| (0 .. SC_TEAL_NMAG+1) and its edges. */
int64_t sc_teal_bin(double a);
double sc_teal_bin_left(int64_t b);
double sc_teal_bin_right(int64_t b);

/* Cumulative |x| counts from a signed histogram [2, NB]: cum[b] = count of
 * |x| in bins 0..b (NB entries). */
void sc_teal_cumulative(const int64_t *hist, double *cum);
/* Threshold t with P(|x| <= t) = s on the histogram (interpolated in log
 * space inside the crossing bin; equivalently t = icdf(0.5 + s/2) of the
 * symmetrised signed distribution). s <= 0 gives 0 (dense), s >= 1 gives
 * SC_TEAL_HI. The fraction of |x| <= t differs from s by at most the mass
 * of the crossing bin. */
double sc_teal_threshold(const double *cum, double s);

/* Parameters of each projection of a layer (in * out). */
void sc_teal_proj_params(const sc_config *c, double n[SC_TEAL_NPROJ]);
/* Parameter-weighted sparsity of per-projection sparsities. */
double sc_teal_effective(const sc_config *c, const double s[SC_TEAL_NPROJ]);

/* The masking linear hook: for projection p of layer l with threshold
 * thr[l * NPROJ + p] > 0, recomputes y from x with every |x_i| <= t zeroed;
 * t <= 0 leaves y dense (bit-identical). Counts dropped inputs. */
typedef struct sc_teal_mask {
    const double *thr;   /* [n_layers, NPROJ] */
    float *scratch;      /* [cap] */
    int64_t cap;
    double *dropped;     /* [n_layers, NPROJ] zeroed inputs (may be NULL) */
    double *seen;        /* [n_layers, NPROJ] inputs seen */
    bool skip_last;      /* count every row but the last of each window (the rows run --score steps) */
} sc_teal_mask;
sc_status sc_teal_linear_hook(void *user, const sc_linear_event *ev, sc_err *err);

/* The method state's arrays, for eval and tests (NULL if absent):
 * hist [2, NB] of (layer, tap); curve [ROWS, COLS] and its row count. */
const int64_t *sc_teal_hist(void *state, int64_t layer, int tap);
const double *sc_teal_curve(void *state, int64_t layer, int64_t *rows);
/* Computes the greedy curve of every layer that lacks a current one (needs
 * the weights and the stored sample). */
sc_status sc_teal_ensure_curves(void *state, const sc_model *m, sc_err *err);

/* teal_greedy.c: the allocation curve of one layer from its stored dense
 * block inputs (n_slots windows of len[k] rows each at x + k * slot_stride),
 * thresholds from cum[4][NB]. Writes rows into curve, returns the count. */
typedef struct sc_teal_sample {
    const float *x;       /* [slots, max_len, dim] */
    const int64_t *len;   /* [slots] rows of each usable slot (0: skip) */
    int64_t n_slots, max_len;
} sc_teal_sample;
sc_status sc_teal_greedy_layer(const sc_model *m, int64_t layer, const sc_teal_sample *smp,
                               const double *const cum[SC_TEAL_NTAPS], double *curve, int64_t *rows, sc_err *err);

#endif
