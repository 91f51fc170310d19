"""Train the sa default model (Llama architecture, GQA, RoPE, RMSNorm, SwiGLU, tied embeddings).

One command (from the repository root, on a CUDA GPU):
  python3 models/train/train.py --data models/train/data --out models/train/ckpt --steps 3600
Writes ckpt/model.pt (float32 state dict + config) and ckpt/train_log.json.
Batches: each step draws a sequence length from BUCKETS and fills TOKENS_PER_STEP tokens with
rows of that length; each row is corpus text (a random window) or one synthetic task example
(passkey / multi-key recall / chat dialogue) padded with <pad> (loss weight 0).

Thinned context (THIN): in some rows of 512 tokens or more, old keys are hidden from attention the
way a bounded cache forgets them, so that the model learns to use a context with holes in it (a
needle of which only some tokens remain). Per row a window w is drawn log-uniformly from
THIN_WINDOW; per (layer, row, key) a uniform u. Query i sees key j <= i when j is one of the first
THIN_SINKS tokens, or d = i - j < w, or u < w / (d + w): every key stays visible up to age w, then
with probability w / (d + w), which halves each time the age passes (2^c - 1) w, like the c-th
sub-cache of a cascade with w slots each. Visibility only ever ends as d grows (a key once hidden
stays hidden), as in a cache. The mask is shared by the heads of a layer.
"""
import argparse, json, math, os, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from tokenizer import PAD, BOS
from tasks import Tasks

BUCKETS = [256, 512, 768, 1024, 1280, 1536, 1792, 2048]
MIX = {"text": 0.35, "passkey": 0.35, "recall": 0.10, "dialogue": 0.20}
THIN = {"text": 0.25, "passkey": 0.5, "recall": 0.5, "dialogue": 0.5}  # P(row is thinned), L >= 512
THIN_MIN_LEN = 512
THIN_WINDOW = (32.0, 512.0)
THIN_SINKS = 64


class Config:
    def __init__(self, **kw):
        self.vocab = 4096
        self.d = 384
        self.n_layers = 6
        self.n_heads = 6
        self.n_kv = 2
        self.head_dim = 64
        self.ffn = 1024
        self.ctx = 2048
        self.rope_base = 10000.0
        self.eps = 1e-5
        self.__dict__.update(kw)


def _up(x):
    """compute norms and RoPE in float32 under bf16 autocast (float64 stays float64)"""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        xf = _up(x)
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.to(xf.dtype)).to(x.dtype)


def rope_tables(cfg, T, device):
    i = torch.arange(cfg.head_dim // 2, device=device, dtype=torch.float64)
    inv = cfg.rope_base ** (-2.0 * i / cfg.head_dim)
    ang = torch.arange(T, device=device, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang), torch.sin(ang)  # float64; cast where used


def apply_rope(x, cos, sin):
    # x [B, H, T, hd]; adjacent pairs (2i, 2i+1) rotate by angle pos * base^(-2i/hd)
    B, H, T, hd = x.shape
    xf = _up(x).view(B, H, T, hd // 2, 2)
    x0, x1 = xf[..., 0], xf[..., 1]
    c, s = cos[:T].to(xf.dtype), sin[:T].to(xf.dtype)
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)
    return out.view(B, H, T, hd).to(x.dtype)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        d, hd = cfg.d, cfg.head_dim
        self.attn_norm = RMSNorm(d, cfg.eps)
        self.wq = nn.Linear(d, cfg.n_heads * hd, bias=False)
        self.wk = nn.Linear(d, cfg.n_kv * hd, bias=False)
        self.wv = nn.Linear(d, cfg.n_kv * hd, bias=False)
        self.wo = nn.Linear(cfg.n_heads * hd, d, bias=False)
        self.ffn_norm = RMSNorm(d, cfg.eps)
        self.w_gate = nn.Linear(d, cfg.ffn, bias=False)
        self.w_up = nn.Linear(d, cfg.ffn, bias=False)
        self.w_down = nn.Linear(cfg.ffn, d, bias=False)

    def forward(self, x, cos, sin, mask=None):
        cfg = self.cfg
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, cfg.n_heads, cfg.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, cfg.n_kv, cfg.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, cfg.n_kv, cfg.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        g = cfg.n_heads // cfg.n_kv
        k = k.repeat_interleave(g, dim=1)  # query head h uses kv head h // g
        v = v.repeat_interleave(g, dim=1)
        if mask is None:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            # a fused kernel that takes a mask, never the math fallback (it would hold B*H*T*T floats)
            with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
                a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.wo(a.transpose(1, 2).reshape(B, T, -1))
        h = self.ffn_norm(x)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab, cfg.d)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d, cfg.eps)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * cfg.n_layers) if n.endswith(("wo.weight", "w_down.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
        self.cos = self.sin = None

    def forward(self, idx, thin_w=None):
        """thin_w: None, or [B] float windows of the thinned rows (inf = row not thinned)."""
        T = idx.shape[1]
        if self.cos is None or self.cos.shape[0] < T or self.cos.device != idx.device:
            self.cos, self.sin = rope_tables(self.cfg, max(T, self.cfg.ctx), idx.device)
        x = self.tok_emb(idx)
        for b in self.blocks:
            x = b(x, self.cos, self.sin, None if thin_w is None else thin_mask(thin_w, T, x.dtype))
        return F.linear(self.norm(x), self.tok_emb.weight)  # tied output


def thin_mask(thin_w, T, dtype):
    """Additive attention mask [B, 1, T, T] (0 = visible, -inf = hidden) of one layer: causal, and
    in thinned rows old keys hidden as described in the module docstring (fresh u per call)."""
    dev = thin_w.device
    i = torch.arange(T, device=dev)
    d = (i[:, None] - i[None, :]).float()  # [T(query)][T(key)] age of key j at query i
    w = thin_w.float()[:, None, None]  # [B][1][1]
    u = torch.rand(thin_w.shape[0], 1, T, device=dev)  # [B][1][T(key)]
    keep = (d < w) | (u * (d + w) < w) | (i[None, None, :] < THIN_SINKS)
    keep &= d >= 0
    m = torch.zeros(keep.shape, dtype=dtype, device=dev).masked_fill_(~keep, float("-inf"))
    return m[:, None]


class Batches(torch.utils.data.IterableDataset):
    def __init__(self, data, seed, tokens_per_step, thin_p, thin_window):
        self.data, self.seed, self.tps = data, seed, tokens_per_step
        self.thin_p, self.thin_window = thin_p, thin_window

    def __iter__(self):
        wi = torch.utils.data.get_worker_info()
        wid, nw = (wi.id, wi.num_workers) if wi else (0, 1)
        rng = np.random.default_rng([self.seed, wid])
        tasks = Tasks(self.data)
        text = np.memmap(os.path.join(self.data, "train.u16"), dtype=np.uint16, mode="r")
        names, probs = list(MIX), np.array(list(MIX.values()))
        while True:
            L = int(rng.choice(BUCKETS))
            B = self.tps // L
            x = np.full((B, L + 1), PAD, dtype=np.int64)
            w = np.zeros((B, L + 1), dtype=np.float32)
            thin = np.full(B, np.inf, dtype=np.float32)
            for r in range(B):
                kind = names[rng.choice(len(names), p=probs)]
                if L >= THIN_MIN_LEN and rng.random() < self.thin_p[kind]:
                    lo, hi = self.thin_window
                    thin[r] = np.exp(rng.uniform(np.log(lo), np.log(hi)))
                if kind == "text":
                    s = int(rng.integers(0, len(text) - L - 1))
                    x[r] = text[s:s + L + 1]
                    w[r] = 1.0
                    continue
                tl = int(rng.integers(max(64, L - 255), L + 2))
                if kind == "passkey":
                    ids, wts, _, _ = tasks.passkey(rng, tl)
                elif kind == "recall":
                    ids, wts, _ = tasks.recall(rng, tl)
                else:
                    ids, wts, _ = tasks.dialogue(rng, tl)
                x[r, :len(ids)] = ids
                w[r, :len(ids)] = wts
            # input x[:, :-1], target x[:, 1:], weight of predicting target = w[:, 1:]
            yield torch.from_numpy(x), torch.from_numpy(w[:, 1:].copy()), torch.from_numpy(thin)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="models/train/data")
    ap.add_argument("--out", default="models/train/ckpt")
    ap.add_argument("--steps", type=int, default=3600)
    ap.add_argument("--tokens-per-step", type=int, default=131072)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--max-seconds", type=float, default=1e9, help="safety stop (figures report the steps done)")
    ap.add_argument("--thin-task-p", type=float, default=None,
                    help="override THIN's probability for the synthetic tasks (passkey, recall, dialogue)")
    ap.add_argument("--thin-window", type=float, nargs=2, default=None, help="override THIN_WINDOW")
    ap.add_argument("--time-budget", type=float, default=0.0,
                    help="if > 0, the cosine schedule runs on max(steps done, seconds spent) as a fraction "
                         "of (--steps, this many seconds) and training ends when either is reached")
    args = ap.parse_args()
    thin_p, thin_window = dict(THIN), tuple(args.thin_window or THIN_WINDOW)
    if args.thin_task_p is not None:
        thin_p.update({k: args.thin_task_p for k in ("passkey", "recall", "dialogue")})
    torch.manual_seed(args.seed)
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    cfg = Config()
    model = Model(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params {n_params} ({n_params/1e6:.2f}M)", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    dl = torch.utils.data.DataLoader(Batches(args.data, args.seed, args.tokens_per_step, thin_p, thin_window), batch_size=None,
                                     num_workers=args.workers, pin_memory=True, prefetch_factor=4,
                                     persistent_workers=True)
    it = iter(dl)
    log = []
    t0 = time.time()
    tok_seen = 0
    n_thinned = n_rows = 0
    last_t, last_tok = t0, 0
    for step in range(args.steps):
        if step < args.warmup:
            lr = args.lr * (step + 1) / args.warmup
        else:
            pr = (step - args.warmup) / max(1, args.steps - args.warmup)
            if args.time_budget > 0:
                pr = max(pr, (time.time() - t0) / args.time_budget)
                if pr >= 1.0:
                    print(f"time budget reached at step {step}", flush=True)
                    step -= 1
                    break
            lr = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * pr)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, w, thin = next(it)
        x = x.to(dev, non_blocking=True)
        w = w.to(dev, non_blocking=True)
        thin_w = thin.to(dev, non_blocking=True) if bool(torch.isfinite(thin).any()) else None
        n_thinned += int(torch.isfinite(thin).sum())
        n_rows += thin.shape[0]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(x[:, :-1], thin_w)
        ce = F.cross_entropy(logits.float().view(-1, cfg.vocab), x[:, 1:].reshape(-1), reduction="none")
        loss = (ce * w.view(-1)).sum() / w.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tok_seen += x.shape[0] * (x.shape[1] - 1)
        if step % 50 == 0 or step == args.steps - 1:
            lv = loss.item()
            now = time.time()
            tps = (tok_seen - last_tok) / max(1e-9, now - last_t)
            last_t, last_tok = now, tok_seen
            print(f"step {step:5d} L {x.shape[1]-1:4d} loss {lv:.4f} gnorm {gn.item():.2f} lr {lr:.2e} "
                  f"{tps/1e6:.2f}M tok/s thinned rows {n_thinned}/{n_rows} elapsed {now-t0:.0f}s", flush=True)
            log.append({"step": step, "len": x.shape[1] - 1, "loss": lv, "lr": lr, "elapsed": now - t0})
        if time.time() - t0 > args.max_seconds:
            print(f"max-seconds reached at step {step}", flush=True)
            break
    torch.cuda.synchronize()
    el = time.time() - t0
    os.makedirs(args.out, exist_ok=True)
    sd = {k: v.float().cpu() for k, v in model.state_dict().items()}
    torch.save({"config": cfg.__dict__, "state": sd}, os.path.join(args.out, "model.pt"))
    summary = {"params": n_params, "steps_done": step + 1, "steps_planned": args.steps,
               "tokens": tok_seen, "train_seconds": el, "gpu": torch.cuda.get_device_name(0),
               "tokens_per_step": args.tokens_per_step, "lr": args.lr, "seed": args.seed,
               "thinned_rows": n_thinned, "rows": n_rows,
               "thin": {"p": thin_p, "min_len": THIN_MIN_LEN, "window": thin_window, "sinks": THIN_SINKS},
               "log": log}
    with open(os.path.join(args.out, "train_log.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    print(f"trained {step+1} steps, {tok_seen/1e6:.1f}M tokens in {el:.0f}s", flush=True)


if __name__ == "__main__":
    main()
