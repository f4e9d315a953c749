#!/usr/bin/env python3
"""PyTorch peer for issue 16's bandwidth figures: times the CNN ops (forward and backward) that
`galley bench <op>` times, at fp16 NHWC by default, at three sizes, eagerly and replaying a CUDA
graph (the kernels' own pace), and reports GB/s of the bytes that must move (every input read once,
every output written once), the same definition as Galley's problem min_bytes().

  python3 bench/peer_ops.py [--dtype f16] [--layout nhwc] [--sizes small,mid,large] [--json out.json]

Sizes (N, C, H, W): small 1x128x64x64 (1 MB in f16), mid 32x256x56x56 (51 MB, the issue's reference
size), large 256x256x56x56 (411 MB). Each timing is a batch of `inner` back-to-back calls lasting
about 1 ms, divided by `inner`; the median over repeats after a warm-up (bench/peer_timing.py).
"""
import argparse
import json
import sys

from peer_timing import median_ms

SIZES = {"small": (1, 128, 64, 64), "mid": (32, 256, 56, 56), "large": (256, 256, 56, 56)}


def cases(torch, shape, dtype, layout):
    """(name, direction, callable, bytes that must move) for every op at one shape."""
    F = torch.nn.functional
    aten = torch.ops.aten
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    n, c, h, w = shape
    gen = torch.Generator(device="cuda").manual_seed(7)

    def rand(*dims, fmt_=fmt):
        t = torch.randn(*dims, device="cuda", generator=gen).to(dtype)
        return t.contiguous(memory_format=fmt_) if len(dims) == 4 else t

    x, dy, other = rand(n, c, h, w), rand(n, c, h, w), rand(n, c, h, w)
    size = x.numel() * x.element_size()
    bias = rand(1, c, 1, 1)
    gamma = torch.ones(c, device="cuda", dtype=torch.float32)
    beta = torch.zeros(c, device="cuda", dtype=torch.float32)
    rmean = torch.zeros(c, device="cuda", dtype=torch.float32)
    rvar = torch.ones(c, device="cuda", dtype=torch.float32)
    out = []
    # Activations.
    out.append(("relu", "F", lambda: F.relu(x), 2 * size))
    out.append(("relu", "B", lambda: aten.threshold_backward(dy, x, 0), 3 * size))
    out.append(("gelu", "F", lambda: F.gelu(x), 2 * size))
    out.append(("gelu", "B", lambda: aten.gelu_backward(dy, x), 3 * size))
    out.append(("sigmoid", "F", lambda: torch.sigmoid(x), 2 * size))
    out.append(("silu", "F", lambda: F.silu(x), 2 * size))
    # Elementwise.
    out.append(("add", "F", lambda: torch.add(x, other), 3 * size))
    out.append(("add_bias", "F", lambda: torch.add(x, bias), 2 * size))
    out.append(("add_bias", "B", lambda: dy.sum(dim=(0, 2, 3), keepdim=True), size))
    out.append(("mul", "F", lambda: torch.mul(x, other), 3 * size))
    # Batch norm: inference, training forward, backward (saved statistics from one training call).
    out.append(("bnorm_infer", "F", lambda: F.batch_norm(x, rmean, rvar, gamma, beta, False), 2 * size))
    out.append(("bnorm_train", "F", lambda: aten.native_batch_norm(x, gamma, beta, rmean.clone(), rvar.clone(), True, 0.1, 1e-5), 2 * size))
    _, save_mean, save_invstd = aten.native_batch_norm(x, gamma, beta, None, None, True, 0.1, 1e-5)
    out.append(("bnorm_train", "B", lambda: aten.native_batch_norm_backward(dy, x, gamma, None, None, save_mean, save_invstd, True, 1e-5, [True, True, True]), 3 * size))
    # Group norm (32 groups) and layer norm over C (channels-last rows).
    gg, gb = gamma.to(dtype), beta.to(dtype)  # group_norm's affine takes the input's dtype
    out.append(("gnorm", "F", lambda: F.group_norm(x, 32, gg, gb), 2 * size))
    xrows = x.permute(0, 2, 3, 1).reshape(-1, c) if layout == "nhwc" else x.reshape(-1, w)
    lshape = (c,) if layout == "nhwc" else (w,)
    lg = torch.ones(lshape, device="cuda", dtype=dtype)
    lb = torch.zeros(lshape, device="cuda", dtype=dtype)
    out.append(("lnorm", "F", lambda: F.layer_norm(xrows, lshape, lg, lb), 2 * size))
    _, lmean, lrstd = aten.native_layer_norm(xrows, lshape, lg, lb, 1e-5)
    dyrows = torch.randn_like(xrows)
    out.append(("lnorm", "B", lambda: aten.native_layer_norm_backward(dyrows, xrows, lshape, lmean, lrstd, lg, lb, [True, True, True]), 3 * size))
    # Pooling.
    pooled, indices = aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])
    pool_bytes = size + pooled.numel() * pooled.element_size()
    dpooled = torch.randn_like(pooled)
    out.append(("maxpool3x3s2", "F", lambda: F.max_pool2d(x, 3, 2, 1), pool_bytes))
    out.append(("maxpool3x3s2", "B", lambda: aten.max_pool2d_with_indices_backward(dpooled, x, [3, 3], [2, 2], [1, 1], [1, 1], False, indices), size + 2 * pooled.numel() * pooled.element_size()))
    out.append(("avgpool3x3s2", "F", lambda: F.avg_pool2d(x, 3, 2, 1), pool_bytes))
    out.append(("global_avgpool", "F", lambda: F.adaptive_avg_pool2d(x, 1), size))
    dg = rand(n, c, 1, 1)
    out.append(("global_avgpool", "B", lambda: aten._adaptive_avg_pool2d_backward(dg, x), size))
    # Softmax over channels.
    y = torch.softmax(x, dim=1)
    out.append(("softmax_c", "F", lambda: torch.softmax(x, dim=1), 2 * size))
    out.append(("softmax_c", "B", lambda: aten._softmax_backward_data(dy, y, 1, dtype), 3 * size))
    # Reductions and data movement.
    out.append(("reduce_sum_hw", "F", lambda: x.sum(dim=(2, 3)), size))
    out.append(("concat2_c", "F", lambda: torch.cat([x, other], dim=1), 4 * size))
    out.append(("to_nchw" if layout == "nhwc" else "to_nhwc", "F",
                lambda: x.contiguous(memory_format=torch.contiguous_format if layout == "nhwc" else torch.channels_last), 2 * size))
    out.append(("copy", "F", lambda: other.copy_(x), 2 * size))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16"])
    parser.add_argument("--layout", default="nhwc", choices=["nchw", "nhwc"])
    parser.add_argument("--sizes", default="small,mid,large")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    import torch

    dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    rows = []
    for size_name in args.sizes.split(","):
        shape = SIZES[size_name]
        for name, direction, call, nbytes in cases(torch, shape, dtype, args.layout):
            try:
                timing = dict(warmup_calls=3, warmup_ms=20.0, repeats=args.repeats, max_inner=200)
                eager = median_ms(torch, call, **timing)
                graph = median_ms(torch, call, graphs=True, **timing)
            except RuntimeError as e:  # one op PyTorch refuses must not cost the others' figures
                print(f"{size_name:6s} {name:16s} {direction} error: {e}", flush=True)
                rows.append({"op": name, "direction": direction, "size": size_name, "error": str(e)})
                continue
            row = {"op": name, "direction": direction, "size": size_name, "shape": list(shape), "dtype": args.dtype,
                   "layout": args.layout, "bytes": nbytes, "eager_ms": eager, "graph_ms": graph,
                   "eager_gbps": nbytes / eager / 1e6, "graph_gbps": nbytes / graph / 1e6}
            rows.append(row)
            print(f"{size_name:6s} {name:16s} {direction} eager {eager:8.4f} ms {row['eager_gbps']:8.1f} GB/s   "
                  f"graph {graph:8.4f} ms {row['graph_gbps']:8.1f} GB/s", flush=True)
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
