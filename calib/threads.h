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

#endif
