/* scal.h - the calibration file (.scal): a sparsecal container of kind
 * "calibration" whose JSON manifest records the model identity (xxh64 of
 * config and weights), data identity, options, shards, counts and tool
 * version, and whose sections hold each method's arrays, named
 * "METHOD/layerL.ARRAY" (f64 or i64, zstd-compressed by default). Nothing
 * time-dependent is stored, so the same inputs give a bit-identical file. */
#ifndef SC_SCAL_H
#define SC_SCAL_H

#include "engine.h"

/* compress: zstd level 0 (raw) .. 19. */
sc_status sc_calib_save(const sc_calib *c, const sc_model *m, const char *path, int compress, sc_err *err);
/* Loads a file. m may be NULL (merge and inspect need no model); when given,
 * the file must have been computed on it (same identity). */
sc_status sc_calib_load(const char *path, const sc_model *m, sc_calib **out, sc_err *err);

/* Checkpoints (`compute --checkpoint-every`): a valid .scal of the sequences
 * done so far (loadable by everything that reads .scal; derived arrays may be
 * stale and are recomputed at load, as for every file), plus a manifest
 * record "checkpoint": {"done": D, "of": N} (this process's sequences) and
 * the methods' resume arrays (method.h) as sections "METHOD/resume.NAME".
 * Written atomically (zstd level 1). */
sc_status sc_calib_save_checkpoint(const sc_calib *c, const sc_model *m, const char *path, int64_t done, int64_t of,
                                   sc_err *err);
/* Loads a checkpoint with its resume arrays (m: as sc_calib_load); a file
 * that is not a checkpoint is an error. */
sc_status sc_calib_load_checkpoint(const char *path, const sc_model *m, sc_calib **out, int64_t *done, int64_t *of,
                                   sc_err *err);

#endif
