#!/usr/bin/env python3
"""PyTorch as the peer of `galley bench transfer` and `galley bench alloc` (issue 2).

Times, on cuda:0 and with the same method as Galley (host wall clock around copy + synchronize,
median of repeats after warm-up, GB = 1e9 bytes):
  - H2D and D2H from pageable and pinned host memory, and D2D, at each size (default 1 GiB);
  - cudaMalloc + cudaFree through ctypes on the CUDA runtime PyTorch loaded (the raw cost the
    caching allocator avoids), and PyTorch's own cache hit (caching_allocator_alloc + delete,
    torch.empty + del; these include Python's call overhead), at 1 MiB and 1 GiB.

With --galley-transfer/--galley-alloc (the --json output of the galley commands from the same
run) it also prints Galley/PyTorch ratios against the issue's targets. Writes JSON to --out.
"""
import argparse
import ctypes
import glob
import json
import os
import statistics
import sys
import time

GiB = 1 << 30
MiB = 1 << 20


def parse_size(text):
    units = {"K": 1 << 10, "M": MiB, "G": GiB}
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def timed(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    return {"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds),
            "repeats": repeats}


def transfers(torch, size, warmup, repeats):
    dev = torch.device("cuda:0")
    sync = torch.cuda.synchronize
    # A counting pattern, not zeros: nothing here may get faster on special data.
    pageable_src = torch.arange(size // 4, dtype=torch.int32).view(torch.uint8)
    pageable_dst = torch.empty(size, dtype=torch.uint8)
    pageable_dst.fill_(0xA5)
    pinned_src = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    pinned_src.copy_(pageable_src)
    pinned_dst = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    pinned_dst.fill_(0xA5)
    a = torch.empty(size, dtype=torch.uint8, device=dev)
    b = torch.empty(size, dtype=torch.uint8, device=dev)
    a.fill_(1)
    b.fill_(2)
    sync()

    def op(dst, src):
        def run():
            dst.copy_(src, non_blocking=True)
            sync()
        return run

    rows = []
    for copy, host, fn in [("h2d", "pageable", op(a, pageable_src)), ("h2d", "pinned", op(a, pinned_src)),
                           ("d2h", "pageable", op(pageable_dst, a)), ("d2h", "pinned", op(pinned_dst, a)),
                           ("d2d", "", op(b, a))]:
        t = timed(fn, warmup, repeats)
        t.update({"copy": copy, "host_memory": host, "bytes": size, "GBps": size / t["median_s"] / 1e9})
        if copy == "d2d":
            t["read_write_GBps"] = 2 * t["GBps"]
        rows.append(t)
    # The copies must have moved the right bytes (checked once, after timing).
    a.copy_(pageable_src)
    b.copy_(a)
    pinned_dst.copy_(b)
    sync()
    verified = bool(torch.equal(pinned_dst, pageable_src))
    del a, b, pinned_src, pinned_dst
    torch.cuda.empty_cache()
    return rows, verified


def load_cudart(torch):
    """The CUDA runtime PyTorch itself uses, else any libcudart.so.13/.12 on the loader's path."""
    candidates = []
    for base in sys.path:
        candidates += glob.glob(os.path.join(base, "nvidia", "cu13", "lib", "libcudart.so*"))
        candidates += glob.glob(os.path.join(base, "nvidia", "cuda_runtime", "lib", "libcudart.so*"))
    candidates += glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libcudart*.so*"))
    candidates += ["libcudart.so.13", "libcudart.so.12", "/usr/local/cuda/lib64/libcudart.so"]
    for name in candidates:
        try:
            return ctypes.CDLL(name), name
        except OSError:
            continue
    return None, None


def allocations(torch, sizes, repeats):
    torch.cuda.init()
    torch.cuda.synchronize()
    cudart, cudart_path = load_cudart(torch)
    rows = []
    for size in sizes:
        row = {"bytes": size}
        if cudart is not None:
            ptr = ctypes.c_void_p()
            iterations = 20 if size >= 64 * MiB else 200

            def raw():
                for _ in range(iterations):
                    rc = cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(size))
                    if rc != 0:
                        raise RuntimeError(f"cudaMalloc({size}) returned {rc}")
                    rc = cudart.cudaFree(ptr)
                    if rc != 0:
                        raise RuntimeError(f"cudaFree returned {rc}")

            t = timed(raw, 1, repeats)
            row["cudaMalloc_cudaFree_us"] = t["median_s"] / iterations * 1e6
        iterations = 20000

        def hit_raw():
            for _ in range(iterations):
                p = torch.cuda.caching_allocator_alloc(size)
                torch.cuda.caching_allocator_delete(p)

        def hit_empty():
            for _ in range(iterations):
                x = torch.empty(size, dtype=torch.uint8, device="cuda")
                del x

        row["caching_allocator_alloc_delete_us"] = timed(hit_raw, 1, repeats)["median_s"] / iterations * 1e6
        row["torch_empty_del_us"] = timed(hit_empty, 1, repeats)["median_s"] / iterations * 1e6
        torch.cuda.empty_cache()
        rows.append(row)
    return rows, cudart_path


def find_copy(rows, copy, host, size):
    for r in rows:
        if r["copy"] == copy and r["host_memory"] == host and r["bytes"] == size:
            return r
    return None


def compare(peer, galley_transfer, galley_alloc):
    """Prints Galley vs PyTorch against the issue-2 targets; returns the lines."""
    lines = []

    def line(text):
        lines.append(text)
        print(text)

    line(f"{'figure':<34}{'galley':>14}{'pytorch':>14}{'ratio':>9}  target")
    if galley_transfer:
        for size_row in galley_transfer.get("sizes", []):
            size = size_row["bytes"]
            if "copies" not in size_row:
                continue
            for copy, host, target in [("h2d", "pinned", 0.95), ("d2h", "pinned", 0.95), ("d2d", "", 0.95),
                                       ("h2d", "pageable", 2.0), ("d2h", "pageable", None)]:
                mine = next((c for c in size_row["copies"] if c["copy"] == copy and c["host_memory"] == host), None)
                theirs = find_copy(peer["transfers"], copy, host, size)
                if mine is None or theirs is None:
                    continue
                ratio = mine["GBps"] / theirs["GBps"]
                verdict = "-" if target is None else (f">= {target}x: " + ("ok" if ratio >= target else "MISSED"))
                name = f"{copy} {host or 'device'} {size // MiB} MiB GB/s"
                line(f"{name:<34}{mine['GBps']:>14.2f}{theirs['GBps']:>14.2f}{ratio:>9.2f}  {verdict}")
    if galley_alloc:
        for r in galley_alloc.get("results", []):
            if r.get("skipped"):
                continue
            peer_row = next((p for p in peer["allocations"] if p["bytes"] == r["bytes"]), None)
            name = f"alloc hit {r['size']} us"
            theirs = peer_row["caching_allocator_alloc_delete_us"] if peer_row else float("nan")
            target = "<= 0.2 us: " + ("ok" if r["hit_us"] <= 0.2 else "MISSED") if r["bytes"] == MiB else "-"
            line(f"{name:<34}{r['hit_us']:>14.3f}{theirs:>14.3f}{r['hit_us'] / theirs:>9.3f}  {target}")
            raw = peer_row.get("cudaMalloc_cudaFree_us") if peer_row else None
            name = f"raw alloc+free {r['size']} us"
            line(f"{name:<34}{r['miss_us']:>14.2f}{raw if raw else float('nan'):>14.2f}"
                 f"{(r['miss_us'] / raw) if raw else float('nan'):>9.2f}  -")
            # Against the cheaper of the two cudaMalloc+cudaFree measurements (Galley's C++ loop,
            # PyTorch's process through ctypes), so the speedup is not flattered.
            speedup = min(raw or r["miss_us"], r["miss_us"]) / r["hit_us"]
            target = (">= 300x: " + ("ok" if speedup >= 300 else "MISSED")) if r["bytes"] == MiB else "-"
            line(f"{'hit speedup vs cudaMalloc+Free ' + r['size']:<34}{speedup:>14.0f}{'':>14}{'':>9}  {target}")
    return lines


def load_json(path):
    if not path:
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"peer_transfer: cannot compare with {path}: {e}", file=sys.stderr)
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1G", help="transfer sizes, comma list (64M,256M,1G)")
    parser.add_argument("--alloc-sizes", default="1M,1G", help="cudaMalloc+cudaFree sizes")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--out", help="write the JSON here (default: stdout)")
    parser.add_argument("--galley-transfer", help="`galley bench transfer --json` output to compare")
    parser.add_argument("--galley-alloc", help="`galley bench alloc --json` output to compare")
    parser.add_argument("--peer-json", help="compare with this earlier output of this script instead of measuring")
    args = parser.parse_args()

    if args.peer_json:
        with open(args.peer_json) as f:
            peer = json.load(f)
        compare(peer, load_json(args.galley_transfer), load_json(args.galley_alloc))
        return 0
    import torch
    if not torch.cuda.is_available():
        print("peer_transfer: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    peer = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name(0),
            "method": "host perf_counter around copy_(non_blocking=True) + torch.cuda.synchronize(); median of "
                      f"{args.repeats} after {args.warmup} warm-up; GB = 1e9 bytes",
            "transfers": [], "verified": True}
    for size in [parse_size(s) for s in args.sizes.split(",") if s]:
        rows, ok = transfers(torch, size, args.warmup, args.repeats)
        peer["transfers"] += rows
        peer["verified"] = peer["verified"] and ok
    peer["allocations"], peer["cudart"] = allocations(
        torch, [parse_size(s) for s in args.alloc_sizes.split(",") if s], max(3, args.repeats // 2))
    text = json.dumps(peer, indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    galley_transfer = load_json(args.galley_transfer)
    galley_alloc = load_json(args.galley_alloc)
    if galley_transfer or galley_alloc:
        compare(peer, galley_transfer, galley_alloc)
    return 0 if peer["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
