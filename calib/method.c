/* method.c - the method registry and helpers shared by methods. */
#include "method.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const sc_method sc_method_claws;
extern const sc_method sc_method_cats;

static const sc_method *const registry[] = {&sc_method_claws, &sc_method_cats, NULL};

const sc_method *const *sc_methods(void) { return registry; }

const sc_method *sc_method_find(const char *name) {
    for (int i = 0; registry[i]; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

double *sc_method_f64(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

void sc_down_col_norms(const sc_model *m, int64_t layer, double *out) {
    const float *wd = m->layers[layer].wd;
    int64_t D = m->cfg.dim, F = m->cfg.ffn_dim;
    for (int64_t j = 0; j < F; j++) out[j] = 0.0;
    for (int64_t i = 0; i < D; i++) {
        const float *row = wd + i * F;
        for (int64_t j = 0; j < F; j++) out[j] += (double)row[j] * row[j];
    }
    for (int64_t j = 0; j < F; j++) out[j] = sqrt(out[j]);
}
