/* method.h - calibration methods as plugins behind one accumulator
 * interface, found by name in a registry. The data loop, the taps, the
 * backward pass and the merge of shards exist once (engine.c); a method
 * declares which taps and gradients it observes and which arrays it keeps.
 *
 * Arrays are what a method accumulates and saves: SUM arrays are added when
 * shards merge, CONCAT arrays (stored token samples) are appended, DERIVED
 * arrays are recomputed by finalize from the others. Sums are doubles and
 * are accumulated in a fixed order, so the same inputs give the same bits. */
#ifndef SC_METHOD_H
#define SC_METHOD_H

#include <stdbool.h>
#include <stdint.h>

#include "forward.h"
#include "model.h"

/* Upper bound on the arrays one method keeps (a few per layer). */
#define SC_MAX_ARRAYS 16384

typedef enum sc_arr_kind { SC_ARR_SUM = 0, SC_ARR_CONCAT, SC_ARR_DERIVED } sc_arr_kind;
typedef enum sc_arr_type { SC_ARR_F64 = 0, SC_ARR_I64, SC_ARR_F32 } sc_arr_type;

typedef struct sc_array {
    char name[96];    /* e.g. "layer3.num" */
    sc_arr_kind kind;
    sc_arr_type type;
    int64_t shape[2]; /* shape[1] == 0 for vectors */
    void *data;       /* owned by the method state */
    /* CONCAT arrays only: rows are shape[0] (any count, also 0); shape[1]
     * is fixed. The method keeps the data in one malloc'd block and points
     * these at its own pointer and row count, so the engine can grow the
     * array (realloc, then update both) when shards merge or a file loads. */
    void **concat_data;
    int64_t *concat_rows;
} sc_array;

/* Grows (or shrinks) a CONCAT array to `rows` rows, keeping the first
 * min(old, rows) rows; a->data and a->shape[0] follow. */
sc_status sc_array_concat_resize(sc_array *a, int64_t rows, sc_err *err);

/* Options every method sees; method-specific knobs go in `params`. */
typedef struct sc_method_opts {
    int64_t layer_begin, layer_end; /* layers [begin, end) */
    const char *params;             /* "key=value,..." (method-specific), may be NULL */
    /* The state is for reading a file (scal.h, sc_calib_open), never for
     * accumulating: a method may leave arrays too large to hold at once
     * unallocated (data NULL in its list); they stay in the file and are
     * read one at a time (sc_calib_read). */
    bool reader;
} sc_method_opts;

typedef struct sc_method {
    const char *name;
    const char *summary;
    uint32_t fwd_taps;  /* forward taps observed */
    uint32_t grad_taps; /* gradient taps observed (non-zero: the engine runs the backward pass) */
    sc_status (*create)(const sc_model *m, const sc_method_opts *o, void **state, sc_err *err);
    /* ev->n_tokens rows; only rows [0, n_scored) are calibration positions
     * (the last position of a window predicts nothing and has no gradient). */
    sc_status (*observe)(void *state, const sc_tap_event *ev, int64_t n_scored, sc_err *err);
    /* Recomputes DERIVED arrays from the sums. */
    sc_status (*finalize)(void *state, sc_err *err);
    /* Lists the arrays (pointers stay valid for the state's lifetime). */
    int (*arrays)(void *state, sc_array *out, int cap);
    void (*free)(void *state);
    /* Checkpoints (`compute --checkpoint-every` / `--resume`); both optional
     * (NULL). resume_arrays lists what observe reads besides the arrays
     * (running averages, stride counters): fixed-shape state of this process
     * that a checkpoint saves so a resumed run continues exactly; it is never
     * merged and never in a final file. resume runs after a checkpoint is
     * loaded, before observe runs again (e.g. to restore the room that
     * loading trimmed from fixed-capacity buffers). */
    int (*resume_arrays)(void *state, sc_array *out, int cap);
    sc_status (*resume)(void *state, sc_err *err);
    /* Optional: checks what a file loaded into the state against the method's
     * invariants (n_tokens: the calibration's scored positions), beyond the
     * checks every file gets (scal.c: counts non-negative and bounded, sums
     * and samples finite). NULL: none. */
    sc_status (*validate)(void *state, int64_t n_tokens, sc_err *err);
    /* The --params keys create reads, comma-separated ("" when none). */
    const char *param_keys;
    /* Optional (NULL: none): DERIVED arrays too large to hold for every layer
     * at once (LaRoSA's rotations: D x D doubles per layer and input).
     * `streamed` lists them like `arrays` but with data NULL; the file writer
     * asks `derive` for one at a time (index into that list), which computes
     * it from the sums into memory the state owns and points *data at it
     * (valid until the next derive, finalize or free). Checkpoints leave them
     * out; a file's are never loaded whole but read one array at a time
     * (sc_calib_read), and they are not part of merges or MPI transfers. */
    int (*streamed)(void *state, sc_array *out, int cap);
    sc_status (*derive)(void *state, int index, const void **data, sc_err *err);
} sc_method;

/* Bound on any count a calibration holds (and on the sum of two, so merging
 * shards never overflows int64). */
#define SC_COUNT_MAX ((int64_t)1 << 62)

const sc_method *sc_method_find(const char *name);
/* The registry, NULL-terminated. */
const sc_method *const *sc_methods(void);

/* Helpers for methods: per-layer float64/int64 vectors. */
double *sc_method_f64(int64_t n);
/* L2 norms of the columns of W_d [dim, ffn] (a neuron's output vector), in double. */
/* Describes n int64 counters (one per calibrated layer) as one SUM array
 * named name in out[0] (cap >= 1); returns the arrays written (0 or 1). */
int sc_method_counter_array(sc_array *out, int cap, const char *name, int64_t *data, int64_t n);
sc_status sc_down_col_norms(const sc_model *m, int64_t layer, double *out, sc_err *err);

#endif
