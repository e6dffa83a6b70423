/* dtype.h - element types found in checkpoints and their conversion to f32. */
#ifndef SC_DTYPE_H
#define SC_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum sc_dtype {
    SC_DT_F32 = 0,
    SC_DT_F16,
    SC_DT_BF16,
    SC_DT_Q8_0, /* GGML: blocks of 32 int8 with one fp16 scale first (34 bytes) */
    /* GGML's other block types read from GGUF files (layouts: gguf_quant.h) */
    SC_DT_Q4_0,
    SC_DT_Q4_1,
    SC_DT_Q5_0,
    SC_DT_Q5_1,
    SC_DT_Q4_K,
    SC_DT_Q5_K,
    SC_DT_Q6_K,
    SC_DT_COUNT
} sc_dtype;

const char *sc_dtype_name(sc_dtype t);

/* Bytes used by n elements of type t (n must be a multiple of the block size
 * for block types). Returns 0 on overflow or a bad block multiple. */
size_t sc_dtype_bytes(sc_dtype t, size_t n);
/* Elements per block (1 for scalar types, 32 or 256 for GGML's block types). */
size_t sc_dtype_block(sc_dtype t);

float sc_f16_to_f32(uint16_t h);
uint16_t sc_f32_to_f16(float f); /* round to nearest even */
float sc_bf16_to_f32(uint16_t h);
uint16_t sc_f32_to_bf16(float f); /* round to nearest even */

/* Converts n elements stored little-endian at src (any alignment) to f32. */
void sc_convert_to_f32(sc_dtype t, const uint8_t *src, size_t n, float *dst);

#endif
