/* test_train.c - the recovery-training loop (calib/train.h):
 *  1. AdamW against torch.optim.AdamW's update written out in double;
 *  2. the learning-rate and temperature schedules at the points that define
 *     them;
 *  3. training stories260K for a few steps: the student's KL on its training
 *     sequences falls (at the final temperature, against B = 0), the run is
 *     deterministic for a seed (bit-identical adapters), another seed
 *     differs, a run resumed from its checkpoint ends bit-identical to the
 *     uninterrupted one, and a checkpoint of other options is refused;
 *  4. the adapter directory reads back (safetensors + adapter_config.json)
 *     with exactly the trained values. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "model.h"
#include "safetensors.h"
#include "testing.h"
#include "tokenizer.h"
#include "train.h"

static void test_adamw(void) {
    enum { n = 5, steps = 4 };
    float p[n] = {0.5f, -1.0f, 2.0f, 0.0f, 1e-3f}, m[n] = {0}, v[n] = {0};
    double P[n], M[n] = {0}, Vv[n] = {0};
    for (int i = 0; i < n; i++) P[i] = p[i];
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
    double worst = 0;
    for (int t = 1; t <= steps; t++) {
        float g[n];
        for (int i = 0; i < n; i++) g[i] = (float)(sin(3.0 * t + i) * (i + 1));
        sc_adamw_step(p, g, m, v, n, lr, b1, b2, eps, wd, t);
        for (int i = 0; i < n; i++) { /* torch.optim.AdamW, amsgrad = False */
            P[i] -= lr * wd * P[i];
            M[i] = b1 * M[i] + (1 - b1) * g[i];
            Vv[i] = b2 * Vv[i] + (1 - b2) * (double)g[i] * g[i];
            double mh = M[i] / (1 - pow(b1, t)), vh = Vv[i] / (1 - pow(b2, t));
            P[i] -= lr * mh / (sqrt(vh) + eps);
            worst = fmax(worst, fabs(p[i] - P[i]));
        }
    }
    /* the state is kept in float: each step rounds p, m and v once (relative 6e-8 of values <= 2) */
    printf("AdamW: %d steps, worst difference from the double recurrence %.3g\n", steps, worst);
    CHECK(worst < 1e-6);
    /* a first step moves every coordinate with a gradient by lr (m^ / sqrt(v^) = sign g) */
    float q = 1.0f, mq = 0, vq = 0, gq = -3.0f;
    sc_adamw_step(&q, &gq, &mq, &vq, 1, 0.5, 0.9, 0.999, 1e-8, 0.0, 1);
    CHECK_NEAR(q, 1.5, 1e-6);
}

static void test_schedules(void) {
    sc_train_opts o;
    sc_train_opts_default(&o);
    CHECK(o.lr == 1e-5 && o.beta1 == 0.9 && o.beta2 == 0.999 && o.weight_decay == 0.0 && o.ce_weight == 0.2 &&
          o.tau0 == 1.0 && o.tau1 == 0.01 && o.anneal == 0.6 && o.warmup == 0.025);
    o.steps = 1040; /* warm-up: 26 steps, then 1014 of cosine */
    CHECK_NEAR(sc_train_lr(&o, 0), 1e-5 / 26, 1e-18);
    CHECK_NEAR(sc_train_lr(&o, 12), 13e-5 / 26, 1e-18);
    CHECK_NEAR(sc_train_lr(&o, 25), 1e-5, 1e-18);
    CHECK_NEAR(sc_train_lr(&o, 26), 1e-5, 1e-18); /* cosine from the top */
    CHECK_NEAR(sc_train_lr(&o, 26 + 507), 5e-6, 1e-18);
    CHECK(sc_train_lr(&o, 1039) > 0 && sc_train_lr(&o, 1039) < 1e-9);
    CHECK(sc_train_lr(&o, 400) > sc_train_lr(&o, 401));
    CHECK_NEAR(sc_train_tau(&o, 0), 1.0, 1e-15);
    CHECK_NEAR(sc_train_tau(&o, 312), 1.0 - 0.99 / 2, 1e-15);
    CHECK_NEAR(sc_train_tau(&o, 624), 0.01, 1e-15);
    CHECK_NEAR(sc_train_tau(&o, 1039), 0.01, 1e-15);
    o.warmup = 0.0;
    CHECK_NEAR(sc_train_lr(&o, 0), 1e-5, 1e-18);
    o.steps = 10; /* 2.5% of 10 rounds to 0 steps of warm-up */
    o.warmup = 0.025;
    CHECK_NEAR(sc_train_lr(&o, 0), 1e-5, 1e-18);
}

static bool same(const sc_lora_params *a, const sc_lora_params *b) {
    size_t na = (size_t)(a->n_layers * a->rank * a->ffn), nb = (size_t)(a->n_layers * a->dim * a->rank);
    return memcmp(a->A, b->A, na * sizeof(float)) == 0 && memcmp(a->B, b->B, nb * sizeof(float)) == 0;
}

/* KL(student || teacher) per scored token of the CATS student at tau 0.01, density 0.5, over d's sequences cut at T */
static double student_kl(const sc_model *m, const sc_dataset *d, const sc_lora_params *p, int64_t T) {
    sc_err err;
    sc_lora_student *s;
    if (sc_lora_student_create(m, T, p, NULL, 0.5, &s, &err)) return NAN;
    sc_lora_student_set_tau(s, 0.01);
    double kl = 0;
    int64_t n = 0;
    for (size_t i = 0; i < d->n_seqs; i++) {
        sc_window_loss wl;
        if (sc_lora_student_window(s, d->seqs[i].ids, d->seqs[i].n < (size_t)T ? (int64_t)d->seqs[i].n : T, 0.2, NULL,
                                   NULL, &wl, &err))
            kl = NAN;
        kl += wl.kl;
        n += wl.scored;
    }
    sc_lora_student_free(s);
    return kl / (double)n;
}

/* trains a fresh rank-8 adapter with o; false on failure */
static bool train(const sc_model *m, const sc_dataset *d, const sc_train_opts *o, sc_lora_params *p, sc_train_result *r) {
    sc_err err;
    if (sc_lora_params_init(p, &m->cfg, 8, 8, o->seed, &err)) return false;
    sc_status st = sc_train_lora(m, d, o, p, r, &err);
    if (st) fprintf(stderr, "train: %s\n", err.msg);
    return st == SC_OK;
}

static void test_loop(const sc_model *m, const sc_dataset *d) {
    sc_err err;
    sc_train_opts o;
    sc_train_opts_default(&o);
    o.method = "cats-lora";
    o.steps = 24;
    o.batch = 2;
    o.grad_accum = 2;
    o.seq_len = 64;
    o.lr = 1e-2;
    o.seed = 7;
    sc_lora_params p1, p2, p3;
    sc_train_result r1, r2, r3;
    CHECK(train(m, d, &o, &p1, &r1));
    CHECK(r1.steps_run == 24 && r1.first_step == 0 && r1.train_seqs == 6);
    /* the student at the final temperature, before (B = 0: the sparsified model itself) and after */
    sc_lora_params p0;
    CHECK(sc_lora_params_init(&p0, &m->cfg, 8, 8, o.seed, &err) == SC_OK);
    double before = student_kl(m, d, &p0, 64), after = student_kl(m, d, &p1, 64);
    sc_lora_params_free(&p0);
    printf("training: KL per token on the training sequences at tau %g: %.5f before, %.5f after %d steps\n", o.tau1,
           before, after, (int)o.steps);
    CHECK(after < 0.7 * before);
    CHECK(r1.history[0].tau == 1.0 && fabs(r1.history[23].tau - o.tau1) < 1e-15);
    int64_t tok = 0;
    for (int s = 0; s < 24; s++) tok += r1.history[s].tokens;
    CHECK(tok == r1.tokens && tok > 0);
    /* deterministic for a seed; another seed differs */
    CHECK(train(m, d, &o, &p2, &r2));
    CHECK(same(&p1, &p2));
    CHECK(memcmp(r1.history, r2.history, 24 * sizeof *r1.history) == 0);
    sc_lora_params_free(&p2);
    sc_train_result_free(&r2);
    o.seed = 8;
    CHECK(train(m, d, &o, &p2, &r2));
    CHECK(!same(&p1, &p2));
    sc_lora_params_free(&p2);
    sc_train_result_free(&r2);
    o.seed = 7;
    /* checkpoints every 10 steps (at 10 and 20); resuming the last one finishes the run exactly */
    const char *ck = sc_tmp_path("train.ckpt");
    o.checkpoint_every = 10;
    o.checkpoint_path = ck;
    CHECK(train(m, d, &o, &p2, &r2));
    CHECK(same(&p1, &p2));
    sc_lora_params_free(&p2);
    sc_train_result_free(&r2);
    o.checkpoint_every = 0;
    o.checkpoint_path = NULL;
    o.resume_path = ck;
    CHECK(train(m, d, &o, &p3, &r3));
    CHECK(r3.first_step == 20 && r3.steps_run == 4);
    CHECK_MSG(same(&p1, &p3), "the resumed run's adapter differs from the uninterrupted one");
    CHECK(memcmp(r1.history, r3.history, 24 * sizeof *r1.history) == 0);
    sc_lora_params_free(&p3);
    sc_train_result_free(&r3);
    /* a checkpoint of another run is refused, naming both */
    o.lr = 1e-3;
    CHECK(sc_lora_params_init(&p3, &m->cfg, 8, 8, o.seed, &err) == SC_OK);
    CHECK(sc_train_lora(m, d, &o, &p3, &r3, &err) == SC_EARG && strstr(err.msg, "another run"));
    sc_lora_params_free(&p3);
    o.lr = 1e-2;
    o.resume_path = NULL;
    /* bad options and data */
    o.batch = 0;
    CHECK(sc_lora_params_init(&p3, &m->cfg, 8, 8, 1, &err) == SC_OK);
    CHECK(sc_train_lora(m, d, &o, &p3, &r3, &err) == SC_EARG);
    o.batch = 2;
    o.density = 0;
    CHECK(sc_train_lora(m, d, &o, &p3, &r3, &err) == SC_EARG);
    o.density = 0.5;
    sc_dataset empty = {0};
    CHECK(sc_train_lora(m, &empty, &o, &p3, &r3, &err) == SC_EARG && strstr(err.msg, "no sequence"));
    sc_lora_params_free(&p3);

    /* 4. the adapter directory */
    const char *dir = sc_tmp_path("adapter");
    sc_st_meta meta[1] = {{"sparsecal.method", "cats-lora"}};
    CHECK(sc_lora_params_save(&p1, dir, "stories260K.bin", meta, 1, &err) == SC_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", dir);
    sc_st_file *f;
    CHECK(sc_st_open(path, &f, &err) == SC_OK);
    bool exact = sc_st_count(f) == 10 && !strcmp(sc_st_meta_find(f, "sparsecal.method"), "cats-lora");
    for (int64_t l = 0; l < 5; l++) {
        char name[128];
        snprintf(name, sizeof name, "base_model.model.model.layers.%lld.mlp.down_proj.lora_A.weight", (long long)l);
        const sc_st_tensor *a = sc_st_find(f, name);
        snprintf(name, sizeof name, "base_model.model.model.layers.%lld.mlp.down_proj.lora_B.weight", (long long)l);
        const sc_st_tensor *b = sc_st_find(f, name);
        exact = exact && a && b && a->shape[0] == 8 && a->shape[1] == 172 && b->shape[0] == 64 && b->shape[1] == 8 &&
                memcmp(a->data, p1.A + l * 8 * 172, 8 * 172 * 4) == 0 && memcmp(b->data, p1.B + l * 64 * 8, 64 * 8 * 4) == 0;
    }
    CHECK_MSG(exact, "the adapter file does not hold the trained A and B under PEFT's names");
    sc_st_free(f);
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    char *text;
    size_t len;
    CHECK(sc_read_file(path, 1 << 20, &text, &len, &err) == SC_OK);
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *tm = cJSON_GetObjectItem(j, "target_modules");
    CHECK(j && cJSON_GetObjectItem(j, "r")->valuedouble == 8 && cJSON_GetObjectItem(j, "lora_alpha")->valuedouble == 8 &&
          !strcmp(cJSON_GetObjectItem(j, "peft_type")->valuestring, "LORA") && cJSON_GetArraySize(tm) == 1 &&
          !strcmp(cJSON_GetArrayItem(tm, 0)->valuestring, "down_proj"));
    cJSON_Delete(j);
    sc_lora_params_free(&p1);
    sc_train_result_free(&r1);
}

int main(void) {
    test_adamw();
    test_schedules();
    sc_model *m;
    sc_tokenizer *tok;
    sc_dataset d;
    if (!sc_test_stories(6, &m, &tok, &d)) return sc_test_finish();
    test_loop(m, &d);
    sc_dataset_free(&d);
    sc_tokenizer_free(tok);
    sc_model_free(m);
    return sc_test_finish();
}
