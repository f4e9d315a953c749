#!/usr/bin/env python3
"""Self-check of bench/first_pass_figures.py on made-up JSON in the format of
`galley bench tuner --first-call --passes --json`; run by ctest (bench.first_pass_figures) and by hand:

  python3 bench/test_first_pass_figures.py

Every expected figure is worked out by hand from the made-up times beside it.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "first_pass_figures.py")


def run_doc(rows, hits=2):
    """rows: (problem, solver, first_ms, steady_ms, host_first_us, host_steady_us)."""
    return {"passes": [{"problem": p, "solver": s, "first_ms": f, "steady_ms": st, "per_pass_ms": [f, st],
                        "host_first_ms": hf / 1e3, "host_steady_ms": hs / 1e3} for p, s, f, st, hf, hs in rows],
            "steady_passes": 1, "hits": hits, "touched": False, "first_pass_wall_ms": 0, "steady_pass_wall_ms": 0,
            "preload": {"enabled": True}}


class FirstPassFigures(unittest.TestCase):
    def run_script(self, docs, *extra):
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for i, doc in enumerate(docs):
                path = os.path.join(d, f"{i}.json")
                with open(path, "w") as f:
                    f.write("preload skipped nothing\n" + json.dumps(doc))  # text before the JSON is tolerated
                paths.append(path)
            done = subprocess.run([sys.executable, SCRIPT, *paths, *extra], capture_output=True, text=True)
            return done.returncode, done.stdout + done.stderr

    def test_median_over_runs_per_problem(self):
        # conv1 first/steady by run: 1.10, 1.02, 1.04 -> median 1.04 (within), worst 1.10.
        # dw: 1.00, 1.30, 1.20 -> median 1.20 (not within), worst 1.30.
        docs = [run_doc([("conv1", "a", 1.10, 1.0, 30, 10), ("dw", "b", 0.100, 0.100, 8, 6)]),
                run_doc([("conv1", "a", 1.02, 1.0, 20, 10), ("dw", "b", 0.130, 0.100, 9, 6)]),
                run_doc([("conv1", "a", 1.04, 1.0, 25, 12), ("dw", "b", 0.120, 0.100, 7, 6)])]
        rc, out = self.run_script(docs)
        self.assertEqual(rc, 0, out)
        conv1 = next(l for l in out.splitlines() if l.startswith("conv1"))
        # median first/steady, worst, median host first (25), median host steady (10)
        self.assertEqual(conv1.split()[2:], ["1.040", "1.100", "25.0", "10.0"])
        dw = next(l for l in out.splitlines() if l.startswith("dw"))
        self.assertEqual(dw.split()[2:4], ["1.200", "1.300"])
        self.assertIn("3 runs: 1/2 problems with a median first/steady <= 1.05", out)
        # Per run: run 0 has conv1 1.10 and dw 1.00 -> 1/2 within; pass (1.10+0.1)/(1.0+0.1) = 1.091.
        self.assertIn("0.json: 1/2 within, median 1.050, worst 1.100, pass 1.091x, 2/2 find-db hits", out)

    def test_bound_is_an_option(self):
        docs = [run_doc([("conv1", "a", 1.10, 1.0, 30, 10), ("dw", "b", 0.100, 0.100, 8, 6)])]
        rc, out = self.run_script(docs, "--within", "1.2")
        self.assertEqual(rc, 0, out)
        self.assertIn("1 runs: 2/2 problems with a median first/steady <= 1.2", out)

    def test_runs_of_other_lists_are_refused(self):
        docs = [run_doc([("conv1", "a", 1.1, 1.0, 30, 10)]), run_doc([("other", "a", 1.1, 1.0, 30, 10)])]
        rc, out = self.run_script(docs)
        self.assertNotEqual(rc, 0)
        self.assertIn("other problems or order", out)

    def test_other_json_is_refused(self):
        rc, out = self.run_script([{"first_call": []}])
        self.assertNotEqual(rc, 0)
        self.assertIn("not the JSON of `galley bench tuner --first-call --passes --json`", out)


if __name__ == "__main__":
    unittest.main()
