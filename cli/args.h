/* args.h - a small table-driven option parser for the sparsecal CLI. */
#ifndef SC_ARGS_H
#define SC_ARGS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum sc_argkind {
    SC_ARG_FLAG,
    SC_ARG_STR,
    SC_ARG_INT,
    SC_ARG_FLOAT,
    SC_ARG_U64,
    SC_ARG_GONE, /* a renamed spelling: using it is an error printing help (the new one); not listed; a row of
                  * another kind with the same name wins (a command's own --seed over the data options') */
} sc_argkind;

typedef struct sc_opt {
    /* long name without dashes; "name|alias|alias" gives old spellings that
     * still work (listed in --help as "also --alias"); errors name the first */
    const char *lng;
    char shrt;        /* short letter or 0 */
    sc_argkind kind;
    void *dst;        /* bool*, const char**, int64_t*, double*, uint64_t* */
    const char *meta; /* value placeholder in --help */
    const char *help;
    double lo, hi;    /* numeric range (ignored when lo == hi == 0) */
} sc_opt;

/* The row that ends every option table; the end row's help (may be NULL) is
 * printed after the options in --help: the command's examples. */
#define SC_OPTS_END(examples) {NULL, 0, SC_ARG_FLAG, NULL, NULL, (examples), 0, 0}

enum { SC_ARGS_OK = 0, SC_ARGS_HELP = 1, SC_ARGS_ERROR = 2 };

/* Parses argv[1..argc) (argv[0] is the subcommand). On error prints a
 * one-line message to stderr and returns SC_ARGS_ERROR; on --help prints the
 * usage and returns SC_ARGS_HELP. Positional arguments are collected into
 * pos (up to max_pos; more is an error) when pos is non-NULL. */
int sc_parse_args(const char *cmd, const char *summary, const sc_opt *opts, int argc, char **argv,
                  const char **pos, int max_pos, int *n_pos);

#endif
