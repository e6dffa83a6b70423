/* lora.c - LoRA fusion (see lora.h). */
#include "lora.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "safetensors.h"

static const char *proj_names[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                    "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};

/* The weight pointer of projection p in layer l, with its shape. */
static const float **proj_slot(sc_model *m, int64_t l, int p, int64_t *out, int64_t *in) {
    const sc_config *c = &m->cfg;
    sc_layer *L = &m->layers[l];
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    switch (p) {
    case 0: *out = qd, *in = D; return &L->wq;
    case 1: *out = kvd, *in = D; return &L->wk;
    case 2: *out = kvd, *in = D; return &L->wv;
    case 3: *out = D, *in = qd; return &L->wo;
    case 4: *out = F, *in = D; return &L->wg;
    case 5: *out = F, *in = D; return &L->wu;
    default: *out = D, *in = F; return &L->wd;
    }
}

/* Parses "...layers.L.<proj>.lora_A.weight"; returns the projection index or -1. */
static int parse_name(const char *name, long long *layer, bool *is_a) {
    const char *p = strstr(name, "layers.");
    if (!p) return -1;
    char *end;
    *layer = strtoll(p + 7, &end, 10);
    if (end == p + 7 || *end != '.') return -1;
    for (int k = 0; k < 7; k++) {
        size_t n = strlen(proj_names[k]);
        if (strncmp(end + 1, proj_names[k], n) != 0) continue;
        const char *rest = end + 1 + n;
        if (!strcmp(rest, ".lora_A.weight")) *is_a = true;
        else if (!strcmp(rest, ".lora_B.weight")) *is_a = false;
        else return -1;
        return k;
    }
    return -1;
}

static sc_status read_config(const char *dir, int *r, double *scale, sc_err *err) {
    char path[4096];
    if (!sc_path_join(path, sizeof path, dir, "adapter_config.json")) return sc_errf(err, SC_EARG, "%s: path too long", dir);
    char *text;
    size_t len;
    SC_TRY(sc_read_file(path, 1 << 20, &text, &len, err));
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(j, "r"), *av = cJSON_GetObjectItemCaseSensitive(j, "lora_alpha"),
                *rs = cJSON_GetObjectItemCaseSensitive(j, "use_rslora");
    if (!cJSON_IsNumber(rv) || rv->valuedouble < 1 || rv->valuedouble > 65536 || !cJSON_IsNumber(av) ||
        !isfinite(av->valuedouble)) {
        cJSON_Delete(j);
        return sc_errf(err, SC_EFORMAT, "%s: needs integer \"r\" >= 1 and numeric \"lora_alpha\"", path);
    }
    *r = (int)rv->valuedouble;
    *scale = cJSON_IsTrue(rs) ? av->valuedouble / sqrt((double)*r) : av->valuedouble / (double)*r;
    cJSON_Delete(j);
    return SC_OK;
}

sc_status sc_lora_fuse(sc_model *m, const char *path, sc_lora_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    char file[4096], dir[4096];
    if (sc_is_dir(path)) {
        snprintf(dir, sizeof dir, "%s", path);
        if (!sc_path_join(file, sizeof file, path, "adapter_model.safetensors"))
            return sc_errf(err, SC_EARG, "%s: path too long", path);
    } else {
        snprintf(file, sizeof file, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
    }
    int r = 0;
    double scale = 0.0;
    SC_TRY(read_config(dir, &r, &scale, err));
    sc_st_file *st;
    SC_TRY(sc_st_open(file, &st, err));
    sc_status status = SC_OK;
    float *a = NULL, *b = NULL;
    size_t n = sc_st_count(st);
    for (size_t i = 0; i < n && !status; i++) {
        const sc_st_tensor *ta = sc_st_get(st, i);
        long long layer;
        bool is_a;
        int p = parse_name(ta->name, &layer, &is_a);
        if (p < 0) continue;
        if (!is_a) continue; /* handled with its A */
        if (layer < 0 || layer >= m->cfg.n_layers) {
            status = sc_errf(err, SC_EFORMAT, "%s: '%s' names layer %lld; the model has %lld", file, ta->name, layer,
                             (long long)m->cfg.n_layers);
            break;
        }
        char bname[512];
        size_t pre = strlen(ta->name) - strlen("lora_A.weight");
        snprintf(bname, sizeof bname, "%.*slora_B.weight", (int)pre, ta->name);
        const sc_st_tensor *tb = sc_st_find(st, bname);
        int64_t out, in;
        const float **slot = proj_slot(m, layer, p, &out, &in);
        if (!tb) {
            status = sc_errf(err, SC_EFORMAT, "%s: '%s' has no matching '%s'", file, ta->name, bname);
            break;
        }
        if (!ta->supported || !tb->supported || ta->n_dims != 2 || tb->n_dims != 2 || ta->shape[0] != r ||
            ta->shape[1] != in || tb->shape[0] != out || tb->shape[1] != r) {
            status = sc_errf(err, SC_EFORMAT,
                             "%s: '%s' must be [r=%d, %lld] and its lora_B [%lld, %d] (float types)", file, ta->name, r,
                             (long long)in, (long long)out, r);
            break;
        }
        a = malloc((size_t)(r * in) * sizeof *a);
        b = malloc((size_t)(out * r) * sizeof *b);
        if (!a || !b) {
            status = sc_errf(err, SC_ENOMEM, "%s: out of memory", file);
            break;
        }
        /* an owned f32 copy of the base weight (converted from its source if
         * it is read on use), fused in place; a failed fusion fails the load */
        float *w;
        if ((status = sc_model_make_resident(m, slot, (size_t)(out * in), &w, err))) break;
        sc_convert_to_f32(ta->dtype, ta->data, (size_t)(r * in), a);
        sc_convert_to_f32(tb->dtype, tb->data, (size_t)(out * r), b);
        /* W[out, in] += scale * B[out, r] A[r, in] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)out, (blasint)in, (blasint)r, (float)scale, b,
                    (blasint)r, a, (blasint)in, 1.0f, w, (blasint)in);
        for (int64_t k = 0; k < out * in; k++)
            if (!isfinite(w[k])) {
                status = sc_errf(err, SC_EFORMAT, "%s: fusing '%s' gives non-finite weights", file, ta->name);
                break;
            }
        if (status) break;
        res->fused++;
        free(a);
        free(b);
        a = b = NULL;
    }
    free(a);
    free(b);
    if (!status && res->fused == 0)
        status = sc_errf(err, SC_EFORMAT, "%s: no lora_A/lora_B pairs for a known projection", file);
    res->rank = r;
    res->scale = scale;
    sc_st_free(st);
    return status;
}
