#!/usr/bin/env python3
"""The recovery-training table and loss curves for scripts/repro (`make train`, docs/TRAIN.md).

    train_table.py --out DIR --runs DIR --methods "claws-lora cats-lora" --densities "0.3 0.5" [provenance]

Reads, for every method M and density D, RUNS/lora/M@D.train.json (`sparsecal train --json`),
RUNS/lora/M@D.csv (`train --log`) and RUNS/lora/M@D.eval.json (`eval --json` of the artifact packed
with the adapter), RUNS/base/R@D.eval.json (the same artifact without it, R = M without -lora) and
RUNS/base/dense.eval.json.
Writes DIR/train.csv, DIR/train.md and DIR/train_loss.png. Standard library only; the helpers are
tables.py's."""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tables as T  # noqa: E402

NAMES = {"claws-lora": "CLAWS+LoRA", "cats-lora": "CATS+LoRA", "claws": "CLAWS (training-free)",
         "cats": "CATS (training-free)"}


def smooth(ys, w):
    """running mean over the last w values"""
    out, s = [], 0.0
    for i, y in enumerate(ys):
        s += y
        if i >= w:
            s -= ys[i - w]
        out.append(s / min(i + 1, w))
    return out


def interp_log(points, x):
    """log-linear interpolation of y at x in [(x, y)] sorted by x; None outside the range"""
    for (x0, y0), (x1, y1) in zip(points, points[1:]):
        if x0 <= x <= x1:
            f = (x - x0) / (x1 - x0) if x1 > x0 else 0.0
            return math.exp(math.log(y0) + f * (math.log(y1) - math.log(y0)))
    return None


def cwic_section(a, dense):
    """CWIC learned thresholds against the training-free fit at the same achieved APR"""
    fit = []
    for r in a.cwic_fit.split():
        e = T.load(os.path.join(a.runs, "cwic", f"fit@{r}.eval.json"))
        fit.append((e["input_sparsity"]["apr"], e["ppl"], float(r)))
    fit.sort()
    header = ["CWIC thresholds", "APR achieved", "ppl", "vs dense", "fit ppl at that APR", "learned / fit",
              "train s", "KL+KL first step", "KL+KL last 10%"]
    rows = []
    names = {"thresholds": "learned (thresholds only)", "lora": "learned (thresholds + LoRA on W_d)",
             "all": "learned (thresholds + all linear weights)"}
    for what in (a.cwic_train or "thresholds").split():
        name = names.get(what, f"learned ({what})")
        e = T.load(os.path.join(a.runs, "cwic", f"{what}.eval.json"))
        j = T.load(os.path.join(a.runs, "cwic", f"{what}.train.json"))
        apr, ppl = e["input_sparsity"]["apr"], e["ppl"]
        f = interp_log([(x, y) for x, y, _ in fit], apr)
        rows.append([name, apr, ppl, ppl / dense, f, ppl / f if f else None, j["seconds"],
                     j["kl_first"] + j["fkl_first"], j["kl_last10pct"] + j["fkl_last10pct"]])
    for apr, ppl, r in fit:
        rows.append([f"training-free fit, apr={r:g}", apr, ppl, ppl / dense, None, None, None, None, None])
    T.write_csv(os.path.join(a.out, "train_cwic.csv"), header, rows)
    return ["## CWIC: learned thresholds vs the training-free fit", "",
            T.md_table(header, [[T.g(c) if isinstance(c, float) else ("—" if c is None else c) for c in r] for r in rows]),
            "", f"Settings: {a.cwic_settings} (on every document of the calibration text; statistics and fit from "
            f"`compute --method cwic` on its first {a.seqs} sequences). Perplexity of the evaluation text with every "
            "token of every layer striped (16-row stripes), the learned files and the fits all by the reference "
            "`eval --method cwic` (the LoRA run with its adapter fused by `eval --lora`, the all-weights run on "
            "the model it trained, `DIR/model`). 'fit ppl at that APR' interpolates log ppl of the fits linearly "
            "in the APR they achieve on the same text (the fits are of the source model's weights).", ""]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--runs", required=True)
    p.add_argument("--methods", required=True)
    p.add_argument("--densities", required=True)
    for k in ("binary", "model", "tok", "calib-text", "eval-text", "seqs", "tune-docs", "settings"):
        p.add_argument("--" + k, default="")
    p.add_argument("--target", default="train")
    p.add_argument("--cwic-fit", default="")
    p.add_argument("--cwic-settings", default="")
    p.add_argument("--cwic-train", default="thresholds")
    a = p.parse_args()
    methods, dens = a.methods.split(), a.densities.split()
    ev = lambda name: T.load(os.path.join(a.runs, name + ".eval.json"))  # noqa: E731
    dense = ev("base/dense")["ppl"]
    header = ["method", "density", "ppl", "vs dense", "achieved density", "train s", "train tok/s", "KL first step",
              "KL last 10%", "steps", "train tokens"]
    rows = [["dense", 1.0, dense, 1.0, 1.0] + [None] * 6]
    runs = {}
    for m in methods:
        base = m[:-5] if m.endswith("-lora") else m
        for d in dens:
            b = ev(f"base/{base}@{d}")
            rows.append([NAMES.get(base, base), float(d), b["ppl"], b["ppl"] / dense, b["density_mean"]] + [None] * 6)
            j = T.load(os.path.join(a.runs, "lora", f"{m}@{d}.train.json"))
            e = ev(f"lora/{m}@{d}")
            rows.append([NAMES.get(m, m), float(d), e["ppl"], e["ppl"] / dense, e["density_mean"], j["seconds"],
                         j["tokens_per_second"], j["kl_first"], j["kl_last10pct"], j["steps"], j["tokens"]])
            runs[(m, d)] = T.read_csv(os.path.join(a.runs, "lora", f"{m}@{d}.csv"))
    rows.sort(key=lambda r: (r[1] if r[0] != "dense" else -1, r[0]))
    os.makedirs(a.out, exist_ok=True)
    T.write_csv(os.path.join(a.out, "train.csv"), header, rows)
    md = [f"# Recovery training (`make -C scripts/repro train`)", "", T.provenance(a), "",
          T.md_table(header, [[T.g(c) if isinstance(c, float) else ("—" if c is None else c) for c in r] for r in rows]),
          "", "Perplexity of the evaluation text with every token of every layer routed by hard top-K, evaluated by "
          "the runtime on f32 artifacts (`pack --layout f32 --method R --density D`, with `--lora` for the +LoRA "
          "rows). KL is per token, KL(student || teacher) of the training sequences of that step at the step's "
          "mask temperature.", "", "![KL per step](train_loss.png)", ""]
    if a.cwic_fit:
        md += cwic_section(a, dense)
    T.write_text(os.path.join(a.out, "train.md"), "\n".join(md))
    series = []
    for (m, d), r in sorted(runs.items()):
        kl = smooth([float(x["kl"]) for x in r], 25)
        series.append((f"{NAMES.get(m, m)} d={d}", [(i + 1, y) for i, y in enumerate(kl)], "using 1:2 with lines lw 2"))
    if runs:
        r = next(iter(runs.values()))
        series.append(("tau (right axis)", [(i + 1, float(x["tau"])) for i, x in enumerate(r)],
                       "using 1:2 axes x1y2 with lines dt 2 lc 'gray'"))
    blocks, plot = T.datablocks(series)
    T.gnuplot(os.path.join(a.out, "train_loss.png"), blocks + """set xlabel 'optimizer step'
set ylabel 'KL(student || teacher) per token, running mean of 25 steps'
set y2label 'mask temperature tau'
set y2tics
set ytics nomirror
""" + plot)


if __name__ == "__main__":
    main()
