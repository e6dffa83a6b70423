/* kmi4_neon.c - the integer-dot kernels (kmi4, kmi8, kmi4r, q4_0 and q8_0 rows,
 * and the multi-input kmi4r and q8_0 rows of prefill) on
 * plain Advanced SIMD: the 4-byte dot is two widening multiplies, a pairwise
 * add and a pairwise add-accumulate. */
#define SRT_DOT(acc, w, a)                                                                 \
    do {                                                                                   \
        const int16x8_t p0_ = vmull_s8(vget_low_s8(w), vget_low_s8(a));                   \
        const int16x8_t p1_ = vmull_high_s8(w, a);                                         \
        (acc) = vpadalq_s16((acc), vpaddq_s16(p0_, p1_));                                  \
    } while (0)
#define SRT_SFX(name) name##_neon
#include "arm_dot_body.h"

void srt_neon_kmi4_register(srt_kernels *k) {
    k->kmi4 = kd_neon;
    k->kmi8 = k8_neon;
    k->rows_kmi4r = kr_neon;
    k->rows_q4_0 = rows_q4_0_neon;
    k->rows_q8_0 = rows_q8_0_neon;
    k->rows_q8_0_multi = rows_q8_0_multi_neon;
    k->rows_kmi4r_multi = kr_multi_neon;
}
