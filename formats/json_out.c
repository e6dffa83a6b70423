/* json_out.c - see json_out.h. */
#include "json_out.h"

#include <math.h>
#include <stdio.h>
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
