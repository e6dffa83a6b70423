/* train.h - recovery training for activation sparsity (`sparsecal train`):
 * a rank-r LoRA adapter on every layer's down projection W_d, trained by
 * distillation from the dense model through a soft top-K mask whose
 * temperature is annealed towards the hard top-K the routers apply at
 * inference (the CLAWS paper, Section 3.3 and Appendix F).
 *
 * Pieces, bottom up:
 *   sc_soft_topk        the relaxed mask of one token (its definition below)
 *   sc_lora_params      the adapter (PEFT layout: lora_A [r, F], lora_B [D, r],
 *                       W_d' = W_d + (alpha / r) B A), saved as a PEFT adapter
 *                       directory that `pack --lora` fuses (convert/lora.h)
 *   sc_lora_student     one sequence's loss and the gradient of A and B
 *                       (train_lora.c)
 *   sc_train_lora       the loop: data order, AdamW, schedules, checkpoints
 *                       (train.c) */
#ifndef SC_TRAIN_H
#define SC_TRAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cwic.h"
#include "data.h"
#include "forward.h"
#include "model.h"
#include "safetensors.h"

/* ---- the soft top-K mask ----------------------------------------------------
 * The CLAWS paper replaces the hard top-K mask during training by
 * m_j = sigmoid(l_j / tau), "where l_j is a logit derived from the rank of"
 * the score r_j, and anneals tau from 1.0 to 0.01. It does not give the
 * logit; we use the signed distance of the rank from the top-K boundary as a
 * fraction of the layer:
 *
 *   rho_j = rank of r_j among the token's F scores (0 = largest; ties go to
 *           the lower index and NaN ranks last: the order srt_topk keeps),
 *   l_j   = (K - 1/2 - rho_j) / F,
 *   m_j   = sigmoid(l_j / tau),            tau > 0;
 *   m_j   = [rho_j < K],                   tau = 0 (hard top-K).
 *
 * Why this form: the top-K neurons get l_j > 0 and the rest l_j < 0, so the
 * mask is symmetric about the boundary and sigmoid(l/tau) -> hard top-K as
 * tau -> 0 for every F; dividing by F makes tau a fraction of the layer, so
 * one schedule means the same for every width and for both scores (CLAWS's
 * |phi(u)| c_j and CATS's |phi(u)| have unrelated scales, and a rank is
 * blind to scale). l_j runs from about d (the top neuron, d = K / F) down
 * to d - 1, so at tau = 1 the mask runs from sigmoid(d) to sigmoid(d - 1)
 * (0.62 .. 0.38 at d = 0.5: every neuron partly on), and at tau = 0.01
 * every neuron more than 3% of F from the boundary is within 0.05 of 0
 * or 1.
 * Gradient: a rank is piecewise constant in the scores, so dm/dr = 0 almost
 * everywhere (the relaxation passes no gradient to W_g, which is frozen
 * anyway); the loss reaches h through h' = m * h only, which the backward
 * pass differentiates as the elementwise scaling it is (forward.h).
 *
 * score [F], mask [F] (out), scratch [2F]. Returns sum_j m_j (NAN when out of
 * memory). The student computes the F values of sigmoid once per tau. */
double sc_soft_topk(const float *score, int64_t F, int64_t K, double tau, float *mask, uint64_t *scratch);

/* ---- the adapter -------------------------------------------------------------- */

/* LoRA on W_d of every layer: A [L, r, F] (PEFT lora_A), B [L, D, r]
 * (lora_B); the adapted down projection is W_d + scale * B A, scale =
 * alpha / r. */
typedef struct sc_lora_params {
    int64_t n_layers, dim, ffn, rank;
    double alpha, scale;
    float *A, *B;
} sc_lora_params;

/* The default rank: min(128, dim, ffn) (a rank above min(dim, ffn) adds nothing). */
int64_t sc_lora_default_rank(const sc_config *c);
/* Allocates an adapter of rank r (1..min(dim, ffn)) with alpha (> 0) and
 * PEFT's initialisation: A uniform in +-1/sqrt(F) (kaiming_uniform with
 * a = sqrt(5)), B = 0, so training starts from the unadapted model. The
 * random numbers come from seed alone. */
sc_status sc_lora_params_init(sc_lora_params *p, const sc_config *c, int64_t rank, double alpha, uint64_t seed,
                              sc_err *err);
void sc_lora_params_free(sc_lora_params *p);
/* Writes a PEFT adapter directory (created if missing): adapter_model.safetensors
 * (base_model.model.model.layers.L.mlp.down_proj.lora_{A,B}.weight, f32, and
 * the given string metadata) and adapter_config.json (peft_type LORA, r,
 * lora_alpha, target_modules [down_proj], base_model_name_or_path). Each file
 * is written atomically. */
sc_status sc_lora_params_save(const sc_lora_params *p, const char *dir, const char *base_model, const sc_st_meta *meta,
                              size_t n_meta, sc_err *err);

/* ---- the distillation loss over vocabulary chunks (train_loss.c) ------------- */

typedef struct sc_distill sc_distill;
/* Scratch for windows of up to max_ctx tokens: two [max_ctx x chunk] blocks
 * of logits (at most 64 MiB each) instead of two [max_ctx x vocab] ones. */
sc_status sc_distill_create(const sc_model *m, int64_t max_ctx, sc_distill **out, sc_err *err);
void sc_distill_free(sc_distill *d);
/* The sums over t < n - 1 of KL(student || teacher) (*kl), KL(teacher ||
 * student) (*fkl) and the next-token cross-entropy (*ce) for the last window
 * ids[0..n) run on the chunked training workspace f (the student,
 * sc_forward_create_train_ex with SC_TRAIN_CHUNKED_LOSS), the teacher given
 * by its final norm output on the same ids, teacher_xn [n, dim]
 * (sc_forward_final_norm). With backward, then the backward pass of f from
 * the loss KL + fw FKL + w CE, with gradient hooks as sc_backward_run's.
 * With fw = 0, the same quantities as sc_loss_distill on full logits. */
sc_status sc_distill_window(sc_distill *d, sc_forward *f, const int32_t *ids, int64_t n, const float *teacher_xn,
                            double w, double fw, const sc_hooks *hooks, bool backward, double *kl, double *fkl,
                            double *ce, sc_err *err);

/* ---- one sequence: loss and gradient --------------------------------------- */

typedef struct sc_lora_student sc_lora_student;

/* A student for sequences of up to max_ctx tokens: the model with the adapter
 * p (borrowed; its values may change between calls) added to W_d, and every
 * layer's h masked by sc_soft_topk of the scores |phi(u_j)| * c[l * F + j]
 * (c [L, F]: CLAWS multipliers; NULL: 1, CATS) with K =
 * srt_topk_count(density, F). */
sc_status sc_lora_student_create(const sc_model *m, int64_t max_ctx, const sc_lora_params *p, const float *c,
                                 double density, sc_lora_student **out, sc_err *err);
void sc_lora_student_free(sc_lora_student *s);
/* The mask temperature of later windows (0: hard top-K). */
void sc_lora_student_set_tau(sc_lora_student *s, double tau);
/* Observer of the masks the student applies (fn NULL: none): called once
 * per layer and position of every student forward pass (not for the
 * backward pass's recomputations) with the mask [F]. */
typedef void (*sc_mask_fn)(void *user, int64_t layer, int64_t pos, const float *mask, int64_t F);
void sc_lora_student_observe(sc_lora_student *s, sc_mask_fn fn, void *user);

typedef struct sc_window_loss {
    double loss;      /* sum over scored positions of KL(student || teacher) + fkl_weight * KL(teacher ||
                         student) + ce_weight * CE */
    double kl, fkl, ce; /* the three sums (fkl: 0 for the LoRA student) */
    int64_t scored;   /* positions scored: n - 1 */
    double mask_sum;  /* sum of every mask value of every layer and position */
    int64_t mask_rows;/* (layer, position) pairs masked */
} sc_window_loss;

/* One sequence ids[0..n) (2 <= n <= max_ctx): the teacher (the dense model
 * without the adapter, run on the fly; kept as its final norm output), the
 * student's forward pass, the loss over vocabulary chunks (sc_distill), and
 * its backward pass, adding d loss / dA and d loss / dB into gA [L, r, F] and
 * gB [L, D, r] (not normalised; NULL: the loss only, no backward pass). */
sc_status sc_lora_student_window(sc_lora_student *s, const int32_t *ids, int64_t n, double ce_weight, float *gA,
                                 float *gB, sc_window_loss *out, sc_err *err);
/* The student's next-token cross-entropy of one sequence, summed (no
 * teacher, no gradient); with tau 0 this is what eval measures on the fused
 * model routed by hard top-K. */
sc_status sc_lora_student_nll(sc_lora_student *s, const int32_t *ids, int64_t n, double *nll, sc_err *err);

/* ---- the training loop ---------------------------------------------------------- */

/* The trainers, found by name (`train --method`): each ranks the neurons with
 * a runtime router's score, which also routes the recovered model. */
typedef struct sc_train_method {
    const char *name;   /* "claws-lora" */
    const char *router; /* the router the fused artifact runs ("claws") */
    bool multipliers;   /* scores |phi(u_j)| c_j with a calibration's CLAWS c_j (--calib), else |phi(u_j)| */
    bool thresholds;    /* learns the router's thresholds (CWIC, from a calibration of its statistics), optionally
                           with a LoRA or all weights, rather than a LoRA for a top-K router */
} sc_train_method;
/* NULL for an unknown name. */
const sc_train_method *sc_train_method_find(const char *name);
/* "claws-lora or cats-lora" */
const char *sc_train_method_names(void);

typedef struct sc_train_opts {
    const char *method;   /* "claws-lora" or "cats-lora": which score ranks the neurons (recorded) */
    const float *c;       /* [L, F] multipliers for claws-lora; NULL for cats-lora */
    double density;       /* K = srt_topk_count(density, F) */
    int64_t rank;         /* 0: sc_lora_default_rank */
    double alpha;         /* 0: = rank */
    int64_t steps;        /* optimizer steps */
    int64_t batch, grad_accum; /* sequences per step = batch * grad_accum */
    int64_t seq_len;      /* longer sequences are cut; 0: the model's context */
    double lr, beta1, beta2, adam_eps, weight_decay;
    double warmup;        /* fraction of steps with a linear warm-up (0.025) */
    double tau0, tau1, anneal; /* tau from tau0 to tau1 linearly over the first `anneal` of the steps, then held */
    double ce_weight;     /* 0.2 */
    uint64_t seed;        /* adapter initialisation and the order of sequences */
    FILE *progress;       /* NULL: quiet */
    /* checkpoints of the trainer state (adapter, AdamW moments, step, loss
     * history): every checkpoint_every steps to checkpoint_path (0: never);
     * resume_path: continue from such a file, which must come from the same
     * model, data and options; the result equals an uninterrupted run's. */
    int64_t checkpoint_every;
    const char *checkpoint_path, *resume_path;
    /* cwic (the CWIC paper, Sections 3.1-3.4, Appendix B) */
    double cwic_apr;        /* target active-parameter reduction (2) */
    double cwic_apr_warmup; /* fraction of the steps over which the APR target rises linearly from 1 (0.5) */
    double cwic_alpha_eps;  /* pseudo-derivative bandwidth eps = alpha_eps std (0.1, Appendix B) */
    double cwic_ap_weight;  /* lambda of the active-parameter loss (10, Appendix B) */
    double cwic_beta_dist;  /* EMA of the mean and std (0.99, Appendix B) */
    double cwic_theta_min;  /* theta <- max(theta, theta_min) after each update (0) */
    double cwic_theta0;     /* the initial theta when not taken from a fit (0.1) */
    bool cwic_weights;      /* every linear weight trains beside theta (--train all; false) */
} sc_train_opts;

/* The paper's recipe (Appendix F): rank 0 (default), alpha = rank, lr 1e-5,
 * betas 0.9 / 0.999, eps 1e-8, weight decay 0, warm-up 2.5%, tau 1.0 ->
 * 0.01 over 60% of the steps, CE weight 0.2; batch 8, grad_accum 1,
 * steps 2500 (the paper's values, far too many for a CPU: set them). */
void sc_train_opts_default(sc_train_opts *o);

/* The learning rate of step s (0-based) of o->steps: o->lr * (s + 1) / W for
 * s < W = round(warmup * steps), then o->lr * (1 + cos(pi * (s - W) /
 * (steps - W))) / 2. */
double sc_train_lr(const sc_train_opts *o, int64_t s);
/* The temperature of step s: tau0 + (tau1 - tau0) * min(1, s / (anneal * steps)). */
double sc_train_tau(const sc_train_opts *o, int64_t s);
/* One AdamW step on n parameters (PyTorch's torch.optim.AdamW, amsgrad off):
 * p -= lr * wd * p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
 * p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps), t = 1, 2, ... */
void sc_adamw_step(float *p, const float *g, float *m, float *v, size_t n, double lr, double b1, double b2, double eps,
                   double wd, int64_t t);

/* Per step: the mean over the step's scored positions. */
typedef struct sc_train_step {
    double loss, kl, ce, density, lr, tau;
    int64_t tokens; /* tokens run (teacher and student each) */
    double fkl;     /* cwic: KL(teacher || student) per token (kl is KL(student || teacher)) */
    double apr, apr_target, ap_loss; /* cwic: the step's active-parameter reduction, its target, (min(APR - target, 0))^2 */
} sc_train_step;

typedef struct sc_train_result {
    int64_t steps_run;      /* this process (a resumed run counts its own) */
    int64_t first_step;     /* 0, or where a resumed run started */
    int64_t tokens;         /* tokens this process ran */
    int64_t train_seqs;     /* sequences in the data (>= 2 tokens) */
    double seconds;
    sc_train_step *history; /* [steps]: every step, a resumed run's earlier ones from the checkpoint */
} sc_train_result;
void sc_train_result_free(sc_train_result *r);

/* ---- the shared loop: data order, schedules, progress, checkpoints ---------- */

/* A checkpointed array of a trainer (parameters, optimizer moments). */
typedef struct sc_train_tensor {
    const char *name;
    float *data;
    size_t n;
    bool nonneg; /* a second moment: a checkpoint holding a negative value is refused */
} sc_train_tensor;

/* What a trainer plugs into sc_train_run. Per step k the loop sets h->lr
 * (sc_train_lr), calls begin, then window for each of the step's
 * batch x grad_accum sequences (in the seeded order), sets h->loss, kl, fkl
 * and ce to the means over the step's scored positions of the sums in
 * sc_window_loss, and calls update with the step's sums (AdamW step
 * t = k + 1; the task may add to h->loss and sets its own columns). */
typedef struct sc_train_task {
    void *user;
    const char *run; /* the task's options as JSON members ("\"rank\":64,..."): part of a checkpoint's identity */
    const sc_train_tensor *state;
    size_t n_state;
    sc_status (*begin)(void *user, int64_t k, sc_train_step *h, sc_err *err);
    sc_status (*window)(void *user, const int32_t *ids, int64_t n, sc_window_loss *out, sc_err *err);
    sc_status (*update)(void *user, int64_t k, const sc_window_loss *sum, sc_train_step *h, sc_err *err);
    void (*describe)(void *user, const sc_train_step *h, char *buf, size_t cap); /* the progress line's text */
} sc_train_task;

/* The longest sequence the loop hands a task (the workspace a task creates). */
int64_t sc_train_window_cap(const sc_model *m, const sc_dataset *d, const sc_train_opts *o);
/* Runs o->steps steps of tk over the sequences of d (checkpoints, resume and
 * progress as o says). */
sc_status sc_train_run(const sc_model *m, const sc_dataset *d, const sc_train_opts *o, const sc_train_task *tk,
                       sc_train_result *res, sc_err *err);

/* Trains p (created by the caller with sc_lora_params_init, or anything of
 * the model's shape) on the sequences of d. */
sc_status sc_train_lora(const sc_model *m, const sc_dataset *d, const sc_train_opts *o, sc_lora_params *p,
                        sc_train_result *res, sc_err *err);

/* ---- CWIC threshold learning (train_cwic.c; the CWIC paper) ----------------
 * Every linear layer runs as the CWIC router does (stripes of `stripe` rows,
 * stripe-column (s, i) active iff |x_i - mean_i| >= theta_si std_i, output
 * SGMM(x - mean, W, theta std) + W mean); theta is learned through the
 * JumpReLU-style pseudo-derivative, x's gradient passes straight through,
 * mean and std follow an EMA of the student's batch statistics; optionally a
 * LoRA adapter on W_d, or every linear weight (o->cwic_weights: owned f32
 * copies of W_q W_k W_v W_o W_g W_u W_d, the model's norms and embeddings
 * frozen), trains beside theta. The derivation is at the top of
 * train_cwic.c. */
typedef struct sc_cwic_student sc_cwic_student;
/* A student for sequences of up to max_ctx tokens. Its stripes, its initial
 * mean and std and (init_theta) its initial theta come from init (a plan of
 * sc_cwic_prepare: a calibration's statistics, a training-free fit or an
 * imported file); without init_theta every theta starts at o->cwic_theta0.
 * lora (borrowed, NULL: thresholds only) trains beside theta; with
 * o->cwic_weights (no lora) every linear weight does, as owned f32 copies,
 * refused (SC_ENOMEM, one line naming the need) when they and their
 * optimizer state (sc_cwic_weights_bytes) exceed sc_mem_available. o is
 * borrowed. */
sc_status sc_cwic_student_create(const sc_model *m, int64_t max_ctx, const sc_cwic_plan *init, bool init_theta,
                                 const sc_train_opts *o, sc_lora_params *lora, sc_cwic_student **out, sc_err *err);
void sc_cwic_student_free(sc_cwic_student *s);
/* Bytes of training every linear weight: 16 per weight (the f32 copy, its
 * gradient and AdamW's two moments). */
uint64_t sc_cwic_weights_bytes(const sc_config *c);
/* SC_ENOMEM, one line naming the need, when sc_cwic_weights_bytes exceeds
 * sc_mem_available (known); the student checks it, a caller may check first. */
sc_status sc_cwic_weights_check(const sc_config *c, sc_err *err);
/* One sequence: the dense teacher, the student, the loss KL(student ||
 * teacher) + KL(teacher || student) over vocabulary chunks (kl, fkl; ce the
 * student's cross-entropy, not trained on), mask_sum / mask_rows the active /
 * dense parameters of the student's linear layers; with backward, the
 * pseudo-gradient of the loss sum added to every theta's gradient (and the
 * adapter's), and every theta's band count (tokens within alpha_eps / 2 of
 * it) incremented. */
sc_status sc_cwic_student_window(sc_cwic_student *s, const int32_t *ids, int64_t n, bool backward, sc_window_loss *out,
                                 sc_err *err);
/* The student's next-token cross-entropy of one sequence, summed: what eval
 * --method cwic measures with the saved thresholds. */
sc_status sc_cwic_student_nll(sc_cwic_student *s, const int32_t *ids, int64_t n, double *nll, sc_err *err);
/* theta [ns, in] of (layer, projection), writable (then sc_cwic_student_refresh),
 * and its gradient accumulator (grad, may be NULL); NULL out of range. */
float *sc_cwic_student_theta(sc_cwic_student *s, int64_t layer, int proj, int64_t *ns, int64_t *in, float **grad);
/* The mean [in] (returned) and std of the input of (layer, projection). */
const float *sc_cwic_student_stats(const sc_cwic_student *s, int64_t layer, int proj, const float **std);
sc_status sc_cwic_student_refresh(sc_cwic_student *s, sc_err *err);
/* Verification: with relaxed set, the forward pass uses the ramp
 * G = clamp((|z| / std - theta) / alpha_eps + 1/2, 0, 1) instead of the step,
 * the function whose exact derivative in theta is the pseudo-derivative; the
 * backward pass is unchanged. Where every other matrix is dense (theta <=
 * -alpha_eps / 2) the pseudo-gradient of a theta is then the exact gradient
 * of the loss, which finite differences can check. */
void sc_cwic_student_relax(sc_cwic_student *s, bool relaxed);
void sc_cwic_student_zero_grad(sc_cwic_student *s);
/* The adapter's gradient accumulators gA [L, r, F], gB [L, D, r] (false
 * without an adapter). After changing the adapter: sc_cwic_student_refresh. */
bool sc_cwic_student_lora_grad(sc_cwic_student *s, float **gA, float **gB);
/* With o->cwic_weights: the trained matrix [out, in] of (layer, projection),
 * writable (then sc_cwic_student_refresh), and its gradient accumulator
 * (grad, may be NULL); NULL otherwise. */
float *sc_cwic_student_weight(sc_cwic_student *s, int64_t layer, int proj, float **grad);
/* With o->cwic_weights: [L * SC_LIN_COUNT] the trained matrices (as
 * sc_forward_set_weights takes them; sc_model_save_hf writes them); NULL
 * otherwise. */
const float *const *sc_cwic_student_weights(const sc_cwic_student *s);
/* Writes theta, mean and std in the thresholds file the CWIC router reads
 * (`eval`/`pack --method cwic --params thresholds=FILE`: layers.L.P.theta
 * [ns, in], layers.L.P.mean / std [in], metadata stripe_size), atomically,
 * with extra metadata. */
sc_status sc_cwic_student_save(const sc_cwic_student *s, const char *path, const sc_st_meta *extra, size_t n_extra,
                               sc_err *err);
/* The APR target of step k: 1 + (apr - 1) min(1, (k + 1) / (apr_warmup steps)). */
double sc_train_apr_target(const sc_train_opts *o, int64_t k);
/* Trains s on the sequences of d: AdamW on theta (learning rate x sqrt(in),
 * no weight decay, clamped at theta_min), the adapter or the weights (the
 * learning rate and weight decay of o), the statistics' EMA, the AP loss
 * with its warm-up; the shared loop's checkpoints hold theta, the moments,
 * the statistics and the adapter or the weights. */
sc_status sc_train_cwic(const sc_model *m, const sc_dataset *d, const sc_train_opts *o, sc_cwic_student *s,
                        sc_train_result *res, sc_err *err);

#endif
