/* srt_cpu.c - CPU feature detection. Compiled without ISA flags, so the
 * detector itself runs on any CPU of the architecture. */
#define _DEFAULT_SOURCE /* syscall */
#include <stdio.h>
#include <string.h>

#include "srt.h"
#include "srt_kern.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static uint64_t xgetbv0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static uint32_t detect(void) {
    unsigned a, b, c, d;
    uint32_t f = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int osxsave = (c >> 27) & 1, fma = (c >> 12) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return 0;
    uint64_t xcr0 = xgetbv0();
    int ymm_ok = (xcr0 & 0x6) == 0x6, zmm_ok = (xcr0 & 0xe6) == 0xe6;
    if (!ymm_ok) return 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    if ((b >> 5) & 1) f |= SRT_CPU_AVX2;
    if (fma) f |= SRT_CPU_FMA;
    if (f16c) f |= SRT_CPU_F16C;
    if (zmm_ok) {
        if ((b >> 16) & 1) f |= SRT_CPU_AVX512F;
        if ((b >> 30) & 1) f |= SRT_CPU_AVX512BW;
        if ((b >> 31) & 1) f |= SRT_CPU_AVX512VL;
        if ((c >> 11) & 1) f |= SRT_CPU_AVX512VNNI;
    }
    /* AMX: the tiles and their int8 product (CPUID 7.0 EDX bits 24, 25), the OS saving the tile state
     * (XCR0 bits 17, 18), and Linux's permission to use it, asked for once per process
     * (ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; without it the first tile instruction faults) */
    if (((d >> 24) & 3) == 3 && ((xcr0 >> 17) & 3) == 3) {
#if defined(__linux__) && defined(__x86_64__)
        if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0)
            f |= SRT_CPU_AMX;
#endif
    }
    unsigned a1, b1, c1, d1;
    if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) {
        if (zmm_ok && ((a1 >> 5) & 1)) f |= SRT_CPU_AVX512BF16;
        if ((a1 >> 4) & 1) f |= SRT_CPU_AVXVNNI;
    }
    return f;
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef AT_HWCAP2
#define AT_HWCAP2 26
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
static uint32_t detect(void) {
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    uint32_t f = 0;
    if (hw & HWCAP_ASIMD) f |= SRT_CPU_NEON;
    if (hw & HWCAP_ASIMDDP) f |= SRT_CPU_DOTPROD;
    if (hw2 & HWCAP2_I8MM) f |= SRT_CPU_I8MM;
    return f;
}
#else
static uint32_t detect(void) { return 0; }
#endif

uint32_t srt_cpu_features(void) {
    /* Detection is idempotent, so a race between two first callers only
     * repeats the work. */
    static uint32_t cached = 0, done = 0;
    if (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
        __atomic_store_n(&cached, detect(), __ATOMIC_RELAXED);
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&cached, __ATOMIC_RELAXED);
}

const char *srt_cpu_feature_names(uint32_t mask, char *buf, int cap) {
    static const char *names[] = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512vnni",
                                  "avx512bf16", "avxvnni", "neon", "dotprod", "f16c", "i8mm", "amx"};
    int n = 0;
    if (cap > 0) buf[0] = '\0';
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!(mask & (1u << i))) continue;
        int w = snprintf(buf + n, (size_t)(cap - n), "%s%s", n ? " " : "", names[i]);
        if (w < 0 || w >= cap - n) break;
        n += w;
    }
    if (n == 0 && cap > 5) snprintf(buf, (size_t)cap, "none");
    return buf;
}

/* AMD's cores (CPUID vendor "AuthenticAMD", or Hygon's Zen-based "HygonGenuine"). */
static bool cpu_is_amd(void) {
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return false;
    char v[13];
    memcpy(v, &b, 4), memcpy(v + 4, &d, 4), memcpy(v + 8, &c, 4);
    v[12] = '\0';
    return strcmp(v, "AuthenticAMD") == 0 || strcmp(v, "HygonGenuine") == 0;
#else
    return false;
#endif
}

srt_pf_set srt_cpu_prefetch(void) {
    /* Tuned on Intel Xeons (Sapphire and Emerald Rapids, 2-vCPU VMs; `bench`, cold matrices): kmi4r
     * rows 6 ahead into L1 and 32 into L2 (48 or 64 for L2 alike), q8_0 rows 3 and 16, kmi4 2 and 8
     * quads (6 to 24 for L2 alike), kmi4 passes of 16 output tiles (2,048 outputs, whose sums stay in
     * L1). Every other CPU starts from these. */
    srt_pf_set p = {.kr = {6, 32}, .q8 = {3, 16}, .kd = {2, 8}, .kd_pass_tiles = 16, .zz_dense_above = 2.0f};
    /* Zen 4 (EPYC 9004 kind, 2-vCPU VM, 1 thread, bench 2048 -> 5632 and 5632 -> 2048): the row
     * kernels ran at 1.4-1.5x the stream floor with Intel's distances and 1.1-1.2x with the next row
     * into L1 and 16 into L2 (dense kmi4r 294-305 -> 227-234 µs, at d = 0.5 166-175 -> 153-158; without
     * the L2 prefetch 480-517 µs: the hardware prefetchers alone serve these rows poorly); kmi4 one
     * quad ahead into L1 instead of two, dense 5632 -> 2048 380-385 -> 318-333 µs. Distances into L1
     * beyond one row lost there (2 rows: 289-291 µs, 6: 292-309): an AMD core's software prefetches
     * probably hold its L1 miss buffers, which the loads then wait for. */
    /* And kmi4 passes of 32 output tiles instead of 16, so that a neuron vector of 4,096 outputs (the
     * 8B shape's down projection) is read whole in one pass rather than in two 1 KB halves a list
     * apart, scattered reads this core serves at half a stream's speed (bench 14336 -> 4096: dense
     * 2062-2149 -> 1705-1754 µs, d = 0.5 1110-1170 -> 1013-1052; 5632 -> 2048 unchanged). */
    /* And zigzag's live channels (128-byte pieces of 256-row row-blocks) read at 8-9 GB/s there against
     * 25-30 for the whole matrix, so above a third of the channels live its column-sparse GEMV reads them
     * all (bench 5632 -> 2048, 1 thread: d = 0.5 sparse 346-395 µs, dense 250-300); on the Intel Xeons
     * sparse took 0.68x of dense at d = 0.5, so they never do. Row-blocks of 512 rows and more are read
     * in one pass per live channel and switch at twice the fraction (srt_zz_reads_all). */
    if (cpu_is_amd()) p.kr = (srt_pf){1, 16}, p.kd = (srt_pf){1, 8}, p.kd_pass_tiles = 32, p.zz_dense_above = 0.35f;
    return p;
}
