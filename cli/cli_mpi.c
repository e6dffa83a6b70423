/* cli_mpi.c - `sparsecal compute` over MPI ranks (see cli_mpi.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli_mpi.h"

#include <fcntl.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfer.h"

void cli_mpi_mute(cli_mpi *p, bool on) {
    if (p->rank == 0) return;
    fflush(stdout);
    fflush(stderr);
    for (int i = 0; i < 2; i++) {
        int fd = i ? STDERR_FILENO : STDOUT_FILENO;
        if (on && p->saved_fd[i] < 0) {
            int null = open("/dev/null", O_WRONLY);
            if (null < 0) continue;
            p->saved_fd[i] = dup(fd);
            dup2(null, fd);
            close(null);
        } else if (!on && p->saved_fd[i] >= 0) {
            dup2(p->saved_fd[i], fd);
            close(p->saved_fd[i]);
            p->saved_fd[i] = -1;
        }
    }
}

#ifdef SC_HAVE_MPI
#include <mpi.h>

enum { TAG_STOP = 7101, TAG_SIZE, TAG_DATA };
#define CHUNK ((size_t)1 << 30) /* MPI counts are int: send large buffers in pieces */

static bool launched(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

void cli_mpi_start(cli_mpi *p) {
    memset(p, 0, sizeof *p);
    p->size = 1;
    p->saved_fd[0] = p->saved_fd[1] = -1;
    if (!launched()) return;
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided); /* MPI calls come from the main thread only */
    MPI_Comm_rank(MPI_COMM_WORLD, &p->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &p->size);
    p->active = true;
}

const char *cli_mpi_library(void) {
    static char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(lib, &n); /* (may be called before MPI_Init) */
    lib[strcspn(lib, ",\n")] = '\0';
    return lib;
}

void cli_mpi_end(cli_mpi *p) {
    if (p->active) MPI_Finalize();
    p->active = false;
}

sc_status cli_mpi_agree(cli_mpi *p, const char *cmd, sc_status st, const sc_err *err) {
    if (!p->active || p->size == 1 || p->reported) return st; /* (after a failure every rank skips the rest alike) */
    /* mine: 0 ok, > 0 a failure of this rank's own (its status), -1 stopped by another's */
    int mine = !st ? 0 : p->stopped ? -1 : (int)st, one = 1;
    int *all = malloc((size_t)p->size * sizeof *all);
    MPI_Request *req = malloc((size_t)p->size * sizeof *req);
    if (!all || !req) {
        fprintf(stderr, "sparsecal %s: rank %d: out of memory\n", cmd, p->rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int nreq = 0;
    if (mine > 0) /* tell the others now: those still in the data loop stop at their next sequence */
        for (int r = 0; r < p->size; r++)
            if (r != p->rank) MPI_Isend(&one, 1, MPI_INT, r, TAG_STOP, MPI_COMM_WORLD, &req[nreq++]);
    MPI_Allgather(&mine, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    int first = -1;
    for (int r = 0; r < p->size; r++) {
        if (all[r] > 0 && first < 0) first = r;
        if (all[r] > 0 && r != p->rank) { /* every notice sent is received, so MPI_Finalize finds none pending */
            int v;
            MPI_Recv(&v, 1, MPI_INT, r, TAG_STOP, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    sc_status out = first < 0 ? SC_OK : (sc_status)all[first];
    free(all);
    free(req);
    if (first < 0) return SC_OK;
    if (first == p->rank)
        fprintf(stderr, "sparsecal %s: rank %d of %d: %s\n", cmd, p->rank, p->size,
                err->msg[0] ? err->msg : sc_status_name(st));
    p->reported = true;
    return out;
}

sc_status cli_mpi_poll(void *user, int64_t done, int64_t mine, sc_err *err) {
    cli_mpi *p = user;
    int flag = 0;
    MPI_Status s;
    MPI_Iprobe(MPI_ANY_SOURCE, TAG_STOP, MPI_COMM_WORLD, &flag, &s);
    if (!flag) return SC_OK;
    p->stopped = true;
    return sc_errf(err, SC_EARG, "stopped after %lld of %lld sequences: rank %d failed", (long long)done,
                   (long long)mine, s.MPI_SOURCE);
}

static void send_bytes(const void *buf, size_t len, int to) {
    uint64_t n = len;
    MPI_Send(&n, 1, MPI_UINT64_T, to, TAG_SIZE, MPI_COMM_WORLD);
    for (size_t off = 0; off < len; off += CHUNK) {
        size_t k = len - off < CHUNK ? len - off : CHUNK;
        MPI_Send((const char *)buf + off, (int)k, MPI_BYTE, to, TAG_DATA, MPI_COMM_WORLD);
    }
}

/* Receives one buffer from rank `from`; *buf NULL with *len 0: the sender
 * had nothing to send (it failed). Without memory for it the job cannot
 * finish (the sender is blocked in its send), so the job is aborted. */
static void recv_bytes(int from, void **buf, size_t *len) {
    uint64_t n;
    MPI_Recv(&n, 1, MPI_UINT64_T, from, TAG_SIZE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    *buf = NULL;
    *len = 0;
    if (n == 0) return;
    char *b = n <= SIZE_MAX ? malloc((size_t)n) : NULL;
    if (!b) {
        fprintf(stderr, "sparsecal compute: rank 0: out of memory for the %llu-byte result of rank %d\n",
                (unsigned long long)n, from);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        MPI_Recv(b + off, (int)k, MPI_BYTE, from, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    *buf = b;
    *len = n;
}

sc_status cli_mpi_reduce(cli_mpi *p, const sc_model *m, sc_calib *acc, sc_err *err) {
    if (!p->active || p->size == 1) return SC_OK;
    if (p->rank != 0) {
        void *buf = NULL;
        size_t len = 0;
        sc_status st = sc_calib_to_bytes(acc, &buf, &len, err);
        send_bytes(buf, st ? 0 : len, 0); /* 0 bytes: "failed", so rank 0 does not wait for data */
        free(buf);
        return st;
    }
    sc_status st = SC_OK;
    for (int r = 1; r < p->size; r++) { /* rank order: the sums are added in the order `merge` adds shard files */
        void *buf;
        size_t len;
        recv_bytes(r, &buf, &len);
        if (!buf && !st) {
            p->stopped = true; /* rank r failed and reports it itself */
            st = sc_errf(err, SC_EARG, "rank %d sent no result", r);
        }
        if (buf && !st) {
            sc_calib *c = NULL;
            st = sc_calib_from_bytes(m, buf, len, &c, err);
            if (!st && (st = sc_calib_merge(acc, c, err))) {
                char msg[sizeof err->msg];
                snprintf(msg, sizeof msg, "%s", err->msg);
                sc_errf(err, st, "rank %d's statistics do not merge with rank 0's: %s", r, msg);
            }
            sc_calib_free(c);
        }
        free(buf);
    }
    return st;
}

#else /* no MPI: one process */

void cli_mpi_start(cli_mpi *p) {
    memset(p, 0, sizeof *p);
    p->size = 1;
    p->saved_fd[0] = p->saved_fd[1] = -1;
    /* mpirun -n N of a build without MPI would run N whole jobs writing one file */
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && atoi(v) > 1) p->unsupported = atoi(v);
    }
}

void cli_mpi_end(cli_mpi *p) { (void)p; }

const char *cli_mpi_library(void) { return NULL; }

sc_status cli_mpi_agree(cli_mpi *p, const char *cmd, sc_status st, const sc_err *err) {
    (void)p;
    (void)cmd;
    (void)err;
    return st;
}

sc_status cli_mpi_poll(void *p, int64_t done, int64_t mine, sc_err *err) {
    (void)p;
    (void)done;
    (void)mine;
    (void)err;
    return SC_OK;
}

sc_status cli_mpi_reduce(cli_mpi *p, const sc_model *m, sc_calib *acc, sc_err *err) {
    (void)p;
    (void)m;
    (void)acc;
    (void)err;
    return SC_OK;
}

#endif
