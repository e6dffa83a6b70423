/* artifact.c - reading a packed artifact (.spk) back as an f32 model for the
 * reference forward pass (`sparsecal ppl -m model.spk`): every quantised
 * matrix is unpacked on use (a layer at a time, see model.h) with its
 * layout's reference unpacker and cropped to its logical shape, so users see
 * exactly what quantisation costs without the model ever existing as f32. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "srt.h"
#include "filekind.h"
#include "srt_container.h"
#include "srt_schema.h"
#include "tok_serial.h"
#include "tokenizer.h"

typedef struct rd {
    srt_container *ct;
    const cJSON *tensors;
    sc_model *m;
    const char *path;
} rd;

/* An f32 section, used in place (the model keeps the container open). */
static sc_status get_f32(rd *r, const char *name, int64_t n, const float **out, sc_err *err) {
    const void *data;
    if (srt_container_get_typed(r->ct, name, SRT_CT_F32, (uint64_t)n, &data))
        return sc_errf(err, SC_EFORMAT, "%s", srt_container_errmsg(r->ct)[0] ? srt_container_errmsg(r->ct) : "section missing");
    *out = data;
    r->m->mapped_bytes += (uint64_t)n * sizeof(float);
    return SC_OK;
}

/* An integral number within +-2^53 (exact in a double), else -1: the range is
 * checked before the conversion, which is undefined beyond int64. */
static int64_t jint(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    const double lim = 9007199254740992.0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= -lim && v->valuedouble <= lim) ||
        v->valuedouble != floor(v->valuedouble))
        return -1;
    return (int64_t)v->valuedouble;
}

/* A quantised matrix, unpacked on use: the stored matrix is
 * rows_stored x cols_stored (padded), the logical one rows x cols. */
typedef struct lazy_mat {
    srt_matrix mat;
    int64_t rows, cols;
} lazy_mat;

/* Rows r0..r0+n of the logical matrix into dst (n x cols): row layouts (f32,
 * q8_0, q4_0, kmi4r: the embedding's lookups, the classifier's row chunks)
 * one row at a time, the others unpacked whole and cropped. */
static bool unpack_rows(const void *ctx, int64_t r0, int64_t n, float *dst) {
    const lazy_mat *z = ctx;
    const srt_matrix *M = &z->mat;
    int64_t cs = M->cols, cols = z->cols;
    if (srt_layout_get(M->layout)->sparse == SRT_SPARSE_ROWS) {
        float *row = cs == cols ? NULL : malloc((size_t)cs * sizeof(float));
        bool ok = cs == cols || row;
        for (int64_t i = 0; ok && i < n; i++) {
            ok = srt_matrix_row(M, r0 + i, row ? row : dst + i * cols) == SRT_OK;
            if (ok && row) memcpy(dst + i * cols, row, (size_t)cols * sizeof(float));
        }
        free(row);
        return ok;
    }
    float *full = malloc((size_t)(M->rows * cs) * sizeof(float));
    bool ok = full && srt_layout_get(M->layout)->unpack(full, M) == SRT_OK;
    for (int64_t i = 0; ok && i < n; i++) memcpy(dst + i * cols, full + (r0 + i) * cs, (size_t)cols * sizeof(float));
    free(full);
    return ok;
}

/* Registers a matrix section [rows, cols] for unpacking on use. */
static sc_status get_matrix(rd *r, const char *name, int64_t rows, int64_t cols, const float **out, sc_err *err) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(r->tensors, name);
    const cJSON *lay = cJSON_GetObjectItemCaseSensitive(t, SRT_TEN_LAYOUT);
    int64_t rs = jint(t, SRT_TEN_ROWS_STORED), cs = jint(t, SRT_TEN_COLS_STORED), g = jint(t, SRT_TEN_GROUP);
    srt_layout l;
    if (!cJSON_IsString(lay) || srt_layout_parse(lay->valuestring, &l) != SRT_OK || jint(t, SRT_TEN_ROWS) != rows ||
        jint(t, SRT_TEN_COLS) != cols || rs < rows || cs < cols || rs > rows + 4096 || cs > cols + 4096 || g < 0)
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': missing or inconsistent entry in the manifest", r->path, name);
    const void *data;
    uint64_t size;
    if (srt_container_get(r->ct, name, &data, &size))
        return sc_errf(err, SC_EFORMAT, "%s", srt_container_errmsg(r->ct));
    srt_matrix mat = {l, rs, cs, g, data, (size_t)size};
    /* the container's in-place sections are 64-byte aligned; decompressed ones too */
    if (srt_matrix_check(&mat) != SRT_OK)
        return sc_errf(err, SC_EFORMAT, "%s: tensor '%s': %llu bytes do not hold a %s matrix of %lld x %lld", r->path,
                       name, (unsigned long long)size, lay->valuestring, (long long)rs, (long long)cs);
    lazy_mat *z = malloc(sizeof *z);
    if (!z) return sc_errf(err, SC_ENOMEM, "%s: out of memory for '%s'", r->path, name);
    *z = (lazy_mat){mat, rows, cols};
    return sc_model_set_weight_fn(r->m, out, unpack_rows, z, rows, cols, err);
}

static void close_container(void *p) { srt_container_close(p); }

/* The embedded tokenizer (none: *out stays NULL); vocab bounds its size.
 * formats/tok_serial.c reads every kind, and artifacts written before the
 * tokenizer state existed. */
static sc_status read_tokenizer(rd *r, const cJSON *tj, int64_t vocab, sc_tokenizer **out, sc_err *err) {
    return sc_tok_serial_read(r->ct, r->path, tj, vocab, out, err);
}

static sc_status load_tokenizer(rd *r, const cJSON *tj, sc_err *err) {
    return read_tokenizer(r, tj, r->m->cfg.vocab_size, &r->m->tokenizer, err);
}

sc_status sc_artifact_load_tokenizer(const char *path, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    rd r = {0};
    r.path = path;
    SC_TRY(sc_container_open(path, SRT_CT_SPAK, &r.ct, err));
    size_t mlen;
    const char *mt = srt_container_manifest_text(r.ct, &mlen);
    cJSON *man = cJSON_ParseWithLength(mt, mlen);
    int64_t vocab = jint(cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_CONFIG), SRT_CFG_VOCAB_SIZE);
    sc_status st = vocab > 0
                       ? read_tokenizer(&r, cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_TOKENIZER), vocab, out, err)
                       : sc_errf(err, SC_EFORMAT, "%s: manifest: config.vocab_size is missing", path);
    if (!st && !*out) {
        const cJSON *note =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_TOKENIZER), "note");
        st = sc_errf(err, SC_EFORMAT, "%s: the artifact embeds no tokenizer%s%.300s%s; give one with --tokenizer", path,
                     cJSON_IsString(note) ? " (" : "", cJSON_IsString(note) ? note->valuestring : "",
                     cJSON_IsString(note) ? ")" : "");
    }
    cJSON_Delete(man);
    srt_container_close(r.ct);
    return st;
}

static bool parse_config(const cJSON *j, sc_config *c) {
    const cJSON *fam = cJSON_GetObjectItemCaseSensitive(j, SRT_CFG_FAMILY),
                *rope = cJSON_GetObjectItemCaseSensitive(j, SRT_CFG_ROPE),
                *act = cJSON_GetObjectItemCaseSensitive(j, SRT_CFG_ACTIVATION);
    if (!cJSON_IsString(fam) || !cJSON_IsString(rope) || !cJSON_IsString(act)) return false;
    c->family = !strcmp(fam->valuestring, "mistral") ? SC_FAMILY_MISTRAL
              : !strcmp(fam->valuestring, "qwen2")   ? SC_FAMILY_QWEN2
              : !strcmp(fam->valuestring, "gemma")   ? SC_FAMILY_GEMMA
                                                     : SC_FAMILY_LLAMA;
    c->dim = jint(j, SRT_CFG_DIM);
    c->ffn_dim = jint(j, SRT_CFG_FFN_DIM);
    c->n_layers = jint(j, SRT_CFG_N_LAYERS);
    c->n_heads = jint(j, SRT_CFG_N_HEADS);
    c->n_kv_heads = jint(j, SRT_CFG_N_KV_HEADS);
    c->head_dim = jint(j, SRT_CFG_HEAD_DIM);
    c->vocab_size = jint(j, SRT_CFG_VOCAB_SIZE);
    c->max_seq_len = jint(j, SRT_CFG_MAX_SEQ_LEN);
    const cJSON *v;
#define FLT(k, f) ((v = cJSON_GetObjectItemCaseSensitive(j, k)) && cJSON_IsNumber(v) ? (c->f = (float)v->valuedouble, 1) : 0)
    if (!FLT(SRT_CFG_NORM_EPS, norm_eps) || !FLT(SRT_CFG_ROPE_THETA, rope_theta)) return false;
    FLT(SRT_CFG_ROPE_FACTOR, rope_factor);
    FLT(SRT_CFG_ROPE_LOW_FREQ_FACTOR, rope_low_freq_factor);
    FLT(SRT_CFG_ROPE_HIGH_FREQ_FACTOR, rope_high_freq_factor);
#undef FLT
    int64_t rsc = jint(j, SRT_CFG_ROPE_SCALING);
    if (rsc < 0 || rsc > SC_ROPE_SCALING_LLAMA3) return false;
    c->rope_scaling = (sc_rope_scaling)rsc;
    c->rope_orig_ctx = jint(j, SRT_CFG_ROPE_ORIG_CTX); /* ranges: sc_config_validate, the runtime's own rules */
    c->rope = strcmp(rope->valuestring, SRT_ROPE_INTERLEAVED) == 0 ? SC_ROPE_INTERLEAVED : SC_ROPE_HALF;
    c->act = strcmp(act->valuestring, SRT_ACT_SILU) == 0 ? SC_ACT_SILU : SC_ACT_GELU_TANH;
    c->embed_scale = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, SRT_CFG_EMBED_SCALE));
    c->tied_classifier = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, SRT_CFG_TIED_CLASSIFIER));
    c->qkv_bias = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, SRT_CFG_QKV_BIAS));
    int64_t bos = jint(j, SRT_CFG_BOS_ID), eos = jint(j, SRT_CFG_EOS_ID);
    if (bos > INT32_MAX || eos > INT32_MAX) return false;
    c->bos_id = (int32_t)bos;
    c->eos_id = (int32_t)eos;
    return true;
}

sc_status sc_load_artifact(const char *path, sc_model **out, sc_err *err) {
    *out = NULL;
    rd r = {0};
    r.path = path;
    SC_TRY(sc_container_open(path, SRT_CT_SPAK, &r.ct, err));
    size_t mlen;
    const char *mt = srt_container_manifest_text(r.ct, &mlen);
    cJSON *man = cJSON_ParseWithLength(mt, mlen);
    sc_status st = SC_OK;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_FORMAT);
    r.tensors = cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_TENSORS);
    r.m = sc_model_new(path, "spk");
    if (!r.m) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    /* the model keeps the container open: its weights are read on use */
    srt_container *ct = r.ct;
    r.ct = NULL;
    if ((st = sc_model_keep(r.m, ct, close_container, err))) goto done;
    r.ct = ct;
    sc_config *c = &r.m->cfg;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, SRT_ART_FORMAT) ||
        jint(man, SRT_MAN_FORMAT_VERSION) != SRT_ART_FORMAT_VERSION || !cJSON_IsObject(r.tensors) ||
        !parse_config(cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_CONFIG), c)) {
        st = sc_errf(err, SC_EFORMAT, "%s: the manifest is not a valid sparsecal artifact manifest", path);
        goto done;
    }
    if ((st = sc_config_validate(c, path, err))) goto done;
    const cJSON *lay = cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_LAYOUT);
    snprintf(r.m->src_dtype, sizeof r.m->src_dtype, "%s", cJSON_IsString(lay) ? lay->valuestring : "?");
    const cJSON *src = cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_SOURCE_MODEL_ID);
    if (cJSON_IsString(src) && strlen(src->valuestring) == 16)
        snprintf(r.m->source_id, sizeof r.m->source_id, "%s", src->valuestring);
    r.m->layers = calloc((size_t)c->n_layers, sizeof *r.m->layers);
    if (!r.m->layers) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    /* the embedding is a packed matrix, or (f32 plan, older artifacts) an f32 section */
    if ((st = cJSON_GetObjectItemCaseSensitive(r.tensors, SRT_SEC_TOK_EMB)
                  ? get_matrix(&r, SRT_SEC_TOK_EMB, c->vocab_size, D, &r.m->tok_emb, err)
                  : get_f32(&r, SRT_SEC_TOK_EMB, c->vocab_size * D, &r.m->tok_emb, err)) ||
        (st = get_f32(&r, SRT_SEC_FINAL_NORM, D, &r.m->final_norm, err)))
        goto done;
    if (c->tied_classifier)
        r.m->classifier = r.m->tok_emb;
    else if ((st = get_matrix(&r, SRT_SEC_CLASSIFIER, c->vocab_size, D, &r.m->classifier, err)))
        goto done;
    for (int64_t l = 0; l < c->n_layers && !st; l++) {
        sc_layer *L = &r.m->layers[l];
        char nm[64];
#define NAME(s) (snprintf(nm, sizeof nm, SRT_LAYER_SECTION, (long long)l, s), nm)
        if ((st = get_f32(&r, NAME(SRT_SEC_ATTN_NORM), D, &L->attn_norm, err)) ||
            (st = get_f32(&r, NAME(SRT_SEC_FFN_NORM), D, &L->ffn_norm, err)) ||
            (st = get_matrix(&r, NAME(SRT_SEC_WQ), qd, D, &L->wq, err)) ||
            (st = get_matrix(&r, NAME(SRT_SEC_WK), kvd, D, &L->wk, err)) ||
            (st = get_matrix(&r, NAME(SRT_SEC_WV), kvd, D, &L->wv, err)) ||
            (st = get_matrix(&r, NAME(SRT_SEC_WO), D, qd, &L->wo, err)) ||
            (st = get_matrix(&r, NAME(SRT_SEC_WG), F, D, &L->wg, err)) ||
            (st = get_matrix(&r, NAME(SRT_SEC_WU), F, D, &L->wu, err)) ||
            (st = get_matrix(&r, NAME(SRT_SEC_WD), D, F, &L->wd, err)))
            break;
        if (c->qkv_bias && ((st = get_f32(&r, NAME(SRT_SEC_BQ), qd, &L->bq, err)) ||
                            (st = get_f32(&r, NAME(SRT_SEC_BK), kvd, &L->bk, err)) ||
                            (st = get_f32(&r, NAME(SRT_SEC_BV), kvd, &L->bv, err))))
            break;
        /* folded LaRoSA rotations (optional, per block input) */
        if (cJSON_GetObjectItemCaseSensitive(r.tensors, NAME(SRT_SEC_ATTN_ROT)) &&
            (st = get_matrix(&r, nm, D, D, &L->attn_rot, err)))
            break;
        if (cJSON_GetObjectItemCaseSensitive(r.tensors, NAME(SRT_SEC_MLP_ROT)) &&
            (st = get_matrix(&r, nm, D, D, &L->mlp_rot, err)))
            break;
#undef NAME
    }
    if (!st) st = load_tokenizer(&r, cJSON_GetObjectItemCaseSensitive(man, SRT_MAN_TOKENIZER), err);
    if (!st) st = sc_model_check_complete(r.m, err);
done:
    cJSON_Delete(man);
    if (!r.m) srt_container_close(r.ct); /* else the model owns it */
    if (st) {
        sc_model_free(r.m);
        return st;
    }
    *out = r.m;
    return SC_OK;
}
