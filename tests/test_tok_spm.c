/* test_tok_spm.c - SentencePiece tokenizer.model: the real Llama-2 model
 * agrees token for token with its llama2.c tokenizer.bin export; small
 * hand-written ModelProtos exercise the options (no dummy prefix, squashed
 * spaces, user-defined pieces, unigram rejected); truncated and corrupted
 * files fail with a one-line error naming the file. */
#include <stdlib.h>
#include <string.h>

#include "testing.h"
#include "tokenizer.h"

static sc_err err;

/* ---- a tiny protobuf writer ---- */
typedef struct pbw {
    uint8_t b[1 << 14];
    size_t n;
} pbw;

static void varint(pbw *w, uint64_t v) {
    do {
        uint8_t c = v & 0x7F;
        v >>= 7;
        w->b[w->n++] = (uint8_t)(c | (v ? 0x80 : 0));
    } while (v);
}
static void field_bytes(pbw *w, uint32_t num, const void *p, size_t n) {
    varint(w, (uint64_t)num << 3 | 2);
    varint(w, n);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void field_varint(pbw *w, uint32_t num, uint64_t v) {
    varint(w, (uint64_t)num << 3);
    varint(w, v);
}
static void field_float(pbw *w, uint32_t num, float f) {
    varint(w, (uint64_t)num << 3 | 5);
    memcpy(w->b + w->n, &f, 4);
    w->n += 4;
}
static void piece(pbw *w, const char *s, float score, int type) {
    pbw p = {.n = 0};
    field_bytes(&p, 1, s, strlen(s));
    field_float(&p, 2, score);
    if (type) field_varint(&p, 3, (uint64_t)type);
    field_bytes(w, 1, p.b, p.n);
}

/* A vocabulary of <unk> <s> </s>, the letters a-e with "\u2581" forms, some
 * merges by score, a user-defined piece and 256 byte pieces. */
static const char *write_model(const char *name, int model_type, int dummy_prefix, int squash) {
    static pbw w;
    w.n = 0;
    piece(&w, "<unk>", 0, 2);
    piece(&w, "<s>", 0, 3);
    piece(&w, "</s>", 0, 3);
    const char *normal[] = {"\xe2\x96\x81", "a", "b", "c", "d", "e", "ab", "\xe2\x96\x81" "ab", "abc", "cd"};
    const float score[] = {-1, -2, -3, -4, -5, -6, -0.5f, -0.25f, -0.1f, -0.7f};
    for (int i = 0; i < 10; i++) piece(&w, normal[i], score[i], 1);
    piece(&w, "<tool>", 0, 4);
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        piece(&w, s, 0, 6);
    }
    pbw tr = {.n = 0};
    field_varint(&tr, 3, (uint64_t)model_type);
    field_varint(&tr, 40, 0);
    field_varint(&tr, 41, 1);
    field_varint(&tr, 42, 2);
    field_bytes(&w, 2, tr.b, tr.n);
    pbw nm = {.n = 0};
    field_bytes(&nm, 1, "identity", 8);
    field_varint(&nm, 3, (uint64_t)dummy_prefix);
    field_varint(&nm, 4, (uint64_t)squash);
    field_bytes(&w, 3, nm.b, nm.n);
    const char *p = sc_tmp_path(name);
    CHECK(sc_write_bytes(p, w.b, w.n));
    return p;
}

static bool enc_is(const sc_tokenizer *t, const char *s, unsigned flags, const int32_t *want, size_t n) {
    sc_tokens tk = {0};
    bool ok = sc_tokenizer_encode_ex(t, s, strlen(s), flags, &tk, &err) == SC_OK && tk.n == n &&
              memcmp(tk.ids, want, n * sizeof *want) == 0;
    if (!ok) {
        fprintf(stderr, "encode '%s':", s);
        for (size_t i = 0; i < tk.n; i++) fprintf(stderr, " %d", tk.ids[i]);
        fprintf(stderr, "\n");
    }
    sc_tokens_free(&tk);
    return ok;
}

static void small_models(void) {
    sc_tokenizer *t = NULL;
    /* ids: 0 unk, 1 <s>, 2 </s>, 3 "\u2581", 4 a .. 8 e, 9 ab, 10 "\u2581ab", 11 abc, 12 cd, 13 <tool>, 14.. bytes */
    CHECK_MSG(sc_tokenizer_load_sp_model(write_model("bpe.model", 2, 1, 0), &t, &err) == SC_OK, "%s", err.msg);
    if (t) {
        CHECK(strcmp(sc_tokenizer_kind(t), "sentencepiece") == 0 && sc_tokenizer_vocab_size(t) == 270);
        CHECK(enc_is(t, "abc", SC_ENC_BOS, (const int32_t[]){1, 3, 11}, 3)); /* ab first, then "abc" beats "\u2581ab" */
        CHECK(enc_is(t, "cd ab", 0, (const int32_t[]){3, 12, 10}, 3));
        /* user-defined: always whole; the text after it gets a dummy prefix again, as in llama.cpp */
        CHECK(enc_is(t, "a<tool>b", 0, (const int32_t[]){3, 4, 13, 3, 5}, 5));
        CHECK(enc_is(t, "<s>a", SC_ENC_SPECIAL, (const int32_t[]){1, 3, 4}, 3));
        CHECK(enc_is(t, "z", 0, (const int32_t[]){3, 14 + 'z'}, 2)); /* byte fallback */
        CHECK(enc_is(t, "a\xe2\x96\x81" "ab", 0, (const int32_t[]){3, 4, 10}, 3)); /* U+2581 in text is a space */
        sc_tokens tk = {0};
        char *s = NULL;
        size_t n;
        CHECK(sc_tokenizer_encode(t, "zab cd", 6, true, true, &tk, &err) == SC_OK);
        CHECK(sc_tokenizer_decode_all(t, tk.ids, tk.n, &s, &n, &err) == SC_OK && strcmp(s, "zab cd") == 0);
        free(s);
        sc_tokens_free(&tk);
        sc_tokenizer_free(t);
    }
    CHECK(sc_tokenizer_load_sp_model(write_model("noprefix.model", 2, 0, 1), &t, &err) == SC_OK);
    if (t) {
        CHECK(enc_is(t, "ab", 0, (const int32_t[]){9}, 1));
        CHECK(enc_is(t, "  ab   cd  ", 0, (const int32_t[]){9, 3, 12}, 3)); /* remove_extra_whitespaces */
        sc_tokenizer_free(t);
    }
    const char *p = write_model("unigram.model", 1, 1, 0);
    CHECK(sc_tokenizer_load_sp_model(p, &t, &err) == SC_EUNSUPPORTED && strstr(err.msg, "unigram") && strstr(err.msg, p));
}

static void hostile(const char *real) {
    char *buf;
    size_t len;
    if (sc_read_file(real, 1 << 21, &buf, &len, &err) != SC_OK) return;
    const char *p = sc_tmp_path("bad.model");
    sc_tokenizer *t = NULL;
    size_t fails = 0, tries = 0;
    for (size_t cut = 0; cut < len; cut += cut < 300 ? 1 : 4099) {
        sc_write_bytes(p, buf, cut);
        sc_status st = sc_tokenizer_load_sp_model(p, &t, &err);
        tries++;
        /* a cut at a piece boundary is a valid (smaller) model; anything else must fail cleanly */
        if (st == SC_OK) {
            sc_tokenizer_free(t);
            continue;
        }
        fails++;
        CHECK_MSG(!t && strstr(err.msg, p) && !strchr(err.msg, '\n'), "cut %zu: %s", cut, err.msg);
    }
    CHECK(fails > tries / 2);
    /* corrupt bytes: flip every 997th byte to 0xFF (bad varints, lengths) */
    char *bad = malloc(len);
    memcpy(bad, buf, len);
    for (size_t i = 5; i < len; i += 997) bad[i] = (char)0xFF;
    sc_write_bytes(p, bad, len);
    sc_status st = sc_tokenizer_load_sp_model(p, &t, &err);
    CHECK(st != SC_OK ? !t && strstr(err.msg, p) != NULL : t != NULL);
    sc_tokenizer_free(t);
    /* a length that points past the end */
    const uint8_t huge[] = {0x0A, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 'a'};
    sc_write_bytes(p, huge, sizeof huge);
    CHECK(sc_tokenizer_load_sp_model(p, &t, &err) == SC_EFORMAT && strstr(err.msg, p));
    const uint8_t group[] = {0x0B, 0x0C};
    sc_write_bytes(p, group, sizeof group);
    CHECK(sc_tokenizer_load_sp_model(p, &t, &err) == SC_EFORMAT);
    const uint8_t noterm[] = {0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
    sc_write_bytes(p, noterm, sizeof noterm);
    CHECK(sc_tokenizer_load_sp_model(p, &t, &err) == SC_EFORMAT);
    sc_write_bytes(p, "", 0);
    CHECK(sc_tokenizer_load_sp_model(p, &t, &err) != SC_OK);
    CHECK(sc_tokenizer_load_sp_model(sc_tmp_path("missing.model"), &t, &err) == SC_EIO);
    free(bad);
    free(buf);
}

int main(void) {
    const char *model = sc_asset("tokenizers/llama2_sentencepiece/tokenizer.model");
    const char *bin = sc_asset("tokenizers/llama2_sentencepiece/tokenizer.bin");
    if (!model || !bin) return sc_test_finish();
    char mpath[4096];
    snprintf(mpath, sizeof mpath, "%s", model);
    sc_tokenizer *a = NULL, *b = NULL;
    CHECK_MSG(sc_tokenizer_load_sp_model(mpath, &a, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_tokenizer_load_llama2c(bin, 32000, &b, &err) == SC_OK, "%s", err.msg);
    if (a && b) {
        CHECK(sc_tokenizer_vocab_size(a) == 32000 && sc_tokenizer_bos(a) == 1 && sc_tokenizer_eos(a) == 2);
        size_t same = 0;
        for (int32_t id = 3; id < 32000; id++) { /* pieces agree apart from <s>, </s> spelled "\n<s>\n" in .bin */
            size_t la, lb;
            const char *pa = sc_tokenizer_piece(a, id, &la), *pb = sc_tokenizer_piece(b, id, &lb);
            same += la == lb && memcmp(pa, pb, la) == 0;
        }
        CHECK(same == 32000 - 3);
        CHECK(sc_tokenizer_token_type(a, 1) == SC_TOKTYPE_CONTROL && sc_tokenizer_token_type(a, 13) == SC_TOKTYPE_BYTE);
    }
    sc_tokenizer_free(a);
    sc_tokenizer_free(b);
    small_models();
    hostile(mpath);
    return sc_test_finish();
}
