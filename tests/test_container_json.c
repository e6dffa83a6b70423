/* test_container_json.c - the runtime's strict JSON parser (kernels/srt_json)
 * against cJSON on a set of documents, its strict rejections, exact int64
 * numbers, UTF-8 and surrogate handling, limits, print/reparse round trips,
 * and random mutations (never a crash; when both parsers accept, both trees
 * agree). */
#define _POSIX_C_SOURCE 200809L
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "srt_json.h"
#include "testing.h"

/* Same tree? cJSON has one number type; strings compared bytewise. */
static bool same(const srt_json *a, const cJSON *b) {
    switch ((srt_json_type)a->type) {
    case SRT_JSON_NULL: return cJSON_IsNull(b);
    case SRT_JSON_BOOL: return a->v.b ? cJSON_IsTrue(b) : cJSON_IsFalse(b);
    case SRT_JSON_INT: return cJSON_IsNumber(b) && (double)a->v.i == b->valuedouble;
    case SRT_JSON_DOUBLE: return cJSON_IsNumber(b) && a->v.d == b->valuedouble;
    case SRT_JSON_STRING: return cJSON_IsString(b) && strlen(b->valuestring) == a->n && memcmp(a->v.s, b->valuestring, a->n) == 0;
    case SRT_JSON_ARRAY:
    case SRT_JSON_OBJECT: {
        if (a->type == SRT_JSON_ARRAY ? !cJSON_IsArray(b) : !cJSON_IsObject(b)) return false;
        size_t i = 0;
        const cJSON *c = b->child;
        for (; c && i < a->n; c = c->next, i++) {
            const srt_json *x = &a->v.items[i];
            if (a->type == SRT_JSON_OBJECT &&
                (!c->string || strlen(c->string) != x->key_len || memcmp(c->string, x->key, x->key_len) != 0))
                return false;
            if (!same(x, c)) return false;
        }
        return !c && i == a->n;
    }
    }
    return false;
}

/* Structural equality of two srt_json trees (types and values exact). */
static bool equal(const srt_json *a, const srt_json *b) {
    if (a->type != b->type || a->key_len != b->key_len) return false;
    if (a->key_len && memcmp(a->key, b->key, a->key_len) != 0) return false;
    switch ((srt_json_type)a->type) {
    case SRT_JSON_NULL: return true;
    case SRT_JSON_BOOL: return a->v.b == b->v.b;
    case SRT_JSON_INT: return a->v.i == b->v.i;
    case SRT_JSON_DOUBLE: return a->v.d == b->v.d;
    case SRT_JSON_STRING: return a->n == b->n && memcmp(a->v.s, b->v.s, a->n) == 0;
    case SRT_JSON_ARRAY:
    case SRT_JSON_OBJECT:
        if (a->n != b->n) return false;
        for (size_t i = 0; i < a->n; i++)
            if (!equal(&a->v.items[i], &b->v.items[i])) return false;
        return true;
    }
    return false;
}

static srt_json *parse(const char *s, char *err) {
    srt_json *j = NULL;
    srt_json_parse(s, strlen(s), NULL, &j, err, 256);
    return j;
}

/* Print (compact and indented) and reparse: the same tree. */
static void check_round_trip(const srt_json *j, const char *what) {
    for (int indent = 0; indent <= 2; indent += 2) {
        size_t len;
        char *s = srt_json_print(j, indent, &len);
        CHECK_MSG(s != NULL, "%s: print failed", what);
        if (!s) continue;
        srt_json *k = NULL;
        char err[256];
        CHECK_MSG(srt_json_parse(s, len, NULL, &k, err, sizeof err) == 0, "%s: reparse of '%s': %s", what, s, err);
        CHECK_MSG(k && equal(j, k), "%s: printed as '%s', reparsed differently", what, s);
        srt_json_free(k);
        free(s);
    }
}

static const char *agree[] = {
    "{}", "[]", "0", "-0", "1", "-1", "3.5", "-2.25e-3", "1E10", "1e+2", "6.02214076e23", "null", "true", "false",
    "\"\"", "\"plain\"", "\"esc \\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", "\"\\u00e9t\\u00C9 \\u4e2d \\ud83d\\ude00\"",
    "\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\"", "  \t\r\n {\"a\" : [ 1 , 2 , { \"b\" : null } ] } \n",
    "{\"model\":{\"family\":\"llama\",\"dim\":4096,\"hash\":\"0123abcd\"},\"tokens\":123456789,\"opts\":[0.5,0.25]}",
    "[[[[[[[[[[1]]]]]]]]]]", "{\"\":\"empty key\",\"x\":{\"\":{}}}", "[1,[2,[3,[4,[5]]]],{\"k\":[true,false,null]}]",
    "1.7976931348623157e308", "4.9e-324", "2.2250738585072014e-308", "123456789012", "9007199254740993",
    "[\"\\u0001\\u001f\", \"\\u007f\", \"\\uffff\", \"\\udbff\\udfff\"]",
};

typedef struct bad_case {
    const char *text;
    const char *must; /* substring of the error message */
} bad_case;

/* Rejected by both parsers. */
static const bad_case both_reject[] = {
    {"", "end of input"}, {"   ", "end of input"}, {"{", "end of input"}, {"[1,2", "expected"},
    {"{\"a\" 1}", "':'"}, {"{\"a\":1,}", "string key"}, {"[1,]", "JSON value"}, {"[1 2]", "','"},
    {"{1:2}", "string key"}, {"\"abc", "unterminated"}, {"tru", "JSON value"}, {"nul", "JSON value"},
    {"[01x]", "leading zero"}, {"-", "invalid number"}, {"\"\\x\"", "invalid escape"}, {"\"\\u12\"", "hex digits"},
    {"{\"a\":}", "JSON value"}, {"[1]]", "end of input"}, {"1 2", "end of input"},
};

/* Rejected by us (strict) whatever cJSON does. */
static const bad_case strict_reject[] = {
    {"{\"a\":1,\"a\":2}", "duplicate"},
    {"{\"k0\":0,\"k1\":1,\"k2\":2,\"k3\":3,\"k4\":4,\"k5\":5,\"k6\":6,\"k7\":7,\"k8\":8,\"k1\":9}", "duplicate"},
    {"01", "leading zero"}, {"-01", "leading zero"}, {"1.", "digits"}, {".5", "JSON value"}, {"+1", "JSON value"},
    {"1e", "exponent"}, {"1e+", "exponent"}, {"0x10", "end of input"}, {"NaN", "JSON value"},
    {"Infinity", "JSON value"}, {"1e400", "out of range"}, {"-1e400", "out of range"}, {"[1e999999999999]", "out of range"},
    {"\"\\ud800\"", "low surrogate"}, {"\"\\ud800x\"", "low surrogate"}, {"\"\\ud800\\u0041\"", "low surrogate"},
    {"\"\\udc00\"", "lone low surrogate"}, {"\"\\ude00\\ud83d\"", "lone low surrogate"},
    {"\"\xc3\"", "UTF-8"}, {"\"\xc0\xaf\"", "UTF-8"}, {"\"\xe0\x80\xaf\"", "UTF-8"}, {"\"\xed\xa0\x80\"", "UTF-8"},
    {"\"\xf4\x90\x80\x80\"", "UTF-8"}, {"\"\xff\"", "UTF-8"}, {"\"\x80\"", "UTF-8"}, {"\"a\tb\"", "control"},
    {"\"a\nb\"", "control"}, {"\xef\xbb\xbf{}", "JSON value"}, {"{} // c", "end of input"}, {"/* c */ {}", "JSON value"},
    {"[1,2,]", "JSON value"}, {"{'a':1}", "string key"}, {"[True]", "JSON value"},
};

static void test_documents(void) {
    char err[256];
    for (size_t i = 0; i < sizeof agree / sizeof agree[0]; i++) {
        srt_json *j = parse(agree[i], err);
        cJSON *c = cJSON_Parse(agree[i]);
        CHECK_MSG(j != NULL, "rejected '%s': %s", agree[i], err);
        CHECK_MSG(c != NULL, "cJSON rejected '%s'", agree[i]);
        if (j && c) CHECK_MSG(same(j, c), "'%s' parsed differently from cJSON", agree[i]);
        if (j) check_round_trip(j, agree[i]);
        srt_json_free(j);
        cJSON_Delete(c);
    }
    for (size_t i = 0; i < sizeof both_reject / sizeof both_reject[0]; i++) {
        const bad_case *b = &both_reject[i];
        srt_json *j = parse(b->text, err);
        cJSON *c = cJSON_ParseWithOpts(b->text, NULL, 1);
        CHECK_MSG(j == NULL, "accepted '%s'", b->text);
        CHECK_MSG(c == NULL, "cJSON accepted '%s'", b->text);
        CHECK_MSG(strstr(err, b->must) && strstr(err, "byte ") && !strchr(err, '\n'), "'%s': message '%s' lacks '%s'",
                  b->text, err, b->must);
        cJSON_Delete(c);
    }
    for (size_t i = 0; i < sizeof strict_reject / sizeof strict_reject[0]; i++) {
        const bad_case *b = &strict_reject[i];
        srt_json *j = parse(b->text, err);
        CHECK_MSG(j == NULL, "accepted '%s'", b->text);
        CHECK_MSG(strstr(err, b->must) != NULL, "'%s': message '%s' lacks '%s'", b->text, err, b->must);
        srt_json_free(j);
    }
    /* the message locates the error */
    srt_json *j = parse("{\n  \"a\": [1,\n  2,, 3]}", err);
    CHECK(j == NULL && strstr(err, "line 3, column 5"));
}

static void test_values(void) {
    char err[256];
    srt_json *j = parse("{\"max\":9223372036854775807,\"min\":-9223372036854775808,\"over\":9223372036854775808,"
                        "\"under\":-9223372036854775809,\"f\":1.0,\"e\":1e2,\"z\":-0,\"tiny\":1e-400,"
                        "\"s\":\"a\\u0000b\",\"u\":\"\\ud83d\\ude00\",\"arr\":[1,\"x\",null],\"t\":true}",
                        err);
    CHECK_MSG(j != NULL, "%s", err);
    if (!j) return;
    const srt_json *v = srt_json_get(j, "max");
    CHECK(srt_json_is(v, SRT_JSON_INT) && v->v.i == INT64_MAX);
    v = srt_json_get(j, "min");
    CHECK(srt_json_is(v, SRT_JSON_INT) && v->v.i == INT64_MIN);
    v = srt_json_get(j, "over");
    CHECK(srt_json_is(v, SRT_JSON_DOUBLE) && v->v.d == 9223372036854775808.0);
    CHECK(srt_json_int(v, 7) == 7); /* 2^63 does not fit */
    v = srt_json_get(j, "under");
    CHECK(srt_json_is(v, SRT_JSON_DOUBLE) && srt_json_int(v, 7) == INT64_MIN); /* rounds to -2^63 exactly */
    CHECK(srt_json_is(srt_json_get(j, "f"), SRT_JSON_DOUBLE) && srt_json_int(srt_json_get(j, "f"), 0) == 1);
    CHECK(srt_json_num(srt_json_get(j, "e"), 0) == 100.0);
    CHECK(srt_json_is(srt_json_get(j, "z"), SRT_JSON_INT) && srt_json_int(srt_json_get(j, "z"), 1) == 0);
    CHECK(srt_json_num(srt_json_get(j, "tiny"), 1) == 0.0);
    v = srt_json_get(j, "s");
    CHECK(srt_json_is(v, SRT_JSON_STRING) && v->n == 3 && memcmp(v->v.s, "a\0b", 4) == 0);
    CHECK(strcmp(srt_json_str(srt_json_get(j, "u"), ""), "\xf0\x9f\x98\x80") == 0);
    const srt_json *arr = srt_json_get(j, "arr");
    CHECK(srt_json_count(arr) == 3 && srt_json_int(srt_json_at(arr, 0), 0) == 1);
    CHECK(strcmp(srt_json_str(srt_json_at(arr, 1), ""), "x") == 0 && srt_json_is(srt_json_at(arr, 2), SRT_JSON_NULL));
    CHECK(srt_json_at(arr, 3) == NULL && srt_json_get(arr, "x") == NULL);
    CHECK(srt_json_bool(srt_json_get(j, "t"), false) && srt_json_get(j, "nope") == NULL);
    CHECK(srt_json_str(NULL, "fb")[0] == 'f' && srt_json_count(NULL) == 0 && srt_json_get(NULL, "a") == NULL);
    check_round_trip(j, "values");
    /* printing keeps int64 exact and doubles typed */
    char *s = srt_json_print(j, 0, NULL);
    CHECK(s && strstr(s, "\"max\":9223372036854775807") && strstr(s, "\"f\":1.0") && strstr(s, "\"s\":\"a\\u0000b\""));
    free(s);
    srt_json_free(j);
    /* quoting replaces invalid UTF-8 and escapes controls */
    char *q = srt_json_quote("a\"\\\n\x01\xff\xc3\xa9", 8, NULL);
    CHECK(q && strcmp(q, "\"a\\\"\\\\\\n\\u0001\\ufffd\xc3\xa9\"") == 0);
    free(q);
}

static void test_limits(void) {
    char err[256], buf[4096];
    srt_json *j = NULL;
    for (int depth = 63; depth <= 66; depth++) { /* default limit: 64 nested containers */
        size_t n = 0;
        for (int i = 0; i < depth; i++) buf[n++] = '[';
        for (int i = 0; i < depth; i++) buf[n++] = ']';
        int rc = srt_json_parse(buf, n, NULL, &j, err, sizeof err);
        CHECK_MSG((rc == 0) == (depth <= 64), "depth %d: rc %d", depth, rc);
        CHECK(rc == 0 || strstr(err, "nesting"));
        srt_json_free(j);
    }
    /* a very deep document never recurses past the hard bound */
    size_t deep = 200000;
    char *d = malloc(2 * deep);
    memset(d, '[', deep);
    memset(d + deep, ']', deep);
    srt_json_limits lim = {.max_depth = 1 << 30};
    CHECK(srt_json_parse(d, 2 * deep, &lim, &j, err, sizeof err) != 0 && strstr(err, "nesting"));
    memset(d, '{', deep); /* unbalanced junk too */
    CHECK(srt_json_parse(d, deep, NULL, &j, err, sizeof err) != 0);
    free(d);
    lim = (srt_json_limits){.max_bytes = 12, .max_depth = 4};
    CHECK(srt_json_parse("[1,2,3,4,5,6]", 13, &lim, &j, err, sizeof err) != 0 && strstr(err, "limit"));
    CHECK(srt_json_parse("[[[[[1]]]]]", 11, &lim, &j, err, sizeof err) != 0 && strstr(err, "deeper than 4"));
    CHECK(srt_json_parse("[[[[1]]]]", 9, &lim, &j, err, sizeof err) == 0);
    srt_json_free(j);
    /* number literal length limit */
    memset(buf, '1', 600);
    CHECK(srt_json_parse(buf, 600, NULL, &j, err, sizeof err) != 0 && strstr(err, "number literal"));
    CHECK(srt_json_parse(buf, 300, NULL, &j, err, sizeof err) == 0 && j->type == SRT_JSON_DOUBLE);
    srt_json_free(j);
    /* text need not be NUL-terminated: parse a prefix */
    CHECK(srt_json_parse("[1]garbage", 3, NULL, &j, err, sizeof err) == 0 && srt_json_count(j) == 1);
    srt_json_free(j);
    /* a big flat document and a big object (sorted duplicate check) */
    size_t n_items = 100000, cap = n_items * 24;
    char *big = malloc(cap);
    size_t n = 0;
    big[n++] = '{';
    for (size_t i = 0; i < n_items; i++) n += (size_t)snprintf(big + n, cap - n, "%s\"k%zu\":%zu", i ? "," : "", i, i);
    big[n++] = '}';
    CHECK(srt_json_parse(big, n, NULL, &j, err, sizeof err) == 0 && srt_json_count(j) == n_items);
    CHECK(srt_json_int(srt_json_get(j, "k99999"), 0) == 99999);
    srt_json_free(j);
    memcpy(big + n - 1, ",\"k7\":1}", 8); /* a duplicate at the end */
    n += 7;
    CHECK(srt_json_parse(big, n, NULL, &j, err, sizeof err) != 0 && strstr(err, "duplicate object key \"k7\""));
    free(big);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void test_mutations(void) {
    static const char alphabet[] = "{}[]\",:\\u0123456789eE+-.tfnrl \t\n\xc3\xa9\xed\xa0\x80\xff";
    int accepted = 0, compared = 0;
    for (int iter = 0; iter < 20000; iter++) {
        const char *src = agree[next_rand() % (sizeof agree / sizeof agree[0])];
        char buf[512];
        size_t n = strlen(src);
        memcpy(buf, src, n);
        int muts = 1 + (int)(next_rand() % 3);
        for (int m = 0; m < muts && n > 0; m++) {
            size_t at = next_rand() % n;
            switch (next_rand() % 4) {
            case 0: buf[at] = alphabet[next_rand() % (sizeof alphabet - 1)]; break;
            case 1: n = at; break; /* truncate */
            case 2: buf[at] ^= (char)(1u << (next_rand() % 8)); break;
            default:
                if (n < sizeof buf - 1) {
                    memmove(buf + at + 1, buf + at, n - at);
                    buf[at] = alphabet[next_rand() % (sizeof alphabet - 1)];
                    n++;
                }
            }
        }
        buf[n] = '\0';
        srt_json *j = NULL;
        char err[256];
        if (srt_json_parse(buf, n, NULL, &j, err, sizeof err) != 0) {
            CHECK_MSG(j == NULL && err[0] && !strchr(err, '\n'), "bad failure for mutation %d", iter);
            continue;
        }
        accepted++;
        if (iter % 16 == 0) check_round_trip(j, buf);
        cJSON *c = memchr(buf, '\0', n) ? NULL : cJSON_ParseWithOpts(buf, NULL, 1);
        bool has_nul = strstr(buf, "\\u0000") != NULL;
        if (c && !has_nul) {
            compared++;
            CHECK_MSG(same(j, c), "mutation '%s' parsed differently from cJSON", buf);
        }
        cJSON_Delete(c);
        srt_json_free(j);
    }
    printf("mutations: %d accepted, %d compared with cJSON\n", accepted, compared);
    CHECK(accepted > 100 && compared > 100);
}

int main(void) {
    test_documents();
    test_values();
    test_limits();
    test_mutations();
    return sc_test_finish();
}
