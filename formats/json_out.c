/* json_out.c - see json_out.h. */
#include "json_out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srt_json.h"

/* Turns every number of a (copied) tree into a raw literal in exact form. */
static bool exact_numbers(cJSON *j) {
    for (; j; j = j->next) {
        if (cJSON_IsNumber(j)) {
            char buf[SRT_JSON_DOUBLE_CHARS];
            double d = j->valuedouble;
            if (d == floor(d) && fabs(d) < 9007199254740992.0 && !(d == 0 && signbit(d))) {
                snprintf(buf, sizeof buf, "%.0f", d); /* integers as integers (counts, sizes, ids) */
            } else {
                size_t n = srt_json_format_double(d, buf);
                if (n > 2 && strcmp(buf + n - 2, ".0") == 0) buf[n - 2] = '\0';
            }
            char *raw = cJSON_malloc(strlen(buf) + 1);
            if (!raw) return false;
            memcpy(raw, buf, strlen(buf) + 1);
            j->type = cJSON_Raw | (j->type & cJSON_StringIsConst);
            j->valuestring = raw;
        } else if (j->child && !exact_numbers(j->child)) {
            return false;
        }
    }
    return true;
}

char *sc_json_print(const cJSON *j, bool pretty) {
    cJSON *copy = cJSON_Duplicate(j, true);
    if (!copy) return NULL;
    char *out = NULL;
    if (exact_numbers(copy)) out = pretty ? cJSON_Print(copy) : cJSON_PrintUnformatted(copy);
    cJSON_Delete(copy);
    return out;
}

int sc_json_canonical_value(const srt_json *v, char *out, size_t cap) {
    size_t n = 0;
    char *t = v ? srt_json_print(v, 0, &n) : NULL;
    int rc = t && n < cap ? 0 : -1;
    if (!rc) memcpy(out, t, n + 1);
    free(t);
    return rc;
}

int sc_json_canonical(const char *text, size_t len, char *out, size_t cap) {
    srt_json *v = NULL;
    char jerr[160];
    if (srt_json_parse(text, len, NULL, &v, jerr, sizeof jerr)) return -1;
    int rc = sc_json_canonical_value(v, out, cap);
    srt_json_free(v);
    return rc;
}
