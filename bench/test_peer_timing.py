#!/usr/bin/env python3
"""Self-check of bench/peer_timing.py on a fake torch whose CUDA events read a simulated device clock;
run by ctest (bench.peer_timing) and by hand:

  python3 bench/test_peer_timing.py

Costs are powers of two milliseconds, so every expected batch size and median is exact.
"""
import contextlib
import glob
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_timing  # noqa: E402


class FakeCuda:
    """torch.cuda as peer_timing uses it. Kernels run in issue order on one simulated device clock: an eager
    call advances it by the kernel's time plus its launch gap, a replayed graph by its kernels' times alone."""

    def __init__(self):
        self.clock_ms = 0.0
        self.capturing = None  # the FakeGraph being captured
        self.stream_now = "default"
        self.eager_calls = 0
        self.side_stream_calls = 0
        self.replays = 0
        self.graphs = []
        self.waits = []
        outer = self

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing
                self.at = None

            def record(self):
                assert outer.capturing is None, "an event recorded inside a capture"
                self.at = outer.clock_ms

            def synchronize(self):
                assert self.at is not None

            def elapsed_time(self, end):
                return end.at - self.at

        class Stream:
            def __init__(self, name="side"):
                self.name = name

            def wait_stream(self, other):
                outer.waits.append((self.name, other.name))

        class CUDAGraph:
            def __init__(self):
                self.kernels_ms = []
                outer.graphs.append(self)

            def replay(self):
                outer.replays += 1
                outer.clock_ms += sum(self.kernels_ms)

        self.Event, self.Stream, self.CUDAGraph = Event, Stream, CUDAGraph
        self.default_stream = Stream("default")

    def synchronize(self):
        pass

    def current_stream(self):
        return self.default_stream if self.stream_now == "default" else self.Stream(self.stream_now)

    @contextlib.contextmanager
    def stream(self, s):
        before, self.stream_now = self.stream_now, s.name
        try:
            yield
        finally:
            self.stream_now = before

    @contextlib.contextmanager
    def graph(self, g):
        assert self.capturing is None
        self.capturing = g
        try:
            yield
        finally:
            self.capturing = None

    def kernel(self, kernel_ms, launch_ms=0.0):
        """What one PyTorch call does on the device."""
        if self.capturing is not None:
            self.capturing.kernels_ms.append(kernel_ms)
            return
        if self.stream_now != "default":
            self.side_stream_calls += 1
        else:
            self.eager_calls += 1
        self.clock_ms += kernel_ms + launch_ms


class FakeTorch:
    def __init__(self):
        self.cuda = FakeCuda()


def constant_call(torch, kernel_ms, launch_ms=0.0, first_ms=None):
    """A call lasting kernel_ms (+ launch_ms eagerly); the very first one first_ms, as a cuDNN search."""
    state = {"calls": 0}

    def call():
        state["calls"] += 1
        if state["calls"] == 1 and first_ms is not None:
            torch.cuda.kernel(first_ms)
        else:
            torch.cuda.kernel(kernel_ms, launch_ms)
    return call, state


def scheduled_call(torch, costs_ms):
    """A call whose i-th eager invocation lasts costs_ms[i]."""
    costs = iter(costs_ms)
    return lambda: torch.cuda.kernel(next(costs))


class BatchSize(unittest.TestCase):
    def test_enough_calls_for_the_target(self):
        self.assertEqual(peer_timing.batch_size(2 ** -6, 1.0, 1000), 64)
        self.assertEqual(peer_timing.batch_size(2 ** -6, 0.5, 1000), 32)

    def test_a_partial_call_rounds_up(self):
        self.assertEqual(peer_timing.batch_size(0.3, 1.0, 1000), 4)

    def test_clamped_to_one_and_max_inner(self):
        self.assertEqual(peer_timing.batch_size(5.0, 1.0, 1000), 1)
        self.assertEqual(peer_timing.batch_size(1e-6, 1.0, 200), 200)
        self.assertEqual(peer_timing.batch_size(0.0, 1.0, 1000), 1000)


class Eager(unittest.TestCase):
    def test_batch_sized_from_the_warm_up_not_the_first_call(self):
        torch = FakeTorch()
        call, state = constant_call(torch, 2 ** -6, first_ms=500.0)
        t = peer_timing.time_call(torch, call, warmup_calls=3, repeats=7)
        self.assertEqual(t.inner, 64)
        self.assertEqual(t.ms, 2 ** -6)
        self.assertEqual(t.samples, [2 ** -6] * 7)
        # untimed first call + 3 warm-up + one untimed batch + 7 timed batches
        self.assertEqual(state["calls"], 1 + 3 + 64 + 7 * 64)
        self.assertEqual(torch.cuda.replays, 0)

    def test_median_of_the_per_call_sample_times(self):
        torch = FakeTorch()
        first_and_untimed_batch = [1.0, 1.0, 1.0]
        batches = [1.0, 1.0, 5.0, 5.0, 2.0, 2.0, 100.0, 100.0, 3.0, 3.0]
        t = peer_timing.time_call(torch, scheduled_call(torch, first_and_untimed_batch + batches), warmup_calls=0,
                                  repeats=5, inner=2)
        self.assertEqual(t.samples, [1.0, 5.0, 2.0, 100.0, 3.0])
        self.assertEqual(t.ms, 3.0)

    def test_even_repeats_average_the_middle_two(self):
        torch = FakeTorch()
        costs = [1.0, 1.0, 1.0] + [1.0, 1.0, 5.0, 5.0, 2.0, 2.0, 100.0, 100.0]
        self.assertEqual(peer_timing.median_ms(torch, scheduled_call(torch, costs), warmup_calls=0, repeats=4,
                                               inner=2), 3.5)

    def test_warm_up_lasts_the_longer_of_its_calls_and_its_ms(self):
        for warmup_calls, warmup_ms, want_warmup in ((5, 1.0, 16), (5, 0.1, 5), (0, 0.0, 1)):
            torch = FakeTorch()
            call, state = constant_call(torch, 2 ** -4)
            t = peer_timing.time_call(torch, call, warmup_calls=warmup_calls, warmup_ms=warmup_ms, repeats=3,
                                      max_inner=200)
            self.assertEqual(t.inner, 16)
            self.assertEqual(state["calls"], 1 + want_warmup + 16 + 3 * 16, (warmup_calls, warmup_ms))

    def test_max_inner_and_target(self):
        torch = FakeTorch()
        call, _ = constant_call(torch, 2 ** -10)
        self.assertEqual(peer_timing.time_call(torch, call, repeats=1, max_inner=200).inner, 200)
        call, _ = constant_call(torch, 2 ** -6)
        self.assertEqual(peer_timing.time_call(torch, call, repeats=1, target_ms=2.0).inner, 128)

    def test_fixed_inner_needs_no_warm_up(self):
        torch = FakeTorch()
        call, state = constant_call(torch, 2.0)
        t = peer_timing.time_call(torch, call, warmup_calls=0, repeats=4, inner=1)
        self.assertEqual((t.inner, t.ms), (1, 2.0))
        self.assertEqual(state["calls"], 1 + 1 + 4)


class Graphs(unittest.TestCase):
    def test_replays_one_graph_of_the_batch(self):
        torch = FakeTorch()
        # Eagerly each call waits 2^-7 ms on its launch; replayed, only the kernel's 2^-7 ms remains.
        call, state = constant_call(torch, 2 ** -7, launch_ms=2 ** -7)
        eager = peer_timing.time_call(torch, call, warmup_calls=3, repeats=9)
        graph = peer_timing.time_call(torch, call, warmup_calls=3, repeats=9, graphs=True)
        self.assertEqual((eager.inner, eager.ms), (64, 2 ** -6))
        self.assertEqual((graph.inner, graph.ms), (64, 2 ** -7))
        cuda = torch.cuda
        self.assertEqual(len(cuda.graphs), 1)
        self.assertEqual(len(cuda.graphs[0].kernels_ms), 64)
        self.assertEqual(cuda.replays, 1 + 9)
        self.assertEqual(cuda.side_stream_calls, peer_timing.SIDE_STREAM_WARMUP)
        # The side stream starts after the default stream's work and the default stream waits for it.
        self.assertEqual(cuda.waits, [("side", "default"), ("default", "side")])
        graph_mode_calls = 1 + 3 + peer_timing.SIDE_STREAM_WARMUP + 64
        self.assertEqual(state["calls"], (1 + 3 + 64 + 9 * 64) + graph_mode_calls)

    def test_fixed_inner_graph(self):
        torch = FakeTorch()
        call, _ = constant_call(torch, 0.5)
        t = peer_timing.time_call(torch, call, warmup_calls=10, repeats=3, graphs=True, inner=10)
        self.assertEqual((t.inner, t.ms), (10, 0.5))
        self.assertEqual(len(torch.cuda.graphs[0].kernels_ms), 10)


class Scripts(unittest.TestCase):
    SHARED = ["peer_activ.py", "peer_conv.py", "peer_datamove.py", "peer_eltwise.py", "peer_gemm.py",
              "peer_models.py", "peer_norm.py", "peer_ops.py", "peer_pool.py", "peer_softmax_reduce.py"]

    def test_every_peer_script_compiles(self):
        for path in sorted(glob.glob(os.path.join(HERE, "peer_*.py"))):
            with open(path) as f:
                compile(f.read(), path, "exec")

    def test_the_op_peers_time_through_peer_timing(self):
        for name in self.SHARED:
            with open(os.path.join(HERE, name)) as f:
                text = f.read()
            self.assertIn("from peer_timing import", text, name)
            self.assertNotIn("elapsed_time", text, name + " times on its own again")


if __name__ == "__main__":
    unittest.main()
