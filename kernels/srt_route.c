/* srt_route.c - routing (see srt_route.h). */
#include "srt_route.h"

#include "srt.h"
#include "srt_kern.h"

#include <math.h>
#include <string.h>

static const char *names[SRT_ROUTER_COUNT] = {"dense", "cats", "cats-threshold", "claws", "oracle", "griffin"};

const char *srt_router_name(srt_router r) { return (unsigned)r < SRT_ROUTER_COUNT ? names[r] : "?"; }

int srt_router_from_name(const char *name) {
    for (int i = 0; i < SRT_ROUTER_COUNT; i++)
        if (strcmp(name, names[i]) == 0) return i;
    return -1;
}

int64_t srt_topk_count(double density, int64_t n) {
    if (!(density > 0)) return 0;
    if (density >= 1) return n;
    int64_t k = (int64_t)llround(density * (double)n);
    return k < 0 ? 0 : (k > n ? n : k);
}

int64_t srt_topk(const float *score, int64_t n, int64_t k, int32_t *idx, void *scratch) {
    if (k <= 0 || n <= 0) return 0;
    if (k > n) k = n;
    /* the runtime's exact O(n) radix selection; int32 and uint32 may alias */
    if (srt_select_topk_ws((uint32_t *)idx, score, n, k, 0, scratch) != SRT_OK) return 0;
    return k;
}

int64_t srt_threshold(const float *x, int64_t n, float t, int32_t *idx) {
    if (n <= 0) return 0;
    /* the best kernel for this CPU (the dispatch is frozen once) */
    return srt_kernels_get(srt_isa_best())->compact((uint32_t *)idx, x, NULL, t, n);
}

void srt_score_gate(float *out, const float *a, const float *c, int64_t n) {
    if (c)
        for (int64_t i = 0; i < n; i++) out[i] = fabsf(a[i]) * c[i];
    else
        for (int64_t i = 0; i < n; i++) out[i] = fabsf(a[i]);
}

/* ---- the routing plan's rules (srt_route.h) ---- */

double srt_thr_grid(int i) { return 0.05 * (double)(i + 1); }

float srt_table_threshold(const float t[SRT_THR_GRID], double s) {
    if (!(s > 1e-12)) return -1.0f;
    double q = s / 0.05 - 1.0;
    if (q <= 1e-9) return q >= -1e-9 ? t[0] : (float)((double)t[0] * s / 0.05);
    if (q >= (double)(SRT_THR_GRID - 1) - 1e-9) return t[SRT_THR_GRID - 1];
    int i = (int)floor(q);
    double f = q - (double)i;
    if (f < 1e-9) return t[i];
    if (f > 1.0 - 1e-9) return t[i + 1];
    if (t[i] > 0.0f && t[i + 1] > 0.0f) return (float)exp((1.0 - f) * log((double)t[i]) + f * log((double)t[i + 1]));
    return (float)((1.0 - f) * (double)t[i] + f * (double)t[i + 1]);
}

float srt_cett_neuron_threshold(double t, double wnorm) {
    if (t < 0) return -1.0f;
    return wnorm > 0 ? (float)(t / wnorm) : INFINITY;
}

void srt_cett_table_thresholds(const float table[SRT_THR_GRID], const float *wnorm, double density, float *thr,
                               int64_t n) {
    double t = srt_table_threshold(table, 1.0 - density);
    for (int64_t j = 0; j < n; j++) thr[j] = srt_cett_neuron_threshold(t, (double)wnorm[j]);
}

int64_t srt_route_cett(const srt_kernels *k, uint32_t *idx, float *scratch, const float *h, const float *thr,
                       float factor, int64_t n) {
    if (!(factor > 0.0f)) return -1;
    if (n <= 0) return 0;
    if (!k) k = srt_kernels_get(srt_isa_best());
    /* |h_j| > f thr_j  <=>  |h_j / f| > thr_j, with 1/f once per token */
    const float inv = 1.0f / factor;
    for (int64_t j = 0; j < n; j++) scratch[j] = h[j] * inv;
    return k->compact(idx, scratch, thr, 0.0f, n);
}

void srt_clada_signals(const float *logits, int64_t V, int32_t next, double *surprisal, double *entropy) {
    double mx = logits[0];
    for (int64_t v = 1; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    double z = 0.0, ez = 0.0;
    for (int64_t v = 0; v < V; v++) {
        double e = exp((double)logits[v] - mx);
        z += e;
        ez += e * ((double)logits[v] - mx);
    }
    double logz = log(z);
    *surprisal = logz - ((double)logits[next] - mx);
    *entropy = logz - ez / z;
}

float srt_clada_factor(const srt_clada *c, double surprisal, double entropy) {
    return (float)(1.0 + c->lambda * (surprisal > c->tau_s) + c->gamma * (entropy > c->tau_h));
}

float srt_clada_class_factor(const srt_clada *c, int k) {
    return srt_clada_factor(c, (k & 1) ? INFINITY : -INFINITY, (k & 2) ? INFINITY : -INFINITY);
}

double srt_table_density(const float table[SRT_THR_GRID], double t) {
    if (t > (double)srt_table_threshold(table, 1.0)) return 0.0;
    if (!(t > -1.0)) return 1.0;
    double lo = 0.0, hi = 1.0; /* table(lo) < t <= table(hi): 1 - the least s reaching t */
    for (int i = 0; i < 60; i++) {
        double mid = 0.5 * (lo + hi);
        if ((double)srt_table_threshold(table, mid) < t)
            lo = mid;
        else
            hi = mid;
    }
    return 1.0 - hi;
}

float srt_clada_table_base(const float table[SRT_THR_GRID], const srt_clada *c, double density) {
    double fsum = 0.0;
    bool scaled = false;
    for (int k = 0; k < SRT_CLADA_CLASSES; k++) {
        fsum += c->frac[k];
        scaled = scaled || (c->frac[k] > 0.0 && srt_clada_class_factor(c, k) != 1.0f);
    }
    if (density >= 1.0) return -1.0f;
    if (!(fsum > 0.0) || !scaled) return srt_table_threshold(table, 1.0 - density);
    /* base sparsity u: the scaled rule's mean density is non-increasing in u */
    double lo = 0.0, hi = 1.0;
    for (int i = 0; i < 60; i++) {
        double u = 0.5 * (lo + hi), t = (double)srt_table_threshold(table, u), d = 0.0;
        for (int k = 0; k < SRT_CLADA_CLASSES; k++)
            if (c->frac[k] > 0.0)
                d += c->frac[k] / fsum * srt_table_density(table, t * (double)srt_clada_class_factor(c, k));
        if (d > density)
            lo = u;
        else
            hi = u;
    }
    return srt_table_threshold(table, hi);
}

void srt_clada_table_thresholds(const float table[SRT_THR_GRID], const float *wnorm, const srt_clada *c,
                                double density, float *thr, int64_t n) {
    double t = srt_clada_table_base(table, c, density);
    for (int64_t j = 0; j < n; j++) thr[j] = srt_cett_neuron_threshold(t, (double)wnorm[j]);
}

int64_t srt_larosa_keep(double split, double density, int64_t n) {
    return srt_topk_count(1.0 - fmin(1.0, split * (1.0 - density)), n);
}

void srt_zero_dead(float *v, int64_t n, const uint32_t *idx, int64_t k) {
    int64_t next = 0;
    for (int64_t i = 0; i < n; i++) {
        if (next < k && idx[next] == (uint32_t)i)
            next++;
        else
            v[i] = 0.0f;
    }
}

void srt_teal_curve_at(const float *curve, int64_t rows, double s, double out[SRT_NPROJ]) {
    const int64_t C = SRT_TEAL_CURVE_COLS;
    for (int p = 0; p < SRT_NPROJ; p++) out[p] = 0.0;
    if (rows < 1) return;
    int64_t r = 0; /* the last row whose effective sparsity is <= s */
    while (r + 1 < rows && (double)curve[(r + 1) * C + SRT_NPROJ] <= s) r++;
    const float *a = curve + r * C;
    for (int p = 0; p < SRT_NPROJ; p++) out[p] = (double)a[p];
    if (r + 1 >= rows || !(s > (double)a[SRT_NPROJ])) return;
    const float *b = a + C;
    double span = (double)b[SRT_NPROJ] - (double)a[SRT_NPROJ], f = span > 0 ? (s - (double)a[SRT_NPROJ]) / span : 0.0;
    for (int p = 0; p < SRT_NPROJ; p++) out[p] = (double)a[p] + f * ((double)b[p] - (double)a[p]);
}

float srt_cwic_tau(float theta, float std) { return isinf(theta) ? INFINITY : theta * std; }

int64_t srt_cwic_stripes(int64_t out, int64_t S) { return S > 0 ? (out + S - 1) / S : 0; }

void srt_cwic_center(float *z, const float *x, const float *mean, int64_t in) {
    for (int64_t i = 0; i < in; i++) z[i] = x[i] - mean[i];
}

int64_t srt_cwic_stripe_live(uint32_t *idx, const float *z, const float *tau_s, int64_t in) {
    int64_t n = 0;
    for (int64_t i = 0; i < in; i++)
        if (fabsf(z[i]) >= tau_s[i]) idx[n++] = (uint32_t)i;
    return n;
}

int64_t srt_route_cwic(float *z, uint32_t *idx, int64_t *off, const float *x, const float *mean, const float *tau,
                       int64_t in, int64_t out, int64_t S) {
    srt_cwic_center(z, x, mean, in);
    int64_t active = 0, ns = srt_cwic_stripes(out, S);
    off[0] = 0;
    for (int64_t s = 0; s < ns; s++) {
        int64_t rows = out - s * S < S ? out - s * S : S, n = srt_cwic_stripe_live(idx + off[s], z, tau + s * in, in);
        off[s + 1] = off[s] + n;
        active += rows * n;
    }
    return active;
}

const char *srt_proj_name(int p) {
    static const char *proj[SRT_NPROJ] = {"q", "k", "v", "o", "gate", "up", "down"};
    return p >= 0 && p < SRT_NPROJ ? proj[p] : "?";
}
