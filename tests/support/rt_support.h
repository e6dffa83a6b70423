/* rt_support.h - runtime helpers shared by the tests that compare `sparsecal
 * run`'s decoder with the reference evaluator. */
#ifndef SC_RT_SUPPORT_H
#define SC_RT_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "data.h"
#include "srt_model.h"

/* Teacher-forced NLL of the runtime on d: every position after the first of
 * every sequence, each sequence from position 0 (the same scoring as
 * sc_eval_run for sequences within one window). Resets the model's timing;
 * *n_scored (may be NULL) receives the scored positions and *mlp_density
 * (may be NULL) the mean fraction of live MLP neurons. NAN on a failed step. */
double sc_test_rt_nll(srt_model *rt, const sc_dataset *d, int64_t *n_scored, double *mlp_density);

/* srt_model_prefill of ids[0..n) on a against n steps on b (another model of the same artifact, router
 * and context: the same code on the same inputs), then one step more on each: the logits and every
 * layer's srt_model_last_density equal bit for bit (the key/value caches too, or the extra step would
 * differ). */
bool sc_test_prefill_matches(srt_model *a, srt_model *b, const int32_t *ids, int64_t n, int64_t vocab);

/* Copies the artifact src to dst, dropping section `drop` (NULL: none; "*SUFFIX": every section whose name
 * ends in SUFFIX) and replacing the manifest text `from` by `to` (NULL: unchanged), or truncating section
 * `shrink` by 64 bytes. False when src cannot be read, dst written or `from` is not in the manifest. */
bool sc_test_spk_rewrite(const char *src, const char *dst, const char *drop, const char *from, const char *to,
                         const char *shrink);

#endif
