#!/usr/bin/env python3
"""docs/RESULTS.md from scripts/repro/RESULTS.md.in and the tables in docs/results/.

    report.py --template RESULTS.md.in --results-dir docs/results --model-info model.json \
              --model MODEL [--binary SPARSECAL] [--output RESULTS.md]

Every {{name}} of the template is replaced by a number or a statement computed here from the
generated CSV files (never typed in); a name without a value is an error."""
import argparse
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from tables import (ACCOUNT, ART, PAPER_T9, PAPER_T11, SHAPES, binary, commit, g, interp_log, load, machine,
                    load_note, md_table, num, read_bench, read_csv, read_decode, write_text)

def yes_no(b):
    return "yes" if b else "no"


def report_values(rd, info, model):
    """every number and every statement of RESULTS.md that depends on our results"""
    V = {}
    F = info["ffn_dim"]
    V["model_desc"] = (f"{os.path.basename(model)} ({info['parameters']:,} parameters, {info['n_layers']} layers, "
                       f"dim {info['dim']}, D_ffn {info['ffn_dim']}, {info['activation']})")
    P = lambda n: os.path.join(rd, n)
    # --- sweep
    sw = read_csv(P("density_sweep.csv"))
    by = {}
    for r in sw:
        by.setdefault(r["method"], {})[num(r["density_target"])] = r
    dens = sorted(by["cats"].keys())
    V["dense_ppl"] = f"{num(by['dense'][1.0]['ppl']):.4f}"
    V["dense_half_ppl"] = f"{num(by['dense-half'][1.0]['ppl']):.4f}"
    dense, half = num(by["dense"][1.0]["ppl"]), num(by["dense-half"][1.0]["ppl"])
    methods = [m for m in by if m not in ("dense", "dense-half")]
    hd = ["method", "density counts"] + [f"d={d:g}" for d in dens]
    V["sweep_table"] = md_table(hd, [[m, ACCOUNT[by[m][dens[0]]["accounting"]]] +
                                     [g(num(by[m][d]["ppl"])) for d in dens] for m in methods])
    inexact = [m for m in methods if any(abs(num(by[m][d]["density_achieved"]) - d) > 0.005 for d in dens)]
    V["sweep_achieved"] = md_table(["method"] + [f"d={d:g}" for d in dens],
                                   [[m] + [f"{num(by[m][d]['density_achieved']):.3f}" for d in dens] for m in inexact])
    V["sweep_inexact"] = ", ".join(inexact) if inexact else "none"
    ppl = lambda m, d: num(by[m][d]["ppl"])
    if "claws" in by and "cats" in by:
        worse = [d for d in dens if not ppl("claws", d) < ppl("cats", d)]
        V["claws_below_cats"] = "yes, at every density" if not worse else \
            "no: not at d = " + ", ".join(f"{d:g}" for d in worse)
        lo = dens[0]
        V["cats_over_claws_low"] = f"{ppl('cats', lo) / ppl('claws', lo):.1f}x at d = {lo:g}"
        V["d_low"] = f"{lo:g}"
        V["cats_low_rel"] = f"{ppl('cats', lo) / dense:.1f}x"
        gaps = [ppl("cats", d) / ppl("claws", d) for d in dens]
        V["gap_widens"] = yes_no(all(x >= y for x, y in zip(gaps, gaps[1:])))
    if "griffin-prefill" in by:
        rel_g = lambda d: ppl("griffin-prefill", d) / half
        others = [m for m in ("cats", "claws", "larosa") if m in by]
        weakest = [d for d in dens if all(rel_g(d) > ppl(m, d) / dense for m in others)]
        V["griffin_weakest"] = "yes, at every density" if len(weakest) == len(dens) else \
            f"at d = {', '.join(f'{d:g}' for d in weakest) or 'none'}"
        V["griffin_rel_05"] = f"{rel_g(0.5):.1f}x" if 0.5 in dens else "—"
        V["cats_rel_05"] = f"{ppl('cats', 0.5) / dense:.2f}x" if 0.5 in dens else "—"
        if 0.5 in dens:
            ours = rel_g(0.5) / (ppl("cats", 0.5) / dense)
            paper = 3.94 / 3.56
            V["griffin_gap_note"] = (f"is {ours:.1f} here against {paper:.2f} in the paper: far larger. With "
                                     f"{F} neurons and stories whose second half drifts from the first, a mask frozen on "
                                     "the first half cannot follow the text." if ours > 2 * paper else
                                     f"is {ours:.2f} here against {paper:.2f} in the paper.")
    four = [m for m in ("cats", "claws", "larosa") if m in by]
    if "claws" in by:
        best = [d for d in dens if all(ppl("claws", d) <= ppl(m, d) for m in four) and
                ("griffin-prefill" not in by or ppl("claws", d) / dense <= ppl("griffin-prefill", d) / half)]
        V["claws_best_of_four"] = "every density" if len(best) == len(dens) else \
            ("d = " + ", ".join(f"{d:g}" for d in best) if best else "no density")
        notbest = [d for d in dens if d not in best]
        V["claws_not_best"] = ("; at d = " + ", ".join(
            f"{d:g} {min(four, key=lambda m: ppl(m, d))} is lower" for d in notbest)) if notbest else ""
    if "larosa" in by:
        V["larosa_vs_cats"] = ", ".join(
            f"d={d:g}: {ppl('larosa', d):.2f} vs {ppl('cats', d):.2f}" for d in dens)
        lb = [d for d in dens if ppl("larosa", d) < ppl("cats", d)]
        V["larosa_below_cats"] = "d = " + ", ".join(f"{d:g}" for d in lb) if lb else "no density"
        V["larosa_dens_05"] = f"{num(by['larosa'][0.5]['density_achieved']):.3f}" if 0.5 in dens else "—"
    if "larosa-grid" in by:
        lb = [d for d in dens if ppl("larosa-grid", d) < ppl("cats", d)]
        V["larosag_below_cats"] = "d = " + ", ".join(f"{d:g}" for d in lb) if lb else "no density"
    if "teal" in by and "teal-greedy" in by:
        w = [d for d in dens if not ppl("teal-greedy", d) < ppl("teal", d)]
        V["greedy_below_uniform_sweep"] = "yes, at every density" if not w else \
            "no: not at d = " + ", ".join(f"{d:g}" for d in w)
    # matched-density comparisons against CATS (interpolated in log ppl along CATS's achieved density)
    cats_pts = [(num(by["cats"][d]["density_achieved"]), ppl("cats", d)) for d in dens]
    cmp_rows = []
    for m in ("cett", "clada"):
        if m not in by:
            continue
        for d in dens:
            x = num(by[m][d]["density_achieved"])
            c = interp_log(cats_pts, x)
            cmp_rows.append([m, f"{d:g}", f"{x:.3f}", f"{ppl(m, d):.3f}", g(c), "—" if c is None else
                             f"{ppl(m, d) / c:.2f}"])
    V["threshold_vs_cats"] = md_table(["method", "target d", "achieved d", "ppl", "CATS ppl at achieved d",
                                       "ratio"], cmp_rows) if cmp_rows else ""
    if "cett" in by:
        rs = [r[5] for r in cmp_rows if r[0] == "cett"]
        below = sum(1 for x in rs if x != "—" and num(x) < 1)
        V["cett_below_cats"] = "yes, at every density" if below == len(rs) else \
            f"at {below} of {len(rs)} densities (— : outside the CATS curve)"
    # --- CETT table
    ce = read_csv(P("cett.csv"))
    r02 = min(ce, key=lambda r: abs(num(r["target"]) - 0.2))
    V["cett02_target"] = f"{num(r02['target']):g}"
    V["cett02_density"] = f"{num(r02['density_mean']):.3f}"
    V["cett02_sparsity"] = f"{1 - num(r02['density_mean']):.2f}"
    V["cett02_ppl"] = f"{num(r02['ppl']):.3f}"
    V["cett02_rise"] = f"{100 * (num(r02['ppl']) / dense - 1):+.1f}%"
    V["cett_sample_max_err"] = f"{max(num(r['target']) - num(r['sample_cett_min']) for r in ce):.4f}"
    V["cett02_min"] = f"{num(r02['density_min']):.2f}"
    V["cett02_max"] = f"{num(r02['density_max']):.2f}"
    V["cett_table"] = md_table(["target", "density", "ppl"], [[f"{num(r['target']):g}", f"{num(r['density_mean']):.3f}",
                                                               g(num(r["ppl"]))] for r in ce])
    # --- CLADA
    cl = read_csv(P("clada.csv"))
    diffs = [(num(r["lambda"]), num(r["gamma"]), num(r["difference"])) for r in cl if r["difference"] != ""]
    pos = [x for x in diffs if x[0] > 0]
    neg = [x for x in diffs if x[0] < 0]
    V["clada_table"] = md_table(["lambda", "gamma", "density", "ppl", "CETT at that density", "difference"],
                                [[f"{num(r['lambda']):+.2f}", f"{num(r['gamma']):+.2f}", f"{num(r['density']):.3f}",
                                  g(num(r["ppl"])), g(num(r["cett_ppl_same_density"])),
                                  "—" if r["difference"] == "" else f"{num(r['difference']):+.3f}"] for r in cl])
    helps = [x for x in diffs if x[2] < -0.01 and (x[0], x[1]) != (0, 0)]
    V["clada_helps"] = ("no row is more than 0.01 below CETT at matched density" if not helps else
                        "rows below CETT by more than 0.01 at matched density: " +
                        ", ".join(f"(λ {l:+g}, γ {gm:+g}: {d:+.3f})" for l, gm, d in helps))
    V["clada_pos_worse"] = yes_no(pos and all(x[2] > 0 for x in pos))
    V["clada_conclusion"] = ("On this model the load signals buy no quality beyond what the density they add or "
                             "remove buys." if not helps else
                             "On this model some settings do better than CETT at the same density.")
    V["clada_pos_range"] = f"{min(x[2] for x in pos):+.3f} to {max(x[2] for x in pos):+.3f}" if pos else "—"
    V["clada_neg_range"] = f"{min(x[2] for x in neg):+.3f} to {max(x[2] for x in neg):+.3f}" if neg else "—"
    # --- TEAL, CWIC
    te = read_csv(P("teal.csv"))
    tb = {(r["method"], num(r["target_sparsity"])): r for r in te}
    tsp = sorted({k[1] for k in tb})
    V["teal_table"] = md_table(["target sparsity"] + [f"{s:g}" for s in tsp],
                               [[m] + [g(num(tb[m, s]["ppl"])) for s in tsp] for m in ("teal", "teal-greedy")] +
                               [["max \\|drift\\|"] + [f"{max(abs(num(tb[m, s]['drift'])) for m in ('teal', 'teal-greedy')):.4f}"
                                                      for s in tsp]])
    w = [s for s in tsp if not num(tb["teal-greedy", s]["ppl"]) < num(tb["teal", s]["ppl"])]
    V["greedy_below_uniform"] = "yes, at every level" if not w else "no: not at " + ", ".join(f"{s:g}" for s in w)
    V["teal_max_drift"] = f"{max(abs(num(r['drift'])) for r in te):.4f}"
    rise = lambda s: f"{100 * (num(tb['teal', s]['ppl']) / dense - 1):+.0f}%"
    V["teal_rises"] = ", ".join(f"{rise(s)} at {100 * s:g}%" for s in tsp)
    cw = read_csv(P("cwic.csv"))
    V["cwic_table"] = md_table(["params", "APR target", "APR achieved", "sparsity", "ppl"],
                               [[r["params"], g(num(r["apr_target"]), 3), f"{num(r['apr']):.3f}",
                                 f"{num(r['achieved_sparsity']):.3f}", g(num(r["ppl"]))] for r in cw])
    errs = [num(r["apr"]) / num(r["apr_target"]) - 1 for r in cw if r["apr_target"]]
    ga = [e for r, e in zip(cw, errs) if "laplace" not in r["params"]]
    la = [e for r, e in zip(cw, errs) if "laplace" in r["params"]]
    V["cwic_gauss_err"] = f"{100 * min(ga):+.0f}% to {100 * max(ga):+.0f}%" if ga else "—"
    V["cwic_laplace_err"] = f"{100 * min(la):+.0f}% to {100 * max(la):+.0f}%" if la else "—"
    col = next((r for r in cw if r["params"] == "apr=2"), None)
    st = next((r for r in cw if r["params"] == "apr=2,stripe=16"), None)
    if col and st:
        V["stripe_vs_column"] = (f"{num(st['ppl']):.2f} with 16-row stripes vs {num(col['ppl']):.2f} with columns "
                                 f"(APR {num(st['apr']):.2f} vs {num(col['apr']):.2f})")
    # --- diagnostics
    dr = {r["family"]: r for r in read_csv(P("diagnostics_rank.csv"))}
    ds = {r["quantity"]: r for r in read_csv(P("diagnostics_spread.csv"))}
    rot, nat = dr.get("LaRoSA rotated-input"), dr.get("CLAWS gate-space")
    V["diag_table"] = md_table(
        ["score family", "modifier", "rank std(Δ)", "rank p95(\\|Δ\\|)", "set change (d=0.5)", "leverage λ"],
        [[f"{f}, ours", r["modifier"], f"{num(r['rank_std']):.3f}", f"{num(r['rank_p95']):.3f}",
          f"{100 * num(r['selected_set_change']):.1f}%", f"{num(r['leverage']):.2f}"] for f, r in dr.items()] +
        [[f"{f}, paper", r["modifier"], f"{num(r['paper_rank_std']):g}", f"{num(r['paper_rank_p95']):g}",
          f"{100 * num(r['paper_selected_set_change']):.2f}%", f"{num(r['paper_leverage']):g}"] for f, r in dr.items()])
    if rot and nat:
        ratio = num(nat["selected_set_change"]) / num(rot["selected_set_change"])
        V["set_change_ratio"] = f"{ratio:.1f}x"
        V["native_moves_more"] = yes_no(ratio > 1 and num(nat["rank_std"]) > num(rot["rank_std"]))
        V["leverage_order"] = yes_no(num(nat["leverage"]) > num(rot["leverage"]))
        V["lev_rot"], V["lev_nat"] = f"{num(rot['leverage']):.2f}", f"{num(nat['leverage']):.2f}"
    u, phi = ds.get("|W_g x|"), ds.get("|phi(W_g x)|")
    z, crot, cj = ds.get("|z| = |Q^T x|"), ds.get("c_rot"), ds.get("c_j")
    if u and phi:
        ru, rp = num(u["p95_over_p50"]), num(phi["p95_over_p50"])
        V["phi_compresses"] = (f"yes (p95/p50 {ru:.2f} -> {rp:.2f})" if rp < ru else
                               f"no: SiLU widens it here (p95/p50 {ru:.2f} -> {rp:.2f}; paper, GELU: 5.08 -> 2.83)")
    if z and crot and cj:
        V["spread_z"] = f"{num(z['p95_over_p50']):.2f}"
        V["spread_crot"] = f"{num(crot['p95_over_p50']):.2f}"
        V["spread_cj"] = f"{num(cj['p95_over_p50']):.2f}"
        V["spread_phi"] = f"{num(phi['p95_over_p50']):.2f}"
    V["ranks_status"] = ("![rank before vs after](results/rank_scatter.png)"
                         if os.path.exists(P("rank_scatter.csv")) else
                         "Not produced: `sparsecal diag` cannot write per-coordinate ranks yet "
                         "(see results/rank_scatter.md).")
    # --- kernels
    kd = read_csv(P("kernels_down.csv"))
    V["kernels_load"] = load_note(read_bench(P("kernels_down.csv")))
    V["llama_load"] = load_note(read_bench(P("kernels_llama.csv")))

    def kget(rows, kernel, sp, th, live="random"):
        for r in rows:
            if r["kernel"] == kernel and abs(num(r["sparsity"]) - sp) < 1e-9 and int(num(r["threads"])) == th and \
                    r.get("live_kind", "random") == live:
                return r
        return None

    ksp = sorted({num(r["sparsity"]) for r in kd if num(r["sparsity"]) > 0})
    rows = []
    for th in sorted({int(num(r["threads"])) for r in kd}):
        q = kget(kd, "q4_0", 0, th)
        rows.append([f"q4_0 dense µs, {th}t (paper GGML dense 206.0-208.5 µs)", f"{num(q['median_us']):.1f}"] +
                    [""] * len(ksp))
        for k, live, lab in (("q4_0t_scatter", "random", "PowerInfer-style scatter"), ("kmi4", "random", "kmi4"),
                             ("kmi4", "clustered", "kmi4, clustered live sets")):
            d = kget(kd, k, 0, th, live)
            rows.append([f"{lab}, {th}t, × q4_0 dense", "—" if k == "q4_0t_scatter" else
                         f"{num(d['x_q4_0_dense']):.2f}"] +
                        [f"{num(kget(kd, k, s, th, live)['x_q4_0_dense']):.2f}" for s in ksp])
    rows.append(["paper PowerInfer scatter × GGML dense", "—"] +
                [f"{PAPER_T9[s][1]:.2f}" if s in PAPER_T9 else "—" for s in ksp])
    rows.append(["paper Cactus KMI4_fast × GGML dense", "—"] +
                [f"{PAPER_T9[s][2]:.2f}" if s in PAPER_T9 else "—" for s in ksp])
    V["kernels_down_table"] = md_table(["", "dense"] + [f"sp {s:g}" for s in ksp], rows)
    k1 = lambda k, s, live="random": num(kget(kd, k, s, 1, live)["x_q4_0_dense"])
    V["kmi4_beats_scatter"] = yes_no(all(k1("kmi4", s) > k1("q4_0t_scatter", s) for s in ksp))
    V["kmi4_dense_x_q4"] = f"{k1('kmi4', 0):.2f}x"
    own = lambda s, live: num(kget(kd, "kmi4", s, 1, live)["x_own_dense"])
    if 0.5 in ksp:
        V["kmi4_own_05"] = f"{own(0.5, 'random'):.2f}x"
        V["kmi4_own_05_cl"] = f"{own(0.5, 'clustered'):.2f}x"
        gr = lambda live: num(kget(kd, "kmi4", 0.5, 1, live)["gbps"])
        V["clustered_note"] = (f"clustered reads stream at {gr('clustered'):.1f} GB/s against {gr('random'):.1f} for "
                               "scattered 768-byte neuron rows, which lose DRAM efficiency." if own(0.5, "clustered") >
                               own(0.5, "random") else "clustered live sets did not help in this run.")
    km = read_csv(P("kernels_mlp.csv"))
    mrows = []
    for r in km:
        if True:
            mrows.append([r["live_kind"], f"{int(num(r['threads']))}t", f"{num(r['sparsity']):g}",
                          f"{num(r['x_dense']):.2f}", f"{num(r['down_only_x_dense']):.2f}",
                          f"{PAPER_T11[round(num(r['sparsity']), 2)][2]:.2f}" if round(num(r['sparsity']), 2) in PAPER_T11 else "—",
                          f"{PAPER_T11[round(num(r['sparsity']), 2)][1]:.2f}" if round(num(r['sparsity']), 2) in PAPER_T11 else "—"])
    V["kernels_mlp_table"] = md_table(["live sets", "threads", "sparsity", "up+down sparse × dense",
                                       "down only × dense (derived)", "paper spUpDn", "paper spDn"], mrows)
    m05 = [r for r in km if abs(num(r["sparsity"]) - 0.5) < 1e-9]
    if m05:
        V["mlp05_random_1t"] = next((f"{num(r['x_dense']):.2f}x" for r in m05 if r["live_kind"] == "random"
                                     and int(num(r["threads"])) == 1), "—")
        V["mlp05_range"] = f"{min(num(r['x_dense']) for r in m05):.2f}-{max(num(r['x_dense']) for r in m05):.2f}x"
        V["mlp05_proxy"] = next((f"{num(r['proxy_ggml_dense_us']) / num(r['sparse_us']):.2f}x" for r in m05
                                 if r["live_kind"] == "random" and int(num(r["threads"])) == 1), "—")
        V["mlp_reaches_124"] = yes_no(any(num(r["x_dense"]) >= 1.24 for r in m05))
    kl = read_csv(P("kernels_llama.csv"))
    lsp = sorted({num(r["sparsity"]) for r in kl if num(r["sparsity"]) > 0})
    lrows = []
    shapes = []
    for r in kl:
        sh = (int(num(r["in"])), int(num(r["out"])))
        if sh not in shapes:
            shapes.append(sh)
    zz = []
    for sh in shapes:
        sub = [r for r in kl if (int(num(r["in"])), int(num(r["out"]))) == sh]
        for th in sorted({int(num(r["threads"])) for r in sub}):
            cells = []
            for s in lsp:
                x = num(kget(sub, "zigzag", s, th)["x_own_dense"])
                zz.append((s, th, x))
                cells.append(f"{x:.2f}")
            lrows.append([SHAPES.get(sh, f"{sh[0]}x{sh[1]}"), f"{th}t"] + cells +
                         [f"{num(kget(sub, 'kmi4', max(lsp), th)['x_own_dense']):.2f}"])
    V["kernels_llama_table"] = md_table(["shape", "threads"] + [f"zigzag sp {s:g}" for s in lsp] +
                                        [f"kmi4 sp {max(lsp):g}"], lrows)
    top = max(lsp)
    zt = [x for s, th, x in zz if s == top]
    V["zigzag_top_range"] = f"{min(zt):.2f}-{max(zt):.2f}x at {100 * top:g}%"
    mono = True
    for i in range(0, len(zz), len(lsp)):
        xs = [x for _, _, x in zz[i:i + len(lsp)]]
        mono = mono and all(x0 <= x1 + 0.02 for x0, x1 in zip(xs, xs[1:]))
    V["zigzag_monotone"] = yes_no(mono)
    # --- decode
    de = read_csv(P("decode.csv"))
    V["decode_load"] = load_note(read_decode(P("decode.csv")))
    drows = []
    for r in de:
        drows.append([ART.get(r["artifact"], r["artifact"]), r["threads"], r["method"],
                      f"{num(r['tok_s_median']):,.0f}", f"{num(r['x_dense']):.2f}" if r["x_dense"] else "—"])
    V["decode_table"] = md_table(["artifact", "threads", "router", "tok/s (median)", "× dense"], drows)
    sy = [r for r in de if r["artifact"] == "synth" and r["method"] != "dense"]
    V["synth_sparse_gain"] = ", ".join(f"{r['method']} {r['threads']}t ×{num(r['x_dense']):.2f}" for r in sy) or "—"
    pm = []
    for r in de:
        if r["artifact"] == "synth-perm":
            b = next((x for x in de if x["artifact"] == "synth" and x["method"] == r["method"] and
                      x["threads"] == r["threads"]), None)
            if b:
                pm.append(f"{r['method']} {r['threads']}t ×{num(r['tok_s_median']) / num(b['tok_s_median']):.2f}")
    V["permute_effect"] = ", ".join(pm) or "—"
    V["decode_methods"] = ", ".join(dict.fromkeys(r["method"] for r in de if r["artifact"].startswith("stories")))
    st = [r for r in de if r["artifact"] == "stories" and r["method"] != "dense"]
    V["stories_sparse_gain"] = ", ".join(f"{r['method']} {r['threads']}t ×{num(r['x_dense']):.2f}" for r in st) or "—"
    def phase_note(art):
        d = next((r for r in de if r["artifact"] == art and r["method"] == "dense" and r["threads"] == "1"), None)
        c = next((r for r in de if r["artifact"] == art and r["method"] == "cats" and r["threads"] == "1"), None)
        if not d or not c:
            return "(no 1-thread dense and cats runs)"
        step = 1000 / num(d["tok_s_median"])
        saved = num(d["ms_mlp_up"]) + num(d["ms_mlp_down"]) - num(c["ms_mlp_up"]) - num(c["ms_mlp_down"])
        return (f"a dense step takes {step:.3f} ms on 1 thread, attention {num(d['ms_attention']):.3f} ms of it; at "
                f"density {num(c['density']):g} CATS saves {saved:.3f} ms per token in up + down and spends "
                f"{num(c['ms_mlp_route']) - num(d['ms_mlp_route']):.3f} ms routing")
    V["stories_phase_note"] = phase_note("stories")
    V["synth_phase_note"] = phase_note("synth")
    V["provenance"] = f"{machine()}; tree at commit {commit()}"
    return V


def cmd_report(a):
    V = report_values(a.results_dir, load(a.model_info), a.model)
    V["provenance"] += binary(a.binary)
    with open(a.template) as f:
        text = f.read()
    missing = []

    def sub(m):
        k = m.group(1)
        if k not in V:
            missing.append(k)
            return m.group(0)
        return str(V[k])

    text = re.sub(r"\{\{([a-zA-Z0-9_]+)\}\}", sub, text)
    if missing:
        sys.exit(f"tables.py report: no value for {', '.join(sorted(set(missing)))}")
    if a.output:
        write_text(a.output, text)  # kept as it is when only the provenance line would change
    else:
        sys.stdout.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for o in ("template", "results-dir", "model-info", "model", "binary", "output"):
        p.add_argument("--" + o, default="")
    cmd_report(p.parse_args())


if __name__ == "__main__":
    main()
