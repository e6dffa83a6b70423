#!/usr/bin/python3
"""CLAWS statistics computed the way an ML engineer would without sparsecal:
a PyTorch (Debian's python3-torch, CPU) Llama forward and backward over the
same Hugging Face checkpoint and the same token ids, accumulating per layer
and neuron

    num_j += |h_j| * ||W_d[:, j]||_2 * |dL/dh_j|,   den_j += |phi(u_j)|

over every scored position (t < n-1; L = summed next-token cross-entropy),
exactly what `sparsecal compute --method claws` accumulates.

It is both the speed/memory peer for docs/SCALE.md and an independent oracle:
with --scal FILE it reads sparsecal's .scal (raw sections) and prints the
worst relative difference of num and den per layer.

  /usr/bin/python3 scripts/peers/torch_claws.py -m MODEL_DIR --tokens ids.txt \
      [--max-seqs N] [--seq-len T] [--threads N] [--dtype f32|bf16] [--scal c.scal] [--json]

--dtype f32 (default) holds the weights as f32, as transformers does by
default; --dtype bf16 keeps them in the file's bf16 and upcasts one matrix
at a time (less memory, more time). Weights are read from the safetensors
file(s) directly (single file or sharded index); no transformers needed.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import time

import numpy as np
import torch

ST_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2)}


def safetensors_files(model_dir):
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        return sorted(set(os.path.join(model_dir, v) for v in wm.values()))
    return [os.path.join(model_dir, "model.safetensors")]


def load_tensors(model_dir, keep_bf16):
    """name -> torch tensor (f32, or bf16 when keep_bf16 and stored so), from memory maps."""
    out = {}
    for path in safetensors_files(model_dir):
        mm = np.memmap(path, dtype=np.uint8, mode="r")
        (hlen,) = struct.unpack("<Q", bytes(mm[:8]))
        header = json.loads(bytes(mm[8:8 + hlen]))
        base = 8 + hlen
        for name, info in header.items():
            if name == "__metadata__":
                continue
            npdt, size = ST_DTYPES[info["dtype"]]
            a, b = info["data_offsets"]
            arr = np.frombuffer(mm, dtype=npdt, count=(b - a) // size, offset=base + a).reshape(info["shape"])
            if info["dtype"] == "BF16":
                t = torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
                out[name] = t if keep_bf16 else t.float()
            else:
                out[name] = torch.from_numpy(arr.astype(np.float32))
    return out


def read_tokens(path, max_seqs, seq_len):
    seqs = []
    with open(path) as f:
        for line in f:
            ids = [int(x) for x in line.split()]
            if len(ids) < 2:
                continue
            seqs.append(ids[:seq_len] if seq_len > 0 else ids)
            if max_seqs and len(seqs) >= max_seqs:
                break
    return seqs


def rope_tables(T, hd, theta):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope_half(x, cos, sin):
    """Hugging Face (rotate-half) RoPE on [T, heads, hd]."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def peak_rss_anon_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def read_scal_raw(path):
    """f64/i64 sections of a .scal (container format 1.0, docs/CONTAINER.md) by name."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"SPARSCAL":
        sys.exit(f"{path}: not a .scal file")
    table_off, count = struct.unpack_from("<QI", data, 56)
    out = {}
    for i in range(count):
        e = table_off + 256 * i
        name = data[e:e + 128].split(b"\0", 1)[0].decode()
        dtype, comp, ndim = data[e + 128], data[e + 129], data[e + 130]
        dims = struct.unpack_from("<8Q", data, e + 136)[:ndim]
        off, stored = struct.unpack_from("<QQ", data, e + 200)
        if dtype not in (9, 11):
            continue
        raw = data[off:off + stored]
        if comp == 1:  # one zstd frame: the zstd command line tool (Debian's zstd) decodes it
            raw = subprocess.run(["zstd", "-d", "-c", "-q"], input=raw, stdout=subprocess.PIPE, check=True).stdout
        arr = np.frombuffer(raw, dtype=np.float64 if dtype == 11 else np.int64)
        out[name] = arr.reshape(dims) if dims else arr
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--max-seqs", type=int, default=0)
    ap.add_argument("--seq-len", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--scal", help="compare with this sparsecal .scal (claws)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    with open(os.path.join(a.model, "config.json")) as f:
        cfg = json.load(f)
    D, F, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads", H)
    hd = cfg.get("head_dim", D // H)
    eps = cfg.get("rms_norm_eps", 1e-5)
    theta = cfg.get("rope_theta", 10000.0)
    if cfg.get("rope_scaling"):
        sys.exit("torch_claws.py: rope_scaling is not implemented here")
    if cfg.get("model_type", "llama") not in ("llama", "mistral"):
        sys.exit("torch_claws.py: only llama/mistral checkpoints")

    t0 = time.time()
    W = load_tensors(a.model, a.dtype == "bf16")
    load_s = time.time() - t0

    def w(name):
        t = W[name]
        return t.float() if t.dtype == torch.bfloat16 else t

    emb_name = "model.embed_tokens.weight"
    head_name = "lm_head.weight" if "lm_head.weight" in W else emb_name
    # ||W_d[:, j]|| in double, as sparsecal computes it
    wnorm = [w(f"model.layers.{l}.mlp.down_proj.weight").double().pow(2).sum(0).sqrt() for l in range(L)]
    num = [torch.zeros(F, dtype=torch.float64) for _ in range(L)]
    den = [torch.zeros(F, dtype=torch.float64) for _ in range(L)]
    seqs = read_tokens(a.tokens, a.max_seqs, a.seq_len)
    tokens, peak = 0, peak_rss_anon_mb()
    t1 = time.time()
    for s, ids in enumerate(seqs):
        T = len(ids)
        cos, sin = rope_tables(T, hd, theta)
        idx = torch.tensor(ids, dtype=torch.long)
        x = w(emb_name)[idx].clone().requires_grad_(True)  # activation gradients only, no weight gradients
        hs, acts = [], []
        mask = torch.full((T, T), float("-inf")).triu(1)
        for l in range(L):
            p = f"model.layers.{l}."
            xn = rmsnorm(x, w(p + "input_layernorm.weight"), eps)
            q = (xn @ w(p + "self_attn.q_proj.weight").t()).view(T, H, hd)
            k = (xn @ w(p + "self_attn.k_proj.weight").t()).view(T, KV, hd)
            v = (xn @ w(p + "self_attn.v_proj.weight").t()).view(T, KV, hd)
            q, k = rope_half(q, cos, sin), rope_half(k, cos, sin)
            k = k.repeat_interleave(H // KV, dim=1)
            v = v.repeat_interleave(H // KV, dim=1)
            att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
            ctx = torch.einsum("hts,shd->thd", att.softmax(-1), v).reshape(T, H * hd)
            x = x + ctx @ w(p + "self_attn.o_proj.weight").t()
            xn = rmsnorm(x, w(p + "post_attention_layernorm.weight"), eps)
            a_ = torch.nn.functional.silu(xn @ w(p + "mlp.gate_proj.weight").t())
            h = a_ * (xn @ w(p + "mlp.up_proj.weight").t())
            h.retain_grad()
            hs.append(h)
            acts.append(a_)
            x = x + h @ w(p + "mlp.down_proj.weight").t()
        logits = rmsnorm(x, w("model.norm.weight"), eps) @ w(head_name).t()
        loss = torch.nn.functional.cross_entropy(logits[:-1], idx[1:], reduction="sum")
        peak = max(peak, peak_rss_anon_mb())
        loss.backward()
        n = T - 1
        with torch.no_grad():
            for l in range(L):
                hd_, g = hs[l][:n].double(), hs[l].grad[:n].double()
                num[l] += (hd_.abs() * g.abs()).sum(0) * wnorm[l]
                den[l] += acts[l][:n].double().abs().sum(0)
        peak = max(peak, peak_rss_anon_mb())
        del hs, acts, logits, loss
        tokens += T
        el = time.time() - t1
        print(f"\rtorch_claws: {s + 1}/{len(seqs)} sequences, {tokens / el:.1f} tok/s", end="", file=sys.stderr)
    print(file=sys.stderr)
    secs = time.time() - t1
    res = {"sequences": len(seqs), "tokens": tokens, "seconds": secs, "tokens_per_s": tokens / secs,
           "load_seconds": load_s, "peak_rss_anon_mb_sampled": peak, "threads": a.threads, "dtype": a.dtype}
    if a.scal:
        sc = read_scal_raw(a.scal)
        worst_num = worst_den = 0.0
        for l in range(L):
            sn, sd = sc.get(f"claws/layer{l}.num"), sc.get(f"claws/layer{l}.den")
            if sn is None or sd is None:
                sys.exit(f"{a.scal}: no claws arrays for layer {l} (names: {sorted(sc)[:6]}...)")
            worst_num = max(worst_num, float(np.max(np.abs(sn - num[l].numpy()) / np.maximum(np.abs(num[l].numpy()), 1e-30))))
            worst_den = max(worst_den, float(np.max(np.abs(sd - den[l].numpy()) / np.maximum(np.abs(den[l].numpy()), 1e-30))))
        res["max_rel_diff_num"], res["max_rel_diff_den"] = worst_num, worst_den
    if a.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:28s} {v}")


if __name__ == "__main__":
    main()
