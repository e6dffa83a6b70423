/* cli_artifact.c - see cli_artifact.h. */
#include "cli_artifact.h"

#include <string.h>

#include "cli.h"
#include "filekind.h"
#include "threads.h"

bool cli_kv_parse(const char *name, srt_kv_type *kv) {
    if (name && strcmp(name, "f16") == 0) *kv = SRT_KV_F16;
    else if (name && strcmp(name, "f32") == 0) *kv = SRT_KV_F32;
    else return false;
    return true;
}

const char *cli_kv_name(srt_kv_type kv) { return kv == SRT_KV_F16 ? "f16" : "f32"; }

sc_status cli_artifact_open(const char *path, srt_isa isa, int64_t ctx_cap, srt_kv_type kv, cli_artifact *a,
                            sc_err *err) {
    memset(a, 0, sizeof *a);
    /* the thread count depends on the model's shape: open with one thread, then move to the pool (an
     * ISA this CPU lacks or a malformed SPARSECAL_PREFETCH is refused here, in one line) */
    sc_status cs0 = cli_ctx_create(&a->ctx1, isa, 1, err);
    if (cs0 != SC_OK) return cs0;
    isa = srt_ctx_isa(a->ctx1); /* resolved: the pool's context runs the same */
    char msg[1024] = "";
    srt_model_opts mo = {ctx_cap, a->ctx1, kv};
    srt_ct_status cs = srt_model_open(path, &mo, &a->m, msg, sizeof msg);
    if (cs) {
        cli_artifact_close(a);
        return sc_container_error(path, SRT_CT_SPAK, cs, msg, err);
    }
    const srt_model_config *c = srt_model_get_config(a->m);
    a->threads = sc_threads_for(c->dim, c->ffn_dim, c->n_heads * c->head_dim, NULL);
    if (a->threads == 1) {
        a->ctx = a->ctx1;
        a->ctx1 = NULL;
        return SC_OK;
    }
    /* per-thread scratch (an attention head's scores on each extra thread): room for as many floats
     * as the widest matrix has rows, rounded up to the largest row group (512) */
    int64_t rows = c->vocab_size > c->ffn_dim ? c->vocab_size : c->ffn_dim;
    rows = rows > c->n_heads * c->head_dim ? rows : c->n_heads * c->head_dim;
    rows = rows > c->dim ? rows : c->dim;
    srt_status ks = srt_ctx_create(&a->ctx, isa, (int)a->threads);
    if (ks == SRT_OK) ks = srt_ctx_reserve(a->ctx, (rows + 511) / 512 * 512);
    if (ks == SRT_OK) ks = srt_model_set_ctx(a->m, a->ctx);
    if (ks != SRT_OK) {
        int64_t t = a->threads;
        cli_artifact_close(a);
        return sc_errf(err, SC_ENOMEM, "cannot start %lld kernel threads (%s)", (long long)t, srt_status_str(ks));
    }
    return SC_OK;
}

void cli_artifact_close(cli_artifact *a) {
    srt_model_close(a->m);
    srt_ctx_free(a->ctx);
    srt_ctx_free(a->ctx1);
    memset(a, 0, sizeof *a);
}
