"""`sparsecal export` read from Python: the safetensors file (sparsecal.load_safetensors) holds the
calibration's arrays as f32, and TEAL's histogram files load with torch.load (skipped without Debian's
python3-torch) and give, through TEAL's interpolated quantile, the signed quantiles of the calibration's
histograms."""
import json
import os
import subprocess
import tempfile
import unittest

import numpy as np

import sparsecal

ASSETS = os.environ.get("SPARSECAL_ASSETS") or os.environ.get("SC_ASSETS_DEFAULT", "")
CLI = os.environ.get("SPARSECAL_CLI", "sparsecal")
LO, PER_DECADE, NMAG = 1e-8, 1024, 16 * 1024  # the .scal histogram geometry (docs/INPUT_SPARSITY.md)


def sc(*args):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"sparsecal {' '.join(map(str, args))}: {r.stderr.strip()}")
    return r.stdout


def teal_icdf(counts, centres, q):
    """TEAL's quantile of a histogram: linear between the centres of the bins the cumulative count crosses."""
    cum = np.cumsum(counts.astype(np.float64))
    target = q * cum[-1]
    i = int(np.searchsorted(cum, target))
    if i == 0:
        return float(centres[0])
    if i == len(centres):
        return float(centres[-1])
    f = (target - cum[i - 1]) / (cum[i] - cum[i - 1])
    return float(centres[i - 1] + f * (centres[i] - centres[i - 1]))


def signed_bracket(hist, q):
    """The edges [a, b] of the signed bin of a .scal histogram ([2, NB]: row 0 x < 0, row 1 x >= 0, bin 0
    |x| < 1e-8, then 1024 log bins per decade, then the outliers) in which the cumulative count reaches q."""
    nb = hist.shape[1]

    def edges(b):
        if b == 0:
            return 0.0, LO
        if b > NMAG:
            return 1e8, 1e8
        return LO * 10 ** ((b - 1) / PER_DECADE), LO * 10 ** (b / PER_DECADE)

    order = [(0, b) for b in range(nb - 1, -1, -1)] + [(1, b) for b in range(nb)]
    counts = np.array([hist[s, b] for s, b in order], dtype=np.float64)
    cum = np.cumsum(counts)
    s, b = order[int(np.searchsorted(cum, q * cum[-1]))]
    lo, hi = edges(b)
    return (-hi, -lo) if s == 0 else (lo, hi)


class TestExport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.M = f"{ASSETS}/models/stories260K.bin"
        if not os.path.exists(cls.M):
            raise unittest.SkipTest(f"assets not found in '{ASSETS}' (set SPARSECAL_ASSETS)")
        cls.scal, cls.out, cls.teal = f"{d}/c.scal", f"{d}/r.safetensors", f"{d}/teal"
        sc("compute", "-m", cls.M, "--tokenizer", f"{ASSETS}/models/tok512.bin", "-f", f"{ASSETS}/text/tinystories_valid_a.txt",
           "--max-docs", 16, "--method", "claws,teal,larosa", "--params", "teal_greedy=0", "-o", cls.scal, "-q")
        cls.summary = json.loads(sc("export", "--calib", cls.scal, "-m", cls.M, "-o", cls.out, "--teal-dir", cls.teal,
                                    "--json"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_safetensors_holds_the_calibration(self):
        t, meta = sparsecal.load_safetensors(self.out)
        self.assertEqual(meta["format"], "sparsecal-routing")
        self.assertEqual(meta["source"], "calibration")
        self.assertEqual(self.summary["tensors"], len(t))
        self.assertEqual(self.summary["rotations"], 10)
        with sparsecal.Calibration(self.scal) as cal:
            self.assertEqual(meta["model_id"], cal.manifest["model"]["id"])
            for l in range(5):
                c = t[f"l{l}.claws_c"]
                self.assertEqual((c.dtype, c.shape), (np.float32, (172,)))
                self.assertTrue(np.array_equal(c, cal.read(f"claws/layer{l}.c").astype(np.float32)))
                for w in ("attn", "mlp"):
                    q = t[f"l{l}.{w}_larosa_Q"]
                    self.assertTrue(np.array_equal(q, cal.read(f"larosa/layer{l}.{w}.Q").astype(np.float32)))
                    # z = Q^T x: an orthogonal rotation (f32 rounding of 64 terms)
                    np.testing.assert_allclose(q.T.astype(np.float64) @ q, np.eye(64), atol=1e-5)
                tt = t[f"l{l}.teal_thresholds"]
                self.assertEqual(tt.shape, (4, 19))
                self.assertTrue(np.all(np.diff(tt, axis=1) > 0))  # thresholds grow with the sparsity

    def test_teal_files_load_in_torch(self):
        try:
            import torch
        except ImportError:
            self.skipTest("python3-torch is not installed: TEAL's .pt files are checked by torch.load only")
        taps = {("self_attn", "h1"): "attn_in", ("self_attn", "h2"): "attn_ctx", ("mlp", "h1"): "mlp_in",
                ("mlp", "h2"): "h"}
        with sparsecal.Calibration(self.scal) as cal:
            for l in range(5):
                for (block, h), tap in taps.items():
                    d = torch.load(f"{self.teal}/histograms/layer-{l}/{block}/histograms.pt")
                    self.assertEqual(sorted(d), ["h1", "h1_centers", "h2", "h2_centers"])
                    counts, centres = d[h].numpy(), d[f"{h}_centers"].numpy()
                    self.assertEqual((counts.dtype, centres.dtype), (np.float32, np.float32))
                    self.assertTrue(np.all(np.diff(centres) > 0))
                    hist = cal.read(f"teal/layer{l}.{tap}.hist")
                    self.assertEqual(counts.sum(dtype=np.float64), hist.sum())
                    for s in (0.1, 0.3, 0.5, 0.7, 0.9):
                        v = teal_icdf(counts, centres, 0.5 + s / 2)
                        a, b = signed_bracket(hist, 0.5 + s / 2)
                        # TEAL interpolates between neighbouring centres: within the crossing bin or the one
                        # before it (0.225% relative width each), plus float32 centres
                        w = 2 * (10 ** (1 / PER_DECADE) - 1) * max(abs(a), abs(b)) + 1e-6 * abs(b)
                        self.assertTrue(a - w <= v <= b + w, f"layer {l} {tap} s {s}: {v} not in [{a}, {b}]")


if __name__ == "__main__":
    unittest.main()
