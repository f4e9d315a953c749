#!/usr/bin/env python3
"""PyTorch peer for `galley bench eltwise`: times a binary elementwise op with broadcasting, forward
and backward, on the problems Galley benches, so the figures can be set side by side from one command
on one GPU. Each line of JSON carries the galley key of its problem.

Forward is `(alpha * a) op (beta * b)` as PyTorch computes `a op b` (alpha = beta = 1, so no extra
kernels). Backward is what autograd runs for it: the gradient of each input, reduced over the axes
it was broadcast along with `sum_to_size` (for add of equal shapes PyTorch returns dy itself, no
copy: that is its real cost). Timings: warm-up, then the median of CUDA-event timings over `inner`
back-to-back calls (each timing ~1 ms or more) divided by `inner`; --cuda-graphs replays the `inner`
calls as one captured CUDA graph instead, to take PyTorch's host path out.

  python3 bench/peer_eltwise.py --dtype f16 --layout nhwc [--cuda-graphs] [--json out.json]
"""
import argparse
import json

from peer_timing import median_ms

# Bias add and same-shape ops at about 1 MB, 51 MB and 400 MB of f16 input (issue 16's sizes).
PROBLEMS = [
    ("add", (2, 64, 56, 56), (1, 64, 1, 1)),
    ("add", (32, 256, 56, 56), (1, 256, 1, 1)),
    ("add", (256, 256, 56, 56), (1, 256, 1, 1)),
    ("add", (2, 64, 56, 56), (2, 64, 56, 56)),
    ("add", (32, 256, 56, 56), (32, 256, 56, 56)),
    ("add", (256, 256, 56, 56), (256, 256, 56, 56)),
    ("mul", (32, 256, 56, 56), (1, 256, 1, 1)),
    ("mul", (32, 256, 56, 56), (1,)),
    ("div", (32, 256, 56, 56), (32, 256, 56, 56)),
]
DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def shape_text(shape):
    return "x".join(str(d) for d in shape)


def key(direction, op, dtype, layout, a, b):
    return f"eltwise-{direction}-{op}-{dtype}-{layout}-a{shape_text(a)}-b{shape_text(b)}-al1-be1"


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", choices=DTYPES, default="f16")
    parser.add_argument("--layout", choices=["nchw", "nhwc"], default="nhwc")
    parser.add_argument("--cuda-graphs", action="store_true")
    parser.add_argument("--json", help="also write every line to this file")
    args = parser.parse_args()

    import torch
    dtype = getattr(torch, DTYPES[args.dtype])
    fmt = torch.channels_last if args.layout == "nhwc" else torch.contiguous_format
    elem = torch.tensor([], dtype=dtype).element_size()
    lines = []
    for op, sa, sb in PROBLEMS:
        def make(shape, positive=False):
            t = torch.rand(shape, device="cuda", dtype=dtype) + 0.5 if positive else torch.randn(shape, device="cuda", dtype=dtype)
            return t.contiguous(memory_format=fmt) if len(shape) == 4 else t
        a, b = make(sa), make(sb, positive=(op == "div"))
        f = {"add": torch.add, "mul": torch.mul, "div": torch.div}[op]
        y = f(a, b)
        dy = make(tuple(y.shape))

        def backward():
            if op == "add":
                return dy.sum_to_size(sa), dy.sum_to_size(sb)
            if op == "mul":
                return (dy * b).sum_to_size(sa), (dy * a).sum_to_size(sb)
            return (dy / b).sum_to_size(sa), (-dy * a / (b * b)).sum_to_size(sb)

        out = numel(y.shape)
        reads = op != "add"
        for direction, fn, moved in (
            ("F", lambda: f(a, b), numel(sa) + numel(sb) + out),
            ("B", backward, out + (numel(sa) + numel(sb) if reads else 0) + numel(sa) + numel(sb)),
        ):
            ms = median_ms(torch, fn, warmup_calls=3, repeats=20, graphs=args.cuda_graphs, target_ms=1.0)
            line = {"key": key(direction, op, args.dtype, args.layout, sa, sb), "peer": "pytorch " + torch.__version__,
                    "cuda_graphs": args.cuda_graphs, "ms": ms, "gbps": moved * elem / ms / 1e6}
            print(json.dumps(line), flush=True)
            lines.append(line)
        del a, b, y, dy
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(lines, f, indent=1)


if __name__ == "__main__":
    main()
