#!/usr/bin/env python3
"""PyTorch peer for `galley bench pool`: times PyTorch's pooling ops (max_pool2d, avg_pool2d,
adaptive_avg_pool2d, adaptive_max_pool2d and their aten backward ops) on the problems of issue 16's
table, so Galley's figures can be set beside them, measured in the same command on the same GPU.

Each problem prints one JSON line with Galley's key (pool_problem_text.cpp), so rows join with
`galley bench pool --json`. GB/s counts the bytes Galley's min_bytes() counts: every input read once
and every output written once (i32 indices included where PyTorch reads or writes them). Max
backward in PyTorch reads indices, so its rows carry Galley's keep-indices key (idx1).
Timing: warm-up first, then the median of repeated CUDA-event timings, each over `inner`
back-to-back calls (>= ~1 ms) divided by `inner`; --cuda-graphs replays the calls as one CUDA graph.

  python3 bench/peer_pool.py [--dtype f16] [--layout nhwc] [--cuda-graphs] [--json out.json]
"""
import argparse
import json
import sys

from peer_timing import time_call

# (tag, n, c, h, w, mode, window, kernel, stride, pad, adaptive): 1 MB, 51 MB and 400 MB inputs in f16.
PROBLEMS = [
    ("maxpool3x3s2-1MB", 4, 64, 44, 44, "max", "kernel", 3, 2, 1, 0),
    ("maxpool3x3s2-51MB", 32, 256, 56, 56, "max", "kernel", 3, 2, 1, 0),
    ("maxpool3x3s2-400MB", 64, 256, 112, 112, "max", "kernel", 3, 2, 1, 0),
    ("globalavg-1MB", 4, 64, 44, 44, "avg_include_pad", "global", 2, 2, 0, 0),
    ("globalavg-51MB", 32, 256, 56, 56, "avg_include_pad", "global", 2, 2, 0, 0),
    ("globalavg-400MB", 64, 256, 112, 112, "avg_include_pad", "global", 2, 2, 0, 0),
    ("avgpool3x3s1-51MB", 32, 256, 56, 56, "avg_exclude_pad", "kernel", 3, 1, 1, 0),
    ("maxpool2x2s2-51MB", 32, 256, 56, 56, "max", "kernel", 2, 2, 0, 0),
    ("adaptiveavg7-51MB", 32, 256, 56, 56, "avg_include_pad", "adaptive", 2, 2, 0, 7),
]
ELEM = {"f32": 4, "f16": 2, "bf16": 2}


def out_size(size, k, s, p):
    return (size + 2 * p - k) // s + 1


def shape_out(pr):
    _, n, c, h, w, mode, window, k, s, p, a = pr
    if window == "global":
        return 1, 1
    if window == "adaptive":
        return a, a
    return out_size(h, k, s, p), out_size(w, k, s, p)


def key(pr, dtype, layout, backward, keep):
    _, n, c, h, w, mode, window, k, s, p, a = pr
    return (f"pool-{'B' if backward else 'F'}-{dtype}-{layout}-{mode}-{window}-n{n}-c{c}-h{h}-w{w}-y{k}-x{k}"
            f"-p{p}-q{p}-u{s}-v{s}-ceil0-ah{a}-aw{a}-idx{1 if keep else 0}")


def rows_for(torch, pr, dtype, layout, args):
    F = torch.nn.functional
    aten = torch.ops.aten
    tag, n, c, h, w, mode, window, k, s, p, a = pr
    tdtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    gen = torch.Generator(device="cuda").manual_seed(1234)
    x = torch.randn(n, c, h, w, device="cuda", generator=gen).to(tdtype).contiguous(memory_format=fmt)
    oh, ow = shape_out(pr)
    dy = torch.randn(n, c, oh, ow, device="cuda", generator=gen).to(tdtype).contiguous(memory_format=fmt)
    is_max = mode == "max"
    if window == "kernel" and is_max:
        fwd = lambda: F.max_pool2d(x, k, s, p)
        _, idx = F.max_pool2d(x, k, s, p, return_indices=True)
        bwd = lambda: aten.max_pool2d_with_indices_backward(dy, x, [k, k], [s, s], [p, p], [1, 1], False, idx)
    elif window == "kernel":
        inc = mode == "avg_include_pad"
        fwd = lambda: F.avg_pool2d(x, k, s, p, count_include_pad=inc)
        bwd = lambda: aten.avg_pool2d_backward(dy, x, [k, k], [s, s], [p, p], False, inc, None)
    elif is_max:
        size = (1, 1) if window == "global" else (a, a)
        fwd = lambda: F.adaptive_max_pool2d(x, size)
        _, idx = F.adaptive_max_pool2d(x, size, return_indices=True)
        bwd = lambda: aten.adaptive_max_pool2d_backward(dy, x, idx)
    else:
        size = (1, 1) if window == "global" else (a, a)
        fwd = lambda: F.adaptive_avg_pool2d(x, size)
        bwd = lambda: aten._adaptive_avg_pool2d_backward(dy, x)
    e = ELEM[dtype]
    xs, ys = n * c * h * w, n * c * oh * ow
    rows = []
    for backward, call in ((False, fwd), (True, bwd)):
        keep = backward and is_max
        if backward:
            nbytes = ys * e + xs * e + (ys * 4 if keep else 0)
        else:
            nbytes = xs * e + ys * e
        ms, times, inner = time_call(torch, call, warmup_calls=5, warmup_ms=args.warmup_ms, repeats=args.repeats,
                                     graphs=args.cuda_graphs, max_inner=200)
        rows.append({"key": key(pr, dtype, layout, backward, keep), "tag": tag, "ms": ms,
                     "gbps": nbytes / (ms * 1e-3) / 1e9, "spread_ms": [min(times), max(times)], "inner": inner,
                     "cuda_graphs": args.cuda_graphs})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f16")
    ap.add_argument("--layout", choices=["nchw", "nhwc"], default="nhwc")
    ap.add_argument("--warmup-ms", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--cuda-graphs", action="store_true", help="time replays of a CUDA graph of the calls")
    ap.add_argument("--json", help="write all rows here as one JSON document")
    args = ap.parse_args()

    import torch
    if not torch.cuda.is_available():
        sys.exit("peer_pool.py: no CUDA device")
    out = {"peer": f"PyTorch {torch.__version__}", "device": torch.cuda.get_device_name(0),
           "dtype": args.dtype, "layout": args.layout, "cuda_graphs": args.cuda_graphs, "problems": []}
    for pr in PROBLEMS:
        for row in rows_for(torch, pr, args.dtype, args.layout, args):
            out["problems"].append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
