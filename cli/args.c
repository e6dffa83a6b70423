#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the length of an option's first (canonical) name in "name|alias|..." */
static int name_len(const char *lng) { return (int)strcspn(lng, "|"); }

/* whether name[0..len) is one of the spellings of lng */
static bool name_matches(const char *lng, const char *name, size_t len) {
    if (len == 0) return false;
    for (const char *p = lng;;) {
        size_t n = strcspn(p, "|");
        if (n == len && strncmp(p, name, len) == 0) return true;
        if (!p[n]) return false;
        p += n + 1;
    }
}

static void usage(const char *cmd, const char *summary, const sc_opt *opts) {
    printf("usage: sparsecal %s [options]\n\n%s\n\noptions:\n", cmd, summary);
    const sc_opt *o = opts;
    for (; o->lng; o++) {
        if (o->kind == SC_ARG_GONE) continue;
        char left[64];
        int n = name_len(o->lng);
        if (o->shrt)
            snprintf(left, sizeof left, "-%c, --%.*s%s%s", o->shrt, n, o->lng, o->meta ? " " : "",
                o->meta ? o->meta : "");
        else
            snprintf(left, sizeof left, "    --%.*s%s%s", n, o->lng, o->meta ? " " : "", o->meta ? o->meta : "");
        printf("  %-28s %s", left, o->help);
        /* the old spellings that still work */
        for (const char *a = o->lng + n; *a; a += 1 + strcspn(a + 1, "|"))
            printf("%s--%.*s", a == o->lng + n ? " (also " : ", ", (int)strcspn(a + 1, "|"), a + 1);
        printf("%s\n", o->lng[n] ? ")" : "");
    }
    printf("  %-28s %s\n", "-h, --help", "show this help");
    if (o->help) printf("\nexamples:\n%s\n", o->help);
}

static int set_value(const char *cmd, const sc_opt *o, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (o->kind) {
    case SC_ARG_STR: *(const char **)o->dst = v; return 0;
    case SC_ARG_INT: {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end) break;
        if ((o->lo != 0 || o->hi != 0) && ((double)x < o->lo || (double)x > o->hi)) {
            fprintf(stderr, "sparsecal %s: --%.*s %s is out of range [%g, %g]\n", cmd, name_len(o->lng), o->lng, v,
                    o->lo, o->hi);
            return SC_ARGS_ERROR;
        }
        *(int64_t *)o->dst = x;
        return 0;
    }
    case SC_ARG_U64: {
        if (v[0] == '-') break;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end) break;
        *(uint64_t *)o->dst = x;
        return 0;
    }
    case SC_ARG_FLOAT: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x)) break;
        if ((o->lo != 0 || o->hi != 0) && (x < o->lo || x > o->hi)) {
            fprintf(stderr, "sparsecal %s: --%.*s %s is out of range [%g, %g]\n", cmd, name_len(o->lng), o->lng, v,
                    o->lo, o->hi);
            return SC_ARGS_ERROR;
        }
        *(double *)o->dst = x;
        return 0;
    }
    case SC_ARG_FLAG:
    case SC_ARG_GONE: break;
    }
    /* -t was the tokenizer before it became the thread count (as in llama.cpp): say where the tokenizer went */
    bool threads = o->shrt == 't' && strncmp(o->lng, "threads", 7) == 0;
    fprintf(stderr, "sparsecal %s: --%.*s expects %s, got '%s'%s\n", cmd, name_len(o->lng), o->lng,
            o->kind == SC_ARG_FLOAT ? "a number" : "an integer", v,
            threads ? " (-t is the thread count, as in llama.cpp; give a tokenizer with --tokenizer FILE)" : "");
    return SC_ARGS_ERROR;
}

int sc_parse_args(const char *cmd, const char *summary, const sc_opt *opts, int argc, char **argv,
                  const char **pos, int max_pos, int *n_pos) {
    if (n_pos) *n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(cmd, summary, opts);
            return SC_ARGS_HELP;
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (!pos || !n_pos || *n_pos >= max_pos) {
                fprintf(stderr, "sparsecal %s: unexpected argument '%s' (see --help)\n", cmd, a);
                return SC_ARGS_ERROR;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const sc_opt *o = NULL;
        const char *inline_val = NULL;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            for (const sc_opt *p = opts; p->lng; p++) /* a command's own row wins over a shared renamed one */
                if (name_matches(p->lng, name, len) && (!o || o->kind == SC_ARG_GONE)) o = p;
            if (eq) inline_val = eq + 1;
        } else if (a[2] == '\0') {
            for (const sc_opt *p = opts; p->lng; p++)
                if (p->shrt == a[1] && (!o || o->kind == SC_ARG_GONE)) o = p;
        }
        if (!o) {
            fprintf(stderr, "sparsecal %s: unknown option '%s' (see --help)\n", cmd, a);
            return SC_ARGS_ERROR;
        }
        if (o->kind == SC_ARG_GONE) {
            fprintf(stderr, "sparsecal %s: %s: %s\n", cmd, a, o->help);
            return SC_ARGS_ERROR;
        }
        if (o->kind == SC_ARG_FLAG) {
            if (inline_val) {
                fprintf(stderr, "sparsecal %s: --%.*s takes no value\n", cmd, name_len(o->lng), o->lng);
                return SC_ARGS_ERROR;
            }
            *(bool *)o->dst = true;
            continue;
        }
        const char *v = inline_val;
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sparsecal %s: option '%s' needs a value\n", cmd, a);
                return SC_ARGS_ERROR;
            }
            v = argv[++i];
        }
        if (set_value(cmd, o, v)) return SC_ARGS_ERROR;
    }
    return SC_ARGS_OK;
}
