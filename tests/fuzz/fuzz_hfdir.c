/* fuzz_hfdir.c - a Hugging Face model directory: the input is split into
 * config.json (its length in the first two bytes) and model.safetensors,
 * written into a directory of this process's own, then loaded as a model
 * (config keys, tensor names, shapes and dtypes, tied classifier). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "model.h"

static int put(const char *dir, const char *name, const uint8_t *b, size_t n) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(b, 1, n, f) : 0;
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static char dir[64];
static void cleanup(void) {
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", dir);
    remove(p);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    remove(p);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int policy_set;
    if (!policy_set) { /* convert every weight at load, so the converters are fuzzed too */
        sc_model_policy(true, 0);
        policy_set = 1;
    }
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/sparsecal-fuzz-hf.XXXXXX");
        if (!mkdtemp(dir)) return 0;
        atexit(cleanup);
    }
    if (size < 2) return 0;
    size_t cl = (size_t)(data[0] | (data[1] << 8));
    if (cl > size - 2) cl = size - 2;
    if (put(dir, "config.json", data + 2, cl) || put(dir, "model.safetensors", data + 2 + cl, size - 2 - cl)) return 0;
    sc_err err;
    sc_model *m = NULL;
    if (sc_load_hf(dir, &m, &err) == SC_OK) sc_model_free(m);
    return 0;
}
