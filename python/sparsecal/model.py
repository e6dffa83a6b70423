"""Decoding from a packed artifact (.spk) with libsparsert (srt_model.h): the weights stay quantised in their
layouts, one token at a time with a key/value cache, each token's MLP routed by the artifact's router
(dense, cats, claws, larosa, cats-threshold, cett, clada, teal, griffin, teal-greedy, cwic, teal-cats). Generation
samples with the runtime's sampler (srt_sampler: llama2.c's), so for the same artifact, prompt ids, router, seed and
kernel threads the ids are those `sparsecal run` prints; scoring is the teacher-forced loop of
`sparsecal run --score`."""
import ctypes
import math
import os
import time
import warnings

import numpy as np

from . import _lib
from ._lib import ModelOpts, Sampler, SparsecalError, cstr, status_str
from .container import Container, KIND_SPAK

_ISA_AUTO = -1
_KV_F16, _KV_F32 = 0, 1  # srt_kv_type (srt_model.h)


class Model:
    """An artifact opened for decoding.

    Model(path, threads=1, max_ctx=0, isa=None, cache_type="f16"): `threads` kernel threads (ids equal
    `sparsecal run`'s at any thread count); `max_ctx` the positions the key/value cache may grow to (0: the
    model's context); `isa` "scalar", "avx2", "avx512", "amx", "neon", "dotprod" or "i8mm" (None:
    SPARSECAL_ISA, else the best here); `cache_type` what the key/value cache holds, "f16" (as `run`'s
    default) or "f32" (`run --cache-type`).
    The router is the artifact's (pack --method/--density) until set_method. `config` is the manifest's
    model configuration (a dict), `manifest` the whole manifest."""

    _m = _ctx = None

    def __init__(self, path, threads=1, max_ctx=0, isa=None, cache_type="f16"):
        L = _lib.lib()
        self.path = str(path)
        with Container(path, KIND_SPAK) as ct:
            self.manifest = ct.manifest
        self.config = self.manifest["config"]
        isa_id = ctypes.c_int(_ISA_AUTO)
        if isa is not None and L.srt_isa_parse(cstr(isa), ctypes.byref(isa_id)) != 0:
            raise SparsecalError(f"unknown ISA '{isa}' (scalar, avx2, avx512, amx, neon, dotprod, i8mm)")
        kv = {"f16": _KV_F16, "f32": _KV_F32}.get(cache_type)
        if kv is None:
            raise SparsecalError(f"unknown cache_type '{cache_type}' (f16, f32)")
        if not 1 <= int(threads) <= 1024:
            raise SparsecalError(f"threads {threads}: must be 1..1024")
        ctx = ctypes.c_void_p()
        st = L.srt_ctx_create(ctypes.byref(ctx), isa_id.value, int(threads))
        if st == 8:  # SRT_EPREFETCH
            raise SparsecalError(f"SPARSECAL_PREFETCH={os.environ.get('SPARSECAL_PREFETCH')!r}: {status_str(st)}")
        if st != 0:
            raise SparsecalError(f"cannot create a kernel context with {threads} threads ({status_str(st)})")
        self._ctx = ctx
        c = self.config
        # reductions over threads keep one partial output per extra thread: room for the widest matrix, its
        # rows rounded up to the largest row group (512), as `sparsecal run` reserves it
        rows = max(c["vocab_size"], c["ffn_dim"], c["n_heads"] * c["head_dim"], c["dim"])
        if threads > 1 and L.srt_ctx_reserve(ctx, (rows + 511) // 512 * 512) != 0:
            raise SparsecalError("out of memory for the kernel threads' scratch")
        err = ctypes.create_string_buffer(1024)
        m = ctypes.c_void_p()
        opts = ModelOpts(int(max_ctx), ctx, kv)
        if L.srt_model_open(cstr(path), ctypes.byref(opts), ctypes.byref(m), err, len(err)) != 0:
            raise SparsecalError(err.value.decode(errors="replace"))
        self._m = m
        self.vocab_size = int(c["vocab_size"])
        self.bos_id, self.eos_id = int(c.get("bos_id", -1)), int(c.get("eos_id", -1))
        self.threads = int(threads)
        self.isa = L.srt_isa_name(L.srt_ctx_isa(ctx)).decode()
        self._logits = ctypes.POINTER(ctypes.c_float)()
        self.set_method()

    # ---- lifetime ----

    def close(self):
        L = _lib.lib()
        if self._m:
            L.srt_model_close(self._m)
            self._m = None
        if self._ctx:
            L.srt_ctx_free(self._ctx)
            self._ctx = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    def _handle(self):
        if not self._m:
            raise SparsecalError(f"{self.path}: closed")
        return self._m

    # ---- router ----

    @property
    def max_ctx(self):
        """Positions the key/value cache may hold (max_ctx given at open, else the model's context)."""
        return int(_lib.lib().srt_model_max_ctx(self._handle()))

    @property
    def method(self):
        """The router in use ("dense", "claws", ...)."""
        return _lib.lib().srt_model_method(self._handle()).decode()

    def set_method(self, method=None, density=None):
        """Routes the MLP with `method` at `density` (the fraction of neurons kept, in (0, 1]). None: the
        artifact's router and density, as `sparsecal run` without --method/--density (dense, with a warning,
        when the artifact's router does not run here). cett and clada at the density pack fitted their thresholds
        to run those, at another density the thresholds from the artifact's CETT table (artifacts packed
        before the table: the stored thresholds, whatever the density). Raises SparsecalError naming what the artifact lacks for a router."""
        L, m = _lib.lib(), self._handle()
        if method is None:
            method = L.srt_model_default_method(m).decode()
            why = L.srt_model_method_missing(m, cstr(method))
            if why:
                warnings.warn(f"{self.path}: the artifact's router '{method}' does not run here "
                              f"({why.decode()}); running dense")
                method = "dense"
        if density is None:
            d = L.srt_model_default_density(m)
            density = d if 0 < d <= 1 else 1.0
        if method == "dense":
            density = 1.0
        if not 0 < density <= 1:
            raise SparsecalError(f"density {density}: a density is the fraction of MLP neurons kept, in (0, 1]")
        why = L.srt_model_method_missing(m, cstr(method))
        if why:
            raise SparsecalError(f"{self.path}: cannot route with {method}: {why.decode()}")
        st = L.srt_model_set_method(m, cstr(method), float(density))
        if st != 0:
            raise SparsecalError(f"{self.path}: cannot route with {method} at density {density} ({status_str(st)})")
        self.density = float(density)

    # ---- the decoder ----

    def _check(self, st, pos):
        if st == 0:
            return
        L = _lib.lib()
        if st == 7:  # SRT_ENONFINITE
            raise SparsecalError(f"{self.path}: position {pos}: {L.srt_model_fault(self._m).decode()}")
        raise SparsecalError(f"{self.path}: decode step failed at position {pos} ({status_str(st)})")

    def _view(self):
        return np.ctypeslib.as_array(self._logits, shape=(self.vocab_size,))

    def _ids(self, ids):
        a = np.ascontiguousarray(ids, dtype=np.int32)
        if a.ndim != 1:
            raise SparsecalError("ids must be one sequence of token ids")
        if a.size and (a.min() < 0 or a.max() >= self.vocab_size):
            raise SparsecalError(f"token id outside the vocabulary of {self.vocab_size}")
        return a

    def prefill(self, ids, pos=0):
        """Runs ids at positions pos.. (the cache must hold positions < pos) and returns the last token's
        logits (a new float32 array)."""
        a = self._ids(ids)
        if a.size == 0 or pos < 0 or pos + a.size > self.max_ctx:
            raise SparsecalError(f"{a.size} ids at position {pos} do not fit the context of {self.max_ctx}")
        st = _lib.lib().srt_model_prefill(self._handle(), a.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)),
                                          a.size, pos, ctypes.byref(self._logits))
        if st == 7:  # which position: token by token (the same values), the step says
            for i, t in enumerate(a):
                self.step(int(t), pos + i)
        self._check(st, pos)
        return self._view().copy()

    def step(self, token, pos):
        """Runs one token at position pos (positions < pos already run) and returns its logits (a new
        float32 array)."""
        if not 0 <= token < self.vocab_size or not 0 <= pos < self.max_ctx:
            raise SparsecalError(f"token {token} at position {pos}: outside the vocabulary or the context")
        self._check(_lib.lib().srt_model_step(self._handle(), int(token), int(pos), ctypes.byref(self._logits)),
                    pos)
        return self._view().copy()

    def generate(self, ids, steps=256, temperature=1.0, top_p=0.9, seed=None, ignore_eos=False):
        """Continues ids (BOS first, as `sparsecal tokenize --bos` gives them) until BOS or EOS is sampled or
        `steps` positions (prompt included, as `sparsecal run --steps` and llama2.c's -n; at most the context)
        have run; returns every id, prompt first, as `sparsecal run --json` lists them in "tokens".
        temperature 0 is greedy; otherwise top-p sampling seeded by `seed` (None: from the clock, as run without --seed)."""
        a = self._ids(ids)
        steps = int(steps)
        if steps > self.max_ctx:
            raise SparsecalError(f"steps {steps} exceeds the context ({self.max_ctx} positions)")
        if a.size == 0 or a.size > steps:
            raise SparsecalError(f"the prompt ({a.size} ids) must hold 1..{steps} (steps) ids")
        if seed is None or seed == 0:
            seed = int(time.time() * 1e6)
        L, m = _lib.lib(), self._handle()
        if L.srt_model_reserve(m, steps) != 0:
            raise SparsecalError(f"out of memory for a key/value cache of {steps} positions")
        smp = Sampler()
        L.srt_sampler_init(ctypes.byref(smp), float(temperature), float(top_p), int(seed) & (2**64 - 1))
        row = np.empty(self.vocab_size, dtype=np.float32)
        scratch = np.empty(2 * self.vocab_size, dtype=np.float32)
        fp = ctypes.POINTER(ctypes.c_float)
        out = [int(t) for t in a]
        self.prefill(a, 0)
        self._check(L.srt_model_end_prompt(m), a.size - 1)  # griffin fixes its live sets from the prompt
        pos = a.size
        while True:
            row[:] = self._view()
            nxt = L.srt_sampler_sample(ctypes.byref(smp), row.ctypes.data_as(fp), self.vocab_size,
                                       scratch.ctypes.data_as(fp))
            if nxt < 0:
                raise SparsecalError(f"{self.path}: non-finite logits at position {pos - 1}")
            if not ignore_eos and nxt in (self.bos_id, self.eos_id):
                break
            out.append(nxt)
            if pos >= steps:
                break
            self._check(L.srt_model_step(m, nxt, pos, ctypes.byref(self._logits)), pos)
            pos += 1
        return out

    def score(self, sequences, ctx=None):
        """Teacher-forced scores of sequences (lists of ids) through this decoder, the protocol of `sparsecal
        run --score` / `eval -m X.spk`: every token routed, the id at t+1 scored from the logits at t in
        double precision; a sequence longer than ctx (None: the context) is cut into windows of ctx ids
        overlapping by one, each restarting at position 0. Returns a dict: nll_sum, n_tokens (positions
        scored), n_sequences, n_windows, nll_mean, ppl, density_mean and density_per_layer (live MLP neurons
        / ffn_dim over every step and layer; for teal, teal-greedy and cwic the linear parameters read)."""
        L, m = _lib.lib(), self._handle()
        seqs = [self._ids(s) for s in sequences]
        limit = self.max_ctx
        ctx = limit if ctx is None or ctx <= 0 or ctx > limit else int(ctx)
        if ctx < 2:
            raise SparsecalError(f"{self.path}: a context of {ctx} positions scores nothing")
        win = min(max((s.size for s in seqs), default=0), ctx)
        if win < 2:
            raise SparsecalError("every sequence is shorter than 2 tokens; nothing to score")
        if L.srt_model_reserve(m, win) != 0:
            raise SparsecalError(f"out of memory for a key/value cache of {win} positions")
        nl = int(self.config["n_layers"])
        live = [0.0] * nl
        nll_sum, n_tok, n_seq, n_win, n_routed = 0.0, 0, 0, 0, 0
        from_prompt = L.srt_model_from_prompt(m)  # griffin: the first half of each window is a dense prompt
        for s in seqs:
            if s.size < 2:
                continue
            n_seq += 1
            start = 0
            while start + 1 < s.size:  # windows of win ids; the last id of one runs first in the next
                n = min(s.size - start, win)
                prompt = max(1, n // 2) if from_prompt else 0
                for t in range(n - 1):
                    self._check(L.srt_model_step(m, int(s[start + t]), t, ctypes.byref(self._logits)), start + t)
                    if t + 1 == prompt:
                        self._check(L.srt_model_end_prompt(m), start + t)
                    if t + 1 < prompt:
                        continue
                    x = self._view().astype(np.float64)
                    mx = x.max()
                    nll_sum += (mx + math.log(np.exp(x - mx).sum())) - x[s[start + t + 1]]
                    n_tok += 1
                    if t < prompt:
                        continue
                    n_routed += 1
                    for l in range(nl):
                        live[l] += L.srt_model_last_density(m, l)  # the input routers: linear parameters read
                n_win += 1
                start += win - 1
        nll = nll_sum / n_tok
        return {"nll_sum": nll_sum, "n_tokens": n_tok, "n_sequences": n_seq, "n_windows": n_win,
                "nll_mean": nll, "ppl": math.exp(nll), "density_mean": sum(live) / (n_routed * nl),
                "density_per_layer": [v / n_routed for v in live], "method": self.method, "density": self.density}
