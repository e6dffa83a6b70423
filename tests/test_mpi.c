/* test_mpi.c - `mpirun -n 2 sparsecal compute` on the shipped stories260K
 * model with every method (SUM, CONCAT and DERIVED arrays of every kind):
 *   - equals `--shard 0/2` + `--shard 1/2` + `merge` bit for bit (every
 *     array, after loading both files with the model, plus the counts and
 *     the shard list): the same per-shard code, and the same additions in
 *     the same order (rank 0's sums + rank 1's);
 *   - equals a single-process run within the documented bounds (docs/SCALE.md):
 *     integer sums exactly; float64 sums to 1e-12 of the sum of their terms'
 *     magnitudes (relative for the non-negative sums; LaRoSA's second moments
 *     against sqrt(H_ii H_jj), which bounds it) (only the order
 *     of the additions differs: (s0 + s2 + ...) + (s1 + s3 + ...) instead of
 *     s0 + s1 + s2 + ...); stored samples (CONCAT) hold the same rows in
 *     another order (rank by rank) - every row of the single run is in the
 *     MPI file, and with no per-process cap reached the row counts agree;
 *     CWIC's EMA sums are per-process running averages and are not compared;
 *   - a usage error prints one line (from rank 0) and fails every rank; a
 *     failure on one rank only (MPMD: rank 1 gets a missing model) stops
 *     both, printed once by that rank; ranks with different options are
 *     refused by the merge on rank 0.
 * Skipped (77) when sparsecal was built without MPI or mpirun is missing. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "scal.h"
#include "testing.h"

static char out[1 << 16];
static sc_err err;

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...) {
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return sc_run(cmd, out, sizeof out);
}

/* lines of s that start with prefix */
static int count_lines(const char *s, const char *prefix) {
    int n = 0;
    for (const char *p = s; *p;) {
        if (strncmp(p, prefix, strlen(prefix)) == 0) n++;
        const char *nl = strchr(p, '\n');
        if (!nl) break;
        p = nl + 1;
    }
    return n;
}

/* Runs the shell command cmd (exec'd: its pid is the launcher's); once every
 * file in wait_for exists, sends SIGTERM (mpirun passes it on to the ranks)
 * and waits. Returns true if the files appeared before the job ended. */
static bool terminate_when_exist(const char *cmd, const char *const *wait_for, int n) {
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    if (pid < 0) return false;
    bool seen = false;
    for (int i = 0; i < 240000 && !seen; i++) { /* up to 4 min */
        seen = true;
        for (int k = 0; k < n; k++) seen = seen && access(wait_for[k], F_OK) == 0;
        int status;
        if (!seen && waitpid(pid, &status, WNOHANG) == pid) return false;
        if (!seen) nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    return true;
}

static sc_calib *load(const char *path, const sc_model *m) {
    sc_calib *c = NULL;
    if (sc_calib_load(path, m, &c, &err)) printf("  %s: %s\n", path, err.msg);
    return c;
}

static size_t esize(const sc_array *a) { return a->type == SC_ARR_F32 ? 4 : 8; }
static size_t row_bytes(const sc_array *a) { return (size_t)(a->shape[1] ? a->shape[1] : 1) * esize(a); }

static size_t g_row;
static int row_cmp(const void *x, const void *y) { return memcmp(x, y, g_row); }

/* Every row of `sub` occurs in `all` (as multisets). */
static bool rows_included(const sc_array *sub, const sc_array *all) {
    size_t rb = row_bytes(sub);
    if (rb != row_bytes(all)) return false;
    size_t ns = (size_t)sub->shape[0], na = (size_t)all->shape[0];
    char *s = malloc(ns * rb + 1), *a = malloc(na * rb + 1);
    memcpy(s, sub->data, ns * rb);
    memcpy(a, all->data, na * rb);
    g_row = rb;
    qsort(s, ns, rb, row_cmp);
    qsort(a, na, rb, row_cmp);
    size_t j = 0;
    bool ok = true;
    for (size_t i = 0; i < ns && ok; i++) {
        while (j < na && memcmp(a + j * rb, s + i * rb, rb) < 0) j++;
        ok = j < na && memcmp(a + j * rb, s + i * rb, rb) == 0;
        j++;
    }
    free(s);
    free(a);
    return ok;
}

static double value(const sc_array *a, int64_t j) {
    return a->type == SC_ARR_I64 ? (double)((int64_t *)a->data)[j]
           : a->type == SC_ARR_F32 ? (double)((float *)a->data)[j]
                                   : ((double *)a->data)[j];
}

/* Every array of x equals y bit for bit. */
static void compare_exact(const sc_calib *x, const sc_calib *y, const char *what) {
    sc_array *a = malloc(2 * SC_MAX_ARRAYS * sizeof *a), *b = a + SC_MAX_ARRAYS;
    int arrays = 0, differ = 0;
    CHECK(x->n_entries == y->n_entries);
    for (int i = 0; i < x->n_entries && i < y->n_entries; i++) {
        const sc_method *me = x->entries[i].method;
        int na = me->arrays(x->entries[i].state, a, SC_MAX_ARRAYS), nb = me->arrays(y->entries[i].state, b, SC_MAX_ARRAYS);
        CHECK(na == nb && me == y->entries[i].method);
        for (int k = 0; k < na && k < nb; k++, arrays++) {
            bool same = a[k].shape[0] == b[k].shape[0] && a[k].shape[1] == b[k].shape[1] &&
                        memcmp(a[k].data, b[k].data, (size_t)a[k].shape[0] * row_bytes(&a[k])) == 0;
            if (!same && differ++ < 5) printf("  %s: %s/%s differs\n", what, me->name, a[k].name);
        }
    }
    printf("%s: %d arrays, %d differ\n", what, arrays, differ);
    CHECK(arrays > 100 && differ == 0);
    free(a);
}

/* MPI (x) against one process (y), by the rules in the header. */
static void compare_single(const sc_calib *x, const sc_calib *y) {
    sc_array *a = malloc(2 * SC_MAX_ARRAYS * sizeof *a), *b = a + SC_MAX_ARRAYS;
    double worst_sum = 0, worst_derived = 0;
    char worst_name[200] = "-";
    int int_diff = 0, concat_bad = 0, concat = 0, sums = 0;
    for (int i = 0; i < x->n_entries && i < y->n_entries; i++) {
        const sc_method *me = x->entries[i].method;
        int na = me->arrays(x->entries[i].state, a, SC_MAX_ARRAYS), nb = me->arrays(y->entries[i].state, b, SC_MAX_ARRAYS);
        CHECK(na == nb);
        for (int k = 0; k < na && k < nb; k++) {
            bool ema = strcmp(me->name, "cwic") == 0 && strstr(a[k].name, ".ema_"); /* per-process running averages */
            bool eig = strcmp(me->name, "larosa") == 0 && a[k].kind == SC_ARR_DERIVED; /* rotations: sign-free, see below */
            bool fit = strcmp(me->name, "cett") == 0 && a[k].kind == SC_ARR_DERIVED;
            if (ema || eig || fit) continue;
            if (a[k].kind == SC_ARR_CONCAT) {
                concat++;
                bool teal = strcmp(me->name, "teal") == 0; /* bottom-K per rank: the union holds the single run's K */
                bool ok = rows_included(&b[k], &a[k]) && (teal || a[k].shape[0] == b[k].shape[0]);
                if (!ok && concat_bad++ < 5) printf("  concat %s/%s: rows differ\n", me->name, a[k].name);
                continue;
            }
            int64_t n = a[k].shape[0] * (a[k].shape[1] ? a[k].shape[1] : 1);
            /* a LaRoSA moment is a packed upper triangle (larosa.h): entry j is (r, col), r <= col */
            bool cov = strcmp(me->name, "larosa") == 0 && strstr(a[k].name, ".H") != NULL;
            int64_t col = 0, col0 = 0; /* column of entry j, and the index of its first entry */
            for (int64_t j = 0; j < n; j++) {
                if (cov && j - col0 > col) col0 += ++col;
                double u = value(&a[k], j), v = value(&b[k], j);
                if (a[k].type == SC_ARR_I64) {
                    int_diff += u != v;
                    continue;
                }
                /* another order of the same additions: |u - v| <= ~N eps sum|terms|. The sums of
                 * non-negative terms (CLAWS, CATS, counts) have sum|terms| = |u|; a LaRoSA second
                 * moment H[i][j] = sum x_i x_j can cancel, and its sum|terms| is bounded by
                 * sqrt(H[i][i] H[j][j]) (Cauchy-Schwarz), so it is measured against that */
                double scale = fmax(fabs(u), fabs(v));
                if (cov) {
                    int64_t r = j - col0;
                    scale = sqrt(fabs(value(&a[k], r * (r + 1) / 2 + r)) * fabs(value(&a[k], col0 + col)));
                }
                double rel = u == v ? 0 : fabs(u - v) / fmax(scale, 1e-300);
                if (a[k].kind != SC_ARR_SUM) {
                    worst_derived = fmax(worst_derived, rel);
                } else if (rel > worst_sum) {
                    worst_sum = rel;
                    snprintf(worst_name, sizeof worst_name, "%s/%s", me->name, a[k].name);
                }
            }
            sums += a[k].kind == SC_ARR_SUM;
        }
    }
    printf("mpi vs one process: %d sum arrays, worst relative difference %.3g (sums, in %s), %.3g (derived); %d integer "
           "values differ; %d sample arrays, %d not a reordering\n",
           sums, worst_sum, worst_name, worst_derived, int_diff, concat, concat_bad);
    CHECK(sums > 50 && concat > 10);
    CHECK(worst_sum <= 1e-12);     /* float64 sums, another order of additions */
    CHECK(worst_derived <= 1e-12); /* claws c, cats/teal from integer histograms, cwic mean/std */
    CHECK(int_diff == 0);
    CHECK(concat_bad == 0);
    free(a);
}

int main(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_valid_a.txt");
    if (!bin || !tok || !text) return sc_test_finish();
    const char *mpirun = SC_MPIEXEC;
    if (!mpirun[0] || access(mpirun, X_OK) != 0) {
        printf("skipped: sparsecal was built without MPI (or mpirun is missing)\n");
        return 77;
    }
    /* OpenMPI refuses root unless told; its processes inherit the environment.
     * Under AddressSanitizer the MPI library's own allocations at exit are not ours. */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    char mpi[4096], launcher[1200], asan[1024];
    const char *ao = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%sdetect_leaks=0", ao ? ao : "", ao && *ao ? ":" : "");
    snprintf(launcher, sizeof launcher, "%s%s --oversubscribe", mpirun, geteuid() == 0 ? " --allow-run-as-root" : "");
    snprintf(mpi, sizeof mpi, "ASAN_OPTIONS='%s' %s", asan, launcher);
    const char *S = SC_CLI_PATH;
    char M[8192];
    /* every method (8: claws, cats, larosa, cett, clada, teal, cwic, coact); a small TEAL sample keeps its greedy
     * curve cheap; 16 sequences of 64 tokens stay below every per-process sample cap */
    snprintf(M, sizeof M,
             "-m %s --tokenizer %s -f %s --max-docs 16 --ctx-size 64 --method "
                 "claws,cats,larosa,cett,clada,teal,cwic,coact "
             "--params teal_seqs=2,teal_len=4 -q",
             bin, tok, text);
    const char *one = sc_tmp_path("one.scal"), *two = sc_tmp_path("mpi.scal"), *s0 = sc_tmp_path("s0.scal"),
               *s1 = sc_tmp_path("s1.scal"), *sm = sc_tmp_path("merged.scal");
    int rc = run("%s -n 2 %s compute %s -o %s --json", mpi, S, M, two);
    CHECK_MSG(rc == 0, "mpirun -n 2 compute: exit %d: %s", rc, out);
    CHECK(strstr(out, "\"processes\":2") && strstr(out, "\"shards\":\"0/2,1/2\"") && count_lines(out, "{") == 1);
    CHECK(run("%s compute %s -o %s", S, M, one) == 0);
    CHECK(run("%s compute %s --shard 0/2 -o %s", S, M, s0) == 0);
    CHECK(run("%s compute %s --shard 1/2 -o %s", S, M, s1) == 0);
    CHECK(run("%s merge %s %s -o %s", S, s0, s1, sm) == 0);

    sc_model *m = NULL;
    CHECK(sc_model_load(bin, &m, &err) == SC_OK);
    sc_calib *cm = m ? load(two, m) : NULL, *co = m ? load(one, m) : NULL, *cs = m ? load(sm, m) : NULL;
    CHECK(cm && co && cs);
    if (cm && co && cs) {
        CHECK(cm->n_seqs == 16 && cm->n_seqs == cs->n_seqs && cm->n_tokens == cs->n_tokens && cm->n_tokens == co->n_tokens);
        CHECK(strcmp(cm->shards, "0/2,1/2") == 0 && strcmp(cm->shards, cs->shards) == 0);
        CHECK(strcmp(cm->options, co->options) == 0 && strcmp(cm->data_id, co->data_id) == 0);
        compare_exact(cm, cs, "mpi vs --shard 0/2, 1/2 + merge");
        compare_single(cm, co);
    }
    sc_calib_free(cm);
    sc_calib_free(co);
    sc_calib_free(cs);

    /* checkpoints: one per rank; the job stopped once both exist (SIGTERM to mpirun), then --resume: the same
     * file as the uninterrupted MPI run, and the checkpoints are gone. On 256 sequences, not the 16 above: the
     * signal takes effect about a second after mpirun gets it (measured: rank 1 stopped at 44-48 of 64 after its
     * checkpoint of 2), and with 8 per rank the job had often ended, its checkpoints removed, by then. */
    {
        const char *res = sc_tmp_path("resumed.scal"), *full = sc_tmp_path("full256.scal");
        char c0[4200], c1[4200], cmd[16384], Mck[8192 + 32];
        snprintf(Mck, sizeof Mck, "%s --max-docs 256", M); /* (the last --max-docs given counts) */
        rc = run("%s -n 2 %s compute %s -o %s", mpi, S, Mck, full);
        CHECK_MSG(rc == 0, "mpirun -n 2 compute (256 sequences): exit %d: %s", rc, out);
        snprintf(c0, sizeof c0, "%s.ckpt.rank0", res);
        snprintf(c1, sizeof c1, "%s.ckpt.rank1", res);
        snprintf(cmd, sizeof cmd, "export ASAN_OPTIONS='%s'; exec %s -n 2 %s compute %s --checkpoint-every 2 -o %s", asan,
                 launcher, S, Mck, res);
        const char *both[2] = {c0, c1};
        CHECK(terminate_when_exist(cmd, both, 2));
        sc_calib *k = NULL;
        int64_t done = 0, of = 0;
        CHECK_MSG(m && sc_calib_load_checkpoint(c1, m, &k, &done, &of, &err) == SC_OK && k && strcmp(k->shards, "1/2") == 0,
                  "%s", err.msg);
        printf("mpi: stopped with rank 1 at %lld of %lld sequences\n", (long long)done, (long long)of);
        CHECK(done >= 2 && done < of && of == 128);
        sc_calib_free(k);
        rc = run("%s -n 2 %s compute %s --checkpoint-every 2 --resume -o %s", mpi, S, Mck, res);
        CHECK_MSG(rc == 0, "resume: exit %d: %s", rc, out);
        CHECK(sc_files_equal(res, full));
        CHECK(access(c0, F_OK) != 0 && access(c1, F_OK) != 0);
    }

    /* errors: one line from sparsecal, every rank fails, nothing written */
    const char *bad = sc_tmp_path("bad.scal");
    rc = run("%s -n 2 %s compute %s --shard 0/2 -o %s 2>&1", mpi, S, M, bad);
    CHECK_MSG(rc != 0 && count_lines(out, "sparsecal compute:") == 1 && strstr(out, "--shard cannot be combined"),
              "exit %d: %s", rc, out);
    rc = run("%s -n 1 %s compute %s -o %s : -n 1 %s compute %s -m /nonexistent/model.bin -o %s 2>&1", mpi, S, M, bad, S,
             M, bad);
    CHECK_MSG(rc != 0 && count_lines(out, "sparsecal compute: rank 1 of 2:") == 1 &&
                  count_lines(out, "sparsecal compute:") == 1,
              "exit %d: %s", rc, out);
    rc = run("%s -n 1 %s compute %s -o %s : -n 1 %s compute %s --ctx-size 32 -o %s 2>&1", mpi, S, M, bad, S, M, bad);
    CHECK_MSG(rc != 0 && count_lines(out, "sparsecal compute: rank 0 of 2: rank 1's statistics do not merge with rank 0's: computed "
                                  "with other options: seq_len 32 vs 64") == 1 &&
                  count_lines(out, "sparsecal compute:") == 1,
              "exit %d: %s", rc, out);
    /* a failure inside rank 1's data loop (its checkpoint cannot be written) stops rank 0 at its next sequence */
    const char *good = sc_tmp_path("good.scal");
    char ck0[4200];
    snprintf(ck0, sizeof ck0, "%s.ckpt.rank0", good);
    rc = run("%s -n 1 %s compute %s --checkpoint-every 1 -o %s : -n 1 %s compute %s --checkpoint-every 1 "
             "-o /nonexistent/dir/x.scal 2>&1",
             mpi, S, M, good, S, M);
    CHECK_MSG(rc != 0 && count_lines(out, "sparsecal compute: rank 1 of 2: /nonexistent/dir/x.scal.ckpt.rank1") == 1 &&
                  count_lines(out, "sparsecal compute:") == 1,
              "exit %d: %s", rc, out);
    sc_calib *k = NULL;
    int64_t done = 0, of = 0;
    CHECK(m && sc_calib_load_checkpoint(ck0, m, &k, &done, &of, &err) == SC_OK);
    printf("mpi: rank 0 stopped after %lld of %lld sequences when rank 1 failed\n", (long long)done, (long long)of);
    CHECK(done < of);
    sc_calib_free(k);
    CHECK(access(bad, F_OK) != 0 && access(good, F_OK) != 0);
    sc_model_free(m);
    /* started without a launcher, the MPI build is one process exactly as before */
    CHECK(run("%s compute %s -o %s --json", S, M, bad) == 0 && strstr(out, "\"processes\":1") &&
          strstr(out, "\"shards\":\"0/1\""));
    return sc_test_finish();
}
