/* gguf_quant.h - the block-quantised tensor types of GGML (llama.cpp's GGUF
 * files) that sparsecal reads, dequantised to f32 as a layer is used:
 *
 *   type   elements  bytes  block (all little-endian; d, m, dmin fp16)
 *   Q4_0      32       18   d, qs[16]: x_j = d (q_j - 8), q_j = low nibble of qs[j], q_{j+16} its high nibble
 *   Q4_1      32       20   d, m, qs[16]: x_j = d q_j + m (nibbles as Q4_0)
 *   Q5_0      32       22   d, qh (u32), qs[16]: q_j = nibble | bit j of qh << 4, x_j = d (q_j - 16)
 *   Q5_1      32       24   d, m, qh, qs[16]: x_j = d q_j + m (q_j as Q5_0)
 *   Q8_0      32       34   d, qs[32] int8: x_j = d q_j
 *   Q4_K     256      144   d, dmin, scales[12], qs[128]: 8 sub-blocks of 32 with 6-bit scale s and min
 *                           m packed in scales; x = d s q - dmin m, q the 4-bit values (two
 *                           sub-blocks per 32 bytes: low nibbles, then high nibbles)
 *   Q5_K     256      176   d, dmin, scales[12], qh[32], qs[128]: as Q4_K with a fifth bit per value from qh
 *   Q6_K     256      210   ql[128], qh[64], scales[16] int8, d: 16 sub-blocks of 16, x = d s (q - 32),
 *                           q 6 bits (4 from ql, 2 from qh)
 *
 * The bit layouts are GGML's (ggml-common.h, ggml-quants.c); the code is our
 * own, checked against GGML's dequantiser on golden blocks
 * (tests/test_gguf_quant.c). */
#ifndef SC_GGUF_QUANT_H
#define SC_GGUF_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

/* Elements and bytes per block of a block type (SC_DT_Q8_0 and SC_DT_Q4_0 ..
 * SC_DT_Q6_K); 0 for the scalar types. */
size_t sc_quant_block(sc_dtype t);
size_t sc_quant_block_bytes(sc_dtype t);
/* Dequantises n elements (a multiple of the block) of block type t at src
 * (any alignment) into dst. */
void sc_dequant(sc_dtype t, const uint8_t *src, size_t n, float *dst);

#endif
