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

#include "srt_model_internal.h"

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

static bool parse_config(const srt_json *j, srt_model_config *c, const char **bad) {
#define NEED_INT(f, k, lo, hi)                                                                             \
    do {                                                                                                  \
        const srt_json *v_ = srt_json_get(j, k);                                                          \
        if (!srt_json_is(v_, SRT_JSON_INT) && !srt_json_is(v_, SRT_JSON_DOUBLE)) return *bad = k, false;  \
        c->f = srt_json_int(v_, INT64_MIN);                                                               \
        if (c->f < (lo) || c->f > (hi)) return *bad = k, false;                                           \
    } while (0)
    if (!srt_json_is(j, SRT_JSON_OBJECT)) return *bad = "config", false;
    /* types and presence here; ranges below, in the one validation the toolchain shares (srt_config.c) */
    NEED_INT(dim, "dim", 1, SRT_MAX_DIM);
    NEED_INT(ffn_dim, "ffn_dim", 1, SRT_MAX_FFN);
    NEED_INT(n_layers, "n_layers", 1, SRT_MAX_LAYERS);
    NEED_INT(n_heads, "n_heads", 1, SRT_MAX_HEADS);
    NEED_INT(n_kv_heads, "n_kv_heads", 1, SRT_MAX_HEADS);
    NEED_INT(head_dim, "head_dim", 2, 4096);
    NEED_INT(vocab_size, "vocab_size", 1, SRT_MAX_VOCAB);
    NEED_INT(max_seq_len, "max_seq_len", 1, SRT_MAX_SEQ);
#undef NEED_INT
    const srt_json *v;
    if (!(v = srt_json_get(j, "norm_eps")) || !(srt_json_is(v, SRT_JSON_DOUBLE) || srt_json_is(v, SRT_JSON_INT)))
        return *bad = "norm_eps", false;
    c->norm_eps = (float)srt_json_num(v, 0);
    if (!(v = srt_json_get(j, "rope_theta")) || !(srt_json_is(v, SRT_JSON_DOUBLE) || srt_json_is(v, SRT_JSON_INT)))
        return *bad = "rope_theta", false;
    c->rope_theta = (float)srt_json_num(v, 0);
    const char *rope = srt_json_str(srt_json_get(j, "rope"), NULL), *act = srt_json_str(srt_json_get(j, "activation"), NULL);
    if (!rope || (strcmp(rope, "interleaved") && strcmp(rope, "half"))) return *bad = "rope", false;
    if (!act || (strcmp(act, "silu") && strcmp(act, "gelu_tanh"))) return *bad = "activation", false;
    c->rope_half = strcmp(rope, "half") == 0;
    c->gelu = strcmp(act, "gelu_tanh") == 0;
    int64_t scaling = jint(j, "rope_scaling", 0);
    if (scaling < 0 || scaling > 2) return *bad = "rope_scaling", false;
    c->rope_scaling = (int)scaling;
    c->rope_factor = (float)srt_json_num(srt_json_get(j, "rope_factor"), 1.0);
    c->rope_low_freq_factor = (float)srt_json_num(srt_json_get(j, "rope_low_freq_factor"), 1.0);
    c->rope_high_freq_factor = (float)srt_json_num(srt_json_get(j, "rope_high_freq_factor"), 4.0);
    c->rope_orig_ctx = jint(j, "rope_orig_ctx", 0);
    c->embed_scale = srt_json_bool(srt_json_get(j, "embed_scale"), false);
    c->tied_classifier = srt_json_bool(srt_json_get(j, "tied_classifier"), false);
    c->qkv_bias = srt_json_bool(srt_json_get(j, "qkv_bias"), false);
    int64_t bos = jint(j, "bos_id", -1), eos = jint(j, "eos_id", -1);
    if (bos < -1 || bos > INT32_MAX || eos < -1 || eos > INT32_MAX) return *bad = "bos_id", false;
    c->bos_id = (int32_t)bos;
    c->eos_id = (int32_t)eos;
    return true;
}

/* The inverse frequency of pair i, exactly as calib/ops.c computes it (f32). */
static float rope_inv_freq(const srt_model_config *c, int64_t i) {
    float f = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
    if (c->rope_scaling == 1) return f / c->rope_factor;
    if (c->rope_scaling == 2) {
        const float pi = 3.14159265358979f;
        float wavelen = 2.0f * pi / f;
        float low_wavelen = (float)c->rope_orig_ctx / c->rope_low_freq_factor;
        float high_wavelen = (float)c->rope_orig_ctx / c->rope_high_freq_factor;
        if (wavelen < high_wavelen) return f;
        if (wavelen > low_wavelen) return f / c->rope_factor;
        float smooth = ((float)c->rope_orig_ctx / wavelen - c->rope_low_freq_factor) /
                       (c->rope_high_freq_factor - c->rope_low_freq_factor);
        return (1.0f - smooth) * f / c->rope_factor + smooth * f;
    }
    return f;
}

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
    const char *lay = srt_json_str(srt_json_get(t, "layout"), NULL);
    int64_t r = jint(t, "rows", -1), c = jint(t, "cols", -1), rs = jint(t, "rows_stored", -1),
            cs = jint(t, "cols_stored", -1), g = jint(t, "group", -1);
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
                if (dst) {
                    memcpy(dst + off, w[i]->m.data, w[i]->m.bytes);
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
    srt_ct_status st = srt_container_open(path, SRT_CT_SPAK, &m->ct, err, err_cap);
    if (st) goto bad;
    const srt_json *man = srt_container_manifest(m->ct);
    const char *fmt = srt_json_str(srt_json_get(man, "format"), NULL);
    if (!fmt || strcmp(fmt, "sparsecal-artifact") != 0 || jint(man, "format_version", -1) != 1) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: not a sparsecal artifact (format/format_version)", path);
        goto bad;
    }
    m->tensors = srt_json_get(man, "tensors");
    if (!srt_json_is(m->tensors, SRT_JSON_OBJECT)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: 'tensors' is missing", path);
        goto bad;
    }
    const char *bad_field = "";
    srt_model_config *c = &m->cfg;
    if (!parse_config(srt_json_get(man, "config"), c, &bad_field)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: config.%s is missing or invalid", path, bad_field);
        goto bad;
    }
    char why[256];
    if (srt_config_invalid(c, why, sizeof why)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: config: %s", path, why);
        goto bad;
    }
    const srt_json *routing = srt_json_get(man, "routing");
    m->def_method = srt_json_str(srt_json_get(routing, "method"), "dense");
    m->def_density = srt_json_num(srt_json_get(routing, "density"), 1.0);
    const srt_json *cl = srt_json_get(routing, "clada");
    if (cl) {
        m->tau_s = srt_json_num(srt_json_get(cl, "tau_s"), NAN);
        m->tau_h = srt_json_num(srt_json_get(cl, "tau_h"), NAN);
        m->lambda = srt_json_num(srt_json_get(cl, "lambda"), NAN);
        m->gamma = srt_json_num(srt_json_get(cl, "gamma"), NAN);
        m->has_clada = isfinite(m->tau_s) && isfinite(m->tau_h) && isfinite(m->lambda) && isfinite(m->gamma);
    }
    const srt_json *cdj = srt_json_get(srt_json_get(routing, "cett"), "density");
    m->cett_density = cdj ? srt_json_num(cdj, -1.0) : NAN;
    if (cdj && !(m->cett_density > 0.0 && m->cett_density <= 1.0)) {
        st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: routing.cett.density is not in (0, 1]", path);
        goto bad;
    }
    const srt_json *lrj = srt_json_get(routing, "larosa");
    m->lr_in = srt_json_num(srt_json_get(lrj, "in"), 0.8);
    m->lr_h = srt_json_num(srt_json_get(lrj, "h"), 1.2);
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
    if (srt_json_get(m->tensors, "tok_emb")) {
        if ((st = get_matrix(m, "tok_emb", V, D, &m->emb, err, err_cap))) goto bad;
        if (m->emb.m.layout != SRT_LAYOUT_F32 && m->emb.m.layout != SRT_LAYOUT_Q8_0 &&
            m->emb.m.layout != SRT_LAYOUT_Q4_0 && m->emb.m.layout != SRT_LAYOUT_KMI4R) {
            st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: manifest: tensors.tok_emb: layout %s has no row lookup", path,
                      m->emb.tr->name);
            goto bad;
        }
    } else {
        const float *te;
        if ((st = get_f32(m, "tok_emb", V * D, &te, err, err_cap))) goto bad;
        srt_matrix mat = {SRT_LAYOUT_F32, V, D, 0, te, (size_t)(V * D) * 4};
        if (srt_matrix_check(&mat) != SRT_OK) {
            st = fail(err, err_cap, SRT_CT_EFORMAT, "%s: section 'tok_emb' is not 64-byte aligned", path);
            goto bad;
        }
        m->emb = (srt_weight){mat, V, D, srt_layout_get(SRT_LAYOUT_F32)};
    }
    if ((st = get_f32(m, "final_norm", D, &m->final_norm, err, err_cap))) goto bad;
    if (c->tied_classifier)
        m->classifier = m->emb;
    else if ((st = get_matrix(m, "classifier", V, D, &m->classifier, err, err_cap)))
        goto bad;
    int n_claws = 0;
    for (int64_t l = 0; l < L; l++) {
        srt_layer_w *Lw = &m->layers[l];
        char nm[64];
#define NAME(s) (snprintf(nm, sizeof nm, "l%lld.%s", (long long)l, s), nm)
        if ((st = get_f32(m, NAME("attn_norm"), D, &Lw->attn_norm, err, err_cap)) ||
            (st = get_f32(m, NAME("ffn_norm"), D, &Lw->ffn_norm, err, err_cap)) ||
            (st = get_matrix(m, NAME("wq"), qd, D, &Lw->wq, err, err_cap)) ||
            (st = get_matrix(m, NAME("wk"), kvd, D, &Lw->wk, err, err_cap)) ||
            (st = get_matrix(m, NAME("wv"), kvd, D, &Lw->wv, err, err_cap)) ||
            (st = get_matrix(m, NAME("wo"), D, qd, &Lw->wo, err, err_cap)) ||
            (st = get_matrix(m, NAME("wg"), F, D, &Lw->wg, err, err_cap)) ||
            (st = get_matrix(m, NAME("wu"), F, D, &Lw->wu, err, err_cap)) ||
            (st = get_matrix(m, NAME("wd"), D, F, &Lw->wd, err, err_cap)))
            goto bad;
        if (c->qkv_bias && ((st = get_f32(m, NAME("bq"), qd, &Lw->bq, err, err_cap)) ||
                            (st = get_f32(m, NAME("bk"), kvd, &Lw->bk, err, err_cap)) ||
                            (st = get_f32(m, NAME("bv"), kvd, &Lw->bv, err, err_cap))))
            goto bad;
        if (srt_json_get(m->tensors, NAME("attn_rot"))) {
            if ((st = get_matrix(m, nm, D, D, &Lw->attn_rot, err, err_cap))) goto bad;
            m->n_rot++;
        }
        if (srt_json_get(m->tensors, NAME("mlp_rot"))) {
            if ((st = get_matrix(m, nm, D, D, &Lw->mlp_rot, err, err_cap))) goto bad;
            m->n_rot++;
        }
        /* stored routing data (convert/pack_routing.c) */
        if (srt_container_find(m->ct, NAME("cats_thresholds")) >= 0) {
            if ((st = get_f32(m, nm, 19, &Lw->cats_thr, err, err_cap))) goto bad;
            m->n_cats_thr++;
        }
        if (srt_container_find(m->ct, NAME("cett_thresholds")) >= 0) {
            if ((st = get_f32(m, nm, F, &Lw->cett_thr, err, err_cap))) goto bad;
            m->n_cett_thr++;
        }
        if (srt_container_find(m->ct, NAME("teal_thresholds")) >= 0) {
            if ((st = get_f32(m, nm, 4 * 19, &Lw->teal_thr, err, err_cap))) goto bad;
            m->n_teal_thr++;
        }
        if (srt_container_find(m->ct, NAME("claws_c")) >= 0) {
            if ((st = get_f32(m, nm, F, &Lw->claws_c, err, err_cap))) goto bad;
            n_claws++;
        }
#undef NAME
    }
    m->has_claws = n_claws == L;
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
                   (size_t)(L * F) * sizeof(uint32_t) + (size_t)L * sizeof(int64_t) + 64;
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
    if (srt_model_reserve(m, SRT_MODEL_INIT_CTX < m->ctx_limit ? SRT_MODEL_INIT_CTX : m->ctx_limit) != SRT_OK) {
        st = fail(err, err_cap, SRT_CT_ENOMEM, "%s: out of memory for the key/value cache", path);
        goto bad;
    }
    m->thr_l = malloc((size_t)(L * 4) * sizeof *m->thr_l);
    if (!m->thr_l) {
        st = fail(err, err_cap, SRT_CT_ENOMEM, "%s: out of memory", path);
        goto bad;
    }
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

srt_status srt_model_reserve(srt_model *m, int64_t n) {
    if (!m || n < 1 || n > m->ctx_limit) return SRT_EINVAL;
    if (n <= m->max_ctx) return SRT_OK;
    const srt_model_config *c = &m->cfg;
    const int64_t half = c->head_dim / 2, kvd = c->n_kv_heads * c->head_dim, L = c->n_layers, old = m->max_ctx;
    size_t cache = (size_t)(L * n * kvd), rope = (size_t)(n * half), round = 16;
    size_t o_s = 0, o_cos = o_s + ((size_t)n + round - 1) / round * round, o_sin = o_cos + (rope + round - 1) / round * round,
           o_k = o_sin + (rope + round - 1) / round * round, o_v = o_k + (cache + round - 1) / round * round,
           total = o_v + cache;
    float *a = srt_alloc(total * sizeof(float));
    if (!a) return SRT_ENOMEM;
    float *kc = a + o_k, *vc = a + o_v;
    for (int64_t l = 0; l < L && old > 0; l++) { /* keep the cached positions (the layer stride changes) */
        memcpy(kc + l * n * kvd, m->kc + l * old * kvd, (size_t)(old * kvd) * sizeof(float));
        memcpy(vc + l * n * kvd, m->vc + l * old * kvd, (size_t)(old * kvd) * sizeof(float));
    }
    float *cs = a + o_cos, *sn = a + o_sin;
    for (int64_t i = 0; i < half; i++) {
        float inv = rope_inv_freq(c, i);
        for (int64_t p = 0; p < n; p++) {
            float ang = (float)p * inv;
            cs[p * half + i] = cosf(ang);
            sn[p * half + i] = sinf(ang);
        }
    }
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
    return srt_json_str(srt_json_get(srt_json_get(m->tensors, name), "layout"), NULL);
}

static const char *const method_names[] = {"dense", "cats", "claws", "larosa", "cats-threshold", "cett", "clada", "teal"};

bool srt_model_method_known(const char *name) {
    for (size_t i = 0; name && i < sizeof method_names / sizeof method_names[0]; i++)
        if (!strcmp(name, method_names[i])) return true;
    return false;
}

/* The one rule of what each router needs from the artifact (srt_model.h). */
const char *srt_model_method_missing(const srt_model *m, const char *name) {
    if (!m || !name) return "no model or router";
    int64_t L = m->cfg.n_layers;
    if (!srt_model_method_known(name))
        return "unknown router (dense, cats, claws, larosa, cats-threshold, cett, clada, teal)";
    if (!strcmp(name, "dense")) return NULL;
    if (!strcmp(name, "larosa"))
        return m->n_rot ? NULL : "larosa needs folded rotations (lN.attn_rot, lN.mlp_rot): pack with --method larosa";
    /* every router but LaRoSA's was calibrated on the unrotated model: its scores, thresholds and multipliers do
     * not describe a folded artifact's rotated inputs, and nothing records that they still fit the neurons */
    if (m->n_rot) return "the artifact's rotations are folded (packed with --method larosa): only larosa and dense route it";
    if (!strcmp(name, "claws") && !m->has_claws)
        return "claws needs CLAWS multipliers lN.claws_c in every layer: pack with --calib holding claws";
    if (!strcmp(name, "cats-threshold") && m->n_cats_thr != L)
        return "cats-threshold needs lN.cats_thresholds in every layer: pack with --calib holding cats";
    if (!strcmp(name, "teal") && m->n_teal_thr == 0)
        return "teal needs lN.teal_thresholds: pack with --calib holding teal";
    if (!strcmp(name, "cett") && m->n_cett_thr == 0)
        return "cett needs lN.cett_thresholds: pack with --calib holding cett";
    if (!strcmp(name, "clada") && (m->n_cett_thr == 0 || !m->has_clada))
        return "clada needs lN.cett_thresholds and routing.clada: pack with --calib holding cett,clada";
    return NULL;
}

srt_status srt_model_set_router(srt_model *m, srt_router kind, double density) {
    if (!m || !(density > 0.0 && density <= 1.0)) return SRT_EINVAL;
    if (kind != SRT_ROUTER_DENSE && kind != SRT_ROUTER_CATS && kind != SRT_ROUTER_CLAWS) return SRT_ENOTSUP;
    if (srt_model_method_missing(m, srt_router_name(kind))) return SRT_ENOTSUP;
    m->router = kind;
    m->K = kind == SRT_ROUTER_DENSE ? m->cfg.ffn_dim : srt_topk_count(density, m->cfg.ffn_dim);
    m->larosa = false;
    m->mode = SRT_MODE_NONE;
    m->K_in = m->cfg.dim;
    m->K_h = m->cfg.ffn_dim;
    return SRT_OK;
}

srt_status srt_model_set_larosa(srt_model *m, double density) {
    if (!m || !(density > 0.0 && density <= 1.0)) return SRT_EINVAL;
    if (m->n_rot == 0) return SRT_ENOTSUP;
    double s = 1.0 - density;
    m->router = SRT_ROUTER_DENSE;
    m->K = m->cfg.ffn_dim;
    m->larosa = true;
    m->mode = SRT_MODE_NONE;
    m->K_in = srt_topk_count(1.0 - fmin(1.0, m->lr_in * s), m->cfg.dim);
    m->K_h = srt_topk_count(1.0 - fmin(1.0, m->lr_h * s), m->cfg.ffn_dim);
    return SRT_OK;
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

void srt_model_get_timing(const srt_model *m, srt_model_timing *out) { *out = m->tm; }
void srt_model_reset_timing(srt_model *m) { memset(&m->tm, 0, sizeof m->tm); }

/* Threshold at sparsity s from a table at s = 0.05, 0.10, ..., 0.95: the
 * entry itself on the grid, geometric interpolation between entries, linear
 * from 0 below 0.05, the last entry above 0.95; -1 (dense) at s <= 0. */
static float table_threshold(const float *t, double s) {
    if (!(s > 1e-12)) return -1.0f;
    double q = s / 0.05 - 1.0;
    if (q <= 1e-9) return q >= -1e-9 ? t[0] : (float)((double)t[0] * s / 0.05);
    if (q >= 18.0 - 1e-9) return t[18];
    int i = (int)floor(q);
    double f = q - (double)i;
    if (f < 1e-9) return t[i];
    if (f > 1.0 - 1e-9) return t[i + 1];
    if (t[i] > 0.0f && t[i + 1] > 0.0f) return (float)exp((1.0 - f) * log((double)t[i]) + f * log((double)t[i + 1]));
    return (float)((1.0 - f) * (double)t[i] + f * (double)t[i + 1]);
}

srt_status srt_model_set_method(srt_model *m, const char *name, double density) {
    if (!m || !name || !(density > 0.0 && density <= 1.0)) return SRT_EINVAL;
    int64_t L = m->cfg.n_layers;
    if (!strcmp(name, "larosa")) return srt_model_set_larosa(m, density);
    if (!strcmp(name, "dense")) return srt_model_set_router(m, SRT_ROUTER_DENSE, 1.0);
    if (!strcmp(name, "cats")) return srt_model_set_router(m, SRT_ROUTER_CATS, density);
    if (!strcmp(name, "claws")) return srt_model_set_router(m, SRT_ROUTER_CLAWS, density);
    int mode = !strcmp(name, "cats-threshold") ? SRT_MODE_CATS_THR
             : !strcmp(name, "cett")           ? SRT_MODE_CETT
             : !strcmp(name, "clada")          ? SRT_MODE_CLADA
             : !strcmp(name, "teal")           ? SRT_MODE_TEAL
                                               : SRT_MODE_NONE;
    if (mode == SRT_MODE_NONE) return SRT_EINVAL;
    if (srt_model_method_missing(m, name)) return SRT_ENOTSUP;
    srt_status st = srt_model_set_router(m, SRT_ROUTER_DENSE, 1.0);
    if (st != SRT_OK) return st;
    double s = 1.0 - density;
    for (int64_t l = 0; l < L; l++) {
        const srt_layer_w *Lw = &m->layers[l];
        if (mode == SRT_MODE_CATS_THR) m->thr_l[l] = density >= 1.0 ? -1.0f : table_threshold(Lw->cats_thr, s);
        for (int tap = 0; mode == SRT_MODE_TEAL && tap < 4; tap++)
            m->thr_l[l * 4 + tap] = Lw->teal_thr ? table_threshold(Lw->teal_thr + tap * 19, s) : -1.0f;
    }
    m->mode = mode;
    m->factor = 1.0f;
    return SRT_OK;
}

const char *srt_model_method(const srt_model *m) {
    static const char *const names[] = {"", "cats-threshold", "cett", "clada", "teal"};
    if (m->larosa) return "larosa";
    if (m->mode != SRT_MODE_NONE) return names[m->mode];
    return srt_router_name(m->router);
}
