/* test_tok_vectors.c - exact match with llama.cpp's tokenizer test vectors
 * (tokenizers/llama_cpp_vocab/ *.inp and *.out): llama-spm through the
 * llama2.c tokenizer.bin, the SentencePiece tokenizer.model and the vocab
 * GGUF; llama-bpe through Llama-3's tokenizer.json; qwen2 through Qwen3's.
 *
 * Framing: the .inp file is the strings, each followed by
 * "\n__ggml_vocab_test__\n" (so the newline before a separator line is not
 * part of the string); the .out file has one line of space-separated ids per
 * string. The vectors are encoded without BOS and without parsing special
 * tokens, as llama.cpp's test-tokenizer-0 does. */
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "testing.h"
#include "tokenizer.h"

#define MAX_CASES 256

typedef struct vec_set {
    char *inp, *outp;
    const char *text[MAX_CASES];
    size_t len[MAX_CASES];
    sc_tokens want[MAX_CASES];
    size_t n;
} vec_set;

static bool load_set(const char *name, vec_set *v) {
    char rel[256];
    sc_err err;
    size_t il, ol;
    memset(v, 0, sizeof *v);
    snprintf(rel, sizeof rel, "tokenizers/llama_cpp_vocab/ggml-vocab-%s.gguf.inp", name);
    const char *ip = sc_asset(rel);
    snprintf(rel, sizeof rel, "tokenizers/llama_cpp_vocab/ggml-vocab-%s.gguf.out", name);
    const char *op = sc_asset(rel);
    if (!ip || !op || sc_read_file(ip, 1 << 20, &v->inp, &il, &err) || sc_read_file(op, 1 << 20, &v->outp, &ol, &err))
        return false;
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep);
    for (char *p = v->inp; v->n < MAX_CASES;) {
        char *hit = strstr(p, sep);
        if (!hit) break;
        v->text[v->n] = p;
        v->len[v->n] = (size_t)(hit - p);
        v->n++;
        p = hit + sl;
    }
    size_t k = 0;
    for (char *line = v->outp; k < v->n && line && *line; k++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        for (char *s = line; *s;) {
            char *end;
            long id = strtol(s, &end, 10);
            if (end == s) break;
            sc_tokens_push(&v->want[k], (int32_t)id);
            s = end;
        }
        line = nl ? nl + 1 : NULL;
    }
    CHECK_MSG(k == v->n && v->n >= 40, "%s: %zu strings, %zu id lines", name, v->n, k);
    return true;
}

static void free_set(vec_set *v) {
    for (size_t i = 0; i < v->n; i++) sc_tokens_free(&v->want[i]);
    free(v->inp);
    free(v->outp);
}

static void print_ids(const char *label, const sc_tokens *t) {
    fprintf(stderr, "  %s:", label);
    for (size_t i = 0; i < t->n && i < 40; i++) fprintf(stderr, " %d", t->ids[i]);
    fprintf(stderr, "%s\n", t->n > 40 ? " ..." : "");
}

/* Encodes every string and compares; returns the number that match. */
static size_t run_set(const char *label, const sc_tokenizer *t, const vec_set *v) {
    size_t ok = 0;
    sc_err err;
    for (size_t i = 0; i < v->n; i++) {
        sc_tokens got = {0};
        sc_status st = sc_tokenizer_encode_ex(t, v->text[i], v->len[i], 0, &got, &err);
        bool same = st == SC_OK && got.n == v->want[i].n &&
                    (got.n == 0 || memcmp(got.ids, v->want[i].ids, got.n * sizeof *got.ids) == 0);
        if (same) {
            ok++;
        } else {
            fprintf(stderr, "%s: string %zu (%zu bytes) differs\n", label, i, v->len[i]);
            print_ids("want", &v->want[i]);
            print_ids("got ", &got);
        }
        sc_tokens_free(&got);
    }
    printf("%-40s %zu/%zu vectors match\n", label, ok, v->n);
    CHECK_MSG(ok == v->n, "%s: %zu of %zu", label, ok, v->n);
    return ok;
}

int main(void) {
    vec_set spm, bpe, qwen;
    sc_err err;
    sc_tokenizer *t;
    if (load_set("llama-spm", &spm)) {
        const char *bin = sc_asset("tokenizers/llama2_sentencepiece/tokenizer.bin");
        const char *model = sc_asset("tokenizers/llama2_sentencepiece/tokenizer.model");
        const char *gguf = sc_asset("tokenizers/llama_cpp_vocab/ggml-vocab-llama-spm.gguf");
        if (bin && sc_tokenizer_load_llama2c(bin, 32000, &t, &err) == SC_OK) {
            run_set("llama-spm via tokenizer.bin", t, &spm);
            sc_tokenizer_free(t);
        } else CHECK_MSG(0, "%s", err.msg);
        if (model && sc_tokenizer_load_sp_model(model, &t, &err) == SC_OK) {
            run_set("llama-spm via tokenizer.model", t, &spm);
            sc_tokenizer_free(t);
        } else CHECK_MSG(0, "%s", err.msg);
        if (gguf && sc_gguf_load_tokenizer(gguf, &t, &err) == SC_OK) {
            run_set("llama-spm via the vocab GGUF", t, &spm);
            sc_tokenizer_free(t);
        } else CHECK_MSG(0, "%s", err.msg);
        free_set(&spm);
    }
    if (load_set("llama-bpe", &bpe)) {
        const char *p = sc_asset("tokenizers/hf/llama3/tokenizer.json");
        if (p && sc_tokenizer_load_hf(p, &t, &err) == SC_OK) {
            run_set("llama-bpe via Llama-3 tokenizer.json", t, &bpe);
            sc_tokenizer_free(t);
        } else CHECK_MSG(0, "%s", err.msg);
        free_set(&bpe);
    }
    if (load_set("qwen2", &qwen)) {
        const char *p = sc_asset("tokenizers/hf/qwen3/tokenizer.json");
        if (p && sc_tokenizer_load_hf(p, &t, &err) == SC_OK) {
            run_set("qwen2 via Qwen3 tokenizer.json", t, &qwen);
            sc_tokenizer_free(t);
        } else CHECK_MSG(0, "%s", err.msg);
        free_set(&qwen);
    }
    return sc_test_finish();
}
