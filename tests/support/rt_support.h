/* rt_support.h - runtime helpers shared by the tests that compare `sparsecal
 * run`'s decoder with the reference evaluator. */
#ifndef SC_RT_SUPPORT_H
#define SC_RT_SUPPORT_H

#include <stdint.h>

#include "data.h"
#include "srt_model.h"

/* Teacher-forced NLL of the runtime on d: every position after the first of
 * every sequence, each sequence from position 0 (the same scoring as
 * sc_eval_run for sequences within one window). Resets the model's timing;
 * *n_scored (may be NULL) receives the scored positions and *mlp_density
 * (may be NULL) the mean fraction of live MLP neurons. NAN on a failed step. */
double sc_test_rt_nll(srt_model *rt, const sc_dataset *d, int64_t *n_scored, double *mlp_density);

#endif
