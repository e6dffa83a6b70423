"""Loading libsparsert and declaring the C functions this package calls (ctypes).

The library is looked for, in order: the file named by SPARSERT_LIB; the installed copy beside this
package (`cmake --install` writes its place, relative to the package, into _where.py); a build tree's
copy (SPARSECAL_BUILD=build-dir); the system's (ctypes.util.find_library). The function prototypes below
are those of the installed headers kernels/srt_model.h, srt_container.h and srt.h.
"""
import ctypes
import ctypes.util
import os

from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint32, c_uint64, c_void_p)


class SparsecalError(Exception):
    """An error reported by libsparsert or the sparsecal command (one line naming the file and problem)."""


class CtSection(Structure):
    """srt_ct_section (srt_container.h)."""
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("compression", c_int), ("ndim", c_uint32),
                ("dims", c_uint64 * 8), ("n_elements", c_uint64), ("offset", c_uint64),
                ("stored_size", c_uint64), ("raw_size", c_uint64), ("checksum", c_uint64)]


class ModelOpts(Structure):
    """srt_model_opts (srt_model.h)."""
    _fields_ = [("max_ctx", c_int64), ("ctx", c_void_p), ("kv", c_int)]


class Sampler(Structure):
    """srt_sampler (srt.h)."""
    _fields_ = [("temperature", c_float), ("top_p", c_float), ("state", c_uint64)]


def _candidates():
    env = os.environ.get("SPARSERT_LIB")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from . import _where  # written by cmake --install
        yield os.path.normpath(os.path.join(here, _where.LIBDIR, "libsparsert.so"))
    except ImportError:
        pass
    build = os.environ.get("SPARSECAL_BUILD")
    if build:
        yield os.path.join(build, "libsparsert.so")
    found = ctypes.util.find_library("sparsert")
    if found:
        yield found


def _declare(lib):
    def fn(name, restype, *argtypes):
        f = getattr(lib, name)
        f.restype = restype
        f.argtypes = list(argtypes)

    ct, model, ctx = c_void_p, c_void_p, c_void_p
    # srt.h
    fn("srt_status_str", c_char_p, c_int)
    fn("srt_ctx_create", c_int, POINTER(c_void_p), c_int, c_int)
    fn("srt_ctx_free", None, ctx)
    fn("srt_ctx_reserve", c_int, ctx, c_int64)
    fn("srt_ctx_isa", c_int, ctx)
    fn("srt_isa_name", c_char_p, c_int)
    fn("srt_isa_parse", c_int, c_char_p, POINTER(c_int))
    fn("srt_sampler_init", None, POINTER(Sampler), c_float, c_float, c_uint64)
    fn("srt_sampler_sample", c_int32, POINTER(Sampler), POINTER(c_float), c_int64, POINTER(c_float))
    # srt_container.h
    fn("srt_container_open", c_int, c_char_p, c_int, POINTER(c_void_p), POINTER(c_char), c_size_t)
    fn("srt_container_close", None, ct)
    fn("srt_container_kind", c_int, ct)
    fn("srt_container_manifest_text", c_void_p, ct, POINTER(c_size_t))
    fn("srt_container_section_count", c_size_t, ct)
    fn("srt_container_section_at", POINTER(CtSection), ct, c_size_t)
    fn("srt_container_find", c_int64, ct, c_char_p)
    fn("srt_container_read", c_int, ct, c_size_t, c_void_p, c_uint64)
    fn("srt_container_errmsg", c_char_p, ct)
    # srt_model.h
    fn("srt_model_open", c_int, c_char_p, POINTER(ModelOpts), POINTER(c_void_p), POINTER(c_char), c_size_t)
    fn("srt_model_close", None, model)
    fn("srt_model_set_ctx", c_int, model, ctx)
    fn("srt_model_default_method", c_char_p, model)
    fn("srt_model_default_density", c_double, model)
    fn("srt_model_set_method", c_int, model, c_char_p, c_double)
    fn("srt_model_method_missing", c_char_p, model, c_char_p)
    fn("srt_model_method_known", c_bool, c_char_p)
    fn("srt_model_method", c_char_p, model)
    fn("srt_model_step", c_int, model, c_int32, c_int64, POINTER(POINTER(c_float)))
    fn("srt_model_prefill", c_int, model, POINTER(c_int32), c_int64, c_int64, POINTER(POINTER(c_float)))
    fn("srt_model_end_prompt", c_int, model)
    fn("srt_model_from_prompt", c_bool, model)
    fn("srt_model_fault", c_char_p, model)
    fn("srt_model_max_ctx", c_int64, model)
    fn("srt_model_reserve", c_int, model, c_int64)
    fn("srt_model_last_live", c_int64, model, c_int64, POINTER(POINTER(c_uint32)))
    fn("srt_model_last_density", c_double, model, c_int64)
    fn("srt_model_live_count", c_int64, model)
    fn("srt_model_cett_density", c_double, model)
    return lib


_lib = None


def lib():
    """The loaded libsparsert (loaded once)."""
    global _lib
    if _lib is None:
        tried = []
        for path in _candidates():
            if not os.path.sep in path or os.path.exists(path):
                try:
                    _lib = _declare(ctypes.CDLL(path))
                    break
                except OSError as e:
                    tried.append(f"{path} ({e})")
            else:
                tried.append(f"{path} (no such file)")
        if _lib is None:
            raise SparsecalError("libsparsert not found: set SPARSERT_LIB=/path/to/libsparsert.so"
                                 + (" (tried " + "; ".join(tried) + ")" if tried else ""))
    return _lib


def status_str(st):
    return lib().srt_status_str(st).decode()


def cstr(s):
    return os.fsencode(s) if isinstance(s, (str, os.PathLike)) else s
