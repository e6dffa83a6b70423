/* test_kernels_bench.c - `sparsecal bench` as a command: a tiny quick run
 * produces Markdown, CSV and JSON with every kernel row, and bad options
 * fail with status 2. Never a timing assertion: benchmarks are commands. */
#include <stdlib.h>
#include <string.h>

#include "testing.h"

static char out[1 << 20];

int main(void) {
    char cmd[2048];
    const char *csv = sc_tmp_path("bench.csv");
    snprintf(cmd, sizeof cmd, "%s bench --quick --dims 64:32,96:64 --layers 2 --threads 1,2 --sparsity 0.5 --csv %s 2>/dev/null",
             SC_CLI_PATH, csv);
    CHECK(sc_run(cmd, out, sizeof out) == 0);
    const char *rows[] = {"stream floor", "f32 cblas_sgemv", "q4_0 rows", "q8_0 rows", "q4_0t scatter", "| kmi4 |", "| kmi8 (q8_0 values) |", "| zigzag |",
                          "kmi4r rows", "MLP block", "kmi4 live bytes, bare read", "gate input-sparse",
                          "Targets (96 -> 64, 2 threads)", "dense q8_0 rows within 1.1x", "median µs"};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) CHECK_MSG(strstr(out, rows[i]) != NULL, "missing '%s'", rows[i]);
    CHECK(strstr(out, "zigzag row-blocks as pack makes them") != NULL);
    FILE *f = fopen(csv, "r");
    CHECK(f != NULL);
    if (f) {
        int lines = 0;
        char line[1024];
        while (fgets(line, sizeof line, f)) lines++;
        fclose(f);
        /* header + 2 shapes x 2 thread counts x (9 dense + 8 sparse) rows */
        CHECK_MSG(lines == 1 + 2 * 2 * 17, "%d CSV lines", lines);
    }
    snprintf(cmd, sizeof cmd,
             "%s bench --quick --dims 64:32 --layers 2 --threads 1 --sparsity 0.3,0.5 --huge-pages --json 2>/dev/null",
             SC_CLI_PATH);
    CHECK(sc_run(cmd, out, sizeof out) == 0);
    CHECK(strstr(out, "\"results\"") != NULL && strstr(out, "\"kernel\":\t\"mlp\"") != NULL);
    CHECK(strstr(out, "\"huge_pages\":\ttrue") != NULL);
    CHECK(strstr(out, "\"zz_rows\":\t0") != NULL); /* pack's row-blocks */
    /* --zz-rows: zigzag packed with row-blocks of that many rows, named in the settings line */
    snprintf(cmd, sizeof cmd, "%s bench --quick --dims 64:512 --layers 2 --threads 1 --sparsity 0.5 --zz-rows 256 2>/dev/null",
             SC_CLI_PATH);
    CHECK(sc_run(cmd, out, sizeof out) == 0);
    CHECK(strstr(out, "zigzag row-blocks of 256 rows") != NULL && strstr(out, "| zigzag |") != NULL);
    snprintf(cmd, sizeof cmd, "%s bench --quick --dims 64:512 --layers 2 --threads 1 --sparsity 0.5 --json 2>/dev/null",
             SC_CLI_PATH);
    CHECK(sc_run(cmd, out, sizeof out) == 0 && strstr(out, "\"zz_rows\":\t0") != NULL);
    snprintf(cmd, sizeof cmd, "%s bench --quick --zz-rows 33 2>&1", SC_CLI_PATH);
    CHECK(sc_run(cmd, out, sizeof out) == 2 && strstr(out, "--zz-rows wants a multiple of 32 rows") != NULL);
    snprintf(cmd, sizeof cmd, "%s bench --quick --zz-rows 8192 2>/dev/null", SC_CLI_PATH);
    CHECK(sc_run(cmd, NULL, 0) == 2);
    snprintf(cmd, sizeof cmd, "%s bench --dims 65:32 2>/dev/null", SC_CLI_PATH);
    CHECK(sc_run(cmd, NULL, 0) == 2);
    snprintf(cmd, sizeof cmd, "%s bench --sparsity 1.5 2>/dev/null", SC_CLI_PATH);
    CHECK(sc_run(cmd, NULL, 0) == 2);
    snprintf(cmd, sizeof cmd, "%s bench --isa nosuch 2>/dev/null", SC_CLI_PATH);
    CHECK(sc_run(cmd, NULL, 0) == 2);
    return sc_test_finish();
}
