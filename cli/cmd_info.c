/* cmd_info.c - `sparsecal info`. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "srt.h"

int cmd_info(int argc, char **argv) {
    cli_inputs in = {0};
    bool json = false;
    const sc_opt opts[] = {
        {"model", 'm', SC_ARG_STR, &in.model_path, "MODEL", "model: llama2.c .bin, .gguf, Hugging Face dir or .spk "
            "(required)", 0, 0},
        {"tokenizer", 0, SC_ARG_STR, &in.tok_path, "TOK", "tokenizer to describe instead of the model's (default: "
            "the model's)", 0, 0},
        CLI_THREADS_OPT(in.threads),
        {"json", 0, SC_ARG_FLAG, &json, NULL, "print one JSON object", 0, 0},
        SC_OPTS_END("  sparsecal info -m stories260K.gguf\n"
"  sparsecal info -m model/ --json"),
    };
    int r = sc_parse_args("info", "Describe a model: family, shapes, dtypes, parameter count, tokenizer, memory.", opts,
                          argc, argv, NULL, 0, NULL);
    if (r) return r == SC_ARGS_HELP ? 0 : 2;
    sc_err err = {{0}};
    sc_status st = cli_load(&in, false, &err);
    if (st) {
        cli_inputs_free(&in);
        return cli_fail("info", st, &err);
    }
    const sc_model *m = in.model;
    const sc_config *c = &m->cfg;
    char feats[256];
    srt_cpu_feature_names(srt_cpu_features(), feats, sizeof feats);
    const char *rope = c->rope == SC_ROPE_INTERLEAVED ? "interleaved" : "rotate-half";
    const char *act = c->act == SC_ACT_SILU ? "silu" : "gelu-tanh";
    int64_t params = sc_model_param_count(m);
    uint64_t rss = cli_rss_bytes();
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "path", m->path);
        cJSON_AddStringToObject(j, "format", m->format);
        cJSON_AddStringToObject(j, "family", sc_family_name(c->family));
        cJSON_AddStringToObject(j, "dtype", m->src_dtype);
        cJSON_AddNumberToObject(j, "dim", (double)c->dim);
        cJSON_AddNumberToObject(j, "ffn_dim", (double)c->ffn_dim);
        cJSON_AddNumberToObject(j, "n_layers", (double)c->n_layers);
        cJSON_AddNumberToObject(j, "n_heads", (double)c->n_heads);
        cJSON_AddNumberToObject(j, "n_kv_heads", (double)c->n_kv_heads);
        cJSON_AddNumberToObject(j, "head_dim", (double)c->head_dim);
        cJSON_AddNumberToObject(j, "vocab_size", (double)c->vocab_size);
        cJSON_AddNumberToObject(j, "max_seq_len", (double)c->max_seq_len);
        cJSON_AddNumberToObject(j, "norm_eps", (double)c->norm_eps);
        cJSON_AddNumberToObject(j, "rope_theta", (double)c->rope_theta);
        cJSON_AddStringToObject(j, "rope", rope);
        cJSON_AddStringToObject(j, "activation", act);
        cJSON_AddBoolToObject(j, "tied_classifier", c->tied_classifier);
        cJSON_AddBoolToObject(j, "qkv_bias", c->qkv_bias);
        cJSON_AddNumberToObject(j, "bos_id", c->bos_id);
        cJSON_AddNumberToObject(j, "eos_id", c->eos_id);
        cJSON_AddNumberToObject(j, "parameters", (double)params);
        if (in.tok) {
            cJSON *t = cJSON_AddObjectToObject(j, "tokenizer");
            cJSON_AddStringToObject(t, "kind", sc_tokenizer_kind(in.tok));
            cJSON_AddNumberToObject(t, "vocab_size", (double)sc_tokenizer_vocab_size(in.tok));
            cJSON_AddStringToObject(t, "source", in.tok_path ? in.tok_path : "model file");
        } else {
            cJSON_AddNullToObject(j, "tokenizer");
        }
        if (m->note[0]) cJSON_AddStringToObject(j, "note", m->note);
        cJSON_AddNumberToObject(j, "weights_mapped_bytes", (double)m->mapped_bytes);
        cJSON_AddNumberToObject(j, "weights_converted_bytes", (double)m->owned_bytes);
        cJSON_AddNumberToObject(j, "weights_on_use_bytes", (double)m->lazy_bytes);
        cJSON_AddNumberToObject(j, "rss_bytes", (double)rss);
        cJSON_AddStringToObject(j, "cpu_features", feats);
        cli_provenance_json(j, c);
        cli_print_json(j);
    } else {
        printf("model       %s (%s, %s weights)\n", m->path, m->format, m->src_dtype);
        printf("family      %s: dim %lld, ffn %lld, %lld layers, %lld heads (%lld kv, head_dim %lld)\n",
               sc_family_name(c->family), (long long)c->dim, (long long)c->ffn_dim, (long long)c->n_layers,
               (long long)c->n_heads, (long long)c->n_kv_heads, (long long)c->head_dim);
        printf("            vocab %lld, context %lld, rope %s (theta %g), %s, norm eps %g%s%s%s\n",
               (long long)c->vocab_size, (long long)c->max_seq_len, rope, (double)c->rope_theta, act,
               (double)c->norm_eps, c->tied_classifier ? ", tied classifier" : ", untied classifier",
               c->qkv_bias ? ", qkv bias" : "", c->embed_scale ? ", embeddings x sqrt(dim)" : "");
        printf("parameters  %lld (%.3f M)\n", (long long)params, (double)params / 1e6);
        if (in.tok)
            printf("tokenizer   %s, %lld tokens (%s), bos %d eos %d\n", sc_tokenizer_kind(in.tok),
                   (long long)sc_tokenizer_vocab_size(in.tok), in.tok_path ? in.tok_path : "from the model file",
                   sc_tokenizer_bos(in.tok), sc_tokenizer_eos(in.tok));
        else
            printf("tokenizer   none in the model file (give --tokenizer, or use --tokens)\n");
        if (m->note[0]) printf("note        %s\n", m->note);
        printf("memory      %.2f MiB weights mapped in place, %.2f MiB converted to f32 at load, %.2f MiB as f32 "
               "converted on use (a layer at a time), RSS %.2f MiB\n",
               (double)m->mapped_bytes / 1048576.0, (double)m->owned_bytes / 1048576.0, (double)m->lazy_bytes / 1048576.0,
               (double)rss / 1048576.0);
        printf("cpu         %s\n", feats);
        cli_print_provenance(stdout, c);
    }
    cli_inputs_free(&in);
    return 0;
}
