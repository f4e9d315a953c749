#!/usr/bin/env python3
"""PyTorch peer for `galley run --model NAME`: torchvision's network of the same name (random
weights, inference mode), timed eagerly and replaying one CUDA graph, images/s from the median of
timed iterations after warm-up, and the peak memory PyTorch's allocator reports.

  python3 bench/peer_models.py --model resnet50 --batch 32 [--dtype f32] [--layout nchw] [--compile] [--json out.json]

--compile adds torch.compile(mode="reduce-overhead") (Inductor's kernels replayed as CUDA graphs),
timed after its compilation and warm-up, as compile_ms / compile_images_per_s.
"""
import argparse
import json
import sys
import time

from peer_timing import median_ms


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    parser.add_argument("--layout", default="nchw", choices=["nchw", "nhwc"])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    fmt = torch.channels_last if args.layout == "nhwc" else torch.contiguous_format
    model = getattr(torchvision.models, args.model)(weights=None).eval().cuda().to(dtype).to(memory_format=fmt)
    x = torch.randn(args.batch, 3, args.size, args.size, device="cuda", dtype=dtype).contiguous(memory_format=fmt)
    out = {"model": args.model, "batch": args.batch, "dtype": args.dtype, "layout": args.layout, "torch": torch.__version__}
    # One iteration per timed sample (a network lasts milliseconds); the warm-up is done here, before the peak
    # memory counter restarts, so cuDNN's benchmark search on the first calls is not in peak_bytes.
    timing = dict(warmup_calls=0, repeats=args.iters, inner=1)
    with torch.inference_mode():
        # The process's first iteration after the model is on the device: cudnn.benchmark searches
        # every convolution's algorithms here, in every new process.
        torch.cuda.synchronize()
        first_start = time.perf_counter()
        model(x)
        torch.cuda.synchronize()
        out["first_iteration_ms"] = (time.perf_counter() - first_start) * 1e3
        for _ in range(5):
            model(x)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        out["eager_ms"] = median_ms(torch, lambda: model(x), **timing)
        out["peak_bytes"] = torch.cuda.max_memory_allocated()
        out["graph_ms"] = median_ms(torch, lambda: model(x), graphs=True, **timing)
        if args.compile:
            compiled = torch.compile(model, mode="reduce-overhead")
            out["compile_ms"] = median_ms(torch, lambda: compiled(x), warmup_calls=5, repeats=args.iters, inner=1)
            out["compile_images_per_s"] = args.batch * 1000 / out["compile_ms"]
    out["eager_images_per_s"] = args.batch * 1000 / out["eager_ms"]
    out["graph_images_per_s"] = args.batch * 1000 / out["graph_ms"]
    print(json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    sys.exit(main())
