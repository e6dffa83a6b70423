/* main.c - the sparsecal command line: dispatch to subcommands. */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_mpi.h"
#include "srt_container.h"
#include "srt_file.h"

/* Ctrl-C / kill: remove the temporary files of outputs being written (the
 * final names only ever appear by rename), then die of the signal. */
static void on_signal(int sig) {
    srt_tmp_cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_cleanup(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old;
        /* keep a signal ignored if it was (e.g. SIGINT of a background job) */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
    }
}

typedef struct command {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static const command commands[] = {
    {"info", cmd_info, "show a model's family, shapes, dtypes, parameters, tokenizer and memory"},
    {"ppl", cmd_ppl, "teacher-forced perplexity on text or pre-tokenized data"},
    {"generate", cmd_generate, "generate text from BOS (+ a prompt)"},
    {"run", cmd_run, "decode from a packed artifact (.spk) with the runtime kernels and the sparse MLP"},
    {"tokenize", cmd_tokenize, "encode text to token ids or decode ids; --bench for encoding throughput"},
    {"compute", cmd_compute, "accumulate calibration statistics (claws, cats) into a .scal file"},
    {"merge", cmd_merge, "sum compatible calibration files (shards) into one"},
    {"diag", cmd_diag, "rank-leverage diagnostics of static modifiers (CLAWS c_j, LaRoSA c_rot), the CLAWS paper's Tables 5/7"},
    {"eval", cmd_eval, "perplexity with MLP neurons routed by a method at a density"},
    {"train", cmd_train, "recovery training: a LoRA adapter on W_d under an annealed soft top-K mask (claws-lora, cats-lora)"},
    {"pack", cmd_pack, "quantise a model (+ routing parameters) into a packed artifact (.spk)"},
    {"export", cmd_export, "routing data of a .scal or .spk as safetensors, and TEAL's per-layer files"},
    {"synth", cmd_synth, "write a synthetic model of realistic size (config.json + safetensors)"},
    {"bench", cmd_bench, "cold-cache dense and sparse GEMV kernels, MLP block, floor (the CLAWS paper App. E)"},
    {"bench-forward", cmd_bench_forward, "forward-pass throughput vs cblas_sgemm alone on the same shapes"},
    {"bench-attention", cmd_bench_attention, "one decode token's attention core over every layer's cache, f32 vs f16 cache"},
    {"inspect", cmd_inspect, "summarise a .scal calibration file or a .spk artifact (manifest, sections)"},
    {"verify", cmd_verify, "check every checksum and invariant of a .scal or .spk file"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f) {
    fprintf(f, "sparsecal %s - calibration toolchain for activation sparsity\n\nusage: sparsecal COMMAND [options]\n\n"
               "commands:\n", SC_VERSION);
    for (const command *c = commands; c->name; c++) fprintf(f, "  %-14s %s\n", c->name, c->help);
    fprintf(f, "\n'sparsecal COMMAND --help' describes each command's options.\n"
               "\nenvironment:\n"
               "  SPARSECAL_ISA          runtime kernels: scalar, avx2, avx512, amx, neon, dotprod, i8mm (default: the best here)\n"
               "  SPARSECAL_PREFETCH     the kernels' prefetch distances (default: this CPU kind's; docs/BENCH.md: a sweep):\n"
               "                         %s\n"
               "  OPENBLAS_NUM_THREADS   threads for BLAS and the runtime kernels (default: every CPU this process may\n"
               "                         use; 1 for models with layers under 4M parameters)\n"
               "  OPENBLAS_CORETYPE      OpenBLAS's kernel set (default: OpenBLAS's choice, widened by sparsecal when it is\n"
               "                         narrower than the CPU)\n"
               "  SPARSECAL_SPILL_DIR    where compute spills calibration samples (default: $TMPDIR, else /tmp; off: memory)\n"
               "  SPARSECAL_MEM_AVAILABLE the memory budget in bytes (default: MemAvailable in /proc/meminfo)\n"
               "'sparsecal --version' shows the kernels, BLAS, threads and prefetch distances this machine gets.\n",
            SRT_PREFETCH_SYNTAX);
}

int main(int argc, char **argv) {
    cli_blas_fix_kernels(argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("sparsecal %s (configured at commit %s)\n", SC_VERSION, SC_GIT_COMMIT);
        cli_print_provenance(stdout, NULL);
        const char *mpi = cli_mpi_library();
        printf("mpi         %s\n", mpi ? mpi : "none (compute runs as one process; --shard + merge split work)");
        return 0;
    }
    install_cleanup();
    srt_inputs_track(true); /* no command may overwrite a file it reads (srt_file.h) */
    for (const command *c = commands; c->name; c++)
        if (strcmp(argv[1], c->name) == 0) return c->fn(argc - 1, argv + 1);
    fprintf(stderr, "sparsecal: unknown command '%s' (see sparsecal --help)\n", argv[1]);
    return 2;
}
