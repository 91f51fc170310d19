"""The peers of `sa-bench gpu attention-prefill`: PyTorch's scaled_dot_product_attention
(FlashAttention, cuDNN and memory-efficient back-ends) on the same prefill shape, timed the same
way, in the same run.

Shape: a causal chunk of R query rows at the end of a context of L keys (row i sees
L - R + i + 1 keys: the bottom-right causal mask), 32 query heads over 8 KV heads of 128, f16.
FLOPs: 4 x 128 per query head and key seen. Calls are captured in one CUDA graph and replayed
(the median of the replays). The KV heads are expanded to the query heads beforehand where a
back-end does not take GQA, outside the timing (prefill attention is compute-bound).

usage: python3 tools/bench/sdpa_prefill.py [--keys 8192,32768,131072] [--rows 2048] [--json FILE]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

from sdpa_decode import append_json, graph_seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", default="8192,32768,131072")
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"PyTorch SDPA prefill attention, causal chunk of {args.rows} rows ending at L keys, "
          "32 query / 8 KV heads x 128, f16")
    print(f"{'keys':>8} {'rows':>6} {'backend':>10} {'us':>10} {'TFLOP/s':>8}")
    records = []
    for L in [int(k) for k in args.keys.split(",")]:
        R = min(args.rows, L)
        q = torch.randn(1, 32, R, 128, dtype=torch.float16, device="cuda")
        k = torch.randn(1, 8, L, 128, dtype=torch.float16, device="cuda")
        v = torch.randn(1, 8, L, 128, dtype=torch.float16, device="cuda")
        ke, ve = k.repeat_interleave(4, dim=1), v.repeat_interleave(4, dim=1)
        mask = causal_lower_right(R, L)
        flops = 4 * 128 * 32 * sum(L - R + i + 1 for i in range(R))
        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION)):
            try:
                with sdpa_kernel([be]):
                    F.scaled_dot_product_attention(q, ke, ve, attn_mask=mask)
                    t = graph_seconds(lambda i: F.scaled_dot_product_attention(q, ke, ve, attn_mask=mask), 3, 5)
            except Exception as e:  # a back-end that does not take this shape or mask
                print(f"{L:>8} {R:>6} {name:>10}  unavailable: {str(e).splitlines()[0][:80]}")
                continue
            print(f"{L:>8} {R:>6} {name:>10} {t * 1e6:>10.1f} {flops / t / 1e12:>8.1f}")
            records.append({"bench": "sdpa_prefill", "backend": name, "keys": L, "rows": R,
                            "us": t * 1e6, "tflops": flops / t / 1e12})
        del q, k, v, ke, ve
        torch.cuda.empty_cache()
    append_json(args.json, records)


if __name__ == "__main__":
    main()
