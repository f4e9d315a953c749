#!/usr/bin/env python3
"""Overhead of the profiler: `galley bench conv --file LIST` (or `galley run --model NAME`) with
tracing off and on.

Runs the same binary alternately without and with GALLEY_PROFILE (and, with --baseline, a build
without the profiler's hooks, for the cost of the hooks while tracing is off), REPEATS times each,
and prints per problem the median of the bench's per-call medians, and the geometric mean of the
ratios. Also the median wall time of the whole command (on: with writing the trace at exit).
Results go into bench/RESULTS.md by hand.

Each binary times the solver its own tuning picked; two builds (--baseline) may pick differently
for a problem, which then dominates that row. bench/profile_overhead.cpp times the same calls in one
process with tracing switched per round, the figure to trust for on versus off.

  python3 bench/profile_overhead.py --galley build/cpu/bin/galley --device cpu \
      --file bench/profile_overhead_problems.txt --repeats 5 [--baseline /path/to/old/galley]
  python3 bench/profile_overhead.py --galley bin/galley --device cuda:0 --model resnet50 --batch 32
With --model, the per-call time is the run's median milliseconds per iteration (one row).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(galley, args, env_extra):
    env = dict(os.environ)
    env.pop("GALLEY_PROFILE", None)
    env.update(env_extra)
    start = time.perf_counter()
    out = subprocess.run([galley] + args, env=env, check=True, capture_output=True, text=True).stdout
    wall = time.perf_counter() - start
    doc = json.loads(out)
    per_problem = {}
    if "median_ms" in doc:  # galley run
        return {f"run {doc.get('model') or 'model'} batch {doc['batch']}": doc["median_ms"]}, wall
    for p in doc["problems"]:
        best = min(r["ms"] for r in p["results"])
        per_problem[p["key"]] = best
    return per_problem, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--galley", required=True)
    ap.add_argument("--baseline", help="a galley binary built without the profiler's hooks")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--file", help="conv problem list for galley bench conv")
    what.add_argument("--model", help="a network of galley run --model")
    ap.add_argument("--batch", type=int, default=1, help="--model's batch")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    opts = ap.parse_args()
    if opts.model:
        args = ["run", "--model", opts.model, "--batch", str(opts.batch), "--device", opts.device, "--json",
                "--iters", str(opts.iterations)]
    else:
        args = ["bench", "conv", "--file", opts.file, "--device", opts.device, "--json", "-i", str(opts.iterations)]
    trace = os.path.join(tempfile.mkdtemp(prefix="galley-prof-overhead-"), "trace.json")
    modes = [("off", opts.galley, {}), ("on", opts.galley, {"GALLEY_PROFILE": trace})]
    if opts.baseline:
        # Its own find-db: another build may tune differently and would re-tune the shared one.
        modes.insert(0, ("no hooks", opts.baseline, {"GALLEY_CACHE_DIR": tempfile.mkdtemp(prefix="galley-base-")}))
    # One untimed run of each binary first: the find-dbs are filled, so no mode pays for tuning.
    for _, galley, env in modes:
        if "GALLEY_PROFILE" not in env:
            run(galley, args, env)
    ms = {name: {} for name, _, _ in modes}
    wall = {name: [] for name, _, _ in modes}
    for rep in range(opts.repeats):
        order = modes if rep % 2 == 0 else list(reversed(modes))
        for name, galley, env in order:
            per_problem, seconds = run(galley, args, env)
            wall[name].append(seconds)
            for key, value in per_problem.items():
                ms[name].setdefault(key, []).append(value)
    names = [name for name, _, _ in modes]
    print(f"{'problem':64} " + " ".join(f"{n + ' ms':>12}" for n in names) + f" {'on/off':>8}")
    ratios = {n: [] for n in names}
    for key in ms["off"]:
        med = {n: statistics.median(ms[n][key]) for n in names}
        for n in names:
            ratios[n].append(med[n] / med["off"])
        print(f"{key:64} " + " ".join(f"{med[n]:12.4f}" for n in names) + f" {med['on'] / med['off']:8.3f}")
    for n in names:
        if n == "off":
            continue
        geo = math.exp(sum(math.log(r) for r in ratios[n]) / len(ratios[n]))
        print(f"geomean per-call time, {n} / off: {geo:.4f} ({(geo - 1) * 100:+.2f}%)")
    for n in names:
        print(f"median wall time of the command, {n}: {statistics.median(wall[n]):.3f} s")
    result = {"per_call_ms": {n: {k: statistics.median(v) for k, v in ms[n].items()} for n in names},
              "wall_s": {n: statistics.median(wall[n]) for n in names}}
    json.dump(result, sys.stderr)
    sys.stderr.write("\n")


if __name__ == "__main__":
    main()
