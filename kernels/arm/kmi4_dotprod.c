/* kmi4_dotprod.c - the integer-dot kernels (kmi4, kmi8, kmi4r, q4_0 and q8_0 rows,
 * and the multi-input kmi4r and q8_0 rows of prefill)
 * with the Armv8.2 sdot instruction (built with +dotprod, chosen only when
 * the CPU reports it). */
#define SRT_DOT(acc, w, a) ((acc) = vdotq_s32((acc), (w), (a)))
#define SRT_SFX(name) name##_dotprod
#include "arm_dot_body.h"

void srt_dotprod_register(srt_kernels *k) {
    k->kmi4 = kd_dotprod;
    k->kmi8 = k8_dotprod;
    k->rows_kmi4r = kr_dotprod;
    k->rows_q4_0 = rows_q4_0_dotprod;
    k->rows_q8_0 = rows_q8_0_dotprod;
    k->rows_q8_0_multi = rows_q8_0_multi_dotprod;
    k->rows_kmi4r_multi = kr_multi_dotprod;
}
