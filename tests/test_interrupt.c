/* test_interrupt.c - an interrupted write leaves nothing behind: `sparsecal
 * pack` and `sparsecal compute` are killed with SIGINT / SIGTERM while their
 * temporary output exists; the process dies of the signal, no file appears
 * under the final name and no temporary file remains: with O_TMPFILE it never
 * had a name, with SPARSECAL_NAMED_TEMP=1 the signal handler removes it
 * (cli/main.c -> srt_tmp_cleanup). The pack uses zstd level 19 so it is slow enough to be
 * caught mid-write. Needs no assets (the model is synthetic). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "testing.h"

/* Entries of dir whose name starts with prefix. */
static int count_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

/* Unnamed (O_TMPFILE) files in dir that process pid holds open. */
static int count_unnamed(pid_t pid, const char *dir) {
    char fds[64], prefix[600];
    snprintf(fds, sizeof fds, "/proc/%ld/fd", (long)pid);
    snprintf(prefix, sizeof prefix, "%s/#", dir);
    DIR *d = opendir(fds);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char link[400], target[1024];
        snprintf(link, sizeof link, "%s/%s", fds, e->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k <= 0) continue;
        target[k] = '\0';
        n += strncmp(target, prefix, strlen(prefix)) == 0 && strstr(target, "(deleted)") != NULL;
    }
    if (d) closedir(d);
    return n;
}

/* Runs argv, waits until dir holds a file named "<final>.tmp.*" (or the child
 * holds an unnamed temp file there), sends sig;
 * returns true when the child died of sig and neither the final file nor a
 * temporary one remains. */
static bool interrupt_run(char *const argv[], const char *dir, const char *final, int sig) {
    char tmp_prefix[256];
    snprintf(tmp_prefix, sizeof tmp_prefix, "%s.tmp.", final);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        execv(argv[0], argv);
        _exit(127);
    }
    if (pid < 0) return false;
    bool seen = false;
    for (int i = 0; i < 60000 && !seen; i++) { /* up to 60 s */
        seen = count_prefix(dir, tmp_prefix) > 0 || count_unnamed(pid, dir) > 0;
        if (!seen) {
            int status;
            if (waitpid(pid, &status, WNOHANG) == pid) {
                printf("  %s finished before its temporary file was seen\n", argv[1]);
                return false;
            }
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
    }
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    int left_tmp = count_prefix(dir, tmp_prefix), left_final = count_prefix(dir, final);
    printf("  %s, signal %d: %s; files left: %d temporary, %d final\n", argv[1], sig,
           WIFSIGNALED(status) ? "died of the signal" : "exited", left_tmp, left_final - left_tmp);
    return seen && WIFSIGNALED(status) && WTERMSIG(status) == sig && left_tmp == 0 && left_final == 0;
}

int main(void) {
    char dir[512], model[600], cmd[2048], out[4096];
    snprintf(dir, sizeof dir, "%s", sc_tmp_path("intr"));
    snprintf(model, sizeof model, "%s/model", dir);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && %s synth -o '%s' --dim 256 --ffn 1024 --layers 4 --vocab 4000 "
                              "--token-seqs 16 --token-len 512 2>&1",
             dir, dir, SC_CLI_PATH, model);
    CHECK_MSG(sc_run(cmd, out, sizeof out) == 0, "%s", out);
    char o_pack[700], o_scal[700], tokens[700];
    snprintf(o_pack, sizeof o_pack, "%s/x.spk", dir);
    snprintf(o_scal, sizeof o_scal, "%s/c.scal", dir);
    snprintf(tokens, sizeof tokens, "%s/tokens.txt", model);
    /* SIGKILL cannot be handled: only an unnamed temp file leaves nothing then */
    const int sigs[] = {SIGINT, SIGTERM, SIGKILL, SIGINT, SIGTERM};
    for (int s = 0; s < 5; s++) {
        if (s == 3) setenv("SPARSECAL_NAMED_TEMP", "1", 1); /* the same with named temp files */
        char *pack[] = {SC_CLI_PATH, "pack", "-m", model, "--layout", "q8_0", "--compress", "19", "-o", o_pack, "-q", NULL};
        CHECK(interrupt_run(pack, dir, "x.spk", sigs[s]));
        char *comp[] = {SC_CLI_PATH, "compute", "-m", model, "--tokens", tokens, "--method", "cats,coact",
                        "--compress", "19", "-o", o_scal, "-q", NULL};
        CHECK(interrupt_run(comp, dir, "c.scal", sigs[s]));
    }
    /* uninterrupted, both outputs appear and nothing temporary stays */
    snprintf(cmd, sizeof cmd, "%s pack -m '%s' --layout q8_0 -o '%s' -q 2>&1", SC_CLI_PATH, model, o_pack);
    CHECK_MSG(sc_run(cmd, out, sizeof out) == 0, "%s", out);
    CHECK(count_prefix(dir, "x.spk") == 1 && count_prefix(dir, "x.spk.tmp.") == 0);
    return sc_test_finish();
}
