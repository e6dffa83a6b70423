/* ggml_gemv.c - GGML's own q4_0 GEMV timed in the regime of `sparsecal bench`
 * (cold cache: LAYERS separately allocated weight matrices visited in turn),
 * so bench's kernel table can be read beside the peer's real numbers.
 *
 * Built by scripts/peers/ggml_gemv.sh against the headers and libraries of a
 * llama.cpp (or ggml) checkout the user points it at; it calls only GGML's
 * public API. Two rows per shape:
 *   - "plain": the weights in the CPU backend's default buffer (GGML q4_0
 *     rows, ggml_vec_dot_q4_0_q8_0);
 *   - "repacked": the weights in the CPU device's first extra buffer type,
 *     which repacks q4_0 at load (q4_0_8x8 with AVX2/AVX-512 on x86, the
 *     ARM equivalents there) as llama.cpp does for the weights it loads.
 * One graph holds the LAYERS products y_l = W_l x (the same x); a pass is one
 * ggml_backend_graph_compute of it, timed whole, and the per-GEMV time of a
 * pass is its time / LAYERS (GGML's per-node barrier included, as in a
 * decode). WARMUP untimed passes, then PASSES timed; prints the median,
 * minimum and maximum per-GEMV time over the timed passes.
 *
 *   ggml_gemv IN OUT THREADS [LAYERS PASSES WARMUP]
 *
 * Output, one line per row (tab-separated): label, in, out, threads,
 * median_us, min_us, max_us, MB read per GEMV (the q4_0 weight bytes). */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* a uniform pseudo-random value in [-1, 1) (xorshift64*) */
static float frand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (float)((double)((*s * 0x2545F4914F6CDD1DULL) >> 11) / 4503599627370496.0 - 1.0);
}

/* Times one row: the weights in buft (NULL: the backend's default buffer). */
static int run_row(const char *label, ggml_backend_t be, ggml_backend_buffer_type_t buft, const void *q4,
                   size_t q4_bytes, int64_t in, int64_t out, int threads, int layers, int passes, int warmup) {
    size_t meta = (size_t)(2 * layers + 8) * ggml_tensor_overhead() + ggml_graph_overhead_custom((size_t)layers * 2 + 8, false);
    struct ggml_init_params wp = {meta, NULL, true};
    struct ggml_context *cw = ggml_init(wp), *ca = ggml_init(wp);
    if (!cw || !ca) return -1;
    struct ggml_tensor **w = calloc((size_t)layers, sizeof *w), **y = calloc((size_t)layers, sizeof *y);
    if (!w || !y) return -1;
    for (int l = 0; l < layers; l++) w[l] = ggml_new_tensor_2d(cw, GGML_TYPE_Q4_0, in, out);
    struct ggml_tensor *x = ggml_new_tensor_1d(ca, GGML_TYPE_F32, in);
    for (int l = 0; l < layers; l++) y[l] = ggml_mul_mat(ca, w[l], x);
    struct ggml_cgraph *g = ggml_new_graph_custom(ca, (size_t)layers * 2 + 8, false);
    for (int l = 0; l < layers; l++) ggml_build_forward_expand(g, y[l]);
    ggml_backend_buffer_t bw = buft ? ggml_backend_alloc_ctx_tensors_from_buft(cw, buft)
                                    : ggml_backend_alloc_ctx_tensors(cw, be);
    ggml_backend_buffer_t ba = ggml_backend_alloc_ctx_tensors(ca, be);
    if (!bw || !ba) {
        fprintf(stderr, "ggml_gemv: could not allocate the %s buffers\n", label);
        return -1;
    }
    ggml_backend_buffer_set_usage(bw, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    for (int l = 0; l < layers; l++) ggml_backend_tensor_set(w[l], q4, 0, q4_bytes); /* repacked here if buft repacks */
    float *xv = malloc((size_t)in * sizeof *xv);
    uint64_t s = 7;
    for (int64_t i = 0; i < in; i++) xv[i] = frand(&s);
    ggml_backend_tensor_set(x, xv, 0, (size_t)in * sizeof *xv);
    free(xv);
    ggml_backend_cpu_set_n_threads(be, threads);
    double *t = malloc((size_t)passes * sizeof *t);
    for (int p = 0; p < warmup + passes; p++) {
        double t0 = now_us();
        if (ggml_backend_graph_compute(be, g) != GGML_STATUS_SUCCESS) {
            fprintf(stderr, "ggml_gemv: graph compute failed\n");
            return -1;
        }
        if (p >= warmup) t[p - warmup] = (now_us() - t0) / layers;
    }
    qsort(t, (size_t)passes, sizeof *t, cmp_double);
    printf("%s\t%lld\t%lld\t%d\t%.1f\t%.1f\t%.1f\t%.3f\n", label, (long long)in, (long long)out, threads,
           t[passes / 2], t[0], t[passes - 1], (double)q4_bytes / 1e6);
    fflush(stdout);
    free(t);
    ggml_backend_buffer_free(bw);
    ggml_backend_buffer_free(ba);
    ggml_free(cw);
    ggml_free(ca);
    free(w);
    free(y);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: ggml_gemv IN OUT THREADS [LAYERS PASSES WARMUP]\n");
        return 2;
    }
    int64_t in = atoll(argv[1]), out = atoll(argv[2]);
    int threads = atoi(argv[3]), layers = argc > 4 ? atoi(argv[4]) : 35, passes = argc > 5 ? atoi(argv[5]) : 50,
        warmup = argc > 6 ? atoi(argv[6]) : 5;
    if (in <= 0 || in % 32 || out <= 0 || threads < 1 || layers < 1 || passes < 1 || warmup < 0) {
        fprintf(stderr, "ggml_gemv: IN must be a positive multiple of 32; OUT, THREADS, LAYERS, PASSES >= 1\n");
        return 2;
    }
    /* one matrix of pseudo-random weights, quantised by GGML itself; every layer holds a copy */
    float *wf = malloc((size_t)(in * out) * sizeof *wf);
    size_t q4_bytes = ggml_row_size(GGML_TYPE_Q4_0, in) * (size_t)out;
    void *q4 = malloc(q4_bytes);
    if (!wf || !q4) return 1;
    uint64_t s = 1;
    for (int64_t i = 0; i < in * out; i++) wf[i] = frand(&s);
    ggml_quantize_chunk(GGML_TYPE_Q4_0, wf, q4, 0, out, in, NULL);
    free(wf);

    ggml_backend_t be = ggml_backend_cpu_init();
    if (!be) return 1;
    ggml_backend_dev_t dev = ggml_backend_get_device(be);
    ggml_backend_reg_t reg = dev ? ggml_backend_dev_backend_reg(dev) : NULL;
    ggml_backend_dev_get_extra_bufts_t get_extra =
        reg ? (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts")
            : NULL;
    ggml_backend_buffer_type_t *extra = get_extra ? get_extra(dev) : NULL;

    int rc = run_row("GGML q4_0 plain", be, NULL, q4, q4_bytes, in, out, threads, layers, passes, warmup);
    if (!rc && extra && extra[0]) {
        char label[128];
        snprintf(label, sizeof label, "GGML q4_0 repacked (%s)", ggml_backend_buft_name(extra[0]));
        rc = run_row(label, be, extra[0], q4, q4_bytes, in, out, threads, layers, passes, warmup);
    } else if (!rc) {
        fprintf(stderr, "ggml_gemv: this GGML has no extra (repacking) buffer type for the CPU\n");
    }
    ggml_backend_free(be);
    free(q4);
    return rc ? 1 : 0;
}
