/* scal.h - the calibration file (.scal): a sparsecal container of kind
 * "calibration" whose JSON manifest records the model identity (xxh64 of
 * config and weights), data identity, options, shards, counts and tool
 * version, and whose sections hold each method's arrays, named
 * "METHOD/layerL.ARRAY" (f64 or i64, zstd-compressed by default). Nothing
 * time-dependent is stored, so the same inputs give a bit-identical file. */
#ifndef SC_SCAL_H
#define SC_SCAL_H

#include "engine.h"

/* The manifest's format_version: 2 stores LaRoSA's moments as packed upper
 * triangles and its rotations (streamed derived arrays, method.h) to be read
 * back; format 1 (full [D, D] moments, rotations recomputed at load) still
 * loads, its moments packed as they are read. */
#define SC_SCAL_FORMAT 2

/* compress: zstd level 0 (raw) .. 19. Streamed derived arrays (method.h) are
 * computed one at a time as they are written. */
sc_status sc_calib_save(const sc_calib *c, const sc_model *m, const char *path, int compress, sc_err *err);
/* The same, with progress lines on `progress` (NULL: none) while derived
 * arrays that are computed during the write (method.h: streamed) are made. */
sc_status sc_calib_save_progress(const sc_calib *c, const sc_model *m, const char *path, int compress, FILE *progress,
                                 sc_err *err);
/* Loads a file. m may be NULL (merge and inspect need no model); when given,
 * the file must have been computed on it (same identity). */
sc_status sc_calib_load(const char *path, const sc_model *m, sc_calib **out, sc_err *err);

/* Opens a file for the tools that read a calibration (eval, pack, diag): as
 * sc_calib_load, but the arrays a method leaves in the file when reading
 * (LaRoSA's moments) and the streamed derived arrays (LaRoSA's rotations) are
 * not loaded; the calibration keeps the file open and sc_calib_read reads
 * them one at a time. Such a calibration cannot be merged or saved. */
sc_status sc_calib_open(const char *path, const sc_model *m, sc_calib **out, sc_err *err);
/* Reads array a of `method` (as its arrays or streamed list describes it)
 * from the file c was opened from into dst (a's shape and type), checked
 * like a load checks it. *found is false (and SC_OK) when there is nothing
 * to read: c was not opened from a file, the file does not hold the array
 * (a checkpoint's streamed arrays), or it is a streamed array of a format-1
 * file (recomputed at load then, stale in its checkpoints). */
sc_status sc_calib_read(const sc_calib *c, const char *method, const sc_array *a, void *dst, bool *found, sc_err *err);
/* Closes the file of a calibration opened for reading (sc_calib_free does). */
void sc_scal_file_close(struct sc_scal_file *f);

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
