/* test_lora.c - LoRA fusion: W' = W + (alpha/r) B A on the adapted layers,
 * checked elementwise in double; untouched layers stay; bad adapters give
 * clean errors; pack --lora through the CLI. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lora.h"
#include "safetensors.h"
#include "testing.h"

static sc_err err;

static void write_config(const char *dir, const char *json) {
    char p[4096];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    sc_write_bytes(p, json, strlen(json));
}

/* an adapter for layer 1 down_proj [64 x 172] and layer 3 q_proj [64 x 64], rank 4, bf16 B */
static void write_adapter(const char *dir, float *A1, float *B1, float *A3, float *B3, int bad_shape) {
    mkdir(dir, 0755);
    char p[4096];
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    sc_st_spec specs[4] = {
        {"base_model.model.model.layers.1.mlp.down_proj.lora_A.weight", SC_DT_F32, NULL, 2, {4, bad_shape ? 171 : 172}},
        {"base_model.model.model.layers.1.mlp.down_proj.lora_B.weight", SC_DT_F32, NULL, 2, {64, 4}},
        {"base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight", SC_DT_F32, NULL, 2, {4, 64}},
        {"base_model.model.model.layers.3.self_attn.q_proj.lora_B.weight", SC_DT_BF16, NULL, 2, {64, 4}},
    };
    sc_st_writer *w;
    CHECK(sc_st_writer_create(p, specs, 4, NULL, 0, &w, &err) == SC_OK);
    sc_st_writer_write_f32(w, A1, (size_t)4 * (bad_shape ? 171 : 172), &err);
    sc_st_writer_write_f32(w, B1, 64 * 4, &err);
    sc_st_writer_write_f32(w, A3, 4 * 64, &err);
    sc_st_writer_write_f32(w, B3, 64 * 4, &err);
    CHECK(sc_st_writer_finish(w, &err) == SC_OK);
    sc_st_writer_free(w);
}

int main(void) {
    const char *bin = sc_asset("models/stories260K.bin"), *tok = sc_asset("models/tok512.bin"),
               *text = sc_asset("text/tinystories_sample.txt");
    if (!bin || !tok || !text) return sc_test_finish();
    float A1[4 * 172], B1[64 * 4], A3[4 * 64], B3[64 * 4];
    uint32_t s = 7;
    for (int i = 0; i < 4 * 172; i++) A1[i] = (float)((s = s * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f;
    for (int i = 0; i < 64 * 4; i++) B1[i] = (float)((s = s * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f;
    for (int i = 0; i < 4 * 64; i++) A3[i] = (float)((s = s * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f;
    for (int i = 0; i < 64 * 4; i++) B3[i] = sc_bf16_to_f32(sc_f32_to_bf16((float)((s = s * 1664525u + 1013904223u) >> 9) / 8388608.0f - 1.0f));
    const char *dir = sc_tmp_path("adapter");
    write_adapter(dir, A1, B1, A3, B3, 0);
    write_config(dir, "{\"r\": 4, \"lora_alpha\": 8, \"target_modules\": [\"down_proj\", \"q_proj\"]}");
    sc_model *m, *base;
    CHECK(sc_model_load(bin, &m, &err) == SC_OK);
    CHECK(sc_model_load(bin, &base, &err) == SC_OK);
    sc_lora_result lr;
    CHECK_MSG(sc_lora_fuse(m, dir, &lr, &err) == SC_OK, "%s", err.msg);
    CHECK(lr.fused == 2 && lr.rank == 4 && lr.scale == 2.0);
    double worst = 0;
    for (int o = 0; o < 64; o++)
        for (int i = 0; i < 172; i++) {
            double d = 0;
            for (int k = 0; k < 4; k++) d += (double)B1[o * 4 + k] * A1[k * 172 + i];
            worst = fmax(worst, fabs(sc_test_layer(m, 1)->wd[o * 172 + i] - (sc_test_layer(base, 1)->wd[o * 172 + i] + 2.0 * d)));
        }
    for (int o = 0; o < 64; o++)
        for (int i = 0; i < 64; i++) {
            double d = 0;
            for (int k = 0; k < 4; k++) d += (double)B3[o * 4 + k] * A3[k * 64 + i];
            worst = fmax(worst, fabs(sc_test_layer(m, 3)->wq[o * 64 + i] - (sc_test_layer(base, 3)->wq[o * 64 + i] + 2.0 * d)));
        }
    printf("fused weights vs W + (alpha/r) B A in double: worst abs error %.3g\n", worst);
    CHECK(worst < 1e-5);
    CHECK(sc_test_layer(m, 0)->wd == sc_test_layer(base, 0)->wd || memcmp(sc_test_layer(m, 0)->wd, sc_test_layer(base, 0)->wd, 64 * 172 * 4) == 0);
    CHECK(memcmp(sc_test_layer(m, 1)->wq, sc_test_layer(base, 1)->wq, 64 * 64 * 4) == 0);
    sc_model_free(m);
    /* rsLoRA scale */
    write_config(dir, "{\"r\": 4, \"lora_alpha\": 8, \"use_rslora\": true}");
    CHECK(sc_model_load(bin, &m, &err) == SC_OK);
    CHECK(sc_lora_fuse(m, dir, &lr, &err) == SC_OK && lr.scale == 4.0);
    sc_model_free(m);
    /* bad adapters */
    CHECK(sc_model_load(bin, &m, &err) == SC_OK);
    write_config(dir, "{\"lora_alpha\": 8}");
    CHECK(sc_lora_fuse(m, dir, &lr, &err) == SC_EFORMAT && strstr(err.msg, "adapter_config.json"));
    write_config(dir, "{\"r\": 8, \"lora_alpha\": 8}");
    CHECK(sc_lora_fuse(m, dir, &lr, &err) == SC_EFORMAT && strstr(err.msg, "lora_A"));
    const char *dir2 = sc_tmp_path("adapter2");
    write_adapter(dir2, A1, B1, A3, B3, 1);
    write_config(dir2, "{\"r\": 4, \"lora_alpha\": 8}");
    CHECK(sc_lora_fuse(m, dir2, &lr, &err) == SC_EFORMAT);
    CHECK(sc_lora_fuse(m, sc_tmp_path("nothing"), &lr, &err) != SC_OK);
    sc_model_free(m);
    /* pack --lora through the CLI: the fused artifact differs from the base one */
    write_config(dir, "{\"r\": 4, \"lora_alpha\": 8}");
    char cmd[16384], out[4096];
    const char *p0 = sc_tmp_path("base.spk"), *p1 = sc_tmp_path("lora.spk");
    snprintf(cmd, sizeof cmd, "%s pack -m %s --tokenizer %s --layout f32 -o %s -q && %s pack -m %s --tokenizer %s "
        "--layout f32 --lora %s -o %s -q",
             SC_CLI_PATH, bin, tok, p0, SC_CLI_PATH, bin, tok, dir, p1);
    CHECK(sc_run(cmd, out, sizeof out) == 0);
    sc_model *a, *b;
    CHECK(sc_model_load(p1, &b, &err) == SC_OK && sc_model_load(p0, &a, &err) == SC_OK);
    CHECK(memcmp(sc_test_layer(a, 1)->wd, sc_test_layer(b, 1)->wd, 64 * 172 * 4) != 0);
    CHECK(memcmp(sc_test_layer(a, 2)->wd, sc_test_layer(b, 2)->wd, 64 * 172 * 4) == 0);
    sc_model_free(a);
    sc_model_free(b);
    sc_model_free(base);
    return sc_test_finish();
}
