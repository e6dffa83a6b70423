/* calib_options.c - sc_calib_options_diff (engine.h): what two calibrations'
 * canonical options differ in, in words, for merge and resume refusals. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine.h"

/* one option's value as the user would write it: a list joined by commas,
 * the layer range as begin:end, an empty string as "none" */
static void render(const char *key, const cJSON *v, char *out, size_t cap) {
    if (!v) {
        snprintf(out, cap, "(absent)");
    } else if (cJSON_IsString(v)) {
        snprintf(out, cap, "%s", v->valuestring[0] ? v->valuestring : "none");
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 1e15) snprintf(out, cap, "%lld", (long long)d);
        else snprintf(out, cap, "%g", d);
    } else if (cJSON_IsArray(v)) {
        size_t n = 0;
        out[0] = '\0';
        const char *sep = !strcmp(key, "layers") ? ":" : ",";
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (n + 1 >= cap) break;
            if (n) n += (size_t)snprintf(out + n, cap - n, "%s", sep);
            if (n + 1 >= cap) break;
            render(key, e, out + n, cap - n);
            n += strlen(out + n);
        }
    } else {
        char *t = cJSON_PrintUnformatted(v);
        snprintf(out, cap, "%s", t ? t : "?");
        cJSON_free(t);
    }
}

void sc_calib_options_diff(const char *a, const char *b, char *out, size_t cap) {
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    snprintf(out, cap, "%s vs %s", a, b); /* unparsable: both as they are */
    if (cJSON_IsObject(ja) && cJSON_IsObject(jb)) {
        const cJSON *x = NULL, *y = NULL;
        const char *key = NULL;
        for (const cJSON *e = ja->child; e && !key; e = e->next)
            if (!cJSON_Compare(e, cJSON_GetObjectItemCaseSensitive(jb, e->string), true)) key = e->string;
        for (const cJSON *e = jb->child; e && !key; e = e->next)
            if (!cJSON_GetObjectItemCaseSensitive(ja, e->string)) key = e->string;
        if (key) {
            x = cJSON_GetObjectItemCaseSensitive(ja, key);
            y = cJSON_GetObjectItemCaseSensitive(jb, key);
            char va[256], vb[256];
            render(key, x, va, sizeof va);
            render(key, y, vb, sizeof vb);
            snprintf(out, cap, "%s %s vs %s", key, va, vb);
        }
    }
    cJSON_Delete(ja);
    cJSON_Delete(jb);
}
