/* srt_gemv.h - internal: the threaded GEMV entry points the layout traits
 * table points at (srt_gemv.c). */
#ifndef SRT_GEMV_H
#define SRT_GEMV_H

#include "srt.h"

srt_status srt_gemv_rows(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y);
srt_status srt_gemv_rows_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                float *y);
srt_status srt_gemv_axpy(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y);
srt_status srt_gemv_axpy_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                float *y);
srt_status srt_gemv_kd(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y);
srt_status srt_gemv_kd_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                float *y);
srt_status srt_gemv_zigzag(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, float *y);
srt_status srt_gemv_zigzag_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                  float *y);
srt_status srt_gemv_stripe_sparse(srt_ctx *ctx, const srt_matrix *m, const srt_input *x, const srt_live *live,
                                  float *y);

#endif
