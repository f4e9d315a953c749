#!/usr/bin/env python3
"""PyTorch peer for `galley bench softmax` and `galley bench reduce`: times torch.softmax /
torch.log_softmax (forward and backward through torch.ops.aten._softmax_backward_data /
_log_softmax_backward_data) and torch.sum / torch.mean with keepdim (backward: the broadcast
expand-and-scale autograd does) on the issue's sizes, so Galley's figures can be set beside it.

Each problem is timed eagerly and replayed from a CUDA graph (PyTorch's kernels without its host
path): warm-up first, then the median of CUDA-event timings of `inner` back-to-back calls divided
by `inner`. One JSON object per problem and mode, carrying the Galley key so rows join with
`galley bench ... --json`.

  python3 bench/peer_softmax_reduce.py [--dtype f16] [--repeats 20] > peer.jsonl
"""
import argparse
import json

import torch

from peer_timing import median_ms

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

# (galley shape as N,C,H,W logical dims, layout, axis): the issue's 51 MB fp16 problem and its
# 1 MB and 400 MB neighbours, channels (NCHW and NHWC) and a transformer-style last axis.
SOFTMAX = [
    ((32, 256, 56, 56), "nhwc", 1), ((32, 256, 56, 56), "nchw", 1),
    ((2, 64, 64, 64), "nhwc", 1), ((64, 512, 56, 56), "nhwc", 1),
    ((4096, 1000), "nchw", 1), ((32768, 4096), "nchw", 1),
]
# (shape, axes): global average pool (NCHW and NHWC-as-row-major), the bias gradient of a linear.
REDUCE = [((32, 256, 56, 56), (2, 3)), ((32, 56, 56, 256), (1, 2)), ((2, 64, 64, 64), (2, 3)),
          ((64, 512, 56, 56), (2, 3)), ((32768, 4096), (0,))]


def softmax_key(dims, layout, axis, log, backward, dtype):
    return (f"softmax-{'B' if backward else 'F'}-{dtype}-{layout}-{'logsoftmax' if log else 'softmax'}"
            f"-a{axis}-s{'x'.join(map(str, dims))}")


def reduce_key(dims, axes, op, backward, dtype):
    return (f"reduce-{'B' if backward else 'F'}-{dtype}-{op}-a{'.'.join(map(str, axes))}"
            f"-s{'x'.join(map(str, dims))}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="f16", choices=DTYPES)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    dt = DTYPES[args.dtype]
    esize = torch.tensor([], dtype=dt).element_size()
    for dims, layout, axis in SOFTMAX:
        x = torch.randn(*dims, device="cuda", dtype=dt)
        if layout == "nhwc":
            x = x.to(memory_format=torch.channels_last)
        for log in (False, True):
            f = torch.log_softmax if log else torch.softmax
            y = f(x, axis)
            dy = torch.randn_like(y)
            bwd = torch.ops.aten._log_softmax_backward_data if log else torch.ops.aten._softmax_backward_data
            for backward, fn in ((False, lambda: f(x, axis)), (True, lambda: bwd(dy, y, axis, dt))):
                for graph in (False, True):
                    ms = median_ms(torch, fn, warmup_calls=3, repeats=args.repeats, graphs=graph)
                    moved = x.numel() * esize * (3 if backward else 2)
                    print(json.dumps({"key": softmax_key(dims, layout, axis, log, backward, args.dtype),
                                      "mode": "graph" if graph else "eager", "ms": ms, "gbps": moved / ms / 1e6}))
    for dims, axes in REDUCE:
        x = torch.randn(*dims, device="cuda", dtype=dt)
        for op in ("sum", "mean"):
            f = torch.sum if op == "sum" else torch.mean
            y = f(x, dim=axes, keepdim=True)
            count = x.numel() // y.numel()
            scale = 1.0 / count if op == "mean" else 1.0
            dy = torch.randn_like(y)
            for backward, fn in ((False, lambda: f(x, dim=axes, keepdim=True)),
                                 (True, lambda: (dy * scale).expand_as(x).contiguous())):
                for graph in (False, True):
                    ms = median_ms(torch, fn, warmup_calls=3, repeats=args.repeats, graphs=graph)
                    moved = (x.numel() + y.numel()) * esize
                    print(json.dumps({"key": reduce_key(dims, axes, op, backward, args.dtype),
                                      "mode": "graph" if graph else "eager", "ms": ms, "gbps": moved / ms / 1e6}))


if __name__ == "__main__":
    main()
