#!/usr/bin/env python3
"""Self-check of bench/igemm_plan_fit.py on made-up keys and times. It needs no GPU; ctest runs it
(bench.igemm_plan_fit), or by hand after changing igemm_plan_fit.py:

  python3 bench/test_igemm_plan_fit.py
"""
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import igemm_plan_fit as fit  # noqa: E402

FORWARD = "conv-F-f16-nhwc-n32-c128-h28-w28-k128-y3-x3-p1-q1-u1-v1-l1-j1-g1"
MMA_TILES = {1, 2, 5}
WGMMA_TILES = {9, 10, 11, 12}


class PlanFit(unittest.TestCase):
    def test_gemm_shapes(self):
        # forward: pixels n * p * q, columns k, reduction c * r * s
        self.assertEqual(fit.gemm_shape(FORWARD), (32 * 28 * 28, 128, 128 * 9, 32 * 128 * 28 * 28, 1))
        # unit-stride backward data: the forward view from dy's k channels onto dx's c, over dx's pixels
        self.assertEqual(fit.gemm_shape("conv-B-f16-nhwc-n2-c64-h14-w14-k256-y1-x1-p0-q0-u1-v1-l1-j1-g1"),
                         (2 * 14 * 14, 64, 256, 2 * 64 * 14 * 14, 1))
        # strided backward data runs stride phases, which the model does not plan: left out
        self.assertIsNone(fit.gemm_shape("conv-B-f16-nhwc-n2-c64-h14-w14-k256-y3-x3-p1-q1-u2-v2-l1-j1-g1"))
        self.assertIsNone(fit.gemm_shape("not a key"))

    def test_efficiencies_steer_the_pick(self):
        shape = fit.gemm_shape(FORWARD)
        self.assertIn(fit.model_pick(shape, (1e-9,) * 4, 132)[0], MMA_TILES)
        self.assertIn(fit.model_pick(shape, (100.0,) * 4, 132)[0], WGMMA_TILES)
        # 128 output columns: the 128x256 tile would compute half zeros, so an equal pace loses to 128x128
        self.assertEqual(fit.model_pick(shape, (2.0, 2.0, 0.1, 0.1), 132), (9, 1))

    def test_score_is_the_picks_time_over_the_fastest(self):
        shape = fit.gemm_shape(FORWARD)
        eff = (2.0, 2.0, 0.1, 0.1)  # picks (9, 1), as above
        problems = {("s", FORWARD): (shape, {(9, 1): 2.0, (5, 1): 1.0})}
        self.assertAlmostEqual(fit.score(problems, eff, 132)[0], 2.0)
        self.assertEqual(fit.score(problems, eff, 132)[1], 0)
        untimed = {("s", FORWARD): (shape, {(5, 1): 1.0})}
        self.assertEqual(fit.score(untimed, eff, 132)[1], 1)

    def test_command_line(self):
        lines = [f"galley[debug]: tune {FORWARD}: gpu.conv.igemm_tc[tile={t},splits=1] median {ms} ms over 7 runs"
                 for t, ms in ((1, 0.037), (2, 0.055), (5, 0.038), (9, 0.027), (10, 0.039), (11, 0.030), (12, 0.030))]
        lines.append(f"galley[debug]: tune {FORWARD}: cuda.conv.cudnn_graph[eng62] median 0.018 ms over 7 runs")
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        try:
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "igemm_plan_fit.py")
            out = subprocess.run([sys.executable, script, f.name], capture_output=True, text=True,
                                 check=True).stdout
            self.assertIn("1 problems", out)
            self.assertIn("best fit", out)
            self.assertIn("-> 1.000 (0 picks not timed)", out.splitlines()[-1])
            empty = subprocess.run([sys.executable, script, os.devnull], capture_output=True, text=True)
            self.assertEqual(empty.returncode, 1)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
