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
    {"claws-lora", "claws", true},
    {"cats-lora", "cats", false},
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

static sc_status check_opts(const sc_train_opts *o, const sc_lora_params *p, const sc_model *m, sc_err *err) {
    const sc_config *c = &m->cfg;
    if (p->n_layers != c->n_layers || p->dim != c->dim || p->ffn != c->ffn_dim || !p->A || !p->B)
        return sc_errf(err, SC_EARG, "train: the adapter does not have the model's shape");
    if (o->steps < 1 || o->batch < 1 || o->grad_accum < 1 || o->seq_len < 0)
        return sc_errf(err, SC_EARG, "train: steps, batch and grad_accum must be >= 1");
    if (o->batch > (int64_t)1 << 30 || o->grad_accum > (int64_t)1 << 30 || o->steps > (int64_t)1 << 30)
        return sc_errf(err, SC_EARG, "train: steps, batch and grad_accum must be below 2^30");
    if (!(o->density > 0.0 && o->density <= 1.0)) return sc_errf(err, SC_EARG, "train: density %g is not in (0, 1]", o->density);
    if (!(o->lr >= 0.0 && o->lr < 1e3) || !(o->beta1 >= 0.0 && o->beta1 < 1.0) || !(o->beta2 >= 0.0 && o->beta2 < 1.0) ||
        !(o->adam_eps > 0.0 && o->adam_eps < 1.0) || !(o->weight_decay >= 0.0 && o->weight_decay < 1e3))
        return sc_errf(err, SC_EARG, "train: AdamW needs lr >= 0, betas in [0, 1), eps in (0, 1), weight decay >= 0");
    if (!(o->warmup >= 0.0 && o->warmup <= 1.0) || !(o->anneal >= 0.0 && o->anneal <= 1.0) ||
        !(o->tau0 >= 0.0 && o->tau0 < 1e6) || !(o->tau1 >= 0.0 && o->tau1 < 1e6) ||
        !(o->ce_weight >= 0.0 && o->ce_weight < 1e6))
        return sc_errf(err, SC_EARG, "train: warm-up and anneal fractions in [0, 1], temperatures and CE weight >= 0");
    return SC_OK;
}

/* The canonical description of a run: what a checkpoint must share with the
 * run that resumes it (options, model, data, multipliers). */
static void run_id(const sc_train_opts *o, const sc_lora_params *p, const char *model_id, uint64_t data_id,
                   uint64_t c_id, int64_t T, char *out, size_t cap) {
    snprintf(out, cap,
             "{\"method\":\"%s\",\"density\":%.17g,\"rank\":%lld,\"alpha\":%.17g,\"steps\":%lld,\"batch\":%lld,"
             "\"grad_accum\":%lld,\"seq_len\":%lld,\"lr\":%.17g,\"beta1\":%.17g,\"beta2\":%.17g,\"eps\":%.17g,"
             "\"weight_decay\":%.17g,\"warmup\":%.17g,\"tau0\":%.17g,\"tau1\":%.17g,\"anneal\":%.17g,"
             "\"ce_weight\":%.17g,\"seed\":%llu,\"model\":\"%s\",\"data\":\"%016llx\",\"multipliers\":\"%016llx\"}",
             o->method ? o->method : "", o->density, (long long)p->rank, p->alpha, (long long)o->steps,
             (long long)o->batch, (long long)o->grad_accum, (long long)T, o->lr, o->beta1, o->beta2, o->adam_eps,
             o->weight_decay, o->warmup, o->tau0, o->tau1, o->anneal, o->ce_weight, (unsigned long long)o->seed,
             model_id, (unsigned long long)data_id, (unsigned long long)c_id);
}

/* ---- checkpoints: one safetensors file holding the adapter, the AdamW moments and
 * the history of the steps done, with the run's description and step as metadata ---- */

enum { HIST_COLS = 7 };

typedef struct trainer {
    sc_lora_params *p;
    float *mA, *vA, *mB, *vB;
    sc_train_step *hist;
    int64_t steps;
    size_t na, nb;
} trainer;

static sc_status save_checkpoint(const trainer *t, const char *path, const char *id, int64_t done, sc_err *err) {
    const sc_lora_params *p = t->p;
    int64_t L = p->n_layers, r = p->rank, D = p->dim, F = p->ffn;
    sc_st_spec specs[7] = {
        {"A", SC_DT_F32, NULL, 3, {L, r, F}},  {"B", SC_DT_F32, NULL, 3, {L, D, r}},
        {"mA", SC_DT_F32, NULL, 3, {L, r, F}}, {"vA", SC_DT_F32, NULL, 3, {L, r, F}},
        {"mB", SC_DT_F32, NULL, 3, {L, D, r}}, {"vB", SC_DT_F32, NULL, 3, {L, D, r}},
        {"history", SC_DT_F32, "F64", 2, {done, HIST_COLS}},
    };
    char step[32];
    snprintf(step, sizeof step, "%lld", (long long)done);
    sc_st_meta meta[3] = {{"format", "sparsecal-train-checkpoint"}, {"run", id}, {"step", step}};
    double *h = malloc((size_t)(done > 0 ? done : 1) * HIST_COLS * sizeof(double));
    if (!h) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    for (int64_t s = 0; s < done; s++) {
        const sc_train_step *x = &t->hist[s];
        double row[HIST_COLS] = {x->loss, x->kl, x->ce, x->density, x->lr, x->tau, (double)x->tokens};
        memcpy(h + s * HIST_COLS, row, sizeof row);
    }
    sc_st_writer *w = NULL;
    sc_status st = sc_st_writer_create(path, specs, 7, meta, 3, &w, err);
    const float *parts[6] = {p->A, p->B, t->mA, t->vA, t->mB, t->vB};
    const size_t sizes[6] = {t->na, t->nb, t->na, t->na, t->nb, t->nb};
    for (int i = 0; i < 6 && !st; i++) st = sc_st_writer_write_f32(w, parts[i], sizes[i], err);
    if (!st) st = sc_st_writer_write(w, h, (size_t)done * HIST_COLS * sizeof(double), err);
    if (!st) st = sc_st_writer_finish(w, err);
    sc_st_writer_free(w);
    free(h);
    return st;
}

static sc_status load_checkpoint(trainer *t, const char *path, const char *id, int64_t *done, sc_err *err) {
    sc_st_file *f;
    SC_TRY(sc_st_open(path, &f, err));
    sc_status st = SC_OK;
    const char *fmt = sc_st_meta_find(f, "format"), *run = sc_st_meta_find(f, "run"), *step = sc_st_meta_find(f, "step");
    char *end = NULL;
    long long s = step ? strtoll(step, &end, 10) : -1;
    if (!fmt || strcmp(fmt, "sparsecal-train-checkpoint") != 0 || !run || !step || *end || s < 0 || s > t->steps)
        st = sc_errf(err, SC_EFORMAT, "%s: not a sparsecal training checkpoint (format, run and step metadata)", path);
    else if (strcmp(run, id) != 0)
        st = sc_errf(err, SC_EARG, "%s: a checkpoint of another run (model, data or options differ): %s; this run: %s",
                     path, run, id);
    float *dst[6] = {t->p->A, t->p->B, t->mA, t->vA, t->mB, t->vB};
    const char *names[6] = {"A", "B", "mA", "vA", "mB", "vB"};
    const size_t sizes[6] = {t->na, t->nb, t->na, t->na, t->nb, t->nb};
    for (int i = 0; i < 6 && !st; i++) {
        const sc_st_tensor *x = sc_st_find(f, names[i]);
        if (!x || x->dtype != SC_DT_F32 || !x->supported || x->n_elements != sizes[i])
            st = sc_errf(err, SC_EFORMAT, "%s: tensor '%s' missing or not f32 of %zu values", path, names[i], sizes[i]);
        else
            memcpy(dst[i], x->data, sizes[i] * sizeof(float));
    }
    const sc_st_tensor *h = st ? NULL : sc_st_find(f, "history");
    if (!st && (!h || strcmp(h->dtype_name, "F64") != 0 || h->n_bytes != (size_t)s * HIST_COLS * sizeof(double)))
        st = sc_errf(err, SC_EFORMAT, "%s: tensor 'history' missing or not F64 [%lld, %d]", path, s, HIST_COLS);
    for (int64_t k = 0; !st && k < s; k++) {
        double row[HIST_COLS];
        memcpy(row, h->data + (size_t)k * sizeof row, sizeof row);
        t->hist[k] = (sc_train_step){row[0], row[1], row[2], row[3], row[4], row[5], (int64_t)row[6]};
    }
    for (size_t i = 0; !st && i < t->na; i++)
        if (!isfinite(t->p->A[i]) || !isfinite(t->mA[i]) || !(t->vA[i] >= 0.0f))
            st = sc_errf(err, SC_EFORMAT, "%s: non-finite trainer state", path);
    for (size_t i = 0; !st && i < t->nb; i++)
        if (!isfinite(t->p->B[i]) || !isfinite(t->mB[i]) || !(t->vB[i] >= 0.0f))
            st = sc_errf(err, SC_EFORMAT, "%s: non-finite trainer state", path);
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

sc_status sc_train_lora(const sc_model *m, const sc_dataset *d, const sc_train_opts *o, sc_lora_params *p,
                        sc_train_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    SC_TRY(check_opts(o, p, m, err));
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
    uint64_t c_id = o->c ? XXH64(o->c, (size_t)(m->cfg.n_layers * m->cfg.ffn_dim) * sizeof(float), 0) : 0;
    sc_status st = SC_OK;
    sc_lora_student *s = NULL;
    trainer t = {p, NULL, NULL, NULL, NULL, NULL, o->steps, (size_t)(p->n_layers * p->rank * p->ffn),
                 (size_t)(p->n_layers * p->dim * p->rank)};
    float *gA = NULL, *gB = NULL;
    char id[1024], model_id[17] = "";
    if (N == 0) {
        st = sc_errf(err, SC_EARG, "train: no sequence with at least 2 tokens");
        goto done;
    }
    if ((o->checkpoint_path || o->resume_path) && (st = sc_model_identity(m, model_id, err))) goto done;
    run_id(o, p, model_id, data_id, c_id, T, id, sizeof id);
    perm = malloc((size_t)N * sizeof *perm);
    gA = malloc(t.na * sizeof *gA);
    gB = malloc(t.nb * sizeof *gB);
    t.mA = calloc(t.na, sizeof(float));
    t.vA = calloc(t.na, sizeof(float));
    t.mB = calloc(t.nb, sizeof(float));
    t.vB = calloc(t.nb, sizeof(float));
    t.hist = calloc((size_t)o->steps, sizeof *t.hist);
    if (!perm || !gA || !gB || !t.mA || !t.vA || !t.mB || !t.vB || !t.hist) {
        st = sc_errf(err, SC_ENOMEM, "train: out of memory for the optimizer state");
        goto done;
    }
    if ((st = sc_lora_student_create(m, T, p, o->c, o->density, &s, err))) goto done;
    int64_t s0 = 0;
    if (o->resume_path && (st = load_checkpoint(&t, o->resume_path, id, &s0, err))) goto done;
    res->first_step = s0;
    res->train_seqs = N;
    int64_t bs = o->batch * o->grad_accum, epoch = -1;
    sc_progress pr;
    sc_progress_start(&pr, o->progress, "train", "steps", o->steps - s0);
    double t0 = sc_now();
    for (int64_t k = s0; k < o->steps && !st; k++) {
        sc_train_step *h = &t.hist[k];
        h->tau = sc_train_tau(o, k);
        h->lr = sc_train_lr(o, k);
        sc_lora_student_set_tau(s, h->tau);
        memset(gA, 0, t.na * sizeof *gA);
        memset(gB, 0, t.nb * sizeof *gB);
        double loss = 0.0, kl = 0.0, ce = 0.0, msum = 0.0, mrows = 0.0;
        int64_t scored = 0;
        for (int64_t i = 0; i < bs && !st; i++) {
            int64_t g = k * bs + i;
            if (g / N != epoch) epoch_order(perm, N, o->seed, epoch = g / N);
            const sc_tokens *q = &d->seqs[seqs[perm[g % N]]];
            int64_t n = (int64_t)q->n < T ? (int64_t)q->n : T;
            sc_window_loss wl;
            if ((st = sc_lora_student_window(s, q->ids, n, o->ce_weight, gA, gB, &wl, err))) break;
            loss += wl.loss;
            kl += wl.kl;
            ce += wl.ce;
            scored += wl.scored;
            msum += wl.mask_sum;
            mrows += (double)wl.mask_rows;
            h->tokens += n;
        }
        if (st) break;
        /* the gradient of the mean over the step's scored positions */
        float inv = (float)(1.0 / (double)scored);
        for (size_t i = 0; i < t.na; i++) gA[i] *= inv;
        for (size_t i = 0; i < t.nb; i++) gB[i] *= inv;
        sc_adamw_step(p->A, gA, t.mA, t.vA, t.na, h->lr, o->beta1, o->beta2, o->adam_eps, o->weight_decay, k + 1);
        sc_adamw_step(p->B, gB, t.mB, t.vB, t.nb, h->lr, o->beta1, o->beta2, o->adam_eps, o->weight_decay, k + 1);
        h->loss = loss / (double)scored;
        h->kl = kl / (double)scored;
        h->ce = ce / (double)scored;
        h->density = msum / (mrows * (double)p->ffn);
        res->tokens += h->tokens;
        res->steps_run++;
        char extra[160];
        snprintf(extra, sizeof extra, "loss %.4f (KL %.4f, CE %.4f), density %.3f, tau %.3g, lr %.3g", h->loss, h->kl,
                 h->ce, h->density, h->tau, h->lr);
        sc_progress_update(&pr, k + 1 - s0, (double)res->tokens, extra);
        if (o->checkpoint_path && o->checkpoint_every > 0 && (k + 1) % o->checkpoint_every == 0 && k + 1 < o->steps)
            st = save_checkpoint(&t, o->checkpoint_path, id, k + 1, err);
    }
    sc_progress_end(&pr);
    res->seconds = sc_now() - t0;
    if (!st) {
        res->history = t.hist;
        t.hist = NULL;
    }
done:
    sc_lora_student_free(s);
    free(seqs);
    free(perm);
    free(gA);
    free(gB);
    free(t.mA);
    free(t.vA);
    free(t.mB);
    free(t.vB);
    free(t.hist);
    return st;
}
