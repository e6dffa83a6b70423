/* transfer.h - a calibration as one byte buffer, to move a shard's result
 * between processes (the MPI ranks of `sparsecal compute`, cli/cli_mpi.c)
 * and merge it there with sc_calib_merge exactly as `sparsecal merge` merges
 * the file of that shard: the buffer holds the provenance (model, data,
 * options, shards, counts) and every array of every method, bit for bit, so
 * sc_calib_from_bytes(sc_calib_to_bytes(c)) equals sc_calib_load(save(c)).
 *
 * The buffer is in host byte order and carries no version beyond a magic: it
 * is for processes of one build, never for files (those are .scal, scal.h). */
#ifndef SC_TRANSFER_H
#define SC_TRANSFER_H

#include <stddef.h>

#include "engine.h"

/* Serialises c into a malloc'd buffer (*buf, *len); free with free(). */
sc_status sc_calib_to_bytes(const sc_calib *c, void **buf, size_t *len, sc_err *err);
/* The inverse: method states are created for m (as sc_calib_load(path, m)
 * does), filled from the buffer and finalized. A buffer that is truncated,
 * inconsistent or from another build is an error, never a crash. */
sc_status sc_calib_from_bytes(const sc_model *m, const void *buf, size_t len, sc_calib **out, sc_err *err);

#endif
