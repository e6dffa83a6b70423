/* fuzz_lora.c - PEFT LoRA adapters (convert/lora.c): the input is split into
 * adapter_config.json (its length in the first two bytes) and
 * adapter_model.safetensors, written into a directory of this process's own,
 * then fused into a fresh copy of a small synthetic base model whose shapes
 * are stories260K's (dim 64, ffn 172, 5 layers, 8 heads, 4 kv heads), the
 * shapes of the adapters the LoRA test writes (the seeds). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "lora.h"
#include "model.h"
#include "synth.h"

static char dir[64], base[64];

static int put(const char *name, const uint8_t *b, size_t n) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(b, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static void rm2(const char *d, const char *a, const char *b) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", d, a);
    remove(p);
    snprintf(p, sizeof p, "%s/%s", d, b);
    remove(p);
    rmdir(d);
}

static void cleanup(void) {
    rm2(dir, "adapter_config.json", "adapter_model.safetensors");
    rm2(base, "config.json", "model.safetensors");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sc_err err;
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/sparsecal-fuzz-lora.XXXXXX");
        snprintf(base, sizeof base, "/tmp/sparsecal-fuzz-base.XXXXXX");
        if (!mkdtemp(dir) || !mkdtemp(base)) return 0;
        atexit(cleanup);
        sc_synth_opts o;
        sc_synth_opts_default(&o);
        o.dim = 64, o.ffn_dim = 172, o.n_layers = 5, o.n_heads = 8, o.n_kv_heads = 4, o.vocab_size = 32;
        o.max_seq_len = 32;
        if (sc_synth_write(&o, base, &err) != SC_OK) {
            fprintf(stderr, "fuzz_lora: %s\n", err.msg);
            abort(); /* the harness itself is broken */
        }
    }
    if (size < 2) return 0;
    size_t cl = (size_t)(data[0] | (data[1] << 8));
    if (cl > size - 2) cl = size - 2;
    if (put("adapter_config.json", data + 2, cl) || put("adapter_model.safetensors", data + 2 + cl, size - 2 - cl))
        return 0;
    sc_model *m = NULL;
    if (sc_model_load(base, &m, &err) != SC_OK) abort();
    sc_lora_result lr;
    (void)sc_lora_fuse(m, dir, &lr, &err);
    sc_model_free(m);
    return 0;
}
