/* finite.h - non-finite numbers in a model's forward pass. A NaN or inf in a
 * weight (one NaN in a norm weight is enough) turns every later activation
 * and every logit into NaN; sampling or scoring such logits silently gives
 * token 0 or a NaN perplexity. Callers check the logits they use and, when
 * one is not finite, ask where it came from. */
#ifndef SC_FINITE_H
#define SC_FINITE_H

#include <stdint.h>

#include "common.h"
#include "forward.h"

/* Index of the first NaN or inf in x[0..n), or -1. */
int64_t sc_first_nonfinite(const float *x, int64_t n);

/* Runs ids[0..n) from position 0 with every tap and linear layer checked and
 * describes, in err, the first place (layer, tensor, position) a non-finite
 * value appears; returns SC_EFORMAT. `what` starts the message (e.g.
 * the model path). */
sc_status sc_explain_nonfinite(const sc_model *m, const int32_t *ids, int64_t n, const char *what, sc_err *err);

#endif
