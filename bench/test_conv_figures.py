#!/usr/bin/env python3
"""Self-check of bench/conv_figures.py's medians over runs, on small made-up JSON in the formats of
`galley bench conv --json` and bench/peer_conv.py --json. It needs no GPU and no torch; ctest runs it
(bench.conv_figures), or by hand after changing conv_figures.py:

  python3 bench/test_conv_figures.py

Every expected figure is worked out by hand from the made-up times in the comments beside it.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "conv_figures.py")
KEY_A = "conv-F-f16-nhwc-n1-c8-h8-w8-k8-y3-x3-p1-q1-u1-v1-l1-j1-g1"
KEY_B = "conv-F-f16-nhwc-n1-c8-h8-w8-k8-y1-x1-p0-q0-u1-v1-l1-j1-g1"
FLOPS = {KEY_A: 2e9, KEY_B: 4e9}


def tflops(key, ms):
    return FLOPS[key] / (ms * 1e-3) / 1e12


def peer_doc(ms_by_key):
    rows = [{"key": k, "tag": k[-30:], "ms": ms, "tflops": tflops(k, ms)} for k, ms in ms_by_key.items()]
    return {"peer": "made-up peer", "device": "none", "configs": [{"dtype": "f16", "layout": "nhwc", "problems": rows}]}


def galley_doc(results_by_key):
    # results_by_key: {key: [(solver, ms, verified), ...]}; ms None = the solver threw.
    problems = []
    for key, results in results_by_key.items():
        rows = []
        for solver, ms, verified in results:
            if ms is None:
                rows.append({"solver": solver, "ms": 0, "tflops": 0, "verified": None, "error": "threw"})
            else:
                rows.append({"solver": solver, "ms": ms, "tflops": tflops(key, ms), "verified": verified})
        problems.append({"key": key, "tag": "A" if key == KEY_A else "B", "flops": FLOPS[key], "results": rows})
    return {"device": "cuda:0", "problems": problems}


def table_rows(text, header_start):
    """The rows of the markdown table whose header begins with header_start, as lists of cells."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


class ConvFiguresMedians(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, doc):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def run_figures(self, peers, galleys, tuned=()):
        args = [sys.executable, SCRIPT]
        for p in peers:
            args += ["--peer", p]
        for t in tuned:
            args += ["--tuned", t]
        out = subprocess.run(args + galleys, capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        return out.stdout

    def test_three_peer_runs_two_galley_runs(self):
        # Peer, A (2 GFLOP): 0.010, 0.030, 0.020 ms -> median 0.020 ms = 100 TFLOP/s, runs 66.7-200.
        #       B (4 GFLOP): 0.040, 0.010, 0.020 ms -> median 0.020 ms = 200 TFLOP/s, runs 100-400.
        # Per-run peer geomeans: sqrt(200*100) = 141.4, sqrt(66.7*400) = 163.3, sqrt(100*200) = 141.4;
        # min / median / max 141.4 / 141.4 / 163.3, max/min 1.15; geomean of the medians sqrt(100*200) = 141.4.
        peers = [self.write("p1.json", peer_doc({KEY_A: 0.010, KEY_B: 0.040})),
                 self.write("p2.json", peer_doc({KEY_A: 0.030, KEY_B: 0.010})),
                 self.write("p3.json", peer_doc({KEY_A: 0.020, KEY_B: 0.020}))]
        # Galley, two runs (an even count: the mean of the two ms).
        # A: gpu.conv.x 0.010, 0.030 -> 0.020 ms = 100; cuda.conv.y 0.005 both -> 400 (best of all).
        # B: gpu.conv.x 0.010 both -> 400; gpu.conv.bad fails verification in run 1 and would be
        #    2000 TFLOP/s in run 2: left out of both; gpu.conv.err threw: ignored.
        # Own geomean sqrt(100*400) = 200, all sqrt(400*400) = 400; own/peer 200/141.4 = 1.41, all/peer 2.83.
        # Own per run: run 1 sqrt(200*400) = 282.8, run 2 sqrt(66.7*400) = 163.3.
        # Own/peer by peer run: 200/163.3 = 1.22 to 200/141.4 = 1.41.
        g1 = self.write("g1.json", galley_doc({
            KEY_A: [("gpu.conv.x", 0.010, None), ("cuda.conv.y", 0.005, None)],
            KEY_B: [("gpu.conv.x", 0.010, None), ("gpu.conv.bad", 0.001, False), ("gpu.conv.err", None, None)]}))
        g2 = self.write("g2.json", galley_doc({
            KEY_A: [("gpu.conv.x", 0.030, None), ("cuda.conv.y", 0.005, None)],
            KEY_B: [("gpu.conv.x", 0.010, None), ("gpu.conv.bad", 0.002, True)]}))
        text = self.run_figures(peers, [g1, g2])

        rows = table_rows(text, "| problem |")
        self.assertEqual(rows[0], ["A", "x", "100.0", "20.0", "cuda.conv.y", "400.0", "100.0", "66.7-200.0", "1.00", "4.00"])
        self.assertEqual(rows[1], ["B", "x", "400.0", "10.0", "gpu.conv.x", "400.0", "200.0", "100.0-400.0", "2.00", "2.00"])
        spread = table_rows(text, "| config | peer runs |")
        self.assertEqual(spread, [["f16 nhwc", "3", "141.4, 163.3, 141.4", "141.4 / 141.4 / 163.3", "1.15",
                                   "282.8, 163.3", "1.22-1.41", "1.41"]])
        summary = table_rows(text, "| config | problems |")
        self.assertEqual(summary, [["f16 nhwc", "2", "200.0", "400.0", "141.4", "1.41", "2.83"]])

    def test_one_file_each_prints_the_single_run_tables(self):
        # One run each: no 'peer runs' column, no per-run table; figures as measured.
        # Peer A 0.020 ms = 100, B 0.010 ms = 400; own A 0.010 = 200, B 0.040 = 100.
        peer = self.write("p.json", peer_doc({KEY_A: 0.020, KEY_B: 0.010}))
        g = self.write("g.json", galley_doc({KEY_A: [("gpu.conv.x", 0.010, None)],
                                             KEY_B: [("gpu.conv.x", 0.040, None)]}))
        text = self.run_figures([peer], [g])
        self.assertNotIn("peer runs", text)
        self.assertNotIn("Per-run", text)
        rows = table_rows(text, "| problem |")
        self.assertEqual(rows[0], ["A", "x", "200.0", "10.0", "gpu.conv.x", "200.0", "100.0", "2.00", "2.00"])
        # Geomeans: own sqrt(200*100) = 141.4, peer sqrt(100*400) = 200, ratio 0.71.
        self.assertEqual(table_rows(text, "| config | problems |"),
                         [["f16 nhwc", "2", "141.4", "141.4", "200.0", "0.71", "0.71"]])

    def test_tuned_picks_get_their_own_column(self):
        # Peer A 0.020 ms = 100, B 0.010 ms = 400. The tuner's picks: A cuda.conv.y 0.010 ms = 200, B's
        # pick failed verification (left out). Tuned geomean over A alone: 200; tuned/peer 200 / 100 = 2.00.
        # Without --tuned the summary has no such columns.
        peer = self.write("p.json", peer_doc({KEY_A: 0.020, KEY_B: 0.010}))
        g = self.write("g.json", galley_doc({KEY_A: [("gpu.conv.x", 0.010, None)],
                                             KEY_B: [("gpu.conv.x", 0.040, None)]}))
        t = self.write("t.json", galley_doc({KEY_A: [("cuda.conv.y", 0.010, None)],
                                             KEY_B: [("gpu.conv.x", 0.001, False)]}))
        summary = table_rows(self.run_figures([peer], [g], [t]), "| config | problems |")
        self.assertEqual(summary, [["f16 nhwc", "2", "141.4", "141.4", "200.0", "0.71", "0.71", "200.0", "2.00"]])
        self.assertNotIn("tuned", self.run_figures([peer], [g]))

    def test_peer_run_missing_a_problem_is_marked(self):
        # Run 1: A 0.020 ms = 100, B 0.010 ms = 400, geomean sqrt(100*400) = 200.
        # Run 2 lacks B: its geomean is A's alone (0.010 ms = 200) and is marked as over 1 of 2 problems;
        # B's median is run 1's alone (0.010 ms = 400), A's the mean of 0.020 and 0.010 = 0.015 ms = 133.3.
        peers = [self.write("p1.json", peer_doc({KEY_A: 0.020, KEY_B: 0.010})),
                 self.write("p2.json", peer_doc({KEY_A: 0.010}))]
        g = self.write("g.json", galley_doc({KEY_A: [("gpu.conv.x", 0.010, None)],
                                             KEY_B: [("gpu.conv.x", 0.010, None)]}))
        text = self.run_figures(peers, [g])
        spread = table_rows(text, "| config | peer runs |")[0]
        self.assertEqual(spread[2], "200.0, 200.0 (1 of 2 problems)")
        rows = table_rows(text, "| problem |")
        self.assertEqual(rows[0][6], "133.3")
        self.assertEqual(rows[1][6], "400.0")


if __name__ == "__main__":
    unittest.main()
