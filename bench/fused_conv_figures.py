#!/usr/bin/env python3
"""Issue 16's fused-convolution figure: Galley's fused conv + bias (+ residual) + relu, as the tuner
picks it, against PyTorch's unfused sequence of the same problems (bench/peer_conv.py --bias ...),
eager and replayed from a CUDA graph, joined by problem key.

  python3 bench/fused_conv_figures.py --galley g1.json [g2.json ...] --peer p1.json [...] \
      --peer-graphs q1.json [...]

The Galley files are `galley bench conv --file ... --json` output; each problem's time is the row of
the solver the tuner picked. Prints one table per epilogue form and the geomean of peer / Galley (>1:
Galley faster) per form and over every problem.
"""
import argparse
import json
import math
import re
import sys


def documents(paths):
    for path in paths:
        with open(path) as f:
            yield json.load(f)


def galley_rows(paths):
    rows = {}
    for doc in documents(paths):
        for p in doc["problems"]:
            picked = p.get("tuner", {}).get("solver")
            results = [r for r in p["results"] if r.get("ms") is not None]
            chosen = [r for r in results if r["solver"] == picked] or results
            if not chosen:
                continue
            r = min(chosen, key=lambda r: r["ms"])
            rows[p["key"]] = {"tag": p.get("tag", ""), "ms": r["ms"], "solver": r["solver"],
                              "verified": r.get("verified"), "max_rel_err": r.get("max_rel_err")}
    return rows


def peer_rows(paths):
    rows = {}
    for doc in documents(paths):
        for config in doc["configs"]:
            for p in config["problems"]:
                rows[p["key"]] = p["ms"]
    return rows


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--galley", nargs="+", required=True)
    ap.add_argument("--peer", nargs="+", required=True)
    ap.add_argument("--peer-graphs", nargs="*", default=[])
    ap.add_argument("--json", help="write the joined rows here")
    args = ap.parse_args()
    galley, eager, graphs = galley_rows(args.galley), peer_rows(args.peer), peer_rows(args.peer_graphs)
    missing = sorted(k for k in galley if k not in eager)
    if missing:
        sys.exit(f"fused_conv_figures.py: no peer row for {missing[0]} (and {len(missing) - 1} more)")
    forms = {}
    for k, g in galley.items():
        m = re.search(r"-g\d+-(.+)$", k)
        form = "-".join(k.split("-")[2:4]) + " " + (m.group(1) if m else "plain")
        forms.setdefault(form, []).append((k, g))
    joined = []
    all_eager, all_graph = [], []
    for form, items in sorted(forms.items()):
        print(f"# {form}: Galley's tuned pick against PyTorch's unfused sequence (ratio = peer ms / Galley ms)")
        print(f"{'tag':14s} {'galley ms':>10s} {'solver':24s} {'verify':>8s} {'eager ms':>10s} {'ratio':>6s} {'graph ms':>10s} {'ratio':>6s}")
        ratios_eager, ratios_graph = [], []
        for k, g in items:
            e, q = eager[k], graphs.get(k)
            ratios_eager.append(e / g["ms"])
            if q is not None:
                ratios_graph.append(q / g["ms"])
            verify = "ok" if g["verified"] else ("-" if g["verified"] is None else "FAIL")
            print(f"{g['tag']:14s} {g['ms']:10.4f} {g['solver']:24s} {verify:>8s} {e:10.4f} {e / g['ms']:6.2f} "
                  f"{q if q is not None else float('nan'):10.4f} {(q / g['ms']) if q is not None else float('nan'):6.2f}")
            joined.append({"key": k, **g, "peer_eager_ms": e, "peer_graph_ms": q})
        print(f"geomean {form}: {geomean(ratios_eager):.3f} vs eager, {geomean(ratios_graph):.3f} vs graph "
              f"({len(items)} problems)")
        all_eager += ratios_eager
        all_graph += ratios_graph
    print(f"geomean over all {len(joined)} problems: {geomean(all_eager):.3f} vs eager, {geomean(all_graph):.3f} vs graph")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": joined, "geomean_vs_eager": geomean(all_eager), "geomean_vs_graph": geomean(all_graph)}, f,
                      indent=1)


if __name__ == "__main__":
    main()
