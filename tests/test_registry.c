/* test_registry.c - the routing registries and the typed parameter parser.
 *  - every entry of the runtime's router registry (kernels/srt_method.h) and
 *    of the toolchain's (calib/route_method.h) round-trips name <-> entry, the
 *    runtime routers are exactly the toolchain's runtime entries, and the name
 *    lists printed in --help and errors are the tables';
 *  - the refusal rule: each need missing gives that router's own line, folded
 *    rotations refuse every router calibrated on the unrotated model;
 *  - artifacts packed from stories260K with all routing data, with none, and
 *    with CETT's but not CLADA's: srt_model_data says what each holds, every
 *    router lacking a section is refused with the registry's line (the library,
 *    and `run --score` on the command line), the others run;
 *  - --params: typed reads (number, integer, string with choices), ranges,
 *    defaults kept for absent keys, a key given twice, unknown keys naming the
 *    known ones. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "engine.h"
#include "pack.h"
#include "params.h"
#include "route_method.h"
#include "srt_model.h"
#include "testing.h"

static sc_err err;
static char out[1 << 16];

static const unsigned all_data = SRT_DATA_ROTATIONS | SRT_DATA_CLAWS | SRT_DATA_CATS_TABLE | SRT_DATA_TEAL_TABLE |
                                 SRT_DATA_CETT | SRT_DATA_CLADA | SRT_DATA_CETT_TABLE | SRT_DATA_TEAL_CURVE |
                                 SRT_DATA_CWIC;

static void tables(void) {
    /* runtime: id <-> entry <-> name */
    for (int id = 0; id < SRT_METHOD_COUNT; id++) {
        const srt_method_info *mi = srt_method_get(id);
        CHECK_MSG(mi && (int)mi->id == id && srt_method_find(mi->name) == mi, "runtime id %d", id);
        for (int k = 0; k < id; k++) CHECK(strcmp(srt_method_get(k)->name, mi->name) != 0);
        CHECK_MSG((mi->density == SRT_DENSITY_NONE) == (mi->default_density == 1.0) && mi->default_density > 0 &&
                      mi->default_density <= 1,
                  "%s: default density %g", mi->name, mi->default_density);
        CHECK_MSG(!mi->needs == !mi->missing, "%s: a refusal line exactly when it needs data", mi->name);
        /* a fitted router reaches any density through its table when the artifact holds it, and only then */
        CHECK_MSG(!mi->any_density || mi->density == SRT_DENSITY_FITTED, "%s: a table for a non-fitted router", mi->name);
        CHECK(srt_method_density(mi, 0) == mi->density);
        CHECK(srt_method_density(mi, all_data) == (mi->any_density ? SRT_DENSITY_TABLE : mi->density));
        /* the toolchain entry of the same name runs it */
        const sc_route_method *rm = sc_route_method_find(mi->name);
        CHECK_MSG(rm && rm->runtime == id, "%s has no toolchain entry running it", mi->name);
    }
    CHECK(!srt_method_get(-1) && !srt_method_get(SRT_METHOD_COUNT));
    CHECK(!srt_method_find("nope") && !srt_method_find(NULL));
    /* srt_method_names lists the table in id order */
    char want[512] = "";
    for (int id = 0; id < SRT_METHOD_COUNT; id++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", id ? ", " : "", srt_method_get(id)->name);
    CHECK_MSG(!strcmp(srt_method_names(), want), "'%s' vs '%s'", srt_method_names(), want);

    /* toolchain: entry <-> name; runtime entries are the runtime's routers, the runtime-only list matches */
    int n = 0, n_rt = 0;
    for (const sc_route_method *const *p = sc_route_methods(); *p; p++, n++) {
        const sc_route_method *rm = *p;
        CHECK_MSG(sc_route_method_find(rm->name) == rm, "%s", rm->name);
        if (rm->runtime >= 0) {
            n_rt++;
            const srt_method_info *mi = srt_method_get(rm->runtime);
            CHECK_MSG(mi && !strcmp(mi->name, rm->name), "%s runs as runtime id %d", rm->name, rm->runtime);
        }
        CHECK_MSG(rm->eval != NULL, "%s: no eval installer", rm->name);
        /* its own keys pass the command's check; a key it does not take is refused */
        CHECK_MSG(sc_params_check("", rm->eval_keys, "t", &err) == SC_OK, "%s", rm->name);
        CHECK(sc_params_check("zzz=1", rm->eval_keys, "t", &err) == SC_EARG && strstr(err.msg, "unknown key 'zzz'"));
    }
    CHECK_MSG(n_rt == SRT_METHOD_COUNT && n >= n_rt, "%d runtime entries of %d", n_rt, n);
    char names[512];
    sc_route_method_names(names, sizeof names, true); /* the runtime's names (pack --method), in the table's order */
    int listed = 0;
    for (const char *p = names; p; p = strchr(p, ',') ? strchr(p, ',') + 2 : NULL) {
        size_t len = strcspn(p, ",");
        char nm[32];
        snprintf(nm, sizeof nm, "%.*s", (int)len, p);
        CHECK_MSG(srt_method_find(nm) != NULL, "'%s' in '%s'", nm, names);
        listed++;
    }
    CHECK_MSG(listed == SRT_METHOD_COUNT, "'%s'", names);
    CHECK(strstr(sc_route_method_names(names, sizeof names, false), "teal-greedy") != NULL);
    char small[8];
    CHECK(strlen(sc_route_method_names(small, sizeof small, false)) < sizeof small); /* truncates, terminated */
    CHECK(sc_route_method_find("nope") == NULL && sc_route_method_find(NULL) == NULL);
    char need[64];
    CHECK(!strcmp(sc_route_method_needs(sc_route_method_find("clada"), need, sizeof need), "cett and clada"));
    CHECK(!strcmp(sc_route_method_needs(sc_route_method_find("cats"), need, sizeof need), ""));
    CHECK(sc_route_method_calibrated(sc_route_method_find("cats"), NULL));
    CHECK(!sc_route_method_calibrated(sc_route_method_find("claws"), NULL));

    /* the refusal rule on every subset of the data bits that matters */
    for (int id = 0; id < SRT_METHOD_COUNT; id++) {
        const srt_method_info *mi = srt_method_get(id);
        unsigned full = all_data & ~(mi->rotated ? 0u : (unsigned)SRT_DATA_ROTATIONS);
        CHECK_MSG(srt_method_refusal(mi, full) == NULL, "%s refused with everything it needs", mi->name);
        for (unsigned bit = 1; bit & all_data; bit <<= 1) {
            if (!(mi->needs & bit)) continue;
            CHECK_MSG(srt_method_refusal(mi, full & ~bit) == mi->missing, "%s without data bit %u", mi->name, bit);
        }
        const char *rot = srt_method_refusal(mi, all_data);
        CHECK_MSG(mi->rotated ? rot == NULL : rot && strstr(rot, "rotations are folded"), "%s on a folded artifact",
                  mi->name);
    }
    CHECK(srt_method_refusal(NULL, all_data) != NULL);
}

static void params(void) {
    double x = 7, y = 8;
    int64_t k = 3;
    char s[8] = "def";
    bool gx = true, gs = true;
    const sc_param spec[] = {
        {"x", SC_PARAM_NUM, 0, 1, NULL, &x, 0, &gx},
        {"y", SC_PARAM_NUM, -5, 5, NULL, &y, 0, NULL},
        {"k", SC_PARAM_INT, 1, 100, NULL, &k, 0, NULL},
        {"s", SC_PARAM_STR, 0, 0, "ab,cd", s, sizeof s, &gs},
    };
    CHECK(sc_params_read(NULL, spec, 4, "t", &err) == SC_OK && x == 7 && y == 8 && k == 3 && !strcmp(s, "def") && !gx &&
          !gs);
    CHECK(sc_params_read("other=zz,y=-2.5,k=42,s=cd,x=0.25", spec, 4, "t", &err) == SC_OK && x == 0.25 && y == -2.5 &&
          k == 42 && !strcmp(s, "cd") && gx && gs);
    const struct {
        const char *params, *msg;
    } bad[] = {
        {"x=1.5", "parameter x=1.5 is not a number in [0, 1]"},
        {"x=nan", "parameter x=nan is not a number"},
        {"x=", "parameter x has no usable value"},
        {"k=4.5", "parameter k=4.5 is not an integer in [1, 100]"},
        {"k=0", "is not an integer in [1, 100]"},
        {"s=abc", "parameter s=abc is not one of ab,cd"},
        {"s=", "parameter s= is not one of"},
        {"y=1,y=2", "parameter 'y' is given twice"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sc_status st = sc_params_read(bad[i].params, spec, 4, "t", &err);
        CHECK_MSG(st == SC_EARG && strstr(err.msg, bad[i].msg) && !strncmp(err.msg, "t: ", 3), "%s: '%s'",
                  bad[i].params, err.msg);
    }
    /* a string without choices takes anything that fits */
    char path[6] = "";
    const sc_param sp = {"p", SC_PARAM_STR, 0, 0, NULL, path, sizeof path, NULL};
    CHECK(sc_params_read("p=a/b=c", &sp, 1, "t", &err) == SC_OK && !strcmp(path, "a/b=c"));
    CHECK(sc_params_read("p=toolong", &sp, 1, "t", &err) == SC_EARG);
    /* the command's check: the union of its readers' keys */
    CHECK(sc_params_check("a=1,b=2", "a,b,c", "--params", &err) == SC_OK);
    CHECK(sc_params_check("a=1,bb=2", "a,b", "--params", &err) == SC_EARG &&
          !strcmp(err.msg, "--params: unknown key 'bb' (known: a,b)"));
    CHECK(sc_params_check("a=1,a=2", "a", "--params", &err) == SC_EARG && strstr(err.msg, "given twice"));
    CHECK(sc_params_check("a", "a", "--params", &err) == SC_EARG && strstr(err.msg, "not key=value"));
    CHECK(sc_params_check("x=1", "", "--params", &err) == SC_EARG && strstr(err.msg, "(known: none)"));
    CHECK(sc_params_has("u=1,v=2", "v") && !sc_params_has("u=1,vv=2", "v") && !sc_params_has(NULL, "v"));
}

/* Packs an f32 artifact of m with calibration c (may be NULL) and opens it. */
static srt_model *packed(const sc_model *m, const sc_tokenizer *tok, const sc_calib *c, const char *name,
                         srt_ctx *ctx) {
    const char *p = sc_tmp_path(name);
    sc_pack_opts po = {.layout = "f32", .calib = c, .density = 1.0};
    sc_pack_result pr;
    CHECK_MSG(sc_pack(m, tok, &po, p, &pr, &err) == SC_OK, "%s", err.msg);
    srt_model_opts mo = {0, ctx, SRT_KV_F32};
    srt_model *rt = NULL;
    char emsg[512];
    CHECK_MSG(srt_model_open(p, &mo, &rt, emsg, sizeof emsg) == SRT_CT_OK, "%s", emsg);
    return rt;
}

/* Every router of the registry on rt: refused with the registry's line exactly when it lacks its data. */
static void routes(srt_model *rt, unsigned want_data, const char *what) {
    if (!rt) return;
    CHECK_MSG(srt_model_data(rt) == want_data, "%s: data %#x, want %#x", what, srt_model_data(rt), want_data);
    for (int id = 0; id < SRT_METHOD_COUNT; id++) {
        const srt_method_info *mi = srt_method_get(id);
        const char *why = srt_model_method_missing(rt, mi->name);
        bool lacks = (mi->needs & ~want_data) != 0;
        CHECK_MSG(lacks ? why == mi->missing : why == NULL, "%s: %s: '%s'", what, mi->name, why ? why : "(runs)");
        srt_status st = srt_model_set_method(rt, mi->name, 0.5);
        CHECK_MSG(st == (lacks ? SRT_ENOTSUP : SRT_OK), "%s: %s: %s", what, mi->name, srt_status_str(st));
        CHECK(srt_model_set_method_id(rt, mi->id, 0.5) == st);
        if (st == SRT_OK) CHECK_MSG(!strcmp(srt_model_method(rt), mi->name), "%s: %s", what, srt_model_method(rt));
    }
    CHECK(srt_model_set_method_id(rt, SRT_METHOD_COUNT, 0.5) == SRT_EINVAL);
    CHECK(srt_model_set_method(rt, "nope", 0.5) == SRT_EINVAL);
    CHECK(strstr(srt_model_method_missing(rt, "nope"), srt_method_names()) != NULL);
}

static void artifacts(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(12, &m, &tok, &d)) return;
    sc_compute_opts co;
    sc_compute_opts_default(&co);
    const char *all[] = {"claws", "cats", "teal", "cett", "clada"};
    for (int i = 0; i < 5; i++) co.methods[i] = all[i];
    co.n_methods = 5;
    co.params = "teal_greedy=0";
    sc_calib *full = NULL, *cett_only = NULL;
    CHECK_MSG(sc_calib_compute(m, &d, &co, &full, &err) == SC_OK, "%s", err.msg);
    co.methods[0] = "cett";
    co.n_methods = 1;
    co.params = NULL;
    CHECK_MSG(sc_calib_compute(m, &d, &co, &cett_only, &err) == SC_OK, "%s", err.msg);
    srt_ctx *ctx;
    CHECK(srt_ctx_create(&ctx, SRT_ISA_AUTO, 1) == SRT_OK);
    /* teal without its greedy curve (teal_greedy=0) and no cwic: teal-greedy and cwic are refused */
    const unsigned unrotated = all_data & ~(unsigned)(SRT_DATA_ROTATIONS | SRT_DATA_TEAL_CURVE | SRT_DATA_CWIC);
    srt_model *rt = packed(m, tok, full, "reg_full.spk", ctx);
    routes(rt, unrotated, "all routing data");
    srt_model_close(rt);
    rt = packed(m, tok, cett_only, "reg_cett.spk", ctx);
    routes(rt, SRT_DATA_CETT | SRT_DATA_CETT_TABLE, "cett without clada");
    srt_model_close(rt);
    rt = packed(m, tok, NULL, "reg_plain.spk", ctx);
    routes(rt, 0, "no routing data");
    srt_model_close(rt);
    srt_ctx_free(ctx);

    /* the command line says the same line: run --score on the artifact without routing data */
    const char *ids = sc_tmp_path("reg_ids.txt");
    FILE *f = fopen(ids, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("1 2 3 4 5\n", f);
        fclose(f);
    }
    for (int id = 0; id < SRT_METHOD_COUNT; id++) {
        const srt_method_info *mi = srt_method_get(id);
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "%s run --artifact %s --tokens %s --score --method %s --density 0.5 2>&1",
                 SC_CLI_PATH, sc_tmp_path("reg_plain.spk"), ids, mi->name);
        int rc = sc_run(cmd, out, sizeof out);
        if (mi->needs)
            CHECK_MSG(rc != 0 && strstr(out, mi->missing) && strstr(out, "cannot route with"), "%s: exit %d: %s",
                      mi->name, rc, out);
        else
            CHECK_MSG(rc == 0 && strstr(out, "ppl"), "%s: exit %d: %s", mi->name, rc, out);
    }
    sc_calib_free(full);
    sc_calib_free(cett_only);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
}

int main(void) {
    tables();
    params();
    artifacts();
    return sc_test_finish();
}
