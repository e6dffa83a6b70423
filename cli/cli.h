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
#include "tokenizer.h"

/* Exit status for a failure: 2 for bad usage or an unreadable input, 1 otherwise. */
int cli_fail(const char *cmd, sc_status st, const sc_err *err);

typedef struct cli_inputs {
    const char *model_path, *tok_path, *data_path, *tokens_path, *separator;
    int64_t max_docs;
    bool no_bos;
    sc_model *model;
    sc_tokenizer *tok_owned; /* from -t; else the model's */
    const sc_tokenizer *tok;
} cli_inputs;

/* Loads -m and the tokenizer (-t, else the model's own). need_tok: fail when
 * there is none. */
sc_status cli_load(cli_inputs *in, bool need_tok, sc_err *err);
/* Loads -f (text/JSONL) or --tokens into d. */
sc_status cli_load_data(cli_inputs *in, sc_dataset *d, sc_err *err);
void cli_inputs_free(cli_inputs *in);

/* Resident set size of this process in bytes (0 if unknown). */
uint64_t cli_rss_bytes(void);
uint64_t cli_peak_rss_bytes(void);

int cmd_ppl(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_compute(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_bench_forward(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_verify(int argc, char **argv);

#endif
