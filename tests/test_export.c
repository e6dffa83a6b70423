/* test_export.c - `sparsecal export` (convert/export.c) round trips on
 * stories260K with every method that stores routing data (TEAL's greedy
 * curve included): the safetensors file read back (formats/safetensors.c)
 * holds, bit for bit, the routing sections pack stores from the same
 * calibration and the .scal's own arrays (CLAWS c_j, LaRoSA Q, as f32); the
 * export of an artifact equals the export of its calibration, with a
 * permuted artifact's per-neuron arrays back in the model's order; a folded
 * artifact's rotations are Q^T diag(g) within q8_0's rounding; TEAL's files
 * hold the calibration's histograms and greedy curve. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "export.h"
#include "pack.h"
#include "safetensors.h"
#include "scal.h"
#include "srt_container.h"
#include "teal.h"
#include "testing.h"

static sc_err err;

static const float *st_f32(const sc_st_file *f, const char *name, int64_t d0, int64_t d1) {
    const sc_st_tensor *t = sc_st_find(f, name);
    if (!t || t->dtype != SC_DT_F32 || t->n_dims != (d1 ? 2 : 1) || t->shape[0] != d0 || (d1 && t->shape[1] != d1))
        return NULL;
    return (const float *)(const void *)t->data;
}

/* Section `name` of a container as doubles (f64 or f32), malloc'd; NULL if absent. */
static double *ct_read(srt_container *ct, const char *name, uint64_t *n) {
    int64_t i = srt_container_find(ct, name);
    if (i < 0) return NULL;
    const srt_ct_section *s = srt_container_section_at(ct, (size_t)i);
    void *raw = malloc((size_t)s->raw_size);
    double *out = malloc((size_t)s->n_elements * sizeof *out);
    if (!raw || !out || srt_container_read(ct, (size_t)i, raw, s->raw_size)) {
        free(raw);
        free(out);
        return NULL;
    }
    for (uint64_t k = 0; k < s->n_elements; k++)
        out[k] = s->dtype == SRT_CT_F64 ? ((double *)raw)[k] : s->dtype == SRT_CT_I64 ? (double)((int64_t *)raw)[k]
                                                                                        : ((float *)raw)[k];
    *n = s->n_elements;
    free(raw);
    return out;
}

/* Every tensor of a is in b with the same shape and bytes (skipping names containing `except`); returns the count. */
static int64_t same_tensors(const sc_st_file *a, const sc_st_file *b, const char *except) {
    int64_t n = 0;
    for (size_t i = 0; i < sc_st_count(a); i++) {
        const sc_st_tensor *t = sc_st_get(a, i), *u = sc_st_find(b, t->name);
        if (except && strstr(t->name, except)) continue;
        CHECK_MSG(u && u->n_bytes == t->n_bytes && !memcmp(u->data, t->data, t->n_bytes), "%s", t->name);
        n++;
    }
    return n;
}

/* The stored entries of a ZIP written by sc_torch_save_f32 (local headers in order): entry `want`'s data. */
static const uint8_t *zip_entry(const uint8_t *z, size_t size, const char *want, uint32_t *len) {
    size_t o = 0;
    while (o + 30 <= size && sc_le32(z + o) == 0x04034b50) {
        uint32_t n = sc_le32(z + o + 22), nl = sc_le16(z + o + 26), xl = sc_le16(z + o + 28);
        const uint8_t *data = z + o + 30 + nl + xl;
        if (nl == strlen(want) && !memcmp(z + o + 30, want, nl)) {
            *len = n;
            return (size_t)(data - z) % 64 == 0 ? data : NULL; /* torch's alignment */
        }
        o += 30 + nl + xl + n;
    }
    return NULL;
}

static void check_teal(sc_calib *c, srt_container *scal, int64_t L) {
    const char *dir = sc_tmp_path("teal");
    int64_t files = 0;
    CHECK_MSG(sc_export_teal(c, dir, &files, &err) == SC_OK, "%s", err.msg);
    int64_t curves = 0;
    for (int64_t l = 0; l < L; l++) {
        char name[128];
        uint64_t nc = 0, nr = 0;
        snprintf(name, sizeof name, "teal/layer%lld.curve", (long long)l);
        double *curve = ct_read(scal, name, &nc);
        snprintf(name, sizeof name, "teal/layer%lld.curve_rows", (long long)l);
        double *rows = ct_read(scal, name, &nr);
        CHECK(curve && rows && nr == 1 && rows[0] >= 2);
        /* lookup/layer_L.csv: the calibration's curve, effective sparsity first, printed to read back exactly */
        snprintf(name, sizeof name, "%s/lookup/layer_%lld.csv", dir, (long long)l);
        FILE *f = fopen(name, "r");
        char line[1024];
        CHECK(f && fgets(line, sizeof line, f) && !strcmp(line, "Effective Sparsity,q,k,v,o,gate,up,down\n"));
        int64_t r = 0;
        bool exact = true;
        while (f && curve && rows && fgets(line, sizeof line, f)) {
            char *p = line;
            for (int k = 0; k < SC_TEAL_CURVE_COLS; k++) {
                double v = strtod(p, &p);
                int col = k == 0 ? SC_TEAL_NPROJ : k - 1;
                exact = exact && r < (int64_t)rows[0] && v == curve[r * SC_TEAL_CURVE_COLS + col];
                p += *p == ',';
            }
            r++;
        }
        CHECK_MSG(exact && rows && r == (int64_t)rows[0], "layer %lld: %lld rows", (long long)l, (long long)r);
        curves += r > 0;
        if (f) fclose(f);
        free(curve);
        free(rows);
        /* histograms.pt: counts that sum to the tap's observations, centres ascending, signs as observed */
        for (int b = 0; b < 2; b++) {
            snprintf(name, sizeof name, "%s/histograms/layer-%lld/%s/histograms.pt", dir, (long long)l,
                     b ? "mlp" : "self_attn");
            sc_file_map map = {0};
            CHECK_MSG(sc_map_file(name, &map, &err) == SC_OK, "%s", err.msg);
            for (int h = 0; h < 2 && map.data; h++) {
                uint32_t nb = 0, nb2 = 0;
                char e[96];
                snprintf(e, sizeof e, "archive/data/%d", 2 * h);
                const float *counts = (const float *)(const void *)zip_entry(map.data, map.size, e, &nb);
                snprintf(e, sizeof e, "archive/data/%d", 2 * h + 1);
                const float *centres = (const float *)(const void *)zip_entry(map.data, map.size, e, &nb2);
                snprintf(e, sizeof e, "teal/layer%lld.%s.hist", (long long)l, sc_teal_tap_name(2 * b + h));
                uint64_t nh = 0;
                double *hist = ct_read(scal, e, &nh);
                CHECK(counts && centres && nb == nb2 && nb > 0 && hist && nh == 2 * SC_TEAL_NB);
                if (!counts || !centres || !hist || nb != nb2) {
                    free(hist);
                    continue;
                }
                double total = 0, neg = 0, got = 0, got_neg = 0;
                for (uint64_t k = 0; k < nh; k++) total += hist[k];
                for (uint64_t k = 0; k < SC_TEAL_NB; k++) neg += hist[k];
                bool ascending = true;
                for (uint32_t k = 0; k < nb / 4; k++) {
                    got += counts[k];
                    got_neg += centres[k] < 0 ? counts[k] : 0;
                    ascending = ascending && (k == 0 || centres[k] > centres[k - 1]);
                }
                CHECK_MSG(got == total && got_neg == neg && total > 0, "%s: %g of %g (negative %g of %g)", e, got,
                          total, got_neg, neg);
                CHECK(ascending);
                free(hist);
            }
            sc_unmap_file(&map);
        }
    }
    CHECK_MSG(files == 2 * L + curves && curves == L, "%lld files, %lld curves", (long long)files, (long long)curves);
}

int main(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(2, &m, &tok, &d)) return sc_test_finish();
    const int64_t F = m->cfg.ffn_dim, D = m->cfg.dim, L = m->cfg.n_layers;

    sc_compute_opts co;
    sc_compute_opts_default(&co);
    const char *methods[] = {"claws", "cats", "teal", "cett", "clada", "cwic", "larosa"};
    for (int i = 0; i < 7; i++) co.methods[i] = methods[i];
    co.n_methods = 7; /* TEAL's greedy curve too (teal_greedy defaults to 1) */
    sc_calib *c0 = NULL, *c = NULL;
    const char *scal = sc_tmp_path("c.scal");
    CHECK_MSG(sc_calib_compute(m, &d, &co, &c0, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(c0 && sc_calib_save(c0, m, scal, 3, &err) == SC_OK, "%s", err.msg);
    sc_calib_free(c0);
    CHECK_MSG(sc_calib_open(scal, m, &c, &err) == SC_OK, "%s", err.msg); /* as `export --calib` reads it */
    if (!c) return sc_test_finish();

    /* the calibration's export, and artifacts packed from the same calibration */
    const char *r_st = sc_tmp_path("r.safetensors"), *a_spk = sc_tmp_path("a.spk"), *p_spk = sc_tmp_path("p.spk"),
               *lr_spk = sc_tmp_path("lr.spk");
    sc_export_opts eo = {0.5, NULL, false};
    sc_export_result res;
    CHECK_MSG(sc_export_calib(m, c, &eo, r_st, &res, &err) == SC_OK, "%s", err.msg);
    CHECK(res.layers_rotated == 2 * L);
    sc_pack_result pr;
    sc_pack_opts po = {.layout = "kmi4", .calib = c, .method = "claws", .density = 0.5};
    CHECK_MSG(sc_pack(m, tok, &po, a_spk, &pr, &err) == SC_OK, "%s", err.msg);
    po.permute = true;
    CHECK_MSG(sc_pack(m, tok, &po, p_spk, &pr, &err) == SC_OK, "%s", err.msg);
    sc_pack_opts pl = {.layout = "zigzag", .calib = c, .method = "larosa", .density = 0.5};
    CHECK_MSG(sc_pack(m, tok, &pl, lr_spk, &pr, &err) == SC_OK, "%s", err.msg);
    const char *a_st = sc_tmp_path("a.safetensors"), *p_st = sc_tmp_path("p.safetensors"),
               *lr_st = sc_tmp_path("lr.safetensors");
    CHECK_MSG(sc_export_artifact(a_spk, a_st, &res, &err) == SC_OK, "%s", err.msg);
    CHECK(res.layers_rotated == 0);
    CHECK_MSG(sc_export_artifact(p_spk, p_st, &res, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_export_artifact(lr_spk, lr_st, &res, &err) == SC_OK, "%s", err.msg);
    CHECK(res.layers_rotated == 2 * L);

    sc_st_file *r = NULL, *a = NULL, *p = NULL, *lr = NULL;
    CHECK_MSG(sc_st_open(r_st, &r, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_st_open(a_st, &a, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_st_open(p_st, &p, &err) == SC_OK, "%s", err.msg);
    CHECK_MSG(sc_st_open(lr_st, &lr, &err) == SC_OK, "%s", err.msg);
    srt_container *sc = NULL, *pk = NULL;
    char msg[512];
    CHECK(srt_container_open(scal, SRT_CT_SCAL, &sc, msg, sizeof msg) == SRT_CT_OK);
    CHECK(srt_container_open(p_spk, SRT_CT_SPAK, &pk, msg, sizeof msg) == SRT_CT_OK);
    if (!r || !a || !p || !lr || !sc || !pk) return sc_test_finish();

    /* 1. the artifact's export is the calibration's, tensor for tensor (all but the rotations, which the
     *    artifact keeps folded): claws_c, cats/teal thresholds, teal_curve, cett thresholds, table and column
     *    norms, cwic theta/mean/std */
    int64_t n = same_tensors(a, r, NULL);
    CHECK_MSG(n == L * (7 + 3 * 7) && (size_t)n + 2 * (size_t)L == sc_st_count(r), "%lld of %zu", (long long)n,
              sc_st_count(r));
    /* a permuted artifact: its per-neuron arrays are stored permuted, exported in the model's order */
    const float *stored = NULL;
    {
        const void *q;
        CHECK(srt_container_get_typed(pk, "l1.claws_c", SRT_CT_F32, (uint64_t)F, &q) == SRT_CT_OK);
        stored = q;
    }
    const float *c1 = st_f32(r, "l1.claws_c", F, 0);
    CHECK(stored && c1 && memcmp(stored, c1, (size_t)F * sizeof(float)) != 0);
    n = same_tensors(p, r, NULL);
    CHECK_MSG(n == L * 7 && sc_st_find(p, "l0.gate.cwic_theta") == NULL, "%lld", (long long)n); /* no CWIC permuted */

    /* 2. the calibration's own arrays: CLAWS c_j and LaRoSA Q, as f32 */
    for (int64_t l = 0; l < L; l++) {
        char name[96], sname[96];
        uint64_t k = 0;
        snprintf(name, sizeof name, "l%lld.claws_c", (long long)l);
        snprintf(sname, sizeof sname, "claws/layer%lld.c", (long long)l);
        const float *cj = st_f32(r, name, F, 0);
        double *want = ct_read(sc, sname, &k);
        bool same = cj && want && k == (uint64_t)F;
        for (int64_t j = 0; same && j < F; j++) same = cj[j] == (float)want[j] && cj[j] > 0;
        CHECK_MSG(same, "%s", name);
        free(want);
        for (int w = 0; w < 2; w++) {
            snprintf(name, sizeof name, "l%lld.%s_larosa_Q", (long long)l, w ? "mlp" : "attn");
            snprintf(sname, sizeof sname, "larosa/layer%lld.%s.Q", (long long)l, w ? "mlp" : "attn");
            const float *Q = st_f32(r, name, D, D);
            want = ct_read(sc, sname, &k);
            same = Q && want && k == (uint64_t)(D * D);
            for (int64_t i = 0; same && i < D * D; i++) same = Q[i] == (float)want[i];
            CHECK_MSG(same, "%s", name);
            /* 3. the folded artifact's R = Q^T diag(g), dequantised from q8_0: within half a step of each block's
             *    scale (amax / 127), plus the scale's fp16 rounding (2^-11 relative on 127 steps) */
            snprintf(name, sizeof name, "l%lld.%s_rot", (long long)l, w ? "mlp" : "attn");
            const float *R = st_f32(lr, name, D, D);
            const float *g = w ? sc_test_layer(m, l)->ffn_norm : sc_test_layer(m, l)->attn_norm;
            double worst = 0;
            for (int64_t row = 0; R && want && row < D; row++)
                for (int64_t b0 = 0; b0 < D; b0 += 32) {
                    double amax = 0;
                    for (int64_t i = b0; i < b0 + 32 && i < D; i++) amax = fmax(amax, fabs(want[i * D + row] * g[i]));
                    for (int64_t i = b0; i < b0 + 32 && i < D; i++)
                        worst = fmax(worst, fabs(R[row * D + i] - want[i * D + row] * g[i]) / (amax / 127 + 1e-30));
                }
            CHECK_MSG(R && worst <= 0.5 + 127.0 / 2048 + 1e-3, "%s: worst error %.3f steps", name, worst);
            free(want);
        }
    }

    /* 4. what the metadata says */
    const char *meta = sc_st_meta_find(r, "routing");
    cJSON *rj = meta ? cJSON_Parse(meta) : NULL;
    const cJSON *cett = cJSON_GetObjectItemCaseSensitive(rj, "cett");
    const cJSON *cwic = cJSON_GetObjectItemCaseSensitive(rj, "cwic");
    CHECK(sc_st_meta_find(r, "format") && !strcmp(sc_st_meta_find(r, "format"), "sparsecal-routing"));
    CHECK(!strcmp(sc_st_meta_find(r, "source"), "calibration") && !strcmp(sc_st_meta_find(a, "source"), "artifact"));
    CHECK(!strcmp(sc_st_meta_find(r, "model_id"), c->model_id) && !strcmp(sc_st_meta_find(a, "model_id"), c->model_id));
    CHECK(cJSON_GetObjectItemCaseSensitive(cett, "density") &&
          cJSON_GetObjectItemCaseSensitive(cett, "density")->valuedouble == 0.5);
    const cJSON *apr = cJSON_GetObjectItemCaseSensitive(cwic, "apr");
    CHECK(apr && apr->valuedouble == 2);
    cJSON_Delete(rj);

    /* 5. TEAL's files */
    check_teal(c, sc, L);

    /* 6. the command: the artifact's file again, and refusals with the reason, exit status 2 */
    char cmd[4096], out[4096];
    const char *cli_st = sc_tmp_path("cli.safetensors");
    snprintf(cmd, sizeof cmd, "%s export -m %s -o %s --json", SC_CLI_PATH, a_spk, cli_st);
    char want_n[64];
    snprintf(want_n, sizeof want_n, "\"tensors\":%lld", (long long)(L * (7 + 3 * 7))); /* as in 1. */
    CHECK_MSG(sc_run(cmd, out, sizeof out) == 0 && strstr(out, want_n), "%s", out);
    sc_st_file *cf = NULL;
    CHECK_MSG(sc_st_open(cli_st, &cf, &err) == SC_OK, "%s", err.msg);
    if (cf) CHECK(same_tensors(cf, a, NULL) == L * (7 + 3 * 7));
    sc_st_free(cf);
    static const struct {
        const char *args, *says;
    } bad[] = {{"--calib %s -o x.safetensors", "needs -m MODEL"},
               {"-m %s -o x.safetensors", "is a sparsecal calibration file"},
               {"--calib %s", "nothing to write"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, bad[i].args, scal);
        snprintf(cmd, sizeof cmd, "%s export %s 2>&1", SC_CLI_PATH, args);
        int rc = sc_run(cmd, out, sizeof out);
        CHECK_MSG(rc == 2 && strstr(out, bad[i].says), "export %s: exit %d, %s", args, rc, out);
    }

    srt_container_close(sc);
    srt_container_close(pk);
    sc_st_free(r);
    sc_st_free(a);
    sc_st_free(p);
    sc_st_free(lr);
    sc_calib_free(c);
    sc_tokenizer_free(tok);
    sc_dataset_free(&d);
    sc_model_free(m);
    return sc_test_finish();
}
