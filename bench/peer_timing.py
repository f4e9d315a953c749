"""The GPU timing every bench/peer_*.py script shares: the median time per call of one PyTorch call,
run eagerly or replayed from a CUDA graph.

One CUDA-event timing of a single small kernel is mostly event resolution and launch gap, so each
timed sample covers a batch of `inner` back-to-back calls, sized from the warm-up so that one sample
lasts about `target_ms`, and is divided by `inner`. With graphs=True the batch is captured once as
one CUDA graph and each sample replays it: PyTorch's kernels without its host path, the control for
Galley's vendor solvers, which replay their calls as a graph too.

The sequence, for both modes:
  1. one untimed call (lazy initialisation, cuDNN's benchmark search, allocator growth);
  2. warm-up: calls, each waited for, until at least `warmup_calls` calls and `warmup_ms` have passed
     (a script asks for either or both); their mean sizes the batch unless `inner` fixes it;
  3. graphs only: the warm-up torch.cuda.graphs asks for on a side stream, then the capture;
  4. one untimed batch (or replay), then `repeats` timed ones; the median of their per-call times.

The scripts import it from their own folder (python3 bench/peer_x.py puts bench/ on sys.path).
bench/test_peer_timing.py checks it against a fake torch.
"""
import math
import statistics
from collections import namedtuple

# ms: the median per-call time; samples: every timed batch's per-call time; inner: calls per batch.
Timing = namedtuple("Timing", "ms samples inner")

# Warm-up calls on the capture's side stream before capturing, as PyTorch's CUDA graph notes show.
SIDE_STREAM_WARMUP = 3


def batch_size(per_call_ms, target_ms, max_inner):
    """Calls per timed batch: enough for target_ms at per_call_ms each, 1 to max_inner."""
    if per_call_ms <= 0:
        return max_inner
    return max(1, min(max_inner, math.ceil(target_ms / per_call_ms)))


def time_call(torch, call, warmup_calls=3, repeats=20, graphs=False, target_ms=1.0, max_inner=1000,
              warmup_ms=0.0, inner=None):
    """Times call() on the current CUDA device (see the module's text); returns a Timing.

    torch: the torch module (passed in so the scripts import it after parsing their flags, and so a
    test can pass a fake). warmup_calls / warmup_ms: the warm-up lasts at least both. repeats: timed
    batches. graphs: replay one captured CUDA graph of the batch instead of calling eagerly.
    target_ms / max_inner: the batch size rule (batch_size); inner: a fixed batch size instead.
    """
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    call()
    torch.cuda.synchronize()
    calls, elapsed = 0, 0.0
    start.record()
    # Sizing the batch needs at least one timed call.
    while calls < max(warmup_calls, 1 if inner is None else 0) or elapsed < warmup_ms:
        call()
        calls += 1
        stop.record()
        stop.synchronize()
        elapsed = start.elapsed_time(stop)
    if inner is None:
        inner = batch_size(elapsed / calls, target_ms, max_inner)

    if graphs:
        run = _captured_batch(torch, call, inner)
    else:
        def run():
            for _ in range(inner):
                call()
    run()
    torch.cuda.synchronize()

    samples = []
    for _ in range(repeats):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) / inner)
    return Timing(statistics.median(samples), samples, inner)


def median_ms(torch, call, **options):
    """The median milliseconds per call of time_call(torch, call, **options)."""
    return time_call(torch, call, **options).ms


def _captured_batch(torch, call, inner):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(SIDE_STREAM_WARMUP):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            call()
    return graph.replay
