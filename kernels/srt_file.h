/* srt_file.h - what a run reads and how it writes its outputs.
 *
 * Inputs: every file the toolchain opens for reading (models, shards,
 * tokenizers, data, calibration files, adapters) is noted by device and
 * inode, and an output that resolves to one of them is refused before
 * anything is written: `pack -m model.bin -o model.bin` must not replace the
 * model, whatever path, symlink or hard link names it.
 *
 * Outputs are written atomically: on Linux into an unnamed O_TMPFILE in the
 * target's directory, linked into place only when complete (a killed writer
 * leaves nothing); elsewhere, or where the filesystem has no O_TMPFILE, into
 * "<target>.tmp.<pid>.<n>", and temp files of that form left by dead
 * processes are removed by the next writer of the same target. A symlink is
 * written through: its target is replaced and keeps its permission bits.
 * SPARSECAL_NAMED_TEMP=1 in the environment forces the named temp file
 * (tests use it to cover that path). */
#ifndef SRT_FILE_H
#define SRT_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "srt_container.h"

#define SRT_PATH_CAP 4096

/* Turns the noting of inputs on for this process (off by default: a library
 * user that reads a file and later rewrites it on purpose keeps doing so; the
 * CLI turns it on at start, so each command's inputs are protected). */
void srt_inputs_track(bool on);
/* While tracking, notes an open file (fstat of fd) or a path (stat, symlinks
 * followed; missing paths and directories are ignored) as an input of this
 * process. Thread-safe. */
void srt_input_note_fd(int fd, const char *path);
void srt_input_note_path(const char *path);
/* Forgets every noted input (a long-lived process between jobs; tests), or
 * the one at path: a file the process reads and then rewrites on purpose
 * (a checkpoint it resumes from and keeps updating). */
void srt_inputs_clear(void);
void srt_input_forget_path(const char *path);
/* SRT_CT_OK when writing path would replace no input and path is not an
 * existing non-regular file (a device, a directory); else SRT_CT_EARG with
 * a one-line message in err naming both files. */
srt_ct_status srt_output_check(const char *path, char *err, size_t err_cap);

typedef struct srt_out_file {
    int fd;                          /* -1 when closed */
    bool unnamed;                    /* O_TMPFILE: nothing has a name until commit */
    bool borrowed;                   /* the fd belongs to a FILE*: commit/abort do not close it */
    bool keep_mode;                  /* the target existed: mode is its permission bits */
    unsigned mode;
    char target[SRT_PATH_CAP];       /* the file finally written (symlinks followed) */
    char tmp[SRT_PATH_CAP + 64];     /* the named temp file, "" while none exists */
} srt_out_file;

/* Checks the output (srt_output_check), resolves symlinks and creates the
 * temp file; f->fd is open for writing at offset 0. */
srt_ct_status srt_out_open(srt_out_file *f, const char *path, char *err, size_t err_cap);
/* fsyncs, checks the output again, puts the file in place (link + rename),
 * syncs the directory and closes the fd (unless borrowed). On failure nothing
 * is left under any name and the old target is untouched. */
srt_ct_status srt_out_commit(srt_out_file *f, char *err, size_t err_cap);
/* Abandons the file (closes the fd unless borrowed, removes a named temp). */
void srt_out_abort(srt_out_file *f);

/* Removes "<name>.tmp.<pid>[.<n>]" files beside path whose process <pid> no
 * longer exists; returns how many were removed. */
int srt_out_clean_stale(const char *path);

#endif
