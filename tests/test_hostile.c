/* test_hostile.c - hostile input, faults and data safety through the CLI
 * (issue 16). Every crafted input is generated here from the shipped assets;
 * each case asserts a one-line error and a non-zero exit (or the correct
 * output) and that no input was touched.
 *   - an output naming an input (path, symlink, hard link, a file inside a
 *     model directory) is refused for every command and input kind, and the
 *     input is intact; a symlinked output is written through to its target,
 *     which keeps its mode; an existing FIFO is never replaced;
 *   - a NaN or inf in a weight is reported by generate, ppl and run with the
 *     layer and tensor that first produced it, never sampled; the sampler
 *     itself refuses non-finite logits and never reads outside its nucleus;
 *   - every number of a calibration file is range-checked as if there were no
 *     checksum (files rewritten here with valid checksums): histogram counts,
 *     counts that would overflow a merge, non-finite sums, options.layers
 *     beyond int64; merged shards keep model.family and model.format;
 *   - run sizes the key/value cache for -n, not for the model's context (an
 *     artifact declaring 131,072 positions), grows it on demand with the same
 *     numbers, and -n / --ctx-size are validated (no silent "0 = whole context");
 *   - run and ppl apply the same configuration rules to an artifact;
 *   - a tokenizer.bin whose every piece is empty loads and works (it used to
 *     compute NULL + 0), also through an artifact;
 *   - options: NaN/inf numbers and bad lists are refused, unknown --params
 *     keys are errors naming the known ones. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "eval.h"
#include "model.h"
#include "srt_container.h"
#include "srt_model.h"
#include <cjson/cJSON.h>
#include "safetensors.h"
#include "testing.h"

static char out[1 << 16];
static const char *cli_path = SC_CLI_PATH;

/* Runs "sparsecal <args>" with stderr captured (stdout discarded); returns the exit status. */
static int cli(const char *args) {
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", cli_path, args);
    return sc_run(cmd, out, sizeof out);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* A failure: non-zero exit and exactly one line on stderr containing what. */
#define CHECK_REFUSED(rc, what)                                                                            \
    CHECK_MSG((rc) != 0 && count_lines(out) == 1 && strstr(out, what) != NULL, "rc %d, output: %s", rc, out)

static bool same_bytes(const char *a, const char *b) {
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    sc_err err;
    bool ok = sc_read_file(a, (size_t)1 << 28, &x, &nx, &err) == SC_OK &&
              sc_read_file(b, (size_t)1 << 28, &y, &ny, &err) == SC_OK && nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return ok;
}

static bool copy_file(const char *from, const char *to) {
    char *x = NULL;
    size_t n = 0;
    sc_err err;
    bool ok = sc_read_file(from, (size_t)1 << 28, &x, &n, &err) == SC_OK && sc_write_bytes(to, x, n);
    free(x);
    return ok;
}

/* ---- item 5: -o naming an input ---- */

static void test_output_is_input(void) {
    const char *bin_a = sc_asset("models/stories260K.bin"), *tok_a = sc_asset("models/tok512.bin"),
               *text_a = sc_asset("text/tinystories_sample.txt"), *hf_a = sc_asset("models/stories260K-hf");
    if (!bin_a || !tok_a || !text_a || !hf_a) return;
    char bin[1024], tok[1024], text[1024], a[16384];
    snprintf(bin, sizeof bin, "%s", sc_tmp_path("m.bin"));
    snprintf(tok, sizeof tok, "%s", sc_tmp_path("tok.bin"));
    snprintf(text, sizeof text, "%s", sc_tmp_path("text.txt"));
    CHECK(copy_file(bin_a, bin) && copy_file(tok_a, tok) && copy_file(text_a, text));
    const char *lnk = sc_tmp_path("link.bin"), *hard = sc_tmp_path("hard.bin");
    CHECK(symlink(bin, lnk) == 0 && link(bin, hard) == 0);

    /* pack: the model by its own path, through a symlink, through a hard link */
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s -o %s -q", bin, tok, bin);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s -o %s -q", lnk, tok, bin);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s -o %s -q", bin, tok, lnk);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s -o %s -q", hard, tok, bin);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    /* pack: the tokenizer */
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s -o %s -q", bin, tok, tok);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    /* compute: model, data, tokenizer */
    const char *scal = sc_tmp_path("c.scal");
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cats -o %s -q", bin, tok, text, text);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cats -o %s -q", bin, tok, text, bin);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cats -o %s -q", bin, tok, text, tok);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    /* a calibration file to use as an input below */
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cats -o %s -q", bin, tok, text, scal);
    CHECK_MSG(cli(a) == 0, "%s", out);
    char scal_copy[1024];
    snprintf(scal_copy, sizeof scal_copy, "%s", sc_tmp_path("c_copy.scal"));
    CHECK(copy_file(scal, scal_copy));
    /* pack --calib, merge's inputs, diag --dump-ranks onto --calib */
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --calib %s -o %s -q", bin, tok, scal, scal);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "merge %s %s -o %s", scal, scal_copy, scal_copy);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "diag -m %s --tokenizer %s -f %s --calib %s --dump-ranks %s -q", bin, tok, text, scal, scal);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    CHECK(same_bytes(scal, scal_copy));
    /* a file inside a model directory (read by the loader, not named on the command line) */
    char hf[1024], st_path[1100], st_copy[1024];
    snprintf(hf, sizeof hf, "%s", sc_tmp_path("hf"));
    mkdir(hf, 0755);
    snprintf(st_path, sizeof st_path, "%s/model.safetensors", hf);
    snprintf(a, sizeof a, "%s/config.json", hf);
    char src[1100];
    snprintf(src, sizeof src, "%s/config.json", hf_a);
    CHECK(copy_file(src, a));
    snprintf(src, sizeof src, "%s/model.safetensors", hf_a);
    CHECK(copy_file(src, st_path));
    snprintf(st_copy, sizeof st_copy, "%s", sc_tmp_path("st_copy"));
    CHECK(copy_file(st_path, st_copy));
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s -o %s -q", hf, tok, st_path);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cats -o %s -q", hf, tok, text, st_path);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    CHECK(same_bytes(st_path, st_copy));
    /* pack --lora: the adapter's weights */
    char ad[1024], ad_st[1100], ad_copy[1024];
    snprintf(ad, sizeof ad, "%s", sc_tmp_path("adapter"));
    mkdir(ad, 0755);
    snprintf(ad_st, sizeof ad_st, "%s/adapter_model.safetensors", ad);
    snprintf(a, sizeof a, "%s/adapter_config.json", ad);
    const char *cfg = "{\"r\": 1, \"lora_alpha\": 1}";
    CHECK(sc_write_bytes(a, cfg, strlen(cfg)));
    sc_st_spec specs[2] = {
        {"base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", SC_DT_F32, NULL, 2, {1, 64}},
        {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", SC_DT_F32, NULL, 2, {64, 1}},
    };
    float z[64] = {0};
    sc_st_writer *w = NULL;
    sc_err err;
    CHECK(sc_st_writer_create(ad_st, specs, 2, NULL, 0, &w, &err) == SC_OK);
    CHECK(w && sc_st_writer_write_f32(w, z, 64, &err) == SC_OK && sc_st_writer_write_f32(w, z, 64, &err) == SC_OK);
    CHECK(w && sc_st_writer_finish(w, &err) == SC_OK);
    sc_st_writer_free(w);
    snprintf(ad_copy, sizeof ad_copy, "%s", sc_tmp_path("ad_copy"));
    CHECK(copy_file(ad_st, ad_copy));
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --lora %s -o %s -q", bin, tok, ad, ad_st);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    CHECK(same_bytes(ad_st, ad_copy));
    /* every input is intact */
    CHECK(same_bytes(bin, bin_a) && same_bytes(tok, tok_a) && same_bytes(text, text_a));
    struct stat st;
    CHECK(lstat(lnk, &st) == 0 && S_ISLNK(st.st_mode));

    /* an existing non-regular file (a FIFO) is never replaced */
    const char *fifo = sc_tmp_path("fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s -o %s -q", bin, tok, fifo);
    CHECK_REFUSED(cli(a), "not a regular file");
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));

    /* a symlinked output: the link stays, its target is replaced and keeps mode 0600 */
    const char *target = sc_tmp_path("target.spk"), *via = sc_tmp_path("via.spk");
    CHECK(sc_write_bytes(target, "old", 3) && chmod(target, 0600) == 0 && symlink("target.spk", via) == 0);
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout q8_0 -o %s -q", bin, tok, via);
    CHECK_MSG(cli(a) == 0, "%s", out);
    CHECK(lstat(via, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(lstat(target, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 && st.st_size > 3);
    snprintf(a, sizeof a, "verify %s", target);
    CHECK_MSG(cli(a) == 0, "%s", out);
    /* a new file gets 0666 less the umask */
    const char *fresh = sc_tmp_path("fresh.spk");
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout q8_0 -o %s -q", bin, tok, fresh);
    mode_t um = umask(022);
    CHECK_MSG(cli(a) == 0, "%s", out);
    umask(um);
    CHECK(stat(fresh, &st) == 0 && (st.st_mode & 0777) == 0644);
}

/* ---- item 1: non-finite weights ---- */

/* Offset of the n bytes at p inside buf[len] (-1 if absent or not unique). */
static long find_bytes(const uint8_t *buf, size_t len, const void *p, size_t n) {
    long at = -1;
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(buf + i, p, n) == 0) {
            if (at >= 0) return -1;
            at = (long)i;
        }
    return at;
}

/* Copies the llama2.c model to `to` with value v at element k of the tensor
 * whose first 64 floats are `first` (located by content, not by layout). */
static bool poison(const char *from, const char *to, const float *first, size_t k, float v) {
    char *x = NULL;
    size_t n = 0;
    sc_err err;
    if (sc_read_file(from, (size_t)1 << 28, &x, &n, &err) != SC_OK) return false;
    long at = find_bytes((const uint8_t *)x, n, first, 64 * sizeof(float));
    bool ok = at >= 0 && (size_t)at + (k + 1) * sizeof(float) <= n;
    if (ok) memcpy(x + at + k * sizeof(float), &v, sizeof v);
    ok = ok && sc_write_bytes(to, x, n);
    free(x);
    return ok;
}

static void test_nonfinite_weights(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_sample.txt");
    if (!bin || !tok || !text) return;
    sc_model *m = NULL;
    sc_err err;
    CHECK(sc_model_load(bin, &m, &err) == SC_OK);
    if (!m) return;
    char nan_final[1024], inf_wg[1024], a[16384];
    snprintf(nan_final, sizeof nan_final, "%s", sc_tmp_path("nan_final.bin"));
    snprintf(inf_wg, sizeof inf_wg, "%s", sc_tmp_path("inf_wg.bin"));
    CHECK(poison(bin, nan_final, m->final_norm, 5, NAN));            /* one NaN in the final-norm weight */
    CHECK(poison(bin, inf_wg, m->layers[2].wg, 17, INFINITY));      /* one inf in layer 2's gate */
    sc_model_free(m);
    /* the reference path: generate (sampled and greedy) and ppl */
    snprintf(a, sizeof a, "generate -m %s --tokenizer %s -n 16 --seed 1", nan_final, tok);
    CHECK_REFUSED(cli(a), "NaN at position 0) first in the final RMSNorm (final_norm)");
    snprintf(a, sizeof a, "generate -m %s --tokenizer %s -n 16 --temp 0", nan_final, tok);
    CHECK_REFUSED(cli(a), "final_norm");
    snprintf(a, sizeof a, "generate -m %s --tokenizer %s -n 16 --seed 1", inf_wg, tok);
    CHECK_REFUSED(cli(a), "+inf at position 0) first in layer 2, the gate projection (wg)");
    snprintf(a, sizeof a, "ppl -m %s --tokenizer %s -f %s -q", nan_final, tok, text);
    CHECK_REFUSED(cli(a), "final_norm");
    snprintf(a, sizeof a, "ppl -m %s --tokenizer %s -f %s -q", inf_wg, tok, text);
    CHECK_REFUSED(cli(a), "layer 2, the gate projection (wg)");
    /* the runtime: an f32 artifact carries the values as they are */
    const char *spk_nan = sc_tmp_path("nan_final.spk"), *spk_inf = sc_tmp_path("inf_wg.spk");
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout f32 -o %s -q", nan_final, tok, spk_nan);
    CHECK_MSG(cli(a) == 0, "%s", out);
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout f32 -o %s -q", inf_wg, tok, spk_inf);
    CHECK_MSG(cli(a) == 0, "%s", out);
    snprintf(a, sizeof a, "run -m %s -n 8 --seed 1", spk_nan);
    CHECK_REFUSED(cli(a), "position 0: non-finite values first in the final RMSNorm (tensor final_norm)");
    snprintf(a, sizeof a, "run -m %s -n 8 --temp 0 -p 'Once upon'", spk_inf);
    CHECK_REFUSED(cli(a), "position 0: non-finite values first in layer 2 MLP: the gate projection (tensor l2.wg)");
    /* a quantised artifact's final norm stays f32 */
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout q8_0 -o %s -q", nan_final, tok, spk_nan);
    CHECK_MSG(cli(a) == 0, "%s", out);
    snprintf(a, sizeof a, "run -m %s -n 8 --method cats --density 0.5", spk_nan);
    CHECK_REFUSED(cli(a), "final_norm");
}

static void test_sampler(void) {
    float scratch[2 * 64], x[32];
    sc_sampler s;
    /* non-finite logits: nothing to sample from, whatever the settings */
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; b++)
        for (int mode = 0; mode < 3; mode++) {
            for (int i = 0; i < 32; i++) x[i] = b == 2 ? -INFINITY : (float)i * 0.1f;
            x[b == 2 ? 0 : 7] = bad[b];
            sc_sampler_init(&s, mode == 0 ? 0.0f : 1.0f, mode == 2 ? 0.9f : 1.0f, 1);
            CHECK(sc_sampler_sample(&s, x, 32, scratch) == -1);
        }
    /* top_p <= 1/n with uniform logits: the cutoff lies above every probability; the nucleus keeps the most
       probable token (the first of the ties) instead of reading before its buffer */
    for (uint64_t seed = 1; seed <= 8; seed++) {
        float u[2] = {0.5f, 0.5f};
        sc_sampler_init(&s, 1.0f, 0.4f, seed);
        CHECK(sc_sampler_sample(&s, u, 2, scratch) == 0);
    }
    /* a temperature so small that the scaled logits overflow: the greedy limit */
    float big[3] = {1.0f, 3e38f, 2.0f};
    sc_sampler_init(&s, 1e-30f, 0.9f, 3);
    CHECK(sc_sampler_sample(&s, big, 3, scratch) == 1);
    /* finite logits still sample: every draw is a valid id, and a dominant logit is drawn */
    for (int i = 0; i < 32; i++) x[i] = i == 9 ? 30.0f : 0.0f;
    sc_sampler_init(&s, 1.0f, 0.9f, 5);
    CHECK(sc_sampler_sample(&s, x, 32, scratch) == 9);
}

/* ---- items 3 and 7: calibration files ---- */

/* Copies container src to dst (same kind) through the writer, so every
 * checksum is valid: manifest replaced when `manifest` is non-NULL, and each
 * section's raw bytes passed to edit (may be NULL) before they are written. */
typedef void (*edit_fn)(const char *name, void *data, uint64_t size, void *user);
static bool rewrite(const char *src, const char *dst, srt_ct_kind kind, const char *manifest, edit_fn edit, void *user) {
    srt_container *c = NULL;
    srt_writer *w = NULL;
    char msg[768];
    if (srt_container_open(src, kind, &c, msg, sizeof msg)) return false;
    bool ok = srt_writer_create(dst, kind, &w, msg, sizeof msg) == SRT_CT_OK;
    size_t mlen = 0;
    const char *mt = manifest ? manifest : srt_container_manifest_text(c, &mlen);
    ok = ok && srt_writer_set_manifest(w, mt, manifest ? strlen(manifest) : mlen) == SRT_CT_OK;
    for (size_t i = 0; ok && i < srt_container_section_count(c); i++) {
        const srt_ct_section *sec = srt_container_section_at(c, i);
        const void *data;
        uint64_t size;
        ok = srt_container_data(c, i, &data, &size) == SRT_CT_OK;
        void *copy = ok ? malloc(size ? size : 1) : NULL;
        ok = ok && copy;
        if (ok) {
            memcpy(copy, data, size);
            if (edit) edit(sec->name, copy, size, user);
            ok = srt_writer_add(w, sec->name, sec->dtype, sec->ndim, sec->dims, copy, size, 0) == SRT_CT_OK;
        }
        free(copy);
    }
    ok = ok && srt_writer_finish(w) == SRT_CT_OK;
    srt_writer_free(w);
    srt_container_close(c);
    return ok;
}

/* The manifest of a container as cJSON (caller deletes), or NULL. */
static cJSON *manifest_of(const char *path) {
    srt_container *c = NULL;
    char msg[768];
    if (srt_container_open(path, SRT_CT_ANY, &c, msg, sizeof msg)) return NULL;
    size_t n = 0;
    const char *t = srt_container_manifest_text(c, &n);
    cJSON *j = cJSON_ParseWithLength(t, n);
    srt_container_close(c);
    return j;
}

typedef struct hist_edit {
    const char *section; /* e.g. "cats/layer1.hist" */
    int64_t bin, value;  /* set hist[bin] = value */
    bool all_layers_bin0; /* instead: every hist becomes {value, 0, 0, ...} */
    bool nan_activity;    /* cats/layer0.activity[3] = NaN */
} hist_edit;

static void edit_hist(const char *name, void *data, uint64_t size, void *user) {
    const hist_edit *e = user;
    int64_t *h = data;
    if (e->all_layers_bin0 && strstr(name, ".hist")) {
        memset(h, 0, size);
        h[0] = e->value;
    }
    if (e->section && strcmp(name, e->section) == 0 && (uint64_t)(e->bin + 1) * 8 <= size) h[e->bin] = e->value;
    if (e->nan_activity && strcmp(name, "cats/layer0.activity") == 0 && size >= 32) ((double *)data)[3] = NAN;
}

static void test_calibration_files(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_sample.txt");
    if (!bin || !tok || !text) return;
    char a[16384], good[1024], s0[1024], s1[1024], merged[1024], bad[1024], bad2[1024];
    snprintf(good, sizeof good, "%s", sc_tmp_path("good.scal"));
    snprintf(s0, sizeof s0, "%s", sc_tmp_path("s0.scal"));
    snprintf(s1, sizeof s1, "%s", sc_tmp_path("s1.scal"));
    snprintf(merged, sizeof merged, "%s", sc_tmp_path("merged.scal"));
    snprintf(bad, sizeof bad, "%s", sc_tmp_path("bad.scal"));
    snprintf(bad2, sizeof bad2, "%s", sc_tmp_path("bad2.scal"));
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cats -o %s -q", bin, tok, text, good);
    CHECK_MSG(cli(a) == 0, "%s", out);
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cats --shard %d/2 -o %s "
            "-q", bin, tok, text, i,
                 i ? s1 : s0);
        CHECK_MSG(cli(a) == 0, "%s", out);
    }
    /* item 7: merged shards carry the model's family and format like a single run */
    snprintf(a, sizeof a, "merge %s %s -o %s", s0, s1, merged);
    CHECK_MSG(cli(a) == 0, "%s", out);
    cJSON *jg = manifest_of(good), *jm = manifest_of(merged);
    const cJSON *mg = cJSON_GetObjectItem(jg, "model"), *mm = cJSON_GetObjectItem(jm, "model");
    CHECK(cJSON_IsString(cJSON_GetObjectItem(mg, "family")) && cJSON_IsString(cJSON_GetObjectItem(mg, "format")));
    CHECK(mg && mm && cJSON_Compare(mg, mm, true)); /* id, family, format, shapes */
    CHECK(cJSON_Compare(cJSON_GetObjectItem(jg, "data"), cJSON_GetObjectItem(jm, "data"), true) == false); /* shards differ */
    cJSON_Delete(jm);
    /* and a merge of merges still does */
    snprintf(a, sizeof a, "merge %s -o %s", merged, bad);
    CHECK_MSG(cli(a) == 0, "%s", out);
    jm = manifest_of(bad);
    CHECK(jm && cJSON_Compare(mg, cJSON_GetObjectItem(jm, "model"), true));
    cJSON_Delete(jm);

    /* the reference: eval at density 0.5 reaches about 0.5 */
    snprintf(a, sizeof a, "eval -m %s --tokenizer %s -f %s --method cats-threshold --density 0.5 --calib %s "
        "-q", bin, tok, text, good);
    CHECK_MSG(cli(a) == 0, "%s", out);

    /* item 3: counts that overflow int64 when summed (the threshold used to wrap and give density 1) */
    hist_edit e1 = {"cats/layer1.hist", 5, INT64_MAX / 2, false, false};
    CHECK(rewrite(good, bad, SRT_CT_SCAL, NULL, edit_hist, &e1));
    snprintf(a, sizeof a, "eval -m %s --tokenizer %s -f %s --method cats-threshold --density 0.5 --calib %s "
        "-q", bin, tok, text, bad);
    CHECK_REFUSED(cli(a), "cats/layer1.hist");
    hist_edit e2 = {"cats/layer2.hist", 3, -7, false, false}; /* a negative count */
    CHECK(rewrite(good, bad, SRT_CT_SCAL, NULL, edit_hist, &e2));
    CHECK_REFUSED(cli(a), "holds count -7");
    hist_edit e3 = {"cats/layer0.hist", 0, 12345, false, false}; /* plausible counts that do not add up */
    CHECK(rewrite(good, bad, SRT_CT_SCAL, NULL, edit_hist, &e3));
    CHECK_REFUSED(cli(a), "histogram does not count");
    hist_edit e4 = {NULL, 0, 0, false, true}; /* a NaN sum */
    CHECK(rewrite(good, bad, SRT_CT_SCAL, NULL, edit_hist, &e4));
    CHECK_REFUSED(cli(a), "non-finite value at 3");
    snprintf(a, sizeof a, "verify %s", bad); /* verify checks the calibration's invariants too */
    CHECK_REFUSED(cli(a), "non-finite value at 3");
    /* options.layers beyond int64: refused before any conversion, and no wrapped number in the message */
    cJSON *jb = cJSON_Duplicate(jg, true);
    cJSON *lay = cJSON_GetObjectItem(cJSON_GetObjectItem(jb, "options"), "layers");
    CHECK(lay && cJSON_IsArray(lay));
    if (lay) cJSON_ReplaceItemInArray(lay, 0, cJSON_CreateNumber(1e300));
    char *mt = cJSON_PrintUnformatted(jb);
    CHECK(mt && rewrite(good, bad, SRT_CT_SCAL, mt, NULL, NULL));
    snprintf(a, sizeof a, "eval -m %s --tokenizer %s -f %s --method cats-threshold --density 0.5 --calib %s "
        "-q", bin, tok, text, bad);
    CHECK_REFUSED(cli(a), "options.layers must be two integers");
    CHECK(!strstr(out, "-9223372036854775808"));
    if (lay) cJSON_ReplaceItemInArray(lay, 0, cJSON_CreateNumber(0.5));
    free(mt);
    mt = cJSON_PrintUnformatted(jb);
    CHECK(mt && rewrite(good, bad, SRT_CT_SCAL, mt, NULL, NULL));
    CHECK_REFUSED(cli(a), "options.layers must be two integers");
    free(mt);
    cJSON_Delete(jb);

    /* merge: two shards each consistent on their own (tokens T, every histogram T x F in bin 0) whose sum
       exceeds the count bound: refused, not wrapped */
    /* T * F just above 2^61 (two of them exceed 2^62); T a multiple of 4 below 2^55, so exact in a JSON double */
    const int64_t F = 172, T = (((int64_t)1 << 61) / F + 4) & ~(int64_t)3;
    for (int i = 0; i < 2; i++) {
        cJSON *js = manifest_of(i ? s1 : s0);
        cJSON *da = cJSON_GetObjectItem(js, "data");
        cJSON_ReplaceItemInObject(da, "tokens", cJSON_CreateNumber((double)T));
        char *t2 = cJSON_PrintUnformatted(js);
        hist_edit e5 = {NULL, 0, T * F, true, false};
        CHECK(t2 && rewrite(i ? s1 : s0, i ? bad2 : bad, SRT_CT_SCAL, t2, edit_hist, &e5));
        free(t2);
        cJSON_Delete(js);
    }
    snprintf(a, sizeof a, "merge %s -o %s", bad, merged); /* each alone is consistent */
    CHECK_MSG(cli(a) == 0, "%s", out);
    snprintf(a, sizeof a, "merge %s %s -o %s", bad, bad2, merged);
    CHECK_REFUSED(cli(a), "counts overflow");
    cJSON_Delete(jg);
}

/* ---- item 8: the key/value cache ---- */

static void test_kv_cache(void) {
    char a[16384], dir[1024], spk[1024];
    snprintf(dir, sizeof dir, "%s", sc_tmp_path("longctx"));
    snprintf(spk, sizeof spk, "%s", sc_tmp_path("longctx.spk"));
    snprintf(a, sizeof a, "synth -o %s --dim 64 --ffn 128 --layers 2 --heads 4 --kv-heads 2 --vocab 256 --seq-len 131072 "
                          "--token-seqs 1 --token-len 8", dir);
    CHECK_MSG(cli(a) == 0, "%s", out);
    snprintf(a, sizeof a, "pack -m %s --layout q8_0 -o %s -q", dir, spk);
    CHECK_MSG(cli(a) == 0, "%s", out);
    /* -n 8 holds what 8 positions need (at most the initial SRT_MODEL_INIT_CTX), not 131,072 */
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "%s run -m %s -n 8 --seed 1 --json 2>/dev/null", cli_path, spk);
    CHECK(sc_run(cmd, out, sizeof out) == 0);
    cJSON *j = cJSON_Parse(out);
    const cJSON *kv = cJSON_GetObjectItem(j, "kv_cache_positions");
    CHECK_MSG(cJSON_IsNumber(kv) && kv->valuedouble >= 8 && kv->valuedouble <= SRT_MODEL_INIT_CTX, "%s", out);
    cJSON_Delete(j);
    /* -n 300 reserves exactly 300 */
    snprintf(cmd, sizeof cmd, "%s run -m %s -n 300 --seed 1 --json 2>/dev/null", cli_path, spk);
    CHECK(sc_run(cmd, out, sizeof out) == 0);
    j = cJSON_Parse(out);
    kv = cJSON_GetObjectItem(j, "kv_cache_positions");
    CHECK_MSG(cJSON_IsNumber(kv) && kv->valuedouble == 300, "%s", out);
    cJSON_Delete(j);
    /* options: -n 0 has no hidden meaning, -n beyond the context or --ctx-size is refused */
    snprintf(a, sizeof a, "run -m %s -n 0", spk);
    CHECK_REFUSED(cli(a), "-n 0 generates nothing");
    snprintf(a, sizeof a, "run -m %s --steps 0", spk);
    CHECK_REFUSED(cli(a), "--steps 0 is out of range");
    snprintf(a, sizeof a, "run -m %s -n 200000", spk);
    CHECK_REFUSED(cli(a), "-n 200000 exceeds the model's context");
    snprintf(a, sizeof a, "run -m %s -n 100 --ctx-size 64", spk);
    CHECK_REFUSED(cli(a), "-n 100 exceeds --ctx-size (64 positions)");
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin");
    if (bin && tok) {
        snprintf(a, sizeof a, "generate -m %s --tokenizer %s -n 0", bin, tok);
        CHECK_REFUSED(cli(a), "-n 0 generates nothing");
        snprintf(a, sizeof a, "generate -m %s --tokenizer %s -n 513", bin, tok);
        CHECK_REFUSED(cli(a), "-n 513 exceeds the model's context (512 positions)");
    }

    /* growing on demand gives the same numbers as a cache reserved up front (the same code on the same
     * values), with either cache type: growing moves every (layer, K/V head)'s run of positions */
    srt_ctx *ctx = NULL;
    CHECK(srt_ctx_create(&ctx, SRT_ISA_AUTO, 1) == SRT_OK);
    for (int ct = 0; ct < 2; ct++) {
        srt_model *g = NULL, *r = NULL;
        srt_model_opts mo = {0, ctx, ct ? SRT_KV_F16 : SRT_KV_F32};
        char msg[768];
        CHECK(srt_model_open(spk, &mo, &g, msg, sizeof msg) == SRT_CT_OK);
        CHECK(srt_model_open(spk, &mo, &r, msg, sizeof msg) == SRT_CT_OK);
        if (g && r) {
            CHECK(srt_model_get_config(g)->n_kv_heads > 1); /* so that the heads' runs move apart */
            CHECK(srt_model_ctx_allocated(g) == SRT_MODEL_INIT_CTX && srt_model_max_ctx(g) == 131072);
            CHECK(srt_model_reserve(r, 100) == SRT_OK && srt_model_ctx_allocated(r) == 100);
            CHECK(srt_model_reserve(r, 131073) == SRT_EINVAL);
            const int64_t V = srt_model_get_config(g)->vocab_size;
            float *keep = malloc(sizeof(float) * (size_t)V);
            int same = 0;
            for (int64_t p = 0; p < 100; p++) {
                const float *lg, *lr;
                int32_t t = (int32_t)((p * 37 + 11) % V);
                CHECK(srt_model_step(g, t, p, &lg) == SRT_OK);
                memcpy(keep, lg, sizeof(float) * (size_t)V);
                CHECK(srt_model_step(r, t, p, &lr) == SRT_OK);
                same += memcmp(keep, lr, sizeof(float) * (size_t)V) == 0;
            }
            CHECK_MSG(same == 100, "%s cache: %d of 100 positions identical", ct ? "f16" : "f32", same);
            CHECK(srt_model_ctx_allocated(g) == 128); /* 16 -> 32 -> 64 -> 128 */
            free(keep);
        }
        srt_model_close(g);
        srt_model_close(r);
    }
    srt_ctx_free(ctx);
}

/* ---- item 9: one configuration validation ---- */

static void test_config_rules(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_sample.txt");
    if (!bin || !tok || !text) return;
    char a[16384], spk[1024], bad[1024];
    snprintf(spk, sizeof spk, "%s", sc_tmp_path("cfg.spk"));
    snprintf(bad, sizeof bad, "%s", sc_tmp_path("cfg_bad.spk"));
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout q8_0 -o %s -q", bin, tok, spk);
    CHECK_MSG(cli(a) == 0, "%s", out);
    const struct {
        const char *key;
        double value;
        const char *why;
    } cases[] = {
        {"norm_eps", 0.0, "norm_eps = 0 is not in (0, 1)"},
        {"norm_eps", 2.0, "norm_eps = 2 is not in (0, 1)"},
        {"rope_theta", -1.0, "rope_theta = -1 is not in (0, 1e12)"},
        {"n_kv_heads", 3.0, "n_heads = 8 is not a multiple of n_kv_heads = 3"},
        {"rope_scaling", 1.0, "rope_factor = 1e+06 is not in [1, 1024]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *j = manifest_of(spk);
        cJSON *cfg = cJSON_GetObjectItem(j, "config");
        CHECK(cfg != NULL);
        cJSON_ReplaceItemInObject(cfg, cases[i].key, cJSON_CreateNumber(cases[i].value));
        if (!strcmp(cases[i].key, "rope_scaling")) {
            cJSON_DeleteItemFromObject(cfg, "rope_factor");
            cJSON_AddNumberToObject(cfg, "rope_factor", 1e6);
        }
        char *mt = cJSON_PrintUnformatted(j);
        CHECK(mt && rewrite(spk, bad, SRT_CT_SPAK, mt, NULL, NULL));
        free(mt);
        cJSON_Delete(j);
        /* the runtime and the toolchain refuse it with the same reason */
        snprintf(a, sizeof a, "run -m %s -n 8 --seed 1", bad);
        CHECK_REFUSED(cli(a), cases[i].why);
        snprintf(a, sizeof a, "ppl -m %s -f %s -q", bad, text);
        CHECK_REFUSED(cli(a), cases[i].why);
        snprintf(a, sizeof a, "verify %s", bad);
        CHECK_REFUSED(cli(a), cases[i].why);
    }
}

/* ---- item 4: an all-empty tokenizer ---- */

static void test_empty_tokenizer(void) {
    const char *bin = sc_asset("models/stories260K.bin");
    if (!bin) return;
    char tok[1024], spk[1024], a[16384];
    snprintf(tok, sizeof tok, "%s", sc_tmp_path("empty_tok.bin"));
    snprintf(spk, sizeof spk, "%s", sc_tmp_path("empty_tok.spk"));
    /* llama2.c tokenizer.bin: max_token_length, then (score, length, bytes) per token; every length 0 */
    uint8_t buf[4 + 512 * 8];
    int32_t one = 1, zero = 0;
    float score = 0.0f;
    memcpy(buf, &one, 4);
    for (int i = 0; i < 512; i++) {
        memcpy(buf + 4 + 8 * i, &score, 4);
        memcpy(buf + 8 + 8 * i, &zero, 4);
    }
    CHECK(sc_write_bytes(tok, buf, sizeof buf));
    snprintf(a, sizeof a, "generate -m %s --tokenizer %s -n 6 --seed 3", bin, tok);
    CHECK_MSG(cli(a) == 0, "%s", out);
    snprintf(a, sizeof a, "info -m %s --tokenizer %s", bin, tok);
    CHECK_MSG(cli(a) == 0, "%s", out);
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout q8_0 -o %s -q", bin, tok, spk);
    CHECK_MSG(cli(a) == 0, "%s", out);
    snprintf(a, sizeof a, "run -m %s -n 6 --seed 3", spk); /* the vocabulary read back from the artifact */
    CHECK_MSG(cli(a) == 0, "%s", out);
    /* text cannot be encoded with no pieces: a clean error, not a crash */
    snprintf(a, sizeof a, "run -m %s -n 6 -p 'hello'", spk);
    int rc = cli(a);
    CHECK_MSG(rc == 0 || count_lines(out) == 1, "rc %d: %s", rc, out);
}

/* ---- item 10: options ---- */

static void test_options(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_sample.txt");
    if (!bin || !tok || !text) return;
    char a[16384];
    const char *o = sc_tmp_path("opt.out");
    /* non-finite numbers */
    CHECK_REFUSED(cli("bench --quick --sparsity nan"), "--sparsity wants numbers in [0, 0.99]");
    CHECK_REFUSED(cli("bench --quick --sparsity 0.5,inf"), "--sparsity");
    CHECK_REFUSED(cli("bench --quick --threads 1.5"), "--threads wants whole numbers");
    snprintf(a, sizeof a, "eval -m %s --tokenizer %s -f %s --method cats --density nan", bin, tok, text);
    CHECK_REFUSED(cli(a), "--density expects a number, got 'nan'");
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --density inf -o %s", bin, tok, o);
    CHECK_REFUSED(cli(a), "--density expects a number, got 'inf'");
    snprintf(a, sizeof a, "generate -m %s --tokenizer %s --temp nan", bin, tok);
    CHECK_REFUSED(cli(a), "--temp expects a number");
    /* unknown --params keys name the known ones; known keys still work */
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cats --params zzz=1 -o %s -q", bin, tok,
        text, o);
    CHECK_REFUSED(cli(a), "unknown key 'zzz' (known: none)");
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cett,coact --params tagret=0.5 -o %s "
        "-q", bin, tok, text, o);
    CHECK_REFUSED(cli(a), "unknown key 'tagret' (known: sample,stride,target,coact_sample,coact_stride,coact_density)");
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cett --params target=0.3,target=0.4 -o %s "
        "-q", bin, tok, text, o);
    CHECK_REFUSED(cli(a), "given twice");
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cett --params target -o %s "
        "-q", bin, tok, text, o);
    CHECK_REFUSED(cli(a), "is not key=value");
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --params tagret=0.5 -o %s -q", bin, tok, o);
    CHECK_REFUSED(cli(a), "unknown key 'tagret' (known: in,h,target,");
    snprintf(a, sizeof a, "eval -m %s --tokenizer %s -f %s --method larosa --params "
        "grid_step=0.1,zzz=1", bin, tok, text);
    CHECK_REFUSED(cli(a), "unknown key 'zzz' (known: in,h,grid,grid_seqs,grid_step)");
    struct stat st;
    CHECK(stat(o, &st) != 0); /* nothing was written by any of them */
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method cett --params target=0.3,sample=64 -o %s "
        "-q", bin, tok, text, o);
    CHECK_MSG(cli(a) == 0, "%s", out);
}

int main(void) {
    test_output_is_input();
    test_nonfinite_weights();
    test_sampler();
    test_calibration_files();
    test_kv_cache();
    test_config_rules();
    test_empty_tokenizer();
    test_options();
    return sc_test_finish();
}
