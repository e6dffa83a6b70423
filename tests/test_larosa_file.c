/* test_larosa_file.c - LaRoSA rotations through the calibration file, one
 * layer at a time (larosa_rot.h), on stories260K:
 *  - a file opened for reading (sc_calib_open) holds no moment in memory and
 *    gives every rotation bit for bit equal to the one solved in memory
 *    (format 2 stores eig and Q as written), so does a fully loaded file;
 *  - a checkpoint stores no rotation: solved from the moment read back;
 *  - a format-1 file (square moments, stale rotations) still loads: its
 *    moments are packed as read and the rotations recomputed, bit for bit;
 *  - rotations held for every layer or read again per layer are the same,
 *    and eval through the opened file equals eval on the computed one;
 *  - an opened calibration is refused by save and merge. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "larosa.h"
#include "larosa_rot.h"
#include "scal.h"
#include "sparse_eval.h"
#include "srt_container.h"
#include "testing.h"

static sc_err err;

/* Every rotation of a equals b's bit for bit (count, eig, Q). */
static void same_rotations(const sc_calib *a, const sc_calib *b, int64_t L, const char *what) {
    sc_larosa_rot x = {0}, y = {0};
    int n = 0, differ = 0;
    for (int64_t l = 0; l < L; l++)
        for (int w = 0; w < 2; w++) {
            sc_status sa = sc_larosa_rotation(a, l, w, &x, &err);
            CHECK_MSG(sa == SC_OK, "%s: %s", what, err.msg);
            sc_status sb = sc_larosa_rotation(b, l, w, &y, &err);
            CHECK_MSG(sb == SC_OK, "%s: %s", what, err.msg);
            if (sa || sb) continue;
            n++;
            differ += x.count != y.count || memcmp(x.eig, y.eig, (size_t)x.D * sizeof(double)) != 0 ||
                      memcmp(x.Q, y.Q, (size_t)(x.D * x.D) * sizeof(double)) != 0;
        }
    printf("%s: %d rotations, %d differ\n", what, n, differ);
    CHECK(n == 2 * L && differ == 0);
    sc_larosa_rot_free(&x);
    sc_larosa_rot_free(&y);
}

/* Rewrites a format-2 file as format 1 wrote it: moments [D, D] row-major
 * with the upper triangle set, rotations stale (zero), format_version 1. */
static void write_format1(const char *src, const char *dst, int64_t D) {
    char msg[512];
    srt_container *c = NULL;
    srt_writer *w = NULL;
    CHECK(srt_container_open(src, SRT_CT_SCAL, &c, msg, sizeof msg) == SRT_CT_OK);
    CHECK(srt_writer_create(dst, SRT_CT_SCAL, &w, msg, sizeof msg) == SRT_CT_OK);
    if (!c || !w) return;
    size_t len;
    const char *man = srt_container_manifest_text(c, &len);
    char *m1 = malloc(len + 1);
    memcpy(m1, man, len);
    m1[len] = '\0';
    char *v = strstr(m1, "\"format_version\":2");
    CHECK(v != NULL);
    if (v) v[strlen("\"format_version\":")] = '1';
    CHECK(srt_writer_set_manifest(w, m1, len) == SRT_CT_OK);
    free(m1);
    double *full = calloc((size_t)(D * D), sizeof *full);
    for (size_t i = 0; i < srt_container_section_count(c); i++) {
        const srt_ct_section *s = srt_container_section_at(c, i);
        const void *data;
        CHECK(srt_container_data(c, i, &data, NULL) == SRT_CT_OK);
        size_t n = strlen(s->name);
        bool moment = !strncmp(s->name, "larosa/", 7) && n > 2 && !strcmp(s->name + n - 2, ".H");
        bool rot = !strncmp(s->name, "larosa/", 7) && n > 2 && !strcmp(s->name + n - 2, ".Q");
        if (moment) {
            const double *hp = data;
            memset(full, 0, (size_t)(D * D) * sizeof *full);
            for (int64_t j = 0; j < D; j++)
                for (int64_t r = 0; r <= j; r++) full[r * D + j] = hp[r + j * (j + 1) / 2];
            uint64_t dims[2] = {(uint64_t)D, (uint64_t)D};
            CHECK(srt_writer_add(w, s->name, SRT_CT_F64, 2, dims, full, (size_t)(D * D) * sizeof *full, 3) == SRT_CT_OK);
        } else {
            void *z = rot ? calloc(1, (size_t)s->raw_size) : NULL; /* format 1's checkpoints held stale ones */
            CHECK(srt_writer_add(w, s->name, s->dtype, s->ndim, s->dims, rot ? z : data, (size_t)s->raw_size, 3) ==
                  SRT_CT_OK);
            free(z);
        }
    }
    free(full);
    CHECK(srt_writer_finish(w) == SRT_CT_OK);
    srt_writer_free(w);
    srt_container_close(c);
}

int main(void) {
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(60, &m, &tok, &d)) return sc_test_finish();
    sc_dataset cal = {d.seqs, 40, 0}, ev = {d.seqs + 40, 20, 0};
    int64_t L = m->cfg.n_layers, D = m->cfg.dim;

    sc_compute_opts co;
    sc_compute_opts_default(&co);
    co.methods[0] = "cats";
    co.methods[1] = "larosa";
    co.n_methods = 2;
    co.seq_len = 128;
    sc_calib *one = NULL, *op = NULL, *full = NULL, *ck = NULL, *f1 = NULL, *f1full = NULL;
    CHECK_MSG(sc_calib_compute(m, &cal, &co, &one, &err) == SC_OK, "%s", err.msg);
    const char *p2 = sc_tmp_path("lr_v2.scal"), *pc = sc_tmp_path("lr.ckpt"), *p1 = sc_tmp_path("lr_v1.scal");
    CHECK(sc_calib_save(one, m, p2, 3, &err) == SC_OK);

    /* 1. opened for reading: no moment in memory, rotations read back = solved in memory */
    CHECK_MSG(sc_calib_open(p2, m, &op, &err) == SC_OK, "%s", err.msg);
    sc_array h;
    CHECK(sc_larosa_array(sc_calib_state(op, "larosa"), 0, SC_LAROSA_ATTN, SC_LAROSA_ARR_H, &h) && !h.data);
    same_rotations(one, op, L, "opened file vs in memory");
    CHECK_MSG(sc_calib_load(p2, m, &full, &err) == SC_OK, "%s", err.msg);
    same_rotations(one, full, L, "loaded file vs in memory");

    /* 2. a checkpoint holds no rotation; solved from the moment read from the file */
    {
        CHECK(sc_calib_save_checkpoint(one, m, pc, one->n_seqs, one->n_seqs + 1, &err) == SC_OK);
        char msg[256];
        srt_container *c = NULL;
        CHECK(srt_container_open(pc, SRT_CT_SCAL, &c, msg, sizeof msg) == SRT_CT_OK);
        CHECK(srt_container_find(c, "larosa/layer0.attn.Q") < 0 && srt_container_find(c, "larosa/layer0.attn.H") >= 0);
        srt_container_close(c);
        CHECK_MSG(sc_calib_open(pc, m, &ck, &err) == SC_OK, "%s", err.msg);
        same_rotations(one, ck, L, "checkpoint vs in memory");
    }

    /* 3. format 1: square moments packed as read, stale rotations ignored */
    write_format1(p2, p1, D);
    CHECK_MSG(sc_calib_open(p1, m, &f1, &err) == SC_OK, "%s", err.msg);
    same_rotations(one, f1, L, "format 1 opened vs in memory");
    CHECK_MSG(sc_calib_load(p1, m, &f1full, &err) == SC_OK, "%s", err.msg);
    for (int64_t l = 0; f1full && l < L; l++)
        for (int w = 0; w < 2; w++) {
            sc_array x, y;
            sc_larosa_array(sc_calib_state(f1full, "larosa"), l, w, SC_LAROSA_ARR_H, &x);
            sc_larosa_array(sc_calib_state(one, "larosa"), l, w, SC_LAROSA_ARR_H, &y);
            CHECK(x.data && y.data && memcmp(x.data, y.data, (size_t)sc_larosa_packed(D) * sizeof(double)) == 0);
        }

    /* 4. held for every layer or read again per layer: the same float rotations */
    {
        sc_larosa_rots *all = NULL, *each = NULL;
        CHECK(sc_larosa_rots_create(op, 3u, true, (size_t)1 << 30, &all, &err) == SC_OK);
        CHECK(sc_larosa_rots_create(op, 3u, true, 0, &each, &err) == SC_OK);
        CHECK(all && each && sc_larosa_rots_resident(all) && !sc_larosa_rots_resident(each));
        int differ = 0;
        for (int64_t l = 0; all && each && l < L; l++)
            for (int w = 1; w >= 0; w--) {
                const void *qa, *qb;
                CHECK(sc_larosa_rots_get(all, l, w, &qa, &err) == SC_OK && sc_larosa_rots_get(each, l, w, &qb, &err) == SC_OK);
                differ += !qa || !qb || memcmp(qa, qb, (size_t)(D * D) * sizeof(float)) != 0;
            }
        CHECK(differ == 0);
        sc_larosa_rots_free(all);
        sc_larosa_rots_free(each);
    }
    /* eval through the opened file equals eval on the calibration computed in memory */
    {
        sc_sparse_eval_opts eo = {"larosa", 0.5, one, 128, false, NULL, NULL};
        sc_sparse_eval_result r0, r1;
        CHECK_MSG(sc_eval_sparse(m, &ev, &eo, &r0, &err) == SC_OK, "%s", err.msg);
        eo.calib = op;
        CHECK_MSG(sc_eval_sparse(m, &ev, &eo, &r1, &err) == SC_OK, "%s", err.msg);
        printf("eval larosa d=0.5: in memory nll %.17g, opened file %.17g\n", r0.ppl.nll_sum, r1.ppl.nll_sum);
        CHECK(r0.ppl.nll_sum == r1.ppl.nll_sum && r0.ppl.n_scored == r1.ppl.n_scored);
    }

    /* 5. an opened calibration holds no sums: saving or merging it is refused */
    CHECK(sc_calib_save(op, m, sc_tmp_path("lr_refused.scal"), 3, &err) == SC_EARG && strstr(err.msg, "not in memory"));
    printf("save of an opened file refused: %s\n", err.msg);
    CHECK(full && sc_calib_merge(full, op, &err) != SC_OK);

    sc_calib_free(one);
    sc_calib_free(op);
    sc_calib_free(full);
    sc_calib_free(ck);
    sc_calib_free(f1);
    sc_calib_free(f1full);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
