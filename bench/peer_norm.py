#!/usr/bin/env python3
"""PyTorch peer for `galley bench bnorm|lnorm|gnorm`: times F.batch_norm (inference, training) and
its backward, F.layer_norm and F.group_norm forward and backward, at the sizes of issue 16's table
(about 1 MB, 51 MB and 400 MB of activations), so Galley's figures can be set beside it in the same
command on the same GPU.

Each problem is timed eagerly and, as the control for PyTorch's host path, as a replayed CUDA graph
holding the same calls. Warm-up first, then the median of CUDA-event timings, each covering `inner`
back-to-back calls (so one timing lasts >= ~1 ms) divided by `inner`. Backward runs through
torch.autograd.grad on a retained graph. One JSON object per problem, with Galley's key (so rows
join `galley bench ... --json`) and GB/s of the bytes that must move (Galley's min_bytes()).

  python3 bench/peer_norm.py [--dtype f16] [--layout nhwc] [--json out.json]
"""
import argparse
import json

from peer_timing import median_ms

EPS = "0.00001"
MOMENTUM = "0.1"
# (n, c, h, w) of the 1 MB, 51 MB and 400 MB fp16 points; gnorm uses 32 groups.
NCHW_SIZES = [(8, 64, 32, 32), (32, 256, 56, 56), (64, 256, 112, 112)]
# layer norm rows x hidden: 1 MB, 51 MB, 400 MB in fp16.
LN_SIZES = [(2, 256, 1024), (32, 1024, 784), (64, 4096, 784)]
ELEM = {"f32": 4, "f16": 2, "bf16": 2}


def bnorm_key(kind, dtype, layout, s):
    direction, mode = {"infer": ("F", "infer"), "train": ("F", "train"), "backward": ("B", "train")}[kind]
    n, c, h, w = s
    return f"bnorm-{direction}-{mode}-{dtype}-{layout}-n{n}-c{c}-h{h}-w{w}-e{EPS}-m{MOMENTUM}"


def gnorm_key(backward, dtype, layout, s, groups):
    n, c, h, w = s
    return f"gnorm-{'B' if backward else 'F'}-{dtype}-{layout}-n{n}-c{c}-h{h}-w{w}-g{groups}-e{EPS}"


def lnorm_key(backward, dtype, dims):
    return f"lnorm-{'B' if backward else 'F'}-{dtype}-d{'x'.join(map(str, dims))}-a{len(dims) - 1}-e{EPS}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--layout", default="nhwc", choices=["nchw", "nhwc"])
    ap.add_argument("--warmup-ms", type=float, default=100)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json", help="also write the list of results here")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F

    torch.backends.cudnn.benchmark = True
    tdtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    fmt = torch.channels_last if args.layout == "nhwc" else torch.contiguous_format
    gen = torch.Generator(device="cuda").manual_seed(1234)
    e = ELEM[args.dtype]
    results = []

    def record(key, bytes_moved, call):
        row = {"key": key, "peer": f"torch {torch.__version__}", "bytes": bytes_moved}
        for graphs in (False, True):
            name = "graph" if graphs else "eager"
            try:
                ms = median_ms(torch, call, warmup_calls=3, warmup_ms=args.warmup_ms, repeats=args.repeats,
                               graphs=graphs)
                row[name + "_ms"], row[name + "_gbps"] = ms, bytes_moved / (ms * 1e-3) / 1e9
            except RuntimeError as err:  # e.g. a backward that cannot be captured
                row[name + "_ms"], row[name + "_error"] = None, str(err)
        print(json.dumps(row), flush=True)
        results.append(row)

    for s in NCHW_SIZES:
        n, c, h, w = s
        elems = n * c * h * w
        x = torch.randn(n, c, h, w, device="cuda", generator=gen).to(tdtype).contiguous(memory_format=fmt)
        dy = torch.randn_like(x)
        weight = torch.rand(c, device="cuda", generator=gen) + 0.5
        bias = torch.randn(c, device="cuda", generator=gen)
        rm, rv = torch.zeros(c, device="cuda"), torch.ones(c, device="cuda")
        record(bnorm_key("infer", args.dtype, args.layout, s), 2 * elems * e + 4 * c * 4,
               lambda: F.batch_norm(x, rm, rv, weight, bias, training=False, eps=1e-5))
        record(bnorm_key("train", args.dtype, args.layout, s), 2 * elems * e + 8 * c * 4,
               lambda: F.batch_norm(x, rm, rv, weight, bias, training=True, momentum=0.1, eps=1e-5))
        xg, wg, bg = x.detach().requires_grad_(), weight.detach().requires_grad_(), bias.detach().requires_grad_()
        y = F.batch_norm(xg, rm, rv, wg, bg, training=True, momentum=0.1, eps=1e-5)
        record(bnorm_key("backward", args.dtype, args.layout, s), 3 * elems * e + 5 * c * 4,
               lambda: torch.autograd.grad(y, (xg, wg, bg), dy, retain_graph=True))
        groups = 32
        record(gnorm_key(False, args.dtype, args.layout, s, groups), 2 * elems * e + 2 * c * 4 + 2 * n * groups * 4,
               lambda: F.group_norm(x, groups, weight, bias, eps=1e-5))
        yg = F.group_norm(xg, groups, wg, bg, eps=1e-5)
        record(gnorm_key(True, args.dtype, args.layout, s, groups), 3 * elems * e + 3 * c * 4 + 2 * n * groups * 4,
               lambda: torch.autograd.grad(yg, (xg, wg, bg), dy, retain_graph=True))
        del x, dy, xg, y, yg
        torch.cuda.empty_cache()

    for dims in LN_SIZES:
        rows, hidden = dims[0] * dims[1], dims[2]
        x = torch.randn(*dims, device="cuda", generator=gen).to(tdtype)
        dy = torch.randn_like(x)
        weight = torch.rand(hidden, device="cuda", generator=gen) + 0.5
        bias = torch.randn(hidden, device="cuda", generator=gen)
        elems = rows * hidden
        record(lnorm_key(False, args.dtype, dims), 2 * elems * e + 2 * hidden * 4 + 2 * rows * 4,
               lambda: F.layer_norm(x, (hidden,), weight, bias, eps=1e-5))
        xg, wg, bg = x.detach().requires_grad_(), weight.detach().requires_grad_(), bias.detach().requires_grad_()
        y = F.layer_norm(xg, (hidden,), wg, bg, eps=1e-5)
        record(lnorm_key(True, args.dtype, dims), 3 * elems * e + 3 * hidden * 4 + 2 * rows * 4,
               lambda: torch.autograd.grad(y, (xg, wg, bg), dy, retain_graph=True))
        del x, dy, xg, y
        torch.cuda.empty_cache()

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
