/* test_data.c - document splitting (blank lines, separators), JSONL, and
 * pre-tokenized files, including malformed input. */
#include <string.h>

#include "data.h"
#include "testing.h"

static sc_err err;

typedef struct counter {
    size_t n;
    char first[64], last[64];
} counter;

static sc_status count_doc(void *user, const char *doc, size_t len, sc_err *e) {
    counter *c = user;
    size_t k = len < 63 ? len : 63;
    if (c->n == 0) {
        memcpy(c->first, doc, k);
        c->first[k] = 0;
    }
    memcpy(c->last, doc, k);
    c->last[k] = 0;
    c->n++;
    return SC_OK;
}

static counter split(const char *name, const char *text, const char *sep, sc_data_kind kind) {
    sc_data_opts o;
    sc_data_opts_default(&o);
    o.separator = sep;
    o.kind = kind;
    counter c = {0};
    sc_status st = sc_data_split_text(name, text, strlen(text), &o, count_doc, &c, &err);
    if (st) c.n = (size_t)-1;
    return c;
}

int main(void) {
    counter c = split("x.txt", "a b\nc\n\n\n  \nd\n\ne", NULL, SC_DATA_AUTO);
    CHECK(c.n == 3);
    CHECK(strcmp(c.first, "a b\nc") == 0);
    CHECK(strcmp(c.last, "e") == 0);
    c = split("x.txt", "\n\none<|endoftext|>\ntwo\n\nstill two<|endoftext|><|endoftext|>three\n", "<|endoftext|>",
              SC_DATA_AUTO);
    CHECK(c.n == 3);
    CHECK(strcmp(c.first, "one") == 0 && strcmp(c.last, "three") == 0);
    c = split("x.txt", "", NULL, SC_DATA_AUTO);
    CHECK(c.n == 0);
    c = split("d.jsonl", "{\"text\": \"hello\"}\n\n{\"text\": \"w\\u00e9rld\", \"id\": 3}\n", NULL, SC_DATA_AUTO);
    CHECK(c.n == 2);
    CHECK(strcmp(c.last, "w\xc3\xa9rld") == 0);
    c = split("d.jsonl", "{\"text\": \"ok\"}\n{\"txt\": 1}\n", NULL, SC_DATA_AUTO);
    CHECK(c.n == (size_t)-1 && strstr(err.msg, "line 2"));
    c = split("d.jsonl", "{\"text\": \"ok\"}\n{broken\n", NULL, SC_DATA_JSONL);
    CHECK(c.n == (size_t)-1 && strstr(err.msg, "d.jsonl: line 2"));

    /* the real files */
    const char *valid = sc_asset("text/tinystories_valid_a.txt"), *sample = sc_asset("text/tinystories_sample.txt"),
               *tokp = sc_asset("models/tok512.bin");
    if (!valid || !sample || !tokp) return sc_test_finish();
    sc_tokenizer *tok;
    CHECK(sc_tokenizer_load_llama2c(tokp, 512, &tok, &err) == SC_OK);
    sc_data_opts o;
    sc_data_opts_default(&o);
    sc_dataset d;
    CHECK(sc_data_load_text(valid, tok, &o, &d, &err) == SC_OK);
    CHECK(d.n_seqs == 3010); /* MANIFEST: the first 3,010 validation stories */
    for (size_t i = 0; i < d.n_seqs; i++) CHECK(d.seqs[i].ids[0] == 1);
    /* --skip-docs / --max-docs select a window of documents: a held-out split,
     * in file order and after --shuffle-seed shuffling alike */
    for (int shuffled = 0; shuffled < 2; shuffled++) {
        sc_data_opts w = o;
        sc_dataset all, part, tail;
        w.shuffle = shuffled;
        w.seed = 7;
        CHECK(sc_data_load_text(valid, tok, &w, &all, &err) == SC_OK);
        w.skip_docs = 2000;
        w.max_docs = 5;
        CHECK(sc_data_load_text(valid, tok, &w, &part, &err) == SC_OK);
        bool same = part.n_seqs == 5;
        for (size_t i = 0; same && i < 5; i++)
            same = part.seqs[i].n == all.seqs[2000 + i].n &&
                   memcmp(part.seqs[i].ids, all.seqs[2000 + i].ids, part.seqs[i].n * sizeof(int32_t)) == 0;
        CHECK_MSG(same, "skip 2000, max 5 (shuffled %d)", shuffled);
        sc_dataset_free(&part);
        w.max_docs = 0;
        CHECK(sc_data_load_text(valid, tok, &w, &tail, &err) == SC_OK && tail.n_seqs == 1010);
        w.skip_docs = 3010;
        CHECK(sc_data_load_text(valid, tok, &w, &part, &err) == SC_EFORMAT && strstr(err.msg, "skip"));
        sc_dataset_free(&all);
        sc_dataset_free(&tail);
    }
    sc_dataset_free(&d);
    o.separator = "<|endoftext|>";
    o.max_docs = 3;
    CHECK(sc_data_load_text(sample, tok, &o, &d, &err) == SC_OK);
    CHECK(d.n_seqs == 3);
    sc_dataset_free(&d);

    /* token files */
    const char *tp = sc_tmp_path("ids.txt");
    sc_write_bytes(tp, "1 2 3\n\n  7\t8 \r\n511\n", 19);
    CHECK(sc_data_load_tokens(tp, 512, 0, &d, &err) == SC_OK);
    CHECK(d.n_seqs == 3 && d.n_tokens == 6);
    CHECK(d.seqs[0].ids[0] == 1 && d.seqs[1].ids[1] == 8 && d.seqs[2].ids[0] == 511); /* no BOS added */
    sc_dataset_free(&d);
    sc_write_bytes(tp, "1 2\n3 512\n", 10);
    CHECK(sc_data_load_tokens(tp, 512, 0, &d, &err) == SC_ERANGE);
    CHECK(strstr(err.msg, "line 2") && strstr(err.msg, tp));
    sc_write_bytes(tp, "1 2\n3 -4\n", 9);
    CHECK(sc_data_load_tokens(tp, 512, 0, &d, &err) == SC_EFORMAT);
    sc_write_bytes(tp, "99999999999999999999999\n", 24);
    CHECK(sc_data_load_tokens(tp, 512, 0, &d, &err) == SC_ERANGE);
    sc_write_bytes(tp, "\n\n", 2);
    CHECK(sc_data_load_tokens(tp, 512, 0, &d, &err) == SC_EFORMAT);
    CHECK(strstr(err.msg, "empty") != NULL);
    sc_write_bytes(tp, "\n \n\n", 4);
    CHECK(sc_data_load_text(tp, tok, &o, &d, &err) == SC_EFORMAT);
    CHECK(sc_data_load_tokens(sc_tmp_path("nope.txt"), 512, 0, &d, &err) == SC_EIO);
    sc_tokenizer_free(tok);
    return sc_test_finish();
}
