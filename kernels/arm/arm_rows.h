/* arm_rows.h - the float side of the AArch64 q8_0 and kmi4r row kernels, shared by the single- and
 * multi-input kernels of every level (arm_dot_body.h for neon and dotprod, rows_i8mm.c for i8mm).
 * The levels differ only in how they form the integer block sums, which are exact whatever the
 * instruction or order; every float operation on them is one of these, with its operands in the
 * same order, so a multi-input kernel's output for input v is bit for bit the single-input
 * kernel's for input v. The project is built as ISO C (-std=c11, which does not contract a
 * multiply and an add into a fused one), so the separate multiplies and adds below stay separate,
 * as the scalar `acc += (dw * d) * s` they mirror lane by lane. */
#ifndef SRT_ARM_ROWS_H
#define SRT_ARM_ROWS_H

#include <arm_neon.h>

#include "../srt_kern.h"

/* Four fp16 values at p as floats (exact: every half is a float). */
static inline float32x4_t srt_arm_half4(const uint8_t *p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(const void *)p)));
}

/* One fp16 value at p, by the same instruction. */
static inline float srt_arm_half1(const uint8_t *p) {
    return vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_dup_u16((const uint16_t *)(const void *)p))), 0);
}

/* kmi4r, one row and one input, the four blocks b..b+3 of a quarter tile: the integer sums
 * start from the nibble offset (lane e: -8 sum of block b + e of the input, exact), and the float
 * step acc += s (dw d) takes s (lane e: block b + e's sum, offset included) and dw (the row's four
 * block scales). */
static inline int32x4_t srt_arm_kr_off(const srt_act *a, int64_t b) {
    return vnegq_s32(vshlq_n_s32(vld1q_s32(a->sum + b), 3));
}
static inline float32x4_t srt_arm_kr_step(float32x4_t acc, int32x4_t s, const srt_act *a, int64_t b, float32x4_t dw) {
    return vfmaq_f32(acc, vcvtq_f32_s32(s), vmulq_f32(dw, vld1q_f32(a->d + b)));
}

/* q8_0, one row and four inputs (lane k: input a[k]): block b's activation scales. */
static inline float32x4_t srt_arm_d4(const srt_act *const a[4], int64_t b) {
    float32x4_t d = vld1q_dup_f32(a[0]->d + b);
    d = vld1q_lane_f32(a[1]->d + b, d, 1);
    d = vld1q_lane_f32(a[2]->d + b, d, 2);
    return vld1q_lane_f32(a[3]->d + b, d, 3);
}

/* q8_0: one row's block with scale dw for four inputs, s their integer dots and d their scales:
 * lane k of acc += (dw d_k) s_k, which is rows_q8_0's `acc += (dw * d) * (float)s` per lane. */
static inline float32x4_t srt_arm_q8_step(float32x4_t acc, float dw, float32x4_t d, int32x4_t s) {
    return vaddq_f32(acc, vmulq_f32(vmulq_f32(vdupq_n_f32(dw), d), vcvtq_f32_s32(s)));
}

/* Lane k of v to y[v0 + k][r], for the inputs of the group that exist (a short last group's copies
 * are dropped). */
static inline void srt_arm_put4(float *const *y, int64_t v0, int64_t nvec, int64_t r, float32x4_t v) {
    float t[4];
    vst1q_f32(t, v);
    for (int k = 0; k < 4 && v0 + k < nvec; k++) y[v0 + k][r] = t[k];
}

#endif
