#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(const char *cmd, const char *summary, const sc_opt *opts) {
    printf("usage: sparsecal %s [options]\n\n%s\n\noptions:\n", cmd, summary);
    for (const sc_opt *o = opts; o->lng; o++) {
        char left[64];
        if (o->shrt)
            snprintf(left, sizeof left, "-%c, --%s%s%s", o->shrt, o->lng, o->meta ? " " : "", o->meta ? o->meta : "");
        else
            snprintf(left, sizeof left, "    --%s%s%s", o->lng, o->meta ? " " : "", o->meta ? o->meta : "");
        printf("  %-28s %s\n", left, o->help);
    }
    printf("  %-28s %s\n", "-h, --help", "show this help");
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
            fprintf(stderr, "sparsecal %s: --%s %s is out of range [%g, %g]\n", cmd, o->lng, v, o->lo, o->hi);
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
            fprintf(stderr, "sparsecal %s: --%s %s is out of range [%g, %g]\n", cmd, o->lng, v, o->lo, o->hi);
            return SC_ARGS_ERROR;
        }
        *(double *)o->dst = x;
        return 0;
    }
    case SC_ARG_FLAG: break;
    }
    fprintf(stderr, "sparsecal %s: --%s expects %s, got '%s'\n", cmd, o->lng,
            o->kind == SC_ARG_FLOAT ? "a number" : "an integer", v);
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
            for (const sc_opt *p = opts; p->lng; p++)
                if (strlen(p->lng) == len && strncmp(p->lng, name, len) == 0) o = p;
            if (eq) inline_val = eq + 1;
        } else if (a[2] == '\0') {
            for (const sc_opt *p = opts; p->lng; p++)
                if (p->shrt == a[1]) o = p;
        }
        if (!o) {
            fprintf(stderr, "sparsecal %s: unknown option '%s' (see --help)\n", cmd, a);
            return SC_ARGS_ERROR;
        }
        if (o->kind == SC_ARG_FLAG) {
            if (inline_val) {
                fprintf(stderr, "sparsecal %s: --%s takes no value\n", cmd, o->lng);
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
