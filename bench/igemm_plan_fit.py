#!/usr/bin/env python3
"""Fits the wgmma tiles' efficiencies of gpu.conv.igemm_tc's cost model (model_plan() and
kWgmmaEfficiency in src/backends/gpu/conv_igemm_tc.cu) to the tuner's per-config times, and shows
how far the model's untuned pick falls from the fastest measured config per problem.

  GALLEY_LOG_LEVEL=debug galley tune --file conv_problems.txt --dtype f16 --layout nhwc > fwd.log 2>&1
  bench/igemm_plan_fit.py fwd.log [bwd_data.log ...] [--sms 132]

(scripts/gpu-new-paths' fitfwd step writes both logs.) Forward problems are read from the
gpu.conv.igemm_tc lines, backward-data problems of unit stride from gpu.conv.bwd_data_via_igemm_tc's
(whose configs are igemm_tc's plans of the forward view). The model here mirrors the C++ one; keep
the two in step.
"""
import argparse
import itertools
import math
import re
import sys

LINE = re.compile(r"tune (\S+?)(?: on \S+)?: (gpu\.conv\.(?:igemm_tc|bwd_data_via_igemm_tc))"
                  r"\[tile=(\d+),splits=(\d+)\] median ([0-9.eE+-]+) ms")
KEY = re.compile(r"conv-([FBW])-\w+-\w+-n(\d+)-c(\d+)-h(\d+)-w(\d+)-k(\d+)-y(\d+)-x(\d+)-p(\d+)-q(\d+)"
                 r"-u(\d+)-v(\d+)-l(\d+)-j(\d+)-g(\d+)")

# (tile index, bm, bn, efficiency, blocks per SM): the planned mma.sync tiles (kTcTiles) and the
# wgmma tiles (kWgmmaTiles): 9-12 cp.async (4 stages: 128 KiB and 192 KiB of stage buffers for 128x128
# and 128x256), 13-16 warp-specialized (192 KiB, one block per SM, but 128x64's 96 KiB, two).
MMA_TILES = [(1, 128, 64, 0.8, 2), (2, 64, 64, 0.3, 2), (5, 128, 128, 1.0, 2)]
WGMMA_SHAPES = [(9, 128, 128, 1), (10, 128, 256, 1), (11, 128, 64, 2), (12, 64, 128, 2),
                (13, 128, 128, 1), (14, 128, 256, 1), (15, 128, 64, 2), (16, 192, 128, 1)]
PLAN_BK, PEAK, BANDWIDTH = 32, 500e12, 3.0e12
PRIORS = (1.3, 1.3, 1.6, 0.95, 1.7, 1.8, 1.6, 1.8)  # kWgmmaEfficiency as the C++ model has it
LEFT_OUT = 1e-9  # the efficiency of a tile the model must never pick
GRID = [round(0.6 + 0.1 * i, 1) for i in range(15)]


def gemm_shape(key):
    """(pixels, kg, kred, y_elems, groups) of the implicit GEMM igemm_tc runs, or None."""
    m = KEY.search(key)
    if not m:
        return None
    d, n, c, h, w, k, r, s, ph, pw, u, v, dh, dw, g = m.group(1), *map(int, m.groups()[1:])
    p = (h + 2 * ph - dh * (r - 1) - 1) // u + 1
    q = (w + 2 * pw - dw * (s - 1) - 1) // v + 1
    if d == "F":
        return n * p * q, k // g, (c // g) * r * s, n * k * p * q, g
    if d == "B" and u == 1 and v == 1:  # the forward view: dy (k channels) into dx (c channels)
        return n * h * w, c // g, (k // g) * r * s, n * c * h * w, g
    return None


def model_pick(shape, wgmma_eff, sms):
    """The model's (tile, splits) for `shape`; wgmma tiles past the end of wgmma_eff are left out."""
    pixels, kg, kred, y_elems, groups = shape
    steps = -(-kred // PLAN_BK)
    tiles = MMA_TILES + [(t, bm, bn, e, b) for (t, bm, bn, b), e in zip(WGMMA_SHAPES, wgmma_eff)]
    best, best_time = None, math.inf
    for t, bm, bn, eff, per_sm in tiles:
        slots = sms * per_sm
        count = -(-pixels // bm) * -(-kg // bn) * groups
        for splits in (1, 2, 3, 4, 6, 8):
            if splits > 1 and steps // splits < 4:
                break
            per = -(-steps // splits)
            waves = -(-(count * splits) // slots)
            time = waves * 2.0 * bm * bn * PLAN_BK * (per + 3) / (eff * PEAK / slots)
            if splits > 1:
                time += (splits + 1) * y_elems * 4.0 / BANDWIDTH + 3e-6
            if time < best_time * 0.97:
                best, best_time = (t, splits), time
    return best


def score(problems, wgmma_eff, sms):
    """(geomean of picked / fastest over the problems whose pick was timed, problems left out)."""
    logs, missing = [], 0
    for shape, times in problems.values():
        pick = model_pick(shape, wgmma_eff, sms)
        if pick not in times:
            missing += 1
            continue
        logs.append(math.log(times[pick] / min(times.values())))
    return (math.exp(sum(logs) / len(logs)) if logs else math.nan), missing


def fit(problems, sms):
    """The wgmma efficiencies (GRID values) whose picks come nearest the fastest configs: fewest
    untimed picks, then the lowest ratio (to 4 digits), then the nearest to the priors. Tiles no log
    timed (a build without them) are left out. Up to 4 fitted tiles are searched exhaustively; more
    (15^8 grids are too many) by coordinate descent from the priors, one tile at a time until no
    change helps."""
    timed = {tile for _, times in problems.values() for tile, _ in times}
    free = [i for i, shape in enumerate(WGMMA_SHAPES) if shape[0] in timed]
    start = [PRIORS[i] if i in free else LEFT_OUT for i in range(len(WGMMA_SHAPES))]

    def key(eff):
        ratio, missing = score(problems, eff, sms)
        return missing, round(ratio, 4), sum(abs(a - b) for a, b in zip(eff, PRIORS))

    def with_values(values):
        eff = list(start)
        for i, v in zip(free, values):
            eff[i] = v
        return tuple(eff)

    if len(free) <= 4:
        return min((with_values(values) for values in itertools.product(GRID, repeat=len(free))), key=key)
    best, best_key = tuple(start), key(tuple(start))
    for _ in range(10):
        changed = False
        for i in free:
            for v in GRID:
                eff = best[:i] + (v,) + best[i + 1:]
                k = key(eff)
                if k < best_key:
                    best, best_key, changed = eff, k, True
        if not changed:
            break
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--sms", type=int, default=132, help="multiprocessors of the device the logs are from")
    opts = ap.parse_args()
    problems = {}  # (solver, key) -> (shape, {(tile, splits): ms})
    for path in opts.logs:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                m = LINE.search(line)
                if not m:
                    continue
                key, solver, tile, splits, ms = m.group(1), m.group(2), int(m.group(3)), int(m.group(4)), float(m.group(5))
                shape = gemm_shape(key)
                if shape is None:
                    continue
                entry = problems.setdefault((solver, key), (shape, {}))
                entry[1][(tile, splits)] = ms
    if not problems:
        print("no igemm_tc per-config medians in the logs", file=sys.stderr)
        return 1
    best = fit(problems, opts.sms)
    print(f"{len(problems)} problems; the model's pick against the fastest timed config (geomean):")
    for label, eff in (("mma.sync tiles only", (LEFT_OUT,) * len(WGMMA_SHAPES)),
                       ("the C++ model's priors", PRIORS), ("best fit", best)):
        ratio, missing = score(problems, eff, opts.sms)
        print(f"  {label}: efficiencies {eff} -> {ratio:.3f} ({missing} picks not timed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
