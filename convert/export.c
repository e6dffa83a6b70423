/* export.c - see export.h and docs/EXPORT.md. The routing arrays come from
 * the code that stores them in an artifact (pack_routing.c, through its sink)
 * or from the artifact's own sections, so the three places cannot disagree;
 * this file only collects them, puts permuted ones back in order and writes. */
#define _POSIX_C_SOURCE 200809L
#include "export.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "filekind.h"
#include "json_out.h"
#include "larosa.h"
#include "larosa_rot.h"
#include "pack_routing.h"
#include "safetensors.h"
#include "srt_container.h"
#include "srt_json.h"
#include "srt_schema.h"
#include "teal.h"
#include "torch_pt.h"

/* ---- the tensors of one export ---- */

typedef struct ex_tensor {
    char name[96];
    float *v;        /* owned; NULL for a rotation, produced as it is written */
    int64_t rows, cols; /* cols 0: a vector */
    int64_t layer;
    int which;       /* SC_LAROSA_ATTN / _MLP for a rotation */
} ex_tensor;

typedef struct ex_list {
    ex_tensor *t;
    size_t n, cap;
} ex_list;

static sc_status ex_add(ex_list *x, const char *name, const float *v, int64_t rows, int64_t cols, int64_t layer,
                        int which, sc_err *err) {
    if (x->n == x->cap) {
        size_t cap = x->cap ? 2 * x->cap : 64;
        ex_tensor *t = realloc(x->t, cap * sizeof *t);
        if (!t) return sc_errf(err, SC_ENOMEM, "out of memory");
        x->t = t;
        x->cap = cap;
    }
    ex_tensor *t = &x->t[x->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->rows = rows;
    t->cols = cols;
    t->layer = layer;
    t->which = which;
    if (v) {
        size_t n = (size_t)(rows * (cols ? cols : 1));
        if (!(t->v = malloc(n * sizeof(float)))) return sc_errf(err, SC_ENOMEM, "out of memory");
        memcpy(t->v, v, n * sizeof(float));
    }
    x->n++;
    return SC_OK;
}

/* Whether the list holds a rotation (produced on writing). */
static bool ex_rotated(const ex_list *x) {
    for (size_t i = 0; i < x->n; i++)
        if (!x->t[i].v) return true;
    return false;
}

static void ex_free(ex_list *x) {
    for (size_t i = 0; i < x->n; i++) free(x->t[i].v);
    free(x->t);
    memset(x, 0, sizeof *x);
}

/* pack_routing's sink: keep a copy */
static sc_status collect(void *user, const char *name, const float *v, int64_t rows, int64_t cols, sc_err *err) {
    return ex_add(user, name, v, rows, cols, -1, 0, err);
}

/* Produces rotation (layer, which) as D x D floats. */
typedef sc_status (*rot_fn)(void *user, int64_t layer, int which, float *dst, sc_err *err);

/* Writes every tensor in list order, f32, with the metadata. */
static sc_status ex_write(const ex_list *x, const char *out, const sc_st_meta *meta, size_t n_meta, rot_fn rot,
                          void *user, sc_export_result *res, sc_err *err) {
    if (x->n == 0) return sc_errf(err, SC_EARG, "nothing to export: no routing data (see docs/EXPORT.md)");
    sc_st_spec *specs = calloc(x->n, sizeof *specs);
    float *buf = NULL;
    int64_t most = 0;
    for (size_t i = 0; specs && i < x->n; i++) {
        const ex_tensor *t = &x->t[i];
        specs[i] = (sc_st_spec){.name = t->name, .dtype = SC_DT_F32, .n_dims = t->cols ? 2 : 1};
        specs[i].shape[0] = t->rows;
        specs[i].shape[1] = t->cols;
        if (!t->v && t->rows * t->cols > most) most = t->rows * t->cols;
    }
    if (!specs || (most && !(buf = malloc((size_t)most * sizeof(float))))) {
        free(specs);
        return sc_errf(err, SC_ENOMEM, "out of memory");
    }
    sc_st_writer *w = NULL;
    sc_status st = sc_st_writer_create(out, specs, x->n, meta, n_meta, &w, err);
    for (size_t i = 0; i < x->n && !st; i++) {
        const ex_tensor *t = &x->t[i];
        size_t n = (size_t)(t->rows * (t->cols ? t->cols : 1));
        if (!t->v && (st = rot(user, t->layer, t->which, buf, err))) break;
        st = sc_st_writer_write_f32(w, t->v ? t->v : buf, n, err);
        res->tensors++;
        res->bytes += n * sizeof(float);
        res->layers_rotated += !t->v;
    }
    if (!st) st = sc_st_writer_finish(w, err);
    sc_st_writer_free(w);
    free(buf);
    free(specs);
    return st;
}

/* The metadata both sources write; routing is the routing record as JSON. */
#define EX_META(source, model_id, data_id, routing, rotations)                                                      \
    {                                                                                                              \
        {"format", "sparsecal-routing"}, {"format_version", "1"}, {"tool", "sparsecal " SC_VERSION},               \
            {"source", source}, {"model_id", model_id}, {"calibration_data_id", data_id}, {"routing", routing},    \
            {"neuron_order", "model"}, {"sparsity_grid", "0.05:0.95:0.05"},                                       \
            {"teal_taps", "attn_in,attn_ctx,mlp_in,h"},                                                            \
            {"teal_curve_columns", "q,k,v,o,gate,up,down,effective"}, {"rotations", rotations},                    \
    }

/* ---- from a calibration ---- */

typedef struct calib_rot {
    const sc_calib *c;
    sc_larosa_rot r;
} calib_rot;

static sc_status calib_rotation(void *user, int64_t layer, int which, float *dst, sc_err *err) {
    calib_rot *x = user;
    SC_TRY(sc_larosa_rotation(x->c, layer, which, &x->r, err));
    for (int64_t i = 0; i < x->r.D * x->r.D; i++) dst[i] = (float)x->r.Q[i];
    return SC_OK;
}

sc_status sc_export_calib(const sc_model *m, const sc_calib *c, const sc_export_opts *o, const char *out,
                          sc_export_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    sc_pack_opts po = {0};
    po.calib = c;
    po.density = o->density;
    po.params = o->params;
    po.density_default = o->density_default;
    cJSON *r = cJSON_CreateObject();
    ex_list x = {0};
    sc_status st = r ? sc_routing_arrays(m, &po, collect, &x, NULL, NULL, r, err)
                     : sc_errf(err, SC_ENOMEM, "out of memory");
    const void *ls = sc_calib_state(c, "larosa");
    const int64_t D = m->cfg.dim;
    for (int64_t l = 0; ls && l < m->cfg.n_layers && !st; l++)
        for (int which = SC_LAROSA_ATTN; which <= SC_LAROSA_MLP && !st; which++) {
            if (!sc_larosa_has(ls, l, which, NULL)) continue;
            char name[64];
            snprintf(name, sizeof name, "l%lld.%s_larosa_Q", (long long)l, which == SC_LAROSA_ATTN ? "attn" : "mlp");
            st = ex_add(&x, name, NULL, D, D, l, which, err);
        }
    char *routing = NULL;
    if (!st) {
        cJSON_DeleteItemFromObjectCaseSensitive(r, "method"); /* no router is chosen by an export */
        if (!(routing = sc_json_print(r, false))) st = sc_errf(err, SC_ENOMEM, "out of memory");
    }
    if (!st) {
        const sc_st_meta meta[] = EX_META("calibration", c->model_id, c->data_id, routing,
                                          ex_rotated(&x) ? "lL.{attn,mlp}_larosa_Q: z = Q^T x, x the block input "
                                                           "after its RMSNorm" : "none");
        calib_rot cr = {c, {0}};
        st = ex_write(&x, out, meta, sizeof meta / sizeof meta[0], calib_rotation, &cr, res, err);
        sc_larosa_rot_free(&cr.r);
    }
    cJSON_free(routing);
    cJSON_Delete(r);
    ex_free(&x);
    return st;
}

/* ---- from an artifact ---- */

static bool is_routing_section(const char *rest) {
    static const char *const exact[] = {SRT_SEC_CLAWS_C,         SRT_SEC_CATS_THRESHOLDS, SRT_SEC_TEAL_THRESHOLDS,
                                        SRT_SEC_TEAL_CURVE,      SRT_SEC_CETT_THRESHOLDS, SRT_SEC_CETT_TABLE,
                                        SRT_SEC_CETT_WNORM};
    for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
        if (!strcmp(rest, exact[i])) return true;
    return sc_has_suffix(rest, "." SRT_SEC_CWIC_THETA) || sc_has_suffix(rest, "." SRT_SEC_CWIC_MEAN) ||
           sc_has_suffix(rest, "." SRT_SEC_CWIC_STD);
}

/* A layer's permutation (new position i holds neuron perm[i]), checked to be one; NULL without. */
static sc_status layer_perm(srt_container *ct, const char *path, long long layer, int64_t F, const uint32_t **out,
                            sc_err *err) {
    char name[64];
    snprintf(name, sizeof name, "l%lld.perm", layer);
    *out = NULL;
    if (srt_container_find(ct, name) < 0) return SC_OK;
    const void *p;
    if (srt_container_get_typed(ct, name, SRT_CT_U32, (uint64_t)F, &p))
        return sc_errf(err, SC_EFORMAT, "%s", srt_container_errmsg(ct));
    const uint32_t *perm = p;
    uint8_t *seen = calloc((size_t)F, 1);
    if (!seen) return sc_errf(err, SC_ENOMEM, "out of memory");
    bool ok = true;
    for (int64_t i = 0; i < F && ok; i++) {
        ok = perm[i] < (uint64_t)F && !seen[perm[i]];
        if (ok) seen[perm[i]] = 1;
    }
    free(seen);
    if (!ok) return sc_errf(err, SC_EFORMAT, "%s: section '%s' is not a permutation of %lld neurons", path, name,
                            (long long)F);
    *out = perm;
    return SC_OK;
}

typedef struct spk_rot {
    const char *path;
    sc_model *m;
} spk_rot;

static sc_status spk_rotation(void *user, int64_t layer, int which, float *dst, sc_err *err) {
    spk_rot *x = user;
    const sc_layer *L;
    SC_TRY(sc_model_layer(x->m, layer, &L, err));
    const float *R = which == SC_LAROSA_ATTN ? L->attn_rot : L->mlp_rot;
    if (!R) return sc_errf(err, SC_EFORMAT, "%s: layer %lld has no folded rotation", x->path, (long long)layer);
    memcpy(dst, R, (size_t)(x->m->cfg.dim * x->m->cfg.dim) * sizeof(float));
    return SC_OK;
}

sc_status sc_export_artifact(const char *path, const char *out, sc_export_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    srt_container *ct = NULL;
    SC_TRY(sc_container_open(path, SRT_CT_SPAK, &ct, err));
    const srt_json *man = srt_container_manifest(ct); /* as the container parsed it (the runtime's reader) */
    const srt_json *cfg = srt_json_get(man, SRT_MAN_CONFIG), *routing = srt_json_get(man, SRT_MAN_ROUTING),
                   *tensors = srt_json_get(man, SRT_MAN_TENSORS);
    const char *src = srt_json_str(srt_json_get(man, SRT_MAN_SOURCE_MODEL_ID), "");
    const int64_t F = srt_json_int(srt_json_get(cfg, SRT_CFG_FFN_DIM), 0),
                  D = srt_json_int(srt_json_get(cfg, SRT_CFG_DIM), 0),
                  NL = srt_json_int(srt_json_get(cfg, SRT_CFG_N_LAYERS), 0);
    ex_list x = {0};
    sc_model *m = NULL;
    char *rtext = NULL;
    sc_status st = SC_OK;
    if (!(F >= 1 && F <= SC_MAX_FFN) || !(D >= 1 && D <= SC_MAX_DIM) || !(NL >= 1 && NL <= SC_MAX_LAYERS)) {
        st = sc_errf(err, SC_EFORMAT, "%s: the manifest has no valid config (ffn_dim, dim, n_layers)", path);
        goto done;
    }
    float *tmp = malloc((size_t)F * sizeof *tmp);
    if (!tmp) {
        st = sc_errf(err, SC_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < srt_container_section_count(ct) && !st; i++) {
        const srt_ct_section *s = srt_container_section_at(ct, i);
        long long layer;
        int used = 0;
        if (sscanf(s->name, "l%lld.%n", &layer, &used) != 1 || used == 0 || layer < 0 || layer >= NL ||
            !is_routing_section(s->name + used))
            continue;
        const void *data;
        if (s->dtype != SRT_CT_F32 || s->ndim < 1 || s->ndim > 2 ||
            srt_container_data(ct, i, &data, &(uint64_t){0})) {
            st = sc_errf(err, SC_EFORMAT, "%s: section '%s' is not an f32 vector or matrix%s%s", path, s->name,
                         srt_container_errmsg(ct)[0] ? ": " : "", srt_container_errmsg(ct));
            break;
        }
        const float *v = data;
        const char *rest = s->name + used;
        if (!strcmp(rest, SRT_SEC_CLAWS_C) || !strcmp(rest, SRT_SEC_CETT_THRESHOLDS) ||
            !strcmp(rest, SRT_SEC_CETT_WNORM)) { /* per neuron: the model's order */
            const uint32_t *perm;
            if (s->ndim != 1 || s->dims[0] != (uint64_t)F) {
                st = sc_errf(err, SC_EFORMAT, "%s: section '%s' does not hold %lld values", path, s->name,
                             (long long)F);
                break;
            }
            if ((st = layer_perm(ct, path, layer, F, &perm, err))) break;
            if (perm) {
                for (int64_t j = 0; j < F; j++) tmp[perm[j]] = v[j];
                v = tmp;
            }
        }
        st = ex_add(&x, s->name, v, (int64_t)s->dims[0], s->ndim == 2 ? (int64_t)s->dims[1] : 0, -1, 0, err);
    }
    free(tmp);
    bool rotated = false;
    for (int64_t l = 0; l < NL && !st; l++)
        for (int which = SC_LAROSA_ATTN; which <= SC_LAROSA_MLP && !st; which++) {
            char name[64];
            snprintf(name, sizeof name, "l%lld.%s_rot", (long long)l, which == SC_LAROSA_ATTN ? "attn" : "mlp");
            if (!srt_json_get(tensors, name)) continue;
            rotated = true;
            st = ex_add(&x, name, NULL, D, D, l, which, err);
        }
    if (!st && rotated) st = sc_model_load(path, &m, err); /* the rotations dequantised with their layouts */
    if (!st && srt_json_is(routing, SRT_JSON_OBJECT) && !(rtext = srt_json_print(routing, 0, NULL)))
        st = sc_errf(err, SC_ENOMEM, "out of memory");
    if (!st) {
        const char *did = srt_json_str(srt_json_get(routing, SRT_RT_CALIB_DATA_ID), "");
        const sc_st_meta meta[] = EX_META("artifact", src, did, rtext ? rtext : "{}",
                                          rotated ? "lL.{attn,mlp}_rot: R = Q^T diag(g), z = R n(x), n the "
                                                    "unit-weight RMSNorm" : "none");
        spk_rot sr = {path, m};
        st = ex_write(&x, out, meta, sizeof meta / sizeof meta[0], spk_rotation, &sr, res, err);
    }
done:
    free(rtext);
    srt_container_close(ct);
    sc_model_free(m);
    ex_free(&x);
    return st;
}

/* ---- TEAL's files ---- */

static sc_status make_dirs(const char *path, sc_err *err) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return sc_errf(err, SC_EARG, "%s: path too long", path);
    for (char *s = p + 1;; s++) {
        bool end = *s == '\0';
        if (*s != '/' && !end) continue;
        *s = '\0';
        if (mkdir(p, 0777) != 0 && !(errno == EEXIST && sc_is_dir(p)))
            return sc_errf(err, SC_EIO, "%s: cannot create directory: %s", p, strerror(errno));
        if (end) return SC_OK;
        *s = '/';
    }
}

/* TEAL's histogram of one tap from ours: signed values ascending, our
 * negative row from the largest magnitude down, then the non-negative row up;
 * a magnitude bin's centre is its geometric mean, the |x| < 1e-8 bin's +-5e-9,
 * the outlier bin's 1e8. Empty bins beyond the data are left out. Returns the
 * count written into counts/centres (2 * SC_TEAL_NB at most). */
static int64_t teal_signed(const int64_t *hist, float *counts, float *centres) {
    int64_t n = 0;
    for (int side = 0; side < 2; side++)
        for (int64_t k = 0; k < SC_TEAL_NB; k++) {
            int64_t b = side == 0 ? SC_TEAL_NB - 1 - k : k;
            double c = b == 0                ? SC_TEAL_LO / 2
                       : b > SC_TEAL_NMAG ? SC_TEAL_HI
                                          : sqrt(sc_teal_bin_left(b) * sc_teal_bin_right(b));
            counts[n] = (float)hist[side * SC_TEAL_NB + b];
            centres[n] = (float)(side == 0 ? -c : c);
            n++;
        }
    int64_t lo = 0, hi = n - 1;
    while (lo < hi && counts[lo] == 0) lo++;
    while (hi > lo && counts[hi] == 0) hi--;
    memmove(counts, counts + lo, (size_t)(hi - lo + 1) * sizeof *counts);
    memmove(centres, centres + lo, (size_t)(hi - lo + 1) * sizeof *centres);
    return hi - lo + 1;
}

static sc_status teal_curve_csv(const char *path, const double *curve, int64_t rows, sc_err *err) {
    sc_atomic_file f;
    SC_TRY(sc_atomic_open(&f, path, err));
    sc_status st = SC_OK;
    char line[512];
    int k = snprintf(line, sizeof line, "Effective Sparsity,q,k,v,o,gate,up,down\n");
    st = sc_atomic_write(&f, line, (size_t)k, err);
    for (int64_t r = 0; r < rows && !st; r++) {
        const double *row = curve + r * SC_TEAL_CURVE_COLS;
        k = snprintf(line, sizeof line, "%.17g", row[SC_TEAL_NPROJ]);
        for (int p = 0; p < SC_TEAL_NPROJ; p++) k += snprintf(line + k, sizeof line - (size_t)k, ",%.17g", row[p]);
        k += snprintf(line + k, sizeof line - (size_t)k, "\n");
        st = sc_atomic_write(&f, line, (size_t)k, err);
    }
    if (!st) return sc_atomic_commit(&f, err);
    sc_atomic_abort(&f);
    return st;
}

sc_status sc_export_teal(const sc_calib *c, const char *dir, int64_t *files, sc_err *err) {
    *files = 0;
    void *ts = sc_calib_state(c, "teal");
    if (!ts) return sc_errf(err, SC_EARG, "the calibration holds no TEAL statistics (compute --method teal)");
    float *buf = malloc((size_t)(8 * SC_TEAL_NB) * sizeof *buf);
    if (!buf) return sc_errf(err, SC_ENOMEM, "out of memory");
    sc_status st = SC_OK;
    char path[4096];
    for (int64_t l = 0; l < c->n_layers && !st; l++) {
        if (!sc_teal_hist(ts, l, 0)) continue;
        static const char *const block[2] = {"self_attn", "mlp"};
        for (int b = 0; b < 2 && !st; b++) {
            snprintf(path, sizeof path, "%s/histograms/layer-%lld/%s", dir, (long long)l, block[b]);
            if ((st = make_dirs(path, err))) break;
            sc_pt_tensor t[4];
            for (int h = 0; h < 2; h++) { /* h1: the block's input, h2: the o / down input */
                float *counts = buf + (2 * h) * 2 * SC_TEAL_NB, *centres = counts + 2 * SC_TEAL_NB;
                int64_t n = teal_signed(sc_teal_hist(ts, l, 2 * b + h), counts, centres);
                t[2 * h] = (sc_pt_tensor){h ? "h2" : "h1", counts, n};
                t[2 * h + 1] = (sc_pt_tensor){h ? "h2_centers" : "h1_centers", centres, n};
            }
            char file[4096];
            if (!sc_path_join(file, sizeof file, path, "histograms.pt"))
                st = sc_errf(err, SC_EARG, "%s: path too long", dir);
            if (!st && !(st = sc_torch_save_f32(file, t, 4, err))) (*files)++;
        }
        int64_t rows = 0;
        const double *cv = sc_teal_curve(ts, l, &rows);
        if (st || !cv || rows < 2) continue; /* the greedy curve only where it was computed (teal_greedy=1) */
        snprintf(path, sizeof path, "%s/lookup", dir);
        if ((st = make_dirs(path, err))) break;
        snprintf(path, sizeof path, "%s/lookup/layer_%lld.csv", dir, (long long)l);
        if (!(st = teal_curve_csv(path, cv, rows, err))) (*files)++;
    }
    free(buf);
    return st;
}
