"""Measure the shipped GGUF files with the GGUF-only reference forward (float32 on the GPU).

Usage: python3 models/train/evaluate.py --data models/train/data \
          --gguf models/sa-default-f16.gguf models/sa-default-q8_0.gguf --out models/train/out/metrics.json
Figures: passkey exact-match by total length x needle depth (20 prompts per cell, seed 20261122),
held-out perplexity (valid split, 2048-token windows; also the same number of tokens of the
training split), dialogue fact recall (one fact asked at the end, names/cities as in training), multi-key recall (per query),
passkey past the trained context (3072, 4096; informative), and dialogue recall of a name asked
at the end when it comes from the training name list vs a capitalized dictionary word (and the same
for cities): shows whether names are copied or recalled from the lists.
"""
import argparse, json, math, os, time
import numpy as np
import torch
from reference import RefModel
from tasks import Tasks
from tokenizer import PAD

LENGTHS = [256, 512, 768, 1024, 1280, 1536, 1792, 2048]
DEPTHS = [i / 10 for i in range(11)]


def run_batch(m, seqs, chunk=16):
    """seqs: list of id lists; returns list of argmax predictions (np arrays, per position)."""
    out = []
    for i in range(0, len(seqs), chunk):
        part = seqs[i:i + chunk]
        T = max(len(s) for s in part)
        x = torch.full((len(part), T), PAD, dtype=torch.long)
        for j, s in enumerate(part):
            x[j, :len(s)] = torch.tensor(s)
        pred = m.forward(x).argmax(-1).cpu().numpy()
        out.extend(pred[j, :len(s)] for j, s in enumerate(part))
    return out


def exact(pred, ids, start, n):
    return bool(np.all(pred[start - 1:start - 1 + n] == np.array(ids[start:start + n])))


def passkey_grid(m, tasks, n_per_cell, seed, lengths=LENGTHS):
    rng = np.random.default_rng(seed)
    grid = {}
    for L in lengths:
        seqs, meta = [], []
        for dp in DEPTHS:
            for _ in range(n_per_cell):
                ids, _, st, key = tasks.passkey(rng, L, depth=dp)
                seqs.append(ids)
                meta.append((dp, st, len(ids) - st))
        preds = run_batch(m, seqs)
        for (dp, st, n), ids, p in zip(meta, seqs, preds):
            grid.setdefault(L, {}).setdefault(dp, []).append(exact(p, ids, st, n))
    return {L: {dp: float(np.mean(v)) for dp, v in row.items()} for L, row in grid.items()}


def perplexity(m, data, T=2048, bs=8, split="valid", max_tokens=None):
    v = np.fromfile(os.path.join(data, f"{split}.u16"), dtype=np.uint16).astype(np.int64)
    if max_tokens:
        v = v[:max_tokens]
    nll, n = 0.0, 0
    wins = [v[i:i + T + 1] for i in range(0, len(v) - T - 1, T)]
    for i in range(0, len(wins), bs):
        x = torch.from_numpy(np.stack(wins[i:i + bs]))
        lg = m.forward(x[:, :-1]).float()
        lp = torch.log_softmax(lg, -1).gather(-1, x[:, 1:].to(lg.device)[..., None])
        nll -= lp.sum().item()
        n += lp.numel()
    return math.exp(nll / n), n


def span_task(m, tasks, kind, lengths, n, seed, **kw):
    rng = np.random.default_rng(seed)
    res = {}
    for L in lengths:
        seqs, spans = [], []
        for _ in range(n):
            if kind == "dialogue":
                ids, _, sp = tasks.dialogue(rng, L, n_ask=1, **kw)
            else:
                ids, _, sp = tasks.recall(rng, L)
            seqs.append(ids)
            spans.append(sp)
        preds = run_batch(m, seqs)
        hits = [exact(p, ids, st, k) for p, ids, sp in zip(preds, seqs, spans) for st, k in sp]
        res[L] = (float(np.mean(hits)), len(hits))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="models/train/data")
    ap.add_argument("--gguf", nargs="+", default=["models/sa-default-f16.gguf", "models/sa-default-q8_0.gguf"])
    ap.add_argument("--out", default="models/train/out/metrics.json")
    ap.add_argument("--n-per-cell", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--beyond", type=int, nargs="*", default=[3072, 4096],
                    help="extra passkey lengths past the trained context (10 prompts per depth)")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    tasks = Tasks(a.data)
    metrics = {}
    for path in a.gguf:
        t0 = time.time()
        m = RefModel(path, device=dev, dtype=torch.float32)
        assert m.tok.tokens == tasks.tok.tokens, "GGUF vocabulary differs from the data folder's tokenizer"
        name = os.path.basename(path)
        r = {}
        r["passkey"] = passkey_grid(m, tasks, 2 if a.quick else a.n_per_cell, a.seed)
        r["perplexity"], r["ppl_tokens"] = perplexity(m, a.data)
        # same number of tokens from the start of the training split: the gap shows memorization
        r["train_perplexity"], _ = perplexity(m, a.data, split="train", max_tokens=os.path.getsize(os.path.join(a.data, "valid.u16")) // 2)
        if a.beyond:
            r["passkey_beyond"] = passkey_grid(m, tasks, 2 if a.quick else 10, a.seed + 3, lengths=a.beyond)
        lens = [512, 2048] if a.quick else [512, 1024, 2048]
        r["dialogue"] = span_task(m, tasks, "dialogue", lens, 10 if a.quick else 100, a.seed + 1)
        r["recall"] = span_task(m, tasks, "recall", lens, 5 if a.quick else 50, a.seed + 2)
        # names / cities outside the training lists: capitalized random dictionary words
        cap = tasks.cap_words
        nd = 10 if a.quick else 100
        r["dialogue_name_listed"] = span_task(m, tasks, "dialogue", lens, nd, a.seed + 4, ask="name")
        r["dialogue_name_unlisted"] = span_task(m, tasks, "dialogue", lens, nd, a.seed + 5, ask="name", names=cap)
        r["dialogue_city_unlisted"] = span_task(m, tasks, "dialogue", lens, nd, a.seed + 6, ask="city", cities=cap)
        r["seconds"] = time.time() - t0
        metrics[name] = r
        pk = r["passkey"]
        print(f"== {name}  ({r['seconds']:.0f}s)")
        print("passkey exact match, rows = length, cols = depth " + " ".join(f"{d:4.1f}" for d in DEPTHS) + "   mean")
        for L in LENGTHS:
            row = [pk[L][d] for d in DEPTHS]
            print(f"  {L:5d} " + " ".join(f"{v*100:4.0f}" for v in row) + f"  {np.mean(row)*100:5.1f}")
        allpk = np.mean([pk[L][d] for L in LENGTHS for d in DEPTHS])
        print(f"  overall {allpk*100:.2f}%  min cell {min(pk[L][d] for L in LENGTHS for d in DEPTHS)*100:.0f}%")
        print(f"held-out perplexity {r['perplexity']:.3f} over {r['ppl_tokens']} tokens "
              f"(training-split perplexity, same size: {r['train_perplexity']:.3f})")
        if a.beyond:
            print("passkey beyond the trained context (informative), " +
                  ", ".join(f"{L}: {np.mean(list(v.values()))*100:.1f}%" for L, v in r["passkey_beyond"].items()))
        print("dialogue recall " + ", ".join(f"{L}: {v*100:.1f}% (n={k})" for L, (v, k) in r["dialogue"].items()))
        print("multi-key recall " + ", ".join(f"{L}: {v*100:.1f}% (n={k})" for L, (v, k) in r["recall"].items()))
        for key in ("dialogue_name_listed", "dialogue_name_unlisted", "dialogue_city_unlisted"):
            print(key + " " + ", ".join(f"{L}: {v*100:.1f}% (n={k})" for L, (v, k) in r[key].items()))
        del m
        torch.cuda.empty_cache()
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(metrics, fh, indent=1)


if __name__ == "__main__":
    main()
