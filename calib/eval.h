/* eval.h - teacher-forced perplexity and text generation on top of the
 * reference forward pass. */
#ifndef SC_EVAL_H
#define SC_EVAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "data.h"
#include "forward.h"
#include "srt.h"

typedef struct sc_ppl_result {
    double nll_sum;    /* sum of -log p over scored positions */
    int64_t n_scored;  /* positions scored */
    int64_t n_seqs;    /* sequences evaluated */
    int64_t n_windows; /* forward windows run */
    int64_t n_tokens;  /* tokens run through the model */
    double seconds;
} sc_ppl_result;

/* Every sequence is scored from its start: position t predicts token t+1.
 * A sequence longer than ctx is cut into windows of ctx tokens that overlap
 * by one token, so every token after the first is predicted exactly once
 * (each window restarts the context). progress (may be NULL) receives a
 * status line now and then. */
sc_status sc_eval_ppl(const sc_model *m, const sc_dataset *d, int64_t ctx, const sc_hooks *hooks, FILE *progress,
                      sc_ppl_result *out, sc_err *err);

/* The general form: before_window (may be NULL) runs before each window's
 * scored forward pass, may use the workspace for a pass of its own (e.g.
 * GRIFFIN's prompt statistics), and sets *score_from: only predictions made
 * at positions >= score_from count (0 = all). */
typedef sc_status (*sc_window_fn)(void *user, sc_forward *f, const int32_t *ids, int64_t n, int64_t *score_from,
                                  sc_err *err);
typedef struct sc_eval_opts {
    int64_t ctx;
    const sc_hooks *hooks;
    sc_window_fn before_window;
    void *user;
    bool second_half; /* score only predictions of tokens in the second half of each window */
    FILE *progress;
} sc_eval_opts;

sc_status sc_eval_run(const sc_model *m, const sc_dataset *d, const sc_eval_opts *o, sc_ppl_result *out,
                      sc_err *err);

/* The windowing every scorer shares (ppl, eval, run --score): a window is
 * min(longest sequence, ctx) ids (SC_EARG when that is under 2: nothing to
 * score); a sequence longer than it is cut into windows of that many ids
 * overlapping by one (a window's last id is only predicted; it runs again as
 * the next window's first). */
sc_status sc_eval_window(const sc_dataset *d, int64_t ctx, const char *who, int64_t *win, sc_err *err);
/* Iterates over the windows of a sequence of n ids: start with *start = -1;
 * returns false after the last, else sets *start and *len. */
bool sc_window_next(int64_t n, int64_t win, int64_t *start, int64_t *len);
/* A scorer's progress line after `seqs` sequences: tokens run and the perplexity so far. */
void sc_eval_progress(sc_progress *pr, int64_t seqs, double tokens, double nll_sum, int64_t n_scored);

/* The llama2.c sampler: the runtime's (srt_sampler, kernels/srt.h), so `run`,
 * `generate` and programs decoding through libsparsert pick the same tokens
 * for a seed. */
typedef srt_sampler sc_sampler;

void sc_sampler_init(sc_sampler *s, float temperature, float top_p, uint64_t seed);
/* Samples from logits[n] (modified in place); scratch holds 2n floats.
 * Returns -1 when a logit is NaN or inf (nothing to sample from: the caller
 * reports where the model went non-finite, finite.h). */
int32_t sc_sampler_sample(sc_sampler *s, float *logits, int64_t n, float *scratch);
/* Top-k before the sampler (temperature, top-p): every logit below the k-th
 * largest becomes -FLT_MAX (ties with it stay). k <= 0 or k >= n: nothing
 * changes. scratch holds n floats. */
void sc_logits_top_k(float *logits, int64_t n, int64_t k, float *scratch);

typedef struct sc_gen_opts {
    int64_t steps;     /* total positions including BOS and prompt (llama2.c's -n; the CLI's --steps) */
    float temperature; /* 0 = greedy */
    float top_p;
    uint64_t seed;
    int64_t top_k;     /* 0: off */
} sc_gen_opts;

typedef struct sc_gen_result {
    sc_tokens tokens;  /* BOS + prompt + generated */
    int64_t n_prompt;  /* BOS + prompt tokens */
    double seconds;    /* generation time (after the prompt) */
} sc_gen_result;

/* Generates from BOS + prompt tokens, writing decoded text to out (may be
 * NULL) as it goes. Stops at steps, at BOS (as llama2.c does) or at EOS. */
sc_status sc_generate(const sc_model *m, const sc_tokenizer *tok, const sc_tokens *prompt, const sc_gen_opts *o,
                      FILE *out, sc_gen_result *res, sc_err *err);

#endif
