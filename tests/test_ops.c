/* test_ops.c - forward ops against direct formulas: RoPE frequencies with
 * Llama-3.1 scaling, rotation styles, causal softmax, activations. */
#include <math.h>
#include <string.h>

#include "ops.h"
#include "testing.h"

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

int main(void) {
    /* Llama-3.1-8B: theta 500000, head_dim 128, factor 8, low 1, high 4, original context 8192 */
    sc_config c;
    memset(&c, 0, sizeof c);
    c.head_dim = 128;
    c.rope_theta = 500000.0f;
    c.rope_scaling = SC_ROPE_SCALING_LLAMA3;
    c.rope_factor = 8.0f;
    c.rope_low_freq_factor = 1.0f;
    c.rope_high_freq_factor = 4.0f;
    c.rope_orig_ctx = 8192;
    int n_high = 0, n_low = 0, n_mid = 0;
    for (int i = 0; i < 64; i++) {
        double f = 1.0 / pow(500000.0, 2.0 * i / 128.0), wl = 2 * M_PI / f, expect;
        if (wl < 8192.0 / 4.0) {
            expect = f;
            n_high++;
        } else if (wl > 8192.0) {
            expect = f / 8.0;
            n_low++;
        } else {
            double s = (8192.0 / wl - 1.0) / 3.0;
            expect = (1 - s) * f / 8.0 + s * f;
            n_mid++;
        }
        CHECK_NEAR(sc_rope_inv_freq(&c, i), expect, 1e-5 * expect);
    }
    CHECK(n_high > 0 && n_low > 0 && n_mid > 0);
    c.rope_scaling = SC_ROPE_SCALING_LINEAR;
    CHECK_NEAR(sc_rope_inv_freq(&c, 10), 1.0 / pow(500000.0, 20.0 / 128.0) / 8.0, 1e-7);

    /* rotation styles: interleaved pairs (0,1) vs halves (0, hd/2) */
    c.rope_scaling = SC_ROPE_SCALING_NONE;
    c.head_dim = 4;
    c.rope_theta = 10000.0f;
    float cs[3 * 2], sn[3 * 2];
    sc_rope_tables(cs, sn, 3, &c);
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4};
    sc_rope_forward(a, 1, 1, 4, 2, cs, sn, SC_ROPE_INTERLEAVED, false);
    sc_rope_forward(b, 1, 1, 4, 2, cs, sn, SC_ROPE_HALF, false);
    double th0 = 2.0, th1 = 2.0 / 100.0; /* pos 2, freqs 1 and 1/100 */
    CHECK_NEAR(a[0], 1 * cos(th0) - 2 * sin(th0), 1e-6);
    CHECK_NEAR(a[1], 1 * sin(th0) + 2 * cos(th0), 1e-6);
    CHECK_NEAR(a[2], 3 * cos(th1) - 4 * sin(th1), 1e-6);
    CHECK_NEAR(b[0], 1 * cos(th0) - 3 * sin(th0), 1e-6);
    CHECK_NEAR(b[2], 1 * sin(th0) + 3 * cos(th0), 1e-6);
    CHECK_NEAR(b[1], 2 * cos(th1) - 4 * sin(th1), 1e-6);

    /* causal softmax: row t keeps pos0 + t + 1 columns */
    float s[2 * 4] = {1, 2, 3, 4, 1, 1, 1, 9};
    sc_causal_softmax(s, 2, 4, 1);
    CHECK_NEAR(s[0] + s[1], 1.0, 1e-6);
    CHECK(s[2] == 0 && s[3] == 0);
    CHECK_NEAR(s[4], 1.0 / 3, 1e-6);
    CHECK(s[7] == 0);

    /* activations */
    CHECK_NEAR(sc_act_scalar(1.0f, SC_ACT_SILU), 1.0 / (1.0 + exp(-1.0)), 1e-7);
    double x = -0.7, g = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    CHECK_NEAR(sc_act_scalar((float)x, SC_ACT_GELU_TANH), g, 1e-7);
    return sc_test_finish();
}
