/* srt.h - the sparsecal runtime library (libsparsert): CPU feature
 * detection now; routing and the sparse kernels join it as they land. It
 * depends on libc (and zstd for artifacts) only. */
#ifndef SRT_H
#define SRT_H

#include <stdint.h>

typedef enum srt_cpu_feature {
    SRT_CPU_AVX2 = 1u << 0,
    SRT_CPU_FMA = 1u << 1,
    SRT_CPU_AVX512F = 1u << 2,
    SRT_CPU_AVX512BW = 1u << 3,
    SRT_CPU_AVX512VL = 1u << 4,
    SRT_CPU_AVX512VNNI = 1u << 5,
    SRT_CPU_AVX512BF16 = 1u << 6,
    SRT_CPU_AVXVNNI = 1u << 7,
    SRT_CPU_NEON = 1u << 8,
    SRT_CPU_DOTPROD = 1u << 9
} srt_cpu_feature;

/* Features of this CPU that the OS also enables (XSAVE state checked), read
 * once. */
uint32_t srt_cpu_features(void);
/* Space-separated names of the features in mask, into buf. */
const char *srt_cpu_feature_names(uint32_t mask, char *buf, int cap);

#endif
