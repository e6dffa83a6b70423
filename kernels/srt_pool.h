/* srt_pool.h - internal: a small persistent thread pool. Workers spin
 * briefly on a generation counter (a GEMV lasts tens of microseconds), then
 * sleep on a condition variable. */
#ifndef SRT_POOL_H
#define SRT_POOL_H

#include "srt.h"

typedef struct srt_pool srt_pool;

srt_status srt_pool_create(srt_pool **out, int nthreads);
/* The same with another spin before a worker sleeps (ns; srt_pool_create
 * uses 200 us, for the decode's back-to-back GEMVs). The toolchain's pool
 * (calib/threads.c) spins less: between its jobs OpenBLAS's threads compute,
 * and a spinning worker would take a core from them. */
srt_status srt_pool_create_spin(srt_pool **out, int nthreads, int64_t spin_ns);
void srt_pool_free(srt_pool *p);
/* Runs fn(arg, tid, n) on all n threads (tid 0 = the caller) and waits. */
void srt_pool_run(srt_pool *p, void (*fn)(void *, int, int), void *arg);

#endif
