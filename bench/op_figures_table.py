#!/usr/bin/env python3
"""Issue 16's GPU bandwidth table from the outputs of scripts/gpu-op-figures: per size, op and
direction, Galley's own best solver (every solver but the vendor ones, cuda.* / hip.*) and the best
of all, in GB/s of the bytes that must move, against the copy ceiling (`galley bench transfer`,
device-to-device read + write) and PyTorch eager and graph-replayed (bench/peer_ops.py).

  python3 bench/op_figures_table.py DIR

The target column is the issue's: single-pass ops >= 80% of the ceiling, multi-pass ones (training
norms and their backward, reductions, global pooling, softmax forward over channels, a bias's
backward) >= 50%, and every op >= 1.0x PyTorch's graph.
"""
import glob
import json
import math
import os
import re
import sys

# Ops that need more than one pass over their input (the 50% class).
MULTI_PASS = {("bnorm_train", "F"), ("bnorm_train", "B"), ("gnorm", "F"), ("gnorm", "B"), ("lnorm", "F"),
              ("lnorm", "B"), ("reduce_sum_hw", "F"), ("global_avgpool", "F"), ("add_bias", "B")}
VENDOR = re.compile(r"^(cuda|hip)\.")


def direction_of(command):
    """F or B from the problem's `galley bench` line (bnorm: -b 1 is backward; the rest: -F 2)."""
    if " bnorm " in f" {command} ":
        return "B" if re.search(r" -b 1\b", command) else "F"
    m = re.search(r" -F (\d)\b", command)
    return "B" if m and m.group(1) == "2" else "F"


def ceiling_gbps(work):
    try:
        with open(os.path.join(work, "transfer.json")) as f:
            sizes = json.load(f)["sizes"]
    except (OSError, ValueError, KeyError):
        return math.nan
    best = math.nan
    for row in sizes:
        for c in row.get("copies", []):
            if c.get("copy") == "d2d" and "read_write_GBps" in c:
                best = c["read_write_GBps"] if math.isnan(best) else max(best, c["read_write_GBps"])
    return best


def graph_mode(work):
    """How the Galley runs were timed: replays of a device graph, calls launched one by one, or both."""
    modes = set()
    for path in glob.glob(os.path.join(work, "galley.*.*.json")):
        try:
            with open(path) as f:
                for problem in json.load(f).get("problems", []):
                    modes.update(bool(r.get("graph")) for r in problem.get("results", []))
        except (OSError, ValueError):
            continue
    return {frozenset([True]): "as graph replays", frozenset([False]): "eagerly"}.get(frozenset(modes), "both ways")


def peer_rows(work):
    try:
        with open(os.path.join(work, "peer.json")) as f:
            rows = json.load(f)["rows"]
    except (OSError, ValueError, KeyError):
        return {}
    return {(r["size"], r["op"], r["direction"]): r for r in rows if "error" not in r}


def galley_rows(work):
    """{(size, op, direction): (own best (solver, GB/s), best of all (solver, GB/s), all verified)}."""
    out = {}
    for path in sorted(glob.glob(os.path.join(work, "galley.*.*.json"))):
        _, size, op, _ = os.path.basename(path).split(".", 3)
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        for problem in doc.get("problems", []):
            direction = direction_of(problem.get("command", ""))
            timed = [r for r in problem.get("results", []) if not r.get("error") and r.get("gbps", 0) > 0]
            own = [r for r in timed if not VENDOR.match(r["solver"])]
            pick = lambda rs: max(((r["solver"], r["gbps"]) for r in rs), key=lambda t: t[1], default=None)
            verified = all(r.get("verified") is not False for r in timed)
            out[(size, op, direction)] = (pick(own), pick(timed), verified)
    return out


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    work = sys.argv[1]
    ceiling = ceiling_gbps(work)
    peers = peer_rows(work)
    ours = galley_rows(work)
    print(f"Copy ceiling (d2d read + write): {ceiling:.0f} GB/s; Galley timed {graph_mode(work)}\n")
    print("| size | op | dir | own best | own GB/s | % ceiling | target | best of all | PyTorch eager | graph "
          "| own/graph | all/graph | met |")
    print("|---|---|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|")
    order = {"small": 0, "mid": 1, "large": 2}
    keys = sorted(set(ours) | set(peers), key=lambda k: (order.get(k[0], 9), k[1], k[2]))
    met = total = 0
    for key in keys:
        size, op, direction = key
        own, best, verified = ours.get(key, (None, None, True))
        peer = peers.get(key)
        target = 0.5 if (op, direction) in MULTI_PASS else 0.8
        own_gbps = own[1] if own else math.nan
        share = own_gbps / ceiling if ceiling == ceiling else math.nan
        eager = peer["eager_gbps"] if peer else math.nan
        graph = peer["graph_gbps"] if peer else math.nan
        own_ratio = own_gbps / graph if graph == graph else math.nan
        all_ratio = (best[1] if best else math.nan) / graph if graph == graph else math.nan
        ok = own is not None and verified and share >= target and not (own_ratio < 1.0)
        if own is not None:
            total += 1
            met += ok
        print(f"| {size} | {op} | {direction} | {own[0] if own else '-'}{'' if verified else ' (UNVERIFIED)'} "
              f"| {own_gbps:.0f} | {100 * share:.0f}% | {100 * target:.0f}% "
              f"| {(best[0] + ' ' + format(best[1], '.0f')) if best else '-'} | {eager:.0f} | {graph:.0f} "
              f"| {own_ratio:.2f} | {all_ratio:.2f} | {'yes' if ok else 'no'} |")
    print(f"\n{met} of {total} op directions meet both the ceiling share and 1.0x PyTorch's graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
