#!/usr/bin/env python3
"""Issue 3's GPU table from one device command: joins `galley bench conv --all-solvers --json` of the
four configurations with bench/peer_conv.py's JSON (PyTorch timed in the same command) and prints, per
configuration, the geomean TFLOP/s of Galley's own single-source solvers (best `gpu.conv.*` per
problem), of the best of all (adding `cuda.conv.*`), of the peer, and the ratios; then per-problem rows.
Only verified-or-unverified results without errors count; a solver whose verification failed is left out.

Several runs per configuration may be given (several galley files of one configuration, several --peer
files or configurations of one key set): the peer's cudnn.benchmark picks its algorithms anew in each
process, and its geomean moved by up to 23% between same-command runs, more than the margin of a 0.7x
target. Each problem's time is then the median over the runs (per solver for galley), and the geomeans
and ratios are taken over those medians; a table of the per-run geomeans and their spread comes before
the summary so the variance stays visible. One file per configuration prints what it always printed.

  python3 bench/conv_figures.py --peer peer_f32_nchw.json ... galley_f32_nchw.json galley_f16_nchw.json ...
  python3 bench/conv_figures.py --peer peer_f16_nhwc.1.json --peer peer_f16_nhwc.2.json ... galley_f16_nhwc.1.json

--tuned adds `galley bench conv --json` runs without --all-solvers (the tuner's pick per problem, timed
after tuning, as cudnn.benchmark picks and times the peer's) as a column of their own: the geomean of
the picks and its ratio to the peer.
"""
import argparse
import collections
import json
import math
import statistics


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def usable(result):
    return not result.get("error") and result.get("verified") is not False and result.get("tflops", 0) > 0


def median_timing(timings):
    """The median of (ms, tflops) pairs of one problem over runs. With an odd count it is the middle run's
    own pair, so one run gives back exactly what was measured; with an even count ms is the mean of the
    two middle ones and TFLOP/s follows from the problem's flops (ms * TFLOP/s is the same in every run)."""
    ordered = sorted(timings)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    ms = (ordered[mid - 1][0] + ordered[mid][0]) / 2
    return ms, ordered[mid][0] * ordered[mid][1] / ms


def config_of(key):
    # "conv-F-f16-nhwc-n32-..." -> "f16 nhwc"; a backward key keeps its direction letter in front,
    # "conv-B-f16-nhwc-..." -> "B f16 nhwc" (Galley's canonical key, which peer_conv.py writes too).
    parts = key.split("-")
    config = " ".join(parts[2:4])
    return config if parts[1] == "F" else parts[1] + " " + config


def failed_verification(docs):
    # (key, solver) pairs whose verification failed in any run: a wrong result is not made right by the
    # other runs, so such a solver is left out of every run of its configuration.
    return {(prob["key"], r["solver"]) for doc in docs for prob in doc["problems"] for r in prob["results"]
            if r.get("verified") is False}


def median_galley_problems(docs, failed):
    """Per problem (in the first run's order) {solver: {"solver", "ms", "tflops"}} with each solver's median
    over the runs that measured it, leaving out the (key, solver) pairs in `failed`."""
    order, timings = [], {}
    for doc in docs:
        for prob in doc["problems"]:
            key = prob["key"]
            if key not in timings:
                order.append((key, prob.get("tag") or key))
                timings[key] = {}
            for r in prob["results"]:
                if usable(r):
                    timings[key].setdefault(r["solver"], []).append((r["ms"], r["tflops"]))
    problems = []
    for key, tag in order:
        medians = {}
        for solver, runs in timings[key].items():
            if (key, solver) not in failed:
                ms, tflops = median_timing(runs)
                medians[solver] = {"solver": solver, "ms": ms, "tflops": tflops}
        problems.append((key, tag, medians))
    return problems


def best(medians, prefix=""):
    return max((r for r in medians.values() if r["solver"].startswith(prefix)), key=lambda r: r["tflops"],
               default=None)


def own_geomean_of_run(doc, failed):
    # One galley run's own geomean (best gpu.conv.* per problem), to show how little ours moves.
    own = [best(medians, "gpu.conv.") for _, _, medians in median_galley_problems([doc], failed)]
    return geomean([r["tflops"] if r else None for r in own])


def spread(values):
    if not values:
        return "-"
    return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True, action="append",
                    help="peer_conv.py JSON (repeatable; several runs of one configuration are medianed)")
    ap.add_argument("--tuned", action="append", default=[],
                    help="galley bench conv --json of the tuner's picks (repeatable, one per configuration)")
    ap.add_argument("galley", nargs="+", help="galley bench conv --json (several of one configuration are medianed)")
    args = ap.parse_args()
    # The tuner's pick per problem: {config: {key: tflops}}.
    tuned = {}
    for path in args.tuned:
        for prob in json.load(open(path))["problems"]:
            picks = [r["tflops"] for r in prob["results"] if usable(r)]
            if picks:
                tuned.setdefault(config_of(prob["key"]), {})[prob["key"]] = max(picks)
    # One peer run = one configuration of one peer_conv.py process: {key: row}.
    peer_runs = []
    for path in args.peer:
        peer = json.load(open(path))
        for config in peer["configs"]:
            peer_runs.append({row["key"]: row for row in config["problems"]})
    print(f"peer: {peer['peer']} on {peer['device']}"
          f"{' (replaying CUDA graphs of its calls)' if peer.get('cuda_graphs') else ''}")
    # Galley files grouped by configuration, in the order given.
    galley_runs = {}
    for path in args.galley:
        doc = json.load(open(path))
        config = config_of(doc["problems"][0]["key"]) if doc["problems"] else f"? ({path})"
        galley_runs.setdefault(config, []).append((path, doc))
    peer_runs_per_config = collections.Counter(config_of(next(iter(run))) for run in peer_runs if run)
    several = any(n > 1 for n in peer_runs_per_config.values()) or any(len(r) > 1 for r in galley_runs.values())
    summary, spreads = [], []
    for config, runs in galley_runs.items():
        failed = failed_verification([doc for _, doc in runs])
        problems = median_galley_problems([doc for _, doc in runs], failed)
        keys = [key for key, _, _ in problems]
        runs_of_config = [run for run in peer_runs if any(k in run for k in keys)]
        rows = []
        for key, tag, medians in problems:
            timings = [(run[key]["ms"], run[key]["tflops"]) for run in runs_of_config if key in run]
            p = dict(zip(("ms", "tflops"), median_timing(timings))) if timings else None
            per_run = [t for _, t in timings]
            rows.append((tag, best(medians, "gpu.conv."), best(medians), p, per_run))
        g_own = geomean([r[1]["tflops"] if r[1] else None for r in rows])
        g_all = geomean([r[2]["tflops"] if r[2] else None for r in rows])
        g_peer = geomean([r[3]["tflops"] if r[3] else None for r in rows])
        # The picks against the peer over the problems both timed.
        picks = tuned.get(config, {})
        both = [(picks[k], r[3]["tflops"]) for k, r in zip(keys, rows) if k in picks and r[3]]
        g_tuned = (geomean([t for t, _ in both]), geomean([t / p for t, p in both])) if both else None
        summary.append((config, g_own, g_all, g_peer, len(rows), g_tuned))
        peer_geomeans = [(geomean([run[k]["tflops"] for k in keys if k in run]), sum(k in run for k in keys))
                         for run in runs_of_config]
        own_geomeans = [own_geomean_of_run(doc, failed) for _, doc in runs]
        spreads.append((config, len(rows), peer_geomeans, own_geomeans, g_own, g_peer))
        paths = ", ".join(path for path, _ in runs)
        print(f"\n#### {config} ({paths})\n")
        if several:
            print(f"Medians over {len(runs)} galley run(s) and {len(runs_of_config)} peer run(s); "
                  "'peer runs' is the lowest and highest peer TFLOP/s of the problem over the runs.\n")
            print("| problem | best own | own TFLOP/s | own us | best of all | all TFLOP/s | peer TFLOP/s | peer runs | own/peer | all/peer |")
            print("|---|---|---|---|---|---|---|---|---|---|")
        else:
            print("| problem | best own | own TFLOP/s | own us | best of all | all TFLOP/s | peer TFLOP/s | own/peer | all/peer |")
            print("|---|---|---|---|---|---|---|---|---|")
        for tag, own, best_all, p, per_run in rows:
            pt = p["tflops"] if p else float("nan")
            o = own["tflops"] if own else float("nan")
            a = best_all["tflops"] if best_all else float("nan")
            peer_cells = f"{pt:.1f} | " + (f"{min(per_run):.1f}-{max(per_run):.1f} | " if per_run else "- | ") \
                if several else f"{pt:.1f} | "
            print(f"| {tag} | {own['solver'].split('.')[-1] if own else '-'} | {o:.1f} | "
                  f"{own['ms'] * 1000 if own else float('nan'):.1f} | {best_all['solver'] if best_all else '-'} | {a:.1f} | "
                  f"{peer_cells}{o / pt:.2f} | {a / pt:.2f} |")
    if several:
        # Why the medians: what each run alone would have said. A run missing problems is marked, as its
        # geomean is over fewer problems and not comparable.
        print("\nPer-run geomeans, TFLOP/s (peer: one per peer_conv.py process, in the order given; min / median / max"
              " over those runs; own/peer: our median geomean over each peer run's, lowest-highest):\n")
        print("| config | peer runs | peer geomean per run | peer min / median / max | peer max/min | "
              "own geomean per run | own/peer by peer run | own/peer of the medians |")
        print("|---|---|---|---|---|---|---|---|")
        for config, n, peer_geomeans, own_geomeans, g_own, g_peer in spreads:
            values = [g for g, _ in peer_geomeans]
            listed = ", ".join(f"{g:.1f}" + (f" ({m} of {n} problems)" if m != n else "") for g, m in peer_geomeans)
            ratios = [g_own / g for g in values]
            print(f"| {config} | {len(values)} | {listed or '-'} | {spread(values)} | "
                  f"{f'{max(values) / min(values):.2f}' if values else '-'} | "
                  f"{', '.join(f'{g:.1f}' for g in own_geomeans)} | "
                  f"{f'{min(ratios):.2f}-{max(ratios):.2f}' if ratios else '-'} | {g_own / g_peer:.2f} |")
        print("\nThe geomeans and ratios below are over the per-problem medians.")
    head = "| config | problems | own geomean | best-of-all geomean | peer geomean | own/peer | all/peer |"
    if tuned:
        head += " tuned pick geomean | tuned/peer |"
    print("\n" + head)
    print("|---" * (head.count("|") - 1) + "|")
    for config, g_own, g_all, g_peer, n, g_tuned in summary:
        line = f"| {config} | {n} | {g_own:.1f} | {g_all:.1f} | {g_peer:.1f} | {g_own / g_peer:.2f} | {g_all / g_peer:.2f} |"
        if tuned:
            line += f" {g_tuned[0]:.1f} | {g_tuned[1]:.2f} |" if g_tuned else " - | - |"
        print(line)


if __name__ == "__main__":
    main()
