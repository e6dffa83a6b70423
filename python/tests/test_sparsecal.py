"""The Python module against the sparsecal command on the same files: generated ids equal `sparsecal run`'s
(greedy, sampled with seeds, other routers, two kernel threads), scores equal `run --score`'s, and every
array read from a .scal equals what `sparsecal inspect --json --values` prints, bit for bit.

Environment (set by ctest): SPARSECAL_CLI (the sparsecal binary), SPARSERT_LIB (libsparsert.so),
SPARSECAL_ASSETS (the shared assets: stories260K and its text; else SC_ASSETS_DEFAULT)."""
import json
import os
import subprocess
import tempfile
import unittest
import warnings

import numpy as np

import sparsecal

ASSETS = os.environ.get("SPARSECAL_ASSETS") or os.environ.get("SC_ASSETS_DEFAULT", "")
CLI = os.environ.get("SPARSECAL_CLI", "sparsecal")


def sc(*args):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"sparsecal {' '.join(map(str, args))}: {r.stderr.strip()}")
    return r.stdout


class TestSparsecal(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        M, T = f"{ASSETS}/models/stories260K.bin", f"{ASSETS}/models/tok512.bin"
        X = f"{ASSETS}/text/tinystories_valid_a.txt"
        if not os.path.exists(M):
            raise unittest.SkipTest(f"assets not found in '{ASSETS}' (set SPARSECAL_ASSETS)")
        cls.scal, cls.spk, cls.lr = f"{d}/c.scal", f"{d}/m.spk", f"{d}/lr.spk"
        # every method whose file holds something else: f32 samples (teal, cett), i64 histograms, [D, D] rotations
        sc("compute", "-m", M, "--tokenizer", T, "-f", X, "--max-docs", 16, "--method", "claws,cats,larosa,teal,cett,clada,cwic",
           "--params", "teal_greedy=0", "-o", cls.scal, "-q")
        sc("pack", "-m", M, "--tokenizer", T, "--calib", cls.scal, "--layout", "kmi4", "--method", "claws", "--density", 0.5,
           "-o", cls.spk, "-q")
        sc("pack", "-m", M, "--tokenizer", T, "--calib", cls.scal, "--layout", "zigzag", "--method", "larosa", "--density", 0.5,
           "-o", cls.lr, "-q")
        cls.ids = {p: sparsecal.tokenize(cls.spk, p) for p in ("Once upon a time", "The dog ran")}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def run_ids(self, path, prompt, *args):
        j = json.loads(sc("run", "--artifact", path, "-p", prompt, "--json", *args))
        return j["tokens"], j

    # ---- generation ----

    def test_tokenize_matches_run_prompt(self):
        for p, ids in self.ids.items():
            want, j = self.run_ids(self.spk, p, "-n", len(ids), "--temp", 0, "--threads", 1)
            self.assertEqual(ids, want[:j["prompt_tokens"]])
            self.assertEqual(ids[0], 1)  # BOS
        self.assertEqual(sparsecal.detokenize(self.spk, self.ids["Once upon a time"]), "Once upon a time")

    def test_greedy(self):
        with sparsecal.Model(self.spk) as m:
            self.assertEqual((m.method, m.density), ("claws", 0.5))  # the artifact's router
            for p, ids in self.ids.items():
                got = m.generate(ids, steps=60, temperature=0)
                want, j = self.run_ids(self.spk, p, "--steps", 60, "--temp", 0, "--threads", 1)
                self.assertEqual(j["method"], "claws")
                self.assertGreater(len(want), len(ids) + 10)  # generated enough to compare
                self.assertEqual(got, want)

    def test_sampled(self):
        with sparsecal.Model(self.spk) as m:
            for seed, temp, top_p in ((1, 1.0, 0.9), (7, 0.8, 0.9), (12345, 1.0, 1.0), (99, 1.3, 0.5)):
                ids = self.ids["Once upon a time"]
                got = m.generate(ids, steps=120, temperature=temp, top_p=top_p, seed=seed)
                want, _ = self.run_ids(self.spk, "Once upon a time", "--steps", 120, "--temp", temp, "--top-p", top_p,
                                       "--seed", seed, "--threads", 1)
                self.assertEqual(got, want, f"seed {seed}")
            # different seeds give different continuations (the seed reaches the sampler)
            a = m.generate(ids, steps=120, seed=1)
            b = m.generate(ids, steps=120, seed=2)
            self.assertNotEqual(a, b)

    def test_routers_and_threads(self):
        ids = self.ids["The dog ran"]
        with sparsecal.Model(self.spk, threads=2) as m:
            for method, density in (("cats", 0.3), ("dense", 1.0), ("cett", 0.5), ("teal", 0.6), ("griffin", 0.5)):
                m.set_method(method, density)
                self.assertEqual(m.method, method)
                got = m.generate(ids, steps=50, seed=3)
                want, j = self.run_ids(self.spk, "The dog ran", "--steps", 50, "--seed", 3, "--method", method,
                                       *([] if method == "cett" else ["--density", density]), "--threads", 2)
                self.assertEqual(j["threads"], 2)
                self.assertEqual(got, want, method)
        with sparsecal.Model(self.lr, threads=1) as m:  # rotations folded, column-sparse zigzag kernels
            self.assertEqual(m.method, "larosa")
            got = m.generate(ids, steps=50, seed=4)
            want, j = self.run_ids(self.lr, "The dog ran", "--steps", 50, "--seed", 4, "--threads", 1)
            self.assertEqual(j["method"], "larosa")
            self.assertEqual(got, want)

    def test_cache_type(self):
        ids = self.ids["Once upon a time"]
        got = {}
        for kv in ("f16", "f32"):
            with sparsecal.Model(self.spk, cache_type=kv) as m:
                m.set_method("dense", 1.0)
                got[kv] = m.generate(ids, steps=60, temperature=0)
                want, j = self.run_ids(self.spk, "Once upon a time", "--steps", 60, "--temp", 0, "--method", "dense",
                                       "--cache-type", kv, "--threads", 1)
                self.assertEqual(j["kv_cache_type"], kv)
                self.assertEqual(got[kv], want, kv)
                a = m.prefill(ids)
                b = None
                for pos, t in enumerate(ids):
                    b = m.step(t, pos)
                self.assertTrue(np.array_equal(a, b), kv)
                got[kv + " logits"] = b
        # the cache type reaches the runtime: f16 keys and values move the logits (how far: tests/test_run.c)
        self.assertFalse(np.array_equal(got["f16 logits"], got["f32 logits"]))
        with self.assertRaises(sparsecal.SparsecalError):
            sparsecal.Model(self.spk, cache_type="q8_0")

    def test_logits_prefill_equals_steps(self):
        ids = self.ids["Once upon a time"]
        with sparsecal.Model(self.spk) as m:
            a = m.prefill(ids)
            for pos, t in enumerate(ids):
                b = m.step(t, pos)
            self.assertEqual(a.shape, (512,))
            self.assertTrue(np.array_equal(a, b))  # srt_model_prefill's contract: n steps' logits bit for bit

    # ---- scoring ----

    def test_score(self):
        seqs = [sparsecal.tokenize(self.spk, t) for t in (
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.",
            "Tom had a big red ball. He liked to kick it to his friend Sam every day after school.")]
        d = self.tmp.name
        with open(f"{d}/ids.txt", "w") as f:
            for s in seqs:
                f.write(" ".join(map(str, s)) + "\n")
        with sparsecal.Model(self.spk) as m:
            # ctx 9: windows overlapping by one; griffin: the first half of each window is its prompt
            for ctx, method in ((0, None), (9, "cats"), (0, "griffin"), (9, "griffin")):
                m.set_method(method, 0.4 if method else None)
                got = m.score(seqs, ctx=ctx)
                args = ["run", "--artifact", self.spk, "--score", "--tokens", f"{d}/ids.txt", "--json", "--threads", 1]
                args += (["--ctx-size", ctx] if ctx else []) + (["--method", method, "--density", 0.4] if method else [])
                want = json.loads(sc(*args))
                self.assertEqual(got["n_tokens"], want["n_tokens"])
                self.assertEqual(got["n_windows"], want["n_windows"])
                self.assertGreater(got["n_windows"], 2 if ctx else 1)
                # the same logits; the log-sum-exp sums in another order (numpy pairwise vs. a loop): 1e-12
                self.assertAlmostEqual(got["nll_mean"], want["nll_mean"], delta=1e-12 * want["nll_mean"])
                self.assertAlmostEqual(got["density_mean"], want["density_mean"], delta=1e-12)
                np.testing.assert_allclose(got["density_per_layer"], want["density_per_layer"], rtol=0, atol=1e-12)

    # ---- containers ----

    def test_scal_arrays_equal_inspect(self):
        want = json.loads(sc("inspect", self.scal, "--json", "--values"))
        with sparsecal.Calibration(self.scal) as cal:
            self.assertEqual(cal.manifest, want["manifest"])
            self.assertEqual(cal.names(), [s["name"] for s in want["sections"]])
            self.assertEqual(cal.methods, ["claws", "cats", "larosa", "teal", "cett", "clada", "cwic"])
            kinds = set()
            for s in want["sections"]:
                a = cal.read(s["name"])
                kinds.add(str(a.dtype))
                self.assertEqual(list(a.shape), s["shape"], s["name"])
                self.assertEqual(a.size, s["elements"])
                # the CLI prints every value so it reads back exactly: equal bit for bit
                b = np.array(s["values"], dtype=a.dtype).reshape(a.shape)
                self.assertTrue(np.array_equal(a, b), s["name"])
            self.assertEqual(kinds, {"float64", "int64", "float32"})
            c = cal.layers("claws", "c")
            self.assertEqual(c.shape, (5, 172))
            self.assertTrue(np.array_equal(c[3], cal.read("claws/layer3.c")))
            self.assertTrue(np.all(c > 0))
            q = cal.arrays("larosa")["layer1.mlp.Q"]
            np.testing.assert_allclose(q.T @ q, np.eye(64), atol=1e-10)  # an orthogonal rotation

    def test_artifact_sections(self):
        want = json.loads(sc("inspect", self.spk, "--json", "--values"))
        with sparsecal.Container(self.spk) as ct:
            self.assertEqual(ct.kind, "artifact")
            for s in want["sections"]:
                a = ct.read(s["name"])
                self.assertEqual(list(a.shape), s["shape"], s["name"])
                self.assertTrue(np.array_equal(a.reshape(-1), np.array(s["values"], dtype=a.dtype)), s["name"])

    def test_errors(self):
        with self.assertRaisesRegex(sparsecal.SparsecalError, "calibration"):
            sparsecal.Model(self.scal)
        with self.assertRaisesRegex(sparsecal.SparsecalError, "artifact"):
            sparsecal.Calibration(self.spk)
        with self.assertRaisesRegex(sparsecal.SparsecalError, "No such file|cannot open"):
            sparsecal.Container(self.tmp.name + "/missing.scal")
        with sparsecal.Model(self.lr) as m:
            with self.assertRaisesRegex(sparsecal.SparsecalError, "cannot route with claws"):
                m.set_method("claws", 0.5)
        with sparsecal.Model(self.spk) as m:
            with self.assertRaisesRegex(sparsecal.SparsecalError, "vocabulary"):
                m.generate([1, 600], steps=10)
            with self.assertRaisesRegex(sparsecal.SparsecalError, "density"):
                m.set_method("cats", 1.5)
            with self.assertRaisesRegex(sparsecal.SparsecalError, "context"):
                m.generate([1], steps=100000)
        with self.assertRaisesRegex(sparsecal.SparsecalError, "tokenize"):
            sparsecal.tokenize(self.scal, "x")
        os.environ["SPARSECAL_PREFETCH"] = "kd=1/8,pass=99"
        try:
            with self.assertRaisesRegex(sparsecal.SparsecalError, "SPARSECAL_PREFETCH='kd=1/8,pass=99'.*kr=L1/L2"):
                sparsecal.Model(self.spk)
        finally:
            del os.environ["SPARSECAL_PREFETCH"]


if __name__ == "__main__":
    unittest.main()
