/* replay_main.c - runs a fuzz harness (fuzz_common.h) on files outside
 * libFuzzer: every regular file of each directory or file argument. Exits 0
 * when every input ran (a crash aborts the process under the sanitizers, or
 * fails the ctest run). Used by the normal test suite on tests/hostile/. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    size_t got = b && n > 0 ? fread(b, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!b || (n > 0 && got != (size_t)n)) {
        free(b);
        return 1;
    }
    LLVMFuzzerTestOneInput(b, (size_t)n);
    free(b);
    return 0;
}

int main(int argc, char **argv) {
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: missing\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad += run_file(argv[i]);
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        for (struct dirent *e; d && (e = readdir(d));) {
            char p[4096];
            if (e->d_name[0] == '.') continue;
            snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
            if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
                bad += run_file(p);
                files++;
            }
        }
        if (d) closedir(d);
    }
    printf("%d inputs replayed, %d unreadable\n", files, bad);
    return bad || files == 0;
}
