/* test_tok_hf.c - every tokenizer kind on real files: decode(encode(x)) == x
 * on the text assets (Llama-3, Qwen3, Gemma-3 and Mistral tokenizer.json,
 * Llama-2 tokenizer.model / tokenizer.bin / vocab GGUF, and a GGUF "gpt2"
 * vocabulary written from Llama-3's tokenizer.json, which must encode
 * exactly like it), special-token parsing, BOS/EOS facts, the loader's
 * choices, and hostile tokenizer.json files. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "testing.h"
#include "tokenizer.h"

static sc_err err;

typedef struct docs {
    char **d;
    size_t *n;
    size_t count, cap;
} docs;

static sc_status collect(void *user, const char *doc, size_t len, sc_err *e) {
    docs *l = user;
    if (l->count == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->d = realloc(l->d, l->cap * sizeof *l->d);
        l->n = realloc(l->n, l->cap * sizeof *l->n);
    }
    l->d[l->count] = malloc(len + 1);
    memcpy(l->d[l->count], doc, len);
    l->d[l->count][len] = 0;
    l->n[l->count++] = len;
    return SC_OK;
}

static void free_docs(docs *l) {
    for (size_t i = 0; i < l->count; i++) free(l->d[i]);
    free(l->d);
    free(l->n);
    memset(l, 0, sizeof *l);
}

/* The test documents: TinyStories stories, the sample split on
 * <|endoftext|>, WikiText paragraphs, and the whole WikiText file. */
static docs g_docs;

static void load_docs(void) {
    const char *files[] = {"text/tinystories_valid_a.txt", "text/tinystories_sample.txt", "text/wiki.test.raw"};
    const char *seps[] = {NULL, "<|endoftext|>", NULL};
    const int64_t maxd[] = {300, 0, 400};
    for (int f = 0; f < 3; f++) {
        const char *p = sc_asset(files[f]);
        char *text;
        size_t len;
        if (!p || sc_read_file(p, 1 << 24, &text, &len, &err) != SC_OK) continue;
        sc_data_opts o;
        sc_data_opts_default(&o);
        o.separator = seps[f];
        o.max_docs = maxd[f];
        CHECK(sc_data_split_text(p, text, len, &o, collect, &g_docs, &err) == SC_OK);
        if (f == 2) collect(&g_docs, text, len, &err); /* the whole file as one document */
        free(text);
    }
}

/* decode(encode(x)) == x for every document, without and with BOS. */
static void round_trip(const char *label, const sc_tokenizer *t) {
    size_t bad = 0, tokens = 0, bytes = 0;
    double t0 = sc_now();
    for (size_t i = 0; i < g_docs.count; i++) {
        for (int bos = 0; bos < 2; bos++) {
            sc_tokens tk = {0};
            char *s = NULL;
            size_t n = 0;
            bool ok = sc_tokenizer_encode(t, g_docs.d[i], g_docs.n[i], bos, false, &tk, &err) == SC_OK &&
                      sc_tokenizer_decode_all(t, tk.ids, tk.n, &s, &n, &err) == SC_OK && n == g_docs.n[i] &&
                      memcmp(s, g_docs.d[i], n) == 0;
            if (!ok && bad++ < 3) fprintf(stderr, "%s: document %zu (%zu bytes, bos %d) fails the round trip\n", label, i, g_docs.n[i], bos);
            if (!bos) {
                tokens += tk.n;
                bytes += g_docs.n[i];
            }
            free(s);
            sc_tokens_free(&tk);
        }
    }
    printf("%-34s %zu documents (%zu bytes, %zu tokens, %.2f MB/s incl. decode): %zu fail the round trip\n", label,
           g_docs.count, bytes, tokens, 2 * bytes / 1e6 / (sc_now() - t0), bad);
    CHECK_MSG(bad == 0, "%s", label);
}

static void encode_str(const sc_tokenizer *t, const char *s, unsigned flags, sc_tokens *out) {
    out->n = 0;
    CHECK_MSG(sc_tokenizer_encode_ex(t, s, strlen(s), flags, out, &err) == SC_OK, "%s", err.msg);
}

static bool ids_are(const sc_tokens *t, const int32_t *want, size_t n) {
    return t->n == n && memcmp(t->ids, want, n * sizeof *want) == 0;
}

static bool any_at_least(const sc_tokens *t, int32_t v) {
    for (size_t i = 0; i < t->n; i++)
        if (t->ids[i] >= v) return true;
    return false;
}

/* Special tokens: parsed only when asked; non-special added tokens always. */
static void specials(const sc_tokenizer *llama3, const sc_tokenizer *qwen, const sc_tokenizer *mistral) {
    sc_tokens tk = {0};
    const char *s = "<|begin_of_text|>Hi<|eot_id|>";
    encode_str(llama3, s, SC_ENC_SPECIAL, &tk);
    CHECK(tk.n >= 3 && tk.ids[0] == 128000 && tk.ids[tk.n - 1] == sc_tokenizer_find(llama3, "<|eot_id|>", 10));
    encode_str(llama3, s, 0, &tk);
    CHECK(tk.n > 3 && !any_at_least(&tk, 128000));
    char *dec = NULL;
    size_t n;
    CHECK(sc_tokenizer_decode_all(llama3, tk.ids, tk.n, &dec, &n, &err) == SC_OK && strcmp(dec, s) == 0);
    free(dec);
    encode_str(qwen, "<|im_start|>user\nhi<think>", SC_ENC_SPECIAL, &tk);
    CHECK(tk.n >= 4 && tk.ids[0] == 151644 && tk.ids[tk.n - 1] == 151667);
    encode_str(qwen, "<|im_start|>user\nhi<think>", 0, &tk);
    CHECK(tk.n >= 4 && tk.ids[0] != 151644 && tk.ids[tk.n - 1] == 151667); /* <think> is not special */
    CHECK(sc_tokenizer_bos(qwen) == -1 && sc_tokenizer_eos(qwen) == 151645 && !sc_tokenizer_add_bos_default(qwen));
    /* Mistral, as its MANIFEST entry says: "Hello world" -> 1 22557 1526 */
    encode_str(mistral, "Hello world", SC_ENC_BOS, &tk);
    CHECK(ids_are(&tk, (const int32_t[]){1, 22557, 1526}, 3));
    encode_str(mistral, "Hello world", SC_ENC_BOS | SC_ENC_EOS, &tk);
    CHECK(tk.n == 4 && tk.ids[3] == 2);
    /* after a special token the dummy prefix comes back (legacy Llama/Mistral) */
    encode_str(mistral, "<s>Hello", SC_ENC_SPECIAL, &tk);
    CHECK(ids_are(&tk, (const int32_t[]){1, 22557}, 2));
    CHECK(sc_tokenizer_bos(llama3) == 128000 && sc_tokenizer_eos(llama3) == 128001);
    CHECK(sc_tokenizer_chat_template(llama3) && strstr(sc_tokenizer_chat_template(llama3), "start_header_id"));
    sc_tokens_free(&tk);
}

/* ---- a GGUF "gpt2" vocabulary written from Llama-3's tokenizer.json ---- */

static const char *write_gpt2_gguf(const char *json_path, bool with_merges, const char *pre) {
    char *text;
    size_t len;
    if (sc_read_file(json_path, 1 << 26, &text, &len, &err) != SC_OK) return NULL;
    cJSON *j = cJSON_Parse(text);
    free(text);
    const cJSON *model = cJSON_GetObjectItem(j, "model"), *vocab = cJSON_GetObjectItem(model, "vocab"),
                *merges = cJSON_GetObjectItem(model, "merges"), *added = cJSON_GetObjectItem(j, "added_tokens");
    int n = cJSON_GetArraySize(vocab) + cJSON_GetArraySize(added);
    const char **toks = calloc((size_t)n, sizeof *toks);
    int32_t *types = calloc((size_t)n, sizeof *types);
    for (const cJSON *v = vocab->child; v; v = v->next) {
        toks[v->valueint] = v->string;
        types[v->valueint] = 1;
    }
    for (const cJSON *a = added->child; a; a = a->next) {
        int id = cJSON_GetObjectItem(a, "id")->valueint;
        toks[id] = cJSON_GetObjectItem(a, "content")->valuestring;
        types[id] = 3;
    }
    int nm = cJSON_GetArraySize(merges);
    const char **ms = calloc((size_t)nm, sizeof *ms);
    int k = 0;
    for (const cJSON *m = merges->child; m; m = m->next) ms[k++] = m->valuestring;
    gguf_writer w;
    gw_init(&w);
    gw_kv_str(&w, "tokenizer.ggml.model", "gpt2");
    gw_kv_str(&w, "tokenizer.ggml.pre", pre);
    gw_kv_str_array(&w, "tokenizer.ggml.tokens", toks, (size_t)n);
    gw_kv_array(&w, "tokenizer.ggml.token_type", 5, (uint64_t)n, types, 4);
    if (with_merges) gw_kv_str_array(&w, "tokenizer.ggml.merges", ms, (size_t)nm);
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 128000);
    gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 128001);
    const char *out = sc_tmp_path(with_merges ? "llama3-vocab.gguf" : "llama3-nomerges.gguf");
    CHECK(gw_write_file(&w, out));
    gw_free(&w);
    free(toks);
    free(types);
    free(ms);
    cJSON_Delete(j);
    return out;
}

static void gguf_gpt2(const char *json_path, const sc_tokenizer *ref) {
    char gpath[4096];
    const char *p = write_gpt2_gguf(json_path, true, "llama-bpe");
    if (p) snprintf(gpath, sizeof gpath, "%s", p);
    p = p ? gpath : NULL;
    sc_tokenizer *t = NULL;
    CHECK_MSG(p && sc_gguf_load_tokenizer(p, &t, &err) == SC_OK, "%s", err.msg);
    if (!t) return;
    CHECK(strcmp(sc_tokenizer_kind(t), "bpe-bytelevel") == 0 && sc_tokenizer_vocab_size(t) == 128256);
    size_t differ = 0;
    for (size_t i = 0; i < g_docs.count; i++) {
        sc_tokens a = {0}, b = {0};
        sc_tokenizer_encode(t, g_docs.d[i], g_docs.n[i], true, false, &a, &err);
        sc_tokenizer_encode(ref, g_docs.d[i], g_docs.n[i], true, false, &b, &err);
        if (a.n != b.n || memcmp(a.ids, b.ids, a.n * sizeof *a.ids) != 0) differ++;
        sc_tokens_free(&a);
        sc_tokens_free(&b);
    }
    printf("GGUF gpt2 (llama-bpe) vs tokenizer.json: %zu of %zu documents differ\n", differ, g_docs.count);
    CHECK(differ == 0);
    round_trip("GGUF gpt2 vocabulary (llama-bpe)", t);
    sc_tokenizer_free(t);
    /* the same file through the loader's dispatch */
    CHECK(sc_tokenizer_load_auto(p, 0, &t, &err) == SC_OK && t && sc_tokenizer_vocab_size(t) == 128256);
    sc_tokenizer_free(t);
    /* no merges: unsupported, named */
    p = write_gpt2_gguf(json_path, false, "llama-bpe");
    CHECK(p && sc_gguf_load_tokenizer(p, &t, &err) == SC_EUNSUPPORTED && strstr(err.msg, "merges") && strstr(err.msg, p));
    p = write_gpt2_gguf(json_path, true, "no-such-pre");
    CHECK(p && sc_gguf_load_tokenizer(p, &t, &err) == SC_EUNSUPPORTED && strstr(err.msg, "no-such-pre"));
}

/* ---- hostile tokenizer.json ---- */

static void expect_bad(const char *name, const char *json, sc_status want, const char *needle) {
    const char *p = sc_tmp_path(name);
    sc_write_bytes(p, json, strlen(json));
    sc_tokenizer *t = NULL;
    sc_status st = sc_tokenizer_load_hf(p, &t, &err);
    CHECK_MSG(st != SC_OK && (want == SC_OK || st == want) && !t && strstr(err.msg, p) && !strchr(err.msg, '\n') &&
                  (!needle || strstr(err.msg, needle)),
              "%s: status %d: %s", name, (int)st, err.msg);
    sc_tokenizer_free(t);
}

static void hostile(const char *llama3_json) {
    const char *ok = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}";
    const char *p = sc_tmp_path("tiny.json");
    sc_write_bytes(p, ok, strlen(ok));
    sc_tokenizer *t = NULL;
    CHECK_MSG(sc_tokenizer_load_hf(p, &t, &err) == SC_OK, "%s", err.msg);
    sc_tokens tk = {0};
    if (t) encode_str(t, "abba", 0, &tk);
    CHECK(ids_are(&tk, (const int32_t[]){2, 1, 0}, 3));
    sc_tokens_free(&tk);
    sc_tokenizer_free(t);
    /* every truncation of a valid file fails cleanly */
    for (size_t cut = 0; cut < strlen(ok); cut++) {
        char name[32];
        snprintf(name, sizeof name, "cut%zu.json", cut);
        char buf[256];
        memcpy(buf, ok, cut);
        buf[cut] = 0;
        expect_bad(name, buf, SC_OK, NULL);
    }
    expect_bad("notjson.json", "this is not json", SC_EFORMAT, "line 1");
    expect_bad("deep.json", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", SC_EFORMAT, "deep");
    expect_bad("unknown_merge.json", "{\"model\":{\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a c\"]}}", SC_EFORMAT, "merge 0");
    expect_bad("merge_result.json", "{\"model\":{\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}", SC_EFORMAT, "merge 0");
    expect_bad("merge_form.json", "{\"model\":{\"vocab\":{\"a\":0},\"merges\":[\"a\"]}}", SC_EFORMAT, "merges[0]");
    expect_bad("merge_arr.json", "{\"model\":{\"vocab\":{\"a\":0},\"merges\":[[\"a\",1]]}}", SC_EFORMAT, "merges[0]");
    expect_bad("huge_id.json", "{\"model\":{\"vocab\":{\"a\":1000000000000},\"merges\":[]}}", SC_EFORMAT, "vocab");
    expect_bad("neg_id.json", "{\"model\":{\"vocab\":{\"a\":-1},\"merges\":[]}}", SC_EFORMAT, "vocab");
    expect_bad("frac_id.json", "{\"model\":{\"vocab\":{\"a\":0.5},\"merges\":[]}}", SC_EFORMAT, "vocab");
    expect_bad("dup_id.json", "{\"model\":{\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}", SC_EFORMAT, "two tokens");
    expect_bad("empty_vocab.json", "{\"model\":{\"vocab\":{},\"merges\":[]}}", SC_EFORMAT, "empty");
    expect_bad("no_model.json", "{\"version\":\"1.0\"}", SC_EFORMAT, "model");
    expect_bad("unigram.json", "{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", SC_EUNSUPPORTED, "Unigram");
    expect_bad("added_bad.json", "{\"added_tokens\":[{\"id\":\"x\"}],\"model\":{\"vocab\":{\"a\":0},\"merges\":[]}}",
               SC_EFORMAT, "added_tokens");
    expect_bad("bad_regex.json",
               "{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"},"
               "\"model\":{\"vocab\":{\"a\":0},\"merges\":[]}}", SC_EUNSUPPORTED, "regex");
    expect_bad("bad_norm.json", "{\"normalizer\":{\"type\":\"Fancy\"},\"model\":{\"vocab\":{\"a\":0},\"merges\":[]}}",
               SC_EUNSUPPORTED, "Fancy");
    expect_bad("surrogate.json", "{\"model\":{\"vocab\":{\"\\ud800\":0},\"merges\":[]}}", SC_EFORMAT, "surrogate");
    expect_bad("trailing.json", "{\"model\":{\"vocab\":{\"a\":0},\"merges\":[]}} x", SC_EFORMAT, "trailing");
    CHECK(sc_tokenizer_load_hf(sc_tmp_path("missing.json"), &t, &err) == SC_EIO);
    /* the real Llama-3 file cut at many places */
    char *text;
    size_t len;
    if (sc_read_file(llama3_json, 1 << 26, &text, &len, &err) == SC_OK) {
        size_t cuts[] = {1, 100, 5000, len / 3, len / 2, len - 2};
        for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
            char save = text[cuts[i]];
            text[cuts[i]] = 0;
            char name[48];
            snprintf(name, sizeof name, "llama3_cut%zu.json", cuts[i]);
            expect_bad(name, text, SC_EFORMAT, NULL);
            text[cuts[i]] = save;
        }
        free(text);
    }
}

int main(void) {
    const char *l3 = sc_asset("tokenizers/hf/llama3/tokenizer.json"), *q3 = sc_asset("tokenizers/hf/qwen3/tokenizer.json"),
               *g3 = sc_asset("tokenizers/hf/gemma3/tokenizer.json"),
               *mi = sc_asset("tokenizers/hf/mistral_via_lenml-llama2/tokenizer.json"),
               *spm = sc_asset("tokenizers/llama2_sentencepiece/tokenizer.model"),
               *bin = sc_asset("tokenizers/llama2_sentencepiece/tokenizer.bin"),
               *vg = sc_asset("tokenizers/llama_cpp_vocab/ggml-vocab-llama-spm.gguf");
    if (!l3 || !q3 || !g3 || !mi || !spm || !bin || !vg) return sc_test_finish();
    /* sc_asset and sc_tmp_path share a ring of buffers: keep copies */
    char keep[7][4096];
    const char **paths[] = {&l3, &q3, &g3, &mi, &spm, &bin, &vg};
    for (int i = 0; i < 7; i++) {
        snprintf(keep[i], sizeof keep[i], "%s", *paths[i]);
        *paths[i] = keep[i];
    }
    load_docs();
    CHECK(g_docs.count > 600);
    sc_tokenizer *llama3 = NULL, *qwen = NULL, *mistral = NULL, *t = NULL;
    CHECK_MSG(sc_tokenizer_load_hf(l3, &llama3, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_tokenizer_load_hf(q3, &qwen, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_tokenizer_load_hf(mi, &mistral, &err) == SC_OK, "%s", err.msg);
    if (!llama3 || !qwen || !mistral) return sc_test_finish();
    round_trip("Llama-3 tokenizer.json", llama3);
    round_trip("Qwen3 tokenizer.json", qwen);
    round_trip("Mistral tokenizer.json", mistral);
    double t0 = sc_now();
    CHECK_MSG(sc_tokenizer_load_hf(g3, &t, &err) == SC_OK, "%s", err.msg);
    printf("Gemma-3 tokenizer.json loaded in %.3f s\n", sc_now() - t0);
    if (t) {
        CHECK(sc_tokenizer_bos(t) == 2 && strcmp(sc_tokenizer_kind(t), "bpe-sentencepiece") == 0);
        round_trip("Gemma-3 tokenizer.json", t);
        sc_tokenizer_free(t);
    }
    /* the SentencePiece vocabulary three ways */
    CHECK_MSG(sc_tokenizer_load_auto(spm, 0, &t, &err) == SC_OK, "%s", err.msg);
    if (t) round_trip("Llama-2 tokenizer.model", t);
    sc_tokenizer_free(t);
    CHECK_MSG(sc_tokenizer_load_auto(bin, 32000, &t, &err) == SC_OK, "%s", err.msg);
    if (t) round_trip("Llama-2 tokenizer.bin", t);
    sc_tokenizer_free(t);
    CHECK_MSG(sc_tokenizer_load_auto(vg, 0, &t, &err) == SC_OK, "%s", err.msg);
    if (t) round_trip("Llama-2 vocab GGUF", t);
    sc_tokenizer_free(t);
    /* without the model's vocabulary size: every record the file holds */
    CHECK_MSG(sc_tokenizer_load_auto(bin, 0, &t, &err) == SC_OK, "%s", err.msg);
    CHECK(t && sc_tokenizer_vocab_size(t) == 32000);
    sc_tokenizer_free(t);
    /* a directory: tokenizer.json inside */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", q3);
    *strrchr(dir, '/') = 0;
    CHECK(sc_tokenizer_load_auto(dir, 0, &t, &err) == SC_OK && t && sc_tokenizer_vocab_size(t) == 151669);
    sc_tokenizer_free(t);
    CHECK(sc_tokenizer_load_auto(sc_test_tmpdir(), 0, &t, &err) == SC_EIO);

    specials(llama3, qwen, mistral);
    gguf_gpt2(l3, llama3);
    hostile(l3);
    sc_tokenizer_free(llama3);
    sc_tokenizer_free(qwen);
    sc_tokenizer_free(mistral);
    free_docs(&g_docs);
    return sc_test_finish();
}
