#!/usr/bin/env python3
"""Per-tile timings of a tunable solver from the tuner's debug log, to fit a planner's tile
efficiencies to measurements and to check its untuned pick.

  GALLEY_LOG_LEVEL=debug galley tune --file LIST ... 2> tune.log
  bench/tile_timings.py tune.log --solver gpu.conv.bwd_weights_igemm [--first-tiles 0:3]

The tuner logs one line per timed candidate, "tune KEY[ on DEVICE]: SOLVER[CONFIG] median M ms over
N runs", CONFIG holding "tile=T,splits=S". For each problem the script keeps each tile's best time
(over its split counts) and prints, per tile, the geometric mean over the problems of that time
divided by the problem's best tile's time (1.0: always the fastest), and per problem the fastest
tile and split count beside the fastest other solver.
"""
import argparse
import collections
import math
import re
import sys

LINE = re.compile(r"tune (\S+?)(?: on \S+)?: (\S+?)(?:\[([^\]]*)\])? median ([0-9.eE+-]+) ms")
TILE = re.compile(r"tile=(\d+),splits=(\d+)")


def parse(lines, solver):
    """({problem: {tile: (ms, splits)}}, {problem: (other solver label, ms)}) of a debug log."""
    tiles = collections.defaultdict(dict)
    others = {}
    for line in lines:
        m = LINE.search(line)
        if not m:
            continue
        key, name, config, ms = m.group(1), m.group(2), m.group(3) or "", float(m.group(4))
        t = TILE.search(config)
        if name == solver and t:
            tile, splits = int(t.group(1)), int(t.group(2))
            if tile not in tiles[key] or ms < tiles[key][tile][0]:
                tiles[key][tile] = (ms, splits)
        elif key not in others or ms < others[key][1]:
            label = name + (f"[{config}]" if config else "")
            others[key] = (label, ms)
    return tiles, others


def tile_ratios(tiles):
    """{tile: (problems timed, geomean of its best time over the problem's best tile's)}."""
    logs = collections.defaultdict(list)
    for per_tile in tiles.values():
        best = min(ms for ms, _ in per_tile.values())
        for tile, (ms, _) in per_tile.items():
            logs[tile].append(math.log(ms / best))
    return {t: (len(v), math.exp(sum(v) / len(v))) for t, v in sorted(logs.items())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log")
    ap.add_argument("--solver", required=True)
    opts = ap.parse_args()
    with open(opts.log, encoding="utf-8", errors="replace") as f:
        tiles, others = parse(f, opts.solver)
    if not tiles:
        print(f"no timings of {opts.solver} with tile=T,splits=S configs in {opts.log}", file=sys.stderr)
        return 1
    print("| tile | problems | best time / problem's best tile (geomean) |")
    print("|---:|---:|---:|")
    for tile, (n, ratio) in tile_ratios(tiles).items():
        print(f"| {tile} | {n} | {ratio:.3f} |")
    print()
    print("| problem | fastest tile | splits | ms | fastest other solver | ms |")
    print("|---|---:|---:|---:|---|---:|")
    for key, per_tile in tiles.items():
        tile, (ms, splits) = min(per_tile.items(), key=lambda kv: kv[1][0])
        label, other_ms = others.get(key, ("-", float("nan")))
        print(f"| {key} | {tile} | {splits} | {ms:.4f} | {label} | {other_ms:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
