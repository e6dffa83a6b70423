/* engine.h - `sparsecal compute`: the one data loop. Streams calibration
 * sequences through the forward pass (and the backward pass when a method
 * needs gradients), lets every enabled method observe its taps, and keeps
 * the identity of what was computed so shards can be merged safely. */
#ifndef SC_ENGINE_H
#define SC_ENGINE_H

#include <stdint.h>
#include <stdio.h>

#include "data.h"
#include "method.h"
#include "srt_route.h"

#define SC_MAX_METHODS 8

typedef enum sc_loss_kind { SC_LOSS_KIND_CE = 0, SC_LOSS_KIND_DISTILL } sc_loss_kind;

typedef struct sc_compute_opts {
    const char *methods[SC_MAX_METHODS];
    int n_methods;
    int64_t seq_len;      /* tokens per sequence (0: the model's context); longer ones are cut */
    int64_t max_seqs;     /* 0: all */
    int64_t shard_index, shard_count; /* process sequences k with k % count == index */
    int64_t layer_begin, layer_end;   /* [begin, end); end 0 = all */
    sc_loss_kind loss;
    srt_router student;      /* distillation: the student's router (needs no calibration) */
    double student_density;
    double ce_weight;        /* distillation: weight of the CE term (0.2) */
    const char *params;      /* method parameters "k=v,..." */
    FILE *progress;          /* status lines (NULL: quiet) */
    /* Called after each sequence of this process (NULL: never) with the number
     * done and the number this process takes; an error stops the run with it
     * (cli/cli_mpi.c stops a rank whose peer failed). */
    sc_status (*on_seq)(void *user, int64_t done, int64_t mine, sc_err *err);
    void *on_seq_user;
    /* Checkpoints: every checkpoint_every sequences of this process (0: never)
     * the accumulators are written to checkpoint_path (scal.h,
     * sc_calib_save_checkpoint). resume_path: continue from such a file (it
     * must exist and match the model, data, options and shard); its sequences
     * are skipped and the result equals an uninterrupted run bit for bit. */
    int64_t checkpoint_every;
    const char *checkpoint_path;
    const char *resume_path;
} sc_compute_opts;

void sc_compute_opts_default(sc_compute_opts *o);

typedef struct sc_calib_entry {
    const sc_method *method;
    void *state;
} sc_calib_entry;

/* A calibration result: method states plus provenance. */
typedef struct sc_calib {
    char model_id[17];    /* xxh64 of config + weights, hex */
    char data_id[17];     /* xxh64 of the token ids of the selected sequences (before sharding), hex */
    char options[1024];   /* canonical JSON of the options that must match to merge */
    char shards[512];     /* comma-separated "i/n" shards included */
    char model_family[16], model_format[16]; /* as loaded from a file ("" unknown); saving with a model uses its own */
    int64_t n_seqs, n_tokens; /* sequences and scored positions observed */
    double seconds;
    sc_calib_entry entries[SC_MAX_METHODS];
    int n_entries;
    int64_t layer_begin, layer_end, ffn_dim, dim, n_layers;
    struct sc_scal_file *file; /* opened for reading (scal.h, sc_calib_open): the file its arrays are read from */
} sc_calib;

sc_status sc_calib_compute(const sc_model *m, const sc_dataset *d, const sc_compute_opts *o, sc_calib **out,
                           sc_err *err);
/* An empty calibration with the given methods (for loading and merging). */
sc_status sc_calib_new(const sc_model *m, const char *const *methods, int n, int64_t layer_begin, int64_t layer_end,
                       const char *params, sc_calib **out, sc_err *err);
/* The same with the methods' states created for reading a file (method.h,
 * sc_method_opts.reader) when reader is true. */
sc_status sc_calib_new_ex(const sc_model *m, const char *const *methods, int n, int64_t layer_begin, int64_t layer_end,
                          const char *params, bool reader, sc_calib **out, sc_err *err);
/* dst += src after checking model, options and shards are compatible; a
 * refusal names the difference in words ("other options: seq_len 32 vs
 * 512", src's value first). */
sc_status sc_calib_merge(sc_calib *dst, const sc_calib *src, sc_err *err);
/* The first option in which canonical option strings a and b (sc_calib.options)
 * differ, in words: "seq_len 32 vs 512", "methods claws vs claws,cats",
 * "layers 0:2 vs 0:5" (calib_options.c). */
void sc_calib_options_diff(const char *a, const char *b, char *out, size_t cap);
sc_status sc_calib_finalize(sc_calib *c, sc_err *err);
void sc_calib_free(sc_calib *c);
/* The method state of a calibration, or NULL. */
void *sc_calib_state(const sc_calib *c, const char *method);

/* xxh64 of the config and every weight, as 16 hex digits. */
sc_status sc_model_identity(const sc_model *m, char out[17], sc_err *err);
/* Whether a calibration of identity id (a .scal's model.id) describes m: id is m's own identity, or m is an
 * artifact packed from the model of that identity (sc_model.source_id). SC_EARG naming path and both
 * identities when not. The one rule `eval`, `pack` and `merge` apply through sc_calib_load. */
sc_status sc_model_check_identity(const sc_model *m, const char *id, const char *path, sc_err *err);

#endif
