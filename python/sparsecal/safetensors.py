"""Reading a safetensors file (what `sparsecal export` writes) into numpy without the safetensors package:
an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
then the data."""
import json
import struct

import numpy as np

from ._lib import SparsecalError

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32, "U64": np.uint64,
           "BOOL": np.bool_, "BF16": np.uint16}


def load_safetensors(path):
    """({name: numpy array}, {metadata key: value}); BF16 tensors are widened to float32."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise SparsecalError(f"{path}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise SparsecalError(f"{path}: header length {n} exceeds the file")
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, t in header.items():
        dt = _DTYPES.get(t["dtype"])
        b, e = t["data_offsets"]
        if dt is None or not 0 <= b <= e <= len(data):
            raise SparsecalError(f"{path}: tensor '{name}': unsupported dtype {t['dtype']} or bad offsets")
        a = np.frombuffer(data[b:e], dtype=dt).copy()
        if t["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.reshape(t["shape"])
    return out, meta
