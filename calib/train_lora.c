/* train_lora.c - the soft top-K mask, the LoRA adapter on W_d, and one
 * sequence's distillation loss with the gradient of the adapter (train.h).
 *
 * How the gradient is obtained. The student is the reference forward pass
 * with two hooks: a tap hook at SC_TAP_H replaces h by h' = m * h (m the
 * soft mask of the token's scores, taken from phi(u) at SC_TAP_GATE_ACT),
 * and a linear hook adds the adapter to the down projection,
 * y = W_d h' + s B (A h'), s = alpha / r. The backward pass (backward.c)
 * differentiates the dense layers and the masking (an elementwise scaling);
 * it does not see the adapter, so its gradient hook supplies that part.
 * Per layer and token, with g = dL/dy (the gradient of the residual after
 * the layer, which y adds to) and z = A h':
 *   dL/dB += s g z^T                    [D, r]
 *   dL/dA += (s B^T g) h'^T             [r, F]
 *   dL/dh' += A^T (s B^T g)             (added to the dense part W_d^T g)
 * as matrix products over the window's tokens. dL/dh' then flows through
 * the mask into v, phi(u) and earlier layers as the backward pass does for
 * any scaling of h. The mask itself passes no gradient to the scores
 * (train.h: a rank is piecewise constant). */
#include <cblas.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "json_out.h"
#include "srt_route.h"
#include "train.h"

/* ---- the soft top-K mask ---- */

/* An order-preserving unsigned key of a float, descending: larger values get
 * smaller keys, NaN the largest key (ranks last), -0 the key of +0. */
static uint32_t desc_key(float x) {
    if (isnan(x)) return UINT32_MAX;
    if (x == 0.0f) x = 0.0f;
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    uint32_t asc = (b & 0x80000000u) ? ~b : (b | 0x80000000u); /* ascending with the value, +inf at 0xff800000 */
    return UINT32_MAX - asc;                                      /* so every number's key is below NaN's */
}

/* The mask value of each rank, table[rho] for rho in [0, F). */
static void rank_table(float *table, int64_t F, int64_t K, double tau) {
    for (int64_t rho = 0; rho < F; rho++)
        table[rho] = tau > 0.0 ? (float)(1.0 / (1.0 + exp(-((double)K - 0.5 - (double)rho) / ((double)F * tau))))
                               : (rho < K ? 1.0f : 0.0f);
}

/* mask[j] = table[rank of score[j]]; returns the sum of the mask. */
static double mask_by_rank(const float *score, int64_t F, const float *table, float *mask, uint64_t *scratch) {
    /* a stable LSD radix sort of (key << 32 | index) on the key, 8 bits at a
     * time: equal keys keep ascending index order (ties to the lower index);
     * a pass whose byte is the same in every key is skipped */
    uint64_t *a = scratch, *b = scratch + F;
    for (int64_t j = 0; j < F; j++) a[j] = (uint64_t)desc_key(score[j]) << 32 | (uint64_t)j;
    for (int shift = 32; shift < 64; shift += 8) {
        int64_t count[257] = {0};
        for (int64_t j = 0; j < F; j++) count[((a[j] >> shift) & 0xff) + 1]++;
        if (count[((a[0] >> shift) & 0xff) + 1] == F) continue;
        for (int k = 0; k < 256; k++) count[k + 1] += count[k];
        for (int64_t j = 0; j < F; j++) b[count[(a[j] >> shift) & 0xff]++] = a[j];
        uint64_t *t = a;
        a = b;
        b = t;
    }
    double sum = 0.0;
    for (int64_t rho = 0; rho < F; rho++) {
        mask[a[rho] & 0xffffffffu] = table[rho];
        sum += (double)table[rho];
    }
    return sum;
}

double sc_soft_topk(const float *score, int64_t F, int64_t K, double tau, float *mask, uint64_t *scratch) {
    float *table = malloc((size_t)F * sizeof *table);
    if (!table) return NAN;
    rank_table(table, F, K, tau);
    double sum = mask_by_rank(score, F, table, mask, scratch);
    free(table);
    return sum;
}

/* ---- the adapter ---- */

int64_t sc_lora_default_rank(const sc_config *c) {
    int64_t r = 128;
    if (c->dim < r) r = c->dim;
    if (c->ffn_dim < r) r = c->ffn_dim;
    return r;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void sc_lora_params_free(sc_lora_params *p) {
    if (!p) return;
    free(p->A);
    free(p->B);
    p->A = p->B = NULL;
}

sc_status sc_lora_params_init(sc_lora_params *p, const sc_config *c, int64_t rank, double alpha, uint64_t seed,
                              sc_err *err) {
    memset(p, 0, sizeof *p);
    int64_t L = c->n_layers, D = c->dim, F = c->ffn_dim, cap = D < F ? D : F;
    if (rank < 1 || rank > cap)
        return sc_errf(err, SC_EARG, "LoRA rank %lld is not in 1..%lld (min of dim %lld and ffn %lld)",
                       (long long)rank, (long long)cap, (long long)D, (long long)F);
    if (!(alpha > 0.0) || !isfinite(alpha)) return sc_errf(err, SC_EARG, "LoRA alpha %g must be positive", alpha);
    size_t na = (size_t)(L * rank * F), nb = (size_t)(L * D * rank);
    p->A = malloc(na * sizeof *p->A);
    p->B = calloc(nb, sizeof *p->B);
    if (!p->A || !p->B) {
        sc_lora_params_free(p);
        return sc_errf(err, SC_ENOMEM, "out of memory for a rank-%lld adapter", (long long)rank);
    }
    p->n_layers = L;
    p->dim = D;
    p->ffn = F;
    p->rank = rank;
    p->alpha = alpha;
    p->scale = alpha / (double)rank;
    /* PEFT: kaiming_uniform_(A, a=sqrt(5)) = U(-b, b), b = sqrt(6 / ((1 + a^2) fan_in)) = 1 / sqrt(F) */
    double bound = 1.0 / sqrt((double)F);
    uint64_t s = seed;
    for (size_t i = 0; i < na; i++) {
        double u = (double)(splitmix64(&s) >> 11) * 0x1.0p-53;
        p->A[i] = (float)((2.0 * u - 1.0) * bound);
    }
    return SC_OK;
}

static sc_status make_dir(const char *dir, sc_err *err) {
    if (mkdir(dir, 0777) == 0 || (errno == EEXIST && sc_is_dir(dir))) return SC_OK;
    return sc_errf(err, SC_EIO, "%s: cannot create the adapter directory: %s", dir, strerror(errno));
}

static sc_status write_config(const sc_lora_params *p, const char *path, const char *base_model, sc_err *err) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "peft_type", "LORA");
    cJSON_AddStringToObject(j, "task_type", "CAUSAL_LM");
    cJSON_AddStringToObject(j, "base_model_name_or_path", base_model ? base_model : "");
    cJSON_AddNumberToObject(j, "r", (double)p->rank);
    cJSON_AddNumberToObject(j, "lora_alpha", p->alpha);
    cJSON_AddNumberToObject(j, "lora_dropout", 0.0);
    cJSON_AddStringToObject(j, "bias", "none");
    cJSON_AddBoolToObject(j, "use_rslora", false);
    cJSON_AddBoolToObject(j, "fan_in_fan_out", false);
    cJSON_AddBoolToObject(j, "inference_mode", true);
    cJSON *tm = cJSON_AddArrayToObject(j, "target_modules");
    cJSON_AddItemToArray(tm, cJSON_CreateString("down_proj"));
    char *text = sc_json_print(j, true);
    cJSON_Delete(j);
    if (!text) return sc_errf(err, SC_ENOMEM, "%s: out of memory", path);
    sc_atomic_file f;
    sc_status st = sc_atomic_open(&f, path, err);
    if (st) {
        cJSON_free(text);
        return st;
    }
    st = sc_atomic_write(&f, text, strlen(text), err);
    if (!st) st = sc_atomic_write(&f, "\n", 1, err);
    cJSON_free(text);
    if (st) {
        sc_atomic_abort(&f);
        return st;
    }
    return sc_atomic_commit(&f, err);
}

sc_status sc_lora_params_save(const sc_lora_params *p, const char *dir, const char *base_model, const sc_st_meta *meta,
                              size_t n_meta, sc_err *err) {
    char wpath[4096], cpath[4096];
    if (!sc_path_join(wpath, sizeof wpath, dir, "adapter_model.safetensors") ||
        !sc_path_join(cpath, sizeof cpath, dir, "adapter_config.json"))
        return sc_errf(err, SC_EARG, "%s: path too long", dir);
    SC_TRY(make_dir(dir, err));
    int64_t L = p->n_layers, r = p->rank, D = p->dim, F = p->ffn;
    sc_st_spec *specs = calloc((size_t)(2 * L), sizeof *specs);
    char(*names)[96] = calloc((size_t)(2 * L), sizeof *names);
    if (!specs || !names) {
        free(specs);
        free(names);
        return sc_errf(err, SC_ENOMEM, "%s: out of memory", wpath);
    }
    for (int64_t l = 0; l < L; l++)
        for (int ab = 0; ab < 2; ab++) {
            sc_st_spec *sp = &specs[2 * l + ab];
            snprintf(names[2 * l + ab], sizeof names[0], "base_model.model.model.layers.%lld.mlp.down_proj.lora_%c.weight",
                     (long long)l, ab ? 'B' : 'A');
            sp->name = names[2 * l + ab];
            sp->dtype = SC_DT_F32;
            sp->n_dims = 2;
            sp->shape[0] = ab ? D : r;
            sp->shape[1] = ab ? r : F;
        }
    sc_st_writer *w = NULL;
    sc_status st = sc_st_writer_create(wpath, specs, (size_t)(2 * L), meta, n_meta, &w, err);
    for (int64_t l = 0; l < L && !st; l++) {
        st = sc_st_writer_write_f32(w, p->A + l * r * F, (size_t)(r * F), err);
        if (!st) st = sc_st_writer_write_f32(w, p->B + l * D * r, (size_t)(D * r), err);
    }
    if (!st) st = sc_st_writer_finish(w, err);
    sc_st_writer_free(w);
    free(specs);
    free(names);
    return st ? st : write_config(p, cpath, base_model, err);
}

/* ---- the student ---- */

struct sc_lora_student {
    const sc_model *m;
    const sc_lora_params *p;
    const float *c; /* [L, F] or NULL */
    int64_t K, F, D, r, max_ctx;
    double tau;
    sc_forward *f;   /* a chunked training workspace: no [T x vocab] logits */
    sc_distill *loss;
    float *teacher;  /* [T, D] the teacher's final norm output */
    double *nll;     /* [T] */
    float *z;       /* [T, r]: A h', then s B^T g */
    float *dy;      /* [T, D]: dL/dy of the layer being differentiated */
    float *score, *mask; /* [F] */
    uint64_t *order; /* mask_by_rank scratch [2F] */
    float *table;    /* [F] the mask value of each rank at the current tau */
    const float *a; /* phi(u) of the current layer (SC_TAP_GATE_ACT) */
    float *gA, *gB; /* gradient accumulators of the running backward pass */
    sc_mask_fn on_mask;
    void *mask_user;
    double mask_sum;
    int64_t mask_rows;
};

void sc_lora_student_free(sc_lora_student *s) {
    if (!s) return;
    sc_forward_free(s->f);
    sc_distill_free(s->loss);
    free(s->teacher);
    free(s->nll);
    free(s->z);
    free(s->dy);
    free(s->score);
    free(s->mask);
    free(s->order);
    free(s->table);
    free(s);
}

sc_status sc_lora_student_create(const sc_model *m, int64_t max_ctx, const sc_lora_params *p, const float *c,
                                 double density, sc_lora_student **out, sc_err *err) {
    *out = NULL;
    const sc_config *cf = &m->cfg;
    if (p->n_layers != cf->n_layers || p->dim != cf->dim || p->ffn != cf->ffn_dim)
        return sc_errf(err, SC_EARG, "the adapter's shape (%lld layers, %lld x %lld) is not the model's",
                       (long long)p->n_layers, (long long)p->dim, (long long)p->ffn);
    if (!(density > 0.0 && density <= 1.0)) return sc_errf(err, SC_EARG, "density %g is not in (0, 1]", density);
    sc_lora_student *s = calloc(1, sizeof *s);
    if (!s) return sc_errf(err, SC_ENOMEM, "out of memory");
    s->m = m;
    s->p = p;
    s->c = c;
    s->F = cf->ffn_dim;
    s->D = cf->dim;
    s->r = p->rank;
    s->K = srt_topk_count(density, s->F);
    s->max_ctx = max_ctx;
    s->tau = 1.0;
    sc_status st = sc_forward_create_train_ex(m, max_ctx, SC_TRAIN_CHUNKED_LOSS, &s->f, err);
    if (!st) st = sc_distill_create(m, max_ctx, &s->loss, err);
    if (!st) {
        s->teacher = malloc((size_t)(max_ctx * s->D) * sizeof(float));
        s->nll = malloc((size_t)max_ctx * sizeof(double));
        s->z = malloc((size_t)(max_ctx * s->r) * sizeof(float));
        s->dy = malloc((size_t)(max_ctx * s->D) * sizeof(float));
        s->score = malloc((size_t)s->F * sizeof(float));
        s->mask = malloc((size_t)s->F * sizeof(float));
        s->order = malloc((size_t)s->F * 2 * sizeof(uint64_t));
        s->table = malloc((size_t)s->F * sizeof(float));
        if (!s->teacher || !s->nll || !s->z || !s->dy || !s->score || !s->mask || !s->order || !s->table)
            st = sc_errf(err, SC_ENOMEM, "out of memory for the student's %lld-token workspace", (long long)max_ctx);
    }
    if (st) {
        sc_lora_student_free(s);
        return st;
    }
    rank_table(s->table, s->F, s->K, s->tau);
    *out = s;
    return SC_OK;
}

void sc_lora_student_set_tau(sc_lora_student *s, double tau) {
    s->tau = tau > 0.0 ? tau : 0.0;
    rank_table(s->table, s->F, s->K, s->tau);
}

void sc_lora_student_observe(sc_lora_student *s, sc_mask_fn fn, void *user) {
    s->on_mask = fn;
    s->mask_user = fn ? user : NULL;
}

/* Linear hook: y += s (h' A^T) B^T on the down projection. */
static sc_status student_linear(void *user, const sc_linear_event *ev, sc_err *err) {
    sc_lora_student *s = user;
    if (ev->which != SC_LIN_DOWN) return SC_OK;
    const sc_lora_params *p = s->p;
    int64_t n = ev->n_tokens, r = s->r, F = s->F, D = s->D;
    const float *A = p->A + ev->layer * r * F, *B = p->B + ev->layer * D * r;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)r, (blasint)F, 1.0f, ev->x, (blasint)F, A,
                (blasint)F, 0.0f, s->z, (blasint)r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)D, (blasint)r, (float)p->scale, s->z,
                (blasint)r, B, (blasint)r, 1.0f, ev->y, (blasint)D);
    return SC_OK;
}

/* The adapter's part of the backward pass at layer l (see the top of the file). */
static void adapter_backward(sc_lora_student *s, const sc_tap_event *ev) {
    const sc_lora_params *p = s->p;
    int64_t n = ev->n_tokens, r = s->r, F = s->F, D = s->D, l = ev->layer;
    const float *A = p->A + l * r * F, *B = p->B + l * D * r, *h = ev->act;
    float *gA = s->gA + l * r * F, *gB = s->gB + l * D * r, *z = s->z;
    float sc = (float)p->scale;
    /* z[n, r] = h' A^T; gB[D, r] += s g^T z */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)r, (blasint)F, 1.0f, h, (blasint)F, A,
                (blasint)F, 0.0f, z, (blasint)r);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)D, (blasint)r, (blasint)n, sc, s->dy, (blasint)D, z,
                (blasint)r, 1.0f, gB, (blasint)r);
    /* z[n, r] = s g B; gA[r, F] += z^T h'; dL/dh'[n, F] += z A */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)r, (blasint)D, sc, s->dy, (blasint)D, B,
                (blasint)r, 0.0f, z, (blasint)r);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)r, (blasint)F, (blasint)n, 1.0f, z, (blasint)r, h,
                (blasint)F, 1.0f, gA, (blasint)F);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)F, (blasint)r, 1.0f, z, (blasint)r, A,
                (blasint)F, 1.0f, ev->data, (blasint)F);
}

static sc_status student_tap(void *user, const sc_tap_event *ev, sc_err *err) {
    sc_lora_student *s = user;
    int64_t F = s->F;
    if (ev->is_grad) {
        if (ev->tap == SC_TAP_RESID) /* dL/dy of this layer: still needed when its SC_TAP_H event comes */
            memcpy(s->dy, ev->data, (size_t)(ev->n_tokens * s->D) * sizeof(float));
        else if (ev->tap == SC_TAP_H && s->gA)
            adapter_backward(s, ev);
        return SC_OK;
    }
    if (ev->tap == SC_TAP_GATE_ACT) {
        s->a = ev->data;
        return SC_OK;
    }
    if (ev->tap != SC_TAP_H) return SC_OK;
    const float *c = s->c ? s->c + ev->layer * F : NULL;
    for (int64_t t = 0; t < ev->n_tokens; t++) {
        float *h = ev->data + t * F;
        srt_score_gate(s->score, s->a + t * F, c, F);
        double sum = mask_by_rank(s->score, F, s->table, s->mask, s->order);
        for (int64_t j = 0; j < F; j++) h[j] *= s->mask[j];
        if (!ev->replay) { /* a recomputation in the backward pass is not a new row */
            s->mask_sum += sum;
            s->mask_rows++;
            if (s->on_mask) s->on_mask(s->mask_user, ev->layer, ev->pos0 + t, s->mask, F);
        }
    }
    return SC_OK;
}

static sc_status check_window(const sc_lora_student *s, int64_t n, sc_err *err) {
    if (n < 2 || n > s->max_ctx)
        return sc_errf(err, SC_EARG, "a training sequence of %lld tokens (the student takes 2..%lld)", (long long)n,
                       (long long)s->max_ctx);
    return SC_OK;
}

/* The student's forward pass of ids[0..n) (mask and adapter). */
static sc_status student_forward(sc_lora_student *s, const int32_t *ids, int64_t n, sc_err *err) {
    sc_hooks hk = {student_tap, s, SC_TAP_BIT(SC_TAP_GATE_ACT) | SC_TAP_BIT(SC_TAP_H)};
    sc_forward_set_linear_hook(s->f, student_linear, s);
    return sc_forward_run(s->f, ids, n, 0, &hk, NULL, err);
}

sc_status sc_lora_student_window(sc_lora_student *s, const int32_t *ids, int64_t n, double ce_weight, float *gA,
                                 float *gB, sc_window_loss *out, sc_err *err) {
    memset(out, 0, sizeof *out);
    SC_TRY(check_window(s, n, err));
    /* the teacher: the dense model, no adapter, no mask; its final norm output stands for its logits */
    sc_forward_set_linear_hook(s->f, NULL, NULL);
    SC_TRY(sc_forward_run(s->f, ids, n, 0, NULL, NULL, err));
    memcpy(s->teacher, sc_forward_final_norm(s->f), (size_t)(n * s->D) * sizeof(float));
    s->mask_sum = 0.0;
    s->mask_rows = 0;
    SC_TRY(student_forward(s, ids, n, err));
    s->gA = gA;
    s->gB = gB;
    sc_hooks ghk = {student_tap, s, SC_TAP_BIT(SC_TAP_RESID) | SC_TAP_BIT(SC_TAP_H)};
    double kl, fkl, ce;
    sc_status st = sc_distill_window(s->loss, s->f, ids, n, s->teacher, ce_weight, 0.0, &ghk, gA != NULL, &kl, &fkl,
                                     &ce, err);
    s->gA = s->gB = NULL;
    if (st) return st;
    out->kl = kl;
    out->ce = ce;
    out->loss = kl + ce_weight * ce;
    out->scored = n - 1;
    out->mask_sum = s->mask_sum;
    out->mask_rows = s->mask_rows;
    return SC_OK;
}

sc_status sc_lora_student_nll(sc_lora_student *s, const int32_t *ids, int64_t n, double *nll, sc_err *err) {
    *nll = NAN;
    SC_TRY(check_window(s, n, err));
    s->mask_sum = 0.0;
    s->mask_rows = 0;
    SC_TRY(student_forward(s, ids, n, err));
    SC_TRY(sc_forward_nll(s->f, s->nll, err));
    double sum = 0.0;
    for (int64_t t = 0; t + 1 < n; t++) sum += s->nll[t];
    *nll = sum;
    return SC_OK;
}
