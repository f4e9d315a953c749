#!/usr/bin/env python3
"""Issue 16's CPU figure: what a fused epilogue (bias + relu, and bias + residual + relu) costs over
the convolution alone, on the same solver, for the ResNet-50 layers of the problem list.

For each problem: `galley bench conv` picks the plain problem's solver (the tuner, as a user's call
would); then ROUNDS rounds, each timing the plain and the fused forms with that solver alternately
(`--solver`, median of -i iterations), so load on the machine hits both alike. Prints per problem the
median over rounds of fused / plain and the geomean over problems (<= 1.05 is the target).

  python3 bench/cpu_fused_epilogue_cost.py --galley build/cpu/bin/galley \
      --file ../shared/bench/conv_problems.txt [--batch 2] [--rounds 5] [--tag r50.] [--json out.json]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

FORMS = {"bias-relu": ["--bias", "--activ", "relu"], "bias-res-relu": ["--bias", "--residual", "--activ", "relu"]}


def problems(path, tag, batch):
    out = []
    with open(path) as f:
        for line in f:
            body, _, name = line.partition("#")
            words = body.split()
            if not words or not name.strip().startswith(tag):
                continue
            if words[0] == "conv":
                words = words[1:]
            for i in range(0, len(words) - 1, 2):
                if words[i] == "-n":
                    words[i + 1] = str(batch)
            out.append((name.strip(), words))
    return out


def bench(galley, flags, env):
    res = subprocess.run([galley, "bench", "conv", *flags, "--json"], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.exit(f"galley bench conv {' '.join(flags)} failed: {res.stderr.strip()[-500:]}")
    p = json.loads(res.stdout)["problems"][0]
    r = min(p["results"], key=lambda r: r["ms"])
    return r["solver"], r["ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--galley", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--tag", default="r50.")
    ap.add_argument("--json")
    args = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("GALLEY_CACHE_DIR", tempfile.mkdtemp(prefix="galley-epilogue-cost-"))
    rows = []
    for name, flags in problems(args.file, args.tag, args.batch):
        solver, _ = bench(args.galley, flags, env)
        timing = ["--solver", solver, "-i", str(args.iters), "--warmup", "3"]
        ratios = {form: [] for form in FORMS}
        plain_ms = []
        for _ in range(args.rounds):
            _, plain = bench(args.galley, flags + timing, env)
            plain_ms.append(plain)
            for form, extra in FORMS.items():
                _, fused = bench(args.galley, flags + extra + timing, env)
                ratios[form].append(fused / plain)
        row = {"tag": name, "solver": solver, "plain_ms": statistics.median(plain_ms),
               **{form: statistics.median(r) for form, r in ratios.items()}}
        rows.append(row)
        print(f"{name:14s} {solver:26s} plain {row['plain_ms']:8.3f} ms  " +
              "  ".join(f"{form} {row[form]:.3f}" for form in FORMS), flush=True)
    for form in FORMS:
        geo = math.exp(sum(math.log(r[form]) for r in rows) / len(rows))
        print(f"geomean fused/plain, {form}: {geo:.3f} over {len(rows)} problems (target <= 1.05)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
