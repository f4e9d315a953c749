#!/usr/bin/env python3
"""PyTorch peer for `galley bench gemm`: times torch.matmul / torch.addmm (cuBLAS behind them) on
square and ResNet/transformer-shaped problems, forward and the two backward GEMMs, so Galley's
figures can be set beside it, measured on the same GPU in the same command.

TF32 is off (as Galley's f32 solvers never use it). Random normal data, warm-up first, then the
median of CUDA-event timings, each covering `inner` back-to-back calls (>= ~1 ms) divided by
`inner`; with --cuda-graphs each timing replays one captured CUDA graph of the `inner` calls.
Prints one JSON object per problem, keyed by Galley's problem key.

  python3 bench/peer_gemm.py --dtype f16 [--cuda-graphs] [--json out.json]
"""
import argparse
import json

from peer_timing import median_ms

# (m, n, k, batch, trans_a, trans_b, shared_b, bias, tag)
PROBLEMS = [
    (8192, 8192, 8192, 1, 0, 0, 0, 0, "square 8192^3"),
    (4096, 4096, 4096, 1, 0, 0, 0, 0, "square 4096^3"),
    (256, 1000, 2048, 1, 0, 1, 0, 1, "ResNet-50 fc, batch 256"),
    (512, 3072, 768, 32, 0, 1, 1, 1, "BERT-base FFN up, 32 x 512 tokens"),
    (512, 768, 3072, 32, 0, 1, 1, 1, "BERT-base FFN down, 32 x 512 tokens"),
    (2048, 12288, 4096, 4, 0, 1, 1, 0, "GPT fused QKV, 4 x 2048 tokens"),
]
LETTERS = {1: "F", 2: "B", 4: "W"}


def key(p, dtype, direction):
    m, n, k, batch, ta, tb, sb, bias, _ = p
    return (f"gemm-{LETTERS[direction]}-{dtype}-{'t' if ta else 'n'}{'t' if tb else 'n'}-b{batch}-m{m}-n{n}-k{k}"
            f"-sa0-sb{sb}-bias{bias}-alpha1-beta0")


def make_call(torch, p, dtype, direction):
    m, n, k, batch, ta, tb, sb, bias, _ = p
    t = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(1234)
    rnd = lambda *s: torch.randn(*s, device="cuda", generator=g).to(t)
    a = rnd(*([] if batch == 1 else [batch]), *((k, m) if ta else (m, k)))
    bb = [] if batch == 1 or sb else [batch]
    b = rnd(*bb, *((n, k) if tb else (k, n)))
    dc = rnd(*([] if batch == 1 else [batch]), m, n)
    vec = rnd(n) if bias else None
    op_a = a.transpose(-1, -2) if ta else a
    op_b = b.transpose(-1, -2) if tb else b
    if direction == 1:
        if vec is not None:
            return lambda: torch.matmul(op_a, op_b).add_(vec)
        return lambda: torch.matmul(op_a, op_b)
    if direction == 2:
        return lambda: torch.matmul(dc, op_b.transpose(-1, -2))
    # dB summed over the batch when B is shared, plus the bias gradient.
    a2 = op_a.reshape(-1, k) if sb else op_a
    d2 = dc.reshape(-1, n) if sb else dc
    if vec is not None:
        return lambda: (torch.matmul(a2.transpose(-1, -2), d2), d2.sum(dim=-2))
    return lambda: torch.matmul(a2.transpose(-1, -2), d2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--cuda-graphs", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    for p in PROBLEMS:
        for direction in (1, 2, 4):
            ms = median_ms(torch, make_call(torch, p, args.dtype, direction), warmup_calls=3, repeats=20,
                           graphs=args.cuda_graphs)
            flops = 2.0 * p[0] * p[1] * p[2] * p[3]
            row = {"key": key(p, args.dtype, direction), "tag": p[8], "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12,
                   "cuda_graphs": args.cuda_graphs, "torch": torch.__version__}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
