#!/usr/bin/python3
"""Independent reference for llama2.c-format models, written with PyTorch
(float64): its own checkpoint reader, its own tokenizer.bin encoder (llama2.c
rules), the Llama forward pass, teacher-forced perplexity with sparsecal's
protocol (documents split on blank lines, BOS first, windows of --ctx tokens
overlapping by one) and greedy generation from BOS.

Writes a small JSON fixture that the C tests compare against; the C test
suite itself never needs torch.

  /usr/bin/python3 scripts/oracle_llama2c.py MODEL.bin TOKENIZER.bin TEXT -o out.json
"""
import argparse
import heapq
import json
import math
import re
import struct
import sys

import torch


def read_model(path):
    with open(path, "rb") as f:
        data = f.read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", data[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    w = torch.frombuffer(bytearray(data[28:]), dtype=torch.float32).to(torch.float64)
    hs = dim // n_heads
    kvd = n_kv * hs
    off = 0

    def take(*shape):
        nonlocal off
        n = 1
        for s in shape:
            n *= s
        t = w[off:off + n].reshape(*shape)
        off += n
        return t

    m = dict(dim=dim, hidden=hidden, n_layers=n_layers, n_heads=n_heads, n_kv=n_kv, vocab=vocab,
             seq_len=seq_len, hs=hs)
    m["emb"] = take(vocab, dim)
    m["rms_att"] = take(n_layers, dim)
    m["wq"] = take(n_layers, dim, dim)
    m["wk"] = take(n_layers, kvd, dim)
    m["wv"] = take(n_layers, kvd, dim)
    m["wo"] = take(n_layers, dim, dim)
    m["rms_ffn"] = take(n_layers, dim)
    m["w1"] = take(n_layers, hidden, dim)
    m["w2"] = take(n_layers, dim, hidden)
    m["w3"] = take(n_layers, hidden, dim)
    m["rms_final"] = take(dim)
    if shared:
        m["wcls"] = m["emb"]
    else:
        take(seq_len * hs)
        m["wcls"] = take(vocab, dim)
    return m


def read_tokenizer(path, vocab):
    with open(path, "rb") as f:
        data = f.read()
    off = 4
    pieces, scores = [], []
    for _ in range(vocab):
        score, n = struct.unpack("<fi", data[off:off + 8])
        off += 8
        pieces.append(data[off:off + n])
        scores.append(score)
        off += n
    lookup = {}
    for i, p in enumerate(pieces):
        lookup.setdefault(p, i)
    return pieces, scores, lookup


def encode(text, tok):
    pieces, scores, lookup = tok
    b = text.encode("utf-8")
    ids = [lookup[b" "]] if b else []
    # code points of at most 4 bytes, byte fallback to id byte + 3
    i = 0
    while i < len(b):
        j = i + 1
        while j < len(b) and (b[j] & 0xC0) == 0x80 and j - i < 4:
            j += 1
        cp = b[i:j]
        if cp in lookup:
            ids.append(lookup[cp])
        else:
            ids.extend(x + 3 for x in cp)
        i = j
    # merge the best-scoring adjacent pair (leftmost on ties) until none is left
    n = len(ids)
    nxt = list(range(1, n)) + [-1]
    prv = list(range(-1, n - 1))
    alive = [True] * n
    ver = [0] * n
    heap = []

    def push(a):
        if a < 0 or nxt[a] < 0:
            return
        c = nxt[a]
        cat = pieces[ids[a]] + pieces[ids[c]]
        t = lookup.get(cat)
        if t is not None and scores[t] > -1e10:
            heapq.heappush(heap, (-scores[t], a, c, ver[a], ver[c], t))

    for a in range(n - 1):
        push(a)
    while heap:
        _, a, c, va, vc, t = heapq.heappop(heap)
        if not (alive[a] and alive[c] and ver[a] == va and ver[c] == vc and nxt[a] == c):
            continue
        ids[a] = t
        ver[a] += 1
        alive[c] = False
        nxt[a] = nxt[c]
        if nxt[c] >= 0:
            prv[nxt[c]] = a
        push(prv[a])
        push(a)
    out, k = [], 0 if n else -1
    while k >= 0:
        out.append(ids[k])
        k = nxt[k]
    return out


def decode(ids, tok):
    pieces = tok[0]
    out = b""
    prev = 1
    for t in ids:
        p = pieces[t]
        if prev == 1 and p.startswith(b" "):
            p = p[1:]
        mm = re.fullmatch(rb"<0x([0-9A-Fa-f]{2})>", p)
        if mm:
            p = bytes([int(mm.group(1), 16)])
        out += p
        prev = t
    return out.decode("utf-8", errors="replace")


def rmsnorm(x, w):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5))


def forward(m, ids):
    """logits [T, vocab] for a window starting at position 0"""
    T = len(ids)
    dim, hs, H, KV = m["dim"], m["hs"], m["n_heads"], m["n_kv"]
    x = m["emb"][torch.tensor(ids)]
    pos = torch.arange(T, dtype=torch.float64)
    freqs = 1.0 / (10000.0 ** (torch.arange(0, hs, 2, dtype=torch.float64) / hs))
    ang = pos[:, None] * freqs[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)

    def rope(v):  # v [T, heads, hs], rotate adjacent pairs
        a, b = v[..., 0::2], v[..., 1::2]
        out = torch.empty_like(v)
        out[..., 0::2] = a * cos[:, None, :] - b * sin[:, None, :]
        out[..., 1::2] = a * sin[:, None, :] + b * cos[:, None, :]
        return out

    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), diagonal=1)
    for l in range(m["n_layers"]):
        xb = rmsnorm(x, m["rms_att"][l])
        q = rope((xb @ m["wq"][l].T).view(T, H, hs))
        k = rope((xb @ m["wk"][l].T).view(T, KV, hs))
        v = (xb @ m["wv"][l].T).view(T, KV, hs)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hs) + mask
        att = torch.softmax(att, dim=-1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(T, dim)
        x = x + o @ m["wo"][l].T
        xb = rmsnorm(x, m["rms_ffn"][l])
        h = torch.nn.functional.silu(xb @ m["w1"][l].T) * (xb @ m["w3"][l].T)
        x = x + h @ m["w2"][l].T
    return rmsnorm(x, m["rms_final"]) @ m["wcls"].T


def split_docs(text):
    docs, cur = [], []
    for line in text.split("\n"):
        if line.strip(" \t\r") == "":
            if cur:
                docs.append("\n".join(cur))
                cur = []
        else:
            cur.append(line)
    if cur:
        docs.append("\n".join(cur))
    return [d.strip("\r\n").rstrip(" \t\r\n") for d in docs if d.strip("\r\n").rstrip(" \t\r\n")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("tokenizer")
    ap.add_argument("text")
    ap.add_argument("--ctx", type=int, default=0)
    ap.add_argument("--steps", type=int, default=256)
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    torch.set_grad_enabled(False)
    m = read_model(a.model)
    tok = read_tokenizer(a.tokenizer, m["vocab"])
    ctx = a.ctx or m["seq_len"]
    with open(a.text, encoding="utf-8") as f:
        docs = split_docs(f.read())
    nll, scored, n_seqs = 0.0, 0, 0
    for i, d in enumerate(docs):
        ids = [1] + encode(d, tok)
        if len(ids) < 2:
            continue
        n_seqs += 1
        start = 0
        while start + 1 < len(ids):
            w = ids[start:start + ctx]
            lp = torch.log_softmax(forward(m, w), dim=-1)
            tgt = torch.tensor(w[1:])
            nll -= lp[:-1].gather(1, tgt[:, None]).sum().item()
            scored += len(w) - 1
            start += ctx - 1
        if (i + 1) % 500 == 0:
            print(f"{i + 1}/{len(docs)} docs, ppl {math.exp(nll / scored):.6f}", file=sys.stderr)
    # greedy generation from BOS, llama2.c's loop: positions 0..steps-1 fed, stop at BOS
    steps = min(a.steps, m["seq_len"])
    seq = [1]
    while len(seq) <= steps:
        nxt = int(torch.argmax(forward(m, seq)[-1]).item())
        if nxt == 1 or nxt == 2:
            break
        seq.append(nxt)
        if len(seq) - 1 >= steps:
            break
    res = {
        "model": a.model.split("/")[-1],
        "text": a.text.split("/")[-1],
        "ctx": ctx,
        "documents": len(docs),
        "sequences": n_seqs,
        "tokens": scored,
        "nll_per_token": nll / scored,
        "ppl": math.exp(nll / scored),
        "greedy_steps": steps,
        "greedy_ids": seq,
        "greedy_text": decode(seq[1:], tok),
    }
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"ppl {res['ppl']:.6f} over {scored} tokens in {n_seqs} sequences", file=sys.stderr)


if __name__ == "__main__":
    main()
