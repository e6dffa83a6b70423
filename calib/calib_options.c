/* calib_options.c - sc_calib_options_diff (engine.h): what two calibrations'
 * canonical options differ in, in words, for merge and resume refusals. The
 * options are read with the runtime's JSON reader, as the .scal manifest is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "json_out.h"
#include "srt_json.h"

/* two values equal: the same canonical text (both blocks are canonical, engine.c) */
static bool same(const srt_json *a, const srt_json *b) {
    char x[1100], y[1100];
    if (!a || !b) return a == b;
    return !sc_json_canonical_value(a, x, sizeof x) && !sc_json_canonical_value(b, y, sizeof y) && !strcmp(x, y);
}

/* one option's value as the user would write it: a list joined by commas,
 * the layer range as begin:end, an empty string as "none" */
static void render(const char *key, const srt_json *v, char *out, size_t cap) {
    if (!v) {
        snprintf(out, cap, "(absent)");
    } else if (v->type == SRT_JSON_STRING) {
        snprintf(out, cap, "%s", v->v.s[0] ? v->v.s : "none");
    } else if (v->type == SRT_JSON_INT) {
        snprintf(out, cap, "%lld", (long long)v->v.i);
    } else if (v->type == SRT_JSON_DOUBLE) {
        snprintf(out, cap, "%g", v->v.d);
    } else if (v->type == SRT_JSON_ARRAY) {
        size_t n = 0;
        out[0] = '\0';
        const char *sep = !strcmp(key, "layers") ? ":" : ",";
        for (size_t i = 0; i < v->n; i++) {
            if (n + 1 >= cap) break;
            if (n) n += (size_t)snprintf(out + n, cap - n, "%s", sep);
            if (n + 1 >= cap) break;
            render(key, srt_json_at(v, i), out + n, cap - n);
            n += strlen(out + n);
        }
    } else {
        char *t = srt_json_print(v, 0, NULL);
        snprintf(out, cap, "%s", t ? t : "?");
        free(t);
    }
}

void sc_calib_options_diff(const char *a, const char *b, char *out, size_t cap) {
    srt_json *ja = NULL, *jb = NULL;
    char jerr[160];
    snprintf(out, cap, "%s vs %s", a, b); /* unparsable: both as they are */
    if (!srt_json_parse(a, strlen(a), NULL, &ja, jerr, sizeof jerr) &&
        !srt_json_parse(b, strlen(b), NULL, &jb, jerr, sizeof jerr) && srt_json_is(ja, SRT_JSON_OBJECT) &&
        srt_json_is(jb, SRT_JSON_OBJECT)) {
        const char *key = NULL;
        for (size_t i = 0; i < ja->n && !key; i++) {
            const srt_json *e = srt_json_at(ja, i);
            if (!same(e, srt_json_get(jb, e->key))) key = e->key;
        }
        for (size_t i = 0; i < jb->n && !key; i++) {
            const srt_json *e = srt_json_at(jb, i);
            if (!srt_json_get(ja, e->key)) key = e->key;
        }
        if (key) {
            char va[256], vb[256];
            render(key, srt_json_get(ja, key), va, sizeof va);
            render(key, srt_json_get(jb, key), vb, sizeof vb);
            snprintf(out, cap, "%s %s vs %s", key, va, vb);
        }
    }
    srt_json_free(ja);
    srt_json_free(jb);
}
