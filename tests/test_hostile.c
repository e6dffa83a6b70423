/* test_hostile.c - hostile input, faults and data safety through the CLI
 * (issue 16). Every crafted input is generated here from the shipped assets;
 * each case asserts a one-line error and a non-zero exit (or the correct
 * output) and that no input was touched.
 *   - an output naming an input (path, symlink, hard link, a file inside a
 *     model directory) is refused for every command and input kind, and the
 *     input is intact; a symlinked output is written through to its target,
 *     which keeps its mode; an existing FIFO is never replaced. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "safetensors.h"
#include "testing.h"

static char out[1 << 16];
static const char *cli_path = SC_CLI_PATH;

/* Runs "sparsecal <args>" with stderr captured; returns the exit status. */
static int cli(const char *args) {
    char cmd[20000];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", cli_path, args);
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
    snprintf(a, sizeof a, "pack -m %s -t %s -o %s -q", bin, tok, bin);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "pack -m %s -t %s -o %s -q", lnk, tok, bin);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "pack -m %s -t %s -o %s -q", bin, tok, lnk);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "pack -m %s -t %s -o %s -q", hard, tok, bin);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    /* pack: the tokenizer */
    snprintf(a, sizeof a, "pack -m %s -t %s -o %s -q", bin, tok, tok);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    /* compute: model, data, tokenizer */
    const char *scal = sc_tmp_path("c.scal");
    snprintf(a, sizeof a, "compute -m %s -t %s -f %s --method cats -o %s -q", bin, tok, text, text);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "compute -m %s -t %s -f %s --method cats -o %s -q", bin, tok, text, bin);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "compute -m %s -t %s -f %s --method cats -o %s -q", bin, tok, text, tok);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    /* a calibration file to use as an input below */
    snprintf(a, sizeof a, "compute -m %s -t %s -f %s --method cats -o %s -q", bin, tok, text, scal);
    CHECK_MSG(cli(a) == 0, "%s", out);
    char scal_copy[1024];
    snprintf(scal_copy, sizeof scal_copy, "%s", sc_tmp_path("c_copy.scal"));
    CHECK(copy_file(scal, scal_copy));
    /* pack --calib, merge's inputs, diag --dump-ranks onto --calib */
    snprintf(a, sizeof a, "pack -m %s -t %s --calib %s -o %s -q", bin, tok, scal, scal);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "merge %s %s -o %s", scal, scal_copy, scal_copy);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "diag -m %s -t %s -f %s --calib %s --dump-ranks %s -q", bin, tok, text, scal, scal);
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
    snprintf(a, sizeof a, "pack -m %s -t %s -o %s -q", hf, tok, st_path);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    snprintf(a, sizeof a, "compute -m %s -t %s -f %s --method cats -o %s -q", hf, tok, text, st_path);
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
    snprintf(a, sizeof a, "pack -m %s -t %s --lora %s -o %s -q", bin, tok, ad, ad_st);
    CHECK_REFUSED(cli(a), "refusing to overwrite an input");
    CHECK(same_bytes(ad_st, ad_copy));
    /* every input is intact */
    CHECK(same_bytes(bin, bin_a) && same_bytes(tok, tok_a) && same_bytes(text, text_a));
    struct stat st;
    CHECK(lstat(lnk, &st) == 0 && S_ISLNK(st.st_mode));

    /* an existing non-regular file (a FIFO) is never replaced */
    const char *fifo = sc_tmp_path("fifo");
    CHECK(mkfifo(fifo, 0600) == 0);
    snprintf(a, sizeof a, "pack -m %s -t %s -o %s -q", bin, tok, fifo);
    CHECK_REFUSED(cli(a), "not a regular file");
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));

    /* a symlinked output: the link stays, its target is replaced and keeps mode 0600 */
    const char *target = sc_tmp_path("target.spk"), *via = sc_tmp_path("via.spk");
    CHECK(sc_write_bytes(target, "old", 3) && chmod(target, 0600) == 0 && symlink("target.spk", via) == 0);
    snprintf(a, sizeof a, "pack -m %s -t %s --layout q8_0 -o %s -q", bin, tok, via);
    CHECK_MSG(cli(a) == 0, "%s", out);
    CHECK(lstat(via, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(lstat(target, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600 && st.st_size > 3);
    snprintf(a, sizeof a, "verify %s", target);
    CHECK_MSG(cli(a) == 0, "%s", out);
    /* a new file gets 0666 less the umask */
    const char *fresh = sc_tmp_path("fresh.spk");
    snprintf(a, sizeof a, "pack -m %s -t %s --layout q8_0 -o %s -q", bin, tok, fresh);
    mode_t um = umask(022);
    CHECK_MSG(cli(a) == 0, "%s", out);
    umask(um);
    CHECK(stat(fresh, &st) == 0 && (st.st_mode & 0777) == 0644);
}

int main(void) {
    test_output_is_input();
    return sc_test_finish();
}
