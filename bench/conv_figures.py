#!/usr/bin/env python3
"""Issue 3's GPU table from one device command: joins `galley bench conv --all-solvers --json` of the
four configurations with bench/peer_conv.py's JSON (PyTorch timed in the same command) and prints, per
configuration, the geomean TFLOP/s of Galley's own single-source solvers (best `gpu.conv.*` per
problem), of the best of all (adding `cuda.conv.*`), of the peer, and the ratios; then per-problem rows.
Only verified-or-unverified results without errors count; a solver whose verification failed is left out.

  python3 bench/conv_figures.py --peer peer_f32_nchw.json ... galley_f32_nchw.json galley_f16_nchw.json ...
"""
import argparse
import json
import math


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def usable(result):
    return not result.get("error") and result.get("verified") is not False and result.get("tflops", 0) > 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True, action="append", help="peer_conv.py JSON (repeatable)")
    ap.add_argument("galley", nargs="+")
    args = ap.parse_args()
    peer_by_key = {}
    for path in args.peer:
        peer = json.load(open(path))
        for config in peer["configs"]:
            for row in config["problems"]:
                peer_by_key[row["key"]] = row
    print(f"peer: {peer['peer']} on {peer['device']}")
    summary = []
    for path in args.galley:
        doc = json.load(open(path))
        rows = []
        for prob in doc["problems"]:
            results = [r for r in prob["results"] if usable(r)]
            own = [r for r in results if r["solver"].startswith("gpu.conv.")]
            best_own = max(own, key=lambda r: r["tflops"], default=None)
            best_all = max(results, key=lambda r: r["tflops"], default=None)
            p = peer_by_key.get(prob["key"])
            rows.append((prob.get("tag") or prob["key"], best_own, best_all, p, prob["key"]))
        config = rows[0][4].split("-")[2:4] if rows else ["?", "?"]
        g_own = geomean([r[1]["tflops"] if r[1] else None for r in rows])
        g_all = geomean([r[2]["tflops"] if r[2] else None for r in rows])
        g_peer = geomean([r[3]["tflops"] if r[3] else None for r in rows])
        summary.append((" ".join(config), g_own, g_all, g_peer, len(rows)))
        print(f"\n#### {' '.join(config)} ({path})\n")
        print("| problem | best own | own TFLOP/s | own us | best of all | all TFLOP/s | peer TFLOP/s | own/peer | all/peer |")
        print("|---|---|---|---|---|---|---|---|---|")
        for tag, own, best, p, _ in rows:
            pt = p["tflops"] if p else float("nan")
            o = own["tflops"] if own else float("nan")
            a = best["tflops"] if best else float("nan")
            print(f"| {tag} | {own['solver'].split('.')[-1] if own else '-'} | {o:.1f} | "
                  f"{own['ms'] * 1000 if own else float('nan'):.1f} | {best['solver'] if best else '-'} | {a:.1f} | "
                  f"{pt:.1f} | {o / pt:.2f} | {a / pt:.2f} |")
    print("\n| config | problems | own geomean | best-of-all geomean | peer geomean | own/peer | all/peer |")
    print("|---|---|---|---|---|---|---|")
    for config, g_own, g_all, g_peer, n in summary:
        print(f"| {config} | {n} | {g_own:.1f} | {g_all:.1f} | {g_peer:.1f} | {g_own / g_peer:.2f} | {g_all / g_peer:.2f} |")


if __name__ == "__main__":
    main()
