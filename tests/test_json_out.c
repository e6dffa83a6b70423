/* test_json_out.c - sc_json_print writes every double so that it reads back
 * exactly (cJSON's own printer keeps 15 digits whenever they read back within
 * a relative DBL_EPSILON, which lost the last bit of stored thresholds), and
 * otherwise prints what cJSON prints: same strings, integers, nesting. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "json_out.h"
#include "srt_json.h"
#include "testing.h"

/* xorshift64*: random bit patterns, so every exponent and mantissa shows up */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

int main(void) {
    /* the value whose last bit cJSON dropped in an artifact manifest */
    const double known = 0.35143945182783204;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "t", known);
    char *plain = cJSON_PrintUnformatted(j), *ours = sc_json_print(j, false);
    cJSON *back = cJSON_Parse(ours);
    CHECK(back && cJSON_GetObjectItem(back, "t")->valuedouble == known);
    printf("cJSON: %s  ours: %s\n", plain, ours);
    cJSON_Delete(back);
    cJSON_free(plain);
    cJSON_free(ours);
    cJSON_Delete(j);

    /* 20,000 random finite doubles in an array, read back by cJSON and by srt_json */
    enum { N = 20000 };
    double *v = malloc(N * sizeof *v);
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; i < N; i++) {
        uint64_t bits;
        double d;
        do {
            bits = next();
            memcpy(&d, &bits, sizeof d);
        } while (!isfinite(d));
        if (i % 4 == 0) d = (double)(int64_t)(bits >> 20) * (i % 8 ? 1 : -1); /* integers too */
        v[i] = d;
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(d));
    }
    char *txt = sc_json_print(arr, true);
    cJSON *rb = cJSON_Parse(txt);
    srt_json *sj = NULL;
    char emsg[256];
    CHECK(srt_json_parse(txt, strlen(txt), NULL, &sj, emsg, sizeof emsg) == 0);
    int exact_c = 0, exact_s = 0;
    for (int i = 0; i < N && rb && sj; i++) {
        exact_c += cJSON_GetArrayItem(rb, i)->valuedouble == v[i];
        exact_s += srt_json_num(srt_json_at(sj, (size_t)i), NAN) == v[i];
    }
    CHECK_MSG(exact_c == N && exact_s == N, "exact: cJSON %d, srt_json %d of %d", exact_c, exact_s, N);
    /* integral values stay integers, as cJSON prints them (no ".0", no exponent below 2^53) */
    CHECK(strstr(txt, ".0,") == NULL && strstr(txt, ".0\n") == NULL);
    cJSON *ints = cJSON_CreateArray();
    cJSON_AddItemToArray(ints, cJSON_CreateNumber(130240));
    cJSON_AddItemToArray(ints, cJSON_CreateNumber(-7));
    cJSON_AddItemToArray(ints, cJSON_CreateNumber(4503599627370496.0));
    char *ti = sc_json_print(ints, false), *tc = cJSON_PrintUnformatted(ints);
    CHECK_MSG(strcmp(ti, "[130240,-7,4503599627370496]") == 0 && strcmp(ti, tc) == 0, "%s vs cJSON %s", ti, tc);
    cJSON_free(ti);
    cJSON_free(tc);
    cJSON_Delete(ints);
    cJSON_Delete(rb);
    srt_json_free(sj);
    cJSON_free(txt);
    cJSON_Delete(arr);
    free(v);

    /* everything else as cJSON prints it: strings with escapes, bools, null, nesting */
    cJSON *o = cJSON_Parse("{\"a\":\"q\\\"\\n\\u00e9\",\"b\":[true,false,null,1,-2,{\"c\":[]}],\"d\":{}}");
    char *p1 = cJSON_PrintUnformatted(o), *p2 = sc_json_print(o, false), *p3 = cJSON_Print(o), *p4 = sc_json_print(o, true);
    CHECK(o && strcmp(p1, p2) == 0 && strcmp(p3, p4) == 0);
    cJSON_free(p1);
    cJSON_free(p2);
    cJSON_free(p3);
    cJSON_free(p4);
    cJSON_Delete(o);
    return sc_test_finish();
}
