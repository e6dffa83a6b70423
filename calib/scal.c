/* scal.c - saving and loading calibrations (see scal.h). */
#include "scal.h"
#include "json_out.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filekind.h"
#include "srt_container.h"

static srt_ct_dtype ct_type(sc_arr_type t) {
    return t == SC_ARR_F64 ? SRT_CT_F64 : t == SC_ARR_I64 ? SRT_CT_I64 : SRT_CT_F32;
}

static size_t elem_size(sc_arr_type t) { return t == SC_ARR_F32 ? 4 : 8; }

/* Saves c; ckpt (done, of) non-NULL: a checkpoint, with the methods' resume
 * arrays as sections "METHOD/resume.NAME" and "checkpoint" in the manifest. */
static sc_status save_impl(const sc_calib *c, const sc_model *m, const char *path, int compress, const int64_t *ckpt,
                           FILE *progress,
                           sc_err *err) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "format", "sparsecal-calibration");
    cJSON_AddNumberToObject(j, "format_version", SC_SCAL_FORMAT);
    cJSON_AddStringToObject(j, "tool", "sparsecal " SC_VERSION);
    cJSON *mo = cJSON_AddObjectToObject(j, "model");
    cJSON_AddStringToObject(mo, "id", c->model_id);
    /* a merge saves without a model: the shards' own record carries over */
    const char *family = m ? sc_family_name(m->cfg.family) : c->model_family, *format = m ? m->format : c->model_format;
    if (family[0]) cJSON_AddStringToObject(mo, "family", family);
    if (format[0]) cJSON_AddStringToObject(mo, "format", format);
    cJSON_AddNumberToObject(mo, "dim", (double)c->dim);
    cJSON_AddNumberToObject(mo, "ffn_dim", (double)c->ffn_dim);
    cJSON_AddNumberToObject(mo, "n_layers", (double)c->n_layers);
    cJSON *da = cJSON_AddObjectToObject(j, "data");
    cJSON_AddStringToObject(da, "id", c->data_id);
    cJSON_AddNumberToObject(da, "sequences", (double)c->n_seqs);
    cJSON_AddNumberToObject(da, "tokens", (double)c->n_tokens);
    cJSON_AddStringToObject(da, "shards", c->shards);
    if (c->options[0]) cJSON_AddRawToObject(j, "options", c->options); /* canonical JSON (engine.c) */
    cJSON *ms = cJSON_AddArrayToObject(j, "methods");
    for (int i = 0; i < c->n_entries; i++) cJSON_AddItemToArray(ms, cJSON_CreateString(c->entries[i].method->name));
    if (ckpt) { /* this process's sequences done so far, of how many */
        cJSON *ck = cJSON_AddObjectToObject(j, "checkpoint");
        cJSON_AddNumberToObject(ck, "done", (double)ckpt[0]);
        cJSON_AddNumberToObject(ck, "of", (double)ckpt[1]);
    }
    char *text = sc_json_print(j, false);
    cJSON_Delete(j);
    if (!text) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);

    char msg[512] = "";
    srt_writer *w = NULL;
    sc_status st = SC_OK;
    srt_ct_status cs = srt_writer_create(path, SRT_CT_SCAL, &w, msg, sizeof msg);
    if (!cs) cs = srt_writer_set_manifest(w, text, strlen(text));
    free(text);
    sc_array *arr = malloc(SC_MAX_ARRAYS * sizeof *arr);
    if (!arr && !cs) cs = SRT_CT_ENOMEM;
    /* derived arrays computed while writing show progress when they are large (LaRoSA's rotations at
     * d_model 4096: 128 MiB and a 30-second eigensolve each, half an hour for a Llama-3-8B) */
    int64_t n_streamed = 0, n_derived = 0;
    double mib_streamed = 0, mib_derived = 0;
    for (int i = 0; i < c->n_entries && arr && !ckpt; i++) {
        int ns = c->entries[i].method->streamed ? c->entries[i].method->streamed(c->entries[i].state, arr, SC_MAX_ARRAYS) : 0;
        for (int k = 0; k < ns; k++)
            mib_streamed += (double)arr[k].shape[0] * (double)(arr[k].shape[1] ? arr[k].shape[1] : 1) *
                            (double)elem_size(arr[k].type) / 1048576.0;
        n_streamed += ns;
    }
    sc_progress pr;
    sc_progress_start(&pr, mib_streamed >= 64 ? progress : NULL, "writing", "derived arrays", n_streamed);
    pr.amount_unit = "MiB";
    pr.rate_unit = "MiB/s";
    for (int i = 0; i < c->n_entries && !cs && !st; i++) {
        const sc_method *me = c->entries[i].method;
        int n = me->arrays(c->entries[i].state, arr, SC_MAX_ARRAYS), nr = 0;
        if (ckpt && me->resume_arrays) nr = me->resume_arrays(c->entries[i].state, arr + n, SC_MAX_ARRAYS - n);
        /* then the streamed derived arrays (method.h), computed one at a time; checkpoints leave them out */
        int ns = !ckpt && me->streamed ? me->streamed(c->entries[i].state, arr + n + nr, SC_MAX_ARRAYS - n - nr) : 0;
        for (int k = 0; k < n + nr + ns && !cs && !st; k++) {
            char name[SRT_CT_MAX_NAME + 1];
            snprintf(name, sizeof name, "%s/%s%s", me->name, k >= n && k < n + nr ? "resume." : "", arr[k].name);
            uint64_t dims[2] = {(uint64_t)arr[k].shape[0], (uint64_t)arr[k].shape[1]};
            uint32_t nd = arr[k].shape[1] ? 2 : 1;
            size_t bytes = (size_t)arr[k].shape[0] * (arr[k].shape[1] ? (size_t)arr[k].shape[1] : 1) * elem_size(arr[k].type);
            const void *data = arr[k].data;
            if (k >= n + nr) {
                st = me->derive(c->entries[i].state, k - n - nr, &data, err);
                n_derived++;
                mib_derived += (double)bytes / 1048576.0;
                sc_progress_update(&pr, n_derived, mib_derived, name);
            } else if (!data && bytes) {
                st = sc_errf(err, SC_EARG, "%s: %s/%s is not in memory (a calibration opened for reading cannot be saved)",
                             path, me->name, arr[k].name);
            }
            if (!st) cs = srt_writer_add(w, name, ct_type(arr[k].type), nd, dims, data, bytes, compress);
        }
    }
    free(arr);
    sc_progress_end(&pr);
    if (!cs && !st) cs = srt_writer_finish(w);
    if (cs) st = sc_errf(err, (sc_status)cs, "%s", w ? srt_writer_errmsg(w) : msg); /* same numbering */
    srt_writer_free(w);
    return st;
}

sc_status sc_calib_save(const sc_calib *c, const sc_model *m, const char *path, int compress, sc_err *err) {
    return save_impl(c, m, path, compress, NULL, NULL, err);
}

sc_status sc_calib_save_progress(const sc_calib *c, const sc_model *m, const char *path, int compress, FILE *progress,
                                 sc_err *err) {
    return save_impl(c, m, path, compress, NULL, progress, err);
}

sc_status sc_calib_save_checkpoint(const sc_calib *c, const sc_model *m, const char *path, int64_t done, int64_t of,
                                   sc_err *err) {
    int64_t ck[2] = {done, of};
    return save_impl(c, m, path, 1, ck, NULL, err); /* zstd 1: a checkpoint is written often and read once */
}

static sc_status ct_fail(const char *path, srt_container *ct, const char *msg, sc_err *err) {
    (void)path;
    return sc_errf(err, SC_EFORMAT, "%s", ct ? srt_container_errmsg(ct) : msg);
}

/* The file a calibration opened for reading keeps (engine.h). */
struct sc_scal_file {
    srt_container *ct;
    int64_t version; /* the manifest's format_version */
};

void sc_scal_file_close(struct sc_scal_file *f) {
    if (!f) return;
    srt_container_close(f->ct);
    free(f);
}

static uint64_t n_elements(const sc_array *a, int64_t rows) {
    return (uint64_t)rows * (uint64_t)(a->shape[1] ? a->shape[1] : 1);
}

/* Format 1 stored each LaRoSA moment whole, [D, D] row-major with the upper
 * triangle set; format 2 stores the packed triangle (larosa.h). True when
 * section s of a format-1 file is such a matrix for the packed vector a. */
static bool legacy_square(const srt_ct_section *s, const sc_array *a, int64_t version) {
    uint64_t k = s->dims[0];
    return version == 1 && a->shape[1] == 0 && s->ndim == 2 && s->dims[1] == k && k > 0 && k <= SC_MAX_DIM &&
           k * (k + 1) / 2 == (uint64_t)a->shape[0];
}

/* Checks that section si fits array a with `rows` rows (type and element
 * count, or a format-1 square moment). */
static sc_status check_section(srt_container *ct, const char *path, int64_t si, const sc_array *a, int64_t rows,
                               int64_t version, sc_err *err) {
    const srt_ct_section *s = srt_container_section_at(ct, (size_t)si);
    if (s->dtype != ct_type(a->type))
        return sc_errf(err, SC_EFORMAT, "%s: section '%s': dtype %s, expected %s", path, s->name,
                       srt_ct_dtype_name(s->dtype), srt_ct_dtype_name(ct_type(a->type)));
    if (s->n_elements != n_elements(a, rows) && !legacy_square(s, a, version))
        return sc_errf(err, SC_EFORMAT, "%s: section '%s': %llu elements, expected %llu", path, s->name,
                       (unsigned long long)s->n_elements, (unsigned long long)n_elements(a, rows));
    return SC_OK;
}

/* Reads section si into dst (a's type, `rows` rows), nothing else kept;
 * a format-1 square moment is packed into its upper triangle. */
static sc_status read_section(srt_container *ct, const char *path, int64_t si, const sc_array *a, int64_t rows,
                              int64_t version, void *dst, sc_err *err) {
    SC_TRY(check_section(ct, path, si, a, rows, version, err));
    const srt_ct_section *s = srt_container_section_at(ct, (size_t)si);
    if (!legacy_square(s, a, version))
        return srt_container_read(ct, (size_t)si, dst, s->raw_size) ? ct_fail(path, ct, NULL, err) : SC_OK;
    int64_t k = (int64_t)s->dims[0];
    double *full = malloc((size_t)s->raw_size), *hp = dst;
    if (!full) return sc_errf(err, SC_ENOMEM, "%s: out of memory for section '%s'", path, s->name);
    sc_status st = srt_container_read(ct, (size_t)si, full, s->raw_size) ? ct_fail(path, ct, NULL, err) : SC_OK;
    for (int64_t j = 0; j < k && !st; j++)
        for (int64_t i = 0; i <= j; i++) hp[i + j * (j + 1) / 2] = full[i * k + j];
    free(full);
    return st;
}

/* The manifest is read with the runtime's JSON reader (the container parsed it
 * on open), as the .spk manifest is: one reader for every sparsecal file. */
static const char *jstr(const srt_json *o, const char *k) {
    const srt_json *v = srt_json_get(o, k);
    /* a string with an encoded NUL is not a name, an id or a list of shards */
    return srt_json_is(v, SRT_JSON_STRING) && strlen(v->v.s) == v->n ? v->v.s : NULL;
}

/* An integral JSON number within [lo, hi] (hi <= 2^62, exact as a double); a
 * fractional or out-of-range double never reaches the cast. */
static bool jnum_int(const srt_json *v, int64_t lo, int64_t hi, int64_t *out) {
    if (srt_json_is(v, SRT_JSON_INT)) *out = v->v.i;
    else if (srt_json_is(v, SRT_JSON_DOUBLE) && v->v.d >= (double)lo && v->v.d <= (double)hi && v->v.d == floor(v->v.d))
        *out = (int64_t)v->v.d;
    else return false;
    return *out >= lo && *out <= hi;
}

static bool jint(const srt_json *o, const char *k, int64_t lo, int64_t hi, int64_t *out) {
    return jnum_int(srt_json_get(o, k), lo, hi, out);
}

/* What every loaded array must satisfy whatever its method, as if the file
 * had no checksum (a checksum catches corruption, not a crafted file): SUM
 * counts are non-negative and bounded (so merging shards cannot overflow),
 * sums and stored samples are finite. DERIVED arrays are recomputed. */
static sc_status check_array(const char *path, const char *name, const sc_array *a, sc_err *err) {
    if (a->kind == SC_ARR_DERIVED) return SC_OK;
    int64_t n = a->shape[0] * (a->shape[1] ? a->shape[1] : 1);
    if (a->type == SC_ARR_I64) {
        if (a->kind != SC_ARR_SUM) return SC_OK; /* stored samples of ids or bits: their method checks them */
        const int64_t *x = a->data;
        int64_t total = 0;
        for (int64_t i = 0; i < n; i++) {
            if (x[i] < 0 || x[i] > SC_COUNT_MAX - total)
                return sc_errf(err, SC_EFORMAT, "%s: section '%s' holds count %lld at %lld (counts are 0..2^62 in total)",
                               path, name, (long long)x[i], (long long)i);
            total += x[i];
        }
        return SC_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        double v = a->type == SC_ARR_F64 ? ((const double *)a->data)[i] : (double)((const float *)a->data)[i];
        if (!isfinite(v))
            return sc_errf(err, SC_EFORMAT, "%s: section '%s' holds a non-finite value at %lld", path, name, (long long)i);
    }
    return SC_OK;
}

/* ckpt non-NULL: the file must be a checkpoint; *ckpt = (done, of). A
 * checkpoint loaded as a plain file (ckpt NULL) is a partial calibration.
 * reader: the states are created for reading and the file stays open. */
static sc_status load_impl(const char *path, const sc_model *m, sc_calib **out, int64_t *ckpt, bool reader,
                           sc_err *err) {
    *out = NULL;
    srt_container *ct = NULL;
    SC_TRY(sc_container_open(path, SRT_CT_SCAL, &ct, err));
    const srt_json *j = srt_container_manifest(ct);
    sc_status st = SC_OK;
    sc_calib *c = NULL;
    sc_array *arr = NULL;
    const srt_json *mo = srt_json_get(j, "model"), *da = srt_json_get(j, "data"), *opt = srt_json_get(j, "options"),
                   *ms = srt_json_get(j, "methods");
    const char *fmt = jstr(j, "format"), *mid = jstr(mo, "id"), *did = jstr(da, "id"), *shards = jstr(da, "shards");
    int64_t dim, ffn, nl, nseq, ntok, lb, le, fv;
    const srt_json *layers = srt_json_get(opt, "layers");
    if (!j || !fmt || strcmp(fmt, "sparsecal-calibration") || !jint(j, "format_version", 1, SC_SCAL_FORMAT, &fv) || !mid ||
        strlen(mid) != 16 || !did || strlen(did) != 16 || !shards || strlen(shards) >= sizeof c->shards ||
        !jint(mo, "dim", 1, SC_MAX_DIM, &dim) || !jint(mo, "ffn_dim", 1, SC_MAX_FFN, &ffn) ||
        !jint(mo, "n_layers", 1, SC_MAX_LAYERS, &nl) || !jint(da, "sequences", 0, INT64_MAX / 2, &nseq) ||
        !jint(da, "tokens", 0, INT64_MAX / 2, &ntok) || !srt_json_is(opt, SRT_JSON_OBJECT) ||
        !srt_json_is(layers, SRT_JSON_ARRAY) || srt_json_count(layers) != 2 || !srt_json_is(ms, SRT_JSON_ARRAY) ||
        srt_json_count(ms) < 1 || srt_json_count(ms) > SC_MAX_METHODS) {
        st = sc_errf(err, SC_EFORMAT, "%s: the manifest is not a valid sparsecal calibration manifest", path);
        goto done;
    }
    if (!jnum_int(srt_json_at(layers, 0), 0, nl - 1, &lb) || !jnum_int(srt_json_at(layers, 1), 1, nl, &le) ||
        lb >= le) {
        st = sc_errf(err, SC_EFORMAT, "%s: options.layers must be two integers 0 <= begin < end <= %lld", path,
                     (long long)nl);
        goto done;
    }
    const char *family = jstr(mo, "family"), *format = jstr(mo, "format");
    if ((family && strlen(family) >= sizeof c->model_family) || (format && strlen(format) >= sizeof c->model_format)) {
        st = sc_errf(err, SC_EFORMAT, "%s: model.family or model.format is too long", path);
        goto done;
    }
    if (m && (st = sc_model_check_identity(m, mid, path, err))) goto done;
    /* a shape-only model is enough to create the method states */
    sc_model shape;
    memset(&shape, 0, sizeof shape);
    shape.cfg.dim = dim;
    shape.cfg.ffn_dim = ffn;
    shape.cfg.n_layers = nl;
    const char *names[SC_MAX_METHODS];
    int nm = (int)srt_json_count(ms);
    for (int i = 0; i < nm; i++) {
        const srt_json *e = srt_json_at(ms, (size_t)i);
        names[i] = srt_json_is(e, SRT_JSON_STRING) && strlen(e->v.s) == e->n ? e->v.s : "";
        if (!sc_method_find(names[i])) {
            st = sc_errf(err, SC_EUNSUPPORTED, "%s: unknown method '%.64s' in the manifest", path, names[i]);
            goto done;
        }
    }
    const srt_json *ck = srt_json_get(j, "checkpoint");
    int64_t ck_done = 0, ck_of = 0;
    if (ck && (!jint(ck, "done", 0, INT64_MAX / 2, &ck_done) || !jint(ck, "of", 1, INT64_MAX / 2, &ck_of) ||
               ck_done > ck_of || ck_done != nseq)) {
        st = sc_errf(err, SC_EFORMAT, "%s: the manifest's checkpoint record is not valid", path);
        goto done;
    }
    if (ckpt && !ck) {
        st = sc_errf(err, SC_EARG, "%s: not a checkpoint (a finished calibration file)", path);
        goto done;
    }
    const char *params = jstr(opt, "params");
    if ((st = sc_calib_new_ex(m ? m : &shape, names, nm, lb, le, params, reader, &c, err))) goto done;
    snprintf(c->model_id, sizeof c->model_id, "%s", mid);
    snprintf(c->data_id, sizeof c->data_id, "%s", did);
    snprintf(c->shards, sizeof c->shards, "%s", shards);
    snprintf(c->model_family, sizeof c->model_family, "%s", family ? family : "");
    snprintf(c->model_format, sizeof c->model_format, "%s", format ? format : "");
    if (sc_json_canonical_value(opt, c->options, sizeof c->options)) { /* as compute writes them */
        st = sc_errf(err, SC_EFORMAT, "%s: options too long", path);
        goto done;
    }
    c->n_seqs = nseq;
    c->n_tokens = ntok;
    arr = malloc(SC_MAX_ARRAYS * sizeof *arr);
    if (!arr) {
        st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t expected_sections = 0;
    for (int i = 0; i < c->n_entries && !st; i++) {
        const sc_method *me = c->entries[i].method;
        int n = me->arrays(c->entries[i].state, arr, SC_MAX_ARRAYS), nr = 0, ns = 0;
        if (ck && me->resume_arrays) nr = me->resume_arrays(c->entries[i].state, arr + n, SC_MAX_ARRAYS - n);
        if (me->streamed) ns = me->streamed(c->entries[i].state, arr + n + nr, SC_MAX_ARRAYS - n - nr);
        for (int k = 0; k < n + nr + ns; k++) {
            char name[SRT_CT_MAX_NAME + 1];
            snprintf(name, sizeof name, "%s/%s%s", me->name, k >= n && k < n + nr ? "resume." : "", arr[k].name);
            int64_t si = srt_container_find(ct, name), rows = arr[k].shape[0];
            const srt_ct_section *sec = si >= 0 ? srt_container_section_at(ct, (size_t)si) : NULL;
            if (!sec && k >= n + nr) continue; /* streamed derived arrays: a checkpoint has none */
            if (!sec) {
                st = sc_errf(err, SC_EFORMAT, "%s: section '%s' is missing", path, name);
                break;
            }
            expected_sections++;
            if (arr[k].kind == SC_ARR_CONCAT) { /* stored samples: the file decides the row count */
                uint32_t nd = arr[k].shape[1] ? 2 : 1;
                if (sec->ndim != nd || (nd == 2 && sec->dims[1] != (uint64_t)arr[k].shape[1]) ||
                    sec->dims[0] > (uint64_t)(INT64_MAX / 16) / (uint64_t)(arr[k].shape[1] ? arr[k].shape[1] : 1)) {
                    st = sc_errf(err, SC_EFORMAT, "%s: section '%s' has the wrong shape for a sample of rows of %lld",
                                 path, name, (long long)(arr[k].shape[1] ? arr[k].shape[1] : 1));
                    break;
                }
                rows = (int64_t)sec->dims[0];
                if ((st = check_section(ct, path, si, &arr[k], rows, fv, err))) break;
                if ((st = sc_array_concat_resize(&arr[k], rows, err))) break;
            }
            if (k >= n + nr || !arr[k].data) { /* streamed, or left in the file by a reader: read on demand */
                if ((st = check_section(ct, path, si, &arr[k], rows, fv, err))) break;
                continue;
            }
            if (n_elements(&arr[k], rows) && (st = read_section(ct, path, si, &arr[k], rows, fv, arr[k].data, err)))
                break;
            if ((st = check_array(path, name, &arr[k], err))) break;
        }
    }
    if (!st && expected_sections != srt_container_section_count(ct))
        st = sc_errf(err, SC_EFORMAT, "%s: %zu sections, expected %zu", path, srt_container_section_count(ct),
                     expected_sections);
    for (int i = 0; i < c->n_entries && !st; i++) {
        const sc_method *me = c->entries[i].method;
        if (me->validate && (st = me->validate(c->entries[i].state, c->n_tokens, err))) {
            char m2[sizeof err->msg];
            snprintf(m2, sizeof m2, "%s", err->msg);
            st = sc_errf(err, st, "%s: %s", path, m2);
        }
    }
    if (!st) st = sc_calib_finalize(c, err);
    if (!st && ckpt) {
        ckpt[0] = ck_done;
        ckpt[1] = ck_of;
    }
    if (!st && reader) {
        if (!(c->file = calloc(1, sizeof *c->file))) {
            st = sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
        } else {
            c->file->ct = ct;
            c->file->version = fv;
            ct = NULL; /* the calibration closes it */
        }
    }
done:
    free(arr);
    srt_container_close(ct);
    if (st) {
        sc_calib_free(c);
        return st;
    }
    *out = c;
    return SC_OK;
}

sc_status sc_calib_load(const char *path, const sc_model *m, sc_calib **out, sc_err *err) {
    return load_impl(path, m, out, NULL, false, err);
}

sc_status sc_calib_open(const char *path, const sc_model *m, sc_calib **out, sc_err *err) {
    return load_impl(path, m, out, NULL, true, err);
}

sc_status sc_calib_read(const sc_calib *c, const char *method, const sc_array *a, void *dst, bool *found, sc_err *err) {
    *found = false;
    if (!c->file || (a->kind == SC_ARR_DERIVED && c->file->version < 2)) return SC_OK;
    srt_container *ct = c->file->ct;
    const char *path = srt_container_path(ct);
    char name[SRT_CT_MAX_NAME + 1];
    snprintf(name, sizeof name, "%s/%s", method, a->name);
    int64_t si = srt_container_find(ct, name);
    if (si < 0 || a->kind == SC_ARR_CONCAT) return SC_OK;
    SC_TRY(read_section(ct, path, si, a, a->shape[0], c->file->version, dst, err));
    sc_array got = *a;
    got.data = dst;
    got.kind = SC_ARR_SUM; /* derived arrays read back are checked like sums: finite */
    if (got.type != SC_ARR_I64) SC_TRY(check_array(path, name, &got, err));
    *found = true;
    return SC_OK;
}

sc_status sc_calib_load_checkpoint(const char *path, const sc_model *m, sc_calib **out, int64_t *done, int64_t *of,
                                   sc_err *err) {
    int64_t ck[2] = {0, 0};
    sc_status st = load_impl(path, m, out, ck, false, err);
    srt_input_forget_path(path); /* the run's own state: the next checkpoint replaces it */
    *done = ck[0];
    *of = ck[1];
    return st;
}
