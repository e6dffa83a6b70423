/* tok_sp_model.c - SentencePiece tokenizer.model files: a protobuf
 * ModelProto read with a small bounds-checked wire-format reader.
 *
 *   ModelProto     1: repeated SentencePiece {1: piece, 2: score (float), 3: type}
 *                  2: TrainerSpec {3: model_type (1 unigram, 2 BPE), 40: unk_id,
 *                                  41: bos_id, 42: eos_id}
 *                  3: NormalizerSpec {1: name, 2: precompiled_charsmap,
 *                                     3: add_dummy_prefix, 4: remove_extra_whitespaces}
 * Only BPE models are encoded (by piece score, which is how SentencePiece
 * runs BPE); unigram models are rejected with a clear message. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct pb {
    const uint8_t *p, *end;
} pb;

/* One field: number, wire type and its value (varint, fixed, or bytes). */
typedef struct pb_field {
    uint32_t num, wire;
    uint64_t v;
    const uint8_t *data;
    size_t len;
} pb_field;

static bool pb_varint(pb *r, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) return false;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

/* Reads the next field; false at the end (*bad set when malformed). */
static bool pb_next(pb *r, pb_field *f, bool *bad) {
    *bad = false;
    if (r->p >= r->end) return false;
    uint64_t key;
    if (!pb_varint(r, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) goto malformed;
    f->num = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    f->data = NULL;
    f->len = 0;
    switch (f->wire) {
    case 0:
        if (!pb_varint(r, &f->v)) goto malformed;
        return true;
    case 1:
        if (r->end - r->p < 8) goto malformed;
        f->v = sc_le64(r->p);
        r->p += 8;
        return true;
    case 5:
        if (r->end - r->p < 4) goto malformed;
        f->v = sc_le32(r->p);
        r->p += 4;
        return true;
    case 2: {
        uint64_t n;
        if (!pb_varint(r, &n) || n > (uint64_t)(r->end - r->p)) goto malformed;
        f->data = r->p;
        f->len = (size_t)n;
        r->p += n;
        return true;
    }
    default: break; /* groups (3, 4) and reserved types */
    }
malformed:
    *bad = true;
    return false;
}

typedef struct sp_model {
    int64_t n_pieces;
    const char **pieces;
    size_t *lens;
    float *scores;
    int32_t *types;
    int64_t model_type, unk, bos, eos;
    bool add_dummy_prefix, squash, has_charsmap;
    const uint8_t *norm_name;
    size_t norm_name_len;
} sp_model;

static sc_status read_piece(const char *path, int64_t i, const uint8_t *d, size_t n, sp_model *m, sc_err *err) {
    pb r = {d, d + n};
    pb_field f = {0, 0, 0, NULL, 0};
    bool bad;
    m->types[i] = SC_TOKTYPE_NORMAL;
    m->pieces[i] = "";
    while (pb_next(&r, &f, &bad)) {
        if (f.num == 1 && f.wire == 2) {
            m->pieces[i] = (const char *)f.data;
            m->lens[i] = f.len;
        } else if (f.num == 2 && f.wire == 5) {
            uint8_t b[4] = {(uint8_t)f.v, (uint8_t)(f.v >> 8), (uint8_t)(f.v >> 16), (uint8_t)(f.v >> 24)};
            m->scores[i] = sc_lef32(b);
            if (!isfinite(m->scores[i]))
                return sc_errf(err, SC_EFORMAT, "%s: piece %lld has a score that is not finite", path, (long long)i);
        } else if (f.num == 3 && f.wire == 0) {
            if (f.v < 1 || f.v > 6)
                return sc_errf(err, SC_EFORMAT, "%s: piece %lld has type %llu (1 to 6 expected)", path, (long long)i,
                               (unsigned long long)f.v);
            m->types[i] = (int32_t)f.v;
        }
    }
    if (bad) return sc_errf(err, SC_EFORMAT, "%s: piece %lld is malformed protobuf", path, (long long)i);
    return SC_OK;
}

/* int32 fields are varints of the two's complement (negative: 10 bytes). */
static int64_t as_int32(uint64_t v) { return (int64_t)(int32_t)(uint32_t)v; }

static sc_status read_spec(const char *path, const uint8_t *d, size_t n, bool trainer, sp_model *m, sc_err *err) {
    pb r = {d, d + n};
    pb_field f = {0, 0, 0, NULL, 0};
    bool bad;
    while (pb_next(&r, &f, &bad)) {
        if (trainer && f.wire == 0) {
            if (f.num == 3) m->model_type = (int64_t)(f.v & 0xFF);
            else if (f.num == 40) m->unk = as_int32(f.v);
            else if (f.num == 41) m->bos = as_int32(f.v);
            else if (f.num == 42) m->eos = as_int32(f.v);
        } else if (!trainer) {
            if (f.num == 1 && f.wire == 2) {
                m->norm_name = f.data;
                m->norm_name_len = f.len;
            } else if (f.num == 2 && f.wire == 2) {
                m->has_charsmap = f.len > 0;
            } else if (f.num == 3 && f.wire == 0) {
                m->add_dummy_prefix = f.v != 0;
            } else if (f.num == 4 && f.wire == 0) {
                m->squash = f.v != 0;
            }
        }
    }
    if (bad) return sc_errf(err, SC_EFORMAT, "%s: %s is malformed protobuf", path, trainer ? "trainer_spec" : "normalizer_spec");
    return SC_OK;
}

static sc_status parse_model(const char *path, const sc_file_map *map, sp_model *m, sc_err *err) {
    pb r = {map->data, map->data + map->size};
    pb_field f = {0, 0, 0, NULL, 0};
    bool bad;
    int64_t n = 0;
    while (pb_next(&r, &f, &bad))
        if (f.num == 1 && f.wire == 2 && ++n > TOK_MAX_VOCAB)
            return sc_errf(err, SC_EFORMAT, "%s: more than %lld pieces", path, (long long)TOK_MAX_VOCAB);
    if (bad) return sc_errf(err, SC_EFORMAT, "%s: not a SentencePiece model (malformed or truncated protobuf)", path);
    if (n == 0) return sc_errf(err, SC_EFORMAT, "%s: no pieces (not a SentencePiece model?)", path);
    m->n_pieces = n;
    m->pieces = sc_calloc((size_t)n, sizeof *m->pieces);
    m->lens = sc_calloc((size_t)n, sizeof *m->lens);
    m->scores = sc_calloc((size_t)n, sizeof *m->scores);
    m->types = sc_calloc((size_t)n, sizeof *m->types);
    if (!m->pieces || !m->lens || !m->scores || !m->types)
        return sc_errf(err, SC_ENOMEM, "%s: out of memory for %lld pieces", path, (long long)n);
    r.p = map->data;
    int64_t i = 0;
    while (pb_next(&r, &f, &bad)) {
        if (f.num == 1 && f.wire == 2) SC_TRY(read_piece(path, i++, f.data, f.len, m, err));
        else if (f.num == 2 && f.wire == 2) SC_TRY(read_spec(path, f.data, f.len, true, m, err));
        else if (f.num == 3 && f.wire == 2) SC_TRY(read_spec(path, f.data, f.len, false, m, err));
    }
    return SC_OK;
}

sc_status sc_tokenizer_load_sp_model(const char *path, sc_tokenizer **out, sc_err *err) {
    *out = NULL;
    sc_file_map map;
    SC_TRY(sc_map_file(path, &map, err));
    sp_model m = {.model_type = 1, .unk = 0, .bos = 1, .eos = 2, .add_dummy_prefix = true, .squash = true};
    sc_status st = parse_model(path, &map, &m, err);
    if (st == SC_OK && m.model_type != 2)
        st = sc_errf(err, SC_EUNSUPPORTED, "%s: SentencePiece model type %s is not supported (only BPE)", path,
                     m.model_type == 1 ? "unigram" : m.model_type == 3 ? "word" : m.model_type == 4 ? "char" : "unknown");
    bool identity = m.norm_name_len == 0 || (m.norm_name_len == 8 && memcmp(m.norm_name, "identity", 8) == 0);
    if (st == SC_OK && !identity && m.has_charsmap)
        st = sc_errf(err, SC_EUNSUPPORTED, "%s: SentencePiece normalizer '%.*s' is not supported (only identity)", path,
                     (int)(m.norm_name_len > 40 ? 40 : m.norm_name_len), (const char *)m.norm_name);
    if (st == SC_OK) {
        int64_t n = m.n_pieces;
        if (m.bos >= n || m.eos >= n || m.unk >= n)
            st = sc_errf(err, SC_EFORMAT, "%s: trainer_spec special ids (unk %lld, bos %lld, eos %lld) beyond the %lld pieces",
                         path, (long long)m.unk, (long long)m.bos, (long long)m.eos, (long long)n);
    }
    sc_tokenizer *t = NULL;
    if (st == SC_OK)
        st = sc_tokenizer_from_pieces(path, m.pieces, m.lens, m.scores, m.types, m.n_pieces, (int32_t)m.bos,
                                      (int32_t)m.eos, (int32_t)m.unk, true, &t, err);
    if (st == SC_OK) st = tok_spm_attach(t, m.add_dummy_prefix, m.squash, err);
    free(m.pieces);
    free(m.lens);
    free(m.scores);
    free(m.types);
    sc_unmap_file(&map);
    if (st != SC_OK) {
        sc_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SC_OK;
}
