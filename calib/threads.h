/* threads.h - how many threads a command computes with: one count for
 * OpenBLAS (the forward and backward passes' matrix products) and for the
 * runtime kernels' thread pool (srt_ctx), chosen by one rule:
 *
 *   1. --threads N (sc_threads_request(N)) wins;
 *   2. else OPENBLAS_NUM_THREADS, when set to an integer in 1..SC_THREADS_MAX;
 *   3. else every CPU this process may run on (online and in its
 *      sched_getaffinity mask), except one thread for models whose layers
 *      hold under SC_THREADS_SMALL_LAYER parameters: there waking a second
 *      thread costs more than it saves (stories260K: ppl 2.4x and `run` up to
 *      400x slower on 2 busy cores with 2 threads than with 1).
 *
 * OpenBLAS caps its own count at its build limit (64 for Debian's); what it
 * really uses is sc_blas_desc.threads (ops.h). */
#ifndef SC_THREADS_H
#define SC_THREADS_H

#include <stdint.h>

#define SC_THREADS_MAX 1024
#define SC_THREADS_SMALL_LAYER 4e6

typedef enum sc_threads_source {
    SC_THREADS_OPTION,      /* --threads */
    SC_THREADS_ENV,         /* OPENBLAS_NUM_THREADS */
    SC_THREADS_ALL_CORES,   /* the default */
    SC_THREADS_SMALL_MODEL, /* the default, 1 for small layers */
} sc_threads_source;

/* CPUs this process may run on (>= 1). */
int sc_cpu_count(void);
/* n in 1..SC_THREADS_MAX: use n threads; 0: back to the automatic choice. */
void sc_threads_request(int n);
/* OPENBLAS_NUM_THREADS: 0 when unset or empty, -1 when not an integer in
 * 1..SC_THREADS_MAX (then it is ignored), else its value. */
int sc_threads_env(void);
/* The count for a model with the given layer shape (dim, ffn_dim and the
 * query width n_heads * head_dim; all 0 when no model is known: the count
 * for a large one). why (may be NULL) receives the rule that chose it. */
int sc_threads_for(int64_t dim, int64_t ffn_dim, int64_t q_dim, sc_threads_source *why);
/* "--threads", "OPENBLAS_NUM_THREADS", "all cores", "1 for small layers" */
const char *sc_threads_source_name(sc_threads_source s);

/* ---- the elementwise work between the matrix products ----
 * OpenBLAS parallelises inside each product; the passes' other work (norms,
 * RoPE, softmax, activations, residual adds, the loss's exponentials,
 * converting weights to f32) runs on
 * a small pool of its own with as many threads as BLAS uses (at most the
 * CPUs), so no core idles between products. One caller at a time (the passes
 * are single-threaded around their BLAS calls); a job never starts another. */

/* Jobs smaller than this many elements run on the caller alone: waking a
 * worker costs microseconds, about what a core needs for this much work. */
#define SC_PARALLEL_MIN_WORK 32768

/* The pool's thread count (sc_blas_configure sets it to BLAS's count, capped
 * at the CPUs; 1 until then). */
void sc_parallel_configure(int n);
int sc_parallel_threads(void);
/* Runs fn(arg, tid, nth) for tid = 0 .. nth-1 on nth threads (tid 0 on the
 * caller) and returns when all are done; nth = 1 when work (the elements the
 * job touches) is below SC_PARALLEL_MIN_WORK, one thread is configured, or the
 * pool cannot start. fn must give each output element to exactly one tid and
 * compute it the same way whatever nth is: results are then bit-identical for
 * any thread count. */
void sc_parallel(int64_t work, void (*fn)(void *arg, int tid, int nth), void *arg);
/* tid's contiguous share [*i0, *i1) of [0, n). */
static inline void sc_split(int64_t n, int tid, int nth, int64_t *i0, int64_t *i1) {
    *i0 = n * tid / nth;
    *i1 = n * (tid + 1) / nth;
}

#endif
