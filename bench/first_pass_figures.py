#!/usr/bin/env python3
"""Issue 4's first-call figure over several new processes: reads the JSON of N runs of
`galley bench tuner --first-call --passes [--preload] --json` (one run per file) and prints, per
problem, the median over the runs of first pass / steady passes, its worst run, and the medians of the
host time of the first and of a steady call; then one line per run.

One process gives one first call per problem, timed once: a 15 us layer's first call moves by a few
percent from process to process (the host's speed differs between processes and between machine
leases by up to 3x, bench/RESULTS.md session 10). A property of the first call is therefore read as
the median over processes, as issue 3's peer figures are read as the median over peer processes.

  python3 bench/first_pass_figures.py passes-1.json passes-2.json ...
"""
import argparse
import json
import statistics


def load(path):
    with open(path) as f:
        text = f.read()
    # The CLI prints the preload line and warnings on stderr only, but tolerate text before the JSON.
    doc = json.loads(text[text.index("{"):])
    if "passes" not in doc:
        raise SystemExit(f"{path}: not the JSON of `galley bench tuner --first-call --passes --json`")
    return doc


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="JSON of one `bench tuner --first-call --passes --json` run each")
    parser.add_argument("--within", type=float, default=1.05, help="first/steady bound (default 1.05)")
    args = parser.parse_args()
    docs = [load(p) for p in args.runs]
    order = [row["problem"] for row in docs[0]["passes"]]
    by_problem = {name: [] for name in order}
    for path, doc in zip(args.runs, docs):
        names = [row["problem"] for row in doc["passes"]]
        if names != order:
            raise SystemExit(f"{path}: other problems or order than {args.runs[0]}")
        for row in doc["passes"]:
            by_problem[row["problem"]].append(row)

    print(f"{'problem':16} {'solver':22} {'median first/steady':>19} {'worst':>7} {'host first us':>13} "
          f"{'host steady us':>14}")
    within = 0
    medians = []
    for name in order:
        rows = by_problem[name]
        ratios = [r["first_ms"] / r["steady_ms"] for r in rows]
        m = statistics.median(ratios)
        medians.append(m)
        within += m <= args.within
        solvers = sorted({r["solver"] for r in rows})
        print(f"{name:16} {'/'.join(solvers):22} {m:19.3f} {max(ratios):7.3f} "
              f"{1e3 * statistics.median(r['host_first_ms'] for r in rows):13.1f} "
              f"{1e3 * statistics.median(r['host_steady_ms'] for r in rows):14.1f}")
    print(f"\n{len(docs)} runs: {within}/{len(order)} problems with a median first/steady <= {args.within} "
          f"(median problem {statistics.median(medians):.3f}, worst {max(medians):.3f})")
    for path, doc in zip(args.runs, docs):
        ratios = [r["first_ms"] / r["steady_ms"] for r in doc["passes"]]
        first = sum(r["first_ms"] for r in doc["passes"])
        steady = sum(r["steady_ms"] for r in doc["passes"])
        print(f"  {path}: {sum(x <= args.within for x in ratios)}/{len(ratios)} within, median "
              f"{statistics.median(ratios):.3f}, worst {max(ratios):.3f}, pass {first / steady:.3f}x, "
              f"{doc['hits']}/{len(ratios)} find-db hits")


if __name__ == "__main__":
    main()
