/* cli.h - what the subcommands share: loading a model, its tokenizer and
 * data from the usual options, and mapping failures to exit codes. */
#ifndef SC_CLI_H
#define SC_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "args.h"
#include "common.h"
#include "data.h"
#include "model.h"
#include "threads.h"
#include "srt_model.h"
#include "tokenizer.h"

/* Exit status for a failure: 2 for bad usage or an unreadable input, 1 otherwise. */
int cli_fail(const char *cmd, sc_status st, const sc_err *err);
/* The exit status cli_fail returns, without printing. */
int cli_exit_code(sc_status st);
/* A comma-separated list of at most max numbers in [lo, hi] into v (NaN is in no range; integral: whole
 * numbers only): how many, or -1 for anything else. */
int cli_parse_list(const char *s, double *v, int max, double lo, double hi, bool integral);

typedef struct cli_inputs {
    const char *model_path, *tok_path, *data_path, *tokens_path, *separator;
    int64_t max_docs;
    int64_t skip_docs;
    bool no_bos;
    bool add_eos;           /* --eos: append EOS to every document */
    bool parse_special;     /* --parse-special: special tokens written in text are recognised */
    int64_t seed;           /* --shuffle-seed S (S >= 1): shuffle documents deterministically; 0 keeps the file order */
    int64_t pack;           /* --pack N: sequences of exactly N tokens; 0: one document per sequence */
    const char *chat_format; /* --chat-format NAME for "messages" JSONL lines; NULL: from the tokenizer */
    int64_t threads;        /* -t/--threads N; 0: not given (see threads.h) */
    sc_model *model;
    sc_tokenizer *tok_owned; /* from --tokenizer, or tokenizer.json beside a Hugging Face model; else the model's */
    const sc_tokenizer *tok;
} cli_inputs;

/* Option-table rows every command that reads a model and data shares (use
 * inside an sc_opt array; `in` is a cli_inputs lvalue). Names follow llama.cpp
 * where they overlap: -m model, -t threads, -f file, -c context, -s sampling seed. */
#define CLI_TOKENIZER_HELP                                                                                     \
    "tokenizer.json, tokenizer.model, llama2.c tokenizer.bin, .gguf or a dir (default: the model's)"
#define CLI_MODEL_OPTS(in)                                                                                           \
    {"model|artifact", 'm', SC_ARG_STR, &(in).model_path, "MODEL",                                                    \
     "model: llama2.c .bin, .gguf, Hugging Face dir or a packed artifact .spk (required)", 0, 0},                    \
    {"tokenizer", 0, SC_ARG_STR, &(in).tok_path, "TOK", CLI_TOKENIZER_HELP, 0, 0}
#define CLI_DATA_OPTS(in)                                                                                         \
    {"file|data", 'f', SC_ARG_STR, &(in).data_path, "TEXT",                                                        \
     "text (documents split at lines that are empty or only spaces/tabs; each document loses leading blank "      \
     "lines and trailing whitespace, nothing else) or JSONL with \"text\" or chat \"messages\" (this or --tokens " \
     "is required)", 0, 0},                                                                                       \
    {"tokens", 0, SC_ARG_STR, &(in).tokens_path, "IDS",                                                            \
     "pre-tokenized file: one sequence of ids per line, used as given (default: none, -f)", 0, 0},                \
    {"sep", 0, SC_ARG_STR, &(in).separator, "STR",                                                                 \
     "document separator instead of blank lines, e.g. '<|endoftext|>' (default: blank lines)", 0, 0},             \
    {"max-docs|seqs", 0, SC_ARG_INT, &(in).max_docs, "N",                                                          \
     "use at most N documents, after --shuffle-seed and --skip-docs (default 0: all)", 0, 1e15},                  \
    {"skip-docs", 0, SC_ARG_INT, &(in).skip_docs, "N",                                                             \
     "leave out the first N documents, e.g. a held-out split: calibrate with --max-docs N, evaluate with "        \
     "--skip-docs N (default 0)", 0, 1e15},                                                                       \
    {"no-bos", 0, SC_ARG_FLAG, &(in).no_bos, NULL, "do not prepend BOS to text documents", 0, 0},                  \
    {"eos", 0, SC_ARG_FLAG, &(in).add_eos, NULL, "append EOS to every text document", 0, 0},                       \
    {"parse-special", 0, SC_ARG_FLAG, &(in).parse_special, NULL, "recognise special tokens written in text", 0, 0}, \
    {"shuffle-seed", 0, SC_ARG_INT, &(in).seed, "S",                                                               \
     "shuffle documents deterministically with seed S >= 1 (default: file order)", 1, 4e18},                      \
    {"seed", 0, SC_ARG_GONE, NULL, NULL,                                                                           \
     "documents are shuffled with --shuffle-seed S (--seed seeds sampling in generate and run, training in "     \
     "train)", 0, 0},                                                                                             \
    {"pack", 0, SC_ARG_INT, &(in).pack, "N",                                                                       \
     "pack documents end to end into sequences of exactly N tokens (default: one document per sequence)", 2,      \
     1 << 24},                                                                                                    \
    {"chat-format", 0, SC_ARG_STR, &(in).chat_format, "F",                                                         \
     "chat format for JSONL \"messages\": llama3, gemma, chatml, mistral (default: from the tokenizer)", 0, 0}

/* -t/--threads N, the threads a command computes with (BLAS and the runtime
 * kernels, calib/threads.h), for every command that does heavy work; var
 * (int64_t) stays 0 when the option is not given. */
#define CLI_THREADS_OPT(var) {"threads", 't', SC_ARG_INT, &(var), "N", cli_threads_help(), 1, SC_THREADS_MAX}
/* -c/--ctx-size N (also --ctx), the one context option: what N means for the command is its help. */
#define CLI_CTX_OPT(var, help) {"ctx-size|ctx", 'c', SC_ARG_INT, &(var), "N", help, 2, 1 << 21}
const char *cli_threads_help(void);
/* Makes --threads (0: not given) the count of threads.h; an OPENBLAS_NUM_THREADS
 * that is not an integer in 1..1024 is an error unless --threads is given. */
sc_status cli_threads_setup(int64_t threads, sc_err *err);

/* Loads -m and the tokenizer: --tokenizer (any kind, see sc_tokenizer_load_auto),
 * else tokenizer.json / tokenizer.model beside a Hugging Face model, else
 * the model's own. need_tok: fail when there is none. Sets the thread count
 * (in->threads) for the model. */
sc_status cli_load(cli_inputs *in, bool need_tok, sc_err *err);
/* Loads -f (text/JSONL) or --tokens into d, then shuffles (--seed), cuts
 * (--max-docs) and packs (--pack). */
sc_status cli_load_data(cli_inputs *in, sc_dataset *d, sc_err *err);
void cli_inputs_free(cli_inputs *in);
/* Refuses an output (-o) that is the same file as an input: notes the named
 * inputs of in (may be NULL) and the NULL-terminated list more (may be NULL)
 * beside every file read so far (srt_file.h), then checks out (may be NULL).
 * Commands call it before loading (a quick refusal) and again before long
 * work; the writers check once more when they create and commit the file. */
sc_status cli_check_output(const cli_inputs *in, const char *out, const char *const *more, sc_err *err);

/* How long generate and run go on, as llama.cpp: -n/--n-predict N tokens to
 * generate (-1: until the context is full), or llama2.c's --steps N, the total
 * positions with BOS and prompt. Neither given: -n CLI_DEFAULT_PREDICT, fewer
 * when the context ends first. Generation stops earlier at BOS/EOS (run:
 * unless --ignore-eos). cli_steps turns them into the positions to feed
 * (*steps; the token sampled after the last one is kept, as llama2.c does):
 * n_prompt tokens (BOS included) and -n N need n_prompt + N - 1 positions; beyond
 * limit (the context, limit_what) is an error. The unset value of both is CLI_UNSET. */
#define CLI_DEFAULT_PREDICT 256
#define CLI_UNSET (-(1 << 30))
#define CLI_PREDICT_OPTS(n_predict, steps)                                                                            \
    {"n-predict", 'n', SC_ARG_INT, &(n_predict), "N",                                                                 \
     "tokens to generate, fewer if BOS/EOS is sampled; -1: until the context is full (default 256, fewer when the "   \
     "context ends first)", -1, 1 << 21},                                                                              \
    {"steps", 0, SC_ARG_INT, &(steps), "N",                                                                           \
     "instead of -n: total positions including BOS and prompt, as llama2.c's -n (default: from -n)", 1, 1 << 21}
sc_status cli_steps(int64_t n_predict, int64_t steps_given, int64_t n_prompt, int64_t limit, const char *limit_what,
                    int64_t *steps, sc_err *err);

/* The sampling options of generate and run, named as llama.cpp's. */
#define CLI_SAMPLING_OPTS(temperature, top_k, top_p, seed)                                                            \
    {"temp|temperature", 0, SC_ARG_FLOAT, &(temperature), "T",                                                        \
     "sampling temperature; 0 = greedy argmax (default 1.0)", 0, 100},                                                \
    {"top-k", 0, SC_ARG_INT, &(top_k), "K",                                                                           \
     "sample among the K most likely tokens only (default 0: all of them; llama.cpp's default is 40)", 0, 1 << 24},  \
    {"top-p", 0, SC_ARG_FLOAT, &(top_p), "P", "nucleus sampling threshold; 1 = off (default 0.9)", 0, 1},             \
    {"seed", 's', SC_ARG_U64, &(seed), "S", "sampling seed (default 0: from the clock)", 0, 0}

/* srt_ctx_create with the reason in err when it fails: SPARSECAL_PREFETCH malformed (naming it and
 * the syntax), the ISA not available here, or no memory / threads. */
sc_status cli_ctx_create(srt_ctx **out, srt_isa isa, int threads, sc_err *err);
/* The prefetch distances a context of this process starts with (SPARSECAL_PREFETCH applied) into
 * buf; false, with the reason in buf, when SPARSECAL_PREFETCH is malformed. */
bool cli_prefetch_desc(char *buf, int cap);

/* Prints j on one line to stdout and frees it (the --json output of every command). */
struct cJSON;
void cli_print_json(struct cJSON *j);

/* What computes the numbers: the runtime kernel sets this CPU can run (and
 * the one SPARSECAL_ISA / the CPU selects), the BLAS library with the
 * kernel set it chose, and the threads both use for model c (NULL: before a
 * model is known). As text lines ("kernels ...", "blas ...", "threads ...")
 * or as the "kernels", "blas" and "threads" members of a JSON object. */
#include <stdio.h>
void cli_print_provenance(FILE *f, const sc_config *c);
/* OpenBLAS picks its kernels from the CPU's model name when it is loaded; a
 * CPU it does not know (VMs that report a generic "Intel Xeon Processor")
 * gets its baseline SSE3 kernels ("Prescott"), several times slower than the
 * AVX2/AVX-512 ones the CPU has. When OPENBLAS_CORETYPE is unset and the
 * chosen kernels are narrower than the CPU's vector unit, this runs the
 * program again (execv) with OPENBLAS_CORETYPE=Haswell or SkylakeX, and
 * --version / info say so. Setting OPENBLAS_CORETYPE yourself disables it.
 * Call first thing in main. */
void cli_blas_fix_kernels(char **argv);
void cli_provenance_json(struct cJSON *j, const sc_config *c);

/* Resident set size of this process in bytes (0 if unknown). */
uint64_t cli_rss_bytes(void);
uint64_t cli_peak_rss_bytes(void);

/* eval on a packed artifact through the runtime decoder (cmd_eval_artifact.c): method NULL and density
 * NAN take the artifact's; ctx 0 the model's; calib (may be NULL) is checked against the artifact's
 * source model. Prints the result (JSON or a line). */
typedef struct cli_eval_request {
    const char *method, *calib;
    double density;
    int64_t ctx;
    bool json, quiet;
    srt_kv_type kv; /* the key/value cache (--cache-type) */
} cli_eval_request;
sc_status cli_eval_artifact(cli_inputs *in, const cli_eval_request *rq, sc_err *err);

int cmd_ppl(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench_attention(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_compute(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_diag(int argc, char **argv);
int cmd_bench_forward(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
