/* test_cli_calib.c - compute / merge / eval / inspect / verify through the
 * command line: exit codes, --json fields, shard merging from files, and
 * hostile calibration files never crashing any command. */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "testing.h"

static char out[1 << 20];

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...) {
    char cmd[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return sc_run(cmd, out, sizeof out);
}

static double num(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

int main(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_sample.txt"), *valid = sc_asset("text/tinystories_valid_a.txt");
    if (!bin || !tok || !text || !valid) return sc_test_finish();
    const char *S = SC_CLI_PATH;
    char M[4200];
    snprintf(M, sizeof M, "-m %s --tokenizer %s", bin, tok);
    const char *one = sc_tmp_path("one.scal"), *a = sc_tmp_path("a.scal"), *b = sc_tmp_path("b.scal"),
               *ab = sc_tmp_path("ab.scal");

    /* compute: one run and two shards, merged */
    CHECK(run("%s compute %s -f %s --method claws,cats --max-docs 24 --ctx-size 96 -o %s -q --json", S, M, valid,
        one) == 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j && num(j, "sequences") == 24 && num(j, "tokens") > 100);
    cJSON_Delete(j);
    CHECK(run("%s compute %s -f %s --method claws,cats --max-docs 24 --ctx-size 96 --shard 0/2 -o %s "
        "-q", S, M, valid, a) == 0);
    CHECK(run("%s compute %s -f %s --method claws,cats --max-docs 24 --ctx-size 96 --shard 1/2 -o %s "
        "-q", S, M, valid, b) == 0);
    CHECK(run("%s merge %s %s -o %s --json", S, a, b, ab) == 0);
    j = cJSON_Parse(out);
    CHECK(j && num(j, "sequences") == 24);
    cJSON_Delete(j);
    CHECK(run("%s merge %s %s -o %s 2>&1", S, a, a, sc_tmp_path("aa.scal")) == 2 && strstr(out, "twice") && lines(out) == 1);
    CHECK(run("%s merge %s %s -o %s 2>&1", S, one, a, sc_tmp_path("x.scal")) == 2 && lines(out) == 1);

    /* eval from the merged file equals eval from the single run to 1e-9 */
    double p1 = 0, p2 = 0;
    CHECK(run("%s eval %s -f %s --calib %s --method claws --density 0.5 --json -q", S, M, text, one) == 0);
    j = cJSON_Parse(out);
    CHECK(j != NULL);
    p1 = num(j, "ppl");
    CHECK(num(j, "density_mean") == round(0.5 * 172) / 172 && num(j, "density_target") == 0.5);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "density_per_layer")) == 5);
    CHECK(strcmp(cJSON_GetObjectItemCaseSensitive(j, "method")->valuestring, "claws") == 0);
    cJSON_Delete(j);
    CHECK(run("%s eval %s -f %s --calib %s --method claws --density 0.5 --json -q", S, M, text, ab) == 0);
    j = cJSON_Parse(out);
    p2 = num(j, "ppl");
    cJSON_Delete(j);
    CHECK(fabs(p1 - p2) <= 1e-9 * p1);
    /* every method at density 1 equals dense */
    CHECK(run("%s eval %s -f %s --method dense --json -q", S, M, text) == 0);
    j = cJSON_Parse(out);
    double dense = num(j, "ppl");
    cJSON_Delete(j);
    CHECK(run("%s ppl %s -f %s --json -q", S, M, text) == 0);
    j = cJSON_Parse(out);
    CHECK(num(j, "ppl") == dense);
    cJSON_Delete(j);
    const char *methods[] = {"cats", "cats-threshold", "claws", "oracle"};
    for (int i = 0; i < 4; i++) {
        CHECK(run("%s eval %s -f %s --calib %s --method %s --density 1 --json -q", S, M, text, one, methods[i]) == 0);
        j = cJSON_Parse(out);
        CHECK_MSG(num(j, "ppl") == dense, "%s: %.17g vs %.17g", methods[i], num(j, "ppl"), dense);
        cJSON_Delete(j);
    }
    /* usage errors */
    CHECK(run("%s eval %s -f %s --method claws --density 0.5 2>&1", S, M, text) == 2 && lines(out) == 1);
    CHECK(run("%s eval %s -f %s --method bogus 2>&1", S, M, text) == 2);
    CHECK(run("%s eval %s -f %s --method cats --density 1.5 2>&1", S, M, text) == 2);
    CHECK(run("%s compute %s -f %s --method nope -o %s 2>&1", S, M, text, sc_tmp_path("n.scal")) == 2);
    CHECK(run("%s compute %s -f %s --method claws --shard 2/2 -o %s 2>&1", S, M, text, sc_tmp_path("n.scal")) == 2);
    CHECK(run("%s compute %s -f %s --method claws --layers 3:9 -o %s 2>&1", S, M, text, sc_tmp_path("n.scal")) == 2);
    CHECK(run("%s compute %s -f %s --method claws --loss distill --student cats --student-density 0.5 --max-docs 3 "
        "-o %s -q",
              S, M, text, sc_tmp_path("d.scal")) == 0);

    /* inspect and verify read the file */
    CHECK(run("%s inspect %s --json", S, one) == 0);
    j = cJSON_Parse(out);
    CHECK(j != NULL);
    cJSON_Delete(j);
    CHECK(strstr(out, "claws/layer4.c") != NULL);
    CHECK(run("%s verify %s", S, ab) == 0);

    /* hostile files: truncated and corrupted copies never crash inspect, verify, merge or eval */
    char *buf;
    size_t len;
    sc_err err;
    CHECK(sc_read_file(one, 1 << 24, &buf, &len, &err) == SC_OK);
    const char *bad = sc_tmp_path("bad.scal");
    int rejected = 0, total = 0;
    for (size_t cut = 0; cut < len; cut += len / 23 + 1) {
        sc_write_bytes(bad, buf, cut);
        for (int c = 0; c < 4; c++) {
            char sub[8192];
            if (c == 0) snprintf(sub, sizeof sub, "%s inspect %s 2>&1", S, bad);
            if (c == 1) snprintf(sub, sizeof sub, "%s verify %s 2>&1", S, bad);
            if (c == 2) snprintf(sub, sizeof sub, "%s merge %s -o %s 2>&1", S, bad, sc_tmp_path("m.scal"));
            if (c == 3)
                snprintf(sub, sizeof sub, "%s eval %s --calib %s -f %s --method claws --density 0.5 -q 2>&1", S, M, bad, text);
            int rc = sc_run(sub, out, sizeof out);
            total++;
            if (rc == 1 || rc == 2) rejected++;
            CHECK_MSG(rc == 1 || rc == 2, "%s -> %d", sub, rc);
        }
    }
    for (int k = 0; k < 20; k++) { /* flip one byte */
        size_t pos = (size_t)(k * 7919) % len;
        buf[pos] ^= 0x5a;
        sc_write_bytes(bad, buf, len);
        buf[pos] ^= 0x5a;
        int rc = run("%s eval %s --calib %s -f %s --method claws --density 0.5 -q 2>&1", S, M, bad, text);
        total++;
        if (rc == 1 || rc == 2) rejected++;
        CHECK_MSG(rc == 1 || rc == 2, "flip at %zu -> %d: %s", pos, rc, out);
    }
    printf("%d of %d hostile invocations rejected cleanly\n", rejected, total);
    free(buf);
    return sc_test_finish();
}
