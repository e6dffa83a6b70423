/* threads.c - the thread count every part of a command computes with (see threads.h). */
#define _GNU_SOURCE
#include "threads.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "srt_pool.h"

static int requested; /* 0: automatic */

/* sched_getaffinity answers with the allowed CPUs that are online (the kernel
 * masks the set with the active CPUs); sysconf is the fallback. */
int sc_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n >= 1) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n >= 1 ? (n > SC_THREADS_MAX ? SC_THREADS_MAX : (int)n) : 1;
}

void sc_threads_request(int n) { requested = n >= 1 && n <= SC_THREADS_MAX ? n : 0; }

int sc_threads_env(void) {
    const char *s = getenv("OPENBLAS_NUM_THREADS");
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || end == s || *end || v < 1 || v > SC_THREADS_MAX ? -1 : (int)v;
}

int sc_threads_for(int64_t dim, int64_t ffn_dim, int64_t q_dim, sc_threads_source *why) {
    sc_threads_source src = SC_THREADS_ALL_CORES;
    int n, env = sc_threads_env();
    double layer_params = (double)dim * (double)(3 * ffn_dim + 2 * q_dim);
    if (requested > 0) {
        src = SC_THREADS_OPTION;
        n = requested;
    } else if (env > 0) {
        src = SC_THREADS_ENV;
        n = env;
    } else if (dim > 0 && layer_params < SC_THREADS_SMALL_LAYER) {
        src = SC_THREADS_SMALL_MODEL;
        n = 1;
    } else {
        n = sc_cpu_count();
    }
    if (why) *why = src;
    return n;
}

const char *sc_threads_source_name(sc_threads_source s) {
    switch (s) {
    case SC_THREADS_OPTION: return "--threads";
    case SC_THREADS_ENV: return "OPENBLAS_NUM_THREADS";
    case SC_THREADS_ALL_CORES: return "all cores";
    case SC_THREADS_SMALL_MODEL: return "1 for small layers";
    }
    return "?";
}

/* The pool of sc_parallel: created on first use, replaced when the count changes. Workers spin 20 us after a
 * job (the next elementwise job often follows within microseconds) and then sleep, so they leave the cores to
 * OpenBLAS's threads during the products. */
#define PARALLEL_SPIN_NS 20000
static int par_n = 1;
static srt_pool *par_pool;
static int par_pool_n;
static int par_busy; /* inside a job: a nested call runs serially */

void sc_parallel_configure(int n) {
    int cpus = sc_cpu_count();
    par_n = n < 1 ? 1 : n > cpus ? cpus : n;
}

int sc_parallel_threads(void) { return par_n; }

void sc_parallel(int64_t work, void (*fn)(void *arg, int tid, int nth), void *arg) {
    if (par_n < 2 || work < SC_PARALLEL_MIN_WORK || par_busy) {
        fn(arg, 0, 1);
        return;
    }
    if (par_pool && par_pool_n != par_n) {
        srt_pool_free(par_pool);
        par_pool = NULL;
    }
    if (!par_pool) {
        if (srt_pool_create_spin(&par_pool, par_n, PARALLEL_SPIN_NS) != SRT_OK) {
            par_pool = NULL;
            fn(arg, 0, 1);
            return;
        }
        par_pool_n = par_n;
    }
    par_busy = 1;
    srt_pool_run(par_pool, fn, arg);
    par_busy = 0;
}
