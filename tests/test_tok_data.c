/* test_tok_data.c - calibration data on real tokenizers: JSONL chat
 * conversations in the Llama-3, Gemma, ChatML (Qwen) and Mistral formats
 * (chosen from the tokenizer's chat template or given), BOS/EOS, seeded
 * shuffling, --max-docs after shuffling, packing into fixed-length
 * sequences; and the CLI: `tokenize`, and `ppl` with the data options. */
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "testing.h"
#include "tokenizer.h"

static sc_err err;
static char out[1 << 16];

static const char *CHAT =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \" Hi there \"},"
    " {\"role\": \"assistant\", \"content\": \"Hello!\"}]}\n"
    "{\"text\": \"A plain document.\"}\n"
    "{\"messages\": [{\"role\": \"user\", \"content\": \"2+2?\"}, {\"role\": \"assistant\", \"content\": \"4\"}]}\n";

static void render(sc_chat_format f, const char *want) {
    sc_chat_msg m[3] = {{"system", "Be brief.", 9}, {"user", " Hi there ", 10}, {"assistant", "Hello!", 6}};
    char *s = NULL;
    size_t n = 0;
    CHECK_MSG(sc_chat_render(f, m, 3, &s, &n, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(s && strcmp(s, want) == 0, "%s: got [%s]", sc_chat_name(f), s ? s : "");
    free(s);
}

static bool contains(const sc_tokens *t, int32_t id) {
    for (size_t i = 0; i < t->n; i++)
        if (t->ids[i] == id) return true;
    return false;
}

static void chat_data(const char *tok_path, sc_chat_format want_auto, int32_t first, int32_t marker) {
    sc_tokenizer *t = NULL;
    CHECK_MSG(sc_tokenizer_load_auto(tok_path, 0, &t, &err) == SC_OK, "%s", err.msg);
    if (!t) return;
    CHECK(sc_chat_detect(sc_tokenizer_chat_template(t)) == want_auto);
    const char *p = sc_tmp_path("chat.jsonl");
    sc_write_bytes(p, CHAT, strlen(CHAT));
    sc_data_opts o;
    sc_data_opts_default(&o);
    o.add_bos = sc_tokenizer_add_bos_default(t);
    sc_dataset d;
    CHECK_MSG(sc_data_load_text(p, t, &o, &d, &err) == SC_OK, "%s", err.msg);
    if (d.n_seqs == 3) {
        CHECK_MSG(d.seqs[0].ids[0] == first, "%s: first id %d", tok_path, d.seqs[0].ids[0]);
        CHECK(contains(&d.seqs[0], marker) && contains(&d.seqs[2], marker) && !contains(&d.seqs[1], marker));
        char *s = NULL;
        size_t n;
        CHECK(sc_tokenizer_decode_all(t, d.seqs[0].ids, d.seqs[0].n, &s, &n, &err) == SC_OK);
        CHECK(s && strstr(s, "Hi there") && strstr(s, "Hello!") && strstr(s, "Be brief."));
        free(s);
    } else {
        CHECK_MSG(0, "%s: %zu sequences", tok_path, d.n_seqs);
    }
    sc_dataset_free(&d);
    sc_tokenizer_free(t);
}

static void order_of(const sc_dataset *d, int32_t *firsts, size_t n) {
    for (size_t i = 0; i < n && i < d->n_seqs; i++) firsts[i] = d->seqs[i].n > 1 ? d->seqs[i].ids[1] * 1000 + (int32_t)d->seqs[i].n : -1;
}

static void shuffle_pack(const sc_tokenizer *t, const char *text) {
    sc_data_opts o;
    sc_data_opts_default(&o);
    sc_dataset plain, a, b, c;
    CHECK(sc_data_load_text(text, t, &o, &plain, &err) == SC_OK);
    o.shuffle = true;
    o.seed = 42;
    CHECK(sc_data_load_text(text, t, &o, &a, &err) == SC_OK);
    CHECK(sc_data_load_text(text, t, &o, &b, &err) == SC_OK);
    o.seed = 43;
    CHECK(sc_data_load_text(text, t, &o, &c, &err) == SC_OK);
    CHECK(a.n_seqs == plain.n_seqs && a.n_tokens == plain.n_tokens && b.n_seqs == a.n_seqs);
    int32_t oa[64], ob[64], oc[64], op[64];
    order_of(&a, oa, 64);
    order_of(&b, ob, 64);
    order_of(&c, oc, 64);
    order_of(&plain, op, 64);
    CHECK(memcmp(oa, ob, sizeof oa) == 0);  /* same seed, same order */
    CHECK(memcmp(oa, oc, sizeof oa) != 0);  /* another seed, another order */
    CHECK(memcmp(oa, op, sizeof oa) != 0);  /* shuffled at all */
    /* the same permutation whether documents or sequences are shuffled */
    sc_dataset_shuffle(&plain, 42);
    int32_t os[64];
    order_of(&plain, os, 64);
    CHECK(memcmp(oa, os, sizeof oa) == 0);
    /* --max-docs after shuffling: a prefix of the shuffled order */
    o.seed = 42;
    o.max_docs = 10;
    sc_dataset m;
    CHECK(sc_data_load_text(text, t, &o, &m, &err) == SC_OK && m.n_seqs == 10);
    int32_t om[10];
    order_of(&m, om, 10);
    CHECK(memcmp(om, oa, sizeof om) == 0);
    sc_dataset_free(&m);
    /* packing: every sequence exactly N tokens, the tail dropped */
    o.shuffle = false;
    o.max_docs = 0;
    o.pack = 256;
    o.add_eos = true;
    sc_dataset p;
    CHECK(sc_data_load_text(text, t, &o, &p, &err) == SC_OK);
    size_t eos_total = 0;
    for (size_t i = 0; i < p.n_seqs; i++) {
        CHECK(p.seqs[i].n == 256);
        for (size_t k = 0; k < p.seqs[i].n; k++) eos_total += p.seqs[i].ids[k] == sc_tokenizer_eos(t);
    }
    size_t total = plain.n_tokens + plain.n_seqs; /* one EOS per document */
    CHECK(p.n_seqs == total / 256 && p.n_tokens == p.n_seqs * 256);
    CHECK(eos_total >= p.n_seqs * 256 / (total / plain.n_seqs + 1) / 2);
    CHECK(p.seqs[0].ids[0] == sc_tokenizer_bos(t));
    sc_dataset_free(&p);
    o.pack = 1 << 24; /* more than the whole file */
    CHECK(sc_data_load_text(text, t, &o, &p, &err) == SC_EFORMAT && strstr(err.msg, "packed"));
    sc_dataset_free(&plain);
    sc_dataset_free(&a);
    sc_dataset_free(&b);
    sc_dataset_free(&c);
}

/* A Hugging Face model directory with a tokenizer.json beside the weights:
 * the CLI uses it without -t. The tokenizer: 256 byte-level tokens, id =
 * byte value (fits stories260K's 512-row embedding). */
static void hf_dir_tokenizer(const char *hf_model, const char *text) {
    char dir[4096], path[4200], cmd[16384];
    snprintf(dir, sizeof dir, "%s", sc_tmp_path("hfdir"));
    snprintf(cmd, sizeof cmd, "mkdir -p %s && ln -sf %s/config.json %s/ && ln -sf %s/model.safetensors %s/", dir,
             hf_model, dir, hf_model, dir);
    CHECK(sc_run(cmd, NULL, 0) == 0);
    char *json = malloc(1 << 16);
    size_t n = (size_t)snprintf(json, 64, "{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0; b < 256; b++) { /* GPT-2's byte-to-unicode spelling */
        bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
        int k = 0;
        for (int x = 0; x < b; x++) k += !((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174);
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)k;
        char u[8];
        if (cp < 0x80) snprintf(u, sizeof u, "%s%c", cp == '"' || cp == '\\' ? "\\" : "", (char)cp);
        else snprintf(u, sizeof u, "%c%c", (char)(0xC0 | (cp >> 6)), (char)(0x80 | (cp & 0x3F)));
        n += (size_t)snprintf(json + n, 64, "%s\"%s\":%d", b ? "," : "", u, b);
    }
    n += (size_t)snprintf(json + n, 128, "},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false}}");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    CHECK(sc_write_bytes(path, json, n));
    free(json);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p 'Hi!'", SC_CLI_PATH, dir);
    CHECK(sc_run(cmd, out, sizeof out) == 0 && strcmp(out, "72 105 33\n") == 0);
    snprintf(cmd, sizeof cmd, "%s ppl -m %s -f %s --max-docs 3 --no-bos --json -q", SC_CLI_PATH, dir, text);
    CHECK(sc_run(cmd, out, sizeof out) == 0 && strstr(out, "\"ppl\""));
}

int main(void) {
    const char *l3 = sc_asset("tokenizers/hf/llama3/tokenizer.json"), *q3 = sc_asset("tokenizers/hf/qwen3"),
               *g3 = sc_asset("tokenizers/hf/gemma3"), *mi = sc_asset("tokenizers/hf/mistral_via_lenml-llama2"),
               *tok512 = sc_asset("models/tok512.bin"), *valid = sc_asset("text/tinystories_valid_a.txt"),
               *model = sc_asset("models/stories260K.bin");
    const char *hfm = sc_asset("models/stories260K-hf");
    if (!l3 || !q3 || !g3 || !mi || !tok512 || !valid || !model || !hfm) return sc_test_finish();
    char P[8][4096]; /* sc_asset's buffers are a ring: keep copies */
    const char **ps[] = {&l3, &q3, &g3, &mi, &tok512, &valid, &model, &hfm};
    for (int i = 0; i < 8; i++) {
        snprintf(P[i], sizeof P[i], "%s", *ps[i]);
        *ps[i] = P[i];
    }
    render(SC_CHAT_LLAMA3, "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
                           "<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
                           "Hello!<|eot_id|>");
    render(SC_CHAT_GEMMA, "<start_of_turn>user\nBe brief.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello!"
                          "<end_of_turn>\n");
    render(SC_CHAT_CHATML, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi there <|im_end|>\n"
                           "<|im_start|>assistant\nHello!<|im_end|>\n");
    render(SC_CHAT_MISTRAL, "[INST] Be brief.\n\n Hi there  [/INST]Hello!</s>");
    sc_chat_format f;
    CHECK(sc_chat_parse("qwen", &f, &err) == SC_OK && f == SC_CHAT_CHATML);
    CHECK(sc_chat_parse("jinja", &f, &err) == SC_EARG && strstr(err.msg, "jinja"));

    chat_data(l3, SC_CHAT_LLAMA3, 128000, 128006);
    chat_data(q3, SC_CHAT_CHATML, 151644, 151644);
    chat_data(g3, SC_CHAT_GEMMA, 2, 105);
    /* Mistral's tokenizer_config.json has no template: auto fails, a named format works */
    sc_tokenizer *t = NULL;
    CHECK(sc_tokenizer_load_auto(mi, 0, &t, &err) == SC_OK);
    if (t) {
        const char *p = sc_tmp_path("chat_m.jsonl");
        sc_write_bytes(p, CHAT, strlen(CHAT));
        sc_data_opts o;
        sc_data_opts_default(&o);
        sc_dataset d;
        CHECK(sc_data_load_text(p, t, &o, &d, &err) == SC_EARG && strstr(err.msg, "--chat-format") && strstr(err.msg, "line 1"));
        o.chat = SC_CHAT_MISTRAL;
        CHECK_MSG(sc_data_load_text(p, t, &o, &d, &err) == SC_OK && d.n_seqs == 3, "%s", err.msg);
        if (d.n_seqs == 3) CHECK(d.seqs[0].ids[0] == 1 && d.seqs[0].ids[d.seqs[0].n - 1] == 2); /* <s> ... </s> */
        sc_dataset_free(&d);
        sc_write_bytes(p, "{\"messages\": [{\"role\": \"user\"}]}\n", 34);
        CHECK(sc_data_load_text(p, t, &o, &d, &err) == SC_EFORMAT && strstr(err.msg, "message 0"));
        sc_tokenizer_free(t);
    }
    CHECK(sc_tokenizer_load_llama2c(tok512, 512, &t, &err) == SC_OK);
    if (t) {
        shuffle_pack(t, valid);
        sc_tokenizer_free(t);
    }

    /* the CLI */
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s -p 'Hello world' --bos", SC_CLI_PATH, l3);
    CHECK(sc_run(cmd, out, sizeof out) == 0 && strcmp(out, "128000 9906 1917\n") == 0);
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s --decode '9906,1917'", SC_CLI_PATH, l3);
    CHECK(sc_run(cmd, out, sizeof out) == 0 && strcmp(out, "Hello world\n") == 0);
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s -f %s --bench 1 --json", SC_CLI_PATH, l3, valid);
    CHECK(sc_run(cmd, out, sizeof out) == 0 && strstr(out, "\"encode_mb_per_s\""));
    snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer /nonexistent.json -p x 2>&1", SC_CLI_PATH);
    CHECK(sc_run(cmd, out, sizeof out) == 2 && strstr(out, "/nonexistent.json"));
    snprintf(cmd, sizeof cmd, "%s ppl -m %s --tokenizer %s -f %s --max-docs 40 --shuffle-seed 7 --pack 128 --eos "
        "--json -q", SC_CLI_PATH,
             model, tok512, valid);
    CHECK(sc_run(cmd, out, sizeof out) == 0 && strstr(out, "\"sequences\""));
    snprintf(cmd, sizeof cmd, "%s ppl -m %s --tokenizer %s -f %s --chat-format nope 2>&1", SC_CLI_PATH, model,
        tok512, valid);
    CHECK(sc_run(cmd, out, sizeof out) == 2 && strstr(out, "nope"));
    snprintf(cmd, sizeof cmd, "%s ppl -m %s --tokenizer %s -f %s --shuffle-seed 0 2>&1", SC_CLI_PATH, model, tok512,
        valid);
    CHECK(sc_run(cmd, out, sizeof out) == 2);
    hf_dir_tokenizer(hfm, valid);
    return sc_test_finish();
}
