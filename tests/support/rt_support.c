/* rt_support.c - see rt_support.h. */
#include "rt_support.h"

#include <math.h>

double sc_test_rt_nll(srt_model *rt, const sc_dataset *d, int64_t *n_scored, double *mlp_density) {
    const srt_model_config *c = srt_model_get_config(rt);
    double nll = 0.0;
    int64_t n = 0;
    srt_model_reset_timing(rt);
    for (size_t s = 0; s < d->n_seqs; s++) {
        const sc_tokens *t = &d->seqs[s];
        for (size_t i = 0; i + 1 < t->n; i++) {
            const float *lg;
            if (srt_model_step(rt, t->ids[i], (int64_t)i, &lg) != SRT_OK) return NAN;
            double mx = lg[0], z = 0.0;
            for (int64_t v = 1; v < c->vocab_size; v++) mx = lg[v] > mx ? lg[v] : mx;
            for (int64_t v = 0; v < c->vocab_size; v++) z += exp((double)lg[v] - mx);
            nll += log(z) + mx - (double)lg[t->ids[i + 1]];
            n++;
        }
    }
    if (n_scored) *n_scored = n;
    if (mlp_density) {
        srt_model_timing tm;
        srt_model_get_timing(rt, &tm);
        *mlp_density = tm.steps ? (double)tm.live_sum / ((double)tm.steps * (double)c->n_layers * (double)c->ffn_dim) : 0.0;
    }
    return nll;
}
