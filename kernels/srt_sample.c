/* srt_sample.c - the token sampler of llama2.c's run.c (see srt.h): one
 * definition for `sparsecal run`/`generate` (calib/eval.c wraps it) and for
 * programs that decode through the library, so a seed picks the same tokens
 * everywhere. Single precision throughout, in the order written here. */
#include <math.h>
#include <stdlib.h>

#include "srt.h"

void srt_sampler_init(srt_sampler *s, float temperature, float top_p, uint64_t seed) {
    s->temperature = temperature;
    s->top_p = top_p;
    s->state = seed ? seed : 0x2545F4914F6CDD1Dull;
}

/* xorshift64* */
static uint32_t random_u32(uint64_t *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (uint32_t)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

static float random_f32(uint64_t *state) { return (float)(random_u32(state) >> 8) / 16777216.0f; }

static int32_t argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

static void softmax(float *x, int64_t n) {
    float mx = x[0];
    for (int64_t i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    for (int64_t i = 0; i < n; i++) x[i] /= sum;
}

typedef struct prob_idx {
    float prob;
    int32_t index;
} prob_idx;

static int cmp_desc(const void *a, const void *b) {
    const prob_idx *x = a, *y = b;
    if (x->prob > y->prob) return -1;
    if (x->prob < y->prob) return 1;
    return 0;
}

int32_t srt_sampler_sample(srt_sampler *s, float *logits, int64_t n, float *scratch) {
    if (n <= 0 || n > INT32_MAX) return -1;
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(logits[i])) return -1;
    int32_t best = argmax(logits, n);
    if (s->temperature == 0.0f) return best;
    for (int64_t i = 0; i < n; i++) logits[i] /= s->temperature;
    if (!isfinite(logits[best])) return best; /* a temperature so small the scaled logits overflow: greedy */
    softmax(logits, n);
    float coin = random_f32(&s->state);
    if (s->top_p <= 0.0f || s->top_p >= 1.0f) {
        float cdf = 0.0f;
        for (int64_t i = 0; i < n; i++) {
            cdf += logits[i];
            if (coin < cdf) return (int32_t)i;
        }
        return (int32_t)(n - 1);
    }
    /* top-p: keep the smallest set whose cumulative probability exceeds top_p */
    prob_idx *pi = (prob_idx *)(void *)scratch;
    int64_t n0 = 0;
    const float cutoff = (1.0f - s->top_p) / (float)(n - 1);
    for (int64_t i = 0; i < n; i++)
        if (logits[i] >= cutoff) pi[n0++] = (prob_idx){logits[i], (int32_t)i};
    /* top_p <= 1/n can put the cutoff above every probability (uniform logits): the nucleus is never empty,
       it holds at least the most probable token */
    if (n0 == 0) return best;
    qsort(pi, (size_t)n0, sizeof *pi, cmp_desc);
    float cum = 0.0f;
    int64_t last = n0 - 1;
    for (int64_t i = 0; i < n0; i++) {
        cum += pi[i].prob;
        if (cum > s->top_p) {
            last = i;
            break;
        }
    }
    float r = coin * cum, cdf = 0.0f;
    for (int64_t i = 0; i <= last; i++) {
        cdf += pi[i].prob;
        if (r < cdf) return pi[i].index;
    }
    return pi[last].index;
}
