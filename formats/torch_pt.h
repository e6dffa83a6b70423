/* torch_pt.h - writing the file torch.save writes (PyTorch >= 1.6, read by
 * torch.load) for a dict of named one-dimensional float32 tensors: what TEAL's
 * reference code keeps per layer (histograms.pt: counts and bin centres).
 *
 * The format: a ZIP archive of stored (uncompressed) entries under one
 * directory, "archive/": data.pkl (the dict, pickle protocol 2, each tensor
 * rebuilt by torch._utils._rebuild_tensor_v2 from a persistent storage id
 * ("storage", torch.FloatStorage, key, "cpu", numel)), data/KEY (the
 * storage's little-endian bytes, 64-byte aligned in the file as torch aligns
 * them) and version ("3"). Written atomically. */
#ifndef SC_TORCH_PT_H
#define SC_TORCH_PT_H

#include <stdint.h>

#include "common.h"

typedef struct sc_pt_tensor {
    const char *name;  /* the dict key */
    const float *data; /* n values */
    int64_t n;
} sc_pt_tensor;

/* {name: tensor, ...} in the given order into path. */
sc_status sc_torch_save_f32(const char *path, const sc_pt_tensor *t, int count, sc_err *err);

#endif
