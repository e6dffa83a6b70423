/* transfer.c - a calibration as one byte buffer (see transfer.h). */
#include "transfer.h"

#include <stdlib.h>
#include <string.h>

#include "srt_json.h"

static const char magic[8] = "SCXFER1";

/* The fixed part: provenance and shape, copied field by field. */
typedef struct xfer_head {
    char magic[8];
    char model_id[17], data_id[17];
    char options[1024];
    char shards[512];
    char methods[SC_MAX_METHODS][32];
    int64_t n_seqs, n_tokens, n_entries, layer_begin, layer_end, dim, ffn_dim, n_layers;
    double seconds;
} xfer_head;

static size_t elem_size(sc_arr_type t) { return t == SC_ARR_F32 ? 4 : 8; }

static size_t array_bytes(const sc_array *a) {
    return (size_t)a->shape[0] * (size_t)(a->shape[1] ? a->shape[1] : 1) * elem_size(a->type);
}

sc_status sc_calib_to_bytes(const sc_calib *c, void **buf, size_t *len, sc_err *err) {
    *buf = NULL;
    *len = 0;
    sc_array *arr = malloc(SC_MAX_ARRAYS * sizeof *arr);
    if (!arr) return sc_errf(err, SC_ENOMEM, "transfer: out of memory");
    /* first pass: the size (per array: int64 rows, then the data) */
    size_t total = sizeof(xfer_head);
    for (int i = 0; i < c->n_entries; i++) {
        const sc_method *me = c->entries[i].method;
        int n = me->arrays(c->entries[i].state, arr, SC_MAX_ARRAYS);
        total += sizeof(int64_t);
        for (int k = 0; k < n; k++) {
            if (!arr[k].data && array_bytes(&arr[k])) { /* a state opened for reading (method.h) */
                sc_status st = sc_errf(err, SC_EARG, "transfer: %s/%s is not in memory", me->name, arr[k].name);
                free(arr);
                return st;
            }
            total += sizeof(int64_t) + array_bytes(&arr[k]);
        }
    }
    uint8_t *p = malloc(total);
    if (!p) {
        free(arr);
        return sc_errf(err, SC_ENOMEM, "transfer: out of memory for %zu bytes", total);
    }
    xfer_head h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, magic, sizeof h.magic);
    memcpy(h.model_id, c->model_id, sizeof h.model_id);
    memcpy(h.data_id, c->data_id, sizeof h.data_id);
    memcpy(h.options, c->options, sizeof h.options);
    memcpy(h.shards, c->shards, sizeof h.shards);
    for (int i = 0; i < c->n_entries; i++) snprintf(h.methods[i], sizeof h.methods[i], "%s", c->entries[i].method->name);
    h.n_seqs = c->n_seqs;
    h.n_tokens = c->n_tokens;
    h.n_entries = c->n_entries;
    h.layer_begin = c->layer_begin;
    h.layer_end = c->layer_end;
    h.dim = c->dim;
    h.ffn_dim = c->ffn_dim;
    h.n_layers = c->n_layers;
    h.seconds = c->seconds;
    memcpy(p, &h, sizeof h);
    size_t off = sizeof h;
    for (int i = 0; i < c->n_entries; i++) {
        const sc_method *me = c->entries[i].method;
        int64_t n = me->arrays(c->entries[i].state, arr, SC_MAX_ARRAYS);
        memcpy(p + off, &n, sizeof n);
        off += sizeof n;
        for (int64_t k = 0; k < n; k++) {
            size_t bytes = array_bytes(&arr[k]);
            memcpy(p + off, &arr[k].shape[0], sizeof(int64_t));
            off += sizeof(int64_t);
            if (bytes) memcpy(p + off, arr[k].data, bytes);
            off += bytes;
        }
    }
    free(arr);
    *buf = p;
    *len = off;
    return SC_OK;
}

/* Takes n bytes at *off of a buffer of len bytes. */
static const uint8_t *take(const uint8_t *b, size_t len, size_t *off, size_t n) {
    if (n > len - *off) return NULL;
    const uint8_t *p = b + *off;
    *off += n;
    return p;
}

static bool terminated(const char *s, size_t cap) { return memchr(s, '\0', cap) != NULL; }

sc_status sc_calib_from_bytes(const sc_model *m, const void *buf, size_t len, sc_calib **out, sc_err *err) {
    *out = NULL;
    const uint8_t *b = buf;
    xfer_head h;
    if (len < sizeof h) return sc_errf(err, SC_EFORMAT, "transfer: %zu bytes are too short for a calibration", len);
    memcpy(&h, b, sizeof h);
    bool ok = memcmp(h.magic, magic, sizeof magic) == 0 && terminated(h.model_id, sizeof h.model_id) &&
              terminated(h.data_id, sizeof h.data_id) && terminated(h.options, sizeof h.options) &&
              terminated(h.shards, sizeof h.shards) && h.n_entries >= 1 && h.n_entries <= SC_MAX_METHODS &&
              h.n_seqs >= 0 && h.n_tokens >= 0;
    for (int64_t i = 0; ok && i < h.n_entries; i++) ok = terminated(h.methods[i], sizeof h.methods[i]);
    if (!ok) return sc_errf(err, SC_EFORMAT, "transfer: not a calibration of this build (bad header)");
    if (h.dim != m->cfg.dim || h.ffn_dim != m->cfg.ffn_dim || h.n_layers != m->cfg.n_layers)
        return sc_errf(err, SC_EARG, "transfer: a calibration of another model shape");
    srt_json *opt = NULL;
    char jerr[160];
    if (srt_json_parse(h.options, strlen(h.options), NULL, &opt, jerr, sizeof jerr))
        return sc_errf(err, SC_EFORMAT, "transfer: the options are not JSON: %s", jerr);
    const char *params = srt_json_str(srt_json_get(opt, "params"), "");
    const char *names[SC_MAX_METHODS];
    for (int64_t i = 0; i < h.n_entries; i++) names[i] = h.methods[i];
    sc_calib *c = NULL;
    sc_status st = sc_calib_new(m, names, (int)h.n_entries, h.layer_begin, h.layer_end,
                                params[0] ? params : NULL, &c, err);
    srt_json_free(opt);
    if (st) return st;
    memcpy(c->model_id, h.model_id, sizeof c->model_id);
    memcpy(c->data_id, h.data_id, sizeof c->data_id);
    memcpy(c->options, h.options, sizeof c->options);
    memcpy(c->shards, h.shards, sizeof c->shards);
    c->n_seqs = h.n_seqs;
    c->n_tokens = h.n_tokens;
    c->seconds = h.seconds;
    sc_array *arr = malloc(SC_MAX_ARRAYS * sizeof *arr);
    if (!arr) st = sc_errf(err, SC_ENOMEM, "transfer: out of memory");
    size_t off = sizeof h;
    for (int i = 0; i < c->n_entries && !st; i++) {
        const sc_method *me = c->entries[i].method;
        int n = me->arrays(c->entries[i].state, arr, SC_MAX_ARRAYS);
        int64_t nb;
        const uint8_t *q = take(b, len, &off, sizeof nb);
        if (q) memcpy(&nb, q, sizeof nb);
        if (!q || nb != n) {
            st = sc_errf(err, SC_EFORMAT, "transfer: %s: the array list does not match", me->name);
            break;
        }
        for (int k = 0; k < n; k++) {
            int64_t rows;
            if (!(q = take(b, len, &off, sizeof rows))) {
                st = sc_errf(err, SC_EFORMAT, "transfer: truncated at %s/%s", me->name, arr[k].name);
                break;
            }
            memcpy(&rows, q, sizeof rows);
            if (arr[k].kind == SC_ARR_CONCAT) { /* stored samples: the sender decides the row count */
                size_t row_bytes = (size_t)(arr[k].shape[1] ? arr[k].shape[1] : 1) * elem_size(arr[k].type);
                if (rows < 0 || (uint64_t)rows > (len - off) / row_bytes) {
                    st = sc_errf(err, SC_EFORMAT, "transfer: %s/%s: %lld rows do not fit the buffer", me->name,
                                 arr[k].name, (long long)rows);
                    break;
                }
                if ((st = sc_array_concat_resize(&arr[k], rows, err))) break;
            } else if (rows != arr[k].shape[0]) {
                st = sc_errf(err, SC_EFORMAT, "transfer: %s/%s has %lld rows, expected %lld", me->name, arr[k].name,
                             (long long)rows, (long long)arr[k].shape[0]);
                break;
            }
            size_t bytes = array_bytes(&arr[k]);
            if (!(q = take(b, len, &off, bytes))) {
                st = sc_errf(err, SC_EFORMAT, "transfer: truncated in %s/%s", me->name, arr[k].name);
                break;
            }
            if (bytes) memcpy(arr[k].data, q, bytes);
        }
    }
    if (!st && off != len) st = sc_errf(err, SC_EFORMAT, "transfer: %zu bytes left over", len - off);
    free(arr);
    if (!st) st = sc_calib_finalize(c, err);
    if (st) {
        sc_calib_free(c);
        return st;
    }
    *out = c;
    return SC_OK;
}
