/* cli_mpi.h - `sparsecal compute` over MPI ranks.
 *
 * Started by a launcher (mpirun, mpiexec, srun with PMIx/PMI), compute runs
 * one rank per process: rank r of N takes the sequences k with k % N == r
 * (exactly `--shard r/N`), and rank 0 gathers the ranks' results in rank
 * order and merges them with sc_calib_merge (exactly `sparsecal merge` of the
 * shard files in rank order), then writes the file. Started without a
 * launcher, MPI is never initialised and compute is one process, as in a
 * build without MPI (where these functions are trivial).
 *
 * Numbers: the file equals --shard + merge bit for bit (same code, same
 * additions in the same order). Against one process, integer arrays are
 * equal, float64 sums differ only by the grouping of their additions
 * (within 1e-12 relative, tested), stored samples hold the same rows rank by
 * rank (per-process caps apply per rank) and CWIC's EMAs are per process;
 * docs/SCALE.md has the table and tests/test_mpi.c checks it.
 *
 * Errors: every phase (options, loading, the data loop, the reduction, the
 * write) ends in cli_mpi_agree, a collective in which the ranks exchange
 * their status; on failure every rank stops, and only the lowest rank whose
 * failure was its own prints its one-line message. A rank that fails inside
 * the data loop also tells the others at once (cli_mpi_poll stops them at
 * their next sequence), so nobody computes for a job that is lost. */
#ifndef SC_CLI_MPI_H
#define SC_CLI_MPI_H

#include <stdbool.h>

#include "common.h"
#include "engine.h"

typedef struct cli_mpi {
    int rank, size;
    bool active;   /* MPI was initialised (a launcher started us) */
    bool stopped;  /* this rank stopped because another one failed */
    bool reported; /* a failure was printed by cli_mpi_agree (by this rank or another) */
    int saved_fd[2];     /* stdout, stderr while muted */
    int unsupported;     /* a build without MPI started by a launcher of this many processes (> 1), else 0 */
} cli_mpi;

/* Initialises MPI when the environment shows a launcher (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK, PMI_RANK or PMI_SIZE); otherwise rank 0 of 1. */
void cli_mpi_start(cli_mpi *p);
/* The MPI library this build uses ("Open MPI v4.1.4"), or NULL without MPI. */
const char *cli_mpi_library(void);
void cli_mpi_end(cli_mpi *p);
/* Ranks other than 0 print nothing (stdout, stderr) while muted: for what
 * every rank would print alike (option errors, --help). */
void cli_mpi_mute(cli_mpi *p, bool on);

/* The agreed outcome of a phase (collective): returns SC_OK when every rank
 * succeeded, else the status of the failing rank that prints (see above). */
sc_status cli_mpi_agree(cli_mpi *p, const char *cmd, sc_status st, const sc_err *err);

/* sc_compute_opts.on_seq: stops the data loop when another rank failed. */
sc_status cli_mpi_poll(void *p, int64_t done, int64_t mine, sc_err *err);

/* Rank 0: *acc (its own result) += every other rank's, in rank order; the
 * other ranks send theirs. m: the model (the ranks' states are created for
 * it). Collective; the status is this rank's (agree on it afterwards). */
sc_status cli_mpi_reduce(cli_mpi *p, const sc_model *m, sc_calib *acc, sc_err *err);

#endif
