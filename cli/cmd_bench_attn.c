/* cmd_bench_attn.c - `sparsecal bench-attention`: one decode token's attention core (scores, softmax,
 * the weighted sum of V) over every layer's key/value cache, with the cache in f32 and in f16, as
 * `run` meets it: each K/V head's positions one run (the runtime's head-major cache), each layer's
 * cache after other memory has gone through the caches (decode streams a layer's weights between two
 * attention cores), the two cache types alternated pass by pass. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "srt.h"

#define MAX_POS 16

static uint64_t xs = 0x9E3779B97F4A7C15ull;
static float rndf(void) {
    xs ^= xs << 13;
    xs ^= xs >> 7;
    xs ^= xs << 17;
    return (float)((double)(xs >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct attn_row {
    int64_t n;
    double us[2], best[2]; /* f32, f16: median and best microseconds per token */
} attn_row;

/* One token over every layer at n positions: f32 and f16 passes alternated reps times; between two
 * layers flush bytes are read (outside the timing). */
static int measure(const srt_ctx *ctx, int64_t n, int64_t layers, int64_t heads, int64_t kvh, int64_t hd,
                   int64_t reps, size_t flush_bytes, attn_row *row, sc_err *err) {
    const int64_t kvd = kvh * hd, group = heads / kvh, cells = layers * n * kvd;
    float *K = malloc((size_t)cells * sizeof(float)), *V = malloc((size_t)cells * sizeof(float));
    uint16_t *Kh = malloc((size_t)cells * sizeof(uint16_t)), *Vh = malloc((size_t)cells * sizeof(uint16_t));
    float *q = malloc((size_t)(heads * hd) * sizeof(float)), *out = malloc((size_t)(heads * hd) * sizeof(float));
    float *s = malloc((size_t)(group * n) * sizeof(float));
    double *t = malloc((size_t)(2 * reps) * sizeof(double));
    unsigned char *flush = flush_bytes ? malloc(flush_bytes) : NULL;
    int rc = 0;
    if (!K || !V || !Kh || !Vh || !q || !out || !s || !t || (flush_bytes && !flush)) {
        sc_errf(err, SC_ENOMEM, "out of memory for %lld layers' caches of %lld positions (%.0f MB)", (long long)layers,
                (long long)n, (double)cells * 12.0 / 1e6);
        rc = 1;
        goto done;
    }
    for (int64_t i = 0; i < cells; i++) {
        K[i] = rndf(), V[i] = rndf();
        Kh[i] = srt_fp32_to_fp16(K[i]), Vh[i] = srt_fp32_to_fp16(V[i]);
    }
    for (int64_t i = 0; i < heads * hd; i++) q[i] = rndf();
    if (flush) memset(flush, 1, flush_bytes);
    const float scale = 1.0f / sqrtf((float)hd);
    volatile unsigned sink = 0;
    for (int64_t r = -1; r < reps; r++) /* r = -1: warm-up */
        for (int half = 0; half < 2; half++) {
            double sum = 0.0;
            for (int64_t l = 0; l < layers; l++) {
                unsigned acc = 0;
                for (size_t b = 0; b < flush_bytes; b += 64) acc += flush[b];
                sink += acc;
                const double t0 = sc_now();
                for (int64_t g = 0; g < kvh; g++) {
                    const int64_t off = l * n * kvd + g * n * hd; /* head-major, as run's cache */
                    if (half)
                        srt_attention_group_h(ctx, out + g * group * hd, s, q + g * group * hd, Kh + off, Vh + off, n,
                                              hd, hd, group, scale);
                    else
                        srt_attention_group(ctx, out + g * group * hd, s, q + g * group * hd, K + off, V + off, n, hd,
                                            hd, group, scale);
                }
                sum += sc_now() - t0;
            }
            if (r >= 0) t[half * reps + r] = sum * 1e6;
        }
    (void)sink;
    row->n = n;
    for (int half = 0; half < 2; half++) {
        qsort(t + half * reps, (size_t)reps, sizeof(double), cmp_d);
        row->us[half] = t[half * reps + reps / 2];
        row->best[half] = t[half * reps];
    }
done:
    free(K), free(V), free(Kh), free(Vh), free(q), free(out), free(s), free(t), free(flush);
    return rc;
}

int cmd_bench_attention(int argc, char **argv) {
    const char *pos_list = "128,512,1536", *isa_name = NULL;
    int64_t layers = 22, heads = 32, kvh = 4, hd = 64, reps = 15, flush_mb = 8;
    bool json = false;
    const sc_opt opts[] = {
        {"positions", 0, SC_ARG_STR, &pos_list, "LIST", "cached positions, comma-separated (default 128,512,1536)", 0, 0},
        {"layers", 0, SC_ARG_INT, &layers, "N", "layers, each with its own cache (default 22, TinyLlama)", 1, 1024},
        {"heads", 0, SC_ARG_INT, &heads, "H", "query heads (default 32)", 1, 1024},
        {"kv-heads", 0, SC_ARG_INT, &kvh, "H", "key/value heads, dividing --heads (default 4)", 1, 1024},
        {"head-dim", 0, SC_ARG_INT, &hd, "D", "head size (default 64)", 1, 4096},
        {"reps", 'r', SC_ARG_INT, &reps, "N", "timed tokens per cache type (default 15, after one warm-up)", 1, 100000},
        {"flush-mb", 0, SC_ARG_INT, &flush_mb, "MB", "memory read between two layers, outside the timing, as decode "
            "streams a layer's weights there (default 8; 0: none, the caches stay as warm as they fit)", 0, 1 << 16},
        {"isa", 0, SC_ARG_STR, &isa_name, "ISA", "kernels: scalar, avx2, avx512, amx, neon, dotprod, i8mm (default: the best here)", 0, 0},
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object", 0, 0},
        SC_OPTS_END("  sparsecal bench-attention\n"
"  sparsecal bench-attention --layers 32 --heads 32 --kv-heads 8 --head-dim 128 --positions 1024,4096 --json"),
    };
    int r = sc_parse_args("bench-attention",
                          "Time one decode token's attention core (scores, softmax, the weighted sum of V) over\n"
                          "every layer's key/value cache, as `run` computes it (grouped-query heads, one kernel\n"
                          "thread), with the cache in f32 and in f16 (`run --cache-type`), alternated token by\n"
                          "token; medians. Defaults: the TinyLlama-1.1B shape.",
                          opts, argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    double pv[MAX_POS];
    const int npos = cli_parse_list(pos_list, pv, MAX_POS, 1, (double)(1LL << 21), true);
    if (npos < 0) {
        sc_errf(&err, SC_EARG, "--positions '%s': up to %d counts of 1..%lld, comma-separated", pos_list, MAX_POS,
                1LL << 21);
        return cli_fail("bench-attention", SC_EARG, &err);
    }
    int64_t pos[MAX_POS];
    for (int i = 0; i < npos; i++) pos[i] = (int64_t)pv[i];
    if (npos == 0 || heads % kvh) {
        sc_errf(&err, SC_EARG, npos ? "--kv-heads %lld does not divide --heads %lld" : "--positions: none given",
                (long long)kvh, (long long)heads);
        return cli_fail("bench-attention", SC_EARG, &err);
    }
    srt_isa isa = SRT_ISA_AUTO;
    if ((isa_name && srt_isa_parse(isa_name, &isa) != SRT_OK) || srt_isa_resolve(isa, &isa) != SRT_OK ||
        !srt_isa_available(isa)) {
        sc_errf(&err, SC_EARG, "ISA '%s' is unknown or not available on this CPU", isa_name ? isa_name : "auto");
        return cli_fail("bench-attention", SC_EARG, &err);
    }
    srt_ctx *ctx = NULL;
    sc_status cs = cli_ctx_create(&ctx, isa, 1, &err);
    if (cs != SC_OK) return cli_fail("bench-attention", cs, &err);
    attn_row rows[MAX_POS];
    int st = 0;
    for (int i = 0; i < npos && !st; i++) {
        if (!json) fprintf(stderr, "bench-attention: %lld positions...\n", (long long)pos[i]);
        st = measure(ctx, pos[i], layers, heads, kvh, hd, reps, (size_t)flush_mb << 20, &rows[i], &err);
    }
    srt_ctx_free(ctx);
    if (st) return cli_fail("bench-attention", SC_ENOMEM, &err);
    const double row_bytes = (double)(layers * kvh * hd) * 2.0; /* K and V, per position, per element byte */
    if (json) {
        cJSON *j = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(j, "results");
        cJSON_AddStringToObject(j, "isa", srt_isa_name(isa));
        cJSON_AddNumberToObject(j, "layers", (double)layers);
        cJSON_AddNumberToObject(j, "heads", (double)heads);
        cJSON_AddNumberToObject(j, "kv_heads", (double)kvh);
        cJSON_AddNumberToObject(j, "head_dim", (double)hd);
        cJSON_AddNumberToObject(j, "reps", (double)reps);
        cJSON_AddNumberToObject(j, "flush_mb", (double)flush_mb);
        for (int i = 0; i < npos; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "positions", (double)rows[i].n);
            cJSON_AddNumberToObject(o, "f32_us", rows[i].us[0]);
            cJSON_AddNumberToObject(o, "f16_us", rows[i].us[1]);
            cJSON_AddNumberToObject(o, "f32_best_us", rows[i].best[0]);
            cJSON_AddNumberToObject(o, "f16_best_us", rows[i].best[1]);
            cJSON_AddNumberToObject(o, "f32_cache_bytes", row_bytes * 4.0 * (double)rows[i].n);
            cJSON_AddNumberToObject(o, "f16_cache_bytes", row_bytes * 2.0 * (double)rows[i].n);
            cJSON_AddItemToArray(a, o);
        }
        cli_print_json(j);
        return 0;
    }
    printf("attention core of one decode token, %lld layers, %lld heads / %lld K/V heads of %lld, %s, 1 thread, "
           "%lld MB read between layers; medians of %lld tokens (best)\n\n",
           (long long)layers, (long long)heads, (long long)kvh, (long long)hd, srt_isa_name(isa), (long long)flush_mb,
           (long long)reps);
    printf("| positions | f32 cache µs | f16 cache µs | f16 / f32 | f32 cache MB | f32 GB/s | f16 GB/s |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < npos; i++) {
        const double b32 = row_bytes * 4.0 * (double)rows[i].n;
        printf("| %lld | %.0f (%.0f) | %.0f (%.0f) | %.2f | %.1f | %.1f | %.1f |\n", (long long)rows[i].n, rows[i].us[0],
               rows[i].best[0], rows[i].us[1], rows[i].best[1], rows[i].us[1] / rows[i].us[0], b32 / 1e6,
               b32 / rows[i].us[0] / 1e3, b32 / 2.0 / rows[i].us[1] / 1e3);
    }
    return 0;
}
