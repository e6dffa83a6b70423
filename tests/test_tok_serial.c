/* test_tok_serial.c - every tokenizer kind travels inside a packed artifact
 * (formats/tok_serial.c): each tokenizer in the assets (Llama-3, Qwen3,
 * Mistral and Gemma-3 tokenizer.json, Llama-2 tokenizer.model and vocab
 * GGUF, a GGUF "gpt2" vocabulary written from Llama-3's tokenizer.json,
 * llama2.c tok512.bin and stories260K.gguf's own vocabulary) is packed with
 * a model of its vocabulary size through sc_pack, read back with
 * sc_artifact_load_tokenizer, and must encode (plain, BOS/EOS, special
 * tokens) and decode exactly like the original on a few hundred documents,
 * with the same pieces, types, scores, BOS/EOS, add_bos and chat template.
 * Then: artifacts written before the state existed still load, unknown
 * kinds and newer states load as "none", and hostile artifacts (bad counts,
 * offsets, ids, enums, regexes, truncated and randomly corrupted tokenizer
 * sections with valid checksums) give one-line errors naming the file and
 * the field, never a crash. A missing asset skips its case (counted as
 * skipped, not passed). */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "pack.h"
#include "srt_container.h"
#include "synth.h"
#include "testing.h"
#include "tok_serial.h"
#include "tokenizer.h"

static sc_err err;
static int skipped;

/* An asset path, or NULL (counted as skipped) when the asset is missing. */
static const char *asset_opt(const char *rel, const char *what) {
    static char buf[8][4096];
    static int k;
    const char *root = getenv("SPARSECAL_ASSETS");
    if (!root || !*root) root = SC_ASSETS_DEFAULT;
    char *s = buf[k++ % 8];
    snprintf(s, 4096, "%s/%s", root, rel);
    struct stat st;
    if (stat(s, &st) == 0) return s;
    printf("SKIP %s: asset %s not found (set SPARSECAL_ASSETS)\n", what, s);
    skipped++;
    return NULL;
}

/* ---- documents ---- */

typedef struct docs {
    char **d;
    size_t *n;
    size_t count, cap;
} docs;

static void add_doc(docs *l, const char *doc, size_t len) {
    if (l->count == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->d = realloc(l->d, l->cap * sizeof *l->d);
        l->n = realloc(l->n, l->cap * sizeof *l->n);
    }
    l->d[l->count] = malloc(len + 1);
    memcpy(l->d[l->count], doc, len);
    l->d[l->count][len] = 0;
    l->n[l->count++] = len;
}

static sc_status collect(void *user, const char *doc, size_t len, sc_err *e) {
    (void)e;
    add_doc(user, doc, len);
    return SC_OK;
}

static docs g_docs;

static bool load_docs(void) {
    const char *files[] = {"text/tinystories_valid_a.txt", "text/tinystories_sample.txt", "text/wiki.test.raw"};
    const char *seps[] = {NULL, "<|endoftext|>", NULL};
    const int64_t maxd[] = {250, 0, 200};
    for (int f = 0; f < 3; f++) {
        const char *p = asset_opt(files[f], "documents");
        char *text;
        size_t len;
        if (!p) continue;
        CHECK(sc_read_file(p, 1 << 24, &text, &len, &err) == SC_OK);
        sc_data_opts o;
        sc_data_opts_default(&o);
        o.separator = seps[f];
        o.max_docs = maxd[f];
        CHECK(sc_data_split_text(p, text, len, &o, collect, &g_docs, &err) == SC_OK);
        free(text);
    }
    static const char *const extra[] = {
        "", " ", "   leading spaces", "trailing   ", "Hello world", "\n\n\tTabs\r\n and  double  spaces ",
        "ça va? naïve café Ångström", "日本語のテキストと中文", "emoji 🤖🎉👍🏽 and ZWJ 👨‍👩‍👧",
        "digits 1234567890 3.14159 1,000,000", "\xe2\x96\x81" "already\xe2\x96\x81" "metaspace\xe2\x96\x81",
        "invalid \xff\xfe bytes \xc3 end \xe2\x82", "<s> </s> <unk> <|endoftext|> <|im_start|>user\nhi<|im_end|>",
        "<start_of_turn>user\nhello<end_of_turn>\n<bos><eos>", "[INST] hi [/INST] ok</s>",
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are.<|eot_id|>",
        "I'm sure they've said it's what we'd LL'd 'S", "x<0x41>y <0x0A> <0xZZ>", "\xc2\xa0nbsp\xe3\x80\x80ideographic space"};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++) add_doc(&g_docs, extra[i], strlen(extra[i]));
    char big[4000]; /* one long text of short words, runs of spaces, tabs and newlines */
    for (size_t i = 0; i < sizeof big; i++) big[i] = i % 97 == 0 ? '\n' : "ab  c\td"[i % 7];
    add_doc(&g_docs, big, sizeof big);
    return g_docs.count > 100;
}

static void free_docs(docs *l) {
    for (size_t i = 0; i < l->count; i++) free(l->d[i]);
    free(l->d);
    free(l->n);
    memset(l, 0, sizeof *l);
}

/* ---- comparing two tokenizers ---- */

static bool same_ids(const sc_tokens *a, const sc_tokens *b) {
    return a->n == b->n && (a->n == 0 || memcmp(a->ids, b->ids, a->n * sizeof *a->ids) == 0);
}

/* Encodes text with both; returns true when ids and decoded bytes agree. */
static bool agree(const sc_tokenizer *a, const sc_tokenizer *b, const char *s, size_t n, unsigned flags, size_t *n_ids) {
    sc_tokens x = {0}, y = {0};
    sc_status sa = sc_tokenizer_encode_ex(a, s, n, flags, &x, &err), sb = sc_tokenizer_encode_ex(b, s, n, flags, &y, &err);
    bool ok = sa == sb && same_ids(&x, &y);
    if (ok && sa == SC_OK) {
        char *da = NULL, *db = NULL;
        size_t la = 0, lb = 0;
        ok = sc_tokenizer_decode_all(a, x.ids, x.n, &da, &la, &err) == SC_OK &&
             sc_tokenizer_decode_all(b, x.ids, x.n, &db, &lb, &err) == SC_OK && la == lb && memcmp(da, db, la) == 0;
        free(da);
        free(db);
    }
    if (n_ids) *n_ids += x.n;
    sc_tokens_free(&x);
    sc_tokens_free(&y);
    return ok;
}

static bool same_bytes(const void *x, const void *y, size_t n) { return n == 0 || (x && y && memcmp(x, y, n) == 0); }

/* The two tokenizers' states are the same, field by field: spellings,
 * scores, types, decode texts, specials, flags, pipeline, merges in order. */
static bool same_state(const char *label, const sc_tokenizer *a, const sc_tokenizer *b) {
    sc_tok_state x, y;
    if (sc_tokenizer_state(a, &x, &err) != SC_OK) return false;
    if (sc_tokenizer_state(b, &y, &err) != SC_OK) {
        sc_tok_state_free(&x);
        return false;
    }
    const char *what = NULL;
    size_t n1 = (size_t)x.n + 1;
    if (strcmp(x.kind, y.kind) || x.n != y.n) what = "kind or size";
    else if (!same_bytes(x.key_off, y.key_off, n1 * 4) || x.keys_len != y.keys_len || !same_bytes(x.keys, y.keys, x.keys_len))
        what = "spellings";
    else if (!same_bytes(x.scores, y.scores, (n1 - 1) * 4) || !same_bytes(x.types, y.types, (n1 - 1) * 4)) what = "scores or types";
    else if (x.n_text != y.n_text || !same_bytes(x.text_ids, y.text_ids, (size_t)x.n_text * 4) ||
             (x.n_text && !same_bytes(x.text_off, y.text_off, ((size_t)x.n_text + 1) * 4)) || x.texts_len != y.texts_len ||
             !same_bytes(x.texts, y.texts, x.texts_len))
        what = "decode texts";
    else if (x.bos != y.bos || x.eos != y.eos || x.unk != y.unk || x.add_bos_default != y.add_bos_default ||
             x.dummy_prefix != y.dummy_prefix || x.sp_space_in != y.sp_space_in)
        what = "special ids or flags";
    else if (x.chat_template_len != y.chat_template_len || !same_bytes(x.chat_template, y.chat_template, x.chat_template_len))
        what = "chat template";
    else if (x.encoder != y.encoder || x.spm_add_prefix != y.spm_add_prefix || x.spm_squash_spaces != y.spm_squash_spaces ||
             x.byte_level != y.byte_level || x.byte_fallback != y.byte_fallback || x.fuse_unk != y.fuse_unk ||
             x.ignore_merges != y.ignore_merges || x.n_norm != y.n_norm || x.n_pre != y.n_pre)
        what = "encoder options";
    else if (x.n_merges != y.n_merges || !same_bytes(x.merges, y.merges, (size_t)x.n_merges * 8)) what = "merges";
    for (int i = 0; !what && i < x.n_norm; i++) {
        const sc_tok_norm_state *p = &x.norm[i], *q = &y.norm[i];
        if (p->kind != q->kind || p->na != q->na || p->nb != q->nb || !same_bytes(p->a, q->a, p->na) ||
            !same_bytes(p->b, q->b, p->nb) || p->left != q->left || p->right != q->right)
            what = "normalizers";
    }
    for (int i = 0; !what && i < x.n_pre; i++) {
        const sc_tok_pre_state *p = &x.pre[i], *q = &y.pre[i];
        if (p->kind != q->kind || !p->regex != !q->regex || p->nregex != q->nregex || !same_bytes(p->regex, q->regex, p->nregex) ||
            !p->str != !q->str || p->nstr != q->nstr || !same_bytes(p->str, q->str, p->nstr) || p->behavior != q->behavior ||
            p->invert != q->invert || p->prepend != q->prepend || p->split != q->split ||
            p->add_prefix_space != q->add_prefix_space || p->individual != q->individual)
            what = "pre-tokenizers";
    }
    if (what) printf("%s: the states differ in their %s\n", label, what);
    sc_tok_state_free(&x);
    sc_tok_state_free(&y);
    return what == NULL;
}

/* strict: the states must also be equal (old-format artifacts lose unk). */
static void compare(const char *label, const sc_tokenizer *a, const sc_tokenizer *b, bool strict) {
    int64_t n = sc_tokenizer_vocab_size(a);
    CHECK_MSG(sc_tokenizer_vocab_size(b) == n, "%s: vocab %lld vs %lld", label, (long long)n,
              (long long)sc_tokenizer_vocab_size(b));
    if (sc_tokenizer_vocab_size(b) != n) return;
    CHECK_MSG(strcmp(sc_tokenizer_kind(a), sc_tokenizer_kind(b)) == 0, "%s: kind %s vs %s", label, sc_tokenizer_kind(a),
              sc_tokenizer_kind(b));
    if (strict) CHECK_MSG(same_state(label, a, b), "%s: states differ", label);
    CHECK_MSG(sc_tokenizer_bos(a) == sc_tokenizer_bos(b) && sc_tokenizer_eos(a) == sc_tokenizer_eos(b), "%s: bos/eos", label);
    CHECK_MSG(sc_tokenizer_add_bos_default(a) == sc_tokenizer_add_bos_default(b), "%s: add_bos", label);
    const char *ca = sc_tokenizer_chat_template(a), *cb = sc_tokenizer_chat_template(b);
    CHECK_MSG((!ca && !cb) || (ca && cb && strcmp(ca, cb) == 0), "%s: chat template differs", label);
    /* every token: piece, type, score, and its decoding after nothing, BOS and another token */
    int64_t bad_piece = 0, bad_dec = 0;
    int32_t bos = sc_tokenizer_bos(a), other = (int32_t)(n / 2);
    char ba[4096], bb[4096];
    for (int32_t i = 0; i < n; i++) {
        size_t la, lb;
        const char *pa = sc_tokenizer_piece(a, i, &la), *pb = sc_tokenizer_piece(b, i, &lb);
        if (la != lb || memcmp(pa, pb, la) != 0 || sc_tokenizer_token_type(a, i) != sc_tokenizer_token_type(b, i) ||
            sc_tokenizer_score(a, i) != sc_tokenizer_score(b, i))
            bad_piece++;
        const int32_t prevs[3] = {-1, bos, other};
        for (int k = 0; k < 3; k++) {
            size_t da = sc_tokenizer_decode(a, prevs[k], i, ba, sizeof ba), db = sc_tokenizer_decode(b, prevs[k], i, bb, sizeof bb);
            if (da != db || memcmp(ba, bb, da) != 0) bad_dec++;
        }
        if (la > 0 && i % 97 == 0 && sc_tokenizer_find(a, pa, la) != sc_tokenizer_find(b, pa, la)) bad_piece++;
    }
    CHECK_MSG(bad_piece == 0 && bad_dec == 0, "%s: %lld tokens differ in piece/type/score, %lld decodings differ", label,
              (long long)bad_piece, (long long)bad_dec);
    /* documents: plain, with BOS and EOS, with special-token parsing */
    static const unsigned flags[3] = {0, SC_ENC_BOS | SC_ENC_EOS, SC_ENC_SPECIAL | SC_ENC_BOS};
    size_t differ = 0, ids = 0;
    double t0 = sc_now();
    for (size_t d = 0; d < g_docs.count; d++)
        for (int f = 0; f < 3; f++) differ += !agree(a, b, g_docs.d[d], g_docs.n[d], flags[f], &ids);
    printf("%-34s %lld tokens, %zu documents x 3 modes, %zu ids: %zu differ (%.1f s)\n", label, (long long)n, g_docs.count,
           ids, differ, sc_now() - t0);
    CHECK_MSG(differ == 0, "%s: %zu encodings differ", label, differ);
    /* special tokens written in text: up to 48 added tokens spread over the vocabulary */
    char *text = malloc(1 << 16);
    size_t tl = 0, n_added = 0, n_control = 0;
    int64_t step = n / 4096 + 1;
    for (int32_t i = 0; i < n && n_added < 48 && tl < 60000; i += (int32_t)step) {
        int32_t ty = sc_tokenizer_token_type(a, i);
        if (ty != SC_TOKTYPE_CONTROL && ty != SC_TOKTYPE_USER && ty != SC_TOKTYPE_UNKNOWN) continue;
        size_t l;
        const char *p = sc_tokenizer_piece(a, i, &l);
        if (l == 0 || l > 200) continue;
        tl += (size_t)snprintf(text + tl, 64, "text %zu ", n_added);
        memcpy(text + tl, p, l);
        tl += l;
        n_added++;
        n_control += ty == SC_TOKTYPE_CONTROL;
    }
    for (int32_t id = 0; id < n && n_added < 56; id++) { /* and the low ids, where most special tokens live */
        int32_t ty = sc_tokenizer_token_type(a, id);
        size_t l;
        const char *p = sc_tokenizer_piece(a, id, &l);
        if ((ty != SC_TOKTYPE_CONTROL && ty != SC_TOKTYPE_USER) || l == 0 || l > 200) continue;
        text[tl++] = ' ';
        memcpy(text + tl, p, l);
        tl += l;
        n_added++;
        n_control += ty == SC_TOKTYPE_CONTROL;
    }
    sc_tokens x = {0};
    CHECK(sc_tokenizer_encode_ex(a, text, tl, SC_ENC_SPECIAL, &x, &err) == SC_OK);
    size_t specials = 0;
    for (size_t i = 0; i < x.n; i++) specials += sc_tokenizer_token_type(a, x.ids[i]) == SC_TOKTYPE_CONTROL;
    sc_tokens_free(&x);
    CHECK_MSG(agree(a, b, text, tl, SC_ENC_SPECIAL, NULL) && agree(a, b, text, tl, 0, NULL) &&
                  agree(a, b, text, tl, SC_ENC_SPECIAL | SC_ENC_BOS | SC_ENC_EOS, NULL),
              "%s: special-token parsing differs", label);
    printf("%-34s %zu added tokens in one text, %zu parsed as control tokens: same ids\n", label, n_added, specials);
    CHECK_MSG(n_control == 0 || specials > 0, "%s: %zu control tokens written, none parsed", label, n_control);
    free(text);
}

/* ---- models and packing ---- */

/* A tiny synthetic model of vocabulary V (written once per V). */
static sc_model *synth_model(int64_t V) {
    char name[64];
    snprintf(name, sizeof name, "synth_%lld", (long long)V);
    const char *dir = sc_tmp_path(name);
    sc_synth_opts o;
    sc_synth_opts_default(&o);
    o.dim = 16;
    o.ffn_dim = 32;
    o.n_layers = 1;
    o.n_heads = 2;
    o.n_kv_heads = 2;
    o.vocab_size = V;
    o.max_seq_len = 64;
    sc_model *m = NULL;
    CHECK_MSG(sc_synth_write(&o, dir, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_model_load(dir, &m, &err) == SC_OK, "%s", err.msg);
    return m;
}

/* Bytes of the artifact's tokenizer sections. */
static uint64_t tokenizer_bytes(const char *spk, int *sections) {
    char msg[512];
    srt_container *ct;
    uint64_t total = 0;
    *sections = 0;
    if (srt_container_open(spk, SRT_CT_SPAK, &ct, msg, sizeof msg)) return 0;
    for (size_t i = 0; i < srt_container_section_count(ct); i++) {
        const srt_ct_section *s = srt_container_section_at(ct, i);
        if (strncmp(s->name, "tokenizer.", 10) == 0) {
            total += s->stored_size;
            (*sections)++;
        }
    }
    srt_container_close(ct);
    return total;
}

/* Packs m (or a synthetic model of tok's vocabulary) with tok into spk and
 * reads the tokenizer back the way `sparsecal run` does. */
static sc_tokenizer *through_pack(const char *label, const sc_tokenizer *tok, const sc_model *m, const char *spk) {
    sc_model *own = m ? NULL : synth_model(sc_tokenizer_vocab_size(tok));
    if (!m) m = own;
    if (!m) return NULL;
    sc_pack_opts po = {.layout = "f32", .method = "dense", .density = 1.0};
    sc_pack_result pr;
    sc_tokenizer *t = NULL;
    CHECK_MSG(sc_pack(m, tok, &po, spk, &pr, &err) == SC_OK, "%s: %s", label, err.msg);
    int ns;
    uint64_t tb = tokenizer_bytes(spk, &ns);
    printf("%-34s packed: %d tokenizer sections, %.1f KiB of %.1f KiB\n", label, ns, (double)tb / 1024,
           (double)pr.bytes_out / 1024);
    CHECK_MSG(sc_artifact_load_tokenizer(spk, &t, &err) == SC_OK && t, "%s: %s", label, err.msg);
    sc_model_free(own);
    return t;
}

/* ---- a GGUF "gpt2" vocabulary written from Llama-3's tokenizer.json ---- */

static const char *write_gpt2_gguf(const char *json_path) {
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
    gw_kv_str(&w, "tokenizer.ggml.pre", "llama-bpe");
    gw_kv_str_array(&w, "tokenizer.ggml.tokens", toks, (size_t)n);
    gw_kv_array(&w, "tokenizer.ggml.token_type", 5, (uint64_t)n, types, 4);
    gw_kv_str_array(&w, "tokenizer.ggml.merges", ms, (size_t)nm);
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", 128000);
    gw_kv_u32(&w, "tokenizer.ggml.eos_token_id", 128001);
    gw_kv_str(&w, "tokenizer.chat_template", "{% for m in messages %}{{ m['content'] }}{% endfor %}");
    const char *out = sc_tmp_path("llama3-gpt2.gguf");
    CHECK(gw_write_file(&w, out));
    gw_free(&w);
    free(toks);
    free(types);
    free(ms);
    cJSON_Delete(j);
    return out;
}

/* ---- rewriting artifacts (valid checksums, hostile content) ---- */

typedef struct edit {
    const char *section; /* section to change (NULL: none) */
    void (*mutate)(uint8_t *d, uint64_t *size, uint64_t *dims, void *u); /* may shrink */
    void *u;
    const char *drop;                       /* section to leave out */
    void (*manifest)(cJSON *tok, void *u);  /* edits the manifest's "tokenizer" */
} edit;

static bool rewrite(const char *src, const char *dst, const edit *e) {
    char msg[512];
    srt_container *ct;
    if (srt_container_open(src, SRT_CT_SPAK, &ct, msg, sizeof msg)) return false;
    srt_writer *w;
    if (srt_writer_create(dst, SRT_CT_SPAK, &w, msg, sizeof msg)) {
        srt_container_close(ct);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < srt_container_section_count(ct); i++) {
        const srt_ct_section *s = srt_container_section_at(ct, i);
        if (e->drop && !strcmp(s->name, e->drop)) continue;
        const void *d;
        uint64_t size;
        ok = srt_container_data(ct, i, &d, &size) == SRT_CT_OK;
        uint64_t dims[SRT_CT_MAX_DIMS];
        memcpy(dims, s->dims, sizeof dims);
        uint8_t *copy = malloc(size + 1);
        if (ok) memcpy(copy, d, size);
        if (ok && e->section && e->mutate && !strcmp(s->name, e->section)) e->mutate(copy, &size, dims, e->u);
        ok = ok && srt_writer_add(w, s->name, s->dtype, s->ndim, dims, copy, (size_t)size, 0) == SRT_CT_OK;
        free(copy);
    }
    size_t len;
    const char *mt = srt_container_manifest_text(ct, &len);
    cJSON *man = cJSON_ParseWithLength(mt, len);
    if (e->manifest) e->manifest(cJSON_GetObjectItem(man, "tokenizer"), e->u);
    char *text = cJSON_PrintUnformatted(man);
    ok = ok && text && srt_writer_set_manifest(w, text, strlen(text)) == SRT_CT_OK && srt_writer_finish(w) == SRT_CT_OK;
    free(text);
    cJSON_Delete(man);
    srt_writer_free(w);
    srt_container_close(ct);
    return ok;
}

/* The artifact must be refused with one line naming the file and `needle`. */
static void expect_bad(const char *label, const char *good, const edit *e, const char *needle) {
    const char *bad = sc_tmp_path("bad.spk");
    CHECK_MSG(rewrite(good, bad, e), "%s: rewrite failed", label);
    sc_tokenizer *t = NULL;
    sc_status st = sc_artifact_load_tokenizer(bad, &t, &err);
    CHECK_MSG(st != SC_OK && !t && strstr(err.msg, bad) && !strchr(err.msg, '\n') && (!needle || strstr(err.msg, needle)),
              "%s: status %d, message '%s' (wanted '%s')", label, (int)st, st ? err.msg : "", needle ? needle : "");
    if (st != SC_OK) printf("refused: %s\n", err.msg);
    sc_tokenizer_free(t);
    /* the model as a whole is refused the same way */
    sc_model *m = NULL;
    CHECK_MSG(sc_model_load(bad, &m, &err) != SC_OK && !m && strstr(err.msg, bad), "%s: model loaded", label);
    sc_model_free(m);
}

/* Mutators: u points at {index, value} (element index in the section). */
typedef struct setv {
    int64_t index;
    int64_t value;
} setv;
static void set_u32(uint8_t *d, uint64_t *size, uint64_t *dims, void *u) {
    (void)dims;
    setv *v = u;
    if ((uint64_t)(v->index + 1) * 4 <= *size) {
        uint32_t x = (uint32_t)v->value;
        memcpy(d + 4 * v->index, &x, 4);
    }
}
static void shrink_bytes(uint8_t *d, uint64_t *size, uint64_t *dims, void *u) {
    (void)d;
    uint64_t k = (uint64_t)((setv *)u)->value;
    if (k > *size) k = *size;
    *size -= k;
    dims[0] -= k;
}
static void shrink_rows(uint8_t *d, uint64_t *size, uint64_t *dims, void *u) { /* [m, 2] i32: one row fewer */
    (void)d;
    (void)u;
    dims[0] -= 1;
    *size -= 8;
}
static void put_nul(uint8_t *d, uint64_t *size, uint64_t *dims, void *u) {
    (void)dims;
    (void)u;
    if (*size > 2) d[*size / 2] = 0;
}

/* Manifest editors: u is a const char *[2] {path, JSON value}; path is
 * "a.b.c" or "a.b[2].c" inside the tokenizer object; value NULL deletes. */
static void set_json(cJSON *tok, void *u) {
    const char *const *kv = u;
    char path[256];
    snprintf(path, sizeof path, "%s", kv[0]);
    cJSON *o = tok;
    char *save = NULL, *part = strtok_r(path, ".", &save), *next;
    while ((next = strtok_r(NULL, ".", &save)) != NULL) {
        char *br = strchr(part, '[');
        if (br) {
            *br = 0;
            o = cJSON_GetArrayItem(cJSON_GetObjectItem(o, part), atoi(br + 1));
        } else {
            o = cJSON_GetObjectItem(o, part);
        }
        part = next;
    }
    if (!o) return;
    cJSON_DeleteItemFromObjectCaseSensitive(o, part);
    if (kv[1]) cJSON_AddItemToObject(o, part, cJSON_Parse(kv[1]));
}

static void expect_json_bad(const char *good, const char *path, const char *value, const char *needle) {
    const char *kv[2] = {path, value};
    edit e = {.manifest = set_json, .u = (void *)kv};
    char label[300];
    snprintf(label, sizeof label, "manifest %s = %s", path, value ? value : "(deleted)");
    expect_bad(label, good, &e, needle);
}

static void expect_section_bad(const char *good, const char *section, void (*fn)(uint8_t *, uint64_t *, uint64_t *, void *),
                               int64_t index, int64_t value, const char *needle) {
    setv v = {index, value};
    edit e = {.section = section, .mutate = fn, .u = &v};
    char label[300];
    snprintf(label, sizeof label, "%s[%lld] = %lld", section, (long long)index, (long long)value);
    expect_bad(label, good, &e, needle);
}

/* A small tokenizer.json (+ tokenizer_config.json) in its own directory. */
static const char *write_tiny(const char *name, const char *json, const char *config) {
    const char *dir = sc_tmp_path(name);
    mkdir(dir, 0777);
    char p[4096];
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    CHECK(sc_write_bytes(p, config, strlen(config)));
    static char out[2][4096];
    static int k;
    char *o = out[k++ % 2];
    snprintf(o, 4096, "%s/tokenizer.json", dir);
    CHECK(sc_write_bytes(o, json, strlen(json)));
    return o;
}

/* Byte-level BPE with every pipeline step the state knows. */
static const char *TINY_BL =
    "{\"added_tokens\":[{\"id\":8,\"content\":\"<|s|>\",\"special\":true},{\"id\":9,\"content\":\"<u>\",\"special\":false}],"
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Replace\",\"pattern\":{\"String\":"
    "\"x\"},\"content\":\"y\"},{\"type\":\"Strip\",\"strip_left\":false,\"strip_right\":true},{\"type\":\"Prepend\","
    "\"prepend\":\"\\u00e9\"},{\"type\":\"Lowercase\"}]},"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\d\"},"
    "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"Split\",\"pattern\":{\"String\":\"-\"},\"behavior\":"
    "\"MergedWithNext\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}]},"
    "\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"\\u0120\":3,\"\\u0120ab\":4,"
    "\"c\":5,\"1\":6,\"-\":7,\"\\u0120ca\":10},\"merges\":[\"a b\",\"\\u0120 ab\"]}}";
static const char *TINY_BL_CONFIG =
    "{\"bos_token\":\"<|s|>\",\"add_bos_token\":true,\"chat_template\":\"{{ bos_token }}{% for m in messages %}"
    "{{ m.content }}{% endfor %}\"}";
/* SentencePiece-style BPE: Metaspace, byte fallback, <unk>, pieces whose text differs from their key. */
static const char *TINY_SP =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true},{\"id\":1,\"content\":\"<s>\",\"special\":true},"
    "{\"id\":2,\"content\":\"</s>\",\"special\":true}],"
    "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\\u2581\",\"prepend_scheme\":\"first\",\"split\":false},"
    "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\\u2581\"},"
    "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
    "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,\"fuse_unk\":true,\"unk_token\":\"<unk>\",\"vocab\":{\"<unk>\":0,"
    "\"<s>\":1,\"</s>\":2,\"<0x41>\":3,\"\\u2581\":4,\"a\":5,\"\\u2581a\":6,\"b\":7,\"\\u2581ab\":8,\"ab\":9},"
    "\"merges\":[\"\\u2581 a\",\"a b\",\"\\u2581a b\"]}}";
static const char *TINY_SP_CONFIG = "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"add_bos_token\":false}";

static const char *const PROBES[] = {"ab ab abc 12-3 x<|s|>ab<u> ca cab CA", "  ABab\xc3\xa9\xcc\x81 -a-b- ",
                                     "ab a b aab A\xe2\x96\x81" "ab<s></s>", "\xff\xfe b", ""};

/* Whatever a mutated (but structurally valid) tokenizer is, it may not crash. */
static void exercise(const sc_tokenizer *t) {
    for (size_t i = 0; i < sizeof PROBES / sizeof PROBES[0]; i++) {
        sc_tokens x = {0};
        if (sc_tokenizer_encode_ex(t, PROBES[i], strlen(PROBES[i]), SC_ENC_SPECIAL | SC_ENC_BOS, &x, &err) == SC_OK) {
            char *s = NULL;
            if (sc_tokenizer_decode_all(t, x.ids, x.n, &s, NULL, &err) == SC_OK) free(s);
        }
        sc_tokens_free(&x);
    }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static void flip_random(uint8_t *d, uint64_t *size, uint64_t *dims, void *u) {
    (void)dims;
    (void)u;
    if (*size == 0) return;
    uint64_t r = rng();
    d[r % *size] ^= (uint8_t)(1u << ((r >> 32) % 8));
    if ((r >> 40) % 3 == 0) d[(r >> 8) % *size] = (uint8_t)(r >> 48);
}

/* Random corruption of every tokenizer section: a clean error or a tokenizer that works. */
static void fuzz(const char *label, const char *good) {
    char msg[512];
    srt_container *ct;
    if (srt_container_open(good, SRT_CT_SPAK, &ct, msg, sizeof msg)) {
        CHECK_MSG(0, "%s", msg);
        return;
    }
    char names[16][128];
    int nn = 0;
    for (size_t i = 0; i < srt_container_section_count(ct) && nn < 16; i++)
        if (!strncmp(srt_container_section_at(ct, i)->name, "tokenizer.", 10))
            snprintf(names[nn++], 128, "%s", srt_container_section_at(ct, i)->name);
    srt_container_close(ct);
    int loaded = 0, refused = 0, bad_msg = 0;
    const char *bad = sc_tmp_path("fuzz.spk");
    for (int s = 0; s < nn; s++) {
        for (int k = 0; k < 40; k++) {
            edit e = {.section = names[s], .mutate = flip_random};
            if (!rewrite(good, bad, &e)) continue;
            sc_tokenizer *t = NULL;
            if (sc_artifact_load_tokenizer(bad, &t, &err) == SC_OK && t) {
                loaded++;
                exercise(t);
            } else {
                refused++;
                bad_msg += !strstr(err.msg, bad) || strchr(err.msg, '\n') != NULL;
            }
            sc_tokenizer_free(t);
        }
        /* and every truncation of byte sections, one byte at a time up to 24 */
        for (int64_t cut = 1; cut <= 24; cut++) {
            setv v = {0, cut};
            edit e = {.section = names[s], .mutate = shrink_bytes, .u = &v};
            if (strstr(names[s], "text") == NULL && strstr(names[s], "template") == NULL) break;
            if (!rewrite(good, bad, &e)) continue;
            sc_tokenizer *t = NULL;
            if (sc_artifact_load_tokenizer(bad, &t, &err) == SC_OK && t) {
                loaded++;
                exercise(t);
            } else {
                refused++;
                bad_msg += !strstr(err.msg, bad) || strchr(err.msg, '\n') != NULL;
            }
            sc_tokenizer_free(t);
        }
    }
    printf("%-34s fuzz: %d tokenizer sections, %d corrupt copies refused cleanly, %d loaded and ran\n", label, nn, refused,
           loaded);
    CHECK(refused > 0 && bad_msg == 0);
}

static void hostile(void) {
    /* byte-level tiny tokenizer through a pack */
    const char *p = write_tiny("tiny_bl", TINY_BL, TINY_BL_CONFIG);
    sc_tokenizer *a = NULL, *b = NULL;
    CHECK_MSG(sc_tokenizer_load_hf(p, &a, &err) == SC_OK, "%s", err.msg);
    if (!a) return;
    const char *good = sc_tmp_path("tiny_bl.spk");
    b = through_pack("tiny byte-level tokenizer.json", a, NULL, good);
    if (b) {
        compare("tiny byte-level tokenizer.json", a, b, true);
        for (size_t i = 0; i < sizeof PROBES / sizeof PROBES[0]; i++)
            CHECK(agree(a, b, PROBES[i], strlen(PROBES[i]), SC_ENC_SPECIAL | SC_ENC_BOS, NULL));
    }
    sc_tokenizer_free(b);
    sc_tokenizer_free(a);

    /* the manifest */
    expect_json_bad(good, "vocab_size", "12", "tokenizer.vocab_size");
    expect_json_bad(good, "vocab_size", "10", "tokenizer.offsets");
    expect_json_bad(good, "vocab_size", "1e300", "tokenizer.vocab_size");
    expect_json_bad(good, "bos", "11", "tokenizer.bos");
    expect_json_bad(good, "eos", "-2", "tokenizer.eos");
    expect_json_bad(good, "unk", "\"0\"", "tokenizer.unk");
    expect_json_bad(good, "add_bos", "1", "tokenizer.add_bos");
    expect_json_bad(good, "state", "0", "tokenizer.state");
    expect_json_bad(good, "state", "1.5", "tokenizer.state");
    expect_json_bad(good, "n_decode", "12", "tokenizer.n_decode");
    expect_json_bad(good, "n_decode", "3", "tokenizer.decode_ids");
    expect_json_bad(good, "scores", "true", "tokenizer.scores");
    expect_json_bad(good, "encoder", "\"wordpiece\"", "tokenizer.encoder");
    expect_json_bad(good, "encoder", "\"spm\"", "tokenizer.spm");
    expect_json_bad(good, "bpe", NULL, "tokenizer.bpe");
    expect_json_bad(good, "bpe.merges", "3", "tokenizer.merges");
    expect_json_bad(good, "bpe.merges", "-1", "tokenizer.bpe.merges");
    expect_json_bad(good, "bpe.merges", "1e12", "tokenizer.bpe.merges");
    expect_json_bad(good, "bpe.byte_level", "null", "tokenizer.bpe.byte_level");
    expect_json_bad(good, "bpe.normalizers", "{}", "tokenizer.bpe.normalizers");
    expect_json_bad(good, "bpe.normalizers[1].type", "\"nfx\"", "tokenizer.bpe.normalizers[1].type");
    expect_json_bad(good, "bpe.normalizers[1].pattern", NULL, "tokenizer.bpe.normalizers[1].pattern");
    expect_json_bad(good, "bpe.normalizers[1].content_hex", "\"6\"", "tokenizer.bpe.normalizers[1].content");
    expect_json_bad(good, "bpe.normalizers[3].prepend", "7", "tokenizer.bpe.normalizers[3].prepend");
    expect_json_bad(good, "bpe.normalizers[2].left", NULL, "tokenizer.bpe.normalizers[2].left");
    expect_json_bad(good, "bpe.pre_tokenizers[0].behavior", "\"sideways\"", "tokenizer.bpe.pre_tokenizers[0].behavior");
    expect_json_bad(good, "bpe.pre_tokenizers[0].regex", "\"(\"", "tokenizer.bpe.pre_tokenizers[0]");
    expect_json_bad(good, "bpe.pre_tokenizers[0].regex_hex", "\"5c64\"", "tokenizer.bpe.pre_tokenizers[0].regex");
    expect_json_bad(good, "bpe.pre_tokenizers[1].string", NULL, "tokenizer.bpe.pre_tokenizers[1].regex");
    expect_json_bad(good, "bpe.pre_tokenizers[1].invert", "\"no\"", "tokenizer.bpe.pre_tokenizers[1].invert");
    expect_json_bad(good, "bpe.pre_tokenizers[2].type", "\"metaspace\"", "tokenizer.bpe.pre_tokenizers[2].replacement");
    expect_json_bad(good, "bpe.pre_tokenizers[2].type", "\"whitespace\"", "tokenizer.bpe.pre_tokenizers[2].type");
    {
        char many[2048] = "[";
        for (int i = 0; i < 17; i++) strcat(many, i ? ",{\"type\":\"nfc\"}" : "{\"type\":\"nfc\"}");
        strcat(many, "]");
        expect_json_bad(good, "bpe.normalizers", many, "tokenizer.bpe.normalizers");
    }
    {   /* a regex as hex is accepted: the same tokenizer */
        const char *kv[2] = {"bpe.pre_tokenizers[0].regex", NULL}, *kv2[2] = {"bpe.pre_tokenizers[0].regex_hex", "\"5c64\""};
        edit e1 = {.manifest = set_json, .u = (void *)kv2}, e0 = {.manifest = set_json, .u = (void *)kv};
        const char *mid = sc_tmp_path("mid.spk"), *hx = sc_tmp_path("hex.spk");
        CHECK(rewrite(good, mid, &e0) && rewrite(mid, hx, &e1));
        sc_tokenizer *t = NULL, *g = NULL;
        CHECK_MSG(sc_artifact_load_tokenizer(hx, &t, &err) == SC_OK && t, "%s", err.msg);
        CHECK(sc_artifact_load_tokenizer(good, &g, &err) == SC_OK && g);
        if (t && g) CHECK(agree(t, g, PROBES[0], strlen(PROBES[0]), SC_ENC_SPECIAL, NULL));
        sc_tokenizer_free(t);
        sc_tokenizer_free(g);
    }
    /* the sections */
    expect_section_bad(good, "tokenizer.offsets", set_u32, 3, 0xFFFFFF, "tokenizer.offsets[3]");
    expect_section_bad(good, "tokenizer.offsets", set_u32, 2, 0, "tokenizer.offsets[2]");
    expect_section_bad(good, "tokenizer.offsets", set_u32, 10, 0x7FFFFFFF, "tokenizer.offsets[10]");
    expect_section_bad(good, "tokenizer.text", shrink_bytes, 0, 1, "tokenizer.offsets");
    expect_section_bad(good, "tokenizer.types", set_u32, 2, 99, "tokenizer.types[2]");
    expect_section_bad(good, "tokenizer.types", set_u32, 4, -1, "tokenizer.types[4]");
    expect_section_bad(good, "tokenizer.merges", set_u32, 1, 11, "tokenizer.merges[0]");
    expect_section_bad(good, "tokenizer.merges", set_u32, 2, -7, "tokenizer.merges[1]");
    expect_section_bad(good, "tokenizer.merges", set_u32, 0, 1, "tokenizer.merges"); /* b + b is no token */
    expect_section_bad(good, "tokenizer.merges", shrink_rows, 0, 0, "tokenizer.merges");
    expect_section_bad(good, "tokenizer.chat_template", put_nul, 0, 0, "tokenizer.chat_template");
    {
        edit e = {.drop = "tokenizer.chat_template"};
        expect_bad("no chat template section", good, &e, "tokenizer.chat_template");
        edit e2 = {.drop = "tokenizer.types"};
        expect_bad("no types section", good, &e2, "tokenizer.types");
    }
    /* a cut file: the container refuses it */
    {
        char *buf;
        size_t len;
        CHECK(sc_read_file(good, 1 << 28, &buf, &len, &err) == SC_OK);
        const char *cut = sc_tmp_path("cut.spk");
        CHECK(sc_write_bytes(cut, buf, len - 100));
        sc_tokenizer *t = NULL;
        CHECK(sc_artifact_load_tokenizer(cut, &t, &err) != SC_OK && !t && strstr(err.msg, cut) && !strchr(err.msg, '\n'));
        free(buf);
    }
    /* unknown kinds and newer states: nothing embedded, the model still loads */
    const char *future[][2] = {{"kind", "\"bpe-unigram-2030\""}, {"state", "2"}};
    for (int i = 0; i < 2; i++) {
        edit e = {.manifest = set_json, .u = (void *)future[i]};
        const char *f = sc_tmp_path("future.spk");
        CHECK(rewrite(good, f, &e));
        sc_tokenizer *t = NULL;
        CHECK(sc_artifact_load_tokenizer(f, &t, &err) != SC_OK && !t && strstr(err.msg, "embeds no tokenizer"));
        sc_model *m = NULL;
        CHECK_MSG(sc_model_load(f, &m, &err) == SC_OK && m && !m->tokenizer, "%s", err.msg);
        sc_model_free(m);
    }
    fuzz("tiny byte-level tokenizer.json", good);

    /* SentencePiece-style tiny tokenizer: decode texts, byte fallback, unk */
    p = write_tiny("tiny_sp", TINY_SP, TINY_SP_CONFIG);
    CHECK_MSG(sc_tokenizer_load_hf(p, &a, &err) == SC_OK, "%s", err.msg);
    if (!a) return;
    const char *good2 = sc_tmp_path("tiny_sp.spk");
    b = through_pack("tiny SentencePiece-style json", a, NULL, good2);
    if (b) {
        compare("tiny SentencePiece-style json", a, b, true);
        for (size_t i = 0; i < sizeof PROBES / sizeof PROBES[0]; i++)
            CHECK(agree(a, b, PROBES[i], strlen(PROBES[i]), SC_ENC_SPECIAL | SC_ENC_BOS, NULL));
    }
    sc_tokenizer_free(b);
    sc_tokenizer_free(a);
    expect_section_bad(good2, "tokenizer.decode_ids", set_u32, 0, 10, "tokenizer.decode_ids[0]");
    expect_section_bad(good2, "tokenizer.decode_ids", set_u32, 1, 4, "tokenizer.decode_ids[1]");
    expect_section_bad(good2, "tokenizer.decode_offsets", set_u32, 1, 1000, "tokenizer.decode_offsets[1]");
    expect_section_bad(good2, "tokenizer.decode_text", shrink_bytes, 0, 1, "tokenizer.decode_offsets");
    expect_json_bad(good2, "bpe.pre_tokenizers[0].prepend_scheme", "\"sometimes\"", "prepend_scheme");
    expect_json_bad(good2, "bpe.pre_tokenizers[0].replacement", "\"\"", "tokenizer.bpe.pre_tokenizers[0].replacement");
    fuzz("tiny SentencePiece-style json", good2);
}

/* A state with one field made hostile, straight into the constructor. */
static void state_hostile(void) {
    const char *p = write_tiny("tiny_bl2", TINY_BL, TINY_BL_CONFIG);
    sc_tokenizer *a = NULL;
    CHECK_MSG(sc_tokenizer_load_hf(p, &a, &err) == SC_OK, "%s", err.msg);
    if (!a) return;
    sc_tok_state s;
    CHECK_MSG(sc_tokenizer_state(a, &s, &err) == SC_OK, "%s", err.msg);
    sc_tokenizer *t = NULL;
    CHECK_MSG(sc_tokenizer_from_state("state", &s, &t, &err) == SC_OK && t, "%s", err.msg);
    if (t) compare("tiny byte-level, in memory", a, t, true);
    sc_tokenizer_free(t);
    uint32_t off[16];
    int32_t types[16], merges[8];
    memcpy(off, s.key_off, (size_t)(s.n + 1) * 4);
    memcpy(types, s.types, (size_t)s.n * 4);
    memcpy(merges, s.merges, (size_t)s.n_merges * 8);
#define BAD(stmt, needle)                                                                                       \
    do {                                                                                                        \
        sc_tok_state h = s;                                                                                     \
        h.key_off = off;                                                                                        \
        h.types = types;                                                                                        \
        h.merges = merges;                                                                                      \
        stmt;                                                                                                   \
        sc_tokenizer *x = NULL;                                                                                 \
        sc_status st_ = sc_tokenizer_from_state("state", &h, &x, &err);                                         \
        CHECK_MSG(st_ != SC_OK && !x && strstr(err.msg, needle) && !strchr(err.msg, '\n'), "%s: %d '%s'", #stmt, \
                  (int)st_, err.msg);                                                                           \
        if (st_ != SC_OK) printf("refused: %s\n", err.msg);                                                   \
        sc_tokenizer_free(x);                                                                                   \
        memcpy(off, s.key_off, (size_t)(s.n + 1) * 4);                                                          \
        memcpy(types, s.types, (size_t)s.n * 4);                                                                \
        memcpy(merges, s.merges, (size_t)s.n_merges * 8);                                                       \
    } while (0)
    BAD(h.n = 0, "tokenizer.vocab_size");
    BAD(h.n = (int64_t)1 << 40, "tokenizer.vocab_size");
    BAD(snprintf(h.kind, sizeof h.kind, "wordpiece"), "tokenizer.kind");
    BAD(off[4] = 1000, "tokenizer.offsets[4]");
    BAD(off[1] = 70000; off[2] = 70000, "tokenizer.offsets");
    BAD(h.keys_len = 3, "tokenizer.offsets");
    BAD(types[0] = 7, "tokenizer.types[0]");
    BAD(h.bos = (int32_t)s.n, "tokenizer.bos");
    BAD(h.unk = -5, "tokenizer.unk");
    BAD(h.n_text = 2, "tokenizer.decode_ids");
    BAD(h.n_text = -1, "tokenizer.n_decode");
    BAD(h.encoder = 7, "tokenizer.encoder");
    BAD(h.n_norm = 17, "tokenizer.bpe.normalizers");
    BAD(h.norm[0].kind = 99, "tokenizer.bpe.normalizers[0]");
    BAD(h.norm[1].a = NULL, "tokenizer.bpe.normalizers[1]");
    BAD(h.n_pre = -1, "tokenizer.bpe.pre_tokenizers");
    BAD(h.pre[0].behavior = 5, "tokenizer.bpe.pre_tokenizers[0]");
    BAD(h.pre[0].regex = "[z-a]", "tokenizer.bpe.pre_tokenizers[0]");
    BAD(h.pre[0].str = "x"; h.pre[0].nstr = 1, "tokenizer.bpe.pre_tokenizers[0]");
    BAD(h.pre[2].kind = SC_TOK_PRE_METASPACE, "tokenizer.bpe.pre_tokenizers[2]");
    BAD(h.n_merges = SC_TOK_MAX_MERGES + 1, "tokenizer.bpe.merges");
    BAD(merges[3] = 100, "tokenizer.merges[1]");
    BAD(merges[0] = 1; merges[1] = 0, "tokenizer.merges");
    BAD(h.chat_template = "a\0b"; h.chat_template_len = 3, "tokenizer.chat_template");
#undef BAD
    sc_tok_state_free(&s);
    sc_tokenizer_free(a);
}

/* Artifacts written before the state existed: the SentencePiece vocabulary
 * with only kind, vocab_size, bos and eos in the manifest. */
static void old_manifest(cJSON *tok, void *u) {
    (void)u;
    for (cJSON *c = tok->child, *next; c; c = next) {
        next = c->next;
        if (strcmp(c->string, "kind") && strcmp(c->string, "vocab_size") && strcmp(c->string, "bos") &&
            strcmp(c->string, "eos"))
            cJSON_DeleteItemFromObjectCaseSensitive(tok, c->string);
    }
}

static void legacy(const char *spk, const sc_tokenizer *orig) {
    edit le = {.manifest = old_manifest};
    const char *dst = sc_tmp_path("legacy.spk");
    CHECK(rewrite(spk, dst, &le));
    sc_tokenizer *t = NULL;
    CHECK_MSG(sc_artifact_load_tokenizer(dst, &t, &err) == SC_OK && t, "%s", err.msg);
    if (t) compare("old-format artifact (tok512)", orig, t, false);
    sc_tokenizer_free(t);
    /* its damaged text section is refused as before */
    setv v = {0, 1};
    edit e = {.section = "tokenizer.text", .mutate = shrink_bytes, .u = &v};
    const char *bad = sc_tmp_path("legacy_bad.spk");
    CHECK(rewrite(dst, bad, &e));
    CHECK(sc_artifact_load_tokenizer(bad, &t, &err) != SC_OK && !t && strstr(err.msg, "tokenizer.offsets") &&
          strstr(err.msg, bad));
}

typedef struct tcase {
    const char *label, *asset;
    int64_t vocab; /* llama2.c tokenizer.bin */
} tcase;

int main(void) {
    if (!load_docs()) {
        printf("SKIP: no text assets\n");
        printf("%d skipped\n", skipped);
        return sc_test_finish();
    }
    printf("%zu documents\n", g_docs.count);
    const tcase cases[] = {
        {"Llama-3 tokenizer.json", "tokenizers/hf/llama3/tokenizer.json", 0},
        {"Qwen3 tokenizer.json", "tokenizers/hf/qwen3/tokenizer.json", 0},
        {"Mistral tokenizer.json", "tokenizers/hf/mistral_via_lenml-llama2/tokenizer.json", 0},
        {"Gemma-3 tokenizer.json", "tokenizers/hf/gemma3/tokenizer.json", 0},
        {"Llama-2 tokenizer.model", "tokenizers/llama2_sentencepiece/tokenizer.model", 0},
        {"Llama-2 vocab GGUF", "tokenizers/llama_cpp_vocab/ggml-vocab-llama-spm.gguf", 0},
        {"GGUF gpt2 (from Llama-3's json)", NULL, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *path = cases[c].asset ? asset_opt(cases[c].asset, cases[c].label) : NULL;
        if (!cases[c].asset) {
            const char *l3 = asset_opt(cases[0].asset, cases[c].label);
            path = l3 ? write_gpt2_gguf(l3) : NULL;
        }
        if (!path) continue;
        sc_tokenizer *a = NULL;
        double t0 = sc_now();
        CHECK_MSG(sc_tokenizer_load_auto(path, cases[c].vocab, &a, &err) == SC_OK, "%s: %s", cases[c].label, err.msg);
        if (!a) continue;
        double t_load = sc_now() - t0;
        const char *spk = sc_tmp_path("case.spk");
        t0 = sc_now();
        sc_tokenizer *b = through_pack(cases[c].label, a, NULL, spk);
        printf("%-34s kind %s, loads in %.2f s from the source, %.2f s packed+read\n", cases[c].label,
               sc_tokenizer_kind(a), t_load, sc_now() - t0);
        if (b) compare(cases[c].label, a, b, true);
        if (b && c == 0) { /* the -m model.spk path: the model brings its tokenizer */
            sc_model *m = NULL;
            CHECK_MSG(sc_model_load(spk, &m, &err) == SC_OK && m && m->tokenizer, "%s", err.msg);
            if (m && m->tokenizer) {
                size_t differ = 0;
                for (size_t d = 0; d < g_docs.count; d += 7) differ += !agree(a, m->tokenizer, g_docs.d[d], g_docs.n[d], SC_ENC_BOS, NULL);
                CHECK(differ == 0);
            }
            sc_model_free(m);
        }
        sc_tokenizer_free(b);
        sc_tokenizer_free(a);
    }
    /* llama2.c: tok512 with the real stories260K model, and the GGUF model's own vocabulary */
    const char *bin = asset_opt("models/stories260K.bin", "tok512.bin"), *tokp = asset_opt("models/tok512.bin", "tok512.bin");
    if (bin && tokp) {
        sc_model *m = NULL;
        sc_tokenizer *a = NULL;
        CHECK(sc_model_load(bin, &m, &err) == SC_OK);
        CHECK(sc_tokenizer_load_llama2c(tokp, 512, &a, &err) == SC_OK);
        const char *spk = sc_tmp_path("tok512.spk");
        sc_tokenizer *b = m && a ? through_pack("llama2.c tok512.bin", a, m, spk) : NULL;
        if (b) compare("llama2.c tok512.bin", a, b, true);
        if (b) legacy(spk, a);
        sc_tokenizer_free(b);
        sc_tokenizer_free(a);
        sc_model_free(m);
    }
    const char *gg = asset_opt("models/stories260K.gguf", "stories260K.gguf vocabulary");
    if (gg) {
        sc_model *m = NULL;
        CHECK_MSG(sc_model_load(gg, &m, &err) == SC_OK && m && m->tokenizer, "%s", err.msg);
        sc_tokenizer *b = m && m->tokenizer ? through_pack("stories260K.gguf vocabulary", m->tokenizer, m,
                                                           sc_tmp_path("gguf260k.spk")) : NULL;
        if (b) compare("stories260K.gguf vocabulary", m->tokenizer, b, true);
        sc_tokenizer_free(b);
        sc_model_free(m);
    }
    hostile();
    state_hostile();
    free_docs(&g_docs);
    printf("%d skipped\n", skipped);
    return sc_test_finish();
}
