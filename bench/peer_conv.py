#!/usr/bin/env python3
"""PyTorch peer for `galley bench conv`: times torch.nn.functional.conv2d (cuDNN behind it) on the
problems of a MIOpenDriver-syntax list (shared/bench/conv_problems.txt) so Galley's figures can be
set beside it, measured in the same command on the same GPU.

Settings match issue 3's reference figures: torch.backends.cudnn.benchmark = True (cuDNN times
its algorithms on the first call of each shape), TF32 off for both cuDNN and matmul, random normal
data, warm-up first, then the median of repeated CUDA-event timings. Each timing covers `inner`
back-to-back calls (chosen so one timing lasts >= ~1 ms) divided by `inner`.

  python3 bench/peer_conv.py --file conv_problems.txt --dtype f16 --layout nhwc [--json out.json]
  python3 bench/peer_conv.py --file conv_problems.txt --all --json out.json   # the 4 configurations

--bias, --residual and --activ relu (forward only) time PyTorch's unfused sequence of a fused Galley
problem, as torchvision's blocks run it: conv2d with its bias, the residual added in place, relu in
place; the key carries Galley's epilogue suffix so the rows join `galley bench conv --bias ...`.

--cuda-graphs is the control for PyTorch's own host path: each timing replays one CUDA graph that
holds the `inner` calls (captured after the warm-up), so the peer runs at its kernels' pace, as
Galley's vendor solvers do once they replay a pointer set's calls as a graph.
"""
import argparse
import json
import math
import sys

from peer_timing import time_call

CONFIGS = [("f32", "nchw"), ("f16", "nchw"), ("f16", "nhwc"), ("bf16", "nhwc")]
FLAG_FIELDS = {"-n": "n", "-c": "c", "-H": "h", "-W": "w", "-k": "k", "-y": "y", "-x": "x", "-p": "p",
               "-q": "q", "-u": "u", "-v": "v", "-l": "l", "-j": "j", "-g": "g"}


def parse_problems(path):
    problems = []
    with open(path) as f:
        for line in f:
            body, _, tag = line.partition("#")
            words = body.split()
            if not words:
                continue
            if words[0].startswith("conv"):
                words = words[1:]
            p = {"n": 1, "c": 1, "h": 1, "w": 1, "k": 1, "y": 1, "x": 1, "p": 0, "q": 0, "u": 1, "v": 1,
                 "l": 1, "j": 1, "g": 1}
            for flag, value in zip(words[0::2], words[1::2]):
                if flag == "-F":
                    continue
                if flag not in FLAG_FIELDS:
                    sys.exit(f"unknown flag {flag} in: {line.strip()}")
                p[FLAG_FIELDS[flag]] = int(value)
            p["tag"] = tag.strip()
            problems.append(p)
    return problems


def out_size(size, pad, dil, k, stride):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


DIRECTION_LETTERS = {1: "F", 2: "B", 4: "W"}


def key(p, dtype, layout, direction=1, epilogue=None):
    # Galley's canonical key text (conv_problem.hpp) so rows can be joined with `galley bench --json`;
    # a fused epilogue appends -bias, -res and -<activation>-a<alpha>-b<beta> as ConvEpilogue does.
    text = (f"conv-{DIRECTION_LETTERS[direction]}-{dtype}-{layout}-n{p['n']}-c{p['c']}-h{p['h']}-w{p['w']}-k{p['k']}-y{p['y']}-x{p['x']}"
            f"-p{p['p']}-q{p['q']}-u{p['u']}-v{p['v']}-l{p['l']}-j{p['j']}-g{p['g']}")
    if epilogue:
        text += "-bias" if epilogue["bias"] else ""
        text += "-res" if epilogue["residual"] else ""
        text += f"-{epilogue['activ']}-a0-b0" if epilogue["activ"] else ""
    return text


def time_problem(torch, p, dtype, layout, warmup_ms, repeats, cuda_graphs=False, direction=1, epilogue=None):
    F = torch.nn.functional
    tdtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    gen = torch.Generator(device="cuda").manual_seed(1234)
    x = torch.randn(p["n"], p["c"], p["h"], p["w"], device="cuda", generator=gen).to(tdtype)
    w = torch.randn(p["k"], p["c"] // p["g"], p["y"], p["x"], device="cuda", generator=gen).to(tdtype)
    x = x.contiguous(memory_format=fmt)
    w = (w / math.sqrt(w[0].numel())).contiguous(memory_format=fmt)

    stride, padding, dilation = (p["u"], p["v"]), (p["p"], p["q"]), (p["l"], p["j"])
    ho = out_size(p["h"], p["p"], p["l"], p["y"], p["u"])
    wo = out_size(p["w"], p["q"], p["j"], p["x"], p["v"])
    if direction == 1 and epilogue:
        b = torch.randn(p["k"], device="cuda", generator=gen).to(tdtype) if epilogue["bias"] else None
        r = (torch.randn(p["n"], p["k"], ho, wo, device="cuda", generator=gen).to(tdtype).contiguous(memory_format=fmt)
             if epilogue["residual"] else None)

        def call():
            y = F.conv2d(x, w, b, stride, padding, dilation, p["g"])
            if r is not None:
                y += r
            if epilogue["activ"] == "relu":
                F.relu_(y)
            return y
        want_shape = (p["n"], p["k"], ho, wo)
    elif direction == 1:
        def call():
            return F.conv2d(x, w, None, stride, padding, dilation, p["g"])
        want_shape = (p["n"], p["k"], ho, wo)
    else:
        # What autograd calls for conv2d's backward (cuDNN's backward-data or backward-filter),
        # asked for the one gradient the direction names.
        dy = torch.randn(p["n"], p["k"], ho, wo, device="cuda", generator=gen).to(tdtype).contiguous(memory_format=fmt)
        mask = [direction == 2, direction == 4, False]
        index = 0 if direction == 2 else 1

        def call():
            return torch.ops.aten.convolution_backward(dy, x, w, None, stride, padding, dilation, False, [0, 0],
                                                       p["g"], mask)[index]
        want_shape = tuple(x.shape) if direction == 2 else tuple(w.shape)

    y = call()  # cudnn.benchmark picks its algorithm here
    timing = time_call(torch, call, warmup_calls=5, warmup_ms=warmup_ms, repeats=repeats, graphs=cuda_graphs,
                       max_inner=200)
    ms, times = timing.ms, timing.samples
    flops = 2.0 * p["n"] * p["k"] * ho * wo * (p["c"] // p["g"]) * p["y"] * p["x"]
    assert tuple(y.shape) == want_shape
    return {"key": key(p, dtype, layout, direction, epilogue), "tag": p["tag"], "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12,
            "spread_ms": [min(times), max(times)], "inner": timing.inner, "cuda_graphs": cuda_graphs}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", required=True)
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    ap.add_argument("--layout", choices=["nchw", "nhwc"], default="nchw")
    ap.add_argument("--all", action="store_true", help="the four configurations of issue 3")
    ap.add_argument("--warmup-ms", type=float, default=50.0)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--cuda-graphs", action="store_true",
                    help="time replays of a CUDA graph of the calls (the control for PyTorch's host path)")
    ap.add_argument("--direction", type=int, choices=[1, 2, 4], default=1,
                    help="1 forward, 2 backward data, 4 backward weights (MIOpenDriver's -F)")
    ap.add_argument("--bias", action="store_true", help="forward with a bias per output channel")
    ap.add_argument("--residual", action="store_true", help="forward, then add a tensor shaped as y")
    ap.add_argument("--activ", choices=["relu"], help="forward, then this activation, in place")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()
    epilogue = None
    if args.bias or args.residual or args.activ:
        if args.direction != 1:
            sys.exit("peer_conv.py: --bias, --residual and --activ are forward only (--direction 1)")
        epilogue = {"bias": args.bias, "residual": args.residual, "activ": args.activ}

    import torch
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    if not torch.cuda.is_available():
        sys.exit("peer_conv.py: no CUDA device")

    problems = parse_problems(args.file)
    configs = CONFIGS if args.all else [(args.dtype, args.layout)]
    out = {"peer": f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}",
           "device": torch.cuda.get_device_name(0), "cudnn_benchmark": True, "tf32": False,
           "cuda_graphs": args.cuda_graphs, "direction": args.direction, "epilogue": epilogue, "configs": []}
    for dtype, layout in configs:
        rows = [time_problem(torch, p, dtype, layout, args.warmup_ms, args.repeats, args.cuda_graphs, args.direction,
                             epilogue)
                for p in problems]
        geo = math.exp(sum(math.log(r["tflops"]) for r in rows) / len(rows))
        out["configs"].append({"dtype": dtype, "layout": layout, "geomean_tflops": geo, "problems": rows})
        print(f"# {out['peer']} on {out['device']}: {dtype} {layout}{' (CUDA graphs)' if args.cuda_graphs else ''}")
        for r in rows:
            print(f"{r['tag']:18s} {r['ms']:9.4f} ms {r['tflops']:8.2f} TFLOP/s")
        print(f"geomean {dtype} {layout}: {geo:.2f} TFLOP/s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
