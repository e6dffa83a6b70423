"""Reading sparsecal containers (.scal calibration files, .spk artifacts) into numpy, through libsparsert's
container reader (srt_container.h): the header, section table and manifest are validated when the file is
opened, every section's XXH3 checksum when it is first read, and zstd sections are decompressed by the
library. docs/CONTAINER.md describes the format byte by byte."""
import ctypes
import json

import numpy as np

from . import _lib
from ._lib import SparsecalError, cstr

KIND_ANY, KIND_SCAL, KIND_SPAK = 0, 1, 2

# srt_ct_dtype -> (name, numpy dtype of the stored elements)
_DTYPES = [("u8", np.uint8), ("i8", np.int8), ("u16", np.uint16), ("i16", np.int16), ("f16", np.float16),
           ("bf16", np.uint16), ("i32", np.int32), ("u32", np.uint32), ("f32", np.float32), ("i64", np.int64),
           ("u64", np.uint64), ("f64", np.float64), ("bytes", np.uint8)]


class Section:
    """One section's table entry: name, dtype ("f64", ...), shape, compression ("zstd" or "none"), sizes."""

    def __init__(self, index, s):
        self.index = index
        self.name = s.name.decode()
        if not 0 <= s.dtype < len(_DTYPES):
            raise SparsecalError(f"section '{self.name}': unknown dtype {s.dtype}")
        self.dtype, self.np_dtype = _DTYPES[s.dtype]
        self.shape = tuple(int(s.dims[i]) for i in range(s.ndim))
        self.compression = "zstd" if s.compression == 1 else "none"
        self.raw_size, self.stored_size, self.n_elements = int(s.raw_size), int(s.stored_size), int(s.n_elements)

    def __repr__(self):
        return f"Section({self.name!r}, {self.dtype}, {list(self.shape)})"


class Container:
    """A .scal or .spk file: `manifest` (a dict), `sections` (name -> Section, in file order) and `read(name)`
    (a new numpy array of the section's dtype and shape; bf16 is returned widened to float32, opaque bytes as
    uint8). Also a context manager; `close()` unmaps the file."""

    _h = None

    def __init__(self, path, kind=KIND_ANY):
        L = _lib.lib()
        err = ctypes.create_string_buffer(1024)
        h = ctypes.c_void_p()
        if L.srt_container_open(cstr(path), kind, ctypes.byref(h), err, len(err)) != 0:
            raise SparsecalError(err.value.decode(errors="replace"))
        self._h, self.path = h, str(path)
        self.kind = {1: "calibration", 2: "artifact"}.get(L.srt_container_kind(h), "?")
        n = ctypes.c_size_t()
        text = ctypes.string_at(L.srt_container_manifest_text(h, ctypes.byref(n)), n.value)
        self.manifest = json.loads(text)
        self.sections = {}
        for i in range(L.srt_container_section_count(h)):
            s = Section(i, L.srt_container_section_at(h, i).contents)
            self.sections[s.name] = s

    def close(self):
        if self._h:
            _lib.lib().srt_container_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def names(self):
        return list(self.sections)

    def __contains__(self, name):
        return name in self.sections

    def read(self, name):
        """The section called name as a numpy array (checksum verified, decompressed)."""
        if not self._h:
            raise SparsecalError(f"{self.path}: closed")
        s = self.sections.get(name)
        if s is None:
            raise KeyError(f"{self.path}: no section '{name}'")
        out = np.empty(s.n_elements, dtype=s.np_dtype)
        if s.raw_size and _lib.lib().srt_container_read(self._h, s.index, out.ctypes.data, s.raw_size) != 0:
            raise SparsecalError(_lib.lib().srt_container_errmsg(self._h).decode(errors="replace"))
        if s.dtype == "bf16":
            out = (out.astype(np.uint32) << 16).view(np.float32)
        return out.reshape(s.shape)


class Calibration(Container):
    """A calibration file (.scal): its manifest (model and data identity, options, `methods`) and its arrays,
    sections named "METHOD/layerL.ARRAY" (plus a few per method, e.g. "clada/signals"), float64 or int64 as
    `sparsecal compute` accumulated them. `arrays(method)` reads every array of one method;
    `layers(method, array)` stacks one per-layer array over the layers into one [L, ...] array."""

    def __init__(self, path):
        super().__init__(path, KIND_SCAL)
        if self.manifest.get("format") != "sparsecal-calibration":
            raise SparsecalError(f"{path}: not a sparsecal calibration (manifest format "
                                 f"{self.manifest.get('format')!r})")
        self.methods = list(self.manifest.get("methods", []))
        self.n_layers = int(self.manifest["model"]["n_layers"])

    def arrays(self, method):
        """{array name without the method's prefix: numpy array} for every section of method."""
        p = method + "/"
        return {n[len(p):]: self.read(n) for n in self.sections if n.startswith(p)}

    def layers(self, method, array):
        """np.stack of METHOD/layerL.ARRAY over the calibrated layers (options.layers = [begin, end))."""
        begin, end = self.manifest["options"]["layers"]
        names = [f"{method}/layer{l}.{array}" for l in range(begin, end)]
        missing = [n for n in names if n not in self.sections]
        if missing:
            raise KeyError(f"{self.path}: no section '{missing[0]}'")
        return np.stack([self.read(n) for n in names])
