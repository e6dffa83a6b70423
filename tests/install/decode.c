/* decode.c - a program outside the source tree, built against an installed
 * libsparsert (tests/install_sparsert.sh): opens a packed artifact, routes its
 * MLPs as the artifact says (pack --method/--density), feeds the prompt ids and
 * decodes greedily until BOS/EOS or STEPS positions have run, as `sparsecal
 * run --temp 0 --steps STEPS` does. Prints every id (prompt first) on one line.
 *   decode ARTIFACT STEPS ID...          (the ids include BOS) */
#include <stdio.h>
#include <stdlib.h>

#include "srt_model.h"

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: decode ARTIFACT STEPS ID...\n");
        return 2;
    }
    const char *path = argv[1];
    int64_t steps = strtoll(argv[2], NULL, 10), n_prompt = argc - 3;
    if (steps < n_prompt || steps > (int64_t)1 << 21) {
        fprintf(stderr, "decode: STEPS must be at least the prompt's %lld ids\n", (long long)n_prompt);
        return 2;
    }
    int32_t *ids = malloc(sizeof *ids * (size_t)(steps + 1));
    srt_ctx *ctx = NULL;
    srt_model *m = NULL;
    char msg[512] = "";
    int rc = 1;
    if (!ids || srt_ctx_create(&ctx, SRT_ISA_AUTO, 1) != SRT_OK) {
        fprintf(stderr, "decode: cannot create a runtime context\n");
        goto done;
    }
    for (int64_t i = 0; i < n_prompt; i++) ids[i] = (int32_t)strtol(argv[3 + i], NULL, 10);
    srt_model_opts opts = {.max_ctx = 0, .ctx = ctx};
    if (srt_model_open(path, &opts, &m, msg, sizeof msg) != SRT_CT_OK) {
        fprintf(stderr, "decode: %s\n", msg);
        goto done;
    }
    const srt_model_config *c = srt_model_get_config(m);
    srt_status st = srt_model_set_method(m, srt_model_default_method(m), srt_model_default_density(m));
    const float *logits = NULL;
    if (st == SRT_OK) st = srt_model_prefill(m, ids, n_prompt, 0, &logits);
    int64_t n = n_prompt;
    /* positions 0..steps-1 run; the token sampled from the last one is kept (run's count) */
    while (st == SRT_OK) {
        int32_t best = 0;
        for (int64_t v = 1; v < c->vocab_size; v++)
            if (logits[v] > logits[best]) best = (int32_t)v;
        if (best == c->bos_id || best == c->eos_id) break;
        ids[n++] = best;
        if (n > steps) break;
        st = srt_model_step(m, best, n - 1, &logits);
    }
    if (st != SRT_OK) {
        fprintf(stderr, "decode: %s: %s\n", path, srt_status_str(st));
        goto done;
    }
    for (int64_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
    fprintf(stderr, "decode: %s, router %s at density %g, %lld tokens\n", path, srt_model_method(m),
            srt_model_default_density(m), (long long)n);
    rc = 0;
done:
    srt_model_close(m);
    srt_ctx_free(ctx);
    free(ids);
    return rc;
}
