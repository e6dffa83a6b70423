/* test_resume.c - checkpoints and resume of the calibration loop, and the
 * in-memory transfer of a calibration (the MPI reduction's), on the shipped
 * stories260K model with every method (so every kind of array and every
 * method's private state - CWIC's running EMAs, CETT/coact stride counters,
 * TEAL's bottom-K sample - is exercised):
 *   1. a run stopped after 7 sequences (on_seq hook) with a checkpoint every
 *      3 leaves a checkpoint of 6 that loads as a partial calibration; resumed,
 *      it writes a file byte-identical to the uninterrupted run's (the same
 *      additions in the same order) - for one process and for a shard;
 *   2. resuming with other options, another shard, other data or from a
 *      finished file is refused with a one-line error;
 *   3. sc_calib_from_bytes(sc_calib_to_bytes(c)) equals load(save(c)) bit
 *      for bit, and truncated or damaged buffers are errors, not crashes;
 *   4. the command line: SIGKILL during `compute --checkpoint-every 2`, then
 *      `--resume`, gives the uninterrupted file byte for byte and removes the
 *      checkpoint. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "scal.h"
#include "testing.h"
#include "tokenizer.h"
#include "transfer.h"

static sc_err err;

/* Arrays of a and b that differ (printed), or -1 when the lists differ. */
static int arrays_differing(const sc_calib *a, const sc_calib *b) {
    if (a->n_entries != b->n_entries) return -1;
    sc_array *x = malloc(2 * SC_MAX_ARRAYS * sizeof *x), *y = x + SC_MAX_ARRAYS;
    int bad = 0;
    for (int i = 0; i < a->n_entries && bad >= 0; i++) {
        const sc_method *me = a->entries[i].method;
        int nx = me->arrays(a->entries[i].state, x, SC_MAX_ARRAYS), ny = me->arrays(b->entries[i].state, y, SC_MAX_ARRAYS);
        if (nx != ny || me != b->entries[i].method) bad = -1;
        for (int k = 0; k < nx && bad >= 0; k++) {
            size_t bytes = (size_t)x[k].shape[0] * (size_t)(x[k].shape[1] ? x[k].shape[1] : 1) *
                           (x[k].type == SC_ARR_F32 ? 4 : 8);
            if (x[k].shape[0] != y[k].shape[0] || memcmp(x[k].data, y[k].data, bytes) != 0)
                if (bad++ < 5) printf("  %s/%s differs\n", me->name, x[k].name);
        }
    }
    free(x);
    return bad;
}

static int64_t stop_after;
static sc_status stopper(void *user, int64_t done, int64_t mine, sc_err *e) {
    (void)user;
    (void)mine;
    return done == stop_after ? sc_errf(e, SC_EARG, "stopped after %lld", (long long)done) : SC_OK;
}

/* full run, then stopped + resumed: the same file */
static void resume_case(const sc_model *m, const sc_dataset *d, sc_compute_opts co, const char *tag) {
    char full[64], res[64], ck[64];
    snprintf(full, sizeof full, "%s_full.scal", tag);
    snprintf(res, sizeof res, "%s_resumed.scal", tag);
    snprintf(ck, sizeof ck, "%s.ckpt", tag);
    const char *pf = sc_tmp_path(full), *pr = sc_tmp_path(res), *pc = sc_tmp_path(ck);
    sc_calib *c = NULL;
    CHECK_MSG(sc_calib_compute(m, d, &co, &c, &err) == SC_OK, "%s", err.msg);
    CHECK(c && sc_calib_save(c, m, pf, 3, &err) == SC_OK);
    int64_t total = c ? c->n_seqs : 0;
    sc_calib_free(c);

    co.checkpoint_every = 3;
    co.checkpoint_path = pc;
    co.on_seq = stopper;
    stop_after = 7;
    c = NULL;
    CHECK(sc_calib_compute(m, d, &co, &c, &err) == SC_EARG && !c && strstr(err.msg, "stopped after 7"));
    int64_t done = 0, of = 0;
    CHECK(sc_calib_load_checkpoint(pc, m, &c, &done, &of, &err) == SC_OK);
    printf("%s: checkpoint after %lld of %lld sequences\n", tag, (long long)done, (long long)of);
    CHECK(done == 6 && of == total && c && c->n_seqs == 6);
    sc_calib_free(c);
    c = NULL;
    CHECK(sc_calib_load(pc, m, &c, &err) == SC_OK && c && c->n_seqs == 6); /* a valid partial calibration */
    sc_calib_free(c);

    co.on_seq = NULL;
    co.resume_path = pc;
    c = NULL;
    CHECK_MSG(sc_calib_compute(m, d, &co, &c, &err) == SC_OK, "%s", err.msg);
    CHECK(c && c->n_seqs == total && sc_calib_save(c, m, pr, 3, &err) == SC_OK);
    sc_calib_free(c);
    bool same = sc_files_equal(pf, pr);
    printf("%s: resumed file %s the uninterrupted one\n", tag, same ? "equals" : "DIFFERS from");
    CHECK(same);
    if (!same) {
        sc_calib *a = NULL, *b = NULL;
        if (!sc_calib_load(pf, m, &a, &err) && !sc_calib_load(pr, m, &b, &err)) arrays_differing(a, b);
        sc_calib_free(a);
        sc_calib_free(b);
    }
}

/* Runs argv in a child; SIGKILLs it once `wait_for` exists. Returns true if it was killed so. */
static bool kill_when_exists(char *const argv[], const char *wait_for) {
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    if (pid < 0) return false;
    bool seen = false;
    for (int i = 0; i < 120000 && !seen; i++) { /* up to 2 min */
        seen = access(wait_for, F_OK) == 0;
        int status;
        if (!seen && waitpid(pid, &status, WNOHANG) == pid) return false;
        if (!seen) nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    return seen && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

int main(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tokp = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_valid_a.txt"), *other = sc_asset("text/tinystories_sample.txt");
    if (!bin || !tokp || !text || !other) return sc_test_finish();
    sc_model *m = NULL;
    sc_tokenizer *tok = NULL;
    CHECK(sc_model_load(bin, &m, &err) == SC_OK);
    CHECK(sc_tokenizer_load_llama2c(tokp, 512, &tok, &err) == SC_OK);
    if (!m || !tok) return sc_test_finish();
    sc_data_opts dopt;
    sc_data_opts_default(&dopt);
    dopt.max_docs = 40;
    sc_dataset d, d2;
    CHECK(sc_data_load_text(text, tok, &dopt, &d, &err) == SC_OK);
    CHECK(sc_data_load_text(other, tok, &dopt, &d2, &err) == SC_OK);

    sc_compute_opts co;
    sc_compute_opts_default(&co);
    const char *all[] = {"claws", "cats", "larosa", "cett", "clada", "teal", "cwic", "coact"};
    for (int i = 0; i < 8; i++) co.methods[i] = all[i];
    co.n_methods = 8;
    co.seq_len = 64;
    co.max_seqs = 20;
    /* a small TEAL sample (cheap greedy curve) that fills up, so eviction runs after the resume; strides of 3 */
    co.params = "teal_seqs=2,teal_len=4,stride=3,coact_stride=3";

    /* 1. stop + resume = uninterrupted (one process, and shard 1/2) */
    resume_case(m, &d, co, "one");
    sc_compute_opts cs = co;
    cs.shard_index = 1;
    cs.shard_count = 2;
    resume_case(m, &d, cs, "shard");
    /* distillation towards a student of density 0.3, which "%.17g" prints as 0.29999999999999999 and
     * the shortest form as 0.3: the options read back from the checkpoint must be this run's */
    sc_compute_opts cd = co;
    cd.methods[0] = "claws";
    cd.n_methods = 1;
    cd.loss = SC_LOSS_KIND_DISTILL;
    cd.student_density = 0.3;
    resume_case(m, &d, cd, "distill");

    /* 2. a checkpoint of another run is refused */
    {
        const char *pc = sc_tmp_path("mismatch.ckpt");
        sc_compute_opts a = co;
        a.checkpoint_every = 2;
        a.checkpoint_path = pc;
        a.on_seq = stopper;
        stop_after = 3;
        sc_calib *c = NULL;
        CHECK(sc_calib_compute(m, &d, &a, &c, &err) == SC_EARG);
        sc_compute_opts b = co;
        b.resume_path = pc;
        b.seq_len = 48;
        CHECK(sc_calib_compute(m, &d, &b, &c, &err) == SC_EARG && strstr(err.msg, "other options") && !strchr(err.msg, '\n'));
        b = cs;
        b.resume_path = pc;
        CHECK(sc_calib_compute(m, &d, &b, &c, &err) == SC_EARG && strstr(err.msg, "shard 0/1, this run is shard 1/2"));
        b = co;
        b.resume_path = pc;
        CHECK(sc_calib_compute(m, &d2, &b, &c, &err) == SC_EARG && strstr(err.msg, "other data"));
        b.resume_path = sc_tmp_path("one_full.scal");
        CHECK(sc_calib_compute(m, &d, &b, &c, &err) == SC_EARG && strstr(err.msg, "not a checkpoint"));
        b.resume_path = sc_tmp_path("missing.ckpt");
        CHECK(sc_calib_compute(m, &d, &b, &c, &err) == SC_EIO);
        CHECK(c == NULL);
    }

    /* 3. the transfer: equal to a file round trip; damaged buffers are errors */
    {
        sc_compute_opts a = co;
        a.max_seqs = 8;
        sc_calib *c = NULL, *viafile = NULL, *viabytes = NULL;
        CHECK(sc_calib_compute(m, &d, &a, &c, &err) == SC_OK);
        const char *pf = sc_tmp_path("xfer.scal");
        CHECK(c && sc_calib_save(c, m, pf, 0, &err) == SC_OK && sc_calib_load(pf, m, &viafile, &err) == SC_OK);
        void *buf = NULL;
        size_t len = 0;
        CHECK(c && sc_calib_to_bytes(c, &buf, &len, &err) == SC_OK);
        CHECK(sc_calib_from_bytes(m, buf, len, &viabytes, &err) == SC_OK);
        CHECK(viafile && viabytes && arrays_differing(viafile, viabytes) == 0);
        CHECK(viabytes && strcmp(viabytes->shards, c->shards) == 0 && strcmp(viabytes->options, c->options) == 0 &&
              viabytes->n_tokens == c->n_tokens && viabytes->n_seqs == c->n_seqs);
        int failed = 0, tried = 0;
        for (size_t cut = 0; cut < len; cut += len / 97 + 1, tried++) { /* every truncation is an error */
            sc_calib *t = NULL;
            failed += sc_calib_from_bytes(m, buf, cut, &t, &err) != SC_OK && t == NULL;
            sc_calib_free(t);
        }
        CHECK(failed == tried);
        sc_calib *t = NULL;
        ((char *)buf)[0] ^= 1; /* the magic */
        CHECK(sc_calib_from_bytes(m, buf, len, &t, &err) == SC_EFORMAT && !t);
        free(buf);
        sc_calib_free(c);
        sc_calib_free(viafile);
        sc_calib_free(viabytes);
    }

    /* 4. the command line: SIGKILL mid-run, then --resume */
    {
        const char *full = sc_tmp_path("cli_full.scal"), *out = sc_tmp_path("cli.scal");
        char ck[4200], cmd[16384], outbuf[4096];
        snprintf(ck, sizeof ck, "%s.ckpt", out);
        const char *args = "--max-docs 40 --ctx-size 64 --method claws,cats,cwic,cett --params stride=3 -q";
        snprintf(cmd, sizeof cmd, "%s compute -m %s --tokenizer %s -f %s %s -o %s", SC_CLI_PATH, bin, tokp, text,
            args, full);
        CHECK(sc_run(cmd, outbuf, sizeof outbuf) == 0);
        char *argv[] = {(char *)SC_CLI_PATH, "compute", "-m", (char *)bin, "--tokenizer", (char *)tokp, "-f",
            (char *)text,
                        "--max-docs", "40", "--ctx-size", "64", "--method", "claws,cats,cwic,cett", "--params",
                            "stride=3",
                        "-q", "--checkpoint-every", "2", "-o", (char *)out, NULL};
        bool killed = kill_when_exists(argv, ck);
        CHECK(killed);
        sc_calib *c = NULL;
        int64_t done = 0, of = 0;
        CHECK(sc_calib_load_checkpoint(ck, m, &c, &done, &of, &err) == SC_OK);
        printf("cli: killed with a checkpoint of %lld of %lld sequences\n", (long long)done, (long long)of);
        CHECK(done >= 2 && done % 2 == 0 && of == 40);
        sc_calib_free(c);
        snprintf(cmd, sizeof cmd, "%s compute -m %s --tokenizer %s -f %s %s --checkpoint-every 2 --resume -o "
            "%s", SC_CLI_PATH, bin,
                 tokp, text, args, out);
        CHECK(sc_run(cmd, outbuf, sizeof outbuf) == 0);
        CHECK(sc_files_equal(full, out));
        CHECK(access(ck, F_OK) != 0); /* removed on success */
        /* --resume with no checkpoint starts from the beginning (a note on stderr) */
        snprintf(cmd, sizeof cmd, "%s compute -m %s --tokenizer %s -f %s %s --resume -o %s 2>&1", SC_CLI_PATH, bin,
            tokp, text,
                 args, out);
        CHECK(sc_run(cmd, outbuf, sizeof outbuf) == 0 && strstr(outbuf, "starting from the first sequence"));
        CHECK(sc_files_equal(full, out));
    }
    sc_dataset_free(&d);
    sc_dataset_free(&d2);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
