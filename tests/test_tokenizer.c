/* test_tokenizer.c - the llama2.c-style tokenizer: encode matches a straight
 * transcription of llama2.c's O(n^2) merge loop on real text, decode inverts
 * encode, byte fallback, and hostile tokenizer.bin files. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "data.h"
#include "testing.h"
#include "tokenizer.h"

static sc_err err;

/* llama2.c's encode, transcribed: a sorted vocabulary searched with
 * bsearch, O(n^2) merging. */
typedef struct sorted_piece {
    const char *s;
    size_t n;
    int id;
} sorted_piece;

static sorted_piece *g_sorted;
static int64_t g_nsorted;

static int cmp_piece(const void *a, const void *b) {
    const sorted_piece *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    return 0;
}

static void sort_vocab(const sc_tokenizer *t) {
    free(g_sorted);
    g_nsorted = sc_tokenizer_vocab_size(t);
    g_sorted = malloc((size_t)g_nsorted * sizeof *g_sorted);
    for (int64_t i = 0; i < g_nsorted; i++) {
        g_sorted[i].s = sc_tokenizer_piece(t, (int32_t)i, &g_sorted[i].n);
        g_sorted[i].id = (int)i;
    }
    qsort(g_sorted, (size_t)g_nsorted, sizeof *g_sorted, cmp_piece);
}

static int naive_lookup(const sc_tokenizer *t, const char *s, size_t n) {
    (void)t;
    sorted_piece key = {s, n, 0};
    const sorted_piece *hit = bsearch(&key, g_sorted, (size_t)g_nsorted, sizeof *g_sorted, cmp_piece);
    return hit ? hit->id : -1;
}

typedef struct vocab_index {
    const sc_tokenizer *t;
    float *scores;
} vocab_index;

static size_t naive_encode(const sc_tokenizer *t, const float *scores, const char *text, size_t len, int *out) {
    size_t n = 0;
    if (len > 0) out[n++] = naive_lookup(t, " ", 1);
    char buf[64];
    size_t bl = 0;
    for (size_t i = 0; i < len; i++) {
        if (((unsigned char)text[i] & 0xC0) != 0x80) bl = 0;
        buf[bl++] = text[i];
        if (i + 1 < len && ((unsigned char)text[i + 1] & 0xC0) == 0x80 && bl < 4) continue;
        int id = naive_lookup(t, buf, bl);
        if (id != -1) {
            out[n++] = id;
        } else {
            for (size_t k = 0; k < bl; k++) out[n++] = (unsigned char)buf[k] + 3;
        }
        bl = 0;
    }
    char *cat = malloc(512);
    for (;;) {
        float best = -1e10f;
        int best_id = -1;
        size_t best_idx = 0;
        for (size_t i = 0; i + 1 < n; i++) {
            size_t la, lb;
            const char *a = sc_tokenizer_piece(t, out[i], &la), *b = sc_tokenizer_piece(t, out[i + 1], &lb);
            if (la + lb > 500) continue;
            memcpy(cat, a, la);
            memcpy(cat + la, b, lb);
            int id = naive_lookup(t, cat, la + lb);
            if (id != -1 && scores[id] > best) {
                best = scores[id];
                best_id = id;
                best_idx = i;
            }
        }
        if (best_idx == 0 && best_id == -1) break;
        out[best_idx] = best_id;
        for (size_t i = best_idx + 1; i + 1 < n; i++) out[i] = out[i + 1];
        n--;
    }
    free(cat);
    return n;
}

/* scores re-read straight from the file, independently of the tokenizer */
static float *read_scores(const char *path, int64_t V) {
    FILE *f = fopen(path, "rb");
    float *s = calloc((size_t)V, sizeof *s);
    int maxlen, len;
    if (!f || !s || fread(&maxlen, 4, 1, f) != 1) goto fail;
    for (int64_t i = 0; i < V; i++) {
        if (fread(&s[i], 4, 1, f) != 1 || fread(&len, 4, 1, f) != 1 || fseek(f, len, SEEK_CUR) != 0) goto fail;
    }
    fclose(f);
    return s;
fail:
    if (f) fclose(f);
    free(s);
    return NULL;
}

typedef struct doc_list {
    char **docs;
    size_t *lens;
    size_t n, cap;
} doc_list;

static sc_status collect(void *user, const char *doc, size_t len, sc_err *e) {
    doc_list *l = user;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->docs = realloc(l->docs, l->cap * sizeof *l->docs);
        l->lens = realloc(l->lens, l->cap * sizeof *l->lens);
    }
    l->docs[l->n] = malloc(len + 1);
    memcpy(l->docs[l->n], doc, len);
    l->docs[l->n][len] = 0;
    l->lens[l->n++] = len;
    return SC_OK;
}

static void free_docs(doc_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->docs[i]);
    free(l->docs);
    free(l->lens);
    memset(l, 0, sizeof *l);
}

/* encode == naive, and decode(encode(x)) == x, over the documents of a file */
static void check_file(const sc_tokenizer *t, const float *scores, const char *text_path, const char *sep,
                       size_t max_docs, size_t max_naive_len) {
    char *text;
    size_t len;
    CHECK(sc_read_file(text_path, 1 << 26, &text, &len, &err) == SC_OK);
    sc_data_opts o;
    sc_data_opts_default(&o);
    o.separator = sep;
    o.max_docs = (int64_t)max_docs;
    doc_list docs = {0};
    CHECK(sc_data_split_text(text_path, text, len, &o, collect, &docs, &err) == SC_OK);
    size_t naive_checked = 0, mismatches = 0, roundtrip_bad = 0;
    sort_vocab(t);
    int *ref = malloc(sizeof(int) * 70000);
    char *dec = malloc(1 << 20);
    for (size_t i = 0; i < docs.n; i++) {
        sc_tokens tk = {0};
        CHECK(sc_tokenizer_encode(t, docs.docs[i], docs.lens[i], true, false, &tk, &err) == SC_OK);
        if (docs.lens[i] <= max_naive_len) {
            size_t n = naive_encode(t, scores, docs.docs[i], docs.lens[i], ref);
            bool same = n + 1 == tk.n;
            for (size_t k = 0; same && k < n; k++) same = ref[k] == tk.ids[k + 1];
            if (!same) mismatches++;
            naive_checked++;
        }
        size_t dl = 0;
        for (size_t k = 1; k < tk.n; k++) dl += sc_tokenizer_decode(t, tk.ids[k - 1], tk.ids[k], dec + dl, (1 << 20) - dl);
        if (dl != docs.lens[i] || memcmp(dec, docs.docs[i], dl) != 0) roundtrip_bad++;
        sc_tokens_free(&tk);
    }
    printf("%s: %zu docs, %zu compared with the naive encoder (%zu differ), %zu fail the round trip\n", text_path,
           docs.n, naive_checked, mismatches, roundtrip_bad);
    CHECK(docs.n > 0);
    CHECK(naive_checked > 0);
    CHECK(mismatches == 0);
    CHECK(roundtrip_bad == 0);
    free(ref);
    free(dec);
    free_docs(&docs);
    free(text);
}

static void hostile(const char *good_path) {
    char *buf;
    size_t len;
    CHECK(sc_read_file(good_path, 1 << 20, &buf, &len, &err) == SC_OK);
    const char *p = sc_tmp_path("tok_bad.bin");
    sc_tokenizer *t;
    /* truncated at many lengths */
    for (size_t cut = 0; cut < len; cut += (cut < 64 ? 1 : 97)) {
        sc_write_bytes(p, buf, cut);
        sc_status st = sc_tokenizer_load_llama2c(p, 512, &t, &err);
        CHECK_MSG(st != SC_OK && strstr(err.msg, p), "cut %zu: %s", cut, err.msg);
    }
    /* a huge piece length and a negative one */
    char *bad = malloc(len);
    memcpy(bad, buf, len);
    int32_t huge = 0x7fffffff;
    memcpy(bad + 8, &huge, 4);
    sc_write_bytes(p, bad, len);
    CHECK(sc_tokenizer_load_llama2c(p, 512, &t, &err) == SC_EFORMAT);
    int32_t neg = -5;
    memcpy(bad + 8, &neg, 4);
    sc_write_bytes(p, bad, len);
    CHECK(sc_tokenizer_load_llama2c(p, 512, &t, &err) == SC_EFORMAT);
    memcpy(bad, &huge, 4); /* max_token_length */
    sc_write_bytes(p, bad, len);
    CHECK(sc_tokenizer_load_llama2c(p, 512, &t, &err) == SC_EFORMAT);
    /* asking for more tokens than the file holds */
    CHECK(sc_tokenizer_load_llama2c(good_path, 513, &t, &err) == SC_EFORMAT);
    /* no vocabulary size: all the records, which must end at the end of the file */
    CHECK_MSG(sc_tokenizer_load_llama2c(good_path, -1, &t, &err) == SC_OK, "%s", err.msg);
    CHECK(t && sc_tokenizer_vocab_size(t) == 512);
    sc_tokenizer_free(t);
    t = NULL;
    char *tail = calloc(len + 3, 1); /* trailing bytes */
    memcpy(tail, buf, len);
    CHECK(sc_write_bytes(p, tail, len + 3));
    free(tail);
    CHECK(sc_tokenizer_load_llama2c(p, -1, &t, &err) == SC_EFORMAT && strstr(err.msg, "give -m MODEL"));
    CHECK_MSG(sc_tokenizer_load_llama2c(p, 512, &t, &err) == SC_OK, "%s", err.msg);
    sc_tokenizer_free(t);
    t = NULL;
    CHECK(sc_tokenizer_load_llama2c(sc_tmp_path("missing.bin"), 512, &t, &err) == SC_EIO);
    free(bad);
    free(buf);
}

int main(void) {
    const char *tok512 = sc_asset("models/tok512.bin"), *llama2 = sc_asset("tokenizers/llama2_sentencepiece/tokenizer.bin"),
               *valid = sc_asset("text/tinystories_valid_a.txt"), *wiki = sc_asset("text/wiki.test.raw"),
               *sample = sc_asset("text/tinystories_sample.txt");
    if (!tok512 || !llama2 || !valid || !wiki || !sample) return sc_test_finish();
    sc_tokenizer *t;
    CHECK_MSG(sc_tokenizer_load_llama2c(tok512, 512, &t, &err) == SC_OK, "%s", err.msg);
    float *s512 = read_scores(tok512, 512);
    CHECK(s512 != NULL);

    /* basic facts */
    sc_tokens tk = {0};
    CHECK(sc_tokenizer_encode(t, "", 0, true, false, &tk, &err) == SC_OK);
    CHECK(tk.n == 1 && tk.ids[0] == 1); /* empty text: BOS only, no dummy prefix */
    tk.n = 0;
    CHECK(sc_tokenizer_encode(t, "Once upon a time", 16, true, true, &tk, &err) == SC_OK);
    CHECK(tk.n >= 4 && tk.ids[0] == 1 && tk.ids[tk.n - 1] == 2);
    tk.n = 0;
    const char *uni = "caf\xc3\xa9 \xf0\x9f\x98\x80!"; /* bytes not in a 512 vocab fall back to <0xXX> */
    CHECK(sc_tokenizer_encode(t, uni, strlen(uni), false, false, &tk, &err) == SC_OK);
    char dec[256];
    size_t dl = 0;
    int bytes = 0;
    for (size_t k = 0; k < tk.n; k++) {
        size_t pl;
        const char *pc = sc_tokenizer_piece(t, tk.ids[k], &pl);
        if (pl == 6 && pc[0] == '<' && pc[1] == '0') bytes++;
        dl += sc_tokenizer_decode(t, k ? tk.ids[k - 1] : 1, tk.ids[k], dec + dl, sizeof dec - dl);
    }
    CHECK(bytes >= 4);
    CHECK(dl == strlen(uni) && memcmp(dec, uni, dl) == 0);
    sc_tokens_free(&tk);

    check_file(t, s512, valid, NULL, 400, 100000);
    check_file(t, s512, sample, "<|endoftext|>", 0, 100000);
    check_file(t, s512, wiki, NULL, 300, 3000);
    sc_tokenizer_free(t);
    free(s512);

    /* the 32000-token Llama-2 vocabulary in llama2.c format */
    CHECK_MSG(sc_tokenizer_load_llama2c(llama2, 32000, &t, &err) == SC_OK, "%s", err.msg);
    float *s32k = read_scores(llama2, 32000);
    check_file(t, s32k, valid, NULL, 60, 3000);
    check_file(t, s32k, wiki, NULL, 60, 3000);
    sc_tokenizer_free(t);
    free(s32k);

    hostile(tok512);
    free(g_sorted);
    return sc_test_finish();
}
