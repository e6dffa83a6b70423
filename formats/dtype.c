#include "dtype.h"

#include <string.h>

#include "common.h"
#include "gguf_quant.h"

_Static_assert(SC_DT_COUNT == 11, "a new dtype needs its name below");

const char *sc_dtype_name(sc_dtype t) {
    static const char *const names[SC_DT_COUNT] = {"F32",  "F16",  "BF16", "Q8_0", "Q4_0", "Q4_1",
                                                   "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"};
    return (unsigned)t < SC_DT_COUNT ? names[t] : "?";
}

size_t sc_dtype_block(sc_dtype t) { return sc_quant_block(t) ? sc_quant_block(t) : 1; }

size_t sc_dtype_bytes(sc_dtype t, size_t n) {
    size_t out;
    switch (t) {
    case SC_DT_F32: return sc_mul_ok(n, 4, &out) ? out : 0;
    case SC_DT_F16:
    case SC_DT_BF16: return sc_mul_ok(n, 2, &out) ? out : 0;
    default:
        if (!sc_quant_block(t) || n % sc_quant_block(t)) return 0;
        return sc_mul_ok(n / sc_quant_block(t), sc_quant_block_bytes(t), &out) ? out : 0;
    }
}

float sc_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while (!(mant & 0x400));
            mant &= 0x3ff;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (mant << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t sc_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
    if (absx < 0x38800000u) {                                  /* subnormal or zero in f16 */
        if (absx < 0x33000000u) return (uint16_t)sign;         /* < half the smallest subnormal */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - e; /* 14 + (113 - e) ... yields shift in [14, 24] */
        uint32_t r = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = absx - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t mant = r >> 13;
    uint32_t rem = r & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (mant & 1))) mant++;
    return (uint16_t)(sign | mant);
}

float sc_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t sc_f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    uint32_t lsb = (x >> 16) & 1;
    x += 0x7fffu + lsb;
    return (uint16_t)(x >> 16);
}

void sc_convert_to_f32(sc_dtype t, const uint8_t *src, size_t n, float *dst) {
    switch (t) {
    case SC_DT_F32:
        memcpy(dst, src, n * 4); /* little-endian host assumed (checked at build) */
        break;
    case SC_DT_F16:
        for (size_t i = 0; i < n; i++) dst[i] = sc_f16_to_f32(sc_le16(src + 2 * i));
        break;
    case SC_DT_BF16:
        for (size_t i = 0; i < n; i++) dst[i] = sc_bf16_to_f32(sc_le16(src + 2 * i));
        break;
    default: sc_dequant(t, src, n, dst); break;
    }
}
