/* rt_support.c - see rt_support.h. */
#include "rt_support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "srt_container.h"

bool sc_test_prefill_matches(srt_model *a, srt_model *b, const int32_t *ids, int64_t n, int64_t vocab) {
    const float *la = NULL, *lb = NULL;
    if (srt_model_prefill(a, ids, n, 0, &la) != SRT_OK) return false;
    for (int64_t i = 0; i < n; i++)
        if (srt_model_step(b, ids[i], i, &lb) != SRT_OK) return false;
    bool same = memcmp(la, lb, (size_t)vocab * sizeof(float)) == 0;
    for (int64_t l = 0; l < srt_model_get_config(a)->n_layers; l++) {
        const double da = srt_model_last_density(a, l), db = srt_model_last_density(b, l);
        same = same && memcmp(&da, &db, sizeof da) == 0;
    }
    if (srt_model_step(a, ids[n], n, &la) != SRT_OK || srt_model_step(b, ids[n], n, &lb) != SRT_OK) return false;
    return same && memcmp(la, lb, (size_t)vocab * sizeof(float)) == 0;
}

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

bool sc_test_spk_rewrite(const char *src, const char *dst, const char *drop, const char *from, const char *to,
                    const char *shrink) {
    char msg[512];
    srt_container *ct;
    if (srt_container_open(src, SRT_CT_SPAK, &ct, msg, sizeof msg)) return false;
    srt_writer *w;
    if (srt_writer_create(dst, SRT_CT_SPAK, &w, msg, sizeof msg)) {
        srt_container_close(ct);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < srt_container_section_count(ct); i++) {
        const srt_ct_section *s = srt_container_section_at(ct, i);
        if (drop && (drop[0] == '*' ? sc_has_suffix(s->name, drop + 1) : !strcmp(s->name, drop))) continue;
        const void *d;
        uint64_t size;
        ok = srt_container_data(ct, i, &d, &size) == SRT_CT_OK;
        uint64_t dims[SRT_CT_MAX_DIMS];
        memcpy(dims, s->dims, sizeof dims);
        if (ok && shrink && !strcmp(s->name, shrink) && s->ndim == 1 && s->dtype == SRT_CT_BYTES) {
            dims[0] -= 64;
            size -= 64;
        }
        ok = ok && srt_writer_add(w, s->name, s->dtype, s->ndim, dims, d, (size_t)size, 0) == SRT_CT_OK;
    }
    size_t len;
    const char *mt = srt_container_manifest_text(ct, &len);
    char *man = malloc(len + 4096);
    memcpy(man, mt, len);
    man[len] = '\0';
    if (from) {
        char *p = strstr(man, from);
        if (!p) ok = false;
        else {
            size_t fl = strlen(from), tl = strlen(to);
            memmove(p + tl, p + fl, strlen(p + fl) + 1);
            memcpy(p, to, tl);
        }
    }
    ok = ok && srt_writer_set_manifest(w, man, strlen(man)) == SRT_CT_OK && srt_writer_finish(w) == SRT_CT_OK;
    free(man);
    srt_writer_free(w);
    srt_container_close(ct);
    return ok;
}
