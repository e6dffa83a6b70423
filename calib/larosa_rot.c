/* larosa_rot.c - LaRoSA rotations one layer at a time (see larosa_rot.h). */
#include "larosa_rot.h"

#include <stdlib.h>
#include <string.h>

#include "larosa.h"
#include "scal.h"

sc_status sc_larosa_state(const sc_calib *c, int64_t dim, const void **state, sc_err *err) {
    const void *s = *state = c ? sc_calib_state(c, "larosa") : NULL;
    if (!s)
        return sc_errf(err, SC_EARG, "the calibration file holds no 'larosa' statistics (compute --method larosa)");
    if (sc_larosa_dim(s) != dim) {
        *state = NULL;
        return sc_errf(err, SC_EARG, "the larosa rotations are for d_model %lld, the model has %lld",
                       (long long)sc_larosa_dim(s), (long long)dim);
    }
    return SC_OK;
}

sc_status sc_larosa_rotation(const sc_calib *c, int64_t layer, int which, sc_larosa_rot *r, sc_err *err) {
    const void *s = sc_calib_state(c, "larosa");
    int64_t count;
    if (!s || !sc_larosa_has(s, layer, which, &count))
        return sc_errf(err, SC_EARG, "larosa: layer %lld has no %s-input rotation in the calibration", (long long)layer,
                       which ? "mlp" : "attn");
    int64_t D = sc_larosa_dim(s);
    if (r->D != D) {
        sc_larosa_rot_free(r);
        r->D = D;
    }
    r->count = count;
    if ((!r->Q && !(r->Q = malloc((size_t)(D * D) * sizeof(double)))) ||
        (!r->eig && !(r->eig = malloc((size_t)D * sizeof(double)))))
        return sc_errf(err, SC_ENOMEM, "larosa: out of memory for a %lld x %lld rotation", (long long)D, (long long)D);
    sc_array h, e, q;
    sc_larosa_array(s, layer, which, SC_LAROSA_ARR_H, &h);
    sc_larosa_array(s, layer, which, SC_LAROSA_ARR_EIG, &e);
    sc_larosa_array(s, layer, which, SC_LAROSA_ARR_Q, &q);
    bool got_e = false, got_q = false;
    if (!h.data) { /* in the file: the rotation as written, else the moment */
        SC_TRY(sc_calib_read(c, "larosa", &e, r->eig, &got_e, err));
        if (got_e) SC_TRY(sc_calib_read(c, "larosa", &q, r->Q, &got_q, err));
        if (got_q) return SC_OK;
        if (!r->H && !(r->H = malloc((size_t)sc_larosa_packed(D) * sizeof(double))))
            return sc_errf(err, SC_ENOMEM, "larosa: out of memory for a %lld x %lld moment", (long long)D, (long long)D);
        bool got_h;
        SC_TRY(sc_calib_read(c, "larosa", &h, r->H, &got_h, err));
        if (!got_h) return sc_errf(err, SC_EFORMAT, "larosa: the calibration file holds no %s", h.name);
        h.data = r->H;
    }
    sc_status st = sc_larosa_eigen(h.data, count, D, sc_larosa_damp(s), r->eig, r->Q, err);
    if (st) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return sc_errf(err, st, "%s (layer %lld, %s input)", msg, (long long)layer, which ? "mlp" : "attn");
    }
    return SC_OK;
}

void sc_larosa_rot_free(sc_larosa_rot *r) {
    free(r->Q);
    free(r->eig);
    free(r->H);
    memset(r, 0, sizeof *r);
}

struct sc_larosa_rots {
    const sc_calib *c;
    int64_t L, D;
    bool as_float, resident;
    unsigned inputs;
    void **held;     /* [2 L] resident rotations (NULL: not calibrated) */
    int64_t current; /* one at a time: layer * 2 + input held in `one`, -1: none */
    void *one;
    sc_larosa_rot rot;
};

static bool wanted(const sc_larosa_rots *r, const void *state, int64_t layer, int which) {
    return (r->inputs >> which & 1u) && sc_larosa_has(state, layer, which, NULL);
}

/* r->rot (double) -> dst as r's element type */
static void put(const sc_larosa_rots *r, void *dst) {
    int64_t n = r->D * r->D;
    if (!r->as_float) {
        memcpy(dst, r->rot.Q, (size_t)n * sizeof(double));
        return;
    }
    float *f = dst;
    for (int64_t i = 0; i < n; i++) f[i] = (float)r->rot.Q[i];
}

sc_status sc_larosa_rots_create(const sc_calib *c, unsigned inputs, bool as_float, size_t max_bytes,
                                sc_larosa_rots **out, sc_err *err) {
    *out = NULL;
    const void *s = sc_calib_state(c, "larosa");
    if (!s) return sc_errf(err, SC_EARG, "larosa: the calibration holds no 'larosa' statistics");
    sc_larosa_rots *r = calloc(1, sizeof *r);
    if (!r) return sc_errf(err, SC_ENOMEM, "larosa: out of memory");
    r->c = c;
    r->L = c->n_layers;
    r->D = sc_larosa_dim(s);
    r->as_float = as_float;
    r->inputs = inputs;
    r->current = -1;
    size_t esz = as_float ? sizeof(float) : sizeof(double), one = (size_t)(r->D * r->D) * esz, total = 0;
    for (int64_t l = 0; l < r->L; l++)
        for (int w = 0; w < 2; w++) total += wanted(r, s, l, w) ? one : 0;
    r->resident = total <= max_bytes;
    sc_status st = SC_OK;
    if (!r->resident) { /* (double: handed out from r->rot itself) */
        if (as_float && !(r->one = malloc(one))) st = sc_errf(err, SC_ENOMEM, "larosa: out of memory for a rotation");
    } else if (!(r->held = calloc((size_t)(2 * r->L), sizeof *r->held))) {
        st = sc_errf(err, SC_ENOMEM, "larosa: out of memory");
    }
    for (int64_t l = 0; r->resident && l < r->L && !st; l++)
        for (int w = 0; w < 2 && !st; w++) {
            if (!wanted(r, s, l, w)) continue;
            if (!(r->held[2 * l + w] = malloc(one))) {
                st = sc_errf(err, SC_ENOMEM, "larosa: out of memory for the rotations");
                break;
            }
            if (!(st = sc_larosa_rotation(c, l, w, &r->rot, err))) put(r, r->held[2 * l + w]);
        }
    if (r->resident) sc_larosa_rot_free(&r->rot); /* (the double buffers are not needed again) */
    if (st) {
        sc_larosa_rots_free(r);
        return st;
    }
    *out = r;
    return SC_OK;
}

sc_status sc_larosa_rots_get(sc_larosa_rots *r, int64_t layer, int which, const void **Q, sc_err *err) {
    *Q = NULL;
    if (layer < 0 || layer >= r->L || which < 0 || which > 1 ||
        !wanted(r, sc_calib_state(r->c, "larosa"), layer, which))
        return SC_OK;
    int64_t key = 2 * layer + which;
    if (r->resident) {
        *Q = r->held[key];
        return SC_OK;
    }
    if (r->current != key) {
        r->current = -1;
        SC_TRY(sc_larosa_rotation(r->c, layer, which, &r->rot, err));
        if (r->as_float) put(r, r->one);
        r->current = key;
    }
    *Q = r->as_float ? r->one : (const void *)r->rot.Q;
    return SC_OK;
}

bool sc_larosa_rots_resident(const sc_larosa_rots *r) { return r->resident; }

void sc_larosa_rots_free(sc_larosa_rots *r) {
    if (!r) return;
    for (int64_t i = 0; r->held && i < 2 * r->L; i++) free(r->held[i]);
    free(r->held);
    free(r->one);
    sc_larosa_rot_free(&r->rot);
    free(r);
}
