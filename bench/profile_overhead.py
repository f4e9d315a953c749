#!/usr/bin/env python3
"""Overhead of the profiler: `galley bench conv --file LIST` (or `galley run --model NAME`) with
tracing off and on, or with the profiler compiled in and off against a build without it.

Runs the same binary alternately without and with GALLEY_PROFILE, REPEATS times each, and prints
per problem the median of the bench's per-call medians, and the geometric mean of the ratios. Also
the median wall time of the whole command (on: with writing the trace at exit). Results go into
bench/RESULTS.md by hand.

--device-times cupti,events runs one "on" mode per entry with GALLEY_PROFILE_DEVICE_TIMES set to it
(cuda: device spans from CUPTI's kernel records or from an event pair per launch).

--galley-compiled-out BIN times BIN, a build configured with -DGALLEY_PROFILER=OFF (the hooks
removed at compile time), against --galley with tracing off, alternately, same command, and prints
off / compiled-out: the cost of the hooks while tracing is off. Both use the same find-db (the
first, untimed run of --galley fills it), so both run the same solvers.

--baseline BIN adds BIN (any other build) as a third mode with a find-db of its own; two builds
that tune separately may pick different solvers for a problem, which then dominates that row.
bench/profile_overhead.cpp times the same calls in one process with tracing switched per round.

  python3 bench/profile_overhead.py --galley build/cpu/bin/galley --device cpu \
      --file bench/profile_overhead_problems.txt --repeats 5
  python3 bench/profile_overhead.py --galley build/cpu/bin/galley --galley-compiled-out \
      build/noprof/bin/galley --device cpu --model resnet50 --batch 1 --repeats 5
  python3 bench/profile_overhead.py --galley bin/galley --device cuda:0 --model resnet50 --batch 1 \
      --device-times cupti,events
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
    ap.add_argument("--galley-compiled-out", metavar="BIN",
                    help="a galley built with -DGALLEY_PROFILER=OFF: timed against --galley with tracing off")
    ap.add_argument("--baseline", help="another galley build, timed too (its own find-db)")
    ap.add_argument("--device-times", metavar="LIST",
                    help="comma list of GALLEY_PROFILE_DEVICE_TIMES values: one tracing-on mode each")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--file", help="conv problem list for galley bench conv")
    what.add_argument("--model", help="a network of galley run --model")
    ap.add_argument("--batch", type=int, default=1, help="--model's batch")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--run-args", default="", help="more arguments of galley run, e.g. '--graph'")
    opts = ap.parse_args()
    if opts.galley_compiled_out and opts.device_times:
        ap.error("--galley-compiled-out times tracing off only; --device-times needs tracing on")
    if opts.model:
        args = ["run", "--model", opts.model, "--batch", str(opts.batch), "--device", opts.device, "--json",
                "--iters", str(opts.iterations)] + opts.run_args.split()
    else:
        args = ["bench", "conv", "--file", opts.file, "--device", opts.device, "--json", "-i", str(opts.iterations)]
    trace = os.path.join(tempfile.mkdtemp(prefix="galley-prof-overhead-"), "trace.json")
    modes = [("off", opts.galley, {})]
    if opts.galley_compiled_out:
        modes.append(("compiled out", opts.galley_compiled_out, {}))
    elif opts.device_times:
        for value in opts.device_times.split(","):
            modes.append((f"on {value}", opts.galley,
                          {"GALLEY_PROFILE": trace, "GALLEY_PROFILE_DEVICE_TIMES": value}))
    else:
        modes.append(("on", opts.galley, {"GALLEY_PROFILE": trace}))
    if opts.baseline:
        # Its own find-db: another build may tune differently and would re-tune the shared one.
        modes.insert(0, ("baseline", opts.baseline, {"GALLEY_CACHE_DIR": tempfile.mkdtemp(prefix="galley-base-")}))
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
    others = [n for n in names if n != "off"]
    print(f"{'problem':64} " + " ".join(f"{n + ' ms':>16}" for n in names) +
          " ".join(f" {n + '/off':>16}" for n in others))
    ratios = {n: [] for n in others}
    for key in ms["off"]:
        med = {n: statistics.median(ms[n][key]) for n in names}
        for n in others:
            ratios[n].append(med[n] / med["off"])
        print(f"{key:64} " + " ".join(f"{med[n]:16.4f}" for n in names) +
              " ".join(f" {med[n] / med['off']:16.3f}" for n in others))
        if opts.repeats > 1:
            print("  rounds: " + "; ".join(f"{n} " + " ".join(f"{v:.4f}" for v in ms[n][key]) for n in names))
    for n in others:
        geo = math.exp(sum(math.log(r) for r in ratios[n]) / len(ratios[n]))
        print(f"geomean per-call time, {n} / off: {geo:.4f} ({(geo - 1) * 100:+.2f}%)")
        if n == "compiled out":
            print(f"geomean per-call time, off / compiled out (the hooks' cost while off): {1 / geo:.4f} "
                  f"({(1 / geo - 1) * 100:+.2f}%)")
    for n in names:
        print(f"median wall time of the command, {n}: {statistics.median(wall[n]):.3f} s")
    result = {"per_call_ms": {n: {k: statistics.median(v) for k, v in ms[n].items()} for n in names},
              "rounds_ms": ms, "wall_s": {n: statistics.median(wall[n]) for n in names}}
    json.dump(result, sys.stderr)
    sys.stderr.write("\n")


if __name__ == "__main__":
    main()
