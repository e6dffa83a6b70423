#include "eval.h"

#include "finite.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

sc_status sc_eval_ppl(const sc_model *m, const sc_dataset *d, int64_t ctx, const sc_hooks *hooks, FILE *progress,
                      sc_ppl_result *out, sc_err *err) {
    sc_eval_opts o = {ctx, hooks, NULL, NULL, false, progress};
    return sc_eval_run(m, d, &o, out, err);
}

sc_status sc_eval_window(const sc_dataset *d, int64_t ctx, const char *who, int64_t *win, sc_err *err) {
    int64_t longest = 0;
    for (size_t i = 0; i < d->n_seqs; i++) longest = (int64_t)d->seqs[i].n > longest ? (int64_t)d->seqs[i].n : longest;
    *win = longest < ctx ? longest : ctx;
    if (*win < 2) return sc_errf(err, SC_EARG, "%s: every sequence is shorter than 2 tokens; nothing to score", who);
    return SC_OK;
}

void sc_eval_progress(sc_progress *pr, int64_t seqs, double tokens, double nll_sum, int64_t n_scored) {
    char extra[32];
    snprintf(extra, sizeof extra, "ppl %.4f", exp(nll_sum / (double)(n_scored ? n_scored : 1)));
    sc_progress_update(pr, seqs, tokens, extra);
}

bool sc_window_next(int64_t n, int64_t win, int64_t *start, int64_t *len) {
    int64_t s = *start < 0 ? 0 : *start + win - 1;
    if (win < 2 || s + 1 >= n) return false;
    *start = s;
    *len = n - s < win ? n - s : win;
    return true;
}

sc_status sc_eval_run(const sc_model *m, const sc_dataset *d, const sc_eval_opts *o, sc_ppl_result *out,
                      sc_err *err) {
    memset(out, 0, sizeof *out);
    int64_t ctx = o->ctx;
    if (ctx < 2) return sc_errf(err, SC_EARG, "context must be at least 2 tokens (got %lld)", (long long)ctx);
    int64_t win;
    SC_TRY(sc_eval_window(d, ctx, "ppl", &win, err));
    /* Scored over vocabulary chunks (no [T x vocab] logits) unless something reads the logits: a hook at
     * SC_TAP_LOGITS, or a window callback (CLADA takes its signals from the previous step's logits). */
    bool chunked = !o->before_window && !(o->hooks && (o->hooks->mask & SC_TAP_BIT(SC_TAP_LOGITS)));
    /* one layer's key/value cache unless the window callback continues the window token by token (CLADA) */
    unsigned whole = o->before_window ? 0 : SC_FWD_WHOLE_WINDOWS;
    sc_forward *f;
    SC_TRY(sc_forward_create_ex(m, win, win, (chunked ? SC_TRAIN_CHUNKED_LOSS : 0) | whole, &f, err));
    double *nll = malloc((size_t)win * sizeof(double));
    if (!nll) {
        sc_forward_free(f);
        return sc_errf(err, SC_ENOMEM, "out of memory");
    }
    int64_t V = m->cfg.vocab_size;
    double t0 = sc_now();
    sc_status st = SC_OK;
    sc_progress pr;
    sc_progress_start(&pr, o->progress, "ppl", "sequences", (int64_t)d->n_seqs);
    for (size_t i = 0; i < d->n_seqs && st == SC_OK; i++) {
        const sc_tokens *s = &d->seqs[i];
        if (s->n < 2) continue;
        out->n_seqs++;
        for (int64_t start = -1, n; sc_window_next((int64_t)s->n, win, &start, &n);) {
            int64_t from = o->second_half ? n / 2 - 1 : 0;
            if (from < 0) from = 0;
            if (o->before_window && (st = o->before_window(o->user, f, s->ids + start, n, &from, err))) break;
            const float *logits;
            st = sc_forward_run(f, s->ids + start, n, 0, o->hooks, &logits, err);
            if (!st && chunked) st = sc_forward_nll(f, nll, err);
            if (st) break;
            bool bad = false;
            if (chunked) {
                for (int64_t t = from; t + 1 < n; t++) bad |= !isfinite(nll[t]);
            } else {
                bad = sc_first_nonfinite(logits + from * V, (n - 1 - from) * V) >= 0;
                for (int64_t t = from; !bad && t + 1 < n; t++) {
                    const float *row = logits + t * V;
                    nll[t] = sc_logsumexp(row, V) - (double)row[s->ids[start + t + 1]];
                }
            }
            if (bad) {
                /* with hooks (a router) the pass is not the model's own: name the sequence only */
                st = !o->hooks && !o->before_window
                         ? sc_explain_nonfinite(m, s->ids + start, n, m->path, err)
                         : sc_errf(err, SC_EFORMAT, "non-finite logits in sequence %zu", i);
                break;
            }
            for (int64_t t = from; t + 1 < n; t++) {
                out->nll_sum += nll[t];
                out->n_scored++;
            }
            out->n_tokens += n;
            out->n_windows++;
        }
        sc_eval_progress(&pr, (int64_t)i + 1, (double)out->n_tokens, out->nll_sum, out->n_scored);
    }
    sc_progress_end(&pr);
    out->seconds = sc_now() - t0;
    free(nll);
    sc_forward_free(f);
    if (st == SC_OK && out->n_scored == 0) st = sc_errf(err, SC_EARG, "no position to score");
    return st;
}

/* ---- sampling (the runtime's sampler) ---- */

void sc_sampler_init(sc_sampler *s, float temperature, float top_p, uint64_t seed) {
    srt_sampler_init(s, temperature, top_p, seed);
}

int32_t sc_sampler_sample(sc_sampler *s, float *logits, int64_t n, float *scratch) {
    return srt_sampler_sample(s, logits, n, scratch);
}

void sc_logits_top_k(float *logits, int64_t n, int64_t k, float *scratch) {
    if (k <= 0 || k >= n) return;
    /* the k-th largest by quickselect on a copy (Hoare partition), then a cut below it */
    memcpy(scratch, logits, (size_t)n * sizeof *scratch);
    int64_t lo = 0, hi = n - 1, want = k - 1; /* index of the k-th largest in descending order */
    while (lo < hi) {
        float pivot = scratch[lo + (hi - lo) / 2];
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (scratch[i] > pivot) i++;
            while (scratch[j] < pivot) j--;
            if (i <= j) {
                float t = scratch[i];
                scratch[i++] = scratch[j];
                scratch[j--] = t;
            }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    float kth = scratch[want];
    for (int64_t i = 0; i < n; i++) /* the lowest finite value: the sampler refuses infinities, exp() makes it 0 */
        if (logits[i] < kth) logits[i] = -FLT_MAX;
}

static void emit(FILE *out, const sc_tokenizer *tok, int32_t prev, int32_t id) {
    if (!out || !tok) return;
    char buf[512];
    size_t k = sc_tokenizer_decode(tok, prev, id, buf, sizeof buf);
    fwrite(buf, 1, k, out);
    fflush(out);
}

sc_status sc_generate(const sc_model *m, const sc_tokenizer *tok, const sc_tokens *prompt, const sc_gen_opts *o,
                      FILE *out, sc_gen_result *res, sc_err *err) {
    memset(res, 0, sizeof *res);
    const sc_config *c = &m->cfg;
    int64_t steps = o->steps <= 0 || o->steps > c->max_seq_len ? c->max_seq_len : o->steps;
    int32_t bos = c->bos_id >= 0 ? c->bos_id : (tok ? sc_tokenizer_bos(tok) : -1);
    int32_t eos = c->eos_id >= 0 ? c->eos_id : (tok ? sc_tokenizer_eos(tok) : -1);
    if (bos < 0) return sc_errf(err, SC_EARG, "the model has no BOS token id");
    if (sc_tokens_push(&res->tokens, bos)) return sc_errf(err, SC_ENOMEM, "out of memory");
    for (size_t i = 0; prompt && i < prompt->n; i++)
        if (sc_tokens_push(&res->tokens, prompt->ids[i])) return sc_errf(err, SC_ENOMEM, "out of memory");
    res->n_prompt = (int64_t)res->tokens.n;
    if (res->n_prompt > steps)
        return sc_errf(err, SC_EARG, "the prompt (%lld tokens with BOS) fills all %lld steps",
                       (long long)res->n_prompt, (long long)steps);
    sc_forward *f;
    SC_TRY(sc_forward_create(m, steps, steps, &f, err));
    float *scratch = malloc((size_t)c->vocab_size * 4 * sizeof(float));
    if (!scratch) {
        sc_forward_free(f);
        return sc_errf(err, SC_ENOMEM, "out of memory");
    }
    float *row = scratch + 2 * c->vocab_size;
    sc_sampler smp;
    sc_sampler_init(&smp, o->temperature, o->top_p, o->seed);
    for (int64_t i = 1; i < res->n_prompt; i++) emit(out, tok, res->tokens.ids[i - 1], res->tokens.ids[i]);
    /* the prompt in one window, then one token at a time; like llama2.c, the
     * positions fed are 0 .. steps-1 and the token sampled after the last one
     * is still printed */
    const float *logits;
    sc_status st = sc_forward_run(f, res->tokens.ids, res->n_prompt, 0, NULL, &logits, err);
    const float *last = logits + (res->n_prompt - 1) * c->vocab_size;
    double t0 = sc_now();
    int64_t pos = res->n_prompt;
    while (st == SC_OK) {
        memcpy(row, last, (size_t)c->vocab_size * sizeof(float));
        sc_logits_top_k(row, c->vocab_size, o->top_k, scratch + 3 * c->vocab_size);
        int32_t next = sc_sampler_sample(&smp, row, c->vocab_size, scratch);
        if (next < 0) {
            st = sc_explain_nonfinite(m, res->tokens.ids, pos, m->path, err);
            break;
        }
        if (next == bos || next == eos) break;
        if (sc_tokens_push(&res->tokens, next)) {
            st = sc_errf(err, SC_ENOMEM, "out of memory");
            break;
        }
        emit(out, tok, res->tokens.ids[pos - 1], next);
        if (pos >= steps) break;
        st = sc_forward_run(f, &res->tokens.ids[pos], 1, pos, NULL, &logits, err);
        last = logits;
        pos++;
    }
    if (out) fputc('\n', out);
    res->seconds = sc_now() - t0;
    free(scratch);
    sc_forward_free(f);
    return st;
}
