"""Reference forward of the sa default model that reads ONLY a GGUF file (llama architecture).

Independent of the training code: weights, hyper-parameters and the tokenizer all come from
the GGUF. Attention is written out (scores, causal mask, softmax), RoPE pairs adjacent dims.
  python3 models/train/reference.py models/sa-default-f16.gguf "Some text"   # prints top tokens
"""
import sys
import numpy as np
import torch
from gguf_io import read_gguf
from tokenizer import Tokenizer


class RefModel:
    def __init__(self, path, device="cpu", dtype=torch.float64):
        kv, t, types = read_gguf(path)
        assert kv["general.architecture"] == "llama"
        self.kv, self.types, self.device, self.dtype = kv, types, device, dtype
        self.d = kv["llama.embedding_length"]
        self.n_layers = kv["llama.block_count"]
        self.n_heads = kv["llama.attention.head_count"]
        self.n_kv = kv["llama.attention.head_count_kv"]
        self.hd = kv["llama.rope.dimension_count"]
        self.eps = kv["llama.attention.layer_norm_rms_epsilon"]
        self.base = kv["llama.rope.freq_base"]
        self.ctx = kv["llama.context_length"]
        W = lambda n: torch.from_numpy(np.ascontiguousarray(t[n])).to(device=device, dtype=dtype)
        self.emb = W("token_embd.weight")  # [vocab, d]
        self.out_norm = W("output_norm.weight")
        self.out = W("output.weight") if "output.weight" in t else self.emb
        self.layers = []
        for i in range(self.n_layers):
            p = f"blk.{i}."
            self.layers.append({k: W(p + k + ".weight") for k in (
                "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")})
        self.tok = Tokenizer(kv["tokenizer.ggml.tokens"], [tuple(m.split(" ")) for m in kv["tokenizer.ggml.merges"]])
        self.bos = kv["tokenizer.ggml.bos_token_id"]

    def encode(self, text):
        return self.tok.encode(text, add_bos=bool(self.kv.get("tokenizer.ggml.add_bos_token", True)))

    def rmsnorm(self, x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * w

    def rope(self, x):  # x [B, T, H, hd]
        T = x.shape[1]
        i = torch.arange(self.hd // 2, dtype=torch.float64, device=self.device)
        theta = torch.arange(T, dtype=torch.float64, device=self.device)[:, None] * self.base ** (-2.0 * i / self.hd)
        c = torch.cos(theta).to(self.dtype)[None, :, None, :]
        s = torch.sin(theta).to(self.dtype)[None, :, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    @torch.no_grad()
    def forward(self, ids, positions=None):
        """ids: LongTensor [B, T]. Returns logits [B, T, vocab] (or [B, len(positions), vocab])."""
        ids = ids.to(self.device)
        B, T = ids.shape
        x = self.emb[ids]
        mask = torch.full((T, T), float("-inf"), dtype=self.dtype, device=self.device).triu(1)
        g = self.n_heads // self.n_kv
        for L in self.layers:
            h = self.rmsnorm(x, L["attn_norm"])
            q = (h @ L["attn_q"].T).view(B, T, self.n_heads, self.hd)
            k = (h @ L["attn_k"].T).view(B, T, self.n_kv, self.hd)
            v = (h @ L["attn_v"].T).view(B, T, self.n_kv, self.hd)
            q, k = self.rope(q), self.rope(k)
            kh = torch.stack([k[:, :, hq // g] for hq in range(self.n_heads)], dim=2)  # head h -> kv h // g
            vh = torch.stack([v[:, :, hq // g] for hq in range(self.n_heads)], dim=2)
            sc = torch.einsum("bqhd,bkhd->bhqk", q, kh) / (self.hd ** 0.5) + mask
            a = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(sc, dim=-1), vh).reshape(B, T, -1)
            x = x + a @ L["attn_output"].T
            h = self.rmsnorm(x, L["ffn_norm"])
            x = x + (torch.nn.functional.silu(h @ L["ffn_gate"].T) * (h @ L["ffn_up"].T)) @ L["ffn_down"].T
        if positions is not None:
            x = x[:, positions]
        return self.rmsnorm(x, self.out_norm) @ self.out.T


if __name__ == "__main__":
    m = RefModel(sys.argv[1])
    ids = m.encode(sys.argv[2])
    lg = m.forward(torch.tensor([ids]))[0, -1]
    top = torch.topk(lg, 5)
    print("ids", ids)
    for v, i in zip(top.values.tolist(), top.indices.tolist()):
        print(f"{i:5d} {m.tok.decode([i])!r} {v:.3f}")
