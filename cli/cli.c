#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include "json_out.h"
#include "ops.h"
#include "srt.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


int cli_exit_code(sc_status st) { return (st == SC_EARG || st == SC_EIO) ? 2 : 1; }

int cli_parse_list(const char *s, double *v, int max, double lo, double hi, bool integral) {
    int n = 0;
    while (s && *s) {
        char *end;
        double x = strtod(s, &end);
        if (end == s || n == max || !(x >= lo && x <= hi) || (integral && x != floor(x))) return -1;
        v[n++] = x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return n;
}

/* The one place a command's name prefixes its errors: a message that starts
 * with the name itself ("pack: ...", "pack --permute: ...", from a function
 * that knows its caller) is not prefixed twice. */
static const char *without_cmd(const char *cmd, const char *msg) {
    size_t n = strlen(cmd);
    if (strncmp(msg, cmd, n) != 0) return msg;
    if (msg[n] == ':' && msg[n + 1] == ' ') return msg + n + 2;
    if (msg[n] == ' ' && msg[n + 1] == '-') return msg + n + 1;
    return msg;
}

int cli_fail(const char *cmd, sc_status st, const sc_err *err) {
    fprintf(stderr, "sparsecal %s: %s\n", cmd, err->msg[0] ? without_cmd(cmd, err->msg) : sc_status_name(st));
    return cli_exit_code(st);
}

sc_status cli_check_output(const cli_inputs *in, const char *out, const char *const *more, sc_err *err) {
    if (in) {
        const char *named[] = {in->model_path, in->tok_path, in->data_path, in->tokens_path};
        for (size_t i = 0; i < sizeof named / sizeof named[0]; i++) srt_input_note_path(named[i]);
    }
    for (size_t i = 0; more && more[i]; i++) srt_input_note_path(more[i]);
    if (!out) return SC_OK;
    char msg[sizeof err->msg];
    if (srt_output_check(out, msg, sizeof msg)) return sc_errf(err, SC_EARG, "%s", msg);
    return SC_OK;
}

sc_status cli_steps(int64_t n_predict, int64_t steps_given, int64_t n_prompt, int64_t limit, const char *limit_what,
                    int64_t *steps, sc_err *err) {
    if (n_predict != CLI_UNSET && steps_given != CLI_UNSET)
        return sc_errf(err, SC_EARG, "give -n (tokens to generate) or --steps (positions in all), not both");
    if (n_predict == 0)
        return sc_errf(err, SC_EARG, "-n 0 generates nothing: give -n N >= 1, or -1 for the whole context");
    if (n_prompt > limit)
        return sc_errf(err, SC_EARG, "the prompt (%lld tokens with BOS) does not fit in %s (%lld positions)",
                       (long long)n_prompt, limit_what, (long long)limit);
    if (steps_given != CLI_UNSET) {
        if (steps_given > limit)
            return sc_errf(err, SC_EARG, "--steps %lld exceeds %s (%lld positions)", (long long)steps_given, limit_what,
                           (long long)limit);
        if (n_prompt > steps_given)
            return sc_errf(err, SC_EARG, "the prompt (%lld tokens with BOS) fills all %lld steps", (long long)n_prompt,
                           (long long)steps_given);
        *steps = steps_given;
        return SC_OK;
    }
    if (n_predict == -1) {
        *steps = limit;
        return SC_OK;
    }
    /* the last token sampled is kept without being fed: N tokens need N - 1 positions after the prompt */
    int64_t n = n_predict == CLI_UNSET ? CLI_DEFAULT_PREDICT : n_predict, need = n_prompt + n - 1;
    if (need > limit && n_predict != CLI_UNSET)
        return sc_errf(err, SC_EARG, "-n %lld exceeds %s (%lld positions) after a prompt of %lld tokens (BOS included)",
                       (long long)n, limit_what, (long long)limit, (long long)n_prompt);
    *steps = need > limit ? limit : need;
    return SC_OK;
}

/* tokenizer.json (else tokenizer.model) beside a Hugging Face model, or NULL. */
static const char *hf_tokenizer_file(const char *model_path, char *buf, size_t cap) {
    if (!sc_is_dir(model_path)) return NULL;
    if (sc_path_join(buf, cap, model_path, "tokenizer.json") && sc_file_exists(buf)) return buf;
    if (sc_path_join(buf, cap, model_path, "tokenizer.model") && sc_file_exists(buf)) return buf;
    return NULL;
}

const char *cli_threads_help(void) {
    static char buf[192];
    snprintf(buf, sizeof buf,
             "threads to compute with, BLAS and runtime kernels (default: all %d cores, 1 for layers under %.0fM "
             "parameters; OPENBLAS_NUM_THREADS if set)",
             sc_cpu_count(), SC_THREADS_SMALL_LAYER / 1e6);
    return buf;
}

sc_status cli_threads_setup(int64_t threads, sc_err *err) {
    if (threads == 0 && sc_threads_env() < 0)
        return sc_errf(err, SC_EARG, "OPENBLAS_NUM_THREADS=%s is not an integer in 1..%d (unset it or give --threads)",
                       getenv("OPENBLAS_NUM_THREADS"), SC_THREADS_MAX);
    sc_threads_request((int)threads);
    return SC_OK;
}

sc_status cli_load(cli_inputs *in, bool need_tok, sc_err *err) {
    SC_TRY(cli_threads_setup(in->threads, err));
    if (!in->model_path) return sc_errf(err, SC_EARG, "no model given (-m MODEL)");
    SC_TRY(sc_model_load(in->model_path, &in->model, err));
    sc_blas_configure(&in->model->cfg);
    char buf[4096];
    const char *tok_path = in->tok_path ? in->tok_path : hf_tokenizer_file(in->model_path, buf, sizeof buf);
    if (tok_path) {
        SC_TRY(sc_tokenizer_load_auto(tok_path, in->model->cfg.vocab_size, &in->tok_owned, err));
        if (sc_tokenizer_vocab_size(in->tok_owned) > in->model->cfg.vocab_size)
            return sc_errf(err, SC_EARG, "%s: tokenizer has %lld tokens but the model only %lld", tok_path,
                           (long long)sc_tokenizer_vocab_size(in->tok_owned), (long long)in->model->cfg.vocab_size);
        in->tok = in->tok_owned;
    } else {
        in->tok = in->model->tokenizer;
    }
    if (need_tok && !in->tok)
        return sc_errf(err, SC_EARG, "%s: the model file carries no tokenizer; give one with --tokenizer%s%s",
                       in->model_path, in->model->note[0] ? " (" : "", in->model->note[0] ? in->model->note : "");
    if (need_tok && in->model->note[0] && !tok_path) fprintf(stderr, "note: %s\n", in->model->note);
    return SC_OK;
}

sc_status cli_load_data(cli_inputs *in, sc_dataset *d, sc_err *err) {
    if (in->data_path && in->tokens_path) return sc_errf(err, SC_EARG, "give either -f or --tokens, not both");
    if (in->tokens_path) {
        int64_t limit = in->seed > 0 || in->max_docs == 0 ? 0 : in->max_docs + in->skip_docs;
        SC_TRY(sc_data_load_tokens(in->tokens_path, in->model->cfg.vocab_size, limit, d, err));
        if (in->seed > 0) sc_dataset_shuffle(d, (uint64_t)in->seed);
        sc_status st = sc_dataset_window(d, in->skip_docs, in->max_docs, in->tokens_path, err);
        if (!st && in->pack > 0) st = sc_dataset_pack(d, in->pack, in->tokens_path, err);
        if (st) sc_dataset_free(d);
        return st;
    }
    if (!in->data_path) return sc_errf(err, SC_EARG, "no data given (-f TEXT or --tokens IDS)");
    if (!in->tok)
        return sc_errf(err, SC_EARG,
                       "%s: text data needs a tokenizer; give --tokenizer, or pre-tokenized ids with --tokens",
                       in->data_path);
    sc_data_opts o;
    sc_data_opts_default(&o);
    o.separator = in->separator;
    o.max_docs = in->max_docs;
    o.skip_docs = in->skip_docs;
    o.add_bos = !in->no_bos;
    o.add_eos = in->add_eos;
    o.parse_special = in->parse_special;
    o.shuffle = in->seed > 0;
    o.seed = (uint64_t)(in->seed > 0 ? in->seed : 0);
    o.pack = in->pack;
    if (in->chat_format) SC_TRY(sc_chat_parse(in->chat_format, &o.chat, err));
    return sc_data_load_text(in->data_path, in->tok, &o, d, err);
}

void cli_inputs_free(cli_inputs *in) {
    sc_tokenizer_free(in->tok_owned);
    sc_model_free(in->model);
    in->tok_owned = NULL;
    in->model = NULL;
}

/* the available runtime ISAs as "scalar avx2 avx512", and the selected one
 * (or the reason SPARSECAL_ISA cannot be honoured) */
static void isa_lists(char *avail, size_t cap, char *chosen, size_t ccap) {
    avail[0] = '\0';
    for (int i = 0; i < SRT_ISA_COUNT; i++) {
        if (!srt_isa_available((srt_isa)i)) continue;
        size_t n = strlen(avail);
        snprintf(avail + n, cap - n, "%s%s", n ? " " : "", srt_isa_name((srt_isa)i));
    }
    srt_isa isa;
    if (srt_isa_resolve(SRT_ISA_AUTO, &isa) == SRT_OK)
        snprintf(chosen, ccap, "%s", srt_isa_name(isa));
    else
        snprintf(chosen, ccap, "none (SPARSECAL_ISA=%s is not available here)", getenv("SPARSECAL_ISA"));
}

/* the count for model c (NULL: none yet), why, and the count BLAS really takes */
static int threads_for(const sc_config *c, sc_threads_source *why, int *blas) {
    int n = c ? sc_threads_for(c->dim, c->ffn_dim, c->n_heads * c->head_dim, why) : sc_threads_for(0, 0, 0, why);
    *blas = sc_blas_configure(c);
    return n;
}

#define BLAS_AUTO_ENV "SPARSECAL_OPENBLAS_CHOSE"

void cli_blas_fix_kernels(char **argv) {
    if (getenv("OPENBLAS_CORETYPE") || getenv(BLAS_AUTO_ENV)) return;
    sc_blas_desc b;
    sc_blas_describe(&b);
    static const char *narrow[] = {"Prescott", "Core2",  "Penryn", "Dunnington", "Nehalem",
                                   "Atom",     "Katmai", "Banias", "Northwood",  "Sandybridge"};
    bool is_narrow = false;
    for (size_t i = 0; i < sizeof narrow / sizeof narrow[0]; i++) is_narrow |= strcmp(b.core, narrow[i]) == 0;
    uint32_t cpu = srt_cpu_features();
    uint32_t avx512 = SRT_CPU_AVX512F | SRT_CPU_AVX512BW | SRT_CPU_AVX512VL, avx2 = SRT_CPU_AVX2 | SRT_CPU_FMA;
    const char *want = (cpu & avx512) == avx512 ? "SkylakeX" : (cpu & avx2) == avx2 ? "Haswell" : NULL;
    if (!is_narrow || !want) return;
    if (setenv("OPENBLAS_CORETYPE", want, 1) || setenv(BLAS_AUTO_ENV, b.core, 1)) return;
    /* the binary's own path, so that ps and top still show "sparsecal" */
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0 && (size_t)len < sizeof self - 1) {
        self[len] = '\0';
        execv(self, argv); /* returns only on failure: go on with what OpenBLAS chose */
    }
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(BLAS_AUTO_ENV);
}

sc_status cli_ctx_create(srt_ctx **out, srt_isa isa, int threads, sc_err *err) {
    srt_status st = srt_ctx_create(out, isa, threads);
    if (st == SRT_OK) return SC_OK;
    if (st == SRT_EPREFETCH)
        return sc_errf(err, SC_EARG, "SPARSECAL_PREFETCH=\"%s\" is malformed: expected %s", getenv("SPARSECAL_PREFETCH"),
                       SRT_PREFETCH_SYNTAX);
    if (st == SRT_EISA)
        return sc_errf(err, SC_EARG, "ISA %s is not available on this CPU",
                       isa == SRT_ISA_AUTO ? "(SPARSECAL_ISA)" : srt_isa_name(isa));
    return sc_errf(err, SC_ENOMEM, "cannot start a kernel context with %d threads (%s)", threads, srt_status_str(st));
}

bool cli_prefetch_desc(char *buf, int cap) {
    srt_ctx *ctx = NULL;
    sc_err err = {0};
    if (cli_ctx_create(&ctx, SRT_ISA_SCALAR, 1, &err) != SC_OK) {
        snprintf(buf, (size_t)cap, "%s", err.msg);
        return false;
    }
    srt_ctx_prefetch(ctx, buf, cap);
    srt_ctx_free(ctx);
    return true;
}

void cli_print_provenance(FILE *f, const sc_config *c) {
    char avail[128], chosen[128];
    isa_lists(avail, sizeof avail, chosen, sizeof chosen);
    const char *env = getenv("SPARSECAL_ISA");
    fprintf(f, "kernels     %s available; using %s (SPARSECAL_ISA%s%s)\n", avail, chosen, env && *env ? "=" : " unset",
            env && *env ? env : "");
    sc_threads_source why;
    int blas_n, n = threads_for(c, &why, &blas_n);
    sc_blas_desc b;
    sc_blas_describe(&b);
    const char *chose = getenv(BLAS_AUTO_ENV);
    if (chose)
        fprintf(f, "blas        %s %s, %s kernels (set by sparsecal: OpenBLAS chose %s for this CPU; set OPENBLAS_CORETYPE to override), %d threads\n",
                b.library, b.version, b.core, chose, b.threads);
    else
        fprintf(f, "blas        %s %s, %s kernels (OPENBLAS_CORETYPE%s%s), %d threads\n", b.library, b.version, b.core,
                b.coretype_env[0] ? "=" : " unset", b.coretype_env, b.threads);
    fprintf(f, "threads     %d (%s%s): BLAS %d, runtime kernels %d\n", n, sc_threads_source_name(why),
            !c && why == SC_THREADS_ALL_CORES ? "; 1 for models with layers under 4M parameters" : "", blas_n, n);
    char pf[512];
    const char *pe = getenv("SPARSECAL_PREFETCH");
    if (cli_prefetch_desc(pf, sizeof pf))
        fprintf(f, "prefetch    %s (%s%s%s)\n", pf, pe ? "SPARSECAL_PREFETCH=" : "this CPU kind's distances; SPARSECAL_PREFETCH unset",
                pe ? pe : "", pe ? " over this CPU kind's" : "");
    else
        fprintf(f, "prefetch    none: %s\n", pf);
}

void cli_provenance_json(cJSON *j, const sc_config *c) {
    char avail[128], chosen[128];
    isa_lists(avail, sizeof avail, chosen, sizeof chosen);
    cJSON *k = cJSON_AddObjectToObject(j, "kernels");
    cJSON *arr = cJSON_AddArrayToObject(k, "available");
    for (int i = 0; i < SRT_ISA_COUNT; i++)
        if (srt_isa_available((srt_isa)i)) cJSON_AddItemToArray(arr, cJSON_CreateString(srt_isa_name((srt_isa)i)));
    cJSON_AddStringToObject(k, "selected", chosen);
    char pf[512];
    if (cli_prefetch_desc(pf, sizeof pf)) cJSON_AddStringToObject(k, "prefetch", pf);
    else cJSON_AddNullToObject(k, "prefetch");
    sc_threads_source why;
    int blas_n, n = threads_for(c, &why, &blas_n);
    sc_blas_desc b;
    sc_blas_describe(&b);
    cJSON *o = cJSON_AddObjectToObject(j, "blas");
    cJSON_AddStringToObject(o, "library", b.library);
    cJSON_AddStringToObject(o, "version", b.version);
    cJSON_AddStringToObject(o, "core", b.core);
    if (b.coretype_env[0])
        cJSON_AddStringToObject(o, "openblas_coretype", b.coretype_env);
    else
        cJSON_AddNullToObject(o, "openblas_coretype");
    const char *chose = getenv(BLAS_AUTO_ENV); /* set by cli_blas_fix_kernels: what OpenBLAS chose itself */
    if (chose)
        cJSON_AddStringToObject(o, "openblas_chose", chose);
    else
        cJSON_AddNullToObject(o, "openblas_chose");
    cJSON_AddNumberToObject(o, "threads", b.threads);
    cJSON_AddStringToObject(o, "config", b.config);
    cJSON *t = cJSON_AddObjectToObject(j, "threads");
    cJSON_AddNumberToObject(t, "count", n);
    cJSON_AddStringToObject(t, "source", sc_threads_source_name(why));
    cJSON_AddNumberToObject(t, "blas", blas_n);
    cJSON_AddNumberToObject(t, "kernels", n);
    cJSON_AddNumberToObject(t, "cpus", sc_cpu_count());
}

uint64_t cli_rss_bytes(void) {
    sc_mem m;
    sc_mem_read(&m);
    return m.rss;
}

uint64_t cli_peak_rss_bytes(void) {
    sc_mem m;
    sc_mem_read(&m);
    return m.hwm;
}

void cli_print_json(cJSON *j) {
    char *s = sc_json_print(j, false);
    if (s) puts(s);
    free(s);
    cJSON_Delete(j);
}
