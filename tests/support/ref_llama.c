#include "ref_llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *read_block(FILE *f, size_t n) {
    float *tmp = malloc(n * sizeof *tmp);
    double *out = malloc(n * sizeof *out);
    if (!tmp || !out || fread(tmp, sizeof(float), n, f) != n) {
        free(tmp);
        free(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) out[i] = tmp[i];
    free(tmp);
    return out;
}

bool ref_llama_load(ref_llama *r, const char *path) {
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    int h[7];
    if (fread(h, sizeof(int), 7, f) != 7) {
        fclose(f);
        return false;
    }
    r->dim = h[0];
    r->hidden = h[1];
    r->n_layers = h[2];
    r->n_heads = h[3];
    r->n_kv_heads = h[4];
    r->shared = h[5] > 0;
    r->vocab = abs(h[5]);
    r->seq_len = h[6];
    r->head_size = r->dim / r->n_heads;
    size_t D = (size_t)r->dim, H = (size_t)r->hidden, L = (size_t)r->n_layers;
    size_t kv = (size_t)r->n_kv_heads * (size_t)r->head_size;
    r->emb = read_block(f, (size_t)r->vocab * D);
    r->rms_att = read_block(f, L * D);
    r->wq = read_block(f, L * D * D);
    r->wk = read_block(f, L * D * kv);
    r->wv = read_block(f, L * D * kv);
    r->wo = read_block(f, L * D * D);
    r->rms_ffn = read_block(f, L * D);
    r->w1 = read_block(f, L * D * H);
    r->w2 = read_block(f, L * H * D);
    r->w3 = read_block(f, L * D * H);
    r->rms_final = read_block(f, D);
    if (r->shared) {
        r->wcls = r->emb;
    } else {
        double *skip = read_block(f, (size_t)r->seq_len * (size_t)r->head_size);
        free(skip);
        r->wcls = read_block(f, (size_t)r->vocab * D);
    }
    fclose(f);
    r->x = calloc(D, sizeof(double));
    r->xb = calloc(D, sizeof(double));
    r->xb2 = calloc(D, sizeof(double));
    r->hb = calloc(H, sizeof(double));
    r->hb2 = calloc(H, sizeof(double));
    r->q = calloc(D, sizeof(double));
    r->att = calloc((size_t)r->n_heads * (size_t)r->seq_len, sizeof(double));
    r->key_cache = calloc(L * (size_t)r->seq_len * kv, sizeof(double));
    r->value_cache = calloc(L * (size_t)r->seq_len * kv, sizeof(double));
    r->logits = calloc((size_t)r->vocab, sizeof(double));
    return r->emb && r->rms_final && r->wcls && r->logits && r->key_cache && r->value_cache;
}

void ref_llama_free(ref_llama *r) {
    double *p[] = {r->emb, r->rms_att, r->wq, r->wk, r->wv, r->wo, r->rms_ffn, r->w1, r->w2, r->w3, r->rms_final,
                   r->x, r->xb, r->xb2, r->hb, r->hb2, r->q, r->att, r->key_cache, r->value_cache, r->logits};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
    if (!r->shared) free(r->wcls);
    memset(r, 0, sizeof *r);
}

static void rmsnorm(double *o, const double *x, const double *w, int n) {
    double ss = 0;
    for (int j = 0; j < n; j++) ss += x[j] * x[j];
    ss = 1.0 / sqrt(ss / n + 1e-5);
    for (int j = 0; j < n; j++) o[j] = w[j] * (ss * x[j]);
}

/* xout[d] = W[d, n] x[n] */
static void matmul(double *xout, const double *x, const double *w, int n, int d) {
    for (int i = 0; i < d; i++) {
        double v = 0;
        for (int j = 0; j < n; j++) v += w[(size_t)i * n + j] * x[j];
        xout[i] = v;
    }
}

static void perturb(ref_llama *r, int kind, int l, int pos, double *v) {
    if (r->pert_kind == kind && r->pert_layer == l && r->pert_pos == pos) v[r->pert_index] += r->pert_delta;
}

const double *ref_llama_step(ref_llama *r, int token, int pos) {
    int dim = r->dim, hs = r->head_size, kv_dim = r->n_kv_heads * hs, kv_mul = r->n_heads / r->n_kv_heads;
    memcpy(r->x, r->emb + (size_t)token * dim, (size_t)dim * sizeof(double));
    for (int l = 0; l < r->n_layers; l++) {
        rmsnorm(r->xb, r->x, r->rms_att + (size_t)l * dim, dim);
        perturb(r, 3, l, pos, r->xb);
        size_t loff = (size_t)l * r->seq_len * kv_dim;
        double *k = r->key_cache + loff + (size_t)pos * kv_dim, *v = r->value_cache + loff + (size_t)pos * kv_dim;
        matmul(r->q, r->xb, r->wq + (size_t)l * dim * dim, dim, dim);
        matmul(k, r->xb, r->wk + (size_t)l * dim * kv_dim, dim, kv_dim);
        matmul(v, r->xb, r->wv + (size_t)l * dim * kv_dim, dim, kv_dim);
        for (int i = 0; i < dim; i += 2) { /* RoPE on adjacent pairs */
            int hd = i % hs;
            double freq = 1.0 / pow(10000.0, hd / (double)hs);
            double val = pos * freq, fcr = cos(val), fci = sin(val);
            for (int which = 0; which < (i < kv_dim ? 2 : 1); which++) {
                double *vec = which == 0 ? r->q : k;
                double v0 = vec[i], v1 = vec[i + 1];
                vec[i] = v0 * fcr - v1 * fci;
                vec[i + 1] = v0 * fci + v1 * fcr;
            }
        }
        for (int h = 0; h < r->n_heads; h++) {
            const double *q = r->q + h * hs;
            double *att = r->att + (size_t)h * r->seq_len;
            double mx = -1e300;
            for (int t = 0; t <= pos; t++) {
                const double *kk = r->key_cache + loff + (size_t)t * kv_dim + (h / kv_mul) * hs;
                double s = 0;
                for (int i = 0; i < hs; i++) s += q[i] * kk[i];
                att[t] = s / sqrt((double)hs);
                if (att[t] > mx) mx = att[t];
            }
            double sum = 0;
            for (int t = 0; t <= pos; t++) {
                att[t] = exp(att[t] - mx);
                sum += att[t];
            }
            double *xb = r->xb + h * hs;
            for (int i = 0; i < hs; i++) xb[i] = 0;
            for (int t = 0; t <= pos; t++) {
                const double *vv = r->value_cache + loff + (size_t)t * kv_dim + (h / kv_mul) * hs;
                for (int i = 0; i < hs; i++) xb[i] += att[t] / sum * vv[i];
            }
        }
        matmul(r->xb2, r->xb, r->wo + (size_t)l * dim * dim, dim, dim);
        for (int i = 0; i < dim; i++) r->x[i] += r->xb2[i];
        rmsnorm(r->xb, r->x, r->rms_ffn + (size_t)l * dim, dim);
        perturb(r, 2, l, pos, r->xb);
        matmul(r->hb, r->xb, r->w1 + (size_t)l * dim * r->hidden, dim, r->hidden);
        matmul(r->hb2, r->xb, r->w3 + (size_t)l * dim * r->hidden, dim, r->hidden);
        for (int i = 0; i < r->hidden; i++) {
            double val = r->hb[i];
            val *= 1.0 / (1.0 + exp(-val));
            r->hb[i] = val * r->hb2[i];
            if (r->h_mask && !r->h_mask[((size_t)pos * r->n_layers + l) * r->hidden + i]) r->hb[i] = 0.0;
        }
        if (r->h_hook) r->h_hook(r->h_user, r, l, pos, r->xb, r->hb);
        perturb(r, 1, l, pos, r->hb);
        matmul(r->xb, r->hb, r->w2 + (size_t)l * dim * r->hidden, r->hidden, dim);
        for (int i = 0; i < dim; i++) r->x[i] += r->xb[i];
        perturb(r, 4, l, pos, r->x);
    }
    rmsnorm(r->x, r->x, r->rms_final, dim);
    matmul(r->logits, r->x, r->wcls, dim, r->vocab);
    return r->logits;
}
