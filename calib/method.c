/* method.c - the method registry and helpers shared by methods. */
#include "method.h"
#include "sample_store.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern const sc_method sc_method_claws;
extern const sc_method sc_method_cats;
extern const sc_method sc_method_larosa;
extern const sc_method sc_method_cett;
extern const sc_method sc_method_clada;
extern const sc_method sc_method_teal;
extern const sc_method sc_method_cwic;
extern const sc_method sc_method_coact;

static const sc_method *const registry[] = {&sc_method_claws, &sc_method_cats, &sc_method_larosa, &sc_method_cett, &sc_method_clada,
                                             &sc_method_teal, &sc_method_cwic, &sc_method_coact, NULL};

const sc_method *const *sc_methods(void) { return registry; }

const sc_method *sc_method_find(const char *name) {
    for (int i = 0; registry[i]; i++)
        if (strcmp(registry[i]->name, name) == 0) return registry[i];
    return NULL;
}

sc_status sc_array_concat_resize(sc_array *a, int64_t rows, sc_err *err) {
    if (a->kind != SC_ARR_CONCAT || !a->concat_data || !a->concat_rows)
        return sc_errf(err, SC_EARG, "array %s cannot grow (not a CONCAT array)", a->name);
    size_t esz = a->type == SC_ARR_F32 ? 4 : 8, cols = (size_t)(a->shape[1] ? a->shape[1] : 1), bytes;
    if (rows < 0 || !sc_mul_ok((size_t)rows, cols, &bytes) || !sc_mul_ok(bytes, esz, &bytes))
        return sc_errf(err, SC_ENOMEM, "array %s: %lld rows are too many", a->name, (long long)rows);
    SC_TRY(sc_sample_resize(a->concat_data, bytes, a->name, err));
    void *p = *a->concat_data;
    *a->concat_rows = rows;
    a->data = p;
    a->shape[0] = rows;
    return SC_OK;
}

double *sc_method_f64(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

int sc_method_counter_array(sc_array *out, int cap, const char *name, int64_t *data, int64_t n) {
    if (cap < 1) return 0;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    out->kind = SC_ARR_SUM;
    out->type = SC_ARR_I64;
    out->shape[0] = n;
    out->data = data;
    return 1;
}

sc_status sc_down_col_norms(const sc_model *m, int64_t layer, double *out, sc_err *err) {
    if (layer < 0 || layer >= m->cfg.n_layers) return sc_errf(err, SC_EARG, "%s: no layer %lld", m->path, (long long)layer);
    const float *wd;
    SC_TRY(sc_model_weight(m, &m->layers[layer].wd, &wd, err));
    int64_t D = m->cfg.dim, F = m->cfg.ffn_dim;
    for (int64_t j = 0; j < F; j++) out[j] = 0.0;
    for (int64_t i = 0; i < D; i++) {
        const float *row = wd + i * F;
        for (int64_t j = 0; j < F; j++) out[j] += (double)row[j] * row[j];
    }
    for (int64_t j = 0; j < F; j++) out[j] = sqrt(out[j]);
    return SC_OK;
}
