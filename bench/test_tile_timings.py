#!/usr/bin/env python3
"""Self-check of bench/tile_timings.py on a made-up tuner debug log. It needs no GPU; ctest runs it
(bench.tile_timings), or by hand after changing tile_timings.py:

  python3 bench/test_tile_timings.py

Every expected figure is worked out by hand from the made-up times beside it.
"""
import math
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tile_timings  # noqa: E402

SOLVER = "gpu.conv.bwd_weights_igemm"
LOG = [
    # problem A: tile 0 best at 1.0 ms (its splits=2 run), tile 5 at 0.5 ms; cuDNN at 0.6 ms
    f"[debug] tune conv-A on cuda:0: {SOLVER}[tile=0,splits=1] median 1.200000 ms over 5 runs",
    f"[debug] tune conv-A on cuda:0: {SOLVER}[tile=0,splits=2] median 1.000000 ms over 5 runs",
    f"[debug] tune conv-A on cuda:0: {SOLVER}[tile=5,splits=1] median 0.500000 ms over 5 runs",
    "[debug] tune conv-A on cuda:0: cuda.conv.cudnn_bwd_weights[algo1] median 0.600000 ms over 5 runs",
    # problem B: tile 0 at 2.0 ms is the best, tile 5 at 4.0 ms
    f"[debug] tune conv-B: {SOLVER}[tile=0,splits=3] median 2.000000 ms over 5 runs",
    f"[debug] tune conv-B: {SOLVER}[tile=5,splits=1] median 4.000000 ms over 5 runs",
    # not a timing line
    f"[debug] tune conv-B: {SOLVER}[tile=7,splits=1] rejected: workspace 1 GiB exceeds the limit",
]


class TileTimings(unittest.TestCase):
    def test_best_time_per_tile(self):
        tiles, others = tile_timings.parse(LOG, SOLVER)
        self.assertEqual(tiles["conv-A"], {0: (1.0, 2), 5: (0.5, 1)})
        self.assertEqual(tiles["conv-B"], {0: (2.0, 3), 5: (4.0, 1)})
        self.assertEqual(others["conv-A"], ("cuda.conv.cudnn_bwd_weights[algo1]", 0.6))
        self.assertNotIn("conv-B", others)

    def test_ratios_are_geomeans_over_problems(self):
        tiles, _ = tile_timings.parse(LOG, SOLVER)
        ratios = tile_timings.tile_ratios(tiles)
        # tile 0: A 1.0 / 0.5 = 2, B 2 / 2 = 1 -> sqrt(2); tile 5: A 1, B 4 / 2 = 2 -> sqrt(2)
        self.assertEqual(ratios[0][0], 2)
        self.assertAlmostEqual(ratios[0][1], math.sqrt(2))
        self.assertAlmostEqual(ratios[5][1], math.sqrt(2))

    def test_command_line(self):
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as f:
            f.write("\n".join(LOG) + "\n")
        try:
            script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tile_timings.py")
            out = subprocess.run([sys.executable, script, f.name, "--solver", SOLVER], capture_output=True,
                                 text=True, check=True).stdout
            self.assertIn("| 0 | 2 | 1.414 |", out)
            self.assertIn("| conv-A | 5 | 1 | 0.5000 | cuda.conv.cudnn_bwd_weights[algo1] | 0.6000 |", out)
            missing = subprocess.run([sys.executable, script, f.name, "--solver", "gpu.none"], capture_output=True,
                                     text=True)
            self.assertEqual(missing.returncode, 1)
            self.assertIn("no timings of gpu.none", missing.stderr)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
