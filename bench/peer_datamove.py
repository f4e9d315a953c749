#!/usr/bin/env python3
"""PyTorch as the peer of `galley bench concat|split|transpose|pad|reorder` (issue 16).

Times on cuda:0 the data-movement problems that the galley commands printed below reproduce, at
three sizes of the issue's fp16 NHWC activation (1 MB: 32x256x8x8, 51 MB: 32x256x56x56, 400 MB:
256x256x56x56), forward and backward, eagerly and replayed from a CUDA graph: device events
around batches of calls after warm-up, the median per call. Bytes that must move = every input
read once plus every output written once (Galley's min_bytes), so GB/s compare directly.
Prints one JSON object per problem with the Galley key and the command that times Galley on it.
"""
import argparse
import json

from peer_timing import median_ms

DIMS = {"1MB": (32, 256, 8, 8), "51MB": (32, 256, 56, 56), "400MB": (256, 256, 56, 56)}


def dims_text(dims, sep):
    return sep.join(str(d) for d in dims)


def problems(torch, dims):
    """(galley key, galley bench command, bytes, make_inputs, fn) per problem."""
    F = torch.nn.functional
    n, c, h, w = dims
    cl = torch.channels_last
    elem = 2
    total = n * c * h * w * elem
    sizes = [c // 4] * 4
    out = []

    def nhwc(shape):
        return torch.randn(shape, device="cuda", dtype=torch.float16).contiguous(memory_format=cl)

    parts_key = f"a1-d{dims_text(dims, 'x')}-s{dims_text(sizes, '.')}"
    parts_flags = f"--dims {dims_text(dims, ',')} --axis 1 --sizes {dims_text(sizes, ',')} --dtype f16 --layout nhwc"
    out.append((f"concat-f16-nhwc-{parts_key}", f"galley bench concat {parts_flags}", 2 * total,
                lambda: [nhwc((n, s, h, w)) for s in sizes], lambda xs: torch.cat(xs, dim=1)))
    out.append((f"split-f16-nhwc-{parts_key}", f"galley bench split {parts_flags}", 2 * total,
                lambda: [nhwc(dims)],
                lambda xs: [t.contiguous(memory_format=cl) for t in torch.split(xs[0], sizes, dim=1)]))
    for perm, name in (((0, 2, 3, 1), "nchw->nhwc"), ((0, 3, 1, 2), "nhwc->nchw")):
        src = dims if perm == (0, 2, 3, 1) else (n, h, w, c)
        out.append((f"transpose-f16-d{dims_text(src, 'x')}-p{dims_text(perm, '.')}",
                    f"galley bench transpose --dims {dims_text(src, ',')} --perm {dims_text(perm, ',')} --dtype f16",
                    2 * total, lambda src=src: [torch.randn(src, device="cuda", dtype=torch.float16)],
                    lambda xs, perm=perm: xs[0].permute(*perm).contiguous()))
    padded = n * c * (h + 2) * (w + 2) * elem
    pad_flags = f"--dims {dims_text(dims, ',')} --before 0,0,1,1 --after 0,0,1,1 --dtype f16 --layout nhwc"
    out.append((f"pad-F-f16-nhwc-d{dims_text(dims, 'x')}-b0.0.1.1-e0.0.1.1-v0", f"galley bench pad {pad_flags}",
                total + padded, lambda: [nhwc(dims)], lambda xs: F.pad(xs[0], (1, 1, 1, 1))))
    out.append((f"pad-B-f16-nhwc-d{dims_text(dims, 'x')}-b0.0.1.1-e0.0.1.1-v0", f"galley bench pad {pad_flags} -F 2",
                2 * total, lambda: [nhwc((n, c, h + 2, w + 2))],
                lambda xs: xs[0][:, :, 1:-1, 1:-1].contiguous(memory_format=cl)))
    out.append((f"reorder-f32-nhwc-f16-nhwc-d{dims_text(dims, 'x')}",
                f"galley bench reorder --dims {dims_text(dims, ',')} --dtype f32 --layout nhwc --to-dtype f16",
                total * 3, lambda: [torch.randn(dims, device="cuda").contiguous(memory_format=cl)],
                lambda xs: xs[0].to(torch.float16)))
    out.append((f"reorder-f16-nchw-f16-nhwc-d{dims_text(dims, 'x')}",
                f"galley bench reorder --dims {dims_text(dims, ',')} --dtype f16 --layout nchw --to-layout nhwc",
                2 * total, lambda: [torch.randn(dims, device="cuda", dtype=torch.float16)],
                lambda xs: xs[0].contiguous(memory_format=cl)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1MB,51MB,400MB", help="comma list of " + ",".join(DIMS))
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--batch", type=int, default=10, help="calls per timed sample")
    args = parser.parse_args()
    import torch

    for size in args.sizes.split(","):
        for key, command, nbytes, make, fn in problems(torch, DIMS[size]):
            xs = make()
            timing = dict(warmup_calls=args.warmup, repeats=args.repeats, inner=args.batch)
            eager = median_ms(torch, lambda: fn(xs), **timing)
            replay = median_ms(torch, lambda: fn(xs), graphs=True, **timing)
            print(json.dumps({"size": size, "key": key, "galley_command": command + " --device cuda:0",
                              "bytes": nbytes, "eager_ms": eager, "eager_GBps": nbytes / eager / 1e6,
                              "graph_ms": replay, "graph_GBps": nbytes / replay / 1e6,
                              "torch": torch.__version__}), flush=True)
            del xs


if __name__ == "__main__":
    main()
