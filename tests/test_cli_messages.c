/* test_cli_messages.c - what the CLI's errors say:
 *  - the command's name once ("sparsecal eval: ...", never "sparsecal eval:
 *    eval: ..."), one line, for failures raised deep in the library;
 *  - merge of incompatible calibrations names the difference in words (the
 *    option and both values, other data, a shard twice), exit status 2;
 *  - sc_calib_options_diff on canonical option strings;
 *  - progress on a stderr that is not a terminal: whole lines, no '\r', at
 *    most one per tenth of the work (the run is shorter than 10 s). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "testing.h"

static char out[1 << 16];

static int cli(const char *args) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", SC_CLI_PATH, args);
    return sc_run(cmd, out, sizeof out);
}

static size_t lines(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* one line "sparsecal CMD: " + want, exit status rc, the command's name not repeated */
static void says(const char *args, int rc, const char *want) {
    char cmd[64];
    snprintf(cmd, sizeof cmd, "%.*s", (int)strcspn(args, " "), args);
    char head[128], twice[160], twice2[160];
    snprintf(head, sizeof head, "sparsecal %s: ", cmd);
    snprintf(twice, sizeof twice, "sparsecal %s: %s:", cmd, cmd);
    snprintf(twice2, sizeof twice2, "sparsecal %s: %s -", cmd, cmd);
    int got = cli(args);
    CHECK_MSG(got == rc && lines(out) == 1 && !strncmp(out, head, strlen(head)) && strstr(out, want) &&
                  !strstr(out, twice) && !strstr(out, twice2),
              "%s: exit %d: [%s], want exit %d and [%s]", args, got, out, rc, want);
}

int main(void) {
    const char *M = sc_asset("models/stories260K.bin"), *T = sc_asset("models/tok512.bin");
    const char *X = sc_asset("text/tinystories_valid_a.txt");
    if (!M || !T || !X) return sc_test_finish();
    char a[4096];

    /* sc_calib_options_diff: the first differing option, a's value first, as the user writes it */
    char d[512];
    const char *o1 = "{\"methods\":[\"claws\",\"cats\"],\"seq_len\":512,\"layers\":[0,5],\"params\":\"\"}";
    const char *o2 = "{\"methods\":[\"claws\",\"cats\"],\"seq_len\":64,\"layers\":[0,5],\"params\":\"\"}";
    const char *o3 = "{\"methods\":[\"claws\"],\"seq_len\":512,\"layers\":[0,2],\"params\":\"\"}";
    const char *o4 = "{\"methods\":[\"claws\",\"cats\"],\"seq_len\":512,\"layers\":[0,5],\"params\":\"a=1\"}";
    sc_calib_options_diff(o2, o1, d, sizeof d);
    CHECK_MSG(!strcmp(d, "seq_len 64 vs 512"), "[%s]", d);
    sc_calib_options_diff(o3, o1, d, sizeof d);
    CHECK_MSG(!strcmp(d, "methods claws vs claws,cats"), "[%s]", d);
    sc_calib_options_diff(o1, o4, d, sizeof d);
    CHECK_MSG(!strcmp(d, "params none vs a=1"), "[%s]", d);
    sc_calib_options_diff("{\"layers\":[0,2]}", "{\"layers\":[0,5]}", d, sizeof d);
    CHECK_MSG(!strcmp(d, "layers 0:2 vs 0:5"), "[%s]", d);
    sc_calib_options_diff("{\"a\":1}", "{\"a\":1,\"b\":2}", d, sizeof d);
    CHECK_MSG(!strcmp(d, "b (absent) vs 2"), "[%s]", d);
    sc_calib_options_diff("not json", "{}", d, sizeof d);
    CHECK_MSG(!strcmp(d, "not json vs {}"), "[%s]", d);

    /* merge: calibrations that differ in one thing each */
    const char *base = sc_tmp_path("base.scal"), *meth = sc_tmp_path("meth.scal"), *lay = sc_tmp_path("lay.scal");
    const char *seq = sc_tmp_path("seq.scal"), *data = sc_tmp_path("data.scal"), *merged = sc_tmp_path("m.scal");
    const char *common = "--method claws,cats -q";
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --max-docs 6 %s -o %s", M, T, X, common, base);
    CHECK(cli(a) == 0);
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --max-docs 6 --method claws -q -o %s", M, T, X, meth);
    CHECK(cli(a) == 0);
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --max-docs 6 %s --layers 0:2 -o %s", M, T, X, common,
        lay);
    CHECK(cli(a) == 0);
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --max-docs 6 %s --ctx-size 64 -o %s", M, T, X, common,
        seq);
    CHECK(cli(a) == 0);
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --max-docs 5 %s -o %s", M, T, X, common, data);
    CHECK(cli(a) == 0);
    char want[1024];
    snprintf(a, sizeof a, "merge %s %s -o %s", base, meth, merged);
    snprintf(want, sizeof want, "%s does not merge with %s: computed with other options: methods claws vs claws,cats",
             meth, base);
    says(a, 2, want);
    snprintf(a, sizeof a, "merge %s %s -o %s", base, lay, merged);
    says(a, 2, "computed with other options: layers 0:2 vs 0:5");
    snprintf(a, sizeof a, "merge %s %s -o %s", base, seq, merged);
    says(a, 2, "computed with other options: seq_len 64 vs 512");
    snprintf(a, sizeof a, "merge %s %s -o %s", base, data, merged);
    says(a, 2, "computed on other data (data id ");
    snprintf(a, sizeof a, "merge %s %s -o %s", base, base, merged);
    says(a, 2, "shard 0/1 is already included; it would be counted twice");

    /* library failures reach the user with the command named once */
    snprintf(a, sizeof a, "eval -m %s --tokenizer %s -f %s --max-docs 2 --method teal", M, T, X);
    says(a, 2, "method teal needs a calibration file (--calib)");
    snprintf(a, sizeof a, "eval -m %s --tokenizer %s -f %s --max-docs 2 --method cett", M, T, X);
    says(a, 2, "method cett needs a calibration file (--calib)");
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --method larosa --density 0.5 -o %s", M, T, sc_tmp_path("x.spk"));
    says(a, 2, "--method larosa needs a calibration file with larosa statistics (--calib)");
    /* kmi4-in says which matrices stay rows (stories260K's are all short), and --json lists them */
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout kmi4-in -o %s", M, T, sc_tmp_path("in.spk"));
    CHECK(cli(a) == 0);
    CHECK_MSG(strstr(out, "note: wq wk wv wo wg stay kmi4r rows, read whole: fewer than 1024 output rows") != NULL,
              "[%s]", out);
    snprintf(a, sizeof a, "%s pack -m %s --tokenizer %s --layout kmi4-in --column-min-rows 40 --json -o %s 2>/dev/null",
             SC_CLI_PATH, M, T, sc_tmp_path("in.spk"));
    CHECK(sc_run(a, out, sizeof out) == 0);
    CHECK_MSG(strstr(out, "\"rows_kept\": \"wk wv\"") || strstr(out, "\"rows_kept\":\"wk wv\""), "[%.400s]", out);
    snprintf(a, sizeof a, "pack -m %s --tokenizer %s --layout kmi4 --column-min-rows 40 -o %s", M, T,
             sc_tmp_path("k.spk"));
    says(a, 2, "--column-min-rows applies to --layout kmi4-in only, not kmi4");
    snprintf(a, sizeof a, "compute -m %s --tokenizer %s -f %s --method nope -o %s", M, T, X, sc_tmp_path("x.scal"));
    says(a, 2, "unknown method 'nope'");
    snprintf(a, sizeof a, "diag -m %s --tokenizer %s -f %s --max-docs 2 --calib %s", M, T, X, base);
    says(a, 2, "the calibration file needs claws and larosa statistics");
    snprintf(a, sizeof a, "synth --dim 63 --heads 2 -o %s", sc_tmp_path("syn"));
    says(a, 2, "dim 63 is not a multiple of n_heads 2");
    snprintf(a, sizeof a, "generate -m %s --tokenizer %s --steps 3 -p 'Once upon a time there was'", M, T);
    says(a, 2, "fills all 3 steps");
    /* prefetch distances: a malformed spec is named, before any work (and before the artifact is read) */
    says("bench --quick --prefetch kd=1/8,pass=0", 2, "--prefetch \"kd=1/8,pass=0\" is malformed: expected kr=L1/L2,");
    CHECK(setenv("SPARSECAL_PREFETCH", "kr=1/2;", 1) == 0);
    says("bench --quick", 2, "SPARSECAL_PREFETCH=\"kr=1/2;\" is malformed: expected kr=L1/L2,");
    says("run -m missing.spk -n 1", 2, "SPARSECAL_PREFETCH=\"kr=1/2;\" is malformed: expected kr=L1/L2,");
    says("bench-attention --positions 16", 2, "SPARSECAL_PREFETCH=\"kr=1/2;\" is malformed: expected kr=L1/L2,");
    /* --version says it on its prefetch line instead of failing */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s --version 2>&1", SC_CLI_PATH);
    CHECK(sc_run(cmd, out, sizeof out) == 0);
    CHECK_MSG(strstr(out, "\nprefetch    none: SPARSECAL_PREFETCH=\"kr=1/2;\" is malformed") != NULL, "[%s]", out);
    CHECK(unsetenv("SPARSECAL_PREFETCH") == 0);
    /* a good spec runs, and the benchmark reports it */
    snprintf(cmd, sizeof cmd, "%s bench --quick --dims 64:64 --sparsity 0.5 -t 1 --layers 3 --prefetch kd=0/4,zz=0 --json 2>&1",
             SC_CLI_PATH);
    CHECK(sc_run(cmd, out, sizeof out) == 0);
    CHECK_MSG(strstr(out, "kd=0/4,pass=") != NULL && strstr(out, ",zz=0\"") != NULL, "[%.300s]", out);

    /* progress into a pipe: whole lines, each "ppl: i/400 sequences", the last 400/400 */
    snprintf(a, sizeof a, "ppl -m %s --tokenizer %s -f %s --max-docs 400", M, T, X);
    CHECK(cli(a) == 0);
    size_t n = lines(out), prog = 0;
    const char *last = NULL;
    for (const char *s = out; (s = strstr(s, "ppl: ")); s++) prog++, last = s;
    CHECK_MSG(!strchr(out, '\r') && n == prog && n >= 1 && n <= 11 && out[strlen(out) - 1] == '\n', "[%s]", out);
    CHECK_MSG(last && !strncmp(last, "ppl: 400/400 sequences", 22), "[%s]", out);
    return sc_test_finish();
}
