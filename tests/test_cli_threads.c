/* test_cli_threads.c - --threads, the threads a command computes with (BLAS
 * and the runtime kernels' pool, calib/threads.h):
 *  - one validated option on every heavy command: 0, 1025, -1, 2.5, abc and
 *    an empty value are refused with one line and exit 2, as is a bad
 *    OPENBLAS_NUM_THREADS unless --threads is given; --help shows the default;
 *  - `info --json` reports the count the rule chose and the count BLAS took;
 *  - results do not depend on it: every runtime layout gives bit-identical
 *    logits and tokens at 1 and 2 threads; OpenBLAS (whose kernel sets treat
 *    the edges of a thread's block differently) agrees within float32
 *    rounding;
 *  - the progress line of compute carries the sequences done and the RSS. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "srt_container.h"
#include "srt_model.h"
#include "testing.h"

static char out[1 << 20];

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return sc_run(cmd, out, sizeof out);
}

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

static double json_num(const cJSON *j, const char *path1, const char *path2) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, path1);
    if (path2) v = cJSON_GetObjectItemCaseSensitive(v, path2);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* info --json [args]: threads.count, threads.blas, threads.kernels and blas.threads (-1 on failure) */
static void info_threads(const char *env, const char *model, const char *args, int got[4]) {
    for (int i = 0; i < 4; i++) got[i] = -1;
    if (run("%s %s info -m %s %s --json", env, SC_CLI_PATH, model, args) != 0) return;
    cJSON *j = cJSON_Parse(out);
    if (!j) return;
    got[0] = (int)json_num(j, "threads", "count");
    got[1] = (int)json_num(j, "threads", "blas");
    got[2] = (int)json_num(j, "threads", "kernels");
    got[3] = (int)json_num(j, "blas", "threads");
    cJSON_Delete(j);
}

/* The largest relative difference between the f64 sections of two
 * calibration files (same names, shapes); -1 if they cannot be compared. */
static double scal_max_rel_diff(const char *a, const char *b, int *n_sections) {
    char msg[512];
    srt_container *ca = NULL, *cb = NULL;
    double worst = -1;
    *n_sections = 0;
    if (srt_container_open(a, SRT_CT_SCAL, &ca, msg, sizeof msg) || srt_container_open(b, SRT_CT_SCAL, &cb, msg, sizeof msg))
        goto done;
    if (srt_container_section_count(ca) != srt_container_section_count(cb)) goto done;
    worst = 0;
    for (size_t i = 0; i < srt_container_section_count(ca); i++) {
        const srt_ct_section *s = srt_container_section_at(ca, i);
        if (s->dtype != SRT_CT_F64) continue;
        const void *pa, *pb;
        uint64_t na, nb;
        if (srt_container_data(ca, i, &pa, &na) || srt_container_get(cb, s->name, &pb, &nb) || na != nb) {
            worst = -1;
            goto done;
        }
        const double *x = pa, *y = pb;
        for (uint64_t k = 0; k < na / sizeof(double); k++) {
            double d = fabs(x[k] - y[k]) / fmax(fabs(x[k]), 1e-30);
            if (!(d <= worst)) worst = d; /* NaN propagates as a failure */
        }
        (*n_sections)++;
    }
done:
    srt_container_close(ca);
    srt_container_close(cb);
    return worst;
}

/* Steps the artifact through ids with 1 and 2 kernel threads; returns the
 * largest |logit difference| relative to the step's largest |logit|, and
 * whether every logit was bit-identical. */
static double runtime_threads_diff(const char *path, const int32_t *ids, int n, bool *identical) {
    srt_ctx *c1 = NULL, *c2 = NULL;
    srt_model *m1 = NULL, *m2 = NULL;
    char msg[1024];
    double worst = -1;
    *identical = false;
    if (srt_ctx_create(&c1, SRT_ISA_AUTO, 1) || srt_ctx_create(&c2, SRT_ISA_AUTO, 2)) goto done;
    srt_model_opts o1 = {0, c1, SRT_KV_F32}, o2 = {0, c2, SRT_KV_F32};
    if (srt_model_open(path, &o1, &m1, msg, sizeof msg) || srt_model_open(path, &o2, &m2, msg, sizeof msg)) {
        fprintf(stderr, "%s\n", msg);
        goto done;
    }
    int64_t V = srt_model_get_config(m1)->vocab_size;
    worst = 0;
    *identical = true;
    for (int i = 0; i < n; i++) {
        const float *l1, *l2;
        if (srt_model_step(m1, ids[i], i, &l1) || srt_model_step(m2, ids[i], i, &l2)) {
            worst = -1;
            break;
        }
        *identical = *identical && memcmp(l1, l2, (size_t)V * sizeof(float)) == 0;
        double mx = 0, d = 0;
        for (int64_t v = 0; v < V; v++) {
            mx = fmax(mx, fabs(l1[v]));
            d = fmax(d, fabs((double)l1[v] - l2[v]));
        }
        worst = fmax(worst, d / fmax(mx, 1e-30));
    }
done:
    srt_model_close(m1);
    srt_model_close(m2);
    srt_ctx_free(c1);
    srt_ctx_free(c2);
    return worst;
}

int main(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_sample.txt");
    if (!bin || !tok || !text) return sc_test_finish();
    const char *cli = SC_CLI_PATH;

    /* a model whose products OpenBLAS splits over threads (its [128 x 768 x 256]
     * products are far above its single-thread threshold) but small enough to be quick */
    const char *syn = sc_tmp_path("syn");
    CHECK(run("%s synth -o %s --dim 256 --ffn 768 --layers 2 --heads 4 --kv-heads 2 --vocab 512 --seq-len 128 "
              "--token-seqs 6 --token-len 128 --seed 3 2>&1",
              cli, syn) == 0);
    char ids_path[4096];
    snprintf(ids_path, sizeof ids_path, "%s/tokens.txt", syn);

    /* validation: the same one-line errors on every heavy command */
    const char *cmds[] = {"ppl", "compute", "eval", "pack", "generate", "diag", "bench-forward", "info", "run"};
    const char *bad[] = {"0", "1025", "-1", "2.5", "abc", "''", "1e3"};
    for (size_t c = 0; c < sizeof cmds / sizeof cmds[0]; c++) {
        CHECK_MSG(run("%s %s --help", cli, cmds[c]) == 0 && strstr(out, "--threads N") &&
                      strstr(out, "default: all") && strstr(out, "OPENBLAS_NUM_THREADS"),
                  "%s --help: %s", cmds[c], out);
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            int rc = run("%s %s -m %s --threads %s 2>&1", cli, cmds[c], bin, bad[b]);
            CHECK_MSG(rc == 2 && count_lines(out) == 1 && strstr(out, "--threads"), "%s --threads %s: %d [%s]", cmds[c],
                      bad[b], rc, out);
        }
    }
    CHECK(run("OPENBLAS_NUM_THREADS=lots %s ppl -m %s --tokens %s -q 2>&1", cli, syn, ids_path) == 2 &&
          count_lines(out) == 1 && strstr(out, "OPENBLAS_NUM_THREADS=lots"));
    CHECK(run("OPENBLAS_NUM_THREADS=0 %s run -m /nonexistent.spk 2>&1", cli) == 2 && strstr(out, "OPENBLAS_NUM_THREADS"));
    CHECK(run("OPENBLAS_NUM_THREADS=lots %s ppl -m %s --tokens %s -q --threads 1 >/dev/null", cli, syn, ids_path) == 0);

    /* what info reports: the rule's count, and BLAS really takes it */
    int t[4];
    info_threads("", bin, "", t); /* stories260K: 64 x (3 x 172 + 2 x 64) parameters per layer, under 4M */
    CHECK_MSG(t[0] == 1 && t[1] == 1 && t[2] == 1 && t[3] == 1, "auto on stories260K: %d %d %d %d", t[0], t[1], t[2], t[3]);
    info_threads("", bin, "--threads 2", t);
    CHECK_MSG(t[0] == 2 && t[1] == 2 && t[2] == 2 && t[3] == 2, "--threads 2: %d %d %d %d", t[0], t[1], t[2], t[3]);
    info_threads("OPENBLAS_NUM_THREADS=2", bin, "", t);
    CHECK_MSG(t[0] == 2 && t[1] == 2 && t[3] == 2, "OPENBLAS_NUM_THREADS=2: %d %d %d", t[0], t[1], t[3]);
    info_threads("OPENBLAS_NUM_THREADS=2", bin, "--threads 1", t); /* --threads wins */
    CHECK_MSG(t[0] == 1 && t[1] == 1 && t[3] == 1, "--threads 1 over the env: %d %d %d", t[0], t[1], t[3]);
    info_threads("", bin, "--threads 1000", t); /* the pool takes it all; OpenBLAS caps it at its build limit */
    CHECK_MSG(t[0] == 1000 && t[2] == 1000 && t[1] >= 1 && t[1] <= 1000 && t[1] == t[3], "--threads 1000: %d %d %d %d",
              t[0], t[1], t[2], t[3]);
    CHECK(run("%s --version", cli) == 0 && strstr(out, "\nthreads "));

    /* ppl: the same numbers at 1 and 2 BLAS threads. OpenBLAS splits a product
     * over rows and columns, never over the summed dimension, but some kernel
     * sets (Haswell, Zen) compute the edge tiles of a thread's block in another
     * order, which moves nll/token by 8e-9 here; 1e-6 nats/token is a hundred
     * times that and far below what a lost or doubled block would do (>1e-2). */
    double nll[2] = {NAN, NAN};
    for (int k = 0; k < 2; k++) {
        if (run("%s ppl -m %s --tokens %s --threads %d --json -q", cli, syn, ids_path, k + 1) != 0) continue;
        cJSON *j = cJSON_Parse(out);
        nll[k] = json_num(j, "nll_per_token", NULL);
        cJSON_Delete(j);
    }
    printf("ppl nll/token: 1 thread %.12f, 2 threads %.12f\n", nll[0], nll[1]);
    CHECK(isfinite(nll[0]) && nll[0] > 1);
    CHECK_NEAR(nll[0], nll[1], 1e-6);

    /* compute: forward and backward (claws) at 1 and 2 threads. The statistics
     * are sums of products of activations and gradients, each a float32 value
     * whose rounding moves with the tile order as above (0 with the SkylakeX
     * kernels, 2e-7 relative with Haswell's); 1e-5 is fifty times that. */
    const char *s1 = sc_tmp_path("t1.scal"), *s2 = sc_tmp_path("t2.scal");
    CHECK(run("%s compute -m %s --tokens %s --method claws --threads 1 -o %s -q", cli, syn, ids_path, s1) == 0);
    CHECK(run("%s compute -m %s --tokens %s --method claws --threads 2 -o %s 2>&1", cli, syn, ids_path, s2) == 0);
    /* the progress line: all sequences, the rate, the ETA and the memory */
    CHECK_MSG(strstr(out, "compute: 6/6 sequences") && strstr(out, "tok/s") && strstr(out, "ETA") &&
                  strstr(out, "RSS ") && strstr(out, "anon "),
              "%s", out);
    int n_sec = 0;
    double d = scal_max_rel_diff(s1, s2, &n_sec);
    printf("compute claws: %d f64 sections, max relative difference 1 vs 2 threads %.3g\n", n_sec, d);
    CHECK(n_sec == 6 && d >= 0 && d <= 1e-5);

    /* run: the runtime pool. Row layouts (f32, q8_0, q4_0) give each thread
     * rows of the output, zigzag whole 256-row chunks, and kmi4's down
     * projection each output of a fixed half of the neuron list to one thread
     * (the halves added once): every output is summed by the same kernel in
     * the same order as with one thread, so the logits are bit-identical and
     * the sampled tokens identical. */
    const int32_t ids[] = {1, 17, 300, 42, 5, 99, 250, 7, 8, 400, 31, 2, 64, 128, 255, 3};
    const int n_ids = (int)(sizeof ids / sizeof ids[0]);
    const char *layouts[] = {"f32", "q8_0", "q4_0", "kmi4", "zigzag"};
    for (int li = 0; li < 5; li++) {
        char name[64];
        snprintf(name, sizeof name, "syn_%s.spk", layouts[li]);
        const char *spk = sc_tmp_path(name);
        CHECK(run("%s pack -m %s --layout %s -o %s -q", cli, syn, layouts[li], spk) == 0);
        bool same;
        double rd = runtime_threads_diff(spk, ids, n_ids, &same);
        printf("run %-6s 1 vs 2 threads: %s, max relative logit difference %.3g\n", layouts[li],
               same ? "bit-identical" : "differ", rd);
        CHECK_MSG(rd >= 0 && same, "%s: %g", layouts[li], rd);
        char toks[2][4096] = {"", ""};
        for (int k = 0; k < 2; k++) {
            if (run("%s run -m %s -n 48 --seed 11 --threads %d --json 2>/dev/null", cli, spk, k + 1) != 0) continue;
            cJSON *j = cJSON_Parse(out);
            char *s = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "tokens"));
            if (s) snprintf(toks[k], sizeof toks[k], "%s", s);
            CHECK(json_num(j, "threads", NULL) == k + 1);
            free(s);
            cJSON_Delete(j);
        }
        CHECK_MSG(strlen(toks[0]) > 20 && strcmp(toks[0], toks[1]) == 0, "%s: [%s] vs [%s]", layouts[li], toks[0], toks[1]);
    }
    return sc_test_finish();
}
