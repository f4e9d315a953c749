#!/usr/bin/env python3
"""PyTorch peer for `galley bench activ`: times PyTorch's activation kernels, forward and backward
(the aten *_backward op each autograd formula calls, alone), at the sizes of issue 16's table, so
Galley's figures can be set beside them, measured in the same command on the same GPU.

Eager timings cover `inner` back-to-back calls (so one timing lasts >= ~1 ms) divided by `inner`;
--cuda-graphs replays one captured graph of the `inner` calls instead (PyTorch's kernels without its
host path). Medians of repeated CUDA-event timings after a warm-up. One JSON object per problem,
with Galley's key (activation.hpp) so rows join with `galley bench activ --json`, and GB/s of the
bytes that must move (inputs read once, the output written once), as Galley counts them.

  python3 bench/peer_activ.py --dtype f16 --layout nhwc [--activations relu,gelu_tanh] [--cuda-graphs]
"""
import argparse
import json

from peer_timing import median_ms

# Issue 16's sizes at f16: 1 MB, 51 MB (its reference 32x256x56x56) and ~400 MB.
SHAPES = [(1, 256, 32, 64), (32, 256, 56, 56), (64, 256, 112, 112)]
DEFAULTS = {"leaky_relu": (0.01, 0.0), "clip": (0.0, 6.0), "elu": (1.0, 0.0)}
READS_DST = {"relu", "sigmoid", "tanh"}


def number(v):
    # The shortest round-trip text, as Galley's key writes it (std::to_chars), with 'm' for '-'.
    text = str(int(v)) if v == int(v) and abs(v) < 1e15 else repr(v)
    return text.replace("-", "m")


def key(act, alpha, beta, direction, dtype, layout, shape):
    n, c, h, w = shape
    return (f"activ-{direction}-{dtype}-{layout}-{act}-a{number(alpha)}-b{number(beta)}"
            f"-n{n}-c{c}-h{h}-w{w}")


def ops(torch, act, alpha, beta):
    F, aten = torch.nn.functional, torch.ops.aten
    forward = {
        "relu": lambda x: F.relu(x),
        "leaky_relu": lambda x: F.leaky_relu(x, alpha),
        "clip": lambda x: F.hardtanh(x, alpha, beta),
        "elu": lambda x: F.elu(x, alpha),
        "sigmoid": lambda x: torch.sigmoid(x),
        "tanh": lambda x: torch.tanh(x),
        "gelu_erf": lambda x: F.gelu(x),
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "silu": lambda x: F.silu(x),
        "hardswish": lambda x: F.hardswish(x),
        "hardsigmoid": lambda x: F.hardsigmoid(x),
    }[act]
    # v is y for the activations whose backward reads the output (READS_DST), else x.
    backward = {
        "relu": lambda dy, v: aten.threshold_backward(dy, v, 0),
        "leaky_relu": lambda dy, v: aten.leaky_relu_backward(dy, v, alpha, False),
        "clip": lambda dy, v: aten.hardtanh_backward(dy, v, alpha, beta),
        "elu": lambda dy, v: aten.elu_backward(dy, alpha, 1, 1, False, v),
        "sigmoid": lambda dy, v: aten.sigmoid_backward(dy, v),
        "tanh": lambda dy, v: aten.tanh_backward(dy, v),
        "gelu_erf": lambda dy, v: aten.gelu_backward(dy, v),
        "gelu_tanh": lambda dy, v: aten.gelu_backward(dy, v, approximate="tanh"),
        "silu": lambda dy, v: aten.silu_backward(dy, v),
        "hardswish": lambda dy, v: aten.hardswish_backward(dy, v),
        "hardsigmoid": lambda dy, v: aten.hardsigmoid_backward(dy, v),
    }[act]
    return forward, backward


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--layout", default="nhwc", choices=["nchw", "nhwc"])
    ap.add_argument("--activations", default="relu,gelu_erf,gelu_tanh,silu,sigmoid,hardswish")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--cuda-graphs", action="store_true")
    args = ap.parse_args()

    import torch
    tdtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    fmt = torch.channels_last if args.layout == "nhwc" else torch.contiguous_format
    elem = {"f32": 4, "f16": 2, "bf16": 2}[args.dtype]
    for act in args.activations.split(","):
        alpha, beta = DEFAULTS.get(act, (0.0, 0.0))
        forward, backward = ops(torch, act, alpha, beta)
        for shape in SHAPES:
            gen = torch.Generator(device="cuda").manual_seed(1234)
            x = torch.randn(*shape, device="cuda", generator=gen).to(tdtype).contiguous(memory_format=fmt)
            dy = torch.randn(*shape, device="cuda", generator=gen).to(tdtype).contiguous(memory_format=fmt)
            v = forward(x) if act in READS_DST else x
            for direction, call, tensors in (("F", lambda: forward(x), 2), ("B", lambda: backward(dy, v), 3)):
                ms = median_ms(torch, call, warmup_calls=args.warmup, repeats=args.repeats,
                               graphs=args.cuda_graphs)
                moved = tensors * x.numel() * elem
                print(json.dumps({"key": key(act, alpha, beta, direction, args.dtype, args.layout, shape),
                                  "peer": "torch " + torch.__version__ + (" graphs" if args.cuda_graphs else " eager"),
                                  "device": torch.cuda.get_device_name(), "ms": ms, "bytes": moved,
                                  "gbps": moved / (ms * 1e-3) / 1e9}), flush=True)


if __name__ == "__main__":
    main()
