/* srt_pool.c - the persistent thread pool behind srt_ctx_run. One job at a
 * time: the caller publishes fn/arg and bumps a generation counter; workers
 * spin on it for up to SPIN_NS (cheap hand-off between back-to-back GEMVs:
 * the gaps inside a decode step are tens of microseconds), then sleep on a
 * condition variable, so an idle or oversubscribed machine does not lose a
 * core to spinning (a pause is ~50 ns on some CPUs: a fixed count of them
 * spun for 10 ms). Completion is a counter the caller spins on. */
#define _POSIX_C_SOURCE 200809L
#include "srt_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define SPIN_NS 200000 /* worker: spin this long (ns) before sleeping (srt_pool_create) */
#define SPIN_CALLER 4000

struct srt_pool {
    int n;
    int64_t spin_ns;
    pthread_t *th;
    int *tids;
    int started;
    _Atomic uint64_t gen;
    _Atomic int done, sleepers, stop;
    void (*fn)(void *, int, int);
    void *arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct worker_arg {
    srt_pool *p;
    int tid;
} worker_arg;

static void *worker(void *a) {
    srt_pool *p = ((worker_arg *)a)->p;
    int tid = ((worker_arg *)a)->tid;
    free(a);
    uint64_t seen = 0;
    for (;;) {
        uint64_t g;
        int spins = 0;
        int64_t t0 = now_ns();
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (atomic_load_explicit(&p->stop, memory_order_acquire)) return NULL;
            if ((++spins & 63) || now_ns() - t0 < p->spin_ns) {
                cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
            t0 = now_ns();
        }
        seen = g;
        p->fn(p->arg, tid, p->n);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

srt_status srt_pool_create(srt_pool **out, int nthreads) { return srt_pool_create_spin(out, nthreads, SPIN_NS); }

srt_status srt_pool_create_spin(srt_pool **out, int nthreads, int64_t spin_ns) {
    *out = NULL;
    srt_pool *p = calloc(1, sizeof *p);
    if (!p) return SRT_ENOMEM;
    p->n = nthreads;
    p->spin_ns = spin_ns > 0 ? spin_ns : 0;
    p->th = calloc((size_t)nthreads, sizeof *p->th);
    if (!p->th) {
        free(p);
        return SRT_ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->stop, 0);
    for (int t = 1; t < nthreads; t++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa) {
            srt_pool_free(p);
            return SRT_ENOMEM;
        }
        wa->p = p;
        wa->tid = t;
        if (pthread_create(&p->th[t], NULL, worker, wa) != 0) {
            free(wa);
            srt_pool_free(p);
            return SRT_ETHREAD;
        }
        p->started = t;
    }
    *out = p;
    return SRT_OK;
}

void srt_pool_free(srt_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t <= p->started; t++) pthread_join(p->th[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->th);
    free(p);
}

void srt_pool_run(srt_pool *p, void (*fn)(void *, int, int), void *arg) {
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: publishes fn/arg, orders against sleepers */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < p->n - 1) {
        if (++spins < SPIN_CALLER)
            cpu_relax();
        else
            sched_yield();
    }
}
