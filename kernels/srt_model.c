/* srt_model.c - opening a packed artifact for decoding (see srt_model.h):
 * manifest and section validation, matrix views, buffers. The decode step
 * is in srt_decode.c. */
#define _DEFAULT_SOURCE /* madvise */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "srt_kern.h"
#include "srt_model_internal.h"
#include "srt_ops.h"

static srt_ct_status fail(char *err, size_t cap, srt_ct_status st, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return st;
}

static int64_t jint(const srt_json *o, const char *k, int64_t fb) { return srt_json_int(srt_json_get(o, k), fb); }

static srt_ct_status get_f32(srt_model *m, const char *name, int64_t n, const float **out, char *err, size_t cap) {
    const void *data;
    if (srt_container_find(m->ct, name) < 0)
        return fail(err, cap, SRT_CT_EFORMAT, "%s: section '%s' is missing", m->path, name);
    if (srt_container_get_typed(m->ct, name, SRT_CT_F32, (uint64_t)n, &data))
        return fail(err, cap, SRT_CT_EFORMAT, "%s", srt_container_errmsg(m->ct));
    if ((uintptr_t)data & 3) return fail(err, cap, SRT_CT_EFORMAT, "%s: section '%s' is misaligned", m->path, name);
    *out = data;
    m->weight_bytes += (uint64_t)n * 4;
    return SRT_CT_OK;
}

static srt_ct_status get_matrix(srt_model *m, const char *name, int64_t rows, int64_t cols, srt_weight *w, char *err,
                                size_t cap) {
    const srt_json *t = srt_json_get(m->tensors, name);
    const char *lay = srt_json_str(srt_json_get(t, SRT_TEN_LAYOUT), NULL);
    int64_t r = jint(t, SRT_TEN_ROWS, -1), c = jint(t, SRT_TEN_COLS, -1), rs = jint(t, SRT_TEN_ROWS_STORED, -1),
            cs = jint(t, SRT_TEN_COLS_STORED, -1), g = jint(t, SRT_TEN_GROUP, -1);
    srt_layout l;
    if (!t) return fail(err, cap, SRT_CT_EFORMAT, "%s: manifest: tensors.%s is missing", m->path, name);
    if (!lay || srt_layout_parse(lay, &l) != SRT_OK)
        return fail(err, cap, SRT_CT_EFORMAT, "%s: manifest: tensors.%s.layout is missing or unknown", m->path, name);
    if (r != rows || c != cols || rs < rows || cs < cols || rs > rows + 4096 || cs > cols + 4096 || g < 0 || g > 4096)
        return fail(err, cap, SRT_CT_EFORMAT,
                    "%s: manifest: tensors.%s: shape %lld x %lld (stored %lld x %lld, group %lld) does not match the "
                    "config (%lld x %lld)",
                    m->path, name, (long long)r, (long long)c, (long long)rs, (long long)cs, (long long)g,
                    (long long)rows, (long long)cols);
    int64_t idx = srt_container_find(m->ct, name);
    if (idx < 0) return fail(err, cap, SRT_CT_EFORMAT, "%s: section '%s' is missing", m->path, name);
    const void *data;
    uint64_t size;
    if (srt_container_data(m->ct, (size_t)idx, &data, &size))
        return fail(err, cap, SRT_CT_EFORMAT, "%s", srt_container_errmsg(m->ct));
    srt_matrix mat = {l, rs, cs, g, data, (size_t)size};
    if (srt_matrix_check(&mat) != SRT_OK)
        return fail(err, cap, SRT_CT_EFORMAT, "%s: section '%s': %llu bytes do not hold a %s matrix of %lld x %lld",
                    m->path, name, (unsigned long long)size, lay, (long long)rs, (long long)cs);
    w->m = mat;
    w->rows = rows;
    w->cols = cols;
    w->tr = srt_layout_get(l);
    if (rs > m->vmax) m->vmax = rs;
    if (cs > m->vmax) m->vmax = cs;
    m->weight_bytes += size;
    return SRT_CT_OK;
}

/* Every matrix the decoder reads (not an f32 embedding, of which it reads one row per token) into
 * one allocation aligned to 2 MB and advised for huge pages. */
srt_status srt_model_copy_weights(srt_model *m) {
    if (!m) return SRT_EINVAL;
    if (m->wcopy) return SRT_OK;
    srt_weight *w[16];
    size_t total = 0;
    for (int pass = 0; pass < 2; pass++) {
        uint8_t *dst = pass ? m->wcopy : NULL;
        size_t off = 0;
        for (int64_t l = -1; l < m->cfg.n_layers; l++) {
            int n = 0;
            if (l < 0) {
                if (m->emb.m.layout != SRT_LAYOUT_F32) w[n++] = &m->emb;
                if (!m->cfg.tied_classifier) w[n++] = &m->classifier;
            } else {
                srt_layer_w *L = &m->layers[l];
                srt_weight *lw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->wg, &L->wu, &L->wd, &L->attn_rot, &L->mlp_rot};
                for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++)
                    if (lw[i]->tr) w[n++] = lw[i];
            }
            for (int i = 0; i < n; i++) {
                if (dst) { /* the file's pages go as their copy comes: the peak is the copy, not twice the weights */
                    memcpy(dst + off, w[i]->m.data, w[i]->m.bytes);
                    srt_container_release(m->ct, w[i]->m.data, w[i]->m.bytes);
                    w[i]->m.data = dst + off;
                }
                off += (w[i]->m.bytes + 63) / 64 * 64;
            }
        }
        total = off;
        if (!pass) {
            const size_t huge = (size_t)2 << 20, bytes = (total + huge - 1) / huge * huge;
            if (total == 0) return SRT_OK;
            if (posix_memalign(&m->wcopy, huge, bytes) != 0) {
                m->wcopy = NULL;
                return SRT_ENOMEM; /* the mapping stays */
            }
#ifdef MADV_HUGEPAGE
            madvise(m->wcopy, bytes, MADV_HUGEPAGE);
#endif
        }
    }
    if (m->cfg.tied_classifier) m->classifier = m->emb;
    return SRT_OK;
}

void srt_model_close(srt_model *m) {
    if (!m) return;
    free(m->wcopy);
    srt_free(m->ctx_arena);
    srt_free(m->arena);
    srt_free(m->pf_arena);
    free(m->thr_l);
    free(m->lin_active);
    free(m->cwic_mem);
    free(m->cett_rt);
    free(m->g_sum);
    free(m->g_set);
    free(m->layers);
    srt_container_close(m->ct);
    free(m->path);
    free(m);
}

srt_status srt_model_set_ctx(srt_model *m, srt_ctx *ctx) {
    if (!m || !ctx || srt_ctx_isa(ctx) != srt_ctx_isa(m->ctx)) return SRT_EINVAL;
    m->ctx = ctx;
    return SRT_OK;
}

/* lN.teal_curve [rows, SRT_TEAL_CURVE_COLS] when stored (TEAL's greedy allocation curve). */
static srt_ct_status load_teal_curve(srt_model *m, int64_t l, char *err, size_t cap) {
    char nm[64];
    snprintf(nm, sizeof nm, SRT_LAYER_SECTION, (long long)l, SRT_SEC_TEAL_CURVE);
    int64_t i = srt_container_find(m->ct, nm);
    if (i < 0) return SRT_CT_OK;
    const srt_ct_section *sec = srt_container_section_at(m->ct, (size_t)i);
    if (sec->ndim != 2 || sec->dims[1] != SRT_TEAL_CURVE_COLS || sec->dims[0] < 1 || sec->dims[0] > 1000000)
        return fail(err, cap, SRT_CT_EFORMAT, "%s: section '%s' is not [rows, %d]", m->path, nm, SRT_TEAL_CURVE_COLS);
    srt_layer_w *Lw = &m->layers[l];
    Lw->teal_rows = (int64_t)sec->dims[0];
    srt_ct_status st = get_f32(m, nm, Lw->teal_rows * SRT_TEAL_CURVE_COLS, &Lw->teal_curve, err, cap);
    if (!st) m->n_teal_curve++;
    return st;
}

/* lN.P.cwic_theta [ns, in], cwic_mean [in], cwic_std [in] for each projection P that has them (with
 * routing.cwic.stripe). */
static srt_ct_status load_cwic(srt_model *m, int64_t l, char *err, size_t cap) {
    srt_layer_w *Lw = &m->layers[l];
    const srt_weight *w[SRT_NPROJ] = {&Lw->wq, &Lw->wk, &Lw->wv, &Lw->wo, &Lw->wg, &Lw->wu, &Lw->wd};
    for (int p = 0; p < SRT_NPROJ; p++) {
        char nm[96];
        snprintf(nm, sizeof nm, SRT_PROJ_SECTION, (long long)l, srt_proj_name(p), SRT_SEC_CWIC_THETA);
        if (srt_container_find(m->ct, nm) < 0) continue;
        if (!m->cwic_stripe) return fail(err, cap, SRT_CT_EFORMAT, "%s: '%s' without routing.cwic.stripe", m->path, nm);
        srt_cwic_w *c = &Lw->cwic[p];
        int64_t in = w[p]->cols, out = w[p]->rows;
        c->S = m->cwic_stripe < out ? m->cwic_stripe : out;
        c->ns = srt_cwic_stripes(out, c->S);
        srt_ct_status st = get_f32(m, nm, c->ns * in, &c->theta, err, cap);
        snprintf(nm, sizeof nm, SRT_PROJ_SECTION, (long long)l, srt_proj_name(p), SRT_SEC_CWIC_MEAN);
        if (!st) st = get_f32(m, nm, in, &c->mean, err, cap);
        snprintf(nm, sizeof nm, SRT_PROJ_SECTION, (long long)l, srt_proj_name(p), SRT_SEC_CWIC_STD);
        if (!st) st = get_f32(m, nm, in, &c->std, err, cap);
        if (st) return st;
        m->n_cwic++;
    }
    return SRT_CT_OK;
}

/* cwic: one block for every projection's tau [ns, in] and wmean [out] and the step's scratch. */
static bool cwic_buffers(srt_model *m) {
    const int64_t vc = m->vcap;
    int64_t nf = 3 * vc, nidx = 0, ns_max = 0;
    for (int64_t l = 0; l < m->cfg.n_layers; l++)
        for (int p = 0; p < SRT_NPROJ; p++) {
            const srt_cwic_w *c = &m->layers[l].cwic[p];
            if (!c->theta) continue;
            nf += c->ns * vc + vc; /* tau rows of at most vcap columns, wmean */
            nidx = c->ns * vc > nidx ? c->ns * vc : nidx;
            ns_max = c->ns > ns_max ? c->ns : ns_max;
        }
    size_t bytes = (size_t)nf * sizeof(float) + (size_t)(nidx + vc) * sizeof(uint32_t) + (size_t)(ns_max + 1) * 8 + 64;
    char *b = calloc(1, bytes);
    if (!(m->cwic_mem = b)) return false;
    float *f = (float *)(void *)b;
    m->cz = f;
    m->czs = f + vc;
    m->ctmp = f + 2 * vc;
    f += 3 * vc;
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        srt_layer_w *Lw = &m->layers[l];
        const srt_weight *w[SRT_NPROJ] = {&Lw->wq, &Lw->wk, &Lw->wv, &Lw->wo, &Lw->wg, &Lw->wu, &Lw->wd};
        for (int p = 0; p < SRT_NPROJ; p++) {
            srt_cwic_w *c = &Lw->cwic[p];
            if (!c->theta) continue;
            const int64_t in = w[p]->cols;
            c->tau = f;
            for (int64_t j = 0; j < c->ns * in; j++) c->tau[j] = srt_cwic_tau(c->theta[j], c->std[j % in]);
            f += c->ns * vc;
            c->wmean = f;
            f += vc;
        }
    }
    m->cidx = (uint32_t *)(void *)f;
    m->crow = m->cidx + nidx;
    uint8_t *o = (uint8_t *)(void *)(m->crow + vc);
    m->coff = (int64_t *)(void *)(((uintptr_t)o + 7) & ~(uintptr_t)7);
    return true;
}

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

srt_ct_status srt_model_open(const char *path, const srt_model_opts *opts, srt_model **out, char *err,
                             size_t err_cap) {
    *out = NULL;
    if (!path || !opts || !opts->ctx) return fail(err, err_cap, SRT_CT_EARG, "srt_model_open: bad argument");
    srt_model *m = calloc(1, sizeof *m);
    if (!m || !(m->path = dupstr(path))) {
        free(m);
        return fail(err, err_cap, SRT_CT_ENOMEM, "%s: out of memory", path);
    }
    m->ctx = opts->ctx;
    if (opts->kv != SRT_KV_F32 && opts->kv != SRT_KV_F16) {
        free(m->path);
        free(m);
        return fail(err, err_cap, SRT_CT_EARG, "srt_model_open: bad key/value cache type %d", (int)opts->kv);
    }
    m->kv_half = opts->kv == SRT_KV_F16;
    srt_ct_status st = srt_container_open(path, SRT_CT_SPAK, &m->ct, err, err_cap);
    if (st) goto bad;
    const srt_json *man = srt_container_manifest(m->ct);
    const char *fmt = srt_json_str(srt_json_get(man, SRT_MAN_FORMAT), NULL);
    if (!fmt || strcmp(fmt, SRT_ART_FORMAT) != 0 || jint(man, SRT_MAN_FORMAT_VERSION, -1) != SRT_ART_FORMAT_VERSION) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: not a sparsecal artifact (format/format_version)", path);
        goto bad;
    }
    m->tensors = srt_json_get(man, SRT_MAN_TENSORS);
    if (!srt_json_is(m->tensors, SRT_JSON_OBJECT)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: 'tensors' is missing", path);
        goto bad;
    }
    const char *bad_field = "";
    srt_model_config *c = &m->cfg;
    if (!srt_config_read(srt_json_get(man, SRT_MAN_CONFIG), c, &bad_field)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: config.%s is missing or invalid", path, bad_field);
        goto bad;
    }
    char why[256];
    if (srt_config_invalid(c, why, sizeof why)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: config: %s", path, why);
        goto bad;
    }
    const srt_json *routing = srt_json_get(man, SRT_MAN_ROUTING);
    m->def_method = srt_json_str(srt_json_get(routing, SRT_RT_METHOD), srt_method_get(SRT_METHOD_DENSE)->name);
    m->def_density = srt_json_num(srt_json_get(routing, SRT_RT_DENSITY), 1.0);
    const srt_json *cl = srt_json_get(routing, SRT_RT_CLADA);
    if (cl) {
        srt_clada *k = &m->clada;
        k->tau_s = srt_json_num(srt_json_get(cl, SRT_RT_CLADA_TAU_S), NAN);
        k->tau_h = srt_json_num(srt_json_get(cl, SRT_RT_CLADA_TAU_H), NAN);
        k->lambda = srt_json_num(srt_json_get(cl, SRT_RT_CLADA_LAMBDA), NAN);
        k->gamma = srt_json_num(srt_json_get(cl, SRT_RT_CLADA_GAMMA), NAN);
        m->has_clada = isfinite(k->tau_s) && isfinite(k->tau_h) && isfinite(k->lambda) && isfinite(k->gamma);
        const srt_json *fj = srt_json_get(cl, SRT_RT_CLADA_FRAC); /* absent (older artifacts): cett's table */
        for (int i = 0; fj && i < SRT_CLADA_CLASSES; i++) {
            k->frac[i] = srt_json_num(srt_json_at(fj, i), NAN);
            if (!(k->frac[i] >= 0.0 && k->frac[i] <= 1.0)) {
                st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: routing.clada.class_frac is not 4 fractions",
                          path);
                goto bad;
            }
        }
    }
    const srt_json *cdj = srt_json_get(srt_json_get(routing, SRT_RT_CETT), SRT_RT_CETT_DENSITY);
    m->cett_density = cdj ? srt_json_num(cdj, -1.0) : NAN;
    if (cdj && !(m->cett_density > 0.0 && m->cett_density <= 1.0)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: routing.cett.density is not in (0, 1]", path);
        goto bad;
    }
    const srt_json *cwj = srt_json_get(routing, SRT_RT_CWIC);
    if (srt_json_get(cwj, SRT_RT_CWIC_STRIPE)) { /* stored (else absent or routing.cwic.not_stored) */
        double S = srt_json_num(srt_json_get(cwj, SRT_RT_CWIC_STRIPE), -1.0),
               apr = srt_json_num(srt_json_get(cwj, SRT_RT_CWIC_APR), 0.0);
        if (!(S >= 1.0 && S <= 1e9 && S == floor(S)) || !(apr == 0.0 || (apr >= 1.0 && isfinite(apr)))) {
            st = fail(err, err_cap, SRT_CT_EFORMAT,
                      "%s: manifest: routing.cwic: stripe must be a positive integer and apr 0 or >= 1", path);
            goto bad;
        }
        m->cwic_stripe = (int64_t)S;
        m->cwic_density = apr > 0.0 ? 1.0 / apr : NAN;
    }
    const srt_json *lrj = srt_json_get(routing, SRT_RT_LAROSA);
    m->lr_in = srt_json_num(srt_json_get(lrj, SRT_RT_LAROSA_IN), SRT_LAROSA_IN);
    m->lr_h = srt_json_num(srt_json_get(lrj, SRT_RT_LAROSA_H), SRT_LAROSA_H);
    if (!(m->lr_in >= 0.0 && m->lr_in <= 10.0) || !(m->lr_h >= 0.0 && m->lr_h <= 10.0)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: routing.larosa split is out of range", path);
        goto bad;
    }
    m->ctx_limit = opts->max_ctx > 0 ? opts->max_ctx : c->max_seq_len;
    if (m->ctx_limit > (1 << 24)) {
        st = fail(err, err_cap, SRT_CT_EARG, "%s: context %lld is too large", path, (long long)m->ctx_limit);
        goto bad;
    }
    int64_t D = c->dim, F = c->ffn_dim, hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd,
            V = c->vocab_size, L = c->n_layers;
    m->layers = calloc((size_t)L, sizeof *m->layers);
    if (!m->layers) {
        st = fail(err, err_cap, SRT_CT_ENOMEM, "%s: out of memory", path);
        goto bad;
    }
    m->vmax = D > F ? D : F;
    if (qd > m->vmax) m->vmax = qd;
    /* the embedding: a packed matrix of a row layout, or (f32 plan, older artifacts) an f32 section */
    if (srt_json_get(m->tensors, SRT_SEC_TOK_EMB)) {
        if ((st = get_matrix(m, SRT_SEC_TOK_EMB, V, D, &m->emb, err, err_cap))) goto bad;
        if (m->emb.m.layout != SRT_LAYOUT_F32 && m->emb.m.layout != SRT_LAYOUT_Q8_0 &&
            m->emb.m.layout != SRT_LAYOUT_Q4_0 && m->emb.m.layout != SRT_LAYOUT_KMI4R) {
            st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: tensors.tok_emb: layout %s has no row lookup", path,
                      m->emb.tr->name);
            goto bad;
        }
    } else {
        const float *te;
        if ((st = get_f32(m, SRT_SEC_TOK_EMB, V * D, &te, err, err_cap))) goto bad;
        srt_matrix mat = {SRT_LAYOUT_F32, V, D, 0, te, (size_t)(V * D) * 4};
        if (srt_matrix_check(&mat) != SRT_OK) {
            st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: section 'tok_emb' is not 64-byte aligned", path);
            goto bad;
        }
        m->emb = (srt_weight){mat, V, D, srt_layout_get(SRT_LAYOUT_F32)};
    }
    if ((st = get_f32(m, SRT_SEC_FINAL_NORM, D, &m->final_norm, err, err_cap))) goto bad;
    if (c->tied_classifier)
        m->classifier = m->emb;
    else if ((st = get_matrix(m, SRT_SEC_CLASSIFIER, V, D, &m->classifier, err, err_cap)))
        goto bad;
    int n_claws = 0;
    for (int64_t l = 0; l < L; l++) {
        srt_layer_w *Lw = &m->layers[l];
        char nm[64];
#define NAME(s) (snprintf(nm, sizeof nm, SRT_LAYER_SECTION, (long long)l, s), nm)
        if ((st = get_f32(m, NAME(SRT_SEC_ATTN_NORM), D, &Lw->attn_norm, err, err_cap)) ||
            (st = get_f32(m, NAME(SRT_SEC_FFN_NORM), D, &Lw->ffn_norm, err, err_cap)) ||
            (st = get_matrix(m, NAME(SRT_SEC_WQ), qd, D, &Lw->wq, err, err_cap)) ||
            (st = get_matrix(m, NAME(SRT_SEC_WK), kvd, D, &Lw->wk, err, err_cap)) ||
            (st = get_matrix(m, NAME(SRT_SEC_WV), kvd, D, &Lw->wv, err, err_cap)) ||
            (st = get_matrix(m, NAME(SRT_SEC_WO), D, qd, &Lw->wo, err, err_cap)) ||
            (st = get_matrix(m, NAME(SRT_SEC_WG), F, D, &Lw->wg, err, err_cap)) ||
            (st = get_matrix(m, NAME(SRT_SEC_WU), F, D, &Lw->wu, err, err_cap)) ||
            (st = get_matrix(m, NAME(SRT_SEC_WD), D, F, &Lw->wd, err, err_cap)))
            goto bad;
        if (c->qkv_bias && ((st = get_f32(m, NAME(SRT_SEC_BQ), qd, &Lw->bq, err, err_cap)) ||
                            (st = get_f32(m, NAME(SRT_SEC_BK), kvd, &Lw->bk, err, err_cap)) ||
                            (st = get_f32(m, NAME(SRT_SEC_BV), kvd, &Lw->bv, err, err_cap))))
            goto bad;
        if (srt_json_get(m->tensors, NAME(SRT_SEC_ATTN_ROT))) {
            if ((st = get_matrix(m, nm, D, D, &Lw->attn_rot, err, err_cap))) goto bad;
            m->n_rot++;
        }
        if (srt_json_get(m->tensors, NAME(SRT_SEC_MLP_ROT))) {
            if ((st = get_matrix(m, nm, D, D, &Lw->mlp_rot, err, err_cap))) goto bad;
            m->n_rot++;
        }
        /* stored routing data (convert/pack_routing.c) */
        if (srt_container_find(m->ct, NAME(SRT_SEC_CATS_THRESHOLDS)) >= 0) {
            if ((st = get_f32(m, nm, SRT_THR_GRID, &Lw->cats_thr, err, err_cap))) goto bad;
            m->n_cats_thr++;
        }
        if (srt_container_find(m->ct, NAME(SRT_SEC_CETT_THRESHOLDS)) >= 0) {
            if ((st = get_f32(m, nm, F, &Lw->cett_thr, err, err_cap))) goto bad;
            m->n_cett_thr++;
        }
        if (srt_container_find(m->ct, NAME(SRT_SEC_CETT_TABLE)) >= 0) { /* with lN.cett_wnorm, or not at all */
            if ((st = get_f32(m, nm, SRT_THR_GRID, &Lw->cett_table, err, err_cap)) ||
                (st = get_f32(m, NAME(SRT_SEC_CETT_WNORM), F, &Lw->cett_wnorm, err, err_cap)))
                goto bad;
            m->n_cett_table++;
        }
        if (srt_container_find(m->ct, NAME(SRT_SEC_TEAL_THRESHOLDS)) >= 0) {
            if ((st = get_f32(m, nm, SRT_TEAL_NTAPS * SRT_THR_GRID, &Lw->teal_thr, err, err_cap))) goto bad;
            m->n_teal_thr++;
        }
        if ((st = load_teal_curve(m, l, err, err_cap)) || (st = load_cwic(m, l, err, err_cap))) goto bad;
        if (srt_container_find(m->ct, NAME(SRT_SEC_CLAWS_C)) >= 0) {
            if ((st = get_f32(m, nm, F, &Lw->claws_c, err, err_cap))) goto bad;
            n_claws++;
        }
#undef NAME
    }
    m->has_claws = n_claws == L;
    /* what the routers find (srt_method.h: every layer or some layer) */
    m->have = (m->n_rot ? SRT_DATA_ROTATIONS : 0u) | (m->has_claws ? SRT_DATA_CLAWS : 0u) |
              (m->n_cats_thr == L ? SRT_DATA_CATS_TABLE : 0u) | (m->n_teal_thr ? SRT_DATA_TEAL_TABLE : 0u) |
              (m->n_cett_thr ? SRT_DATA_CETT : 0u) | (m->has_clada ? SRT_DATA_CLADA : 0u) |
              (m->n_cett_table ? SRT_DATA_CETT_TABLE : 0u) |
              (m->n_teal_curve && m->n_teal_curve == m->n_teal_thr ? SRT_DATA_TEAL_CURVE : 0u) |
              (m->n_cwic ? SRT_DATA_CWIC : 0u);
    /* buffers: every vector is vmax floats (the largest stored dimension),
     * so padded inputs read zeros and padded outputs have room */
    int64_t vm = (m->vmax + 63) / 64 * 64;
    if (V > vm) vm = (V + 63) / 64 * 64;
    m->vcap = vm;
    size_t actb = (srt_act_bytes(vm) + 63) / 64 * 64;
    size_t nf = 0;
    size_t offs[32];
    int k = 0;
#define RES(cnt) (offs[k++] = nf, nf += ((size_t)(cnt) + 15) / 16 * 16)
    RES(vm); RES(vm); RES(vm); RES(vm); RES(vm); RES(vm); RES(vm); RES(vm); RES(vm); RES(vm); RES(vm); /* 11 vectors */
    RES(vm);                                                   /* score */
#undef RES
    /* the context's buffers (scores, rope tables, caches) grow with it: srt_model_reserve */
    size_t bytes = nf * sizeof(float) + 2 * actb + (size_t)vm * sizeof(uint32_t) + 64 +
                   (size_t)(L * F) * sizeof(uint32_t) + (size_t)L * sizeof(int64_t) + 64 +
                   (size_t)(2 * vm + 1) * sizeof(uint32_t); /* the top-K workspace */
    m->arena = srt_alloc(bytes);
    if (!m->arena) {
        st = fail(err, err_cap, SRT_CT_ENOMEM, "%s: out of memory for the decode buffers (%zu bytes)", path, bytes);
        goto bad;
    }
    float *fb = m->arena;
    float **vecs[] = {&m->x, &m->xn, &m->q, &m->kt, &m->vt, &m->att, &m->tmp, &m->u, &m->a, &m->v, &m->h,
                      &m->score};
    for (int i = 0; i < k; i++) *vecs[i] = fb + offs[i];
    m->logits = m->tmp; /* the classifier writes into tmp (vm >= V) */
    uint8_t *ab = (uint8_t *)(fb + nf);
    ab = (uint8_t *)(((uintptr_t)ab + 63) & ~(uintptr_t)63);
    m->actmem[0] = ab;
    m->actmem[1] = ab + actb;
    m->actbytes = actb;
    m->idx = (uint32_t *)(void *)(ab + 2 * actb);
    m->live_n = (int64_t *)(void *)(ab + 2 * actb + (size_t)vm * sizeof(uint32_t)); /* vm is a multiple of 64 */
    m->live_all = (uint32_t *)(void *)(m->live_n + L);
    m->sel_ws = m->live_all + L * F;
    if (srt_model_reserve(m, SRT_MODEL_INIT_CTX < m->ctx_limit ? SRT_MODEL_INIT_CTX : m->ctx_limit) != SRT_OK) {
        st = fail(err, err_cap, SRT_CT_ENOMEM, "%s: out of memory for the key/value cache", path);
        goto bad;
    }
    m->thr_l = malloc((size_t)(L * SRT_NPROJ) * sizeof *m->thr_l); /* cats-threshold [L], teal [L, projections] */
    m->lin_active = calloc((size_t)L, sizeof *m->lin_active);
    m->lin_dense = (double)(D * qd + 2 * D * kvd + qd * D + 3 * D * F);
    if (m->n_cett_table) m->cett_rt = malloc((size_t)(L * F) * sizeof *m->cett_rt);
    if (!m->thr_l || !m->lin_active || (m->n_cett_table && !m->cett_rt) || (m->n_cwic && !cwic_buffers(m))) {
        st = fail(err, err_cap, SRT_CT_ENOMEM, "%s: out of memory", path);
        goto bad;
    }
    m->method = SRT_METHOD_DENSE;
    m->router = SRT_ROUTER_DENSE;
    m->K = F;
    m->K_in = D;
    m->K_h = F;
    m->factor = 1.0f;
    m->logits_pos = -1;
    *out = m;
    return SRT_CT_OK;
bad:
    srt_model_close(m);
    return st ? st : SRT_CT_EFORMAT;
}

const srt_model_config *srt_model_get_config(const srt_model *m) { return &m->cfg; }
const srt_json *srt_model_manifest(const srt_model *m) { return srt_container_manifest(m->ct); }
const char *srt_model_default_method(const srt_model *m) { return m->def_method; }
double srt_model_default_density(const srt_model *m) { return m->def_density; }
bool srt_model_has_claws(const srt_model *m) { return m->has_claws; }
double srt_model_cett_density(const srt_model *m) { return m->cett_density; }
int64_t srt_model_max_ctx(const srt_model *m) { return m->ctx_limit; }
int64_t srt_model_ctx_allocated(const srt_model *m) { return m->max_ctx; }
srt_kv_type srt_model_kv_type(const srt_model *m) { return m->kv_half ? SRT_KV_F16 : SRT_KV_F32; }
uint64_t srt_model_kv_bytes(const srt_model *m) {
    const srt_model_config *c = &m->cfg;
    return 2u * (uint64_t)(c->n_layers * m->max_ctx * c->n_kv_heads * c->head_dim) * (m->kv_half ? 2u : 4u);
}

srt_status srt_model_reserve(srt_model *m, int64_t n) {
    if (!m || n < 1 || n > m->ctx_limit) return SRT_EINVAL;
    if (n <= m->max_ctx) return SRT_OK;
    const srt_model_config *c = &m->cfg;
    const int64_t half = c->head_dim / 2, kvd = c->n_kv_heads * c->head_dim, L = c->n_layers, old = m->max_ctx;
    const size_t esz = m->kv_half ? 2 : 4, row = (size_t)kvd * esz; /* a position's bytes in one layer */
    size_t cache = ((size_t)(L * n) * row + sizeof(float) - 1) / sizeof(float), rope = (size_t)(n * half), round = 16;
    /* s: the scores of one K/V head's query heads */
    const size_t ns = (size_t)(n * (c->n_heads / c->n_kv_heads));
    size_t o_s = 0, o_cos = o_s + (ns + round - 1) / round * round, o_sin = o_cos + (rope + round - 1) / round * round,
           o_k = o_sin + (rope + round - 1) / round * round, o_v = o_k + (cache + round - 1) / round * round,
           total = o_v + cache;
    float *a = srt_alloc(total * sizeof(float));
    if (!a) return SRT_ENOMEM;
    char *kc = (char *)(a + o_k), *vc = (char *)(a + o_v);
    /* keep the cached positions: the cache is head-major, so each (layer, K/V head)'s run moves */
    const size_t hrow = (size_t)c->head_dim * esz;
    for (int64_t r = 0; r < L * c->n_kv_heads && old > 0; r++) {
        memcpy(kc + (size_t)(r * n) * hrow, (const char *)m->kc + (size_t)(r * old) * hrow, (size_t)old * hrow);
        memcpy(vc + (size_t)(r * n) * hrow, (const char *)m->vc + (size_t)(r * old) * hrow, (size_t)old * hrow);
    }
    float *cs = a + o_cos, *sn = a + o_sin;
    const srt_rope_freq rf = {c->rope_theta,  c->head_dim,           c->rope_scaling, c->rope_factor,
                              c->rope_low_freq_factor, c->rope_high_freq_factor, c->rope_orig_ctx};
    srt_rope_tables(cs, sn, n, &rf); /* the reference pass's tables (srt_ops.h) */
    srt_free(m->ctx_arena);
    m->ctx_arena = a;
    m->s = a + o_s;
    m->cos_t = cs;
    m->sin_t = sn;
    m->kc = kc;
    m->vc = vc;
    m->max_ctx = n;
    return SRT_OK;
}
uint64_t srt_model_weight_bytes(const srt_model *m) { return m->weight_bytes; }
int64_t srt_model_live_count(const srt_model *m) { return m->K; }

const char *srt_model_tensor_layout(const srt_model *m, const char *name) {
    return srt_json_str(srt_json_get(srt_json_get(m->tensors, name), SRT_TEN_LAYOUT), NULL);
}

bool srt_model_method_known(const char *name) { return srt_method_find(name) != NULL; }

unsigned srt_model_data(const srt_model *m) { return m ? m->have : 0u; }

/* The one rule of what each router needs from the artifact: the registry's (srt_method.h). */
const char *srt_model_method_missing(const srt_model *m, const char *name) {
    if (!m || !name) return "no model or router";
    const srt_method_info *mi = srt_method_find(name);
    if (!mi) return srt_method_unknown();
    return srt_method_refusal(mi, m->have);
}

/* Neuron routers and LaRoSA off: every neuron, every input. */
static void route_off(srt_model *m) {
    m->method = SRT_METHOD_DENSE;
    m->router = SRT_ROUTER_DENSE;
    m->K = m->cfg.ffn_dim;
    m->larosa = false;
    m->mode = SRT_MODE_NONE;
    m->K_in = m->cfg.dim;
    m->K_h = m->cfg.ffn_dim;
    m->factor = 1.0f;
}

srt_status srt_model_set_router(srt_model *m, srt_router kind, double density) {
    if (!m || !(density > 0.0 && density <= 1.0)) return SRT_EINVAL;
    srt_method_id id = kind == SRT_ROUTER_DENSE ? SRT_METHOD_DENSE
                     : kind == SRT_ROUTER_CATS  ? SRT_METHOD_CATS
                     : kind == SRT_ROUTER_CLAWS ? SRT_METHOD_CLAWS
                                                : SRT_METHOD_COUNT;
    if (id == SRT_METHOD_COUNT) return SRT_ENOTSUP;
    return srt_model_set_method_id(m, id, density);
}

srt_status srt_model_set_larosa(srt_model *m, double density) {
    return srt_model_set_method_id(m, SRT_METHOD_LAROSA, density);
}

int64_t srt_model_rotated_inputs(const srt_model *m) { return m->n_rot; }

void srt_model_larosa_counts(const srt_model *m, int64_t *k_in, int64_t *k_h) {
    *k_in = m->larosa ? m->K_in : m->cfg.dim;
    *k_h = m->larosa ? m->K_h : m->cfg.ffn_dim;
}

int64_t srt_model_last_live(const srt_model *m, int64_t layer, const uint32_t **idx) {
    *idx = NULL;
    if (!m || layer < 0 || layer >= m->cfg.n_layers) return 0;
    if (m->live_n[layer] >= m->cfg.ffn_dim) return m->cfg.ffn_dim;
    *idx = m->live_all + layer * m->cfg.ffn_dim;
    return m->live_n[layer];
}

double srt_model_last_density(const srt_model *m, int64_t layer) {
    if (!m || layer < 0 || layer >= m->cfg.n_layers) return NAN;
    /* the input routers; teal-cats (teal's masks under a neuron router) reports its MLP neurons, as eval does */
    if ((m->mode == SRT_MODE_TEAL && m->router == SRT_ROUTER_DENSE) || m->mode == SRT_MODE_CWIC)
        return m->lin_active[layer] / m->lin_dense;
    const uint32_t *idx;
    return (double)srt_model_last_live(m, layer, &idx) / (double)m->cfg.ffn_dim;
}

float srt_model_threshold(const srt_model *m, int64_t layer, int tap) {
    static const int first[SRT_TEAL_NTAPS] = {SRT_PROJ_Q, SRT_PROJ_O, SRT_PROJ_GATE, SRT_PROJ_DOWN};
    if (!m || layer < 0 || layer >= m->cfg.n_layers) return NAN;
    if (m->mode == SRT_MODE_CATS_THR && tap == 0) return m->thr_l[layer];
    if (m->mode == SRT_MODE_TEAL && tap >= 0 && tap < SRT_TEAL_NTAPS) return m->thr_l[layer * SRT_NPROJ + first[tap]];
    return NAN;
}

float srt_model_proj_threshold(const srt_model *m, int64_t layer, int proj) {
    if (!m || layer < 0 || layer >= m->cfg.n_layers || m->mode != SRT_MODE_TEAL || proj < 0 || proj >= SRT_NPROJ)
        return NAN;
    return m->thr_l[layer * SRT_NPROJ + proj];
}

double srt_model_fitted_density(const srt_model *m, srt_method_id id) {
    if (!m) return NAN;
    if (id == SRT_METHOD_CETT || id == SRT_METHOD_CLADA) return m->cett_density;
    if (id == SRT_METHOD_CWIC) return m->cwic_density;
    return NAN;
}

void srt_model_get_timing(const srt_model *m, srt_model_timing *out) { *out = m->tm; }
void srt_model_reset_timing(srt_model *m) { memset(&m->tm, 0, sizeof m->tm); }

srt_status srt_model_set_method(srt_model *m, const char *name, double density) {
    if (!m || !name) return SRT_EINVAL;
    const srt_method_info *mi = srt_method_find(name);
    return mi ? srt_model_set_method_id(m, mi->id, density) : SRT_EINVAL;
}

srt_status srt_model_set_method_id(srt_model *m, srt_method_id id, double density) {
    const srt_method_info *mi = srt_method_get((int)id);
    /* NAN: a fitted router's stored thresholds, whatever density they keep */
    bool fitted = mi && mi->density == SRT_DENSITY_FITTED && isnan(density);
    if (!m || !mi || (!fitted && !(density > 0.0 && density <= 1.0))) return SRT_EINVAL;
    if (srt_method_refusal(mi, m->have)) return SRT_ENOTSUP;
    const srt_model_config *c = &m->cfg;
    route_off(m);
    m->method = id;
    switch (id) {
    case SRT_METHOD_DENSE: break;
    case SRT_METHOD_CATS:
    case SRT_METHOD_CLAWS:
        m->router = id == SRT_METHOD_CATS ? SRT_ROUTER_CATS : SRT_ROUTER_CLAWS;
        m->K = srt_topk_count(density, c->ffn_dim);
        break;
    case SRT_METHOD_LAROSA:
        m->larosa = true;
        m->K_in = srt_larosa_keep(m->lr_in, density, c->dim);
        m->K_h = srt_larosa_keep(m->lr_h, density, c->ffn_dim);
        break;
    case SRT_METHOD_GRIFFIN:
        m->router = SRT_ROUTER_GRIFFIN;
        m->K = srt_topk_count(density, c->ffn_dim);
        if (!m->g_sum) {
            m->g_sum = calloc((size_t)(c->n_layers * c->ffn_dim), sizeof *m->g_sum);
            m->g_set = malloc((size_t)(c->n_layers * c->ffn_dim) * sizeof *m->g_set);
            if (!m->g_sum || !m->g_set) {
                free(m->g_sum);
                free(m->g_set);
                m->g_sum = NULL;
                m->g_set = NULL;
                route_off(m);
                return SRT_ENOMEM;
            }
        }
        if (m->g_k != m->K) m->g_fixed = false; /* sets of another size: the next prompt chooses again */
        break;
    case SRT_METHOD_CETT:
    case SRT_METHOD_CLADA: {
        m->mode = id == SRT_METHOD_CETT ? SRT_MODE_CETT : SRT_MODE_CLADA;
        /* the stored thresholds at the density they keep (or asked for by NAN); the table at any other.
         * clada at a density: always the table, read for the scaled rule (srt_clada_table_base) */
        bool clada = id == SRT_METHOD_CLADA;
        bool table = !fitted && m->n_cett_table && (clada || !(density == m->cett_density));
        for (int64_t l = 0; l < c->n_layers; l++) {
            srt_layer_w *Lw = &m->layers[l];
            Lw->cett_use = table ? NULL : Lw->cett_thr;
            if (!table || !Lw->cett_table) continue; /* no table: a dense layer, as without thresholds */
            float *thr = m->cett_rt + l * c->ffn_dim;
            if (clada)
                srt_clada_table_thresholds(Lw->cett_table, Lw->cett_wnorm, &m->clada, density, thr, c->ffn_dim);
            else
                srt_cett_table_thresholds(Lw->cett_table, Lw->cett_wnorm, density, thr, c->ffn_dim);
            Lw->cett_use = thr;
        }
        break;
    }
    case SRT_METHOD_CATS_THRESHOLD:
        m->mode = SRT_MODE_CATS_THR;
        for (int64_t l = 0; l < c->n_layers; l++)
            m->thr_l[l] = density >= 1.0 ? -1.0f : srt_table_threshold(m->layers[l].cats_thr, 1.0 - density);
        break;
    case SRT_METHOD_TEAL:
    case SRT_METHOD_TEAL_GREEDY:
    case SRT_METHOD_TEAL_CATS:
        /* each projection's input threshold: its tap's table at sparsity 1 - density (teal), or at the sparsity the
         * greedy curve gives the projection (teal-greedy); layers without a table run dense. teal-cats: the gate's
         * top-K chooses up's rows and down's inputs, so down keeps no threshold (-1) */
        m->mode = SRT_MODE_TEAL;
        if (id == SRT_METHOD_TEAL_CATS) {
            m->router = SRT_ROUTER_CATS;
            m->K = srt_topk_count(density, c->ffn_dim);
        }
        for (int64_t l = 0; l < c->n_layers; l++) {
            const srt_layer_w *Lw = &m->layers[l];
            double sp[SRT_NPROJ];
            for (int p = 0; p < SRT_NPROJ; p++) sp[p] = 1.0 - density;
            if (id == SRT_METHOD_TEAL_GREEDY && Lw->teal_curve)
                srt_teal_curve_at(Lw->teal_curve, Lw->teal_rows, 1.0 - density, sp);
            for (int p = 0; p < SRT_NPROJ; p++)
                m->thr_l[l * SRT_NPROJ + p] =
                    Lw->teal_thr && !(id == SRT_METHOD_TEAL_CATS && p == SRT_PROJ_DOWN)
                        ? srt_table_threshold(Lw->teal_thr + SRT_PROJ_TAP(p) * SRT_THR_GRID, sp[p])
                        : -1.0f;
        }
        break;
    case SRT_METHOD_CWIC: /* the stored stripe thresholds, whatever density they keep (sc_artifact_set_router) */
        if (!m->cwic_ready) {
            srt_status st = srt_decode_cwic_prepare(m);
            if (st != SRT_OK) {
                route_off(m);
                return st;
            }
            m->cwic_ready = true;
        }
        m->mode = SRT_MODE_CWIC;
        break;
    default: return SRT_EINVAL;
    }
    return SRT_OK;
}

srt_status srt_model_end_prompt(srt_model *m) {
    if (!m) return SRT_EINVAL;
    if (m->router != SRT_ROUTER_GRIFFIN || m->g_fixed) return SRT_OK;
    const int64_t F = m->cfg.ffn_dim, K = m->K;
    if (K >= F) return SRT_OK; /* every neuron: nothing to choose */
    /* s_j = sqrt(sum over the prompt of h_j^2 / ||h||^2) (the GRIFFIN paper): the top-K per layer */
    for (int64_t l = 0; l < m->cfg.n_layers; l++) {
        for (int64_t j = 0; j < F; j++) m->score[j] = (float)sqrt(m->g_sum[l * F + j]);
        srt_status st = K > 0 ? srt_select_topk_kt(srt_ctx_kernels(m->ctx), m->g_set + l * K, m->score, F, K, 0, m->sel_ws) : SRT_OK;
        if (st != SRT_OK) return st;
    }
    m->g_k = K;
    m->g_fixed = true;
    return SRT_OK;
}

bool srt_model_from_prompt(const srt_model *m) { return m && srt_method_get((int)m->method)->from_prompt; }

const char *srt_model_method(const srt_model *m) { return srt_method_get((int)m->method)->name; }
