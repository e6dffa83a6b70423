/* larosa_rot.h - LaRoSA rotations for the tools that use them (eval, pack,
 * diag), one layer at a time (the LaRoSA paper; the layout is in larosa.h).
 *
 * A rotation comes from wherever the calibration has it: read from the file
 * (format 2 stores eig and Q as they were computed when it was written), or
 * solved from the moment (a calibration computed in this process, a
 * checkpoint, a format-1 file). Nothing here holds every layer's rotation
 * unless asked to (sc_larosa_rots with a budget). */
#ifndef SC_LAROSA_ROT_H
#define SC_LAROSA_ROT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

/* One block input's rotation; buffers are allocated on first use and reused. */
typedef struct sc_larosa_rot {
    int64_t D, count;
    double *Q;   /* [D, D], Q[i * D + k] = component i of eigenvector k */
    double *eig; /* [D] descending */
    double *H;   /* [D (D + 1) / 2] scratch for a moment read from the file */
} sc_larosa_rot;

/* The larosa state of c for a model of width dim, or SC_EARG naming what is
 * missing (the command's name is the CLI's to add, cli_fail). */
sc_status sc_larosa_state(const sc_calib *c, int64_t dim, const void **state, sc_err *err);
/* The rotation of layer/which (SC_LAROSA_ATTN, _MLP) into r; SC_EARG if that
 * layer and input were not calibrated. */
sc_status sc_larosa_rotation(const sc_calib *c, int64_t layer, int which, sc_larosa_rot *r, sc_err *err);
void sc_larosa_rot_free(sc_larosa_rot *r);

/* The rotations a pass over the model asks for layer by layer (eval, diag),
 * of the inputs in `inputs` (bits 1 << SC_LAROSA_ATTN, 1 << SC_LAROSA_MLP).
 * When all calibrated ones take at most max_bytes (as float when as_float,
 * else double) they are read once and held; otherwise one is held at a time
 * and a request for another reads (or solves) it again. */
typedef struct sc_larosa_rots sc_larosa_rots;
sc_status sc_larosa_rots_create(const sc_calib *c, unsigned inputs, bool as_float, size_t max_bytes,
                                sc_larosa_rots **out, sc_err *err);
/* Q of layer/which (float or double as created; valid until the next call),
 * NULL when that layer and input were not calibrated. */
sc_status sc_larosa_rots_get(sc_larosa_rots *r, int64_t layer, int which, const void **Q, sc_err *err);
/* Whether every rotation is held (false: read again as the layers ask). */
bool sc_larosa_rots_resident(const sc_larosa_rots *r);
void sc_larosa_rots_free(sc_larosa_rots *r);

#endif
