/* train.c - the recovery-training loop (train.h): the order of sequences,
 * the schedules, AdamW, progress and checkpoints around
 * sc_lora_student_window (train_lora.c). */
#define _POSIX_C_SOURCE 200809L
#define XXH_INLINE_ALL
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "engine.h"
#include "train.h"

static const sc_train_method trainers[] = {
    {"claws-lora", "claws", true, false},
    {"cats-lora", "cats", false, false},
    {"cwic", "cwic", false, true},
};

const sc_train_method *sc_train_method_find(const char *name) {
    for (size_t i = 0; name && i < sizeof trainers / sizeof trainers[0]; i++)
        if (strcmp(trainers[i].name, name) == 0) return &trainers[i];
    return NULL;
}

const char *sc_train_method_names(void) {
    static char names[128];
    if (!names[0])
        for (size_t i = 0, n = sizeof trainers / sizeof trainers[0]; i < n; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? (i + 1 < n ? ", " : " or ") : "",
                     trainers[i].name);
    return names;
}

void sc_train_opts_default(sc_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->method = "claws-lora";
    o->density = 0.5;
    o->steps = 2500;
    o->batch = 8;
    o->grad_accum = 1;
    o->lr = 1e-5;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->adam_eps = 1e-8;
    o->warmup = 0.025;
    o->tau0 = 1.0;
    o->tau1 = 0.01;
    o->anneal = 0.6;
    o->ce_weight = 0.2;
    o->seed = 1;
    o->cwic_apr = 2.0;
    o->cwic_apr_warmup = 0.5;
    o->cwic_alpha_eps = 0.1;
    o->cwic_ap_weight = 10.0;
    o->cwic_beta_dist = 0.99;
    o->cwic_theta_min = 0.0;
    o->cwic_theta0 = 0.1;
}

static int64_t warmup_steps(const sc_train_opts *o) { return (int64_t)llround(o->warmup * (double)o->steps); }

double sc_train_lr(const sc_train_opts *o, int64_t s) {
    int64_t W = warmup_steps(o);
    if (s < W) return o->lr * (double)(s + 1) / (double)W;
    return o->lr * 0.5 * (1.0 + cos(3.14159265358979323846 * (double)(s - W) / (double)(o->steps - W)));
}

double sc_train_tau(const sc_train_opts *o, int64_t s) {
    double a = o->anneal * (double)o->steps, f = a > 0.0 ? (double)s / a : 1.0;
    return o->tau0 + (o->tau1 - o->tau0) * (f < 1.0 ? f : 1.0);
}

void sc_adamw_step(float *p, const float *g, float *m, float *v, size_t n, double lr, double b1, double b2, double eps,
                   double wd, int64_t t) {
    double c1 = 1.0 - pow(b1, (double)t), c2 = 1.0 - pow(b2, (double)t);
    for (size_t i = 0; i < n; i++) {
        double x = (double)p[i] * (1.0 - lr * wd), gi = g[i];
        double mi = b1 * m[i] + (1.0 - b1) * gi, vi = b2 * v[i] + (1.0 - b2) * gi * gi;
        m[i] = (float)mi;
        v[i] = (float)vi;
        p[i] = (float)(x - lr * (mi / c1) / (sqrt(vi / c2) + eps));
    }
}

void sc_train_result_free(sc_train_result *r) {
    free(r->history);
    r->history = NULL;
}

static sc_status check_opts(const sc_train_opts *o, sc_err *err) {
    if (o->steps < 1 || o->batch < 1 || o->grad_accum < 1 || o->seq_len < 0)
        return sc_errf(err, SC_EARG, "train: steps, batch and grad_accum must be >= 1");
    if (o->batch > (int64_t)1 << 30 || o->grad_accum > (int64_t)1 << 30 || o->steps > (int64_t)1 << 30)
        return sc_errf(err, SC_EARG, "train: steps, batch and grad_accum must be below 2^30");
    if (!(o->lr >= 0.0 && o->lr < 1e3) || !(o->beta1 >= 0.0 && o->beta1 < 1.0) || !(o->beta2 >= 0.0 && o->beta2 < 1.0) ||
        !(o->adam_eps > 0.0 && o->adam_eps < 1.0) || !(o->weight_decay >= 0.0 && o->weight_decay < 1e3))
        return sc_errf(err, SC_EARG, "train: AdamW needs lr >= 0, betas in [0, 1), eps in (0, 1), weight decay >= 0");
    if (!(o->warmup >= 0.0 && o->warmup <= 1.0))
        return sc_errf(err, SC_EARG, "train: the warm-up fraction must be in [0, 1]");
    return SC_OK;
}

/* The canonical description of a run: what a checkpoint must share with the
 * run that resumes it (the loop's options, the task's, model, data). */
static void run_id(const sc_train_opts *o, const char *task_run, const char *model_id, uint64_t data_id, int64_t T,
                   char *out, size_t cap) {
    snprintf(out, cap,
             "{\"method\":\"%s\",\"steps\":%lld,\"batch\":%lld,\"grad_accum\":%lld,\"seq_len\":%lld,\"lr\":%.17g,"
             "\"beta1\":%.17g,\"beta2\":%.17g,\"eps\":%.17g,\"weight_decay\":%.17g,\"warmup\":%.17g,\"seed\":%llu,"
             "%s,\"model\":\"%s\",\"data\":\"%016llx\"}",
             o->method ? o->method : "", (long long)o->steps, (long long)o->batch, (long long)o->grad_accum,
             (long long)T, o->lr, o->beta1, o->beta2, o->adam_eps, o->weight_decay, o->warmup,
             (unsigned long long)o->seed, task_run, model_id, (unsigned long long)data_id);
}

/* ---- checkpoints: one safetensors file holding the task's state (parameters and
 * optimizer moments) and the history of the steps done, with the run's
 * description and step as metadata ---- */

enum { HIST_COLS = 11 };

static void hist_row(const sc_train_step *x, double *row) {
    double r[HIST_COLS] = {x->loss,       x->kl,   x->ce,      x->density,         x->lr, x->tau,
                           (double)x->tokens, x->fkl, x->apr, x->apr_target, x->ap_loss};
    memcpy(row, r, sizeof r);
}

static sc_train_step hist_step(const double *r) {
    return (sc_train_step){.loss = r[0], .kl = r[1], .ce = r[2], .density = r[3], .lr = r[4], .tau = r[5],
                           .tokens = (int64_t)r[6], .fkl = r[7], .apr = r[8], .apr_target = r[9], .ap_loss = r[10]};
}

static sc_status save_checkpoint(const sc_train_task *tk, const sc_train_step *hist, const char *path, const char *id,
                                 int64_t done, sc_err *err) {
    size_t ns = tk->n_state;
    sc_st_spec *specs = calloc(ns + 1, sizeof *specs);
    double *h = malloc((size_t)(done > 0 ? done : 1) * HIST_COLS * sizeof(double));
    if (!specs || !h) {
        free(specs);
        free(h);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    }
    for (size_t i = 0; i < ns; i++)
        specs[i] = (sc_st_spec){tk->state[i].name, SC_DT_F32, NULL, 1, {(int64_t)tk->state[i].n}};
    specs[ns] = (sc_st_spec){"history", SC_DT_F32, "F64", 2, {done, HIST_COLS}};
    char step[32];
    snprintf(step, sizeof step, "%lld", (long long)done);
    sc_st_meta meta[3] = {{"format", "sparsecal-train-checkpoint"}, {"run", id}, {"step", step}};
    for (int64_t s = 0; s < done; s++) hist_row(&hist[s], h + s * HIST_COLS);
    sc_st_writer *w = NULL;
    sc_status st = sc_st_writer_create(path, specs, ns + 1, meta, 3, &w, err);
    for (size_t i = 0; i < ns && !st; i++) st = sc_st_writer_write_f32(w, tk->state[i].data, tk->state[i].n, err);
    if (!st) st = sc_st_writer_write(w, h, (size_t)done * HIST_COLS * sizeof(double), err);
    if (!st) st = sc_st_writer_finish(w, err);
    sc_st_writer_free(w);
    free(specs);
    free(h);
    return st;
}

static sc_status load_checkpoint(const sc_train_task *tk, sc_train_step *hist, int64_t steps, const char *path,
                                 const char *id, int64_t *done, sc_err *err) {
    sc_st_file *f;
    SC_TRY(sc_st_open(path, &f, err));
    sc_status st = SC_OK;
    const char *fmt = sc_st_meta_find(f, "format"), *run = sc_st_meta_find(f, "run"), *step = sc_st_meta_find(f, "step");
    char *end = NULL;
    long long s = step ? strtoll(step, &end, 10) : -1;
    if (!fmt || strcmp(fmt, "sparsecal-train-checkpoint") != 0 || !run || !step || *end || s < 0 || s > steps)
        st = sc_errf(err, SC_EFORMAT, "%s: not a sparsecal training checkpoint (format, run and step metadata)", path);
    else if (strcmp(run, id) != 0)
        st = sc_errf(err, SC_EARG, "%s: a checkpoint of another run (model, data or options differ): %s; this run: %s",
                     path, run, id);
    for (size_t i = 0; i < tk->n_state && !st; i++) {
        const sc_train_tensor *ts = &tk->state[i];
        const sc_st_tensor *x = sc_st_find(f, ts->name);
        if (!x || x->dtype != SC_DT_F32 || !x->supported || x->n_elements != ts->n)
            st = sc_errf(err, SC_EFORMAT, "%s: tensor '%s' missing or not f32 of %zu values", path, ts->name, ts->n);
        else
            memcpy(ts->data, x->data, ts->n * sizeof(float));
        for (size_t j = 0; !st && j < ts->n; j++) /* parameters and moments finite, second moments >= 0 */
            if (!isfinite(ts->data[j]) || (ts->nonneg && !(ts->data[j] >= 0.0f)))
                st = sc_errf(err, SC_EFORMAT, "%s: non-finite trainer state in '%s'", path, ts->name);
    }
    const sc_st_tensor *h = st ? NULL : sc_st_find(f, "history");
    if (!st && (!h || strcmp(h->dtype_name, "F64") != 0 || h->n_bytes != (size_t)s * HIST_COLS * sizeof(double)))
        st = sc_errf(err, SC_EFORMAT, "%s: tensor 'history' missing or not F64 [%lld, %d]", path, s, HIST_COLS);
    for (int64_t k = 0; !st && k < s; k++) {
        double row[HIST_COLS];
        memcpy(row, h->data + (size_t)k * sizeof row, sizeof row);
        hist[k] = hist_step(row);
    }
    sc_st_free(f);
    if (!st) *done = s;
    return st;
}

/* ---- the loop ---- */

/* perm <- the order of n sequences in epoch e (Fisher-Yates, a generator seeded by seed and e) */
static void epoch_order(uint32_t *perm, int64_t n, uint64_t seed, int64_t e) {
    uint64_t s = seed ^ (0x632BE59BD9B4E019ull * (uint64_t)(e + 1));
    for (int64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        int64_t j = (int64_t)(s % (uint64_t)(i + 1));
        uint32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

int64_t sc_train_window_cap(const sc_model *m, const sc_dataset *d, const sc_train_opts *o) {
    int64_t T = 2, cap = o->seq_len > 0 ? o->seq_len : m->cfg.max_seq_len;
    for (size_t i = 0; i < d->n_seqs; i++) {
        int64_t n = (int64_t)d->seqs[i].n < cap ? (int64_t)d->seqs[i].n : cap;
        if (n > T) T = n;
    }
    return T;
}

sc_status sc_train_run(const sc_model *m, const sc_dataset *d, const sc_train_opts *o, const sc_train_task *tk,
                       sc_train_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    SC_TRY(check_opts(o, err));
    /* the sequences with something to predict, cut at seq_len; the workspace fits the longest */
    int64_t T = 2, cap = o->seq_len > 0 ? o->seq_len : m->cfg.max_seq_len, N = 0;
    uint32_t *seqs = malloc((d->n_seqs ? d->n_seqs : 1) * sizeof *seqs), *perm = NULL;
    if (!seqs) return sc_errf(err, SC_ENOMEM, "train: out of memory");
    XXH64_state_t *dh = XXH64_createState();
    XXH64_reset(dh, (unsigned long long)cap);
    for (size_t i = 0; i < d->n_seqs && i < UINT32_MAX; i++) {
        int64_t n = (int64_t)d->seqs[i].n < cap ? (int64_t)d->seqs[i].n : cap;
        if (n < 2) continue;
        seqs[N++] = (uint32_t)i;
        if (n > T) T = n;
        XXH64_update(dh, d->seqs[i].ids, (size_t)n * sizeof(int32_t));
    }
    uint64_t data_id = XXH64_digest(dh);
    XXH64_freeState(dh);
    sc_status st = SC_OK;
    sc_train_step *hist = NULL;
    char id[2048], model_id[17] = "";
    if (N == 0) {
        st = sc_errf(err, SC_EARG, "train: no sequence with at least 2 tokens");
        goto done;
    }
    if ((o->checkpoint_path || o->resume_path) && (st = sc_model_identity(m, model_id, err))) goto done;
    run_id(o, tk->run, model_id, data_id, T, id, sizeof id);
    perm = malloc((size_t)N * sizeof *perm);
    hist = calloc((size_t)o->steps, sizeof *hist);
    if (!perm || !hist) {
        st = sc_errf(err, SC_ENOMEM, "train: out of memory for the optimizer state");
        goto done;
    }
    int64_t s0 = 0;
    if (o->resume_path && (st = load_checkpoint(tk, hist, o->steps, o->resume_path, id, &s0, err))) goto done;
    res->first_step = s0;
    res->train_seqs = N;
    int64_t bs = o->batch * o->grad_accum, epoch = -1;
    sc_progress pr;
    sc_progress_start(&pr, o->progress, "train", "steps", o->steps - s0);
    double t0 = sc_now();
    for (int64_t k = s0; k < o->steps && !st; k++) {
        sc_train_step *h = &hist[k];
        h->lr = sc_train_lr(o, k);
        if ((st = tk->begin(tk->user, k, h, err))) break;
        sc_window_loss sum = {0};
        for (int64_t i = 0; i < bs && !st; i++) {
            int64_t g = k * bs + i;
            if (g / N != epoch) epoch_order(perm, N, o->seed, epoch = g / N);
            const sc_tokens *q = &d->seqs[seqs[perm[g % N]]];
            int64_t n = (int64_t)q->n < T ? (int64_t)q->n : T;
            sc_window_loss wl;
            if ((st = tk->window(tk->user, q->ids, n, &wl, err))) break;
            sum.loss += wl.loss;
            sum.kl += wl.kl;
            sum.fkl += wl.fkl;
            sum.ce += wl.ce;
            sum.scored += wl.scored;
            sum.mask_sum += wl.mask_sum;
            sum.mask_rows += wl.mask_rows;
            h->tokens += n;
        }
        if (st) break;
        /* per token: the mean over the step's scored positions */
        double sc = (double)sum.scored;
        h->loss = sum.loss / sc;
        h->kl = sum.kl / sc;
        h->fkl = sum.fkl / sc;
        h->ce = sum.ce / sc;
        if ((st = tk->update(tk->user, k, &sum, h, err))) break;
        res->tokens += h->tokens;
        res->steps_run++;
        char extra[200];
        tk->describe(tk->user, h, extra, sizeof extra);
        sc_progress_update(&pr, k + 1 - s0, (double)res->tokens, extra);
        if (o->checkpoint_path && o->checkpoint_every > 0 && (k + 1) % o->checkpoint_every == 0 && k + 1 < o->steps)
            st = save_checkpoint(tk, hist, o->checkpoint_path, id, k + 1, err);
    }
    sc_progress_end(&pr);
    res->seconds = sc_now() - t0;
    if (!st) {
        res->history = hist;
        hist = NULL;
    }
done:
    free(seqs);
    free(perm);
    free(hist);
    return st;
}

/* ---- the LoRA trainer as a task of the loop ---- */

typedef struct lora_task {
    const sc_train_opts *o;
    sc_lora_params *p;
    sc_lora_student *s;
    float *gA, *gB, *mA, *vA, *mB, *vB;
    size_t na, nb;
} lora_task;

static sc_status lora_begin(void *user, int64_t k, sc_train_step *h, sc_err *err) {
    (void)err;
    lora_task *t = user;
    h->tau = sc_train_tau(t->o, k);
    sc_lora_student_set_tau(t->s, h->tau);
    memset(t->gA, 0, t->na * sizeof *t->gA);
    memset(t->gB, 0, t->nb * sizeof *t->gB);
    return SC_OK;
}

static sc_status lora_window(void *user, const int32_t *ids, int64_t n, sc_window_loss *out, sc_err *err) {
    lora_task *t = user;
    return sc_lora_student_window(t->s, ids, n, t->o->ce_weight, t->gA, t->gB, out, err);
}

static sc_status lora_update(void *user, int64_t k, const sc_window_loss *sum, sc_train_step *h, sc_err *err) {
    (void)err;
    lora_task *t = user;
    const sc_train_opts *o = t->o;
    /* the gradient of the mean over the step's scored positions */
    float inv = (float)(1.0 / (double)sum->scored);
    for (size_t i = 0; i < t->na; i++) t->gA[i] *= inv;
    for (size_t i = 0; i < t->nb; i++) t->gB[i] *= inv;
    sc_adamw_step(t->p->A, t->gA, t->mA, t->vA, t->na, h->lr, o->beta1, o->beta2, o->adam_eps, o->weight_decay, k + 1);
    sc_adamw_step(t->p->B, t->gB, t->mB, t->vB, t->nb, h->lr, o->beta1, o->beta2, o->adam_eps, o->weight_decay, k + 1);
    h->density = sum->mask_sum / ((double)sum->mask_rows * (double)t->p->ffn);
    return SC_OK;
}

static void lora_describe(void *user, const sc_train_step *h, char *buf, size_t cap) {
    (void)user;
    snprintf(buf, cap, "loss %.4f (KL %.4f, CE %.4f), density %.3f, tau %.3g, lr %.3g", h->loss, h->kl, h->ce,
             h->density, h->tau, h->lr);
}

sc_status sc_train_lora(const sc_model *m, const sc_dataset *d, const sc_train_opts *o, sc_lora_params *p,
                        sc_train_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    const sc_config *c = &m->cfg;
    if (p->n_layers != c->n_layers || p->dim != c->dim || p->ffn != c->ffn_dim || !p->A || !p->B)
        return sc_errf(err, SC_EARG, "train: the adapter does not have the model's shape");
    SC_TRY(check_opts(o, err));
    if (!(o->density > 0.0 && o->density <= 1.0)) return sc_errf(err, SC_EARG, "train: density %g is not in (0, 1]", o->density);
    if (!(o->anneal >= 0.0 && o->anneal <= 1.0) || !(o->tau0 >= 0.0 && o->tau0 < 1e6) || !(o->tau1 >= 0.0 && o->tau1 < 1e6) ||
        !(o->ce_weight >= 0.0 && o->ce_weight < 1e6))
        return sc_errf(err, SC_EARG, "train: anneal fraction in [0, 1], temperatures and CE weight >= 0");
    uint64_t c_id = o->c ? XXH64(o->c, (size_t)(c->n_layers * c->ffn_dim) * sizeof(float), 0) : 0;
    lora_task t = {o, p, NULL, NULL, NULL, NULL, NULL, NULL, NULL, (size_t)(p->n_layers * p->rank * p->ffn),
                   (size_t)(p->n_layers * p->dim * p->rank)};
    t.gA = malloc(t.na * sizeof(float));
    t.gB = malloc(t.nb * sizeof(float));
    t.mA = calloc(t.na, sizeof(float));
    t.vA = calloc(t.na, sizeof(float));
    t.mB = calloc(t.nb, sizeof(float));
    t.vB = calloc(t.nb, sizeof(float));
    sc_status st = SC_OK;
    if (!t.gA || !t.gB || !t.mA || !t.vA || !t.mB || !t.vB)
        st = sc_errf(err, SC_ENOMEM, "train: out of memory for the optimizer state");
    if (!st) st = sc_lora_student_create(m, sc_train_window_cap(m, d, o), p, o->c, o->density, &t.s, err);
    if (!st) {
        char run[512];
        snprintf(run, sizeof run,
                 "\"density\":%.17g,\"rank\":%lld,\"alpha\":%.17g,\"tau0\":%.17g,\"tau1\":%.17g,\"anneal\":%.17g,"
                 "\"ce_weight\":%.17g,\"multipliers\":\"%016llx\"",
                 o->density, (long long)p->rank, p->alpha, o->tau0, o->tau1, o->anneal, o->ce_weight,
                 (unsigned long long)c_id);
        const sc_train_tensor state[6] = {{"A", p->A, t.na, false},  {"B", p->B, t.nb, false},
                                          {"mA", t.mA, t.na, false}, {"vA", t.vA, t.na, true},
                                          {"mB", t.mB, t.nb, false}, {"vB", t.vB, t.nb, true}};
        sc_train_task tk = {&t, run, state, 6, lora_begin, lora_window, lora_update, lora_describe};
        st = sc_train_run(m, d, o, &tk, res, err);
    }
    sc_lora_student_free(t.s);
    free(t.gA);
    free(t.gB);
    free(t.mA);
    free(t.vA);
    free(t.mB);
    free(t.vB);
    return st;
}
