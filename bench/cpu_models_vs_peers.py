#!/usr/bin/python3
"""Issue 17's CPU figure: Galley against ONNX Runtime and Debian's PyTorch 1.13 on the same models,
batch 1, f32, timed in one command in alternating rounds (load on a shared machine hits all alike).

Each round runs, as separate processes: `galley run MODEL.onnx --device cpu --json` (its median ms
per iteration), bench/ort_time.js (onnxruntime-node, intra-op threads = cores) and PyTorch's eager
torchvision model under inference_mode with torch.set_num_threads(cores). Prints per model the
median over rounds of each peer's median ms, the ratios peer/galley of those medians, and the
median of each round's own ratio (> 1: Galley is faster).

  scripts/export-models /tmp/models --models resnet50,mobilenet_v2
  npm install --prefix build/ort --ignore-scripts onnxruntime-node
  /usr/bin/python3 bench/cpu_models_vs_peers.py --galley build/cpu/bin/galley --models /tmp/models \
      --ort build/ort/node_modules [--rounds 5] [--iters 20]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

TORCH_TIMER = r"""
import json, sys, time, torch, torchvision
name, threads, warmup, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
model = getattr(torchvision.models, name)(weights=None).eval()
x = torch.rand(1, 3, 224, 224)
with torch.inference_mode():
    for _ in range(warmup):
        model(x)
    ms = []
    for _ in range(iters):
        start = time.perf_counter()
        model(x)
        ms.append((time.perf_counter() - start) * 1e3)
ms.sort()
print(json.dumps({"median_ms": ms[len(ms) // 2]}))
"""


def run_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--galley", required=True)
    ap.add_argument("--models", required=True, help="scripts/export-models' output folder")
    ap.add_argument("--ort", required=True, help="node_modules folder holding onnxruntime-node")
    ap.add_argument("--names", default="resnet50,mobilenet_v2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    opts = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    node_env = dict(os.environ, NODE_PATH=os.path.abspath(opts.ort))
    results = {}
    for name in opts.names.split(","):
        model = os.path.join(opts.models, name, "model.onnx")
        galley = [opts.galley, "run", model, "--device", "cpu", "--json", "--iters", str(opts.iters),
                  "--warmup", str(opts.warmup)]
        subprocess.run(galley, check=True, capture_output=True)  # fills the find-db: no round tunes
        runs = {"galley": [], "onnxruntime": [], "pytorch": []}
        for r in range(opts.rounds):
            order = ["galley", "onnxruntime", "pytorch"]
            if r % 2:
                order.reverse()
            for peer in order:
                if peer == "galley":
                    ms = run_json(galley)["median_ms"]
                elif peer == "onnxruntime":
                    ms = run_json(["node", os.path.join(here, "ort_time.js"), model, str(opts.threads),
                                   str(opts.warmup), str(opts.iters)], env=node_env)["median_ms"]
                else:
                    ms = run_json(["/usr/bin/python3", "-c", TORCH_TIMER, name, str(opts.threads),
                                   str(opts.warmup), str(opts.iters)])["median_ms"]
                runs[peer].append(ms)
        med = {peer: statistics.median(v) for peer, v in runs.items()}
        # A shared machine's speed drifts between rounds, by more than the gap being measured; the
        # peers of one round ran seconds apart, so the median of the rounds' own ratios follows that
        # drift less than the ratio of the medians does.
        paired = {peer: statistics.median(runs[peer][r] / runs["galley"][r] for r in range(opts.rounds))
                  for peer in ("onnxruntime", "pytorch")}
        results[name] = {"median_ms": med, "rounds": runs, "median_of_round_ratios": paired}
        print(f"{name} batch 1: galley {med['galley']:.2f} ms, onnxruntime {med['onnxruntime']:.2f} ms, "
              f"pytorch {med['pytorch']:.2f} ms; onnxruntime/galley {med['onnxruntime'] / med['galley']:.3f} "
              f"(per round {paired['onnxruntime']:.3f}; target >= 0.8), pytorch/galley "
              f"{med['pytorch'] / med['galley']:.3f} (per round {paired['pytorch']:.3f}; target >= 1.0)")
    json.dump(results, sys.stderr)
    sys.stderr.write("\n")


if __name__ == "__main__":
    main()
