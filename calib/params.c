/* params.c - method parameters (see params.h). */
#include "params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The items of a "k=v,k2=v2" list: *p advances past one per call. */
typedef struct item {
    const char *s;   /* the item */
    size_t n;        /* its length */
    size_t kl;       /* the key's length (n without '=') */
    const char *val; /* after '=' (NULL without one) */
    size_t vl;
} item;

static bool next_item(const char **p, item *it) {
    if (!*p || !**p) return false;
    const char *end = strchr(*p, ',');
    it->s = *p;
    it->n = end ? (size_t)(end - *p) : strlen(*p);
    const char *eq = memchr(it->s, '=', it->n);
    it->kl = eq ? (size_t)(eq - it->s) : it->n;
    it->val = eq ? eq + 1 : NULL;
    it->vl = eq ? it->n - it->kl - 1 : 0;
    *p = end ? end + 1 : it->s + it->n;
    return true;
}

static bool is_key(const item *it, const char *key) {
    return it->val && it->kl == strlen(key) && strncmp(it->s, key, it->kl) == 0;
}

/* Whether the n-byte word is an item of the comma-separated list. */
static bool in_list(const char *list, const char *word, size_t n) {
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        if (l == n && strncmp(p, word, n) == 0) return true;
        if (!end) break;
        p = end + 1;
    }
    return false;
}

static sc_status read_one(const item *it, const sc_param *sp, const char *who, sc_err *err) {
    char buf[64];
    if (sp->type == SC_PARAM_STR) {
        if (it->vl == 0 || it->vl >= sp->cap || (sp->choices && !in_list(sp->choices, it->val, it->vl)))
            return sc_errf(err, SC_EARG, "%s: parameter %s=%.*s is not %s%s", who, sp->key,
                           (int)(it->vl < 256 ? it->vl : 256), it->val, sp->choices ? "one of " : "a usable value",
                           sp->choices ? sp->choices : "");
        memcpy(sp->out, it->val, it->vl);
        ((char *)sp->out)[it->vl] = '\0';
        return SC_OK;
    }
    if (it->vl == 0 || it->vl >= sizeof buf)
        return sc_errf(err, SC_EARG, "%s: parameter %s has no usable value", who, sp->key);
    memcpy(buf, it->val, it->vl);
    buf[it->vl] = '\0';
    char *end;
    if (sp->type == SC_PARAM_INT) {
        long long v = strtoll(buf, &end, 10);
        if (end == buf || *end || (double)v < sp->lo || (double)v > sp->hi)
            return sc_errf(err, SC_EARG, "%s: parameter %s=%s is not an integer in [%.0f, %.0f]", who, sp->key, buf,
                           sp->lo, sp->hi);
        *(int64_t *)sp->out = v;
        return SC_OK;
    }
    double x = strtod(buf, &end);
    if (end == buf || *end || !isfinite(x) || x < sp->lo || x > sp->hi)
        return sc_errf(err, SC_EARG, "%s: parameter %s=%s is not a number in [%g, %g]", who, sp->key, buf, sp->lo,
                       sp->hi);
    *(double *)sp->out = x;
    return SC_OK;
}

sc_status sc_params_read(const char *params, const sc_param *spec, int n, const char *who, sc_err *err) {
    for (int i = 0; i < n; i++) {
        const sc_param *sp = &spec[i];
        bool seen = false;
        item it;
        for (const char *p = params; next_item(&p, &it);) {
            if (!is_key(&it, sp->key)) continue;
            if (seen) return sc_errf(err, SC_EARG, "%s: parameter '%s' is given twice", who, sp->key);
            seen = true;
            SC_TRY(read_one(&it, sp, who, err));
        }
        if (sp->given) *sp->given = seen;
    }
    return SC_OK;
}

bool sc_params_has(const char *params, const char *key) {
    item it;
    for (const char *p = params; next_item(&p, &it);)
        if (is_key(&it, key)) return true;
    return false;
}

sc_status sc_params_check(const char *params, const char *known, const char *who, sc_err *err) {
    item it;
    for (const char *p = params; next_item(&p, &it);) {
        int kn = (int)(it.kl < 64 ? it.kl : 64);
        if (!it.val || it.kl == 0)
            return sc_errf(err, SC_EARG, "%s: --params item '%.*s' is not key=value", who, (int)(it.n < 64 ? it.n : 64),
                           it.s);
        if (!in_list(known, it.s, it.kl))
            return sc_errf(err, SC_EARG, "%s: unknown key '%.*s' (known: %s)", who, kn, it.s,
                           known && *known ? known : "none");
        item jt;
        for (const char *q = p; next_item(&q, &jt);) /* the same key again */
            if (jt.val && jt.kl == it.kl && strncmp(jt.s, it.s, it.kl) == 0)
                return sc_errf(err, SC_EARG, "%s: parameter '%.*s' is given twice", who, kn, it.s);
    }
    return SC_OK;
}
