"""The peers of `sa-bench gpu attention`: PyTorch's scaled_dot_product_attention (cuDNN and
FlashAttention back-ends) on the same decode shape, timed the same way, in the same run.

Shape: 1 query row, 32 query heads over 8 KV heads of 128 (GQA), f16 K/V of L keys.
Bytes: K + V once (L x 8 x 128 x 2 x 2). K/V buffers rotate past the L2 cache; N calls are
captured in one CUDA graph and replayed; the median of the replays is reported against the
card's streaming read bandwidth, measured here with a Triton kernel.

usage: python3 tools/bench/sdpa_decode.py [--keys 4096,8192,...] [--json FILE]
"""
import argparse
import json
import math

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.attention import SDPBackend, sdpa_kernel


@triton.jit
def _read(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for it in range(ITERS):
        off = (it * nprog + pid).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + off, mask=off < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc, 0))


def graph_seconds(fn, calls, reps=7):
    """Median seconds per call over `reps` replays of a graph of `calls` calls."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(2):
            fn(i)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(calls):
            fn(i)
    g.replay()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3 / calls)
    ts.sort()
    return ts[len(ts) // 2]


def append_json(path, records):
    """Appends the records as JSON lines to path (nothing when path is empty)."""
    if not path:
        return
    with open(path, "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def read_bandwidth():
    n = 1 << 30  # 2 GiB of f16
    x = torch.randn(n, dtype=torch.float16, device="cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    best = 0.0
    for per_sm in (4, 8, 16):
        nprog, block = sms * per_sm, 4096
        iters = triton.cdiv(n, nprog * block)
        out = torch.empty(nprog, dtype=torch.float32, device="cuda")
        t = graph_seconds(lambda i: _read[(nprog,)](x, out, n, BLOCK=block, ITERS=iters, num_warps=8), 5)
        best = max(best, 2 * n / t / 1e12)
    del x
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", default="4096,8192,16384,32768,65536,131072")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    torch.manual_seed(0)
    bw = read_bandwidth()
    print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"measured bandwidth: streaming read {bw:.3f} TB/s (Triton)\n")
    print("PyTorch SDPA decode attention, 1 row, 32 query / 8 KV heads x 128, f16")
    print(f"{'keys':>8} {'backend':>8} {'us':>10} {'TB/s':>8} {'% of bw':>8}  max |err|")
    records = [{"bench": "sdpa_bandwidth", "read_tbps": bw}]
    for L in [int(k) for k in args.keys.split(",")]:
        kv_bytes = L * 8 * 128 * 2 * 2
        n_buf = max(2, math.ceil(1.5e9 / kv_bytes))
        ks = [torch.randn(1, 8, L, 128, dtype=torch.float16, device="cuda") for _ in range(n_buf)]
        vs = [torch.randn(1, 8, L, 128, dtype=torch.float16, device="cuda") for _ in range(n_buf)]
        q = torch.randn(1, 32, 1, 128, dtype=torch.float16, device="cuda")
        ref = F.scaled_dot_product_attention(q.float(), ks[0].float(), vs[0].float(), enable_gqa=True)
        for name, be in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
            try:
                with sdpa_kernel([be]):
                    out = F.scaled_dot_product_attention(q, ks[0], vs[0], enable_gqa=True)
                    err = (out.float() - ref).abs().max().item()
                    calls = max(n_buf, 20)
                    t = graph_seconds(lambda i: F.scaled_dot_product_attention(
                        q, ks[i % n_buf], vs[i % n_buf], enable_gqa=True), calls)
            except Exception as e:  # a back-end that does not take this shape
                print(f"{L:>8} {name:>8}  unavailable: {str(e).splitlines()[0][:80]}")
                continue
            tbps = kv_bytes / t / 1e12
            print(f"{L:>8} {name:>8} {t * 1e6:>10.1f} {tbps:>8.3f} {100 * tbps / bw:>7.1f}%  {err:.2e}")
            records.append({"bench": "sdpa", "backend": name, "keys": L, "us": t * 1e6,
                            "tbps": tbps, "fraction_of_bw": tbps / bw, "max_abs_err": err})
        del ks, vs
        torch.cuda.empty_cache()
    append_json(args.json, records)


if __name__ == "__main__":
    main()
