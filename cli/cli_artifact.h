/* cli_artifact.h - opening a packed artifact for the runtime decoder with the
 * kernel threads its shape calls for: what `run` and `eval -m X.spk` share. */
#ifndef SC_CLI_ARTIFACT_H
#define SC_CLI_ARTIFACT_H

#include <stdint.h>

#include "common.h"
#include "srt_model.h"

typedef struct cli_artifact {
    srt_model *m;
    srt_ctx *ctx;      /* the kernels' context the model runs with */
    srt_ctx *ctx1;     /* the one-thread context it was opened with (NULL once ctx took over) */
    int64_t threads;   /* kernel threads (sc_threads_for the model's shape, or --threads) */
} cli_artifact;

/* Opens path with the kernels of isa (SRT_ISA_AUTO: the best here; checked),
 * a key/value cache of type kv that may grow to ctx_cap positions (0: the
 * model's context), then moves it to a pool of the thread count its shape
 * calls for (cli_threads_setup first). On failure a is left closed. */
sc_status cli_artifact_open(const char *path, srt_isa isa, int64_t ctx_cap, srt_kv_type kv, cli_artifact *a,
                            sc_err *err);
/* The key/value cache type `run` and `eval -m` use unless told (--cache-type): f16, as llama.cpp's. */
#define CLI_KV_DEFAULT SRT_KV_F16
/* "f16" / "f32" -> *kv; false for anything else. */
bool cli_kv_parse(const char *name, srt_kv_type *kv);
const char *cli_kv_name(srt_kv_type kv);
void cli_artifact_close(cli_artifact *a);

#endif
