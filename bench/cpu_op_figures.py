#!/usr/bin/env python3
"""Issue 16's CPU figures in one command: every bandwidth-bound op, forward and backward, at three
sizes (about 1 MB, 51 MB and 400 MB of f32 input), in GB/s of the bytes that must move (each input
read once, each output written once), against the machine's memcpy bandwidth measured in the same
run (`galley bench transfer --device cpu`, counted as read + write); and the GEMM solvers against
OpenBLAS (`cpu.gemm.openblas`) on square and network-shaped products.

  bench/cpu_op_figures.py --galley build/cpu/bin/galley [--rounds 3] [--sizes small,mid,large] [--ops relu,gelu]

Each op's figure is its best solver's median (`galley bench ... --all-solvers --json`); with several
rounds, the median over rounds of each round's ratio, so the machine's drift between one op's run
and the memcpy run of the same round moves both sides alike.
"""
import argparse
import json
import statistics
import subprocess
import sys

# Input tensor of each size: N x C x 56 x 56 f32.
SIZES = {"small": (1, 80), "mid": (16, 256), "large": (125, 256)}
# Timed samples per op and size (each sample a batch of about 1 ms of calls): at 1 MB ten samples
# are 10 ms, short enough to fall wholly into one of this kind of VM's slow phases, so that one
# kernel measured 9.4, 17.9 and 48.3 GB/s in three runs a few seconds apart; 200 samples (0.2 s)
# put the median in the steady state. The larger sizes run for longer per sample already.
ITERS = {"small": 200, "mid": 30, "large": 10}
GEMM_ITERS = 10  # timed samples per product (each a batch of ~1 ms)


def op_commands(n, c):
    shape = f"-n {n} -c {c} -H 56 -W 56"
    dims = f"{n}x{c}x56x56"
    return [
        ("relu", f"activ -m relu {shape} -F 0"),
        ("gelu", f"activ -m gelu {shape} -F 0"),
        ("sigmoid", f"activ -m sigmoid {shape} -F 0"),
        ("silu", f"activ -m silu {shape} -F 0"),
        ("add", f"eltwise --op add --shape {dims} --shape1 {dims} -F 0"),
        ("add_bias", f"eltwise --op add --shape {dims} --shape1 1x{c}x1x1 -F 0"),
        ("mul", f"eltwise --op mul --shape {dims} --shape1 {dims} -F 0"),
        ("bnorm_infer", f"bnorm {shape} -F 2"),
        ("bnorm_train", f"bnorm {shape} -F 1 -b 1"),
        ("gnorm", f"gnorm {shape} -g {32 if c % 32 == 0 else 16} -F 0"),
        ("bnorm_train_nhwc", f"bnorm {shape} --layout nhwc -F 1 -b 1"),
        ("gnorm_nhwc", f"gnorm {shape} --layout nhwc -g {32 if c % 32 == 0 else 16} -F 0"),
        ("maxpool", f"pool -m max {shape} -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 0"),
        ("avgpool", f"pool -m avg_in {shape} -y 3 -x 3 -p 1 -q 1 -u 2 -v 2 -F 0"),
        ("global_avgpool", f"pool -m avg_in --global {shape} -F 0"),
        ("global_maxpool", f"pool -m max --global {shape} -F 0"),
        ("softmax_c", f"softmax {shape} --axis 1 -F 0"),
        ("softmax_c_nhwc", f"softmax {shape} --layout nhwc --axis 1 -F 0"),
        ("reduce_sum_hw", f"reduce --shape {dims} --axes 2,3 --op sum -F 0"),
        ("transpose_nhwc", f"transpose --dims {n},{c},56,56 --perm 0,2,3,1 -F 0"),
        ("concat_c", f"concat --dims {n},{c},56,56 --inputs 2 --axis 1 -F 0"),
        # Layer norm over C of channels-last rows, as on the GPU.
        ("lnorm", f"lnorm -X {n * 56 * 56}x{c} -o 1 -F 0"),
    ]


GEMMS = [
    ("square 1024", "-m 1024 -n 1024 -k 1024"),
    ("square 2048", "-m 2048 -n 2048 -k 2048"),
    ("resnet fc b32", "-m 32 -n 1000 -k 2048"),
    ("resnet 1x1 as gemm", "-m 3136 -n 256 -k 64"),
    ("transformer qkv", "-m 1576 -n 2304 -k 768"),
    ("transformer mlp", "-m 1576 -n 3072 -k 768"),
]


def run_json(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-400:]}")
    return json.loads(res.stdout)


def memcpy_rw_gbps(galley, nbytes):
    mib = max(1, round(nbytes / (1 << 20)))
    d = run_json([galley, "bench", "transfer", "--device", "cpu", "--sizes", f"{mib}M", "--json"])
    for size in d["sizes"]:
        for copy in size["copies"]:
            if copy["copy"] == "memcpy":
                return 2 * copy["GBps"]  # one copy reads and writes every byte
    raise RuntimeError("bench transfer gave no memcpy figure")


def best_per_problem(d):
    """{problem key: (best GB/s, solver, bytes)} of one `galley bench ... --json` run."""
    out = {}
    for p in d["problems"]:
        ok = [r for r in p["results"] if r.get("gbps")]
        if not ok:
            continue
        best = max(ok, key=lambda r: r["gbps"])
        out[p["key"]] = (best["gbps"], best["solver"], p["bytes"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--galley", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="small,mid,large")
    ap.add_argument("--iters", type=int, default=0, help="timed samples per op (default: ITERS by size)")
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--ops", default="", help="comma-separated op names to run (default: all, and the GEMM table)")
    opts = ap.parse_args()

    rows = {}  # (size, op, key) -> list of (ratio, gbps, solver, memcpy)
    for r in range(opts.rounds):
        for size in opts.sizes.split(","):
            n, c = SIZES[size]
            memcpy = memcpy_rw_gbps(opts.galley, n * c * 56 * 56 * 4)
            for op, args in op_commands(n, c):
                if opts.ops and op not in opts.ops.split(","):
                    continue
                cmd = [opts.galley, "bench", *args.split(), "--device", "cpu", "--dtype", "f32",
                       "--all-solvers", "--json", "-i", str(opts.iters or ITERS[size])]
                try:
                    best = best_per_problem(run_json(cmd))
                except (RuntimeError, json.JSONDecodeError, subprocess.TimeoutExpired) as e:
                    print(f"round {r + 1} {size} {op}: {e}", file=sys.stderr)
                    continue
                for key, (gbps, solver, nbytes) in best.items():
                    rows.setdefault((size, op, key), []).append((gbps / memcpy, gbps, solver, memcpy, nbytes))
        print(f"round {r + 1} done", file=sys.stderr)

    print("| size | op | problem | bytes | best solver | GB/s | memcpy r+w GB/s | ratio (median of rounds) | >= 0.8 |")
    print("|---|---|---|---:|---|---:|---:|---:|---|")
    below = 0
    for (size, op, key), runs in rows.items():
        ratio = statistics.median(x[0] for x in runs)
        gbps = statistics.median(x[1] for x in runs)
        memcpy = statistics.median(x[3] for x in runs)
        solver = max(set(x[2] for x in runs), key=[x[2] for x in runs].count)
        ok = ratio >= 0.8
        below += not ok
        print(f"| {size} | {op} | {key} | {runs[0][4] / 1e6:.1f} MB | {solver} | {gbps:.1f} | {memcpy:.1f} | "
              f"{ratio:.2f} | {'yes' if ok else '**no**'} |")
    print(f"\n{len(rows) - below} of {len(rows)} op directions at >= 0.8x memcpy")

    if opts.no_gemm or opts.ops:
        return
    print("\n| product | Galley solver | Galley GFLOP/s | OpenBLAS GFLOP/s | ratio (median of rounds) | >= 0.9 |")
    print("|---|---|---:|---:|---:|---|")
    for name, dims in GEMMS:
        ratios, ours, theirs, picks = [], [], [], []
        for _ in range(opts.rounds):
            cmd = [opts.galley, "bench", "gemm", *dims.split(), "--device", "cpu", "--all-solvers", "--json",
                   "-i", str(opts.iters or GEMM_ITERS)]
            d = run_json(cmd)
            res = d["problems"][0]["results"]
            blas = [x for x in res if x["solver"] == "cpu.gemm.openblas"]
            own = [x for x in res if x["solver"] != "cpu.gemm.openblas" and not x["solver"].startswith("ref.")]
            if not blas or not own:
                continue
            best = max(own, key=lambda x: x["tflops"])
            ratios.append(best["tflops"] / blas[0]["tflops"])
            ours.append(best["tflops"] * 1e3)
            theirs.append(blas[0]["tflops"] * 1e3)
            picks.append(best["solver"])
        if not ratios:
            print(f"| {name} | - | - | - | - | no figure |")
            continue
        ratio = statistics.median(ratios)
        print(f"| {name} ({dims}) | {max(set(picks), key=picks.count)} | {statistics.median(ours):.0f} | "
              f"{statistics.median(theirs):.0f} | {ratio:.2f} | {'yes' if ratio >= 0.9 else '**no**'} |")


if __name__ == "__main__":
    main()
