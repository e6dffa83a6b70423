/* artifact.c - reading a packed artifact (.spk) back as an f32 model for the
 * reference forward pass (`sparsecal ppl -m model.spk`): every quantised
 * matrix is unpacked on use (a layer at a time, see model.h) with its
 * layout's reference unpacker and cropped to its logical shape, so users see
 * exactly what quantisation costs without the model ever existing as f32.
 * The manifest is the one the container parsed (srt_json, the runtime's
 * reader), and its config is read by the runtime's srt_config_read. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "srt.h"
#include "filekind.h"
#include "srt_container.h"
#include "srt_json.h"
#include "srt_model.h"
#include "srt_schema.h"
#include "tok_serial.h"
#include "tokenizer.h"

typedef struct rd {
    srt_container *ct;
    const srt_json *tensors;
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

/* An integral number (srt_json_int: an integer, or an integral double within
 * int64), else -1. */
static int64_t jint(const srt_json *o, const char *k) { return srt_json_int(srt_json_get(o, k), -1); }

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
    const srt_json *t = srt_json_get(r->tensors, name);
    const char *lay = srt_json_str(srt_json_get(t, SRT_TEN_LAYOUT), NULL);
    int64_t rs = jint(t, SRT_TEN_ROWS_STORED), cs = jint(t, SRT_TEN_COLS_STORED), g = jint(t, SRT_TEN_GROUP);
    srt_layout l;
    if (!lay || srt_layout_parse(lay, &l) != SRT_OK || jint(t, SRT_TEN_ROWS) != rows ||
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
                       name, (unsigned long long)size, lay, (long long)rs, (long long)cs);
    lazy_mat *z = malloc(sizeof *z);
    if (!z) return sc_errf(err, SC_ENOMEM, "%s: out of memory for '%s'", r->path, name);
    *z = (lazy_mat){mat, rows, cols};
    return sc_model_set_weight_fn(r->m, out, unpack_rows, z, rows, cols, err);
}

static void close_container(void *p) { srt_container_close(p); }

/* The embedded tokenizer (none: *out stays NULL); vocab bounds its size.
 * formats/tok_serial.c reads every kind, and artifacts written before the
 * tokenizer state existed. */
static sc_status read_tokenizer(rd *r, const srt_json *tj, int64_t vocab, sc_tokenizer **out, sc_err *err) {
    return sc_tok_serial_read(r->ct, r->path, tj, vocab, out, err);
}

static sc_status load_tokenizer(rd *r, const srt_json *tj, sc_err *err) {
    return read_tokenizer(r, tj, r->m->cfg.vocab_size, &r->m->tokenizer, err);
}

sc_status sc_artifact_load_tokenizer(const char *path, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    rd r = {0};
    r.path = path;
    SC_TRY(sc_container_open(path, SRT_CT_SPAK, &r.ct, err));
    const srt_json *man = srt_container_manifest(r.ct);
    int64_t vocab = jint(srt_json_get(man, SRT_MAN_CONFIG), SRT_CFG_VOCAB_SIZE);
    sc_status st = vocab > 0 ? read_tokenizer(&r, srt_json_get(man, SRT_MAN_TOKENIZER), vocab, out, err)
                             : sc_errf(err, SC_EFORMAT, "%s: manifest: config.vocab_size is missing", path);
    if (!st && !*out) {
        const char *note = srt_json_str(srt_json_get(srt_json_get(man, SRT_MAN_TOKENIZER), "note"), NULL);
        st = sc_errf(err, SC_EFORMAT, "%s: the artifact embeds no tokenizer%s%.300s%s; give one with --tokenizer", path,
                     note ? " (" : "", note ? note : "", note ? ")" : "");
    }
    srt_container_close(r.ct);
    return st;
}

/* The config through the runtime's reader (srt_config_read), with the
 * family, which only the toolchain tells apart (Gemma's norms, Qwen2's
 * biases are flags in the config; the name is kept for messages). */
static bool parse_config(const srt_json *j, sc_config *c) {
    srt_model_config r;
    const char *bad, *fam = srt_json_str(srt_json_get(j, SRT_CFG_FAMILY), NULL);
    if (!fam || !srt_config_read(j, &r, &bad)) return false;
    c->family = !strcmp(fam, "mistral") ? SC_FAMILY_MISTRAL
              : !strcmp(fam, "qwen2")   ? SC_FAMILY_QWEN2
              : !strcmp(fam, "gemma")   ? SC_FAMILY_GEMMA
                                        : SC_FAMILY_LLAMA;
    c->dim = r.dim;
    c->ffn_dim = r.ffn_dim;
    c->n_layers = r.n_layers;
    c->n_heads = r.n_heads;
    c->n_kv_heads = r.n_kv_heads;
    c->head_dim = r.head_dim;
    c->vocab_size = r.vocab_size;
    c->max_seq_len = r.max_seq_len;
    c->norm_eps = r.norm_eps;
    c->rope_theta = r.rope_theta;
    c->rope = r.rope_half ? SC_ROPE_HALF : SC_ROPE_INTERLEAVED;
    c->rope_scaling = (sc_rope_scaling)r.rope_scaling;
    c->rope_factor = r.rope_factor;
    c->rope_low_freq_factor = r.rope_low_freq_factor;
    c->rope_high_freq_factor = r.rope_high_freq_factor;
    c->rope_orig_ctx = r.rope_orig_ctx;
    c->act = r.gelu ? SC_ACT_GELU_TANH : SC_ACT_SILU;
    c->embed_scale = r.embed_scale;
    c->tied_classifier = r.tied_classifier;
    c->qkv_bias = r.qkv_bias;
    c->bos_id = r.bos_id;
    c->eos_id = r.eos_id;
    return true;
}

sc_status sc_load_artifact(const char *path, sc_model **out, sc_err *err) {
    *out = NULL;
    rd r = {0};
    r.path = path;
    SC_TRY(sc_container_open(path, SRT_CT_SPAK, &r.ct, err));
    const srt_json *man = srt_container_manifest(r.ct);
    sc_status st = SC_OK;
    const char *fmt = srt_json_str(srt_json_get(man, SRT_MAN_FORMAT), NULL);
    r.tensors = srt_json_get(man, SRT_MAN_TENSORS);
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
    if (!fmt || strcmp(fmt, SRT_ART_FORMAT) || jint(man, SRT_MAN_FORMAT_VERSION) != SRT_ART_FORMAT_VERSION ||
        !srt_json_is(r.tensors, SRT_JSON_OBJECT) || !parse_config(srt_json_get(man, SRT_MAN_CONFIG), c)) {
        st = sc_errf(err, SC_EFORMAT, "%s: the manifest is not a valid sparsecal artifact manifest", path);
        goto done;
    }
    if ((st = sc_config_validate(c, path, err))) goto done;
    snprintf(r.m->src_dtype, sizeof r.m->src_dtype, "%s", srt_json_str(srt_json_get(man, SRT_MAN_LAYOUT), "?"));
    const char *src = srt_json_str(srt_json_get(man, SRT_MAN_SOURCE_MODEL_ID), NULL);
    if (src && strlen(src) == 16) snprintf(r.m->source_id, sizeof r.m->source_id, "%s", src);
    r.m->layers = calloc((size_t)c->n_layers, sizeof *r.m->layers);
    if (!r.m->layers) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    int64_t D = c->dim, F = c->ffn_dim, qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    /* the embedding is a packed matrix, or (f32 plan, older artifacts) an f32 section */
    if ((st = srt_json_get(r.tensors, SRT_SEC_TOK_EMB)
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
        if (srt_json_get(r.tensors, NAME(SRT_SEC_ATTN_ROT)) &&
            (st = get_matrix(&r, nm, D, D, &L->attn_rot, err)))
            break;
        if (srt_json_get(r.tensors, NAME(SRT_SEC_MLP_ROT)) &&
            (st = get_matrix(&r, nm, D, D, &L->mlp_rot, err)))
            break;
#undef NAME
    }
    if (!st) st = load_tokenizer(&r, srt_json_get(man, SRT_MAN_TOKENIZER), err);
    if (!st) st = sc_model_check_complete(r.m, err);
done:
    if (!r.m) srt_container_close(r.ct); /* else the model owns it */
    if (st) {
        sc_model_free(r.m);
        return st;
    }
    *out = r.m;
    return SC_OK;
}
