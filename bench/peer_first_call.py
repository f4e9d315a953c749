#!/usr/bin/env python3
"""PyTorch's search cost, the peer of `galley tune`: with torch.backends.cudnn.benchmark = True the
first conv2d call of each new shape times cuDNN's algorithms before it runs. This script times that
first call for every problem of a MIOpenDriver-syntax list in one fresh process (inputs made and
the context warmed on an unrelated shape first, so only the search and the call are counted), and a
second call of the same shape as the control. The sum of the first calls is what `galley tune` over
the same list is compared with (issue 15's figure: galley tune <= 2x).

  python3 bench/peer_first_call.py --file conv_problems.txt --dtype f16 --layout nhwc [--json out.json]
"""
import argparse
import json
import math
import sys
import time

from peer_conv import key, out_size, parse_problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", required=True)
    parser.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16"])
    parser.add_argument("--layout", default="nhwc", choices=["nchw", "nhwc"])
    parser.add_argument("--json")
    args = parser.parse_args()

    import torch

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    F = torch.nn.functional
    tdtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    fmt = torch.channels_last if args.layout == "nhwc" else torch.contiguous_format
    problems = parse_problems(args.file)

    # Context, cuDNN handle and kernels of an unrelated shape loaded before anything is timed.
    warm = torch.randn(1, 8, 9, 9, device="cuda", dtype=tdtype).contiguous(memory_format=fmt)
    F.conv2d(warm, torch.randn(8, 8, 3, 3, device="cuda", dtype=tdtype).contiguous(memory_format=fmt))
    torch.cuda.synchronize()

    gen = torch.Generator(device="cuda").manual_seed(1234)
    rows = []
    seen = set()
    for p in problems:
        k = key(p, args.dtype, args.layout)
        if k in seen:  # the same shape again would hit PyTorch's cache
            continue
        seen.add(k)
        x = torch.randn(p["n"], p["c"], p["h"], p["w"], device="cuda", generator=gen).to(tdtype)
        w = torch.randn(p["k"], p["c"] // p["g"], p["y"], p["x"], device="cuda", generator=gen).to(tdtype)
        x = x.contiguous(memory_format=fmt)
        w = (w / math.sqrt(w[0].numel())).contiguous(memory_format=fmt)
        stride, padding, dilation = (p["u"], p["v"]), (p["p"], p["q"]), (p["l"], p["j"])
        torch.cuda.synchronize()

        def call():
            return F.conv2d(x, w, None, stride, padding, dilation, p["g"])

        t0 = time.perf_counter()
        y = call()
        torch.cuda.synchronize()
        first_ms = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        second_ms = (time.perf_counter() - t0) * 1e3
        ho = out_size(p["h"], p["p"], p["l"], p["y"], p["u"])
        wo = out_size(p["w"], p["q"], p["j"], p["x"], p["v"])
        assert tuple(y.shape) == (p["n"], p["k"], ho, wo)
        rows.append({"key": k, "tag": p["tag"], "first_call_ms": first_ms, "second_call_ms": second_ms})

    total = sum(r["first_call_ms"] for r in rows)
    out = {"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "device": torch.cuda.get_device_name(),
           "dtype": args.dtype, "layout": args.layout, "problems": rows, "total_first_call_ms": total,
           "total_second_call_ms": sum(r["second_call_ms"] for r in rows)}
    for r in rows:
        print(f"{r['tag'] or r['key']:24s} first {r['first_call_ms']:9.2f} ms   second {r['second_call_ms']:8.3f} ms")
    print(f"total first calls {total:.1f} ms over {len(rows)} shapes (cudnn.benchmark search included)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
