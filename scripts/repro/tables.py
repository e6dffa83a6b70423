#!/usr/bin/env python3
"""Tables (CSV + Markdown) and plots (gnuplot) for scripts/repro.

    tables.py COMMAND [options]      (called by scripts/repro/Makefile)

map / pick: the density -> setting maps of the target-driven methods. sweep, cett,
clada, teal, cwic, diag, ranks: accuracy tables from `sparsecal eval/diag --json`.
bench-down, bench-mlp, bench-llama, decode: timing tables from `sparsecal bench
--csv` and `sparsecal run --json`. (docs/RESULTS.md: report.py.)
Standard library only (json); plots need gnuplot and are skipped with a warning
without it."""
import argparse
import csv
import datetime
import json
import math
import os
import re
import subprocess
import sys

# ----------------------------------------------------------------------------------
# small helpers

# points per family kept in rank_scatter.csv (and plotted): enough to see the shape, small enough to commit
RANK_SAMPLE = 4000


def load(path):
    with open(path) as f:
        return json.load(f)


def stem_of(path):
    """eval/cett@1@target~0.2+lambda~0.8.json -> (method, density, {params})"""
    s = os.path.basename(path)
    s = s[:-5] if s.endswith(".json") else s
    w = s.split("@")
    params = {}
    if len(w) > 2 and w[2]:
        for kv in w[2].split("+"):
            k, _, v = kv.partition("~")
            params[k] = v
    return w[0], (w[1] if len(w) > 1 else "1"), params


def g(x, nd=4):
    """a number for a table: nd significant digits, no exponent for ordinary sizes"""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 10 ** nd:
        return f"{x:,.0f}"
    if a >= 1e-3:
        d = max(0, nd - 1 - int(math.floor(math.log10(a))))
        return f"{x:.{d}f}"
    return f"{x:.{nd - 1}e}"


def f2(x, d=2):
    return "—" if x is None else f"{x:.{d}f}"


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out)


def write_csv(path, header, rows):
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow([repr_num(c) for c in r])
    os.replace(path + ".tmp", path)


def repr_num(c):
    if isinstance(c, float):
        return "" if math.isnan(c) else f"{c:.10g}"
    return "" if c is None else c


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def write_text(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def interp(points, x, margin=0.01):
    """linear interpolation in [(x, y)]; extended by the end segments up to margin beyond
    the ends (a density 0.699 against a curve measured up to 0.698); else None"""
    pts = sorted(points)
    if not pts or x < pts[0][0] - margin or x > pts[-1][0] + margin:
        return None
    segs = list(zip(pts, pts[1:]))
    for (x0, y0), (x1, y1) in segs:
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    (x0, y0), (x1, y1) = segs[0] if x < pts[0][0] else segs[-1]
    return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def interp_log(points, x):
    """interpolation of log(y): perplexity between two densities"""
    v = interp([(a, math.log(b)) for a, b in points], x)
    return None if v is None else math.exp(v)


# ----------------------------------------------------------------------------------
# provenance: machine, commit, settings


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def commit():
    root = os.environ.get("REPRO_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")  # never write the index
    try:
        h = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                           env=env).stdout.strip()
        st = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".",
                             ":!docs/results", ":!docs/RESULTS.md"], capture_output=True, text=True, env=env).stdout
        return (h or "unknown") + ("-dirty" if st.strip() else "")
    except OSError:
        return "unknown"


def ndocs(path):
    try:
        with open(path, errors="replace") as f:
            return sum(1 for d in re.split(r"\n[ \t]*\n", f.read()) if d.strip())
    except OSError:
        return None


def binary(path):
    """the sparsecal that produced the numbers, and its version line"""
    if not path:
        return ""
    try:
        v = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        v = ""
    return f"; binary {path}" + (f" ({v})" if v else "")


def provenance(a, timing=False, inputs=()):
    s = f"Generated by `make -C scripts/repro {a.target}` on {machine()}; tree at commit {commit()}{binary(a.binary)}"
    if timing:
        t = max((os.path.getmtime(f) for f in inputs), default=None)
        if t:
            s += "; measured " + datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    s += "."
    if not timing:
        tok = f" (tokenizer {os.path.basename(a.tok)})" if a.tok else ""
        s += (f" Model {os.path.basename(a.model)}{tok}; calibration text {os.path.basename(a.calib_text)} "
              f"({ndocs(a.calib_text)} documents, the first {a.seqs} sequences calibrate, the first {a.tune_docs} "
              f"documents tune the target-driven settings); evaluation text {os.path.basename(a.eval_text)} "
              f"({ndocs(a.eval_text)} documents).")
    if a.settings:
        s += f" Settings: {a.settings}."
    return s


# ----------------------------------------------------------------------------------
# gnuplot


def gnuplot(png, body, size="820,520"):
    script = (f"set terminal pngcairo size {size} font ',10' noenhanced\nset output '{png}'\n"
              "set grid\nset key outside right top\nset datafile missing '-'\n" + body + "\nunset output\n")
    try:
        r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
        if r.returncode != 0:
            sys.stderr.write(f"tables.py: gnuplot failed for {png}: {r.stderr.strip()}\n")
    except OSError:
        sys.stderr.write(f"tables.py: gnuplot not found; {png} not drawn\n")


def datablocks(series):
    """[(title, [(x, y, ...)], style)] -> gnuplot datablocks and a plot command"""
    blocks, plots = [], []
    for i, (title, pts, style) in enumerate(series):
        blocks.append(f"$D{i} << EOD\n" + "\n".join(" ".join(repr_num(float(v)) for v in p) for p in pts) + "\nEOD")
        plots.append(f"$D{i} {style} title '{title}'")
    return "\n".join(blocks) + "\n", "plot " + ", ".join(plots)


LINE = "using 1:2 with linespoints"

# ----------------------------------------------------------------------------------
# map / pick: settings of target-driven methods for a density (tuning text only)


def cmd_map(a):
    param, fixed, files = a.rest[0], a.rest[1], a.rest[2:]
    pts = []
    for f in files:
        _, _, p = stem_of(f)
        j = load(f)
        pts.append([float(p[param]), j["density_mean"], j["ppl"]])
    pts.sort()
    print(json.dumps({"param": param, "fixed": fixed, "points": pts}, indent=1))


def pick(path, d):
    """the setting that lands a method at density d: LaRoSA's grid pick, or the
    interpolation of the measured (setting, density) map"""
    j = load(path)
    d = float(d)
    if "larosa" in j:
        return f"in={j['larosa']['split_in']!r},h={j['larosa']['split_h']!r}"
    pts = j["points"]  # sorted by the setting
    v = None
    for (v0, d0, _), (v1, d1, _) in zip(pts, pts[1:]):
        if min(d0, d1) <= d <= max(d0, d1):
            v = v0 if d1 == d0 else v0 + (v1 - v0) * (d - d0) / (d1 - d0)
            break
    if v is None:  # outside the grid: the nearest point (the table shows the achieved density)
        v = min(pts, key=lambda p: abs(p[1] - d))[0]
    s = f"{j['param']}={v:.6g}"
    return s + ("," + j["fixed"] if j["fixed"] else "")


def cmd_pick(a):
    print(pick(a.rest[0], a.rest[1]))


# ----------------------------------------------------------------------------------
# density sweep

NEURON = {"cats", "cats-threshold", "griffin", "griffin-prefill", "claws", "oracle", "cett", "clada"}
ACCOUNT = {
    "neuron": "MLP neurons",
    "larosa": "q,k,v,gate,up,down (param.-weighted)",
    "input": "q,k,v,o,gate,up,down (param.-weighted)",
}


def family(m):
    if m in NEURON:
        return "neuron"
    if m.startswith("larosa"):
        return "larosa"
    return "input"


def linear_params(info):
    L, D, F = info["n_layers"], info["dim"], info["ffn_dim"]
    qo = D * info["n_heads"] * info["head_dim"]
    kv = D * info["n_kv_heads"] * info["head_dim"]
    return L * (2 * qo + 2 * kv), L * 3 * D * F  # attention, MLP


def achieved(m, j):
    """the density in the method's own accounting"""
    return j["larosa"]["sparsified_linear_density"] if m.startswith("larosa") else j["density_mean"]


def weights_read(m, j, attn, mlp):
    """fraction of the weights of all block linears (q,k,v,o,gate,up,down) read per token"""
    f = family(m)
    if f == "input":
        i = j["input_sparsity"]
        return i["active_linear_params_per_token"] / i["dense_linear_params_per_token"]
    if f == "larosa":
        return j["density_mean"]
    return (attn + j["active_mlp_params_per_token"]) / (attn + mlp)


def setting_of(m, d, a):
    """the --params a tuned method ran with (pick/METHOD@D.txt), else empty"""
    p = os.path.join(a.tune_dir, "pick", f"{m}@{d}.txt")
    if not os.path.exists(p):
        return ""
    with open(p) as f:
        return f.read().strip()


def cmd_sweep(a):
    methods, dens = a.methods.split(), a.densities.split()
    attn, mlp = linear_params(load(a.model_info))
    ev = lambda m, d: load(os.path.join(a.eval_dir, f"{m}@{d}.json"))
    dense, half = ev("dense", "1"), ev("dense-half", "1")
    rows = [["dense", "", 1, "", dense["ppl"], 1, 1, dense["tokens"]],
            ["dense-half", "", 1, "", half["ppl"], 1, 1, half["tokens"]]]
    R = {}
    for m in methods:
        for d in dens:
            j = ev(m, d)
            r = [m, family(m), float(d), setting_of(m, d, a), j["ppl"], achieved(m, j), weights_read(m, j, attn, mlp),
                 j["tokens"]]
            rows.append(r)
            R[m, d] = r
    out = a.out
    write_csv(os.path.join(out, "density_sweep.csv"),
              ["method", "accounting", "density_target", "setting", "ppl", "density_achieved", "weights_read",
               "scored_tokens"], rows)
    hd = ["method", "density counts"] + [f"d={d}" for d in dens]
    acc = lambda m: ACCOUNT[family(m)]
    t_ppl = md_table(hd, [[m, acc(m)] + [g(R[m, d][4]) for d in dens] for m in methods])
    t_acc = md_table(hd, [[m, acc(m)] + [f"{R[m, d][5]:.4f}" for d in dens] for m in methods])
    t_rd = md_table(["method"] + [f"d={d}" for d in dens], [[m] + [f"{R[m, d][6]:.3f}" for d in dens] for m in methods])
    tuned = [m for m in methods if R[m, dens[0]][3]]
    short = lambda x: re.sub(r"\d+\.\d{5,}", lambda mm: f"{float(mm.group()):.4g}", x)
    t_set = md_table(["method"] + [f"d={d}" for d in dens], [[m] + [f"`{short(R[m, d][3])}`" for d in dens] for m in tuned])
    md = f"""# Density sweep on {os.path.basename(a.model)} (the CLAWS paper Table 6 and Figure 2)

Perplexity on the evaluation text with every token of every layer sparsified (no dense prefix) at target
densities {", ".join(dens)}. Dense: **{dense['ppl']:.4f}** ({dense['tokens']} scored tokens).
griffin-prefill scores only the second half of each document (its first half is the prompt); dense on
those tokens: **{half['ppl']:.4f}**.

What the density counts ("density counts" column):

- **MLP neurons** (cats, cats-threshold, griffin-prefill, claws, oracle, cett, clada): the fraction of
  D_ffn neurons live per token, i.e. of the rows of W_up and columns of W_down read; W_gate is read
  in full (it decides the live set) and attention is dense.
- **q,k,v,gate,up,down** (larosa, larosa-grid): rotated top-K on the attention and MLP inputs and
  top-K on h, weighted by each projection's parameters (`larosa.sparsified_linear_density`); the
  o-projection stays dense.
- **q,k,v,o,gate,up,down** (teal, teal-greedy, cwic): input-channel (or stripe-column) sparsity
  weighted by parameters over all seven linears (`1 - input_sparsity.achieved`).

Methods that take a target instead of a density land at it through a setting chosen on the first
documents of the calibration text (never the evaluation text): larosa-grid is LaRoSA with its own
grid search of the input/h split (tuned on the calibration text, then applied); cett and clada
interpolate the CETT target, cwic the APR (16-row stripes), from a grid measured on the
calibration text. Their achieved density on the evaluation text is reported as measured. larosa
is LaRoSA with the reference code's fixed split (in 0.8 s, h 1.2 s), which is not
parameter-balanced and lands denser than the target.

## Perplexity

{t_ppl}

## Achieved density (the method's own accounting)

{t_acc}

## Weights read per token

Fraction of the weights of all block linears (q, k, v, o, gate, up, down; classifier and embeddings
excluded) that a token reads: one axis on which every method can be compared.

{t_rd}

## Settings chosen on the calibration text

{t_set}

![perplexity vs density](density_sweep.png)

![perplexity vs weights read](density_sweep_cost.png)

{provenance(a)}
"""
    write_text(os.path.join(out, "density_sweep.md"), md)

    def series(col, style_of):
        return [(m, [(R[m, d][col], R[m, d][4]) for d in dens], style_of(m)) for m in methods]

    sty = lambda m: LINE + (" dashtype 2" if family(m) != "neuron" else "")
    for png, col, xl in (("density_sweep.png", 5, "achieved density (MLP neurons; parameter-weighted for dashed lines)"),
                         ("density_sweep_cost.png", 6, "fraction of block-linear weights read per token")):
        blocks, plot = datablocks(series(col, sty))
        gnuplot(os.path.join(out, png), blocks + f"""set logscale y
set yrange [{0.9 * dense['ppl']}:*]
set xlabel '{xl}'
set ylabel 'perplexity'
set title 'Perplexity vs density, {os.path.basename(a.model)} (dense {dense['ppl']:.3f})'
{plot}, {dense['ppl']} with lines dashtype 3 lc rgb 'black' title 'dense'""", size="960,560")


# ----------------------------------------------------------------------------------
# CETT, CLADA


def cett_points(files):
    pts = []
    for f in files:
        j = load(f)
        pts.append((j["density_mean"], j["ppl"]))
    return sorted(pts)


def cmd_cett(a):
    dense = next(load(f) for f in a.ref if stem_of(f)[0] == "dense")
    rows, md_rows = [], []
    for f in a.files:
        j = load(f)
        c = j["cett"]
        sc = [x for x in c["sample_cett_per_layer"] if x is not None]
        ss = [x for x in c["sample_sparsity_per_layer"] if x is not None]
        rows.append([c["target"], min(sc), max(sc), sum(ss) / len(ss), " ".join(f"{x:.4f}" for x in ss),
                     j["density_mean"], j["density_min"], j["density_max"], j["ppl"]])
        md_rows.append([f"{c['target']:g}", f"{min(sc):.4f}-{max(sc):.4f}", " ".join(f"{x:.3f}" for x in ss),
                        f"{j['density_mean']:.3f} ({j['density_min']:.3f}, {j['density_max']:.3f})",
                        g(j["ppl"]), f"{100 * (j['ppl'] / dense['ppl'] - 1):+.1f}%"])
    write_csv(os.path.join(a.out, "cett.csv"),
              ["target", "sample_cett_min", "sample_cett_max", "sample_sparsity_mean", "sample_sparsity_per_layer",
               "density_mean", "density_min", "density_max", "ppl"], rows)
    ref = {}
    for f in a.ref:
        m, d, _ = stem_of(f)
        if m != "dense":
            j = load(f)
            ref.setdefault(m, []).append((j["density_mean"], j["ppl"]))
    md = f"""# CETT: target vs achieved sparsity and perplexity (the CLADA paper, Eq. 10)

Per layer, the base threshold is the largest whose CETT (the norm of the MLP output of the
neurons cut, relative to the full output) stays at or below the target on the calibration sample
(`compute --method cett`); a neuron is live iff |h_j| ||W_d[:, j]|| exceeds it. "sample CETT" is
the achieved CETT per layer (min-max over layers), "sample sparsity" the sparsity of each layer's
threshold on the sample, "density" the mean fraction of live MLP neurons on the evaluation text
(min, max over tokens and layers). Dense perplexity {dense['ppl']:.4f}.

{md_table(["target", "sample CETT", "sample sparsity per layer", "density (min, max)", "ppl", "vs dense"], md_rows)}

![CETT perplexity vs density](cett.png)

{provenance(a)}
"""
    write_text(os.path.join(a.out, "cett.md"), md)
    series = [("cett (targets)", [(r[5], r[8]) for r in rows], LINE + " lw 2")]
    for m in sorted(ref):
        series.append((m + " (top-K)", sorted(ref[m]), LINE + " dashtype 2"))
    blocks, plot = datablocks(series)
    labels = "\n".join(f"set label '{r[0]:g}' at {r[5]!r},{r[8]!r} offset 0.5,0.5" for r in rows)
    gnuplot(os.path.join(a.out, "cett.png"), blocks + labels + f"""
set logscale y
set yrange [{0.95 * dense['ppl']}:*]
set xlabel 'achieved density (MLP neurons)'
set ylabel 'perplexity'
set title 'CETT targets (labels) vs top-K routers'
{plot}, {dense['ppl']} with lines dashtype 3 lc rgb 'black' title 'dense'""")


def cmd_clada(a):
    dense = load(a.ref[0])
    cp = cett_points(a.cett)
    rows, md_rows = [], []
    for f in a.files:
        j = load(f)
        c = j["clada"]
        ref = interp_log(cp, j["density_mean"])
        rows.append([c["lambda"], c["gamma"], c["target"], j["density_mean"], j["ppl"], ref,
                     None if ref is None else j["ppl"] - ref, c["tau_s"], c["tau_h"], c["frac_surprisal_high"],
                     c["frac_entropy_high"]])
        md_rows.append([f"{c['lambda']:+.2f}", f"{c['gamma']:+.2f}", f"{j['density_mean']:.4f}", g(j["ppl"]),
                        g(ref), "—" if ref is None else f"{j['ppl'] - ref:+.3f}"])
    write_csv(os.path.join(a.out, "clada.csv"),
              ["lambda", "gamma", "target", "density", "ppl", "cett_ppl_same_density", "difference", "tau_s", "tau_h",
               "frac_surprisal_high", "frac_entropy_high"], rows)
    r0 = rows[0]
    md = f"""# CLADA: both signs of lambda and gamma (the CLADA paper, Eq. 6, 7, 11)

Base thresholds from CETT target {r0[2]:g}; tau_s = {r0[7]:.3f} and tau_H = {r0[8]:.3f} nats (medians of
the calibration signals); {100 * r0[9]:.0f}% / {100 * r0[10]:.0f}% of evaluation tokens lie above them.
Per token tau(t) = tau_base (1 + lambda [s_t > tau_s] + gamma [H_t > tau_H]); the load signals come
from a dense pre-pass (docs/LAROSA_CETT.md). Because lambda and gamma move the density, every row
is compared with CETT **at the same density**: log-linear interpolation in the CETT table
(cett.md, evaluation text); "—" where the density is outside it. Dense perplexity {dense['ppl']:.4f}.

{md_table(["lambda", "gamma", "density", "ppl", "CETT ppl at that density", "difference"], md_rows)}

![CLADA vs CETT](clada.png)

{provenance(a)}
"""
    write_text(os.path.join(a.out, "clada.md"), md)
    pts = [r for r in rows if r[6] is not None]
    blocks, plot = datablocks([("clada - cett", [(r[3], r[6]) for r in pts], "using 1:2 with points pt 7 ps 1.4")])
    labels = "\n".join(f"set label '{r[0]:+g},{r[1]:+g}' at {r[3]!r},{r[6]!r} offset 0.8,0.4 font ',8'" for r in pts)
    gnuplot(os.path.join(a.out, "clada.png"), blocks + labels + f"""
set xlabel 'achieved density (MLP neurons)'
set ylabel 'perplexity minus CETT perplexity at the same density'
set title 'CLADA (labels: lambda,gamma) against CETT at matched density'
unset key
{plot}, 0 with lines dashtype 2 lc rgb 'black'""")


# ----------------------------------------------------------------------------------
# TEAL, CWIC


def cmd_teal(a):
    dense = load(a.ref[0])
    rows = []
    for f in a.files:
        m, d, _ = stem_of(f)
        j = load(f)
        i = j["input_sparsity"]
        rows.append([m, i["target"], i["achieved"], i["drift"], j["ppl"], i["apr"]])
    rows.sort(key=lambda r: (r[1], r[0]))
    write_csv(os.path.join(a.out, "teal.csv"), ["method", "target_sparsity", "achieved", "drift", "ppl", "apr"], rows)
    md = f"""# TEAL: uniform vs greedy allocation (input sparsity)

Sparsity of the inputs of all seven linears of every layer, parameter-weighted; thresholds from the
calibration histograms; achieved on the evaluation text. teal-greedy reads each layer's allocation
curve (docs/INPUT_SPARSITY.md). Dense perplexity {dense['ppl']:.4f}.

{md_table(["method", "target sparsity", "achieved", "drift", "ppl", "APR"],
          [[r[0], g(r[1], 2), f"{r[2]:.4f}", f"{r[3]:+.4f}", g(r[4]), f"{r[5]:.3f}"] for r in rows])}

![TEAL perplexity vs sparsity](teal.png)

{provenance(a)}
"""
    write_text(os.path.join(a.out, "teal.md"), md)
    series = [(m, [(r[2], r[4]) for r in rows if r[0] == m], LINE) for m in ("teal", "teal-greedy")]
    blocks, plot = datablocks(series)
    gnuplot(os.path.join(a.out, "teal.png"), blocks + f"""set logscale y
set yrange [{0.9 * dense['ppl']}:*]
set xlabel 'achieved sparsity (all linears, parameter-weighted)'
set ylabel 'perplexity'
set title 'TEAL: uniform vs greedy'
{plot}, {dense['ppl']} with lines dashtype 3 lc rgb 'black' title 'dense'""")


def cmd_cwic(a):
    dense = load(a.ref[0])
    rows = []
    for f in a.files:
        _, _, p = stem_of(f)
        j = load(f)
        i = j["input_sparsity"]
        rows.append([",".join(f"{k}={v}" for k, v in p.items()), i.get("apr_target"), i["apr"], i["achieved"],
                     j["ppl"], i.get("stripe")])
    teal = {}
    for f in a.teal:
        m, _, _ = stem_of(f)
        j = load(f)
        teal.setdefault(m, []).append((j["input_sparsity"]["apr"], j["ppl"]))
    write_csv(os.path.join(a.out, "cwic.csv"), ["params", "apr_target", "apr", "achieved_sparsity", "ppl", "stripe"],
              rows)
    md = f"""# CWIC: APR vs perplexity (training-free stripe thresholds)

Thresholds fitted without training (docs/INPUT_SPARSITY.md): APR = dense / active parameters over
the seven linears of every layer (the CWIC paper, Eq. 9-10), achieved on the evaluation text. The default
stripe (512 rows) is column sparsity on this model; stripe=16 gives real stripes. Dense perplexity
{dense['ppl']:.4f}.

{md_table(["cwic params", "APR target", "APR achieved", "achieved sparsity", "ppl"],
          [[r[0], g(r[1], 3), f"{r[2]:.3f}", f"{r[3]:.3f}", g(r[4])] for r in rows])}

![CWIC APR vs perplexity](cwic.png)

{provenance(a)}
"""
    write_text(os.path.join(a.out, "cwic.md"), md)
    groups = {}
    for r in rows:
        key = "cwic " + ("laplace" if "laplace" in r[0] else "gauss") + (" stripe 16" if "stripe=16" in r[0] else "") \
              + (" ema" if "ema" in r[0] else "")
        groups.setdefault(key, []).append((r[2], r[4]))
    series = [(k, sorted(v), LINE + " lw 2") for k, v in sorted(groups.items())]
    series += [(m, sorted(v), LINE + " dashtype 2") for m, v in sorted(teal.items())]
    blocks, plot = datablocks(series)
    gnuplot(os.path.join(a.out, "cwic.png"), blocks + f"""set logscale y
set yrange [{0.9 * dense['ppl']}:*]
set xlabel 'achieved APR (dense / active linear parameters)'
set ylabel 'perplexity'
set title 'CWIC (fitted stripe thresholds) and TEAL'
{plot}, {dense['ppl']} with lines dashtype 3 lc rgb 'black' title 'dense'""")


# ----------------------------------------------------------------------------------
# diagnostics: the CLAWS paper Tables 5, 7, Appendix G, Figure 3

PAPER_T5 = [("|z| = |Q^T x|", 0.3507, 5.6140), ("c_rot", 8.997e-04, 2.9601), ("|z| * c_rot", 6.395e-04, 6.4518),
            ("|W_g x|", 0.6495, 5.0794), ("|phi(W_g x)|", 0.1831, 2.8340), ("c_j", 0.3062, 2.9527),
            ("|phi(W_g x)| * c_j", 0.2078, 4.3465)]
PAPER_T7 = {"LaRoSA rotated-input": (0.052, 0.114, 0.0495, 0.629), "CLAWS gate-space": (0.124, 0.275, 0.1001, 1.039)}


def esc(s):
    return s.replace("|", "\\|")


def cmd_diag(a):
    j = load(a.file)
    sp = j["spread"]
    rows = []
    for s, p in zip(sp, PAPER_T5):
        rows.append([s["quantity"], s["std"], s["p50"], s["p95"], s["p95_over_p50"], p[1], p[2]])
    write_csv(os.path.join(a.out, "diagnostics_spread.csv"),
              ["quantity", "std", "p50", "p95", "p95_over_p50", "paper_std", "paper_p95_over_p50"], rows)
    rk = []
    for r in j["rank_movement"]:
        p = PAPER_T7.get(r["family"], (None,) * 4)
        rk.append([r["family"], r["base"], r["modifier"], r["leverage"], r["rank_std"], r["rank_p95"],
                   r["selected_set_change"], p[3], p[0], p[1], p[2]])
    write_csv(os.path.join(a.out, "diagnostics_rank.csv"),
              ["family", "base", "modifier", "leverage", "rank_std", "rank_p95", "selected_set_change",
               "paper_leverage", "paper_rank_std", "paper_rank_p95", "paper_selected_set_change"], rk)
    t5 = md_table(["quantity", "std", "p50", "p95", "p95/p50", "paper std", "paper p95/p50"],
                  [[esc(r[0]), g(r[1]), g(r[2]), g(r[3]), f"{r[4]:.3f}", f"{r[5]:g}", f"{r[6]:g}"] for r in rows])
    t7 = md_table(["score family", "modifier", "leverage λ", "rank std(Δ)", "rank p95(\\|Δ\\|)", "selected-set change",
                   "paper λ", "paper std(Δ)", "paper p95", "paper set change"],
                  [[r[0], r[2], f"{r[3]:.3f}", f"{r[4]:.4f}", f"{r[5]:.4f}", f"{100 * r[6]:.2f}%", f"{r[7]:g}",
                    f"{r[8]:g}", f"{r[9]:g}", f"{100 * r[10]:.2f}%"] for r in rk])
    md = f"""# Score spread, leverage and rank movement (the CLAWS paper Tables 5 and 7, Appendix G)

`sparsecal diag` on the evaluation text: c_rot is estimated on the first {j['crot_tokens']} tokens, the
statistics on the following {j['stat_tokens']} tokens x {j['layers']} layers. Ranks are normalised to [0, 1]
per layer and token; the selected-set change is at density {j['density']:g}. Paper: Gemma-4-E2B-IT
(GELU); Table 5 (spread), Table 7 (rank movement), Appendix G (lambda).

## Spread of base scores and modifiers (Table 5)

{t5}

## Rank movement and leverage (Table 7, Appendix G)

{t7}

![p95/p50 spread, ours vs paper](diagnostics.png)

{provenance(a)}
"""
    write_text(os.path.join(a.out, "diagnostics.md"), md)
    data = "\n".join(f'"{r[0]}" {r[4]!r} {r[6]!r}' for r in rows)
    gnuplot(os.path.join(a.out, "diagnostics.png"), f"""$D << EOD
{data}
EOD
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -25
set yrange [0:*]
set ylabel 'p95 / p50'
set title 'Spread of routing scores and static modifiers (Table 5)'
plot $D using 2:xtic(1) title 'ours', '' using 3 title 'paper (Gemma-4-E2B-IT)'""", size="900,520")


def cmd_ranks(a):
    out_md = os.path.join(a.out, "rank_scatter.md")
    with open(a.file) as f:
        first = f.readline()
    if first.startswith("missing"):
        write_text(out_md, f"""# Rank before vs after the static modifier (the CLAWS paper Figure 3)

**Not produced**: `sparsecal diag` cannot write the per-coordinate ranks this figure plots (it
reports only their summary statistics, diagnostics.md). The target draws the figure as soon as
`sparsecal diag --dump-ranks FILE` writes a CSV with the header
`family,layer,token,coord,rank_before,rank_after` (family `rotated` or `native`, ranks normalised
to [0, 1] as in the statistics).

{provenance(a)}
""")
        return
    pts = {}
    with open(a.file) as f:
        for r in csv.DictReader(f):
            pts.setdefault(r["family"], []).append((float(r["rank_before"]), float(r["rank_after"])))
    dens = a.density
    rows, sample = [], []
    for fam, v in sorted(pts.items()):
        cross = sum(1 for b, c in v if (b < dens) != (c < dens)) / len(v)
        rows.append([fam, len(v), cross])
        step = max(1, -(-len(v) // RANK_SAMPLE))
        sample += [(fam, f"{b:.4f}", f"{c:.4f}") for b, c in v[::step]]
    write_csv(os.path.join(a.out, "rank_scatter.csv"), ["family", "rank_before", "rank_after"], sample)
    write_text(out_md, f"""# Rank before vs after the static modifier (the CLAWS paper Figure 3)

Normalised rank (0 = highest) of every coordinate before and after multiplying by the static
modifier (rotated basis: c_rot; native gate basis: c_j); dashed lines: the top-K boundary at
density {dens:g}. rank_scatter.csv holds an evenly spaced sample of at most {RANK_SAMPLE:,} points per family.

{md_table(["family", "coordinates", "crossing the boundary"], [[r[0], r[1], f"{100 * r[2]:.2f}%"] for r in rows])}

![rank before vs after](rank_scatter.png)

{provenance(a)}
""")
    body = ""
    fams = sorted(pts)
    for i, fam in enumerate(fams):
        body += f"$D{i} << EOD\n" + "\n".join(f"{b} {c}" for f_, b, c in sample if f_ == fam) + "\nEOD\n"
    body += f"set multiplot layout 1,{len(fams)}\nset size ratio 1\nunset key\n"
    body += f"set arrow 1 from {dens},0 to {dens},1 nohead dashtype 2\nset arrow 2 from 0,{dens} to 1,{dens} nohead dashtype 2\n"
    for i, fam in enumerate(fams):
        body += (f"set title '{fam}'\nset xlabel 'rank before'\nset ylabel 'rank after'\n"
                 f"plot [0:1][0:1] $D{i} using 1:2 with dots\n")
    gnuplot(os.path.join(a.out, "rank_scatter.png"), body + "unset multiplot", size="1000,520")


# ----------------------------------------------------------------------------------
# kernels (sparsecal bench CSV)

KNAME = {"floor": "stream floor (q4_0 bytes)", "f32_sgemv": "f32 cblas_sgemv", "q4_0": "q4_0 rows (GGML-style)",
         "q4_0t_scatter": "q4_0t scatter (PowerInfer-style)", "kmi4": "kmi4 (row-sparse W_d)", "zigzag": "zigzag",
         "kmi4r_up": "kmi4r rows (up proj.)", "mlp": "MLP block (kmi4)"}
# the CLAWS paper Table 9 (µs, ×GGML dense) and Table 3 at sparsity 0.3 / 0.5 / 0.6
PAPER_T9 = {0.3: (206.2, 1.33, 2.20), 0.5: (208.5, 1.81, 3.15), 0.6: (206.0, 2.17, 3.88)}
# the CLAWS paper Table 11: dense µs (35 layers), spDn ×, spUpDn ×
PAPER_T11 = {0.3: (12872, 1.07, 1.13), 0.5: (12786, 1.14, 1.24), 0.6: (12850, 1.28, 1.30), 0.7: (12733, 1.28, 1.41)}
SHAPES = {(14336, 4096): "Llama-3-8B down", (4096, 14336): "Llama-3-8B gate/up", (13824, 5120): "Llama-2-13B down",
          (5120, 13824): "Llama-2-13B gate/up", (28672, 8192): "Llama-2-70B down", (8192, 28672): "Llama-2-70B gate/up",
          (11008, 4096): "Llama-2-7B down", (4096, 11008): "Llama-2-7B gate/up", (6144, 1536): "Gemma-4-E2B down"}


def bench_rows(path, live):
    rows = []
    for r in read_csv(path):
        r = {k: (num(v) if k not in ("kernel",) else v) for k, v in r.items()}
        r["live_kind"] = live
        rows.append(r)
    return rows


def bget(rows, kernel, sp, th, live=None):
    for r in rows:
        if r["kernel"] == kernel and abs(r["sparsity"] - sp) < 1e-9 and r["threads"] == th and \
                (live is None or r["live_kind"] == live):
            return r
    return None


def bench_csv_out(path, rows):
    keys = ["live_kind", "in", "out", "layers", "threads", "kernel", "sparsity", "live", "median_us", "min_us",
            "max_us", "run_median_lo_us", "run_median_hi_us", "x_q4_0_dense", "x_own_dense", "mbytes", "gbps"]
    write_csv(path, keys, [[r.get(k) for k in keys] for r in rows])


def cmd_bench_down(a):
    rows = bench_rows(a.random, "random") + bench_rows(a.clustered, "clustered")
    bench_csv_out(os.path.join(a.out, "kernels_down.csv"), rows)
    threads = sorted({int(r["threads"]) for r in rows})
    sps = sorted({r["sparsity"] for r in rows if r["sparsity"] > 0})
    shape = f"{int(rows[0]['in'])} -> {int(rows[0]['out'])}"
    tabs = []
    for th in threads:
        t = []
        q = bget(rows, "q4_0", 0, th, "random")
        t.append([f"q4_0 dense µs (paper GGML dense: 206.0-208.5)", "random", f2(q["median_us"], 1)] + [""] * len(sps))
        for k, live in (("q4_0t_scatter", "random"), ("kmi4", "random"), ("kmi4", "clustered"), ("zigzag", "random")):
            d = bget(rows, k, 0, th, live)
            cells = []
            for s in sps:
                r = bget(rows, k, s, th, live)
                cells.append(f"{r['median_us']:.1f} µs, ×{r['x_q4_0_dense']:.2f} (own ×{r['x_own_dense']:.2f})")
            t.append([KNAME[k], live, "—" if d is None or k == "q4_0t_scatter" else
                      f"{d['median_us']:.1f} µs, ×{d['x_q4_0_dense']:.2f}"] + cells)
        t.append(["paper: PowerInfer scatter × GGML dense (Table 3/9)", "", ""] +
                 [f"×{PAPER_T9[s][1]:.2f}" if s in PAPER_T9 else "—" for s in sps])
        t.append(["paper: Cactus KMI4_fast × GGML dense (Table 3/9)", "", ""] +
                 [f"×{PAPER_T9[s][2]:.2f}" if s in PAPER_T9 else "—" for s in sps])
        tabs.append(f"### {th} thread{'s' if th > 1 else ''}\n\n" +
                    md_table(["kernel", "live sets", "dense"] + [f"sparsity {s:g}" for s in sps], t))
    md = f"""# Down-projection GEMV vs sparsity (the CLAWS paper Tables 3 and 9)

`sparsecal bench`, {shape} (Gemma-4-E2B-IT down projection), q4_0-class int4 weights, cold cache
({int(rows[0]['layers'])} distinct matrices cycled), per-layer median µs; "×" is the speed-up over our q4_0
dense GEMV (the GGML-style baseline; the paper's is GGML's own), "own" over the kernel's own dense
run. Random live sets: uniformly random neurons per layer; clustered: whole 32-neuron groups (what
`pack --permute` aims at). Paper: Apple M-series ARM, 1 thread (GGML), 50 passes. Full tables with
min/max and GB/s: kernels_down.csv. Timings: they vary run to run.

{(chr(10) * 2).join(tabs)}

![speed-up over q4_0 dense](kernels_down.png)

{provenance(a, timing=True, inputs=(a.random, a.clustered))}
"""
    write_text(os.path.join(a.out, "kernels_down.md"), md)
    series = []
    for th in threads:
        for k, live in (("q4_0t_scatter", "random"), ("kmi4", "random"), ("kmi4", "clustered")):
            pts = [(s, bget(rows, k, s, th, live)["x_q4_0_dense"]) for s in sps]
            series.append((f"{k} {live} {th}t", pts, LINE + ("" if th == 1 else " dashtype 2")))
    series.append(("paper PowerInfer", [(s, v[1]) for s, v in sorted(PAPER_T9.items())], "using 1:2 with points pt 9 ps 2"))
    series.append(("paper Cactus KMI4", [(s, v[2]) for s, v in sorted(PAPER_T9.items())], "using 1:2 with points pt 5 ps 2"))
    blocks, plot = datablocks(series)
    gnuplot(os.path.join(a.out, "kernels_down.png"), blocks + f"""set xlabel 'sparsity'
set ylabel 'speed-up over q4_0 dense'
set title 'Down projection {shape}, cold cache'
{plot}""", size="960,540")


def cmd_bench_mlp(a):
    rows = bench_rows(a.random, "random") + bench_rows(a.clustered, "clustered")
    threads = sorted({int(r["threads"]) for r in rows})
    sps = sorted({r["sparsity"] for r in rows if r["sparsity"] > 0})
    out, md_tabs, series = [], [], []
    for th in threads:
        t10, t11 = [], []
        q = bget(rows, "q4_0", 0, th, "random")["median_us"]
        for live in ("random", "clustered"):
            md = bget(rows, "mlp", 0, th, live)
            kd = bget(rows, "kmi4", 0, th, live)
            for s in sps:
                ms, ks = bget(rows, "mlp", s, th, live), bget(rows, "kmi4", s, th, live)
                spdn = md["median_us"] - kd["median_us"] + ks["median_us"]
                out.append([th, live, s, md["median_us"], ms["median_us"], md["median_us"] / ms["median_us"],
                            spdn, md["median_us"] / spdn, 3 * q])
                p = PAPER_T11.get(round(s, 2))
                t11.append([live, f"{s:g}", f"{md['median_us']:.1f}", f"×{md['median_us'] / spdn:.2f}",
                            f"{ms['median_us']:.1f} (×{md['median_us'] / ms['median_us']:.2f})",
                            f"×{p[1]:.2f}" if p else "—", f"×{p[2]:.2f}" if p else "—"])
            s5 = bget(rows, "mlp", 0.5, th, live)
            if s5:
                t10.append([f"kmi4 row-sparse block, d=0.5 ({live} live sets)", f"{s5['median_us']:.1f}",
                            f"×{md['median_us'] / s5['median_us']:.2f}", f"×{3 * q / s5['median_us']:.2f}"])
            series.append((f"{live} {th}t", [(s, md["median_us"] / bget(rows, 'mlp', s, th, live)["median_us"])
                                              for s in sps], LINE + ("" if th == 1 else " dashtype 2")))
        md_r = bget(rows, "mlp", 0, th, "random")
        t10 = [["proxy GGML dense block: 3 × q4_0 down GEMV", f"{3 * q:.1f}", "", "×1.00"],
               ["kmi4 dense block (random-set run)", f"{md_r['median_us']:.1f}", "×1.00",
                f"×{3 * q / md_r['median_us']:.2f}"]] + t10
        md_tabs.append(f"### {th} thread{'s' if th > 1 else ''}\n\nTable 10 analogue (µs per layer):\n\n" +
                       md_table(["configuration", "µs", "× dense block of the same run", "× proxy GGML dense"], t10) +
                       "\n\nTable 11 analogue (speed-up of the block over its dense run):\n\n" +
                       md_table(["live sets", "sparsity", "dense µs", "down only (derived)", "up + down sparse µs",
                                 "paper spDn", "paper spUpDn"], t11))
    write_csv(os.path.join(a.out, "kernels_mlp.csv"),
              ["threads", "live_kind", "sparsity", "dense_us", "sparse_us", "x_dense", "down_only_us_derived",
               "down_only_x_dense", "proxy_ggml_dense_us"], out)
    series.append(("paper spUpDn (Table 11)", [(s, v[2]) for s, v in sorted(PAPER_T11.items())],
                   "using 1:2 with points pt 5 ps 2"))
    shape = f"{int(rows[0]['in'])} -> {int(rows[0]['out'])}"
    md = f"""# Full MLP block vs sparsity (the CLAWS paper Tables 10 and 11)

`sparsecal bench` MLP block at the Gemma-4-E2B-IT shape (D_ffn x d_model from {shape}): x -> int8 ->
gate (kmi4r, dense) -> activation -> exact top-K -> up (kmi4r, live rows) -> down (kmi4, live
neurons); the dense block runs every neuron. "down only (derived)" = dense block − dense down GEMV +
sparse down GEMV (the paper's spDn, not measured as a block here). The proxy GGML dense block is three
times our q4_0 down GEMV: we have no GGML MLP block (gate and up have the same number of weights as
down). Paper (Apple M-series ARM, Table 10 at d=0.5): GGML dense block 618.5 µs, Cactus dense 365.3
(×1.69), CLAWS Cactus row-sparse 293.6 µs (×2.11 over GGML dense, ×1.24 over Cactus dense).
Timings: they vary run to run.

{(chr(10) * 2).join(md_tabs)}

![MLP block speed-up](kernels_mlp.png)

{provenance(a, timing=True, inputs=(a.random, a.clustered))}
"""
    write_text(os.path.join(a.out, "kernels_mlp.md"), md)
    blocks, plot = datablocks(series)
    gnuplot(os.path.join(a.out, "kernels_mlp.png"), blocks + f"""set xlabel 'sparsity'
set ylabel 'MLP block speed-up over its dense run'
set title 'Full MLP block {shape}, cold cache'
{plot}""")


def cmd_bench_llama(a):
    rows = bench_rows(a.random, "random")
    bench_csv_out(os.path.join(a.out, "kernels_llama.csv"), rows)
    shapes = []
    for r in rows:
        sh = (int(r["in"]), int(r["out"]))
        if sh not in shapes:
            shapes.append(sh)
    threads = sorted({int(r["threads"]) for r in rows})
    sps = sorted({r["sparsity"] for r in rows if r["sparsity"] > 0})
    name = lambda sh: SHAPES.get(sh, f"{sh[0]} -> {sh[1]}")
    t = []
    for sh in shapes:
        sub = [r for r in rows if (int(r["in"]), int(r["out"])) == sh]
        for th in threads:
            for k in ("zigzag", "kmi4", "q4_0t_scatter"):
                d = bget(sub, k, 0, th)
                q = bget(sub, "q4_0", 0, th)
                cells = [f"×{bget(sub, k, s, th)['x_own_dense']:.2f}" if k != "q4_0t_scatter" else
                         f"×{bget(sub, k, s, th)['x_q4_0_dense']:.2f}" for s in sps]
                t.append([f"{name(sh)} ({sh[0]} -> {sh[1]}, {int(sub[0]['layers'])} matrices)", th, KNAME[k],
                          "—" if d is None else f"{d['median_us']:.0f}", f"{q['median_us']:.0f}"] + cells +
                         [f"×{bget(sub, k, max(sps), th)['x_q4_0_dense']:.2f}"])
    md = f"""# Sparse GEMV across Llama shapes (the SpQt paper Figures 8 and 9)

`sparsecal bench` at the down-projection shapes (D_ffn -> d_model) of the models of the SpQt paper's
Figures 8-9, input (activation) sparsity {", ".join(f"{s:g}" for s in sps)}. zigzag is our column-grouped layout
(the SpQt paper's zigzag idea on CPU) and kmi4 our neuron-major row-sparse W_d, both shown as speed-up over
their own dense run (the paper's Figure 8 measure); the PowerInfer-style scatter is over q4_0 dense
(it has no dense form). Last column: speed-up over q4_0 dense at the highest sparsity. Paper (Apple
GPUs, Q4_K): zigzag + load balancing up to ×1.22 at 25%, ×1.51 at 40%, ×1.78 at 50% (Figure 8),
×1.51-1.78 at 50% across shapes (Figure 9), where naive sparse (B1) is below ×0.2 and their layout
without load balancing (B2) ×1.02-1.06. Timings: they vary run to run; few passes (see settings).

{md_table(["shape", "threads", "kernel", "dense µs", "q4_0 dense µs"] + [f"sparsity {s:g}" for s in sps] +
          ["× q4_0 dense"], t)}

![zigzag speed-up vs sparsity](kernels_llama.png)

{provenance(a, timing=True, inputs=(a.random,))}
"""
    write_text(os.path.join(a.out, "kernels_llama.md"), md)
    series = []
    for sh in shapes:
        sub = [r for r in rows if (int(r["in"]), int(r["out"])) == sh]
        for th in threads:
            series.append((f"{name(sh)} {th}t zigzag", [(0, 1)] + [(s, bget(sub, 'zigzag', s, th)['x_own_dense'])
                                                                   for s in sps], LINE + ("" if th == 1 else " dashtype 2")))
    series.append(("paper max (Fig. 8)", [(0.25, 1.22), (0.4, 1.51), (0.5, 1.78)], "using 1:2 with points pt 5 ps 2"))
    blocks, plot = datablocks(series)
    gnuplot(os.path.join(a.out, "kernels_llama.png"), blocks + f"""set xlabel 'sparsity'
set ylabel 'speed-up over own dense'
set title 'zigzag sparse GEMV, Llama down-projection shapes'
{plot}""", size="960,540")


# ----------------------------------------------------------------------------------
# decode (sparsecal run --json)

ART = {"stories": "stories260K", "stories-larosa": "stories260K, LaRoSA-folded", "synth": "synthetic",
       "synth-perm": "synthetic, --permute", "synth-larosa": "synthetic, LaRoSA-folded"}


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def cmd_decode(a):
    groups = {}
    for f in a.files:
        art, m, th, _ = os.path.basename(f)[:-5].split("@")
        groups.setdefault((art, m, int(th)), []).append(load(f))
    order = sorted({k[0] for k in groups}, key=lambda x: (list(ART).index(x) if x in ART else len(ART), x))
    mrank = lambda m: (m != "dense", m)
    rows, t = [], []
    phases = ["attention", "mlp_gate", "mlp_route", "mlp_up", "mlp_down", "head", "other"]
    for art in order:
        for th in sorted({k[2] for k in groups if k[0] == art}):
            dense = groups.get((art, "dense", th))
            dmed = median([j["tokens_per_second"] for j in dense]) if dense else None
            for m in sorted({k[1] for k in groups if k[0] == art and k[2] == th}, key=mrank):
                js = groups[art, m, th]
                tps = [j["tokens_per_second"] for j in js]
                ms = {p: median([j["per_token_ms"][p] for j in js]) for p in phases}
                j0 = js[0]
                med = median(tps)
                # measured mean live neurons per layer and token (threshold routers vary per token)
                live = round(median([j["mlp_density"] for j in js]) * j0["ffn_dim"])
                rows.append([art, m, th, j0["density"] if m != "dense" else 1, live, j0["ffn_dim"],
                             j0["weight_bytes"], med, min(tps), max(tps), len(tps), j0["decode_steps"],
                             dmed and med / dmed] + [ms[p] for p in phases])
                t.append([ART.get(art, art), th, m, f"{live}/{j0['ffn_dim']}",
                          f"{med:,.0f} ({min(tps):,.0f}-{max(tps):,.0f})", f"×{med / dmed:.2f}" if dmed else "—",
                          f"{ms['attention']:.3f}", f"{ms['mlp_gate']:.3f}", f"{ms['mlp_route']:.3f}",
                          f"{ms['mlp_up']:.3f}", f"{ms['mlp_down']:.3f}", f"{ms['head']:.3f}"])
    write_csv(os.path.join(a.out, "decode.csv"),
              ["artifact", "method", "threads", "density", "live_neurons", "ffn_dim", "weight_bytes", "tok_s_median",
               "tok_s_min", "tok_s_max", "reps", "decode_steps", "x_dense"] + ["ms_" + p for p in phases], rows)
    perm = []
    for r in rows:
        if r[0] == "synth-perm":
            base = next((x for x in rows if x[0] == "synth" and x[1] == r[1] and x[2] == r[2]), None)
            if base:
                perm.append([r[1], r[2], f"{base[7]:.1f}", f"{r[7]:.1f}", f"×{r[7] / base[7]:.3f}",
                             f"{base[16] + base[17]:.3f}", f"{r[16] + r[17]:.3f}"])
    md = f"""# Decode: tokens/s dense vs sparse (`sparsecal run`)

Greedy decode from BOS straight from packed artifacts with the runtime kernels (docs/RUN.md); tokens/s of
the decode phase, median (min-max) over repeats; "× dense" against the same artifact and thread count;
per-token ms are medians over repeats; "live" is the measured mean of live MLP neurons per layer and
token (threshold routers vary per token; cett and clada do not take a density). stories260K: the shipped
model packed as kmi4 with its calibration (claws, cats, cett, clada) for the neuron and threshold routers,
and with its LaRoSA rotations folded (zigzag) for larosa. Synthetic: a random-weight model of paper-like MLP width (no text, so its calibration and
its decoded tokens are meaningless; only timing is). Timings: they vary run to run.

{md_table(["artifact", "threads", "router", "live", "tok/s", "× dense", "attn ms", "gate ms", "route ms", "up ms",
           "down ms", "head ms"], t)}

## Neuron permutation (`pack --permute`) on the synthetic model

{md_table(["router", "threads", "tok/s plain", "tok/s permuted", "permuted / plain", "up+down ms plain",
           "up+down ms permuted"], perm) if perm else "(no synthetic runs)"}

![decode speed-up over dense](decode.png)

{provenance(a, timing=True, inputs=a.files)}
"""
    write_text(os.path.join(a.out, "decode.md"), md)
    labels = [r for r in rows if r[1] != "dense"]
    data = "\n".join(f'"{ART.get(r[0], r[0])} {r[1]} {r[2]}t" {r[12] or 0!r}' for r in labels)
    gnuplot(os.path.join(a.out, "decode.png"), f"""$D << EOD
{data}
EOD
set style data histogram
set style fill solid 0.8 border -1
set xtics rotate by -30
set ylabel 'decode tokens/s relative to dense'
set yrange [0:*]
unset key
set title 'Decode speed-up over dense (same artifact, same threads)'
plot $D using 2:xtic(1), 1 with lines dashtype 2 lc rgb 'black'""", size="900,520")


# ----------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("cmd")
    p.add_argument("rest", nargs="*")
    for o in ("out", "model", "tok", "calib-text", "eval-text", "seqs", "tune-docs", "target", "settings", "eval-dir",
              "tune-dir", "model-info", "methods", "densities", "file", "random", "clustered", "binary"):
        p.add_argument("--" + o, default="")
    for o in ("files", "ref", "cett", "teal"):
        p.add_argument("--" + o, nargs="+", default=[])
    p.add_argument("--density", type=float, default=0.5)
    a = p.parse_args()
    cmds = {"map": cmd_map, "pick": cmd_pick, "sweep": cmd_sweep, "cett": cmd_cett, "clada": cmd_clada,
            "teal": cmd_teal, "cwic": cmd_cwic, "diag": cmd_diag, "ranks": cmd_ranks, "bench-down": cmd_bench_down,
            "bench-mlp": cmd_bench_mlp, "bench-llama": cmd_bench_llama, "decode": cmd_decode}
    if a.cmd not in cmds:
        sys.exit(f"tables.py: unknown command {a.cmd}")
    cmds[a.cmd](a)


if __name__ == "__main__":
    main()
