/* sample_store.h - memory for stored token samples (the CONCAT arrays of
 * method.h: CETT's h, TEAL's block inputs, coact's live sets, CLADA's
 * signals).
 *
 * A sample grows with the data and can outgrow the machine: CETT keeps
 * [tokens, d_ffn] floats per layer, 3.5 GiB for one 2,048-token sequence of a
 * Llama-3-8B. Blocks smaller than a bound live on the heap; larger ones live
 * in the pages of an unlinked temporary file mapped shared (the "spill
 * directory"), so the kernel writes them to disk and drops them from memory
 * when it needs the room, as it does with the mapped weights. Disk space is
 * reserved when a block grows (posix_fallocate), so a full disk is an error
 * at that moment, never a fault later. The file disappears with the process. */
#ifndef SC_SAMPLE_STORE_H
#define SC_SAMPLE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

/* Grows or shrinks the block *p (NULL: a new block) to `bytes`, keeping the
 * first min(old, new) bytes. On failure *p is unchanged and err names `what`
 * and the reason (out of memory, or no room in the spill directory). */
sc_status sc_sample_resize(void **p, size_t bytes, const char *what, sc_err *err);
/* Frees a block from sc_sample_resize (NULL is fine). */
void sc_sample_free(void *p);

/* Blocks of at least min_bytes go to an unlinked file in dir; dir NULL or ""
 * keeps every block on the heap. Applies to blocks created or grown after the
 * call. Without a call: $SPARSECAL_SPILL_DIR ("off" = never), else $TMPDIR,
 * else /tmp, and min_bytes $SPARSECAL_SPILL_MIN or SC_SAMPLE_SPILL_MIN. */
#define SC_SAMPLE_SPILL_MIN ((size_t)32 << 20)
void sc_sample_spill(const char *dir, size_t min_bytes);
/* The spill directory in use ("" when samples stay in memory). */
const char *sc_sample_spill_dir(void);
/* Bytes currently held in spill files, and the most ever held at once. */
size_t sc_sample_spilled_bytes(void);
size_t sc_sample_spilled_peak(void);

#endif
